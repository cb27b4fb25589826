//! Requests to an allowed host, malformed requests and failed connections.

use axum::http::Method;
use serde_json::json;

use super::{allowing, error, fetch, get, host, listener, server};

#[tokio::test]
async fn an_allowed_get_returns_status_headers_and_body() {
    let (addr, log) = server().await;
    let host = host(&allowing("\"127.0.0.1\"")).await;
    let outcome = get(&host, &format!("http://{addr}/hello")).await;
    assert_eq!(outcome["status"], 200, "{outcome}");
    assert_eq!(outcome["body"], "hello from the test server");
    assert_eq!(outcome["headers"]["x-test"], "yes");
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, Method::GET);
    assert!(
        seen[0].headers["user-agent"]
            .to_str()
            .unwrap()
            .starts_with("toolhost/")
    );

    let missing = get(&host, &format!("http://{addr}/missing")).await;
    assert_eq!(missing["status"], 404, "{missing}");
}

#[tokio::test]
async fn an_allowed_post_delivers_method_headers_and_body() {
    let (addr, log) = server().await;
    let host = host(&allowing(&format!("\"127.0.0.1:{}\"", addr.port()))).await;
    let outcome = fetch(
        &host,
        json!({
            "url": format!("http://{addr}/echo?x=1"),
            "method": "POST",
            "headers": [["X-Custom", "abc"], ["Content-Type", "text/plain"], ["User-Agent", "fetcher"]],
            "body": "the payload",
        }),
    )
    .await;
    assert_eq!(outcome["status"], 201, "{outcome}");
    assert_eq!(outcome["body"], "the payload");
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, Method::POST);
    assert_eq!(seen[0].path, "/echo");
    assert_eq!(seen[0].headers["x-custom"], "abc");
    assert_eq!(seen[0].headers["content-type"], "text/plain");
    assert_eq!(seen[0].headers["user-agent"], "fetcher");
    assert_eq!(seen[0].headers["host"], addr.to_string().as_str());
    assert_eq!(&seen[0].body[..], b"the payload");
}

#[tokio::test]
async fn malformed_requests_are_invalid() {
    let (addr, log) = server().await;
    let host = host(&allowing("\"127.0.0.1\"")).await;
    let url = format!("http://{addr}/hello");
    let cases = [
        (json!({ "url": "ftp://127.0.0.1/file" }), "scheme \"ftp\""),
        (json!({ "url": "not a url" }), "not a valid absolute"),
        (
            json!({ "url": url, "method": "GE T" }),
            "not a valid HTTP method",
        ),
        (
            json!({ "url": url, "headers": [["X-A", "1\r\nX-Injected: 2"]] }),
            "control characters",
        ),
        (
            json!({ "url": url, "headers": [["Host", "metadata.internal"]] }),
            "must name the url's host",
        ),
        (
            json!({ "url": format!("http://user:pw@{addr}/") }),
            "credentials",
        ),
    ];
    for (arguments, expected) in cases {
        let message = error(&fetch(&host, arguments.clone()).await, "invalid_request");
        assert!(message.contains(expected), "{arguments}: {message}");
    }
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_connection_failure_is_failed() {
    // Bind, learn the port, close: nothing listens there.
    let closed = listener().await.local_addr().unwrap();
    let host = host(&allowing("\"127.0.0.1\"")).await;
    let message = error(
        &get(&host, &format!("http://{closed}/?k=s3cret")).await,
        "failed",
    );
    assert!(message.contains(&format!("http://{closed}/")), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
}
