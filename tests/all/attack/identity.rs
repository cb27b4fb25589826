//! Attack tests: identity. A command tries to leave a set-user-ID or
//! set-group-ID file in its write grant by every call that sets a mode,
//! to be who toolhost is (root, when it runs as root), and to write the
//! host's `/proc/sys`, with Landlock and without. Run as root (as CI does)
//! and as another user (as CI also does, for this module and `tty`): each
//! test asserts what holds for the user it runs as.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use serde_json::json;

use crate::Workspace;

/// The grant's owner when the test runs as root: not root, so that a file
/// the command makes is seen to take the grant owner's id, not toolhost's.
const GRANT_OWNER: u32 = 4242;

fn root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A workspace whose configuration lets commands write `out/`, plus `extra`.
fn workspace(extra: &str) -> Workspace {
    let ws = Workspace::new(|builder| builder);
    ws.mkdir("out");
    if root() {
        std::os::unix::fs::chown(ws.join("out"), Some(GRANT_OWNER), Some(GRANT_OWNER)).unwrap();
    }
    ws.write(
        "toolhost.toml",
        format!(
            "default_profile = \"p\"\naudit = \"off\"\n[profiles.p]\n\
             allow = [\"terminal:*\", \"file:read\", \"file:write\"]\nfile.read = [\".\"]\n\
             file.write = [\"out\"]\nterminal.dangerous = \"allow\"\n{extra}\n"
        ),
    );
    ws
}

/// `toolhost call run_command` of `line` in `ws`; the JSON result printed.
fn run(ws: &Workspace, line: &str) -> serde_json::Value {
    let output = std::process::Command::new(crate::toolhost_cli())
        .arg("--config")
        .arg(ws.join("toolhost.toml"))
        .args(["call", "run_command"])
        .arg(json!({ "command": line, "cwd": "out" }).to_string())
        .current_dir(&ws.path)
        .env_remove("RUST_LOG")
        .output()
        .expect("the toolhost binary runs");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{line}: {e}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Every way a command could give a file in its grant a set-id bit.
const SET_ID: &[&str] = &[
    "touch chmod; chmod 4755 chmod",
    "touch symbolic; chmod u+s,g+s symbolic",
    "install -m 4755 /dev/null install",
    "cp -p /usr/bin/passwd copied; cp -a /usr/bin/passwd archived",
    "mkdir -m 2755 setgid-dir",
    "python3 -c 'import os; os.close(os.open(\"open\", os.O_CREAT | os.O_WRONLY, 0o4755))'",
    "python3 -c 'import os; os.mknod(\"mknod\", 0o104755)'",
    "python3 -c 'import os; fd = os.open(\".\", os.O_TMPFILE | os.O_WRONLY, 0o6755); \
     os.link(f\"/proc/self/fd/{fd}\", \"tmpfile\")'",
    "python3 -c 'import os; os.close(os.open(\"fchmod\", os.O_CREAT | os.O_WRONLY, 0o755)); \
     fd = os.open(\"fchmod\", os.O_RDONLY); os.fchmod(fd, 0o4755)'",
    // fchmodat2 (452), and openat2 (437) whose mode a filter cannot read.
    "touch at2; python3 -c 'import ctypes; l = ctypes.CDLL(None); \
     l.syscall(452, -100, b\"at2\", 0o4755, 0)'",
    "python3 -c 'import ctypes; l = ctypes.CDLL(None); \
     how = (ctypes.c_uint64 * 3)(0o101, 0o4755, 0); \
     l.syscall(437, -100, b\"openat2\", how, 24)'",
    // With the upper bits of the mode register set: the kernel reads 16.
    "touch wide; python3 -c 'import ctypes; l = ctypes.CDLL(None); \
     l.syscall(90, b\"wide\", ctypes.c_ulong(0xffff0000000009ed))'",
];

#[test]
fn a_command_cannot_leave_a_set_id_file_in_its_grant() {
    for extra in ["", "terminal.landlock = \"off\""] {
        let ws = workspace(extra);
        for line in SET_ID {
            run(&ws, line);
        }
        let mut seen = 0;
        for entry in std::fs::read_dir(ws.join("out")).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            let mode = meta.permissions().mode();
            seen += 1;
            assert_eq!(
                mode & 0o6000,
                0,
                "{extra}: {:?} has mode {mode:o}",
                entry.file_name()
            );
            // As root, the command's files are the grant owner's; as
            // another user, toolhost's own.
            // SAFETY: getuid cannot fail.
            let expected = if root() {
                GRANT_OWNER
            } else {
                unsafe { libc::getuid() }
            };
            assert_eq!(meta.uid(), expected, "{extra}: {:?}", entry.file_name());
            assert_ne!(meta.uid(), 0, "{extra}: {:?}", entry.file_name());
        }
        // The spellings that need no set-id bit made their files.
        assert!(seen >= 6, "{extra}: only {seen} files were made");
        // And the grant is mounted so that no set-id file would count.
        let mounts = run(&ws, "grep \" $PWD \" /proc/self/mountinfo");
        let line = mounts["stdout"].as_str().unwrap();
        assert!(
            line.contains("nosuid") && line.contains("nodev"),
            "{extra}: {mounts}"
        );
    }
}

