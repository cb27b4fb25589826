//! Integration tests of toolhost against real plugins: the bundled ones and
//! the test-only guests in `tests/plugins/`. One test binary, one shared engine.

mod availability;
mod bundled;
mod calls;
mod check;
mod cli;
mod config;
mod dispatch;
mod files;
mod limits;
mod loading;
mod network;
mod registry;
mod reload;
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
