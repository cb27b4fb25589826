//! Attack tests: own_races (see mod.rs). A symlink swapped between the file
//! capability's check and its operation (a command or another tool flips
//! `a` between `sub` and `.`) never lets a rename replace toolhost's config
//! nor an open truncate its audit log; a config the operator replaces by a
//! rename while a command runs (which could then write the new file) is
//! neither applied nor left for the next start.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;

/// Flips `dir/a` between `sub` and `.` (atomically, by rename) until
/// `stop` is set.
fn flip(dir: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let dir = dir.to_path_buf();
    std::thread::spawn(move || {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let target = if n.is_multiple_of(2) { "." } else { "sub" };
            let tmp = dir.join(format!(".flip{n}"));
            let _ = std::os::unix::fs::symlink(target, &tmp);
            let _ = std::fs::rename(&tmp, dir.join("a"));
            n += 1;
        }
    })
}

#[test]
fn a_symlink_swapped_during_a_call_neither_replaces_the_config_nor_truncates_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(root.join("plugins")).unwrap();
    std::fs::copy(toolhost_tests::FILES, root.join("plugins/files.wasm")).unwrap();
    let config = "plugins = \"plugins\"\naudit = \"audit.jsonl\"\ndefault_profile = \"p\"\n\
                  [profiles.p]\nallow = [\"file:*\"]\nfile.read = [\".\"]\nfile.write = [\".\"]\n";
    std::fs::write(root.join("toolhost.toml"), config).unwrap();
    std::fs::write(root.join("audit.jsonl"), "{\"evidence\":1}\n").unwrap();
    std::os::unix::fs::symlink("sub", root.join("a")).unwrap();
    let mut calls = Vec::new();
    for i in 0..300 {
        calls.push(
            json!({"id": format!("w{i}"), "type": "function", "function": {
            "name": "write", "arguments": {"path": "a/audit.jsonl", "content": "x"}}}),
        );
        calls.push(json!({"id": format!("m{i}"), "type": "function", "function": {
            "name": "write", "arguments": {"path": format!("e{i}.toml"), "content": "planted = 1"}}}));
        calls.push(json!({"id": format!("r{i}"), "type": "function", "function": {
            "name": "rename", "arguments": {"from": format!("e{i}.toml"), "to": "a/toolhost.toml"}}}));
    }
    let batch = root.join("batch.json");
    std::fs::write(&batch, json!({ "tool_calls": calls }).to_string()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = flip(&root, stop.clone());
    let output = Command::new(crate::toolhost_cli())
        .current_dir(&root)
        .env_remove("RUST_LOG")
        .arg("--config")
        .arg(root.join("toolhost.toml"))
        .args(["call", "--batch"])
        .arg(&batch)
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("w299"), "the batch did not run: {text}");
    assert_eq!(
        std::fs::read_to_string(root.join("toolhost.toml")).unwrap(),
        config,
        "the config was replaced"
    );
    let audit = std::fs::read_to_string(root.join("audit.jsonl")).unwrap();
    assert!(
        audit.starts_with("{\"evidence\":1}\n"),
        "the audit log was truncated: {audit:.200}"
    );
    // Where `a` led to `sub`, the writes happened there.
    assert!(root.join("sub/audit.jsonl").exists() || root.join("sub/toolhost.toml").exists());
}

/// Commands run unasked in the config's directory.
const RUNS: &str = r#"
default_profile = "agent"
[profiles.agent]
allow = ["*"]
file.read = ["."]
file.write = ["."]
terminal.dangerous = "allow"
"#;

