//! Latency of one trivial tool call with a fresh instance, and of the
//! instantiation alone. Run: `cargo bench -p toolhost --bench call`.

use criterion::{Criterion, criterion_group, criterion_main};
use toolhost::Host;

fn calls(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let host = runtime
        .block_on(Host::builder().bundled(true).build())
        .unwrap();
    let echo = host
        .plugins()
        .into_iter()
        .find(|p| &**p.name() == "echo")
        .expect("the echo plugin is bundled");

    let mut group = c.benchmark_group("call");
    group.bench_function("instantiate (fresh store + instance, no call)", |b| {
        b.to_async(&runtime)
            .iter(|| echo.instantiate_only(host.runtime(), host.limits()))
    });
    group.bench_function("Host::call echo (fresh instance)", |b| {
        b.to_async(&runtime)
            .iter(|| host.call("echo", r#"{"text":"hi"}"#))
    });
    group.finish();
}

criterion_group!(benches, calls);
criterion_main!(benches);
