//! What a tool is to the SDK: its spec, its error type, and the trait that
//! `#[tool]` implements.

use std::fmt;

/// Describes a tool to the host. `#[tool]` builds it; you rarely write one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSpec {
    /// Unique tool name, `[a-zA-Z0-9_-]{1,64}`.
    pub name: String,
    /// What the tool does, for models.
    pub description: String,
    /// JSON Schema of the arguments object, as JSON text.
    pub parameters: String,
    /// The toolset the tool belongs to.
    pub toolset: String,
    /// Permissions the tool needs (`file:read`, `network:fetch`, ...).
    pub permissions: Vec<String>,
    /// Environment variables the tool needs.
    pub requires_env: Vec<String>,
    /// An emoji for listings.
    pub emoji: Option<String>,
    /// Hint: the tool does not modify anything.
    pub read_only: bool,
    /// Hint: the tool may delete or overwrite things.
    pub destructive: bool,
    /// A short human-readable name shown to people instead of `name`.
    pub title: Option<String>,
    /// JSON Schema of the result object, as JSON text, when the result has a
    /// known shape. `#[tool]` derives it from the function's result type when
    /// that type derives [`JsonSchema`](crate::JsonSchema) and is an object.
    pub output_schema: Option<String>,
}

/// A tool exported by [`export_plugin!`](crate::export_plugin). Implemented by
/// `#[tool]`.
pub trait Tool {
    /// The tool's name.
    const NAME: &'static str;
    /// The tool's spec.
    fn spec() -> ToolSpec;
    /// Parses `arguments` (JSON text) and runs the tool, returning JSON text.
    fn call(arguments: &str) -> Result<String, ToolError>;
}

/// Why a tool failed. The model sees the message.
///
/// Any [`std::error::Error`] converts into [`ToolError::Failed`] with `?`
/// (denials from [`http`](crate::http) and [`terminal`](crate::terminal)
/// become [`ToolError::Denied`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolError {
    /// The arguments were not acceptable.
    InvalidArguments(String),
    /// The tool was refused something it needed.
    Denied(String),
    /// Anything else went wrong.
    Failed(String),
}

impl ToolError {
    /// An [`InvalidArguments`](ToolError::InvalidArguments) error.
    pub fn invalid_arguments(message: impl fmt::Display) -> Self {
        Self::InvalidArguments(message.to_string())
    }

    /// A [`Denied`](ToolError::Denied) error.
    pub fn denied(message: impl fmt::Display) -> Self {
        Self::Denied(message.to_string())
    }

    /// A [`Failed`](ToolError::Failed) error.
    pub fn failed(message: impl fmt::Display) -> Self {
        Self::Failed(message.to_string())
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidArguments(m) => write!(f, "invalid arguments: {m}"),
            Self::Denied(m) => write!(f, "denied: {m}"),
            Self::Failed(m) => write!(f, "failed: {m}"),
        }
    }
}

impl<E: std::error::Error + 'static> From<E> for ToolError {
    fn from(error: E) -> Self {
        let any: &dyn std::any::Any = &error;
        if let Some(crate::http::HttpError::Denied(m)) = any.downcast_ref() {
            return Self::Denied(m.clone());
        }
        if let Some(crate::terminal::TerminalError::Denied(m)) = any.downcast_ref() {
            return Self::Denied(m.clone());
        }
        Self::Failed(error.to_string())
    }
}

/// The argument type of a tool that takes no arguments.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
pub struct NoArguments {}
