//! Network: the `http` import under profiles (allowed and denied hosts,
//! private addresses, redirects, DNS, size and time caps).
//!
//! Every server here listens on 127.0.0.1, a loopback address: a profile
//! reaches it only by listing the address (or its port) in
//! `network.allow_hosts`, which is itself one of the rules under test.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolhost::audit::AuditLog;
use toolhost::config::{Config, ConfigSource};
use toolhost::{ErrorKind, Host, HostBuilder};

use crate::Buffer;

/// A request a test server received.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// Serves `router` on 127.0.0.1 (any free port) until the test ends.
pub(crate) async fn serve(listener: TcpListener, router: Router) -> SocketAddr {
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

pub(crate) async fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.unwrap()
}

/// A server that records every request and answers:
/// `/hello` 200 "hello from the test server" (with `x-test: yes`),
/// `/echo` 201 with the request body, `/big` 64 KiB, `/slow` after 5 s,
/// `/exact` 1 KiB, anything else 404.
async fn server() -> (SocketAddr, Log) {
    async fn handle(
        State(log): State<Log>,
        method: Method,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> axum::response::Response {
        log.lock().unwrap().push(Seen {
            method,
            path: uri.path().to_owned(),
            headers,
            body: body.clone(),
        });
        match uri.path() {
            "/hello" => (
                StatusCode::OK,
                [("x-test", "yes")],
                "hello from the test server",
            )
                .into_response(),
            "/echo" => (StatusCode::CREATED, body).into_response(),
            "/big" => vec![b'x'; 64 * 1024].into_response(),
            "/exact" => vec![b'y'; 1024].into_response(),
            "/slow" => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "too late".into_response()
            }
            _ => StatusCode::NOT_FOUND.into_response(),
        }
    }
    let log = Log::default();
    let router = Router::new().fallback(handle).with_state(log.clone());
    (serve(listener().await, router).await, log)
}

/// A server that answers every request with `status` and `location`.
async fn redirector(listener: TcpListener, status: StatusCode, location: String) -> SocketAddr {
    let router = Router::new().fallback(move || {
        let location = location.clone();
        async move { (status, [(header::LOCATION, location)]) }
    });
    serve(listener, router).await
}

/// A bare TCP server: reads each request's head, then lets `respond` write
/// whatever it likes (for bodies axum would not send: endless, stalled).
async fn raw_server<F, Fut>(respond: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = listener().await;
    let addr = listener.local_addr().unwrap();
    let respond = Arc::new(respond);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let respond = respond.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte).await {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                respond(stream).await;
            });
        }
    });
    addr
}

fn profile(body: &str) -> Arc<toolhost::Profile> {
    let text = format!("default_profile = \"p\"\n[profiles.p]\n{body}\n");
    let config = Config::parse(&text, ConfigSource::Embedded, &std::env::temp_dir()).unwrap();
    config.profile("p", None).unwrap()
}

fn builder(profile_body: &str) -> HostBuilder {
    Host::builder()
        .plugin_file(toolhost_tests::FETCHER)
        .profile(profile(profile_body))
}

async fn host(profile_body: &str) -> Host {
    builder(profile_body).build().await.unwrap()
}

/// A profile that allows fetching from `hosts` (TOML array items).
fn allowing(hosts: &str) -> String {
    format!("allow = [\"network:fetch\"]\nnetwork.allow_hosts = [{hosts}]")
}

async fn call(host: &Host, tool: &str, arguments: Value) -> Value {
    let result = host
        .call(tool, arguments.clone())
        .await
        .unwrap_or_else(|e| panic!("{tool} {arguments}: {e}"));
    serde_json::from_str(result.get()).unwrap()
}

async fn fetch(host: &Host, arguments: Value) -> Value {
    call(host, "fetch", arguments).await
}

async fn get(host: &Host, url: &str) -> Value {
    fetch(host, json!({ "url": url })).await
}

