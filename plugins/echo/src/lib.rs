//! Demo tools: echo text back, and report the time of day.

use toolhost_sdk::prelude::*;

/// Arguments of `echo`.
#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to echo.
    text: String,
    /// Upper-case the text before echoing it.
    #[serde(default)]
    upper: bool,
    /// How many times to repeat the text (default 1).
    #[serde(default)]
    repeat: Option<u8>,
}

/// Echo the text back, optionally upper-cased and repeated.
#[tool(toolset = "demo", emoji = "🔁", read_only)]
fn echo(args: EchoArgs) -> Result<Value, ToolError> {
    let text = if args.upper {
        args.text.to_uppercase()
    } else {
        args.text
    };
    let repeat = usize::from(args.repeat.unwrap_or(1));
    if repeat == 0 {
        return Err(ToolError::invalid_arguments("repeat must be at least 1"));
    }
    Ok(json!({ "text": text.repeat(repeat) }))
}

/// The current time as seconds since the Unix epoch (UTC).
#[tool(toolset = "demo", emoji = "🕒", read_only)]
fn now() -> Result<Value, ToolError> {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(ToolError::failed)?;
    Ok(json!({ "unix_seconds": since_epoch.as_secs() }))
}

export_plugin!(echo, now);
