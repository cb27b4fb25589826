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
//! server's part of it). Without `--bench` (as
//! `cargo test --benches` runs it) it does one short run of each case as a
//! smoke test.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::SocketAddr;
use std::os::fd::AsFd as _;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use toolhost::serve::mcp::poll_readable;

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

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// User plus system CPU time of process `pid` so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_nanos(ticks * 1_000_000_000 / per_second)
}

/// How busy and how fast the machine is now: the 1-minute load average,
/// the time of a fixed single-threaded loop, and the median round trip of a
/// byte between two threads over two pipes (the floor of a stdio round
/// trip). On this shared virtual machine both vary by 2x or more from one
/// minute to the next.
fn machine() -> String {
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(String::from))
        .unwrap_or_default();
    let started = Instant::now();
    let mut x = 1u64;
    for _ in 0..50_000_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x);
    let gauge = started.elapsed();
    format!(
        "load average {load}, speed gauge {:.0} ms, pipe round trip {}",
        gauge.as_secs_f64() * 1000.0,
        us(pipe_round_trip())
    )
}

/// Median time for one byte to go to another thread and back over pipes.
fn pipe_round_trip() -> Duration {
    use std::io::Read as _;
    let (mut there_rx, mut there_tx) = std::io::pipe().unwrap();
    let (mut back_rx, mut back_tx) = std::io::pipe().unwrap();
    let echo = std::thread::spawn(move || {
        let mut byte = [0u8];
        while there_rx.read_exact(&mut byte).is_ok() {
            back_tx.write_all(&byte).unwrap();
        }
    });
    let mut samples = Vec::with_capacity(20_000);
    let mut byte = [0u8];
    for _ in 0..20_000 {
        let started = Instant::now();
        there_tx.write_all(&byte).unwrap();
        back_rx.read_exact(&mut byte).unwrap();
        samples.push(started.elapsed());
    }
    drop(there_tx);
    echo.join().unwrap();
    samples.sort();
    percentile(&samples, 0.5)
}

/// A running `toolhost serve`, in a directory of its own (built-in config,
/// an empty `plugins/`, so the bundled plugins), and its stderr lines.
struct Serving {
    child: Child,
    stderr: mpsc::Receiver<String>,
    _dir: tempfile::TempDir,
}

impl Serving {
    fn start(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("plugins")).unwrap();
        let (child, stderr) = toolhost_tests::spawn_piped(
            Command::new(toolhost())
                .arg("serve")
                .args(args)
                .current_dir(dir.path()),
        );
        Self {
            child,
            stderr,
            _dir: dir,
        }
    }

    /// Waits for a stderr line containing `needle`.
    fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        panic!("no {needle:?} on stderr; got:\n{}", seen.join("\n"));
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------- HTTP ---

/// A `POST /v1/tool_calls` body with `calls` echo calls.
fn batch(calls: usize) -> Bytes {
    let tool_calls: Vec<Value> = (0..calls)
        .map(|i| {
            json!({
                "id": format!("call_{i}"),
                "type": "function",
                "function": {"name": "echo", "arguments": "{\"text\":\"hi\"}"},
            })
        })
        .collect();
    Bytes::from(json!({ "tool_calls": tool_calls }).to_string())
}

struct Client {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

impl Client {
    async fn connect(addr: SocketAddr) -> Self {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Self {
            sender,
            host: addr.to_string(),
        }
    }

    async fn post(&mut self, body: &Bytes) -> (hyper::StatusCode, Bytes) {
        self.sender
            .ready()
            .await
            .expect("the connection stays open");
        let request = hyper::Request::post("/v1/tool_calls")
            .header(HOST, &self.host)
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(body.clone()))
            .unwrap();
        let response = self.sender.send_request(request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, body)
    }
}

/// What one timed run measured.
struct Run {
    calls_per_second: f64,
    /// Server and load-generator CPU time per tool call.
    server_cpu: Duration,
    client_cpu: Duration,
    /// Request latencies, sorted.
    latencies: Vec<Duration>,
}

