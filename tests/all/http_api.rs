//! The OpenAI-style HTTP API and tenants, with a real HTTP client (reqwest)
//! against an in-process server on 127.0.0.1: listings and calls per tenant,
//! authentication, isolation of files and tools, limits, and the safety of
//! the HTTP surface (Host/Origin checks, body size, timeouts, connections).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Digest as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use toolhost::Host;
use toolhost::config::{Config, ConfigSource};
use toolhost::serve::http::{HttpServer, ServeOptions};

fn sha256_hex(token: &str) -> String {
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
    async fn call(&self, token: Option<&str>, tool: &str, arguments: Value) -> Value {
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

fn client() -> reqwest::Client {
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
async fn a_batch_returns_one_result_per_call_in_order() {
    let server = Server::with_tenants().await;
    let request = batch(&[
        ("sleep", json!({"ms": 200})),
        ("echo", json!({"text": "second"})),
        ("fail", json!({})),
        ("nope", json!({})),
        ("echo", json!({"text": "last"})),
    ]);
    let (status, body) = server.post("/v1/tool_calls", ALPHA, &request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let results = body["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 5);
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["tool_call_id"], format!("call_{i}"));
        assert_eq!(result["role"], "tool");
    }
    assert_eq!(results[1]["name"], "echo");
    assert_eq!(content(&body, 0), json!({"slept_ms": 200}));
    assert_eq!(content(&body, 1), json!({"text": "second"}));
    assert!(
        content(&body, 2)["error"]
            .as_str()
            .unwrap()
            .starts_with("tool_error: "),
        "{body}"
    );
    assert!(
        content(&body, 3)["error"]
            .as_str()
            .unwrap()
            .starts_with("unknown_tool: "),
        "{body}"
    );
    assert_eq!(content(&body, 4), json!({"text": "last"}));

    // The audit log names the tenant of each call.
    let audit = std::fs::read_to_string(server.root.join("audit.jsonl")).unwrap();
    let echo = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["tool"] == "echo")
        .unwrap();
    assert_eq!(echo["tenant"], "alpha", "{echo}");
    assert_eq!(echo["profile"], "reader", "{echo}");
}

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
async fn a_tenant_over_its_concurrency_limit_waits_without_slowing_others() {
    let server = Server::with_tenants().await;
    // Alpha may run one call at a time: its second call waits for the first.
    let started = Instant::now();
    let server = &server;
    let alpha = |delay: u64| async move {
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let result = server.call(ALPHA, "sleep", json!({"ms": 800})).await;
        (result, Instant::now())
    };
    // Beta's calls meanwhile are not held up by alpha's queue.
    let beta = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        for _ in 0..5 {
            let result = server.call(BETA, "echo", json!({"text": "b"})).await;
            assert_eq!(result, json!({"text": "b"}));
        }
        Instant::now()
    };
    let ((first, _), (second, second_done), beta_done) = tokio::join!(alpha(0), alpha(100), beta);
    assert_eq!(first, json!({"slept_ms": 800}));
    assert_eq!(second, json!({"slept_ms": 800}));
    assert!(
        second_done - started >= Duration::from_millis(1600),
        "alpha's calls overlapped: {:?}",
        second_done - started
    );
    assert!(beta_done < second_done, "beta waited for alpha's queue");
}

#[tokio::test]
async fn a_call_that_waits_longer_than_its_time_limit_for_a_slot_is_refused() {
    let server = Server::with_tenants().await;
    let slow = Some("slow-token");
    let server = &server;
    // One slot, 1 s calls: the first times out at 1 s, the second (sent at
    // 0.3 s) then gets the slot until 2 s, and the third (sent at 0.6 s)
    // gives up waiting at 1.6 s.
    let after = |ms: u64| async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        server
            .post(
                "/v1/tool_calls",
                slow,
                &batch(&[("sleep", json!({"ms": 5000}))]),
            )
            .await
    };
    let (a, b, c) = tokio::join!(after(0), after(300), after(600));
    let (status, body) = c;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    let error = error_text(&body);
    assert!(
        error.starts_with("busy: tenant \"slow\" is at its limit of 1 concurrent call"),
        "{error}"
    );
    assert!(
        content(&body, 0)["error"]
            .as_str()
            .unwrap()
            .starts_with("busy: ")
    );
    for (status, body) in [a, b] {
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(
            content(&body, 0)["error"]
                .as_str()
                .unwrap()
                .starts_with("timeout: "),
            "{body}"
        );
    }
}

