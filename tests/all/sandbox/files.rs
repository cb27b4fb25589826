//! Files: denied ones stay unreadable, paths outside the grants invisible,
//! writes confined to writable grants, repository metadata read-only.

use std::path::Path;

use super::{SANDBOXED, bundled, printed, ran, succeeds, workspace};
use crate::Workspace;

#[tokio::test]
async fn denied_files_are_unreadable_by_every_spelling() {
    let ws = workspace();
    let host = ws.host(SANDBOXED).await;
    let env = ws.join(".env");
    let lines = [
        "cat .env".to_string(),
        format!("cat {}", env.display()),
        "cat ./out/../.env".into(),
        "cat secrets/key.txt".into(),
        "ls -la secrets; cat secrets/*".into(),
        "ln -s ../.env out/link; cat out/link".into(),
        "ln .env out/hard; cat out/hard".into(),
        "cp -r secrets out/copy; cat out/copy/key.txt".into(),
        "mv secrets out/moved; cat out/moved/key.txt".into(),
        "mv .env out/env; cat out/env".into(),
        "find / -name key.txt -exec cat {} + 2>/dev/null".into(),
        "grep -r secret / 2>/dev/null | head".into(),
        "tar cf - . 2>/dev/null | strings".into(),
    ];
    for line in &lines {
        let result = ran(&host, line).await;
        let text = printed(&result);
        assert!(
            !text.contains("env-secret") && !text.contains("key-secret"),
            "{line} revealed a denied file: {result}"
        );
    }
    // Nothing was moved on the host either.
    assert_eq!(ws.read(".env"), "TOKEN=env-secret\n");
    assert_eq!(ws.read("secrets/key.txt"), "key-secret\n");
    // The public file is readable.
    assert_eq!(succeeds(&host, "cat notes.txt").await, "public\n");
}

#[tokio::test]
async fn paths_outside_the_grants_are_invisible() {
    let ws = workspace();
    let other = Workspace::new(bundled);
    other.write("private.txt", "other-tenant\n");
    let host = ws.host(SANDBOXED).await;
    let private = other.join("private.txt");
    for line in [
        format!("cat {}", private.display()),
        format!("ls {}", other.path.display()),
        "ls /root /home /var /srv /mnt 2>&1".into(),
        "cat /etc/shadow".into(),
        format!("cat {}", std::env::current_exe().unwrap().display()),
    ] {
        let result = ran(&host, &line).await;
        assert!(
            !printed(&result).contains("other-tenant"),
            "{line}: {result}"
        );
        assert_ne!(result["exit_code"], 0, "{line} succeeded: {result}");
    }
    // System programs are there to run.
    assert!(succeeds(&host, "ls /usr/bin").await.contains("ls"));
}

#[tokio::test]
async fn two_tenants_cannot_read_each_others_files() {
    let a = workspace();
    let b = workspace();
    a.write("out/mine.txt", "tenant-a\n");
    b.write("out/mine.txt", "tenant-b\n");
    let host_a = a.host(SANDBOXED).await;
    let host_b = b.host(SANDBOXED).await;
    let from_a = ran(
        &host_a,
        &format!("cat {}", b.join("out/mine.txt").display()),
    )
    .await;
    assert!(!printed(&from_a).contains("tenant-b"), "{from_a}");
    let from_b = ran(
        &host_b,
        &format!("cat {}", a.join("out/mine.txt").display()),
    )
    .await;
    assert!(!printed(&from_b).contains("tenant-a"), "{from_b}");
    assert_eq!(succeeds(&host_a, "cat out/mine.txt").await, "tenant-a\n");
}

