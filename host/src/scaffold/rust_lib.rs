//! A toolhost plugin.

use toolhost_sdk::prelude::*;

/// Arguments of `TOOL`.
#[derive(Deserialize, JsonSchema)]
struct Args {
    /// Who to greet.
    name: String,
}

/// Greet someone by name.
#[tool(read_only)]
fn TOOL(args: Args) -> Result<Value, ToolError> {
    if args.name.trim().is_empty() {
        return Err(ToolError::invalid_arguments("name must not be empty"));
    }
    Ok(json!({ "greeting": format!("Hello, {}!", args.name) }))
}

export_plugin!(TOOL);
