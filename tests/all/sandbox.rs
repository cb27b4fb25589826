//! The kernel sandbox of terminal commands, through the bundled `run_command`
//! and real profiles: each route a command could take around the profile
//! (denied files, paths outside the grants, writes, the network, the
//! server's process and environment, processes that outlive the call,
//! privileges that would undo the sandbox) is tried and must fail or be
//! harmless, and ordinary work must still run.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost::{ErrorKind, Host, HostBuilder};

use crate::{Workspace, assert_gone};

/// Hosts with the bundled plugins.
fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

/// Commands may read the workspace and write `out/`; `.env` and `secrets/`
/// are denied; the detector stays out of the way so the sandbox alone is
/// tested.
const SANDBOXED: &str = r#"
allow = ["terminal:execute", "file:read", "file:write"]
file.read = ["."]
file.write = ["out"]
file.deny = [".env", "secrets/**"]
terminal.dangerous = "allow"
"#;

/// A workspace with a secret file, a secret directory and a writable `out/`.
fn workspace() -> Workspace {
    let ws = Workspace::new(bundled);
    ws.write(".env", "TOKEN=env-secret\n");
    ws.write("secrets/key.txt", "key-secret\n");
    ws.write("notes.txt", "public\n");
    ws.mkdir("out");
    ws
}

/// Runs `line`; the result (exit code, stdout, stderr) or the error.
async fn run(host: &Host, line: &str) -> Result<Value, (ErrorKind, String)> {
    match host.call("run_command", json!({ "command": line })).await {
        Ok(result) => Ok(serde_json::from_str(result.get()).unwrap()),
        Err(e) => Err((e.kind(), e.message().to_string())),
    }
}

/// Runs `line`, which must run (whatever its exit code).
async fn ran(host: &Host, line: &str) -> Value {
    run(host, line)
        .await
        .unwrap_or_else(|(kind, message)| panic!("{line}: {kind:?}: {message}"))
}

/// Runs `line`, which must run and succeed; its stdout.
async fn succeeds(host: &Host, line: &str) -> String {
    let result = ran(host, line).await;
    assert_eq!(result["exit_code"], 0, "{line}: {result}");
    result["stdout"].as_str().unwrap().to_string()
}

