//! Tenant `b`'s call latency while tenant `a`'s commands spin hundreds of
//! busy loops, on one `toolhost serve --http`: the p99 of 200 `echo` calls
//! of `b` (each heavier than a CPU slice), calm and then while `a` runs four
//! `run_command`s of 240 loops each. With each tenant's commands in a cpu
//! cgroup weighted as one thread, the flooded p99 stays near the calm one.
//! A measurement, not a test: it depends on the machine and its load.
//!
//! Run (as root, for the sandbox's ids): `cargo bench -p toolhost-tests
//! --bench cpu_share`. Prints both p99s and how busy the CPUs were.

use std::io::BufRead as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::Digest as _;

const A: &str = "a-token";
const B: &str = "b-token";

fn sha(token: &str) -> String {
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn call(tool: &str, arguments: &Value) -> Value {
    json!({ "tool_calls": [{ "id": "c", "type": "function",
        "function": { "name": tool, "arguments": arguments.to_string() } }] })
}

/// p99 of `n` echo calls of `b`, 10 ms apart.
async fn echo_p99(client: &reqwest::Client, url: &str, n: usize) -> Duration {
    let body = call("echo", &json!({ "text": "b".repeat(256 << 10) }));
    let mut taken = Vec::with_capacity(n);
    for _ in 0..n {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let start = Instant::now();
        let answer = client.post(url).bearer_auth(B).json(&body).send().await;
        assert!(answer.unwrap().status().is_success());
        taken.push(start.elapsed());
    }
    taken.sort();
    taken[n * 99 / 100]
}

/// Busy and total jiffies of all cpus, from `/proc/stat`.
fn cpu_times() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap())
        .collect();
    let total: u64 = fields.iter().sum();
    (total - fields[3] - fields[4], total)
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for made in ["a", "b", "plugins"] {
        std::fs::create_dir_all(root.join(made)).unwrap();
    }
    let config = format!(
        "plugins = \"plugins\"\ndefault_profile = \"worker\"\naudit = \"off\"\n\
         [profiles.worker]\nallow = [\"terminal:*\"]\n\
         [tenants.a]\ntoken_sha256 = \"{}\"\nprofile = \"worker\"\nworkspace = \"a\"\n\
         [tenants.b]\ntoken_sha256 = \"{}\"\nprofile = \"worker\"\nworkspace = \"b\"\n",
        sha(A),
        sha(B)
    );
    std::fs::write(root.join("toolhost.toml"), config).unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .arg("--config")
        .arg(root.join("toolhost.toml"))
        .args(["serve", "--http", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(server.stderr.take().unwrap()).lines();
    let base = loop {
        let line = lines.next().expect("the server started").unwrap();
        if let Some(at) = line.find("http://") {
            break line[at..].split_whitespace().next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    let url = format!("{base}/v1/tool_calls");
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    while client
        .get(format!("{base}/v1/tools"))
        .bearer_auth(B)
        .send()
        .await
        .map_or(true, |r| !r.status().is_success())
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    echo_p99(&client, &url, 20).await;
    let calm = echo_p99(&client, &url, 200).await;
    let commands = 4;
    for n in 0..commands {
        let spin = format!(
            "for i in $(seq 240); do (while :; do :; done) & done; : > started{n}; sleep 30; kill 0"
        );
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move {
            let body = call("run_command", &json!({ "command": spin }));
            let _ = client.post(&url).bearer_auth(A).json(&body).send().await;
        });
    }
    let started = |n: usize| root.join(format!("a/started{n}")).exists();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(0..commands).all(started) {
        assert!(Instant::now() < deadline, "the loops never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = cpu_times();
    let flooded = echo_p99(&client, &url, 200).await;
    let after = cpu_times();
    let busy = (after.0 - before.0) as f64 / (after.1 - before.1).max(1) as f64;
    println!(
        "b's p99: calm {calm:?}, while a spins {flooded:?} (cpus {:.0}% busy)",
        busy * 100.0
    );
    let _ = server.kill();
    let _ = server.wait();
}
