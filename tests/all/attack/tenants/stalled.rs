//! Requests a tenant never finishes: a body that never comes, on any route
//! (`/v1/sessions`, `/v1/approvals/{id}`, `/v1/tool_calls`, `/mcp`), ends
//! after `--body-timeout`; and one tenant's requests in flight hold at most
//! its share of `--max-connections`, so another tenant is served meanwhile.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::served::{Served, Setup};
use super::{A, B, config};

/// A connection on which tenant `a` sent the head of a POST to `path` and
/// none of its body; what the server answered (empty if it closed the
/// connection without a word), read in a task that ends with the
/// connection.
fn stalled(served: &Served, path: &str) -> tokio::task::JoinHandle<(String, Duration)> {
    let addr = served.base.trim_start_matches("http://").to_string();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {A}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: 100\r\n\r\n"
    );
    tokio::spawn(async move {
        let started = Instant::now();
        let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
        socket.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = socket.read_to_end(&mut answer).await;
        (
            String::from_utf8_lossy(&answer).into_owned(),
            started.elapsed(),
        )
    })
}

#[tokio::test]
async fn bodies_that_never_come_end_and_hold_no_more_than_their_tenants_share() {
    crate::use_launcher();
    let served = Served::launch(Setup {
        config: &config("", ""),
        dirs: &["a", "b"],
        args: &["--max-connections", "12", "--body-timeout", "2s"],
        ..Setup::default()
    });
    let paths = ["/v1/sessions", "/v1/approvals/x", "/v1/tool_calls", "/mcp"];
    let open: Vec<_> = (0..12).map(|n| stalled(&served, paths[n % 4])).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Tenant b is served while they are open.
    let started = Instant::now();
    let call = json!({"tool_calls": [{"id": "b", "type": "function", "function": {
        "name": "run_command", "arguments": "{\"command\":\"echo hi\"}"}}]});
    let (status, body) = served.post("/v1/tool_calls", B, &call).await;
    assert!(status.is_success(), "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "tenant b waited {:?}",
        started.elapsed()
    );
    // Each stalled request is answered or closed, none later than the
    // body timeout and a margin.
    for (n, task) in open.into_iter().enumerate() {
        let (answer, took) = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap_or_else(|_| panic!("request {n} to {} was never ended", paths[n % 4]))
            .unwrap();
        assert!(
            took < Duration::from_secs(5),
            "{}: {took:?} {answer}",
            paths[n % 4]
        );
    }
}

#[tokio::test]
async fn refused_origins_and_hosts_write_a_line_a_second_whatever_their_size() {
    let mut served = super::start("");
    served.logged(Duration::from_millis(200));
    let huge = format!("http://{}.example", "a".repeat(60_000));
    let started = Instant::now();
    for n in 0..200 {
        let request = served.client.get(format!("{}/v1/health", served.base));
        let request = if n % 2 == 0 {
            request.header("origin", &huge)
        } else {
            request.header("host", &huge[7..])
        };
        let status = request.send().await.unwrap().status();
        assert!(status.is_client_error(), "{status}");
    }
    let seconds = started.elapsed().as_secs() + 2;
    let logged = served.logged(Duration::from_millis(500));
    // Before, each refusal logged the whole header: 12 MB here.
    assert!(
        logged < 1024 * seconds as usize,
        "{logged} bytes of log in {seconds} s"
    );
}
