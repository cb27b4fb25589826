//! The terminal in a session: commands run in the session's backend with
//! the state the last one left, and background processes started, read,
//! waited for, written to and signalled. Every command line, whether run,
//! started in the background or written to a background shell, passes the
//! same checks as a command run alone ([`super::authorize`]) and goes to
//! the audit record.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::Terminal;
use super::command::{
    Start, WorkingDir, admit, authorize, environment, output, passed_env, proxy_env, quote,
    shell_path,
};
use super::process_group::{self, CappedBuffer, End, Reader};
use super::terminals::backend::Backend;
use super::terminals::launch::{Launch, Started};
use super::terminals::process::{Output as ProcessOutput, Process, ProcessEnd};
use super::terminals::script::{MOST_STATE, SCRIPT, ShellState};
use super::terminals::{TerminalSession, Terminals};
use crate::capability::grants::SessionRef;
use crate::capability::sandbox::Room;
use crate::contract::CapabilityUse;
use crate::contract::bindings::toolhost::plugin::terminal as wit;
use crate::contract::bindings::toolhost::plugin::terminal::{Output, TerminalError};

/// Most bytes written to a background shell that a line may hold before
/// its newline (the start of a line is kept until the line is checked).
const MAX_PENDING_LINE: usize = 64 << 10;

/// How long output is still read after a command's shell has ended (its
/// background children may hold the pipes).
const DRAIN_GRACE: Duration = Duration::from_millis(250);

/// The session of the call: its caller's, or the call's own.
pub(super) fn session_of(room: &mut Room<'_, Terminal>) -> Result<Arc<TerminalSession>, String> {
    let grants = &room.call.grants;
    if let Some(SessionRef { key, store }) = &grants.session {
        let terminals = store
            .clone()
            .downcast::<Terminals>()
            .map_err(|_| "the call's session store is not a terminal store".to_string())?;
        return terminals.session(key, &grants.profile);
    }
    let profile = grants.profile.clone();
    Ok(room
        .state
        .get_or_insert_with(|| {
            // Alone: its processes end with the call.
            let budget = super::terminals::process::OutputBudget::alone();
            Arc::new(TerminalSession::new(profile, budget))
        })
        .clone())
}

/// The current directory of the call's session, if it has one yet: where
/// its next command without a cwd starts. Makes no session.
pub(super) fn current_dir(room: &Room<'_, Terminal>) -> Option<PathBuf> {
    let grants = &room.call.grants;
    let session = match &grants.session {
        Some(SessionRef { key, store }) => store
            .clone()
            .downcast::<Terminals>()
            .ok()?
            .open(key, &grants.profile)?,
        None => room.state.clone()?,
    };
    session.state().dir.map(PathBuf::from)
}

/// What a command in `session` is started with: its environment (and
/// whether that is the profile's rather than a state's) and the shell's
/// arguments.
struct Prepared {
    env: Vec<(String, std::ffi::OsString)>,
    fresh_env: bool,
    args: Vec<String>,
}

fn prepared(
    session: &TerminalSession,
    backend: &Backend,
    line: &str,
    cwd: &WorkingDir,
    requested_cwd: bool,
) -> Prepared {
    let state = session.state();
    let fresh_env = state.env.is_none();
    let mut env = match state.env {
        Some(env) => env,
        // The remote login environment stays; only what the profile passes
        // is added to it.
        None if matches!(backend, Backend::Ssh(_)) => passed_env(&session.profile),
        None => environment(&session.profile, &cwd.home),
    };
    if backend.proxy().is_some() {
        proxy_env(&mut env, &session.profile.network.hosts);
    }
    let carried = if requested_cwd { None } else { state.dir };
    let args = vec![
        "-c".to_string(),
        SCRIPT.to_string(),
        "bash".to_string(),
        line.to_string(),
        carried.unwrap_or_default(),
    ];
    Prepared {
        env,
        fresh_env,
        args,
    }
}

