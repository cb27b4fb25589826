//! `/mcp` over real HTTP against an in-process server: malformed and
//! oversized bodies get JSON-RPC errors with fitting statuses, closing an
//! unknown session is 404 (a known one 204, which the official Python SDK
//! closes without a warning), and SSE priming events go only to sessions of
//! protocol versions that define them.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use toolhost::serve::http::ServeOptions;

use crate::http_api::{OPEN_CONFIG, Server, parse};

/// An in-process server of the default profile, and `/mcp` on it.
pub(crate) struct Mcp {
    base: String,
    pub(crate) server: Server,
}

impl Mcp {
    pub(crate) async fn start(options: ServeOptions) -> Self {
        let server = Server::start(OPEN_CONFIG, options).await;
        Self {
            base: server.url("/mcp"),
            server,
        }
    }

    pub(crate) fn post(
        &self,
        session: Option<&str>,
        body: impl Into<reqwest::Body>,
    ) -> reqwest::RequestBuilder {
        let mut request = self
            .server
            .client
            .post(&self.base)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request
    }

    /// Opens a session of `version`; its id and the initialize response's
    /// raw body.
    pub(crate) async fn open(&self, version: &str) -> (String, String) {
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}});
        let response = self
            .post(None, initialize.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let session = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let body = response.text().await.unwrap();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let mut request = self.post(Some(&session), initialized.to_string());
        if version >= "2025-06-18" {
            request = request.header("mcp-protocol-version", version);
        }
        let done = request.send().await.unwrap();
        assert!(done.status().is_success(), "{:?}", done.text().await);
        (session, body)
    }
}

fn error_of(body: &Value) -> (Value, i64) {
    assert_eq!(body["jsonrpc"], json!("2.0"), "{body}");
    (
        body.get("id")
            .cloned()
            .unwrap_or_else(|| panic!("no id: {body}")),
        body["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("not an error: {body}")),
    )
}

#[tokio::test]
async fn malformed_bodies_are_400_with_a_json_rpc_error() {
    let mcp = Mcp::start(ServeOptions::default()).await;
    let (status, body) = parse(mcp.post(None, "garbage").send().await.unwrap()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&body), (Value::Null, -32700));
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let (status, body) = parse(mcp.post(None, deep).send().await.unwrap()).await;
    assert_eq!(
        (status, error_of(&body).1),
        (StatusCode::BAD_REQUEST, -32700)
    );

    let (status, body) = parse(
        mcp.post(None, r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&body), (json!(3), -32600));

    // Params that do not fit, in a session: invalid params, with the id.
    let (session, _) = mcp.open("2025-06-18").await;
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "echo", "arguments": [1, 2]}});
    let (_, body) = parse(
        mcp.post(Some(&session), call.to_string())
            .header("mcp-protocol-version", "2025-06-18")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(error_of(&body), (json!(4), -32602));
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_with_a_json_rpc_error() {
    let options = ServeOptions {
        max_body: 1024,
        ..ServeOptions::default()
    };
    let mcp = Mcp::start(options).await;
    let big =
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "a".repeat(4096)}})
            .to_string();
    // With a declared length...
    let (status, body) = parse(mcp.post(None, big.clone()).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(error_of(&body), (Value::Null, -32600));
    // ...and streamed in chunks without one.
    let addr = mcp
        .base
        .trim_start_matches("http://")
        .trim_end_matches("/mcp");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = "POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
                accept: application/json, text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    for part in big.as_bytes().chunks(600) {
        // The server may answer (and close) before every chunk is sent.
        let _ = stream
            .write_all(format!("{:x}\r\n", part.len()).as_bytes())
            .await;
        let _ = stream.write_all(part).await;
        let _ = stream.write_all(b"\r\n").await;
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut reply)).await;
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or_default();
    let body: Value =
        serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {reply}"));
    assert_eq!(error_of(&body), (Value::Null, -32600));
}

#[tokio::test]
async fn closing_a_session_is_204_and_an_unknown_one_404() {
    let mcp = Mcp::start(ServeOptions::default()).await;
    let (session, _) = mcp.open("2025-06-18").await;
    let close = |id: String| {
        mcp.server
            .client
            .delete(&mcp.base)
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-06-18")
            .send()
    };
    assert_eq!(
        close("no-such-session".into()).await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    // 200 or 204: clients (the official Python SDK) report 202 as a failed
    // termination.
    let closed = close(session.clone()).await.unwrap();
    assert_eq!(closed.status(), StatusCode::NO_CONTENT);
    assert!(closed.bytes().await.unwrap().is_empty());
    // Once closed, it is unknown too.
    assert_eq!(
        close(session).await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
}

/// Whether an SSE body holds a priming event (an id and a retry, no data).
fn primed(sse: &str) -> bool {
    sse.lines().any(|line| line.starts_with("retry:"))
}

#[tokio::test]
async fn priming_events_go_only_to_sessions_of_versions_that_define_them() {
    let mcp = Mcp::start(ServeOptions::default()).await;
    for (version, expected) in [
        ("2025-03-26", false),
        ("2025-06-18", false),
        ("2025-11-25", true),
    ] {
        let (session, initialized) = mcp.open(version).await;
        assert_eq!(primed(&initialized), expected, "{version}: {initialized:?}");
        assert!(initialized.contains("\"result\""), "{initialized}");

        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let mut request = mcp.post(Some(&session), list.to_string());
        if version >= "2025-06-18" {
            request = request.header("mcp-protocol-version", version);
        }
        let listed = request.send().await.unwrap().text().await.unwrap();
        assert!(listed.contains("\"tools\""), "{listed}");
        assert_eq!(primed(&listed), expected, "{version}: {listed:?}");

        // The standalone stream: primed at once, or silent.
        let mut request = mcp
            .server
            .client
            .get(&mcp.base)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session);
        if version >= "2025-06-18" {
            request = request.header("mcp-protocol-version", version);
        }
        let mut stream = request.send().await.unwrap();
        assert_eq!(stream.status(), StatusCode::OK);
        let first = tokio::time::timeout(Duration::from_millis(500), stream.chunk()).await;
        let first = first
            .ok()
            .and_then(|chunk| chunk.ok().flatten())
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
        assert_eq!(
            first.as_deref().is_some_and(primed),
            expected,
            "{version}: {first:?}"
        );
    }
}

/// The official Python SDK (`mcp`, installed in `target/python-venv` by
/// `.ci/run`) opens a session, calls a tool and closes the session with a
/// `DELETE` it accepts: it logs no warning.
#[tokio::test]
async fn the_python_sdk_closes_a_session_without_a_warning() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join("target/python-venv/bin/python3");
    let mcp = Mcp::start(ServeOptions::default()).await;
    let output = tokio::process::Command::new(&python)
        .arg(root.join("tests/all/mcp_sdk_session.py"))
        .arg(&mcp.base)
        .env("NO_PROXY", "*")
        .output()
        .await
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("No module named 'mcp'"),
        "the official SDK is missing: run `target/python-venv/bin/pip install mcp==2.3.0`, as \
         .ci/run does"
    );
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.starts_with("tools ")
            && stdout.ends_with("read {\"ok\":\"the operator's file\"}\nclosed\n"),
        "{stdout}"
    );
    assert!(!stderr.contains("WARNING"), "{stderr}");
}
