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
            .file
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

#[test]
fn sandbox_ids_are_a_range_above_root_with_room_for_every_tenant() {
    let tenant = |name: &str| {
        format!(
            "[tenants.{name}]\nprofile = \"p\"\ntoken_sha256 = \"{}\"\n",
            "a".repeat(64)
        )
    };
    let config = |ids: &str, tenants: &[&str]| {
        format!(
            "default_profile = \"p\"\nsandbox_ids = {ids:?}\n[profiles.p]\n{}",
            tenants.iter().map(|t| tenant(t)).collect::<String>()
        )
    };
    for (ids, wanted) in [
        ("0-100", "commands never run as root"),
        ("200-100", "must run upwards"),
        ("1000", "is not a range of ids"),
        ("a-b", "is not a range of ids"),
        ("1000-1001", "holds 2 ids; 3 are needed"),
    ] {
        let found = problems(&config(ids, &["a", "b"]));
        assert!(
            found
                .iter()
                .any(|p| p.starts_with("sandbox_ids: ") && p.contains(wanted)),
            "{ids}: {found:?}"
        );
    }
    // The callers that are not tenants get the first id, each tenant (by
    // name) one of the next.
    let parsed = Config::parse(
        &config("5000-5002", &["b", "a"]),
        ConfigSource::Embedded,
        Path::new("/w"),
    )
    .unwrap();
    assert_eq!(parsed.sandbox_ids, (5000, 5002));
    assert_eq!(parsed.profile("p", None).unwrap().terminal.sandbox_id, 5000);
    let ids: Vec<u32> = ["a", "b"]
        .iter()
        .map(|t| {
            parsed
                .tenant_profile(&parsed.tenants[*t])
                .unwrap()
                .terminal
                .sandbox_id
        })
        .collect();
    assert_eq!(ids, [5001, 5002]);
}

#[test]
fn landlock_is_on_unless_a_profile_turns_it_off() {
    let text = |value: &str| format!("default_profile = \"p\"\n[profiles.p]\n{value}\n");
    let parse = |value: &str| {
        Config::parse(&text(value), ConfigSource::Embedded, Path::new("/w"))
            .unwrap()
            .profile("p", None)
            .unwrap()
            .terminal
            .landlock
    };
    assert!(parse(""));
    assert!(parse("terminal.landlock = \"auto\""));
    assert!(!parse("terminal.landlock = \"off\""));
    let found = problems(&text("terminal.landlock = \"of\""));
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("profiles.p.terminal.landlock")),
        "{found:?}"
    );
}

#[test]
fn a_container_never_runs_commands_as_root() {
    for user in ["0", "0:0", "1000:0", "0:1000"] {
        let found = problems(&format!(
            "default_profile = \"p\"\n[profiles.p]\nterminal.backend = \"container\"\n\
             terminal.container = {{ image = \"i\", user = {user:?} }}\n"
        ));
        assert!(
            found
                .iter()
                .any(|p| p.starts_with("profiles.p.terminal.container.user") && p.contains("root")),
            "{user}: {found:?}"
        );
    }
}

#[test]
fn state_settings_are_checked_and_the_key_file_is_toolhosts_own() {
    let text = "default_profile = \"p\"\n[profiles.p]\n[state]\nkey_file = \"k\"\n\
                handle_max_age = \"2h\"\nmax_handles_per_tenant = 3\nreplica = 9\n";
    let config = Config::parse(text, ConfigSource::Embedded, Path::new("/w")).unwrap();
    assert_eq!(config.state.max_age, std::time::Duration::from_secs(7200));
    assert_eq!((config.state.max_per_tenant, config.state.replica), (3, 9));
    assert!(matches!(&config.state.key, KeySource::File(k) if k == Path::new("/w/k")));
    assert!(
        config
            .own_paths()
            .iter()
            .any(|own| own.covers(Path::new("/w/k")))
    );
    let found = problems(
        "default_profile = \"p\"\n[profiles.p]\n[state]\nhandle_max_age = \"0\"\n\
         max_handles_per_tenant = 0\n",
    );
    assert_eq!(
        found,
        [
            "state.handle_max_age: must be at least 1s",
            "state.max_handles_per_tenant: must be at least 1"
        ]
    );
    let found =
        problems("default_profile = \"p\"\n[profiles.p]\n[state]\nhandle_max_age = \"1000000h\"\n");
    assert_eq!(
        found,
        [
            "state.handle_max_age: must be at most 87600h (ten years): a handle's expiry is kept in 32 bits"
        ]
    );
    assert!(
        problems("default_profile = \"p\"\n[profiles.p]\n[state]\nhandle_max_age = \"87600h\"\n")
            .is_empty()
    );
}

#[test]
fn a_tenants_name_is_neither_empty_nor_holds_control_characters() {
    let config = |name: &str| {
        format!(
            "default_profile = \"p\"\n[profiles.p]\n[tenants.{name}]\nprofile = \"p\"\n\
             token_sha256 = \"{}\"\n",
            "a".repeat(64)
        )
    };
    for name in ["\"\"", "\"a\\u0000b\"", "\"a\\nb\""] {
        let found = problems(&config(name));
        assert!(
            found
                .iter()
                .any(|p| p.contains("a tenant's name must not be empty")),
            "{name}: {found:?}"
        );
    }
    assert_eq!(problems(&config("\"team a.1\"")), Vec::<String>::new());
}
