//! The epoch ticker (`host/src/store/epoch.rs`) under races, from the
//! attacker's pass on its change (tests that held; the one that found a
//! way past a time limit is `attack::epoch`). The ticker thread advances the epoch while guest code runs and sleeps
//! once a whole tick passes with no guest begun; a spinning guest is
//! stopped at its time limit only because the epoch advances. These drive a
//! real `toolhost serve` on stdio and race a spinning guest against the
//! moment the ticker decides to sleep (right after a short call), pipeline
//! spins behind short calls, spin on the main engine while a bundled
//! plugin's first calls run on the first-tier engine, make a guest spend
//! nearly all its time in host calls (`attack::epoch`), and check that after all of it
//! (timeouts, traps, memory traps, host waits) an idle server's ticker
//! sleeps.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::protocol::{Stdio, call, idle_wakeups, workspace};
use crate::serve::CONFIG;

/// The time limit of every call here: short, so that a loop of hundreds of
/// spins stays quick.
pub(crate) const LIMIT: Duration = Duration::from_millis(40);

/// How late past its limit a spinning guest may be stopped (a debug build
/// on a loaded two-core machine). A lost wake-up of the ticker leaves the
/// guest spinning forever instead.
const SLACK: Duration = Duration::from_secs(3);

pub(crate) fn config(extra: &str) -> String {
    format!(
        "{extra}\n{}",
        CONFIG.replace(
            "timeout = \"10s\"",
            &format!("timeout = \"{}ms\"", LIMIT.as_millis())
        )
    )
}

pub(crate) fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .map_or_else(|| answer.to_string(), str::to_string)
}

/// The next answer within `limit`, log notifications skipped.
pub(crate) fn reply(server: &mut Stdio, limit: Duration) -> Option<Value> {
    let deadline = Instant::now() + limit;
    loop {
        let message = server.answer_within(deadline.saturating_duration_since(Instant::now()))?;
        if message.get("id").is_some() {
            return Some(message);
        }
    }
}

/// Sends a spin and waits for its answer: a timeout, in time.
pub(crate) fn spin_is_stopped(server: &mut Stdio, id: u64, what: &str) -> Duration {
    let sent = Instant::now();
    server.send(&call(id, "spin", json!({})));
    let answer = reply(server, LIMIT + SLACK).unwrap_or_else(|| {
        panic!(
            "{what}: the spinning guest (id {id}) was not stopped within {:?} of its {LIMIT:?} \
             limit: the epoch stopped advancing; stderr:\n{}",
            SLACK,
            server.stderr_text()
        )
    });
    let took = sent.elapsed();
    assert_eq!(answer["id"], id, "{what}: {answer}");
    assert!(
        text(&answer).contains("time limit"),
        "{what}: the spin did not end at its time limit: {answer}"
    );
    took
}

/// Calls `tool` as call `id` (then the next id), checks it is answered,
/// then waits `pause`.
fn answered_then_paused(
    server: &mut Stdio,
    id: &mut u64,
    tool: &str,
    arguments: Value,
    pause: Duration,
) {
    server.send(&call(*id, tool, arguments));
    let answer = reply(server, SLACK).expect("an answer");
    assert_eq!(answer["id"], *id, "{answer}");
    *id += 1;
    if !pause.is_zero() {
        std::thread::sleep(pause);
    }
}

/// A spin sent right after a short call ends, at pauses that sweep the
/// window in which the ticker sees no guest begun and goes to sleep (one
/// to two ticks after the call): whichever side wins the race, the spin is
/// stopped at its time limit.
#[test]
fn a_spin_started_as_the_ticker_falls_asleep_is_stopped_at_its_limit() {
    let (_dir, root) = workspace(&config(""));
    let (mut server, _) = Stdio::initialized(&root, &[]);
    let mut id = 1;
    let mut slowest = Duration::ZERO;
    for round in 0..240u64 {
        // 0 to 3 ms in steps of 125 us, the ticker's sleep decision in it.
        let pause = Duration::from_micros((round % 25) * 125);
        answered_then_paused(&mut server, &mut id, "say", json!({"text": "x"}), pause);
        let took = spin_is_stopped(&mut server, id, &format!("round {round}, pause {pause:?}"));
        slowest = slowest.max(took);
        id += 1;
    }
    eprintln!("slowest spin answer: {slowest:?}");
}

