//! Instances made ahead: after a call, the next instance of the tool is made
//! in the background. It serves exactly one call, keeps nothing from the
//! call before, and only serves a call with the grants it was made for.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost::{CallRequest, Caller, Host, PluginVersion};

use crate::Workspace;
use crate::dispatch::sleep_batch;
use crate::files::PROFILE as FILES;

fn plugin(host: &Host, name: &str) -> Arc<PluginVersion> {
    host.plugins()
        .into_iter()
        .find(|p| &**p.name() == name)
        .unwrap()
}

/// Waits (yielding to the background work) until `plugin` has an instance
/// ready.
async fn until_ready(plugin: &PluginVersion) {
    for _ in 0..500 {
        if plugin.ready_instances() == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("no instance was made ahead for {:?}", plugin.name());
}

async fn call(host: &Host, caller: &Caller, tool: &str, arguments: Value) -> Value {
    let result = host
        .dispatch_as(caller, CallRequest::new(tool, arguments))
        .await
        .unwrap();
    serde_json::from_str(result.get()).unwrap()
}

#[tokio::test]
async fn an_instance_made_ahead_serves_one_call_and_keeps_nothing_of_the_last() {
    let host = Host::builder().bundled(true).build().await.unwrap();
    let tasks = plugin(&host, "tasks");
    let caller = host.caller();
    assert_eq!(tasks.ready_instances(), 0);
    // Without a session id, even the stateful todo tool runs in a fresh
    // instance per call.
    let added = call(
        &host,
        &caller,
        "todo",
        json!({"action": "add", "text": "x"}),
    )
    .await;
    assert_eq!(added["items"].as_array().map(Vec::len), Some(1), "{added}");
    until_ready(&tasks).await;
    let listed = call(&host, &caller, "todo", json!({"action": "list"})).await;
    assert_eq!(
        tasks.ready_instances(),
        0,
        "the call took the instance made ahead"
    );
    assert_eq!(listed["items"], json!([]), "{listed}");
    until_ready(&tasks).await;
    // Unloading drops it.
    let removed = host.remove_plugin("tasks").await.unwrap();
    assert_eq!(removed.ready_instances(), 0);
}

#[tokio::test]
async fn an_instance_made_for_one_profile_never_serves_another() {
    let alpha = Workspace::new(|builder| builder.bundled(true));
    let bravo = Workspace::new(|builder| builder.bundled(true));
    alpha.write("who.txt", "alpha\n");
    bravo.write("who.txt", "bravo\n");
    let host = alpha.host(FILES).await;
    let as_alpha = host.caller();
    let as_bravo = Caller::new(bravo.profile(FILES), as_alpha.approvals().clone());
    let file = plugin(&host, "file");
    let read = json!({"path": "who.txt"});

    assert_eq!(
        call(&host, &as_alpha, "read_file", read.clone()).await["content"],
        "alpha\n"
    );
    until_ready(&file).await;
    // Made for alpha's profile (alpha's workspace preopened): not used.
    assert_eq!(
        call(&host, &as_bravo, "read_file", read.clone()).await["content"],
        "bravo\n"
    );
    until_ready(&file).await;
    assert_eq!(
        call(&host, &as_alpha, "read_file", read.clone()).await["content"],
        "alpha\n"
    );
    until_ready(&file).await;
    assert_eq!(
        call(&host, &as_alpha, "read_file", read).await["content"],
        "alpha\n"
    );
    assert_eq!(file.ready_instances(), 0, "the same profile's call took it");
}

/// On a multi-thread runtime (the HTTP server) as on one thread: a call made
/// while no other call of the version runs gets its successor made ahead;
/// calls that overlap do not, as the next one would not wait for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_lone_call_has_its_next_instance_made_ahead() {
    let host = Host::builder()
        .plugin_file(toolhost_tests::MISBEHAVE)
        .build()
        .await
        .unwrap();
    let misbehave = plugin(&host, "misbehave");
    let caller = host.caller();
    let sleep = |ms: u64| call(&host, &caller, "sleep", json!({ "ms": ms }));
    // Two calls that overlap: each one either started or ended while the
    // other ran.
    let (first, second) = tokio::join!(sleep(300), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        sleep(300).await
    });
    assert_eq!(first, second);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(misbehave.ready_instances(), 0);
    // A call on its own.
    sleep(1).await;
    until_ready(&misbehave).await;
}

/// A batch's lane runs its next call at once: nothing is made ahead for it,
/// even when its calls run one at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_makes_no_instance_ahead() {
    let host = Host::builder()
        .plugin_file(toolhost_tests::MISBEHAVE)
        .batch_concurrency(1)
        .build()
        .await
        .unwrap();
    let response = toolhost::serve::openai::dispatch_batch(&host, &sleep_batch(4, 1), None).await;
    assert_eq!(response["tool_results"].as_array().map(Vec::len), Some(4));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(plugin(&host, "misbehave").ready_instances(), 0);
}
