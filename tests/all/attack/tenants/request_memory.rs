//! What a request body becomes in the server while its calls run: a
//! `/v1/tool_calls` body padded with millions of tiny JSON values (in a
//! field no batch has) is not built into a value tree, and an MCP message
//! of more values than the limit is refused before it is; so a tenant's
//! slow calls hold about their bodies' size, not sixteen times it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::served::{Served, peak_resident, resident};
use super::unread::{mcp, mcp_session};
use super::{A, start};

/// A batch of one `sleep` call and `zeros` JSON zeros in an unknown field,
/// as text (about 2 bytes per zero).
fn padded(zeros: usize) -> String {
    let call = json!({"id": "1", "type": "function", "function": {
        "name": "run_command", "arguments": {"command": "sleep 4"}}});
    let mut body = format!("{{\"tool_calls\":[{call}],\"junk\":[");
    body.push_str(&"0,".repeat(zeros));
    body.push_str("0]}");
    body
}

/// A batch of one `sleep` call and `entries` entries whose ids are arrays
/// of one-key objects of about 4 KiB each.
fn junk_ids(entries: usize) -> String {
    let call = json!({"id": "1", "type": "function", "function": {
        "name": "run_command", "arguments": {"command": "sleep 4"}}});
    let id = format!("[{}{{\"\":0}}]", "{\"\":0},".repeat(583));
    assert!(id.len() < 4096);
    let junk = format!(
        "{{\"id\":{id},\"type\":\"function\",\"function\":{{\"name\":\"echo\",\"arguments\":\"{{}}\"}}}}"
    );
    let mut body = format!("{{\"tool_calls\":[{call}");
    for _ in 0..entries {
        body.push(',');
        body.push_str(&junk);
    }
    body.push_str("]}");
    body
}

#[tokio::test]
async fn ids_of_tiny_values_are_not_built_nor_copied_into_the_answer() {
    let served = start("");
    let body = junk_ids(900);
    assert!(body.len() < 4 << 20);
    let (status, answer) = {
        let response = served
            .client
            .post(format!("{}/v1/tool_calls", served.base))
            .bearer_auth(A)
            .header("content-type", "application/json")
            .body(junk_ids(3))
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.text().await.unwrap())
    };
    assert!(status.is_success(), "{answer}");
    // An id that is not a string is refused for its entry, and not echoed.
    assert!(answer.contains("id that is not a string"), "{answer}");
    assert!(!answer.contains("{\"\":0}"), "{answer}");
    let grown = peak_growth(&served, "/v1/tool_calls", &[], &body).await;
    for status in grown.1 {
        assert!(status.is_success(), "{status}");
    }
    // Built as values, eight such bodies held about 3 GiB.
    assert!(
        grown.0 < 160 << 20,
        "the server grew by {} MiB",
        grown.0 >> 20
    );
}

#[tokio::test]
async fn padded_bodies_are_not_built_while_their_calls_run() {
    let served = start("");
    let body = padded(2_000_000);
    assert!(body.len() < 4 << 20);
    let grown = peak_growth(&served, "/v1/tool_calls", &[], &body).await;
    for status in grown.1 {
        assert!(status.is_success(), "{status}");
    }
    // Eight bodies of 4 MB: built as values they held over 500 MB.
    assert!(
        grown.0 < 160 << 20,
        "the server grew by {} MiB",
        grown.0 >> 20
    );
}

