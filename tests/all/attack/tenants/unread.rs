//! Answers a tenant reads in part or not at all, over `/v1` and `/mcp`: each
//! stays counted against `tenant_caps.answers_held` whole until its last
//! byte is sent, so the server holds no more than the cap of them, and the
//! kernel holds little of them in the server's socket buffers.

use std::io::Read as _;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::answers::{b_is_served, big_batch, post_raw, post_unread, request_raw};
use super::served::{Served, resident};
use super::{A, start};

/// Reads `stream` until `want` bytes came or its chunked answer ended.
fn read_up_to(stream: &mut TcpStream, want: usize) -> usize {
    let mut read = 0;
    let mut buffer = vec![0; 64 << 10];
    let mut tail = Vec::new();
    while read < want {
        let n = stream.read(&mut buffer).unwrap();
        if n == 0 {
            break;
        }
        read += n;
        tail.extend_from_slice(&buffer[..n]);
        let keep = tail.len().saturating_sub(5);
        tail.drain(..keep);
        if tail == b"0\r\n\r\n" {
            break;
        }
    }
    read
}

/// Polls a batch of tenant `a` until calls of it are refused for answers
/// not yet sent.
async fn until_refused_for_unsent(served: &Served, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, body) = served.post("/v1/tool_calls", A, &big_batch(8)).await;
        if body.to_string().contains("answers not yet sent") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: a's answers were never capped"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn an_answer_read_all_but_its_tail_stays_counted_whole() {
    let served = start("answers_held = \"16MiB\"");
    // The same calls once, read whole, first: what the server keeps of
    // running them (its guests' instances and memory) is then in `before`,
    // and what grows below is what it holds of the answers.
    served.post("/v1/tool_calls", A, &big_batch(15)).await;
    let before = resident(served.pid());
    // Ten ~15 MB answers, each read but its last ~6 MB, the connections
    // kept open: one fits the cap.
    let mut pinned = Vec::new();
    for _ in 0..10 {
        let mut stream = post_unread(&served.base, A, &big_batch(15));
        read_up_to(&mut stream, 9 << 20);
        pinned.push(stream);
    }
    until_refused_for_unsent(&served, "tails unread").await;
    b_is_served(&served).await;
    let grown = resident(served.pid()).saturating_sub(before);
    // Held whole they would be 150 MB.
    assert!(grown < 128 << 20, "the server grew by {} MiB", grown >> 20);
    drop(pinned);
}

/// What the server's sockets on `port` have not sent yet (their send
/// queues), in bytes.
fn unsent(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let queues = fields.get(4)?;
            fields[1].ends_with(&local).then_some(*queues)
        })
        .map(|queues| u64::from_str_radix(queues.split(':').next().unwrap(), 16).unwrap())
        .sum()
}

fn port(served: &Served) -> u16 {
    served.base.rsplit(':').next().unwrap().parse().unwrap()
}

/// Waits until `n` of the server's sockets hold answers not yet sent (so
/// that the answers unread are built before tenant `a` asks for more).
async fn until_parked(served: &Served, n: usize) {
    let local = format!(":{:04X}", port(served));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
        let parked = table
            .lines()
            .skip(1)
            .map(|line| line.split_whitespace().collect::<Vec<_>>())
            .filter(|f| f.len() > 4 && f[1].ends_with(&local) && !f[4].starts_with("00000000:"))
            .count();
        if parked >= n {
            return;
        }
        assert!(Instant::now() < deadline, "only {parked} answers parked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn unread_v1_answers_wait_counted_in_the_server_not_in_socket_buffers() {
    let served = start("answers_held = \"16MiB\"");
    b_is_served(&served).await;
    // Twelve ~2 MB answers nobody reads.
    let unread: Vec<TcpStream> = (0..12)
        .map(|_| post_unread(&served.base, A, &big_batch(2)))
        .collect();
    until_parked(&served, 8).await;
    until_refused_for_unsent(&served, "/v1").await;
    let parked = unsent(port(&served));
    assert!(
        parked < 12 * (512 << 10),
        "the kernel holds {parked} bytes of unread answers"
    );
    b_is_served(&served).await;
    drop(unread);
}

/// Posts `message` to `/mcp` in `session` with `reqwest`; the body's JSON.
pub(super) async fn mcp(
    served: &Served,
    session: Option<&str>,
    message: &Value,
) -> (Option<String>, Value) {
    let response = super::mcp_request(served, A, session, message)
        .send()
        .await
        .unwrap();
    let id = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    let text = response.text().await.unwrap();
    let json = text
        .lines()
        .find_map(|line| line.strip_prefix("data:"))
        .unwrap_or(&text);
    (id, serde_json::from_str(json.trim()).unwrap_or(Value::Null))
}

fn echo_call(id: usize) -> Value {
    let arguments = json!({ "text": "A".repeat(4000), "repeat": 250 });
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "echo", "arguments": arguments}})
}

