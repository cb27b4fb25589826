//! Every released contract stays loadable: guests built from source
//! against `wit/0.1.0`, `wit/0.2.0` and `wit/0.2.1` (with wit-bindgen, no
//! SDK, no committed binaries) load in the current host and answer, each
//! through what its version has: 0.1.0's `terminal`, `http`, `log` and
//! lifecycle hooks, 0.2.0's title, output schema and progress, 0.2.1's
//! background processes. Every released WIT is kept in the repository.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolhost::CallRequest;
use toolhost::{Host, HostBuilder};

use crate::{Workspace, call_err, call_ok};

fn released(builder: HostBuilder) -> HostBuilder {
    builder
        .plugin_file(toolhost_tests::CONTRACT_V0_1_0)
        .plugin_file(toolhost_tests::CONTRACT_V0_2_0)
        .plugin_file(toolhost_tests::CONTRACT_V0_2_1)
}

#[tokio::test]
async fn a_guest_of_each_released_contract_loads_in_this_host() {
    let host = released(Host::builder()).build().await.unwrap();
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    let mut contracts: Vec<String> = host
        .plugins()
        .iter()
        .map(|p| p.contract().to_string())
        .collect();
    contracts.sort();
    assert_eq!(contracts, ["0.1.0", "0.2.0", "0.2.1"]);
    let v010 = host
        .plugins()
        .into_iter()
        .find(|p| p.contract() == "0.1.0")
        .unwrap();
    assert!(v010.is_stateful() && v010.has_lifecycle());
    assert!(
        v010.imports()
            .iter()
            .any(|i| i == "toolhost:plugin/terminal@0.1.0"),
        "{:?}",
        v010.imports()
    );
}

#[test]
fn every_released_contract_has_its_wit_in_the_repository() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for version in toolhost::contract::RELEASED_CONTRACTS {
        let path = if *version == toolhost::contract::CONTRACT_VERSION {
            root.join("wit/plugin.wit")
        } else {
            root.join(format!("wit/{version}/plugin.wit"))
        };
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            text.contains(&format!("package toolhost:plugin@{version};")),
            "{} is not contract {version}",
            path.display()
        );
    }
}

#[tokio::test]
async fn a_0_1_0_plugin_runs_commands_through_its_terminal_import() {
    let ws = Workspace::new(released);
    let host = ws
        .host(
            r#"
allow = ["terminal:*"]
file.read = ["."]
terminal.deny_commands = ["rm *"]
"#,
        )
        .await;
    let ran = call_ok(&host, "v010_run", r#"{"line":"echo from 0.1.0"}"#).await;
    assert_eq!(ran, json!({ "exit_code": 0, "stdout": "from 0.1.0\n" }));
    let (kind, refused) = call_err(&host, "v010_run", r#"{"line":"rm -rf x"}"#).await;
    assert_eq!(kind, toolhost::ErrorKind::Denied, "{refused}");
    assert!(refused.contains("rm *"), "{refused}");
}

#[tokio::test]
async fn a_0_1_0_plugin_fetches_through_its_http_import_under_the_profile() {
    let router = axum::Router::new().route("/hello", axum::routing::get(|| async { "hi 0.1.0" }));
    let addr = crate::network::serve(crate::network::listener().await, router).await;
    let ws = Workspace::new(released);
    let allowed = format!(
        "allow = [\"network:fetch\"]\nnetwork.allow_hosts = [\"127.0.0.1:{}\"]",
        addr.port()
    );
    let host = ws.host(&allowed).await;
    let url = format!("http://{addr}/hello");
    let fetched = call_ok(&host, "v010_fetch", &json!({ "url": url }).to_string()).await;
    assert_eq!(fetched, json!({ "status": 200, "body": "hi 0.1.0" }));
    // Another port of the same address is not allowed.
    let other = format!("http://127.0.0.1:{}/hello", addr.port() + 1);
    let (kind, refused) = call_err(&host, "v010_fetch", &json!({ "url": other }).to_string()).await;
    assert_eq!(kind, toolhost::ErrorKind::Denied, "{refused}");
}

#[tokio::test]
async fn a_0_1_0_stateful_plugin_keeps_its_state_per_session_through_its_hooks() {
    let host = released(Host::builder()).build().await.unwrap();
    let count = |session: &'static str| {
        let host = host.clone();
        async move {
            let request = CallRequest::new("v010_count", "{}").session(session);
            let result = host.dispatch(request).await.unwrap();
            serde_json::from_str::<Value>(result.get()).unwrap()
        }
    };
    assert_eq!(count("a").await, json!({ "session": "a", "calls": 1 }));
    assert_eq!(count("a").await, json!({ "session": "a", "calls": 2 }));
    assert_eq!(count("b").await, json!({ "session": "b", "calls": 1 }));
}

#[tokio::test]
async fn a_0_1_0_plugin_logs_through_its_log_import() {
    let host = released(Host::builder()).build().await.unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink: toolhost::capability::LogSink = {
        let lines = lines.clone();
        Arc::new(move |level, _plugin, _tool, message| {
            lines.lock().unwrap().push(format!("{level} {message}"));
        })
    };
    toolhost::capability::with_log_sink(sink, call_ok(&host, "v010_count", "{}")).await;
    assert_eq!(*lines.lock().unwrap(), ["info 0.1.0 guest runs v010_count"]);
}

#[tokio::test]
async fn a_0_2_0_plugin_has_its_title_and_output_schema_and_reports_progress() {
    let host = released(Host::builder()).build().await.unwrap();
    let spec = host
        .tools()
        .into_iter()
        .find(|t| t.name == "v020_steps")
        .unwrap();
    assert_eq!(spec.title.as_deref(), Some("Three steps"));
    assert!(spec.output_schema.is_some());
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink: toolhost::capability::ProgressSink = {
        let reports = reports.clone();
        Arc::new(move |report: toolhost::capability::Progress| {
            reports.lock().unwrap().push(report.progress);
        })
    };
    let result =
        toolhost::capability::with_progress_sink(sink, call_ok(&host, "v020_steps", "{}")).await;
    assert_eq!(result, json!({ "steps": 3 }));
    assert_eq!(*reports.lock().unwrap(), [1.0, 2.0, 3.0]);
}

#[tokio::test]
async fn a_0_2_1_plugin_runs_a_background_process() {
    let ws = Workspace::new(released);
    let host = ws
        .host("allow = [\"terminal:*\"]\nfile.read = [\".\"]")
        .await;
    let result = call_ok(&host, "v021_background", "{}").await;
    assert_eq!(result, json!({ "stdout": "background", "exited": true }));
}
