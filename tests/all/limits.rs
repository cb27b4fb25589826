//! Limits: each breach is its own error, and the host serves the next call.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost::audit::AuditLog;
use toolhost::{ErrorKind, Host, Limits};

use crate::{Buffer, call_err};

fn limits() -> Limits {
    Limits {
        memory: 16 << 20,
        timeout: Duration::from_millis(500),
        max_output: 4096,
        max_arguments: 1024,
        concurrency: 2,
    }
}

async fn host() -> Host {
    Host::builder()
        .bundled(true)
        .plugin_file(toolhost_tests::MISBEHAVE)
        .limits(limits())
        .build()
        .await
        .unwrap()
}

async fn serves_next(host: &Host) {
    let result = host.call("echo", json!({"text": "next"})).await.unwrap();
    assert_eq!(result.get(), r#"{"text":"next"}"#);
}

#[tokio::test]
async fn a_sleeping_guest_is_stopped_at_the_timeout() {
    let host = host().await;
    let (kind, text) = call_err(&host, "sleep", r#"{"ms": 10000}"#).await;
    assert_eq!(kind, ErrorKind::Timeout);
    assert_eq!(
        text,
        "timeout: tool \"sleep\" (plugin \"misbehave\") exceeded its time limit of 500ms"
    );
    serves_next(&host).await;
}

#[tokio::test]
async fn a_spinning_guest_is_stopped_at_the_timeout() {
    let host = host().await;
    let (kind, _) = call_err(&host, "spin", "{}").await;
    assert_eq!(kind, ErrorKind::Timeout);
    serves_next(&host).await;
}

#[tokio::test]
async fn an_allocating_guest_is_stopped_at_the_memory_limit() {
    let host = host().await;
    let (kind, text) = call_err(&host, "hog", "{}").await;
    assert_eq!(kind, ErrorKind::Memory);
    assert!(text.contains("memory limit of 16 MiB"), "{text}");
    serves_next(&host).await;
}

#[tokio::test]
async fn flooded_output_is_refused() {
    let host = host().await;
    let (kind, text) = call_err(&host, "flood", r#"{"bytes": 5000}"#).await;
    assert_eq!(kind, ErrorKind::OutputTooLarge);
    assert!(text.contains("more than the limit of 4096 bytes"), "{text}");
    serves_next(&host).await;
}

#[tokio::test]
async fn oversized_arguments_are_refused_before_the_guest_runs() {
    let host = host().await;
    let text = "x".repeat(2000);
    let (kind, message) = call_err(&host, "echo", &json!({ "text": text }).to_string()).await;
    assert_eq!(kind, ErrorKind::InvalidArguments);
    assert!(
        message.contains("more than the limit of 1024 bytes"),
        "{message}"
    );
}

#[tokio::test]
async fn calls_beyond_the_concurrency_limit_queue_then_are_refused_as_busy() {
    let host = Host::builder()
        .plugin_file(toolhost_tests::MISBEHAVE)
        .limits(Limits {
            concurrency: 1,
            ..limits()
        })
        .build()
        .await
        .unwrap();
    // One slot, a 500 ms limit, three 400 ms calls at once: the first runs, the
    // second queues and runs, the third would wait past its limit.
    let calls: Vec<_> = (0..3)
        .map(|i| {
            let host = host.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(i * 30)).await;
                host.call("sleep", json!({"ms": 400})).await
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for call in calls {
        outcomes.push(call.await.unwrap());
    }
    assert!(outcomes[0].is_ok(), "{:?}", outcomes[0]);
    assert!(outcomes[1].is_ok(), "{:?}", outcomes[1]);
    let busy = outcomes[2].as_ref().unwrap_err();
    assert_eq!(busy.kind(), ErrorKind::Busy, "{busy}");
    assert!(
        busy.message().contains("at its limit of 1 concurrent call"),
        "{busy}"
    );
}

#[tokio::test]
async fn the_audit_log_has_one_line_per_call_with_reasons() {
    let buffer = Buffer::default();
    let host = Host::builder()
        .bundled(true)
        .plugin_file(toolhost_tests::MISBEHAVE)
        .limits(limits())
        .audit(AuditLog::writer(buffer.clone()))
        .build()
        .await
        .unwrap();
    host.call("echo", json!({"text": "a"})).await.unwrap();
    host.call("nope", "{}").await.unwrap_err();
    host.call("fail", "{}").await.unwrap_err();
    let text = buffer.text();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0]["tool"], "echo");
    assert_eq!(lines[0]["outcome"], "ok");
    assert_eq!(lines[0]["plugin"], "echo");
    assert_eq!(lines[0]["plugin_hash"].as_str().unwrap().len(), 64);
    assert_eq!(lines[0]["profile"], "none");
    assert!(lines[0]["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(lines[1]["outcome"], "unknown_tool");
    assert_eq!(lines[2]["outcome"], "tool_error");
    assert!(
        lines[2]["error"]
            .as_str()
            .unwrap()
            .contains("failed on purpose")
    );
}

#[tokio::test]
async fn a_schema_pattern_cannot_stall_validation() {
    // 200 keys of 30 `a`s and a `b`: a backtracking engine tries 2^30 ways
    // for each before refusing it against `^(a+)+$`.
    let host = Host::builder()
        .bundled(true)
        .plugin_file(toolhost_tests::SHAPES)
        .limits(Limits {
            timeout: Duration::from_secs(2),
            max_arguments: 1 << 20,
            ..limits()
        })
        .build()
        .await
        .unwrap();
    let mut keys = serde_json::Map::new();
    for i in 0..200 {
        keys.insert(format!("{}b{i}", "a".repeat(30)), Value::Null);
    }
    let started = std::time::Instant::now();
    let (kind, text) = call_err(&host, "a_keys", &Value::Object(keys).to_string()).await;
    assert_eq!(kind, ErrorKind::InvalidArguments, "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "validation took {:?}",
        started.elapsed()
    );
    let ok = host
        .call("a_keys", json!({"aaa": 1, "a": 2}))
        .await
        .unwrap();
    assert_eq!(ok.get(), "2");
    serves_next(&host).await;
}