/// Runs `line` in `session` and waits for it; keeps the state it leaves.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run_in_session(
    session: &TerminalSession,
    line: &str,
    quoted: &str,
    cwd: &WorkingDir,
    requested_cwd: Option<&str>,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
    max_output: usize,
) -> (Result<Output, TerminalError>, Vec<CapabilityUse>) {
    let backend = match session.backend().await {
        Ok(backend) => backend,
        Err(reason) => {
            let message = format!("command {quoted:?} refused: {reason}");
            return (Err(TerminalError::Failed(message)), Vec::new());
        }
    };
    let prepared = prepared(session, &backend, line, cwd, requested_cwd.is_some());
    let launch = Launch {
        shell: shell_path(),
        args: prepared.args,
        dir: &cwd.dir,
        env: &prepared.env,
        stdin: stdin.is_some(),
        pty: None,
        state: true,
        requested_cwd,
        fresh_env: prepared.fresh_env,
    };
    let started = backend.launch(launch).await;
    let result = match started {
        Ok(started) => wait_for(started, stdin, timeout, max_output).await,
        Err(e) => Err(TerminalError::Failed(format!(
            "command {quoted:?} could not be started in the session: {e}"
        ))),
    };
    let uses = backend.proxy().map(|p| p.take_uses()).unwrap_or_default();
    if let Err(reason) = backend.undo_planted() {
        let message = format!("command {quoted:?}: {reason}");
        return (Err(TerminalError::Failed(message)), uses);
    }
    let result = result.map(|(captured, state)| {
        if let Some(mut state) = state {
            // A command given its own directory does not move the session.
            if requested_cwd.is_some() {
                state.dir = session.state().dir;
            }
            session.set_state(state);
        }
        captured
    });
    (result, uses)
}

/// Feeds, reads and waits for a foreground command; kills its group at the
/// deadline or if the call goes away.
async fn wait_for(
    started: Started,
    input: Option<Vec<u8>>,
    timeout: Duration,
    max_output: usize,
) -> Result<(Output, Option<ShellState>), TerminalError> {
    let Started {
        stdin,
        stdout,
        stderr,
        state,
        end,
        signals,
    } = started;
    // Kills the command's group unless it ended on its own.
    struct KillOnDrop(Option<super::terminals::launch::Signals>);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            if let Some(signals) = self.0.take() {
                tokio::spawn(async move { signals.send(libc::SIGKILL).await });
            }
        }
    }
    let mut guard = KillOnDrop(Some(signals));
    let mut out = CappedBuffer::new(max_output);
    let mut err = CappedBuffer::new(max_output);
    let mut saved = CappedBuffer::new(MOST_STATE);
    let mut io = Box::pin(async {
        tokio::join!(
            process_group::feed(stdin, input),
            out.read_all(stdout),
            err.read_all(stderr),
            read_state(&mut saved, state),
        );
    });
    let deadline = tokio::time::Instant::now() + timeout;
    let mut io_done = false;
    let mut end = end;
    let ended = loop {
        tokio::select! {
            ended = &mut end => break Some(ended),
            () = &mut io, if !io_done => io_done = true,
            () = tokio::time::sleep_until(deadline) => break None,
        }
    };
    let Some(ended) = ended else {
        return Err(TerminalError::Timeout);
    };
    if !io_done {
        let _ = tokio::time::timeout(DRAIN_GRACE, &mut io).await;
    }
    drop(io);
    guard.0 = None;
    let status = match ended {
        Ok(End::Exited(status)) => status,
        Ok(End::Unbuilt(reason)) => {
            return Err(TerminalError::Failed(format!(
                "the command could not be started: {reason}"
            )));
        }
        Err(e) => return Err(TerminalError::Failed(e.to_string())),
    };
    let state = (!saved.truncated)
        .then(|| ShellState::parse(&saved.bytes))
        .flatten();
    Ok((
        output(process_group::Captured {
            exit_code: status.code(),
            stdout: out.bytes,
            stdout_cut: out.truncated,
            stderr: err.bytes,
            stderr_cut: err.truncated,
        }),
        state,
    ))
}

