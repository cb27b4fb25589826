//! Calls that waited (for an approval, a slot) while the rules they were
//! made under changed: a reload or a narrowing of their session comes
//! first, and the approved call, or the dangerous command approved inside
//! a running guest, does not run.

use reqwest::StatusCode;
use serde_json::json;

use super::served::Served;
use super::{A, narrow, pending, start, write_in_background};

/// Rewrites the server's configuration, `from` becoming `to`, and waits
/// until the tenants have the new one.
fn reload_with(served: &mut Served, from: &str, to: &str) {
    let text = std::fs::read_to_string(served.path("toolhost.toml")).unwrap();
    let changed = text.replace(from, to);
    assert_ne!(text, changed);
    std::fs::write(served.path("toolhost.toml"), changed).unwrap();
    served.wait_for("tenants reloaded");
}

/// Answers approval `id` of tenant `a`: once.
async fn approve_once(served: &Served, id: &str) {
    let (status, body) = served
        .post(
            &format!("/v1/approvals/{id}"),
            A,
            &json!({"decision": "once"}),
        )
        .await;
    assert!(status.is_success(), "{body}");
}

/// A call waiting for its approval when a reload takes its write grant
/// away does not run once approved: it was made under the rules before.
#[tokio::test]
async fn a_call_approved_after_a_reload_that_changed_its_rules_does_not_run() {
    let mut served = start("");
    let waiting = write_in_background(&served, A, None, "after-reload");
    let id = pending(&served, A, 1).await.remove(0);
    reload_with(&mut served, "file.write = [\".\"]", "file.write = []");
    approve_once(&served, &id).await;
    let result = waiting.await.unwrap();
    let message = result["error"].as_str().unwrap_or_default();
    assert!(message.contains("configuration was reloaded"), "{result}");
    let written = std::fs::read_dir(served.path("a"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    assert!(written.is_empty(), "{written:?}");
}

/// A call waiting for its approval when its session is narrowed away from
/// what it does does not run once approved: it was given the session's
/// rights before the narrowing.
#[tokio::test]
async fn a_call_approved_after_its_session_was_narrowed_does_not_run() {
    let served = start("");
    let waiting = write_in_background(&served, A, Some("s"), "after-narrowing");
    let id = pending(&served, A, 1).await.remove(0);
    let (status, body) = narrow(&served, A, "s", &["file:write".to_string()]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    approve_once(&served, &id).await;
    let result = waiting.await.unwrap();
    let message = result["error"].as_str().unwrap_or_default();
    assert!(message.contains("was narrowed or forgotten"), "{result}");
    assert!(!served.path("a/after-narrowing").exists());
}

/// A dangerous command waiting for its approval inside a running call when
/// the configuration is reloaded does not run once approved.
#[tokio::test]
async fn a_dangerous_command_approved_after_a_reload_does_not_run() {
    crate::use_launcher();
    let config = super::config("", "").replace(
        "terminal.max_output = \"1MiB\"",
        "terminal.max_output = \"1MiB\"\nterminal.dangerous = \"approve\"",
    );
    let mut served = Served::start(&config, &["a", "b"]);
    std::fs::create_dir_all(served.path("a/keep")).unwrap();
    let client = served.client.clone();
    let url = format!("{}/v1/tool_calls", served.base);
    let body = super::served::batch(None, "run_command", &json!({"command": "rm -rf keep"}));
    let waiting = tokio::spawn(async move {
        let response = client.post(url).bearer_auth(A).json(&body).send().await;
        let body: serde_json::Value = response.unwrap().json().await.unwrap();
        body["tool_results"][0]["content"]
            .as_str()
            .unwrap()
            .to_string()
    });
    let id = pending(&served, A, 1).await.remove(0);
    reload_with(
        &mut served,
        "terminal.max_output = \"1MiB\"",
        "terminal.max_output = \"2MiB\"",
    );
    approve_once(&served, &id).await;
    let result = waiting.await.unwrap();
    assert!(result.contains("configuration was reloaded"), "{result}");
    assert!(served.path("a/keep").is_dir(), "the approved command ran");
}

/// A guest's call runs one command, then starts another in the background;
/// a reload that takes the terminal away comes between the two. The second
/// is refused: every command a call runs is judged under the rules in
/// force when it starts, and no process outlives the revocation.
#[tokio::test]
async fn a_guest_call_starts_no_background_process_after_a_reload_took_the_terminal_away() {
    crate::use_launcher();
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let file = root.join("toolhost.toml");
    let text = "default_profile = \"dev\"\ncache_dir = \"cache\"\naudit = \"off\"\n\
                [profiles.dev]\nallow = [\"terminal:*\", \"file:read\"]\nfile.read = [\".\"]\n\
                terminal.dangerous = \"allow\"\n";
    std::fs::write(&file, text).unwrap();
    let config = toolhost::config::Config::load(&file).unwrap();
    let host = toolhost::Host::builder()
        .config(&config)
        .unwrap()
        .plugin_file(toolhost_tests::SHELL)
        .build()
        .await
        .unwrap();
    let marker = root.join("alive");
    let call = {
        let host = host.clone();
        let then = format!("while :; do date >> {}; sleep 0.2; done", marker.display());
        tokio::spawn(async move {
            host.call(
                "run_then_start",
                json!({ "first": "sleep 2", "then": then }),
            )
            .await
            .map(|result| result.get().to_string())
            .unwrap_or_else(|e| e.to_string())
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    std::fs::write(&file, text.replace("\"terminal:*\", ", "")).unwrap();
    host.reload_config(&file).unwrap();
    let result = call.await.unwrap();
    assert!(result.contains("denied"), "{result}");
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert!(!marker.exists(), "the background process ran: {result}");
}
