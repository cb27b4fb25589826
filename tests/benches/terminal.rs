//! What the kernel sandbox adds to a terminal command: `run_command` of
//! `true` through `Host::call` with `terminal.sandbox = "kernel"` against the
//! same call with `terminal.sandbox = "none"`, interleaved, in a small
//! workspace and in one of 10,000 files (the sandbox walks the grants for
//! paths `file.deny` masks). Three ways of calling:
//!
//! - `paused`: 50 ms between calls, as between an agent's calls: each
//!   command takes the sandbox built ahead after the one before;
//! - `back to back`: the next call as soon as one returns, while the
//!   sandbox built ahead may still be in the making;
//! - `new directory`: a directory created in the workspace before each call
//!   (as a build does), which makes the sandbox built ahead stale: each
//!   command builds its own.
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

#[derive(Clone, Copy)]
enum Calls {
    Paused,
    BackToBack,
    NewDirectory,
}

async fn compare(label: &str, workspace: &Path, calls: Calls) {
    let confined = host(workspace, "kernel").await;
    let plain = host(workspace, "none").await;
    run_true(&confined).await;
    run_true(&plain).await;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..RUNS {
        for (host, samples) in [(&confined, &mut a), (&plain, &mut b)] {
            match calls {
                Calls::Paused => tokio::time::sleep(PAUSE).await,
                Calls::BackToBack => {}
                Calls::NewDirectory => {
                    tokio::time::sleep(PAUSE).await;
                    let dir = workspace.join(format!("out/new-{i}-{}", samples.len()));
                    std::fs::create_dir_all(dir).unwrap();
                }
            }
            samples.push(run_true(host).await);
        }
    }
    let (a, b) = (median(&mut a), median(&mut b));
    let calls = match calls {
        Calls::Paused => "paused",
        Calls::BackToBack => "back to back",
        Calls::NewDirectory => "new directory",
    };
    println!(
        "{label}, {calls}: sandboxed {}, unconfined {}, added {}",
        ms(a),
        ms(b),
        ms(a.saturating_sub(b))
    );
}

fn main() {
    toolhost::capability::terminal::confine::use_launcher(env!("CARGO_BIN_EXE_toolhost-cli"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let small = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(small.path().join("out")).unwrap();
        std::fs::write(small.path().join(".env"), "X=1").unwrap();
        for calls in [Calls::Paused, Calls::BackToBack, Calls::NewDirectory] {
            compare("run_command true, 3-entry workspace", small.path(), calls).await;
        }

        let large = tempfile::tempdir().unwrap();
        for d in 0..100 {
            let dir = large.path().join(format!("src/dir{d:03}"));
            std::fs::create_dir_all(&dir).unwrap();
            for f in 0..100 {
                std::fs::write(dir.join(format!("file{f:03}.rs")), "").unwrap();
            }
        }
        std::fs::create_dir_all(large.path().join("out")).unwrap();
        for calls in [Calls::Paused, Calls::BackToBack, Calls::NewDirectory] {
            compare(
                "run_command true, 10,100-entry workspace",
                large.path(),
                calls,
            )
            .await;
        }
    });
}
