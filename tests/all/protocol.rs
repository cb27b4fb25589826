//! JSON-RPC and MCP correctness of `toolhost serve` on stdio, through its
//! pipes: every line gets the answer JSON-RPC requires (parse errors,
//! invalid requests and invalid params, with the request's id when it can be
//! read), logging is served and unserved capabilities are not found, stdin
//! is read with backpressure, and SIGTERM drains the calls in flight.

use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve::CONFIG;

/// A config directory with `toolhost.toml` and the `misbehave` plugin.
pub(crate) fn workspace(config: &str) -> (tempfile::TempDir, PathBuf) {
    crate::serve::workspace(config, &[toolhost_tests::MISBEHAVE])
}

/// `toolhost serve` on stdio, its stdout lines on a channel. The channel is
/// bounded: stdout is not read further while answers wait on it unread.
pub(crate) struct Stdio {
    child: Child,
    pub(crate) stdin: Option<ChildStdin>,
    stdout: mpsc::Receiver<Vec<u8>>,
    stderr: mpsc::Receiver<String>,
}

impl Stdio {
    pub(crate) fn start(root: &Path, args: &[&str]) -> Self {
        let (mut child, stderr) = toolhost_tests::spawn_piped(
            Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
                .arg("--config")
                .arg(root.join("toolhost.toml"))
                .arg("serve")
                .args(args),
        );
        let stdout = child.stdout.take().unwrap();
        let (sender, receiver) = mpsc::sync_channel(16);
        std::thread::spawn(move || {
            let mut reader = std::io::BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if sender.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            stdout: receiver,
            stderr,
        }
    }

    /// Starts the server and initializes the session.
    pub(crate) fn initialized(root: &Path, args: &[&str]) -> (Self, Value) {
        let mut server = Self::start(root, args);
        server.send(&json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": { "name": "test", "version": "0" },
            },
        }));
        let info = server.answer();
        assert_eq!(info["id"], json!(0), "{info}");
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        (server, info)
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub(crate) fn send(&mut self, message: &Value) {
        self.send_raw(message.to_string().as_bytes());
    }

    /// The next message on stdout, within 30 s.
    pub(crate) fn answer(&mut self) -> Value {
        self.answer_within(Duration::from_secs(30))
            .unwrap_or_else(|| panic!("no answer; stderr:\n{}", self.stderr_text()))
    }

    pub(crate) fn answer_within(&mut self, limit: Duration) -> Option<Value> {
        let line = self.stdout.recv_timeout(limit).ok()?;
        Some(
            serde_json::from_slice(&line)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&line))),
        )
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn stderr_text(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }

    pub(crate) fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: sending a signal to our own child process.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    /// Closes the server's stdin: the client is done sending.
    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Ends stdin, does `meanwhile`, and waits (up to `limit`) for the
    /// server to exit with success: how long after stdin ended it exited.
    pub(crate) fn exit_after_stdin_ends(
        &mut self,
        limit: Duration,
        meanwhile: impl FnOnce(&Self),
    ) -> Duration {
        let ended = Instant::now();
        self.close_stdin();
        meanwhile(self);
        let status = self.exit(limit);
        assert!(status.success(), "{status:?}");
        ended.elapsed()
    }

    pub(crate) fn exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running after {limit:?}; stderr:\n{}",
                self.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server's resident memory, in KiB.
    pub(crate) fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for Stdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn error_of(answer: &Value) -> (Value, i64) {
    (
        answer["id"].clone(),
        answer["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("not an error: {answer}")),
    )
}

pub(crate) fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": tool, "arguments": arguments },
    })
}

pub(crate) fn ping(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

#[test]
fn undecodable_lines_get_a_parse_error_with_a_null_id() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let lines: [&[u8]; 4] = [
        b"garbage",
        b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}",
        deep.as_bytes(),
    ];
    for line in lines {
        server.send_raw(line);
        let answer = server.answer();
        assert_eq!(answer["jsonrpc"], json!("2.0"), "{answer}");
        assert_eq!(answer.get("id"), Some(&Value::Null), "{answer}");
        assert_eq!(error_of(&answer).1, -32700, "{answer}");
    }
    server.send(&ping(9));
    assert_eq!(server.answer()["id"], json!(9));
}

