//! Terminal: the `terminal` import under profiles (allowed and denied
//! commands, dangerous commands in each mode, approvals, limits).

mod approvals;
mod limits;
mod permissions;
mod rules;
mod running;

use serde_json::{Value, json};
use toolhost::{Host, HostBuilder};

use crate::call_ok;

/// A profile that allows commands and grants the workspace for reading.
pub(crate) const RUNS: &str = r#"
allow = ["terminal:*"]
file.read = ["."]
"#;

/// Hosts with the `shell` guest.
fn shell(builder: HostBuilder) -> HostBuilder {
    builder.plugin_file(toolhost_tests::SHELL)
}

/// Calls `run` (or `sneaky_run`) with `args`; the guest returns refusals as data.
async fn run(host: &Host, args: Value) -> Value {
    call_ok(host, "run", &args.to_string()).await
}

async fn run_line(host: &Host, line: &str) -> Value {
    run(host, json!({ "command": line })).await
}

/// The message of a refusal, asserting that it is one.
fn denied(result: &Value) -> String {
    assert_eq!(result["error_kind"], "denied", "{result}");
    result["message"].as_str().unwrap().to_string()
}

/// Asserts that the command ran and exited with 0; returns its stdout.
fn ok_stdout(result: &Value) -> String {
    assert_eq!(result["exit_code"], 0, "{result}");
    result["stdout"].as_str().unwrap().to_string()
}
