//! Approvals for tenants of the HTTP API: pending approvals answered through
//! the API by a second request (the tenant's token or the approver's),
//! through a signed webhook, watched as server-sent events, denied on
//! timeout, and `always` kept per tenant across a restart.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use reqwest::StatusCode;
use serde_json::{Value, json};
use toolhost::serve::http::ServeOptions;

use super::{Server, batch, sha256_hex};

const SECRET_VAR: &str = "TOOLHOST_TEST_APPROVALS_HOOK_SECRET";

/// Tenants `alpha` and `beta` whose writes need approval, and `hooked`,
/// whose approvals go to a webhook at `hook`.
fn config(allowlist: &std::path::Path, hook: &str, timeout: &str) -> String {
    format!(
        r#"
default_profile = "writer"
[approvals]
timeout = "{timeout}"
allowlist = "{allowlist}"
approver_token_sha256 = "{approver}"

[profiles.writer]
allow = ["file:*"]
file.write = ["."]
approval_required = ["file:write"]

[tenants.alpha]
token_sha256 = "{alpha}"
profile = "writer"
workspace = "alpha"

[tenants.beta]
token_sha256 = "{beta}"
profile = "writer"
workspace = "beta"

[tenants.hooked]
token_sha256 = "{hooked}"
profile = "writer"
workspace = "gamma"
approvals = {{ webhook = "{hook}", secret_env = "{SECRET_VAR}" }}
"#,
        allowlist = allowlist.display(),
        approver = sha256_hex("approver-token"),
        alpha = sha256_hex("alpha-token"),
        beta = sha256_hex("beta-token"),
        hooked = sha256_hex("hooked-token"),
    )
}

async fn start(allowlist: &std::path::Path, hook: &str, timeout: &str) -> Arc<Server> {
    // SAFETY: set before any server reads it; every test sets the same value.
    unsafe { std::env::set_var(SECRET_VAR, "hook-secret") };
    Arc::new(Server::start(&config(allowlist, hook, timeout), ServeOptions::default()).await)
}

