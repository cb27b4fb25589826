//! Declarative HTTP tools: `*.toml` files in the plugin directory that wrap
//! an HTTP API without code, run by the bundled wrapper inside the sandbox
//! under the caller's network policy, hot-loaded like `.wasm` plugins.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use serde_json::{Value, json};
use toolhost::{ErrorKind, Host};
use toolhost::{ReloadEvent, WatchOptions};

/// What the test API received.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    uri: String,
    headers: HeaderMap,
    body: Bytes,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// An API on 127.0.0.1 that records each request and answers
/// `{"data": {"method", "uri", "body"}}`; `/text` answers plain text and
/// `/missing` 404.
async fn api() -> (SocketAddr, Log) {
    async fn handle(
        State(log): State<Log>,
        method: Method,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> axum::response::Response {
        use axum::response::IntoResponse;
        log.lock().unwrap().push(Seen {
            method: method.clone(),
            uri: uri.to_string(),
            headers,
            body: body.clone(),
        });
        match uri.path() {
            "/text" => "plain words".into_response(),
            "/missing" => (axum::http::StatusCode::NOT_FOUND, "no such thing").into_response(),
            _ => {
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                axum::Json(json!({"data": {"method": method.as_str(), "uri": uri.to_string(), "body": body}}))
                    .into_response()
            }
        }
    }
    let log = Log::default();
    let router = Router::new().fallback(handle).with_state(log.clone());
    let addr = crate::network::serve(crate::network::listener().await, router).await;
    (addr, log)
}

/// A tool file for the API at `addr`.
fn tools(addr: SocketAddr) -> String {
    format!(
        r#"
toolset = "inventory"
base_url = "http://{addr}/v1"
headers = {{ Accept = "application/json" }}

[[tools]]
name = "get_item"
description = "Look up an item by id."
url = "/items/{{id}}"
response = {{ pointer = "/data" }}
parameters.id = {{ type = "integer", description = "Item id", required = true }}
parameters.fields = {{ type = "array", items = "string" }}
parameters.units = {{ enum = ["metric", "imperial"], default = "metric" }}

[[tools]]
name = "add_item"
description = "Add an item."
method = "POST"
url = "/items"
auth = {{ type = "bearer", env = "DECLARATIVE_TEST_TOKEN" }}
response = {{ pointer = "/data/body" }}
parameters.name = {{ required = true }}
parameters.count = {{ type = "integer", default = 1 }}
parameters.trace = {{ in = "header" }}

[[tools]]
name = "words"
description = "Plain text."
url = "http://{addr}/text"
response = {{ format = "text" }}

[[tools]]
name = "missing"
description = "Always 404."
url = "http://{addr}/missing"
"#
    )
}

/// Allows fetching from 127.0.0.1 and passing the test token.
const ALLOWED: &str = r#"
allow = ["network:fetch", "env:read"]
network.allow_hosts = ["127.0.0.1"]
env.allow = ["DECLARATIVE_TEST_TOKEN"]
"#;

async fn host_with(dir: &Path, profile: &str) -> Host {
    let host = Host::builder()
        .bundled(false)
        .plugin_dir(dir)
        .profile(crate::profile(profile, dir))
        .build()
        .await
        .unwrap();
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    host
}

#[tokio::test]
async fn arguments_go_to_path_query_headers_and_body_and_answers_are_shaped() {
    let (addr, log) = api().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("inventory.toml"), tools(addr)).unwrap();
    // SAFETY: no other test reads or writes this variable.
    unsafe { std::env::set_var("DECLARATIVE_TEST_TOKEN", "t0ken") };
    let host = host_with(dir.path(), ALLOWED).await;

    // Listed like any tool: schema from the parameters, hints from the method.
    let listed = toolhost::serve::mcp::tools_list(&host, &toolhost::Selection::all()).unwrap();
    let get_item = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "get_item")
        .unwrap()
        .clone();
    assert_eq!(get_item["inputSchema"]["required"], json!(["id"]));
    assert_eq!(
        get_item["inputSchema"]["properties"]["units"]["default"],
        "metric"
    );
    assert_eq!(get_item["annotations"]["readOnlyHint"], true);

    let got = crate::call_ok(&host, "get_item", r#"{"id": 7, "fields": ["a", "b c"]}"#).await;
    assert_eq!(got["method"], "GET");
    assert_eq!(got["uri"], "/v1/items/7?fields=a&fields=b%20c&units=metric");
    let seen = log.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.headers["accept"], "application/json");
    assert!(seen.headers.get("authorization").is_none());

    let added = crate::call_ok(&host, "add_item", r#"{"name": "bolt", "trace": "x-1"}"#).await;
    assert_eq!(added, json!({"name": "bolt", "count": 1}));
    let seen = log.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.method, Method::POST);
    assert_eq!(seen.uri, "/v1/items");
    assert_eq!(seen.headers["authorization"], "Bearer t0ken");
    assert_eq!(seen.headers["trace"], "x-1");
    assert_eq!(seen.headers["content-type"], "application/json");
    assert_eq!(
        serde_json::from_slice::<Value>(&seen.body).unwrap()["name"],
        "bolt"
    );

    assert_eq!(crate::call_ok(&host, "words", "{}").await, "plain words");

    let error = host.call("missing", "{}").await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::ToolFailed);
    assert!(
        error
            .message()
            .contains("the API answered 404: no such thing"),
        "{error}"
    );

    // Arguments are checked against the declared schema before any request.
    let before = log.lock().unwrap().len();
    let error = host
        .call("get_item", r#"{"id": "seven"}"#)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArguments);
    let error = host
        .call("get_item", r#"{"id": 1, "units": "cubits"}"#)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArguments);
    assert_eq!(log.lock().unwrap().len(), before);
}

#[tokio::test]
async fn declared_tools_obey_the_network_policy() {
    let (addr, log) = api().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("inventory.toml"), tools(addr)).unwrap();

    // Fetching allowed, but not this host: refused in the host, nothing sent.
    let other_host = host_with(
        dir.path(),
        "allow = [\"network:fetch\"]\nnetwork.allow_hosts = [\"api.example.com\"]\n",
    )
    .await;
    let error = other_host.call("words", "{}").await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Denied, "{error}");
    assert!(error.message().contains("127.0.0.1"), "{error}");
    assert!(log.lock().unwrap().is_empty());

    // No network:fetch at all: the tools are not offered.
    let no_network = host_with(dir.path(), "allow = [\"file:read\"]\n").await;
    let error = no_network.call("words", "{}").await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(log.lock().unwrap().is_empty());

    // A tool whose auth variable the profile does not pass is hidden too.
    let no_env = host_with(
        dir.path(),
        "allow = [\"network:fetch\", \"env:read\"]\nnetwork.allow_hosts = [\"127.0.0.1\"]\n",
    )
    .await;
    assert_eq!(crate::call_ok(&no_env, "words", "{}").await, "plain words");
    let error = no_env
        .call("add_item", r#"{"name": "x"}"#)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
    assert!(
        error.message().contains("DECLARATIVE_TEST_TOKEN"),
        "{error}"
    );
}

