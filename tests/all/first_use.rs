//! What a newcomer meets in the first hour, through the real binary: the
//! ARGS file named when missing, the refusal of an open address, variables
//! only the server needs, `toolhost check` saying what a plugin declares in
//! its own terms and leaving it compiled, one workspace for file tools and
//! commands, and the effective configuration on one screen.

use std::path::Path;
use std::process::{Command, Output};

/// Runs toolhost in `dir`, with the compiled-code cache the documentation
/// tests fill.
fn toolhost_in(dir: &Path, args: &[&str]) -> Output {
    toolhost_cached_in(dir, &crate::docs::cache_dir(), args)
}

fn toolhost_cached_in(dir: &Path, cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("TOOLHOST_CONFIG")
        .env("TOOLHOST_CACHE_DIR", cache)
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
    // Each directory with a cache of its own, empty at first.
    let status = |dir: &Path| {
        let args = ["--plugins", "plugins", "--no-bundled", "status"];
        text(&toolhost_cached_in(dir, &dir.join("cache"), &args).stdout)
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
    let check = ["check", "plugins/shapes.wasm"];
    let output = toolhost_cached_in(other.path(), &other.path().join("cache"), &check);
    assert!(output.status.success(), "{output:?}");
    let after = status(other.path());
    assert!(after.contains("cached"), "{after}");
}

#[test]
fn file_tools_and_commands_share_one_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(root.join("ws")).unwrap();
    std::fs::write(root.join("ws/notes.txt"), "the notes").unwrap();
    let both = |config: &str, path: &str| {
        std::fs::write(root.join("toolhost.toml"), config).unwrap();
        let read = toolhost_in(
            &root,
            &["call", "read_file", &format!(r#"{{"path":"{path}"}}"#)],
        );
        assert!(read.status.success(), "read_file {path}: {read:?}");
        assert!(text(&read.stdout).contains("the notes"), "{read:?}");
        let cat = toolhost_in(
            &root,
            &[
                "call",
                "run_command",
                &format!(r#"{{"command":"cat {path}"}}"#),
            ],
        );
        assert!(cat.status.success(), "cat {path}: {cat:?}");
        let result: serde_json::Value = serde_json::from_slice(&cat.stdout).unwrap();
        assert_eq!(result["stdout"], "the notes", "cat {path}: {result}");
    };
    let rights = "allow = [\"file:read\", \"terminal:execute\"]\n";
    // The workspace is the config's directory; only `ws` in it is granted:
    // `ws/notes.txt` is the same file to both.
    both(
        &format!("[profiles.default]\n{rights}file.read = [\"ws\"]\n"),
        "ws/notes.txt",
    );
    // `workspace` moves it, for both at once.
    both(
        &format!("workspace = \"ws\"\n[profiles.default]\n{rights}file.read = [\".\"]\n"),
        "notes.txt",
    );
}

/// The documented layout: the built-in configuration written to
/// `toolhost.toml` in the project, the `developer` profile. `write_file`
/// makes a new file at the top of the project, beside the configuration
/// (its parent, which holds toolhost's own file, is there already and is
/// not made again), and still may not write the configuration.
#[test]
fn write_file_makes_a_new_file_beside_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let shown = toolhost_in(&root, &["config", "show"]);
    assert!(shown.status.success(), "{shown:?}");
    std::fs::write(root.join("toolhost.toml"), &shown.stdout).unwrap();
    let write = |path: &str| {
        toolhost_in(
            &root,
            &[
                "--profile",
                "developer",
                "call",
                "write_file",
                &format!(r#"{{"path":"{path}","content":"hi\n"}}"#),
            ],
        )
    };
    for path in ["notes.md", "docs/new/notes.md"] {
        let wrote = write(path);
        assert!(wrote.status.success(), "{path}: {wrote:?}");
        assert_eq!(std::fs::read_to_string(root.join(path)).unwrap(), "hi\n");
    }
    let refused = write("toolhost.toml");
    assert!(!refused.status.success(), "{refused:?}");
    assert_eq!(
        std::fs::read(root.join("toolhost.toml")).unwrap(),
        shown.stdout
    );
}

#[test]
fn the_effective_config_shows_each_profile_as_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let config = "[global]\ndeny = [\"env:*\"]\n\
                  [profiles.default]\nallow = [\"file:read\"]\nfile.read = [\"src\"]\n\
                  [profiles.dev]\nallow = [\"*\"]\nfile.write = [\".\"]\n\
                  network.allow_hosts = [\"api.example.com\"]\n\
                  terminal.allow_commands = [\"git *\"]\nterminal.dangerous = \"approve\"\n\
                  [tenants.acme]\nprofile = \"dev\"\nworkspace = \"ws/acme\"\n\
                  token_sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n";
    std::fs::write(root.join("toolhost.toml"), config).unwrap();
    let show = |args: &[&str]| {
        let output = toolhost_in(&root, args);
        assert!(output.status.success(), "{output:?}");
        text(&output.stdout)
    };
    let r = root.display();
    let all = show(&["config", "show", "--effective"]);
    for line in [
        format!("config      {r}/toolhost.toml"),
        format!("workspace   {r}"),
        format!("tenant      acme (profile \"dev\", workspace {r}/ws/acme)"),
        format!("[profiles.default] workspace {r}"),
        format!("  file.read: {r}/src"),
        "  deny: env:*".to_string(),
        format!("[profiles.dev] workspace {r}"),
        format!("  file.write: {r}"),
        "  network.allow_hosts: api.example.com".to_string(),
        "  terminal.allow_commands: git *".to_string(),
        "  terminal: dangerous approve, sandbox kernel, network proxy, backend local".to_string(),
    ] {
        assert!(all.contains(&line), "{line:?} not in\n{all}");
    }
    let one = show(&["config", "show", "--effective", "--profile", "dev"]);
    assert!(!one.contains("[profiles.default]"), "{one}");
    let tenant = show(&["config", "show", "--effective", "--tenant", "acme"]);
    assert!(
        tenant.contains(&format!(
            "[profiles.dev], tenant \"acme\" workspace {r}/ws/acme"
        )) && tenant.contains(&format!("  file.write: {r}/ws/acme")),
        "{tenant}"
    );
    let unknown = toolhost_in(
        &root,
        &["config", "show", "--effective", "--tenant", "nope"],
    );
    assert!(
        text(&unknown.stderr).contains("unknown tenant \"nope\"; known: acme"),
        "{unknown:?}"
    );
    // The built-in configuration says which one is in use...
    let builtin = toolhost_in(&root, &["config", "show"]);
    assert!(
        text(&builtin.stderr).contains("`toolhost config show --effective` shows it"),
        "{builtin:?}"
    );
    // ...and `check` points to the effective view.
    assert!(
        show(&["check"]).contains("toolhost config show --effective --profile default"),
        "check does not point to the effective configuration"
    );
}
