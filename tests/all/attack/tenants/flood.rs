//! Tenant `a` floods every surface it can grow (narrowings, approvals and
//! its webhook, event streams, MCP sessions, background output), each in
//! turn and then all at once, while tenant `b` calls a tool; `b`'s p99
//! latency under each flood stays within twice its p99 without it, measured
//! in the same run against one real server, in slices of calm and flood
//! taken in turn. A p99 of a few hundred calls jumps now and then with what
//! else the machine runs: a surface is compared up to three times, and a
//! flood that slows `b` fails all three.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
/// other, from a thread and a client of their own (so that the flood's
/// client does not delay them); their latencies, sorted.
async fn latencies(served: &Served, n: usize) -> Vec<Duration> {
    let url = format!("{}/v1/tool_calls", served.base);
    let measured = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let client = reqwest::Client::builder().no_proxy().build().unwrap();
            let body = batch(Some("b-narrowed"), "echo", &json!({ "text": "b" }));
            let mut taken = Vec::with_capacity(n);
            for _ in 0..n {
                let start = Instant::now();
                let response = client.post(&url).bearer_auth(B).json(&body).send().await;
                let answer: Value = response.unwrap().json().await.unwrap();
                taken.push(start.elapsed());
                let content = answer["tool_results"][0]["content"].as_str();
                assert!(content.unwrap_or_default().contains("\"b\""), "{answer}");
            }
            taken.sort();
            taken
        })
    });
    tokio::task::spawn_blocking(move || measured.join().unwrap())
        .await
        .unwrap()
}

fn p99(sorted: &[Duration]) -> Duration {
    sorted[(sorted.len() * 99 / 100).min(sorted.len() - 1)]
}

/// Least time between two requests of one flood task: 100 a second, each.
/// What the flood grows is what is tested; a tight loop would measure how
/// the machine's cores are shared, which no per-tenant cap decides.
const PACE: Duration = Duration::from_millis(10);

/// Runs `round` over and over, as tenant `a`, until the task is aborted;
/// counts the rounds in `rounds`.
fn flood<F, Fut>(rounds: &Arc<AtomicU64>, mut round: F) -> tokio::task::JoinHandle<()>
where
    F: FnMut(u64) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let rounds = rounds.clone();
    tokio::spawn(async move {
        loop {
            let next = tokio::time::Instant::now() + PACE;
            round(rounds.fetch_add(1, Ordering::Relaxed)).await;
            tokio::time::sleep_until(next).await;
        }
    })
}

type Start = Box<dyn Fn() -> Vec<tokio::task::JoinHandle<()>>>;