/// A body of more calls than a batch may have is refused for its count
/// before its entries are built: 450,000 tiny entries in 4 MB, built, held
/// about 300 MB each.
#[tokio::test]
async fn entries_past_the_most_calls_are_refused_unbuilt() {
    let served = start("");
    let mut body = String::from("{\"tool_calls\":[");
    body.push_str(&"{\"id\":0},".repeat(450_000));
    body.push_str("{\"id\":0}]}");
    assert!(body.len() < 4 << 20);
    let before = peak_resident(served.pid());
    let posts: Vec<_> = (0..4)
        .map(|_| {
            let request = served
                .client
                .post(format!("{}/v1/tool_calls", served.base))
                .bearer_auth(A)
                .header("content-type", "application/json")
                .body(body.clone());
            tokio::spawn(async move {
                let response = request.send().await.unwrap();
                (response.status(), response.text().await.unwrap())
            })
        })
        .collect();
    for post in posts {
        let (status, text) = post.await.unwrap();
        assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{text}");
        assert!(text.contains("450001 tool calls in one request"), "{text}");
    }
    let grown = peak_resident(served.pid()).saturating_sub(before);
    // Four bodies held as text, their entries counted: about 16 MB.
    assert!(
        grown < 96 << 20,
        "the server's peak grew by {} MiB",
        grown >> 20
    );
}

/// Posts `body` to `path` eight times at once as tenant `a` with
/// `headers`: how much the server grew at most while they ran, and their
/// statuses.
async fn peak_growth(
    served: &Served,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u64, Vec<reqwest::StatusCode>) {
    let before = resident(served.pid());
    let posts: Vec<_> = (0..8)
        .map(|_| {
            let mut request = served
                .client
                .post(format!("{}{path}", served.base))
                .bearer_auth(A)
                .header("content-type", "application/json")
                .body(body.to_string());
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            tokio::spawn(async move { request.send().await.unwrap().status() })
        })
        .collect();
    // The most the server holds while the calls sleep.
    let mut peak = 0;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until && posts.iter().any(|p| !p.is_finished()) {
        peak = peak.max(resident(served.pid()));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut statuses = Vec::new();
    for post in posts {
        statuses.push(post.await.unwrap());
    }
    (peak.saturating_sub(before), statuses)
}

#[tokio::test]
async fn mcp_messages_of_many_tiny_values_are_refused_before_they_are_built() {
    let served = start("");
    let session = mcp_session(&served).await;
    let mut body = String::from(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 4"},"_meta":{"x":["#,
    );
    body.push_str(&"0,".repeat(2_000_000));
    body.push_str("0]}}}");
    assert!(body.len() < 4 << 20);
    // In its session, and (a revision without sessions) naming a session
    // the server does not know, which rmcp serves all the same.
    let mut small = String::from(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"x":["#,
    );
    small.push_str(&"0,".repeat(100_000));
    small.push_str("0]}}}");
    // The same values in the string of serde_json's raw-value token, which
    // the JSON reader builds into a tree the count saw as one string.
    let mut raw = String::from(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 4"},"_meta":{"x":{"$serde_json::private::RawValue":"["#,
    );
    raw.push_str(&"0,".repeat(1_000_000));
    raw.push_str("0]\"}}}}");
    assert!(raw.len() < 4 << 20);
    for (version, session, method, body) in [
        ("2025-06-18", session.as_str(), "tools/call", &body),
        ("2026-07-28", "bogus", "tools/list", &small),
        ("2025-06-18", session.as_str(), "tools/call", &raw),
    ] {
        let headers = [
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", version),
            ("mcp-method", method),
            ("mcp-session-id", session),
        ];
        let (grown, statuses) = peak_growth(&served, "/mcp", &headers, body).await;
        assert!(
            grown < 160 << 20,
            "{version}: the server grew by {} MiB",
            grown >> 20
        );
        assert!(
            statuses
                .iter()
                .all(|s| *s == reqwest::StatusCode::BAD_REQUEST),
            "{version}: {statuses:?}"
        );
    }
    // A message within the limit is served.
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"x": [0, 0, 0]}}});
    let (_, answer) = mcp(&served, Some(&session), &call).await;
    assert!(answer.to_string().contains("hi"), "{answer}");
}