async fn read_state(buffer: &mut CappedBuffer, pipe: Option<Reader>) {
    buffer.read_all(pipe).await;
}

/// Starts `command` in the background of the call's session.
pub(super) async fn spawn(
    room: &mut Room<'_, Terminal>,
    command: wit::BackgroundCommand,
) -> Result<u32, TerminalError> {
    let line = command.command_line.as_str();
    let quoted = quote(line);
    let current = command.cwd.is_none().then(|| current_dir(room)).flatten();
    let start = current.as_deref().map_or(Start::Own, Start::Session);
    let cwd = admit(room, line, command.cwd.as_deref(), start, "background: ").await?;
    let grants = room.call.grants.clone();
    let failed = |reason: String| {
        TerminalError::Failed(format!("command {quoted:?} could not be started: {reason}"))
    };
    let session = session_of(room).map_err(failed)?;
    let id = session.reserve().map_err(failed)?;
    let backend = session.backend().await.map_err(failed)?;
    let mut prepared = prepared(&session, &backend, line, &cwd, command.cwd.is_some());
    let pty = command.pty.map(|size| (size.rows, size.cols));
    if pty.is_some() && !prepared.env.iter().any(|(name, _)| name == "TERM") {
        prepared.env.push(("TERM".into(), "xterm-256color".into()));
    }
    let launch = Launch {
        shell: shell_path(),
        args: prepared.args,
        dir: &cwd.dir,
        env: &prepared.env,
        stdin: true,
        pty,
        state: false,
        requested_cwd: command.cwd.as_deref(),
        fresh_env: prepared.fresh_env,
    };
    let started = backend
        .launch(launch)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let cap = grants.profile.terminal.max_output;
    let budget = session.budget.clone();
    session.add(Process::new(id, line, pty.is_some(), started, cap, budget));
    Ok(id)
}

/// Output of process `id` since the last read.
pub(super) fn read_output(
    room: &mut Room<'_, Terminal>,
    id: u32,
) -> Result<wit::ProcessOutput, TerminalError> {
    let session = session_of(room).map_err(TerminalError::Failed)?;
    let process = session.process(id).map_err(TerminalError::Failed)?;
    let output = process.read();
    session.forget_if_done(id);
    Ok(to_wit(output))
}

/// Waits for process `id` for at most `timeout` (capped by the profile).
pub(super) async fn wait(
    room: &mut Room<'_, Terminal>,
    id: u32,
    timeout: Duration,
) -> Result<wit::ProcessOutput, TerminalError> {
    let timeout = timeout.min(room.call.grants.profile.terminal.timeout);
    let session = session_of(room).map_err(TerminalError::Failed)?;
    let process = session.process(id).map_err(TerminalError::Failed)?;
    let output = process.wait(timeout).await;
    session.forget_if_done(id);
    Ok(to_wit(output))
}

/// Writes to process `id`; a shell's lines are checked first.
pub(super) async fn write_input(
    room: &mut Room<'_, Terminal>,
    id: u32,
    input: Vec<u8>,
    close: bool,
) -> Result<(), TerminalError> {
    let session = session_of(room).map_err(TerminalError::Failed)?;
    let process = session.process(id).map_err(TerminalError::Failed)?;
    if process.shell {
        check_shell_input(room, &process, &input).await?;
    } else {
        room.allowed(format!(
            "input to process {id} ({}): {} bytes",
            quote(&process.line),
            input.len()
        ));
    }
    process
        .write(&input, close)
        .await
        .map_err(TerminalError::Failed)
}

