//! Shell commands through the host. Needs the `terminal:execute` permission;
//! the host checks each command against the caller's permission profile, may
//! ask a human to approve dangerous ones, and kills it at its time limit.
//!
//! ```ignore
//! let out = toolhost_sdk::terminal::Command::new("git status --short").cwd("repo").run()?;
//! ```

use std::fmt;
use std::time::Duration;

use crate::__private::bindings::toolhost::plugin::terminal as wit;

/// A command line to run with `/bin/sh -c`.
#[derive(Debug, Clone)]
pub struct Command {
    command_line: String,
    cwd: Option<String>,
    stdin: Option<Vec<u8>>,
    timeout: Option<Duration>,
}

impl Command {
    /// A command line.
    pub fn new(command_line: impl Into<String>) -> Self {
        Self {
            command_line: command_line.into(),
            cwd: None,
            stdin: None,
            timeout: None,
        }
    }

    /// Runs in this directory (it must be inside a granted path).
    pub fn cwd(mut self, dir: impl Into<String>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Writes these bytes to the command's standard input.
    pub fn stdin(mut self, input: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(input.into());
        self
    }

    /// Sets a time limit (the host caps it at the profile's limit).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Runs the command and waits for it to finish.
    pub fn run(self) -> Result<Output, TerminalError> {
        let command = wit::Command {
            command_line: self.command_line,
            cwd: self.cwd,
            stdin: self.stdin,
            timeout_ms: self
                .timeout
                .map(|t| u32::try_from(t.as_millis()).unwrap_or(u32::MAX)),
        };
        match wit::run(&command) {
            Ok(o) => Ok(Output {
                exit_code: o.exit_code,
                stdout: o.stdout,
                stderr: o.stderr,
                truncated: o.truncated,
            }),
            Err(e) => Err(e.into()),
        }
    }
}

/// Runs a command line with default options.
pub fn run(command_line: impl Into<String>) -> Result<Output, TerminalError> {
    Command::new(command_line).run()
}

/// What a finished command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Exit code; `None` when killed by a signal.
    pub exit_code: Option<i32>,
    /// Standard output, capped.
    pub stdout: String,
    /// Standard error, capped.
    pub stderr: String,
    /// True when output was cut at the cap.
    pub truncated: bool,
}

impl Output {
    /// True when the command exited with code 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// Why a command did not run to completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalError {
    /// Refused by the caller's profile or by a human; the message says why.
    Denied(String),
    /// Killed at its time limit.
    Timeout,
    /// Could not be started.
    Failed(String),
}

impl From<wit::TerminalError> for TerminalError {
    fn from(e: wit::TerminalError) -> Self {
        match e {
            wit::TerminalError::Denied(m) => Self::Denied(m),
            wit::TerminalError::Timeout => Self::Timeout,
            wit::TerminalError::Failed(m) => Self::Failed(m),
        }
    }
}

impl fmt::Display for TerminalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Denied(m) => write!(f, "command denied: {m}"),
            Self::Timeout => write!(f, "command timed out"),
            Self::Failed(m) => write!(f, "command failed to start: {m}"),
        }
    }
}

impl std::error::Error for TerminalError {}

/// A command to start in the background of the caller's session (contract
/// 0.2.1). It runs on after the call returns, until it ends, is killed, or
/// its session ends; later calls of the session reach it by [`Process::id`].
///
/// ```ignore
/// let server = Background::new("python3 -m http.server 8000").start()?;
/// let output = server.wait(Duration::from_secs(1))?;
/// ```
#[derive(Debug, Clone)]
pub struct Background {
    command_line: String,
    cwd: Option<String>,
    pty: Option<(u16, u16)>,
}

impl Background {
    /// A command line.
    pub fn new(command_line: impl Into<String>) -> Self {
        Self {
            command_line: command_line.into(),
            cwd: None,
            pty: None,
        }
    }

    /// Starts in this directory (it must be inside a granted path).
    pub fn cwd(mut self, dir: impl Into<String>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Runs on a pseudo-terminal of `rows` by `cols` characters (for
    /// interactive programs); its output then all comes as stdout.
    pub fn pty(mut self, rows: u16, cols: u16) -> Self {
        self.pty = Some((rows, cols));
        self
    }

    /// Checks and starts the command.
    pub fn start(self) -> Result<Process, TerminalError> {
        let command = wit::BackgroundCommand {
            command_line: self.command_line,
            cwd: self.cwd,
            pty: self.pty.map(|(rows, cols)| wit::PtySize { rows, cols }),
        };
        wit::spawn(&command).map(Process).map_err(Into::into)
    }
}

/// A background process of the session, by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process(pub u32);

pub use wit::{ProcessEnd, ProcessInfo, ProcessOutput, Signal};

impl Process {
    /// Its id in the session.
    pub fn id(&self) -> u32 {
        self.0
    }

    /// Output since the last read, and how it ended if it has.
    pub fn read(&self) -> Result<ProcessOutput, TerminalError> {
        wit::read_output(self.0).map_err(Into::into)
    }

    /// Waits until it ends or `timeout` passes, then reads.
    pub fn wait(&self, timeout: Duration) -> Result<ProcessOutput, TerminalError> {
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
        wit::wait(self.0, ms).map_err(Into::into)
    }

    /// Writes to its input (a shell's lines are checked as commands).
    pub fn write(&self, input: impl AsRef<[u8]>) -> Result<(), TerminalError> {
        wit::write_input(self.0, input.as_ref(), false).map_err(Into::into)
    }

    /// Ends its input.
    pub fn close_input(&self) -> Result<(), TerminalError> {
        wit::write_input(self.0, &[], true).map_err(Into::into)
    }

    /// Sends `signal` to it and everything it started.
    pub fn signal(&self, signal: Signal) -> Result<(), TerminalError> {
        wit::send_signal(self.0, signal).map_err(Into::into)
    }
}

/// The session's background processes.
pub fn processes() -> Vec<ProcessInfo> {
    wit::list_processes()
}
