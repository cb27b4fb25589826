//! Narrowing a session ends its terminal at once, a command in flight and
//! the session's background processes with it: they ran with what the
//! session may no longer do, and would otherwise go on writing until the
//! command in flight ended.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use super::served::exists;
use super::{A, narrow, start};

#[tokio::test]
async fn narrowing_a_session_ends_its_command_in_flight_and_its_background_processes() {
    let served = std::sync::Arc::new(start(""));
    let ws = served.path("a");
    let line = "while true; do date +%s%N > bg.txt; sleep 0.05; done";
    let started = served
        .call(A, Some("s1"), "process_start", json!({ "command": line }))
        .await;
    assert!(started.get("error").is_none(), "{started}");
    let in_flight = {
        let served = served.clone();
        tokio::spawn(async move {
            let line = "touch fg-started; sleep 6; touch fg-after.txt";
            served
                .call(A, Some("s1"), "run_command", json!({ "command": line }))
                .await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(exists(&ws.join("fg-started")) && exists(&ws.join("bg.txt"))) {
        assert!(Instant::now() < deadline, "the commands never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let narrowed = Instant::now();
    let (status, body) = narrow(&served, A, "s1", &["file:write".to_string()]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let ran = tokio::time::timeout(Duration::from_secs(4), in_flight)
        .await
        .expect("the command in flight went on after the narrowing")
        .unwrap();
    assert!(narrowed.elapsed() < Duration::from_secs(4), "{ran}");
    // The background loop is gone: what it writes stays as it was.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = std::fs::read_to_string(ws.join("bg.txt")).unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = std::fs::read_to_string(ws.join("bg.txt")).unwrap();
    assert_eq!(before, after, "the background process still writes");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!exists(&ws.join("fg-after.txt")), "{ran}");
    // The session's next command runs, narrowed.
    let next = served
        .call(
            A,
            Some("s1"),
            "run_command",
            json!({ "command": "touch x" }),
        )
        .await;
    assert!(next.to_string().contains("Read-only"), "{next}");
}
