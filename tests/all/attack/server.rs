//! A `toolhost serve --http` process for the attack tests: its config
//! directory, its address, and calls made to it as a model would make them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A running server and the directory its `toolhost.toml` is in.
pub(crate) struct Server {
    child: Child,
    stderr: mpsc::Receiver<String>,
    log: Vec<String>,
    pub(crate) root: PathBuf,
    pub(crate) base: String,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Writes `config` to a new directory's `toolhost.toml` (with an empty
    /// `plugins/` beside it) and serves it; `prepare` runs first, in the
    /// directory.
    pub(crate) async fn start(config: &str, prepare: impl FnOnce(&Path)) -> Self {
        Self::start_at("toolhost.toml", config, prepare).await
    }

    /// [`Server::start`] with the config at `at` (relative to the
    /// directory; `plugins/` goes beside it).
    pub(crate) async fn start_at(at: &str, config: &str, prepare: impl FnOnce(&Path)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let file = root.join(at);
        let config_dir = file.parent().unwrap();
        std::fs::create_dir_all(config_dir.join("plugins")).unwrap();
        std::fs::write(&file, config).unwrap();
        prepare(&root);
        let (child, stderr) = toolhost_tests::spawn_piped(
            Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
                .current_dir(&root)
                .arg("--config")
                .arg(&file)
                .args(["serve", "--http", "127.0.0.1:0"]),
        );
        let mut server = Self {
            child,
            stderr,
            log: Vec::new(),
            root,
            base: String::new(),
            client: client(),
            _dir: dir,
        };
        let line = server.wait_for("serving on http://");
        let start = line.find("http://").unwrap();
        server.base = line[start..].split_whitespace().next().unwrap().to_string();
        server
    }

    /// Waits for a stderr line containing `needle`.
    pub(crate) fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
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

    /// Waits until `tool` is offered to `token` (the bundled plugins
    /// compile in the background).
    pub(crate) async fn wait_for_tool(&self, token: Option<&str>, tool: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let mut request = self.client.get(format!("{}/v1/tools", self.base));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let listed = match request.send().await {
                Ok(response) => response.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if listed.contains(&format!("\"{tool}\"")) {
                return;
            }
            assert!(Instant::now() < deadline, "{tool} never appeared: {listed}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// POSTs `body` to `path` as `token` (and in `session`); the status and
    /// the body, parsed.
    pub(crate) async fn post(
        &self,
        path: &str,
        token: Option<&str>,
        session: Option<&str>,
        body: &Value,
    ) -> (reqwest::StatusCode, Value) {
        let mut request = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(session) = session {
            request = request.header("toolhost-session", session);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or_else(|_| json!({ "text": text }));
        (status, body)
    }

    /// Calls `tool` as `token` in `session`: its result, or `{"error": ...}`.
    pub(crate) async fn call(
        &self,
        token: Option<&str>,
        session: Option<&str>,
        tool: &str,
        arguments: Value,
    ) -> Value {
        let batch = json!({ "tool_calls": [{
            "id": "call_0",
            "type": "function",
            "function": { "name": tool, "arguments": arguments.to_string() },
        }]});
        let (status, body) = self.post("/v1/tool_calls", token, session, &batch).await;
        assert_eq!(status, reqwest::StatusCode::OK, "{body}");
        let content = body["tool_results"][0]["content"]
            .as_str()
            .unwrap_or_else(|| panic!("no result: {body}"));
        serde_json::from_str(content).unwrap_or_else(|_| json!(content))
    }

    /// Writes `content` to `path` with `write_file`: its result, or
    /// `{"error": ...}`.
    pub(crate) async fn write_file(&self, token: Option<&str>, path: &str, content: &str) -> Value {
        let arguments = json!({ "path": path, "content": content });
        self.call(token, None, "write_file", arguments).await
    }

    /// Runs `line` with `run_command`: its result, or `{"error": ...}`.
    pub(crate) async fn run(
        &self,
        token: Option<&str>,
        session: Option<&str>,
        line: &str,
    ) -> Value {
        self.call(token, session, "run_command", json!({ "command": line }))
            .await
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the server wrote to stderr so far.
    pub(crate) fn log(&mut self) -> String {
        self.log.extend(self.stderr.try_iter());
        self.log.join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// SHA-256 of `token`, in hex, for `token_sha256`.
pub(crate) fn sha256_hex(token: &str) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The error text of a tool result, if it is one.
pub(crate) fn error_of(result: &Value) -> Option<&str> {
    result["error"].as_str()
}
