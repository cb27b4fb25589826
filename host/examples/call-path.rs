//! Drives MCP `tools/call` of the bundled `echo` through the real stdio path
//! (`serve_stdio` with pipes as stdin and stdout, as a client starts the
//! server), for `.ci/speed-guard`, which counts its instructions.
//!
//! Usage: `call-path CALLS CACHE_DIR`

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
    let mut answer = |id: u64| {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(input.read_line(&mut line).expect("reading") > 0, "no answer to {id}");
            if line.contains(&format!("\"id\":{id},")) || line.contains(&format!("\"id\":{id}}}")) {
                return line;
            }
        }
    };
    writeln!(
        out,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"call-path","version":"0"}}}}}}"#
    )
    .expect("writing");
    answer(0);
    writeln!(out, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).expect("writing");
    for id in 1..=calls {
        writeln!(
            out,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hi"}}}}}}"#
        )
        .expect("writing");
        let line = answer(id);
        assert!(line.contains(r#"\"text\":\"hi\""#), "the call failed: {line}");
    }
}