#[test]
fn a_line_over_16_mib_gets_an_error_and_the_server_goes_on() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    let mut stdin = server.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let text = "a".repeat(17 << 20);
        let line = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": text}});
        stdin.write_all(line.to_string().as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin
            .write_all(format!("{}\n", ping(2)).as_bytes())
            .unwrap();
        stdin.flush().unwrap();
        stdin
    });
    let refused = server.answer();
    assert_eq!(refused.get("id"), Some(&Value::Null), "{refused}");
    assert_eq!(error_of(&refused).1, -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than the limit"),
        "{refused}"
    );
    assert_eq!(server.answer()["id"], json!(2));
    server.stdin = Some(writer.join().unwrap());
}

#[test]
fn invalid_requests_carry_their_id_when_it_can_be_read() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    server.send(&json!({"jsonrpc": "1.0", "id": 7, "method": "ping"}));
    assert_eq!(error_of(&server.answer()), (json!(7), -32600));
    server.send(&json!({"jsonrpc": "2.0", "id": "x", "method": 5}));
    assert_eq!(error_of(&server.answer()), (json!("x"), -32600));
    server.send(&json!({"jsonrpc": "2.0", "id": [1], "method": "ping"}));
    let answer = server.answer();
    assert_eq!(answer.get("id"), Some(&Value::Null), "{answer}");
    assert_eq!(error_of(&answer).1, -32600);
    server.send(&json!([ping(3)]));
    let answer = server.answer();
    assert_eq!(answer.get("id"), Some(&Value::Null), "{answer}");
    assert_eq!(error_of(&answer).1, -32600);
}

/// serde_json's raw-value token as a key makes the JSON reader build the
/// JSON text in its string in place of the object: a value the bytes do not
/// spell (and a tree the value count never saw). Refused, as the first key
/// or not, and the server goes on.
#[test]
fn keys_the_json_reader_reserves_are_invalid_requests() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    let smuggled = json!({"$serde_json::private::RawValue": "\"smuggled\""});
    server.send(&call(4, "echo", json!({"text": smuggled})));
    let answer = server.answer();
    assert_eq!(error_of(&answer), (Value::Null, -32600), "{answer}");
    assert!(answer.to_string().contains("rename the key"), "{answer}");
    server.send_raw(
        br#"{"jsonrpc":"2.0","id":{"$serde_json::private::RawValue":"5"},"method":"ping"}"#,
    );
    assert_eq!(error_of(&server.answer()), (Value::Null, -32600));
    server.send(&call(
        6,
        "echo",
        json!({"text": "$serde_json::private::RawValue"}),
    ));
    let answer = server.answer();
    assert!(
        answer["result"]
            .to_string()
            .contains("serde_json::private::RawValue"),
        "{answer}"
    );
}

#[test]
fn params_that_do_not_fit_are_invalid_params() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    server.send(&call(4, "echo", json!(["not", "an", "object"])));
    assert_eq!(error_of(&server.answer()), (json!(4), -32602));
    server.send(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"arguments": {}}}),
    );
    assert_eq!(error_of(&server.answer()), (json!(5), -32602));
    // An unknown method is still method not found.
    server.send(&json!({"jsonrpc": "2.0", "id": 6, "method": "no/such"}));
    assert_eq!(error_of(&server.answer()), (json!(6), -32601));
}

