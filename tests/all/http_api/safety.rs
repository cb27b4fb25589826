//! The safety of the HTTP surface: tokens, loopback-only serving without
//! tenants, Host and Origin checks, connection caps.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use toolhost::Host;
use toolhost::config::{Config, ConfigSource};
use toolhost::serve::http::{HttpServer, ServeOptions};

use super::{OPEN_CONFIG, Server, batch, error_text, parse, tenants_config};

#[tokio::test]
async fn requests_without_a_valid_token_are_unauthorized() {
    let server = Server::with_tenants().await;
    let attempts: [(&str, Option<&str>); 6] = [
        ("missing", None),
        ("wrong", Some("Bearer not-a-token")),
        ("another scheme", Some("Basic YWxwaGE6YWxwaGEtdG9rZW4=")),
        ("no token", Some("Bearer")),
        ("no scheme", Some("alpha-token")),
        ("two words", Some("Bearer alpha-token extra")),
    ];
    for path in ["/v1/tools", "/v1/status", "/v1/nope", "/mcp"] {
        for (what, header) in attempts {
            let mut request = server.client.get(server.url(path));
            if let Some(header) = header {
                request = request.header("authorization", header);
            }
            let response = request.send().await.unwrap();
            let challenge = response
                .headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap().to_string());
            let (status, body) = parse(response).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{path} {what}: {body}");
            assert!(
                challenge.as_deref().unwrap_or("").starts_with("Bearer"),
                "{path} {what}: {challenge:?}"
            );
            let text = error_text(&body);
            assert!(text.starts_with("unauthorized: "), "{text}");
            for tenant in ["alpha", "beta", "gamma", "delta", "slow"] {
                assert!(!text.contains(tenant), "{text} hints at {tenant}");
            }
        }
    }
    let (status, body) = server
        .post(
            "/v1/tool_calls",
            Some("wrong"),
            &batch(&[("echo", json!({"text": "x"}))]),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    // Health needs no token (for load balancers) and says nothing more.
    let (status, body) = server.get("/v1/health", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"status": "ok"}));
}

#[tokio::test]
async fn without_tenants_the_default_profile_is_served_on_loopback_only() {
    let server = Server::start(OPEN_CONFIG, ServeOptions::default()).await;
    let names = server.tool_names(None).await;
    assert!(names.contains(&"read".to_string()), "{names:?}");
    assert_eq!(
        server
            .call(None, "read", json!({"path": "local.txt"}))
            .await,
        json!({"ok": "the operator's file"})
    );

    let root = tempfile::tempdir().unwrap();
    let open = Config::parse(OPEN_CONFIG, ConfigSource::Embedded, root.path()).unwrap();
    let host = Host::builder()
        .config(&open)
        .unwrap()
        .build()
        .await
        .unwrap();
    let error = HttpServer::bind(host.clone(), "0.0.0.0:0", ServeOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("refusing to listen on 0.0.0.0:0"),
        "{error}"
    );
    assert!(
        error.contains("create a toolhost.toml with [tenants.NAME]"),
        "{error}"
    );
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    assert!(HttpServer::from_listener(host, listener, ServeOptions::default()).is_err());

    // With tenants, any address is fine.
    let config = Config::parse(&tenants_config(), ConfigSource::Embedded, root.path()).unwrap();
    let host = Host::builder()
        .config(&config)
        .unwrap()
        .build()
        .await
        .unwrap();
    let server = HttpServer::bind(host, "0.0.0.0:0", ServeOptions::default())
        .await
        .unwrap();
    assert!(server.requires_tokens());
}

#[tokio::test]
async fn foreign_hosts_and_origins_are_refused() {
    let server = Server::start(OPEN_CONFIG, ServeOptions::default()).await;
    let get = |host: Option<&'static str>, origin: Option<&'static str>| {
        let mut request = server.client.get(server.url("/v1/tools"));
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        async move { parse(request.send().await.unwrap()).await }
    };
    // A page that rebinds evil.example to 127.0.0.1, and a page elsewhere.
    let (status, body) = get(Some("evil.example:8080"), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(error_text(&body).starts_with("forbidden: "), "{body}");
    let (status, body) = get(None, Some("https://evil.example")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _) = get(None, Some("null")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // The same on /mcp.
    let response = server
        .client
        .post(server.url("/mcp"))
        .header("origin", "https://evil.example")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    // Local pages and non-browser clients are fine.
    let (status, _) = get(Some("localhost:1234"), Some("http://localhost:5173")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = get(None, Some("http://127.0.0.1:8000")).await;
    assert_eq!(status, StatusCode::OK);

    // An operator can allow another origin.
    let server = Server::start(
        OPEN_CONFIG,
        ServeOptions {
            allowed_origins: vec!["https://app.example.com".into()],
            ..ServeOptions::default()
        },
    )
    .await;
    let response = server
        .client
        .get(server.url("/v1/health"))
        .header("origin", "https://app.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn idle_connections_give_way_and_busy_ones_cap_connections() {
    let server = Server::start(
        OPEN_CONFIG,
        ServeOptions {
            header_timeout: Duration::from_secs(30),
            max_connections: 1,
            ..ServeOptions::default()
        },
    )
    .await;
    // F9: a client that never finishes its headers holds the only slot, and
    // a flood of them waits behind it; a real request still gets in, by
    // closing the oldest connection that has sent nothing.
    let mut slowloris = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    slowloris
        .write_all(b"GET /v1/health HTTP/1.1\r\nhost: lo")
        .await
        .unwrap();
    let mut flood = Vec::new();
    for _ in 0..200 {
        flood.push(tokio::net::TcpStream::connect(server.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    let (status, _) = tokio::time::timeout(Duration::from_secs(20), server.get("/v1/health", None))
        .await
        .expect("the request got in well before the 30 s header timeout");
    assert_eq!(status, StatusCode::OK);
    assert!(started.elapsed() < Duration::from_secs(20));
    let mut buf = Vec::new();
    let closed =
        tokio::time::timeout(Duration::from_secs(5), slowloris.read_to_end(&mut buf)).await;
    assert!(closed.is_ok(), "the idle connection was not closed");
    drop(flood);

    // A connection serving a request is never closed for room: the next one
    // waits until it is done.
    let busy = {
        let server = &server;
        async move {
            server
                .post(
                    "/v1/tool_calls",
                    None,
                    &batch(&[("sleep", json!({"ms": 700}))]),
                )
                .await
        }
    };
    let waiting = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let started = Instant::now();
        let (status, _) = server.get("/v1/health", None).await;
        (status, started.elapsed())
    };
    let ((busy_status, _), (status, waited)) = tokio::join!(busy, waiting);
    assert_eq!(busy_status, StatusCode::OK);
    assert_eq!(status, StatusCode::OK);
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
}
