//! Latency of trivial tool calls (fresh instance, through the full dispatch,
//! with the instance made ahead, reused stateful instance), of instantiation
//! alone, and throughput of batches. Run: `cargo bench -p toolhost --bench call`, then
//! `python3 host/benches/medians.py`.

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use toolhost::{CallRequest, Host};

fn runtime(threads: usize) -> tokio::runtime::Runtime {
    if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(threads);
        builder
    }
    .enable_all()
    .build()
    .unwrap()
}

fn calls(c: &mut Criterion) {
    let rt = runtime(1);
    let host = rt.block_on(Host::builder().bundled(true).build()).unwrap();
    let echo_plugin = host
        .plugins()
        .into_iter()
        .find(|p| &**p.name() == "echo")
        .expect("the echo plugin is bundled");
    let echo_tool = host.snapshot().tool("echo").unwrap().spec.clone();
    let limits = host.limits();

    let mut group = c.benchmark_group("call");
    group.bench_function("instantiate (fresh store + instance, no call)", |b| {
        b.to_async(&rt)
            .iter(|| echo_plugin.instantiate_only(host.runtime(), &limits))
    });
    let grants = std::sync::Arc::new(toolhost::capability::Grants::none(
        host.caller().profile().clone(),
    ));
    group.bench_function(
        "PluginVersion::call echo (fresh instance, no dispatch)",
        |b| {
            b.to_async(&rt).iter(|| {
                echo_plugin.call(
                    host.runtime(),
                    &echo_tool,
                    r#"{"text":"hi"}"#,
                    &limits,
                    grants.clone(),
                )
            })
        },
    );
    group.bench_function(
        "Host::call echo (full dispatch, validation, fresh instance)",
        |b| {
            b.to_async(&rt)
                .iter(|| host.call("echo", r#"{"text":"hi"}"#))
        },
    );
    group.bench_function(
        "Host::call echo (full dispatch, validation, instance made ahead)",
        |b| {
            b.to_async(&rt).iter_custom(|iterations| {
                let (host, echo_plugin) = (host.clone(), echo_plugin.clone());
                async move {
                    let mut timed = Duration::ZERO;
                    for _ in 0..iterations {
                        // Untimed: a lone caller's pause between two calls,
                        // in which the last store is dropped and the next
                        // instance made. When none is being made (before
                        // the first call), an untimed call after a pause
                        // makes one.
                        let mut paused = Instant::now();
                        while echo_plugin.ready_instances() == 0 {
                            if paused.elapsed() > Duration::from_millis(1) {
                                host.call("echo", r#"{"text":"hi"}"#).await.unwrap();
                                paused = Instant::now();
                            }
                            tokio::task::yield_now().await;
                        }
                        let started = Instant::now();
                        let result = host.call("echo", r#"{"text":"hi"}"#).await;
                        timed += started.elapsed();
                        assert!(result.is_ok());
                    }
                    timed
                }
            })
        },
    );
    group.bench_function("Host::dispatch todo list (reused stateful instance)", |b| {
        b.to_async(&rt).iter(|| {
            host.dispatch(CallRequest::new("todo", r#"{"action":"list"}"#).session("bench"))
        })
    });
    group.finish();
}

fn batches(c: &mut Criterion) {
    let rt = runtime(2);
    let host = rt
        .block_on(Host::builder().bundled(true).batch_concurrency(64).build())
        .unwrap();
    let batch = json!({
        "tool_calls": (0..100).map(|i| json!({
            "id": format!("call_{i}"),
            "type": "function",
            "function": {"name": "echo", "arguments": "{\"text\":\"hi\"}"},
        })).collect::<Vec<_>>()
    });
    let mut group = c.benchmark_group("batch");
    group.throughput(Throughput::Elements(100));
    group.bench_function("100 echo calls, 2 worker threads", |b| {
        b.to_async(&rt)
            .iter(|| toolhost::serve::openai::dispatch_batch(&host, &batch, None))
    });
    group.finish();
}

criterion_group!(benches, calls, batches);
criterion_main!(benches);
