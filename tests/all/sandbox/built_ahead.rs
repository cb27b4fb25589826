//! The sandbox built ahead for the next command, and when it must not be
//! used.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost::Host;

use super::{bundled, printed, ran, succeeds, workspace};
use crate::Workspace;

/// Ticks (`CLK_TCK`) between the start of the sandbox's PID 1 and the start
/// of the shell that runs `line`: large when the sandbox was built ahead.
const SANDBOX_AGE: &str = "read -a init < /proc/1/stat; read -a me < /proc/self/stat; \
                           echo $(( me[21] - init[21] ))";

/// How long a test waits for the next command's sandbox to be built ahead.
const BUILT_AHEAD: Duration = Duration::from_millis(700);

async fn sandbox_age(host: &Host) -> u64 {
    succeeds(host, SANDBOX_AGE).await.trim().parse().unwrap()
}

#[tokio::test]
async fn a_sandbox_built_ahead_is_used_only_while_the_grants_are_unchanged() {
    let ws = workspace();
    let host = ws
        .host(
            r#"
allow = ["terminal:execute", "file:read", "file:write"]
file.read = ["."]
file.write = ["out"]
file.deny = ["**/.env*", "secrets/**"]
terminal.dangerous = "allow"
"#,
        )
        .await;
    // The first command builds its own sandbox; the next one's is built
    // ahead while nothing runs, and taken by the next command.
    assert!(sandbox_age(&host).await < 20);
    tokio::time::sleep(BUILT_AHEAD).await;
    assert!(
        sandbox_age(&host).await >= 50,
        "the second command did not run in the sandbox built ahead"
    );
    // Files that do not change what is masked keep it usable.
    tokio::time::sleep(BUILT_AHEAD).await;
    ws.write("out/notes2.txt", "public\n");
    assert!(sandbox_age(&host).await >= 50);
    assert_eq!(succeeds(&host, "cat out/notes2.txt").await, "public\n");

    // What the rules deny, created on the host after the sandbox was built:
    // that sandbox is not used, so the new files are masked.
    let late: [(&str, &str); 3] = [
        ("out/.env", "cat out/.env"),
        ("secrets/new.txt", "cat secrets/new.txt"),
        ("out/deep/dir/.env", "cat out/deep/dir/.env"),
    ];
    for (path, line) in late {
        tokio::time::sleep(BUILT_AHEAD).await;
        ws.write(path, "TOKEN=late-secret\n");
        let result = ran(&host, line).await;
        assert!(
            !printed(&result).contains("late-secret"),
            "{line} revealed a file denied after its sandbox was built: {result}"
        );
    }
    // Nor is a repository that appears in a writable grant left writable.
    tokio::time::sleep(BUILT_AHEAD).await;
    ws.write("out/repo/.git/config", "[core]\n");
    let result = ran(&host, "echo '[core] fsmonitor = x' >> out/repo/.git/config").await;
    assert_ne!(result["exit_code"], 0, "{result}");
    assert_eq!(ws.read("out/repo/.git/config"), "[core]\n");
}

#[tokio::test]
async fn a_sandbox_built_ahead_follows_a_grant_that_moved() {
    let ws = Workspace::new(bundled);
    ws.write("a/file.txt", "from a\n");
    ws.write("b/file.txt", "from b\n");
    std::os::unix::fs::symlink(ws.join("a"), ws.join("data")).unwrap();
    let host = ws
        .host(
            r#"
allow = ["terminal:execute", "file:read"]
file.read = ["b", "data"]
"#,
        )
        .await;
    let cat = format!("cat {}/file.txt", ws.join("a").display());
    let run_in_b = |line: String| {
        let host = &host;
        async move {
            let arguments = json!({ "command": line, "cwd": "b" });
            let result = host.call("run_command", arguments).await.unwrap();
            serde_json::from_str::<Value>(result.get()).unwrap()
        }
    };
    assert_eq!(run_in_b(cat.clone()).await["stdout"], "from a\n");
    tokio::time::sleep(BUILT_AHEAD).await;
    // The granted path now leads elsewhere. Nothing inside `a` changed, so
    // only the grant's own resolution tells that `a` is no longer granted.
    std::fs::remove_file(ws.join("data")).unwrap();
    std::os::unix::fs::symlink(ws.join("b"), ws.join("data")).unwrap();
    let result = run_in_b(cat).await;
    assert_ne!(result["exit_code"], 0, "{result}");
    assert!(!printed(&result).contains("from a"), "{result}");
}
