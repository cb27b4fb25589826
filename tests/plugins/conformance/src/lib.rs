//! Test guest: the fixture tools of the official MCP conformance suite that
//! the contract can express (text results, tool errors, log messages), for
//! `scripts/conformance.sh`.

use toolhost_sdk::prelude::*;

/// Returns a simple text response.
#[tool(toolset = "conformance", read_only)]
fn test_simple_text() -> Result<Value, ToolError> {
    Ok(json!("This is a simple text response for testing."))
}

/// Always fails, with a message.
#[tool(toolset = "conformance", read_only)]
fn test_error_handling() -> Result<Value, ToolError> {
    Err(ToolError::Failed(
        "This tool intentionally returns an error for testing".into(),
    ))
}

/// Sends three log messages while it runs.
#[tool(toolset = "conformance", read_only)]
fn test_tool_with_logging() -> Result<Value, ToolError> {
    toolhost_sdk::log::info("Tool execution started");
    toolhost_sdk::log::info("Tool processing data");
    toolhost_sdk::log::info("Tool execution completed");
    Ok(json!("Logged three messages."))
}

export_plugin!(
    test_simple_text,
    test_error_handling,
    test_tool_with_logging
);