#[tokio::test]
async fn a_tenant_over_its_rate_limit_is_refused_with_429() {
    let server = Server::with_tenants().await;
    let delta = Some("delta-token");
    let three = batch(&[
        ("echo", json!({"text": "1"})),
        ("echo", json!({"text": "2"})),
        ("echo", json!({"text": "3"})),
    ]);
    // Two calls per minute: in a batch of three, one is refused.
    let (status, body) = server.post("/v1/tool_calls", delta, &three).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let busy = (0..3)
        .filter(|&i| {
            content(&body, i)["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("busy: "))
        })
        .count();
    assert_eq!(busy, 1, "{body}");
    // Nothing left: the whole request is refused.
    let response = server
        .client
        .post(server.url("/v1/tool_calls"))
        .bearer_auth("delta-token")
        .header("content-type", "application/json")
        .body(batch(&[("echo", json!({"text": "4"}))]).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers().get("retry-after").unwrap(),
        "30",
        "{response:?}"
    );
    let (status, body) = parse(response).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        error_text(&body).contains("limited to 2 calls per minute"),
        "{body}"
    );
    // Other tenants are not affected.
    assert_eq!(
        server.call(GAMMA, "echo", json!({"text": "g"})).await,
        json!({"text": "g"})
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
async fn bad_requests_get_json_errors_with_fitting_statuses() {
    let server = Server::start(
        &tenants_config(),
        ServeOptions {
            max_body: 2048,
            max_calls: 3,
            ..ServeOptions::default()
        },
    )
    .await;
    let post = |body: String, content_type: &'static str| {
        server
            .client
            .post(server.url("/v1/tool_calls"))
            .bearer_auth("alpha-token")
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let cases: Vec<(String, &str, StatusCode, &str)> = vec![
        (
            "{not json".into(),
            "application/json",
            StatusCode::BAD_REQUEST,
            "invalid_json: ",
        ),
        (
            "{}".into(),
            "application/json",
            StatusCode::BAD_REQUEST,
            "invalid_request: ",
        ),
        (
            r#"{"tool_calls": [], "session": 7}"#.into(),
            "application/json",
            StatusCode::BAD_REQUEST,
            "invalid_request: ",
        ),
        (
            batch(&vec![("echo", json!({})); 4]).to_string(),
            "application/json",
            StatusCode::BAD_REQUEST,
            "invalid_request: 4 tool calls",
        ),
        (
            batch(&[("echo", json!({}))]).to_string(),
            "text/plain",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type: ",
        ),
        (
            batch(&[("echo", json!({"text": "x".repeat(3000)}))]).to_string(),
            "application/json",
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large: ",
        ),
    ];
    for (body, content_type, expected, prefix) in cases {
        let (status, reply) = parse(post(body.clone(), content_type).await.unwrap()).await;
        assert_eq!(status, expected, "{body:.80}: {reply}");
        assert!(error_text(&reply).starts_with(prefix), "{reply}");
    }
    // A well-formed batch with a malformed entry is fine: the entry fails.
    let (status, body) = server
        .post(
            "/v1/tool_calls",
            ALPHA,
            &json!({"tool_calls": [{"id": "x"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        content(&body, 0)["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid_request: "),
        "{body}"
    );

    let (status, body) = server.get("/v1/nope", ALPHA).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(error_text(&body).starts_with("not_found: "), "{body}");
    let response = server
        .client
        .get(server.url("/v1/tool_calls"))
        .bearer_auth("alpha-token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers().get("allow").unwrap(), "POST");
    let (status, body) = parse(response).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        error_text(&body).starts_with("method_not_allowed: "),
        "{body}"
    );
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_even_without_a_length() {
    let server = Server::start(
        &tenants_config(),
        ServeOptions {
            max_body: 1024,
            ..ServeOptions::default()
        },
    )
    .await;
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = "POST /v1/tool_calls HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer alpha-token\r\n\
                content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = format!("{:x}\r\n{}\r\n", 600, " ".repeat(600));
    for _ in 0..3 {
        // The server may answer (and close) before every chunk is sent.
        let _ = stream.write_all(chunk.as_bytes()).await;
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut reply)).await;
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    assert!(reply.contains("payload_too_large: "), "{reply}");
}

#[tokio::test]
async fn a_batch_takes_its_session_from_the_field_or_the_header() {
    let server = Server::with_tenants().await;
    let mut request = batch(&[("echo", json!({"text": "s"}))]);
    request["session"] = json!("s1");
    let response = server
        .client
        .post(server.url("/v1/tool_calls"))
        .bearer_auth("alpha-token")
        .header("content-type", "application/json")
        .header("toolhost-session", "s2")
        .body(request.to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = parse(response).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(error_text(&body).contains("differ"), "{body}");
    let (status, body) = server.post("/v1/tool_calls", ALPHA, &request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
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
    assert!(error.contains("configure [tenants.NAME]"), "{error}");
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
