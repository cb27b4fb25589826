//! The `network:fetch` permission (undeclared, denied, refused through
//! the SDK) and the audit log of each hop.

use axum::http::StatusCode;
use serde_json::{Value, json};
use toolhost::ErrorKind;
use toolhost::audit::AuditLog;

use super::{allowing, builder, call, error, fetch, get, host, listener, redirector, server};
use crate::Buffer;

#[tokio::test]
async fn a_tool_that_did_not_declare_network_fetch_is_refused_at_use() {
    let (addr, log) = server().await;
    let host = host("allow = [\"network:*\"]\nnetwork.allow_hosts = [\"127.0.0.1\"]").await;
    let message = error(
        &call(
            &host,
            "sneaky_fetch",
            json!({ "url": format!("http://{addr}/hello") }),
        )
        .await,
        "denied",
    );
    assert!(
        message.contains("tool \"sneaky_fetch\" of plugin \"fetcher\""),
        "{message}"
    );
    assert!(
        message.contains("does not declare the permission \"network:fetch\""),
        "{message}"
    );
    assert!(log.lock().unwrap().is_empty());
    // The declaring tool works under the same profile.
    assert_eq!(
        get(&host, &format!("http://{addr}/hello")).await["status"],
        200
    );
}

#[tokio::test]
async fn a_profile_that_denies_network_hides_the_tool_and_refuses_the_import() {
    let (addr, log) = server().await;
    let host =
        host("allow = [\"*\"]\ndeny = [\"network:*\"]\nnetwork.allow_hosts = [\"127.0.0.1\"]")
            .await;
    let url = format!("http://{addr}/hello");
    let error_ = host.call("fetch", json!({ "url": url })).await.unwrap_err();
    assert_eq!(error_.kind(), ErrorKind::Unavailable, "{error_}");

    let message = error(
        &call(&host, "sneaky_fetch", json!({ "url": url })).await,
        "denied",
    );
    assert!(
        message.contains("profile \"p\" does not allow it"),
        "{message}"
    );
    assert!(message.contains("deny rule \"network:*\""), "{message}");
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_refusal_becomes_a_denied_tool_error_through_the_sdk() {
    let (addr, _) = server().await;
    let host = host(&allowing("\"example.com\"")).await;
    let error = host
        .call(
            "fetch_text",
            json!({ "url": format!("http://{addr}/hello") }),
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Denied, "{error}");
    assert!(error.message().contains("network.allow_hosts"), "{error}");

    let open = self::host(&allowing("\"127.0.0.1\"")).await;
    let text = call(
        &open,
        "fetch_text",
        json!({ "url": format!("http://{addr}/hello") }),
    )
    .await;
    assert_eq!(text["text"], "hello from the test server");
}

/// An audit sink the test can read back.
#[tokio::test]
async fn the_audit_log_records_each_hop_without_secrets() {
    let (target, _) = server().await;
    let first = redirector(
        listener().await,
        StatusCode::FOUND,
        format!("http://{target}/hello?next=s3cret-query"),
    )
    .await;
    let buffer = Buffer::default();
    let host = builder(&format!(
        "allow = [\"network:*\"]\nnetwork.allow_hosts = [\"127.0.0.1:{}\"]",
        first.port()
    ))
    .audit(AuditLog::writer(buffer.clone()))
    .build()
    .await
    .unwrap();

    // 1: allowed first hop, refused redirect hop.
    fetch(
        &host,
        json!({
            "url": format!("http://{first}/start?token=s3cret-query"),
            "headers": [["Authorization", "Bearer s3cret-header"]],
            "body": "s3cret-body",
        }),
    )
    .await;
    // 2: a tool without the permission.
    call(
        &host,
        "sneaky_fetch",
        json!({ "url": format!("http://{first}/x?s3cret-query") }),
    )
    .await;
    // 3: a host not allowed.
    get(&host, "http://example.com/?q=s3cret-query").await;

    let text = buffer.text();
    assert!(!text.contains("s3cret"), "{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    let uses = |line: &Value| -> Vec<Value> {
        line["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|used| used["capability"] == "http")
            .cloned()
            .collect()
    };

    let first_call = uses(&lines[0]);
    assert_eq!(lines[0]["tool"], "fetch");
    assert_eq!(first_call.len(), 2, "{first_call:?}");
    assert_eq!(first_call[0]["target"], format!("GET http://{first}/start"));
    assert_eq!(first_call[0]["allowed"], true);
    assert_eq!(
        first_call[1]["target"],
        format!("GET http://{target}/hello")
    );
    assert_eq!(first_call[1]["allowed"], false);
    let reason = first_call[1]["reason"].as_str().unwrap();
    assert!(reason.contains("network.allow_hosts"), "{reason}");

    let sneaky = uses(&lines[1]);
    assert_eq!(lines[1]["tool"], "sneaky_fetch");
    assert_eq!(sneaky.len(), 1);
    assert_eq!(sneaky[0]["target"], format!("GET http://{first}/x"));
    assert_eq!(sneaky[0]["allowed"], false);
    assert!(
        sneaky[0]["reason"]
            .as_str()
            .unwrap()
            .contains("does not declare the permission \"network:fetch\"")
    );

    let refused = uses(&lines[2]);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["target"], "GET http://example.com/");
    assert_eq!(refused[0]["allowed"], false);
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .contains("host \"example.com\" is not in the profile's network.allow_hosts")
    );
}
