//! The stdio lane (`tools/call` answered past rmcp's per-request machinery,
//! `host/src/serve/mcp/stdio/lane.rs`) as the fifteenth attacker's pass
//! found it: an id reused while its answer waited for the writer was run
//! again, stdin ending gave the lane's calls and rmcp's 5 s each, one after
//! the other, SIGTERM after stdin ended waited for the drain timeout, a read
//! error left the lane's calls unanswered, and a client that did not read
//! its answers could make the server hold any number of refusals. And on
//! rmcp's path (found then, older than the lane): an id reused at once
//! after a cancel got the cancelled request's answer.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::epoch::reply;
use crate::protocol::{Stdio, call, error_of, ping, workspace};
use crate::serve::CONFIG;
use crate::stdio_lane::cancelled;

/// `_meta` naming the session's protocol version: the request goes through
/// rmcp's serve loop rather than the lane.
fn via_rmcp(mut request: Value) -> Value {
    request["params"]["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2025-06-18"});
    request
}

/// Fills the test's stdout channel (16 lines plus one held by its reader
/// thread) and then the pipe, so that the server's writer is held by a
/// large answer nobody reads. Ids 900..=917 and 999 are used.
fn hold_the_writer(server: &mut Stdio) {
    hold_the_writer_as(server, |request| request);
}

/// [`hold_the_writer`] with each request as `shaped` makes it.
fn hold_the_writer_as(server: &mut Stdio, shaped: fn(Value) -> Value) {
    for id in 900..=917 {
        server.send(&shaped(call(id, "echo", json!({"text": "filler"}))));
    }
    std::thread::sleep(Duration::from_millis(300));
    server.send(&shaped(call(999, "flood", json!({"bytes": 900_000}))));
    std::thread::sleep(Duration::from_millis(500));
}

/// With the writer held, a call 7 done at once (its answer waits behind
/// the flood), then `between`, then a second call 7; the answers under 7
/// once the client reads again. On rmcp's path or the lane's.
fn answers_to_a_second_seven(rmcp: bool, between: impl FnOnce(&mut Stdio)) -> Vec<Value> {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    let path: fn(Value) -> Value = if rmcp { via_rmcp } else { |r| r };
    hold_the_writer(&mut server);
    server.send(&path(call(7, "echo", json!({"text": "first"}))));
    std::thread::sleep(Duration::from_secs(1));
    between(&mut server);
    server.send(&path(call(7, "echo", json!({"text": "second"}))));
    std::thread::sleep(Duration::from_secs(1));
    let mut sevens = Vec::new();
    while let Some(answer) = reply(&mut server, Duration::from_secs(3)) {
        if answer["id"] == 7 {
            sevens.push(answer);
        }
    }
    sevens
}

/// The lane dropped a call's id before its answer was written, so while the
/// writer was held the client could run another call under the same id and
/// get two answers for it; rmcp's path keeps the id until it is written.
#[test]
fn a_call_reusing_an_id_whose_answer_is_unwritten_is_refused() {
    for rmcp in [false, true] {
        // The client has not seen an answer for 7: the id is still in flight.
        let sevens = answers_to_a_second_seven(rmcp, |_| {});
        let results = sevens.iter().filter(|a| a.get("result").is_some()).count();
        let refused = sevens
            .iter()
            .filter(|a| a.get("error").is_some() && error_of(a) == (json!(7), -32600))
            .count();
        assert_eq!(
            (results, refused),
            (1, 1),
            "rmcp path: {rmcp}; the answers under id 7: {sevens:?}"
        );
    }
}

/// The lane's 5 s ran in the transport's `receive`, and rmcp's own 5 s only
/// began once `receive` ended: one after the other. Both now run from when
/// stdin ended (the lane's in the transport's `close`).
#[test]
fn calls_on_both_paths_when_stdin_ends_are_given_5_s_in_all() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    server.send(&call(1, "spin", json!({})));
    server.send(&via_rmcp(call(2, "spin", json!({}))));
    std::thread::sleep(Duration::from_millis(200));
    let took = server.exit_after_stdin_ends(Duration::from_secs(30), |_| ());
    // Before the fix: 9.9 s (the rmcp-path spin ran on to its 10 s limit
    // after the lane's 5 s); before the lane, 5.0 s.
    assert!(
        took < Duration::from_secs(8),
        "the server exited {took:?} after stdin ended (5 s are given to calls in flight)"
    );
}