/// Everything a command printed, for searching.
fn printed(result: &Value) -> String {
    format!("{}{}", result["stdout"], result["stderr"])
}

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
async fn commands_have_no_network_unless_the_profile_shares_it() {
    let ws = workspace();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let host = ws.host(SANDBOXED).await;
    let connect = format!("echo hello > /dev/tcp/127.0.0.1/{port} && echo connected");
    let result = ran(&host, &connect).await;
    assert!(!printed(&result).contains("\"connected"), "{result}");
    assert!(
        listener.accept().is_err(),
        "a connection reached the host's listener"
    );
    // Only a loopback interface of its own.
    let links = succeeds(&host, "cat /proc/net/dev").await;
    assert!(links.contains("lo:"), "{links}");
    assert_eq!(links.lines().count(), 3, "{links}");

    // `terminal.network = "host"` shares the host's network.
    let shared = ws
        .host(&format!("{SANDBOXED}\nterminal.network = \"host\""))
        .await;
    succeeds(&shared, &connect).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while listener.accept().is_err() {
        assert!(Instant::now() < deadline, "no connection arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A plain HTTP server on `addr` answering every request with `body`; the
/// number of connections it accepted.
fn http_server(addr: &str, body: &'static str) -> (u16, std::sync::Arc<AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind(format!("{addr}:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            counter.fetch_add(1, Ordering::SeqCst);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (port, accepted)
}

#[tokio::test]
async fn commands_reach_allowed_hosts_only_through_the_proxy() {
    let ws = workspace();
    // Two servers on host loopback addresses other than the sandbox's own.
    let (allowed, reached) = http_server("127.0.0.2", "hello from the host");
    let (other, other_reached) = http_server("127.0.0.3", "must stay unreachable");
    // Allowing a host makes `terminal.network` default to the proxy.
    let host = ws
        .host(&format!(
            "{SANDBOXED}\nnetwork.allow_hosts = [\"127.0.0.2:{allowed}\"]"
        ))
        .await;

    // Plain HTTP (absolute-form requests) and a CONNECT tunnel.
    let url = format!("http://127.0.0.2:{allowed}/hello");
    assert_eq!(
        succeeds(&host, &format!("curl -sS {url}")).await,
        "hello from the host"
    );
    assert_eq!(
        succeeds(&host, &format!("curl -sS --proxytunnel {url}")).await,
        "hello from the host"
    );
    assert_eq!(reached.load(Ordering::SeqCst), 2);

    // Another host, another port, the metadata address: refused with the
    // rule named, and no connection made.
    for refused in [
        format!("http://127.0.0.3:{other}/"),
        format!("http://127.0.0.2:{other}/"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
    ] {
        let plain = succeeds(&host, &format!("curl -sS -w ' %{{http_code}}' {refused}")).await;
        assert!(plain.ends_with(" 403"), "{refused}: {plain}");
        assert!(plain.contains("network.allow_hosts"), "{refused}: {plain}");
        let tunnel = ran(&host, &format!("curl -sS --proxytunnel {refused}")).await;
        assert_ne!(tunnel["exit_code"], 0, "{refused}: {tunnel}");
        assert!(printed(&tunnel).contains("403"), "{refused}: {tunnel}");
    }
    // Around the proxy there is no way out.
    for line in [
        format!("curl -sS --noproxy '*' {url}"),
        format!("echo x > /dev/tcp/127.0.0.2/{allowed}"),
        format!("echo x > /dev/tcp/127.0.0.3/{other}"),
    ] {
        let result = ran(&host, &line).await;
        assert_ne!(result["exit_code"], 0, "{line}: {result}");
    }
    assert_eq!(reached.load(Ordering::SeqCst), 2);
    assert_eq!(other_reached.load(Ordering::SeqCst), 0);

    // `terminal.network = "none"` keeps the allowed host out of reach too.
    let closed = ws
        .host(&format!(
            "{SANDBOXED}\nnetwork.allow_hosts = [\"127.0.0.2:{allowed}\"]\n\
             terminal.network = \"none\""
        ))
        .await;
    let result = ran(&closed, &format!("curl -sS {url}")).await;
    assert_ne!(result["exit_code"], 0, "{result}");
    assert_eq!(reached.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_command_cannot_hold_more_proxy_connections_than_the_cap() {
    let ws = workspace();
    let (allowed, reached) = http_server("127.0.0.2", "hello from the host");
    let host = ws
        .host(&format!(
            "{SANDBOXED}\nnetwork.allow_hosts = [\"127.0.0.2:{allowed}\"]"
        ))
        .await;
    // 64 idle connections held open, then one more that asks for the page:
    // past the cap the relay closes it unanswered. Once the held ones are
    // closed, the same request gets through.
    let request = format!(
        "exec 3<>/dev/tcp/127.0.0.1/3128; \
         printf 'GET http://127.0.0.2:{allowed}/ HTTP/1.0\\r\\n\\r\\n' >&3; \
         timeout 5 cat <&3; exec 3<&-"
    );
    let line = format!(
        "held=(); for i in $(seq 64); do exec {{fd}}<>/dev/tcp/127.0.0.1/3128 || exit 9; \
         held+=($fd); done; sleep 0.5; echo over:; {request}; \
         for fd in \"${{held[@]}}\"; do exec {{fd}}<&-; done; sleep 0.5; echo under:; {request}"
    );
    let out = succeeds(&host, &line).await;
    let (over, under) = out.split_once("under:").expect("both requests ran");
    assert!(!over.contains("hello from the host"), "{out}");
    assert!(under.contains("hello from the host"), "{out}");
    assert_eq!(reached.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_server_process_is_out_of_sight_and_reach() {
    let ws = workspace();
    let host = ws.host(SANDBOXED).await;
    let me = std::process::id();
    // The environment of the server (this test process) stays hidden.
    let (name, value) = std::env::vars()
        .find(|(name, value)| {
            !["PATH", "HOME", "PWD", "OLDPWD", "SHLVL", "_"].contains(&name.as_str())
                && value.len() > 3
        })
        .expect("the test process has environment variables");
    let result = ran(
        &host,
        "cat /proc/$PPID/environ /proc/1/environ 2>&1; tr '\\0' '\\n' < /proc/self/environ; \
         for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null; done",
    )
    .await;
    assert!(
        !printed(&result).contains(&format!("{name}={value}")),
        "the server's {name} leaked: {result}"
    );
    // Its own PID namespace: the shell is PID 2 under the sandbox's init,
    // and the server's pid is not there to signal.
    let pids = succeeds(&host, "echo $$ $PPID; ls /proc | grep -c '^[0-9]'").await;
    let fields: Vec<&str> = pids.split_whitespace().collect();
    assert_eq!(&fields[..2], ["2", "1"], "{pids}");
    assert!(fields[2].parse::<u32>().unwrap() < 8, "{pids}");
    for line in [
        format!("kill -9 {me}"),
        "kill -9 $PPID; kill -9 1; kill -9 -1".into(),
    ] {
        let _ = run(&host, &line).await;
    }
    // Still here, and still serving.
    assert_eq!(succeeds(&host, "echo alive").await, "alive\n");
}

#[tokio::test]
async fn nothing_outlives_the_call() {
    let ws = workspace();
    let host = ws.host(SANDBOXED).await;
    // Distinct sleep lengths mark this test's processes.
    let lines = [
        "setsid sleep 301.5 > /dev/null 2>&1 &",
        "(sleep 302.5 &) ; nohup sleep 303.5 > /dev/null 2>&1 &",
        "bash -c 'setsid bash -c \"sleep 304.5\" &' ; disown -a",
    ];
    for line in lines {
        ran(&host, line).await;
    }
    for marker in ["301.5", "302.5", "303.5", "304.5"] {
        assert_gone(&format!("sleep {marker}")).await;
    }
}

#[tokio::test]
async fn privileges_that_would_undo_the_sandbox_are_gone() {
    let ws = workspace();
    let host = ws.host(SANDBOXED).await;
    for line in [
        "umount .env",
        "umount -l secrets",
        "mount --bind /tmp out",
        "unshare -r cat .env",
        "unshare -U true",
        "nsenter -t 1 -m cat .env",
        "chroot / true",
        "python3 -c 'import ctypes; l=ctypes.CDLL(None); exit(l.unshare(0x10000000))'",
    ] {
        let result = ran(&host, line).await;
        assert_ne!(result["exit_code"], 0, "{line} succeeded: {result}");
        assert!(!printed(&result).contains("env-secret"), "{line}: {result}");
    }
    let status = succeeds(
        &host,
        "grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status",
    )
    .await;
    assert!(status.contains("Uid:\t1000\t1000\t1000\t1000"), "{status}");
    assert!(status.contains("CapEff:\t0000000000000000"), "{status}");
    assert!(status.contains("CapBnd:\t0000000000000000"), "{status}");
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert!(status.contains("Seccomp:\t2"), "{status}");
}

#[tokio::test]
async fn a_fork_bomb_ends_at_the_process_limit() {
    let ws = workspace();
    let host = ws
        .host(&format!(
            "{SANDBOXED}\nterminal.max_processes = 40\nterminal.timeout = \"5s\""
        ))
        .await;
    assert_eq!(succeeds(&host, "ulimit -u").await, "40\n");
    let started = Instant::now();
    let _ = run(&host, "zq() { zq | zq & }; zq; sleep 1").await;
    assert!(started.elapsed() < Duration::from_secs(30));
    // The host is unharmed, and nothing of the bomb is left.
    assert_eq!(succeeds(&host, "echo fine").await, "fine\n");
    assert_gone("zq() {").await;
}

#[tokio::test]
async fn a_command_runs_no_more_processes_at_once_than_the_limit() {
    let ws = workspace();
    let host = ws
        .host(&format!("{SANDBOXED}\nterminal.max_processes = 20"))
        .await;
    // Children that stay alive until the parent is done: the kernel refuses
    // the fork past the limit, whoever the host runs as (for root, the
    // process limit of `ulimit -u` is not enforced, so a pids cgroup is).
    let forks = "perl -e 'for $n (1..100) { $p = fork; if (!defined $p) { print \"refused after $n\\n\"; exit } \
                 if (!$p) { sleep 5; exit } } print \"all 100\\n\"'";
    let out = succeeds(&host, forks).await;
    let started: u32 = out
        .trim()
        .strip_prefix("refused after ")
        .unwrap_or_else(|| panic!("{out}"))
        .parse()
        .unwrap();
    // The shell and perl count too.
    assert!((15..=20).contains(&started), "{out}");
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

/// A configuration whose profile runs commands in the workspace, plus `extra`.
fn cli_config(ws: &Workspace, extra: &str) -> std::path::PathBuf {
    ws.write(
        "toolhost.toml",
        format!(
            "default_profile = \"p\"\n[profiles.p]\nallow = [\"terminal:execute\"]\n\
             file.read = [\".\"]\n{extra}\n"
        ),
    )
}

/// Runs the toolhost binary with `args` in a user namespace where no further
/// user namespace may be created, as in a container that forbids them.
fn toolhost_without_user_namespaces(ws: &Workspace, args: &[&str]) -> (bool, String) {
    let output = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "sh", "-c"])
        .arg(r#"echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(args)
        .current_dir(&ws.path)
        .env_remove("RUST_LOG")
        .output()
        .expect("unshare runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn without_user_namespaces_commands_are_refused_unless_the_profile_opts_out() {
    let ws = workspace();
    // `call run_command echo ran` and `doctor` under the profile plus `extra`.
    let under = |extra: &str| {
        let config = cli_config(&ws, extra);
        let config = config.to_str().unwrap();
        let echo = r#"{"command":"echo ran"}"#;
        let call = ["--config", config, "call", "run_command", echo];
        let called = toolhost_without_user_namespaces(&ws, &call);
        let doctor = toolhost_without_user_namespaces(&ws, &["--config", config, "doctor"]);
        (called, doctor)
    };
    let ((ok, text), (doctor_ok, doctor)) = under("");
    assert!(!ok, "{text}");
    assert!(!text.contains("\"ran"), "{text}");
    assert!(text.contains("unprivileged user namespaces"), "{text}");
    assert!(text.contains("terminal.sandbox = \\\"none\\\""), "{text}");
    assert!(!doctor_ok, "{doctor}");
    assert!(doctor.contains("✗ terminal sandbox"), "{doctor}");

    // The explicit opt-out runs the command unconfined, and says so.
    let ((ok, text), (_, doctor)) = under("terminal.sandbox = \"none\"");
    assert!(ok, "{text}");
    assert!(text.contains("ran\\n"), "{text}");
    assert!(
        doctor.contains("sets terminal.sandbox = \"none\""),
        "{doctor}"
    );
}

#[test]
fn doctor_reports_the_sandbox_this_kernel_builds() {
    let ws = workspace();
    let config = cli_config(&ws, "");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(["--config", config.to_str().unwrap(), "doctor"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("✓ terminal sandbox"), "{text}");
    assert!(text.contains("✓ Landlock ABI"), "{text}");
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
