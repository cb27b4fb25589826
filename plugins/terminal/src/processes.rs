//! Background processes of the session: started, read, waited for, written
//! to, signalled and listed through the host's terminal import.

use std::time::Duration;

use toolhost_sdk::prelude::*;
use toolhost_sdk::terminal::{Background, Process, ProcessEnd, ProcessOutput, Signal, processes};

use crate::tool_error;

/// Arguments of `process_start`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StartArgs {
    /// The command line, run with bash (pipes, redirections, `&&`).
    command: String,
    /// Working directory: relative to the workspace, or absolute inside a
    /// granted directory (default: where the session's last command left).
    #[serde(default)]
    cwd: Option<String>,
    /// Run on a pseudo-terminal, for interactive programs (a REPL, a
    /// prompt); its output then all comes as stdout.
    #[serde(default)]
    pty: bool,
    /// Rows of the pseudo-terminal (default 24).
    #[serde(default)]
    rows: Option<u16>,
    /// Columns of the pseudo-terminal (default 80).
    #[serde(default)]
    cols: Option<u16>,
}

/// Start a command in the background of the session (a dev server, a long
/// test run, an interactive program with `pty`) and return its `id`. It runs
/// after this call returns, checked by the same rules as run_command, until it
/// ends, is killed with process_kill, or the session ends. Read what it prints
/// with process_output or process_wait; type into it with process_write.
#[tool(
    toolset = "terminal",
    permissions = ["terminal:execute"],
    destructive,
    emoji = "🚀"
)]
pub(crate) fn process_start(args: StartArgs) -> Result<Value, ToolError> {
    if args.command.trim().is_empty() {
        return Err(ToolError::invalid_arguments("command is empty"));
    }
    let mut command = Background::new(args.command);
    if let Some(cwd) = args.cwd {
        command = command.cwd(cwd);
    }
    if args.pty {
        command = command.pty(args.rows.unwrap_or(24), args.cols.unwrap_or(80));
    }
    let process = command.start().map_err(tool_error)?;
    Ok(json!({ "id": process.id() }))
}

/// Arguments of `process_output`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutputArgs {
    /// The process id from process_start.
    id: u32,
    /// Keep terminal escape sequences (colours, cursor moves) in the output
    /// of a pseudo-terminal; by default they are taken out.
    #[serde(default)]
    keep_ansi: bool,
}

/// Return what background process `id` printed since the last read
/// (`stdout`, `stderr`; `dropped` counts bytes lost because they were not read
/// in time) and whether it is still `running` or how it ended (`exit_code`,
/// `signal`, or `error`).
#[tool(
    toolset = "terminal",
    permissions = ["terminal:execute"],
    read_only,
    emoji = "📜"
)]
pub(crate) fn process_output(args: OutputArgs) -> Result<Value, ToolError> {
    let output = Process(args.id).read().map_err(tool_error)?;
    Ok(describe(output, args.keep_ansi))
}

/// Arguments of `process_wait`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WaitArgs {
    /// The process id from process_start.
    id: u32,
    /// Longest to wait, in seconds (default 10; the profile's
    /// terminal.timeout caps it).
    #[serde(default)]
    timeout_secs: Option<f64>,
    /// Keep terminal escape sequences, as in process_output.
    #[serde(default)]
    keep_ansi: bool,
}

/// Wait until background process `id` ends or the timeout passes, then
/// return its new output and state as process_output does.
#[tool(
    toolset = "terminal",
    permissions = ["terminal:execute"],
    read_only,
    emoji = "⏳"
)]
pub(crate) fn process_wait(args: WaitArgs) -> Result<Value, ToolError> {
    let secs = args.timeout_secs.unwrap_or(10.0);
    if !(0.0..=86_400.0).contains(&secs) {
        return Err(ToolError::invalid_arguments(
            "timeout_secs must be between 0 and 86400",
        ));
    }
    let output = Process(args.id)
        .wait(Duration::from_secs_f64(secs))
        .map_err(tool_error)?;
    Ok(describe(output, args.keep_ansi))
}