#[test]
fn a_command_is_never_root_on_the_host() {
    let ws = workspace("");
    let result = run(
        &ws,
        "cat /proc/self/uid_map /proc/self/gid_map; id -G; id -u",
    );
    let printed = result["stdout"].as_str().unwrap();
    let maps: Vec<Vec<u64>> = printed
        .lines()
        .take(2)
        .map(|line| {
            line.split_whitespace()
                .map(|n| n.parse().unwrap())
                .collect()
        })
        .collect();
    // SAFETY: getuid and getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let expected = if root() {
        let first = u64::from(toolhost::capability::terminal::DEFAULT_SANDBOX_IDS.0);
        [first, first]
    } else {
        [u64::from(uid), u64::from(gid)]
    };
    for (map, host) in maps.iter().zip(expected) {
        assert_eq!(map, &vec![1000, host, 1], "{printed}");
    }
    assert!(printed.ends_with("1000\n"), "{printed}");
    // As root, none of root's groups either (another user keeps its own).
    if root() {
        assert!(printed.ends_with("\n1000\n1000\n"), "{printed}");
    }
    // The file it writes is not root's either.
    run(&ws, "echo made > made");
    assert_ne!(std::fs::metadata(ws.join("out/made")).unwrap().uid(), 0);
}

#[test]
fn proc_sys_is_not_writable_with_or_without_landlock() {
    // The current value written back: harmless if it ever got through.
    let knobs = [
        "kernel/core_pattern",
        "kernel/printk_ratelimit",
        "vm/swappiness",
    ];
    for extra in ["", "terminal.landlock = \"off\""] {
        let ws = workspace(extra);
        for knob in knobs {
            let path = format!("/proc/sys/{knob}");
            let line = format!("v=$(cat {path}) && printf '%s\\n' \"$v\" > {path} && echo WROTE");
            let result = run(&ws, &line);
            assert!(
                !result["stdout"].as_str().unwrap().contains("WROTE"),
                "{extra}: {knob} was written: {result}"
            );
        }
    }
}

#[tokio::test]
async fn each_tenant_runs_as_an_id_of_its_own() {
    use toolhost::serve::http::ServeOptions;
    let config = format!(
        r#"
default_profile = "p"
sandbox_ids = "1879048192-1879048199"
[profiles.p]
allow = ["terminal:*"]
file.read = ["."]
[tenants.alpha]
token_sha256 = "{alpha}"
profile = "p"
workspace = "alpha"
[tenants.beta]
token_sha256 = "{beta}"
profile = "p"
workspace = "beta"
"#,
        alpha = crate::http_api::sha256_hex("alpha-token"),
        beta = crate::http_api::sha256_hex("beta-token"),
    );
    crate::use_launcher();
    let server = crate::http_api::Server::start(&config, ServeOptions::default()).await;
    let mut seen = Vec::new();
    for token in ["alpha-token", "beta-token"] {
        let result = server
            .call(
                Some(token),
                "run_command",
                json!({ "command": "cat /proc/self/uid_map" }),
            )
            .await;
        seen.push(result["stdout"].as_str().unwrap().to_string());
    }
    if root() {
        // The callers that are not tenants have the first id.
        assert_eq!(
            seen[0].split_whitespace().nth(1),
            Some("1879048193"),
            "{seen:?}"
        );
        assert_eq!(
            seen[1].split_whitespace().nth(1),
            Some("1879048194"),
            "{seen:?}"
        );
    } else {
        assert_eq!(seen[0], seen[1]);
    }
}

