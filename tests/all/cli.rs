//! The `toolhost` command line, run as a process.

use std::process::{Command, Output};

fn toolhost(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("the toolhost binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn list_shows_the_bundled_tools() {
    let output = toolhost(&["list"]);
    assert!(output.status.success(), "{output:?}");
    let text = stdout(&output);
    assert!(text.starts_with("TOOL "), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("echo ") && l.contains("demo")),
        "{text}"
    );
}

#[test]
fn list_json_is_machine_readable() {
    let output = toolhost(&["list", "--json"]);
    let tools: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let echo = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap();
    assert_eq!(echo["toolset"], "demo");
    assert_eq!(echo["parameters"]["type"], "object");
}

#[test]
fn call_prints_the_result() {
    let output = toolhost(&["call", "echo", r#"{"text":"hi"}"#]);
    assert!(output.status.success(), "{output:?}");
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result, serde_json::json!({"text": "hi"}));
}

#[test]
fn call_reads_arguments_from_stdin() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(["call", "echo", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"text":"piped"}"#)
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    assert!(stdout(&output).contains("piped"));
}

#[test]
fn a_failed_call_prints_an_error_object_and_exits_non_zero() {
    let output = toolhost(&["call", "nope"]);
    assert!(!output.status.success());
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .starts_with("unknown_tool: no tool named \"nope\"")
    );
}

