//! The OpenAI-style HTTP API and tenants, with a real HTTP client (reqwest)
//! against an in-process server on 127.0.0.1: listings and calls per tenant,
//! authentication, isolation of files and tools, limits, and the safety of
//! the HTTP surface (Host/Origin checks, body size, timeouts, connections).

mod approvals;
mod limits;
mod requests;
mod safety;
mod tasks;
mod tenants;

use std::net::SocketAddr;
use std::path::PathBuf;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Digest as _;
use toolhost::Host;
use toolhost::config::{Config, ConfigSource};
use toolhost::serve::http::{HttpServer, ServeOptions};

pub(crate) fn sha256_hex(token: &str) -> String {
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Two profiles (`reader` reads its workspace, `plain` has no permission)
/// and tenants using them: `alpha` and `beta` read their own workspaces,
/// `gamma` is plain, `delta` is rate limited, `slow` has short calls and
/// one call at a time.
fn tenants_config() -> String {
    format!(
        r#"
default_profile = "reader"
audit = "audit.jsonl"

[profiles.reader]
allow = ["file:read"]
file.read = ["."]
limits = {{ timeout = "5s" }}

[profiles.plain]
deny = ["file:*"]

[profiles.short]
limits = {{ timeout = "1s" }}

[tenants.alpha]
token_sha256 = "{alpha}"
profile = "reader"
workspace = "alpha"
concurrency = 1

[tenants.beta]
token_sha256 = "{beta}"
profile = "reader"
workspace = "beta"

[tenants.gamma]
token_sha256 = "{gamma}"
profile = "plain"
workspace = "gamma"

[tenants.delta]
token_sha256 = "{delta}"
profile = "plain"
calls_per_minute = 2

[tenants.slow]
token_sha256 = "{slow}"
profile = "short"
concurrency = 1
"#,
        alpha = sha256_hex("alpha-token"),
        beta = sha256_hex("beta-token"),
        gamma = sha256_hex("gamma-token"),
        delta = sha256_hex("delta-token"),
        slow = sha256_hex("slow-token"),
    )
}

/// No tenants: the default profile, loopback only.
pub(crate) const OPEN_CONFIG: &str = r#"
default_profile = "reader"
[profiles.reader]
allow = ["file:read"]
file.read = ["."]
"#;

pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    root: PathBuf,
    pub(crate) client: reqwest::Client,
    _dir: tempfile::TempDir,
    _task: tokio::task::JoinHandle<()>,
}

impl Server {
    pub(crate) async fn start(config: &str, options: ServeOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for (workspace, file, text) in [
            ("alpha", "secret.txt", "alpha's secret"),
            ("beta", "notes.txt", "beta's notes"),
            ("gamma", "notes.txt", "gamma's notes"),
        ] {
            std::fs::create_dir_all(root.join(workspace)).unwrap();
            std::fs::write(root.join(workspace).join(file), text).unwrap();
        }
        std::fs::write(root.join("local.txt"), "the operator's file").unwrap();
        let config = Config::parse(config, ConfigSource::Embedded, &root).unwrap();
        let host = Host::builder()
            .config(&config)
            .unwrap()
            .plugin_file(toolhost_tests::FILES)
            .plugin_file(toolhost_tests::MISBEHAVE)
            .build()
            .await
            .unwrap();
        let server = HttpServer::bind(host, "127.0.0.1:0", options)
            .await
            .unwrap();
        let addr = server.local_addr();
        let task = tokio::spawn(async move {
            server.run(std::future::pending()).await.unwrap();
        });
        Self {
            addr,
            root,
            client: client(),
            _dir: dir,
            _task: task,
        }
    }

    async fn with_tenants() -> Self {
        Self::start(&tenants_config(), ServeOptions::default()).await
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn get(&self, path: &str, token: Option<&str>) -> (StatusCode, Value) {
        let mut request = self.client.get(self.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        parse(request.send().await.unwrap()).await
    }

    async fn post(&self, path: &str, token: Option<&str>, body: &Value) -> (StatusCode, Value) {
        let mut request = self
            .client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        parse(request.send().await.unwrap()).await
    }

    /// Runs one call as `token`; returns the parsed tool result content.
    pub(crate) async fn call(&self, token: Option<&str>, tool: &str, arguments: Value) -> Value {
        let (status, body) = self
            .post("/v1/tool_calls", token, &batch(&[(tool, arguments)]))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        content(&body, 0)
    }

    /// The tool names `token` is offered.
    async fn tool_names(&self, token: Option<&str>) -> Vec<String> {
        let (status, body) = self.get("/v1/tools", token).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        names(&body)
    }
}

pub(crate) fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

pub(crate) async fn parse(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("not JSON ({e}), status {status}: {text:?}"));
    (status, body)
}

fn batch(calls: &[(&str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (tool, arguments))| {
            json!({
                "id": format!("call_{i}"),
                "type": "function",
                "function": { "name": tool, "arguments": arguments.to_string() },
            })
        })
        .collect();
    json!({ "tool_calls": calls })
}

/// The parsed `content` of result `index`.
fn content(body: &Value, index: usize) -> Value {
    let text = body["tool_results"][index]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no result {index}: {body}"));
    serde_json::from_str(text).unwrap()
}

fn names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools array: {body}"))
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn error_text(body: &Value) -> &str {
    body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error: {body}"))
}

const ALPHA: Option<&str> = Some("alpha-token");
const BETA: Option<&str> = Some("beta-token");
const GAMMA: Option<&str> = Some("gamma-token");
