//! Processes: the server's out of reach, nothing outlives the call, no
//! privileges, and the process limit.

use std::time::{Duration, Instant};

use super::{SANDBOXED, printed, ran, run, succeeds, workspace};
use crate::assert_gone;

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
async fn threads_count_against_the_process_limit() {
    let ws = workspace();
    let host = ws
        .host(&format!("{SANDBOXED}\nterminal.max_processes = 20"))
        .await;
    // Threads are tasks: the pids cgroup and RLIMIT_NPROC count them.
    let threads = "import threading, time\nstarted = 0\ntry:\n    for _ in range(100):\n        \
                   threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n        \
                   started += 1\nexcept RuntimeError:\n    pass\nprint(started)\n";
    ws.write("threads.py", threads);
    let out = succeeds(&host, "python3 threads.py").await;
    let started: u32 = out.trim().parse().unwrap_or_else(|_| panic!("{out}"));
    assert!((10..20).contains(&started), "{out}");
}

#[tokio::test]
async fn the_process_limit_cannot_be_lifted_from_inside() {
    let ws = workspace();
    let host = ws
        .host(&format!("{SANDBOXED}\nterminal.max_processes = 30"))
        .await;
    // No cgroup file system to raise pids.max or move out of the group,
    // and the hard limit holds.
    let out = ran(
        &host,
        "ls /sys/fs/cgroup 2>&1 | head -1; echo max > /sys/fs/cgroup/pids.max; echo wrote=$?; \
         mkdir -p /tmp/cg && mount -t cgroup2 none /tmp/cg; echo mounted=$?; \
         ulimit -u unlimited; echo raised=$?; ulimit -u",
    )
    .await;
    let text = out["stdout"].as_str().unwrap();
    for expected in ["wrote=1", "mounted=", "raised=1\n30\n"] {
        assert!(text.contains(expected), "{expected}: {text}");
    }
    assert!(!text.contains("mounted=0"), "{text}");
    assert!(printed(&out).contains("Operation not permitted"), "{out}");
}

#[tokio::test]
async fn clone3_cannot_make_namespaces() {
    let ws = workspace();
    let host = ws.host(SANDBOXED).await;
    // clone3 takes its flags in memory, which seccomp cannot read: it is
    // refused outright with ENOSYS (a kernel without the filter would say
    // EINVAL to these arguments), so libraries fall back to clone, whose
    // namespace flags are refused.
    let probe = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n\
                 r = libc.syscall(435, None, 0)\nprint(r, ctypes.get_errno())\n\
                 r = libc.unshare(0x10000000)\nprint('unshare', r, ctypes.get_errno())\n";
    ws.write("clone3.py", probe);
    let out = succeeds(&host, "python3 clone3.py").await;
    assert_eq!(
        out,
        format!("-1 {}\nunshare -1 {}\n", libc::ENOSYS, libc::EPERM),
        "{out}"
    );
}
