//! Attack tests: tenants (see mod.rs). Everything a tenant can make a real
//! `toolhost serve --http` hold is capped per tenant, the cap's refusal
//! names it, and another tenant is served meanwhile: narrowed sessions and
//! their size and idle time, pending approvals, approval event streams, MCP
//! sessions, background output, a line written to a shell, webhook
//! answers, batch and MCP answers not yet sent; terminal sessions share one
//! inotify instance, and a server that cannot watch starts anyway.

pub(crate) mod served;

mod answers;
mod bounded;
mod cpu_share;
mod flood;
mod narrowed;
mod request_memory;
mod revoked;
mod stalled;
mod unread;
mod waited;
mod watching;

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use served::{Served, Setup, resident, sha256_hex};

pub(crate) const A: &str = "a-token";
pub(crate) const B: &str = "b-token";

/// Tenants `a` and `b` with their own workspaces, writes needing approval,
/// `[tenant_caps]` set to `caps` (left out when empty), `a_extra` added to
/// tenant `a`.
pub(crate) fn config(caps: &str, a_extra: &str) -> String {
    let caps = if caps.is_empty() {
        String::new()
    } else {
        format!("[tenant_caps]\n{caps}\n")
    };
    format!(
        r#"
plugins = "plugins"
default_profile = "worker"
audit = "off"

[approvals]
timeout = "60s"

{caps}
[profiles.worker]
allow = ["file:*", "terminal:*"]
file.write = ["."]
approval_required = ["file:write"]
terminal.max_output = "1MiB"

[tenants.a]
token_sha256 = "{a}"
profile = "worker"
workspace = "a"
{a_extra}

[tenants.b]
token_sha256 = "{b}"
profile = "worker"
workspace = "b"
"#,
        a = sha256_hex(A),
        b = sha256_hex(B),
    )
}

pub(crate) fn start(caps: &str) -> Served {
    crate::use_launcher();
    Served::start(&config(caps, ""), &["a", "b"])
}

/// `{"session": id, "deny": deny}` posted to `/v1/sessions` as `token`.
pub(super) async fn narrow(
    served: &Served,
    token: &str,
    session: &str,
    deny: &[String],
) -> (StatusCode, Value) {
    let body = json!({ "session": session, "deny": deny });
    served.post("/v1/sessions", token, &body).await
}

