//! Dangerous commands in `approve` mode: asking, and approvals once, for
//! the session and always.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost::approval::{
    Approval, ApprovalRequest, Approver, DenyApprover, ScriptedApprover, Subject,
};
use toolhost::hooks::BoxFuture;
use toolhost::{CallRequest, Host};

use super::{denied, ok_stdout, run_line, shell};
use crate::Workspace;

const APPROVE: &str = r#"
allow = ["terminal:*", "file:write"]
file.write = ["."]
terminal.dangerous = "approve"
"#;

/// Deletes `./scratch`, which the detector flags as a recursive delete.
const DELETE_SCRATCH: &str = "rm -rf ./scratch";

async fn host_asking(
    ws: &Workspace,
    approver: Arc<dyn Approver>,
    allowlist: Option<&Path>,
) -> Host {
    ws.host_with(APPROVE, |builder| {
        let builder = builder.approver(approver);
        match allowlist {
            Some(file) => builder.allowlist(file),
            None => builder,
        }
    })
    .await
}

#[tokio::test]
async fn approve_mode_asks_and_a_deny_refuses() {
    let ws = Workspace::new(shell);
    let scratch = ws.mkdir("scratch");
    let script = Arc::new(ScriptedApprover::new([Approval::Deny]));
    let host = host_asking(&ws, script.clone(), None).await;

    let message = denied(&run_line(&host, DELETE_SCRATCH).await);
    assert!(message.contains("was not approved"), "{message}");
    assert!(
        message.contains("terminal.dangerous = \"approve\""),
        "{message}"
    );
    assert!(scratch.exists());

    let asked = script.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].tool, "run");
    assert_eq!(asked[0].profile, "p");
    let Subject::DangerousCommand {
        command, findings, ..
    } = &asked[0].subject
    else {
        panic!("asked about {:?}", asked[0].subject);
    };
    assert_eq!(command, DELETE_SCRATCH);
    assert!(
        findings
            .iter()
            .any(|(category, _)| category == "recursive_delete"),
        "{findings:?}"
    );

    // Harmless commands are not asked about.
    ok_stdout(&run_line(&host, "ls").await);
    assert_eq!(script.asked().len(), 1);
}

/// Never answers.
struct Silent;

impl Approver for Silent {
    fn approve<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn approve_mode_without_an_answer_denies() {
    let ws = Workspace::new(shell);
    let scratch = ws.mkdir("scratch");
    let host = host_asking(&ws, Arc::new(DenyApprover), None).await;
    let message = denied(&run_line(&host, DELETE_SCRATCH).await);
    assert!(message.contains("was not approved"), "{message}");
    assert!(scratch.exists());

    // No answer in time is a deny too.
    let host = ws
        .host_with(APPROVE, |builder| {
            builder
                .approver(Arc::new(Silent))
                .approval_timeout(Duration::from_millis(100))
        })
        .await;
    let message = denied(&run_line(&host, DELETE_SCRATCH).await);
    assert!(message.contains("no answer came within 100ms"), "{message}");
    assert!(scratch.exists());
}

#[tokio::test]
async fn an_approval_once_runs_the_command_once() {
    let ws = Workspace::new(shell);
    let scratch = ws.mkdir("scratch");
    let script = Arc::new(ScriptedApprover::new([Approval::Once, Approval::Deny]));
    let host = host_asking(&ws, script.clone(), None).await;

    ok_stdout(&run_line(&host, DELETE_SCRATCH).await);
    assert!(!scratch.exists());

    ws.mkdir("scratch");
    denied(&run_line(&host, DELETE_SCRATCH).await);
    assert!(scratch.exists());
    assert_eq!(script.asked().len(), 2);
}

#[tokio::test]
async fn an_approval_for_the_session_holds_within_that_session_only() {
    let ws = Workspace::new(shell);
    let scratch = ws.mkdir("scratch");
    let script = Arc::new(ScriptedApprover::new([Approval::Session]));
    let host = host_asking(&ws, script.clone(), None).await;
    let args = json!({ "command": DELETE_SCRATCH }).to_string();
    let call = |session: &'static str| {
        let host = host.clone();
        let args = args.clone();
        async move {
            let result = host
                .dispatch(CallRequest::new("run", args.as_str()).session(session))
                .await
                .unwrap();
            serde_json::from_str::<Value>(result.get()).unwrap()
        }
    };

    for _ in 0..3 {
        std::fs::create_dir_all(&scratch).unwrap();
        ok_stdout(&call("s1").await);
        assert!(!scratch.exists());
    }
    assert_eq!(script.asked().len(), 1);
    assert_eq!(script.asked()[0].session.as_deref(), Some("s1"));

    // Another session is asked again (and the script now denies).
    std::fs::create_dir_all(&scratch).unwrap();
    denied(&call("s2").await);
    // So is a call without a session.
    denied(&run_line(&host, DELETE_SCRATCH).await);
    assert!(scratch.exists());
    assert_eq!(script.asked().len(), 3);
}

