//! Attack tests: the repository guard and the planner's reading of git
//! metadata. A command names, in a repository of its own, paths for the
//! host to guard or read; the host must never act outside the grant it
//! guards (no file removed or replaced through a link made later), must
//! read nothing but small regular files, and must keep bare repositories
//! as it keeps `.git`. On the kernel sandbox and the container backend.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::{Host, HostBuilder};

use crate::Workspace;

fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

/// Commands may read and write the whole workspace.
const WRITABLE: &str = r#"
allow = ["terminal:*", "file:read", "file:write"]
file.read = ["."]
file.write = ["."]
file.deny = ["**/.env"]
terminal.dangerous = "allow"
"#;

/// Runs `line` alone in a sandbox of its own; whatever it printed, or the
/// error.
async fn run(host: &Host, line: &str) -> String {
    match host.call("run_command", json!({ "command": line })).await {
        Ok(result) => result.get().to_string(),
        Err(e) => e.to_string(),
    }
}

/// A directory outside every grant, with a file and a directory in it.
fn victim() -> tempfile::TempDir {
    let victim = tempfile::tempdir().unwrap();
    std::fs::write(victim.path().join("precious"), "precious\n").unwrap();
    std::fs::create_dir(victim.path().join("importantdir")).unwrap();
    std::fs::write(victim.path().join("importantdir/f"), "data\n").unwrap();
    std::fs::write(victim.path().join(".bashrc"), "original rc\n").unwrap();
    victim
}

fn victim_is_untouched(victim: &Path, after: &str) {
    assert_eq!(
        std::fs::read_to_string(victim.join("precious"))
            .ok()
            .as_deref(),
        Some("precious\n"),
        "{after}: the guard removed a file outside every grant"
    );
    assert!(
        victim.join("importantdir/f").exists(),
        "{after}: the guard removed a directory outside every grant"
    );
    let rc = victim.join(".bashrc");
    assert!(
        !rc.symlink_metadata().unwrap().file_type().is_symlink(),
        "{after}: the guard made {} a link to {:?}",
        rc.display(),
        std::fs::read_link(&rc)
    );
    assert_eq!(std::fs::read_to_string(rc).unwrap(), "original rc\n");
}

/// The two ways through the guard: a repository of the command's names
/// paths under a directory that does not exist yet, or through a link in a
/// directory, and the next command makes that directory a link elsewhere.
async fn guard_stays_in_its_grant(host: &Host, ws: &Path, victim: &Path) {
    let ws = ws.display();
    let victim = victim.display();
    let plants = [
        (
            format!(
                "mkdir -p r/.git && printf '[include]\\n\\tpath = {ws}/lnk/precious\\n\
                 [include]\\n\\tpath = {ws}/lnk/importantdir\\n' > r/.git/config && echo planted"
            ),
            format!("ln -s {victim} lnk && echo linked"),
        ),
        (
            format!(
                "mkdir -p q/.git && printf '#!/bin/sh\\necho PWNED\\n' > evil.sh && mkdir d \
                 && ln -s {ws}/evil.sh d/.bashrc \
                 && printf '[include]\\n\\tpath = {ws}/d/.bashrc/x\\n' > q/.git/config && echo planted"
            ),
            format!("mv d d.old && ln -s {victim} d && echo swapped"),
        ),
    ];
    for (plant, swap) in plants {
        let planted = run(host, &plant).await;
        assert!(planted.contains("planted"), "{planted}");
        run(host, &swap).await;
        // One more command: the guard of its plan is checked too.
        run(host, "true").await;
        victim_is_untouched(Path::new(&victim.to_string()), &swap);
    }
}

#[tokio::test]
async fn the_guard_never_acts_outside_its_grant() {
    let ws = Workspace::new(bundled);
    let victim = victim();
    let host = ws.host(WRITABLE).await;
    guard_stays_in_its_grant(&host, &ws.path, victim.path()).await;
}

#[tokio::test]
async fn in_a_container_the_guard_never_acts_outside_its_grant() {
    let _alone = crate::container::ONE_AT_A_TIME.lock().await;
    let Some(_socket) = crate::container::engine().await else {
        return;
    };
    let ws = Workspace::new(bundled);
    let victim = victim();
    crate::container::give_to_sandbox(&ws.path);
    let profile = crate::container::profile(
        "file.write = [\".\"]\nfile.deny = [\"**/.env\"]\nterminal.dangerous = \"allow\"\n",
    );
    let host = ws.host(&profile).await;
    guard_stays_in_its_grant(&host, &ws.path, victim.path()).await;
}