/// Waits for `path` to exist.
async fn appears(path: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !path.exists() {
        assert!(std::time::Instant::now() < deadline, "{}", path.display());
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// The operator saves `toolhost.toml` as `sed -i` and most editors do (a
/// new file renamed over it) while a command runs whose sandbox had the
/// old file masked: in the sandbox the name then shows the new file, and
/// a command waiting for that writes it (`terminal.sandbox = "none"`). The
/// command is ended, the file is not applied and is moved aside (a later
/// start does not read it either), and commands stay sandboxed. The same
/// edit saved in place, while a command runs, is applied and ends nothing.
#[tokio::test]
async fn a_config_replaced_while_a_command_could_write_it_is_set_aside_not_applied() {
    use super::server::Server;
    let mut server = Server::start(RUNS, |_| {}).await;
    server.wait_for_tool(None, "run_command").await;
    let file = server.root.join("toolhost.toml");

    // Allowed: written in place while a command runs.
    let edited = format!("{RUNS}# edited in place\n");
    let line = "touch started-1; sleep 2; echo survived";
    let (ran, ()) = tokio::join!(server.run(None, None, line), async {
        appears(&server.root.join("started-1")).await;
        std::fs::write(&file, &edited).unwrap();
    });
    assert!(ran.to_string().contains("survived"), "{ran}");
    server.wait_for("reloaded");

    // Refused: replaced by a rename while a command waits for it, then
    // writes the new file, or (racing the guard) renames a file or a link
    // of its own over the name.
    drop(server);
    for plant in [
        "open('toolhost.toml', 'w').write(open('promoted.txt').read())",
        "os.rename('promoted.txt', 'toolhost.toml')",
        "os.symlink('promoted.txt', 'link.toml'); os.rename('link.toml', 'toolhost.toml')",
    ] {
        replaced_while_a_command_plants(plant).await;
    }
}

/// One round of the test above: the operator's rename, and `plant` (Python)
/// run by a command the moment the name shows another file.
async fn replaced_while_a_command_plants(plant: &str) {
    use super::server::Server;
    let mut server = Server::start(RUNS, |_| {}).await;
    server.wait_for_tool(None, "run_command").await;
    let file = server.root.join("toolhost.toml");
    let promoted = RUNS.replace(
        "file.read = [\".\"]",
        "file.read = [\"/\"]\nterminal.sandbox = \"none\"",
    );
    std::fs::write(server.root.join("promoted.txt"), &promoted).unwrap();
    let script = format!(
        "import os\nfirst = os.stat('toolhost.toml').st_ino\nopen('started', 'w')\n\
         while os.stat('toolhost.toml').st_ino == first: pass\n{plant}\nprint('planted')\n\
         import time; time.sleep(20)\n"
    );
    std::fs::write(server.root.join("plant.py"), script).unwrap();
    let saved = format!("{RUNS}# saved by a rename\n");
    let began = std::time::Instant::now();
    let (ran, ()) = tokio::join!(server.run(None, None, "python3 plant.py"), async {
        appears(&server.root.join("started")).await;
        std::fs::write(server.root.join("toolhost.toml.new"), &saved).unwrap();
        std::fs::rename(server.root.join("toolhost.toml.new"), &file).unwrap();
    });
    assert!(
        began.elapsed() < std::time::Duration::from_secs(15),
        "{plant}: the command was not ended: {ran}\n{}",
        server.log()
    );
    let rejected = server.wait_for("was replaced while a command");
    assert!(rejected.contains("toolhost.toml"), "{plant}: {rejected}");
    // Nothing a command could have written is left at the name; what was
    // there is beside it.
    let left = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        !left.contains("sandbox"),
        "{plant}: left for the next start"
    );
    let aside = std::fs::read_dir(&server.root)
        .unwrap()
        .flatten()
        .any(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("toolhost.toml.toolhost-")
        });
    assert!(aside, "{plant}: {}", server.log());
    // Still sandboxed, in this server and in a later start.
    let shadow = "head -c 4 /etc/shadow && echo READ";
    let ran = server.run(None, None, shadow).await;
    assert!(!ran.to_string().contains("READ"), "{plant}: {ran}");
    assert!(
        !server.log().contains("config reloaded\n"),
        "{plant}: {}",
        server.log()
    );
    let later = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .current_dir(&server.root)
        .args(["call", "run_command"])
        .arg(serde_json::json!({ "command": shadow }).to_string())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&later.stdout).contains("READ"),
        "{plant}: a later start ran unsandboxed: {later:?}"
    );
    // The operator looks through what was set aside and moves it back while
    // no command runs (a sandbox built ahead for the next one, which has
    // run none, waits): it stays, and is applied.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    std::fs::write(server.root.join("restored.new"), &saved).unwrap();
    std::fs::rename(server.root.join("restored.new"), &file).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    assert_eq!(
        std::fs::read_to_string(&file).unwrap_or_default(),
        saved,
        "{plant}: the restored configuration was moved aside: {}",
        server.log()
    );
}