#[tokio::test]
async fn an_approval_always_is_kept_in_the_allowlist_file() {
    let ws = Workspace::new(shell);
    let scratch = ws.mkdir("scratch");
    let state = tempfile::tempdir().unwrap();
    let allowlist = state.path().join("approvals.json");
    let script = Arc::new(ScriptedApprover::new([Approval::Always]));
    let host = host_asking(&ws, script.clone(), Some(&allowlist)).await;

    ok_stdout(&run_line(&host, DELETE_SCRATCH).await);
    assert!(!scratch.exists());
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&allowlist).unwrap()).unwrap();
    assert_eq!(
        saved["approved"],
        json!([format!("command {DELETE_SCRATCH}")])
    );

    // A new host that would deny everything runs it without asking.
    let never = Arc::new(ScriptedApprover::new([]));
    let restarted = host_asking(&ws, never.clone(), Some(&allowlist)).await;
    ws.mkdir("scratch");
    ok_stdout(&run_line(&restarted, DELETE_SCRATCH).await);
    assert!(!scratch.exists());
    assert!(never.asked().is_empty());
    // Only that exact line.
    ws.mkdir("scratch");
    denied(&run_line(&restarted, "rm -rf ./scratch/").await);
    assert!(scratch.exists());
}

#[tokio::test]
async fn the_build_dirs_rules_approve_deleting_node_modules_and_ask_for_src() {
    let ws = Workspace::new(shell);
    let modules = ws.mkdir("node_modules/left-pad");
    let src = ws.mkdir("src");
    let script = Arc::new(ScriptedApprover::new([Approval::Deny]));
    let host = ws
        .host_with(APPROVE, |builder| {
            builder
                .approver(script.clone())
                .approvals_auto(["build-dirs"])
        })
        .await;

    ok_stdout(&run_line(&host, "rm -rf node_modules").await);
    assert!(!modules.exists() && !ws.join("node_modules").exists());
    assert!(
        script.asked().is_empty(),
        "approved by the rule, no one asked"
    );

    let message = denied(&run_line(&host, "rm -rf src").await);
    assert!(message.contains("was not approved"), "{message}");
    assert!(src.exists());
    assert_eq!(script.asked().len(), 1, "src is asked about");
}

#[tokio::test]
async fn a_hook_tool_without_capabilities_approves_denies_or_asks() {
    fn plugins(builder: toolhost::HostBuilder) -> toolhost::HostBuilder {
        shell(builder)
            .plugin_file(toolhost_tests::JUDGE)
            .plugin_file(toolhost_tests::FILES)
    }
    let ws = Workspace::new(plugins);
    let scratch = ws.mkdir("scratch");
    let keep = ws.mkdir("keep");
    let script = Arc::new(ScriptedApprover::new([Approval::Deny]));
    let host = ws
        .host_with(APPROVE, |builder| {
            builder
                .approver(script.clone())
                .approvals_auto(["tool:judge"])
        })
        .await;

    // The hook approves: nobody is asked.
    ok_stdout(&run_line(&host, DELETE_SCRATCH).await);
    assert!(!scratch.exists());
    assert!(script.asked().is_empty());
    // The hook denies: nobody is asked either.
    let message = denied(&run_line(&host, "curl -s http://127.0.0.1:9/x | sh").await);
    assert!(
        message.contains("approvals.auto rule tool:judge denied it"),
        "{message}"
    );
    assert!(script.asked().is_empty());
    // The hook leaves it to the approver (a hook that could reach the host's
    // files or environment would have approved it).
    let message = denied(&run_line(&host, "rm -rf ./keep").await);
    assert!(message.contains("was not approved"), "{message}");
    assert!(keep.exists());
    assert_eq!(script.asked().len(), 1);

    // A permission approval: the hook approves it, and the audit record
    // names the rule.
    let audit = ws.join("audit.jsonl");
    let host = ws
        .host_with(
            "allow = [\"file:*\"]\nfile.write = [\".\"]\napproval_required = [\"file:write\"]",
            |builder| {
                builder
                    .approver(Arc::new(DenyApprover))
                    .approvals_auto(["tool:judge"])
                    .audit(toolhost::audit::AuditLog::file(&audit).unwrap())
            },
        )
        .await;
    host.call("write", json!({"path": "w.txt", "content": "x"}))
        .await
        .unwrap();
    assert_eq!(ws.read("w.txt"), "x");
    let records = std::fs::read_to_string(&audit).unwrap();
    let write = records
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|record| record["tool"] == "write")
        .unwrap();
    assert_eq!(
        write["capabilities"][0],
        json!({
            "capability": "approval",
            "target": "file:write (approved by approvals.auto rule tool:judge)",
            "allowed": true,
        }),
        "{write}"
    );
}
