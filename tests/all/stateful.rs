//! Stateful plugins: one instance per session id, state kept within a
//! session and never shared across sessions.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost::{CallRequest, Host};

async fn tasks_host(idle: Duration) -> Host {
    Host::builder()
        .bundled(true)
        .session_idle(idle)
        .build()
        .await
        .unwrap()
}

async fn todo(host: &Host, session: Option<&str>, arguments: Value) -> Value {
    let mut request = CallRequest::new("todo", arguments);
    request.session = session.map(String::from);
    let result = host.dispatch(request).await.unwrap();
    serde_json::from_str(result.get()).unwrap()
}

#[tokio::test]
async fn state_survives_between_calls_of_one_session_and_not_across_sessions() {
    let host = tasks_host(Duration::from_secs(600)).await;
    let tasks = host
        .plugins()
        .into_iter()
        .find(|p| &**p.name() == "tasks")
        .unwrap();
    assert!(tasks.is_stateful());
    assert!(tasks.has_lifecycle());

    todo(
        &host,
        Some("a"),
        json!({"action": "add", "text": "write tests"}),
    )
    .await;
    todo(&host, Some("a"), json!({"action": "add", "text": "ship"})).await;
    todo(
        &host,
        Some("b"),
        json!({"action": "add", "text": "other task"}),
    )
    .await;
    let a = todo(
        &host,
        Some("a"),
        json!({"action": "update", "id": 1, "status": "done"}),
    )
    .await;
    assert_eq!(a["total"], 2);
    assert_eq!(a["done"], 1);
    assert_eq!(a["items"][0]["text"], "write tests");
    let b = todo(&host, Some("b"), json!({"action": "list"})).await;
    assert_eq!(b["total"], 1);
    assert_eq!(b["items"][0]["text"], "other task");
    assert_eq!(tasks.session_count(), 2);

    // Without a session id every call gets a fresh instance.
    todo(&host, None, json!({"action": "add", "text": "lost"})).await;
    let fresh = todo(&host, None, json!({"action": "list"})).await;
    assert_eq!(fresh["total"], 0);
}

#[tokio::test]
async fn idle_sessions_expire() {
    let host = tasks_host(Duration::from_millis(100)).await;
    todo(&host, Some("s"), json!({"action": "add", "text": "x"})).await;
    let tasks = host
        .plugins()
        .into_iter()
        .find(|p| &**p.name() == "tasks")
        .unwrap();
    assert_eq!(tasks.session_count(), 1);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while tasks.session_count() > 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        tasks.session_count(),
        0,
        "the idle session was not torn down"
    );
    let again = todo(&host, Some("s"), json!({"action": "list"})).await;
    assert_eq!(again["total"], 0, "a new instance starts empty");
}

#[tokio::test]
async fn unloading_a_stateful_plugin_tears_its_sessions_down() {
    let host = tasks_host(Duration::from_secs(600)).await;
    todo(&host, Some("s1"), json!({"action": "add", "text": "x"})).await;
    todo(&host, Some("s2"), json!({"action": "add", "text": "y"})).await;
    let removed = host.remove_plugin("tasks").await.unwrap();
    assert_eq!(removed.session_count(), 0);
    // A caller still holding the old version is refused, not served stale state.
    let grants = toolhost::capability::Grants::none(host.caller().profile().clone());
    let (result, _) = removed
        .call_in_session(
            host.runtime(),
            &removed.tools()[0],
            r#"{"action":"list"}"#,
            &host.limits(),
            "s1",
            host.sessions_memory(),
            (host.caller().profile(), || std::sync::Arc::new(grants)),
        )
        .await;
    let error = result.unwrap_err();
    assert_eq!(error.kind(), toolhost::ErrorKind::Unavailable);
    assert!(error.message().contains("was unloaded"), "{error}");
}

#[tokio::test]
async fn stateful_sessions_share_one_memory_budget_per_host() {
    const BUDGET: usize = 32 << 20;
    let host = Host::builder()
        .bundled(true)
        .sessions_memory(BUDGET)
        .build()
        .await
        .unwrap();
    // Each session keeps almost a megabyte of tasks; sessions are opened
    // until the host's budget refuses one.
    let text = "x".repeat(900_000);
    let mut refused = None;
    for i in 0..64 {
        let mut request = CallRequest::new("todo", json!({"action": "add", "text": text}));
        request.session = Some(format!("s{i}"));
        if let Err(error) = host.dispatch(request).await {
            refused = Some((i, error));
            break;
        }
        assert!(host.sessions_memory().used() <= BUDGET);
    }
    let (opened, error) = refused.expect("64 sessions fit in 32 MiB");
    assert!(opened >= 2, "only {opened} sessions fit: {error}");
    assert_eq!(error.kind(), toolhost::ErrorKind::Memory, "{error}");
    assert!(
        error.message().contains("sessions_memory = 32 MiB"),
        "{error}"
    );
    // The sessions that fit still work.
    let listed = todo(&host, Some("s0"), json!({"action": "list"})).await;
    assert_eq!(listed["total"], 1);
    // Ending the sessions gives their memory back.
    host.remove_plugin("tasks").await.unwrap();
    assert_eq!(host.sessions_memory().used(), 0);
}

#[tokio::test]
async fn one_tenant_cannot_take_every_session_slot() {
    let host = tasks_host(Duration::from_secs(600)).await;
    let acme = host.caller().clone().tenant("acme", 16);
    let other = host.caller().clone().tenant("other", 16);
    let open = |caller: &toolhost::Caller, session: String| {
        let mut request = CallRequest::new("todo", json!({"action": "add", "text": "x"}));
        request.session = Some(session);
        let host = host.clone();
        let caller = caller.clone();
        async move { host.dispatch_as(&caller, request).await }
    };
    let mut held = 0;
    let refusal = loop {
        match open(&acme, format!("s{held}")).await {
            Ok(_) => held += 1,
            Err(error) => break error,
        }
        assert!(held <= toolhost::runtime::MAX_SESSIONS, "never refused");
    };
    assert_eq!(held, toolhost::runtime::MAX_SESSIONS / 4);
    assert_eq!(refusal.kind(), toolhost::ErrorKind::Busy, "{refusal}");
    assert!(
        refusal.message().contains("the most one tenant may hold"),
        "{refusal}"
    );
    // Its open sessions still work, and another tenant still gets slots,
    // even for the same session ids.
    assert!(open(&acme, "s0".into()).await.is_ok());
    assert!(open(&other, "s0".into()).await.is_ok());
    assert!(open(&other, format!("s{held}")).await.is_ok());
}

#[tokio::test]
async fn a_call_that_resumes_state_never_starts_a_fresh_instance() {
    let host = tasks_host(Duration::from_secs(600)).await;
    let resume = |session: &str, arguments: Value| {
        let mut request = CallRequest::new("todo", arguments);
        request.session = Some(session.to_string());
        request.resume = true;
        request
    };
    // Nothing to resume: refused, and no instance made.
    let error = host
        .dispatch(resume("s", json!({"action": "add", "text": "x"})))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), toolhost::ErrorKind::StateLost, "{error}");
    let tasks = host
        .plugins()
        .into_iter()
        .find(|p| &**p.name() == "tasks")
        .unwrap();
    assert_eq!(tasks.session_count(), 0);
    // Made by an ordinary call, it is resumed.
    todo(&host, Some("s"), json!({"action": "add", "text": "x"})).await;
    let listed = host
        .dispatch(resume("s", json!({"action": "list"})))
        .await
        .unwrap();
    let listed: Value = serde_json::from_str(listed.get()).unwrap();
    assert_eq!(listed["total"], 1);
}
