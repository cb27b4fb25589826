//! The kernel sandbox of terminal commands, through the bundled `run_command`
//! and real profiles: each route a command could take around the profile
//! (denied files, paths outside the grants, writes, the network, the
//! server's process and environment, processes that outlive the call,
//! privileges that would undo the sandbox) is tried and must fail or be
//! harmless, and ordinary work must still run.

mod built_ahead;
mod files;
mod kernel;
pub(crate) mod network;
mod processes;
mod rules;

use serde_json::{Value, json};
use toolhost::{ErrorKind, Host, HostBuilder};

use crate::Workspace;

/// Hosts with the bundled plugins.
fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

/// Commands may read the workspace and write `out/`; `.env` and `secrets/`
/// are denied; the detector stays out of the way so the sandbox alone is
/// tested.
const SANDBOXED: &str = r#"
allow = ["terminal:execute", "file:read", "file:write"]
file.read = ["."]
file.write = ["out"]
file.deny = [".env", "secrets/**"]
terminal.dangerous = "allow"
"#;

/// A workspace with a secret file, a secret directory and a writable `out/`.
fn workspace() -> Workspace {
    let ws = Workspace::new(bundled);
    ws.write(".env", "TOKEN=env-secret\n");
    ws.write("secrets/key.txt", "key-secret\n");
    ws.write("notes.txt", "public\n");
    ws.mkdir("out");
    ws
}

/// Runs `line`; the result (exit code, stdout, stderr) or the error.
async fn run(host: &Host, line: &str) -> Result<Value, (ErrorKind, String)> {
    match host.call("run_command", json!({ "command": line })).await {
        Ok(result) => Ok(serde_json::from_str(result.get()).unwrap()),
        Err(e) => Err((e.kind(), e.message().to_string())),
    }
}

/// Runs `line`, which must run (whatever its exit code).
async fn ran(host: &Host, line: &str) -> Value {
    run(host, line)
        .await
        .unwrap_or_else(|(kind, message)| panic!("{line}: {kind:?}: {message}"))
}

/// Runs `line`, which must run and succeed; its stdout.
async fn succeeds(host: &Host, line: &str) -> String {
    let result = ran(host, line).await;
    assert_eq!(result["exit_code"], 0, "{line}: {result}");
    result["stdout"].as_str().unwrap().to_string()
}

/// Everything a command printed, for searching.
fn printed(result: &Value) -> String {
    format!("{}{}", result["stdout"], result["stderr"])
}
