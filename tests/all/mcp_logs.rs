//! Guest log lines for MCP requests without a session (2026-07-28): sent
//! only at or above the level the request's `_meta` names, none without one.

use serde_json::{Value, json};

use crate::protocol::{Stdio, workspace};
use crate::serve::CONFIG;

/// Calls `todo` once as a 2026-07-28 request (no session) whose `_meta`
/// names `level` (none: no level); the `notifications/message` lines that
/// came before the answer.
fn log_lines_of_a_stateless_todo(level: Option<&str>) -> Vec<Value> {
    let (_dir, root) = workspace(CONFIG);
    let mut server = Stdio::start(&root, &[]);
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
    });
    if let Some(level) = level {
        meta["io.modelcontextprotocol/logLevel"] = json!(level);
    }
    server.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "todo", "arguments": {"action": "list"}, "_meta": meta}}));
    let mut lines = Vec::new();
    loop {
        let message = server.answer();
        if message["id"] == 2 {
            assert!(message["result"]["content"].is_array(), "{message}");
            return lines;
        }
        if message["method"] == "notifications/message" {
            lines.push(message["params"].clone());
        }
    }
}

#[test]
fn a_request_without_a_session_gets_log_lines_only_at_the_level_it_names() {
    let lines = log_lines_of_a_stateless_todo(Some("debug"));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["level"], "debug");
    assert!(log_lines_of_a_stateless_todo(Some("info")).is_empty());
    assert!(log_lines_of_a_stateless_todo(None).is_empty());
}