#[tokio::test]
async fn a_container_command_is_not_root_and_leaves_no_set_id_file() {
    use crate::container::{ONE_AT_A_TIME, engine, profile};
    let _alone = ONE_AT_A_TIME.lock().await;
    let Some(socket) = engine().await else { return };
    let podman = socket.contains("podman");
    let ws = Workspace::new(|builder| builder.bundled(true));
    // The container's user: as root the caller's id of sandbox_ids, else
    // toolhost's own; the grant is made its.
    // SAFETY: getuid and getgid cannot fail.
    let (uid, gid) = if root() {
        let id = toolhost::capability::terminal::DEFAULT_SANDBOX_IDS.0;
        (id, id)
    } else {
        unsafe { (libc::getuid(), libc::getgid()) }
    };
    ws.mkdir("out");
    std::os::unix::fs::chown(ws.join("out"), Some(uid), Some(gid)).unwrap();
    let rules = "file.write = [\"out\"]\nterminal.dangerous = \"allow\"\n";
    let host = ws.host(&profile(rules)).await;
    let (client, _) = crate::mcp::connect(host, None).await;
    let run = |line: String| {
        let client = &client;
        async move {
            crate::sessions::tool(
                client,
                "run_command",
                json!({ "command": line, "cwd": "out" }),
            )
            .await
        }
    };
    let who = run("id -u; id -g; exec 3<>/dev/tty || echo no-terminal".into()).await;
    assert_eq!(
        who["stdout"].as_str().unwrap(),
        format!("{uid}\n{gid}\nno-terminal\n"),
        "{who}"
    );
    for line in SET_ID {
        run(line.to_string()).await;
    }
    let mounts = run("grep \" $PWD \" /proc/self/mountinfo".into()).await;
    for entry in std::fs::read_dir(ws.join("out")).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        assert_ne!(meta.uid(), 0, "{:?}", entry.file_name());
        if podman {
            let mode = meta.permissions().mode();
            assert_eq!(
                mode & 0o6000,
                0,
                "{:?} has mode {mode:o}",
                entry.file_name()
            );
        }
    }
    if podman {
        let line = mounts["stdout"].as_str().unwrap();
        assert!(
            line.contains("nosuid") && line.contains("nodev"),
            "{mounts}"
        );
    }
    client.cancel().await.unwrap();
}

/// Removes a path of `/etc` the test made, however it ends.
struct Made(std::path::PathBuf);

impl Drop for Made {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0).or_else(|_| std::fs::remove_file(&self.0));
    }
}

#[tokio::test]
async fn a_root_only_file_made_in_etc_after_start_stays_unreadable() {
    if !root() {
        return;
    }
    let ws = Workspace::new(|builder| builder.bundled(true));
    let host = ws
        .host(
            "allow = [\"terminal:*\", \"file:read\"]\nfile.read = [\".\"]\n\
             terminal.dangerous = \"allow\"\n",
        )
        .await;
    // The host has planned (and looked at /etc) before the files appear.
    let first = host
        .call("run_command", json!({ "command": "true" }))
        .await
        .unwrap();
    assert!(first.get().contains("\"exit_code\":0"), "{}", first.get());
    let id = std::process::id();
    let file = Made(format!("/etc/late-secret-{id}").into());
    let dir = Made(format!("/etc/late-dir-{id}").into());
    std::fs::write(&file.0, "late-content-8831\n").unwrap();
    std::fs::set_permissions(&file.0, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::create_dir(&dir.0).unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(dir.0.join("privkey.pem"), "late-pem-8831\n").unwrap();
    let line = format!("cat {} {}/privkey.pem", file.0.display(), dir.0.display());
    let read = match host.call("run_command", json!({ "command": line })).await {
        Ok(result) => result.get().to_string(),
        Err(e) => e.to_string(),
    };
    assert!(
        !read.contains("late-content-8831") && !read.contains("late-pem-8831"),
        "a root-only file made in /etc after start was read: {read}"
    );
    assert!(read.contains("Permission denied"), "{read}");
}
