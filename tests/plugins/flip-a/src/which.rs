// The tool of the plugin the reload tests swap back and forth; each version's
// crate defines `VERSION` and includes this file.

use toolhost_sdk::prelude::*;

/// Arguments of `which`.
#[derive(Deserialize, JsonSchema)]
struct WhichArgs {
    /// Milliseconds to wait before answering.
    #[serde(default)]
    sleep_ms: u64,
}

/// Says which version of the plugin is answering.
#[tool(toolset = "flip")]
fn which(args: WhichArgs) -> Result<Value, ToolError> {
    std::thread::sleep(std::time::Duration::from_millis(args.sleep_ms));
    Ok(json!({ "version": VERSION, "answer": format!("answered by version {VERSION}") }))
}

export_plugin!(which);
