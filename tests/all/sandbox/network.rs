//! The network: none by default, the host's when shared, allowed hosts
//! only through the proxy (loopback ones included).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{SANDBOXED, printed, ran, succeeds, workspace};

/// [`SANDBOXED`] allowing `network:fetch`, which commands need to reach
/// anything beyond their own loopback.
fn networked() -> String {
    SANDBOXED.replace("\"file:write\"]", "\"file:write\", \"network:fetch\"]")
}

#[tokio::test]
async fn commands_have_no_network_unless_the_profile_shares_it() {
    let ws = workspace();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let host = ws.host(SANDBOXED).await;
    let connect = format!("echo hello > /dev/tcp/127.0.0.1/{port} && echo connected");
    let result = ran(&host, &connect).await;
    assert!(!printed(&result).contains("\"connected"), "{result}");
    assert!(
        listener.accept().is_err(),
        "a connection reached the host's listener"
    );
    // Only a loopback interface of its own.
    let links = succeeds(&host, "cat /proc/net/dev").await;
    assert!(links.contains("lo:"), "{links}");
    assert_eq!(links.lines().count(), 3, "{links}");

    // `terminal.network = "host"` shares the host's network.
    let shared = ws
        .host(&format!("{}\nterminal.network = \"host\"", networked()))
        .await;
    succeeds(&shared, &connect).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while listener.accept().is_err() {
        assert!(Instant::now() < deadline, "no connection arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A plain HTTP server on `addr` answering every request with `body`; the
/// number of connections it accepted.
pub(crate) fn http_server(addr: &str, body: &'static str) -> (u16, std::sync::Arc<AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind(format!("{addr}:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            counter.fetch_add(1, Ordering::SeqCst);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (port, accepted)
}

#[tokio::test]
async fn commands_reach_allowed_hosts_only_through_the_proxy() {
    let ws = workspace();
    // Two servers on host loopback addresses other than the sandbox's own.
    let (allowed, reached) = http_server("127.0.0.2", "hello from the host");
    let (other, other_reached) = http_server("127.0.0.3", "must stay unreachable");
    // Allowing a host makes `terminal.network` default to the proxy.
    let host = ws
        .host(&format!(
            "{}\nnetwork.allow_hosts = [\"127.0.0.2:{allowed}\"]",
            networked()
        ))
        .await;

    // Plain HTTP (absolute-form requests); a CONNECT tunnel carries only
    // TLS, not plain HTTP.
    let url = format!("http://127.0.0.2:{allowed}/hello");
    assert_eq!(
        succeeds(&host, &format!("curl -sS {url}")).await,
        "hello from the host"
    );
    let tunnelled = ran(&host, &format!("curl -sS --proxytunnel {url}")).await;
    assert!(
        printed(&tunnelled).contains("carries only TLS"),
        "{tunnelled}"
    );
    // The tunnel's connection was made (its destination is allowed), and
    // nothing was sent on it.
    assert!(!printed(&tunnelled).contains("hello from"), "{tunnelled}");
    // The listener counts a connection when it accepts it, which may come
    // after the command has ended.
    let deadline = Instant::now() + Duration::from_secs(10);
    while reached.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(reached.load(Ordering::SeqCst), 2);

    // Another host, another port, the metadata address: refused with the
    // rule named, and no connection made.
    for refused in [
        format!("http://127.0.0.3:{other}/"),
        format!("http://127.0.0.2:{other}/"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
    ] {
        let plain = succeeds(&host, &format!("curl -sS -w ' %{{http_code}}' {refused}")).await;
        assert!(plain.ends_with(" 403"), "{refused}: {plain}");
        assert!(plain.contains("network.allow_hosts"), "{refused}: {plain}");
        let tunnel = ran(&host, &format!("curl -sS --proxytunnel {refused}")).await;
        assert_ne!(tunnel["exit_code"], 0, "{refused}: {tunnel}");
        assert!(printed(&tunnel).contains("403"), "{refused}: {tunnel}");
    }
    // Around the proxy there is no way out.
    for line in [
        format!("curl -sS --noproxy '*' {url}"),
        format!("echo x > /dev/tcp/127.0.0.2/{allowed}"),
        format!("echo x > /dev/tcp/127.0.0.3/{other}"),
    ] {
        let result = ran(&host, &line).await;
        assert_ne!(result["exit_code"], 0, "{line}: {result}");
    }
    assert_eq!(reached.load(Ordering::SeqCst), 2);
    assert_eq!(other_reached.load(Ordering::SeqCst), 0);

    // `terminal.network = "none"` keeps the allowed host out of reach too.
    let closed = ws
        .host(&format!(
            "{}\nnetwork.allow_hosts = [\"127.0.0.2:{allowed}\"]\n\
             terminal.network = \"none\"",
            networked()
        ))
        .await;
    let result = ran(&closed, &format!("curl -sS {url}")).await;
    assert_ne!(result["exit_code"], 0, "{result}");
    assert_eq!(reached.load(Ordering::SeqCst), 2);
}

/// A loopback address `allow_hosts` names goes to the proxy, which reaches
/// the host's: no `--noproxy` needed. Loopback names it does not name stay
/// the command's own.
#[tokio::test]
async fn an_allowed_loopback_host_answers_curl_without_extra_flags() {
    let ws = workspace();
    let (allowed, reached) = http_server("127.0.0.1", "hello from the host's loopback");
    let host = ws
        .host(&format!(
            "{}\nnetwork.allow_hosts = [\"127.0.0.1:{allowed}\"]",
            networked()
        ))
        .await;
    assert_eq!(
        succeeds(&host, &format!("curl -sS http://127.0.0.1:{allowed}/")).await,
        "hello from the host's loopback"
    );
    assert_eq!(reached.load(Ordering::SeqCst), 1);
    let env = succeeds(&host, "echo \"$no_proxy|$NO_PROXY\"").await;
    assert_eq!(env.trim(), "localhost,::1|localhost,::1");
    // Another port of the same address is still refused by the proxy.
    let other = succeeds(&host, "curl -sS -w ' %{http_code}' http://127.0.0.1:9/").await;
    assert!(other.ends_with(" 403"), "{other}");
}

#[tokio::test]
async fn a_command_cannot_hold_more_proxy_connections_than_the_cap() {
    let ws = workspace();
    let (allowed, reached) = http_server("127.0.0.2", "hello from the host");
    let host = ws
        .host(&format!(
            "{}\nnetwork.allow_hosts = [\"127.0.0.2:{allowed}\"]",
            networked()
        ))
        .await;
    // 64 idle connections held open, then one more that asks for the page:
    // past the cap the relay closes it unanswered. Once the held ones are
    // closed, the same request gets through.
    let request = format!(
        "exec 3<>/dev/tcp/127.0.0.1/3128; \
         printf 'GET http://127.0.0.2:{allowed}/ HTTP/1.0\\r\\n\\r\\n' >&3; \
         timeout 5 cat <&3; exec 3<&-"
    );
    let line = format!(
        "held=(); for i in $(seq 64); do exec {{fd}}<>/dev/tcp/127.0.0.1/3128 || exit 9; \
         held+=($fd); done; sleep 0.5; echo over:; {request}; \
         for fd in \"${{held[@]}}\"; do exec {{fd}}<&-; done; sleep 0.5; echo under:; {request}"
    );
    let out = succeeds(&host, &line).await;
    let (over, under) = out.split_once("under:").expect("both requests ran");
    assert!(!over.contains("hello from the host"), "{out}");
    assert!(under.contains("hello from the host"), "{out}");
    assert_eq!(reached.load(Ordering::SeqCst), 1);
}
