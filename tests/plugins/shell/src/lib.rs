//! Test guest: runs command lines through the host's `terminal` import and
//! returns what happened as data, refusals included, so tests can assert on
//! them. `run` declares `terminal:execute`; `sneaky_run` uses the import
//! without declaring it.

use toolhost_sdk::prelude::*;
use toolhost_sdk::terminal::{Background, Command, TerminalError};

/// Arguments of `run` and `sneaky_run`.
#[derive(Deserialize, JsonSchema)]
struct RunArgs {
    /// The command line, run with `/bin/sh -c`.
    command: String,
    /// Working directory (relative to the workspace, or absolute).
    #[serde(default)]
    cwd: Option<String>,
    /// Text written to the command's standard input.
    #[serde(default)]
    stdin: Option<String>,
    /// Time limit in milliseconds.
    #[serde(default)]
    timeout_ms: Option<u32>,
}

/// Runs a command line and reports its exit code and output, or why it did
/// not run to completion.
#[tool(toolset = "shell", permissions = ["terminal:execute"], destructive)]
fn run(args: RunArgs) -> Result<Value, ToolError> {
    Ok(execute(args))
}

/// Runs a command line without declaring `terminal:execute`; the host must
/// refuse it.
#[tool(toolset = "shell")]
fn sneaky_run(args: RunArgs) -> Result<Value, ToolError> {
    Ok(execute(args))
}

fn execute(args: RunArgs) -> Value {
    let mut command = Command::new(args.command);
    if let Some(cwd) = args.cwd {
        command = command.cwd(cwd);
    }
    if let Some(stdin) = args.stdin {
        command = command.stdin(stdin);
    }
    if let Some(ms) = args.timeout_ms {
        command = command.timeout(std::time::Duration::from_millis(ms.into()));
    }
    match command.run() {
        Ok(output) => json!({
            "exit_code": output.exit_code,
            "stdout": output.stdout,
            "stderr": output.stderr,
            "truncated": output.truncated,
        }),
        Err(TerminalError::Denied(message)) => {
            json!({ "error_kind": "denied", "message": message })
        }
        Err(TerminalError::Timeout) => json!({ "error_kind": "timeout" }),
        Err(TerminalError::Failed(message)) => {
            json!({ "error_kind": "failed", "message": message })
        }
    }
}

/// Arguments of `run_then_start`.
#[derive(Deserialize, JsonSchema)]
struct TwoSteps {
    /// Run first, to its end.
    first: String,
    /// Then started in the background, left running.
    then: String,
}

/// Runs one command line, then starts another in the background (a build,
/// then a server): what each did.
#[tool(toolset = "shell", permissions = ["terminal:execute"], destructive)]
fn run_then_start(args: TwoSteps) -> Result<Value, ToolError> {
    let first = execute(RunArgs {
        command: args.first,
        cwd: None,
        stdin: None,
        timeout_ms: None,
    });
    let then = match Background::new(args.then).start() {
        Ok(process) => json!({ "started": process.id() }),
        Err(TerminalError::Denied(message)) => {
            json!({ "error_kind": "denied", "message": message })
        }
        Err(e) => json!({ "error_kind": "failed", "message": format!("{e:?}") }),
    };
    Ok(json!({ "first": first, "then": then }))
}

export_plugin!(run, sneaky_run, run_then_start);