/// A connection that posts to `path` as tenant `a` a body of `size` bytes
/// announced and all but its last byte sent, in a task that keeps it open
/// (it never finishes) until aborted.
fn unfinished_body(served: &Served, path: &str, size: usize) -> tokio::task::JoinHandle<()> {
    use tokio::io::AsyncWriteExt as _;
    let addr = served.base.trim_start_matches("http://").to_string();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {A}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {size}\r\n\r\n"
    );
    tokio::spawn(async move {
        let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
        socket.write_all(head.as_bytes()).await.unwrap();
        // The server may not read it all (that is the point).
        let _ = socket.write_all(" ".repeat(size - 1).as_bytes()).await;
        std::future::pending::<()>().await;
    })
}

#[tokio::test]
async fn bodies_one_tenant_never_finishes_hold_at_most_its_concurrency_of_them() {
    let served = Served::start(&super::config("", "concurrency = 2"), &["a", "b"]);
    let before = resident(served.pid());
    let open: Vec<_> = (0..48)
        .map(|n| {
            let path = if n % 2 == 0 { "/v1/tool_calls" } else { "/mcp" };
            unfinished_body(&served, path, 4_000_000)
        })
        .collect();
    let mut grown = 0;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        grown = grown.max(resident(served.pid()).saturating_sub(before));
    }
    // Read whole, the 48 bodies held about 200 MiB; two at a time, 8 MiB.
    assert!(grown < 64 << 20, "the server grew by {} MiB", grown >> 20);
    // Tenant b is served meanwhile.
    let call = json!({"tool_calls": [{"id": "b", "type": "function", "function": {
        "name": "run_command", "arguments": "{\"command\":\"echo hi\"}"}}]});
    let (status, body) = served.post("/v1/tool_calls", super::B, &call).await;
    assert!(status.is_success(), "{body}");
    assert!(body.to_string().contains("hi"), "{body}");
    open.iter().for_each(tokio::task::JoinHandle::abort);
}

/// Objects cost far more to build than their spelling: a message of 32,700
/// one-key objects (65,400 values in 229 KB) is refused before it is built,
/// and eight at once grow the server by little; one of a few thousand
/// objects is served.
#[tokio::test]
async fn mcp_messages_of_many_small_objects_are_refused_before_they_are_built() {
    let served = start("");
    let session = mcp_session(&served).await;
    let padded = |objects: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"run_command","arguments":{{"command":"sleep 4"}},"_meta":{{"pad":[{}{{"":0}}]}}}}}}"#,
            r#"{"":0},"#.repeat(objects - 1)
        )
    };
    let body = padded(32_700);
    let headers = [
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2025-06-18"),
        ("mcp-session-id", session.as_str()),
    ];
    let (grown, statuses) = peak_growth(&served, "/mcp", &headers, &body).await;
    assert!(grown < 64 << 20, "the server grew by {} MiB", grown >> 20);
    assert!(
        statuses
            .iter()
            .all(|s| *s == reqwest::StatusCode::BAD_REQUEST),
        "{statuses:?}"
    );
    let call: Value =
        serde_json::from_str(&padded(2_000).replace("sleep 4", "echo served")).unwrap();
    let (_, answer) = mcp(&served, Some(&session), &call).await;
    assert!(answer.to_string().contains("served"), "{answer}");
}

/// A session keeps what it was started with for its life, but of the
/// free-form experimental capabilities only toolhost's own (its narrowing,
/// which the narrowing tests hold to): sessions started with thousands of
/// objects elsewhere there hold little.
#[tokio::test]
async fn sessions_keep_no_experimental_capabilities() {
    let served = start("");
    let pad: Vec<Value> = (0..3_000).map(|_| json!({"": 0})).collect();
    let before = resident(served.pid());
    for n in 0..48 {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"experimental": {"x": {"pad": pad}}},
            "clientInfo": {"name": "t", "version": "1"}}});
        let (session, answer) = mcp(&served, None, &init).await;
        assert!(session.is_some(), "session {n}: {answer}");
    }
    let grown = resident(served.pid()).saturating_sub(before);
    // About 100 MiB when they were kept.
    assert!(grown < 48 << 20, "the server grew by {} MiB", grown >> 20);
}