#[test]
fn logging_is_advertised_and_served_and_prompts_and_resources_are_not_found() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, info) = Stdio::initialized(&root, &[]);
    let capabilities = &info["result"]["capabilities"];
    assert!(capabilities.get("logging").is_some(), "{capabilities}");
    assert!(capabilities.get("prompts").is_none(), "{capabilities}");
    assert!(capabilities.get("resources").is_none(), "{capabilities}");
    server.send(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "warning"},
    }));
    let answer = server.answer();
    assert_eq!(answer["id"], json!(1));
    assert_eq!(answer["result"], json!({}), "{answer}");
    for (id, method) in [
        (2, "prompts/list"),
        (3, "resources/list"),
        (4, "resources/templates/list"),
    ] {
        server.send(&json!({"jsonrpc": "2.0", "id": id, "method": method}));
        assert_eq!(error_of(&server.answer()), (json!(id), -32601), "{method}");
    }
}

#[test]
fn the_unknown_tool_error_names_only_tools_the_caller_is_offered() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    server.send(&call(1, "nope", json!({})));
    let answer = server.answer();
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no tool named \"nope\""), "{answer}");
    assert!(message.contains("echo"), "{answer}");
    // Hidden from this profile: it grants no terminal, files or network.
    for hidden in ["run_command", "read_file", "http_request"] {
        assert!(!message.contains(hidden), "{hidden} named in {message}");
    }
}

#[test]
fn stdin_is_not_read_past_the_pending_limit_while_answers_go_unread() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    let before = server.rss_kib();
    const CALLS: u64 = 20_000;
    let written = Arc::new(AtomicUsize::new(0));
    let mut stdin = server.stdin.take().unwrap();
    let writer = {
        let written = written.clone();
        std::thread::spawn(move || {
            let text = "x".repeat(8 << 10);
            for id in 1..=CALLS {
                let line = format!("{}\n", call(id, "echo", json!({ "text": text })));
                stdin.write_all(line.as_bytes()).unwrap();
                written.fetch_add(1, Ordering::Relaxed);
            }
            stdin.flush().unwrap();
            stdin
        })
    };
    // Nothing is read from stdout until the writer stalls on a full pipe
    // (or has written everything, as it would if stdin were read freely).
    let mut last = 0;
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = written.load(Ordering::Relaxed);
        if now == last || now as u64 == CALLS {
            break;
        }
        last = now;
    }
    let stalled_at = written.load(Ordering::Relaxed) as u64;
    if let Some(status) = server.child.try_wait().unwrap() {
        panic!(
            "the server exited ({status:?}); stderr:\n{}",
            server.stderr_text()
        );
    }
    let grown = server.rss_kib().saturating_sub(before);
    assert!(
        stalled_at < CALLS / 2,
        "{stalled_at} of {CALLS} calls were taken in without any answer being read"
    );
    assert!(grown < 64 << 10, "the server grew by {grown} KiB");
    // Reading the answers lets it go on, to the last call.
    let mut answered = 0;
    while answered < CALLS {
        let answer = server.answer();
        assert!(answer.get("result").is_some(), "{answer}");
        answered += 1;
    }
    server.stdin = Some(writer.join().unwrap());
}

#[test]
fn sigterm_answers_the_call_in_flight_before_exiting() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    server.send(&call(1, "sleep", json!({"ms": 1500})));
    std::thread::sleep(Duration::from_millis(300));
    server.signal(libc::SIGTERM);
    let answer = server.answer();
    assert_eq!(answer["id"], json!(1), "{answer}");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        serde_json::from_str::<Value>(text).ok(),
        Some(json!({"slept_ms": 1500})),
        "{answer}"
    );
    let exit = server.exit(Duration::from_secs(10));
    assert!(
        exit.success(),
        "{exit:?}; stderr:\n{}",
        server.stderr_text()
    );
}

#[test]
fn a_call_past_the_drain_timeout_is_answered_with_an_error() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &["--drain-timeout", "300ms"]);
    server.send(&call(1, "sleep", json!({"ms": 8000})));
    std::thread::sleep(Duration::from_millis(300));
    let signalled = Instant::now();
    server.signal(libc::SIGTERM);
    let answer = server.answer();
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert_eq!(answer["result"]["isError"], json!(true), "{answer}");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("shutting down"), "{answer}");
    let exit = server.exit(Duration::from_secs(10));
    assert!(
        exit.success(),
        "{exit:?}; stderr:\n{}",
        server.stderr_text()
    );
    assert!(signalled.elapsed() < Duration::from_secs(5));
}