#[tokio::test]
async fn a_broken_edit_is_reported_by_key_and_the_working_version_keeps_serving() {
    let (addr, _log) = api().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("inventory.toml");
    std::fs::write(&file, tools(addr)).unwrap();
    let host = host_with(dir.path(), ALLOWED).await;

    let broken = tools(addr).replace("url = \"/items\"", "url = \"/items/{sku}\"");
    std::fs::write(&file, broken).unwrap();
    let error = host
        .reload_file(&file, Duration::from_secs(1))
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("tools[1].url: placeholder {sku} has no parameter"),
        "{message}"
    );
    assert!(message.contains("inventory.toml"), "{message}");
    assert_eq!(crate::call_ok(&host, "words", "{}").await, "plain words");
    assert_eq!(host.load_errors().len(), 1);

    // A good edit replaces it: the renamed tool is served, the old name is not.
    std::fs::write(
        &file,
        tools(addr).replace("name = \"words\"", "name = \"prose\""),
    )
    .unwrap();
    host.reload_file(&file, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(crate::call_ok(&host, "prose", "{}").await, "plain words");
    assert_eq!(
        host.call("words", "{}").await.unwrap_err().kind(),
        ErrorKind::UnknownTool
    );
    assert!(host.load_errors().is_empty());
}

#[tokio::test]
async fn the_watcher_loads_replaces_and_removes_tool_files() {
    let (addr, _log) = api().await;
    let dir = tempfile::tempdir().unwrap();
    let host = host_with(dir.path(), ALLOWED).await;
    let mut events = host.events();
    let options = WatchOptions {
        debounce: Duration::from_millis(60),
        grace: Duration::from_secs(5),
    };
    let _watcher = host.watch(dir.path(), None, options).unwrap();
    // The next event other than the report of a drained old version.
    let mut next = async || loop {
        let event = tokio::time::timeout(Duration::from_secs(20), events.recv())
            .await
            .expect("no reload event")
            .unwrap();
        if !matches!(event, ReloadEvent::Drained { .. }) {
            return event;
        }
    };

    let file = dir.path().join("inventory.toml");
    std::fs::write(&file, tools(addr)).unwrap();
    let event = next().await;
    assert!(
        matches!(&event, ReloadEvent::Loaded { plugin, tools, .. }
            if plugin == "inventory" && tools.len() == 4),
        "{event:?}"
    );
    assert_eq!(crate::call_ok(&host, "words", "{}").await, "plain words");

    // Edited: `words` now returns the raw response; the next call sees it.
    let edited = tools(addr).replace(
        "response = { format = \"text\" }",
        "response = { format = \"raw\" }",
    );
    assert_ne!(edited, tools(addr));
    std::fs::write(&file, edited).unwrap();
    let event = next().await;
    assert!(matches!(&event, ReloadEvent::Replaced { .. }), "{event:?}");
    let raw = crate::call_ok(&host, "words", "{}").await;
    assert_eq!(raw["status"], 200, "{raw}");
    assert_eq!(raw["body"], "plain words");

    std::fs::write(&file, "[[tools]]\nname = \"oops\"\n").unwrap();
    let event = next().await;
    assert!(
        matches!(&event, ReloadEvent::Failed { reason, .. } if reason.contains("missing field `description`")),
        "{event:?}"
    );
    // The edited version keeps serving.
    assert_eq!(
        crate::call_ok(&host, "words", "{}").await["body"],
        "plain words"
    );

    std::fs::remove_file(&file).unwrap();
    let event = next().await;
    assert!(matches!(event, ReloadEvent::Removed { .. }), "{event:?}");
    assert_eq!(
        host.call("words", "{}").await.unwrap_err().kind(),
        ErrorKind::Unavailable
    );
}

