//! Attack tests: own_files (see mod.rs). toolhost's own files (its config,
//! the approvals allowlist, the compile cache, the plugin directory) are
//! out of every grant: no tool writes them with the file tools, no command
//! rewrites, moves, links or replaces them, whatever the workspace holds.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use super::server::{Server, error_of, sha256_hex};

/// The documented layout: `toolhost.toml` in the project, a profile like
/// the built-in `developer` (everything, a human approves commands).
const DEVELOPER: &str = r#"
audit = "audit.jsonl"
default_profile = "developer"
[profiles.developer]
allow = ["*"]
approval_required = ["terminal:execute"]
file.read = ["."]
file.write = ["."]
file.deny = ["**/.env"]
"#;

/// An agent whose commands run unasked, and whose file writes need an
/// approval nobody gives (the server has no approver).
const AGENT: &str = r#"
default_profile = "agent"
[profiles.agent]
allow = ["*"]
approval_required = ["file:write"]
file.read = [".."]
file.write = [".."]
file.deny = ["**/secret.txt"]
terminal.dangerous = "allow"
"#;

/// A profile that reads and writes the config's directory with the file
/// tools, and an audit log there.
const FILES: &str = r#"
audit = "audit.jsonl"
default_profile = "p"
[profiles.p]
allow = ["file:*"]
file.read = ["."]
file.write = ["."]
"#;

