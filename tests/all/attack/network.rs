//! Attack tests: network (see mod.rs). A command reaches the network only
//! while the call's effective permissions allow `network:fetch`: a global
//! deny, a session's narrowing (made before or while its commands run) or
//! a profile sharing the host's network without the permission leaves the
//! profile's allowed host unreached.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::proxy::{client_hello, through_tunnel};
use super::server::{Server, error_of};
use crate::sandbox::network::http_server;

/// A profile whose commands reach `127.0.0.2:{port}` through the proxy.
fn config(global: &str, port: u16, network: &str) -> String {
    format!(
        r#"
default_profile = "p"
{global}
[profiles.p]
allow = ["terminal:*", "file:read", "network:fetch"]
file.read = ["."]
network.allow_hosts = ["127.0.0.2:{port}"]
{network}
"#
    )
}

/// `curl` of the allowed host through the command's proxy, printing the
/// status last.
fn curl(port: u16) -> String {
    format!("curl -sS -m 10 -w ' %{{http_code}}' http://127.0.0.2:{port}/hello")
}

fn stdout(result: &serde_json::Value) -> String {
    format!(
        "{}{}",
        result["stdout"].as_str().unwrap_or_default(),
        result["stderr"].as_str().unwrap_or_default()
    )
}

#[tokio::test]
async fn a_global_deny_keeps_commands_off_the_network() {
    let (port, reached) = http_server("127.0.0.2", "hello from the host");
    let server = Server::start(
        &config("[global]\ndeny = [\"network:*\"]", port, ""),
        |_| {},
    )
    .await;
    server.wait_for_tool(None, "run_command").await;
    let result = server.run(None, None, &curl(port)).await;
    let printed = stdout(&result);
    assert!(printed.ends_with(" 403"), "{result}");
    assert!(printed.contains("network:fetch"), "{result}");
    assert_eq!(reached.load(Ordering::SeqCst), 0, "the host was reached");
}

#[tokio::test]
async fn a_session_narrowed_away_from_the_network_reaches_nothing() {
    let (port, reached) = http_server("127.0.0.2", "hello from the host");
    let server = Server::start(&config("", port, ""), |_| {}).await;
    server.wait_for_tool(None, "run_command").await;
    // Before narrowing, the session's commands reach the host.
    let before = server.run(None, Some("s1"), &curl(port)).await;
    assert!(stdout(&before).contains("hello from the host"), "{before}");
    assert_eq!(reached.load(Ordering::SeqCst), 1);
    let (status, body) = server
        .post(
            "/v1/sessions",
            None,
            None,
            &json!({ "session": "s1", "deny": ["network:*"] }),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let after = server.run(None, Some("s1"), &curl(port)).await;
    let printed = stdout(&after);
    assert!(
        printed.ends_with(" 403") && printed.contains("network:fetch"),
        "{after}"
    );
    assert_eq!(reached.load(Ordering::SeqCst), 1, "the host was reached");
}

/// A server that streams a line every 50 ms to each client until the
/// connection breaks; whether a client is connected now, and how many
/// connected in all.
fn streaming_server() -> (u16, Arc<AtomicBool>, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let open = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicUsize::new(0));
    let (flag, counter) = (open.clone(), count.clone());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            counter.fetch_add(1, Ordering::SeqCst);
            let flag = flag.clone();
            std::thread::spawn(move || {
                let mut head = [0u8; 1024];
                let _ = stream.read(&mut head);
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n");
                flag.store(true, Ordering::SeqCst);
                while stream.write_all(b"tick\n").is_ok() {
                    std::thread::sleep(Duration::from_millis(50));
                }
                flag.store(false, Ordering::SeqCst);
            });
        }
    });
    (port, open, count)
}

async fn until(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !condition() {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn narrowing_a_session_cuts_its_open_tunnels() {
    let (port, open, connections) = streaming_server();
    let dangerous = "terminal.dangerous = \"allow\"";
    let server = Server::start(&config("", port, dangerous), |_| {}).await;
    server.wait_for_tool(None, "process_start").await;
    // A tunnel (TLS to an address: no server name) the server streams into.
    let line = through_tunnel(&format!("127.0.0.2:{port}"), &client_hello(None))
        .replace("timeout 5 cat -v", "cat");
    let started = server
        .call(
            None,
            Some("s2"),
            "process_start",
            json!({ "command": line }),
        )
        .await;
    assert!(error_of(&started).is_none(), "{started}");
    until("the tunnel is open", || open.load(Ordering::SeqCst)).await;
    let (status, body) = server
        .post(
            "/v1/sessions",
            None,
            None,
            &json!({ "session": "s2", "deny": ["network:fetch"] }),
        )
        .await;
    assert!(status.is_success(), "{body}");
    until("the tunnel is cut", || !open.load(Ordering::SeqCst)).await;
    // And the next connection of the session is refused.
    let again = server.run(None, Some("s2"), &curl(port)).await;
    assert!(stdout(&again).ends_with(" 403"), "{again}");
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_hosts_network_needs_network_fetch() {
    let (port, reached) = http_server("127.0.0.2", "hello from the host");
    let text = config("", port, "terminal.network = \"host\"").replace(", \"network:fetch\"]", "]");
    let server = Server::start(&text, |_| {}).await;
    server.wait_for_tool(None, "run_command").await;
    let result = server
        .run(
            None,
            None,
            &format!("curl -sS -m 10 --noproxy '*' http://127.0.0.2:{port}/"),
        )
        .await;
    let error = error_of(&result).unwrap_or_else(|| panic!("ran: {result}"));
    assert!(
        error.contains("terminal.network = \"host\"") && error.contains("network:fetch"),
        "{error}"
    );
    assert_eq!(reached.load(Ordering::SeqCst), 0, "the host was reached");
}
