//! What a request body becomes in the server while its calls run: a
//! `/v1/tool_calls` body padded with millions of tiny JSON values (in a
//! field no batch has) is not built into a value tree, so a tenant's slow
//! calls hold about their bodies' size, not sixteen times it.

use std::time::{Duration, Instant};

use serde_json::json;

use super::served::resident;
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

#[tokio::test]
async fn padded_bodies_are_not_built_while_their_calls_run() {
    let served = start("");
    let body = padded(2_000_000);
    assert!(body.len() < 4 << 20);
    let before = resident(served.pid());
    let posts: Vec<_> = (0..8)
        .map(|_| {
            let request = served
                .client
                .post(format!("{}/v1/tool_calls", served.base))
                .bearer_auth(A)
                .header("content-type", "application/json")
                .body(body.clone());
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
    for post in posts {
        assert!(post.await.unwrap().is_success());
    }
    let grown = peak.saturating_sub(before);
    // Eight bodies of 4 MB: built as values they held over 500 MB.
    assert!(grown < 160 << 20, "the server grew by {} MiB", grown >> 20);
}
