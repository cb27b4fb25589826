//! What the kernel offers: without user namespaces commands are refused
//! (unless the profile opts out), and `doctor` reports the sandbox.

use super::workspace;
use crate::Workspace;

/// A configuration whose profile runs commands in the workspace, plus `extra`.
fn cli_config(ws: &Workspace, extra: &str) -> std::path::PathBuf {
    ws.write(
        "toolhost.toml",
        format!(
            "default_profile = \"p\"\n[profiles.p]\nallow = [\"terminal:execute\"]\n\
             file.read = [\".\"]\n{extra}\n"
        ),
    )
}

/// Runs the toolhost binary with `args` in a user namespace where no further
/// user namespace may be created, as in a container that forbids them.
fn toolhost_without_user_namespaces(ws: &Workspace, args: &[&str]) -> (bool, String) {
    let output = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "sh", "-c"])
        .arg(r#"echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(args)
        .current_dir(&ws.path)
        .env_remove("RUST_LOG")
        .output()
        .expect("unshare runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn without_user_namespaces_commands_are_refused_unless_the_profile_opts_out() {
    let ws = workspace();
    // `call run_command echo ran` and `doctor` under the profile plus `extra`.
    let under = |extra: &str| {
        let config = cli_config(&ws, extra);
        let config = config.to_str().unwrap();
        let echo = r#"{"command":"echo ran"}"#;
        let call = ["--config", config, "call", "run_command", echo];
        let called = toolhost_without_user_namespaces(&ws, &call);
        let doctor = toolhost_without_user_namespaces(&ws, &["--config", config, "doctor"]);
        (called, doctor)
    };
    let ((ok, text), (doctor_ok, doctor)) = under("");
    assert!(!ok, "{text}");
    assert!(!text.contains("\"ran"), "{text}");
    assert!(text.contains("unprivileged user namespaces"), "{text}");
    assert!(text.contains("terminal.sandbox = \\\"none\\\""), "{text}");
    assert!(!doctor_ok, "{doctor}");
    assert!(doctor.contains("✗ terminal sandbox"), "{doctor}");

    // The explicit opt-out runs the command unconfined, and says so.
    let ((ok, text), (_, doctor)) = under("terminal.sandbox = \"none\"");
    assert!(ok, "{text}");
    assert!(text.contains("ran\\n"), "{text}");
    assert!(
        doctor.contains("sets terminal.sandbox = \"none\""),
        "{doctor}"
    );
}

#[test]
fn doctor_reports_the_sandbox_this_kernel_builds() {
    let ws = workspace();
    let config = cli_config(&ws, "");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(["--config", config.to_str().unwrap(), "doctor"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("✓ terminal sandbox"), "{text}");
    assert!(text.contains("✓ Landlock ABI"), "{text}");
}

#[test]
fn doctor_says_who_commands_run_as_and_what_other_backends_leave_out() {
    let ws = workspace();
    let config = ws.write(
        "toolhost.toml",
        "default_profile = \"p\"\nsandbox_ids = \"2000000000-2000000009\"\n\
         [profiles.p]\nallow = [\"terminal:execute\"]\nterminal.landlock = \"off\"\n\
         [profiles.remote]\nterminal.backend = \"ssh\"\nterminal.ssh = { host = \"h\", \
         user = \"u\", key_file = \"/k\", host_key = \"ssh-ed25519 \
         AAAAC3NzaC1lZDI1NTE5AAAAIGb4pD2VQ1kD0yBTXWbVYvJ3Bqfb1BVj6LPVRSO1x8rE\" }\n\
         [profiles.wrapped]\nterminal.sandbox = \"none\"\nterminal.wrapper = [\"env\"]\n",
    );
    let output = std::process::Command::new(crate::toolhost_cli())
        .args(["--config", config.to_str().unwrap(), "doctor"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("no terminal of the host's"), "{text}");
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        assert!(
            text.contains("host ids 2000000000-2000000009 (sandbox_ids)"),
            "{text}"
        );
    } else {
        assert!(text.contains("toolhost's own uid"), "{text}");
    }
    for said in [
        "profile \"p\" sets terminal.landlock = \"off\"",
        "profile \"remote\": ssh backend",
        "the refusal of set-id bits, the commands' ids",
        "profile \"wrapped\": terminal.wrapper runs on this machine unconfined",
    ] {
        assert!(text.contains(said), "no {said:?} in {text}");
    }
}
