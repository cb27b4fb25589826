//! Handles, `input_required` and `subscriptions/listen` (MCP 2026-07-28)
//! against other tenants and conversations: one tenant's open streams never
//! take the connections another needs; a handle dropped past the cap gives
//! back its plugin instance, so new conversations still get state.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use toolhost::Host;
use toolhost::config::{Config, ConfigSource};
use toolhost::serve::http::{HttpServer, ServeOptions};

use crate::http_api::sha256_hex;

const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}"#;

/// A server of tenants `a` and `b` with `max_connections` slots; its address.
async fn serve(max_connections: usize) -> (std::net::SocketAddr, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    for workspace in ["a", "b"] {
        std::fs::create_dir_all(root.join(workspace)).unwrap();
    }
    let text = format!(
        "default_profile = \"p\"\n[profiles.p]\nallow = [\"file:read\"]\nfile.read = [\".\"]\n\
         [tenants.a]\ntoken_sha256 = \"{}\"\nprofile = \"p\"\nworkspace = \"a\"\n\
         [tenants.b]\ntoken_sha256 = \"{}\"\nprofile = \"p\"\nworkspace = \"b\"\n",
        sha256_hex("tok-a"),
        sha256_hex("tok-b"),
    );
    let config = Config::parse(&text, ConfigSource::Embedded, &root).unwrap();
    let host = Host::builder()
        .config(&config)
        .unwrap()
        .build()
        .await
        .unwrap();
    let options = ServeOptions {
        max_connections,
        ..ServeOptions::default()
    };
    let server = HttpServer::bind(host, "127.0.0.1:0", options)
        .await
        .unwrap();
    let addr = server.local_addr();
    tokio::spawn(async move { server.run(std::future::pending()).await.unwrap() });
    (addr, dir)
}

/// A `subscriptions/listen` stream of `token` on a connection of its own,
/// with the first bytes of its answer (empty when none came in 3 s).
async fn listen(addr: std::net::SocketAddr, token: &str) -> (tokio::net::TcpStream, String) {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},"_meta":{META}}}}}"#
    );
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: subscriptions/listen\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 2048];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while !String::from_utf8_lossy(&seen).contains("acknowledged")
        && !String::from_utf8_lossy(&seen).contains("\r\n\r\n{")
    {
        match tokio::time::timeout_at(deadline, socket.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    (socket, String::from_utf8_lossy(&seen).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenants_listen_streams_never_take_the_connections_another_needs() {
    let (addr, _dir) = serve(12).await;
    let mut held = Vec::new();
    let mut refused = String::new();
    for _ in 0..16 {
        let (socket, seen) = listen(addr, "tok-a").await;
        if seen.contains("acknowledged") {
            held.push(socket);
        } else {
            refused = seen;
            break;
        }
    }
    assert!(
        held.len() < 12 && refused.starts_with("HTTP/1.1 429"),
        "tenant a holds {} of 12 connections with listen streams; then: {refused:?}",
        held.len()
    );
    assert!(refused.contains("--max-connections"), "{refused}");
    let answer = crate::http_api::client()
        .post(format!("http://{addr}/mcp"))
        .bearer_auth("tok-b")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
            "params": {"_meta": serde_json::from_str::<serde_json::Value>(META).unwrap()}}))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("tenant b is answered while tenant a holds its streams");
    assert!(answer.status().is_success(), "{}", answer.status());
    // A stream closed gives its place back.
    drop(held.pop());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (socket, seen) = listen(addr, "tok-a").await;
        if seen.contains("acknowledged") {
            held.push(socket);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{seen}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A 2026-07-28 `tools/call` of `todo` by `token` without a handle (a new
/// conversation); the JSON-RPC answer.
async fn new_conversation(url: &str, token: &str, n: usize) -> serde_json::Value {
    let arguments = json!({"action": "add", "text": format!("item {n}")});
    modern_call(url, token, "todo", arguments).await
}

/// A 2026-07-28 `tools/call` of `tool` by `token`; the JSON-RPC answer.
async fn modern_call(
    url: &str,
    token: &str,
    tool: &str,
    arguments: serde_json::Value,
) -> serde_json::Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments,
        "_meta": serde_json::from_str::<serde_json::Value>(META).unwrap()}});
    let text = crate::http_api::client()
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn a_tenants_new_conversations_past_its_handle_cap_still_get_state() {
    let served = crate::mcp_handles::serve("", "").await;
    for n in 0..70 {
        let answer = new_conversation(&served.url, crate::mcp_handles::ALPHA, n).await;
        assert_eq!(
            answer["result"]["isError"],
            json!(false),
            "new conversation {n}: {answer}"
        );
    }
}