/// Tenant `a`'s floods of one surface each: its name and what starts it
/// (again, for each slice of flood).
fn floods(served: &Arc<Served>, rounds: &Arc<AtomicU64>) -> Vec<(&'static str, Start)> {
    let mut all: Vec<(&'static str, Start)> = Vec::new();
    let (s, r) = (served.clone(), rounds.clone());
    all.push((
        "narrowings",
        Box::new(move || {
            // New sessions of 200 patterns each, past the cap.
            let s = s.clone();
            vec![flood(&r, move |n| {
                let s = s.clone();
                async move {
                    let deny: Vec<String> = (0..200).map(|p| format!("flood{p:03}:x")).collect();
                    let body = json!({ "session": format!("a{n}"), "deny": deny });
                    s.post("/v1/sessions", A, &body).await;
                }
            })]
        }),
    ));
    let (s, r) = (served.clone(), rounds.clone());
    all.push((
        "approvals and their webhook",
        Box::new(move || {
            // Each approval is delivered to the webhook that never ends its
            // answer; the call is given up on, and waits on the server.
            let approve = |s: Arc<Served>| {
                flood(&r, move |n| {
                    let s = s.clone();
                    async move {
                        let arguments = json!({"path": format!("f{n}"), "content": "x"});
                        let call = batch(None, "write_file", &arguments);
                        let url = format!("{}/v1/tool_calls", s.base);
                        let request = s.client.post(url).bearer_auth(A).json(&call).send();
                        let _ = tokio::time::timeout(Duration::from_millis(300), request).await;
                    }
                })
            };
            vec![approve(s.clone()), approve(s.clone())]
        }),
    ));
    let (s, r) = (served.clone(), rounds.clone());
    all.push((
        "event streams",
        Box::new(move || {
            // Kept open until the cap refuses more.
            let s = s.clone();
            vec![flood(&r, move |_| {
                let s = s.clone();
                async move {
                    let url = format!("{}/v1/approvals/events", s.base);
                    if let Ok(response) = s.client.get(url).bearer_auth(A).send().await
                        && response.status() == StatusCode::OK
                    {
                        std::mem::forget(response);
                    }
                }
            })]
        }),
    ));
    let (s, r) = (served.clone(), rounds.clone());
    all.push((
        "mcp sessions",
        Box::new(move || {
            let s = s.clone();
            vec![flood(&r, move |_| {
                let s = s.clone();
                async move {
                    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "flood", "version": "1"}}});
                    let url = format!("{}/mcp", s.base);
                    let accept = "application/json, text/event-stream";
                    let request = s.client.post(url).bearer_auth(A).header("accept", accept);
                    let _ = request.json(&body).send().await;
                }
            })]
        }),
    ));
    let (s, r) = (served.clone(), rounds.clone());
    all.push((
        "background output",
        Box::new(move || {
            // As many processes as a session holds, printing 160 kB a second
            // each for 2 s (with no process started per line), never read.
            let s = s.clone();
            vec![flood(&r, move |_| {
                let s = s.clone();
                async move {
                    let line = "for i in {1..10}; do printf '%16384s' ''; read -t 0.1; done";
                    let arguments = json!({ "command": line });
                    let started = s.call(A, Some("p"), "process_start", arguments).await;
                    if started.get("error").is_some() {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            })]
        }),
    ));
    all
}

/// Calls of tenant `b` in one slice of calm or flood, and slices of each.
const SLICE: usize = 120;
const SLICES: usize = 4;

/// Tenant `b`'s p99 latency in [`SLICES`] slices of calm, each followed by
/// one of flood (started [`SETTLE`] before it is measured, and followed by a
/// pause of `after`), and in those of flood: what else the machine runs
/// weighs on both alike.
async fn compare(served: &Served, start: &Start, after: Duration) -> (Duration, Duration) {
    let (mut calm, mut flooded) = (Vec::new(), Vec::new());
    for _ in 0..SLICES {
        calm.extend(latencies(served, SLICE).await);
        let tasks = start();
        tokio::time::sleep(SETTLE).await;
        flooded.extend(latencies(served, SLICE).await);
        for task in tasks {
            task.abort();
        }
        tokio::time::sleep(after).await;
    }
    calm.sort();
    flooded.sort();
    (p99(&calm), p99(&flooded))
}

/// How long a flood runs before tenant `b` is measured under it.
const SETTLE: Duration = Duration::from_millis(200);

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
    latencies(&served, SLICE).await;
    let before = resident(served.pid());

    // Each surface in turn, then all at once.
    let rounds = Arc::new(AtomicU64::new(0));
    let mut seen = Vec::new();
    // Background processes print for 1 s after they start.
    let after = |surface: &str| match surface {
        "background output" => Duration::from_secs(1),
        _ => Duration::from_millis(100),
    };
    let mut surfaces = floods(&served, &rounds);
    let all: Start = {
        let starts: Vec<Start> = floods(&served, &rounds)
            .into_iter()
            .map(|(_, s)| s)
            .collect();
        Box::new(move || starts.iter().flat_map(|start| start()).collect())
    };
    surfaces.push(("all at once", all));
    for (surface, start) in &surfaces {
        // The machine's other work makes a p99 jump now and then; a flood
        // that slows tenant b does so every time: up to 3 comparisons.
        let mut tries = Vec::new();
        for _ in 0..3 {
            let (calm, flooded) = compare(&served, start, after(surface)).await;
            tries.push((calm, flooded));
            if flooded <= calm * 2 {
                break;
            }
        }
        seen.push((*surface, tries));
    }
    let grown = resident(served.pid()).saturating_sub(before);
    eprintln!(
        "tenant b's p99, calm and under tenant a's flood ({} rounds): {seen:?}; the server grew \
         by {} MiB",
        rounds.load(Ordering::Relaxed),
        grown >> 20
    );
    for (surface, tries) in &seen {
        assert!(
            tries.iter().any(|(calm, flooded)| *flooded <= *calm * 2),
            "tenant b's p99 (calm, flooded) under a flood of {surface}: {tries:?}"
        );
    }
    assert!(grown < 256 << 20, "the server grew by {} MiB", grown >> 20);
    // Tenant b still narrows a session of its own.
    let again = json!({ "session": "after", "deny": ["terminal:*"] });
    let (status, body) = served.post("/v1/sessions", B, &again).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
