//! Attack tests: the terminal's proxy and `http_request` reach only what
//! they checked: never the host's own interface addresses unless named,
//! never another virtual host than the checked one (by a `Host` header, or
//! inside a `CONNECT` tunnel by plain HTTP or a TLS server name), and never
//! a second request pipelined behind the first on a plain-HTTP connection.

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

/// A TLS ClientHello, naming `sni` as its server if given: enough for the
/// proxy to judge, not to finish a handshake.
pub(crate) fn client_hello(sni: Option<&str>) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend([7u8; 32]);
    body.push(0);
    body.extend([0, 2, 0x13, 0x01, 1, 0]);
    let mut extensions = Vec::new();
    if let Some(name) = sni {
        let n = u16::try_from(name.len()).unwrap();
        extensions.extend([0, 0]);
        extensions.extend((n + 5).to_be_bytes());
        extensions.extend((n + 3).to_be_bytes());
        extensions.push(0);
        extensions.extend(n.to_be_bytes());
        extensions.extend(name.as_bytes());
    }
    body.extend(u16::try_from(extensions.len()).unwrap().to_be_bytes());
    body.extend(extensions);
    let n = u16::try_from(body.len()).unwrap().to_be_bytes();
    let mut handshake = vec![1, 0, n[0], n[1]];
    handshake.extend(body);
    let mut record = vec![0x16, 3, 1];
    record.extend(u16::try_from(handshake.len()).unwrap().to_be_bytes());
    record.extend(handshake);
    record
}

/// A command line that opens a tunnel to `target` through the command's
/// proxy, sends `bytes` in it and prints what comes back (`cat -v`).
pub(crate) fn through_tunnel(target: &str, bytes: &[u8]) -> String {
    let escaped: String = bytes.iter().map(|b| format!("\\x{b:02x}")).collect();
    format!(
        "exec 3<>/dev/tcp/127.0.0.1/${{HTTP_PROXY##*:}}; \
         printf 'CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n' >&3; \
         head -c 39 <&3; printf '{escaped}' >&3; timeout 5 cat -v <&3"
    )
}

/// A server that stands for a TLS site: it counts the connections that
/// begin with a TLS handshake record (and answers `tls-hello-seen`) and
/// the ones that begin otherwise (answered with the `Host` they name).
fn tls_site(addr: &str) -> (u16, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind(format!("{addr}:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (hellos, plain) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (tls, other) = (hellos.clone(), plain.clone());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut first = [0u8; 4096];
            let n = stream.read(&mut first).unwrap_or(0);
            if n == 0 {
                continue;
            }
            let answer = if first[0] == 0x16 {
                tls.fetch_add(1, Ordering::SeqCst);
                "tls-hello-seen\n".to_string()
            } else {
                other.fetch_add(1, Ordering::SeqCst);
                let head = String::from_utf8_lossy(&first[..n]).to_lowercase();
                let host = head.split("host: ").nth(1).unwrap_or("-");
                let body = format!("vhost={};", host.lines().next().unwrap_or("-").trim());
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
            };
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (port, hellos, plain)
}

#[tokio::test]
async fn a_tunnel_to_an_address_carries_only_tls_without_a_server_name() {
    let (port, hellos, plain) = tls_site("127.0.0.2");
    let server = Server::start(&profile(&format!("\"127.0.0.2:{port}\"")), |_| {}).await;
    server.wait_for_tool(None, "run_command").await;
    let target = format!("127.0.0.2:{port}");
    // Plain HTTP in a tunnel (`curl -p`), naming another virtual host or
    // not, and two requests pipelined in one: none reaches the site.
    for line in [
        format!("curl -sS -m 10 -p -H 'Host: admin.internal' http://{target}/"),
        format!("curl -sS -m 10 -p http://{target}/"),
        through_tunnel(
            &target,
            b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: admin.internal\r\n\r\n",
        ),
    ] {
        let out = printed(&server.run(None, None, &line).await);
        assert!(!out.contains("vhost="), "{line}: {out}");
        assert!(out.contains("toolhost proxy"), "{line}: {out}");
    }
    assert_eq!(plain.load(Ordering::SeqCst), 0, "plain HTTP went through");
    // TLS naming another host: refused, nothing sent on.
    let named = through_tunnel(&target, &client_hello(Some("admin.internal")));
    let out = printed(&server.run(None, None, &named).await);
    assert!(!out.contains("tls-hello-seen"), "{out}");
    assert_eq!(hellos.load(Ordering::SeqCst), 0);
    // TLS without a name (as clients send to an address) goes through, a
    // real client's too.
    let unnamed = through_tunnel(&target, &client_hello(None));
    let out = printed(&server.run(None, None, &unnamed).await);
    assert!(out.contains("tls-hello-seen"), "{out}");
    let curl = format!("curl -sS -m 10 -k https://{target}/");
    server.run(None, None, &curl).await;
    assert_eq!(hellos.load(Ordering::SeqCst), 2);
    assert_eq!(plain.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_tunnel_to_a_name_carries_only_tls_naming_it() {
    let (port, hellos, plain) = tls_site("127.0.0.1");
    // The name, and the loopback addresses it resolves to (listed, as
    // loopback addresses must be).
    let hosts = format!("\"localhost:{port}\", \"127.0.0.1:{port}\", \"[::1]:{port}\"");
    let server = Server::start(&profile(&hosts), |_| {}).await;
    server.wait_for_tool(None, "run_command").await;
    let target = format!("localhost:{port}");
    for (sni, reaches) in [
        (Some("localhost"), true),
        (Some("LOCALHOST."), true),
        (Some("admin.internal"), false),
        (Some("localhost.evil.example"), false),
        (None, false),
    ] {
        let before = hellos.load(Ordering::SeqCst);
        let line = through_tunnel(&target, &client_hello(sni));
        let out = printed(&server.run(None, None, &line).await);
        assert_eq!(out.contains("tls-hello-seen"), reaches, "{sni:?}: {out}");
        assert_eq!(
            hellos.load(Ordering::SeqCst),
            before + usize::from(reaches),
            "{sni:?}"
        );
    }
    let line = format!("curl -sS -m 10 -p -H 'Host: admin.internal' http://{target}/");
    let out = printed(&server.run(None, None, &line).await);
    assert!(out.contains("toolhost proxy"), "{out}");
    assert_eq!(plain.load(Ordering::SeqCst), 0, "plain HTTP went through");
}
