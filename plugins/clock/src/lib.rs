//! Demo tool: the time of day, read from WASI's wall clock (which is why it
//! is not in the `echo` plugin, built without WASI).

use toolhost_sdk::prelude::*;

/// The current time as seconds since the Unix epoch (UTC).
#[tool(toolset = "demo", emoji = "🕒", read_only)]
fn now() -> Result<Value, ToolError> {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(ToolError::failed)?;
    Ok(json!({ "unix_seconds": since_epoch.as_secs() }))
}

export_plugin!(now);
