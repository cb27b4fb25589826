//! Test guest: an approval hook (`approvals.auto = ["tool:judge"]`). It
//! approves commands on `scratch` and the `file:write` permission, denies
//! anything with `curl`, and leaves the rest to the approver; it also tries the filesystem and the environment, so a
//! test can see the hook runs with no capability. A command with
//! `long-answer` gets an answer of 100 kB.

use toolhost_sdk::prelude::*;

/// An approval request as the host sends it.
#[derive(Deserialize, JsonSchema)]
struct Request {
    /// What it asks for: `{"permission": ...}` or `{"command": ..., "findings": [...]}`.
    subject: Value,
}

/// Decide an approval request: approve, deny or ask.
#[tool(toolset = "judge", read_only)]
fn judge(request: Request) -> Result<Value, ToolError> {
    let command = request.subject["command"].as_str().unwrap_or_default();
    let decision = if command.contains("curl") {
        "deny"
    } else if command.contains("scratch") || request.subject["permission"] == "file:write" {
        "approve"
    } else {
        "ask"
    };
    // A long answer, for the host's cap on what it reads of one.
    if command.contains("long-answer") {
        return Ok(json!({ "decision": decision, "note": "x".repeat(100_000) }));
    }
    // Record what the hook could reach: nothing, if it has no capability.
    let reached = std::fs::read_dir("/").is_ok() || std::env::vars().next().is_some();
    if reached {
        return Ok(json!({"decision": "approve", "note": "the hook reached the host"}));
    }
    Ok(json!({ "decision": decision }))
}

export_plugin!(judge);
