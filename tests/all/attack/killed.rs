//! Attack tests: killed. toolhost ended without its own exit path (killed
//! with SIGKILL, the one-shot `toolhost call` interrupted) leaves no
//! command running: a command that outlived toolhost would go unguarded,
//! and could write the configuration the operator saves by a rename while
//! toolhost is down (the eleventh pass's 01).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `sleep` processes whose argument is `needle` (toolhost's own command
/// line names it too).
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.starts_with(&format!("sleep {needle}")) {
                found.push(format!(
                    "{}: {cmdline}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    found
}

/// Waits until a process with `needle` in its command line runs.
fn runs(needle: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while processes_with(needle).is_empty() {
        assert!(Instant::now() < deadline, "{what}: never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until no process with `needle` in its command line is left.
fn gone(needle: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_with(needle);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still running after toolhost ended: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every containers' lifeline of the server `pid` is a FIFO no one may
/// open for writing, its owner neither (a container's commands may run as
/// toolhost's own uid): opened by its owner without the capability to
/// override file modes, it is refused.
fn lifelines_are_sealed(pid: u32) {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let prefix = format!("toolhost-masks-{pid}-");
    let mut sealed = 0;
    for masks in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        if !masks.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        for entry in std::fs::read_dir(masks.path()).unwrap().flatten() {
            if !entry.file_name().to_string_lossy().starts_with("lifeline") {
                continue;
            }
            let meta = entry.metadata().unwrap();
            assert!(meta.file_type().is_fifo());
            assert_eq!(meta.mode() & 0o7777, 0o444, "{:?}", entry.path());
            let opened = Command::new("setpriv")
                .arg(format!("--reuid={}", meta.uid()))
                .args(["--inh-caps=-all", "--bounding-set=-all", "sh", "-c"])
                .arg("exec 9<>\"$0\"")
                .arg(entry.path())
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&opened.stderr);
            assert!(
                !opened.status.success() && said.contains("Permission denied"),
                "{:?} opened: {opened:?}",
                entry.path()
            );
            sealed += 1;
        }
    }
    assert!(sealed > 0, "no lifeline of server {pid} was found");
}

/// A unique `sleep` argument: a fraction no other test runs.
fn marker(n: u32) -> String {
    format!("400.{}{n}", std::process::id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_or_stopped_leaves_no_sandboxed_command_running() {
    let config = "default_profile = \"agent\"\n[profiles.agent]\nallow = [\"*\"]\n\
                  file.read = [\".\"]\nfile.write = [\".\"]\nterminal.sandbox = \"kernel\"\n";
    killed_leaves_nothing(config, 10, libc::SIGKILL, |_| {}).await;
    killed_leaves_nothing(config, 20, libc::SIGSTOP, |_| {}).await;
    killed_leaves_nothing(config, 60, FREEZE, |_| {}).await;
}

/// Not a signal: the server is frozen by a cgroup freezer (`systemctl
/// freeze`, a paused container), which leaves it sleeping, not stopped.
const FREEZE: libc::c_int = 0;

/// A cgroup of its own for process `pid`, frozen; thawed and removed when
/// dropped. `None` (after saying why) where no freezer can be used.
struct Frozen(std::path::PathBuf, &'static str);

impl Frozen {
    fn freeze(pid: u32) -> Option<Self> {
        let (base, file, on): (&str, &'static str, &str) =
            if std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
                ("/sys/fs/cgroup", "cgroup.freeze", "1")
            } else if std::path::Path::new("/sys/fs/cgroup/unified/cgroup.procs").exists() {
                ("/sys/fs/cgroup/unified", "cgroup.freeze", "1")
            } else {
                ("/sys/fs/cgroup/freezer", "freezer.state", "FROZEN")
            };
        let dir = std::path::Path::new(base).join(format!("toolhost-test-{pid}"));
        let made = std::fs::create_dir(&dir)
            .and_then(|()| std::fs::write(dir.join("cgroup.procs"), pid.to_string()))
            .and_then(|()| std::fs::write(dir.join(file), on));
        match made {
            Ok(()) => Some(Self(dir, file)),
            Err(e) => {
                eprintln!(
                    "freezing skipped: no cgroup freezer at {}: {e}",
                    dir.display()
                );
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let thawed = if self.1 == "freezer.state" {
            "THAWED"
        } else {
            "0"
        };
        let _ = std::fs::write(self.0.join(self.1), thawed);
        // The process goes back to the root group so the directory can go.
        let parent = self.0.parent().unwrap().join("cgroup.procs");
        if let Ok(procs) = std::fs::read_to_string(self.0.join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = std::fs::write(&parent, pid);
            }
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_or_stopped_leaves_no_container_running() {
    let _alone = crate::container::ONE_AT_A_TIME.lock().await;
    if crate::container::engine().await.is_none() {
        return;
    }
    let config = format!(
        "default_profile = \"agent\"\n[profiles.agent]\n{}",
        crate::container::profile("file.write = [\".\"]\n")
    );
    killed_leaves_nothing(
        &config,
        30,
        libc::SIGKILL,
        crate::container::give_to_sandbox,
    )
    .await;
    killed_leaves_nothing(
        &config,
        40,
        libc::SIGSTOP,
        crate::container::give_to_sandbox,
    )
    .await;
}

/// Serves `config` (`prepare` run in its directory first), starts a
/// session's background process and two calls' commands (one with a
/// process it left running), ends the server with `signal` (SIGKILL, or
/// SIGSTOP: a stopped toolhost guards nothing, and may be killed before
/// it resumes) and asserts that none of them runs on; `n` tells the
/// markers apart. A stopped server, resumed, runs commands again.
async fn killed_leaves_nothing(
    config: &str,
    n: u32,
    signal: libc::c_int,
    prepare: impl FnOnce(&std::path::Path),
) {
    use super::server::Server;
    let server = Server::start(config, prepare).await;
    server.wait_for_tool(None, "run_command").await;
    let (alone, background, session) = (marker(n), marker(n + 1), marker(n + 2));
    // A session's background process (its command returned) and a call's
    // command, each with a process it left running.
    let started = server
        .run(
            None,
            Some("s"),
            &format!("sleep {background} >/dev/null 2>&1 &"),
        )
        .await;
    assert!(started.get("error").is_none(), "{started}");
    // Then, in the same session, a command stops every process it may
    // signal but its own shell (what would keep a container's first
    // process from seeing toolhost end); it may never return.
    let stopper = "for p in /proc/[0-9]*; do p=${p#/proc/}; [ \"$p\" = $$ ] || kill -STOP \"$p\" 2>/dev/null; done; touch stopped";
    let calls = [
        (None, format!("sleep {alone}")),
        (None, format!("(sleep {session} &); sleep {alone}")),
        (Some("s"), stopper.to_string()),
    ]
    .map(|(session, line)| {
        let url = format!("{}/v1/tool_calls", server.base);
        let batch = serde_json::json!({ "tool_calls": [{
            "id": "call_0",
            "type": "function",
            "function": { "name": "run_command",
                          "arguments": serde_json::json!({ "command": line }).to_string() },
        }]});
        tokio::spawn(async move {
            let mut request = reqwest::Client::builder()
                .no_proxy()
                .build()
                .unwrap()
                .post(url)
                .header("content-type", "application/json");
            if let Some(session) = session {
                request = request.header("toolhost-session", session);
            }
            request.body(batch.to_string()).send().await
        })
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while !server.root.join("stopped").exists() {
        assert!(Instant::now() < deadline, "the stopper never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for needle in [&alone, &background, &session] {
        runs(needle, needle);
    }
    if config.contains("\"container\"") {
        lifelines_are_sealed(server.pid());
    }
    let frozen = if signal == FREEZE {
        let Some(frozen) = Frozen::freeze(server.pid()) else {
            return;
        };
        Some(frozen)
    } else {
        // SAFETY: signals the server, our own child.
        assert_eq!(
            unsafe { libc::kill(server.pid() as libc::pid_t, signal) },
            0
        );
        None
    };
    for needle in [&alone, &background, &session] {
        gone(needle, needle);
    }
    drop(frozen);
    if signal == libc::SIGSTOP || signal == FREEZE {
        // SAFETY: signals the server, our own child.
        unsafe { libc::kill(server.pid() as libc::pid_t, libc::SIGCONT) };
        let ran = server.run(None, Some("later"), "echo alive").await;
        assert!(ran.to_string().contains("alive"), "{ran}");
    }
    drop(server);
    for call in calls {
        let _ = call.await;
    }
}

#[test]
fn a_one_shot_call_ended_by_a_signal_ends_its_command() {
    for (sandbox, signal) in [
        ("kernel", libc::SIGINT),
        ("kernel", libc::SIGTERM),
        ("kernel", libc::SIGHUP),
        ("none", libc::SIGTERM),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("plugins")).unwrap();
        let config = format!(
            "default_profile = \"agent\"\n[profiles.agent]\nallow = [\"*\"]\n\
             file.read = [\".\"]\nfile.write = [\".\"]\nterminal.sandbox = \"{sandbox}\"\n"
        );
        std::fs::write(root.join("toolhost.toml"), config).unwrap();
        let needle = format!("400.{}{}{signal}", std::process::id(), sandbox.len());
        let what = format!("{sandbox}, signal {signal}");
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
            .current_dir(&root)
            .args(["call", "run_command"])
            .arg(serde_json::json!({ "command": format!("sleep {needle}") }).to_string())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        runs(&needle, &what);
        // SAFETY: signals our own child.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "{what}: toolhost did not exit");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(128 + signal), "{what}: {status:?}");
        gone(&needle, &what);
    }
}