#[tokio::test]
async fn one_tenant_filling_its_narrowings_leaves_another_tenants_alone() {
    let served = start("");
    let deny = vec!["network:*".to_string()];
    let mut refused = None;
    for n in 0..4096 {
        let (status, body) = narrow(&served, A, &format!("s{n}"), &deny).await;
        if status != StatusCode::OK {
            refused = Some((n, status, body));
            break;
        }
    }
    let (n, status, body) = refused.expect("tenant a narrowed 4096 sessions");
    assert_eq!(n, 256, "refused at its cap: {body}");
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    let message = body["error"].as_str().unwrap();
    assert!(
        message.contains("tenant_caps.narrowed_sessions = 256"),
        "{message}"
    );
    // Tenant b narrows, and a narrows its own sessions further.
    let (status, body) = narrow(&served, B, "mine", &deny).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = narrow(&served, A, "s0", &["file:write".into()]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_huge_narrowing_is_refused_without_growing_the_server() {
    let served = start("");
    // About 625 KiB of patterns, 41 times into one session.
    let patterns: Vec<String> = (0..20_000)
        .map(|n| format!("plugin{n:05}:permission-x"))
        .collect();
    let before = resident(served.pid());
    for _ in 0..41 {
        let (status, body) = narrow(&served, A, "big", &patterns).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
        let message = body["error"].as_str().unwrap();
        assert!(message.contains("limit of 256 per session"), "{message}");
    }
    let grown = resident(served.pid()).saturating_sub(before);
    assert!(grown < 64 << 20, "the server grew by {} MiB", grown >> 20);
    // Tenant b's calls go on.
    let echoed = served
        .call(B, None, "echo", json!({ "text": "still here" }))
        .await;
    assert_eq!(echoed["text"], "still here");
}

#[tokio::test]
async fn an_idle_narrowing_is_forgotten_and_its_session_refused_not_widened() {
    let served = start("narrowing_idle = \"1s\"");
    let (status, body) = narrow(&served, A, "quiet", &["terminal:*".into()]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let run = served::batch(Some("quiet"), "run_command", &json!({"command": "true"}));
    let deadline = Instant::now() + Duration::from_secs(10);
    let message = loop {
        let (status, answer) = served.post("/v1/tool_calls", A, &run).await;
        if status == StatusCode::BAD_REQUEST {
            break answer["error"].as_str().unwrap().to_string();
        }
        // Until it expires the session is narrowed: the command is refused.
        assert!(answer.to_string().contains("terminal:*"), "{answer}");
        assert!(Instant::now() < deadline, "the narrowing never expired");
        tokio::time::sleep(Duration::from_millis(1200)).await;
    };
    assert!(
        message.contains("tenant_caps.narrowing_idle = 1s"),
        "{message}"
    );
}

/// Starts a `write_file` call as `token` (which waits for approval).
pub(super) fn write_in_background(
    served: &Served,
    token: &'static str,
    session: Option<&str>,
    path: &str,
) -> tokio::task::JoinHandle<Value> {
    let client = served.client.clone();
    let url = format!("{}/v1/tool_calls", served.base);
    let body = served::batch(
        session,
        "write_file",
        &json!({"path": path, "content": "x"}),
    );
    tokio::spawn(async move {
        let response = client.post(url).bearer_auth(token).json(&body).send().await;
        let body: Value = response.unwrap().json().await.unwrap();
        let content = body["tool_results"][0]["content"].as_str().unwrap();
        serde_json::from_str(content).unwrap()
    })
}

/// Waits until `token` has `n` pending approvals; their ids.
pub(super) async fn pending(served: &Served, token: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = served.get("/v1/approvals", token).await;
        let list = body["approvals"].as_array().cloned().unwrap_or_default();
        if list.len() == n {
            return list
                .iter()
                .map(|a| a["id"].as_str().unwrap().to_string())
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "{token} never had {n} pending: {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_tenants_pending_approvals_are_capped_and_another_still_asks() {
    let served = start("pending_approvals = 2");
    let first = [
        write_in_background(&served, A, None, "1"),
        write_in_background(&served, A, None, "2"),
    ];
    pending(&served, A, 2).await;
    let refused = write_in_background(&served, A, None, "3").await.unwrap();
    let message = refused["error"].as_str().unwrap_or_default();
    assert!(
        message.contains("tenant_caps.pending_approvals = 2"),
        "{refused}"
    );
    // Tenant b is asked.
    let theirs = write_in_background(&served, B, None, "b");
    let id = pending(&served, B, 1).await.remove(0);
    let (status, _) = served
        .post(
            &format!("/v1/approvals/{id}"),
            B,
            &json!({"decision": "once"}),
        )
        .await;
    assert!(status.is_success());
    let written = theirs.await.unwrap();
    assert!(written.get("error").is_none(), "{written}");
    for id in pending(&served, A, 2).await {
        served
            .post(
                &format!("/v1/approvals/{id}"),
                A,
                &json!({"decision": "deny"}),
            )
            .await;
    }
    for call in first {
        call.await.unwrap();
    }
}

#[tokio::test]
async fn a_tenants_event_streams_are_capped() {
    let served = start("event_streams = 2");
    let open = |token: &str| {
        served
            .client
            .get(format!("{}/v1/approvals/events", served.base))
            .bearer_auth(token)
            .send()
    };
    let kept = [open(A).await.unwrap(), open(A).await.unwrap()];
    assert!(kept.iter().all(|r| r.status() == StatusCode::OK));
    let refused = open(A).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let body: Value = refused.json().await.unwrap();
    let message = body["error"].as_str().unwrap();
    assert!(
        message.contains("tenant_caps.event_streams = 2"),
        "{message}"
    );
    assert_eq!(open(B).await.unwrap().status(), StatusCode::OK);
}

/// A POST of `body` to `/mcp` as `token` (in `session`), as a 2025-06-18
/// client sends it.
pub(super) fn mcp_request(
    served: &Served,
    token: &str,
    session: Option<&str>,
    body: &Value,
) -> reqwest::RequestBuilder {
    let request = served
        .client
        .post(format!("{}/mcp", served.base))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(body);
    match session {
        Some(session) => request.header("mcp-session-id", session),
        None => request,
    }
}

/// `initialize` on `/mcp` as `token`: the response.
async fn initialize(served: &Served, token: &str) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    served
        .client
        .post(format!("{}/mcp", served.base))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_tenants_mcp_sessions_are_capped() {
    let served = start("mcp_sessions = 2");
    let mut ids = Vec::new();
    for _ in 0..2 {
        let response = initialize(&served, A).await;
        assert_eq!(response.status(), StatusCode::OK);
        ids.push(
            response.headers()["mcp-session-id"]
                .to_str()
                .unwrap()
                .to_string(),
        );
    }
    let refused = initialize(&served, A).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let body: Value = refused.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("tenant_caps.mcp_sessions = 2"),
        "{message}"
    );
    assert_eq!(initialize(&served, B).await.status(), StatusCode::OK);
    // A session closed makes room.
    let closed = served
        .client
        .delete(format!("{}/mcp", served.base))
        .bearer_auth(A)
        .header("mcp-session-id", &ids[0])
        .send()
        .await
        .unwrap();
    assert!(closed.status().is_success(), "{closed:?}");
    assert_eq!(initialize(&served, A).await.status(), StatusCode::OK);
}

/// Starts `line` in the background of `session` as `token`; its id.
async fn start_process(served: &Served, token: &str, session: &str, line: &str) -> u64 {
    let started = served
        .call(
            token,
            Some(session),
            "process_start",
            json!({ "command": line }),
        )
        .await;
    started["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("{started}"))
}

/// Waits until every background process of `session` has ended.
async fn all_ended(served: &Served, token: &str, session: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = served
            .call(token, Some(session), "process_list", json!({}))
            .await;
        let processes = listed["processes"].as_array().cloned().unwrap_or_default();
        if processes.iter().all(|p| p["running"] == false) {
            return;
        }
        assert!(Instant::now() < deadline, "still running: {listed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_tenants_background_output_is_capped_all_together() {
    let mut served = start("background_output = \"64KiB\"");
    let print = "head -c 200000 /dev/zero | tr '\\0' x";
    let ids = [
        start_process(&served, A, "s", print).await,
        start_process(&served, A, "t", print).await,
    ];
    let theirs = start_process(&served, B, "s", "head -c 50000 /dev/zero | tr '\\0' y").await;
    all_ended(&served, A, "s").await;
    all_ended(&served, A, "t").await;
    all_ended(&served, B, "s").await;
    let mut kept = 0;
    let mut dropped = 0;
    for (id, session) in ids.into_iter().zip(["s", "t"]) {
        let output = served
            .call(A, Some(session), "process_output", json!({ "id": id }))
            .await;
        kept += output["stdout"].as_str().unwrap().len();
        dropped += output["dropped"].as_u64().unwrap();
    }
    assert!(kept <= 64 << 10, "tenant a kept {kept} bytes unread");
    assert_eq!(kept as u64 + dropped, 400_000);
    served.wait_for("tenant_caps.background_output");
    // Tenant b's output is its own.
    let output = served
        .call(B, Some("s"), "process_output", json!({ "id": theirs }))
        .await;
    assert_eq!(output["stdout"].as_str().unwrap().len(), 50_000, "{output}");
}

#[tokio::test]
async fn a_line_written_to_a_shell_without_its_end_is_capped() {
    let served = start("");
    let id = start_process(&served, A, "s", "bash").await;
    let input = format!("echo {}", "a".repeat(70_000));
    let written = served
        .call(
            A,
            Some("s"),
            "process_write",
            json!({ "id": id, "input": input }),
        )
        .await;
    let message = written["error"].as_str().unwrap_or_default();
    assert!(message.contains("limit of 65536 bytes"), "{written}");
    let input = "echo short\n";
    let written = served
        .call(
            A,
            Some("s"),
            "process_write",
            json!({ "id": id, "input": input }),
        )
        .await;
    assert!(written.get("error").is_none(), "{written}");
}

#[tokio::test]
async fn a_webhook_answering_without_end_is_read_no_further_than_its_cap() {
    let hook = flood::EndlessHook::start(512 << 20).await;
    let a_extra = format!(
        "approvals = {{ webhook = \"{}\", secret_env = \"ATTACK_HOOK_SECRET\" }}",
        hook.url
    );
    crate::use_launcher();
    let mut served = Served::launch(Setup {
        config: &config("", &a_extra),
        dirs: &["a", "b"],
        env: &[("ATTACK_HOOK_SECRET", "s")],
        ..Setup::default()
    });
    let before = resident(served.pid());
    let call = write_in_background(&served, A, None, "hooked");
    let id = pending(&served, A, 1).await.remove(0);
    hook.wait_until_called().await;
    served.wait_for("the approvals webhook's answer was not read");
    let grown = resident(served.pid()).saturating_sub(before);
    assert!(grown < 64 << 20, "the server grew by {} MiB", grown >> 20);
    assert!(
        hook.sent() < 32 << 20,
        "the server read {} MiB of the answer",
        hook.sent() >> 20
    );
    // The approval is still answered through the API.
    served
        .post(
            &format!("/v1/approvals/{id}"),
            A,
            &json!({"decision": "deny"}),
        )
        .await;
    let refused = call.await.unwrap();
    assert!(
        refused.to_string().contains("was not approved"),
        "{refused}"
    );
}

#[tokio::test]
async fn an_oversized_narrowing_in_initialize_keeps_no_permission() {
    let served = start("");
    let deny: Vec<String> = (0..300).map(|n| format!("p{n}:x")).collect();
    let post = |session: Option<&str>, body: Value| mcp_request(&served, A, session, &body).send();
    let opened = post(
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"experimental": {"toolhost": {"narrow": {"deny": deny}}}},
            "clientInfo": {"name": "t", "version": "1"}}}),
    )
    .await
    .unwrap();
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(Some(&session), initialized).await.unwrap();
    let listed = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await
    .unwrap();
    // A JSON body, or one server-sent event with it.
    let text = listed.text().await.unwrap();
    let json = text
        .lines()
        .find_map(|line| line.strip_prefix("data:"))
        .unwrap_or(&text);
    let listed: Value = serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"read_file"), "{names:?}");
    assert!(!names.contains(&"run_command"), "{names:?}");
    assert!(
        names.contains(&"echo"),
        "tools without permissions stay: {names:?}"
    );
}
