//! Tenant `a` floods every surface it can grow (narrowings, approvals and
//! its webhook, event streams, MCP sessions, background output) while tenant
//! `b` calls a tool; `b`'s p99 latency under the flood stays within twice
//! its p99 without it, measured in the same run against one real server.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::served::{Served, Setup, batch, resident};
use super::{A, B, config};

/// A webhook receiver that answers every delivery with a body of `total`
/// bytes, made as it is read, and counts what was taken.
pub(crate) struct EndlessHook {
    pub(crate) url: String,
    sent: Arc<AtomicU64>,
    called: Arc<tokio::sync::Notify>,
    _task: tokio::task::JoinHandle<()>,
}

impl EndlessHook {
    pub(crate) async fn start(total: u64) -> Self {
        let sent = Arc::new(AtomicU64::new(0));
        let called = Arc::new(tokio::sync::Notify::new());
        let (counted, notify) = (sent.clone(), called.clone());
        let answer = move || {
            let counted = counted.clone();
            notify.notify_one();
            async move {
                let chunk = bytes::Bytes::from(vec![b' '; 64 << 10]);
                let chunks = futures::stream::iter(0..total / chunk.len() as u64).map(move |_| {
                    counted.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    Ok::<_, std::io::Error>(chunk.clone())
                });
                axum::response::Response::new(axum::body::Body::from_stream(chunks))
            }
        };
        let app = axum::Router::new().route("/hook", axum::routing::post(answer));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            url,
            sent,
            called,
            _task: task,
        }
    }

    /// Bytes of answers taken from it so far.
    pub(crate) fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Waits for a delivery.
    pub(crate) async fn wait_until_called(&self) {
        let called = self.called.notified();
        if self.sent() > 0 {
            return;
        }
        tokio::time::timeout(Duration::from_secs(20), called)
            .await
            .expect("the webhook was never called");
    }
}

use futures::StreamExt as _;

/// `n` calls of `echo` by tenant `b` in its narrowed session, one after the
/// other; their latencies, sorted.
async fn latencies(served: &Served, n: usize) -> Vec<Duration> {
    let body = batch(Some("b-narrowed"), "echo", &json!({ "text": "b" }));
    let mut taken = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let (status, answer) = served.post("/v1/tool_calls", B, &body).await;
        taken.push(start.elapsed());
        assert_eq!(status, StatusCode::OK, "{answer}");
        let content = answer["tool_results"][0]["content"].as_str().unwrap();
        assert!(content.contains("\"b\""), "{answer}");
    }
    taken.sort();
    taken
}

fn p99(sorted: &[Duration]) -> Duration {
    sorted[(sorted.len() * 99 / 100).min(sorted.len() - 1)]
}

/// Runs `round` until `stop`, as tenant `a`.
fn flood<F, Fut>(stop: &Arc<AtomicBool>, mut round: F) -> tokio::task::JoinHandle<u64>
where
    F: FnMut(u64) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let stop = stop.clone();
    tokio::spawn(async move {
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            round(n).await;
            n += 1;
        }
        n
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_b_is_served_within_twice_its_p99_while_a_floods_every_surface() {
    let hook = EndlessHook::start(1 << 30).await;
    let a_extra = format!(
        "approvals = {{ webhook = \"{}\", secret_env = \"ATTACK_HOOK_SECRET\" }}",
        hook.url
    );
    crate::use_launcher();
    let served = Arc::new(Served::launch(Setup {
        config: &config("", &a_extra),
        dirs: &["a", "b"],
        env: &[("ATTACK_HOOK_SECRET", "s")],
        ..Setup::default()
    }));
    let narrowed = json!({ "session": "b-narrowed", "deny": ["terminal:*"] });
    let (status, body) = served.post("/v1/sessions", B, &narrowed).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Warm up, then the baseline.
    latencies(&served, 50).await;
    let calm = latencies(&served, 400).await;
    let before = resident(served.pid());

    let stop = Arc::new(AtomicBool::new(false));
    let patterns: Vec<String> = (0..200).map(|n| format!("flood{n:03}:x")).collect();
    let mut floods = Vec::new();
    // Narrowings: new sessions of 200 patterns each, past the cap.
    let s = served.clone();
    floods.push(flood(&stop, move |n| {
        let (s, patterns) = (s.clone(), patterns.clone());
        async move {
            let body = json!({ "session": format!("a{n}"), "deny": patterns });
            s.post("/v1/sessions", A, &body).await;
        }
    }));
    // Approvals, each delivered to the webhook that never ends its answer.
    for _ in 0..4 {
        let s = served.clone();
        floods.push(flood(&stop, move |n| {
            let s = s.clone();
            async move {
                let call = batch(None, "write_file", &json!({"path": format!("f{n}"), "content": "x"}));
                let request = s.client.post(format!("{}/v1/tool_calls", s.base)).bearer_auth(A);
                let _ = tokio::time::timeout(Duration::from_millis(300), request.json(&call).send()).await;
            }
        }));
    }
    // Event streams, kept open until the cap refuses more.
    let s = served.clone();
    floods.push(flood(&stop, move |_| {
        let s = s.clone();
        async move {
            let url = format!("{}/v1/approvals/events", s.base);
            if let Ok(response) = s.client.get(url).bearer_auth(A).send().await
                && response.status() == StatusCode::OK
            {
                std::mem::forget(response);
            }
        }
    }));
    // MCP sessions.
    let s = served.clone();
    floods.push(flood(&stop, move |_| {
        let s = s.clone();
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "flood", "version": "1"}}});
            let _ = s
                .client
                .post(format!("{}/mcp", s.base))
                .bearer_auth(A)
                .header("accept", "application/json, text/event-stream")
                .json(&body)
                .send()
                .await;
        }
    }));
    // Background output: processes that print and are never read.
    let s = served.clone();
    floods.push(flood(&stop, move |n| {
        let s = s.clone();
        async move {
            let line = "while :; do head -c 65536 /dev/zero; sleep 0.05; done";
            let session = format!("p{}", n % 16);
            let started: Value = s
                .call(A, Some(&session), "process_start", json!({ "command": line }))
                .await;
            if started.get("error").is_some() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let flooded = latencies(&served, 400).await;
    let grown = resident(served.pid()).saturating_sub(before);
    stop.store(true, Ordering::Relaxed);
    let mut rounds = Vec::new();
    for task in floods {
        task.abort();
        rounds.push(task.await.unwrap_or_default());
    }
    let (calm99, flooded99) = (p99(&calm), p99(&flooded));
    eprintln!(
        "tenant b: p99 {calm99:?} calm, {flooded99:?} under tenant a's flood \
         (a's rounds: {rounds:?}); the server grew by {} MiB",
        grown >> 20
    );
    assert!(
        flooded99 <= calm99 * 2,
        "tenant b's p99 went from {calm99:?} to {flooded99:?} under the flood"
    );
    assert!(grown < 256 << 20, "the server grew by {} MiB", grown >> 20);
    // Tenant b still narrows a session of its own.
    let (status, body) = served
        .post("/v1/sessions", B, &json!({ "session": "after", "deny": ["terminal:*"] }))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
