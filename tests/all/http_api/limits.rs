//! Per-tenant limits: concurrency, waiting for a slot, calls per minute.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use super::{ALPHA, BETA, GAMMA, Server, batch, content, error_text, parse};

#[tokio::test]
async fn a_tenant_over_its_concurrency_limit_waits_without_slowing_others() {
    let server = Server::with_tenants().await;
    // Alpha may run one call at a time: its second call waits for the first.
    let started = Instant::now();
    let server = &server;
    let alpha = |delay: u64| async move {
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let result = server.call(ALPHA, "sleep", json!({"ms": 800})).await;
        (result, Instant::now())
    };
    // Beta's calls meanwhile are not held up by alpha's queue.
    let beta = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        for _ in 0..5 {
            let result = server.call(BETA, "echo", json!({"text": "b"})).await;
            assert_eq!(result, json!({"text": "b"}));
        }
        Instant::now()
    };
    let ((first, _), (second, second_done), beta_done) = tokio::join!(alpha(0), alpha(100), beta);
    assert_eq!(first, json!({"slept_ms": 800}));
    assert_eq!(second, json!({"slept_ms": 800}));
    assert!(
        second_done - started >= Duration::from_millis(1600),
        "alpha's calls overlapped: {:?}",
        second_done - started
    );
    assert!(beta_done < second_done, "beta waited for alpha's queue");
}

#[tokio::test]
async fn a_call_that_waits_longer_than_its_time_limit_for_a_slot_is_refused() {
    let server = Server::with_tenants().await;
    let slow = Some("slow-token");
    let server = &server;
    // One slot, 1 s calls: the first times out at 1 s, the second (sent at
    // 0.3 s) then gets the slot until 2 s, and the third (sent at 0.6 s)
    // gives up waiting at 1.6 s.
    let after = |ms: u64| async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        server
            .post(
                "/v1/tool_calls",
                slow,
                &batch(&[("sleep", json!({"ms": 5000}))]),
            )
            .await
    };
    let (a, b, c) = tokio::join!(after(0), after(300), after(600));
    let (status, body) = c;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    let error = error_text(&body);
    assert!(
        error.starts_with("busy: tenant \"slow\" is at its limit of 1 concurrent call"),
        "{error}"
    );
    assert!(
        content(&body, 0)["error"]
            .as_str()
            .unwrap()
            .starts_with("busy: ")
    );
    for (status, body) in [a, b] {
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(
            content(&body, 0)["error"]
                .as_str()
                .unwrap()
                .starts_with("timeout: "),
            "{body}"
        );
    }
}

#[tokio::test]
async fn a_tenant_over_its_rate_limit_is_refused_with_429() {
    let server = Server::with_tenants().await;
    let delta = Some("delta-token");
    let three = batch(&[
        ("echo", json!({"text": "1"})),
        ("echo", json!({"text": "2"})),
        ("echo", json!({"text": "3"})),
    ]);
    // Two calls per minute: in a batch of three, one is refused.
    let (status, body) = server.post("/v1/tool_calls", delta, &three).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let busy = (0..3)
        .filter(|&i| {
            content(&body, i)["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("busy: "))
        })
        .count();
    assert_eq!(busy, 1, "{body}");
    // Nothing left: the whole request is refused.
    let response = server
        .client
        .post(server.url("/v1/tool_calls"))
        .bearer_auth("delta-token")
        .header("content-type", "application/json")
        .body(batch(&[("echo", json!({"text": "4"}))]).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers().get("retry-after").unwrap(),
        "30",
        "{response:?}"
    );
    let (status, body) = parse(response).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        error_text(&body).contains("limited to 2 calls per minute"),
        "{body}"
    );
    // Other tenants are not affected.
    assert_eq!(
        server.call(GAMMA, "echo", json!({"text": "g"})).await,
        json!({"text": "g"})
    );
}
