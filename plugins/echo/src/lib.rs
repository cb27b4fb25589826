//! Demo tool: echo text back. It needs nothing of WASI, so it is built for
//! wasm32-unknown-unknown (its Cargo.toml's `[package.metadata.toolhost]`): a lean
//! component, instantiated for each call in about a third of the time.

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

export_plugin!(echo);
