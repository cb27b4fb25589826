//! Redirects: followed to allowed hosts, refused at a hop that is not,
//! and capped by the profile.

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::{allowing, error, fetch, get, host, listener, redirector, server};

#[tokio::test]
async fn a_redirect_to_an_allowed_host_is_followed() {
    let (target, log) = server().await;
    let first = listener().await;
    let first = redirector(
        first,
        StatusCode::SEE_OTHER,
        format!("http://{target}/hello"),
    )
    .await;
    let host = host(&allowing("\"127.0.0.1\"")).await;
    let outcome = fetch(
        &host,
        json!({
            "url": format!("http://{first}/form"),
            "method": "POST",
            "headers": [["Authorization", "Bearer t0ken"], ["X-Api-Key", "k3y"], ["Accept", "text/plain"]],
            "body": "form data",
        }),
    )
    .await;
    assert_eq!(outcome["status"], 200, "{outcome}");
    assert_eq!(outcome["body"], "hello from the test server");
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    // 303: the POST became a GET without body; another origin: no credentials.
    assert_eq!(seen[0].method, Method::GET);
    assert!(seen[0].body.is_empty());
    // Another origin: credentials, and any header of the tool's own naming
    // (an API key, say), stay behind.
    assert!(seen[0].headers.get("authorization").is_none());
    assert!(seen[0].headers.get("x-api-key").is_none());
    assert_eq!(seen[0].headers["accept"], "text/plain");
}

#[tokio::test]
async fn a_temporary_redirect_keeps_method_and_body() {
    let (target, log) = server().await;
    let first = redirector(
        listener().await,
        StatusCode::TEMPORARY_REDIRECT,
        format!("http://{target}/echo"),
    )
    .await;
    let host = host(&allowing("\"127.0.0.1\"")).await;
    let outcome = fetch(
        &host,
        json!({ "url": format!("http://{first}/"), "method": "PUT", "body": "kept body" }),
    )
    .await;
    assert_eq!(outcome["status"], 201, "{outcome}");
    assert_eq!(outcome["body"], "kept body");
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen[0].method, Method::PUT);
    assert_eq!(&seen[0].body[..], b"kept body");
}

#[tokio::test]
async fn a_redirect_to_a_host_that_is_not_allowed_is_refused_at_the_hop() {
    let (target, log) = server().await;
    let first = listener().await;
    let first_port = first.local_addr().unwrap().port();
    let profile = allowing(&format!("\"127.0.0.1:{first_port}\", \"localhost\""));

    // To another port of the same address: that port is not listed.
    let to_port = redirector(
        first,
        StatusCode::FOUND,
        format!("http://{target}/hello?secret=1"),
    )
    .await;
    let host = host(&profile).await;
    let message = error(
        &get(&host, &format!("http://{to_port}/start")).await,
        "denied",
    );
    assert!(
        message.contains(&format!("GET http://{target}/hello refused")),
        "{message}"
    );
    assert!(
        message.contains(&format!("port {}", target.port())),
        "{message}"
    );
    assert!(!message.contains("secret"), "{message}");

    // To a name that is allowed but resolves to loopback: refused on the
    // address, checked again at the hop.
    let second = listener().await;
    let second_port = second.local_addr().unwrap().port();
    let to_name = redirector(
        second,
        StatusCode::FOUND,
        format!("http://localhost:{}/hello", target.port()),
    )
    .await;
    let host = self::host(&allowing(&format!(
        "\"127.0.0.1:{second_port}\", \"localhost\""
    )))
    .await;
    let message = error(
        &get(&host, &format!("http://{to_name}/start")).await,
        "denied",
    );
    assert!(
        message.contains("of host \"localhost\" is loopback"),
        "{message}"
    );
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn redirects_stop_at_the_profile_limit() {
    let first = listener().await;
    let addr = first.local_addr().unwrap();
    let looping = redirector(first, StatusCode::FOUND, format!("http://{addr}/again")).await;
    let host = host(&format!(
        "{}\nnetwork.max_redirects = 2",
        allowing("\"127.0.0.1\"")
    ))
    .await;
    let message = error(&get(&host, &format!("http://{looping}/")).await, "failed");
    assert!(message.contains("too many redirects"), "{message}");
    assert!(message.contains("network.max_redirects is 2"), "{message}");
}
