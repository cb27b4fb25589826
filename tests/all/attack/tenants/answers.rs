//! Tenant `a`'s `/v1/tool_calls` answers are held within
//! `tenant_caps.answers_held`, one batch's and those it has not read yet
//! together: calls past it fail naming the cap, tenant `b` is served
//! meanwhile, and the server's memory stays bounded.

use std::io::Write as _;
use std::net::TcpStream;
use std::os::fd::FromRawFd as _;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::served::{Served, resident};
use super::{A, B, start};

/// An echo call answering about 1 MB (under `limits.max_output`).
pub(super) fn big_echo(index: usize) -> Value {
    let arguments = json!({ "text": "A".repeat(4000), "repeat": 250 });
    json!({
        "id": format!("call_{index}"),
        "type": "function",
        "function": { "name": "echo", "arguments": arguments.to_string() },
    })
}

pub(super) fn big_batch(calls: usize) -> Value {
    json!({ "tool_calls": (0..calls).map(big_echo).collect::<Vec<_>>() })
}

/// The results of a batch that failed naming `tenant_caps.answers_held`,
/// and those that did not fail.
fn split(body: &Value) -> (usize, usize) {
    let results = body["tool_results"].as_array().unwrap();
    let refused = results
        .iter()
        .filter(|r| {
            let content = r["content"].as_str().unwrap_or_default();
            content.starts_with("{\"error\"") && content.contains("tenant_caps.answers_held")
        })
        .count();
    (refused, results.len() - refused)
}

pub(super) async fn b_is_served(served: &Served) {
    let started = Instant::now();
    let answer = served.call(B, None, "echo", json!({ "text": "b" })).await;
    assert_eq!(answer["text"], "b", "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn one_batchs_answer_stops_at_the_cap() {
    let served = start("answers_held = \"4MiB\"");
    b_is_served(&served).await;
    let (status, body) = served.post("/v1/tool_calls", A, &big_batch(16)).await;
    assert!(status.is_success(), "{status}");
    let (refused, answered) = split(&body);
    assert!((1..=4).contains(&answered), "{answered} answered");
    assert_eq!(refused + answered, 16);
    let size = body.to_string().len();
    assert!(size < 5 << 20, "the answer holds {size} bytes");
    b_is_served(&served).await;
}

/// Posts `body` to `/v1/tool_calls` as `token` on a connection whose
/// receive buffer is tiny, and never reads the answer.
pub(super) fn post_unread(base: &str, token: &str, body: &Value) -> TcpStream {
    post_raw(base, "/v1/tool_calls", token, &[], &body.to_string())
}

/// Posts JSON `body` to `path` as `token` with `headers` on a connection
/// whose receive buffer is tiny; the answer is left to the caller to read.
pub(super) fn post_raw(
    base: &str,
    path: &str,
    token: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> TcpStream {
    request_raw("POST", base, path, token, headers, body)
}

/// [`post_raw`] with `method`.
pub(super) fn request_raw(
    method: &str,
    base: &str,
    path: &str,
    token: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> TcpStream {
    let addr: std::net::SocketAddrV4 = base.trim_start_matches("http://").parse().unwrap();
    // SAFETY: a new socket, its option set and connected with plain values.
    let stream = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let size: libc::c_int = 4096;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&raw const size).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        );
        let to = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: addr.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*addr.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        let connected = libc::connect(
            fd,
            (&raw const to).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(connected, 0);
        TcpStream::from_raw_fd(fd)
    };
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\n{extra}content-length: {}\r\n\r\n",
        body.len()
    );
    let mut writer = &stream;
    writer.write_all(head.as_bytes()).unwrap();
    writer.write_all(body.as_bytes()).unwrap();
    stream
}

#[tokio::test]
async fn answers_nobody_reads_hold_the_cap_and_no_more() {
    let served = start("answers_held = \"8MiB\"");
    b_is_served(&served).await;
    let before = resident(served.pid());
    // Four batches asking 24 MB each, never read.
    let unread: Vec<TcpStream> = (0..4)
        .map(|_| post_unread(&served.base, A, &big_batch(24)))
        .collect();
    // Once the unread answers hold what the connections do not take, a
    // batch that alone fits the cap (8 MB) no longer does: calls of it are
    // refused for the answers not yet sent. (A loaded machine builds the
    // batches slowly.)
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (_, body) = served.post("/v1/tool_calls", A, &big_batch(8)).await;
        if body.to_string().contains("answers not yet sent") {
            break;
        }
        assert!(Instant::now() < deadline, "a's answers were never capped");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    b_is_served(&served).await;
    let grown = resident(served.pid()).saturating_sub(before);
    assert!(grown < 200 << 20, "the server grew by {} MiB", grown >> 20);
    drop(unread);
}