/// Asserts the outcome is the error `kind` and returns its message.
#[track_caller]
fn error(outcome: &Value, kind: &str) -> String {
    assert_eq!(outcome["error_kind"], kind, "{outcome}");
    outcome["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_allowed_get_returns_status_headers_and_body() {
    let (addr, log) = server().await;
    let host = host(&allowing("\"127.0.0.1\"")).await;
    let outcome = get(&host, &format!("http://{addr}/hello")).await;
    assert_eq!(outcome["status"], 200, "{outcome}");
    assert_eq!(outcome["body"], "hello from the test server");
    assert_eq!(outcome["headers"]["x-test"], "yes");
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, Method::GET);
    assert!(
        seen[0].headers["user-agent"]
            .to_str()
            .unwrap()
            .starts_with("toolhost/")
    );

    let missing = get(&host, &format!("http://{addr}/missing")).await;
    assert_eq!(missing["status"], 404, "{missing}");
}

#[tokio::test]
async fn an_allowed_post_delivers_method_headers_and_body() {
    let (addr, log) = server().await;
    let host = host(&allowing(&format!("\"127.0.0.1:{}\"", addr.port()))).await;
    let outcome = fetch(
        &host,
        json!({
            "url": format!("http://{addr}/echo?x=1"),
            "method": "POST",
            "headers": [["X-Custom", "abc"], ["Content-Type", "text/plain"], ["User-Agent", "fetcher"]],
            "body": "the payload",
        }),
    )
    .await;
    assert_eq!(outcome["status"], 201, "{outcome}");
    assert_eq!(outcome["body"], "the payload");
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, Method::POST);
    assert_eq!(seen[0].path, "/echo");
    assert_eq!(seen[0].headers["x-custom"], "abc");
    assert_eq!(seen[0].headers["content-type"], "text/plain");
    assert_eq!(seen[0].headers["user-agent"], "fetcher");
    assert_eq!(seen[0].headers["host"], addr.to_string().as_str());
    assert_eq!(&seen[0].body[..], b"the payload");
}

