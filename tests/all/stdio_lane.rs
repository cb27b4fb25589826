//! `tools/call` on stdio answered past rmcp's per-request machinery (the
//! lane, `host/src/serve/mcp/stdio/lane.rs`): what rmcp does for a call,
//! the lane does too. A cancelled call is not answered and frees its slot;
//! a call in flight when stdin ends is answered before the server exits;
//! and, on either path, a request that reuses the id of one in flight is
//! refused rather than run beside it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::epoch::reply;
use crate::protocol::{Stdio, call, error_of, ping, workspace};
use crate::serve::CONFIG;

pub(crate) fn cancelled(id: impl Into<Value>) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
           "params": {"requestId": id.into(), "reason": "the user gave up"}})
}

fn echoed(answer: &Value) -> Value {
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("not a tool result: {answer}"));
    serde_json::from_str(text).unwrap()
}

#[test]
fn cancelled_calls_are_not_answered_and_free_their_slots() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    // More calls than the transport reads before one is answered (128): if
    // a cancelled call kept its slot, the echo below would never be read.
    for id in 1..=300 {
        server.send(&call(id, "sleep", json!({"ms": 60_000})));
        server.send(&cancelled(id));
    }
    server.send(&call(1000, "echo", json!({"text": "after"})));
    let answer = reply(&mut server, Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the call after the cancelled ones was not answered"));
    assert_eq!(
        answer["id"], 1000,
        "a cancelled call was answered: {answer}"
    );
    assert_eq!(echoed(&answer)["text"], "after", "{answer}");
    assert_eq!(reply(&mut server, Duration::from_millis(500)), None);
}

#[test]
fn a_call_in_flight_when_stdin_ends_is_answered_before_the_server_exits() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    server.send(&call(1, "sleep", json!({"ms": 400})));
    server.close_stdin();
    let answer = reply(&mut server, Duration::from_secs(10)).unwrap_or_else(|| {
        panic!(
            "the call was not answered after stdin ended; stderr:\n{}",
            server.stderr_text()
        )
    });
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(echoed(&answer)["slept_ms"], 400, "{answer}");
    assert!(server.exit(Duration::from_secs(10)).success());
}

#[test]
fn a_request_that_reuses_the_id_of_one_in_flight_is_refused() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    // A call (the lane) and a ping (rmcp) under the id of a call in flight.
    server.send(&call(7, "sleep", json!({"ms": 500})));
    server.send(&call(7, "echo", json!({"text": "second"})));
    server.send(&ping(7));
    for _ in 0..2 {
        let refused = reply(&mut server, Duration::from_secs(10)).unwrap();
        assert_eq!(error_of(&refused), (json!(7), -32600), "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("already used by a request in flight"),
            "{refused}"
        );
    }
    let first = reply(&mut server, Duration::from_secs(10)).unwrap();
    assert_eq!(first["id"], 7, "{first}");
    assert_eq!(echoed(&first)["slept_ms"], 500, "{first}");
    // Once answered, the id is free again.
    server.send(&call(7, "echo", json!({"text": "again"})));
    let again = reply(&mut server, Duration::from_secs(10)).unwrap();
    assert_eq!(echoed(&again)["text"], "again", "{again}");
}

#[test]
fn a_call_still_running_5_s_after_stdin_ends_is_cancelled_and_the_server_exits() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    server.send(&call(1, "sleep", json!({"ms": 60_000})));
    // Read before stdin ends.
    std::thread::sleep(Duration::from_millis(200));
    let took = server.exit_after_stdin_ends(Duration::from_secs(20), |_| ());
    assert!(
        (Duration::from_millis(4_500)..Duration::from_secs(12)).contains(&took),
        "the server exited {took:?} after stdin ended (5 s are given to calls in flight)"
    );
    assert_eq!(reply(&mut server, Duration::from_millis(200)), None);
}

/// A call is first run where its request is read, until it waits: a guest
/// that never waits (it spins) still gives way at the first epoch tick,
/// and the server reads and answers the next request while it spins.
#[test]
fn a_spinning_call_does_not_keep_the_next_request_from_being_answered() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    server.send(&call(1, "spin", json!({})));
    server.send(&call(2, "echo", json!({"text": "while it spins"})));
    let answer = reply(&mut server, Duration::from_secs(5))
        .unwrap_or_else(|| panic!("no answer within 5 s while a call spins (its limit is 10 s)"));
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(echoed(&answer)["text"], "while it spins", "{answer}");
    server.send(&cancelled(1));
    assert_eq!(reply(&mut server, Duration::from_millis(500)), None);
}
