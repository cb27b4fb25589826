//! The bundled toolkit (`file`, `web`, `terminal` and `data` toolsets),
//! called through the host under profiles that grant and that refuse each
//! capability.

mod data;
mod file;
mod relative_paths;
mod search;
mod search_tree;
mod specs;
mod terminal;
mod web;

use serde_json::Value;
use toolhost::{ErrorKind, Host, HostBuilder};

// Reads the whole workspace, writes only `out/`, never `.env` or `secrets/`.
use crate::files::PROFILE as FILES;

/// Hosts with the bundled plugins.
fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

/// Calls a tool; the result as JSON, or the error's kind and message.
async fn call(host: &Host, tool: &str, arguments: Value) -> Result<Value, (ErrorKind, String)> {
    match host.call(tool, arguments).await {
        Ok(result) => Ok(serde_json::from_str(result.get()).unwrap()),
        Err(e) => Err((e.kind(), e.message().to_string())),
    }
}

/// Calls a tool that must succeed.
async fn ok(host: &Host, tool: &str, arguments: Value) -> Value {
    call(host, tool, arguments.clone())
        .await
        .unwrap_or_else(|(kind, message)| panic!("{tool} {arguments}: {kind:?}: {message}"))
}

/// Calls a tool that must fail with `kind`; returns the message.
async fn fails(host: &Host, tool: &str, arguments: Value, kind: ErrorKind) -> String {
    match call(host, tool, arguments.clone()).await {
        Ok(result) => panic!("{tool} {arguments} succeeded: {result}"),
        Err((actual, message)) => {
            assert_eq!(actual, kind, "{tool} {arguments}: {message}");
            message
        }
    }
}

#[track_caller]
fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{part:?} not in {text:?}");
}
