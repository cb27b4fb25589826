//! How a tool call fails: one error type for every stage, rendered for models
//! as `{"error": "<kind>: <message>"}` with a bounded message.

use std::fmt;

use serde_json::{Value, json};

/// The longest error message a model sees, in bytes; the full text goes to the log.
pub const MAX_ERROR_MESSAGE: usize = 2048;

/// The stage or cause of a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No tool has that name.
    UnknownTool,
    /// The tool exists but is not offered (unloaded, hidden by the profile,
    /// missing env vars).
    Unavailable,
    /// The arguments are not valid JSON (or not a JSON object).
    InvalidJson,
    /// The arguments do not match the tool's schema, or the tool rejected them.
    InvalidArguments,
    /// A permission, path, host or command was refused.
    Denied,
    /// The tool ran and reported a failure.
    ToolFailed,
    /// The guest crashed (trap, panic, abort).
    Trap,
    /// The call ran past its time limit.
    Timeout,
    /// The guest exceeded its memory limit.
    Memory,
    /// The result exceeded the output size limit.
    OutputTooLarge,
    /// The result looked like JSON but did not parse.
    InvalidOutput,
    /// The call could not start (limits reached, host shutting down).
    Busy,
    /// A hook (or a human asked for approval) refused the call.
    Blocked,
    /// The call was stopped because its plugin version was unloaded.
    Cancelled,
    /// The request around the call is malformed (a batch entry without a
    /// function name, for example).
    InvalidRequest,
    /// The state a call named (a handle's) was dropped; nothing ran.
    StateLost,
    /// A bug or resource failure in the host itself.
    Internal,
}

impl ErrorKind {
    /// The stable snake_case name used in `{"error": "<kind>: ..."}`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownTool => "unknown_tool",
            Self::Unavailable => "unavailable",
            Self::InvalidJson => "invalid_json",
            Self::InvalidArguments => "invalid_arguments",
            Self::Denied => "denied",
            Self::ToolFailed => "tool_error",
            Self::Trap => "trap",
            Self::Timeout => "timeout",
            Self::Memory => "memory",
            Self::OutputTooLarge => "output_too_large",
            Self::InvalidOutput => "invalid_output",
            Self::Busy => "busy",
            Self::Blocked => "blocked",
            Self::Cancelled => "cancelled",
            Self::InvalidRequest => "invalid_request",
            Self::StateLost => "state_lost",
            Self::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed tool call. Its message names the tool and plugin and says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    kind: ErrorKind,
    message: String,
}

impl CallError {
    /// An error of `kind` with a complete message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The full message (unbounded; [`CallError::to_json`] bounds it).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// `"<kind>: <message>"`, with the message cut to [`MAX_ERROR_MESSAGE`] bytes.
    pub fn model_text(&self) -> String {
        format!(
            "{}: {}",
            self.kind,
            bounded(&self.message, MAX_ERROR_MESSAGE)
        )
    }

    /// `{"error": "<kind>: <message>"}`, what a model sees.
    pub fn to_json(&self) -> Value {
        json!({ "error": self.model_text() })
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for CallError {}

/// Cuts `text` to at most `max` bytes on a character boundary, saying how much
/// was left out.
pub(crate) fn bounded(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max.saturating_sub(40);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &text[..end], text.len() - end).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let text = "é".repeat(5000);
        let json = CallError::new(ErrorKind::ToolFailed, text).to_json();
        let shown = json["error"].as_str().unwrap();
        assert!(shown.len() <= MAX_ERROR_MESSAGE + "tool_error: ".len());
        assert!(shown.starts_with("tool_error: éé"));
        assert!(shown.ends_with("more bytes)"));
    }

    #[test]
    fn short_messages_are_kept_whole() {
        let e = CallError::new(ErrorKind::UnknownTool, "no tool named \"x\"");
        assert_eq!(
            e.to_json(),
            json!({"error": "unknown_tool: no tool named \"x\""})
        );
    }
}