#[tokio::test]
async fn writes_land_only_in_writable_grants() {
    let ws = workspace();
    let host = ws.host(SANDBOXED).await;
    // Pipes and redirections inside the writable grant work.
    assert_eq!(
        succeeds(&host, "echo hi | tr a-z A-Z > out/f; cat out/f").await,
        "HI\n"
    );
    assert_eq!(ws.read("out/f"), "HI\n");
    // Elsewhere in the workspace, and outside it, they fail.
    for line in [
        "touch made-here",
        "echo x > notes.txt",
        "rm notes.txt",
        "mkdir /newdir",
        "touch /usr/made",
    ] {
        let result = ran(&host, line).await;
        assert_ne!(result["exit_code"], 0, "{line} succeeded: {result}");
    }
    assert!(!ws.join("made-here").exists());
    assert_eq!(ws.read("notes.txt"), "public\n");
    // /tmp is private to the command.
    let marker = format!("toolhost-sandbox-{}", std::process::id());
    succeeds(&host, &format!("touch /tmp/{marker}; ls /tmp")).await;
    assert!(!Path::new("/tmp").join(&marker).exists());
    assert_eq!(succeeds(&host, "ls /tmp").await, "");
}

#[tokio::test]
async fn repository_metadata_stays_read_only_in_a_writable_grant() {
    let ws = workspace();
    let repo = ws.mkdir("out/repo");
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(status.status.success(), "git {args:?}: {status:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    let host = ws
        .host(
            r#"
            allow = ["terminal:execute", "file:read", "file:write"]
            file.read = ["."]
            file.write = ["."]
            terminal.dangerous = "allow"
            "#,
        )
        .await;
    let config = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    for line in [
        "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> out/repo/.git/config",
        "git -C out/repo config core.fsmonitor 'touch pwned'",
        "echo 'touch pwned' > out/repo/.git/hooks/pre-commit",
        "rm -rf out/repo/.git/hooks",
        "mv out/repo/.git/config out/repo/.git/config.old",
    ] {
        let result = ran(&host, line).await;
        assert_ne!(result["exit_code"], 0, "{line} succeeded: {result}");
    }
    assert_eq!(
        std::fs::read_to_string(repo.join(".git/config")).unwrap(),
        config
    );
    assert!(!repo.join(".git/hooks/pre-commit").exists());
    // Ordinary git work in the repository still runs.
    let status = succeeds(&host, "cd out/repo && git status --short && git add a.txt").await;
    assert_eq!(status, "?? a.txt\n");
}

#[tokio::test]
async fn toolchains_granted_to_commands_run() {
    let ws = workspace();
    // The toolchain running these tests, shown to commands read-only.
    let cargo = std::env::var("CARGO").expect("tests run under cargo");
    let toolchain = Path::new(&cargo).ancestors().nth(2).unwrap();
    let host = ws
        .host(&format!(
            "{SANDBOXED}\nterminal.read = [{:?}]",
            toolchain.display().to_string()
        ))
        .await;
    let version = succeeds(&host, &format!("{cargo} --version")).await;
    assert!(version.starts_with("cargo "), "{version}");
    // Without the grant, it is not there.
    let without = ws.host(SANDBOXED).await;
    let result = ran(&without, &format!("{cargo} --version")).await;
    assert_eq!(result["exit_code"], 127, "{result}");
}

#[tokio::test]
async fn a_mask_follows_its_file_when_a_directory_above_it_moves() {
    use serde_json::json;
    let ws = workspace();
    ws.write("out/d/.env", "TOKEN=moved-secret\n");
    ws.write("out/d/notes.txt", "moved along\n");
    let host = ws
        .host(
            r#"
allow = ["terminal:*", "file:read", "file:write"]
file.read = ["."]
file.write = ["out"]
file.deny = ["**/.env"]
terminal.dangerous = "allow"
"#,
        )
        .await;
    let (client, _) = crate::mcp::connect(host, None).await;
    let run =
        |line: &str| crate::sessions::tool(&client, "run_command", json!({ "command": line }));
    // In the session's sandbox the mask moves with its file.
    let moved = run("mv out/d out/e && cat out/e/notes.txt && cat out/e/.env").await;
    assert_eq!(moved["stdout"], "moved along\n", "{moved}");
    assert!(!moved.to_string().contains("moved-secret"), "{moved}");
    assert_ne!(moved["exit_code"], 0, "{moved}");
    // A file made later under the old name is masked from the next command.
    ws.write("out/d/.env", "TOKEN=late-secret\n");
    let late = run("cat out/d/.env; cat out/e/.env; ls out/d").await;
    assert!(
        !late.to_string().contains("late-secret") && !late.to_string().contains("moved-secret"),
        "{late}"
    );
    client.cancel().await.unwrap();
}
