//! MCP with a real MCP client (rmcp): over an in-process stdio-like pipe,
//! over Streamable HTTP, and over stdio with the `toolhost` binary.

use std::path::Path;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ErrorData, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use toolhost::Host;
use toolhost::WatchOptions;
use toolhost::serve::mcp::{McpHttp, McpServer, http_service};

/// A client that reports `tools/list_changed` and answers elicitations.
pub(crate) struct TestClient {
    changed: mpsc::UnboundedSender<()>,
    /// The decision to answer with; `None`: the client cannot elicit.
    decision: Option<&'static str>,
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.decision.is_some() {
            capabilities.elicitation = Some(ElicitationCapability::default());
        }
        let mut config = ClientConfig::default();
        config.capabilities = capabilities;
        config
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.changed.send(());
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let _ = request;
        Ok(match self.decision {
            Some(decision) => ElicitResult::new(ElicitationAction::Accept)
                .with_content(json!({ "decision": decision })),
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }
}

pub(crate) type Client = RunningService<RoleClient, TestClient>;

/// A client connected to an in-process MCP server on `host` through a pipe,
/// exactly as over stdio.
pub(crate) async fn connect(
    host: Host,
    decision: Option<&'static str>,
) -> (Client, mpsc::UnboundedReceiver<()>) {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let server = McpServer::new(host);
    tokio::spawn(async move {
        let running = server.serve(tokio::io::split(server_io)).await.unwrap();
        let _ = running.waiting().await;
    });
    let (changed, receiver) = mpsc::unbounded_channel();
    let client = TestClient { changed, decision }
        .serve(tokio::io::split(client_io))
        .await
        .unwrap();
    (client, receiver)
}

/// A client of the `toolhost` process `command` starts, over its stdio.
pub(crate) async fn stdio(command: tokio::process::Command) -> Client {
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let (changed, _) = mpsc::unbounded_channel();
    TestClient {
        changed,
        decision: None,
    }
    .serve(transport)
    .await
    .unwrap()
}

pub(crate) fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(name.to_string());
    params.arguments = arguments.as_object().cloned();
    params
}

