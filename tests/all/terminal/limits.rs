//! Time and output limits: timeouts, background jobs, output floods.

use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::ErrorKind;

use super::{ok_stdout, run, run_line, shell};
use crate::{Workspace, assert_gone, call_err};

/// The command returned well before the 30 s its processes would take.
fn assert_prompt(started: Instant) {
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let ws = Workspace::new(shell);
    let host = ws
        .host(
            r#"
            allow = ["terminal:*"]
            file.read = ["."]
            file.write = ["."]
            "#,
        )
        .await;
    let started = Instant::now();
    let result = run(
        &host,
        json!({
            "command": "sleep 30.11 & sleep 30.11; echo done",
            "timeout_ms": 300,
        }),
    )
    .await;
    assert_eq!(result, json!({ "error_kind": "timeout" }));
    assert_prompt(started);
    assert_gone("sleep 30.11").await;
}

#[tokio::test]
async fn the_profile_timeout_caps_the_guest_timeout() {
    let ws = Workspace::new(shell);
    let host = ws
        .host(
            r#"
            allow = ["terminal:*"]
            file.read = ["."]
            terminal.timeout = "300ms"
            "#,
        )
        .await;
    let started = Instant::now();
    let result = run(&host, json!({ "command": "sleep 30", "timeout_ms": 60000 })).await;
    assert_eq!(result, json!({ "error_kind": "timeout" }));
    assert_prompt(started);
    // A command within the limit finishes.
    ok_stdout(&run(&host, json!({ "command": "true", "timeout_ms": 60000 })).await);
}

#[tokio::test]
async fn background_jobs_end_with_the_shell() {
    let ws = Workspace::new(shell);
    let host = ws
        .host(
            r#"
            allow = ["terminal:*"]
            file.read = ["."]
            file.write = ["."]
            "#,
        )
        .await;
    let started = Instant::now();
    // The background sleep holds stdout open; the call must not wait for it.
    let result = run_line(&host, "sleep 30.12 & echo started").await;
    assert_eq!(ok_stdout(&result), "started\n");
    assert_prompt(started);
    assert_gone("sleep 30.12").await;
}

#[tokio::test]
async fn a_call_abandoned_at_its_time_limit_kills_the_command() {
    let ws = Workspace::new(shell);
    let host = ws
        .host(
            r#"
            allow = ["terminal:*"]
            file.read = ["."]
            file.write = ["."]
            limits = { timeout = "500ms" }
            "#,
        )
        .await;
    let (kind, message) = call_err(
        &host,
        "run",
        &json!({ "command": "sleep 30.13 & wait" }).to_string(),
    )
    .await;
    assert_eq!(kind, ErrorKind::Timeout, "{message}");
    assert_gone("sleep 30.13").await;
}

#[tokio::test]
async fn output_floods_are_capped() {
    let ws = Workspace::new(shell);
    let host = ws
        .host(
            r#"
            allow = ["terminal:*"]
            file.read = ["."]
            terminal.max_output = "1KiB"
            "#,
        )
        .await;
    let started = Instant::now();
    let result = run_line(&host, "yes | head -c 10000000").await;
    let stdout = ok_stdout(&result);
    assert_eq!(stdout.len(), 1024);
    assert!(stdout.starts_with("y\ny\n"));
    assert_eq!(result["truncated"], true);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );

    let result = run_line(&host, "yes | head -c 100000 >&2; echo out").await;
    assert_eq!(ok_stdout(&result), "out\n");
    assert_eq!(result["stderr"].as_str().unwrap().len(), 1024);
    assert_eq!(result["truncated"], true);

    let result = run_line(&host, "head -c 1024 /dev/zero | tr '\\0' z").await;
    assert_eq!(ok_stdout(&result).len(), 1024);
    assert_eq!(result["truncated"], false);
}

#[tokio::test]
async fn a_session_holds_at_most_its_background_processes() {
    let ws = Workspace::new(|builder| builder.bundled(true));
    let host = ws
        .host("allow = [\"terminal:*\"]\nfile.write = [\".\"]")
        .await;
    let (client, _) = crate::mcp::connect(host, None).await;
    let sleep = || json!({ "command": "sleep 60" });
    for _ in 0..16 {
        crate::sessions::tool(&client, "process_start", sleep()).await;
    }
    let refused = crate::sessions::tool_error(&client, "process_start", sleep()).await;
    assert!(
        refused.contains("16 background processes, the most it keeps"),
        "{refused}"
    );
    client.cancel().await.unwrap();
}