/// A new MCP session of tenant `a`, initialized; its id.
pub(super) async fn mcp_session(served: &Served) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let (session, _) = mcp(served, None, &init).await;
    let session = session.expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    mcp(served, Some(&session), &initialized).await;
    session
}

#[tokio::test]
async fn unread_mcp_answers_count_against_the_tenants_cap() {
    let served = start("answers_held = \"8MiB\"");
    let session = mcp_session(&served).await;
    // Twelve ~1 MB results nobody reads, each on a connection of its own.
    let headers = [
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2025-06-18"),
        ("mcp-session-id", session.as_str()),
    ];
    let unread: Vec<TcpStream> = (1..=12)
        .map(|id| {
            let body = echo_call(id).to_string();
            post_raw(&served.base, "/mcp", A, &headers, &body)
        })
        .collect();
    until_parked(&served, 7).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, answer) = mcp(&served, Some(&session), &echo_call(100)).await;
        if answer.to_string().contains("tenant_caps.answers_held") {
            assert_eq!(answer["result"]["isError"], true, "{answer}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a's MCP answers were never capped: {}",
            &answer.to_string()[..200.min(answer.to_string().len())]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let parked = unsent(port(&served));
    assert!(
        parked < 12 * (512 << 10),
        "the kernel holds {parked} bytes of unread answers"
    );
    b_is_served(&served).await;
    drop(unread);
}

/// A 2026-07-28 `tools/call` of a ~1 MB result, with or without the
/// client saying it can answer questions: both count against
/// `answers_held` alike.
#[tokio::test]
async fn a_client_that_can_answer_questions_is_held_to_answers_held_too() {
    let served = start("answers_held = \"256KiB\"");
    for capabilities in [json!({}), json!({"elicitation": {"form": {}}})] {
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        let mut call = echo_call(1);
        call["params"]["_meta"] = meta;
        let response = served
            .client
            .post(format!("{}/mcp", served.base))
            .bearer_auth(A)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "echo")
            .json(&call)
            .send()
            .await
            .unwrap();
        let answer = response.text().await.unwrap();
        assert!(
            answer.contains("tenant_caps.answers_held") && answer.len() < 64 << 10,
            "{capabilities}: {}",
            &answer[..answer.len().min(300)]
        );
    }
}

/// A task's result read back with `GET /v1/tasks/{id}` is a copy: each
/// answer counts against `answers_held` until sent, so answers nobody reads
/// hold the cap and no more, and later polls are refused for it.
#[tokio::test]
async fn unread_task_polls_count_against_the_tenants_cap() {
    let served = start("answers_held = \"4MiB\"");
    let line = "head -c 700000 /dev/zero | tr '\\0' a";
    let batch = json!({"async": true, "tool_calls": [{"id": "c", "type": "function",
        "function": {"name": "run_command", "arguments": json!({"command": line}).to_string()}}]});
    let (_, started) = served.post("/v1/tool_calls", A, &batch).await;
    let id = started["tool_results"][0]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/v1/tasks/{id}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, task) = served.get(&path, A).await;
        if task["status"] == "completed" {
            break;
        }
        assert!(Instant::now() < deadline, "{task}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Each unread answer (~700 kB) stays counted but for what the kernel
    // takes of it (the server's capped send buffer and the client's receive
    // window). How much that is varies with the machine's load (16 answers
    // held 3.6 MB to well over 4 MiB), so unread requests are added, four at
    // a time, until a poll is refused: 64 would hold 45 MB.
    let mut unread: Vec<TcpStream> = Vec::new();
    'capped: loop {
        assert!(
            unread.len() < 64,
            "polls were never capped, with {} answers unread",
            unread.len()
        );
        unread.extend((0..4).map(|_| request_raw("GET", &served.base, &path, A, &[], "")));
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            let (status, body) = served.get(&path, A).await;
            if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
                assert!(body.to_string().contains("answers not yet sent"), "{body}");
                break 'capped;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    drop(unread);
    // Once they are gone, the result is read again.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, task) = served.get(&path, A).await;
        if status.is_success() {
            assert_eq!(task["status"], "completed", "{task}");
            break;
        }
        assert!(Instant::now() < deadline, "{status} {task}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
