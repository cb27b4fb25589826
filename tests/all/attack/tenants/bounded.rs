//! Tenant `a` at a cap of what it grows in shared structures (the audit
//! log through its call and session ids, the stateful sessions' memory, the
//! allowlist through `always` answers on long lines) is refused with the
//! cap's name, while tenant `b`'s calls go on.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::served::{Served, batch};
use super::{A, B, config};

fn audited(caps: &str) -> Served {
    crate::use_launcher();
    let text = config(caps, "").replace("audit = \"off\"", "audit = \"audit.jsonl\"");
    Served::start(&text, &["a", "b"])
}

fn audit_bytes(served: &Served) -> u64 {
    std::fs::metadata(served.path("audit.jsonl")).map_or(0, |m| m.len())
}

/// The `content` of the first result of a batch posted as `token`.
async fn first_result(served: &Served, token: &str, body: &Value) -> Value {
    let (status, answer) = served.post("/v1/tool_calls", token, body).await;
    // A batch whose calls all came back busy is answered 429.
    assert!(
        [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS].contains(&status),
        "{answer}"
    );
    let content = answer["tool_results"][0]["content"].as_str().unwrap();
    serde_json::from_str(content).unwrap_or_else(|_| json!({ "error": content }))
}

#[tokio::test]
async fn long_call_and_session_ids_are_refused_at_the_edge() {
    let served = audited("");
    let mut long_id = batch(None, "echo", &json!({ "text": "x" }));
    long_id["tool_calls"][0]["id"] = json!("i".repeat(100_000));
    let mut long_session = batch(Some(&"s".repeat(50_000)), "echo", &json!({ "text": "x" }));
    long_session["tool_calls"][0]["id"] = json!("call_1");
    for (what, body) in [("call id", long_id), ("session id", long_session)] {
        let result = first_result(&served, A, &body).await;
        let error = result["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(what) && error.contains("256"),
            "{what}: {result}"
        );
    }
    let fine = first_result(
        &served,
        A,
        &batch(Some("s1"), "echo", &json!({ "text": "x" })),
    )
    .await;
    assert!(fine.get("error").is_none(), "{fine}");
    let size = audit_bytes(&served);
    assert!(size < 8 << 10, "the audit log grew to {size} bytes");
}

#[tokio::test]
async fn a_tenant_at_its_audit_cap_leaves_the_others_audited() {
    let served = audited("audit_per_minute = \"16KiB\"");
    let id = "i".repeat(250);
    let mut refused = None;
    for n in 0..400 {
        let mut body = batch(
            Some(&"s".repeat(250)),
            "echo",
            &json!({ "text": n.to_string() }),
        );
        body["tool_calls"][0]["id"] = json!(id);
        let result = first_result(&served, A, &body).await;
        if let Some(error) = result["error"].as_str() {
            refused = Some(error.to_string());
            break;
        }
    }
    let refused = refused.expect("tenant a was never refused");
    assert!(
        refused.contains("tenant_caps.audit_per_minute"),
        "{refused}"
    );
    let before = audit_bytes(&served);
    assert!(before < 24 << 10, "the audit log grew to {before} bytes");
    let mut body = batch(None, "echo", &json!({ "text": "b" }));
    body["tool_calls"][0]["id"] = json!("b-call");
    let started = std::time::Instant::now();
    let result = first_result(&served, B, &body).await;
    assert!(result.get("error").is_none(), "{result}");
    assert!(started.elapsed() < Duration::from_secs(2));
    let log = std::fs::read_to_string(served.path("audit.jsonl")).unwrap();
    assert!(
        log.contains("\"call_id\":\"b-call\""),
        "b's call was not audited"
    );
}

#[tokio::test]
async fn a_tenant_at_its_share_of_sessions_memory_leaves_room_for_others() {
    crate::use_launcher();
    let text = config("", "").replace(
        "audit = \"off\"",
        "audit = \"off\"\nsessions_memory = \"24MiB\"",
    );
    let served = Served::start(&text, &["a", "b"]);
    let add = json!({ "action": "add", "text": "x".repeat(200_000) });
    let mut refusal = None;
    'sessions: for n in 0..60 {
        let session = format!("a{n}");
        for _ in 0..4 {
            let result = served.call(A, Some(&session), "todo", add.clone()).await;
            if let Some(error) = result["error"].as_str() {
                refusal = Some(error.to_string());
                break 'sessions;
            }
        }
    }
    let refusal = refusal.expect("tenant a never hit a cap");
    assert!(refusal.contains("tenant_caps.sessions_memory"), "{refusal}");
    for session in ["b1", "b2"] {
        let result = served.call(B, Some(session), "todo", add.clone()).await;
        assert!(result.get("error").is_none(), "{session}: {result}");
    }
}

#[tokio::test]
async fn idle_keep_alive_connections_do_not_keep_callers_out() {
    use std::io::{Read, Write};
    crate::use_launcher();
    let text = config("", "");
    let served = Served::launch(super::served::Setup {
        config: &text,
        dirs: &["a", "b"],
        args: &["--max-connections", "8"],
        ..Default::default()
    });
    let addr = served.base.trim_start_matches("http://").to_string();
    // Every slot held by a connection that sent one request (no token) and
    // stays open, idle between requests.
    let mut held = Vec::new();
    for _ in 0..8 {
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        let request = format!("GET /v1/health HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut answer = [0u8; 1024];
        let n = stream.read(&mut answer).unwrap();
        let head = String::from_utf8_lossy(&answer[..n]);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        held.push(stream);
    }
    let started = std::time::Instant::now();
    let call = served.call(B, None, "echo", json!({ "text": "b" }));
    let result = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("tenant b was kept out by idle connections");
    assert!(result.get("error").is_none(), "{result}");
    assert!(started.elapsed() < Duration::from_secs(2));
    drop(held);
}
