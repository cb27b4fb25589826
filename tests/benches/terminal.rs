//! What the kernel sandbox adds to a terminal command: `run_command` of
//! `true` through `Host::call` with `terminal.sandbox = "kernel"` against the
//! same call with `terminal.sandbox = "none"`, interleaved, in a small
//! workspace and in one of 10,000 files (the sandbox walks the grants for
//! paths `file.deny` masks).
//!
//! Run: `cargo bench -p toolhost-tests --bench terminal`. Prints the median
//! of each and the difference.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::Host;
use toolhost::config::{Config, ConfigSource};

const RUNS: usize = 101;

const PAUSE: Duration = Duration::from_millis(50);

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

async fn host(workspace: &Path, sandbox: &str) -> Host {
    let text = format!(
        "default_profile = \"p\"\n[profiles.p]\n\
         allow = [\"terminal:execute\", \"file:read\", \"file:write\"]\n\
         file.read = [\".\"]\nfile.write = [\"out\"]\n\
         file.deny = [\"**/.env*\", \"secrets/**\"]\n\
         terminal.sandbox = \"{sandbox}\"\n"
    );
    let config = Config::parse(&text, ConfigSource::Embedded, workspace).unwrap();
    Host::builder()
        .config(&config)
        .unwrap()
        .bundled(true)
        .build()
        .await
        .unwrap()
}

async fn run_true(host: &Host) -> Duration {
    let started = Instant::now();
    let result = host
        .call("run_command", json!({"command": "true"}))
        .await
        .expect("true runs");
    let took = started.elapsed();
    assert!(result.get().contains("\"exit_code\":0"), "{}", result.get());
    took
}

async fn compare(label: &str, workspace: &Path) {
    let confined = host(workspace, "kernel").await;
    let plain = host(workspace, "none").await;
    run_true(&confined).await;
    run_true(&plain).await;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        tokio::time::sleep(PAUSE).await;
        a.push(run_true(&confined).await);
        tokio::time::sleep(PAUSE).await;
        b.push(run_true(&plain).await);
    }
    let (a, b) = (median(&mut a), median(&mut b));
    println!(
        "{label}: sandboxed {}, unconfined {}, added {}",
        ms(a),
        ms(b),
        ms(a.saturating_sub(b))
    );
}

fn main() {
    toolhost::confine::use_launcher(env!("CARGO_BIN_EXE_toolhost-cli"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let small = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(small.path().join("out")).unwrap();
        std::fs::write(small.path().join(".env"), "X=1").unwrap();
        compare("run_command true, 3-entry workspace", small.path()).await;

        let large = tempfile::tempdir().unwrap();
        for d in 0..100 {
            let dir = large.path().join(format!("src/dir{d:03}"));
            std::fs::create_dir_all(&dir).unwrap();
            for f in 0..100 {
                std::fs::write(dir.join(format!("file{f:03}.rs")), "").unwrap();
            }
        }
        std::fs::create_dir_all(large.path().join("out")).unwrap();
        compare("run_command true, 10,100-entry workspace", large.path()).await;
    });
}
