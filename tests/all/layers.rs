//! The permission layers through the real host and the bundled tools: the
//! global layer under every profile, per-tool overrides, and restrictions
//! on a tool's arguments, each with what it allows and what it refuses.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::routing::any;
use serde_json::{Value, json};
use toolhost::config::{Config, ConfigSource};
use toolhost::{ErrorKind, Host};

/// A host of the bundled tools under profile `profile` of `config`, rooted
/// in `root`.
async fn host(config: &str, profile: &str, root: &std::path::Path) -> Host {
    let config =
        Config::parse(config, ConfigSource::Embedded, root).unwrap_or_else(|e| panic!("{e}"));
    Host::builder()
        .config(&config)
        .unwrap()
        .bundled(true)
        .profile(config.profile(profile, None).unwrap())
        .build()
        .await
        .unwrap()
}

async fn call(host: &Host, tool: &str, arguments: Value) -> Result<Value, (ErrorKind, String)> {
    match host.call(tool, arguments).await {
        Ok(raw) => Ok(serde_json::from_str(raw.get()).unwrap()),
        Err(e) => Err((e.kind(), e.to_string())),
    }
}

fn offered(host: &Host) -> Vec<String> {
    host.listing(&host.caller(), &Default::default())
        .unwrap()
        .into_iter()
        .filter(|listed| listed.hidden.is_none())
        .map(|listed| listed.spec.name.clone())
        .collect()
}

/// A server that counts the requests it gets and answers with the path.
async fn counting_server() -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let router = Router::new().fallback(any(move |uri: axum::http::Uri| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            uri.path().to_string()
        }
    }));
    let addr = crate::network::serve(crate::network::listener().await, router).await;
    (addr, hits)
}

#[tokio::test]
async fn a_parameter_restriction_refuses_http_request_outside_its_pattern() {
    let (addr, hits) = counting_server().await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"
default_profile = "dev"
[profiles.dev]
allow = ["network:fetch"]
network.allow_hosts = ["127.0.0.1"]
[profiles.dev.tools.http_request.arguments]
"/url" = ["http://{addr}/api/*"]
"/method" = {{ enum = ["GET", "HEAD"] }}
"/max_bytes" = {{ min = 1, max = 1000 }}
"/headers/*" = {{ regex = "[a-z0-9 ]*" }}
"#
    );
    let host = host(&config, "dev", dir.path()).await;

    let allowed = call(
        &host,
        "http_request",
        json!({"url": format!("http://{addr}/api/x")}),
    )
    .await
    .unwrap();
    assert_eq!(allowed["status"], 200);
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    for (arguments, at, rule) in [
        (
            json!({"url": format!("http://{addr}/other")}),
            "/url",
            "/url",
        ),
        (
            json!({"url": format!("http://{addr}/api/x"), "method": "POST"}),
            "/method",
            "/method",
        ),
        (
            json!({"url": format!("http://{addr}/api/x"), "max_bytes": 5000}),
            "/max_bytes",
            "/max_bytes",
        ),
        (
            json!({"url": format!("http://{addr}/api/x"), "headers": {"x-a": "EVIL"}}),
            "/headers/x-a",
            "/headers/*",
        ),
    ] {
        let (kind, message) = call(&host, "http_request", arguments.clone())
            .await
            .expect_err(&arguments.to_string());
        assert_eq!(kind, ErrorKind::Denied, "{message}");
        assert!(message.contains(&format!("argument {at} ")), "{message}");
        let key = format!("profiles.dev.tools.http_request.arguments.{rule}");
        assert!(message.contains(&key), "{message}");
    }
    // The refused calls never reached the server.
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // A repeated key: the host checks the value JSON keeps (the last), and
    // the guest gets exactly the arguments that were checked.
    let repeated = format!(r#"{{"url": "http://{addr}/other", "url": "http://{addr}/api/last"}}"#);
    let raw = host.call("http_request", repeated.as_str()).await.unwrap();
    let answered: Value = serde_json::from_str(raw.get()).unwrap();
    assert_eq!(answered["status"], 200, "{answered}");
    assert_eq!(answered["body"], "/api/last", "{answered}");
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    let repeated = format!(r#"{{"url": "http://{addr}/api/x", "url": "http://{addr}/other"}}"#);
    let (kind, _) = call(
        &host,
        "http_request",
        serde_json::from_str(&repeated).unwrap(),
    )
    .await
    .unwrap_err();
    assert_eq!(kind, ErrorKind::Denied);
    let error = host
        .call("http_request", repeated.as_str())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Denied);
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn the_tool_layer_switches_off_denies_grants_and_asks_per_tool() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "hello\n").unwrap();
    let config = r#"
