//! Network: the `http` import under profiles (allowed and denied hosts,
//! private addresses, redirects, DNS, size and time caps).
//!
//! Every server here listens on 127.0.0.1, a loopback address: a profile
//! reaches it only by listing the address (or its port) in
//! `network.allow_hosts`, which is itself one of the rules under test.

mod hosts;
mod limits;
mod permissions;
mod redirects;
mod requests;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use toolhost::config::{Config, ConfigSource};
use toolhost::{Host, HostBuilder};

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
