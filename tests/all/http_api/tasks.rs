//! `/v1` tasks: a batch with `"async": true` is answered `202` with task
//! ids at once; `GET /v1/tasks/{id}` polls one to its result, `GET
//! /v1/tasks` lists the caller's, `DELETE /v1/tasks/{id}` cancels one (its
//! command gone); another tenant's token finds none of them; a batch past
//! the tenant's cap is refused whole, before anything runs.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{client, parse};
use crate::mcp_handles::{ALPHA, Served, serve};
use crate::mcp_tasks::EVERY_CALL;

const BETA: &str = "beta-token";

/// `METHOD /v1/PATH` as `token`, with `body`.
async fn v1(
    served: &Served,
    method: &str,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let url = served.url.replace("/mcp", &format!("/v1{path}"));
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = client().request(method, url).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    parse(request.send().await.unwrap()).await
}

/// An async batch of `run_command` of each of `commands`, as `token`.
async fn start(served: &Served, token: &str, commands: &[&str]) -> (StatusCode, Value) {
    let calls: Vec<Value> = commands
        .iter()
        .enumerate()
        .map(|(i, command)| {
            json!({"id": format!("call_{i}"), "type": "function", "function": {
                "name": "run_command", "arguments": json!({"command": command}).to_string()}})
        })
        .collect();
    let batch = json!({"async": true, "tool_calls": calls});
    v1(served, "POST", "/tool_calls", token, Some(batch)).await
}

fn ids(body: &Value) -> Vec<String> {
    body["tool_results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["task_id"].as_str().unwrap().to_string())
        .collect()
}

/// Polls task `id` until it is not `working`.
async fn poll(served: &Served, token: &str, id: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, task) = v1(served, "GET", &format!("/tasks/{id}"), token, None).await;
        assert_eq!(status, StatusCode::OK, "{task}");
        if task["status"] != "working" {
            return task;
        }
        assert!(std::time::Instant::now() < deadline, "{task}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn stdout(result: &Value) -> String {
    let content: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    content["stdout"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn an_async_batch_answers_with_task_ids_that_are_polled_to_their_results() {
    let served = serve(EVERY_CALL, "").await;
    let started = std::time::Instant::now();
    let (status, body) = start(&served, ALPHA, &["sleep 2; echo one", "echo two"]).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the answer waited for the calls"
    );
    assert_eq!(body["tool_results"][0]["tool_call_id"], "call_0", "{body}");
    assert_eq!(body["tool_results"][0]["status"], "working", "{body}");
    let ids = ids(&body);
    let (_, listed) = v1(&served, "GET", "/tasks", ALPHA, None).await;
    let listed: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.iter().all(|id| listed.contains(&id.as_str())),
        "{listed:?}"
    );
    for (i, (id, out)) in ids.iter().zip(["one\n", "two\n"]).enumerate() {
        let done = poll(&served, ALPHA, id).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(
            done["result"]["tool_call_id"],
            format!("call_{i}"),
            "{done}"
        );
        assert_eq!(stdout(&done["result"]), out, "{done}");
    }
}

#[tokio::test]
async fn delete_cancels_a_task_and_kills_its_command_and_other_tenants_find_nothing() {
    let served = serve(EVERY_CALL, "").await;
    let marker = format!("v1-tasks-cancel-{}", std::process::id());
    let (status, body) = start(&served, ALPHA, &[&format!("sleep 30; echo {marker}")]).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let id = ids(&body).remove(0);
    crate::mcp_tasks::started(&marker).await;
    // Another tenant: not found, the same answer as an id nobody made.
    let (unknown_status, unknown) = v1(&served, "GET", "/tasks/tk_nothing", BETA, None).await;
    assert_eq!(unknown_status, StatusCode::NOT_FOUND);
    for method in ["GET", "DELETE"] {
        let (status, body) = v1(&served, method, &format!("/tasks/{id}"), BETA, None).await;
        assert_eq!(
            (status, &body),
            (StatusCode::NOT_FOUND, &unknown),
            "{method}"
        );
    }
    let (_, listed) = v1(&served, "GET", "/tasks", BETA, None).await;
    assert_eq!(listed, json!({"tasks": []}));
    assert!(
        !crate::processes_with(&marker).is_empty(),
        "the other tenant's cancel ended it"
    );
    // Its owner cancels it: the command goes.
    let (status, cancelled) = v1(&served, "DELETE", &format!("/tasks/{id}"), ALPHA, None).await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    crate::assert_gone(&marker).await;
}

#[tokio::test]
async fn an_async_batch_past_the_cap_is_refused_whole_before_it_runs() {
    let served = serve(&format!("{EVERY_CALL}max_per_tenant = 2\n"), "").await;
    let (status, body) = start(
        &served,
        ALPHA,
        &["echo a > a.txt", "echo b > b.txt", "echo c > c.txt"],
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("too_many_tasks: "),
        "{body}"
    );
    let (_, listed) = v1(&served, "GET", "/tasks", ALPHA, None).await;
    assert_eq!(listed, json!({"tasks": []}));
    tokio::time::sleep(Duration::from_millis(200)).await;
    for file in ["a.txt", "b.txt", "c.txt"] {
        assert!(
            !served.root.join("alpha").join(file).exists(),
            "{file} was written"
        );
    }
}

#[tokio::test]
async fn a_task_keeps_no_tool_name_longer_than_a_tools() {
    let served = serve(EVERY_CALL, "").await;
    let call = json!({"id": "c", "type": "function", "function": {
        "name": "x".repeat(3 << 20), "arguments": "{}"}});
    let batch = json!({"async": true, "tool_calls": [call]});
    let (status, body) = v1(&served, "POST", "/tool_calls", ALPHA, Some(batch)).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "{}",
        &body.to_string()[..200]
    );
    assert!(body.to_string().len() < 1024, "the refusal echoes the name");
    let (_, listed) = v1(&served, "GET", "/tasks", ALPHA, None).await;
    assert_eq!(listed["tasks"], json!([]), "{listed}");
}

