//! An approvals event stream lasts as long as the token it was opened
//! with: a reload that changes the approver token or a tenant's token (or
//! removes the tenant) ends the streams opened with the old one, which
//! would otherwise go on showing every later approval (the approver's:
//! every tenant's command lines). A stream whose token still holds goes on.

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