/// The handle a 2026-07-28 answer carries, if any.
fn handle_in(answer: &serde_json::Value) -> Option<String> {
    answer["result"]["_meta"]["dev.toolhost/handle"]
        .as_str()
        .map(String::from)
}

/// The hex of the random part of a handle's text, as anyone reading the
/// text can take it (bytes 8..24 of its base64url body).
fn nonce_hex(handle: &str) -> String {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(handle.strip_prefix("th_").unwrap())
        .unwrap();
    bytes[8..24].iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn a_v1_session_name_reaches_no_handles_or_mcp_sessions_state() {
    let served = crate::mcp_handles::serve("", "").await;
    let token = crate::mcp_handles::ALPHA;
    let secret = json!({"action": "add", "text": "the handle's secret"});
    let answer = modern_call(&served.url, token, "todo", secret).await;
    let handle = handle_in(&answer).unwrap_or_else(|| panic!("{answer}"));
    let v1 = served.url.replace("/mcp", "/v1");
    let list = json!([{"id": "l", "type": "function", "function": {"name": "todo",
        "arguments": "{\"action\":\"list\"}"}}]);
    for session in [format!("h:{}", nonce_hex(&handle)), "mcp-0-0".to_string()] {
        let calls = json!({"session": session, "tool_calls": list});
        let response = crate::http_api::client()
            .post(format!("{v1}/tool_calls"))
            .bearer_auth(token)
            .json(&calls)
            .send()
            .await
            .unwrap();
        let (status, body) = crate::http_api::parse(response).await;
        assert!(!body.to_string().contains("secret"), "{session}: {body}");
        assert_eq!(
            status,
            reqwest::StatusCode::BAD_REQUEST,
            "{session}: {body}"
        );
        assert!(
            body.to_string().contains("toolhost's own"),
            "{session}: {body}"
        );
        let narrow = json!({"session": session, "deny": ["file:write"]});
        let response = crate::http_api::client()
            .post(format!("{v1}/sessions"))
            .bearer_auth(token)
            .json(&narrow)
            .send()
            .await
            .unwrap();
        let (status, body) = crate::http_api::parse(response).await;
        assert_eq!(
            status,
            reqwest::StatusCode::BAD_REQUEST,
            "{session}: {body}"
        );
    }
    // The handle still holds its item.
    let list = json!({"action": "list", "handle": handle});
    let answer = modern_call(&served.url, token, "todo", list).await;
    assert!(
        answer.to_string().contains("the handle's secret"),
        "{answer}"
    );
}

#[tokio::test]
async fn calls_refused_before_they_run_neither_make_nor_evict_a_handle() {
    let served = crate::mcp_handles::serve("", "max_handles_per_tenant = 2").await;
    let token = crate::mcp_handles::ALPHA;
    let mut kept = Vec::new();
    for n in 0..2 {
        let answer = new_conversation(&served.url, token, n).await;
        kept.push(handle_in(&answer).unwrap_or_else(|| panic!("{answer}")));
    }
    // Arguments the schemas refuse: nothing runs, so nothing is kept.
    for n in 0..5 {
        let bad = json!({"action": n});
        let answer = modern_call(&served.url, token, "todo", bad).await;
        assert_eq!(answer["result"]["isError"], json!(true), "{answer}");
        assert_eq!(handle_in(&answer), None, "{answer}");
        let denied = json!({"command": n});
        let answer = modern_call(&served.url, token, "run_command", denied).await;
        assert_eq!(answer["result"]["isError"], json!(true), "{answer}");
        assert_eq!(handle_in(&answer), None, "{answer}");
    }
    for (n, handle) in kept.iter().enumerate() {
        let list = json!({"action": "list", "handle": handle});
        let answer = modern_call(&served.url, token, "todo", list).await;
        assert!(
            answer.to_string().contains(&format!("item {n}")),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn a_new_terminal_conversation_past_the_tenants_share_ends_the_least_recently_used() {
    let served = crate::mcp_handles::serve("", "").await;
    let token = crate::mcp_handles::ALPHA;
    let mut handles = Vec::new();
    for n in 0..20 {
        let command = json!({"command": format!("echo {n}")});
        let answer = modern_call(&served.url, token, "run_command", command).await;
        assert_eq!(answer["result"]["isError"], json!(false), "{n}: {answer}");
        handles.push(handle_in(&answer).unwrap());
    }
    // The first conversations gave their terminals to the newest ones and
    // say so; the newest still have theirs.
    let first = json!({"command": "true", "handle": handles[0]});
    let answer = modern_call(&served.url, token, "run_command", first).await;
    let text = answer.to_string();
    assert!(
        text.contains("state_lost") && text.contains("terminal"),
        "{answer}"
    );
    let last = json!({"command": "true", "handle": handles[19]});
    let answer = modern_call(&served.url, token, "run_command", last).await;
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
}