/// Short calls and spins pipelined on one connection (sent without waiting
/// for answers): guests start and end many times a tick and the spins
/// overlap; every spin is stopped at its limit, every short call answered.
#[test]
fn spins_pipelined_among_short_calls_are_all_stopped_at_their_limit() {
    let (_dir, root) = workspace(&config(""));
    let (mut server, _) = Stdio::initialized(&root, &[]);
    for round in 0..30u64 {
        let mut expected: HashMap<u64, &str> = HashMap::new();
        let base = 1000 * (round + 1);
        for k in 0..8u64 {
            let (tool, arguments) = match k % 4 {
                0 => ("spin", json!({})),
                1 => ("say", json!({"text": "x"})),
                2 => ("sleep", json!({"ms": 1})),
                _ => ("crash", json!({})),
            };
            server.send(&call(base + k, tool, arguments));
            expected.insert(base + k, tool);
        }
        let started = Instant::now();
        while !expected.is_empty() {
            let answer = reply(&mut server, LIMIT * 8 + SLACK).unwrap_or_else(|| {
                panic!(
                    "round {round}: no answer for {expected:?} within {:?}: a guest was not \
                     stopped; stderr:\n{}",
                    LIMIT * 8 + SLACK,
                    server.stderr_text()
                )
            });
            let id = answer["id"].as_u64().unwrap_or_else(|| panic!("{answer}"));
            let tool = expected.remove(&id).unwrap_or_else(|| panic!("{answer}"));
            if tool == "spin" {
                assert!(text(&answer).contains("time limit"), "{answer}");
            }
        }
        assert!(
            started.elapsed() < LIMIT * 8 + SLACK,
            "round {round} took {:?}",
            started.elapsed()
        );
    }
}

/// With no compiled-code cache, a bundled plugin's (echo's) first calls run
/// on the first-tier engine, which has a ticker of its own; the spins run
/// on the main engine. Each engine's guest is stopped or answered while
/// the other engine's ticker sleeps or wakes, in either order.
#[test]
fn a_spin_on_one_engine_is_stopped_while_the_other_engine_runs_or_idles() {
    let (_dir, root) = workspace(&config("cache_dir = \"off\""));
    let (mut server, _) = Stdio::initialized(&root, &[]);
    let mut id = 1;
    for round in 0..120u64 {
        // Echo (first tier at first) then a spin (main engine), a pause
        // sweeping the tickers' sleep decision between them.
        let pause = Duration::from_micros((round % 20) * 150);
        answered_then_paused(&mut server, &mut id, "echo", json!({"text": "hi"}), pause);
        // Both at once: a spin, and an echo sent while it spins.
        server.send(&call(id, "spin", json!({})));
        server.send(&call(id + 1, "echo", json!({"text": "hi"})));
        let mut pending: HashMap<u64, &str> = HashMap::from([(id, "spin"), (id + 1, "echo")]);
        while !pending.is_empty() {
            let answer = reply(&mut server, LIMIT + SLACK).unwrap_or_else(|| {
                panic!(
                    "round {round}: no answer for {pending:?}; stderr:\n{}",
                    server.stderr_text()
                )
            });
            let got = answer["id"].as_u64().unwrap_or_else(|| panic!("{answer}"));
            match pending.remove(&got) {
                Some("spin") => assert!(text(&answer).contains("time limit"), "{answer}"),
                Some(_) => assert!(answer["result"]["isError"] != true, "{answer}"),
                None => panic!("{answer}"),
            }
        }
        id += 2;
    }
}

/// After timeouts, traps, memory traps, host waits and pipelined bursts,
/// nothing runs: the ticker goes to sleep and stays asleep (no `Running`
/// left held by a store that was dropped, cancelled or discarded).
#[test]
fn the_ticker_sleeps_once_timeouts_traps_and_bursts_are_over() {
    let (_dir, root) = workspace(&config(""));
    let (mut server, _) = Stdio::initialized(&root, &[]);
    let tools = [
        ("spin", json!({})),
        ("crash", json!({})),
        ("hog", json!({})),
        ("sleep", json!({"ms": 100})),
        ("say", json!({"text": "x"})),
        ("chatter", json!({"lines": 100, "bytes": 100})),
    ];
    let mut id = 1;
    for _ in 0..5 {
        let mut pending = 0;
        for (tool, arguments) in &tools {
            for _ in 0..3 {
                server.send(&call(id, tool, arguments.clone()));
                id += 1;
                pending += 1;
            }
        }
        for _ in 0..pending {
            reply(&mut server, Duration::from_secs(30))
                .unwrap_or_else(|| panic!("no answer; stderr:\n{}", server.stderr_text()));
        }
    }
    let idle = idle_wakeups(server.pid(), Duration::from_millis(300));
    assert!(
        idle <= 2,
        "the epoch threads woke {idle} times in an idle second after the calls ended"
    );
}
