//! Handles, through the official Python SDK's default client over HTTP
//! (2026-07-28, no session): a conversation's to-do items and terminal
//! persist when the handle is passed back, and nowhere else; handles of
//! another tenant, forged, expired or of a reloaded plugin are refused with
//! their own errors; a client with a session sees no handle.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};
use toolhost::Host;
use toolhost::config::{Config, ConfigSource};
use toolhost::serve::http::{HttpServer, ServeOptions};

use crate::http_api::sha256_hex;

pub(crate) const ALPHA: &str = "alpha-token";
pub(crate) const BETA: &str = "beta-token";
pub(crate) const GAMMA: &str = "gamma-token";
pub(crate) const DELTA: &str = "delta-token";

/// A server of two tenants that may run commands in their workspaces, with
/// the bundled plugins (`todo` keeps state, `run_command` a terminal).
pub(crate) struct Served {
    pub(crate) url: String,
    pub(crate) host: Host,
    /// The configuration's text.
    pub(crate) config: String,
    pub(crate) root: PathBuf,
    _dir: tempfile::TempDir,
    _task: tokio::task::JoinHandle<()>,
}

/// The server, with `top` among the top-level keys and `state` in `[state]`.
pub(crate) async fn serve(top: &str, state: &str) -> Served {
    crate::use_launcher();
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    for workspace in ["alpha", "beta"] {
        std::fs::create_dir_all(root.join(workspace).join("sub")).unwrap();
    }
    let config = format!(
        r#"
default_profile = "worker"
{top}
[state]
key_file = "state.key"
{state}
[profiles.worker]
allow = ["terminal:*"]
file.write = ["."]
[tenants.alpha]
token_sha256 = "{alpha}"
profile = "worker"
workspace = "alpha"
[tenants.beta]
token_sha256 = "{beta}"
profile = "worker"
workspace = "beta"
"#,
        alpha = sha256_hex(ALPHA),
        beta = sha256_hex(BETA),
    );
    let text = config
        .replace("GAMMA", &sha256_hex(GAMMA))
        .replace("DELTA", &sha256_hex(DELTA));
    let config = Config::parse(&text, ConfigSource::Embedded, &root).unwrap();
    let host = Host::builder()
        .config(&config)
        .unwrap()
        .bundled(true)
        .build()
        .await
        .unwrap();
    let server = HttpServer::bind(host.clone(), "127.0.0.1:0", ServeOptions::default())
        .await
        .unwrap();
    let url = format!("http://{}/mcp", server.local_addr());
    let task = tokio::spawn(async move {
        server.run(std::future::pending()).await.unwrap();
    });
    Served {
        url,
        host,
        config: text,
        root,
        _dir: dir,
        _task: task,
    }
}

/// The official Python SDK, driven one JSON command a line
/// (`mcp_sdk_handles.py`).
pub(crate) struct Sdk {
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Sdk {
    pub(crate) fn start(url: &str) -> Self {
        Self::with_args(&[url.as_ref()])
    }

    /// The SDK over stdio, starting `toolhost serve` with `config`.
    fn stdio(config: &std::path::Path) -> Self {
        let cli = crate::toolhost_cli();
        Self::with_args(&[
            "--stdio".as_ref(),
            cli.as_os_str(),
            "serve".as_ref(),
            "--config".as_ref(),
            config.as_os_str(),
        ])
    }

    fn with_args(args: &[&std::ffi::OsStr]) -> Self {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let python = root.join("target/python-venv/bin/python3");
        let mut child = tokio::process::Command::new(&python)
            .arg(root.join("tests/all/mcp_sdk_handles.py"))
            .args(args)
            .env("NO_PROXY", "*")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "running {}: {e}; .ci/run installs the official SDK (mcp==2.3.0) there",
                    python.display()
                )
            });
        Self {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
            _child: child,
        }
    }

    pub(crate) async fn send(&mut self, command: Value) -> Value {
        let line = format!("{command}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(60), self.stdout.next_line())
            .await
            .unwrap_or_else(|_| panic!("no answer to {command}"))
            .unwrap()
            .unwrap_or_else(|| panic!("the SDK ended at {command} (its stderr is above)"));
        serde_json::from_str(&answer).unwrap()
    }

    /// `todo list` as `token`, under `handle`; the result.
    async fn todo_list(&mut self, token: &str, handle: &str) -> Value {
        self.call(token, "todo", json!({"action": "list", "handle": handle}))
            .await
    }

    /// Calls `tool` as `token`; the result.
    pub(crate) async fn call(&mut self, token: &str, tool: &str, arguments: Value) -> Value {
        self.send(json!({"token": token, "tool": tool, "arguments": arguments}))
            .await
    }
}

