//! The profile's command rules inside the sandbox: the allow list holds in
//! the shell, and commands that cannot be judged count as dangerous.

use toolhost::ErrorKind;

use super::{SANDBOXED, run, workspace};

#[tokio::test]
async fn the_allow_list_holds_in_the_shell_that_runs_the_line() {
    let ws = workspace();
    let host = ws
        .host(&format!(
            "{SANDBOXED}\nterminal.allow_commands = [\"echo *\"]"
        ))
        .await;
    for line in [
        "((touch out/M))",
        "echo x &>/dev/null touch out/M",
        r"echo $'\'; touch out/M #'",
        "echo $[x;touch out/M;x]",
    ] {
        let _ = run(&host, line).await;
        assert!(!ws.join("out/M").exists(), "{line} created the marker");
    }
}

#[tokio::test]
async fn commands_that_cannot_be_judged_count_as_dangerous() {
    let ws = workspace();
    ws.mkdir("out/D");
    let host = ws
        .host(
            r#"
            allow = ["terminal:execute", "file:read", "file:write"]
            file.read = ["."]
            file.write = ["out"]
            "#,
        )
        .await;
    for line in [
        "X=rm; $X -rf out/D",
        "$(echo rm) -rf out/D",
        "${SHELL:-sh} -c 'rm -rf out/D'",
        "awk 'BEGIN{system(\"rm -rf out/D\")}'",
        "perl -MFile::Path -e 'rmtree \"out/D\"'",
        "python3 -c 'import shutil; shutil.rmtree(\"out/D\")'",
    ] {
        match run(&host, line).await {
            Err((ErrorKind::Denied, message)) => {
                assert!(message.contains("terminal.dangerous"), "{line}: {message}")
            }
            other => panic!("{line}: {other:?}"),
        }
        assert!(ws.join("out/D").exists(), "{line} ran");
    }
}
