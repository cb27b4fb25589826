//! Guest log lines for MCP requests without a session (2026-07-28): sent
//! only at or above the level the request's `_meta` names, none without one.

use serde_json::{Value, json};

use crate::protocol::{Stdio, workspace};
use crate::serve::CONFIG;

/// The `_meta` of a 2026-07-28 request (no session), naming `level` if
/// given.
fn stateless_meta(level: Option<&str>) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
    });
    if let Some(level) = level {
        meta["io.modelcontextprotocol/logLevel"] = json!(level);
    }
    meta
}

/// Calls `todo` once as a 2026-07-28 request (no session) whose `_meta`
/// names `level` (none: no level); the `notifications/message` lines that
/// came before the answer.
fn log_lines_of_a_stateless_todo(level: Option<&str>) -> Vec<Value> {
    let (_dir, root) = workspace(CONFIG);
    let mut server = Stdio::start(&root, &[]);
    let meta = stateless_meta(level);
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

/// A plugin that logs 1000 lines of 4 KiB of control characters (24 MB as
/// escaped JSON) sends a client at most 1 MiB of them, then one notice of
/// how many were dropped, and the call's answer; the server's own log gets
/// at most its per-plugin share a second of them.
#[test]
fn a_chatty_plugins_log_lines_are_bounded_on_the_wire_and_in_the_servers_log() {
    let (_dir, root) = workspace(CONFIG);
    let mut server = Stdio::start(&root, &[]);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
        "io.modelcontextprotocol/logLevel": "debug",
    });
    server.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "chatter", "arguments": {"lines": 1000, "bytes": 4096},
        "_meta": meta}}));
    let (mut sent, mut lines, mut notice) = (0, 0, None);
    loop {
        let message = server.answer();
        if message["id"] == 2 {
            assert!(message["result"]["isError"] != json!(true), "{message}");
            break;
        }
        if message["method"] == "notifications/message" {
            sent += message.to_string().len();
            lines += 1;
            let text = message["params"]["data"]["message"]
                .as_str()
                .unwrap_or_default();
            if text.contains("log lines of this call were dropped") {
                notice = Some(text.to_string());
            }
        }
    }
    assert!(
        sent <= (1 << 20) + 4096,
        "{sent} bytes of log lines in {lines} lines"
    );
    assert!(lines > 10, "only {lines} lines came");
    let notice = notice.expect("no notice of the dropped lines");
    assert!(
        notice.starts_with(&format!("{} log lines", 1000 - (lines - 1))),
        "{notice}"
    );
    // The server's log: the plugin's share of a second, and a line saying
    // how many were dropped.
    let log = server.stderr_text();
    assert!(log.len() < 2 << 20, "the server logged {} bytes", log.len());
}

/// Empty and one-byte guest lines cost the server's log what it writes of
/// them (its time, level, fields and the escaped message), not their
/// length: a plugin logging 1000 empty lines a call, called 20 times, gets
/// its share of a second of the server's log, not 80 bytes a line.
#[test]
fn empty_guest_log_lines_are_charged_what_the_servers_log_writes() {
    let (_dir, root) = workspace(CONFIG);
    let mut server = Stdio::start(&root, &[]);
    // No log level asked: the lines go to the server's log alone.
    let meta = stateless_meta(None);
    let started = std::time::Instant::now();
    for (id, bytes) in (2..22).zip([0, 1].into_iter().cycle()) {
        server.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "chatter", "arguments": {"lines": 1000, "bytes": bytes},
            "_meta": meta}}));
        loop {
            let message = server.answer();
            if message["id"] == id {
                assert_eq!(message["result"]["isError"], json!(false), "{message}");
                break;
            }
        }
    }
    let seconds = started.elapsed().as_secs() + 1;
    let log = server.stderr_text();
    // 64 KiB a second, and the lines saying how many were dropped.
    let most = (seconds as usize) * (64 << 10) + (64 << 10);
    assert!(
        log.len() < most,
        "the server logged {} bytes in {seconds} s (at most {most})",
        log.len()
    );
}