/// Each notification a call sent woke rmcp's loop, which dropped the
/// transport's `receive` while it waited for the lane; the next `receive`,
/// seeing the stop, waited for the lane with no deadline: until the drain
/// timeout instead of 5 s.
#[test]
fn sigterm_after_stdin_ends_does_not_extend_the_5_s_drain() {
    let (_dir, root) = workspace(&CONFIG.replace(r#"timeout = "10s""#, r#"timeout = "90s""#));
    let (mut server, _) = Stdio::initialized(&root, &["--drain-timeout", "30s"]);
    // 60 s of progress, one report every 500 ms (lines fit in the pipe).
    let mut request = call(
        1,
        "report_progress",
        json!({"steps": (1..=120).collect::<Vec<u32>>(), "total": 120, "pause_ms": 500}),
    );
    request["params"]["_meta"] = json!({"progressToken": "p"});
    server.send(&request);
    std::thread::sleep(Duration::from_millis(500));
    let took = server.exit_after_stdin_ends(Duration::from_secs(60), |server| {
        std::thread::sleep(Duration::from_millis(500));
        server.signal(libc::SIGTERM);
    });
    // Before the fix: 30.8 s (the drain timeout); before the lane, 5.1 s.
    assert!(
        took < Duration::from_secs(8),
        "the server exited {took:?} after stdin ended and SIGTERM came 0.5 s later"
    );
}

/// Every refusal was a task of its own holding its line until the writer was
/// free, and took no slot: while stdout went unread nothing bounded them. A
/// reused id was the cheapest way in (its refusal quoted the id twice); now
/// a refusal holds the slot of the line it answers until it is written.
#[test]
fn refusals_are_bounded_when_stdout_is_not_read() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    server.send(&call(1, "sleep", json!({"ms": 60_000})));
    hold_the_writer(&mut server);
    let before = server.rss_kib();
    const LINES: usize = 300_000;
    let written = Arc::new(AtomicUsize::new(0));
    let mut stdin = server.stdin.take().unwrap();
    let writer = {
        let written = written.clone();
        std::thread::spawn(move || {
            let line = format!("{}\n", ping(1));
            for _ in 0..LINES {
                if stdin.write_all(line.as_bytes()).is_err() {
                    break;
                }
                written.fetch_add(1, Ordering::Relaxed);
            }
            let _ = stdin.flush();
            stdin
        })
    };
    let mut last = usize::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = written.load(Ordering::Relaxed);
        if now == last || now == LINES {
            break;
        }
        last = now;
    }
    std::thread::sleep(Duration::from_secs(1));
    let grown = server.rss_kib().saturating_sub(before);
    // Before the fix: +220 MiB for 300,000 pings of 46 bytes (13.8 MB
    // sent); with 256 KiB string ids, +904 MiB for 472 MB sent.
    assert!(grown < 64 << 10, "the server grew by {grown} KiB");
    drop(writer);
}

/// Only the end of stdin drained the lane, not a failed read (rmcp drains
/// its own calls on both): the server exited with the lane's calls
/// unanswered.
#[test]
fn a_call_in_flight_when_stdin_fails_is_answered_as_at_eof() {
    use std::io::{BufRead as _, BufReader};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::OwnedFd;
    use std::process::{Command, Stdio as Pipe};

    let (_dir, root) = workspace(CONFIG);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .arg("--config")
        .arg(root.join("toolhost.toml"))
        .arg("serve")
        .stdin(Pipe::from(OwnedFd::from(accepted)))
        .stdout(Pipe::piped())
        .stderr(Pipe::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |message: Value| {
        client.write_all(format!("{message}\n").as_bytes()).unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}),
    );
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(call(1, "sleep", json!({"ms": 1000})));
    std::thread::sleep(Duration::from_millis(300));
    // Reset, not close: the server's read of stdin fails (ECONNRESET).
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: SO_LINGER on a socket this test owns, with a linger of its size.
    let set = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&client),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::from_ref(&linger).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(set, 0);
    drop(client);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let _ = child.wait();
    // Before the fix: nothing (the server exited at once); before the lane,
    // and on rmcp's path, the call's answer.
    assert!(
        rest.contains(r#"\"slept_ms\":1000"#),
        "the call in flight was not answered: {rest:?}"
    );
}

