//! Attack tests: special files a command makes in a grant (a FIFO, a
//! socket) are refused by every file tool at once, and no open of one holds
//! a thread of the server, even when a name is swapped to one mid-call.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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

fn mkfifo(path: &Path) {
    let name = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o666) }, 0);
}

/// The threads of `pid` asleep opening a FIFO (waiting for the other end).
fn threads_opening_a_fifo(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("wchan"))
                .is_ok_and(|wchan| wchan.contains("wait_for_partner") || wchan.contains("fifo"))
        })
        .count()
}

/// Calls `tool`, failing the test when the answer takes longer than
/// [`BOUND`].
async fn bounded(server: &Server, tool: &str, arguments: Value) -> Value {
    let call = server.call(None, None, tool, arguments.clone());
    tokio::time::timeout(BOUND, call)
        .await
        .unwrap_or_else(|_| panic!("{tool} {arguments} did not answer within {BOUND:?}"))
}

#[tokio::test]
async fn file_tools_refuse_fifos_and_sockets_without_holding_a_thread() {
    let mut listener = None;
    let server = Server::start(FILES, |root| {
        mkfifo(&root.join("pipe"));
        listener = Some(std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap());
        std::fs::write(root.join("plain.txt"), "plain text\n").unwrap();
    })
    .await;
    server.wait_for_tool(None, "read_file").await;
    for (tool, arguments) in [
        ("read_file", json!({ "path": "pipe" })),
        ("read_file", json!({ "path": "sock" })),
        ("read_file", json!({ "path": "pipe", "encoding": "base64" })),
        (
            "edit_file",
            json!({ "path": "pipe", "old_text": "a", "new_text": "b" }),
        ),
        ("search_files", json!({ "pattern": "x", "path": "pipe" })),
    ] {
        let result = bounded(&server, tool, arguments.clone()).await;
        let error = error_of(&result).unwrap_or_else(|| panic!("{tool} {arguments}: {result}"));
        assert!(
            error.contains("not a regular file") || error.contains("is not a directory"),
            "{tool} {arguments}: {error}"
        );
        assert_eq!(
            threads_opening_a_fifo(server.pid()),
            0,
            "{tool} {arguments}"
        );
    }
    // A search of the directory passes them by; its listing shows them.
    let found = bounded(&server, "search_files", json!({ "pattern": "plain" })).await;
    assert!(found.to_string().contains("plain.txt"), "{found}");
    let listed = bounded(&server, "list_dir", json!({ "path": "." })).await;
    assert!(listed.to_string().contains("pipe"), "{listed}");
    // Regular files are read as before.
    let read = bounded(&server, "read_file", json!({ "path": "plain.txt" })).await;
    assert!(read.to_string().contains("plain text"), "{read}");
    assert_eq!(threads_opening_a_fifo(server.pid()), 0);
}

#[tokio::test]
async fn a_name_swapped_to_a_fifo_mid_call_holds_no_thread() {
    let server = Server::start(FILES, |root| {
        std::fs::write(root.join("entry"), "regular content\n").unwrap();
        mkfifo(&root.join("spare"));
    })
    .await;
    server.wait_for_tool(None, "read_file").await;
    // `entry` and `spare` trade places (one atomic exchange each time), so
    // a check that saw a regular file may open a FIFO.
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let entry = CString::new(server.root.join("entry").as_os_str().as_bytes()).unwrap();
        let spare = CString::new(server.root.join("spare").as_os_str().as_bytes()).unwrap();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: two NUL-terminated paths.
                unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        entry.as_ptr(),
                        libc::AT_FDCWD,
                        spare.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    );
                }
            }
        })
    };
    let started = Instant::now();
    let (mut read, mut refused) = (0, 0);
    for round in 0..40 {
        let tool = if round % 2 == 0 {
            "read_file"
        } else {
            "search_files"
        };
        let arguments = if tool == "read_file" {
            json!({ "path": "entry" })
        } else {
            json!({ "pattern": "regular" })
        };
        let result = bounded(&server, tool, arguments).await;
        match error_of(&result) {
            None => read += 1,
            Some(error) => {
                assert!(
                    error.contains("not a regular file") || error.contains("no such file"),
                    "{error}"
                );
                refused += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        read > 0,
        "no call read the regular file ({refused} refused)"
    );
    assert!(refused > 0, "no call met the FIFO ({read} read)");
    assert_eq!(threads_opening_a_fifo(server.pid()), 0);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

/// A file under another process's write lease (a command can take one on
/// its own files) is not waited for: an open would wait until the lease
/// gives way (lease-break-time, 45 s by default) and hold a thread of the
/// server meanwhile. Calls on it answer at once, and other files are read.
#[tokio::test]
async fn a_leased_file_holds_no_call_nor_thread() {
    use std::io::BufRead as _;
    let server = Server::start(FILES, |root| {
        std::fs::write(root.join("leased.txt"), "leased\n").unwrap();
        std::fs::write(root.join("plain.txt"), "plain text\n").unwrap();
    })
    .await;
    server.wait_for_tool(None, "read_file").await;
    let leased = server.root.join("leased.txt");
    let script = "import fcntl, os, signal, sys, time\n\
                  signal.signal(signal.SIGIO, signal.SIG_IGN)\n\
                  fd = os.open(sys.argv[1], os.O_RDONLY)\n\
                  fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)\n\
                  print('held', flush=True)\n\
                  time.sleep(60)\n";
    let mut holder = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&leased)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "held\n");
    let started = Instant::now();
    let calls: Vec<_> = (0..4)
        .map(|_| bounded(&server, "read_file", json!({ "path": "leased.txt" })))
        .collect();
    for answered in futures::future::join_all(calls).await {
        assert!(error_of(&answered).is_some(), "{answered}");
    }
    let read = bounded(&server, "read_file", json!({ "path": "plain.txt" })).await;
    assert!(read.to_string().contains("plain text"), "{read}");
    assert!(started.elapsed() < BOUND, "{:?}", started.elapsed());
    holder.kill().unwrap();
    holder.wait().unwrap();
}
