//! Approvals asked of a client without sessions through `input_required`,
//! with the official Python SDK's default client and raw requests: the
//! parked call goes on with the answer; a request state that was altered,
//! replayed, or sent with other arguments or by another tenant is refused.

use serde_json::{Value, json};

use crate::mcp_handles::{DELTA, GAMMA, Sdk, Served, error_of, serve, stdout_of};

/// What the SDK driver sends for `run_command` of `command` as tenant
/// gamma, answering an approval it is asked with `answer`.
fn asked(answer: &str, command: &str) -> Value {
    json!({"token": GAMMA, "answer": answer, "tool": "run_command",
           "arguments": {"command": command}})
}

#[tokio::test]
async fn an_approval_is_asked_through_input_required_and_bound_to_its_answer() {
    let served = serve(
        "[profiles.asking]\nallow = [\"terminal:*\"]\napproval_required = [\"terminal:*\"]\n\
         file.write = [\".\"]\n[tenants.gamma]\nprofile = \"asking\"\nworkspace = \"alpha\"\n\
         token_sha256 = \"GAMMA\"\n",
        "",
    )
    .await;
    let mut sdk = Sdk::start(&served.url);
    // Allowed once: the call waits for the answer, then runs.
    let ran = sdk.send(asked("once", "echo approved")).await;
    assert_eq!(stdout_of(&ran), "approved\n", "{ran}");
    // Refused: the call is refused before anything runs.
    let refused = sdk.send(asked("deny", "echo refused")).await;
    let text = error_of(&refused);
    assert!(
        text.contains("declined") && !text.contains("refused\n"),
        "{refused}"
    );
    // An answer outside the form's choices refuses too.
    let odd = sdk.send(asked("session", "echo odd")).await;
    assert!(error_of(&odd).contains("declined"), "{odd}");
    // A client that cannot be asked is refused, saying so.
    let unasked = sdk
        .call(GAMMA, "run_command", json!({"command": "echo unasked"}))
        .await;
    assert!(error_of(&unasked).contains("elicitation"), "{unasked}");
}

/// A `tools/call` of `run_command` as a 2026-07-28 request that declares
/// elicitation, as `token`, with `extra` params (`requestState`,
/// `inputResponses`); the JSON-RPC answer.
async fn raw_call(served: &Served, token: &str, command: &str, extra: Value) -> Value {
    let mut params = json!({
        "name": "run_command",
        "arguments": {"command": command},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        },
    });
    for (key, value) in extra.as_object().unwrap() {
        params[key] = value.clone();
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(&served.url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "run_command")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn a_request_state_is_refused_altered_replayed_for_other_arguments_or_another_tenant() {
    let asking = "[profiles.asking]\nallow = [\"terminal:*\"]\napproval_required = \
                  [\"terminal:*\"]\nfile.read = [\".\"]\n[tenants.gamma]\nprofile = \"asking\"\nworkspace = \
                  \"alpha\"\ntoken_sha256 = \"GAMMA\"\n[tenants.delta]\nprofile = \"asking\"\n\
                  workspace = \"beta\"\ntoken_sha256 = \"DELTA\"\n";
    let served = serve(asking, "").await;
    let first = raw_call(&served, GAMMA, "echo one", json!({})).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let state = result["requestState"].as_str().unwrap().to_string();
    let key = result["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let once = json!({key.clone(): {"action": "accept", "content": {"decision": "once"}}});
    let answer = |state: &str| json!({"requestState": state, "inputResponses": once.clone()});
    let refused = |answer: &Value| {
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("invalid requestState"),
            "{answer}"
        );
    };
    // Altered, for other arguments, of another tenant: one error.
    let mut altered: Vec<char> = state.chars().collect();
    let at = altered.len() - 3;
    altered[at] = if altered[at] == 'A' { 'B' } else { 'A' };
    let altered: String = altered.into_iter().collect();
    refused(&raw_call(&served, GAMMA, "echo one", answer(&altered)).await);
    refused(&raw_call(&served, GAMMA, "echo two", answer(&state)).await);
    refused(&raw_call(&served, DELTA, "echo one", answer(&state)).await);
    // The right answer runs the call, once.
    let done = raw_call(&served, GAMMA, "echo one", answer(&state)).await;
    assert_eq!(done["result"]["isError"], json!(false), "{done}");
    assert_eq!(stdout_of(&done["result"]), "one\n");
    refused(&raw_call(&served, GAMMA, "echo one", answer(&state)).await);
}

#[tokio::test]
async fn a_dangerous_command_asked_from_inside_the_guest_is_asked_the_same_way() {
    let served = serve(
        "[profiles.careful]\nallow = [\"terminal:*\"]\nfile.read = [\".\"]\n\
         terminal.dangerous = \"approve\"\n[tenants.gamma]\nprofile = \"careful\"\n\
         workspace = \"alpha\"\ntoken_sha256 = \"GAMMA\"\n",
        "",
    )
    .await;
    let mut sdk = Sdk::start(&served.url);
    // Not dangerous: nobody is asked.
    let plain = sdk.send(asked("deny", "echo plain")).await;
    assert_eq!(stdout_of(&plain), "plain\n");
    let ran = sdk
        .send(asked("once", "rm -rf nothing-here; echo removed"))
        .await;
    assert_eq!(stdout_of(&ran), "removed\n", "{ran}");
    let refused = sdk
        .send(asked("deny", "rm -rf nothing-here; echo removed"))
        .await;
    let text = error_of(&refused);
    assert!(text.contains("declined"), "{refused}");
}

#[tokio::test]
async fn a_call_parked_before_a_reload_that_tightens_its_profile_does_not_run() {
    let careful = "[profiles.careful]\nallow = [\"terminal:*\"]\nfile.read = [\".\"]\n\
                   file.write = [\".\"]\nterminal.dangerous = \"approve\"\n[tenants.gamma]\n\
                   profile = \"careful\"\nworkspace = \"alpha\"\ntoken_sha256 = \"GAMMA\"\n";
    let served = serve(careful, "").await;
    let victim = served.root.join("alpha/victim");
    std::fs::create_dir_all(&victim).unwrap();
    let command = "rm -rf victim; echo gone";
    let first = raw_call(&served, GAMMA, command, json!({})).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let key = first["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    // The profile tightened: dangerous commands refused, the workspace
    // read-only. The tenants follow the reload a moment later.
    let tightened = served.config.replace(
        "file.write = [\".\"]\nterminal.dangerous = \"approve\"",
        "terminal.dangerous = \"deny\"",
    );
    assert_ne!(tightened, served.config);
    let file = served.root.join("toolhost.toml");
    std::fs::write(&file, &tightened).unwrap();
    served.host.reload_config(&file).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let fresh = raw_call(&served, GAMMA, "rm -rf elsewhere", json!({})).await;
        if fresh["result"]["resultType"] != "input_required" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{fresh}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let once = json!({key: {"action": "accept", "content": {"decision": "once"}}});
    let answered = raw_call(
        &served,
        GAMMA,
        command,
        json!({"requestState": state, "inputResponses": once}),
    )
    .await;
    assert!(
        victim.exists(),
        "the parked call ran after the reload: {answered}"
    );
    let message = answered["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("configuration changed") && message.contains("call the tool again"),
        "{answered}"
    );
}
