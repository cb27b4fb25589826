//! Attack tests: the file capability's operations done on the calling
//! (runtime worker) thread (`capability/file/on_thread.rs`). What runs there
//! must never wait on another party: a worker that waits stalls every other
//! call, and no call's time limit can end it.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::server::{Server, error_of};

/// File tools in the config's directory; a tool's call ends after 5 s.
const FILES: &str = r#"
default_profile = "p"
[profiles.p]
allow = ["file:*"]
file.read = ["."]
file.write = ["."]
limits = { timeout = "5s" }
"#;

/// Longer than a call may take, shorter than a thread held for good.
const BOUND: Duration = Duration::from_secs(15);

/// A FUSE filesystem (spoken on `/dev/fuse`, no libfuse) whose files
/// `slowN.txt` answer lookups, opens and reads, but never an attribute
/// request once opened: what a network filesystem (sshfs, rclone...) whose
/// server stopped answering does.
const HANGFS: &str = include_str!("on_thread/hangfs.py");

/// The filesystem mounted at `at` while held; unmounted (its server
/// killed first, which ends every request left waiting) when dropped.
struct Mounted {
    server: Child,
    at: PathBuf,
}

impl Mounted {
    /// `None` where FUSE cannot be mounted (no `/dev/fuse`, not root).
    fn at(at: &Path) -> Option<Self> {
        std::fs::create_dir_all(at).unwrap();
        let mut server = Command::new("python3")
            .args(["-c", HANGFS])
            .arg(at)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut line = String::new();
        let _ = std::io::BufReader::new(server.stdout.take().unwrap()).read_line(&mut line);
        let mounted = Self {
            server,
            at: at.to_path_buf(),
        };
        (line == "mounted\n").then_some(mounted)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        let at = std::ffi::CString::new(self.at.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        unsafe { libc::umount2(at.as_ptr(), libc::MNT_DETACH) };
    }
}

/// Calls `tool` with `arguments`: the result and how long it took, or
/// `None` when no answer came within [`BOUND`].
async fn timed(server: &Server, tool: &str, arguments: Value) -> (Option<Value>, Duration) {
    let started = Instant::now();
    let call = server.call(None, None, tool, arguments);
    let answer = tokio::time::timeout(BOUND, call).await.ok();
    (answer, started.elapsed())
}

/// A stat of an open file is done on a runtime worker; on a filesystem
/// whose server does not answer (a FUSE or network mount the operator
/// granted), the worker waits with it. Four `read_file`s of such files
/// (Rust's `fs::read` stats the file it opened) take both workers of a
/// two-core machine: the calls' 5 s limit never ends them, and another
/// call, of a plain file, gets no answer. Before `on_thread` the stat ran
/// on the blocking pool: the calls ended at their limit and the plain file
/// was read at once.
#[tokio::test]
async fn a_stat_that_never_returns_holds_no_worker() {
    let server = Server::start(FILES, |root| {
        std::fs::write(root.join("plain.txt"), "plain text\n").unwrap();
    })
    .await;
    let Some(_mounted) = Mounted::at(&server.root.join("remote")) else {
        eprintln!("skipped: FUSE cannot be mounted here (needs root and /dev/fuse)");
        return;
    };
    server.wait_for_tool(None, "read_file").await;
    let warm = timed(&server, "read_file", json!({ "path": "plain.txt" })).await;
    assert!(warm.0.is_some_and(|r| r.to_string().contains("plain text")));

    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let slow: Vec<_> = (0..workers + 2)
        .map(|n| {
            timed(
                &server,
                "read_file",
                json!({ "path": format!("remote/slow{n}.txt") }),
            )
        })
        .collect();
    let plain = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        timed(&server, "read_file", json!({ "path": "plain.txt" })).await
    };
    let (slow, plain) = tokio::join!(futures::future::join_all(slow), plain);

    let (read, took) = plain;
    assert!(
        read.as_ref()
            .is_some_and(|r| r.to_string().contains("plain text")),
        "a plain read_file, while read_files of a stalled mount wait: {read:?} after {took:?}"
    );
    for (n, (answer, took)) in slow.into_iter().enumerate() {
        let answer = answer.unwrap_or_else(|| {
            panic!("read_file remote/slow{n}.txt: no answer within {BOUND:?} (limit 5 s)")
        });
        assert!(error_of(&answer).is_some(), "slow{n}: {answer}");
        assert!(took < BOUND, "slow{n}: {took:?}");
    }
}