/// Arguments of `process_write`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    /// The process id from process_start.
    id: u32,
    /// Text written to its input (end a line with "\n" to send it).
    #[serde(default)]
    input: String,
    /// End its input after writing (end of file).
    #[serde(default)]
    close: bool,
}

/// Type `input` into background process `id`. When the process is a shell,
/// each line is a command and is checked like run_command's.
#[tool(
    toolset = "terminal",
    permissions = ["terminal:execute"],
    destructive,
    emoji = "⌨️"
)]
pub(crate) fn process_write(args: WriteArgs) -> Result<Value, ToolError> {
    let process = Process(args.id);
    process.write(args.input.as_bytes()).map_err(tool_error)?;
    if args.close {
        process.close_input().map_err(tool_error)?;
    }
    Ok(json!({ "written": args.input.len(), "closed": args.close }))
}

/// Signals `process_kill` sends.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SignalName {
    /// Ctrl-C.
    Interrupt,
    /// Ask it to end (the default).
    #[default]
    Terminate,
    /// End it at once.
    Kill,
    Hangup,
    Quit,
    Usr1,
    Usr2,
}

/// Arguments of `process_kill`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct KillArgs {
    /// The process id from process_start.
    id: u32,
    /// The signal (default terminate).
    #[serde(default)]
    signal: SignalName,
}

/// Send a signal (terminate by default) to background process `id` and
/// everything it started.
#[tool(
    toolset = "terminal",
    permissions = ["terminal:execute"],
    destructive,
    emoji = "🛑"
)]
pub(crate) fn process_kill(args: KillArgs) -> Result<Value, ToolError> {
    let signal = match args.signal {
        SignalName::Interrupt => Signal::Interrupt,
        SignalName::Terminate => Signal::Terminate,
        SignalName::Kill => Signal::Kill,
        SignalName::Hangup => Signal::Hangup,
        SignalName::Quit => Signal::Quit,
        SignalName::Usr1 => Signal::User1,
        SignalName::Usr2 => Signal::User2,
    };
    Process(args.id).signal(signal).map_err(tool_error)?;
    Ok(json!({ "id": args.id, "signalled": true }))
}

/// Arguments of `process_list`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListArgs {}

/// List the session's background processes: id, command, whether it runs
/// on a pseudo-terminal, seconds since it started, and whether it is still
/// running or how it ended.
#[tool(
    toolset = "terminal",
    permissions = ["terminal:execute"],
    read_only,
    emoji = "📋"
)]
pub(crate) fn process_list(_args: ListArgs) -> Result<Value, ToolError> {
    let list: Vec<Value> = processes()
        .into_iter()
        .map(|p| {
            let mut entry = json!({
                "id": p.id,
                "command": p.command_line,
                "pty": p.pty,
                "seconds": p.age_ms as f64 / 1000.0,
            });
            end_fields(&mut entry, p.end);
            entry
        })
        .collect();
    Ok(json!({ "processes": list }))
}

/// The JSON answer for a read.
fn describe(output: ProcessOutput, keep_ansi: bool) -> Value {
    let text = |s: String| {
        if keep_ansi {
            s
        } else {
            strip_ansi_escapes::strip_str(&s)
        }
    };
    let mut answer = json!({
        "stdout": text(output.stdout),
        "stderr": text(output.stderr),
        "dropped": output.dropped,
    });
    end_fields(&mut answer, output.end);
    answer
}

/// `running`, and how it ended: `exit_code`, `signal` or `error`.
fn end_fields(answer: &mut Value, end: Option<ProcessEnd>) {
    answer["running"] = json!(end.is_none());
    match end {
        None => {}
        Some(ProcessEnd::Exited(code)) => answer["exit_code"] = json!(code),
        Some(ProcessEnd::Killed(signal)) => answer["signal"] = json!(signal),
        Some(ProcessEnd::Failed(reason)) => answer["error"] = json!(reason),
    }
}
