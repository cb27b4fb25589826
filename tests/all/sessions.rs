//! Terminal sessions (issue 17), through a real MCP client: state carried
//! between commands, background processes, a pseudo-terminal, and nothing
//! left running once the session ends.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost::{CallRequest, Host, HostBuilder};

use crate::mcp::{Client, call, connect, text};
use crate::{Workspace, assert_gone, processes_with};

/// Commands allowed, the workspace writable, no network.
const PROFILE: &str = r#"
allow = ["terminal:*"]
file.write = ["."]
"#;

fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

/// Calls `tool` over MCP; the tool's JSON answer, asserting success.
pub(crate) async fn tool(client: &Client, name: &str, arguments: Value) -> Value {
    let result = client
        .call_tool(call(name, arguments.clone()))
        .await
        .unwrap();
    let body = text(&result);
    assert_ne!(result.is_error, Some(true), "{name} {arguments}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// The error text of a failing call.
pub(crate) async fn tool_error(client: &Client, name: &str, arguments: Value) -> String {
    let result = client
        .call_tool(call(name, arguments.clone()))
        .await
        .unwrap();
    assert_eq!(
        result.is_error,
        Some(true),
        "{name} {arguments}: {}",
        text(&result)
    );
    text(&result)
}

async fn run(client: &Client, line: &str) -> Value {
    tool(client, "run_command", json!({ "command": line })).await
}

/// Reads process `id` until its output holds `wanted` (or 10 s pass).
pub(crate) async fn read_until(client: &Client, id: u64, wanted: &str) -> String {
    let mut seen = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !seen.contains(wanted) {
        assert!(
            std::time::Instant::now() < deadline,
            "no {wanted:?} in {seen:?}"
        );
        let output = tool(
            client,
            "process_wait",
            json!({ "id": id, "timeout_secs": 0.2 }),
        )
        .await;
        seen.push_str(output["stdout"].as_str().unwrap());
        seen.push_str(output["stderr"].as_str().unwrap());
    }
    seen
}

/// Waits for the prompt of the Python REPL `id`, types `1+1` and checks
/// that it answers `2`.
pub(crate) async fn the_repl_answers(client: &Client, id: u64) {
    read_until(client, id, ">>>").await;
    tool(
        client,
        "process_write",
        json!({ "id": id, "input": "1+1\n" }),
    )
    .await;
    let answer = read_until(client, id, "\n2").await;
    assert!(answer.lines().any(|line| line.trim() == "2"), "{answer:?}");
}

/// The background part of the session flow, on any backend: an HTTP
/// server started in `site` on `port`, reached by `fetch` (which must print
/// `expected`), killed and waited for; then a REPL on a pseudo-terminal.
pub(crate) async fn serve_fetch_kill_and_repl(
    client: &Client,
    port: &str,
    fetch: &str,
    expected: &str,
) {
    let id = tool(
        client,
        "process_start",
        json!({ "command": format!("python3 -u -m http.server {port} --bind 127.0.0.1"), "cwd": "site" }),
    )
    .await["id"]
        .as_u64()
        .unwrap();
    read_until(client, id, "Serving HTTP").await;
    let fetched = tool(client, "run_command", json!({ "command": fetch })).await;
    assert_eq!(fetched["stdout"], expected, "{fetched}");
    tool(client, "process_kill", json!({ "id": id })).await;
    let ended = tool(
        client,
        "process_wait",
        json!({ "id": id, "timeout_secs": 5 }),
    )
    .await;
    assert_eq!(ended["running"], false, "{ended}");

    let repl = tool(
        client,
        "process_start",
        json!({ "command": "python3 -q -i", "pty": true }),
    )
    .await["id"]
        .as_u64()
        .unwrap();
    the_repl_answers(client, repl).await;
}

/// Waits up to five seconds for a process whose command line holds `marker`.
pub(crate) async fn wait_running(marker: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while processes_with(marker).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "{marker} never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn cd_and_export_in_one_call_are_seen_by_the_next() {
    let ws = Workspace::new(bundled);
    ws.mkdir("sub");
    let (client, _) = connect(ws.host(PROFILE).await, None).await;
    let first = run(&client, "cd sub && export X=1 && Y=local").await;
    assert_eq!(first["exit_code"], 0, "{first}");
    let second = run(&client, "pwd; echo \"$X\"; echo \"${Y:-unset}\"").await;
    let expected = format!("{}\n1\nunset\n", ws.join("sub").display());
    assert_eq!(second["stdout"], expected, "{second}");
    // An explicit cwd wins over the session's, and does not move it.
    let elsewhere = tool(
        &client,
        "run_command",
        json!({ "command": "pwd", "cwd": "." }),
    )
    .await;
    assert_eq!(elsewhere["stdout"], format!("{}\n", ws.path.display()));
    let still = run(&client, "pwd").await;
    assert_eq!(still["stdout"], format!("{}\n", ws.join("sub").display()));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn calls_without_a_session_start_fresh() {
    let ws = Workspace::new(bundled);
    ws.mkdir("sub");
    let host = ws.host(PROFILE).await;
    crate::call_ok(
        &host,
        "run_command",
        r#"{"command": "cd sub && export X=1"}"#,
    )
    .await;
    let next = crate::call_ok(&host, "run_command", r#"{"command": "pwd; echo \"[$X]\""}"#).await;
    assert_eq!(next["stdout"], format!("{}\n[]\n", ws.path.display()));
}

#[tokio::test]
async fn two_sessions_do_not_share_a_terminal() {
    let ws = Workspace::new(bundled);
    ws.mkdir("a");
    let host = ws.host(PROFILE).await;
    let call_in = |session: &'static str, line: &str| {
        let request = CallRequest::new("run_command", json!({ "command": line }).to_string())
            .session(session);
        let host = host.clone();
        async move {
            let result = host.dispatch(request).await.unwrap();
            serde_json::from_str::<Value>(result.get()).unwrap()
        }
    };
    call_in("one", "cd a").await;
    let one = call_in("one", "pwd").await;
    let two = call_in("two", "pwd").await;
    assert_eq!(one["stdout"], format!("{}\n", ws.join("a").display()));
    assert_eq!(two["stdout"], format!("{}\n", ws.path.display()));
    assert_eq!(host.terminals().len(), 2);
    assert!(host.end_session(None, "one"));
    assert_eq!(host.terminals().len(), 1);
    let again = call_in("one", "pwd").await;
    assert_eq!(again["stdout"], format!("{}\n", ws.path.display()));
}

#[tokio::test]
async fn a_background_server_is_reached_by_the_next_command_and_killed() {
    let ws = Workspace::new(bundled);
    ws.write("site/hello.txt", "hello from the session");
    let (client, _) = connect(ws.host(PROFILE).await, None).await;
    let marker = "8417";
    let started = tool(
        &client,
        "process_start",
        json!({ "command": format!("python3 -u -m http.server {marker} --bind 127.0.0.1"), "cwd": "site" }),
    )
    .await;
    let id = started["id"].as_u64().unwrap();
    read_until(&client, id, "Serving HTTP").await;
    let listed = tool(&client, "process_list", json!({})).await;
    assert_eq!(listed["processes"][0]["id"], id, "{listed}");
    assert_eq!(listed["processes"][0]["running"], true, "{listed}");

    ws.write(
        "fetch.py",
        "import sys, urllib.request\nprint(urllib.request.urlopen(sys.argv[1]).read().decode())\n",
    );
    let fetch = format!("python3 fetch.py http://127.0.0.1:{marker}/hello.txt");
    let fetched = run(&client, &fetch).await;
    assert_eq!(fetched["stdout"], "hello from the session\n", "{fetched}");
    // The server logged the request.
    read_until(&client, id, "GET /hello.txt").await;

    tool(&client, "process_kill", json!({ "id": id })).await;
    let ended = tool(
        &client,
        "process_wait",
        json!({ "id": id, "timeout_secs": 5 }),
    )
    .await;
    assert_eq!(ended["running"], false, "{ended}");
    assert_eq!(ended["signal"], libc::SIGTERM, "{ended}");
    let gone = tool_error(&client, "process_output", json!({ "id": id })).await;
    assert!(gone.contains("no background process"), "{gone}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_repl_on_a_pseudo_terminal_answers() {
    let ws = Workspace::new(bundled);
    let (client, _) = connect(ws.host(PROFILE).await, None).await;
    let started = tool(
        &client,
        "process_start",
        json!({ "command": "python3 -q -i", "pty": true, "rows": 30, "cols": 100 }),
    )
    .await;
    let id = started["id"].as_u64().unwrap();
    the_repl_answers(&client, id).await;
    // It is a terminal: the program sees one.
    tool(
        &client,
        "process_write",
        json!({ "id": id, "input": "import os; print(os.isatty(0), os.get_terminal_size())\n" }),
    )
    .await;
    read_until(&client, id, "columns=100, lines=30").await;
    tool(
        &client,
        "process_write",
        json!({ "id": id, "input": "exit()\n" }),
    )
    .await;
    let ended = tool(
        &client,
        "process_wait",
        json!({ "id": id, "timeout_secs": 5 }),
    )
    .await;
    assert_eq!(ended["exit_code"], 0, "{ended}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn nothing_outlives_the_session() {
    let ws = Workspace::new(bundled);
    let (client, _) = connect(ws.host(PROFILE).await, None).await;
    let marker = "413377";
    tool(
        &client,
        "process_start",
        json!({ "command": format!("sleep {marker}") }),
    )
    .await;
    run(
        &client,
        &format!("(setsid sleep {}1 &) ; sleep {}2 &", marker, marker),
    )
    .await;
    for n in ["", "1", "2"] {
        wait_running(&format!("sleep {marker}{n} ")).await;
    }
    client.cancel().await.unwrap();
    assert_gone(&format!("sleep {marker}")).await;
}

#[tokio::test]
async fn commands_written_to_a_background_shell_are_checked() {
    let ws = Workspace::new(bundled);
    let profile = r#"
allow = ["terminal:*"]
file.write = ["."]
terminal.allow_commands = ["bash", "echo *", "touch *"]
"#;
    let (client, _) = connect(ws.host(profile).await, None).await;
    let id = tool(&client, "process_start", json!({ "command": "bash" })).await["id"]
        .as_u64()
        .unwrap();
    tool(
        &client,
        "process_write",
        json!({ "id": id, "input": "echo allowed\n" }),
    )
    .await;
    read_until(&client, id, "allowed").await;
    // Not on the allow list, and split over two writes.
    tool(
        &client,
        "process_write",
        json!({ "id": id, "input": "rm -f " }),
    )
    .await;
    let refused = tool_error(
        &client,
        "process_write",
        json!({ "id": id, "input": "x\n" }),
    )
    .await;
    assert!(refused.contains("rm -f x"), "{refused}");
    assert!(refused.contains("allow_commands"), "{refused}");
    // Line editing could rearrange a checked line.
    let edited = tool_error(
        &client,
        "process_write",
        json!({ "id": id, "input": "\u{15}touch y\n" }),
    )
    .await;
    assert!(edited.contains("control character"), "{edited}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn background_processes_are_refused_like_commands() {
    let ws = Workspace::new(bundled);
    let profile = r#"
allow = ["terminal:*"]
file.write = ["."]
terminal.allow_commands = ["echo *"]
"#;
    let (client, _) = connect(ws.host(profile).await, None).await;
    let refused = tool_error(
        &client,
        "process_start",
        json!({ "command": "python3 -m http.server" }),
    )
    .await;
    assert!(refused.contains("allow_commands"), "{refused}");
    let fine = tool(
        &client,
        "process_start",
        json!({ "command": "echo started" }),
    )
    .await;
    let id = fine["id"].as_u64().unwrap();
    read_until(&client, id, "started").await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_call_without_a_session_ends_its_background_processes_with_it() {
    let ws = Workspace::new(bundled);
    let host: Host = ws.host(PROFILE).await;
    let marker = "271828";
    crate::call_ok(
        &host,
        "process_start",
        &json!({ "command": format!("sleep {marker}") }).to_string(),
    )
    .await;
    assert_gone(&format!("sleep {marker}")).await;
}

#[tokio::test]
async fn without_the_kernel_sandbox_sessions_keep_state_and_end_their_processes() {
    let ws = Workspace::new(bundled);
    ws.mkdir("sub");
    let profile = format!("{PROFILE}terminal.sandbox = \"none\"\n");
    let (client, _) = connect(ws.host(&profile).await, None).await;
    run(&client, "cd sub && export X=2").await;
    let next = run(&client, "pwd; echo $X").await;
    assert_eq!(next["stdout"], format!("{}\n2\n", ws.join("sub").display()));
    let marker = "314159";
    tool(
        &client,
        "process_start",
        json!({ "command": format!("sleep {marker}") }),
    )
    .await;
    run(&client, &format!("sleep {marker}1 &")).await;
    wait_running(&format!("sleep {marker}1")).await;
    client.cancel().await.unwrap();
    assert_gone(&format!("sleep {marker}")).await;
}

/// A wrapper that marks the environment and runs the rest of its arguments.
const WRAPPER: &str = "#!/bin/sh\nexport WRAPPED=\"$1\"\nshift\nexec \"$@\"\n";

#[tokio::test]
async fn commands_run_after_the_wrapper_in_and_out_of_sessions() {
    let ws = Workspace::new(bundled);
    let wrapper = ws.write("bin/wrap", WRAPPER);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    for sandbox in ["kernel", "none"] {
        let profile = format!(
            "{PROFILE}terminal.sandbox = \"{sandbox}\"\nterminal.wrapper = [{:?}, \"by-{sandbox}\"]\n",
            wrapper.display()
        );
        let host = ws.host(&profile).await;
        let alone = crate::call_ok(&host, "run_command", r#"{"command": "echo $WRAPPED"}"#).await;
        assert_eq!(alone["stdout"], format!("by-{sandbox}\n"), "{alone}");
        let (client, _) = connect(host, None).await;
        let id = tool(
            &client,
            "process_start",
            json!({ "command": "echo bg $WRAPPED" }),
        )
        .await["id"]
            .as_u64()
            .unwrap();
        read_until(&client, id, &format!("bg by-{sandbox}")).await;
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_wrapper_that_is_not_there_is_named() {
    let ws = Workspace::new(bundled);
    let profile = format!("{PROFILE}terminal.wrapper = [\"no-such-wrapper\", \"x\"]\n");
    let host = ws.host(&profile).await;
    let (kind, message) = crate::call_err(&host, "run_command", r#"{"command": "true"}"#).await;
    assert_eq!(kind, toolhost::ErrorKind::ToolFailed, "{message}");
    assert!(message.contains("terminal.wrapper"), "{message}");
    assert!(message.contains("no-such-wrapper"), "{message}");
}

#[tokio::test]
async fn two_tenants_with_the_same_session_id_do_not_share_a_terminal() {
    let ws = Workspace::new(bundled);
    ws.mkdir("sub");
    let host = ws.host(PROFILE).await;
    let profile = ws.profile(PROFILE);
    let tenant = |name: &str| {
        toolhost::Caller::new(
            profile.clone(),
            std::sync::Arc::new(toolhost::approval::Approvals::deny_all()),
        )
        .tenant(name, 4)
    };
    let (a, b) = (tenant("a"), tenant("b"));
    let run_as = |caller: &toolhost::Caller, line: &str| {
        let request =
            CallRequest::new("run_command", json!({ "command": line }).to_string()).session("s");
        let (host, caller) = (host.clone(), caller.clone());
        async move {
            let result = host.dispatch_as(&caller, request).await.unwrap();
            serde_json::from_str::<Value>(result.get()).unwrap()
        }
    };
    run_as(&a, "cd sub && export SECRET=a-only").await;
    let seen_by_b = run_as(&b, "pwd; echo \"[$SECRET]\"").await;
    assert_eq!(seen_by_b["stdout"], format!("{}\n[]\n", ws.path.display()));
    let seen_by_a = run_as(&a, "echo \"[$SECRET]\"").await;
    assert_eq!(seen_by_a["stdout"], "[a-only]\n");
}

#[tokio::test]
async fn a_command_past_its_time_limit_is_killed_and_the_session_goes_on() {
    let ws = Workspace::new(bundled);
    let (client, _) = connect(ws.host(PROFILE).await, None).await;
    let marker = "161803";
    run(&client, "export KEPT=yes").await;
    let timed_out = tool_error(
        &client,
        "run_command",
        json!({ "command": format!("sleep {marker}"), "timeout_secs": 1 }),
    )
    .await;
    assert!(timed_out.contains("time limit"), "{timed_out}");
    assert_gone(&format!("sleep {marker}")).await;
    let after = run(&client, "echo $KEPT").await;
    assert_eq!(after["stdout"], "yes\n");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_session_keeps_the_output_limit() {
    let ws = Workspace::new(bundled);
    let profile = format!("{PROFILE}terminal.max_output = \"1KiB\"\n");
    let (client, _) = connect(ws.host(&profile).await, None).await;
    let big = run(&client, "head -c 5000 /dev/zero | tr '\\0' x").await;
    assert_eq!(big["stdout"].as_str().unwrap().len(), 1024);
    assert_eq!(big["truncated"], true);
    // A background process keeps the newest output and counts the rest.
    let id = tool(
        &client,
        "process_start",
        json!({ "command": "head -c 5000 /dev/zero | tr '\\0' y" }),
    )
    .await["id"]
        .as_u64()
        .unwrap();
    let ended = tool(
        &client,
        "process_wait",
        json!({ "id": id, "timeout_secs": 5 }),
    )
    .await;
    assert_eq!(ended["stdout"].as_str().unwrap().len(), 1024, "{ended}");
    assert_eq!(ended["dropped"], 5000 - 1024);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn sessions_end_with_the_host() {
    let ws = Workspace::new(bundled);
    let host = ws.host(PROFILE).await;
    let marker = "577215";
    let request = CallRequest::new(
        "process_start",
        json!({ "command": format!("sleep {marker}") }).to_string(),
    )
    .session("kept");
    host.dispatch(request).await.unwrap();
    wait_running(&format!("sleep {marker}")).await;
    // Idle sessions go at session_idle; this one is fresh.
    assert_eq!(host.terminals().expire_idle(Duration::from_secs(60)), 0);
    drop(host);
    assert_gone(&format!("sleep {marker}")).await;
}

#[tokio::test]
async fn idle_sessions_end_with_their_processes() {
    let ws = Workspace::new(bundled);
    let host = ws.host(PROFILE).await;
    let marker = "662607";
    let request = CallRequest::new(
        "process_start",
        json!({ "command": format!("sleep {marker}") }).to_string(),
    )
    .session("idle");
    host.dispatch(request).await.unwrap();
    wait_running(&format!("sleep {marker}")).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(host.terminals().expire_idle(Duration::from_millis(10)), 1);
    assert_gone(&format!("sleep {marker}")).await;
}

#[tokio::test]
async fn a_denied_path_that_appears_during_a_session_is_masked_from_the_next_command() {
    let ws = Workspace::new(bundled);
    let profile = r#"
allow = ["terminal:*"]
file.write = ["."]
file.deny = ["secret.txt"]
"#;
    let (client, _) = connect(ws.host(profile).await, None).await;
    run(&client, "true").await;
    tool(
        &client,
        "process_start",
        json!({ "command": "sleep 8476031" }),
    )
    .await;
    wait_running("sleep 8476031").await;

    // A new directory changes nothing the sandbox shows: it stays, with
    // its background process.
    ws.mkdir("made-meanwhile");
    let listed = run(&client, "ls").await;
    assert!(
        listed["stdout"]
            .as_str()
            .unwrap()
            .contains("made-meanwhile"),
        "{listed}"
    );
    assert!(!processes_with("sleep 8476031").is_empty());

    // A file the deny rule matches, written by someone else meanwhile: the
    // next command runs in a sandbox that masks it.
    ws.write("secret.txt", "the secret");
    let read = run(&client, "cat secret.txt").await;
    assert_ne!(read["exit_code"], 0, "{read}");
    assert!(!read.to_string().contains("the secret"), "{read}");
    // The old sandbox ended with what ran in it.
    assert_gone("sleep 8476031").await;
    client.cancel().await.unwrap();
}
