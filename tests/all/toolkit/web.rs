//! The `web` toolset against a local server.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};
use serde_json::{Value, json};
use toolhost::ErrorKind;

use super::{assert_contains, bundled, fails, ok};
use crate::Workspace;

const PAGE: &str = r#"<!doctype html>
<html><head><title>Toolkit &amp; Tests</title><style>p { color: red }</style></head>
<body><nav><a href="/">Home</a></nav>
<main><h1>Hello</h1><p>The <a href="docs/guide.html">guide</a> explains it.</p>
<ul><li>first</li><li>second</li></ul><script>alert(1)</script></main>
<footer>Copyright</footer></body></html>"#;

/// A server on 127.0.0.1: `/data.json`, `/echo` (POST, 201 with the body
/// and content-type it got), `/page.html`, `/logo.png`; anything else 404.
async fn web_server() -> SocketAddr {
    let router = Router::new()
        .route(
            "/data.json",
            get(|| async { axum::Json(json!({"items": [{"id": 1}, {"id": 2}]})) }),
        )
        .route(
            "/echo",
            post(|headers: HeaderMap, body: Bytes| async move {
                let content_type = headers
                    .get(header::CONTENT_TYPE)
                    .cloned()
                    .unwrap_or(header::HeaderValue::from_static("text/plain"));
                (
                    StatusCode::CREATED,
                    [(header::CONTENT_TYPE, content_type)],
                    body,
                )
            }),
        )
        .route("/page.html", get(|| async { Html(PAGE) }))
        .route(
            "/logo.png",
            get(|| async { ([(header::CONTENT_TYPE, "image/png")], vec![0x89u8, b'P', 0]) }),
        )
        .fallback(|| async { (StatusCode::NOT_FOUND, "no such page").into_response() });
    crate::network::serve(crate::network::listener().await, router).await
}

/// Fetching from 127.0.0.1 only (loopback must be listed explicitly).
const WEB: &str = r#"
allow = ["network:fetch"]
network.allow_hosts = ["127.0.0.1"]
"#;

#[tokio::test]
async fn http_request_reaches_an_allowed_host() {
    let addr = web_server().await;
    let ws = Workspace::new(bundled);
    let host = ws.host(WEB).await;

    let got = ok(
        &host,
        "http_request",
        json!({"url": format!("http://{addr}/data.json")}),
    )
    .await;
    assert_eq!(got["status"], 200);
    assert_eq!(got["ok"], true);
    assert_eq!(got["body"], json!({"items": [{"id": 1}, {"id": 2}]}));
    assert_eq!(got["content_type"], "application/json");

    let posted = ok(
        &host,
        "http_request",
        json!({"url": format!("http://{addr}/echo"), "method": "POST", "json": {"name": "x"}}),
    )
    .await;
    assert_eq!(posted["status"], 201);
    assert_eq!(posted["body"], json!({"name": "x"}));

    let text = ok(
        &host,
        "http_request",
        json!({
            "url": format!("http://{addr}/echo"),
            "method": "POST",
            "body": "0123456789",
            "headers": {"content-type": "text/plain"},
            "max_bytes": 4,
        }),
    )
    .await;
    assert_eq!(text["body"], "0123");
    assert_eq!(text["truncated"], true);
    assert_eq!(text["body_bytes"], 10);

    let missing = ok(
        &host,
        "http_request",
        json!({"url": format!("http://{addr}/nope")}),
    )
    .await;
    assert_eq!(
        (missing["status"].clone(), missing["ok"].clone()),
        (json!(404), json!(false))
    );

    let image = ok(
        &host,
        "http_request",
        json!({"url": format!("http://{addr}/logo.png")}),
    )
    .await;
    assert_eq!(image["body"], Value::Null);
    assert_contains(
        image["note"].as_str().unwrap(),
        "binary body (3 bytes of image/png)",
    );
}

#[tokio::test]
async fn web_tools_are_denied_hosts_the_profile_does_not_allow() {
    let addr = web_server().await;
    let ws = Workspace::new(bundled);
    let host = ws.host(WEB).await;
    for url in [
        "http://example.invalid/".to_string(),
        format!("http://localhost:{}/data.json", addr.port()),
    ] {
        let message = fails(
            &host,
            "http_request",
            json!({ "url": url }),
            ErrorKind::Denied,
        )
        .await;
        assert_contains(&message, "network.allow_hosts");
        let message = fails(
            &host,
            "web_extract",
            json!({ "url": url }),
            ErrorKind::Denied,
        )
        .await;
        assert_contains(&message, "network.allow_hosts");
    }
    // A wildcard does not open loopback.
    let wildcard = ws
        .host("allow = [\"network:fetch\"]\nnetwork.allow_hosts = [\"*\"]")
        .await;
    let message = fails(
        &wildcard,
        "http_request",
        json!({"url": format!("http://{addr}/data.json")}),
        ErrorKind::Denied,
    )
    .await;
    assert_contains(&message, "is loopback");

    let offline = ws.host("allow = [\"file:read\"]").await;
    for tool in ["http_request", "web_extract"] {
        let message = fails(
            &offline,
            tool,
            json!({"url": format!("http://{addr}/data.json")}),
            ErrorKind::Unavailable,
        )
        .await;
        assert_contains(&message, "network:fetch");
    }
}

#[tokio::test]
async fn web_extract_returns_readable_markdown_or_text_with_absolute_links() {
    let addr = web_server().await;
    let ws = Workspace::new(bundled);
    let host = ws.host(WEB).await;
    let url = format!("http://{addr}/page.html");

    let page = ok(&host, "web_extract", json!({ "url": url })).await;
    assert_eq!(page["title"], "Toolkit & Tests");
    assert_eq!(
        page["content"],
        format!(
            "# Hello\n\nThe [guide](http://{addr}/docs/guide.html) explains it.\n\n- first\n- second"
        )
    );
    assert_eq!(page["truncated"], false);

    let text = ok(
        &host,
        "web_extract",
        json!({"url": url, "format": "text", "max_length": 12}),
    )
    .await;
    assert_eq!(text["content"], "Hello\n\nThe g");
    assert_eq!(text["truncated"], true);
    assert_eq!(
        text["links"],
        json!([{"text": "guide", "url": format!("http://{addr}/docs/guide.html")}])
    );

    let message = fails(
        &host,
        "web_extract",
        json!({"url": format!("http://{addr}/nope")}),
        ErrorKind::ToolFailed,
    )
    .await;
    assert_contains(&message, "answered with status 404");
    let message = fails(
        &host,
        "web_extract",
        json!({"url": format!("http://{addr}/logo.png")}),
        ErrorKind::InvalidArguments,
    )
    .await;
    assert_contains(&message, "is not a web page");
}