/// The same for the approvals allowlist, which toolhost reads again when
/// it changes: replaced by a rename while a command waits for that, what
/// the command writes there approves nothing, and the file is set aside.
#[tokio::test]
async fn an_allowlist_replaced_while_a_command_could_write_it_approves_nothing() {
    use super::server::{Server, error_of};
    // Commands run unasked; file writes need an approval nobody gives.
    const ASKS: &str = r#"
default_profile = "agent"
[profiles.agent]
allow = ["*"]
approval_required = ["file:write"]
file.read = ["."]
file.write = ["."]
terminal.dangerous = "allow"
"#;
    let server = Server::start(ASKS, |root| {
        std::fs::write(root.join("toolhost-approvals.json"), "{}\n").unwrap();
    })
    .await;
    server.wait_for_tool(None, "run_command").await;
    let file = server.root.join("toolhost-approvals.json");
    let refused = server.write_file(None, "w.txt", "x").await;
    assert!(error_of(&refused).is_some(), "{refused}");
    std::fs::write(
        server.root.join("approve.txt"),
        "{\"approved\": [\"tool write_file file:write\"]}\n",
    )
    .unwrap();
    let line = "i=$(stat -c %i toolhost-approvals.json); touch started; \
                while [ \"$(stat -c %i toolhost-approvals.json)\" = \"$i\" ]; do sleep 0.002; done; \
                cat approve.txt > toolhost-approvals.json && echo wrote; sleep 20";
    let (ran, ()) = tokio::join!(server.run(None, None, line), async {
        appears(&server.root.join("started")).await;
        std::fs::write(server.root.join("allow.new"), "{}\n").unwrap();
        std::fs::rename(server.root.join("allow.new"), &file).unwrap();
    });
    let still = server.write_file(None, "w.txt", "x").await;
    assert!(
        error_of(&still).is_some(),
        "approved by what {ran} wrote: {still}"
    );
    assert!(!server.root.join("w.txt").exists());
    // Nothing a command could have written is left at the name.
    assert!(
        !std::fs::read_to_string(&file)
            .unwrap_or_default()
            .contains("write_file"),
        "{ran}"
    );
}

/// The operator rotates the audit log (`mv audit.jsonl audit.jsonl.1;
/// touch audit.jsonl`) while a command runs that then renames a link to a
/// file outside every grant over the name: toolhost, started again, appends
/// its audit lines there neither through the link (it opens the log
/// following none) nor at all (the link is set aside).
#[tokio::test]
async fn a_rotated_audit_log_replaced_by_a_link_is_not_where_toolhost_appends() {
    use super::server::Server;
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("profile.sh");
    std::fs::write(&target, "# the owner's\n").unwrap();
    let config = format!("audit = \"audit.jsonl\"\n{RUNS}");
    let server = Server::start(&config, |root| {
        std::fs::write(root.join("audit.jsonl"), "").unwrap();
    })
    .await;
    server.wait_for_tool(None, "run_command").await;
    let script = format!(
        "import os\nfirst = os.stat('audit.jsonl').st_ino\nopen('started', 'w')\n\
         while True:\n    try:\n        if os.stat('audit.jsonl').st_ino != first: break\n\
         \x20   except FileNotFoundError: break\n\
         os.symlink({:?}, 'l')\nos.rename('l', 'audit.jsonl')\nprint('planted')\n\
         import time; time.sleep(20)\n",
        target.display().to_string()
    );
    std::fs::write(server.root.join("plant.py"), script).unwrap();
    let log = server.root.join("audit.jsonl");
    let (ran, ()) = tokio::join!(server.run(None, None, "python3 plant.py"), async {
        appears(&server.root.join("started")).await;
        std::fs::rename(&log, server.root.join("audit.jsonl.1")).unwrap();
        // `touch`, which follows no link a command may have put there.
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&log);
    });
    drop(server);
    let later = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .arg("--config")
        .arg(log.with_file_name("toolhost.toml"))
        .args(["call", "echo", r#"{"text":"$(touch /tmp/x)"}"#])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "# the owner's\n",
        "{ran} {later:?}"
    );
    assert!(
        !log.symlink_metadata()
            .is_ok_and(|meta| meta.file_type().is_symlink()),
        "{ran}"
    );
}

/// toolhost's config with a second name in the workspace (a hard link a
/// command made to it, or to the copy the guard set aside, which the
/// operator then moved back): commands see it under no name, so none
/// writes `terminal.sandbox = "none"` into it for the next start; also
/// under a profile that writes only where the second name is.
#[tokio::test]
async fn an_own_file_with_another_name_is_masked_under_every_name() {
    use super::server::Server;
    let narrow = RUNS.replace("file.write = [\".\"]", "file.write = [\"sub\"]");
    for config in [RUNS, narrow.as_str()] {
        let server = Server::start(config, |root| {
            std::fs::create_dir(root.join("sub")).unwrap();
            std::fs::hard_link(root.join("toolhost.toml"), root.join("sub/keep.h")).unwrap();
        })
        .await;
        server.wait_for_tool(None, "run_command").await;
        let line = "cat sub/keep.h; echo 'terminal.sandbox = \"none\"' >> sub/keep.h && echo WROTE";
        let ran = server.run(None, None, line).await;
        assert!(!ran.to_string().contains("WROTE"), "{ran}");
        assert!(!ran.to_string().contains("default_profile"), "{ran}");
        let now = std::fs::read_to_string(server.root.join("toolhost.toml")).unwrap();
        assert_eq!(now, config);
    }
}
