//! Attack tests: approval (see mod.rs). The `build-dirs` automatic rule
//! must judge what `rm` will really delete: an operand that is, or passes
//! through, a symbolic link, one that does not exist, one with dot segments
//! or glob characters, and one read from a session's current directory go
//! to the approver; a tenant's approver that denies keeps the files.

use std::time::Duration;

use serde_json::{Value, json};

use super::tenants::served::{Served, Setup, exists, sha256_hex};

const TOKEN: &str = "builder-token";

/// A tenant whose dangerous commands need approval, with `build-dirs` on.
fn config() -> String {
    format!(
        r#"
plugins = "plugins"
default_profile = "dev"
audit = "off"

[approvals]
timeout = "30s"
auto = ["build-dirs"]

[profiles.dev]
allow = ["file:*", "terminal:*"]
file.write = ["."]
terminal.dangerous = "approve"

[tenants.builder]
token_sha256 = "{}"
profile = "dev"
workspace = "ws"
"#,
        sha256_hex(TOKEN)
    )
}

fn start() -> Served {
    crate::use_launcher();
    let served = Served::start(&config(), &["ws/src/lib"]);
    std::fs::write(served.path("ws/src/lib/main.rs"), "fn main() {}").unwrap();
    served
}

/// Runs `line` with `run_command` in `session`, which must succeed.
async fn run(served: &Served, session: &str, line: &str) -> Value {
    let result = served
        .call(
            TOKEN,
            Some(session),
            "run_command",
            json!({ "command": line }),
        )
        .await;
    assert!(result.get("error").is_none(), "{line}: {result}");
    result
}

/// `tool` with `arguments` in `session` must be asked about (the approval
/// is listed for the tenant, with `line` as its command) rather than
/// approved by the rule; the tenant denies it and the call is refused.
async fn asked(served: &Served, session: &str, tool: &str, arguments: Value, line: &str) {
    let result = answered(served, session, tool, arguments, line, "deny").await;
    let error = result["error"].as_str().unwrap_or_default();
    assert!(error.contains("was not approved"), "{line:?}: {result}");
}