#[tokio::test]
async fn a_wildcard_does_not_open_loopback_addresses() {
    let (addr, log) = server().await;
    let host = host(&allowing("\"*\"")).await;
    let message = error(&get(&host, &format!("http://{addr}/hello")).await, "denied");
    assert!(message.contains("127.0.0.1"), "{message}");
    assert!(message.contains("is loopback"), "{message}");
    assert!(message.contains("network.allow_hosts"), "{message}");
    // Other spellings of loopback, and the metadata address, are refused too.
    for url in [
        format!("http://2130706433:{}/hello", addr.port()),
        format!("http://0x7f.0.0.1:{}/hello", addr.port()),
        format!("http://[::ffff:127.0.0.1]:{}/hello", addr.port()),
        format!("http://[::1]:{}/hello", addr.port()),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://10.0.0.1/".to_owned(),
    ] {
        let message = error(&get(&host, &url).await, "denied");
        assert!(message.contains("network.allow_hosts"), "{url}: {message}");
    }
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn without_allowed_hosts_nothing_is_reachable() {
    let (addr, log) = server().await;
    let host = host(&allowing("")).await;
    let message = error(&get(&host, &format!("http://{addr}/hello")).await, "denied");
    assert!(
        message.contains("host \"127.0.0.1\" is not in the profile's network.allow_hosts"),
        "{message}"
    );
    // An entry for another port does not open this one.
    let other_port = host_with_port_entry(addr.port().wrapping_add(1)).await;
    let message = error(
        &get(&other_port, &format!("http://{addr}/hello")).await,
        "denied",
    );
    assert!(
        message.contains(&format!("port {}", addr.port())),
        "{message}"
    );
    assert!(log.lock().unwrap().is_empty());
}

async fn host_with_port_entry(port: u16) -> Host {
    host(&allowing(&format!("\"127.0.0.1:{port}\""))).await
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_unless_its_address_is_listed() {
    let (addr, log) = server().await;
    let url = format!("http://localhost:{}/hello", addr.port());

    let by_name = host(&allowing("\"localhost\"")).await;
    let message = error(&get(&by_name, &url).await, "denied");
    assert!(message.contains("of host \"localhost\""), "{message}");
    assert!(message.contains("is loopback"), "{message}");
    assert!(log.lock().unwrap().is_empty());

    // With the addresses listed, the name is resolved once, checked, and the
    // connection goes to those addresses.
    let listed = host(&allowing("\"localhost\", \"127.0.0.1\", \"::1\"")).await;
    let outcome = get(&listed, &url).await;
    assert_eq!(outcome["status"], 200, "{outcome}");
    assert_eq!(log.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_redirect_to_an_allowed_host_is_followed() {
    let (target, log) = server().await;
    let first = listener().await;
    let first = redirector(
        first,
        StatusCode::SEE_OTHER,
        format!("http://{target}/hello"),
    )
    .await;
    let host = host(&allowing("\"127.0.0.1\"")).await;
    let outcome = fetch(
        &host,
        json!({
            "url": format!("http://{first}/form"),
            "method": "POST",
            "headers": [["Authorization", "Bearer t0ken"], ["X-Api-Key", "k3y"], ["Accept", "text/plain"]],
            "body": "form data",
        }),
    )
    .await;
    assert_eq!(outcome["status"], 200, "{outcome}");
    assert_eq!(outcome["body"], "hello from the test server");
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    // 303: the POST became a GET without body; another origin: no credentials.
    assert_eq!(seen[0].method, Method::GET);
    assert!(seen[0].body.is_empty());
    // Another origin: credentials, and any header of the tool's own naming
    // (an API key, say), stay behind.
    assert!(seen[0].headers.get("authorization").is_none());
    assert!(seen[0].headers.get("x-api-key").is_none());
    assert_eq!(seen[0].headers["accept"], "text/plain");
}

#[tokio::test]
async fn a_temporary_redirect_keeps_method_and_body() {
    let (target, log) = server().await;
    let first = redirector(
        listener().await,
        StatusCode::TEMPORARY_REDIRECT,
        format!("http://{target}/echo"),
    )
    .await;
    let host = host(&allowing("\"127.0.0.1\"")).await;
    let outcome = fetch(
        &host,
        json!({ "url": format!("http://{first}/"), "method": "PUT", "body": "kept body" }),
    )
    .await;
    assert_eq!(outcome["status"], 201, "{outcome}");
    assert_eq!(outcome["body"], "kept body");
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen[0].method, Method::PUT);
    assert_eq!(&seen[0].body[..], b"kept body");
}

#[tokio::test]
async fn a_redirect_to_a_host_that_is_not_allowed_is_refused_at_the_hop() {
    let (target, log) = server().await;
    let first = listener().await;
    let first_port = first.local_addr().unwrap().port();
    let profile = allowing(&format!("\"127.0.0.1:{first_port}\", \"localhost\""));

    // To another port of the same address: that port is not listed.
    let to_port = redirector(
        first,
        StatusCode::FOUND,
        format!("http://{target}/hello?secret=1"),
    )
    .await;
    let host = host(&profile).await;
    let message = error(
        &get(&host, &format!("http://{to_port}/start")).await,
        "denied",
    );
    assert!(
        message.contains(&format!("GET http://{target}/hello refused")),
        "{message}"
    );
    assert!(
        message.contains(&format!("port {}", target.port())),
        "{message}"
    );
    assert!(!message.contains("secret"), "{message}");

    // To a name that is allowed but resolves to loopback: refused on the
    // address, checked again at the hop.
    let second = listener().await;
    let second_port = second.local_addr().unwrap().port();
    let to_name = redirector(
        second,
        StatusCode::FOUND,
        format!("http://localhost:{}/hello", target.port()),
    )
    .await;
    let host = self::host(&allowing(&format!(
        "\"127.0.0.1:{second_port}\", \"localhost\""
    )))
    .await;
    let message = error(
        &get(&host, &format!("http://{to_name}/start")).await,
        "denied",
    );
    assert!(
        message.contains("of host \"localhost\" is loopback"),
        "{message}"
    );
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn redirects_stop_at_the_profile_limit() {
    let first = listener().await;
    let addr = first.local_addr().unwrap();
    let looping = redirector(first, StatusCode::FOUND, format!("http://{addr}/again")).await;
    let host = host(&format!(
        "{}\nnetwork.max_redirects = 2",
        allowing("\"127.0.0.1\"")
    ))
    .await;
    let message = error(&get(&host, &format!("http://{looping}/")).await, "failed");
    assert!(message.contains("too many redirects"), "{message}");
    assert!(message.contains("network.max_redirects is 2"), "{message}");
}

#[tokio::test]
async fn a_response_over_the_size_limit_is_refused() {
    let (addr, _) = server().await;
    let host = host(&format!(
        "{}\nnetwork.max_response = \"1KiB\"",
        allowing("\"127.0.0.1\"")
    ))
    .await;
    // Announced length over the limit.
    let outcome = get(&host, &format!("http://{addr}/big")).await;
    error(&outcome, "too_large");
    assert_eq!(outcome["limit"], 1024);
    // Exactly the limit is fine.
    let outcome = get(&host, &format!("http://{addr}/exact")).await;
    assert_eq!(outcome["body_bytes"], 1024, "{outcome}");

    // An endless chunked body: cut at the limit, not read to the end.
    let endless = raw_server(|mut stream| async move {
        let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        if stream.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let chunk = format!("400\r\n{}\r\n", "z".repeat(0x400));
        while stream.write_all(chunk.as_bytes()).await.is_ok() {}
    })
    .await;
    let outcome = get(&host, &format!("http://{endless}/")).await;
    error(&outcome, "too_large");
}

#[tokio::test]
async fn a_slow_server_runs_into_the_profile_timeout() {
    let (addr, _) = server().await;
    let host = host(&format!(
        "{}\nnetwork.timeout = \"200ms\"",
        allowing("\"127.0.0.1\"")
    ))
    .await;
    let started = Instant::now();
    // The guest asks for more; the profile's limit wins.
    let outcome = fetch(
        &host,
        json!({ "url": format!("http://{addr}/slow"), "timeout_ms": 60_000 }),
    )
    .await;
    error(&outcome, "timeout");
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[tokio::test]
async fn the_guest_timeout_covers_a_stalled_body() {
    // Headers at once, then half the body, then nothing.
    let stalled = raw_server(|mut stream| async move {
        let response = "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf.";
        if stream.write_all(response.as_bytes()).await.is_ok() {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    })
    .await;
    let host = host(&allowing("\"127.0.0.1\"")).await;
    let started = Instant::now();
    let outcome = fetch(
        &host,
        json!({ "url": format!("http://{stalled}/"), "timeout_ms": 150 }),
    )
    .await;
    error(&outcome, "timeout");
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[tokio::test]
async fn a_tool_that_did_not_declare_network_fetch_is_refused_at_use() {
    let (addr, log) = server().await;
    let host = host("allow = [\"network:*\"]\nnetwork.allow_hosts = [\"127.0.0.1\"]").await;
    let message = error(
        &call(
            &host,
            "sneaky_fetch",
            json!({ "url": format!("http://{addr}/hello") }),
        )
        .await,
        "denied",
    );
    assert!(
        message.contains("tool \"sneaky_fetch\" of plugin \"fetcher\""),
        "{message}"
    );
    assert!(
        message.contains("does not declare the permission \"network:fetch\""),
        "{message}"
    );
    assert!(log.lock().unwrap().is_empty());
    // The declaring tool works under the same profile.
    assert_eq!(
        get(&host, &format!("http://{addr}/hello")).await["status"],
        200
    );
}

#[tokio::test]
async fn a_profile_that_denies_network_hides_the_tool_and_refuses_the_import() {
    let (addr, log) = server().await;
    let host =
        host("allow = [\"*\"]\ndeny = [\"network:*\"]\nnetwork.allow_hosts = [\"127.0.0.1\"]")
            .await;
    let url = format!("http://{addr}/hello");
    let error_ = host.call("fetch", json!({ "url": url })).await.unwrap_err();
    assert_eq!(error_.kind(), ErrorKind::Unavailable, "{error_}");

    let message = error(
        &call(&host, "sneaky_fetch", json!({ "url": url })).await,
        "denied",
    );
    assert!(
        message.contains("profile \"p\" does not allow it"),
        "{message}"
    );
    assert!(message.contains("deny rule \"network:*\""), "{message}");
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_refusal_becomes_a_denied_tool_error_through_the_sdk() {
    let (addr, _) = server().await;
    let host = host(&allowing("\"example.com\"")).await;
    let error = host
        .call(
            "fetch_text",
            json!({ "url": format!("http://{addr}/hello") }),
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Denied, "{error}");
    assert!(error.message().contains("network.allow_hosts"), "{error}");

    let open = self::host(&allowing("\"127.0.0.1\"")).await;
    let text = call(
        &open,
        "fetch_text",
        json!({ "url": format!("http://{addr}/hello") }),
    )
    .await;
    assert_eq!(text["text"], "hello from the test server");
}

#[tokio::test]
async fn malformed_requests_are_invalid() {
    let (addr, log) = server().await;
    let host = host(&allowing("\"127.0.0.1\"")).await;
    let url = format!("http://{addr}/hello");
    let cases = [
        (json!({ "url": "ftp://127.0.0.1/file" }), "scheme \"ftp\""),
        (json!({ "url": "not a url" }), "not a valid absolute"),
        (
            json!({ "url": url, "method": "GE T" }),
            "not a valid HTTP method",
        ),
        (
            json!({ "url": url, "headers": [["X-A", "1\r\nX-Injected: 2"]] }),
            "control characters",
        ),
        (
            json!({ "url": url, "headers": [["Host", "metadata.internal"]] }),
            "must name the url's host",
        ),
        (
            json!({ "url": format!("http://user:pw@{addr}/") }),
            "credentials",
        ),
    ];
    for (arguments, expected) in cases {
        let message = error(&fetch(&host, arguments.clone()).await, "invalid_request");
        assert!(message.contains(expected), "{arguments}: {message}");
    }
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_connection_failure_is_failed() {
    // Bind, learn the port, close: nothing listens there.
    let closed = listener().await.local_addr().unwrap();
    let host = host(&allowing("\"127.0.0.1\"")).await;
    let message = error(
        &get(&host, &format!("http://{closed}/?k=s3cret")).await,
        "failed",
    );
    assert!(message.contains(&format!("http://{closed}/")), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
}

/// An audit sink the test can read back.
#[tokio::test]
async fn the_audit_log_records_each_hop_without_secrets() {
    let (target, _) = server().await;
    let first = redirector(
        listener().await,
        StatusCode::FOUND,
        format!("http://{target}/hello?next=s3cret-query"),
    )
    .await;
    let buffer = Buffer::default();
    let host = builder(&format!(
        "allow = [\"network:*\"]\nnetwork.allow_hosts = [\"127.0.0.1:{}\"]",
        first.port()
    ))
    .audit(AuditLog::writer(buffer.clone()))
    .build()
    .await
    .unwrap();

    // 1: allowed first hop, refused redirect hop.
    fetch(
        &host,
        json!({
            "url": format!("http://{first}/start?token=s3cret-query"),
            "headers": [["Authorization", "Bearer s3cret-header"]],
            "body": "s3cret-body",
        }),
    )
    .await;
    // 2: a tool without the permission.
    call(
        &host,
        "sneaky_fetch",
        json!({ "url": format!("http://{first}/x?s3cret-query") }),
    )
    .await;
    // 3: a host not allowed.
    get(&host, "http://example.com/?q=s3cret-query").await;

    let text = buffer.text();
    assert!(!text.contains("s3cret"), "{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    let uses = |line: &Value| -> Vec<Value> {
        line["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|used| used["capability"] == "http")
            .cloned()
            .collect()
    };

    let first_call = uses(&lines[0]);
    assert_eq!(lines[0]["tool"], "fetch");
    assert_eq!(first_call.len(), 2, "{first_call:?}");
    assert_eq!(first_call[0]["target"], format!("GET http://{first}/start"));
    assert_eq!(first_call[0]["allowed"], true);
    assert_eq!(
        first_call[1]["target"],
        format!("GET http://{target}/hello")
    );
    assert_eq!(first_call[1]["allowed"], false);
    let reason = first_call[1]["reason"].as_str().unwrap();
    assert!(reason.contains("network.allow_hosts"), "{reason}");

    let sneaky = uses(&lines[1]);
    assert_eq!(lines[1]["tool"], "sneaky_fetch");
    assert_eq!(sneaky.len(), 1);
    assert_eq!(sneaky[0]["target"], format!("GET http://{first}/x"));
    assert_eq!(sneaky[0]["allowed"], false);
    assert!(
        sneaky[0]["reason"]
            .as_str()
            .unwrap()
            .contains("does not declare the permission \"network:fetch\"")
    );

    let refused = uses(&lines[2]);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["target"], "GET http://example.com/");
    assert_eq!(refused[0]["allowed"], false);
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .contains("host \"example.com\" is not in the profile's network.allow_hosts")
    );
}
