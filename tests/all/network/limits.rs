//! Size and time caps: large responses, slow servers, stalled bodies.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::{allowing, error, fetch, get, host, raw_server, server};

#[tokio::test]
async fn a_response_over_the_size_limit_is_refused() {
    let (addr, _) = server().await;
    let host = host(&format!(
        "{}\nnetwork.max_response = \"1KiB\"",
        allowing("\"127.0.0.1\"")
    ))
    .await;
    // Announced length over the limit.
    let outcome = get(&host, &format!("http://{addr}/big")).await;
    error(&outcome, "too_large");
    assert_eq!(outcome["limit"], 1024);
    // Exactly the limit is fine.
    let outcome = get(&host, &format!("http://{addr}/exact")).await;
    assert_eq!(outcome["body_bytes"], 1024, "{outcome}");

    // An endless chunked body: cut at the limit, not read to the end.
    let endless = raw_server(|mut stream| async move {
        let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        if stream.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let chunk = format!("400\r\n{}\r\n", "z".repeat(0x400));
        while stream.write_all(chunk.as_bytes()).await.is_ok() {}
    })
    .await;
    let outcome = get(&host, &format!("http://{endless}/")).await;
    error(&outcome, "too_large");
}

#[tokio::test]
async fn a_slow_server_runs_into_the_profile_timeout() {
    let (addr, _) = server().await;
    let host = host(&format!(
        "{}\nnetwork.timeout = \"200ms\"",
        allowing("\"127.0.0.1\"")
    ))
    .await;
    let started = Instant::now();
    // The guest asks for more; the profile's limit wins.
    let outcome = fetch(
        &host,
        json!({ "url": format!("http://{addr}/slow"), "timeout_ms": 60_000 }),
    )
    .await;
    error(&outcome, "timeout");
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[tokio::test]
async fn the_guest_timeout_covers_a_stalled_body() {
    // Headers at once, then half the body, then nothing.
    let stalled = raw_server(|mut stream| async move {
        let response = "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf.";
        if stream.write_all(response.as_bytes()).await.is_ok() {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    })
    .await;
    let host = host(&allowing("\"127.0.0.1\"")).await;
    let started = Instant::now();
    let outcome = fetch(
        &host,
        json!({ "url": format!("http://{stalled}/"), "timeout_ms": 150 }),
    )
    .await;
    error(&outcome, "timeout");
    assert!(started.elapsed() < Duration::from_secs(4));
}
