//! Long calls as MCP tasks (the Tasks extension of 2026-07-28) through a
//! real server: a call of a client that declared tasks becomes one, is
//! polled with `tasks/get` to its result, asks its approval through
//! `tasks/update`, and is cancelled with its command gone and audited; the
//! official Python SDK's client polls one through a small extension.

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_handles::{ALPHA, Served, serve, stdout_of};

/// `[tasks]` that makes every call of a client that declared tasks one.
pub(crate) const EVERY_CALL: &str = "[tasks]\nafter = \"0s\"\npoll = \"50ms\"\n";

/// A 2026-07-28 request of `method` with `params` as `token`, declaring the
/// Tasks extension and `elicitation`; `name` goes in `Mcp-Name`. The
/// JSON-RPC answer.
pub(crate) async fn rpc(
    served: &Served,
    token: &str,
    method: &str,
    name: Option<&str>,
    params: Value,
) -> Value {
    let declared = json!({
        "extensions": {"io.modelcontextprotocol/tasks": {}},
        "elicitation": {"form": {}},
    });
    request(served, token, method, name, params, declared).await
}

/// [`rpc`] with `capabilities` as the client's.
async fn request(
    served: &Served,
    token: &str,
    method: &str,
    name: Option<&str>,
    mut params: Value,
    capabilities: Value,
) -> Value {
    let text = posted(served, token, method, name, &mut params, capabilities)
        .await
        .text()
        .await
        .unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// POSTs a 2026-07-28 request of `method` with `params` (given the
/// request's `_meta`) as `token`; the response, its body unread.
async fn posted(
    served: &Served,
    token: &str,
    method: &str,
    name: Option<&str>,
    params: &mut Value,
    capabilities: Value,
) -> reqwest::Response {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut request = crate::http_api::client()
        .post(&served.url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    request.body(body.to_string()).send().await.unwrap()
}

/// `run_command` of `command` as `token`; the result.
pub(crate) async fn run(served: &Served, token: &str, command: &str) -> Value {
    let params = json!({"name": "run_command", "arguments": {"command": command}});
    let answer = rpc(served, token, "tools/call", Some("run_command"), params).await;
    answer
        .get("result")
        .cloned()
        .unwrap_or_else(|| panic!("{answer}"))
}

/// The id of the task `result` is.
pub(crate) fn task_id(result: &Value) -> String {
    assert_eq!(result["resultType"], "task", "{result}");
    let id = result["taskId"].as_str().unwrap().to_string();
    assert!(id.starts_with("tk_"), "{id}");
    id
}

/// `tasks/METHOD` of task `id` as `token`, with `params`.
pub(crate) async fn task(served: &Served, token: &str, method: &str, id: &str) -> Value {
    let params = json!({"taskId": id});
    rpc(served, token, &format!("tasks/{method}"), Some(id), params).await
}

/// Waits up to 20 seconds for a process whose command line holds `marker`.
pub(crate) async fn started(marker: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while crate::processes_with(marker).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "{marker:?} never started"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Polls task `id` until its status is not `working`; its `tasks/get` result.
pub(crate) async fn poll(served: &Served, token: &str, id: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let answer = task(served, token, "get", id).await;
        let result = &answer["result"];
        if result["status"] != "working" {
            return result.clone();
        }
        assert!(std::time::Instant::now() < deadline, "{answer}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_long_command_becomes_a_task_that_is_polled_to_its_result() {
    let served = serve(EVERY_CALL, "").await;
    let created = run(&served, ALPHA, "sleep 0.3; echo done").await;
    let id = task_id(&created);
    assert_eq!(created["status"], "working", "{created}");
    assert_eq!(created["pollIntervalMs"], 50, "{created}");
    assert_eq!(created["ttlMs"], 3_600_000, "{created}");
    let done = poll(&served, ALPHA, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(stdout_of(&done["result"]), "done\n");
    // Polled again, the result is still there.
    let again = task(&served, ALPHA, "get", &id).await;
    assert_eq!(again["result"]["result"], done["result"], "{again}");
}

#[tokio::test]
async fn a_call_that_ends_before_after_is_answered_at_once() {
    let served = serve("[tasks]\nafter = \"20s\"\n", "").await;
    let result = run(&served, ALPHA, "echo quick").await;
    assert_ne!(result["resultType"], "task", "{result}");
    assert_eq!(stdout_of(&result), "quick\n");
    // A reload applies at once: now every call is a task.
    let file = served.root.join("toolhost.toml");
    let every = served.config.replace("after = \"20s\"", "after = \"0s\"");
    std::fs::write(&file, every).unwrap();
    served.host.reload_config(&file).unwrap();
    task_id(&run(&served, ALPHA, "echo quick").await);
}

#[tokio::test]
async fn a_tasks_approval_is_asked_by_its_status_and_answered_with_tasks_update() {
    let served = serve(
        "[profiles.asking]\nallow = [\"terminal:*\"]\napproval_required = [\"terminal:*\"]\n\
         file.write = [\".\"]\n[tenants.gamma]\nprofile = \"asking\"\nworkspace = \"alpha\"\n\
         token_sha256 = \"GAMMA\"\n[tasks]\nafter = \"0s\"\n",
        "",
    )
    .await;
    let gamma = crate::mcp_handles::GAMMA;
    let id = task_id(&run(&served, gamma, "echo approved").await);
    let asking = poll(&served, gamma, &id).await;
    assert_eq!(asking["status"], "input_required", "{asking}");
    let form = &asking["inputRequests"]["approval-1"];
    assert_eq!(form["method"], "elicitation/create", "{asking}");
    let answer = json!({"approval-1": {"action": "accept", "content": {"decision": "once"}}});
    let params = json!({"taskId": id, "inputResponses": answer});
    let ack = rpc(&served, gamma, "tasks/update", Some(&id), params).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let done = poll(&served, gamma, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(stdout_of(&done["result"]), "approved\n");
}

#[tokio::test]
async fn a_cancelled_task_kills_its_command_and_its_audit_record_says_cancelled() {
    let served = serve(&format!("audit = \"audit.log\"\n{EVERY_CALL}"), "").await;
    let marker = format!("tasks-cancel-{}", std::process::id());
    let command = format!("sleep 30; echo {marker}");
    let id = task_id(&run(&served, ALPHA, &command).await);
    started(&marker).await;
    let ack = task(&served, ALPHA, "cancel", &id).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let cancelled = task(&served, ALPHA, "get", &id).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    crate::assert_gone(&marker).await;
    // The call's audit record says it was cancelled, and by whom.
    let audit = served.root.join("audit.log");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let record = loop {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains(&id)) {
            break serde_json::from_str::<Value>(line).unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no audit record: {text}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(record["outcome"], "cancelled", "{record}");
    assert_eq!(record["tool"], "run_command", "{record}");
    let error = record["error"].as_str().unwrap();
    assert!(error.contains("cancelled by the client"), "{record}");
    // Cancelling again, or a task that ended, is the same empty answer.
    let again = task(&served, ALPHA, "cancel", &id).await;
    assert_eq!(again["result"]["resultType"], "complete", "{again}");
}

#[tokio::test]
async fn the_python_sdk_polls_a_task_to_its_result() {
    let served = serve(EVERY_CALL, "").await;
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join("target/python-venv/bin/python3");
    let output = tokio::process::Command::new(&python)
        .arg(root.join("tests/all/mcp_sdk_tasks.py"))
        .args([&served.url, ALPHA, "run_command"])
        .arg(json!({"command": "sleep 0.5; echo from-a-task"}).to_string())
        .env("NO_PROXY", "*")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(answer["version"], "2026-07-28", "{answer}");
    let tasks = answer["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{answer}");
    assert!(tasks[0]["taskId"].as_str().unwrap().starts_with("tk_"));
    assert!(answer["polls"].as_u64().unwrap() >= 1, "{answer}");
    assert_eq!(stdout_of(&answer["result"]), "from-a-task\n");
}

#[tokio::test]
async fn a_tasks_status_message_is_its_latest_progress_report() {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(
        toolhost_tests::CONFORMANCE,
        plugins.path().join("conformance.wasm"),
    )
    .unwrap();
    let top = format!(
        "plugins = {:?}\n{EVERY_CALL}",
        plugins.path().display().to_string()
    );
    let served = serve(&top, "").await;
    let params = json!({"name": "test_tool_with_progress", "arguments": {}});
    let name = Some("test_tool_with_progress");
    let created = rpc(&served, ALPHA, "tools/call", name, params).await;
    let id = task_id(&created["result"]);
    let done = poll(&served, ALPHA, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["statusMessage"], "100/100: Completed step 100 of 100",
        "{done}"
    );
}

/// A 2026-07-28 request of `method` as alpha that declares no extension.
async fn undeclared(served: &Served, method: &str, name: Option<&str>, params: Value) -> Value {
    request(served, ALPHA, method, name, params, json!({})).await
}

#[tokio::test]
async fn tasks_are_advertised_and_only_a_client_that_declared_them_gets_one() {
    let served = serve(EVERY_CALL, "").await;
    let discovered = undeclared(&served, "server/discover", None, json!({})).await;
    let extensions = &discovered["result"]["capabilities"]["extensions"];
    assert!(
        extensions.get("io.modelcontextprotocol/tasks").is_some(),
        "{discovered}"
    );
    // Without the extension: the call's result, never a task.
    let params = json!({"name": "run_command", "arguments": {"command": "sleep 0.2; echo plain"}});
    let answer = undeclared(&served, "tools/call", Some("run_command"), params).await;
    assert_ne!(answer["result"]["resultType"], "task", "{answer}");
    assert_eq!(stdout_of(&answer["result"]), "plain\n");
    // And tasks/* is refused as needing the extension.
    let id = task_id(&run(&served, ALPHA, "echo mine").await);
    let get = undeclared(&served, "tasks/get", Some(&id), json!({"taskId": id})).await;
    assert_eq!(get["error"]["code"], -32021, "{get}");
}

/// The text of the refusal of a call of `run_command` as `token` that
/// cannot be asked for approval.
async fn refusal(served: &Served, token: &str) -> Value {
    let params = json!({"name": "run_command", "arguments": {"command": "echo x"}});
    let answer = request(
        served,
        token,
        "tools/call",
        Some("run_command"),
        params,
        json!({}),
    )
    .await;
    answer["result"]["content"][0]["text"].clone()
}

#[tokio::test]
async fn an_approval_answered_after_the_profile_changed_does_not_let_the_task_go_on() {
    let asking = "[profiles.asking]\nallow = [\"terminal:*\"]\napproval_required = \
                  [\"terminal:*\"]\nfile.write = [\".\"]\n";
    let served = serve(
        &format!(
            "{asking}[tenants.gamma]\nprofile = \"asking\"\nworkspace = \"alpha\"\n\
             token_sha256 = \"GAMMA\"\n{EVERY_CALL}"
        ),
        "",
    )
    .await;
    let gamma = crate::mcp_handles::GAMMA;
    let id = task_id(&run(&served, gamma, "echo ran > ran.txt").await);
    assert_eq!(poll(&served, gamma, &id).await["status"], "input_required");
    // The profile changes (commands now refused); the tenants follow the
    // reload a moment later: a fresh call's refusal says so.
    let before = refusal(&served, gamma).await;
    let changed = served.config.replace(
        "allow = [\"terminal:*\"]\napproval_required = [\"terminal:*\"]",
        "deny = [\"terminal:*\"]",
    );
    assert_ne!(changed, served.config);
    let file = served.root.join("toolhost.toml");
    std::fs::write(&file, &changed).unwrap();
    served.host.reload_config(&file).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while refusal(&served, gamma).await == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the tenants did not follow"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let once = json!({"approval-1": {"action": "accept", "content": {"decision": "once"}}});
    let params = json!({"taskId": id, "inputResponses": once});
    let answered = rpc(&served, gamma, "tasks/update", Some(&id), params).await;
    let message = answered["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("configuration changed"), "{answered}");
    let done = task(&served, gamma, "get", &id).await;
    assert_eq!(done["result"]["status"], "cancelled", "{done}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !served.root.join("alpha/ran.txt").exists(),
        "the task's command ran"
    );
}

/// Over stdio too: a 2026-07-28 request that declares tasks gets a task
/// for a long `run_command`, polled with `tasks/get` on the same pipe to
/// its result, and another cancelled with `tasks/cancel` (its command gone).
#[test]
fn over_stdio_a_long_command_becomes_a_task_polled_to_its_result_or_cancelled() {
    use crate::protocol::{Stdio, workspace};
    crate::use_launcher();
    let (_dir, root) = workspace(&format!(
        "{}{EVERY_CALL}[profiles.p]\nallow = [\"terminal:*\"]\nfile.read = [\".\"]\n",
        "plugins = \"plugins\"\ndefault_profile = \"p\"\naudit = \"off\"\n"
    ));
    let mut server = Stdio::start(&root, &[]);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    });
    let mut id = 0;
    let mut ask = |server: &mut Stdio, method: &str, params: Value| {
        id += 1;
        let mut params = params;
        params["_meta"] = meta.clone();
        server.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let answer = server.answer();
            if answer["id"] == id {
                return answer;
            }
        }
    };
    let marker = format!("stdio-task-{}", std::process::id());
    let mut start = |server: &mut Stdio, command: &str| {
        let created = ask(
            server,
            "tools/call",
            json!({"name": "run_command", "arguments": {"command": command}}),
        );
        task_id(&created["result"])
    };
    let done = start(&mut server, "sleep 0.3; echo done");
    // Told of it on a `subscriptions/listen` under the client's id (the
    // transport gives rmcp ids of its own).
    let mut params = json!({"notifications": {"taskIds": [done]}});
    params["_meta"] = meta.clone();
    server.send(&json!({"jsonrpc": "2.0", "id": "listen-1",
                        "method": "subscriptions/listen", "params": params}));
    let told = loop {
        let message = server.answer();
        if message["method"] == "notifications/tasks" {
            break message;
        }
    };
    let subscription = told["params"]["_meta"]
        .as_object()
        .and_then(|meta| meta.iter().find(|(key, _)| key.ends_with("subscriptionId")))
        .map(|(_, id)| id.clone());
    assert_eq!(subscription, Some(json!("listen-1")), "{told}");
    let cancelled = start(&mut server, &format!("sleep 30; echo {marker}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let result = loop {
        let got = ask(&mut server, "tasks/get", json!({"taskId": done}));
        if got["result"]["status"] != "working" {
            break got["result"].clone();
        }
        assert!(std::time::Instant::now() < deadline, "{got}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(stdout_of(&result["result"]), "done\n");
    while crate::processes_with(&marker).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "{marker} never started"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
    let answer = ask(&mut server, "tasks/cancel", json!({"taskId": cancelled}));
    assert!(answer.get("error").is_none(), "{answer}");
    let got = ask(&mut server, "tasks/get", json!({"taskId": cancelled}));
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !crate::processes_with(&marker).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the cancelled command runs on"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Reads `stream` until its text holds each of `needles` (`Ok(text)`), or
/// `wait` passes or it ends (`Err` with what came).
async fn read_for(
    stream: &mut reqwest::Response,
    needles: &[&str],
    wait: Duration,
) -> Result<String, String> {
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if needles.iter().all(|needle| text.contains(needle)) {
            return Ok(text);
        }
        match tokio::time::timeout_at(deadline, stream.chunk()).await {
            Ok(Ok(Some(chunk))) => text.push_str(&String::from_utf8_lossy(&chunk)),
            _ => return Err(text),
        }
    }
}

/// A `subscriptions/listen` stream of `token` for tasks `ids`, by a client
/// with `capabilities`.
async fn listen_for(
    served: &Served,
    token: &str,
    ids: &[&str],
    capabilities: Value,
) -> reqwest::Response {
    let mut params = json!({"notifications": {"taskIds": ids}});
    posted(
        served,
        token,
        "subscriptions/listen",
        None,
        &mut params,
        capabilities,
    )
    .await
}

#[tokio::test]
async fn a_client_listening_for_its_task_is_told_its_status_and_another_tenant_is_not() {
    use crate::mcp_handles::BETA;
    let served = serve(EVERY_CALL, "").await;
    let marker = format!("0.8{}1", std::process::id());
    let created = run(&served, ALPHA, &format!("sleep {marker}; echo done")).await;
    let id = task_id(&created);
    let declared = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    // Named three times, it is told once each time.
    let mut alpha = listen_for(&served, ALPHA, &[&id, &id, &id], declared.clone()).await;
    let mut beta = listen_for(&served, BETA, &[&id], declared).await;
    // Its state now, then its end with its result, as tasks/get shows it.
    let told = read_for(
        &mut alpha,
        &[
            "notifications/tasks",
            "\"status\":\"working\"",
            "\"status\":\"completed\"",
            "stdout\\\":\\\"done",
        ],
        Duration::from_secs(30),
    )
    .await
    .unwrap_or_else(|text| panic!("alpha was not told: {text}"));
    assert!(told.contains(&id), "{told}");
    assert!(told.contains("subscriptionId"), "{told}");
    let more = read_for(&mut alpha, &["never"], Duration::from_millis(500)).await;
    let told = told + &more.unwrap_or_else(|text| text);
    assert_eq!(
        told.matches("\"method\":\"notifications/tasks\"").count(),
        2,
        "{told}"
    );
    // Beta's stream, naming alpha's task, hears nothing of it.
    let heard = read_for(&mut beta, &["notifications/tasks"], Duration::from_secs(1)).await;
    let heard = match heard {
        Ok(text) => panic!("beta was told: {text}"),
        Err(text) => text,
    };
    assert!(!heard.contains(&id), "{heard}");
    // A client that did not declare the extension is told nothing either.
    let mut plain = listen_for(&served, ALPHA, &[&id], json!({})).await;
    let heard = read_for(&mut plain, &["notifications/tasks"], Duration::from_secs(1)).await;
    assert!(heard.is_err(), "{heard:?}");
}

#[tokio::test]
async fn a_notice_counts_in_answers_held_and_past_it_is_not_sent() {
    // The task's 40 kB result is held once; a notice with it would hold it
    // twice, past the 64 KiB cap: the stream is told it works, not its end.
    let served = serve(
        &format!("{EVERY_CALL}[tenant_caps]\nanswers_held = \"64KiB\"\n"),
        "",
    )
    .await;
    let line = "sleep 0.5; head -c 40000 /dev/zero | tr '\\0' a";
    let id = task_id(&run(&served, ALPHA, line).await);
    let declared = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let mut alpha = listen_for(&served, ALPHA, &[&id], declared).await;
    let told = read_for(
        &mut alpha,
        &["\"status\":\"working\""],
        Duration::from_secs(10),
    )
    .await;
    assert!(told.is_ok(), "{told:?}");
    let done = poll_status(&served, ALPHA, &id).await;
    assert_ne!(done, "working");
    let later = read_for(
        &mut alpha,
        &["\"status\":\"completed\""],
        Duration::from_secs(2),
    )
    .await;
    assert!(later.is_err(), "a notice past answers_held was sent");
}

/// Polls task `id` until it is not `working`; its status (a poll refused
/// for answers_held reads as the refusal's text).
async fn poll_status(served: &Served, token: &str, id: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let answer = task(served, token, "get", id).await;
        let status = answer["result"]["status"].as_str().unwrap_or_default();
        if status != "working" {
            return if status.is_empty() {
                answer.to_string()
            } else {
                status.to_string()
            };
        }
        assert!(std::time::Instant::now() < deadline, "{answer}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