/// On rmcp's path a request cancelled and then its id reused at once got
/// the cancelled request's answer under the id, and the new request's was
/// dropped: rmcp keeps its calls by the client's id, so the cancelled
/// call's late answer found the new one's entry. The transport now gives
/// rmcp an id of its own for each request.
#[test]
fn an_id_reused_at_once_after_a_cancel_gets_the_new_requests_answer() {
    for rmcp in [false, true] {
        let (_dir, root) = workspace(CONFIG);
        let (mut server, _) = Stdio::initialized(&root, &[]);
        let path: fn(Value) -> Value = if rmcp { via_rmcp } else { |r| r };
        for round in 0..5u64 {
            let id = 100 + round;
            server.send(&path(call(id, "sleep", json!({"ms": 3000}))));
            std::thread::sleep(Duration::from_millis(50));
            server.send(&cancelled(id));
            server.send(&path(call(
                id,
                "echo",
                json!({"text": format!("second-{round}")}),
            )));
            let mut answers = Vec::new();
            while let Some(answer) = reply(&mut server, Duration::from_millis(600)) {
                answers.push(answer);
            }
            let [answer] = answers.as_slice() else {
                panic!("rmcp path: {rmcp}; round {round}: answers {answers:?}");
            };
            assert_eq!(answer["id"], id, "rmcp path: {rmcp}; {answer}");
            let text = answer["result"]["content"][0]["text"].as_str();
            assert!(
                text.is_some_and(|t| t.contains(&format!("second-{round}"))),
                "rmcp path: {rmcp}; round {round}: not the echo's answer: {answer}"
            );
        }
    }
}

