//! Integration tests of toolhost against real plugins: the bundled ones and
//! the test-only guests in `tests/plugins/`. One test binary, one shared engine.

mod availability;
mod bundled;
mod calls;
mod check;
mod cli;
mod config;
mod declarative;
mod dispatch;
mod files;
mod http_api;
mod limits;
mod loading;
mod mcp;
mod network;
mod python;
mod registry;
mod reload;
mod scaffold;
mod serve;
mod stateful;
mod terminal;

use std::time::Duration;

use serde_json::Value;
use toolhost::{Host, Limits};

/// Limits small enough that misbehaving guests are stopped quickly.
pub fn test_limits() -> Limits {
    Limits {
        memory: 32 << 20,
        timeout: Duration::from_secs(2),
        max_output: 64 * 1024,
        ..Limits::default()
    }
}

/// A host with the bundled plugins and the `misbehave` test guest.
pub async fn host() -> Host {
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
