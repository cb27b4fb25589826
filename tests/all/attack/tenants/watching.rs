//! The directory watches: terminal sessions share one inotify instance, and
//! a server that cannot watch (its user's inotify instances used up) starts,
//! says so, and watches once it can.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::served::{Served, Setup};
use super::{A, config, start};

/// The inotify instances process `pid` holds.
fn inotify_instances(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter(|entry| {
            std::fs::read_link(entry.path())
                .is_ok_and(|target| target.to_string_lossy().contains("inotify"))
        })
        .count()
}

#[tokio::test]
async fn terminal_sessions_share_one_inotify_instance() {
    let served = start("");
    for n in 0..12 {
        let session = format!("s{n}");
        let ran = served
            .call(
                A,
                Some(&session),
                "run_command",
                json!({ "command": "true" }),
            )
            .await;
        assert!(ran.get("error").is_none(), "{ran}");
    }
    let held = inotify_instances(served.pid());
    // One for the plugin directory's watcher, one for every grant's watch,
    // one for the repository guard (taken at start).
    assert!(held <= 3, "the server holds {held} inotify instances");
}

#[tokio::test]
async fn a_server_that_cannot_watch_starts_says_so_and_watches_once_it_can() {
    crate::use_launcher();
    let mut served = Served::launch(Setup {
        config: &config("", ""),
        dirs: &["a", "b"],
        inotify_instances: Some(0),
        ..Setup::default()
    });
    served.wait_for("cannot watch");
    let (_, status) = served.get("/v1/status", A).await;
    assert_eq!(status["watching"]["ok"], false, "{status}");
    let echoed = served.call(A, None, "echo", json!({ "text": "up" })).await;
    assert_eq!(echoed["text"], "up");
    // The limit lifted, it watches within its retry interval, and a plugin
    // added now loads.
    let raised = std::process::Command::new("nsenter")
        .args([
            "-U",
            "--preserve-credentials",
            "-t",
            &served.pid().to_string(),
        ])
        .args([
            "sh",
            "-c",
            "echo 128 > /proc/sys/user/max_inotify_instances",
        ])
        .status()
        .unwrap();
    assert!(raised.success());
    served.wait_for("watching the plugin directory again");
    std::fs::copy(toolhost_tests::JUDGE, served.path("plugins/judge.wasm")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, status) = served.get("/v1/status", A).await;
        assert_eq!(status["watching"]["ok"], true, "{status}");
        let (_, tools) = served.get("/v1/tools", A).await;
        if tools.to_string().contains("\"judge\"") {
            break;
        }
        assert!(Instant::now() < deadline, "judge never loaded: {tools}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn toolhost_status_says_when_the_plugin_directory_cannot_be_watched() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("plugins")).unwrap();
    std::fs::write(root.join("toolhost.toml"), config("", "")).unwrap();
    let status = |most: u32| {
        let limit =
            format!("echo {most} > /proc/sys/user/max_inotify_instances && exec \"$0\" \"$@\"");
        let output = std::process::Command::new("unshare")
            .args([
                "-U",
                "-r",
                "sh",
                "-c",
                &limit,
                env!("CARGO_BIN_EXE_toolhost-cli"),
            ])
            .arg("--config")
            .arg(root.join("toolhost.toml"))
            .args(["status", "--json"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let blocked = status(0);
    assert_eq!(blocked["watching"]["ok"], false, "{blocked}");
    let why = blocked["watching"]["error"].as_str().unwrap();
    assert!(
        why.contains("cannot watch") && why.contains("plugins"),
        "{why}"
    );
    assert_eq!(status(128)["watching"]["ok"], true);
}