/// rmcp knows the requests by the transport's ids, which the client never
/// sees: a cancellation naming an id no request of the client's has in
/// flight cancels nothing, whatever number it names; and the client's own
/// id is what the audit log records and what the answer carries.
#[test]
fn a_cancellation_naming_no_request_in_flight_cancels_nothing() {
    let config = CONFIG.replace("audit = \"off\"", "audit = \"audit.jsonl\"");
    let (_dir, root) = workspace(&config);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    let request = via_rmcp(
        json!({"jsonrpc": "2.0", "id": "mine", "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"ms": 700}}}),
    );
    server.send(&request);
    std::thread::sleep(Duration::from_millis(100));
    for id in 0..64 {
        server.send(&cancelled(id));
    }
    let answer = reply(&mut server, Duration::from_secs(10))
        .unwrap_or_else(|| panic!("the call was not answered: {}", server.stderr_text()));
    assert_eq!(answer["id"], "mine", "{answer}");
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let audit = std::fs::read_to_string(root.join("audit.jsonl")).unwrap();
    let sleep = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["tool"] == "sleep")
        .unwrap_or_else(|| panic!("no audit record of the call: {audit}"));
    assert_eq!(sleep["call_id"], "mine", "{sleep}");
}

/// `request` with the `_meta` of a 2026-07-28 request without `initialize`.
fn as_2026(mut request: Value) -> Value {
    request["params"]["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    });
    request
}

/// A 2026-07-28 request without `initialize`.
fn inline_2026(id: Value, method: &str, params: Value) -> Value {
    as_2026(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
}

/// The sixteenth pass: rmcp names a `subscriptions/listen` stream by the
/// listen request's id, which on stdio is now the transport's: streams were
/// acknowledged, and told of a changed tool list, under numbers the client
/// never gave (and one of them its other stream's id).
#[test]
fn listen_streams_are_named_by_the_clients_ids() {
    let (_dir, root) = workspace(CONFIG);
    let mut server = Stdio::start(&root, &[]);
    server.send(&inline_2026(
        json!(2),
        "subscriptions/listen",
        json!({"notifications": {}}),
    ));
    server.send(&inline_2026(
        json!("L"),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    ));
    let stream = |message: &Value| {
        message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone()
    };
    let mut acknowledged = Vec::new();
    while acknowledged.len() < 2 {
        let message = server.answer();
        assert_eq!(
            message["method"], "notifications/subscriptions/acknowledged",
            "{message}"
        );
        acknowledged.push(stream(&message));
    }
    acknowledged.sort_by_key(Value::to_string);
    assert_eq!(acknowledged, [json!("L"), json!(2)]);
    std::fs::copy(toolhost_tests::FLIP_A, root.join("plugins/flip.wasm")).unwrap();
    let told = loop {
        let message = server.answer();
        if message["method"] == "notifications/tools/list_changed" {
            break message;
        }
    };
    assert_eq!(stream(&told), "L", "{told}");
}

/// The sixteenth pass: a call cancelled while its answer waited for the
/// writer freed its id, so a call reusing the id at once got two answers
/// under it, the cancelled one's first. Now the id stays in use until the
/// writer is past the answer, and the answer is not written.
#[test]
fn a_call_cancelled_while_its_answer_waits_for_the_writer_is_not_answered() {
    for rmcp in [false, true] {
        let sevens = answers_to_a_second_seven(rmcp, |server| server.send(&cancelled(7)));
        // The second is refused (the id is in use until the writer is past
        // the first) and the first, cancelled, is not written.
        let texts: Vec<String> = sevens.iter().map(Value::to_string).collect();
        assert!(
            !texts.iter().any(|t| t.contains("first")),
            "rmcp path: {rmcp}; the cancelled call was answered: {texts:?}"
        );
        assert_eq!(
            sevens.len(),
            1,
            "rmcp path: {rmcp}; the answers under id 7: {texts:?}"
        );
        assert_eq!(
            error_of(&sevens[0]),
            (json!(7), -32600),
            "rmcp path: {rmcp}"
        );
    }
}

/// The sixteenth pass, again: a stream's notice handed to the writer while
/// it was held was still written after the client cancelled the stream, and
/// so went out under the id the client gave a new stream at once (one that
/// did not ask for tool changes). A notice is now written only while its
/// stream is open.
#[test]
fn a_notice_of_a_stream_cancelled_while_it_waits_for_the_writer_is_not_written() {
    let (_dir, root) = workspace(CONFIG);
    let mut server = Stdio::start(&root, &[]);
    server.send(&inline_2026(
        json!("L"),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    ));
    let acknowledged = server.answer();
    assert_eq!(
        acknowledged["method"], "notifications/subscriptions/acknowledged",
        "{acknowledged}"
    );
    hold_the_writer_as(&mut server, as_2026);
    std::fs::copy(toolhost_tests::FLIP_A, root.join("plugins/flip.wasm")).unwrap();
    // The plugin is loaded and the notice handed to the held writer.
    std::thread::sleep(Duration::from_secs(4));
    server.send(&cancelled("L"));
    server.send(&inline_2026(
        json!("L"),
        "subscriptions/listen",
        json!({"notifications": {}}),
    ));
    std::thread::sleep(Duration::from_secs(1));
    let mut notices = Vec::new();
    while let Some(message) = server.answer_within(Duration::from_secs(3)) {
        if message.get("method").is_some() {
            notices.push(message);
        }
    }
    assert!(
        notices
            .iter()
            .all(|n| n["method"] != "notifications/tools/list_changed"),
        "the cancelled stream's notice went out: {notices:?}"
    );
    assert!(
        notices
            .iter()
            .any(|n| n["params"]["notifications"] == json!({})),
        "the new stream was not acknowledged: {notices:?}"
    );
}
