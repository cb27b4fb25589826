//! A tool call as the host takes it: the tool, its arguments, the session
//! and the model's call id.

use serde_json::Value;

/// A call's arguments: JSON text (as models send them, possibly malformed)
/// or an already parsed value.
#[derive(Debug, Clone)]
pub enum Arguments {
    /// JSON text; empty text means `{}`.
    Text(String),
    /// A parsed JSON value.
    Value(Value),
}

impl From<&str> for Arguments {
    fn from(text: &str) -> Self {
        Self::Text(text.to_string())
    }
}

impl From<String> for Arguments {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<Value> for Arguments {
    fn from(value: Value) -> Self {
        Self::Value(value)
    }
}

/// One tool call.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The tool's name.
    pub tool: String,
    /// Its arguments.
    pub arguments: Arguments,
    /// Session (or task) id: calls of a stateful plugin with the same id
    /// share an instance.
    pub session: Option<String>,
    /// The model's `tool_call_id`, for hooks and logs.
    pub call_id: Option<String>,
    /// The session must hold the stateful plugin's instance already (a
    /// handle's state): when it does not, the call fails with `state_lost`
    /// instead of starting a fresh instance.
    pub resume: bool,
}

impl CallRequest {
    /// A call of `tool` with `arguments`, without session or call id.
    pub fn new(tool: impl Into<String>, arguments: impl Into<Arguments>) -> Self {
        Self {
            tool: tool.into(),
            arguments: arguments.into(),
            session: None,
            call_id: None,
            resume: false,
        }
    }

    /// Sets the session id.
    pub fn session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }

    /// Sets the call id.
    pub fn call_id(mut self, call_id: impl Into<String>) -> Self {
        self.call_id = Some(call_id.into());
        self
    }
}