/// The text of the first block (the tool's own answer).
fn first_text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// The handle a result carries, checked to be the same in its text block,
/// `structuredContent` and `_meta`.
fn handle_of(result: &Value) -> String {
    let handle = result["structuredContent"]["handle"]
        .as_str()
        .unwrap_or_else(|| panic!("no handle in structuredContent: {result}"))
        .to_string();
    assert!(handle.starts_with("th_") && handle.len() >= 24, "{handle}");
    assert_eq!(result["_meta"]["dev.toolhost/handle"], json!(handle));
    let blocks = result["content"].as_array().unwrap();
    assert!(
        blocks
            .iter()
            .any(|b| b["text"].as_str().is_some_and(|t| t.contains(&handle))),
        "no text block with the handle: {result}"
    );
    handle
}

fn todo_texts(result: &Value) -> Vec<String> {
    let answer: Value =
        serde_json::from_str(first_text(result)).unwrap_or_else(|e| panic!("{e}: {result}"));
    answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["text"].as_str().unwrap().to_string())
        .collect()
}

pub(crate) fn stdout_of(result: &Value) -> String {
    assert_ne!(result["isError"], json!(true), "{result}");
    let answer: Value = serde_json::from_str(first_text(result)).unwrap();
    answer["stdout"].as_str().unwrap().to_string()
}

/// The error text of a refused call.
pub(crate) fn error_of(result: &Value) -> &str {
    assert_eq!(result["isError"], json!(true), "{result}");
    first_text(result)
}

#[tokio::test]
async fn the_python_sdk_keeps_a_conversations_todo_items_and_terminal_under_its_handle() {
    let served = serve("", "").await;
    let mut sdk = Sdk::start(&served.url);

    let listed = sdk.send(json!({"token": ALPHA, "list": true})).await;
    assert_eq!(listed["version"], json!("2026-07-28"), "{listed}");
    let tool = |name: &str| {
        listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {listed}"))
            .clone()
    };
    for name in ["todo", "run_command"] {
        let tool = tool(name);
        assert_eq!(
            tool["inputSchema"]["properties"]["handle"]["type"],
            json!("string"),
            "{tool}"
        );
        assert!(
            !tool["inputSchema"]["required"]
                .as_array()
                .is_some_and(|r| r.contains(&json!("handle")))
        );
        assert!(
            tool["description"]
                .as_str()
                .unwrap()
                .contains("pass the \"handle\""),
            "{tool}"
        );
    }
    // A tool that keeps no state is listed as it is.
    assert!(tool("echo")["inputSchema"]["properties"]["handle"].is_null());

    let added = sdk
        .call(ALPHA, "todo", json!({"action": "add", "text": "ship it"}))
        .await;
    assert_ne!(added["isError"], json!(true), "{added}");
    let handle = handle_of(&added);
    let listed = sdk.todo_list(ALPHA, &handle).await;
    assert_eq!(todo_texts(&listed), ["ship it"]);
    assert_eq!(handle_of(&listed), handle);

    // Without the handle: new state, under a new handle.
    let fresh = sdk.call(ALPHA, "todo", json!({"action": "list"})).await;
    assert!(todo_texts(&fresh).is_empty(), "{fresh}");
    assert_ne!(handle_of(&fresh), handle);

    // The same conversation's terminal: cwd and exports carry over.
    let first = sdk
        .call(
            ALPHA,
            "run_command",
            json!({"command": "cd sub && export X=1", "handle": handle}),
        )
        .await;
    assert_eq!(handle_of(&first), handle);
    let second = sdk
        .call(
            ALPHA,
            "run_command",
            json!({"command": "pwd; echo $X", "handle": handle}),
        )
        .await;
    let sub = served.root.join("alpha/sub");
    assert_eq!(stdout_of(&second), format!("{}\n1\n", sub.display()));
    // Without it: a new terminal, in the workspace, without X.
    let other = sdk
        .call(
            ALPHA,
            "run_command",
            json!({"command": "pwd; echo \"[$X]\""}),
        )
        .await;
    assert_eq!(
        stdout_of(&other),
        format!("{}\n[]\n", served.root.join("alpha").display())
    );
    // The to-do list is still there after the terminal calls.
    let again = sdk.todo_list(ALPHA, &handle).await;
    assert_eq!(todo_texts(&again), ["ship it"]);
}

