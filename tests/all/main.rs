//! Integration tests of toolhost against real plugins: the bundled ones and
//! the test-only guests in `tests/plugins/`. One test binary, one shared engine.

mod attack;
mod availability;
mod bundled;
mod calls;
mod captured;
mod check;
mod cli;
mod config;
mod conformance;
mod container;
mod content;
mod contracts;
mod corpus;
mod declarative;
mod dialect;
mod dispatch;
mod docs;
mod epoch;
mod files;
mod first_use;
mod http_api;
mod layers;
mod layout;
mod lean;
mod limits;
mod loading;
mod mcp;
mod mcp_ask;
mod mcp_handles;
mod mcp_http;
mod mcp_logs;
mod mcp_tasks;
mod mcp_trace;
mod mcp_transport;
mod network;
mod output_schema;
mod paths_model;
mod progress;
mod protocol;
mod python;
mod ready;
mod refusals;
mod registry;
mod reload;
mod sandbox;
mod scaffold;
mod serve;
mod sessions;
mod ssh;
mod stateful;
mod stdio_lane;
mod terminal;
mod toolkit;

use std::time::Duration;

use serde_json::Value;
use toolhost::{Host, HostBuilder, Limits};

/// Limits small enough that misbehaving guests are stopped quickly.
pub fn test_limits() -> Limits {
    Limits {
        memory: 32 << 20,
        timeout: Duration::from_secs(2),
        max_output: 64 * 1024,
        ..Limits::default()
    }
}

/// Terminal commands run in sandboxes built by the toolhost binary the tests
/// build (this test binary cannot enter a user namespace: it has threads).
pub fn use_launcher() {
    toolhost::capability::terminal::confine::use_launcher(toolhost_cli());
}

/// The toolhost binary the tests built, or the copy `TOOLHOST_TEST_CLI`
/// names (CI's run as an unprivileged user copies it where that user can
/// run it).
pub fn toolhost_cli() -> std::path::PathBuf {
    std::env::var_os("TOOLHOST_TEST_CLI")
        .map_or_else(|| env!("CARGO_BIN_EXE_toolhost-cli").into(), Into::into)
}

/// A host with the bundled plugins and the `misbehave` test guest.
pub async fn host() -> Host {
    use_launcher();
    Host::builder()
        .bundled(true)
        .plugin_file(toolhost_tests::MISBEHAVE)
        .limits(test_limits())
        .build()
        .await
        .expect("host builds")
}

/// An in-memory writer the tests hand to `AuditLog::writer` and read back.
#[derive(Clone, Default)]
pub struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Buffer {
    /// Everything written, as text.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl std::io::Write for Buffer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A temporary workspace (with symlinks resolved, so paths compare equal to
/// what tools print), and the plugins its hosts load.
pub struct Workspace {
    _dir: tempfile::TempDir,
    pub path: std::path::PathBuf,
    plugins: fn(HostBuilder) -> HostBuilder,
}

impl Workspace {
    /// A new workspace whose hosts load what `plugins` adds to a builder.
    pub fn new(plugins: fn(HostBuilder) -> HostBuilder) -> Self {
        use_launcher();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap();
        Self {
            _dir: dir,
            path,
            plugins,
        }
    }

    /// Profile `p` from `body`, rooted in this workspace.
    pub fn profile(&self, body: &str) -> std::sync::Arc<toolhost::Profile> {
        profile(body, &self.path)
    }

    /// A host with this workspace's plugins under profile `body`.
    pub async fn host(&self, body: &str) -> Host {
        self.host_with(body, |builder| builder).await
    }

    /// [`Self::host`], with more settings.
    pub async fn host_with(
        &self,
        body: &str,
        configure: impl FnOnce(HostBuilder) -> HostBuilder,
    ) -> Host {
        let builder = (self.plugins)(Host::builder().profile(self.profile(body)));
        configure(builder).build().await.unwrap()
    }

    pub fn join(&self, name: &str) -> std::path::PathBuf {
        self.path.join(name)
    }

    pub fn mkdir(&self, name: &str) -> std::path::PathBuf {
        let dir = self.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Writes `content` to `name`, creating its directories.
    pub fn write(&self, name: &str, content: impl AsRef<[u8]>) -> std::path::PathBuf {
        let path = self.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.join(name)).unwrap()
    }
}

/// A profile named `p` from TOML (relative paths rooted in `workspace`).
pub fn profile(toml: &str, workspace: &std::path::Path) -> std::sync::Arc<toolhost::Profile> {
    let text = format!("default_profile = \"p\"\n[profiles.p]\n{toml}");
    let config =
        toolhost::config::Config::parse(&text, toolhost::config::ConfigSource::Embedded, workspace)
            .unwrap_or_else(|e| panic!("{e}"));
    config.profile("p", None).unwrap()
}

/// Calls a tool and parses the result, panicking on error.
pub async fn call_ok(host: &Host, tool: &str, arguments: &str) -> Value {
    let result = host
        .call(tool, arguments)
        .await
        .unwrap_or_else(|e| panic!("{tool} {arguments}: {e}"));
    serde_json::from_str(result.get()).unwrap()
}

/// Calls a tool that must fail; returns the `{"error": ...}` text.
pub async fn call_err(host: &Host, tool: &str, arguments: &str) -> (toolhost::ErrorKind, String) {
    match host.call(tool, arguments).await {
        Ok(result) => panic!("{tool} {arguments} succeeded: {}", result.get()),
        Err(e) => {
            let json = e.to_json();
            (e.kind(), json["error"].as_str().unwrap().to_string())
        }
    }
}

/// Host processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(marker) {
                found.push(format!(
                    "{}: {cmdline}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    found
}

/// Waits up to five seconds for every process whose command line contains
/// `marker` to be gone.
pub async fn assert_gone(marker: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let left = processes_with(marker);
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
