//! Attack tests: own_races (see mod.rs). A symlink swapped between the file
//! capability's check and its operation (a command or another tool flips
//! `a` between `sub` and `.`) never lets a rename replace toolhost's config
//! nor an open truncate its audit log.

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