/// A tenant removed from the configuration, or given another token (the
/// name now another customer's), no longer owns its tasks: the running one
/// is cancelled and its command killed, and whoever holds the name next
/// lists, reads and cancels none of them. A tenant left as it was keeps its
/// own.
#[tokio::test]
async fn a_removed_or_re_keyed_tenants_tasks_are_ended_and_reach_no_later_holder_of_its_name() {
    use crate::mcp_handles::GAMMA;
    let served = serve(EVERY_CALL, "").await;
    let marker = format!("v1-tasks-removed-{}", std::process::id());
    let (_, body) = start(&served, BETA, &["echo old-beta-secret"]).await;
    let done = ids(&body).remove(0);
    assert_eq!(poll(&served, BETA, &done).await["status"], "completed");
    let (_, body) = start(&served, BETA, &[&format!("sleep 30; echo {marker}")]).await;
    let running = ids(&body).remove(0);
    let (_, body) = start(&served, ALPHA, &["echo alpha-kept"]).await;
    let alphas = ids(&body).remove(0);
    crate::mcp_tasks::started(&marker).await;
    let file = served.root.join("toolhost.toml");
    for text in [
        // Re-keyed: the name `beta` now belongs to whoever holds GAMMA.
        served
            .config
            .replace(&super::sha256_hex(BETA), &super::sha256_hex(GAMMA)),
        // Removed, then added again for another customer.
        served.config.replace("[tenants.beta]", "[tenants.gone]"),
        served
            .config
            .replace(&super::sha256_hex(BETA), &super::sha256_hex(GAMMA)),
    ] {
        std::fs::write(&file, &text).unwrap();
        served.host.reload_config(&file).unwrap();
        // Who holds a token now: GAMMA as `beta`, or BETA as `gone`.
        let token = if text.contains("[tenants.gone]") {
            BETA
        } else {
            GAMMA
        };
        // The server takes the new tenants in once it hears of the reload.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (status, listed) = v1(&served, "GET", "/tasks", token, None).await;
            if status == StatusCode::OK {
                assert_eq!(listed, json!({"tasks": []}), "{text}");
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{status} {listed}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for id in [&done, &running] {
            for method in ["GET", "DELETE"] {
                let (status, body) =
                    v1(&served, method, &format!("/tasks/{id}"), token, None).await;
                assert_eq!(status, StatusCode::NOT_FOUND, "{method} {body}");
                assert!(!body.to_string().contains("old-beta-secret"), "{body}");
            }
        }
        crate::assert_gone(&marker).await;
    }
    assert_eq!(poll(&served, ALPHA, &alphas).await["status"], "completed");
}

/// A request of a token being rotated out, authenticated before the reload
/// and its body read after it (within the body timeout), makes no task:
/// the new holder of the name finds none, and the old holder is told to
/// send it again.
#[tokio::test]
async fn a_request_of_a_rotated_out_token_read_across_the_reload_makes_no_task() {
    use crate::mcp_handles::GAMMA;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let served = serve(EVERY_CALL, "").await;
    let batch = json!({"async": true, "tool_calls": [{"id": "call_0", "type": "function",
        "function": {"name": "run_command",
        "arguments": json!({"command": "echo from-the-old-token"}).to_string()}}]})
    .to_string();
    let address = served
        .url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST /v1/tool_calls HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {BETA}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        batch.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&batch.as_bytes()[..20]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let file = served.root.join("toolhost.toml");
    let text = served
        .config
        .replace(&super::sha256_hex(BETA), &super::sha256_hex(GAMMA));
    std::fs::write(&file, &text).unwrap();
    served.host.reload_config(&file).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while v1(&served, "GET", "/tasks", GAMMA, None).await.0 != StatusCode::OK {
        assert!(std::time::Instant::now() < deadline, "GAMMA never accepted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stream.write_all(&batch.as_bytes()[20..]).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(!answer.contains("task_id"), "{answer}");
    assert!(answer.contains("send it again"), "{answer}");
    let (status, listed) = v1(&served, "GET", "/tasks", GAMMA, None).await;
    assert_eq!((status, listed), (StatusCode::OK, json!({"tasks": []})));
}
