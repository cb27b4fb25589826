//! Calls: results, argument errors, and guests that crash, spin, hog memory,
//! flood output or return broken JSON. After each, the host keeps serving.

use serde_json::json;
use toolhost::ErrorKind;

use crate::{call_err, call_ok, host};

/// The host still answers a normal call.
async fn still_serving(host: &toolhost::Host) {
    assert_eq!(
        call_ok(host, "echo", r#"{"text":"ok"}"#).await,
        json!({"text": "ok"})
    );
}

#[tokio::test]
async fn echo_returns_its_result() {
    let host = host().await;
    assert_eq!(
        call_ok(&host, "echo", r#"{"text":"hi","upper":true,"repeat":2}"#).await,
        json!({"text": "HIHI"})
    );
}

#[tokio::test]
async fn a_tool_without_arguments_accepts_empty_arguments() {
    let host = host().await;
    let now = call_ok(&host, "now", "").await;
    assert!(now["unix_seconds"].as_u64().unwrap() > 1_700_000_000);
}

#[tokio::test]
async fn invalid_json_arguments_are_refused_before_the_guest_runs() {
    let host = host().await;
    let (kind, text) = call_err(&host, "echo", r#"{"text": "#).await;
    assert_eq!(kind, ErrorKind::InvalidJson);
    assert!(
        text.starts_with("invalid_json: arguments of tool \"echo\" are not valid JSON"),
        "{text}"
    );
    let (kind, text) = call_err(&host, "echo", "[1, 2]").await;
    assert_eq!(kind, ErrorKind::InvalidJson);
    assert!(
        text.contains("must be a JSON object, got an array"),
        "{text}"
    );
    still_serving(&host).await;
}

#[tokio::test]
async fn arguments_off_schema_or_refused_by_the_tool_are_invalid_arguments() {
    let host = host().await;
    let (kind, text) = call_err(&host, "echo", r#"{"text": 5}"#).await;
    assert_eq!(kind, ErrorKind::InvalidArguments);
    assert_eq!(
        text,
        "invalid_arguments: arguments of tool \"echo\" do not match its schema (1 problem): \
         /text: 5 is not of type \"string\""
    );
    let (kind, text) = call_err(&host, "echo", r#"{"text": "a", "repeat": 0}"#).await;
    assert_eq!(kind, ErrorKind::InvalidArguments);
    assert_eq!(
        text,
        "invalid_arguments: tool \"echo\" (plugin \"echo\"): repeat must be at least 1"
    );
}

#[tokio::test]
async fn an_unknown_tool_is_named_with_the_available_ones() {
    let host = host().await;
    let (kind, text) = call_err(&host, "nope", "{}").await;
    assert_eq!(kind, ErrorKind::UnknownTool);
    assert!(
        text.starts_with("unknown_tool: no tool named \"nope\"; available tools: "),
        "{text}"
    );
    assert!(text.contains("echo"), "{text}");
}

#[tokio::test]
async fn a_tool_error_is_reported_as_such() {
    let host = host().await;
    let (kind, text) = call_err(&host, "fail", "{}").await;
    assert_eq!(kind, ErrorKind::ToolFailed);
    assert_eq!(
        text,
        "tool_error: tool \"fail\" (plugin \"misbehave\"): the fail tool failed on purpose"
    );
}

#[tokio::test]
async fn a_panicking_guest_is_a_trap_with_its_panic_message() {
    let host = host().await;
    let (kind, text) = call_err(&host, "crash", "{}").await;
    assert_eq!(kind, ErrorKind::Trap);
    assert!(
        text.starts_with("trap: tool \"crash\" (plugin \"misbehave\") crashed"),
        "{text}"
    );
    assert!(text.contains("the crash tool crashed on purpose"), "{text}");
    still_serving(&host).await;
}

#[tokio::test]
async fn an_infinite_loop_is_stopped_by_the_timeout() {
    let host = host().await;
    let started = std::time::Instant::now();
    let (kind, text) = call_err(&host, "spin", "{}").await;
    assert_eq!(kind, ErrorKind::Timeout);
    assert_eq!(
        text,
        "timeout: tool \"spin\" (plugin \"misbehave\") exceeded its time limit of 2s"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    still_serving(&host).await;
}

#[tokio::test]
async fn a_memory_hog_is_stopped_at_its_limit() {
    let host = host().await;
    let (kind, text) = call_err(&host, "hog", "{}").await;
    assert_eq!(kind, ErrorKind::Memory);
    assert!(
        text.starts_with(
            "memory: tool \"hog\" (plugin \"misbehave\") exceeded its memory limit of 32 MiB"
        ),
        "{text}"
    );
    still_serving(&host).await;
}

#[tokio::test]
async fn oversized_output_is_refused() {
    let host = host().await;
    let (kind, text) = call_err(&host, "flood", r#"{"bytes": 100000}"#).await;
    assert_eq!(kind, ErrorKind::OutputTooLarge);
    assert!(
        text.contains(
            "returned 100004 bytes (as sent inside a JSON string, escaped), more than the \
             limit of 65536 bytes"
        ),
        "{text}"
    );
    assert_eq!(
        call_ok(&host, "flood", r#"{"bytes": 1000}"#)
            .await
            .as_str()
            .unwrap()
            .len(),
        1000
    );
}

#[tokio::test]
async fn malformed_json_output_is_an_error_and_plain_text_is_wrapped() {
    let host = host().await;
    let (kind, text) = call_err(&host, "bad_json", "{}").await;
    assert_eq!(kind, ErrorKind::InvalidOutput);
    assert!(text.contains("returned malformed JSON"), "{text}");
    assert_eq!(
        call_ok(&host, "plain_text", "{}").await,
        json!("just some text")
    );
}

#[tokio::test]
async fn every_call_gets_a_fresh_instance() {
    // Many calls in a row and at once: no state or slot leaks between them.
    let host = host().await;
    let calls = (0..64).map(|i| {
        let host = host.clone();
        tokio::spawn(async move { call_ok(&host, "echo", &format!(r#"{{"text":"{i}"}}"#)).await })
    });
    for (i, call) in calls.enumerate() {
        assert_eq!(call.await.unwrap()["text"], i.to_string());
    }
}
