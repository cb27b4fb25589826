//! Attack tests: the terminal's proxy and `http_request` reach only what
//! they checked: never the host's own interface addresses unless named,
//! never another virtual host than the checked one, and never a second
//! request pipelined behind the first on a plain-HTTP connection.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use super::server::{Server, error_of};

/// A server answering each request with the `Host` header it received;
/// how many requests it read.
fn host_echo(addr: &str) -> (u16, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind(format!("{addr}:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let counter = count.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut chunk = [0u8; 4096];
                // Answer every request head that arrives, pipelined or not.
                loop {
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&seen[..end]).to_string();
                        seen.drain(..end + 4);
                        counter.fetch_add(1, Ordering::SeqCst);
                        let host = head
                            .lines()
                            .find_map(|l| l.strip_prefix("Host: ").or(l.strip_prefix("host: ")))
                            .unwrap_or("-")
                            .to_string();
                        let body = format!("vhost={host};");
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if stream.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    (port, count)
}

fn profile(hosts: &str) -> String {
    format!(
        r#"
default_profile = "p"
[profiles.p]
allow = ["terminal:*", "file:read", "network:fetch"]
file.read = ["."]
terminal.dangerous = "allow"
network.allow_hosts = [{hosts}]
"#
    )
}

fn printed(result: &serde_json::Value) -> String {
    format!(
        "{}{}",
        result["stdout"].as_str().unwrap_or_default(),
        result["stderr"].as_str().unwrap_or_default()
    )
}

/// A non-loopback IPv4 address of this machine's own interfaces.
fn own_address() -> Option<String> {
    let out = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find(|a| {
            a.parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| !ip.is_loopback())
        })
        .map(String::from)
}

#[tokio::test]
async fn the_hosts_own_address_is_refused_unless_named() {
    let Some(own) = own_address() else {
        eprintln!("skipped: this machine has no non-loopback IPv4 address");
        return;
    };
    let (port, reached) = host_echo("0.0.0.0");
    let server = Server::start(&profile("\"*\""), |_| {}).await;
    server.wait_for_tool(None, "run_command").await;
    for target in [format!("{own}:{port}"), format!("[::ffff:{own}]:{port}")] {
        let line = format!("curl -sS -m 10 -w ' %{{http_code}}' http://{target}/");
        let result = server.run(None, None, &line).await;
        assert!(printed(&result).ends_with(" 403"), "{target}: {result}");
        let fetched = server
            .call(
                None,
                None,
                "http_request",
                json!({ "url": format!("http://{target}/") }),
            )
            .await;
        let error = error_of(&fetched).unwrap_or_else(|| panic!("{target}: {fetched}"));
        assert!(error.contains("network.allow_hosts"), "{error}");
    }
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "the host itself was reached"
    );
    drop(server);
    // Named explicitly, it is reached.
    let named = Server::start(&profile(&format!("\"*\", \"{own}:{port}\"")), |_| {}).await;
    named.wait_for_tool(None, "run_command").await;
    let line = format!("curl -sS -m 10 http://{own}:{port}/");
    let result = named.run(None, None, &line).await;
    assert!(printed(&result).contains("vhost="), "{result}");
}

#[tokio::test]
async fn the_proxy_sends_only_the_checked_host() {
    let (port, reached) = host_echo("127.0.0.2");
    let server = Server::start(&profile(&format!("\"127.0.0.2:{port}\"")), |_| {}).await;
    server.wait_for_tool(None, "run_command").await;
    let plain = format!("curl -sS -m 10 http://127.0.0.2:{port}/");
    let result = server.run(None, None, &plain).await;
    assert!(
        printed(&result).contains(&format!("vhost=127.0.0.2:{port};")),
        "{result}"
    );
    let before = reached.load(Ordering::SeqCst);
    // Another virtual host behind the checked address.
    let foreign = format!(
        "curl -sS -m 10 -w ' %{{http_code}}' -H 'Host: admin.internal' http://127.0.0.2:{port}/"
    );
    let result = server.run(None, None, &foreign).await;
    let out = printed(&result);
    assert!(!out.contains("admin.internal;"), "{result}");
    assert!(out.ends_with(" 403") && out.contains("host"), "{result}");
    // A second request pipelined behind the first on one connection.
    let pipelined = format!(
        "exec 3<>/dev/tcp/127.0.0.1/${{HTTP_PROXY##*:}}; \
         printf 'GET http://127.0.0.2:{port}/ HTTP/1.1\\r\\nHost: 127.0.0.2:{port}\\r\\n\\r\\n\
GET /admin HTTP/1.1\\r\\nHost: admin.internal\\r\\n\\r\\n' >&3; timeout 5 cat <&3"
    );
    let result = server.run(None, None, &pipelined).await;
    let out = printed(&result);
    assert!(out.contains("vhost=127.0.0.2"), "{result}");
    assert!(!out.contains("admin.internal;"), "{result}");
    assert_eq!(reached.load(Ordering::SeqCst), before + 1, "{result}");
}
