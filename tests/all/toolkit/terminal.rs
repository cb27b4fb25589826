//! The `terminal` toolset: `run_command` under the profile's rules.

use std::sync::Arc;

use serde_json::json;
use toolhost::ErrorKind;
use toolhost::approval::{Approval, ScriptedApprover};

use super::{assert_contains, bundled, fails, ok};
use crate::Workspace;

#[tokio::test]
async fn run_command_runs_allowed_commands_in_the_workspace() {
    let ws = Workspace::new(bundled);
    ws.write("sub/file.txt", "x");
    let host = ws.host(crate::terminal::RUNS).await;
    let ran = ok(
        &host,
        "run_command",
        json!({"command": "pwd; echo oops >&2; exit 3"}),
    )
    .await;
    assert_eq!(
        ran,
        json!({
            "exit_code": 3,
            "success": false,
            "stdout": format!("{}\n", ws.path.display()),
            "stderr": "oops\n",
            "truncated": false,
        })
    );
    let ls = ok(
        &host,
        "run_command",
        json!({"command": "ls; tr a-z A-Z", "cwd": "sub", "stdin": "quiet"}),
    )
    .await;
    assert_eq!(ls["stdout"], "file.txt\nQUIET");
    assert_eq!(ls["success"], true);
}

#[tokio::test]
async fn run_command_is_refused_by_the_profile_rules() {
    let ws = Workspace::new(bundled);
    ws.write("build/keep", "");
    let host = ws
        .host(
            r#"
            allow = ["terminal:execute"]
            file.read = ["."]
            terminal.deny_commands = ["git push*"]
            "#,
        )
        .await;
    let message = fails(
        &host,
        "run_command",
        json!({"command": "echo a && git push origin main"}),
        ErrorKind::Denied,
    )
    .await;
    assert_contains(&message, "terminal.deny_commands");
    // Dangerous commands are refused by default.
    let message = fails(
        &host,
        "run_command",
        json!({"command": "rm -rf build"}),
        ErrorKind::Denied,
    )
    .await;
    assert_contains(&message, "recursive_delete");
    assert!(ws.path.join("build/keep").exists());
    let message = fails(
        &host,
        "run_command",
        json!({"command": "echo x", "cwd": "/"}),
        ErrorKind::Denied,
    )
    .await;
    assert_contains(&message, "working directory");

    let no_terminal = ws
        .host("allow = [\"*\"]\ndeny = [\"terminal:*\"]\nfile.read = [\".\"]")
        .await;
    let message = fails(
        &no_terminal,
        "run_command",
        json!({"command": "echo hi"}),
        ErrorKind::Unavailable,
    )
    .await;
    assert_contains(&message, "terminal:execute");
}

#[tokio::test]
async fn run_command_asks_before_dangerous_commands_in_approve_mode() {
    let ws = Workspace::new(bundled);
    ws.write("scratch/file", "");
    let approver = Arc::new(ScriptedApprover::new([Approval::Deny, Approval::Once]));
    let host = ws
        .host_with(
            r#"
            allow = ["terminal:execute", "file:write"]
            file.write = ["."]
            terminal.dangerous = "approve"
            "#,
            |builder| builder.approver(approver.clone()),
        )
        .await;
    let delete = json!({"command": "rm -rf ./scratch"});
    let message = fails(&host, "run_command", delete.clone(), ErrorKind::Denied).await;
    assert_contains(&message, "was not approved");
    assert!(ws.path.join("scratch").exists());
    assert_eq!(ok(&host, "run_command", delete).await["success"], true);
    assert!(!ws.path.join("scratch").exists());
    assert_eq!(approver.asked().len(), 2);
    assert_eq!(approver.asked()[0].tool, "run_command");
}
