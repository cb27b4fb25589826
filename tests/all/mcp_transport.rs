//! The transport rules of MCP 2026-07-28 through a real server: the error
//! of an unsupported protocol version (HTTP and stdio), `Mcp-Method` and
//! `Mcp-Name` checked against the body (and not asked of legacy sessions),
//! and `tools/list`'s cache hints (`cacheScope: "private"`, `ttlMs` from
//! `[mcp] tools_ttl`), and the server card (public, the same for every
//! caller). Reloads reaching listeners are
//! `mcp_handles::a_reload_reaches_a_client_without_a_session_on_its_listen_stream`.

use base64::Engine as _;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::mcp_handles::{ALPHA, Served, serve};

/// The `_meta` of a 2026-07-28 request naming `version`.
fn meta(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    })
}

/// POSTs `body` to `/mcp` as alpha with `headers`; the status and answer.
async fn post(served: &Served, headers: &[(&str, &str)], body: Value) -> (StatusCode, Value) {
    let mut request = crate::http_api::client()
        .post(&served.url)
        .bearer_auth(ALPHA)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    crate::http_api::parse(request.body(body.to_string()).send().await.unwrap()).await
}

/// A 2026-07-28 `tools/call` of `run_command` (`echo hi`).
fn call() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "run_command", "arguments": {"command": "echo hi"}, "_meta": meta("2026-07-28")}})
}

const MODERN: (&str, &str) = ("mcp-protocol-version", "2026-07-28");

fn header_mismatch(status: StatusCode, answer: &Value) {
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"]["code"], -32020, "{answer}");
}

#[tokio::test]
async fn an_unsupported_version_gets_its_error_over_http() {
    let served = serve("", "").await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                      "params": {"_meta": meta("2099-01-01")}});
    let headers = [
        ("mcp-protocol-version", "2099-01-01"),
        ("mcp-method", "tools/list"),
    ];
    let (status, answer) = post(&served, &headers, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let error = &answer["error"];
    assert_eq!(error["code"], -32022, "{answer}");
    assert_eq!(error["message"], "Unsupported protocol version", "{answer}");
    assert_eq!(error["data"]["requested"], "2099-01-01", "{answer}");
    let supported = error["data"]["supported"].as_array().unwrap();
    assert!(supported.contains(&json!("2026-07-28")), "{answer}");
    assert!(supported.contains(&json!("2025-11-25")), "{answer}");
}

#[tokio::test]
async fn an_unsupported_version_gets_its_error_over_stdio() {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    crate::use_launcher();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolhost.toml");
    std::fs::write(&config, "[profiles.default]\nallow = [\"file:read\"]\n").unwrap();
    let mut child = tokio::process::Command::new(crate::toolhost_cli())
        .args(["serve", "--no-bundled", "--config"])
        .arg(&config)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list",
                      "params": {"_meta": meta("2099-01-01")}});
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(format!("{body}\n").as_bytes())
        .await
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
        .await
        .expect("no answer over stdio")
        .unwrap()
        .unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["error"]["code"], -32022, "{answer}");
    assert_eq!(
        answer["error"]["data"]["requested"], "2099-01-01",
        "{answer}"
    );
}

#[tokio::test]
async fn mcp_method_and_mcp_name_must_match_the_body() {
    let served = serve("", "").await;
    let method = ("mcp-method", "tools/call");
    // A name that is not the body's, or no method at all: refused.
    let (status, answer) = post(&served, &[MODERN, method, ("mcp-name", "foo")], call()).await;
    header_mismatch(status, &answer);
    let (status, answer) = post(&served, &[MODERN, ("mcp-name", "run_command")], call()).await;
    header_mismatch(status, &answer);
    let wrong = ("mcp-method", "tools/list");
    let (status, answer) = post(
        &served,
        &[MODERN, wrong, ("mcp-name", "run_command")],
        call(),
    )
    .await;
    header_mismatch(status, &answer);
    // The name in its base64 form is the same name.
    let encoded = base64::engine::general_purpose::STANDARD.encode("run_command");
    let sentinel = format!("=?base64?{encoded}?=");
    let (status, answer) = post(&served, &[MODERN, method, ("mcp-name", &sentinel)], call()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    // tasks/get names its task in Mcp-Name.
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {
        "taskId": "tk_a", "_meta": meta("2026-07-28")}});
    let headers = [MODERN, ("mcp-method", "tasks/get"), ("mcp-name", "tk_b")];
    let (status, answer) = post(&served, &headers, get).await;
    header_mismatch(status, &answer);
}