/// Resident memory of process `pid`, in kiB.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// `toolhost call run_command` of `line` in `ws`, killed past `limit` or
/// 1 GiB of memory; what it printed, or why it was killed.
fn call_bounded(ws: &Workspace, line: &str, limit: Duration) -> Result<String, String> {
    let mut child = std::process::Command::new(crate::toolhost_cli())
        .arg("--config")
        .arg(ws.join("toolhost.toml"))
        .args(["call", "run_command"])
        .arg(json!({ "command": line }).to_string())
        .current_dir(&ws.path)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(_status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            return Ok(format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let kib = rss(child.id());
        if kib > 1 << 20 || start.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            return Err(format!(
                "`{line}` killed after {:?} at {kib} kiB",
                start.elapsed()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_planner_reads_no_device_nor_fifo_a_repository_includes() {
    let ws = Workspace::new(bundled);
    ws.write(
        "toolhost.toml",
        format!("default_profile = \"p\"\naudit = \"off\"\n[profiles.p]\n{WRITABLE}"),
    );
    for plant in [
        "mkdir -p z/.git && printf '[include]\\n\\tpath = /dev/zero\\n' > z/.git/config",
        "mkdir -p f/.git && mkfifo f/fifo && printf '[include]\\n\\tpath = ../fifo\\n' > f/.git/config",
        "mkdir -p b/.git && head -c 3000000 /dev/zero | tr '\\0' a > big.cfg \
         && printf '[include]\\n\\tpath = ../../big.cfg\\n' > b/.git/config",
    ] {
        let planted = call_bounded(
            &ws,
            &format!("{plant} && echo planted"),
            Duration::from_secs(60),
        );
        assert!(
            planted.as_ref().is_ok_and(|out| out.contains("planted")),
            "{planted:?}"
        );
        let next = call_bounded(&ws, "echo next", Duration::from_secs(30));
        assert!(next.is_ok(), "{plant}: {next:?}");
        std::fs::remove_dir_all(ws.join(&plant[9..10])).unwrap();
    }
}

/// Host git as the owner, with no configuration of the test's user.
fn owner_git(home: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args([
            "-c",
            "safe.directory=*",
            "-c",
            "user.name=o",
            "-c",
            "user.email=o@o",
        ])
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap()
}

#[tokio::test]
async fn a_bare_repository_keeps_its_hooks_and_configuration() {
    let ws = Workspace::new(bundled);
    let outside = tempfile::tempdir().unwrap();
    let home = outside.path();
    let mark = home.join("ran");
    let bare = ws.join("remote.git");
    let clone = home.join("clone");
    let (bare_s, clone_s) = (bare.to_str().unwrap(), clone.to_str().unwrap());
    owner_git(home, &["init", "-q", "--bare", bare_s]);
    owner_git(home, &["clone", "-q", bare_s, clone_s]);
    let push = |message: &str| {
        owner_git(
            home,
            &[
                "-C",
                clone_s,
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                message,
            ],
        );
        owner_git(home, &["-C", clone_s, "push", "-q", "origin", "HEAD"])
    };
    assert!(push("first").status.success());
    let host = ws.host(WRITABLE).await;
    let mark_s = mark.display();
    for line in [
        format!(
            "printf '#!/bin/sh\\ntouch {mark_s}\\n' > remote.git/hooks/post-receive \
             && chmod +x remote.git/hooks/post-receive"
        ),
        format!(
            "mv remote.git/hooks remote.git/h2 && mkdir remote.git/hooks && printf '#!/bin/sh\\ntouch {mark_s}\\n' > remote.git/hooks/post-receive && chmod +x remote.git/hooks/post-receive"
        ),
        format!(
            "printf '[core]\\n\\thooksPath = {}\\n' >> remote.git/config",
            ws.join("h").display()
        ),
        format!(
            "mkdir -p h && printf '#!/bin/sh\\ntouch {mark_s}\\n' > h/post-receive && chmod +x h/post-receive && printf '[core]\\n\\thooksPath = {}\\n' >> remote.git/config",
            ws.join("h").display()
        ),
        "mkdir -p evil/hooks && cp -r remote.git/objects remote.git/refs remote.git/HEAD evil/ \
         && cp -r h/. evil/hooks/ && echo ../evil > remote.git/commondir"
            .to_string(),
        "mv remote.git r2 && cp -r r2 remote.git && cp -r h/. remote.git/hooks/".to_string(),
    ] {
        run(&host, &line).await;
        let pushed = push("again");
        assert!(
            !mark.exists(),
            "the owner's push ran what `{line}` planted ({pushed:?})"
        );
    }
    // Work in it still runs: a clone and a push of the command's own.
    let work = run(
        &host,
        "git clone -q remote.git c && cd c && git -c user.name=a -c user.email=a@a commit -q \
         --allow-empty -m mine && git push -q origin HEAD && echo pushed",
    )
    .await;
    assert!(work.contains("pushed"), "{work}");
}
