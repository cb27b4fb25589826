//! What a newcomer meets in the first hour, through the real binary: the
//! ARGS file named when missing, the refusal of an open address, variables
//! only the server needs, and `toolhost check` saying what a plugin declares
//! in its own terms and leaving it compiled.

use std::path::Path;
use std::process::{Command, Output};

fn toolhost_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("TOOLHOST_CONFIG")
        .env("TOOLHOST_CACHE_DIR", dir.join("cache"))
        .output()
        .expect("the toolhost binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_missing_args_file_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let output = toolhost_in(dir.path(), &["call", "echo", "missing.json"]);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("ARGS \"missing.json\" is neither JSON")
            && stderr.contains("No such file or directory"),
        "{stderr}"
    );
    assert!(!stderr.contains("invalid_json"), "{stderr}");

    std::fs::write(dir.path().join("args.json"), r#"{"text":"from a file"}"#).unwrap();
    let output = toolhost_in(dir.path(), &["call", "echo", "args.json"]);
    assert!(output.status.success(), "{output:?}");
    assert!(text(&output.stdout).contains("from a file"));

    let output = toolhost_in(dir.path(), &["call", "--help"]);
    assert!(
        text(&output.stdout).contains("the name of a file"),
        "{output:?}"
    );
}

#[test]
fn an_open_address_is_refused_before_loading_and_says_how_to_add_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let output = toolhost_in(dir.path(), &["serve", "--http", "0.0.0.0:0"]);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with("error: refusing to listen on 0.0.0.0:0"),
        "nothing loads first:\n{stderr}"
    );
    assert!(
        stderr.contains("create a toolhost.toml with [tenants.NAME]")
            && stderr.contains("toolhost config show > toolhost.toml"),
        "{stderr}"
    );
    assert!(!stderr.contains("built-in configuration"), "{stderr}");
}

#[test]
fn a_token_variable_is_needed_only_by_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = "[profiles.default]\nallow = [\"file:read\"]\nfile.read = [\".\"]\n\
                  [tenants.acme]\nprofile = \"default\"\nworkspace = \"ws\"\n\
                  token_env = \"TOOLHOST_TEST_UNSET_TOKEN\"\n";
    std::fs::write(dir.path().join("toolhost.toml"), config).unwrap();
    let warning = "tenants.acme.token_env: environment variable \"TOOLHOST_TEST_UNSET_TOKEN\" \
                   is not set or empty";

    let output = toolhost_in(dir.path(), &["list"]);
    assert!(output.status.success(), "{output:?}");
    assert!(text(&output.stdout).contains("echo"));
    assert!(text(&output.stderr).contains(warning), "{output:?}");

    let output = toolhost_in(dir.path(), &["config", "check"]);
    assert!(output.status.success(), "{output:?}");
    assert!(
        text(&output.stdout).contains(&format!("! {warning}")),
        "{output:?}"
    );

    let output = toolhost_in(dir.path(), &["serve", "--http", "127.0.0.1:0"]);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("the HTTP server cannot start") && stderr.contains(warning),
        "{stderr}"
    );
}

#[test]
fn check_names_the_declarative_key_and_only_what_is_declared() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("lookup.yaml");
    std::fs::write(
        &yaml,
        "tools:\n  - name: lookup\n    type: http_wrapper\n    description: Look a word up.\n    \
         endpoint: https://dict.example/api\n    parameters:\n      - { name: word, type: string, \
         required: true }\n",
    )
    .unwrap();
    let output = toolhost_in(dir.path(), &["check", "lookup.yaml"]);
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains(
            "argument \"word\" has no description; give parameter \"word\" a description"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("doc comment"), "{stdout}");

    // The files guest declares file:read and file:write: each is said
    // (a plugin declaring only file:read gets only the first clause; see
    // the unit test of `CapabilityInfo::describe`).
    let output = toolhost_in(dir.path(), &["check", toolhost_tests::FILES]);
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("file (file:read, file:write): read in"),
        "{stdout}"
    );
    assert!(stdout.contains("; write in"), "{stdout}");
}

#[test]
fn check_leaves_the_plugin_compiled_for_its_first_call() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    std::fs::copy(toolhost_tests::SHAPES, plugins.join("shapes.wasm")).unwrap();
    let status = |dir: &Path| {
        let output = toolhost_in(dir, &["--plugins", "plugins", "--no-bundled", "status"]);
        text(&output.stdout)
    };
    // Without a check, the first load compiles...
    let before = status(dir.path());
    assert!(before.contains("fresh"), "{before}");
    // ...after one, it finds the plugin in the cache.
    let other = tempfile::tempdir().unwrap();
    std::fs::create_dir(other.path().join("plugins")).unwrap();
    std::fs::copy(
        toolhost_tests::SHAPES,
        other.path().join("plugins/shapes.wasm"),
    )
    .unwrap();
    let output = toolhost_in(other.path(), &["check", "plugins/shapes.wasm"]);
    assert!(output.status.success(), "{output:?}");
    let after = status(other.path());
    assert!(after.contains("cached"), "{after}");
}
