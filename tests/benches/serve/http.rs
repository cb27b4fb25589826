//! HTTP API throughput: `POST /v1/tool_calls` over keep-alive connections.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use super::Settings;
use super::support::{Serving, cpu_time, machine, median, percentile, us};

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

pub(crate) async fn http(settings: &Settings, wanted: &dyn Fn(&str) -> bool) {
    // Another server in toolhost's place (`SERVE_BENCH_PEER`, a command
    // line), which says where it listens as toolhost does.
    let server = match std::env::var("SERVE_BENCH_PEER") {
        Ok(command) => Serving::start_peer(&command),
        Err(_) => Serving::start(&["--http", "127.0.0.1:0"]),
    };
    let line = server.wait_for("serving on http://");
    let start = line.find("http://").unwrap() + "http://".len();
    let addr: SocketAddr = line[start..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    println!(
        "HTTP API, POST /v1/tool_calls of echo ({}, pid {}; {} s per run, median of {} runs; \
         {}):",
        server.name(),
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
