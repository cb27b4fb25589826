//! Dispatch: schema validation, the error shape of every failure kind,
//! batches in the OpenAI shape, and hooks.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolhost::hooks::BoxFuture;
use toolhost::{CallError, CallHook, CallInfo, ErrorKind, Host, MAX_ERROR_MESSAGE};

use crate::{call_err, host, test_limits};

#[tokio::test]
async fn schema_violations_list_every_problem_with_its_pointer() {
    let host = Host::builder()
        .plugin_file(toolhost_tests::SHAPES)
        .build()
        .await
        .unwrap();
    let (kind, text) = call_err(
        &host,
        "sort_points",
        r#"{"points":[{"x":1,"y":"high"},{"x":2}],"by":"z"}"#,
    )
    .await;
    assert_eq!(kind, ErrorKind::InvalidArguments);
    assert!(
        text.starts_with("invalid_arguments: arguments of tool \"sort_points\" do not match its schema (3 problems): "),
        "{text}"
    );
    assert!(text.contains("/points/0/y: "), "{text}");
    assert!(text.contains("/points/1: "), "{text}");
    assert!(text.contains("/by: "), "{text}");
}

#[tokio::test]
async fn arguments_may_be_a_json_value() {
    let host = host().await;
    let result = host.call("echo", json!({"text": "v"})).await.unwrap();
    assert_eq!(result.get(), r#"{"text":"v"}"#);
    let (kind, text) = match host.call("echo", json!([1])).await {
        Err(e) => (e.kind(), e.model_text()),
        Ok(r) => panic!("{}", r.get()),
    };
    assert_eq!(kind, ErrorKind::InvalidJson);
    assert!(
        text.ends_with("must be a JSON object, got an array"),
        "{text}"
    );
}

#[tokio::test]
async fn every_failure_kind_is_an_error_object_with_a_bounded_message() {
    let host = host().await;
    let cases = [
        ("nope", "{}", ErrorKind::UnknownTool),
        ("echo", "{", ErrorKind::InvalidJson),
        ("echo", r#"{"text":1}"#, ErrorKind::InvalidArguments),
        ("fail", "{}", ErrorKind::ToolFailed),
        ("crash", "{}", ErrorKind::Trap),
        ("hog", "{}", ErrorKind::Memory),
        ("flood", r#"{"bytes":100000}"#, ErrorKind::OutputTooLarge),
        ("bad_json", "{}", ErrorKind::InvalidOutput),
        (
            "nope".repeat(2000).as_str().to_owned().leak(),
            "{}",
            ErrorKind::UnknownTool,
        ),
    ];
    for (tool, arguments, expected) in cases {
        let error = host.call(tool, arguments).await.unwrap_err();
        assert_eq!(error.kind(), expected, "{tool}: {error}");
        let json = error.to_json();
        let text = json["error"].as_str().unwrap();
        assert!(
            text.starts_with(&format!("{}: ", expected.as_str())),
            "{text}"
        );
        assert!(text.len() <= MAX_ERROR_MESSAGE + 40, "{} bytes", text.len());
        assert_eq!(json.as_object().unwrap().len(), 1);
    }
}

#[tokio::test]
async fn a_long_guest_error_is_cut_for_the_model() {
    let host = Host::builder()
        .plugin_file(toolhost_tests::MISBEHAVE)
        .limits(toolhost::Limits {
            timeout: Duration::from_millis(300),
            ..test_limits()
        })
        .build()
        .await
        .unwrap();
    let (kind, text) = call_err(&host, "spin", "{}").await;
    assert_eq!(kind, ErrorKind::Timeout);
    assert!(text.contains("300ms"), "{text}");
}

/// Entry `i` of a mixed batch: a good call, bad JSON arguments, an unknown
/// tool, a failing tool, and an entry with no function, in turn.
fn mixed_entry(i: usize) -> Value {
    let id = format!("call_{i}");
    match i % 5 {
        0 => json!({"id": id, "type": "function",
                    "function": {"name": "echo", "arguments": format!(r#"{{"text":"{i}"}}"#)}}),
        1 => json!({"id": id, "type": "function",
                    "function": {"name": "echo", "arguments": "{\"text\": "}}),
        2 => json!({"id": id, "type": "function",
                    "function": {"name": "no_such_tool", "arguments": "{}"}}),
        3 => json!({"id": id, "type": "function",
                    "function": {"name": "fail", "arguments": "{}"}}),
        _ => json!({"id": id, "type": "function"}),
    }
}

/// Checks the result of [`mixed_entry`] `i`, sent at `position` in its batch.
fn check_mixed_result(i: usize, position: usize, result: &Value) {
    assert_eq!(result["tool_call_id"], format!("call_{i}"));
    assert_eq!(result["role"], "tool");
    let content: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    let error = content["error"].as_str().unwrap_or_default();
    match i % 5 {
        0 => {
            assert_eq!(result["name"], "echo");
            assert_eq!(content, json!({"text": i.to_string()}));
        }
        1 => assert!(error.starts_with("invalid_json: "), "{content}"),
        2 => assert!(error.starts_with("unknown_tool: "), "{content}"),
        3 => assert!(error.starts_with("tool_error: "), "{content}"),
        _ => {
            assert_eq!(result["name"], Value::Null);
            assert_eq!(
                error,
                format!(
                    "invalid_request: tool_calls[{position}] has no \"function\" object (nor is \
                     it a Responses \"function_call\" item)"
                )
            );
        }
    }
}

#[tokio::test]
async fn a_batch_of_fifty_returns_fifty_results_in_request_order() {
    let host = host().await;
    let calls: Vec<Value> = (0..50).map(mixed_entry).collect();
    let response =
        toolhost::serve::openai::dispatch_batch(&host, &json!({ "tool_calls": calls }), None).await;
    let results = response["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 50);
    for (i, result) in results.iter().enumerate() {
        check_mixed_result(i, i, result);
    }
}

/// A batch of one (an agent's usual turn) takes a shorter path; every kind
/// of entry comes back the same way on it.
#[tokio::test]
async fn a_batch_of_one_returns_each_kind_of_result() {
    let host = host().await;
    for i in 0..5 {
        let response = toolhost::serve::openai::dispatch_batch(
            &host,
            &json!({ "tool_calls": [mixed_entry(i)] }),
            None,
        )
        .await;
        let results = response["tool_results"].as_array().unwrap();
        assert_eq!(results.len(), 1, "{response}");
        check_mixed_result(i, 0, &results[0]);
    }
}

/// A batch of `count` calls of misbehave's `sleep` for `ms` each, with ids
/// `call_0`, `call_1`, ...
pub(crate) fn sleep_batch(count: usize, ms: u64) -> Value {
    let calls: Vec<Value> = (0..count)
        .map(|i| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": "sleep", "arguments": format!("{{\"ms\": {ms}}}")}})
        })
        .collect();
    json!({ "tool_calls": calls })
}

/// Counts the calls between `before_call` and `after_call`, and the most
/// seen at once.
#[derive(Default)]
struct InFlight {
    now: Arc<Mutex<(usize, usize)>>,
}

impl CallHook for InFlight {
    fn before_call<'a>(&'a self, _call: &'a CallInfo<'a>) -> BoxFuture<'a, Result<(), String>> {
        let mut counts = self.now.lock().unwrap();
        counts.0 += 1;
        counts.1 = counts.1.max(counts.0);
        Box::pin(async { Ok(()) })
    }

    fn after_call(
        &self,
        _call: &CallInfo<'_>,
        _result: Result<&serde_json::value::RawValue, &CallError>,
        _duration: Duration,
    ) {
        self.now.lock().unwrap().0 -= 1;
    }
}

/// A batch of calls that wait (the guest sleeps) runs them side by side, as
/// many as the batch's bound and no more, on one worker thread or several.
async fn waiting_calls_overlap_up_to_the_bound() {
    let hook = InFlight::default();
    let counts = hook.now.clone();
    let host = Host::builder()
        .plugin_file(toolhost_tests::MISBEHAVE)
        .batch_concurrency(3)
        .hook(hook)
        .build()
        .await
        .unwrap();
    let response = toolhost::serve::openai::dispatch_batch(&host, &sleep_batch(9, 60), None).await;
    let results = response["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 9);
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["tool_call_id"], format!("call_{i}"));
        assert!(
            !result["content"].as_str().unwrap().contains("error"),
            "{result}"
        );
    }
    let (now, most) = *counts.lock().unwrap();
    assert_eq!(now, 0);
    assert_eq!(most, 3, "calls in flight at once");
}

#[tokio::test]
async fn a_batch_overlaps_waiting_calls_up_to_its_bound() {
    waiting_calls_overlap_up_to_the_bound().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_overlaps_waiting_calls_up_to_its_bound_on_two_workers() {
    waiting_calls_overlap_up_to_the_bound().await;
}

#[tokio::test]
async fn a_batch_that_is_not_a_batch_is_one_error() {
    let host = host().await;
    let response =
        toolhost::serve::openai::dispatch_batch(&host, &json!({"calls": []}), None).await;
    assert!(
        response["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid_request: ")
    );
}

/// Blocks calls to `echo` whose text is "forbidden"; records every outcome.
#[derive(Default)]
struct Guard {
    seen: Arc<Mutex<Vec<(String, String, Duration)>>>,
}

impl CallHook for Guard {
    fn before_call<'a>(&'a self, call: &'a CallInfo<'a>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            if call.arguments["text"] == "forbidden" {
                Err("the guard does not allow that text".to_string())
            } else {
                Ok(())
            }
        })
    }

    fn after_call(
        &self,
        call: &CallInfo<'_>,
        result: Result<&serde_json::value::RawValue, &CallError>,
        duration: Duration,
    ) {
        let outcome = match result {
            Ok(raw) => raw.get().to_string(),
            Err(e) => e.model_text(),
        };
        self.seen
            .lock()
            .unwrap()
            .push((call.tool.name.clone(), outcome, duration));
    }
}

#[tokio::test]
async fn a_before_call_hook_can_block_and_after_call_sees_every_outcome() {
    let guard = Guard::default();
    let seen = guard.seen.clone();
    let host = Host::builder()
        .bundled(true)
        .hook(guard)
        .build()
        .await
        .unwrap();
    let (kind, text) = call_err(&host, "echo", r#"{"text":"forbidden"}"#).await;
    assert_eq!(kind, ErrorKind::Blocked);
    assert_eq!(text, "blocked: the guard does not allow that text");
    host.call("echo", r#"{"text":"fine"}"#).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].1, "blocked: the guard does not allow that text");
    assert_eq!(seen[1].0, "echo");
    assert_eq!(seen[1].1, r#"{"text":"fine"}"#);
    assert!(seen[1].2 > Duration::ZERO);
}
