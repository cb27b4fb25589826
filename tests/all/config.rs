//! Configuration: the embedded default works, and broken configurations are
//! reported with the key path and the reason of every problem.

use std::process::Command;

use toolhost::config::{Config, ConfigSource};

fn problems(text: &str) -> Vec<(String, String)> {
    let dir = tempfile::tempdir().unwrap();
    match Config::parse(text, ConfigSource::File("toolhost.toml".into()), dir.path()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.problems,
    }
}

fn has(problems: &[(String, String)], key: &str, text: &str) -> bool {
    problems.iter().any(|(k, m)| k == key && m.contains(text))
}

#[test]
fn the_embedded_configuration_is_valid_and_read_only() {
    let config = Config::embedded();
    assert_eq!(config.default_profile, "default");
    let profile = config.profile("default", None).unwrap();
    let cwd = std::env::current_dir().unwrap();
    assert!(
        profile
            .paths
            .check(&cwd.join("README.md"), toolhost::policy::Access::Read)
            .is_ok()
    );
    assert!(
        profile
            .paths
            .check(&cwd.join("x"), toolhost::policy::Access::Write)
            .is_err()
    );
    assert!(
        profile
            .paths
            .check(&cwd.join(".env"), toolhost::policy::Access::Read)
            .is_err()
    );
    assert!(profile.permissions.check_all(&["network:fetch"]).is_err());
    assert!(
        profile
            .permissions
            .check_all(&["terminal:execute"])
            .is_err()
    );
    assert!(profile.permissions.check_all(&["file:read"]).is_ok());
}

#[test]
fn an_unknown_key_is_named_with_its_path_and_line() {
    let found = problems("[profiles.default]\nallow = [\"file:read\"]\nalow = [\"x\"]\n");
    assert_eq!(found.len(), 1, "{found:?}");
    let (key, message) = &found[0];
    assert_eq!(key, "profiles.default.alow");
    assert!(message.contains("unknown field `alow`"), "{message}");
    assert!(message.contains("line 3"), "{message}");
}

#[test]
fn every_semantic_problem_is_reported_at_once() {
    let found = problems(
        r#"
        default_profile = "nope"
        [profiles.p]
        allow = ["network:fetch", "Bad Permission"]
        file.deny = ["[oops"]
        limits = { memory = "64 parsecs" }
        "#,
    );
    // A bad size stops parsing at that key.
    assert!(
        has(&found, "profiles.p.limits.memory", "unknown size unit"),
        "{found:?}"
    );

    let found = problems(
        r#"
        default_profile = "nope"
        [profiles.p]
        allow = ["network:fetch"]
        deny = ["network:fetch"]
        file.read = ["."]
        file.deny = ["[oops"]
        network.allow_hosts = ["exa mple.com"]
        terminal.deny_commands = ["rm -rf /*"]
        terminal.allow_commands = ["rm -rf /*"]
        limits = { memory = "8GiB", concurrency = 0 }
        [toolsets.a]
        includes = ["b"]
        [toolsets.b]
        includes = ["a"]
        [tenants.acme]
        profile = "missing"
        "#,
    );
    for (key, text) in [
        ("default_profile", "unknown profile \"nope\""),
        ("profiles.p.deny", "overlapping rules"),
        ("profiles.p.file", "not a valid glob"),
        ("profiles.p.network.allow_hosts", "exa mple.com"),
        ("profiles.p.terminal.deny_commands", "overlapping rules"),
        ("profiles.p.limits.memory", "more than the host's maximum"),
        ("profiles.p.limits.concurrency", "at least 1"),
        ("toolsets.a", "includes form a cycle: a → b → a"),
        ("tenants.acme.profile", "unknown profile \"missing\""),
        ("tenants.acme", "needs token_sha256"),
    ] {
        assert!(
            has(&found, key, text),
            "missing {key}: {text} in {found:#?}"
        );
    }
}

#[test]
fn an_invalid_permission_pattern_is_named_by_its_index() {
    let found = problems("[profiles.default]\nallow = [\"file:read\", \"Bad Permission\"]\n");
    assert!(
        has(&found, "profiles.default.allow[1]", "Bad Permission"),
        "{found:?}"
    );
}

#[test]
fn config_check_prints_every_problem_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolhost.toml");
    std::fs::write(
        &path,
        "default_profile = \"x\"\n[profiles.p]\nfile.deny = [\"[\"]\n[tenants.t]\nprofile = \"p\"\ntoken_sha256 = \"abc\"\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(["config", "check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("3 problems"), "{text}");
    assert!(
        text.contains("default_profile: unknown profile \"x\""),
        "{text}"
    );
    assert!(text.contains("profiles.p.file: "), "{text}");
    assert!(
        text.contains("tenants.t.token_sha256: must be 64 hex digits"),
        "{text}"
    );

    std::fs::write(&path, "[profiles.default]\nallow = [\"file:read\"]\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(["config", "check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("✓ "));
}

#[test]
fn a_broken_config_stops_the_cli_with_the_problems() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolhost.toml");
    std::fs::write(&path, "[profiles.default]\nallow = 5\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(["list", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("profiles.default.allow"), "{stderr}");
}