/// Waits until the audit log `audit.jsonl` beside the config mentions
/// `needle` (the host's reason for a refusal the tool saw as an errno).
async fn audited(server: &Server, needle: &str) {
    let path = server.root.join("audit.jsonl");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if text.contains(needle) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the audit never said {needle:?}: {text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn unchanged(path: &Path, content: &str) {
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        content,
        "{} was changed",
        path.display()
    );
}

#[test]
fn a_tenant_with_file_tools_and_no_workspace_is_refused_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolhost.toml");
    let text = format!(
        "default_profile = \"none\"\n[profiles.none]\n\
         [profiles.files]\nallow = [\"file:*\"]\nfile.read = [\".\"]\nfile.write = [\".\"]\n\
         [tenants.t]\ntoken_sha256 = \"{}\"\nprofile = \"files\"\n",
        sha256_hex("t-token")
    );
    std::fs::write(&config, &text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .arg("--config")
        .arg(&config)
        .args(["config", "check"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert!(
        stdout.contains("tenants.t.workspace") && stdout.contains("file:read"),
        "{stdout}"
    );
}

#[tokio::test]
async fn a_tenant_cannot_rewrite_the_servers_config_inside_its_workspace() {
    let token = "t-token";
    let config = format!(
        "audit = \"audit.jsonl\"\ndefault_profile = \"none\"\n[profiles.none]\n\
         [profiles.files]\nallow = [\"file:*\"]\nfile.read = [\".\"]\nfile.write = [\".\"]\n\
         [profiles.root]\nallow = [\"*\"]\nfile.read = [\"/\"]\nterminal.sandbox = \"none\"\n\
         [tenants.t]\ntoken_sha256 = \"{}\"\nprofile = \"files\"\nworkspace = \".\"\n",
        sha256_hex(token)
    );
    let server = Server::start(&config, |_| {}).await;
    server.wait_for_tool(Some(token), "write_file").await;
    let file = server.root.join("toolhost.toml");
    let promoted = config.replace("profile = \"files\"", "profile = \"root\"");
    for (tool, arguments) in [
        (
            "write_file",
            json!({ "path": "toolhost.toml", "content": promoted }),
        ),
        (
            "write_file",
            json!({ "path": file.to_str().unwrap(), "content": promoted }),
        ),
        (
            "write_file",
            json!({ "path": "plugins/../toolhost.toml", "content": promoted }),
        ),
        (
            "edit_file",
            json!({ "path": "toolhost.toml", "old_text": "\"files\"\nworkspace", "new_text": "\"root\"\nworkspace" }),
        ),
        ("read_file", json!({ "path": "toolhost.toml" })),
    ] {
        let result = server.call(Some(token), None, tool, arguments).await;
        let error = error_of(&result).unwrap_or_else(|| panic!("{tool}: {result}"));
        assert!(error.contains("not allowed"), "{tool}: {error}");
    }
    audited(&server, "is toolhost's configuration (--config)").await;
    unchanged(&file, &config);
    // The listing does not show it either.
    let listing = server
        .call(Some(token), None, "list_dir", json!({ "path": "." }))
        .await;
    assert!(!listing.to_string().contains("toolhost.toml"), "{listing}");
}

#[tokio::test]
async fn a_model_cannot_write_its_own_approvals_with_write_file() {
    let mut server = Server::start(DEVELOPER, |_| {}).await;
    server.wait_for_tool(None, "run_command").await;
    let refused = server.run(None, None, "echo ran").await;
    assert!(
        error_of(&refused).is_some_and(|e| e.contains("not approved")),
        "{refused}"
    );
    let allowlist = server.root.join("toolhost-approvals.json");
    let written = server
        .write_file(
            None,
            "toolhost-approvals.json",
            "{\"approved\": [\"tool run_command terminal:execute\"]}",
        )
        .await;
    let error = error_of(&written).unwrap_or_else(|| panic!("{written}"));
    assert!(error.contains("not allowed"), "{error}");
    audited(&server, "toolhost's approvals allowlist").await;
    assert!(!allowlist.exists(), "{}", server.log());
    let still = server.run(None, None, "echo ran").await;
    assert!(error_of(&still).is_some(), "ran unapproved: {still}");
}

#[tokio::test]
async fn commands_cannot_rewrite_move_link_or_replace_own_files() {
    // The config in `conf/`, under the write grant: its directory can be
    // moved aside by a command, unless the sandbox pins it.
    let mut server = Server::start_at("conf/toolhost.toml", AGENT, |root| {
        std::fs::write(root.join("secret.txt"), "the secret").unwrap();
    })
    .await;
    server.wait_for_tool(None, "run_command").await;
    let config = server.root.join("conf/toolhost.toml");
    let allowlist = server.root.join("conf/toolhost-approvals.json");
    let lifted = AGENT
        .replace("file.deny = [\"**/secret.txt\"]", "")
        .replace("approval_required = [\"file:write\"]", "");
    let approve = "{\"approved\": [\"tool write_file file:write\"]}";
    std::fs::write(server.root.join("evil.toml"), &lifted).unwrap();
    std::fs::write(server.root.join("approve.json"), approve).unwrap();
    for line in [
        format!("printf %s '{approve}' > conf/toolhost-approvals.json"),
        "cp approve.json conf/toolhost-approvals.json".to_string(),
        "mv approve.json conf/toolhost-approvals.json".to_string(),
        "cp evil.toml conf/toolhost.toml".to_string(),
        "cat evil.toml > conf/toolhost.toml".to_string(),
        "mv evil.toml conf/toolhost.toml".to_string(),
        "ln -f evil.toml conf/toolhost.toml".to_string(),
        "rm -f conf/toolhost.toml && cp evil.toml conf/toolhost.toml".to_string(),
        "mv conf conf.old && mkdir -p conf && cp evil.toml conf/toolhost.toml".to_string(),
        "ln conf/toolhost.toml copy.toml && cat evil.toml > copy.toml".to_string(),
    ] {
        let result = server
            .call(
                None,
                None,
                "run_command",
                json!({ "command": line, "cwd": ".." }),
            )
            .await;
        assert!(
            error_of(&result).is_none(),
            "{line}: the command was not run: {result}"
        );
        assert!(config.is_file(), "{line}: the config is gone");
        unchanged(&config, AGENT);
        let approvals = std::fs::read_to_string(&allowlist).unwrap_or_default();
        assert!(!approvals.contains("write_file"), "{line}: {approvals}");
    }
    // Reading them shows nothing either.
    let read = server
        .call(
            None,
            None,
            "run_command",
            json!({ "command": "cat conf/toolhost.toml; cat conf/toolhost-approvals.json", "cwd": ".." }),
        )
        .await;
    assert!(!read.to_string().contains("profiles.agent"), "{read}");
    // file.deny still holds, and writing files still needs an approval.
    let secret = server
        .call(None, None, "read_file", json!({ "path": "../secret.txt" }))
        .await;
    assert!(error_of(&secret).is_some(), "{secret}");
    let write = server.write_file(None, "../note.txt", "x").await;
    assert!(error_of(&write).is_some(), "{write}: {}", server.log());
}

#[tokio::test]
async fn a_rewritten_config_cannot_lift_file_deny() {
    let config = &format!("{FILES}file.deny = [\"**/secret.txt\"]\n");
    let server = Server::start(config, |root| {
        std::fs::write(root.join("secret.txt"), "the secret").unwrap();
        std::os::unix::fs::symlink(root.join("toolhost.toml"), root.join("link.toml")).unwrap();
        std::fs::hard_link(root.join("toolhost.toml"), root.join("copy.toml")).unwrap();
    })
    .await;
    server.wait_for_tool(None, "write_file").await;
    let lifted = config.replace("file.deny = [\"**/secret.txt\"]", "");
    let paths = [
        "toolhost.toml",
        "link.toml",
        "./x/../toolhost.toml",
        "copy.toml",
        "TOOLHOST.TOML",
    ];
    for path in paths {
        let read = server
            .call(None, None, "read_file", json!({ "path": path }))
            .await;
        assert!(error_of(&read).is_some(), "{path}: {read}");
    }
    for path in paths {
        let written = server.write_file(None, path, &lifted).await;
        // Refused, or (through the symlink) the symlink itself replaced.
        if path != "link.toml" {
            let error = error_of(&written).unwrap_or_else(|| panic!("{path}: {written}"));
            assert!(error.contains("not allowed"), "{path}: {error}");
        }
        unchanged(&server.root.join("toolhost.toml"), config);
    }
    audited(&server, "is toolhost's configuration").await;
    unchanged(&server.root.join("toolhost.toml"), config);
    let secret = server
        .call(None, None, "read_file", json!({ "path": "secret.txt" }))
        .await;
    assert!(error_of(&secret).is_some(), "{secret}");
    audited(&server, "matches file.deny pattern").await;
}

#[tokio::test]
async fn tools_write_the_plugin_directory_only_where_file_write_names_it() {
    let config = r#"
audit = "audit.jsonl"
plugins = "plugins"
default_profile = "p"
[profiles.p]
allow = ["file:*"]
file.read = ["."]
file.write = ["."]
[profiles.builder]
allow = ["file:*"]
file.read = ["."]
file.write = [".", "plugins"]
[tenants.builder]
token_sha256 = "TOKEN"
profile = "builder"
workspace = "."
[tenants.other]
token_sha256 = "OTHER"
profile = "p"
workspace = "."
"#
    .replace("TOKEN", &sha256_hex("builder-token"))
    .replace("OTHER", &sha256_hex("other-token"));
    let server = Server::start(&config, |_| {}).await;
    server
        .wait_for_tool(Some("other-token"), "write_file")
        .await;
    let plant = json!({ "path": "plugins/planted.toml", "content": "not a plugin" });
    let refused = server
        .call(Some("other-token"), None, "write_file", plant.clone())
        .await;
    let error = error_of(&refused).unwrap_or_else(|| panic!("{refused}"));
    assert!(error.contains("not allowed"), "{error}");
    audited(
        &server,
        "unless the profile's file.write names the directory",
    )
    .await;
    assert!(!server.root.join("plugins/planted.toml").exists());
    let allowed = server
        .call(Some("builder-token"), None, "write_file", plant)
        .await;
    assert!(error_of(&allowed).is_none(), "{allowed}");
    // `check` says who may write it.
    let output = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .arg("--config")
        .arg(server.root.join("toolhost.toml"))
        .args(["--no-bundled", "check"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("writable by profile builder: file.write names it"),
        "{stdout}"
    );
    assert!(stdout.contains("approvals allowlist"), "{stdout}");
    // `doctor` too.
    let output = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .arg("--config")
        .arg(server.root.join("toolhost.toml"))
        .args(["--no-bundled", "doctor"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("toolhost's own paths") && stdout.contains("hidden from every tool"),
        "{stdout}"
    );
}

#[tokio::test]
async fn a_reloaded_config_naming_new_paths_keeps_the_old_ones_protected() {
    let config = FILES;
    let mut server = Server::start(config, |_| {}).await;
    server.wait_for_tool(None, "write_file").await;
    let moved = format!("{config}\n[approvals]\nallowlist = \"elsewhere.json\"\n");
    std::fs::write(server.root.join("toolhost.toml"), moved).unwrap();
    server.wait_for("reloaded");
    for path in ["toolhost-approvals.json", "elsewhere.json"] {
        let written = server.write_file(None, path, "{\"approved\": []}").await;
        let error = error_of(&written).unwrap_or_else(|| panic!("{path}: {written}"));
        assert!(error.contains("not allowed"), "{path}: {error}");
        assert!(!server.root.join(path).exists(), "{path}");
    }
    audited(
        &server,
        "elsewhere.json\\\" is toolhost's approvals allowlist",
    )
    .await;
}

/// `toolhost status --json`: how the plugin in `plugins` was compiled.
fn compiled(plugins: &Path, cache: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .args(["--no-bundled", "--plugins"])
        .arg(plugins)
        .args(["status", "--json"])
        .env("TOOLHOST_CACHE_DIR", cache)
        .env_remove("TOOLHOST_CONFIG")
        .env_remove("RUST_LOG")
        .current_dir(plugins)
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
    status["plugins"][0]["compiled"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_compile_cache_entry_this_host_did_not_write_is_not_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    std::fs::copy(toolhost_tests::SHAPES, plugins.join("shapes.wasm")).unwrap();
    let (ours, theirs) = (dir.path().join("ours"), dir.path().join("theirs"));
    assert_eq!(compiled(&plugins, &ours), "fresh");
    assert_eq!(compiled(&plugins, &ours), "cached");
    // Another cache (another key) compiles the same plugin: its entry has
    // the same name, and a valid checksum of its own.
    assert_eq!(compiled(&plugins, &theirs), "fresh");
    let entry = |cache: &Path| {
        std::fs::read_dir(cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "cwasm"))
            .unwrap()
    };
    let planted = entry(&ours);
    std::fs::copy(entry(&theirs), &planted).unwrap();
    assert_eq!(
        compiled(&plugins, &ours),
        "fresh",
        "the planted entry was loaded"
    );
    assert_eq!(compiled(&plugins, &ours), "cached");
}

#[tokio::test]
async fn the_file_capability_refuses_moving_replacing_or_linking_own_files() {
    // The config in `conf/`, the workspace its parent: `conf` can be moved.
    let config = FILES
        .replace("[\".\"]", "[\"..\"]")
        .replace("audit.jsonl", "../audit.jsonl");
    let server = Server::start_at("conf/toolhost.toml", &config, |root| {
        std::fs::copy(toolhost_tests::FILES, root.join("conf/plugins/files.wasm")).unwrap();
        std::fs::write(root.join("evil.toml"), "[profiles.p]\nallow = [\"*\"]\n").unwrap();
    })
    .await;
    server.wait_for_tool(None, "rename").await;
    let root = server.root.clone();
    let at = |name: &str| root.join(name).to_string_lossy().into_owned();
    for (tool, from, to) in [
        ("rename", at("evil.toml"), at("conf/toolhost.toml")),
        ("rename", at("conf"), at("conf.old")),
        ("rename", at("conf/toolhost.toml"), at("moved.toml")),
        ("link", at("conf/toolhost.toml"), at("copy.toml")),
        ("symlink", at("conf/toolhost.toml"), at("link.toml")),
        ("link", at("evil.toml"), at("conf/toolhost-approvals.json")),
    ] {
        let result = server
            .call(None, None, tool, json!({ "from": from, "to": to }))
            .await;
        assert_eq!(
            result["error"], "permission_denied",
            "{tool} {from} {to}: {result}"
        );
    }
    for tool in ["remove", "read"] {
        let result = server
            .call(
                None,
                None,
                tool,
                json!({ "path": at("conf/toolhost.toml") }),
            )
            .await;
        assert_eq!(result["error"], "permission_denied", "{tool}: {result}");
    }
    unchanged(&root.join("conf/toolhost.toml"), &config);
    assert!(!root.join("conf.old").exists() && !root.join("copy.toml").exists());
    audited(&server, "is toolhost's configuration").await;
}