/// One timed run: every client sends requests back to back until `length`
/// has passed.
async fn http_run(
    clients: &mut Vec<Client>,
    server: u32,
    body: &Bytes,
    calls_per_request: usize,
    expected: &Bytes,
    length: Duration,
) -> Run {
    let cpu_before = (cpu_time(server), cpu_time(std::process::id()));
    let started = Instant::now();
    let until = started + length;
    let tasks: Vec<_> = clients
        .drain(..)
        .map(|mut client| {
            let body = body.clone();
            let expected = expected.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(100_000);
                loop {
                    let sent = Instant::now();
                    if sent >= until {
                        break;
                    }
                    let (status, response) = client.post(&body).await;
                    latencies.push(sent.elapsed());
                    assert!(
                        status.is_success() && response == expected,
                        "{status}: {}",
                        String::from_utf8_lossy(&response)
                    );
                }
                (client, latencies)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        let (client, mine) = task.await.unwrap();
        clients.push(client);
        latencies.extend(mine);
    }
    let elapsed = started.elapsed();
    let calls = (latencies.len() * calls_per_request) as u32;
    latencies.sort();
    Run {
        calls_per_second: f64::from(calls) / elapsed.as_secs_f64(),
        server_cpu: (cpu_time(server) - cpu_before.0) / calls,
        client_cpu: (cpu_time(std::process::id()) - cpu_before.1) / calls,
        latencies,
    }
}

async fn http_case(
    addr: SocketAddr,
    server: u32,
    settings: &Settings,
    calls: usize,
    connections: usize,
) {
    let body = batch(calls);
    let mut clients = Vec::new();
    for _ in 0..connections {
        clients.push(Client::connect(addr).await);
    }
    // The expected answer, checked once in full.
    let (status, expected) = clients[0].post(&body).await;
    assert!(status.is_success(), "{status}");
    let answer: Value = serde_json::from_slice(&expected).unwrap();
    let results = answer["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), calls);
    assert!(
        results.iter().all(|r| r["content"] == r#"{"text":"hi"}"#),
        "{answer}"
    );
    // Warm up the connections and the server's instance pool.
    let warm_up = settings.http_run / 4;
    http_run(&mut clients, server, &body, calls, &expected, warm_up).await;
    let runs: Vec<Run> = {
        let mut runs = Vec::new();
        for _ in 0..settings.runs {
            let run = http_run(
                &mut clients,
                server,
                &body,
                calls,
                &expected,
                settings.http_run,
            );
            runs.push(run.await);
        }
        runs
    };
    let each = |f: &dyn Fn(&Run) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
    let rate = each(&|r| r.calls_per_second);
    let rates: Vec<String> = runs
        .iter()
        .map(|r| format!("{:.0}", r.calls_per_second))
        .collect();
    let seconds =
        |f: &dyn Fn(&Run) -> Duration| us(Duration::from_secs_f64(each(&|r| f(r).as_secs_f64())));
    println!(
        "  http/{calls}x{connections}: {calls} call(s)/request, {connections} connections: \
         median {rate:.0} calls/s ({:.0} requests/s); request p50 {}, p99 {}; CPU per call: \
         server {}, load generator {}   [calls/s of each run: {}]",
        rate / calls as f64,
        seconds(&|r| percentile(&r.latencies, 0.5)),
        seconds(&|r| percentile(&r.latencies, 0.99)),
        seconds(&|r| r.server_cpu),
        seconds(&|r| r.client_cpu),
        rates.join(" ")
    );
}

async fn http(settings: &Settings, wanted: &dyn Fn(&str) -> bool) {
    let server = Serving::start(&["--http", "127.0.0.1:0"]);
    let line = server.wait_for("serving on http://");
    let start = line.find("http://").unwrap() + "http://".len();
    let addr: SocketAddr = line[start..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    println!(
        "HTTP API, POST /v1/tool_calls of echo (toolhost serve --http, pid {}; {} s per run, \
         median of {} runs; {}):",
        server.pid(),
        settings.http_run.as_secs_f64(),
        settings.runs,
        machine()
    );
    for (calls, connections) in [(1, 1), (1, 8), (1, 32), (10, 8), (100, 1), (100, 4)] {
        if wanted(&format!("http/{calls}x{connections}")) {
            http_case(addr, server.pid(), settings, calls, connections).await;
        }
    }
}

// --------------------------------------------------------------- stdio ---

/// JSON-RPC lines to and from `toolhost serve` over its stdin and stdout.
struct McpStdio {
    server: Serving,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
    /// Wait for answers by polling stdout instead of sleeping in `read`.
    spin: bool,
}

impl McpStdio {
    fn start() -> Self {
        let mut server = Serving::start(&[]);
        server.wait_for("serving MCP on stdio");
        let input = server.child.stdin.take().unwrap();
        let output = BufReader::new(server.child.stdout.take().unwrap());
        let mut stdio = Self {
            server,
            input,
            output,
            line: String::new(),
            next_id: 0,
            spin: std::env::var_os("SERVE_BENCH_CLIENT_SPIN").is_some(),
        };
        let info = stdio.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "serve-bench", "version": "0"},
            }),
        );
        assert!(info["result"]["serverInfo"]["name"] == "toolhost", "{info}");
        stdio.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
        stdio
    }

    fn send(&mut self, line: &str) {
        // One write of the whole line (stdin is not buffered here).
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.input.write_all(&bytes).unwrap();
    }

    /// Reads lines until the response to `id` (skipping notifications).
    fn response(&mut self, id: u64) -> &str {
        // `"id":N` followed by `,` or `}`.
        let key = format!("\"id\":{id}");
        loop {
            self.line.clear();
            if self.spin && self.output.buffer().is_empty() {
                poll_readable(self.output.get_ref().as_fd(), Duration::MAX);
            }
            let read = self.output.read_line(&mut self.line).unwrap();
            assert!(read > 0, "the server closed stdout");
            if let Some(at) = self.line.find(&key)
                && matches!(self.line.as_bytes().get(at + key.len()), Some(b',' | b'}'))
            {
                return &self.line;
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        serde_json::from_str(self.response(id)).unwrap()
    }

    /// `count` sequential requests made by `line(id)`; the round trip of
    /// each, sorted.
    fn round_trips(&mut self, count: usize, line: impl Fn(u64) -> String) -> Vec<Duration> {
        let mut samples = Vec::with_capacity(count);
        for _ in 0..count {
            self.next_id += 1;
            let id = self.next_id;
            let request = line(id);
            let started = Instant::now();
            self.send(&request);
            let response = self.response(id);
            samples.push(started.elapsed());
            assert!(response.contains("\"result\""), "{response}");
        }
        samples.sort();
        samples
    }
}

/// A JSON-RPC request line with this id.
type RequestLine = fn(u64) -> String;

fn call_line(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hi"}}}}}}"#
    )
}

fn ping_line(id: u64) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)
}

