//! Commands that run: output, exit code, stdin, working directory,
//! environment.

use serde_json::{Value, json};

use super::{RUNS, denied, ok_stdout, run, run_line, shell};
use crate::Workspace;

#[tokio::test]
async fn a_command_runs_with_its_output_exit_code_and_stdin() {
    let ws = Workspace::new(shell);
    let host = ws.host(RUNS).await;

    let result = run_line(&host, "echo hello; echo oops >&2; exit 3").await;
    assert_eq!(
        result,
        json!({ "exit_code": 3, "stdout": "hello\n", "stderr": "oops\n", "truncated": false })
    );

    let result = run(&host, json!({ "command": "tr a-z A-Z", "stdin": "shout" })).await;
    assert_eq!(ok_stdout(&result), "SHOUT");

    // Without stdin, the command reads an empty input rather than blocking.
    let result = run_line(&host, "cat; echo end").await;
    assert_eq!(ok_stdout(&result), "end\n");

    // Killed by a signal: no exit code.
    let result = run_line(&host, "kill -TERM $$").await;
    assert_eq!(result["exit_code"], Value::Null, "{result}");
}

#[tokio::test]
async fn commands_start_in_the_workspace_and_may_use_granted_directories_only() {
    let ws = Workspace::new(shell);
    let sub = ws.mkdir("sub");
    ws.mkdir("secrets");
    let host = ws
        .host(
            r#"
            allow = ["terminal:*"]
            file.read = ["."]
            file.deny = ["secrets/**"]
            "#,
        )
        .await;

    let pwd = |result: Value| ok_stdout(&result).trim_end().to_string();
    assert_eq!(pwd(run_line(&host, "pwd").await), ws.path.to_str().unwrap());
    assert_eq!(
        pwd(run(&host, json!({ "command": "pwd", "cwd": "sub" })).await),
        sub.to_str().unwrap()
    );
    assert_eq!(
        pwd(run(&host, json!({ "command": "pwd", "cwd": sub })).await),
        sub.to_str().unwrap()
    );

    for outside in ["/", "..", "sub/../..", "/etc"] {
        let result = run(&host, json!({ "command": "pwd", "cwd": outside })).await;
        let message = denied(&result);
        assert!(message.contains("working directory"), "{message}");
        assert!(message.contains("file.read"), "{message}");
    }

    let result = run(&host, json!({ "command": "pwd", "cwd": "secrets" })).await;
    let message = denied(&result);
    assert!(message.contains("file.deny"), "{message}");

    let result = run(&host, json!({ "command": "pwd", "cwd": "missing" })).await;
    let message = denied(&result);
    assert!(message.contains("cannot be used"), "{message}");
}

#[tokio::test]
async fn a_symlink_cannot_lead_the_working_directory_out_of_the_grants() {
    let ws = Workspace::new(shell);
    let elsewhere = Workspace::new(shell);
    std::os::unix::fs::symlink(&elsewhere.path, ws.join("escape")).unwrap();
    std::os::unix::fs::symlink("/", ws.join("root")).unwrap();
    ws.mkdir("inside");
    std::os::unix::fs::symlink(ws.join("inside"), ws.join("alias")).unwrap();
    let host = ws.host(RUNS).await;

    for link in ["escape", "root", "escape/sub/.."] {
        let result = run(&host, json!({ "command": "pwd", "cwd": link })).await;
        let message = denied(&result);
        assert!(message.contains("symbolic link"), "{link}: {message}");
        assert!(message.contains("file.read"), "{link}: {message}");
    }
    // A link that stays inside is followed.
    let result = run(&host, json!({ "command": "pwd", "cwd": "alias" })).await;
    assert_eq!(
        ok_stdout(&result).trim_end(),
        ws.join("inside").to_str().unwrap()
    );
}

#[tokio::test]
async fn a_profile_that_grants_no_directory_runs_no_commands() {
    let ws = Workspace::new(shell);
    let host = ws.host(r#"allow = ["terminal:*"]"#).await;
    let message = denied(&run_line(&host, "echo hi").await);
    assert!(message.contains("grants no directory"), "{message}");
    assert!(message.contains("file.read"), "{message}");

    // Granted only a directory inside it, in the kernel sandbox, commands
    // still start in the workspace, which holds only that directory: a
    // relative path means what it means to the file tools.
    let ws = Workspace::new(shell);
    let data = ws.mkdir("data");
    ws.write("data/notes.txt", "the notes");
    ws.write("secret.txt", "not granted");
    let body = "allow = [\"terminal:*\"]\nfile.read = [\"./data\"]\n";
    let host = ws.host(body).await;
    let result = run_line(&host, "pwd && ls -A && cat data/notes.txt").await;
    assert_eq!(
        ok_stdout(&result),
        format!("{}\ndata\nthe notes", ws.path.display())
    );
    let result = run_line(&host, "cat secret.txt").await;
    assert_ne!(result["exit_code"], 0, "{result}");

    // Unconfined, they start in the first granted directory.
    let host = ws
        .host(&format!("{body}terminal.sandbox = \"none\"\n"))
        .await;
    let result = run_line(&host, "pwd").await;
    assert_eq!(ok_stdout(&result).trim_end(), data.to_str().unwrap());
}

#[tokio::test]
async fn the_environment_is_scrubbed_to_what_the_profile_passes() {
    const NAME: &str = "TOOLHOST_TERMINAL_TEST_SECRET";
    // SAFETY: only this test reads or writes this variable, and nextest runs
    // each test in its own process.
    unsafe { std::env::set_var(NAME, "hunter2") };
    let ws = Workspace::new(shell);

    let scrubbed = ws.host(RUNS).await;
    let env = ok_stdout(&run_line(&scrubbed, "env").await);
    assert!(!env.contains("hunter2"), "{env}");
    assert!(!env.contains(NAME), "{env}");
    assert!(
        env.lines()
            .any(|l| l == "PATH=/usr/local/bin:/usr/bin:/bin"),
        "{env}"
    );
    let home = format!("HOME={}", ws.path.display());
    assert!(env.lines().any(|l| l == home), "{env}");
    // Nothing else of the host's environment leaks (the shell adds PWD and
    // the like itself).
    for inherited in ["USER=", "CARGO", "RUST_", "NEXTEST"] {
        assert!(
            !env.lines().any(|l| l.starts_with(inherited)),
            "{inherited}: {env}"
        );
    }

    let passed = ws
        .host(&format!(
            r#"
            allow = ["terminal:*"]
            file.read = ["."]
            terminal.env = ["{NAME}", "TOOLHOST_TERMINAL_TEST_UNSET"]
            "#
        ))
        .await;
    let result = run_line(&passed, &format!("echo \"${NAME}\"; env")).await;
    let stdout = ok_stdout(&result);
    assert!(stdout.starts_with("hunter2\n"), "{stdout}");
    assert!(!stdout.contains("TOOLHOST_TERMINAL_TEST_UNSET"), "{stdout}");
}
