//! Serving-layer figures, against the real `toolhost serve` process (the
//! package's `toolhost-cli` binary, built with the bench profile and started
//! with the built-in configuration in an empty directory, as a user would):
//!
//! - HTTP API throughput: `POST /v1/tool_calls` of the bundled `echo` tool
//!   over N keep-alive HTTP/1.1 connections (a hyper client on one thread),
//!   one call per request and batches; tool calls per second, median over
//!   several timed runs, and request latency.
//! - MCP over stdio: raw JSON-RPC lines on the process's stdin and stdout
//!   (`initialize`, `notifications/initialized`, then sequential requests);
//!   round-trip p50/p90/p99 of `tools/call` echo, and of `ping` (the
//!   transport alone) for comparison.
//!
//! Run: `cargo bench -p toolhost-tests --bench serve` (all), or with filters:
//! `-- http`, `-- stdio`, or one case (`-- http/1x8`: one call per request
//! over 8 connections; `-- stdio/ping`). `SERVE_BENCH_RUNS` (default 5) and
//! `SERVE_BENCH_SECONDS` (per HTTP run, default 3) change the sample;
//! `SERVE_BENCH_TOOLHOST=path/to/toolhost` measures another build;
//! `SERVE_BENCH_AWAKE=1` keeps idle CPUs spinning at the lowest priority
//! (on this virtual machine an idle CPU takes tens of microseconds to wake,
//! which then dominates every round trip); `SERVE_BENCH_CLIENT_SPIN=1`
//! makes the stdio client poll for each answer instead of sleeping in
//! `read`, so the round trip no longer includes waking the client (the
//! server's part of it). `SERVE_BENCH_PEER` measures another MCP server
//! on stdio in toolhost's place with the same client: a command line
//! (`wassette serve --stdio --plugin-dir DIR`, serving a tool `echo`), or
//! `floor` for the bench's own server that answers each line at once (the
//! floor of a round trip). Without `--bench` (as
//! `cargo test --benches` runs it) it does one short run of each case as a
//! smoke test.

mod awake;
mod http;
mod stdio;
mod support;

use std::path::Path;
use std::time::Duration;

use self::awake::{Spinners, spin_when_idle};
use self::http::http;
use self::stdio::stdio;

/// The `toolhost` command line (`toolhost::cli::main`), built for this
/// bench; `SERVE_BENCH_TOOLHOST` names another build to measure instead.
fn toolhost() -> std::ffi::OsString {
    std::env::var_os("SERVE_BENCH_TOOLHOST")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_toolhost-cli").into())
}

struct Settings {
    runs: usize,
    http_run: Duration,
    stdio_calls: usize,
}

impl Settings {
    fn from_env(full: bool) -> Self {
        let number = |name: &str, default: f64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(default)
        };
        if full {
            Self {
                runs: number("SERVE_BENCH_RUNS", 5.0) as usize,
                http_run: Duration::from_secs_f64(number("SERVE_BENCH_SECONDS", 3.0)),
                stdio_calls: 20_000,
            }
        } else {
            Self {
                runs: 1,
                http_run: Duration::from_millis(200),
                stdio_calls: 200,
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    if args.iter().any(|a| a == "--floor-server") {
        return support::floor_server();
    }
    if args.iter().any(|a| a == "--spin-when-idle") {
        spin_when_idle();
    }
    let _spinners = Spinners::start();
    let full = args.iter().any(|a| a == "--bench");
    let filters: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    // A case runs when its name (`stdio/ping`, `http/1x8`: calls per request
    // x connections) contains a filter, or its part's name is in one.
    let wanted = |name: &str| {
        filters.is_empty()
            || filters
                .iter()
                .any(|f| name.contains(f) || f.starts_with(name))
    };
    let settings = Settings::from_env(full);
    let program = toolhost();
    assert!(Path::new(&program).exists(), "{program:?} is not built");
    if wanted("stdio/") {
        stdio(&settings, &wanted);
    }
    if wanted("http/") {
        // The load generator: one thread, so that the server (two worker
        // threads on this two-core machine) gets the rest.
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(http(&settings, &wanted));
    }
}