#[tokio::test]
async fn credentials_of_every_kind_stay_with_their_origin_on_redirects() {
    // The landing API (another origin: another port) records what arrives;
    // the first one redirects there, or to itself for `?same`.
    let (landing, landed) = api().await;
    async fn hop(
        State(landing): State<SocketAddr>,
        uri: Uri,
        headers: HeaderMap,
    ) -> axum::response::Response {
        use axum::response::IntoResponse;
        let here = headers["host"].to_str().unwrap().to_string();
        let target = match uri.query() {
            Some("same=same") => format!("http://{here}/landed"),
            _ => format!("http://{landing}/landed"),
        };
        if uri.path() == "/landed" {
            let auth = headers
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_string());
            let key = headers
                .get("x-api-key")
                .map(|v| v.to_str().unwrap().to_string());
            return axum::Json(json!({"authorization": auth, "x-api-key": key})).into_response();
        }
        (axum::http::StatusCode::FOUND, [("location", target)]).into_response()
    }
    let router = Router::new().fallback(hop).with_state(landing);
    let first = crate::network::serve(crate::network::listener().await, router).await;

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("secrets.toml"),
        format!(
            r#"
toolset = "secrets"
base_url = "http://{first}"

[[tools]]
name = "with_bearer"
description = "Bearer."
url = "/hop"
auth = {{ type = "bearer", env = "DECLARATIVE_REDIRECT_TOKEN" }}
parameters.same = {{ in = "query" }}

[[tools]]
name = "with_basic"
description = "Basic."
url = "/hop"
auth = {{ type = "basic", username_env = "DECLARATIVE_REDIRECT_USER", password_env = "DECLARATIVE_REDIRECT_TOKEN" }}
parameters.same = {{ in = "query" }}

[[tools]]
name = "with_header"
description = "A header of its own."
url = "/hop"
auth = {{ type = "header", name = "X-Api-Key", env = "DECLARATIVE_REDIRECT_TOKEN" }}
parameters.same = {{ in = "query" }}
"#
        ),
    )
    .unwrap();
    // SAFETY: no other test reads or writes these variables.
    unsafe {
        std::env::set_var("DECLARATIVE_REDIRECT_TOKEN", "s3cret");
        std::env::set_var("DECLARATIVE_REDIRECT_USER", "me");
    }
    let profile = r#"