fn stdio(settings: &Settings, wanted: &dyn Fn(&str) -> bool) {
    let mut stdio = McpStdio::start();
    let first = stdio.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    assert_eq!(
        first["result"]["content"][0]["text"], r#"{"text":"hi"}"#,
        "{first}"
    );
    assert_eq!(first["result"]["isError"], false, "{first}");
    let pid = stdio.server.pid();
    println!(
        "MCP over stdio (toolhost serve, pid {pid}; {} sequential requests per run, median of {} \
         runs; {}):",
        settings.stdio_calls,
        settings.runs,
        machine()
    );
    let cases: [(&str, RequestLine); 2] = [("tools/call", call_line), ("ping", ping_line)];
    for (name, line) in cases {
        if !wanted(&format!("stdio/{name}")) {
            continue;
        }
        stdio.round_trips(settings.stdio_calls / 4, line);
        let mut p = [Vec::new(), Vec::new(), Vec::new()];
        let mut cpu = Vec::new();
        for _ in 0..settings.runs {
            let before = cpu_time(pid);
            let samples = stdio.round_trips(settings.stdio_calls, line);
            cpu.push((cpu_time(pid) - before).as_secs_f64() / settings.stdio_calls as f64);
            for (i, q) in [0.5, 0.9, 0.99].into_iter().enumerate() {
                p[i].push(percentile(&samples, q).as_secs_f64());
            }
        }
        let runs: Vec<String> = p[0].iter().map(|s| format!("{:.1}", s * 1e6)).collect();
        let [p50, p90, p99] = p.map(|mut v| us(Duration::from_secs_f64(median(&mut v))));
        println!(
            "  stdio/{name}: round trip p50 {p50}, p90 {p90}, p99 {p99}; server CPU per request \
             {}   [p50 of each run, µs: {}]",
            us(Duration::from_secs_f64(median(&mut cpu))),
            runs.join(" ")
        );
    }
}

/// Keeps every CPU busy at the lowest priority (`SCHED_IDLE`), so that no
/// virtual CPU halts and every wake-up of a server or client thread is
/// quick, as on a busy or bare-metal server; yields to any other work.
fn spin_when_idle() -> ! {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: changes this process's own scheduling policy.
    let set = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    assert_eq!(set, 0, "cannot set SCHED_IDLE");
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    for _ in 1..cpus {
        std::thread::spawn(|| {
            loop {
                std::hint::spin_loop();
            }
        });
    }
    loop {
        std::hint::spin_loop();
    }
}

/// The idle spinners while the bench runs (`SERVE_BENCH_AWAKE=1`).
struct Spinners(Child);

impl Spinners {
    fn start() -> Option<Self> {
        std::env::var("SERVE_BENCH_AWAKE")
            .ok()
            .filter(|v| !v.is_empty() && v != "0")?;
        let child = Command::new(std::env::current_exe().unwrap())
            .arg("--spin-when-idle")
            .spawn()
            .unwrap();
        println!("(idle CPUs kept busy at SCHED_IDLE priority: SERVE_BENCH_AWAKE is set)");
        std::thread::sleep(Duration::from_millis(200));
        Some(Self(child))
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        return;
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