/// What is written to a background shell is command lines: each completed
/// line (with what was written before it since the last newline) passes
/// the checks of a command, or nothing is written. Control characters are
/// refused: line editing could rearrange a line after it was checked.
async fn check_shell_input(
    room: &mut Room<'_, Terminal>,
    process: &Process,
    input: &[u8],
) -> Result<(), TerminalError> {
    let denied = |room: &mut Room<'_, Terminal>, target: String, reason: String| {
        room.refused(target, reason.clone());
        TerminalError::Denied(reason)
    };
    let target = |line: &str| format!("input to shell process {}: {}", process.id, quote(line));
    let Ok(text) = std::str::from_utf8(input) else {
        return Err(denied(
            room,
            target("(not UTF-8)"),
            format!("input to shell process {} must be text", process.id),
        ));
    };
    if let Some(c) = text
        .chars()
        .find(|&c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(denied(
            room,
            target(text),
            format!(
                "input to shell process {} holds the control character {c:?}; what is \
                 written to a shell is command lines, checked line by line, and line editing \
                 could change a line after its check",
                process.id
            ),
        ));
    }
    let grants = room.call.grants.clone();
    let identity = room.call.identity.clone();
    let granted = room.granted();
    let pending = process
        .pending_line
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let whole = format!("{pending}{text}");
    let mut lines: Vec<&str> = whole.split(['\n', '\r']).collect();
    let rest = lines.pop().unwrap_or_default().to_string();
    if rest.len() > MAX_PENDING_LINE {
        return Err(denied(
            room,
            target(&rest),
            format!(
                "input to shell process {} holds a line of {} bytes without its end, more than \
                 the limit of {MAX_PENDING_LINE} bytes; end lines with a newline",
                process.id,
                rest.len()
            ),
        ));
    }
    for line in lines.iter().filter(|line| !line.trim().is_empty()) {
        // The shell may have moved: paths are not judged from anywhere.
        let start = Start::Unknown;
        if let Err(reason) = authorize(granted, &grants, &identity, line, None, start).await {
            let message = format!("command {:?} refused: {reason}", quote(line));
            return Err(denied(room, target(line), message));
        }
        room.allowed(target(line));
    }
    *process
        .pending_line
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = rest;
    Ok(())
}

/// Sends `signal` to process `id`'s group.
pub(super) async fn send_signal(
    room: &mut Room<'_, Terminal>,
    id: u32,
    signal: wit::Signal,
) -> Result<(), TerminalError> {
    let session = session_of(room).map_err(TerminalError::Failed)?;
    let process = session.process(id).map_err(TerminalError::Failed)?;
    let number = match signal {
        wit::Signal::Interrupt => libc::SIGINT,
        wit::Signal::Terminate => libc::SIGTERM,
        wit::Signal::Kill => libc::SIGKILL,
        wit::Signal::Hangup => libc::SIGHUP,
        wit::Signal::Quit => libc::SIGQUIT,
        wit::Signal::User1 => libc::SIGUSR1,
        wit::Signal::User2 => libc::SIGUSR2,
    };
    room.allowed(format!(
        "signal {number} to process {id} ({})",
        quote(&process.line)
    ));
    process.signal(number).await;
    Ok(())
}

/// The session's background processes.
pub(super) fn list(room: &mut Room<'_, Terminal>) -> Vec<wit::ProcessInfo> {
    let Ok(session) = session_of(room) else {
        return Vec::new();
    };
    session
        .processes()
        .iter()
        .map(|process| wit::ProcessInfo {
            id: process.id,
            command_line: process.line.clone(),
            pty: process.pty,
            age_ms: u64::try_from(process.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            end: process.end().map(end_to_wit),
        })
        .collect()
}

fn end_to_wit(end: ProcessEnd) -> wit::ProcessEnd {
    match end {
        ProcessEnd::Exited(code) => wit::ProcessEnd::Exited(code),
        ProcessEnd::Killed(signal) => wit::ProcessEnd::Killed(signal),
        ProcessEnd::Failed(reason) => wit::ProcessEnd::Failed(reason),
    }
}

fn to_wit(output: ProcessOutput) -> wit::ProcessOutput {
    wit::ProcessOutput {
        stdout: output.stdout,
        stderr: output.stderr,
        dropped: output.dropped,
        end: output.end.map(end_to_wit),
    }
}
