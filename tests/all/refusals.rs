//! Every approval refusal names the exact change that lets the call run
//! without asking, and only changes that apply: the literal allowlist entry
//! and its file, the configuration key and its file. The table walks each
//! kind through the real binary, checks that the key is a documented one and
//! the file the one in use, then makes the change and sees the call run.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn toolhost_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("TOOLHOST_CONFIG")
        .env("TOOLHOST_CACHE_DIR", crate::docs::cache_dir())
        .output()
        .expect("the toolhost binary runs")
}

/// The error message of a refused call (stdout is `{"error": ...}`).
fn refusal(output: &Output) -> String {
    assert!(!output.status.success(), "{output:?}");
    let value: Value = serde_json::from_slice(&output.stdout).expect("the error is JSON");
    value["error"].as_str().expect("an error").to_string()
}

/// One kind of refusal.
struct Kind {
    what: &'static str,
    config: Option<&'static str>,
    args: &'static [&'static str],
    /// What the hint must say (`{dir}`: the directory it runs in).
    says: &'static [&'static str],
    /// What it must not: hints that do not apply.
    not: &'static [&'static str],
    /// The documented key the hint names.
    key: &'static str,
    /// The configuration as changed by the hint (the allowlist is tried
    /// first, then this).
    changed: Option<&'static str>,
}