#[tokio::test]
async fn over_stdio_the_python_sdk_keeps_state_under_a_handle_too() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    let config = root.join("toolhost.toml");
    std::fs::write(
        &config,
        "default_profile = \"worker\"\n[state]\nkey_file = \"state.key\"\n\
         [profiles.worker]\nallow = [\"terminal:*\"]\nfile.write = [\".\"]\n",
    )
    .unwrap();
    let mut sdk = Sdk::stdio(&config);
    let listed = sdk.send(json!({"list": true})).await;
    assert_eq!(listed["version"], json!("2026-07-28"), "{listed}");
    let added = sdk
        .send(json!({"tool": "todo", "arguments": {"action": "add", "text": "x"}}))
        .await;
    let handle = handle_of(&added);
    let call = |tool: &str, arguments: Value| json!({"tool": tool, "arguments": arguments});
    let kept = sdk
        .send(call("todo", json!({"action": "list", "handle": handle})))
        .await;
    assert_eq!(todo_texts(&kept), ["x"]);
    // One process, two conversations: they do not share state.
    let other = sdk.send(call("todo", json!({"action": "list"}))).await;
    assert!(todo_texts(&other).is_empty(), "{other}");
    sdk.send(call(
        "run_command",
        json!({"command": "cd sub && export X=1", "handle": handle}),
    ))
    .await;
    let shown = sdk
        .send(call(
            "run_command",
            json!({"command": "pwd; echo $X", "handle": handle}),
        ))
        .await;
    assert_eq!(
        stdout_of(&shown),
        format!("{}\n1\n", root.join("sub").display())
    );
}

#[tokio::test]
async fn a_handle_idle_past_session_idle_says_its_state_was_dropped() {
    let served = serve("session_idle = \"1s\"", "").await;
    let mut sdk = Sdk::start(&served.url);
    let added = sdk
        .call(ALPHA, "todo", json!({"action": "add", "text": "idle"}))
        .await;
    let handle = handle_of(&added);
    let tasks = served
        .host
        .plugins()
        .into_iter()
        .find(|p| &**p.name() == "tasks")
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while tasks.session_count() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the session never expired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = sdk.todo_list(ALPHA, &handle).await;
    let lost = error_of(&after);
    assert!(
        lost.starts_with("state_lost: ") && lost.contains("idle"),
        "{lost}"
    );
}

#[tokio::test]
async fn handles_of_another_tenant_forged_or_of_a_reloaded_plugin_are_refused() {
    let served = serve("", "").await;
    let mut sdk = Sdk::start(&served.url);
    let added = sdk
        .call(ALPHA, "todo", json!({"action": "add", "text": "mine"}))
        .await;
    let handle = handle_of(&added);

    // Another tenant: refused as not issued to it, and its state untouched.
    let stolen = sdk.todo_list(BETA, &handle).await;
    let refused = error_of(&stolen);
    assert!(refused.starts_with("invalid_handle: "), "{refused}");
    // One altered character: the same error, nothing to tell them apart.
    let mut forged: Vec<char> = handle.chars().collect();
    let at = forged.len() - 5;
    forged[at] = if forged[at] == 'A' { 'B' } else { 'A' };
    let forged: String = forged.into_iter().collect();
    let forged_answer = sdk
        .call(ALPHA, "todo", json!({"action": "list", "handle": forged}))
        .await;
    let shape = |text: &str, handle: &str| text.replace(&handle[..10], "H");
    assert_eq!(
        shape(error_of(&forged_answer), &forged),
        shape(refused, &handle)
    );
    // Not a string: the same.
    let number = sdk
        .call(ALPHA, "todo", json!({"action": "list", "handle": 7}))
        .await;
    assert!(error_of(&number).starts_with("invalid_handle: "));
    let kept = sdk.todo_list(ALPHA, &handle).await;
    assert_eq!(todo_texts(&kept), ["mine"]);

    // The plugin reloads: its instance is gone, and the handle says so
    // instead of starting an empty list.
    let tasks = toolhost::bundled::PLUGINS
        .iter()
        .find(|p| p.name == "tasks")
        .unwrap();
    let file = served.root.join("tasks.wasm");
    std::fs::write(&file, tasks.wasm).unwrap();
    served
        .host
        .reload_file(&file, Duration::from_secs(5))
        .await
        .unwrap();
    for _ in 0..2 {
        let after = sdk.todo_list(ALPHA, &handle).await;
        let lost = error_of(&after);
        assert!(
            lost.starts_with("state_lost: ") && lost.contains("reloaded"),
            "{lost}"
        );
    }
}

