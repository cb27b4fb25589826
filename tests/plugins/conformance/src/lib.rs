//! Test guest: the fixture tools of the official MCP conformance suite that
//! the contract can express (text results, tool errors, log messages,
//! progress), for `scripts/conformance.sh`.

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

/// Reports progress three times (0, 50 and 100 of 100), 50 ms apart.
#[tool(toolset = "conformance", read_only)]
fn test_tool_with_progress() -> Result<Value, ToolError> {
    for (step, done) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if step > 0 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        toolhost_sdk::progress::report(
            done,
            Some(100.0),
            Some(&format!("Completed step {done} of 100")),
        );
    }
    Ok(json!("Reported progress three times."))
}

export_plugin!(
    test_simple_text,
    test_error_handling,
    test_tool_with_logging,
    test_tool_with_progress
);
