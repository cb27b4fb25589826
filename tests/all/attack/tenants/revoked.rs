//! An approvals event stream lasts as long as the token it was opened
//! with: a reload that changes the approver token or a tenant's token (or
//! removes the tenant) ends the streams opened with the old one, which
//! would otherwise go on showing every later approval (the approver's:
//! every tenant's command lines); so it does an MCP session's event stream.
//! A stream whose token still holds goes on.

use std::time::Duration;

use reqwest::StatusCode;

use super::served::{Served, sha256_hex};
use super::{A, B, config};

const APPROVER: &str = "approver-token";

fn with_approver(token: &str, a_token: &str) -> String {
    config("", "")
        .replace(
            "timeout = \"60s\"",
            &format!(
                "timeout = \"60s\"\napprover_token_sha256 = \"{}\"",
                sha256_hex(token)
            ),
        )
        .replace(&sha256_hex(A), &sha256_hex(a_token))
}

/// Reads `stream` until it ends (`None`: still open after `wait`) or its
/// text so far holds `needle` (`Some(text)`).
async fn read_until(
    stream: &mut reqwest::Response,
    needle: &str,
    wait: Duration,
) -> Option<(bool, String)> {
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, stream.chunk()).await {
            Err(_) => return None,
            Ok(Ok(Some(chunk))) => {
                text.push_str(&String::from_utf8_lossy(&chunk));
                if !needle.is_empty() && text.contains(needle) {
                    return Some((false, text));
                }
            }
            Ok(Ok(None)) | Ok(Err(_)) => return Some((true, text)),
        }
    }
}

#[tokio::test]
async fn a_reload_that_revokes_a_token_ends_the_event_streams_opened_with_it() {
    crate::use_launcher();
    let mut served = Served::start(&with_approver(APPROVER, A), &["a", "b"]);
    let (client, url) = (
        served.client.clone(),
        format!("{}/v1/approvals/events", served.base),
    );
    let open = |token: &'static str| client.get(&url).bearer_auth(token).send();
    let mut approver = open(APPROVER).await.unwrap();
    let mut a = open(A).await.unwrap();
    let mut b = open(B).await.unwrap();
    for stream in [&approver, &a, &b] {
        assert_eq!(stream.status(), StatusCode::OK);
    }
    // The approver's token and a's change; b's does not.
    std::fs::write(
        served.root.join("toolhost.toml"),
        with_approver("approver-token-2", "a-token-2"),
    )
    .unwrap();
    served.wait_for("tenants reloaded");
    for (name, stream) in [("approver", &mut approver), ("a", &mut a)] {
        let ended = read_until(stream, "", Duration::from_secs(10)).await;
        assert!(
            matches!(ended, Some((true, _))),
            "{name}'s stream opened with the old token is still open: {ended:?}"
        );
    }
    // b's stream goes on and sees b's next approval.
    let call = super::write_in_background(&served, B, None, "rotated.txt");
    let id = super::pending(&served, B, 1).await.remove(0);
    let seen = read_until(&mut b, &id, Duration::from_secs(20)).await;
    assert!(matches!(seen, Some((false, _))), "{seen:?}");
    call.abort();
    // The old tokens open nothing now.
    assert_eq!(
        open(APPROVER).await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(open(A).await.unwrap().status(), StatusCode::UNAUTHORIZED);
}

/// An MCP session of `token` (2025-06-18), initialized, and its event
/// stream (`GET /mcp`).
async fn mcp_stream(served: &Served, token: &str) -> reqwest::Response {
    let url = format!("{}/mcp", served.base);
    let post = |body: serde_json::Value, session: Option<String>| {
        super::mcp_request(served, token, session.as_deref(), &body).send()
    };
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let answered = post(init, None).await.unwrap();
    let session = answered
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_string();
    let _ = answered.text().await;
    let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(initialized, Some(session.clone())).await.unwrap();
    let stream = served
        .client
        .get(&url)
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .header("mcp-session-id", session)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    stream
}

#[tokio::test]
async fn a_reload_that_revokes_a_token_ends_the_mcp_streams_opened_with_it() {
    crate::use_launcher();
    let mut served = Served::start(&with_approver(APPROVER, A), &["a", "b"]);
    let mut a = mcp_stream(&served, A).await;
    let mut b = mcp_stream(&served, B).await;
    std::fs::write(
        served.root.join("toolhost.toml"),
        with_approver(APPROVER, "a-token-2"),
    )
    .unwrap();
    served.wait_for("tenants reloaded");
    let ended = read_until(&mut a, "", Duration::from_secs(10)).await;
    assert!(
        matches!(ended, Some((true, _))),
        "a's MCP stream opened with the old token is still open: {ended:?}"
    );
    // b's goes on.
    let still = read_until(&mut b, "", Duration::from_secs(2)).await;
    assert!(still.is_none(), "b's stream ended: {still:?}");
}

#[tokio::test]
async fn a_server_given_tenants_stays_closed_when_a_reload_removes_them_all() {
    crate::use_launcher();
    let with_tenants = config("", "");
    let start = with_tenants.find("[tenants.a]").unwrap();
    let without = &with_tenants[..start];
    let mut served = Served::start(without, &["a", "b"]);
    let status = |served: &Served| {
        let url = format!("{}/v1/tools", served.base);
        let client = served.client.clone();
        async move { client.get(url).send().await.unwrap().status() }
    };
    // Open while no tenant was ever configured (loopback only).
    assert_eq!(status(&served).await, StatusCode::OK);
    std::fs::write(served.root.join("toolhost.toml"), &with_tenants).unwrap();
    served.wait_for("tenants reloaded");
    assert_eq!(status(&served).await, StatusCode::UNAUTHORIZED);
    std::fs::write(served.root.join("toolhost.toml"), without).unwrap();
    served.wait_for("no longer defines any tenant");
    assert_eq!(status(&served).await, StatusCode::UNAUTHORIZED);
}