pub(crate) fn text(result: &rmcp::model::CallToolResult) -> String {
    result.content[0]
        .as_text()
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

async fn bundled() -> Host {
    Host::builder()
        .bundled(true)
        .plugin_file(toolhost_tests::MISBEHAVE)
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn list_and_call_tools_over_a_pipe() {
    let (client, _) = connect(bundled().await, None).await;
    let tools = client.list_all_tools().await.unwrap();
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(
        echo.description.as_deref(),
        Some("Echo the text back, optionally upper-cased and repeated.")
    );
    assert_eq!(echo.input_schema["type"], "object");
    let annotations = echo.annotations.as_ref().unwrap();
    assert_eq!(annotations.read_only_hint, Some(true));
    assert_eq!(annotations.destructive_hint, Some(false));

    let result = client
        .call_tool(call("echo", json!({"text": "hi", "upper": true})))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true));
    assert_eq!(text(&result), r#"{"text":"HI"}"#);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_failing_tool_is_an_error_result_and_an_unknown_tool_a_protocol_error() {
    let (client, _) = connect(bundled().await, None).await;
    let failed = client.call_tool(call("fail", json!({}))).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(
        text(&failed),
        "tool_error: tool \"fail\" (plugin \"misbehave\"): the fail tool failed on purpose"
    );
    let invalid = client
        .call_tool(call("echo", json!({"text": 5})))
        .await
        .unwrap();
    assert_eq!(invalid.is_error, Some(true));
    assert!(
        text(&invalid).starts_with("invalid_arguments: "),
        "{}",
        text(&invalid)
    );

    let unknown = client.call_tool(call("nope", json!({}))).await.unwrap_err();
    let message = unknown.to_string();
    assert!(message.contains("no tool named \"nope\""), "{message}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_replaced_plugin_file_sends_list_changed_and_the_new_list() {
    let dir = tempfile::tempdir().unwrap();
    let host = Host::builder().bundled(true).build().await.unwrap();
    let _watcher = host
        .watch(
            dir.path(),
            None,
            WatchOptions {
                debounce: Duration::from_millis(50),
                grace: Duration::from_secs(5),
            },
        )
        .unwrap();
    let (client, mut changed) = connect(host, None).await;
    let before = client.list_all_tools().await.unwrap();
    assert!(!before.iter().any(|t| t.name == "which"));

    install(dir.path(), "flip.wasm", toolhost_tests::FLIP_A);
    tokio::time::timeout(Duration::from_secs(20), changed.recv())
        .await
        .expect("no list_changed notification")
        .unwrap();
    let after = client.list_all_tools().await.unwrap();
    assert!(after.iter().any(|t| t.name == "which"), "{after:?}");
    let result = client.call_tool(call("which", json!({}))).await.unwrap();
    assert!(text(&result).contains("\"version\":\"a\""));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_toolhost_binary_serves_mcp_over_stdio() {
    use rmcp::transport::TokioChildProcess;
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    std::fs::copy(toolhost_tests::MISBEHAVE, plugins.join("misbehave.wasm")).unwrap();
    std::fs::write(
        dir.path().join("toolhost.toml"),
        "plugins = \"plugins\"\ndefault_profile = \"p\"\naudit = \"off\"\n[profiles.p]\n",
    )
    .unwrap();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolhost-cli"));
    command
        .arg("--config")
        .arg(dir.path().join("toolhost.toml"))
        .arg("serve")
        .env_remove("RUST_LOG")
        .stderr(std::process::Stdio::null());
    let transport = TokioChildProcess::new(command).unwrap();
    let (changed, mut changed_rx) = mpsc::unbounded_channel();
    let client = TestClient {
        changed,
        decision: None,
    }
    .serve(transport)
    .await
    .unwrap();
    let info = client.peer_info().unwrap();
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("toolhost")
    );

    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
    assert!(tools.iter().any(|t| t.name == "fail"), "{tools:?}");
    let result = client
        .call_tool(call("echo", json!({"text": "over stdio"})))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true));
    assert_eq!(text(&result), r#"{"text":"over stdio"}"#);

    let failed = client.call_tool(call("fail", json!({}))).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert!(
        text(&failed).starts_with("tool_error: "),
        "{}",
        text(&failed)
    );
    let unknown = client.call_tool(call("nope", json!({}))).await.unwrap_err();
    assert!(
        unknown.to_string().contains("no tool named \"nope\""),
        "{unknown}"
    );

    // A plugin dropped into the served directory: list_changed, then the new list.
    install(&plugins, "flip.wasm", toolhost_tests::FLIP_B);
    tokio::time::timeout(Duration::from_secs(20), changed_rx.recv())
        .await
        .expect("no list_changed notification")
        .unwrap();
    let after = client.list_all_tools().await.unwrap();
    assert!(after.iter().any(|t| t.name == "which"), "{after:?}");
    let which = client.call_tool(call("which", json!({}))).await.unwrap();
    assert!(
        text(&which).contains("\"version\":\"b\""),
        "{}",
        text(&which)
    );
    client.cancel().await.unwrap();
}

fn install(dir: &Path, name: &str, wasm: &str) {
    let staging = dir.join(format!(".{name}.partial"));
    std::fs::copy(wasm, &staging).unwrap();
    std::fs::rename(&staging, dir.join(name)).unwrap();
}

async fn approval_host(workspace: &Path) -> Host {
    std::fs::write(workspace.join("notes.txt"), "hello").unwrap();
    let profile = crate::profile(
        r#"
        allow = ["file:read"]
        approval_required = ["file:read"]
        file.read = ["."]
        "#,
        workspace,
    );
    Host::builder()
        .plugin_file(toolhost_tests::FILES)
        .profile(profile)
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn approvals_are_asked_through_elicitation() {
    let dir = tempfile::tempdir().unwrap();
    let (client, _) = connect(approval_host(dir.path()).await, Some("once")).await;
    let result = client
        .call_tool(call("read", json!({"path": "notes.txt"})))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    assert_eq!(text(&result), r#"{"ok":"hello"}"#);

    let dir = tempfile::tempdir().unwrap();
    let (client, _) = connect(approval_host(dir.path()).await, Some("deny")).await;
    let result = client
        .call_tool(call("read", json!({"path": "notes.txt"})))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).starts_with("denied: "), "{}", text(&result));
}

#[tokio::test]
async fn without_elicitation_approval_required_calls_are_denied_with_how_to_allow_them() {
    let dir = tempfile::tempdir().unwrap();
    let (client, _) = connect(approval_host(dir.path()).await, None).await;
    let result = client
        .call_tool(call("read", json!({"path": "notes.txt"})))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    let message = text(&result);
    assert!(
        message.contains("does not support elicitation"),
        "{message}"
    );
    assert!(message.contains("approval_required"), "{message}");
}

/// Serves MCP over Streamable HTTP on `host`, on a port of its own; the
/// `/mcp` URL.
pub(crate) async fn serve_http(host: Host) -> String {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let service = http_service(
        host,
        McpHttp {
            allowed_hosts: vec!["127.0.0.1".into(), "localhost".into()],
            allowed_origins: vec!["http://localhost:*".into()],
            cancel: Default::default(),
            abandon: Default::default(),
            max_body: 1 << 20,
        },
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}/mcp")
}

/// An rmcp client of `url` over Streamable HTTP.
pub(crate) async fn http_client(url: &str) -> Client {
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_string());
    let (changed, _receiver) = mpsc::unbounded_channel();
    TestClient {
        changed,
        decision: None,
    }
    .serve(transport)
    .await
    .unwrap()
}

#[tokio::test]
async fn list_and_call_over_streamable_http() {
    let url = serve_http(bundled().await).await;
    let client = http_client(&url).await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "word_count"));
    let result = client
        .call_tool(call("word_count", json!({"text": "a b c"})))
        .await
        .unwrap();
    let counts: Value = serde_json::from_str(&text(&result)).unwrap();
    assert_eq!(counts["words"], 3);
    let failed = client.call_tool(call("crash", json!({}))).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert!(text(&failed).starts_with("trap: "), "{}", text(&failed));
    client.cancel().await.unwrap();

    // A browser page from another origin is refused (DNS-rebinding protection).
    let response = reqwest::Client::new()
        .post(&url)
        .header("origin", "http://evil.example")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403, "{:?}", response.text().await);
}
