//! Drives MCP `tools/call` of the bundled `echo` through the real stdio path
//! (`serve_stdio` with pipes as stdin and stdout, as a client starts the
//! server), for `.ci/speed-guard`, which counts its instructions.
//!
//! Usage: `call-path CALLS CACHE_DIR`: a few calls first, then CALLS calls
//! between callgrind's zeroing of its counters and a dump of them (no-ops
//! outside valgrind): the dump counts only those calls.

use std::io::{BufRead as _, BufReader, PipeReader, PipeWriter, Write as _};
use std::os::fd::AsRawFd as _;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

const USAGE: &str = "usage: call-path CALLS CACHE_DIR";

fn main() {
    let mut args = std::env::args().skip(1);
    let calls: u64 = args
        .next()
        .and_then(|calls| calls.parse().ok())
        .expect(USAGE);
    let cache = args.next().expect(USAGE);
    let (server_in, client_out) = std::io::pipe().expect("a pipe");
    let (client_in, server_out) = std::io::pipe().expect("a pipe");
    // SAFETY: dup2 of descriptors this function owns onto stdin and stdout;
    // nothing else uses them yet.
    unsafe {
        assert_eq!(libc::dup2(server_in.as_raw_fd(), 0), 0);
        assert_eq!(libc::dup2(server_out.as_raw_fd(), 1), 1);
    }
    drop((server_in, server_out));
    let client = std::thread::spawn(move || client(calls, client_out, client_in));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let host = toolhost::Host::builder()
            .bundled(true)
            .cache_dir(Some(cache.into()))
            .build()
            .await
            .expect("the host starts");
        // The first call compiles echo; the counted ones run its optimised
        // code, compiled in the background (or read from the cache).
        host.call("echo", r#"{"text":"hi"}"#).await.expect("echo");
        let echo = host.plugins().into_iter().find(|p| &**p.name() == "echo");
        while echo.as_ref().is_some_and(|echo| echo.runs_first_tier()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let stop = CancellationToken::new();
        toolhost::serve::mcp::serve_stdio(host, stop, Duration::from_secs(1))
            .await
            .expect("serving on stdio");
    });
    client.join().expect("the client thread");
}

/// Initializes the session, makes `calls` calls one after the other, then
/// closes the server's stdin, which ends the session.
fn client(calls: u64, mut out: PipeWriter, input: PipeReader) {
    let mut input = BufReader::new(input);
    let mut line = String::new();
    writeln!(
        out,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"call-path","version":"0"}}}}}}"#
    )
    .expect("writing");
    assert!(
        input.read_line(&mut line).expect("reading") > 0,
        "no answer to initialize"
    );
    writeln!(
        out,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .expect("writing");
    // Calls go in batches written at once: the server then never waits for
    // the client between them, which would make the count depend on timing.
    let mut batch = |ids: std::ops::Range<u64>| {
        let mut requests = String::new();
        for id in ids.clone() {
            requests += &format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hi"}}}}}}"#
            );
            requests.push('\n');
        }
        out.write_all(requests.as_bytes()).expect("writing");
        let mut answered = 0;
        while answered < ids.end - ids.start {
            line.clear();
            assert!(
                input.read_line(&mut line).expect("reading") > 0,
                "answers missing"
            );
            if line.contains(r#""result""#) {
                assert!(line.contains(r#"\"text\":\"hi\""#), "a call failed: {line}");
                answered += 1;
            }
        }
    };
    batch(1..1 + WARM_UP);
    callgrind(ZERO_STATS);
    let first = 1 + WARM_UP;
    for start in (first..first + calls).step_by(BATCH as usize) {
        batch(start..(start + BATCH).min(first + calls));
    }
    callgrind(DUMP_STATS);
}

/// Calls written at once (the server answers up to 128 at a time).
const BATCH: u64 = 50;

/// Calls before counting starts (the first compiles or reads the plugin).
const WARM_UP: u64 = 20;

/// Callgrind's client requests (`valgrind/callgrind.h`).
const DUMP_STATS: u64 = 0x4354_0000;
const ZERO_STATS: u64 = 0x4354_0001;

/// A valgrind client request (`valgrind.h`'s special instruction sequence:
/// rotations of rdi by 128 bits in all and `xchg rbx, rbx`, which change
/// nothing when not run under valgrind).
fn callgrind(request: u64) {
    let args = [request, 0, 0, 0, 0, 0];
    // SAFETY: the sequence leaves every register as it was (outside
    // valgrind); valgrind reads `args` through rax and answers in rdx.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!(
            "rol rdi, 3", "rol rdi, 13", "rol rdi, 61", "rol rdi, 51", "xchg rbx, rbx",
            in("rax") args.as_ptr(),
            inout("rdx") 0u64 => _,
            inout("rdi") 0u64 => _,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = args;
}