/// `tool` with `arguments` in `session`, asked about as `line` and answered
/// with `decision`: the call's result.
async fn answered(
    served: &Served,
    session: &str,
    tool: &str,
    arguments: Value,
    line: &str,
    decision: &str,
) -> Value {
    let call = {
        let client = served.client.clone();
        let url = format!("{}/v1/tool_calls", served.base);
        let body = super::tenants::served::batch(Some(session), tool, &arguments);
        tokio::spawn(async move {
            let response = client.post(url).bearer_auth(TOKEN).json(&body).send().await;
            let body: Value = response.unwrap().json().await.unwrap();
            let content = body["tool_results"][0]["content"].as_str().unwrap();
            serde_json::from_str::<Value>(content).unwrap()
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let id = loop {
        assert!(
            !call.is_finished(),
            "{line:?} was not asked about: {}",
            call.await.unwrap()
        );
        let (_, listed) = served.get("/v1/approvals", TOKEN).await;
        let found = listed["approvals"].as_array().and_then(|list| {
            list.iter()
                .find(|a| a["subject"]["command"] == line)
                .map(|a| a["id"].as_str().unwrap().to_string())
        });
        if let Some(id) = found {
            break id;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{line:?} never listed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (status, body) = served
        .post(
            &format!("/v1/approvals/{id}"),
            TOKEN,
            &json!({ "decision": decision }),
        )
        .await;
    assert!(status.is_success(), "{body}");
    call.await.unwrap()
}

#[tokio::test]
async fn an_always_answer_on_a_long_line_is_not_kept_whole() {
    let served = start();
    let allowlist = served.path("toolhost-approvals.json");
    let short = "rm -rf junk0";
    let result = answered(
        &served,
        "s",
        "run_command",
        run_args(short),
        short,
        "always",
    )
    .await;
    assert!(result.get("error").is_none(), "{result}");
    let kept = std::fs::read_to_string(&allowlist).unwrap_or_default();
    assert!(kept.contains(short), "{kept}");
    let long = format!("rm -rf junk1 # {}", "A".repeat(64 << 10));
    let result = answered(
        &served,
        "s",
        "run_command",
        run_args(&long),
        &long,
        "always",
    )
    .await;
    assert!(result.get("error").is_none(), "{result}");
    let size = std::fs::metadata(&allowlist).map_or(0, |m| m.len());
    assert!(size < 8 << 10, "the allowlist grew to {size} bytes");
}

fn run_args(line: &str) -> Value {
    json!({ "command": line })
}

#[tokio::test]
async fn a_symlink_named_like_a_build_dir_is_not_deleted_unasked() {
    let served = start();
    let src = served.path("ws/src/lib/main.rs");
    run(
        &served,
        "s",
        "ln -s src target && mkdir -p real/node_modules",
    )
    .await;
    for line in [
        "rm -rf target/",
        "rm -rf target",
        "rm -rf ./target/../src",
        "rm -rf targ*",
        "rm -rf ./target/.",
        // Does not exist: nothing to judge.
        "rm -rf dist",
    ] {
        asked(&served, "s", "run_command", run_args(line), line).await;
        assert!(src.exists(), "{line:?} emptied src");
    }
    // The allowed case: a real build directory, one name, a new shell.
    let result = served
        .call(
            TOKEN,
            None,
            "run_command",
            json!({ "command": "rm -rf node_modules", "cwd": "real" }),
        )
        .await;
    assert!(result.get("error").is_none(), "{result}");
    assert!(!exists(&served.path("ws/real/node_modules")));
    assert!(src.exists());
}

#[tokio::test]
async fn a_session_whose_path_finds_a_planted_rm_is_asked() {
    let served = start();
    let src = served.path("ws/src/lib/main.rs");
    run(
        &served,
        "h",
        "mkdir -p target .bin && printf '#!/bin/sh\\nexec /bin/rm -rf src\\n' > .bin/rm && \
         chmod +x .bin/rm && export PATH=$PWD/.bin:$PATH",
    )
    .await;
    for line in ["rm -rf target", "rm -rf ./target"] {
        asked(&served, "h", "run_command", run_args(line), line).await;
        assert!(src.exists(), "{line:?} ran the planted rm");
    }
}

#[tokio::test]
async fn operands_are_judged_in_the_sessions_current_directory() {
    let served = start();
    let src = served.path("ws/src/lib/main.rs");
    // The workspace has a real node_modules; sub's is a link to src.
    run(
        &served,
        "s",
        "mkdir -p node_modules/pkg sub && ln -s ../src sub/node_modules",
    )
    .await;
    run(&served, "s", "cd sub").await;
    asked(
        &served,
        "s",
        "run_command",
        run_args("rm -rf node_modules"),
        "rm -rf node_modules",
    )
    .await;
    assert!(src.exists(), "the session's node_modules was src");
    // The same line in one command.
    let line = "cd sub && rm -rf node_modules";
    asked(&served, "t", "run_command", run_args(line), line).await;
    // Started in the background, the command starts there too.
    let start_args = json!({ "command": "rm -rf node_modules/" });
    asked(
        &served,
        "s",
        "process_start",
        start_args,
        "rm -rf node_modules/",
    )
    .await;
    assert!(src.exists());
    // A command given its own directory is judged there: the workspace's
    // real node_modules goes unasked.
    let own = json!({ "command": "rm -rf node_modules", "cwd": "." });
    let removed = served.call(TOKEN, Some("s"), "run_command", own).await;
    assert!(removed.get("error").is_none(), "{removed}");
    assert!(!exists(&served.path("ws/node_modules")));
    assert!(src.exists());
}

#[tokio::test]
async fn a_line_written_to_a_shell_is_judged_from_nowhere() {
    let served = start();
    let src = served.path("ws/src/lib/main.rs");
    run(
        &served,
        "s",
        "mkdir -p sub node_modules && ln -s ../src sub/node_modules",
    )
    .await;
    let started = served
        .call(
            TOKEN,
            Some("s"),
            "process_start",
            json!({ "command": "bash" }),
        )
        .await;
    let id = started["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("{started}"));
    let written = served
        .call(
            TOKEN,
            Some("s"),
            "process_write",
            json!({ "id": id, "input": "cd sub\n" }),
        )
        .await;
    assert!(written.get("error").is_none(), "{written}");
    let input = json!({ "id": id, "input": "rm -rf node_modules\n" });
    asked(&served, "s", "process_write", input, "rm -rf node_modules").await;
    assert!(src.exists());
}

#[tokio::test]
async fn a_hook_tools_long_answer_is_not_taken() {
    crate::use_launcher();
    let config = config().replace("auto = [\"build-dirs\"]", "auto = [\"tool:judge\"]");
    let served = Served::launch(Setup {
        config: &config,
        dirs: &["ws/scratch-long-answer"],
        plugins: &[toolhost_tests::JUDGE],
        ..Setup::default()
    });
    // The hook approves anything on scratch, here with 100 kB more.
    let line = "rm -rf scratch-long-answer";
    asked(&served, "s", "run_command", run_args(line), line).await;
    assert!(served.path("ws/scratch-long-answer").exists());
}