/// Arguments given as text reach the guest as that text, unless a key is
/// given twice (which readers take either way): the guest then gets the
/// value the host checked, the key's last value.
#[test]
fn arguments_that_give_a_key_twice_reach_the_guest_as_checked() {
    let output = toolhost(&["call", "echo", r#"{"text": 5, "text": "ok"}"#]);
    assert!(output.status.success(), "{output:?}");
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["text"], "ok");
    // The schema refuses what the last value would be.
    let output = toolhost(&["call", "echo", r#"{"text": "ok", "text": 5}"#]);
    assert!(!output.status.success(), "{output:?}");
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let error = result["error"].as_str().unwrap();
    assert!(error.starts_with("invalid_arguments: "), "{error}");
    // Written again for the guest, the arguments stay within their limit
    // (1 MiB): 80,000 numbers of 4 bytes written out as 18.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("arguments.json");
    let pad = vec!["1e15"; 80_000].join(",");
    std::fs::write(
        &file,
        format!(r#"{{"text": "a", "text": "b", "pad": [{pad}]}}"#),
    )
    .unwrap();
    let output = toolhost(&["call", "echo", file.to_str().unwrap()]);
    assert!(!output.status.success(), "{output:?}");
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let error = result["error"].as_str().unwrap();
    assert!(
        error.contains("bytes as the host writes them for the guest"),
        "{error}"
    );
}

#[test]
fn plugins_dir_adds_plugins_and_check_reports_on_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(toolhost_tests::MISBEHAVE, dir.path().join("misbehave.wasm")).unwrap();
    let output = toolhost(&["--plugins", dir.path().to_str().unwrap(), "list"]);
    assert!(stdout(&output).lines().any(|l| l.starts_with("flood ")));

    let output = toolhost(&["check", toolhost_tests::BADSPEC]);
    assert!(!output.status.success());
    assert!(stdout(&output).contains("✗ does not load"));
    let output = toolhost(&["check", toolhost_tests::MISBEHAVE]);
    assert!(output.status.success(), "{output:?}");
}

#[test]
fn a_missing_plugins_dir_is_a_clear_error() {
    let output = toolhost(&["--plugins", "/nonexistent/plugins", "list"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("plugin directory /nonexistent/plugins does not exist"),
        "{stderr}"
    );
}

#[test]
fn list_formats_and_toolset_selection() {
    let output = toolhost(&["list", "--format", "openai", "--toolset", "demo"]);
    assert!(output.status.success(), "{output:?}");
    let tools: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo", "now"]);

    let output = toolhost(&[
        "list",
        "--format",
        "mcp",
        "--toolset",
        "all",
        "--disable",
        "demo,text,data,file,terminal,web",
    ]);
    let tools: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(tools[0]["name"], "todo");
    assert!(tools[0]["inputSchema"].is_object());

    let output = toolhost(&["list", "--toolset", "nope"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown toolset \"nope\""));
}

#[test]
fn call_batch_reads_the_openai_shape_from_stdin() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(["call", "--batch", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let batch = serde_json::json!({"tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "echo", "arguments": "{\"text\":\"1\"}"}},
        {"id": "b", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
    ]});
    child
        .stdin
        .take()
        .unwrap()
        .write_all(batch.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let results: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(results["tool_results"][0]["tool_call_id"], "a");
    assert_eq!(results["tool_results"][0]["content"], r#"{"text":"1"}"#);
    assert_eq!(results["tool_results"][1]["tool_call_id"], "b");
    assert!(
        results["tool_results"][1]["content"]
            .as_str()
            .unwrap()
            .contains("unknown_tool")
    );
}

#[test]
fn new_creates_a_project_and_refuses_a_bad_name() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().to_str().unwrap();
    let output = toolhost(&["new", "weather", "--lang", "python", "--dir", dir]);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout(&output).contains("created "), "{output:?}");
    assert!(parent.path().join("weather/app.py").is_file());
    assert!(parent.path().join("weather/build.sh").is_file());

    let output = toolhost(&["new", "Bad Name", "--dir", dir]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("plugin name \"Bad Name\" is invalid"),
        "{stderr}"
    );
}

#[test]
fn check_validates_declarative_tool_files() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("status.toml");
    std::fs::write(
        &good,
        "[[tools]]\nname = \"service_status\"\ndescription = \"Status of a service.\"\n\
         url = \"https://status.example.com/api/{service}\"\n\
         parameters.service = { required = true, enum = [\"api\", \"web\"] }\n",
    )
    .unwrap();
    let output = toolhost(&["check", good.to_str().unwrap()]);
    assert!(output.status.success(), "{output:?}");
    let text = stdout(&output);
    assert!(
        text.contains("service_status") && text.contains("✓ ok: 1 tool would load"),
        "{text}"
    );

    let bad = dir.path().join("broken.toml");
    std::fs::write(
        &bad,
        "[[tools]]\nname = \"x\"\ndescription = \"d\"\nurl = \"/relative\"\n",
    )
    .unwrap();
    let output = toolhost(&["check", bad.to_str().unwrap()]);
    assert!(!output.status.success());
    let text = stdout(&output);
    assert!(
        text.contains("tools[0].url: \"/relative\" is a path; set base_url"),
        "{text}"
    );
}

#[test]
fn check_prints_a_profiles_permissions_layer_by_layer() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolhost.toml");
    std::fs::write(
        &config,
        r#"
default_profile = "reader"
[global]
deny = ["terminal:*"]
file.deny = ["**/*.pem"]
[profiles.reader]
allow = ["file:read"]
[profiles.dev]
allow = ["file:*", "network:fetch"]
approval_required = ["file:write"]
[profiles.dev.tools.http_request]
approval_required = ["network:fetch"]
[profiles.dev.tools.http_request.arguments]
"/url" = ["https://api.github.com/*"]
"#,
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let output = toolhost(&[
        "--config",
        config,
        "--profile",
        "dev",
        "check",
        "--tool",
        "http_request",
    ]);
    assert!(output.status.success(), "{output:?}");
    let text = stdout(&output);
    for expected in [
        "profile \"dev\"",
        "1. global",
        "   deny: terminal:*",
        "   file.deny: **/*.pem",
        "2. session",
        "3. profile \"dev\"",
        "   allow: file:*, network:fetch",
        "   tool http_request (profiles.dev.tools.http_request)",
        "4. parameters",
        "   http_request /url: one of the globs [\"https://api.github.com/*\"] \
         (profiles.dev.tools.http_request.arguments./url; canonical URLs only)",
        "   http_request: offered",
        "     network:fetch: needs approval (approval_required \"network:fetch\")",
    ] {
        assert!(text.contains(expected), "{expected:?} not in:\n{text}");
    }
    assert!(
        !text.contains("read_file"),
        "only the tool asked for:\n{text}"
    );

    // Without --tool: every tool, each with its decisions.
    let output = toolhost(&["--config", config, "check"]);
    let text = stdout(&output);
    assert!(text.contains("   read_file: offered"), "{text}");
    assert!(text.contains("   write_file: hidden"), "{text}");
    assert!(text.contains("   run_command: hidden"), "{text}");
    let output = toolhost(&["--config", config, "check", "--tool", "nope"]);
    assert!(!output.status.success());
}
