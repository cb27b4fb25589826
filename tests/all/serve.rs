//! `toolhost serve` as a process: graceful shutdown on SIGTERM and SIGINT
//! (calls in flight finish, bounded by the drain timeout), hot reload of
//! plugins and tenants while serving, and the refusal to serve a
//! non-loopback address without tenants.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub(crate) const CONFIG: &str = r#"
plugins = "plugins"
default_profile = "p"
audit = "off"

[profiles.p]
limits = { timeout = "10s" }
"#;

/// A config directory with `toolhost.toml` and a `plugins/` directory.
pub(crate) fn workspace(config: &str, plugins: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(root.join("plugins")).unwrap();
    for plugin in plugins {
        let name = Path::new(plugin).file_name().unwrap();
        std::fs::copy(plugin, root.join("plugins").join(name)).unwrap();
    }
    std::fs::write(root.join("toolhost.toml"), config).unwrap();
    (dir, root)
}

/// A running `toolhost serve` and the lines it wrote to stderr.
struct Serving {
    child: Child,
    stderr: mpsc::Receiver<String>,
    log: Vec<String>,
}

impl Serving {
    fn start(root: &Path, args: &[&str]) -> Self {
        let (child, stderr) = toolhost_tests::spawn_piped(
            Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
                .arg("--config")
                .arg(root.join("toolhost.toml"))
                .arg("serve")
                .args(args),
        );
        Self {
            child,
            stderr,
            log: Vec::new(),
        }
    }