allow = ["network:fetch", "env:read"]
network.allow_hosts = ["127.0.0.1"]
env.allow = ["DECLARATIVE_REDIRECT_*"]
"#;
    let host = host_with(dir.path(), profile).await;
    for tool in ["with_bearer", "with_basic", "with_header"] {
        host.call(tool, json!({}))
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e}"));
        let seen = landed
            .lock()
            .unwrap()
            .pop()
            .expect("the redirect was not followed");
        let printed = format!("{:?} {:?}", seen.headers, seen.uri);
        assert!(
            !printed.contains("s3cret"),
            "{tool} leaked to another origin: {printed}"
        );
        assert!(
            !printed.to_lowercase().contains("authorization"),
            "{tool}: {printed}"
        );
        assert!(
            !printed.to_lowercase().contains("x-api-key"),
            "{tool}: {printed}"
        );
        // On the same origin the credential is still sent (the redirect
        // itself is followed with it).
        let same = host.call(tool, json!({"same": "same"})).await.unwrap();
        let same: Value = serde_json::from_str(same.get()).unwrap();
        let sent = format!("{same}");
        let credential = match tool {
            "with_bearer" => "Bearer s3cret",
            // `me:s3cret` in base64.
            "with_basic" => "Basic bWU6czNjcmV0",
            _ => "s3cret",
        };
        assert!(
            sent.contains(credential),
            "{tool} lost its credential on its own origin: {sent}"
        );
    }
}

/// The Jira example of the issue, as such runtimes write it, pointed at the
/// test API.
fn jira(addr: SocketAddr) -> String {
    format!(
        r#"tools:
  - name: jira_create_ticket
    type: http_wrapper
    description: Create a Jira ticket in a project.
    endpoint: http://{addr}/rest/api/2/issue
    method: POST
    auth:
      type: basic
      username_env: YAML_TEST_JIRA_USER
      password_env: YAML_TEST_JIRA_TOKEN
    parameters:
      - name: project
        type: string
        required: true
        description: The project key.
      - name: summary
        type: string
        required: true
        description: One line.
      - name: priority
        type: string
        enum: [low, medium, high]
        default: medium
    tags: [jira, tickets]
    timeout_seconds: 30
"#
    )
}

#[tokio::test]
async fn a_yaml_tool_file_in_the_runtimes_format_works_end_to_end() {
    let (addr, log) = api().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("jira.yaml"), jira(addr)).unwrap();
    // SAFETY: no other test reads or writes these variables.
    unsafe {
        std::env::set_var("YAML_TEST_JIRA_USER", "agent");
        std::env::set_var("YAML_TEST_JIRA_TOKEN", "s3cret");
    }
    let profile = r#"
allow = ["network:fetch", "env:read"]
network.allow_hosts = ["127.0.0.1"]
env.allow = ["YAML_TEST_JIRA_USER", "YAML_TEST_JIRA_TOKEN"]
"#;
    let host = host_with(dir.path(), profile).await;
    let listed = toolhost::serve::mcp::tools_list(&host, &toolhost::Selection::all()).unwrap();
    let tool = listed.as_array().unwrap()[0].clone();
    assert_eq!(tool["name"], "jira_create_ticket");
    assert_eq!(
        tool["inputSchema"]["required"],
        json!(["project", "summary"])
    );
    assert_eq!(tool["annotations"]["readOnlyHint"], false);

    let made = crate::call_ok(
        &host,
        "jira_create_ticket",
        r#"{"project": "OPS", "summary": "Disk full"}"#,
    )
    .await;
    assert_eq!(made["data"]["method"], "POST");
    let seen = log.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.uri, "/rest/api/2/issue");
    // Basic agent:s3cret
    assert_eq!(seen.headers["authorization"], "Basic YWdlbnQ6czNjcmV0");
    assert_eq!(
        serde_json::from_slice::<Value>(&seen.body).unwrap(),
        json!({"project": "OPS", "summary": "Disk full", "priority": "medium"})
    );
}

#[tokio::test]
async fn a_broken_yaml_file_is_reported_with_its_line_or_field_and_keeps_the_working_version() {
    let (addr, _) = api().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jira.yml");
    std::fs::write(&path, jira(addr)).unwrap();
    let host = host_with(dir.path(), ALLOWED).await;
    assert_eq!(host.plugins().len(), 1);

    // A syntax error: the line is named.
    std::fs::write(&path, "tools:\n  - name: x\n    endpoint: [unclosed\n").unwrap();
    let error = host
        .reload_file(&path, Duration::from_secs(1))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("jira.yml"), "{error}");
    assert!(error.contains("line 3") || error.contains(":3:"), "{error}");
    // A wrong value: the field is named as the YAML file names it.
    let wrong = jira(addr).replace("http://", "ftp://");
    std::fs::write(&path, wrong).unwrap();
    let error = host
        .reload_file(&path, Duration::from_secs(1))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("tools[0].endpoint"), "{error}");
    let other = jira(addr).replace("type: http_wrapper", "type: python_function");
    std::fs::write(&path, other).unwrap();
    let error = host
        .reload_file(&path, Duration::from_secs(1))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("tools[0].type"), "{error}");
    // The working version still serves.
    assert!(host.tools().iter().any(|t| t.name == "jira_create_ticket"));
}
