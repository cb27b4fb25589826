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

pub(super) fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

/// Commands may read and write the whole workspace.
pub(super) const WRITABLE: &str = r#"
allow = ["terminal:*", "file:read", "file:write"]
file.read = ["."]
file.write = ["."]
file.deny = ["**/.env"]
terminal.dangerous = "allow"
"#;

/// Runs `line` alone in a sandbox of its own; whatever it printed, or the
/// error.
pub(super) async fn run(host: &Host, line: &str) -> String {
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
pub(super) fn owner_git(home: &Path, args: &[&str]) -> std::process::Output {
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
    // Work in it still runs: a clone and a push of the command's own (the
    // clone's configuration was once taken for a plant by the next
    // command's sandbox, planned ahead while the clone was being made: see
    // `a_repository_being_made_keeps_the_configuration_its_maker_writes`).
    let work = run(
        &host,
        "git clone -q remote.git c && cd c && git -c user.name=a -c user.email=a@a commit -q \
         --allow-empty -m mine && git push -q origin HEAD && echo pushed",
    )
    .await;
    if !work.contains("pushed") {
        let seen = run(
            &host,
            "ls -la c c/.git; cat c/.git/config; ls -la remote.git",
        )
        .await;
        panic!("the command's own clone and push failed: {work}\nthen: {seen}");
    }
}

#[tokio::test]
async fn a_bare_repository_stays_kept_while_a_command_changes_what_marks_it() {
    let outside = tempfile::tempdir().unwrap();
    let home = outside.path();
    let mark = home.join("ran");
    for (strip, restore) in [
        ("mv refs refs.d && ln -s refs.d refs", ""),
        (
            "cat HEAD > ../HEAD.saved && rm HEAD",
            "cp ../HEAD.saved HEAD && ",
        ),
        // `objects` holds a kept path, so it stays; the rest can go.
        (
            "mv refs r.d && mv HEAD H.d",
            "mv r.d refs && mv H.d HEAD && ",
        ),
    ] {
        let ws = Workspace::new(bundled);
        let bare = ws.join("remote.git");
        let clone = home.join("clone");
        let _ = std::fs::remove_dir_all(&clone);
        let (bare_s, clone_s) = (bare.to_str().unwrap(), clone.to_str().unwrap());
        owner_git(home, &["init", "-q", "--bare", bare_s]);
        owner_git(home, &["clone", "-q", bare_s, clone_s]);
        let push = || {
            owner_git(
                home,
                &["-C", clone_s, "commit", "-q", "--allow-empty", "-m", "x"],
            );
            owner_git(home, &["-C", clone_s, "push", "-q", "origin", "HEAD"])
        };
        assert!(push().status.success());
        let host = ws.host(WRITABLE).await;
        let stripped = run(&host, &format!("cd remote.git && {strip} && echo stripped")).await;
        assert!(stripped.contains("stripped"), "{stripped}");
        let planted = run(
            &host,
            &format!(
                "cd remote.git && {restore}printf '#!/bin/sh\\ntouch {}\\n' > hooks/post-receive \
                 && chmod +x hooks/post-receive && echo planted",
                mark.display()
            ),
        )
        .await;
        let pushed = push();
        assert!(
            !mark.exists(),
            "after `{strip}`, the owner's push ran a planted hook ({planted}; {pushed:?})"
        );
    }
}

#[tokio::test]
async fn a_planted_tree_of_any_depth_is_taken_away_whole() {
    let outside = tempfile::tempdir().unwrap();
    let home = outside.path();
    let mark = home.join("ran");
    for linked in [false, true] {
        let ws = Workspace::new(bundled);
        let proj = ws.join("proj");
        owner_git(home, &["init", "-q", proj.to_str().unwrap()]);
        std::fs::remove_dir_all(proj.join(".git/hooks")).unwrap();
        if linked {
            ws.mkdir("proj/tools/hooks");
            std::os::unix::fs::symlink("../tools/hooks", proj.join(".git/hooks")).unwrap();
        }
        let host = ws.host(WRITABLE).await;
        let planted = run(
            &host,
            &format!(
                "cd proj/.git && python3 - <<'PY'
import ctypes, os
os.mkdir('stage')
for c in range(40):
    p = 'stage/d%02d' % c
    os.mkdir(p)
    for i in range(300):
        p += '/d'; os.mkdir(p)
with open('stage/pre-commit', 'w') as f: f.write('#!/bin/sh\\ntouch {}\\n')
os.chmod('stage/pre-commit', 0o755)
if os.path.islink('hooks'):
    libc = ctypes.CDLL(None, use_errno=True)
    print('exchanged', libc.renameat2(-100, b'stage', -100, b'hooks', 2))
else:
    os.rename('stage', 'hooks')
print('planted')
PY",
                mark.display()
            ),
        )
        .await;
        run(&host, "ls proj/.git/hooks | head -3").await;
        owner_git(
            home,
            &[
                "-C",
                proj.to_str().unwrap(),
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "x",
            ],
        );
        assert!(
            !mark.exists(),
            "the owner's commit ran a hook planted in a deep tree (linked: {linked}): {planted}"
        );
        if linked {
            assert_eq!(
                std::fs::read_link(proj.join(".git/hooks")).ok(),
                Some("../tools/hooks".into())
            );
        }
    }
}

#[test]
fn a_configuration_naming_many_includes_stops_no_command_for_long() {
    let ws = Workspace::new(bundled);
    ws.write(
        "toolhost.toml",
        format!("default_profile = \"p\"\naudit = \"off\"\n[profiles.p]\n{WRITABLE}"),
    );
    let planted = call_bounded(
        &ws,
        "mkdir -p r/.git/objects r/.git/refs && echo 'ref: refs/heads/main' > r/.git/HEAD \
         && python3 -c '
with open(\"r/.git/config\", \"w\") as f:
    f.write(\"[include]\\n\")
    for i in range(40000): f.write(\"path=i%06d\\n\" % i)
' && echo planted",
        Duration::from_secs(60),
    );
    assert!(
        planted.as_ref().is_ok_and(|out| out.contains("planted")),
        "{planted:?}"
    );
    let start = Instant::now();
    let next = call_bounded(&ws, "echo next", Duration::from_secs(20));
    let took = start.elapsed();
    let next = next.unwrap_or_else(|e| panic!("the next command was planned too long: {e}"));
    assert!(
        took < Duration::from_secs(10),
        "the next command took {took:?}: {next}"
    );
    // Refused with the file and the limit named, or run.
    assert!(
        next.contains("next") || (next.contains("r/.git/config") && next.contains("include")),
        "{next}"
    );
}

#[test]
fn the_planner_opens_no_device_a_repository_includes() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: making a device node to watch needs root");
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let node = outside.path().join("zero");
    let c_node = std::ffi::CString::new(node.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path; a character device like /dev/zero.
    let made = unsafe { libc::mknod(c_node.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 5)) };
    assert_eq!(made, 0, "mknod: {}", std::io::Error::last_os_error());
    // SAFETY: a new inotify descriptor, closed at the end.
    let inotify = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    assert!(inotify >= 0);
    // SAFETY: a NUL-terminated path and the descriptor above.
    assert!(unsafe { libc::inotify_add_watch(inotify, c_node.as_ptr(), libc::IN_OPEN) } >= 0);
    let ws = Workspace::new(bundled);
    ws.write(
        "toolhost.toml",
        format!("default_profile = \"p\"\naudit = \"off\"\n[profiles.p]\n{WRITABLE}"),
    );
    let planted = call_bounded(
        &ws,
        &format!(
            "mkdir -p z/.git && printf '[include]\\n\\tpath = {}\\n' > z/.git/config && echo planted",
            node.display()
        ),
        Duration::from_secs(60),
    );
    assert!(
        planted.as_ref().is_ok_and(|out| out.contains("planted")),
        "{planted:?}"
    );
    let next = call_bounded(&ws, "echo next", Duration::from_secs(30));
    assert!(
        next.as_ref().is_ok_and(|out| out.contains("next")),
        "{next:?}"
    );
    let mut buffer = [0u8; 4096];
    // SAFETY: reads into a local buffer.
    let read = unsafe { libc::read(inotify, buffer.as_mut_ptr().cast(), buffer.len()) };
    // SAFETY: closes the descriptor opened above.
    unsafe { libc::close(inotify) };
    assert!(
        read <= 0,
        "the host opened the device a repository includes"
    );
}

/// A repository being made (its configuration not yet written, as `git
/// init` and `git clone` leave it for a moment) is not kept by a plan made
/// meanwhile: neither the next command's sandbox, built ahead once a
/// command ends, nor a parallel command's takes its configuration, written
/// next by whoever makes it, for a plant.
#[tokio::test]
async fn a_repository_being_made_keeps_the_configuration_its_maker_writes() {
    let ws = Workspace::new(bundled);
    let host = ws.host(WRITABLE).await;
    for dir in ["new/.git/objects", "new/.git/refs", "new/.git/hooks"] {
        ws.mkdir(dir);
    }
    ws.write("new/.git/HEAD", "ref: refs/heads/main\n");
    // A command ends; the next one's sandbox is planned ahead meanwhile.
    assert!(run(&host, "echo ran").await.contains("ran"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Whoever makes the repository writes its configuration now.
    let config = "[core]\n\trepositoryformatversion = 0\n";
    ws.write("new/.git/config", config);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        std::fs::read_to_string(ws.join("new/.git/config"))
            .ok()
            .as_deref(),
        Some(config),
        "the configuration was moved aside"
    );
    // Whole now, it is kept: a command cannot change what git runs.
    let planted = run(&host, "mkdir -p new/.git/hooks && echo x > new/.git/info").await;
    assert!(!planted.is_empty());
    assert!(!ws.join("new/.git/info").is_file(), "{planted}");
}
