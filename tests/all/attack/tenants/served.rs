//! A real `toolhost serve --http` process for the attack tests: a config
//! directory with `toolhost.toml`, a tenant's token hashed into it, and a
//! client that calls tools and reads approvals as a tenant would.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Digest as _;

/// SHA-256 of `token`, in hex, for `token_sha256`.
pub(crate) fn sha256_hex(token: &str) -> String {
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A running server and the lines it wrote to stderr.
pub(crate) struct Served {
    child: Child,
    /// In a mutex only so that a server can be shared between tasks.
    stderr: std::sync::Mutex<mpsc::Receiver<String>>,
    log: Vec<String>,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// The directory of `toolhost.toml` (symlinks resolved).
    pub(crate) root: PathBuf,
    pub(crate) client: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// What a [`Served`] starts with.
#[derive(Default)]
pub(crate) struct Setup<'a> {
    /// `toolhost.toml`; `{root}` is replaced by its directory.
    pub(crate) config: &'a str,
    /// Directories made under the config directory.
    pub(crate) dirs: &'a [&'a str],
    /// Plugin files copied into `plugins/`.
    pub(crate) plugins: &'a [&'a str],
    /// Environment of the server.
    pub(crate) env: &'a [(&'a str, &'a str)],
    /// Runs the server in a user namespace of its own (as its root) where
    /// it may hold at most this many inotify instances.
    pub(crate) inotify_instances: Option<u32>,
    /// More arguments of `serve`.
    pub(crate) args: &'a [&'a str],
    /// A command the server runs under (its arguments, the server's
    /// binary and arguments after them), as `unshare -m sh -c '...'`.
    pub(crate) under: &'a [&'a str],
}

impl Served {
    /// Serves `config` with `dirs` made under its directory.
    pub(crate) fn start(config: &str, dirs: &[&str]) -> Self {
        Self::launch(Setup {
            config,
            dirs,
            ..Setup::default()
        })
    }

    /// Serves `setup` on a free loopback port.
    pub(crate) fn launch(setup: Setup<'_>) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for made in setup.dirs.iter().chain(&["plugins"]) {
            std::fs::create_dir_all(root.join(made)).unwrap();
        }
        for plugin in setup.plugins {
            let name = Path::new(plugin).file_name().unwrap();
            std::fs::copy(plugin, root.join("plugins").join(name)).unwrap();
        }
        let config = setup.config.replace("{root}", &root.display().to_string());
        std::fs::write(root.join("toolhost.toml"), config).unwrap();
        let binary = env!("CARGO_BIN_EXE_toolhost-cli");
        let mut command = match setup.inotify_instances {
            None if !setup.under.is_empty() => {
                let mut command = Command::new(setup.under[0]);
                command.args(&setup.under[1..]).arg(binary);
                command
            }
            None => Command::new(binary),
            Some(most) => {
                let mut command = Command::new("unshare");
                let limit = format!(
                    "echo {most} > /proc/sys/user/max_inotify_instances && exec \"$0\" \"$@\""
                );
                command.args(["-U", "-r", "sh", "-c", &limit, binary]);
                command
            }
        };
        command
            .arg("--config")
            .arg(root.join("toolhost.toml"))
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(setup.args)
            .envs(setup.env.iter().copied());
        let (child, stderr) = toolhost_tests::spawn_piped(&mut command);
        let mut served = Self {
            child,
            stderr: std::sync::Mutex::new(stderr),
            log: Vec::new(),
            base: String::new(),
            root,
            client: reqwest::Client::builder().no_proxy().build().unwrap(),
            _dir: dir,
        };
        let line = served.wait_for("serving on http://");
        let start = line.find("http://").unwrap();
        served.base = line[start..].split_whitespace().next().unwrap().to_string();
        served
    }

    /// Waits for a stderr line containing `needle`.
    pub(crate) fn wait_for(&mut self, needle: &str) -> String {
        if let Some(seen) = self.log.iter().find(|line| line.contains(needle)) {
            return seen.clone();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let stderr = self.stderr.get_mut().unwrap();
            match stderr.recv_timeout(left) {
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

    /// The bytes of stderr lines the server wrote since the last call,
    /// after `settle` for the last ones to arrive.
    pub(crate) fn logged(&mut self, settle: Duration) -> usize {
        std::thread::sleep(settle);
        let stderr = self.stderr.get_mut().unwrap();
        let mut bytes = 0;
        while let Ok(line) = stderr.try_recv() {
            bytes += line.len() + 1;
        }
        bytes
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `path` under the config directory.
    pub(crate) fn path(&self, path: &str) -> PathBuf {
        self.root.join(path)
    }

    /// `GET path` as `token`: the status and the JSON body.
    pub(crate) async fn get(&self, path: &str, token: &str) -> (StatusCode, Value) {
        let request = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(token);
        answer(request).await
    }

    /// `POST path` with the JSON `body` as `token`.
    pub(crate) async fn post(&self, path: &str, token: &str, body: &Value) -> (StatusCode, Value) {
        let request = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
            .json(body);
        answer(request).await
    }

    /// Calls `tool` with `arguments` as `token` in `session` (if any): the
    /// tool's result, or `{"error": ...}`.
    pub(crate) async fn call(
        &self,
        token: &str,
        session: Option<&str>,
        tool: &str,
        arguments: Value,
    ) -> Value {
        let (status, body) = self
            .post("/v1/tool_calls", token, &batch(session, tool, &arguments))
            .await;
        assert_eq!(status, StatusCode::OK, "{tool} {arguments}: {body}");
        let content = body["tool_results"][0]["content"].as_str().unwrap();
        serde_json::from_str(content).unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One call as a `/v1/tool_calls` body.
pub(crate) fn batch(session: Option<&str>, tool: &str, arguments: &Value) -> Value {
    let mut body = json!({
        "tool_calls": [{
            "id": "call_0",
            "type": "function",
            "function": { "name": tool, "arguments": arguments.to_string() },
        }]
    });
    if let Some(session) = session {
        body["session"] = json!(session);
    }
    body
}

async fn answer(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// Whether `path` exists, without following a final symbolic link.
pub(crate) fn exists(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

/// The resident memory of process `pid`, in bytes.
pub(crate) fn resident(pid: u32) -> u64 {
    status_bytes(pid, "VmRSS:")
}

/// The most process `pid` has held resident since it started, in bytes.
pub(crate) fn peak_resident(pid: u32) -> u64 {
    status_bytes(pid, "VmHWM:")
}

fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}
