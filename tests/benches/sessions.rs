//! A command in a warm terminal session against a command run alone:
//! `run_command` of `true` through `Host::dispatch`, in the kernel sandbox,
//! 101 calls of each kind interleaved, 50 ms apart (as an agent's calls),
//! and the same back to back:
//!
//! - `warm session`: every call in one session, whose sandbox is up: only
//!   the shell (and its state script) starts;
//! - `alone`: calls without a session, each in a sandbox of its own (built
//!   ahead after the call before, when there is time);
//! - `new session`: each call in a session of its own, which builds its
//!   sandbox at the call.
//!
//! Then the same under the container backend (`terminal.backend =
//! "container"`), 21 calls of each kind, where a Docker or Podman socket
//! is found and has the image of the container tests
//! (`localhost/toolhost-test-image:latest`, made by `cargo test container::`):
//! there a new session creates and starts a container, and a warm one
//! starts an exec in it.
//!
//! Run: `cargo bench -p toolhost-tests --bench sessions`. Prints medians.
//! `BENCH_LAUNCHER=path` names the launcher (a copy of the build's own
//! `toolhost-cli`, so that copies of two builds' bench and launcher can run
//! side by side), `BENCH_REPO=1` makes the workspace a git
//! repository (whose metadata every sandbox then keeps), and
//! `BENCH_NO_CONTAINER=1` leaves out the container backend.

use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::config::{Config, ConfigSource};
use toolhost::{CallRequest, Host};

const RUNS: usize = 101;

/// Calls of each kind under the container backend, where a new session
/// takes a container.
const CONTAINER_RUNS: usize = 21;

const PAUSE: Duration = Duration::from_millis(50);

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

async fn run_true(host: &Host, session: Option<String>) -> Duration {
    let mut request = CallRequest::new("run_command", json!({"command": "true"}).to_string());
    request.session = session;
    let started = Instant::now();
    let result = host.dispatch(request).await.expect("true runs");
    let took = started.elapsed();
    assert!(result.get().contains("\"exit_code\":0"), "{}", result.get());
    took
}

async fn compare(host: &Host, pause: Duration, label: &str, runs: usize) {
    let (mut warm, mut alone, mut new) = (Vec::new(), Vec::new(), Vec::new());
    run_true(host, Some("warm".into())).await;
    for i in 0..runs {
        tokio::time::sleep(pause).await;
        warm.push(run_true(host, Some("warm".into())).await);
        tokio::time::sleep(pause).await;
        alone.push(run_true(host, None).await);
        tokio::time::sleep(pause).await;
        new.push(run_true(host, Some(format!("new-{label}-{i}"))).await);
        host.end_session(None, &format!("new-{label}-{i}"));
    }
    println!(
        "run_command true, {label}: warm session {}, alone {}, new session {}",
        ms(median(&mut warm)),
        ms(median(&mut alone)),
        ms(median(&mut new)),
    );
}

/// A host whose profile runs commands with the workspace writable, and
/// `more` settings.
async fn host_with(workspace: &std::path::Path, more: &str) -> Host {
    let text = format!(
        "default_profile = \"p\"\n[profiles.p]\n\
         allow = [\"terminal:execute\", \"file:read\", \"file:write\"]\n\
         file.write = [\".\"]\n{more}"
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

fn main() {
    toolhost::capability::terminal::confine::use_launcher(
        std::env::var("BENCH_LAUNCHER").unwrap_or(env!("CARGO_BIN_EXE_toolhost-cli").into()),
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let workspace = tempfile::tempdir().unwrap();
        if std::env::var_os("BENCH_REPO").is_some() {
            std::process::Command::new("git")
                .args(["init", "-q"])
                .current_dir(workspace.path())
                .status()
                .unwrap();
        }
        let host = host_with(workspace.path(), "").await;
        compare(&host, PAUSE, "paused", RUNS).await;
        compare(&host, Duration::ZERO, "back to back", RUNS).await;

        if std::env::var_os("BENCH_NO_CONTAINER").is_some() {
            return;
        }
        let Some(socket) = ["/var/run/docker.sock", "/run/podman/podman.sock"]
            .into_iter()
            .find(|path| std::path::Path::new(path).exists())
        else {
            println!("container backend: no engine socket, not measured");
            return;
        };
        let container = format!(
            "terminal.read = [\"/usr\"]\nterminal.backend = \"container\"\n\
             terminal.container = {{ image = \"localhost/toolhost-test-image:latest\", \
             socket = {socket:?} }}\n"
        );
        let host = host_with(workspace.path(), &container).await;
        compare(&host, PAUSE, "container, paused", CONTAINER_RUNS).await;
        compare(
            &host,
            Duration::ZERO,
            "container, back to back",
            CONTAINER_RUNS,
        )
        .await;
        host.end_session(None, "warm");
    });
}