const READ: &[&str] = &["call", "read_file", r#"{"path":"notes.txt"}"#];
const RM: &[&str] = &["call", "run_command", r#"{"command":"rm -rf build"}"#];

const KINDS: &[Kind] = &[
    Kind {
        what: "a permission the profile asks approval for",
        config: Some(
            "[profiles.default]\nallow = [\"file:read\"]\nfile.read = [\".\"]\n\
             approval_required = [\"file:*\"]\n",
        ),
        args: READ,
        says: &[
            "no one can be asked here",
            "create {dir}/toolhost-approvals.json holding {\"approved\": [\"tool read_file file:read\"]}",
            "or remove \"file:*\" from approval_required under [profiles.default] in {dir}/toolhost.toml",
        ],
        not: &["terminal.dangerous", "elicitation"],
        key: "approval_required",
        changed: Some("[profiles.default]\nallow = [\"file:read\"]\nfile.read = [\".\"]\n"),
    },
    Kind {
        what: "a permission a tool's rules ask approval for",
        config: Some(
            "[profiles.default]\nallow = [\"file:read\"]\nfile.read = [\".\"]\n\
             [profiles.default.tools.read_file]\napproval_required = [\"file:read\"]\n",
        ),
        args: READ,
        says: &[
            "remove \"file:read\" from approval_required under [profiles.default.tools.read_file] in {dir}/toolhost.toml",
        ],
        not: &["terminal.dangerous", "under [profiles.default] "],
        key: "approval_required",
        changed: Some(
            "[profiles.default]\nallow = [\"file:read\"]\nfile.read = [\".\"]\n\
             [profiles.default.tools.read_file]\n",
        ),
    },
    Kind {
        what: "a permission the global layer asks approval for",
        config: Some(
            "[global]\napproval_required = [\"file:read\"]\n\
             [profiles.default]\nallow = [\"file:read\"]\nfile.read = [\".\"]\n",
        ),
        args: READ,
        says: &[
            "remove \"file:read\" from approval_required under [global] in {dir}/toolhost.toml",
        ],
        not: &["terminal.dangerous", "[profiles.default]"],
        key: "approval_required",
        changed: Some("[profiles.default]\nallow = [\"file:read\"]\nfile.read = [\".\"]\n"),
    },
    Kind {
        what: "a dangerous command under terminal.dangerous = \"approve\"",
        config: Some(
            "[profiles.default]\nallow = [\"file:*\", \"terminal:execute\"]\n\
             file.write = [\".\"]\nterminal.dangerous = \"approve\"\n",
        ),
        args: RM,
        says: &[
            "create {dir}/toolhost-approvals.json holding {\"approved\": [\"command rm -rf build\"]}",
            "or set terminal.dangerous = \"allow\" under [profiles.default] in {dir}/toolhost.toml",
        ],
        not: &["approval_required"],
        key: "terminal.dangerous",
        changed: Some(
            "[profiles.default]\nallow = [\"file:*\", \"terminal:execute\"]\n\
             file.write = [\".\"]\nterminal.dangerous = \"allow\"\n",
        ),
    },
    Kind {
        what: "the built-in configuration, which cannot be edited",
        config: None,
        args: &[
            "--profile",
            "developer",
            "call",
            "run_command",
            r#"{"command":"true"}"#,
        ],
        says: &[
            "create {dir}/toolhost-approvals.json holding {\"approved\": [\"tool run_command terminal:execute\"]}",
            "remove \"terminal:execute\" from approval_required under [profiles.developer] in a \
             toolhost.toml (the built-in configuration cannot be edited: start from `toolhost \
             config show > toolhost.toml`)",
        ],
        not: &["terminal.dangerous"],
        key: "approval_required",
        changed: None,
    },
];

/// Whether docs/config.md documents `key` in one of its key tables.
fn documented(key: &str) -> bool {
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/config.md")).unwrap();
    docs.contains(&format!("| `{key}` |"))
}

#[test]
fn each_refusal_names_the_exact_change_and_the_change_works() {
    for kind in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("notes.txt"), "the notes").unwrap();
        std::fs::create_dir(root.join("build")).unwrap();
        if let Some(config) = kind.config {
            std::fs::write(root.join("toolhost.toml"), config).unwrap();
        }
        let hint = refusal(&toolhost_in(&root, kind.args));
        for says in kind.says {
            let says = says.replace("{dir}", &root.display().to_string());
            assert!(
                hint.contains(&says),
                "{}: {says:?} not in\n{hint}",
                kind.what
            );
        }
        for not in kind.not {
            assert!(
                !hint.contains(not),
                "{}: {not:?} does not apply:\n{hint}",
                kind.what
            );
        }
        assert!(
            documented(kind.key),
            "{}: {} is not a documented key",
            kind.what,
            kind.key
        );
        assert!(hint.contains(kind.key), "{}: {hint}", kind.what);

        // The allowlist entry, written as the hint says, lets it run...
        let allowlist = root.join("toolhost-approvals.json");
        let start = hint.find(" holding ").expect("the allowlist's text") + " holding ".len();
        let json = &hint[start..];
        let end = json
            .find("}, or ")
            .expect("the entry is followed by the other way")
            + 1;
        std::fs::write(&allowlist, &json[..end]).unwrap();
        let output = toolhost_in(&root, kind.args);
        assert!(output.status.success(), "{}: {output:?}", kind.what);
        std::fs::remove_file(&allowlist).unwrap();
        std::fs::create_dir_all(root.join("build")).unwrap();

        // ...and so does the configuration change.
        if let Some(changed) = kind.changed {
            std::fs::write(root.join("toolhost.toml"), changed).unwrap();
            let output = toolhost_in(&root, kind.args);
            assert!(output.status.success(), "{}: {output:?}", kind.what);
        }
    }
}

#[test]
fn an_existing_allowlist_gets_the_line_added_to_the_callers_list() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(root.join("notes.txt"), "the notes").unwrap();
    std::fs::write(root.join("toolhost.toml"), KINDS[0].config.unwrap()).unwrap();
    std::fs::write(root.join("toolhost-approvals.json"), r#"{"approved": []}"#).unwrap();
    let hint = refusal(&toolhost_in(&root, READ));
    assert!(
        hint.contains(&format!(
            "add \"tool read_file file:read\" to the \"approved\" list in {}/toolhost-approvals.json",
            root.display()
        )),
        "{hint}"
    );
}
