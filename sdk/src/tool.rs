//! What a tool is to the SDK: its spec (built with [`ToolSpec::new`] and
//! the builder methods), its error type, and the trait that `#[tool]`
//! implements.

use std::fmt;

use crate::content::{Icon, ToolOutput};

/// Describes a tool to the host. `#[tool]` builds it; a hand-written one
/// starts from [`ToolSpec::new`] and adds the optional parts:
///
/// ```
/// use toolhost_sdk::ToolSpec;
///
/// let spec = ToolSpec::new("forecast", "The weather forecast for a city.")
///     .parameters(r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#)
///     .toolset("weather")
///     .permission("network:fetch")
///     .read_only(true);
/// assert_eq!(spec.name(), "forecast");
/// ```
///
/// Its fields are private, so later versions of the SDK can add optional
/// parts without breaking code that builds a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSpec {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) parameters: String,
    pub(crate) toolset: Option<String>,
    pub(crate) permissions: Vec<String>,
    pub(crate) requires_env: Vec<String>,
    pub(crate) emoji: Option<String>,
    pub(crate) read_only: bool,
    pub(crate) destructive: bool,
    pub(crate) title: Option<String>,
    pub(crate) output_schema: Option<String>,
    pub(crate) icons: Vec<Icon>,
}

/// The parameters of a tool that takes no arguments.
const NO_PARAMETERS: &str = r#"{"type":"object","properties":{}}"#;

impl ToolSpec {
    /// A tool named `name` (`[a-zA-Z0-9_-]{1,64}`, unique across the host)
    /// that does what `description` says (written for a model). It takes no
    /// arguments, is in the toolset named like the tool, needs no
    /// permission, and is neither read-only nor destructive until the
    /// builder methods say otherwise.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters: NO_PARAMETERS.to_string(),
            toolset: None,
            permissions: Vec::new(),
            requires_env: Vec::new(),
            emoji: None,
            read_only: false,
            destructive: false,
            title: None,
            output_schema: None,
            icons: Vec::new(),
        }
    }

    /// The JSON Schema of the arguments object, as JSON text (its `type`
    /// must be `"object"`).
    pub fn parameters(mut self, schema: impl Into<String>) -> Self {
        self.parameters = schema.into();
        self
    }

    /// The JSON Schema of the arguments object, derived from the argument
    /// type `T` as `#[tool]` derives it.
    pub fn parameters_of<T: schemars::JsonSchema>(self) -> Self {
        self.parameters(crate::__private::schema_of::<T>())
    }

    /// The toolset the tool belongs to (default: the tool's name).
    pub fn toolset(mut self, toolset: impl Into<String>) -> Self {
        self.toolset = Some(toolset.into());
        self
    }

    /// Adds a permission the tool needs (`file:read`, `network:fetch`, ...).
    pub fn permission(mut self, permission: impl Into<String>) -> Self {
        self.permissions.push(permission.into());
        self
    }

    /// Adds an environment variable the tool needs.
    pub fn requires_env(mut self, variable: impl Into<String>) -> Self {
        self.requires_env.push(variable.into());
        self
    }

    /// An emoji for listings.
    pub fn emoji(mut self, emoji: impl Into<String>) -> Self {
        self.emoji = Some(emoji.into());
        self
    }

    /// Hint: the tool does not modify anything.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Hint: the tool may delete or overwrite things.
    pub fn destructive(mut self, destructive: bool) -> Self {
        self.destructive = destructive;
        self
    }

    /// A short human-readable name shown to people instead of the name.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// The JSON Schema of the result object, as JSON text: the host checks
    /// every result against it (a content result's structured content).
    pub fn output_schema(mut self, schema: impl Into<String>) -> Self {
        self.output_schema = Some(schema.into());
        self
    }

    /// Adds an icon (MCP clients show the first that suits them).
    pub fn icon(mut self, icon: Icon) -> Self {
        self.icons.push(icon);
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tool's description.
    pub fn description(&self) -> &str {
        &self.description
    }
}

/// A tool exported by [`export_plugin!`](crate::export_plugin). Implemented by
/// `#[tool]`, or by hand:
///
/// ```
/// use toolhost_sdk::{Tool, ToolError, ToolOutput, ToolSpec};
///
/// struct Ping;
///
/// impl Tool for Ping {
///     const NAME: &'static str = "ping";
///     fn spec() -> ToolSpec {
///         ToolSpec::new(Self::NAME, "Answers pong.").read_only(true)
///     }
///     fn call(_arguments: &str) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::json("\"pong\""))
///     }
/// }
/// ```
pub trait Tool {
    /// The tool's name.
    const NAME: &'static str;
    /// The tool's spec.
    fn spec() -> ToolSpec;
    /// Parses `arguments` (JSON text) and runs the tool.
    fn call(arguments: &str) -> Result<ToolOutput, ToolError>;
}

/// Why a tool failed. The model sees the message.
///
/// Any [`std::error::Error`] converts into [`ToolError::Failed`] with `?`
/// (denials from [`http`](crate::http) and [`terminal`](crate::terminal)
/// become [`ToolError::Denied`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