/// Starts a `write` call as `token` in the background; its result content.
fn write_in_background(
    server: &Arc<Server>,
    token: &'static str,
    path: &'static str,
) -> tokio::task::JoinHandle<Value> {
    let server = server.clone();
    tokio::spawn(async move {
        let (status, body) = server
            .post(
                "/v1/tool_calls",
                Some(token),
                &batch(&[("write", json!({"path": path, "content": "x"}))]),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["tool_results"][0].clone()
    })
}

/// Waits until `token` sees `n` pending approvals; returns them.
async fn pending(server: &Server, token: &str, n: usize) -> Vec<Value> {
    for _ in 0..200 {
        let (status, body) = server.get("/v1/approvals", Some(token)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let list = body["approvals"].as_array().unwrap().clone();
        if list.len() == n {
            return list;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{token} never saw {n} pending approvals");
}

async fn answer(server: &Server, token: &str, id: &str, decision: &str) -> StatusCode {
    let path = format!("/v1/approvals/{id}");
    server
        .post(&path, Some(token), &json!({ "decision": decision }))
        .await
        .0
}

/// Runs one call as `token` in `session`; its result.
async fn in_session(
    server: &Server,
    token: &str,
    session: &str,
    tool: &str,
    arguments: Value,
) -> Value {
    let response = server
        .client
        .post(server.url("/v1/tool_calls"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("toolhost-session", session)
        .body(batch(&[(tool, arguments)]).to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = super::parse(response).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["tool_results"][0].clone()
}

/// The error of a call's result, if it failed.
fn error_of(result: &Value) -> Option<String> {
    let content: Value = serde_json::from_str(result["content"].as_str()?).ok()?;
    content["error"].as_str().map(String::from)
}

fn no_hook() -> String {
    "http://127.0.0.1:9/unused".into()
}

#[tokio::test]
async fn a_tenants_call_waits_for_an_answer_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir.path().join("approvals.json"), &no_hook(), "20s").await;

    let call = write_in_background(&server, "alpha-token", "approved.txt");
    let listed = pending(&server, "alpha-token", 1).await;
    let approval = &listed[0];
    assert_eq!(approval["tenant"], "alpha");
    assert_eq!(approval["tool"], "write");
    assert_eq!(approval["subject"]["permission"], "file:write");
    let id = approval["id"].as_str().unwrap();
    // Another tenant neither sees nor answers it; the approver sees it.
    assert!(pending(&server, "beta-token", 0).await.is_empty());
    assert_eq!(
        answer(&server, "beta-token", id, "once").await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(pending(&server, "approver-token", 1).await[0]["id"], *id);
    assert_eq!(
        answer(&server, "alpha-token", id, "perhaps").await,
        StatusCode::BAD_REQUEST
    );

    assert_eq!(
        answer(&server, "alpha-token", id, "once").await,
        StatusCode::OK
    );
    let result = call.await.unwrap();
    assert!(error_of(&result).is_none(), "{result}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("alpha/approved.txt")).unwrap(),
        "x"
    );
    // Answered: gone from the list, and a second answer finds nothing.
    assert!(pending(&server, "alpha-token", 0).await.is_empty());
    assert_eq!(
        answer(&server, "alpha-token", id, "once").await,
        StatusCode::NOT_FOUND
    );

    // `once` was once: the next write asks again, and the approver denies.
    let call = write_in_background(&server, "alpha-token", "denied.txt");
    let id = pending(&server, "alpha-token", 1).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        answer(&server, "approver-token", &id, "deny").await,
        StatusCode::OK
    );
    let result = call.await.unwrap();
    let content = result["content"].as_str().unwrap_or_default();
    assert!(content.contains("was not approved"), "{result}");
    assert!(!server.root.join("alpha/denied.txt").exists());
}

#[tokio::test]
async fn no_answer_in_time_denies_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir.path().join("approvals.json"), &no_hook(), "1s").await;
    let result = write_in_background(&server, "alpha-token", "late.txt")
        .await
        .unwrap();
    let content = result["content"].as_str().unwrap_or_default();
    assert!(content.contains("no answer came within 1s"), "{result}");
    assert!(!server.root.join("alpha/late.txt").exists());
    assert!(pending(&server, "alpha-token", 0).await.is_empty());
}

#[tokio::test]
async fn always_is_kept_for_that_tenant_only_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let allowlist = dir.path().join("approvals.json");
    {
        let server = start(&allowlist, &no_hook(), "20s").await;
        let call = write_in_background(&server, "alpha-token", "a.txt");
        let id = pending(&server, "alpha-token", 1).await[0]["id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            answer(&server, "alpha-token", &id, "always").await,
            StatusCode::OK
        );
        assert!(error_of(&call.await.unwrap()).is_none());
    }
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&allowlist).unwrap()).unwrap();
    assert_eq!(
        kept["tenants"]["alpha"],
        json!(["tool write file:write"]),
        "{kept}"
    );
    assert_eq!(kept["approved"], json!([]), "{kept}");

    let server = start(&allowlist, &no_hook(), "20s").await;
    // alpha is not asked again.
    let result = write_in_background(&server, "alpha-token", "b.txt")
        .await
        .unwrap();
    assert!(error_of(&result).is_none(), "{result}");
    assert!(server.root.join("alpha/b.txt").exists());
    // beta is.
    let call = write_in_background(&server, "beta-token", "b.txt");
    let id = pending(&server, "beta-token", 1).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        answer(&server, "beta-token", &id, "deny").await,
        StatusCode::OK
    );
    call.await.unwrap();
    assert!(!server.root.join("beta/b.txt").exists());
}

/// A webhook that refuses its first delivery, then checks the signature and
/// answers `once`; it keeps what it received.
async fn hook() -> (String, Arc<Mutex<Vec<(Value, bool)>>>) {
    let got: Arc<Mutex<Vec<(Value, bool)>>> = Arc::default();
    let seen = got.clone();
    let router = Router::new().route(
        "/hook",
        post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let seen = seen.clone();
            async move {
                let expected = toolhost::approval::webhook::signature(b"hook-secret", &body);
                let signed = headers
                    .get(toolhost::approval::webhook::SIGNATURE_HEADER)
                    .is_some_and(|v| v.as_bytes() == expected.as_bytes());
                let mut seen = seen.lock().unwrap();
                seen.push((serde_json::from_slice(&body).unwrap(), signed));
                if seen.len() == 1 {
                    return (StatusCode::SERVICE_UNAVAILABLE, "not yet".to_string());
                }
                let decision = if signed { "once" } else { "deny" };
                (StatusCode::OK, json!({ "decision": decision }).to_string())
            }
        }),
    );
    let addr = crate::network::serve(crate::network::listener().await, router).await;
    (format!("http://{addr}/hook"), got)
}

