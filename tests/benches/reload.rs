//! Hot-reload figures: time from a plugin file's replacement to the new
//! version serving (with and without the compile cache), host start with ten
//! plugins (cold and warm cache), and call latency during a reload storm
//! compared with no reloads.
//!
//! Run: `cargo bench -p toolhost-tests --bench reload`. Prints medians (and
//! p99 for latencies) over repeated runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::Host;
use toolhost::{ReloadEvent, WatchOptions};

const DEBOUNCE: Duration = Duration::from_millis(50);

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn install(dir: &Path, name: &str, wasm: &[u8]) {
    let staging = dir.join(format!(".{name}.partial"));
    std::fs::write(&staging, wasm).unwrap();
    std::fs::rename(&staging, dir.join(name)).unwrap();
}

/// A copy of a component that hashes differently (an extra custom section),
/// so that it must be compiled again.
fn variant(wasm: &[u8], n: u32) -> Vec<u8> {
    let name = b"toolhost-bench";
    let payload = n.to_le_bytes();
    let mut section = Vec::new();
    section.push(name.len() as u8);
    section.extend_from_slice(name);
    section.extend_from_slice(&payload);
    let mut out = wasm.to_vec();
    out.push(0); // custom section id
    out.push(section.len() as u8);
    out.extend_from_slice(&section);
    out
}

async fn which(host: &Host) -> String {
    let result = host.call("which", json!({})).await.unwrap();
    let value: serde_json::Value = serde_json::from_str(result.get()).unwrap();
    value["version"].as_str().unwrap().to_string()
}

/// Replacement to serving, end to end through the watcher, and the part
/// after the debounce (`reload_file`).
async fn replacement(cache: Option<PathBuf>, rounds: u32) -> (Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let a = std::fs::read(toolhost_tests::FLIP_A).unwrap();
    let b = std::fs::read(toolhost_tests::FLIP_B).unwrap();
    let host = Host::builder()
        .cache_dir(cache.clone())
        .build()
        .await
        .unwrap();
    let mut events = host.events();
    let _watcher = host
        .watch(
            dir.path(),
            None,
            WatchOptions {
                debounce: DEBOUNCE,
                grace: Duration::from_secs(10),
            },
        )
        .unwrap();
    install(dir.path(), "flip.wasm", &a);
    while !matches!(events.recv().await.unwrap(), ReloadEvent::Loaded { .. }) {}
    let mut end_to_end = Vec::new();
    let mut after_debounce = Vec::new();
    for round in 0..rounds {
        let (bytes, expect) = if round.is_multiple_of(2) {
            (&b, "b")
        } else {
            (&a, "a")
        };
        // Without a cache every round must compile: make each file unique.
        let bytes = if cache.is_none() {
            variant(bytes, round)
        } else {
            bytes.clone()
        };
        let started = Instant::now();
        install(dir.path(), "flip.wasm", &bytes);
        while which(&host).await != expect {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        end_to_end.push(started.elapsed());

        let path = dir.path().join("direct.wasm");
        std::fs::write(&path, &bytes).unwrap();
        let started = Instant::now();
        host.reload_file(&path, Duration::from_secs(10)).await.ok();
        after_debounce.push(started.elapsed());
        host.unload("direct", Duration::from_secs(1)).await;
    }
    (
        percentile(&mut end_to_end, 0.5),
        percentile(&mut after_debounce, 0.5),
    )
}

/// Ten plugin files, each distinct.
fn ten_plugins(dir: &Path) {
    let files: Vec<Vec<u8>> = toolhost::bundled::PLUGINS
        .iter()
        .map(|p| p.wasm.to_vec())
        .chain(
            [
                toolhost_tests::MISBEHAVE,
                toolhost_tests::SHAPES,
                toolhost_tests::FILES,
                toolhost_tests::FETCHER,
                toolhost_tests::SHELL,
                toolhost_tests::FLIP_A,
                toolhost_tests::CLASH,
            ]
            .iter()
            .map(|p| std::fs::read(p).unwrap()),
        )
        .take(10)
        .collect();
    for (i, wasm) in files.iter().enumerate() {
        std::fs::write(dir.join(format!("p{i}.wasm")), wasm).unwrap();
    }
}

async fn start(dir: &Path, cache: Option<PathBuf>) -> Duration {
    let started = Instant::now();
    let host = Host::builder()
        .plugin_dir(dir)
        .cache_dir(cache)
        .build()
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(host.plugins().len() >= 9);
    took
}

async fn latencies(storm: bool, run_for: Duration) -> (Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let a = std::fs::read(toolhost_tests::FLIP_A).unwrap();
    let b = std::fs::read(toolhost_tests::FLIP_B).unwrap();
    install(dir.path(), "flip.wasm", &a);
    let host = Host::builder()
        .plugin_dir(dir.path())
        .cache_dir(Some(cache.path().to_path_buf()))
        .build()
        .await
        .unwrap();
    let _watcher = host
        .watch(
            dir.path(),
            None,
            WatchOptions {
                debounce: Duration::from_millis(10),
                grace: Duration::from_secs(10),
            },
        )
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stormer = storm.then(|| {
        let stop = stop.clone();
        let dir = dir.path().to_path_buf();
        tokio::spawn(async move {
            let mut round = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                install(
                    &dir,
                    "flip.wasm",
                    if round.is_multiple_of(2) { &b } else { &a },
                );
                round += 1;
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            round
        })
    });
    let mut samples = Vec::new();
    let until = Instant::now() + run_for;
    while Instant::now() < until {
        let started = Instant::now();
        host.call("which", json!({})).await.unwrap();
        samples.push(started.elapsed());
    }
    let calls = samples.len();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(stormer) = stormer {
        let rounds = stormer.await.unwrap();
        println!("    ({rounds} replacements during {calls} calls)");
    }
    (
        percentile(&mut samples, 0.5),
        percentile(&mut samples, 0.99),
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!(
        "replacement → new version serving (debounce {}):",
        ms(DEBOUNCE)
    );
    let cache = tempfile::tempdir().unwrap();
    let (end_to_end, after) = replacement(Some(cache.path().to_path_buf()), 20).await;
    println!(
        "  with the compile cache:    median {} end to end, {} after the debounce",
        ms(end_to_end),
        ms(after)
    );
    let (end_to_end, after) = replacement(None, 6).await;
    println!(
        "  without the cache:         median {} end to end, {} after the debounce",
        ms(end_to_end),
        ms(after)
    );

    println!("host start with 10 plugin files:");
    let dir = tempfile::tempdir().unwrap();
    ten_plugins(dir.path());
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for _ in 0..3 {
        let cache = tempfile::tempdir().unwrap();
        cold.push(start(dir.path(), Some(cache.path().to_path_buf())).await);
        warm.push(start(dir.path(), Some(cache.path().to_path_buf())).await);
        warm.push(start(dir.path(), Some(cache.path().to_path_buf())).await);
    }
    println!(
        "  cold (empty cache):        median {}",
        ms(percentile(&mut cold, 0.5))
    );
    println!(
        "  warm cache:                median {}",
        ms(percentile(&mut warm, 0.5))
    );

    println!("call latency (flip `which`, fresh instance each):");
    let (p50, p99) = latencies(false, Duration::from_secs(3)).await;
    println!(
        "  no reloads:                p50 {}, p99 {}",
        us(p50),
        us(p99)
    );
    let (p50, p99) = latencies(true, Duration::from_secs(3)).await;
    println!(
        "  replaced every 25 ms:      p50 {}, p99 {}",
        us(p50),
        us(p99)
    );
}
