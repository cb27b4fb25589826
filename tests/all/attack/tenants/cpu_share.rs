//! Each tenant's commands run in a cpu cgroup of its own, weighted as one
//! normal thread (`cpu.shares` 1024) under a `toolhost` group of the same
//! weight, so one tenant's busy loops cannot outweigh the server's threads
//! and the other tenants' calls; where no such group can be made, they run
//! at nice 19 and `SCHED_IDLE`. (How much that keeps another tenant's calls
//! fast is measured by the `cpu_share` benchmark.)

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;

use super::served::{Served, Setup};
use super::{A, B, config};

/// Starts a command of `token` that sleeps, and returns the host pids of
/// its processes (found by a marker on their command line, `test` telling
/// apart the tests this process runs at once).
async fn sleeping(served: &std::sync::Arc<Served>, token: &'static str, test: &str) -> Vec<u32> {
    let marker = format!("cpu-share-{test}-{token}-{}", std::process::id());
    let line = format!("sh -c 'sleep 20; : {marker}'");
    let caller = served.clone();
    tokio::spawn(async move {
        caller
            .call(token, None, "run_command", json!({ "command": line }))
            .await
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found: Vec<u32> = crate::processes_with(&marker)
            .iter()
            .filter(|line| !line.contains("run_command"))
            .filter_map(|line| line.split(':').next()?.parse().ok())
            .collect();
        if !found.is_empty() {
            return found;
        }
        assert!(Instant::now() < deadline, "{token}'s command never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The cpu cgroup directory of process `pid` (cgroup v1), if it has one
/// besides the root.
fn cpu_group(pid: u32) -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = cgroups.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers.split(',').any(|c| c == "cpu").then_some(path)
    })?;
    Some(PathBuf::from("/sys/fs/cgroup/cpu").join(path.trim_start_matches('/')))
}

fn shares(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("cpu.shares"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .trim()
        .to_string()
}

/// `(nice, scheduling policy)` of process `pid`, from `/proc/PID/stat`.
fn priority(pid: u32) -> (i64, i64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    (fields[16].parse().unwrap(), fields[38].parse().unwrap())
}

fn cgroup_v1_cpu() -> bool {
    std::path::Path::new("/sys/fs/cgroup/cpu/cpu.shares").exists()
}

#[tokio::test]
async fn each_tenants_commands_share_one_cpu_group_weighted_as_one_thread() {
    if !cgroup_v1_cpu() {
        eprintln!("skipped: no cgroup v1 cpu hierarchy here");
        return;
    }
    crate::use_launcher();
    let served = std::sync::Arc::new(Served::start(&config("", ""), &["a", "b"]));
    let mut groups = Vec::new();
    for token in [A, B] {
        let pids = sleeping(&served, token, "grouped").await;
        let group = cpu_group(pids[0]).unwrap_or_else(|| panic!("{token}: in no cpu group"));
        for pid in &pids {
            assert_eq!(cpu_group(*pid).as_ref(), Some(&group), "{token}: {pid}");
        }
        assert_eq!(group.parent().unwrap().file_name().unwrap(), "toolhost");
        assert_eq!(shares(&group), "1024", "{}", group.display());
        assert_eq!(shares(group.parent().unwrap()), "1024");
        // In the group, not merely below the host's priority (the one
        // this test runs at, which the server inherits).
        assert_eq!(priority(pids[0]), priority(std::process::id()), "{token}");
        groups.push(group);
    }
    assert_ne!(groups[0], groups[1], "the tenants share a cpu group");
}

#[tokio::test]
async fn without_a_cpu_group_commands_run_at_the_lowest_priority() {
    crate::use_launcher();
    // The cpu hierarchy read-only for this server: no group can be made.
    let text = config("", "");
    let served = std::sync::Arc::new(Served::launch(Setup {
        config: &text,
        dirs: &["a", "b"],
        under: &[
            "unshare",
            "-m",
            "sh",
            "-c",
            "mount -o remount,bind,ro /sys/fs/cgroup/cpu 2>/dev/null; exec \"$0\" \"$@\"",
        ],
        ..Setup::default()
    }));
    for token in [A, B] {
        for pid in sleeping(&served, token, "ungrouped").await {
            // SCHED_IDLE is policy 5.
            assert_eq!(priority(pid), (19, 5), "{token}: {pid}");
            let group = cpu_group(pid);
            assert!(
                group
                    .as_ref()
                    .is_none_or(|g| !g.to_string_lossy().contains("toolhost")),
                "{group:?}"
            );
        }
    }
}
