//! What each tenant is offered and may reach: tools, files, status and MCP
//! sessions.

use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use toolhost::serve::http::ServeOptions;

use super::{ALPHA, BETA, GAMMA, OPEN_CONFIG, Server, error_text, names};

#[tokio::test]
async fn each_tenant_is_offered_the_tools_of_its_profile() {
    let server = Server::with_tenants().await;
    let alpha = server.tool_names(ALPHA).await;
    let gamma = server.tool_names(GAMMA).await;
    for tool in ["read", "list", "sleep", "echo"] {
        assert!(alpha.contains(&tool.to_string()), "{tool} in {alpha:?}");
    }
    assert!(gamma.contains(&"sleep".to_string()), "{gamma:?}");
    assert!(
        !gamma.iter().any(|t| t == "read" || t == "list"),
        "{gamma:?}"
    );
    assert_ne!(alpha, gamma);

    // The OpenAI shape, and the toolset / disable / strict parameters.
    let (status, body) = server.get("/v1/tools?toolset=misbehave", ALPHA).await;
    assert_eq!(status, StatusCode::OK);
    let tools = body["tools"].as_array().unwrap();
    assert!(tools.iter().all(|t| t["type"] == "function"), "{body}");
    assert!(names(&body).contains(&"sleep".to_string()));
    assert!(!names(&body).contains(&"read".to_string()));
    let (_, body) = server.get("/v1/tools?disable=files,misbehave", ALPHA).await;
    assert!(!names(&body).iter().any(|t| t == "read" || t == "sleep"));
    let (_, body) = server
        .get("/v1/tools?toolset=files&strict=true", ALPHA)
        .await;
    let read = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "read")
        .unwrap();
    assert_eq!(read["function"]["strict"], true, "{read}");

    let (status, body) = server.get("/v1/tools?toolset=nope", ALPHA).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_text(&body).starts_with("invalid_request: "), "{body}");
    let (status, body) = server.get("/v1/tools?colour=red", ALPHA).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_text(&body).contains("\"colour\""), "{body}");
}

#[tokio::test]
async fn a_tenant_reads_only_its_own_workspace() {
    let server = Server::with_tenants().await;
    let alpha_secret = server.root.join("alpha/secret.txt");
    let read = |path: &Path| json!({ "path": path.to_string_lossy() });

    assert_eq!(
        server
            .call(ALPHA, "read", json!({"path": "secret.txt"}))
            .await,
        json!({"ok": "alpha's secret"})
    );
    assert_eq!(
        server.call(ALPHA, "read", read(&alpha_secret)).await,
        json!({"ok": "alpha's secret"})
    );
    assert_eq!(
        server
            .call(BETA, "read", json!({"path": "notes.txt"}))
            .await,
        json!({"ok": "beta's notes"})
    );
    // Beta, with the same profile, cannot reach alpha's files by any path.
    for path in [
        alpha_secret.to_string_lossy().into_owned(),
        "../alpha/secret.txt".into(),
        "secret.txt".into(),
        server.root.join("local.txt").to_string_lossy().into_owned(),
    ] {
        let result = server.call(BETA, "read", json!({ "path": path })).await;
        let error = result["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{path}: {result}"));
        assert!(
            error == "permission_denied" || error == "not_found",
            "{path}: {result}"
        );
    }
    // Gamma's profile offers no file tools: hidden, and refused when called.
    let result = server
        .call(GAMMA, "read", json!({"path": "notes.txt"}))
        .await;
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .starts_with("unavailable: "),
        "{result}"
    );
}

#[tokio::test]
async fn status_shows_plugins_versions_calls_in_flight_and_the_callers_view() {
    let server = Server::start(OPEN_CONFIG, ServeOptions::default()).await;
    let slow = server.call(None, "sleep", json!({"ms": 1500}));
    let status = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        server.get("/v1/status", None).await
    };
    let (_, (code, body)) = tokio::join!(slow, status);
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ok");
    assert_eq!(body["caller"]["tenant"], Value::Null);
    assert_eq!(body["caller"]["profile"], "reader");
    assert_eq!(body["in_flight"], 1, "{body}");
    let plugins = body["plugins"].as_array().unwrap();
    let misbehave = plugins.iter().find(|p| p["plugin"] == "misbehave").unwrap();
    assert_eq!(misbehave["in_flight"], 1);
    assert_eq!(
        misbehave["version"].as_str().unwrap().len(),
        64,
        "{misbehave}"
    );
    assert!(
        misbehave["source"]
            .as_str()
            .unwrap()
            .ends_with("misbehave.wasm")
    );
    assert!(body["load_errors"].as_array().unwrap().is_empty());

    // A tenant sees only the plugins and tools its profile offers it.
    let server = Server::with_tenants().await;
    let (_, body) = server.get("/v1/status", GAMMA).await;
    assert_eq!(body["caller"]["tenant"], "gamma", "{body}");
    let plugins = body["plugins"].as_array().unwrap();
    let files = plugins.iter().find(|p| p["plugin"] == "files").unwrap();
    assert_eq!(files["tools"], json!(["sneaky_read"]), "{body}");
    assert!(plugins.iter().all(|p| p.get("source").is_none()), "{body}");
}

#[tokio::test]
async fn an_mcp_session_is_unknown_to_every_other_tenant() {
    let server = Server::with_tenants().await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let post = |token: &str, session: Option<&str>, body: &Value| {
        let mut request = server
            .client
            .post(server.url("/mcp"))
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .json(body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let opened = post("alpha-token", None, &initialize).await.unwrap();
    assert_eq!(opened.status(), StatusCode::OK);
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    post("alpha-token", Some(&session), &initialized)
        .await
        .unwrap();

    // Another tenant can neither post into the session nor close it.
    let intruder = post("beta-token", Some(&session), &list).await.unwrap();
    assert_eq!(intruder.status(), StatusCode::NOT_FOUND);
    let closed = server
        .client
        .delete(server.url("/mcp"))
        .bearer_auth("beta-token")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), StatusCode::NOT_FOUND);

    // Its owner still uses it.
    let listed = post("alpha-token", Some(&session), &list).await.unwrap();
    assert_eq!(listed.status(), StatusCode::OK);
    let body = listed.text().await.unwrap();
    assert!(body.contains("\"tools\""), "{body}");
}