/// Context switches so far of the threads of `pid` named `name`.
pub(crate) fn wakeups(pid: u32, name: &str) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        total += status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split(':').nth(1)?.trim().parse::<u64>().ok())
            .sum::<u64>();
    }
    total
}

/// How many times process `pid`'s epoch threads wake in one second, after
/// `settle` for what ran before to end.
pub(crate) fn idle_wakeups(pid: u32, settle: Duration) -> u64 {
    std::thread::sleep(settle);
    let before = wakeups(pid, "toolhost-epoch");
    std::thread::sleep(Duration::from_secs(1));
    wakeups(pid, "toolhost-epoch") - before
}

#[test]
fn an_idle_server_does_not_wake_up_for_the_epoch() {
    let config = CONFIG.replace("timeout = \"10s\"", "timeout = \"300ms\"");
    let (_dir, root) = workspace(&config);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    // A spinning guest is stopped at its time limit: the epoch ticks while
    // guest code runs.
    server.send(&call(1, "spin", json!({})));
    let answer = server.answer();
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(answer.to_string().contains("time limit"), "{answer}");
    let pid = server.child.id();
    assert!(wakeups(pid, "toolhost-epoch") > 5, "the epoch never ticked");
    // Then nothing runs: the ticker sleeps.
    let idle = idle_wakeups(pid, Duration::from_millis(200));
    assert!(
        idle <= 1,
        "the epoch thread woke {idle} times in an idle second"
    );
}

#[test]
fn back_to_back_calls_do_not_each_wake_the_epoch_thread() {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    server.send(&call(1, "echo", json!({"text": "hi"})));
    assert_eq!(server.answer()["id"], 1);
    let pid = server.child.id();
    let before = wakeups(pid, "toolhost-epoch");
    let started = Instant::now();
    const CALLS: u64 = 400;
    for id in 2..2 + CALLS {
        server.send(&call(id, "echo", json!({"text": "hi"})));
        let answer = server.answer();
        assert_eq!(answer["id"], id, "{answer}");
    }
    let ticks = started.elapsed().as_millis();
    let woke = wakeups(pid, "toolhost-epoch") - before;
    // It wakes for the first guest, then once a tick while guests keep
    // starting: not once for each call's guest.
    assert!(
        u128::from(woke) <= 2 * ticks + 20,
        "the epoch thread woke {woke} times in {CALLS} calls over {ticks} ms"
    );
}

#[test]
fn initialize_is_answered_while_the_plugins_compile() {
    // No compiled-code cache: every plugin compiles at start.
    let config = format!("cache_dir = \"off\"\n{CONFIG}");
    let (_dir, root) = workspace(&config);
    let started = Instant::now();
    let (mut server, info) = Stdio::initialized(&root, &[]);
    let initialized = started.elapsed();
    assert!(
        info["result"]["capabilities"]["tools"].is_object(),
        "{info}"
    );
    // The first listing waits for the plugins, and has them all.
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let list = server.answer();
    let listed = started.elapsed();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    for expected in ["echo", "todo", "spin"] {
        assert!(names.contains(&expected), "{expected} missing: {names:?}");
    }
    assert!(
        listed > initialized * 3,
        "initialize took {initialized:?}, the plugins {listed:?}: it waited for them"
    );
    // A call right away works too.
    server.send(&call(2, "echo", json!({"text": "hi"})));
    let answer = server.answer();
    assert_eq!(answer["id"], 2, "{answer}");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hi")
    );
}

