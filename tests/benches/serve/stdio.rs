//! MCP over stdio: round trips of sequential JSON-RPC requests.

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::fd::AsFd as _;
use std::process::{ChildStdin, ChildStdout};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost::serve::mcp::poll_readable;

use super::Settings;
use super::support::{Serving, cpu_time, machine, median, percentile, us};

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
        let peer = std::env::var("SERVE_BENCH_PEER").ok();
        let mut server = match &peer {
            Some(command) => Serving::start_peer(command),
            None => {
                let server = Serving::start(&[]);
                server.wait_for("serving MCP on stdio");
                server
            }
        };
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
        let name = info["result"]["serverInfo"]["name"].as_str();
        assert!(peer.is_some() || name == Some("toolhost"), "{info}");
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

pub(crate) fn stdio(settings: &Settings, wanted: &dyn Fn(&str) -> bool) {
    let mut stdio = McpStdio::start();
    let first = stdio.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    // Another server (`SERVE_BENCH_PEER`) may answer with the text alone.
    let text = first["result"]["content"][0]["text"].as_str();
    assert!(matches!(text, Some(r#"{"text":"hi"}"# | "hi")), "{first}");
    assert_ne!(first["result"]["isError"], true, "{first}");
    let pid = stdio.server.pid();
    println!(
        "MCP over stdio ({}, pid {pid}; {} sequential requests per run, median of {} runs; {}):",
        stdio.server.name(),
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