#[tokio::test]
async fn a_signed_webhook_answers_after_a_retry() {
    let dir = tempfile::tempdir().unwrap();
    let (url, got) = hook().await;
    let server = start(&dir.path().join("approvals.json"), &url, "20s").await;
    let result = write_in_background(&server, "hooked-token", "hooked.txt")
        .await
        .unwrap();
    assert!(error_of(&result).is_none(), "{result}");
    assert!(server.root.join("gamma/hooked.txt").exists());
    let received = got.lock().unwrap().clone();
    assert_eq!(received.len(), 2, "one refused delivery, one retry");
    let (body, signed) = &received[1];
    assert!(signed, "the signature verifies");
    assert_eq!(body["tenant"], "hooked");
    assert_eq!(body["subject"]["permission"], "file:write");
    assert_eq!(
        received[0].0["id"], body["id"],
        "the retry is the same approval"
    );
    // Other tenants' approvals do not go to this webhook.
    let call = write_in_background(&server, "alpha-token", "x.txt");
    let id = pending(&server, "alpha-token", 1).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    answer(&server, "alpha-token", &id, "deny").await;
    call.await.unwrap();
    assert_eq!(
        got.lock().unwrap().len(),
        2,
        "alpha's approval was not sent"
    );
}

#[tokio::test]
async fn pending_approvals_are_streamed_as_server_sent_events() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir.path().join("approvals.json"), &no_hook(), "20s").await;
    let mut events = server
        .client
        .get(server.url("/v1/approvals/events"))
        .bearer_auth("alpha-token")
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    assert!(
        events.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let call = write_in_background(&server, "alpha-token", "streamed.txt");
    // beta's approval is not on alpha's stream.
    let other = write_in_background(&server, "beta-token", "other.txt");
    let mut text = String::new();
    let read_until = async |events: &mut reqwest::Response, text: &mut String, what: &str| {
        while !text.contains(what) {
            let chunk = tokio::time::timeout(Duration::from_secs(10), events.chunk())
                .await
                .expect("an event in time")
                .unwrap()
                .expect("the stream stays open");
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    read_until(&mut events, &mut text, "event: approval").await;
    let data = text
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap()
        .to_string();
    let approval: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(approval["tenant"], "alpha");
    let id = approval["id"].as_str().unwrap();
    answer(&server, "alpha-token", id, "once").await;
    read_until(&mut events, &mut text, "event: resolved").await;
    assert!(error_of(&call.await.unwrap()).is_none());
    assert!(!text.contains("\"beta\""), "{text}");
    let id = pending(&server, "beta-token", 1).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    answer(&server, "beta-token", &id, "deny").await;
    other.await.unwrap();
}

#[tokio::test]
async fn a_session_narrowed_to_read_only_cannot_write_although_its_profile_can() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir.path().join("approvals.json"), &no_hook(), "20s").await;
    let (status, body) = server
        .post(
            "/v1/sessions",
            Some("alpha-token"),
            &json!({"session": "ro", "deny": ["file:write"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let offered: Vec<&str> = body["offered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"read") && !offered.contains(&"write"),
        "{offered:?}"
    );

    let result = in_session(
        &server,
        "alpha-token",
        "ro",
        "write",
        json!({"path": "ro.txt", "content": "x"}),
    )
    .await;
    let error = error_of(&result).expect("refused");
    assert!(error.contains("not available in this session"), "{error}");
    assert!(!server.root.join("alpha/ro.txt").exists());
    // Nobody was asked: the narrowing refused before any approval.
    assert!(pending(&server, "alpha-token", 0).await.is_empty());
    // A narrowing that widens is still only a narrowing.
    let (status, _) = server
        .post(
            "/v1/sessions",
            Some("alpha-token"),
            &json!({"session": "ro", "allow": ["*"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let again = write_in_background(&server, "alpha-token", "other.txt");
    // Without the session header the profile applies: the write is asked.
    let id = pending(&server, "alpha-token", 1).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    answer(&server, "alpha-token", &id, "deny").await;
    again.await.unwrap();
    let (status, _) = server
        .post(
            "/v1/sessions",
            Some("alpha-token"),
            &json!({"session": "x", "allow": ["Bad!"]}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn narrowing_a_session_remakes_what_it_holds_under_the_old_rules() {
    crate::use_launcher();
    let dir = tempfile::tempdir().unwrap();
    let config = config(&dir.path().join("approvals.json"), &no_hook(), "20s").replace(
        "allow = [\"file:*\"]\nfile.write = [\".\"]\napproval_required = [\"file:write\"]",
        "allow = [\"file:*\", \"terminal:*\"]\nfile.write = [\".\"]",
    );
    assert!(config.contains("terminal:*"));
    unsafe { std::env::set_var(SECRET_VAR, "hook-secret") };
    let server = Server::start(&config, ServeOptions::default()).await;
    let run = |line: &str| json!({"command": line});

    // A terminal session, started with the write grant.
    let first = in_session(
        &server,
        "alpha-token",
        "t",
        "run_command",
        run("echo 1 > one.txt"),
    )
    .await;
    assert!(error_of(&first).is_none(), "{first}");
    assert!(server.root.join("alpha/one.txt").exists());

    let (status, body) = server
        .post(
            "/v1/sessions",
            Some("alpha-token"),
            &json!({"session": "t", "deny": ["file:write"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The same session's terminal now sees the workspace read-only.
    let second = in_session(
        &server,
        "alpha-token",
        "t",
        "run_command",
        run("echo 2 > two.txt"),
    )
    .await;
    let content: Value = serde_json::from_str(second["content"].as_str().unwrap()).unwrap();
    assert_ne!(content["exit_code"], 0, "{second}");
    assert!(!server.root.join("alpha/two.txt").exists());
    let read = in_session(
        &server,
        "alpha-token",
        "t",
        "run_command",
        run("cat one.txt"),
    )
    .await;
    let content: Value = serde_json::from_str(read["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["stdout"], "1\n", "{read}");

    // A stateful plugin's instance made before the narrowing is made again
    // (its list starts empty); after it, state carries from call to call.
    let todo = async |arguments: Value| {
        let result = in_session(&server, "alpha-token", "s", "todo", arguments).await;
        serde_json::from_str::<Value>(result["content"].as_str().unwrap()).unwrap()
    };
    todo(json!({"action": "add", "text": "before"})).await;
    assert_eq!(todo(json!({"action": "list"})).await["total"], 1);
    let (status, _) = server
        .post(
            "/v1/sessions",
            Some("alpha-token"),
            &json!({"session": "s", "deny": ["network:*"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(todo(json!({"action": "list"})).await["total"], 0);
    todo(json!({"action": "add", "text": "after"})).await;
    todo(json!({"action": "add", "text": "again"})).await;
    assert_eq!(todo(json!({"action": "list"})).await["total"], 2);

    // beta's session of the same id is not narrowed.
    let other = in_session(
        &server,
        "beta-token",
        "t",
        "run_command",
        run("echo 3 > three.txt"),
    )
    .await;
    assert!(error_of(&other).is_none(), "{other}");
    assert!(server.root.join("beta/three.txt").exists());
}

#[tokio::test]
async fn the_build_dirs_rules_answer_a_tenants_deletes_over_http() {
    crate::use_launcher();
    let dir = tempfile::tempdir().unwrap();
    let config = config(&dir.path().join("approvals.json"), &no_hook(), "20s")
        .replace(
            "approver_token_sha256",
            "auto = [\"build-dirs\"]\napprover_token_sha256",
        )
        .replace(
            "allow = [\"file:*\"]\nfile.write = [\".\"]\napproval_required = [\"file:write\"]",
            "allow = [\"file:*\", \"terminal:*\"]\nfile.write = [\".\"]\nterminal.dangerous = \"approve\"",
        );
    assert!(config.contains("build-dirs") && config.contains("terminal.dangerous"));
    unsafe { std::env::set_var(SECRET_VAR, "hook-secret") };
    let server = Arc::new(Server::start(&config, ServeOptions::default()).await);
    for dir in ["alpha/node_modules/pkg", "alpha/src"] {
        std::fs::create_dir_all(server.root.join(dir)).unwrap();
    }
    let run = |line: &'static str| {
        let server = server.clone();
        tokio::spawn(async move {
            let (status, body) = server
                .post(
                    "/v1/tool_calls",
                    Some("alpha-token"),
                    &batch(&[("run_command", json!({ "command": line }))]),
                )
                .await;
            assert_eq!(status, StatusCode::OK, "{body}");
            body["tool_results"][0].clone()
        })
    };

    // Approved by the rule: nothing is pending, the directory is gone.
    let removed = run("rm -rf node_modules").await.unwrap();
    assert!(error_of(&removed).is_none(), "{removed}");
    assert!(!server.root.join("alpha/node_modules").exists());
    assert!(pending(&server, "alpha-token", 0).await.is_empty());

    // src is asked about; denied, it stays.
    let call = run("rm -rf src");
    let approval = pending(&server, "alpha-token", 1).await.remove(0);
    assert_eq!(approval["subject"]["command"], "rm -rf src");
    let id = approval["id"].as_str().unwrap();
    assert_eq!(
        answer(&server, "alpha-token", id, "deny").await,
        StatusCode::OK
    );
    let refused = call.await.unwrap();
    assert!(
        refused.to_string().contains("was not approved"),
        "{refused}"
    );
    assert!(server.root.join("alpha/src").exists());
}
