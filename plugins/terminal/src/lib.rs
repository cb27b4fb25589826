//! The terminal tools: shell commands through the host's `terminal` import,
//! which checks each command against the caller's profile
//! (`terminal.allow_commands`, `terminal.deny_commands`, dangerous commands
//! refused or sent to a human for approval), runs it in a granted directory
//! with a scrubbed environment, and kills it at its time limit. In a session
//! the working directory and exported variables carry from one command to
//! the next, and background processes (`process_*`) live until the session
//! ends.

mod processes;

use std::time::Duration;

use toolhost_sdk::prelude::*;
use toolhost_sdk::terminal::{Command, TerminalError};

pub(crate) use processes::{
    process_kill, process_list, process_output, process_start, process_wait, process_write,
};

/// Arguments of `run_command`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunCommandArgs {
    /// The command line, run with `/bin/sh -c` (pipes, redirections, `&&`).
    command: String,
    /// Working directory: relative to the workspace, or absolute inside a
    /// granted directory (default: the workspace).
    #[serde(default)]
    cwd: Option<String>,
    /// Text written to the command's standard input (default: none, so reads
    /// see end of file).
    #[serde(default)]
    stdin: Option<String>,
    /// Time limit in seconds (the profile's `terminal.timeout` caps it).
    #[serde(default)]
    timeout_secs: Option<u32>,
}

/// Run a shell command and return its `exit_code` (null when killed by a
/// signal), `stdout` and `stderr` (each capped; `truncated` says so). A
/// non-zero exit is a result, not an error. The command runs without a
/// terminal or interactive input, with a scrubbed environment, in the
/// workspace unless `cwd` is given, and is killed at its time limit. Within a
/// session, `cd` and `export` carry over to the next command, and what it
/// leaves running in the background keeps running until the session ends
/// (use process_start for a process to come back to). The caller's profile decides which commands may run;
/// dangerous ones (recursive deletes, force pushes, ...) may be refused or
/// need a human's approval. A refusal is an error that says which rule
/// refused it.
#[tool(
    toolset = "terminal",
    permissions = ["terminal:execute"],
    destructive,
    emoji = "💻"
)]
fn run_command(args: RunCommandArgs) -> Result<Value, ToolError> {
    if args.command.trim().is_empty() {
        return Err(ToolError::invalid_arguments("command is empty"));
    }
    let mut command = Command::new(args.command);
    if let Some(cwd) = args.cwd {
        command = command.cwd(cwd);
    }
    if let Some(stdin) = args.stdin {
        command = command.stdin(stdin);
    }
    if let Some(secs) = args.timeout_secs {
        if secs == 0 {
            return Err(ToolError::invalid_arguments(
                "timeout_secs must be at least 1",
            ));
        }
        command = command.timeout(Duration::from_secs(secs.into()));
    }
    match command.run() {
        Ok(output) => Ok(json!({
            "exit_code": output.exit_code,
            "success": output.success(),
            "stdout": output.stdout,
            "stderr": output.stderr,
            "truncated": output.truncated,
        })),
        Err(error) => Err(tool_error(error)),
    }
}

/// A terminal error as the tool reports it.
pub(crate) fn tool_error(error: TerminalError) -> ToolError {
    match error {
        TerminalError::Denied(message) => ToolError::denied(message),
        TerminalError::Timeout => ToolError::failed(
            "the command ran past its time limit and was killed with every process it \
             started (the limit is timeout_secs, capped by the profile's terminal.timeout)",
        ),
        TerminalError::Failed(message) => {
            ToolError::failed(format!("the command could not be started: {message}"))
        }
    }
}

export_plugin!(
    run_command,
    process_start,
    process_output,
    process_wait,
    process_write,
    process_kill,
    process_list
);
