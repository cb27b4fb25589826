//! Attack tests: own_missing (see mod.rs). toolhost's own paths that do not
//! exist yet (a plugin directory, an allowlist in a missing directory, the
//! built-in configuration's `./toolhost.toml`) or are named through a
//! symlink in a writable grant: no command creates or replaces them.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// A workspace `ws` (with the config's directory `conf` beside it when
/// asked), written by commands that run unasked.
fn config(ws: &Path, extra: &str) -> String {
    format!(
        "{extra}\ndefault_profile = \"agent\"\n[profiles.agent]\n\
         allow = [\"*\"]\nfile.read = [\"{ws}\"]\nfile.write = [\"{ws}\"]\n\
         terminal.dangerous = \"allow\"\n",
        ws = ws.display()
    )
}

/// Runs `line` through `toolhost call run_command` in `cwd`, with
/// `--config` when given (else the built-in configuration and `profile`).
fn run(cwd: &Path, config: Option<&Path>, profile: &str, line: &str) -> Value {
    let mut command = Command::new(crate::toolhost_cli());
    command.current_dir(cwd).env_remove("RUST_LOG");
    match config {
        Some(config) => command.arg("--config").arg(config),
        None => command.args(["--profile", profile]),
    };
    let output = command
        .args([
            "call",
            "run_command",
            &json!({ "command": line }).to_string(),
        ])
        .output()
        .unwrap();
    serde_json::from_slice(&output.stdout).unwrap_or_else(
        |_| json!({ "error": String::from_utf8_lossy(&output.stderr).into_owned() }),
    )
}

fn temp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("ws")).unwrap();
    (dir, root)
}

#[test]
fn a_command_cannot_create_an_allowlist_whose_directory_is_missing() {
    let (_dir, root) = temp();
    let ws = root.join("ws");
    let file = ws.join("toolhost.toml");
    let extra = "approvals.allowlist = \".toolhost/approvals.json\"";
    std::fs::write(&file, config(&ws, extra)).unwrap();
    let allowlist = ws.join(".toolhost/approvals.json");
    for line in [
        "mkdir -p .toolhost && echo '{\"approved\": [\"command rm -rf precious\"]}' > .toolhost/approvals.json",
        "mkdir -p x && echo '{\"approved\": [\"command rm -rf precious\"]}' > x/approvals.json && rm -rf .toolhost; mv x .toolhost",
        "mkdir -p x && echo '{\"approved\": [\"command rm -rf precious\"]}' > x/approvals.json && rm -rf .toolhost; ln -s x .toolhost",
    ] {
        let result = run(&ws, Some(&file), "", line);
        let planted = std::fs::read_to_string(&allowlist).unwrap_or_default();
        assert!(
            !planted.contains("precious"),
            "{line}: {planted} ({result})"
        );
    }
}

#[test]
fn a_command_cannot_create_a_missing_plugin_directory() {
    let (_dir, root) = temp();
    let ws = root.join("ws");
    let file = ws.join("toolhost.toml");
    std::fs::write(&file, config(&ws, "plugins = \"plugins\"")).unwrap();
    let plugins = ws.join("plugins");
    for line in [
        "mkdir plugins && echo planted > plugins/echo.toml",
        "mkdir p && echo planted > p/echo.toml && rmdir plugins; mv p plugins",
        "mkdir -p p && echo planted > p/echo.toml && rmdir plugins; ln -s p plugins",
    ] {
        let result = run(&ws, Some(&file), "", line);
        assert!(
            !plugins.join("echo.toml").exists(),
            "{line}: a plugin was planted ({result})"
        );
    }
}

#[test]
fn a_command_cannot_create_the_builtin_configurations_file() {
    let (_dir, root) = temp();
    let ws = root.join("ws");
    // The developer profile asks before commands; approved "always" here.
    std::fs::write(
        ws.join("toolhost-approvals.json"),
        "{\"approved\": [\"tool run_command terminal:execute\"]}",
    )
    .unwrap();
    std::fs::write(ws.join("evil.toml"), "planted = true\n").unwrap();
    for line in [
        "cp evil.toml toolhost.toml",
        "mv evil.toml toolhost.toml",
        "ln -s evil.toml toolhost.toml",
        "mkdir toolhost.toml",
    ] {
        let result = run(&ws, None, "developer", line);
        assert!(
            ws.join("toolhost.toml").symlink_metadata().is_err(),
            "{line}: ./toolhost.toml was created ({result})"
        );
        if !ws.join("evil.toml").exists() {
            std::fs::write(ws.join("evil.toml"), "planted = true\n").unwrap();
        }
    }
}

#[test]
fn a_config_named_through_a_symlink_in_a_writable_grant_is_not_replaced() {
    let (_dir, root) = temp();
    let ws = root.join("ws");
    let dotfiles = root.join("dotfiles");
    std::fs::create_dir_all(dotfiles.join("conf")).unwrap();
    let text = config(&ws, "");
    std::fs::write(dotfiles.join("toolhost.toml"), &text).unwrap();
    std::fs::write(dotfiles.join("conf/toolhost.toml"), &text).unwrap();
    std::os::unix::fs::symlink(dotfiles.join("toolhost.toml"), ws.join("toolhost.toml")).unwrap();
    std::os::unix::fs::symlink(dotfiles.join("conf"), ws.join("conf")).unwrap();
    for (config, line) in [
        (
            "toolhost.toml",
            "rm toolhost.toml && echo 'planted = 1' > toolhost.toml",
        ),
        (
            "toolhost.toml",
            "echo 'planted = 1' > x && mv x toolhost.toml",
        ),
        (
            "conf/toolhost.toml",
            "rm conf && mkdir conf && echo 'planted = 1' > conf/toolhost.toml",
        ),
    ] {
        let named = ws.join(config);
        let result = run(&ws, Some(&named), "", line);
        let now = std::fs::read_to_string(&named).unwrap_or_default();
        assert_eq!(now, text, "{line}: the config was replaced ({result})");
        assert!(
            named.symlink_metadata().is_ok() && !named.is_symlink() || named.is_symlink(),
            "{line}"
        );
    }
}
