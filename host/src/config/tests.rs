//! Validation messages: every problem of a file, each at its key.

use std::path::Path;

use super::*;

/// The problems of `text` as `key: message` lines.
fn problems(text: &str) -> Vec<String> {
    match Config::parse(text, ConfigSource::Embedded, Path::new("/w")) {
        Ok(_) => Vec::new(),
        Err(error) => error
            .problems
            .into_iter()
            .map(|(key, message)| format!("{key}: {message}"))
            .collect(),
    }
}

#[test]
fn the_embedded_configuration_is_valid() {
    assert_eq!(problems(EMBEDDED), Vec::<String>::new());
}

#[test]
fn a_syntax_or_type_error_names_its_key_and_line() {
    let found = problems("default_profile = \"p\"\n[profiles.p]\nalow = []\n");
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("profiles.p.alow: unknown field `alow`"),
        "{found:?}"
    );
    assert!(found[0].ends_with("(line 3)"), "{found:?}");
}

#[test]
fn every_problem_is_reported_at_once_with_its_key() {
    let found = problems(
        "default_profile = \"missing\"\nbatch_concurrency = 0\n\
         [profiles.p]\nallow = [\"file:read\", \"Terminal\"]\n\
         [tenants.t]\nprofile = \"nope\"\nconcurrency = 0\n",
    );
    let keys: Vec<&str> = found
        .iter()
        .map(|line| line.split(": ").next().unwrap())
        .collect();
    for key in [
        "default_profile",
        "batch_concurrency",
        "profiles.p.allow[1]",
        "tenants.t.profile",
        "tenants.t",
        "tenants.t.concurrency",
    ] {
        assert!(keys.contains(&key), "no problem at {key}: {found:#?}");
    }
    let tenant = found.iter().find(|l| l.starts_with("tenants.t: ")).unwrap();
    assert!(tenant.contains("needs token_sha256"), "{tenant}");
    let profile = found
        .iter()
        .find(|l| l.starts_with("tenants.t.profile"))
        .unwrap();
    assert!(
        profile.contains("unknown profile \"nope\"; known: p"),
        "{profile}"
    );
}

#[test]
fn a_tenant_token_is_one_of_two_forms_and_well_formed() {
    let tenant = |fields: &str| {
        problems(&format!(
            "default_profile = \"p\"\n[profiles.p]\n[tenants.t]\nprofile = \"p\"\n{fields}"
        ))
    };
    let hash = "ab".repeat(32);
    assert_eq!(
        tenant(&format!("token_sha256 = \"{hash}\"\n")),
        Vec::<String>::new()
    );
    assert_eq!(
        tenant("token_sha256 = \"abc\"\n"),
        ["tenants.t.token_sha256: must be 64 hex digits"]
    );
    assert_eq!(
        tenant(&format!("token_sha256 = \"{hash}\"\ntoken_env = \"X\"\n")),
        ["tenants.t.token_sha256: give token_sha256 or token_env, not both"]
    );
}

#[test]
fn an_unset_token_variable_is_left_to_the_server() {
    let config = Config::parse(
        "default_profile = \"p\"\n[profiles.p]\n[tenants.t]\nprofile = \"p\"\ntoken_env = \"TOOLHOST_CONFIG_TEST_UNSET\"\n\
         [approvals]\napprover_token_env = \"TOOLHOST_CONFIG_TEST_UNSET\"\n",
        ConfigSource::Embedded,
        Path::new("/ws"),
    )
    .expect("an unset variable does not make the config invalid");
    let keys: Vec<&str> = config
        .unset_variables
        .iter()
        .map(|(key, _)| key.as_str())
        .collect();
    assert_eq!(
        keys,
        ["tenants.t.token_env", "approvals.approver_token_env"]
    );
    assert!(
        config.unset_variables[0]
            .1
            .starts_with("environment variable \"TOOLHOST_CONFIG_TEST_UNSET\" is not set or empty")
    );
    assert_eq!(config.tenants["t"].token_sha256, None);
}

#[test]
fn a_profile_resolves_against_the_workspace_it_is_asked_for() {
    let config = Config::parse(
        "default_profile = \"p\"\n[profiles.p]\nfile.read = [\"docs\"]\n",
        ConfigSource::Embedded,
        Path::new("/base"),
    )
    .unwrap();
    let own = config.profile("p", None).unwrap();
    assert_eq!(own.workspace(), Path::new("/base"));
    let tenant = config.profile("p", Some(Path::new("/tenant"))).unwrap();
    assert_eq!(tenant.workspace(), Path::new("/tenant"));
    assert!(
        tenant
            .paths
            .grants()
            .any(|(dir, _)| dir == Path::new("/tenant/docs"))
    );
    let unknown = config.profile("q", None).unwrap_err();
    assert_eq!(unknown, "unknown profile \"q\"; known: p");
}

#[test]
fn a_container_backend_needs_its_table_and_refuses_what_it_cannot_hold() {
    let missing = problems(
        "default_profile = \"p\"\n[profiles.p]\nallow = [\"terminal:*\"]\n\
         terminal.backend = \"container\"\n",
    );
    assert_eq!(
        missing,
        [
            "profiles.p.terminal.container: terminal.backend = \"container\" needs a \
          terminal.container table (image, and optionally socket and user)"
        ]
    );
    let found = problems(
        "default_profile = \"p\"\n[profiles.p]\nallow = [\"terminal:*\"]\n\
         terminal.backend = \"container\"\n\
         terminal.wrapper = [\"apptainer\"]\n\
         terminal.container = { image = \" \", user = \"root\" }\n",
    );
    let keys: Vec<&str> = found
        .iter()
        .map(|line| line.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "profiles.p.terminal.container.image",
            "profiles.p.terminal.container.user",
            "profiles.p.terminal.wrapper",
        ],
        "{found:#?}"
    );
    let stray = problems(
        "default_profile = \"p\"\n[profiles.p]\nallow = [\"terminal:*\"]\n\
         terminal.container = { image = \"debian\" }\n",
    );
    assert_eq!(
        stray,
        ["profiles.p.terminal.container: is used only with terminal.backend = \"container\""]
    );
    let fine = problems(
        "default_profile = \"p\"\n[profiles.p]\nallow = [\"terminal:*\"]\n\
         terminal.backend = \"container\"\n\
         terminal.container = { image = \"debian:12\", user = \"1000:1000\" }\n",
    );
    assert_eq!(fine, Vec::<String>::new());
}