    /// Waits for a stderr line containing `needle`.
    fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    self.log.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => break,
            }
        }
        panic!("no {needle:?} on stderr; got:\n{}", self.log.join("\n"));
    }

    /// The `http://IP:PORT` the server announced.
    fn address(&mut self) -> String {
        let line = self.wait_for("serving on http://");
        let start = line.find("http://").unwrap();
        line[start..].split_whitespace().next().unwrap().to_string()
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: sending a signal to our own child process.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    /// Waits up to `limit` for the process to exit.
    async fn exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.log.extend(self.stderr.try_iter());
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "still running after {limit:?}; stderr:\n{}",
                    self.log.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn stdout(&mut self) -> String {
        let mut text = String::new();
        std::io::Read::read_to_string(self.child.stdout.as_mut().unwrap(), &mut text).unwrap();
        text
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

async fn get_json(client: &reqwest::Client, url: &str) -> Option<Value> {
    let response = client.get(url).send().await.ok()?;
    serde_json::from_str(&response.text().await.ok()?).ok()
}

fn one_call(tool: &str, arguments: Value) -> String {
    json!({
        "tool_calls": [{
            "id": "call_0",
            "type": "function",
            "function": { "name": tool, "arguments": arguments.to_string() },
        }]
    })
    .to_string()
}

/// Starts a `sleep` call of `ms` milliseconds and returns once the server
/// reports it in flight.
async fn start_slow_call(
    client: &reqwest::Client,
    base: &str,
    ms: u64,
) -> tokio::task::JoinHandle<Result<(reqwest::StatusCode, String), reqwest::Error>> {
    let call = {
        let client = client.clone();
        let url = format!("{base}/v1/tool_calls");
        tokio::spawn(async move {
            let response = client
                .post(url)
                .header("content-type", "application/json")
                .body(one_call("sleep", json!({ "ms": ms })))
                .send()
                .await?;
            let status = response.status();
            Ok((status, response.text().await?))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = get_json(client, &format!("{base}/v1/status")).await;
        if status.is_some_and(|s| s["in_flight"].as_u64() >= Some(1)) {
            return call;
        }
        assert!(Instant::now() < deadline, "the slow call never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn sigterm_lets_the_call_in_flight_finish_while_health_answers_503() {
    let (_dir, root) = workspace(CONFIG, &[toolhost_tests::MISBEHAVE]);
    let mut server = Serving::start(&root, &["--http", "127.0.0.1:0"]);
    let base = server.address();
    let client = client();
    let call = start_slow_call(&client, &base, 1500).await;

    let signalled = Instant::now();
    server.signal(libc::SIGTERM);
    // While draining, the port stays open: health says 503 as documented,
    // and new requests are refused with 503... (A fresh connection each
    // time: the server closes idle keep-alive ones as it starts draining.)
    let fresh = || {
        reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let response = fresh().get(format!("{base}/v1/health")).send().await;
        if let Ok(response) = response
            && response.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE
        {
            let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
            assert_eq!(body, json!({"status": "shutting_down"}));
            break;
        }
        assert!(Instant::now() < deadline, "health never answered 503");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = fresh()
        .post(format!("{base}/v1/tool_calls"))
        .header("content-type", "application/json")
        .body(one_call("sleep", json!({ "ms": 1 })))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    assert!(refused.text().await.unwrap().contains("shutting down"));
    // ...while the call in flight completes with its result.
    let (status, body) = call
        .await
        .unwrap()
        .expect("the call in flight got its response");
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    let content: Value =
        serde_json::from_str(body["tool_results"][0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, json!({"slept_ms": 1500}));

    let exit = server.exit(Duration::from_secs(15)).await;
    assert!(
        exit.success(),
        "{exit:?}; stderr:\n{}",
        server.log.join("\n")
    );
    assert!(signalled.elapsed() >= Duration::from_millis(1000));
    assert!(
        server.log.iter().any(|l| l.contains("shutting down")),
        "{}",
        server.log.join("\n")
    );
    assert_eq!(server.stdout(), "");
}

/// Opens an MCP session over HTTP and starts `tools/call` of `tool`; the
/// session's id and the call's response, still to come.
async fn start_mcp_call(
    client: &reqwest::Client,
    base: &str,
    tool: &str,
    arguments: Value,
) -> tokio::task::JoinHandle<reqwest::Result<String>> {
    let post = |session: Option<String>, body: Value| {
        let mut request = client
            .post(format!("{base}/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let opened = post(
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
    )
    .await
    .unwrap();
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    opened.text().await.unwrap();
    post(
        Some(session.clone()),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await
    .unwrap();
    let call = post(
        Some(session),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": tool, "arguments": arguments}}),
    );
    tokio::spawn(async move { call.await?.text().await })
}

#[tokio::test]
async fn calls_past_the_drain_timeout_are_answered_with_an_error() {
    let (_dir, root) = workspace(CONFIG, &[toolhost_tests::MISBEHAVE]);
    let mut server = Serving::start(
        &root,
        &["--http", "127.0.0.1:0", "--drain-timeout", "300ms"],
    );
    let base = server.address();
    let client = client();
    let mcp_call = start_mcp_call(&client, &base, "sleep", json!({"ms": 8000})).await;
    let call = start_slow_call(&client, &base, 8000).await;
    let signalled = Instant::now();
    server.signal(libc::SIGINT);
    let exit = server.exit(Duration::from_secs(10)).await;
    assert!(
        exit.success(),
        "{exit:?}; stderr:\n{}",
        server.log.join("\n")
    );
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "{:?}",
        signalled.elapsed()
    );
    assert!(
        server.log.iter().any(|l| l.contains("drain timeout")),
        "{}",
        server.log.join("\n")
    );
    // Both clients are told why their calls did not finish.
    let (status, body) = call.await.unwrap().expect("the batch got an answer");
    assert_eq!(status, reqwest::StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("shutting down"), "{body}");
    let answer = mcp_call.await.unwrap().expect("the MCP call got an answer");
    assert!(answer.contains("shutting down"), "{answer}");
    assert!(answer.contains("\"isError\":true"), "{answer}");
}

/// Processes (of this user) whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) {
                found.push(format!(
                    "{}: {cmdline}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    found
}

#[tokio::test]
async fn a_second_signal_exits_130_and_ends_the_commands_of_calls_in_flight() {
    // SIGHUP too: the terminal that started the server closed.
    for (sandbox, signal) in [
        ("kernel", libc::SIGTERM),
        ("none", libc::SIGTERM),
        ("kernel", libc::SIGHUP),
    ] {
        let config = format!(
            "{CONFIG}allow = [\"terminal:*\", \"file:read\"]\nfile.read = [\".\"]\nterminal.sandbox = \"{sandbox}\"\n"
        );
        let (_dir, root) = workspace(&config, &[]);
        let mut server = Serving::start(&root, &["--http", "127.0.0.1:0"]);
        let base = server.address();
        let client = client();
        // A command no other test runs: `sleep` with a fraction unique here.
        let marker = format!("300.{}{}{signal}", std::process::id(), sandbox.len());
        let command = format!("sleep {marker}");
        let call = {
            let client = client.clone();
            let url = format!("{base}/v1/tool_calls");
            tokio::spawn(async move {
                client
                    .post(url)
                    .header("content-type", "application/json")
                    .body(one_call("run_command", json!({ "command": command })))
                    .send()
                    .await
            })
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while processes_with(&marker).is_empty() {
            if call.is_finished() {
                let response = call.await.unwrap().unwrap();
                panic!("{sandbox}: the call ended: {:?}", response.text().await);
            }
            assert!(
                Instant::now() < deadline,
                "{sandbox}: the command never started; stderr:\n{}",
                server.log.join("\n")
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        server.signal(signal);
        server.wait_for("shutting down");
        server.signal(signal);
        let exit = server.exit(Duration::from_secs(10)).await;
        assert_eq!(exit.code(), Some(130), "{sandbox}: {exit:?}");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = processes_with(&marker);
            if left.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{sandbox}: still running after toolhost exited: {left:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = call.await;
    }
}

#[tokio::test]
async fn stdio_serving_stops_on_sigterm_with_nothing_on_stdout() {
    let (_dir, root) = workspace(CONFIG, &[]);
    let mut server = Serving::start(&root, &[]);
    server.wait_for("serving MCP on stdio");
    server.signal(libc::SIGTERM);
    let exit = server.exit(Duration::from_secs(10)).await;
    assert!(
        exit.success(),
        "{exit:?}; stderr:\n{}",
        server.log.join("\n")
    );
    assert_eq!(server.stdout(), "");
}

#[tokio::test]
async fn serving_follows_plugin_and_tenant_changes() {
    let (_dir, root) = workspace(CONFIG, &[]);
    let mut server = Serving::start(&root, &["--http", "127.0.0.1:0", "--no-bundled"]);
    let base = server.address();
    let client = client();
    let tools = |body: Option<Value>| -> Vec<String> {
        body.and_then(|b| b["tools"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str().map(String::from))
            .collect()
    };
    assert_eq!(
        tools(get_json(&client, &format!("{base}/v1/tools")).await),
        Vec::<String>::new()
    );

    // A plugin dropped into the directory is served without a restart.
    std::fs::copy(
        toolhost_tests::MISBEHAVE,
        root.join("plugins/misbehave.wasm"),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !tools(get_json(&client, &format!("{base}/v1/tools")).await).contains(&"sleep".into()) {
        assert!(Instant::now() < deadline, "the new plugin never appeared");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A tenant added to the config: from then on a token is required.
    let hash = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"; // sha256("foo")
    let config = format!("{CONFIG}\n[tenants.acme]\ntoken_sha256 = \"{hash}\"\nprofile = \"p\"\n");
    std::fs::write(root.join("toolhost.toml"), config).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let response = client.get(format!("{base}/v1/tools")).send().await.unwrap();
        if response.status() == reqwest::StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new tenant never took effect"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let response = client
        .get(format!("{base}/v1/tools"))
        .bearer_auth("foo")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert!(tools(Some(body)).contains(&"sleep".into()));
}

#[test]
fn a_public_address_without_tenants_is_refused() {
    let (_dir, root) = workspace(CONFIG, &[]);
    let output = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .arg("--config")
        .arg(root.join("toolhost.toml"))
        .args(["serve", "--http", "0.0.0.0:0"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let config = root.join("toolhost.toml");
    assert!(
        stderr.contains("error: refusing to listen on 0.0.0.0:0")
            && stderr.contains(&format!(
                "add [tenants.NAME] entries with bearer tokens to {}",
                config.display()
            )),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}
