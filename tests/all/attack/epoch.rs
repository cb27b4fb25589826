//! Attack tests: the epoch ticker (`host/src/store/epoch.rs`), which makes
//! guests yield so that a call's time limit can stop them (see mod.rs; the
//! races that held are in `crate::epoch`).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::epoch::{LIMIT, config, reply, spin_is_stopped, text};
use crate::protocol::{Stdio, call, workspace};

/// A guest that spends nearly all its time in host calls (`chatter`:
/// 100,000 log calls of 64 KiB lines, past the 1,000 records a call may log
/// each only copied in and dropped) runs guest code at few of the ticker's
/// samples. The epoch advances only when a tick finds guest code running
/// (`RUNNING > 0`), so this guest is seldom made to yield, and its call's
/// timeout, which fires only when the guest yields, is late by many times
/// the limit (or never: the guest ends first and its answer is a success).
/// A spinning guest is stopped within a few ms of the same limit; this one
/// must be too.
#[test]
fn a_guest_that_mostly_calls_the_host_is_stopped_at_its_limit() {
    let (_dir, root) = workspace(&config(""));
    let (mut server, _) = Stdio::initialized(&root, &[]);
    // The yardstick: how late a spinning guest is stopped.
    let spun = (1..=5)
        .map(|id| spin_is_stopped(&mut server, id, "spin"))
        .max()
        .unwrap();
    let mut report = Vec::new();
    let mut late = 0;
    for id in 11..=20u64 {
        let sent = Instant::now();
        server.send(&call(
            id,
            "chatter",
            json!({"lines": 100_000, "bytes": 65_536}),
        ));
        let answer = reply(&mut server, Duration::from_secs(60))
            .unwrap_or_else(|| panic!("no answer in 60 s; stderr:\n{}", server.stderr_text()));
        let took = sent.elapsed();
        assert_eq!(answer["id"], id, "{answer}");
        let stopped = text(&answer).contains("time limit");
        if !stopped || took > spun + LIMIT {
            late += 1;
        }
        report.push(format!(
            "{took:?} {}",
            if stopped { "stopped" } else { "RAN TO ITS END" }
        ));
    }
    assert_eq!(
        late, 0,
        "a guest living in host calls with a {LIMIT:?} limit (a spin is stopped within {spun:?}) \
         was stopped late or not at all in {late} of 10 calls: {report:?}"
    );
}