#[test]
fn tools_list_pages_with_cursors() {
    let config = format!("{CONFIG}allow = [\"network:fetch\"]\n");
    let (_dir, root) = workspace(&config);
    // Two tool files of 120 tools each: more than two pages.
    for file in 0..2 {
        let mut text = String::from("toolset = \"many\"\nbase_url = \"http://127.0.0.1:9\"\n");
        for tool in 0..120 {
            text.push_str(&format!(
                "\n[[tools]]\nname = \"t{file}_{tool}\"\ndescription = \"A tool.\"\nurl = \"/x\"\n"
            ));
        }
        std::fs::write(root.join(format!("plugins/many{file}.toml")), text).unwrap();
    }
    let (mut server, _) = Stdio::initialized(&root, &[]);
    let mut names = std::collections::BTreeSet::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => json!({}),
        };
        pages += 1;
        server.send(
            &json!({"jsonrpc": "2.0", "id": pages, "method": "tools/list", "params": params}),
        );
        let answer = server.answer();
        let tools = answer["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"));
        assert!(tools.len() <= 100, "a page of {}", tools.len());
        for tool in tools {
            assert!(
                names.insert(tool["name"].as_str().unwrap().to_string()),
                "twice: {tool}"
            );
        }
        match answer["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 3, "{} tools", names.len());
    assert!(names.contains("t0_0") && names.contains("t1_119") && names.contains("echo"));
    // A cursor the server never gave is an invalid param.
    server.send(
        &json!({"jsonrpc": "2.0", "id": 99, "method": "tools/list", "params": {"cursor": "nope"}}),
    );
    let answer = server.answer();
    assert_eq!(error_of(&answer), (json!(99), -32602), "{answer}");
}

/// Calls `todo` once after `logging/setLevel` to `level` (none: not set);
/// the `notifications/message` lines that came before the answer.
fn log_lines_of_first_todo(level: Option<&str>) -> Vec<Value> {
    let (_dir, root) = workspace(CONFIG);
    let (mut server, _) = Stdio::initialized(&root, &[]);
    if let Some(level) = level {
        server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": level}}));
        assert_eq!(server.answer()["id"], 1);
    }
    // The tasks plugin logs at debug when a session's list starts.
    server.send(&call(2, "todo", json!({"action": "list"})));
    let mut lines = Vec::new();
    loop {
        let message = server.answer();
        if message["id"] == 2 {
            assert!(message["result"].is_object(), "{message}");
            return lines;
        }
        if message["method"] == "notifications/message" {
            lines.push(message["params"].clone());
        }
    }
}

#[test]
fn guest_log_lines_reach_the_client_at_its_level() {
    let lines = log_lines_of_first_todo(Some("debug"));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["level"], "debug");
    assert_eq!(lines[0]["logger"], "tasks");
    assert!(
        lines[0]["data"]["message"]
            .as_str()
            .unwrap()
            .contains("todo list for session"),
        "{lines:?}"
    );
    // Until the client sets a level, `info` and above; the line is `debug`.
    assert!(log_lines_of_first_todo(Some("info")).is_empty());
    assert!(log_lines_of_first_todo(None).is_empty());
    assert!(log_lines_of_first_todo(Some("error")).is_empty());
}

#[test]
fn a_session_narrowed_in_initialize_cannot_write_although_its_profile_can() {
    let (_dir, root) = workspace(
        "default_profile = \"dev\"\n[profiles.dev]\nallow = [\"file:*\"]\nfile.write = [\".\"]\n",
    );
    let mut server = Stdio::start(&root, &[]);
    server.send(&json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"experimental": {"toolhost": {"narrow": {"deny": ["file:write"]}}}},
            "clientInfo": { "name": "test", "version": "0" },
        },
    }));
    assert_eq!(server.answer()["id"], json!(0));
    server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let listed = server.answer();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"read_file"), "{names:?}");
    assert!(!names.contains(&"write_file"), "{names:?}");
    server.send(&json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}},
    }));
    let answer = server.answer();
    let text = answer.to_string();
    assert!(text.contains("not available in this session"), "{text}");
    assert!(!root.join("x.txt").exists());
}
