//! Progress reports of a call reach an MCP client that sent a
//! `progressToken` as `notifications/progress` with that token, before the
//! answer: through the `toolhost` binary on stdio, and over Streamable HTTP
//! on the request's own stream. A call without a token sends none; values
//! that do not increase are dropped and bursts are thinned.

use reqwest::StatusCode;
use serde_json::{Value, json};
use toolhost::serve::http::ServeOptions;

use crate::mcp_http::Mcp;
use crate::protocol::{Stdio, call};
use crate::serve::CONFIG;

/// `toolhost serve` on stdio with the `conformance` and `misbehave` guests.
fn on_stdio() -> (tempfile::TempDir, Stdio) {
    let (dir, root) = crate::serve::workspace(
        CONFIG,
        &[toolhost_tests::CONFORMANCE, toolhost_tests::MISBEHAVE],
    );
    let (server, _) = Stdio::initialized(&root, &[]);
    (dir, server)
}

/// `tools/call` of `tool` with `_meta.progressToken` set to `token`.
fn call_with_token(id: u64, tool: &str, arguments: Value, token: Value) -> Value {
    let mut request = call(id, tool, arguments);
    request["params"]["_meta"] = json!({ "progressToken": token });
    request
}

/// Sends `request`; the params of the `notifications/progress` that came
/// before its answer, and the answer.
fn progress_of(server: &mut Stdio, request: &Value) -> (Vec<Value>, Value) {
    server.send(request);
    let mut reports = Vec::new();
    loop {
        let message = server.answer();
        if message["id"] == request["id"] {
            return (reports, message);
        }
        if message["method"] == "notifications/progress" {
            reports.push(message["params"].clone());
        }
    }
}

fn values(reports: &[Value]) -> Vec<f64> {
    reports
        .iter()
        .map(|r| r["progress"].as_f64().unwrap())
        .collect()
}

#[test]
fn a_client_that_sent_a_token_gets_each_report_before_the_answer() {
    let (_dir, mut server) = on_stdio();
    for (id, token) in [(1, json!("progress-1")), (2, json!(7))] {
        let request = call_with_token(id, "test_tool_with_progress", json!({}), token.clone());
        let (reports, answer) = progress_of(&mut server, &request);
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        assert_eq!(values(&reports), [0.0, 50.0, 100.0], "{reports:?}");
        for (report, step) in reports.iter().zip([0, 50, 100]) {
            assert_eq!(report["progressToken"], token, "{report}");
            assert_eq!(report["total"], 100.0, "{report}");
            assert_eq!(
                report["message"],
                format!("Completed step {step} of 100"),
                "{report}"
            );
        }
    }
}

#[test]
fn a_call_without_a_token_sends_no_progress() {
    let (_dir, mut server) = on_stdio();
    let (reports, answer) =
        progress_of(&mut server, &call(1, "test_tool_with_progress", json!({})));
    assert!(reports.is_empty(), "{reports:?}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    // Nothing trails the answer either: the next message answers the ping.
    server.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    assert_eq!(server.answer()["id"], 2);
}

#[test]
fn progress_that_does_not_increase_is_dropped_and_a_burst_ends_on_its_last_report() {
    let (_dir, mut server) = on_stdio();
    let arguments = json!({"steps": [1, 1, 0.5, 2, -1, 3], "total": 3, "pause_ms": 80});
    let request = call_with_token(1, "report_progress", arguments, json!("t"));
    let (reports, _) = progress_of(&mut server, &request);
    assert_eq!(values(&reports), [1.0, 2.0, 3.0], "{reports:?}");
    assert_eq!(reports[1]["message"], "step 4");

    // 500 reports at once: thinned to one per 50 ms, the last one kept.
    let steps: Vec<u32> = (1..=500).collect();
    let request = call_with_token(2, "report_progress", json!({ "steps": steps }), json!("b"));
    let (reports, answer) = progress_of(&mut server, &request);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let seen = values(&reports);
    assert!(seen.len() < 50, "{} notifications: {seen:?}", seen.len());
    assert_eq!(seen.first(), Some(&1.0), "{seen:?}");
    assert_eq!(seen.last(), Some(&500.0), "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
}

/// The JSON-RPC messages of an SSE body, in order.
fn events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .filter(|data| !data.is_empty())
        .map(|data| serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}")))
        .collect()
}

#[tokio::test]
async fn over_http_progress_goes_on_the_request_stream_before_the_answer() {
    let mcp = Mcp::start(ServeOptions::default()).await;
    let version = "2025-06-18";
    let (session, _) = mcp.open(version).await;
    let arguments = json!({"steps": [1, 2, 3], "total": 3, "pause_ms": 80});
    let post = |request: Value| {
        mcp.post(Some(&session), request.to_string())
            .header("mcp-protocol-version", version)
            .send()
    };

    let response = post(call_with_token(
        1,
        "report_progress",
        arguments.clone(),
        json!("h"),
    ))
    .await
    .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let messages = events(&response.text().await.unwrap());
    let (answer, notifications) = messages.split_last().expect("messages");
    assert_eq!(answer["id"], 1, "{messages:?}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(notifications.len(), 3, "{messages:?}");
    for (notification, step) in notifications.iter().zip([1.0, 2.0, 3.0]) {
        assert_eq!(notification["method"], "notifications/progress");
        assert_eq!(notification["params"]["progressToken"], "h");
        assert_eq!(notification["params"]["progress"], step);
        assert_eq!(notification["params"]["total"], 3.0);
    }

    // Without a token: the answer alone.
    let response = post(call(2, "report_progress", arguments)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let messages = events(&response.text().await.unwrap());
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["id"], 2, "{messages:?}");
    assert_eq!(messages[0]["result"]["isError"], false, "{messages:?}");
}