default_profile = "dev"
[profiles.dev]
allow = ["file:*"]
file.write = ["."]
[profiles.dev.tools.read_file]
enabled = false
[profiles.dev.tools.write_file]
approval_required = ["file:write"]
[profiles.dev.tools.search_files]
deny = ["file:read"]
[profiles.dev.tools.http_request]
allow = ["network:fetch"]
"#;
    let host = host(config, "dev", &root).await;
    let tools = offered(&host);
    for hidden in ["read_file", "search_files", "web_fetch"] {
        assert!(!tools.iter().any(|t| t == hidden), "{hidden} in {tools:?}");
    }
    for shown in ["list_dir", "write_file", "edit_file", "http_request"] {
        assert!(tools.iter().any(|t| t == shown), "{shown} not in {tools:?}");
    }

    let (kind, message) = call(&host, "read_file", json!({"path": "notes.txt"}))
        .await
        .unwrap_err();
    assert_eq!(kind, ErrorKind::Unavailable);
    assert!(
        message.contains("profiles.dev.tools.read_file.enabled = false"),
        "{message}"
    );
    let (_, message) = call(&host, "search_files", json!({"pattern": "hello"}))
        .await
        .unwrap_err();
    assert!(message.contains("deny rule \"file:read\""), "{message}");

    // write_file asks (and no one can answer here); edit_file does not.
    let (kind, message) = call(
        &host,
        "write_file",
        json!({"path": "a.txt", "content": "x"}),
    )
    .await
    .unwrap_err();
    assert_eq!(kind, ErrorKind::Denied, "{message}");
    assert!(message.contains("was not approved"), "{message}");
    assert!(!root.join("a.txt").exists());
    call(
        &host,
        "edit_file",
        json!({"path": "notes.txt", "old_text": "hello", "new_text": "bye"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "bye\n"
    );
}

#[tokio::test]
async fn the_global_layer_applies_under_every_profile() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("id.key"), "secret").unwrap();
    std::fs::write(root.join("notes.txt"), "notes").unwrap();
    let config = r#"
default_profile = "a"
[global]
deny = ["terminal:*"]
file.deny = ["**/*.key"]
[global.tools.list_dir]
enabled = false
[profiles.a]
allow = ["file:read", "terminal:run"]
file.read = ["."]
[profiles.b]
allow = ["*"]
file.write = ["."]
"#;
    for profile in ["a", "b"] {
        let host = host(config, profile, &root).await;
        let tools = offered(&host);
        assert!(
            tools.iter().any(|t| t == "read_file"),
            "{profile}: {tools:?}"
        );
        for hidden in ["run_command", "list_dir"] {
            assert!(!tools.iter().any(|t| t == hidden), "{profile}: {hidden}");
        }
        let read = call(&host, "read_file", json!({"path": "notes.txt"}))
            .await
            .unwrap();
        assert_eq!(read["content"], "notes");
        let (kind, message) = call(&host, "read_file", json!({"path": "id.key"}))
            .await
            .unwrap_err();
        assert_eq!(kind, ErrorKind::Denied, "{profile}: {message}");
    }
}

#[test]
fn layer_problems_name_their_keys() {
    let problems = |text: &str| match Config::parse(text, ConfigSource::Embedded, "/w".as_ref()) {
        Ok(_) => Vec::new(),
        Err(e) => e
            .problems
            .into_iter()
            .map(|(k, m)| format!("{k}: {m}"))
            .collect(),
    };
    let found = problems(
        r#"
default_profile = "p"
[global]
deny = ["Bad"]
[global.tools.x.arguments]
"/a" = { regex = "(" }
[profiles.p]
[profiles.q]
[profiles.p.tools.t]
allow = ["no pe"]
[profiles.p.tools.t.arguments]
"url" = ["x"]
"#,
    );
    assert_eq!(found.len(), 4, "{found:#?}");
    assert!(
        found.iter().any(|p| p.starts_with("global: ")),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("global.tools.x.arguments./a: invalid regular")),
        "{found:#?}"
    );
    assert!(
        found.iter().any(|p| p.starts_with("profiles.p.tools.t: ")),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("profiles.p.tools.t.arguments.url: ")),
        "{found:#?}"
    );
}