#[tokio::test]
async fn a_reloaded_configuration_drops_the_state_of_its_handles() {
    let served = serve("", "").await;
    let mut sdk = Sdk::start(&served.url);
    let added = sdk
        .call(ALPHA, "todo", json!({"action": "add", "text": "before"}))
        .await;
    let handle = handle_of(&added);
    // The configuration written again: new profiles, which may grant
    // otherwise. The tenants follow it a moment later.
    let file = served.root.join("toolhost.toml");
    std::fs::write(&file, &served.config).unwrap();
    served.host.reload_config(&file).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let after = loop {
        let after = sdk.todo_list(ALPHA, &handle).await;
        if after["isError"] == json!(true) {
            break after;
        }
        assert_eq!(todo_texts(&after), ["before"]);
        assert!(std::time::Instant::now() < deadline, "the state was kept");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let lost = error_of(&after);
    assert!(
        lost.starts_with("state_lost: ") && lost.contains("profile \"worker\" changed"),
        "{lost}"
    );
}

#[tokio::test]
async fn an_expired_handle_is_refused_as_expired() {
    let served = serve("", "handle_max_age = \"1s\"").await;
    let mut sdk = Sdk::start(&served.url);
    let added = sdk
        .call(ALPHA, "todo", json!({"action": "add", "text": "soon gone"}))
        .await;
    let handle = handle_of(&added);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let answer = sdk.todo_list(ALPHA, &handle).await;
        if answer["isError"] == json!(true) {
            let refused = error_of(&answer);
            assert!(
                refused.starts_with("handle_expired: ") && refused.contains("handle_max_age"),
                "{refused}"
            );
            break;
        }
        assert_eq!(todo_texts(&answer), ["soon gone"]);
        assert!(std::time::Instant::now() < deadline, "never expired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_client_with_a_session_sees_no_handle() {
    let served = serve("", "").await;
    let mut sdk = Sdk::start(&served.url);
    let listed = sdk
        .send(json!({"token": ALPHA, "list": true, "legacy": true}))
        .await;
    assert_eq!(listed["version"], json!("2025-11-25"), "{listed}");
    for tool in listed["tools"].as_array().unwrap() {
        assert!(
            tool["inputSchema"]["properties"]["handle"].is_null()
                && !tool["description"].as_str().unwrap().contains("handle"),
            "{tool}"
        );
    }
    let command = |arguments: Value| json!({"token": ALPHA, "legacy": true, "tool": "todo", "arguments": arguments});
    let added = sdk
        .send(command(json!({"action": "add", "text": "in session"})))
        .await;
    assert!(added.get("structuredContent").is_none(), "{added}");
    assert_eq!(added["content"].as_array().unwrap().len(), 1, "{added}");
    let listed = sdk.send(command(json!({"action": "list"}))).await;
    assert_eq!(todo_texts(&listed), ["in session"]);
}

#[tokio::test]
async fn a_reload_reaches_a_client_without_a_session_on_its_listen_stream() {
    let served = serve("", "").await;
    let mut sdk = Sdk::start(&served.url);
    let listening = sdk.send(json!({"token": ALPHA, "listen": true})).await;
    assert_eq!(listening["listening"], json!(true), "{listening}");
    let tasks = toolhost::bundled::PLUGINS
        .iter()
        .find(|p| p.name == "tasks")
        .unwrap();
    let file = served.root.join("tasks.wasm");
    std::fs::write(&file, tasks.wasm).unwrap();
    served
        .host
        .reload_file(&file, Duration::from_secs(5))
        .await
        .unwrap();
    let event = sdk.send(json!({"token": ALPHA, "next_event": true})).await;
    assert!(
        event["event"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("tool"),
        "{event}"
    );
}
