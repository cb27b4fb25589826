//! W3C trace context through a real server: a `traceparent` in an MCP
//! request's `_meta`, or in the HTTP header of `/mcp` or `/v1`, is written
//! into the call's audit record and continued (same trace, a new span, the
//! caller's `tracestate`) into the requests its `http` and declarative
//! tools send; a malformed one is dropped.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::HeaderMap;
use serde_json::{Value, json};

use crate::mcp_handles::{GAMMA, Served, serve};

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT: &str = "00f067aa0ba902b7";

fn traceparent(trace: &str) -> String {
    format!("00-{trace}-{PARENT}-01")
}

type Seen = Arc<Mutex<Vec<HeaderMap>>>;

/// An API on 127.0.0.1 that records each request's headers.
async fn api() -> (std::net::SocketAddr, Seen) {
    let seen = Seen::default();
    let log = seen.clone();
    let router = Router::new().fallback(move |headers: HeaderMap| {
        let log = log.clone();
        async move {
            log.lock().unwrap().push(headers);
            axum::Json(json!({"ok": true}))
        }
    });
    let addr = crate::network::serve(crate::network::listener().await, router).await;
    (addr, seen)
}

/// A server whose tenant gamma may fetch from 127.0.0.1, with a declarative
/// tool `traced_get` for the API at `addr`, auditing to `audit.log`.
async fn served(addr: std::net::SocketAddr, plugins: &std::path::Path) -> Served {
    std::fs::write(
        plugins.join("traced.toml"),
        format!(
            "toolset = \"traced\"\nbase_url = \"http://{addr}\"\n[[tools]]\nname = \
             \"traced_get\"\ndescription = \"Get.\"\nurl = \"/declared\"\n"
        ),
    )
    .unwrap();
    serve(
        &format!(
            "audit = \"audit.log\"\nplugins = {:?}\n[profiles.fetcher]\nallow = \
             [\"network:fetch\"]\nnetwork.allow_hosts = [\"127.0.0.1\"]\n[tenants.gamma]\n\
             profile = \"fetcher\"\nworkspace = \"alpha\"\ntoken_sha256 = \"GAMMA\"\n",
            plugins.display().to_string()
        ),
        "",
    )
    .await
}

/// A 2026-07-28 `tools/call` of `tool` as gamma, with `meta` added to
/// `_meta` and `headers`.
async fn call(
    served: &Served,
    tool: &str,
    arguments: Value,
    meta: Value,
    headers: &[(&str, &str)],
) -> Value {
    let mut all_meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    for (key, value) in meta.as_object().unwrap() {
        all_meta[key] = value.clone();
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments, "_meta": all_meta}});
    let mut request = crate::http_api::client()
        .post(&served.url)
        .bearer_auth(GAMMA)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let (_, answer) =
        crate::http_api::parse(request.body(body.to_string()).send().await.unwrap()).await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    answer
}

/// The `traceparent` of the last request the API saw, checked to continue
/// `trace` with a span of its own; and its `tracestate`.
fn continued(seen: &Seen, trace: &str) -> Option<String> {
    let headers = seen.lock().unwrap().pop().expect("the API saw no request");
    let parent = headers.get("traceparent")?.to_str().unwrap().to_string();
    let parts: Vec<&str> = parent.split('-').collect();
    assert_eq!(
        (parts[0], parts[1], parts[3]),
        ("00", trace, "01"),
        "{parent}"
    );
    assert!(parts[2].len() == 16 && parts[2] != PARENT, "{parent}");
    Some(
        headers
            .get("tracestate")
            .map(|s| s.to_str().unwrap().to_string())
            .unwrap_or_default(),
    )
}

/// The audit records of `tool`, oldest first.
fn audited(served: &Served, tool: &str) -> Vec<Value> {
    std::fs::read_to_string(served.root.join("audit.log"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["tool"] == tool)
        .collect()
}

#[tokio::test]
async fn a_trace_from_meta_or_header_reaches_the_audit_log_and_the_tools_requests() {
    let (addr, seen) = api().await;
    let plugins = tempfile::tempdir().unwrap();
    let served = served(addr, plugins.path()).await;
    let url = format!("http://{addr}/fetched");

    // `_meta` of an MCP request, into an `http` tool's request.
    let meta = json!({"traceparent": traceparent(TRACE), "tracestate": "vendor=1"});
    call(&served, "http_request", json!({"url": url}), meta, &[]).await;
    assert_eq!(continued(&seen, TRACE).as_deref(), Some("vendor=1"));
    let record = audited(&served, "http_request").pop().unwrap();
    assert_eq!(
        (&record["trace_id"], &record["parent_span_id"]),
        (&json!(TRACE), &json!(PARENT)),
        "{record}"
    );

    // The HTTP header of `/mcp`, into a declarative tool's request.
    let other = "4bf92f3577b34da6a3ce929d0e0e4736";
    let header = traceparent(other);
    call(
        &served,
        "traced_get",
        json!({}),
        json!({}),
        &[("traceparent", &header)],
    )
    .await;
    continued(&seen, other).unwrap();
    let record = audited(&served, "traced_get").pop().unwrap();
    assert_eq!(record["trace_id"], other, "{record}");

    // The header of `/v1`.
    let batch = json!({"tool_calls": [{"id": "c", "type": "function", "function": {
        "name": "http_request", "arguments": json!({"url": url}).to_string()}}]});
    let v1 = served.url.replace("/mcp", "/v1/tool_calls");
    let response = crate::http_api::client()
        .post(v1)
        .bearer_auth(GAMMA)
        .header("traceparent", traceparent(TRACE))
        .json(&batch)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    assert_eq!(continued(&seen, TRACE).as_deref(), Some(""));

    // No trace, or a malformed one: none is sent or written.
    let malformed = json!({"traceparent": "00-not-a-trace-01"});
    call(&served, "http_request", json!({"url": url}), malformed, &[]).await;
    assert_eq!(continued(&seen, TRACE), None);
    let record = audited(&served, "http_request").pop().unwrap();
    assert!(record.get("trace_id").is_none(), "{record}");
}
