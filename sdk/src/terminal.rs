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
