//! The `terminal:execute` permission (undeclared, denied) and the audit
//! log of commands.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolhost::ErrorKind;
use toolhost::audit::AuditLog;

use super::{denied, ok_stdout, run_line, shell};
use crate::{Workspace, call_err, call_ok};

#[tokio::test]
async fn a_tool_that_does_not_declare_terminal_execute_is_refused_at_use() {
    let ws = Workspace::new(shell);
    let host = ws
        .host(
            r#"
            allow = ["*"]
            file.read = ["."]
            "#,
        )
        .await;
    let result = call_ok(
        &host,
        "sneaky_run",
        &json!({ "command": "echo hi" }).to_string(),
    )
    .await;
    let message = denied(&result);
    assert!(message.contains("\"sneaky_run\""), "{message}");
    assert!(
        message.contains("did not declare permission \"terminal:execute\""),
        "{message}"
    );
    // The declaring tool runs it.
    assert_eq!(ok_stdout(&run_line(&host, "echo hi").await), "hi\n");
}

#[tokio::test]
async fn a_profile_that_denies_terminal_hides_run_and_refuses_the_import() {
    let ws = Workspace::new(shell);
    let host = ws
        .host(
            r#"
            allow = ["*"]
            deny = ["terminal:execute"]
            file.read = ["."]
            "#,
        )
        .await;
    let (kind, message) =
        call_err(&host, "run", &json!({ "command": "echo hi" }).to_string()).await;
    assert_eq!(kind, ErrorKind::Unavailable, "{message}");

    let result = call_ok(
        &host,
        "sneaky_run",
        &json!({ "command": "echo hi" }).to_string(),
    )
    .await;
    let message = denied(&result);
    assert!(
        message.contains("deny rule \"terminal:execute\""),
        "{message}"
    );
}

/// An audit sink the test can read.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn commands_run_and_refused_are_audited_without_env_values() {
    const NAME: &str = "TOOLHOST_TERMINAL_AUDIT_SECRET";
    // SAFETY: only this test reads or writes this variable, and nextest runs
    // each test in its own process.
    unsafe { std::env::set_var(NAME, "sw0rdfish") };
    let ws = Workspace::new(shell);
    let lines = Lines::default();
    let sink = lines.clone();
    let host = ws
        .host_with(
            &format!(
                r#"
                allow = ["terminal:*"]
                file.read = ["."]
                terminal.env = ["{NAME}"]
                "#
            ),
            |builder| builder.audit(AuditLog::writer(sink)),
        )
        .await;
    ok_stdout(&run_line(&host, &format!("echo ${NAME}")).await);
    denied(&run_line(&host, "rm -rf build").await);

    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    assert!(!text.contains("sw0rdfish"), "{text}");
    let uses: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .flat_map(|record| {
            record["capabilities"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        uses[0],
        json!({ "capability": "terminal", "target": format!("echo ${NAME}"), "allowed": true })
    );
    assert_eq!(uses[1]["target"], "rm -rf build");
    assert_eq!(uses[1]["allowed"], false);
    assert!(
        uses[1]["reason"]
            .as_str()
            .unwrap()
            .contains("recursive_delete"),
        "{}",
        uses[1]
    );
}