#[tokio::test]
async fn a_legacy_session_needs_no_method_or_name_headers() {
    let served = serve("", "").await;
    let client = crate::http_api::client();
    let send = |session: Option<&str>, body: Value| {
        let mut request = client
            .post(&served.url)
            .bearer_auth(ALPHA)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request.body(body.to_string()).send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let opened = send(None, initialize).await.unwrap();
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert!(
        send(Some(&session), initialized)
            .await
            .unwrap()
            .status()
            .is_success()
    );
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "run_command", "arguments": {"command": "echo hi"}}});
    // Answered on the session's event stream.
    let answer = send(Some(&session), call).await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let text = answer.text().await.unwrap();
    assert!(
        text.contains(r#""isError":false"#) && text.contains(r#"\"stdout\":\"hi\\n\""#),
        "{text}"
    );
}

/// `tools/list` as a 2026-07-28 request; its result.
async fn listed(served: &Served) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                      "params": {"_meta": meta("2026-07-28")}});
    let (status, answer) = post(served, &[MODERN, ("mcp-method", "tools/list")], body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["result"].clone()
}

#[tokio::test]
async fn tools_list_is_private_and_fresh_for_tools_ttl() {
    let default = serve("", "").await;
    let result = listed(&default).await;
    assert_eq!(result["cacheScope"], "private", "{result}");
    assert_eq!(result["ttlMs"], 0, "{result}");
    let configured = serve("[mcp]\ntools_ttl = \"90s\"\n", "").await;
    let result = listed(&configured).await;
    assert_eq!(result["cacheScope"], "private", "{result}");
    assert_eq!(result["ttlMs"], 90_000, "{result}");
    // A reload applies at once.
    let file = default.root.join("toolhost.toml");
    std::fs::write(
        &file,
        format!("{}\n[mcp]\ntools_ttl = \"5s\"\n", default.config),
    )
    .unwrap();
    default.host.reload_config(&file).unwrap();
    assert_eq!(listed(&default).await["ttlMs"], 5_000);
}

/// `GET /mcp/server-card` without a token, with `headers`.
async fn card(served: &Served, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = crate::http_api::client().get(served.url.replace("/mcp", "/mcp/server-card"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn the_server_card_is_public_the_same_for_everyone_and_names_no_tenant() {
    let served = serve("", "").await;
    let response = card(&served, &[("accept", "application/mcp-server+json")]).await;
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "application/mcp-server+json");
    assert_eq!(headers["access-control-allow-origin"], "*");
    assert_eq!(headers["cache-control"], "public, max-age=3600");
    let etag = headers["etag"].to_str().unwrap().to_string();
    let text = response.text().await.unwrap();
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        body["$schema"],
        "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
    );
    assert_eq!(body["name"], "dev.toolhost/toolhost", "{body}");
    assert!(
        body["_meta"]["dev.toolhost/experimental"].is_string(),
        "{body}"
    );
    let remote = &body["remotes"][0];
    assert_eq!(remote["type"], "streamable-http", "{body}");
    assert_eq!(remote["headers"][0]["name"], "Authorization", "{body}");
    let versions = remote["supportedProtocolVersions"].as_array().unwrap();
    assert!(versions.contains(&json!("2026-07-28")), "{body}");
    // Nothing of a tenant, its workspace, tools or plugins.
    let root = served.root.display().to_string();
    for private in [
        "alpha",
        "beta",
        "worker",
        "run_command",
        "todo",
        root.as_str(),
    ] {
        assert!(!text.contains(private), "{private:?} in {text}");
    }
    // Another server with other tenants gives the same card.
    let other = serve(
        "[tenants.gamma]\nprofile = \"worker\"\nworkspace = \"alpha\"\ntoken_sha256 = \"GAMMA\"\n",
        "",
    )
    .await;
    assert_eq!(card(&other, &[]).await.text().await.unwrap(), text);
    // Unchanged: 304.
    let again = card(&served, &[("if-none-match", &etag)]).await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    // Any web origin may read it, and only it; the Host allowlist holds.
    let foreign = ("origin", "https://elsewhere.example");
    assert_eq!(card(&served, &[foreign]).await.status(), StatusCode::OK);
    let tools = crate::http_api::client()
        .get(served.url.replace("/mcp", "/v1/tools"))
        .bearer_auth(ALPHA)
        .header(foreign.0, foreign.1)
        .send()
        .await
        .unwrap();
    assert_eq!(tools.status(), StatusCode::FORBIDDEN);
    let rebound = card(&served, &[("host", "attacker.example")]).await;
    assert_eq!(rebound.status(), StatusCode::FORBIDDEN);
}
