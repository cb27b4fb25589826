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
            .file
            .check(&cwd.join("README.md"), toolhost::policy::Access::Read)
            .is_ok()
    );
    assert!(
        profile
            .file
            .check(&cwd.join("x"), toolhost::policy::Access::Write)
            .is_err()
    );
    assert!(
        profile
            .file
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

/// The whole error of `text`, the temporary workspace written `<dir>`.
fn error_text(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    match Config::parse(text, ConfigSource::File("toolhost.toml".into()), dir.path()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e
            .to_string()
            .replace(&dir.path().display().to_string(), "<dir>"),
    }
}

#[test]
fn a_problem_in_every_section_is_reported_in_order_with_its_key_and_words() {
    let text = error_text(
        r#"
        default_profile = "p"
        [global]
        file.deny = ["**/.env"]
        terminal.deny_commands = ["shutdown *"]
        [profiles.p]
        allow = ["file:read", "terminal:execute"]
        deny = ["file:read"]
        file.read = ["src"]
        file.deny = ["src", "[oops"]
        network.allow_hosts = ["exa mple.com"]
        terminal.backend = "ssh"
        terminal.wrapper = [""]
        terminal.allow_commands = ["ls *"]
        terminal.deny_commands = ["ls *"]
        env.allow = ["BAD-NAME"]
        limits.concurrency = 0
        "#,
    );
    let expected = [
        "toolhost.toml: 10 problems",
        r#"  - profiles.p.deny: "file:read" is both allowed and denied (overlapping rules); keep one"#,
        r#"  - profiles.p.file.read[0]: "src" is both granted and denied (overlapping rules)"#,
        r#"  - profiles.p.file: file.deny pattern "<dir>/[oops" is not a valid glob: unclosed character class; missing ']'"#,
        r#"  - profiles.p.network.allow_hosts: network.allow_hosts entry "exa mple.com" contains ' ', which is not allowed in a host name"#,
        r#"  - profiles.p.terminal.deny_commands: "ls *" is both allowed and denied (overlapping rules)"#,
        "  - profiles.p.terminal.wrapper: the first entry is the wrapper's program and may not be empty",
        r#"  - profiles.p.terminal.ssh: terminal.backend = "ssh" needs a terminal.ssh table (host, user, key_file, host_key)"#,
        r#"  - profiles.p.terminal.wrapper: a wrapper runs on this machine; it does not go with terminal.backend = "ssh""#,
        r#"  - profiles.p.env.allow[0]: "BAD-NAME" is not a variable name or a pattern like "GITHUB_*""#,
        "  - profiles.p.limits.concurrency: must be at least 1",
    ];
    assert_eq!(text, expected.join("\n"));
}

#[test]
fn a_misspelt_key_is_named_with_every_key_its_table_takes() {
    let profile = error_text("[profiles.p]\nallow = []\nfiles = {}\n");
    assert_eq!(
        profile,
        "toolhost.toml: 1 problem\n  - profiles.p.files: unknown field `files`, expected one of \
         `allow`, `deny`, `approval_required`, `file`, `network`, `terminal`, `env`, `limits`, \
         `tools` (line 3)"
    );
    let global = error_text("[global]\nenv = {}\n");
    assert_eq!(
        global,
        "toolhost.toml: 1 problem\n  - global.env: unknown field `env`, expected one of `deny`, \
         `approval_required`, `file`, `terminal`, `tools` (line 2)"
    );
}

#[test]
fn commands_get_the_proxy_by_default_only_where_the_profile_allows_a_host() {
    use toolhost::capability::terminal::TerminalNetwork;
    let dir = tempfile::tempdir().unwrap();
    let text = r#"
        default_profile = "none"
        [profiles.hosts]
        network.allow_hosts = ["example.com"]
        [profiles.none]
        [profiles.chosen]
        network.allow_hosts = ["example.com"]
        terminal.network = "none"
    "#;
    let config =
        Config::parse(text, ConfigSource::File("toolhost.toml".into()), dir.path()).unwrap();
    for (profile, network) in [
        ("hosts", TerminalNetwork::Proxy),
        ("none", TerminalNetwork::None),
        ("chosen", TerminalNetwork::None),
    ] {
        let profile = config.profile(profile, None).unwrap();
        assert_eq!(profile.terminal.network, network, "{}", profile.name);
    }
}
