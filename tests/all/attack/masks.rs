//! Attack tests: masks. A background process of one session renames a
//! directory back and forth (`mv d e; mv e d`) while commands of the same
//! caller, each in a sandbox (or container) of its own, read what
//! `file.deny` masks in it: the walk of the grants, the mounts and the
//! command race the renames, and the masked content must never appear. A
//! command whose sandbox could not be built to the plan is refused.

use serde_json::json;
use toolhost::{Host, HostBuilder};

use crate::Workspace;
use crate::mcp::connect;
use crate::sessions::{tool, wait_running};

fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

/// What the masked file holds; the commands search for its first part.
const SECRET: &str = "race-secret-8152";

/// A workspace with `d/.env` (masked) and `d/public.txt`.
fn workspace() -> Workspace {
    let ws = Workspace::new(bundled);
    ws.write("d/.env", format!("TOKEN={SECRET}\n"));
    ws.write("d/public.txt", "public\n");
    ws
}

/// Reads the masked file by both names and searches the whole workspace;
/// runs alone, each time in a sandbox of its own. Whether it ran.
async fn read_once(host: &Host) -> bool {
    let line = "cat d/.env e/.env 2>/dev/null; grep -rs race-secret . ; true";
    match host.call("run_command", json!({ "command": line })).await {
        Ok(result) => {
            let text = result.get();
            assert!(!text.contains(SECRET), "the masked file was read: {text}");
            true
        }
        Err(e) => {
            assert!(!e.to_string().contains(SECRET), "{e}");
            false
        }
    }
}

#[tokio::test]
async fn a_mask_holds_while_its_directory_is_renamed_back_and_forth() {
    let ws = workspace();
    let host = ws
        .host(
            r#"
allow = ["terminal:*", "file:read", "file:write"]
file.read = ["."]
file.write = ["."]
file.deny = ["**/.env"]
terminal.dangerous = "allow"
"#,
        )
        .await;
    let (renamer, _) = connect(host.clone(), None).await;
    tool(
        &renamer,
        "process_start",
        json!({ "command": "while :; do mv d e; sleep 0.02; mv e d; sleep 0.0201; done" }),
    )
    .await;
    wait_running("sleep 0.0201").await;
    let mut ran = 0;
    for _ in 0..50 {
        ran += usize::from(read_once(&host).await);
    }
    renamer.cancel().await.unwrap();
    assert!(ran > 0, "every command was refused");
}

#[tokio::test]
async fn in_a_container_a_mask_holds_while_its_directory_is_renamed() {
    let _alone = crate::container::ONE_AT_A_TIME.lock().await;
    let Some(_socket) = crate::container::engine().await else {
        return;
    };
    let ws = workspace();
    let profile = crate::container::profile(
        "file.write = [\".\"]\nfile.deny = [\"**/.env\"]\nterminal.dangerous = \"allow\"\n",
    );
    let host = ws.host(&profile).await;
    let (renamer, _) = connect(host.clone(), None).await;
    tool(
        &renamer,
        "process_start",
        json!({ "command": "while :; do mv d e; sleep 0.3; mv e d; sleep 0.31; done" }),
    )
    .await;
    wait_running("sleep 0.31").await;
    let mut ran = 0;
    for _ in 0..12 {
        ran += usize::from(read_once(&host).await);
    }
    renamer.cancel().await.unwrap();
    assert!(ran > 0, "every command was refused");
}

/// A profile that denies `.env` anywhere and a `secrets` directory whole.
const DENIES: &str = r#"
allow = ["terminal:*", "file:read", "file:write"]
file.read = ["."]
file.write = ["."]
file.deny = ["**/.env", "**/secrets/**"]
terminal.dangerous = "allow"
"#;

/// What `line` printed, or the error.
async fn run(host: &Host, line: &str) -> String {
    match host.call("run_command", json!({ "command": line })).await {
        Ok(result) => result.get().to_string(),
        Err(e) => e.to_string(),
    }
}

/// What `read_file` of `path` returned, or the error.
async fn read_file(host: &Host, path: &str) -> String {
    match host.call("read_file", json!({ "path": path })).await {
        Ok(result) => result.get().to_string(),
        Err(e) => e.to_string(),
    }
}

/// The owner writes `text` to `path`, through a link if it is one.
fn owner_writes(path: &std::path::Path, text: &str) {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut file| std::io::Write::write_all(&mut file, text.as_bytes()))
        .unwrap();
}

#[tokio::test]
async fn a_denied_name_that_is_a_symlink_masks_what_it_leads_to() {
    denied_links_lead_nowhere(Workspace::new(bundled), DENIES, false).await;
}

#[tokio::test]
async fn in_a_container_a_denied_name_that_is_a_symlink_masks_what_it_leads_to() {
    let _alone = crate::container::ONE_AT_A_TIME.lock().await;
    let Some(_socket) = crate::container::engine().await else {
        return;
    };
    denied_links_lead_nowhere(Workspace::new(bundled), &in_container(DENIES), true).await;
}

/// `profile` (which allows like [`DENIES`]) run by the container backend.
fn in_container(profile: &str) -> String {
    let rest: Vec<&str> = profile
        .lines()
        .filter(|line| !line.starts_with("allow ") && !line.starts_with("file.read "))
        .collect();
    crate::container::profile(&rest.join("\n")).replace(
        "allow = [\"terminal:*\", \"file:write\"]",
        "allow = [\"terminal:*\", \"file:read\", \"file:write\"]",
    )
}

/// `container`: the workspace is given to the container's sandbox id.
async fn denied_links_lead_nowhere(ws: Workspace, profile: &str, container: bool) {
    ws.mkdir("app");
    ws.mkdir("b");
    if container {
        crate::container::give_to_sandbox(&ws.path);
    }
    let host = ws.host(profile).await;
    // A link to a file, dangling until the owner writes through it; a
    // chain of links; a denied directory name that is a link to another.
    let made = run(
        &host,
        "cd app && ln -s env.local .env && ln -s ../b/hop .env2 && ln -s ../b/env.deep ../b/hop \
         && mv .env2 ../b/.env && mkdir -p ../notes && ln -s ../notes secrets && echo made",
    )
    .await;
    assert!(made.contains("made"), "{made}");
    owner_writes(&ws.join("app/.env"), &format!("API_KEY={SECRET}-1\n"));
    owner_writes(&ws.join("b/.env"), &format!("API_KEY={SECRET}-2\n"));
    owner_writes(&ws.join("app/secrets/key"), &format!("{SECRET}-3\n"));
    let read = run(
        &host,
        "cat app/.env app/env.local b/.env b/hop b/env.deep app/secrets/key notes/key; \
         grep -rs race-secret . ; true",
    )
    .await;
    assert!(
        !read.contains(SECRET),
        "a denied link's target was read: {read}"
    );
    for path in ["app/env.local", "b/env.deep", "notes/key", "app/.env"] {
        let read = read_file(&host, path).await;
        assert!(!read.contains(SECRET), "read_file {path}: {read}");
    }
    // A link whose name is not denied, to an ordinary file, is not in the way.
    let other = run(
        &host,
        "echo mine > own.txt && ln -s own.txt alias && cat alias",
    )
    .await;
    assert!(other.contains("mine"), "{other}");
    assert!(read_file(&host, "alias").await.contains("mine"));
}

#[tokio::test]
async fn a_file_in_a_denied_directory_is_masked_under_its_other_names() {
    other_names_are_masked(Workspace::new(bundled), DENIES, false).await;
}

#[tokio::test]
async fn in_a_container_a_file_in_a_denied_directory_is_masked_under_its_other_names() {
    let _alone = crate::container::ONE_AT_A_TIME.lock().await;
    let Some(_socket) = crate::container::engine().await else {
        return;
    };
    other_names_are_masked(Workspace::new(bundled), &in_container(DENIES), true).await;
}

async fn other_names_are_masked(ws: Workspace, profile: &str, container: bool) {
    if container {
        crate::container::give_to_sandbox(&ws.path);
    }
    let host = ws.host(profile).await;
    let linked = run(
        &host,
        "mkdir -p secrets/deep notes && touch secrets/api.key secrets/deep/k2 \
         && ln secrets/api.key notes/k && ln secrets/deep/k2 k2 && echo linked",
    )
    .await;
    assert!(linked.contains("linked"), "{linked}");
    // The owner writes the keys in place.
    for name in ["secrets/api.key", "secrets/deep/k2"] {
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(ws.join(name))
            .and_then(|mut file| {
                std::io::Write::write_all(&mut file, format!("{SECRET}\n").as_bytes())
            })
            .unwrap();
    }
    let read = run(
        &host,
        "cat secrets/api.key notes/k k2; grep -rs race-secret . ; true",
    )
    .await;
    assert!(
        !read.contains(SECRET),
        "a denied file was read by another name: {read}"
    );
    for path in ["notes/k", "k2"] {
        let read = read_file(&host, path).await;
        assert!(!read.contains(SECRET), "read_file {path}: {read}");
    }
    // A file of one name beside them is read.
    ws.write("notes/plain", "plain\n");
    assert!(run(&host, "cat notes/plain").await.contains("plain"));
    assert!(read_file(&host, "notes/plain").await.contains("plain"));
}

/// Denies whose match depends on a directory above the file (anchored in
/// the workspace, or with a directory part), beside one by name alone.
const ANCHORED: &str = r#"
allow = ["terminal:*", "file:read", "file:write"]
file.read = ["."]
file.write = ["."]
file.deny = ["**/.env", "config/master.key", "config/secrets/**", "**/.aws/credentials"]
terminal.dangerous = "allow"
"#;

#[tokio::test]
async fn a_directory_above_an_anchored_denied_path_cannot_be_renamed_away_from_it() {
    anchored_denies_hold(Workspace::new(bundled), ANCHORED, false).await;
}

#[tokio::test]
async fn in_a_container_a_directory_above_an_anchored_denied_path_cannot_be_renamed() {
    let _alone = crate::container::ONE_AT_A_TIME.lock().await;
    let Some(_socket) = crate::container::engine().await else {
        return;
    };
    anchored_denies_hold(Workspace::new(bundled), &in_container(ANCHORED), true).await;
}

async fn anchored_denies_hold(ws: Workspace, profile: &str, container: bool) {
    ws.write("config/master.key", format!("{SECRET}-1\n"));
    ws.write("config/secrets/db", format!("{SECRET}-2\n"));
    ws.write("home/.aws/credentials", format!("{SECRET}-3\n"));
    ws.write("app/.env", format!("{SECRET}-4\n"));
    if container {
        crate::container::give_to_sandbox(&ws.path);
    }
    let host = ws.host(profile).await;
    let moved = run(
        &host,
        "mv config c2; mv home/.aws home/aws2; mv home h2; mv app app2; ls; true",
    )
    .await;
    let read = run(
        &host,
        "cat c2/master.key c2/secrets/db home/aws2/credentials h2/aws2/credentials \
         h2/.aws/credentials app2/.env 2>/dev/null; grep -rs race-secret . ; true",
    )
    .await;
    assert!(!read.contains(SECRET), "after `{moved}`: {read}");
    for path in [
        "c2/master.key",
        "c2/secrets/db",
        "home/aws2/credentials",
        "h2/aws2/credentials",
        "app2/.env",
    ] {
        let read = read_file(&host, path).await;
        assert!(!read.contains(SECRET), "read_file {path}: {read}");
    }
    // A directory above a file denied by its name alone is renamed.
    assert!(ws.join("app2/.env").exists(), "{moved}");
}

/// A directory with a workspace `ws` and a `toolhost.toml` whose default
/// profile is [`DENIES`], for [`cli`].
fn cli_workspace() -> tempfile::TempDir {
    // One compile cache for every workspace of this process: a fresh one
    // compiles the bundled plugins again at each first call.
    static CACHE: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(|| tempfile::tempdir().unwrap());
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    std::fs::write(
        dir.path().join("toolhost.toml"),
        format!(
            "cache_dir = {:?}\nworkspace = \"ws\"\ndefault_profile = \"agent\"\n\
             [profiles.agent]\n{DENIES}",
            cache.path().display().to_string()
        ),
    )
    .unwrap();
    dir
}

/// `toolhost call TOOL ARGUMENTS` with the configuration in `dir`: what it
/// printed.
pub(super) fn cli(dir: &std::path::Path, tool: &str, arguments: serde_json::Value) -> String {
    let output = std::process::Command::new(crate::toolhost_cli())
        .arg("--config")
        .arg(dir.join("toolhost.toml"))
        .args(["call", tool])
        .arg(arguments.to_string())
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A denied directory name a command made a link to the workspace (`ln -s
/// . secrets`, with `secrets/**` denied) catches what the owner stores there
/// later (`secrets/api.key` lands at `./api.key`): what it leads to is
/// masked, so neither a later command nor the file tools read it.
#[test]
fn a_denied_name_linked_to_the_workspace_catches_nothing_the_owner_stores_through_it() {
    crate::use_launcher();
    let dir = cli_workspace();
    let dir = dir.path();
    let linked = cli(
        dir,
        "run_command",
        json!({ "command": "ln -s . secrets && echo linked" }),
    );
    assert!(linked.contains("linked"), "{linked}");
    // The owner stores a key where the denied name leads.
    std::fs::write(dir.join("ws/secrets/api.key"), format!("{SECRET}\n")).unwrap();
    let read = cli(
        dir,
        "run_command",
        json!({ "command": "cat api.key secrets/api.key" }),
    );
    assert!(!read.contains(SECRET), "{read}");
    // The refusal names the link, for whoever can remove it.
    assert!(
        read.contains("secrets") && read.contains("remove the link from outside the sandbox"),
        "{read}"
    );
    let file = cli(dir, "read_file", json!({ "path": "api.key" }));
    assert!(!file.contains(SECRET), "{file}");
    // So does the file tools' refusal (the guest itself sees only EACCES).
    assert!(
        file.contains("toolhost refused") && file.contains("ws/secrets"),
        "{file}"
    );
    assert!(file.contains("removed from outside the sandbox"), "{file}");
}

/// The owner's `.env` is a link to `env.local` (a dotenv layout): the
/// denied name reaches the file, so both are hidden. A command that removes
/// the link, points it at the workspace, or moves what it passes through
/// (`mv app elsewhere` under an absolute link) does not make the file
/// readable to the next command or the file tools: the link and the way to
/// its target are kept as the plan found them, and put back.
#[test]
fn a_command_that_removes_or_repoints_the_owners_denied_link_reads_nothing_it_led_to() {
    crate::use_launcher();
    for change in [
        "rm .env",
        "ln -sfn . .env",
        "rm .env && ln -s nothing .env",
        "mv cfg cfg2 && mkdir cfg",
        "mv ../ws ../ws2",
    ] {
        let dir = cli_workspace();
        let dir = dir.path();
        let ws = dir.join("ws");
        std::fs::create_dir_all(ws.join("cfg")).unwrap();
        std::fs::write(ws.join("cfg/env.local"), format!("KEY={SECRET}\n")).unwrap();
        std::os::unix::fs::symlink(ws.join("cfg/env.local"), ws.join(".env")).unwrap();
        let before = cli(dir, "read_file", json!({ "path": "cfg/env.local" }));
        assert!(!before.contains(SECRET), "{before}");
        let changed = cli(
            dir,
            "run_command",
            json!({ "command": format!("{change}; echo ran") }),
        );
        assert!(changed.contains("ran"), "{change}: {changed}");
        let read = cli(
            dir,
            "run_command",
            json!({ "command": "cat cfg/env.local cfg2/env.local ../ws2/cfg/env.local; true" }),
        );
        assert!(!read.contains(SECRET), "{change}: {read}");
        for path in ["cfg/env.local", "cfg2/env.local"] {
            let file = cli(dir, "read_file", json!({ "path": path }));
            assert!(!file.contains(SECRET), "{change}: read_file {path}: {file}");
        }
        // The owner's layout is as it was.
        assert_eq!(
            std::fs::read_link(ws.join(".env")).ok(),
            Some(ws.join("cfg/env.local")),
            "{change}: {changed}"
        );
    }
}

#[tokio::test]
async fn in_a_container_a_command_that_removes_or_repoints_the_owners_denied_link_reads_nothing() {
    let _alone = crate::container::ONE_AT_A_TIME.lock().await;
    let Some(_socket) = crate::container::engine().await else {
        return;
    };
    for change in ["rm .env", "ln -sfn . .env", "mv cfg cfg2 && mkdir cfg"] {
        let ws = Workspace::new(bundled);
        ws.write("cfg/env.local", format!("KEY={SECRET}\n"));
        std::os::unix::fs::symlink(ws.join("cfg/env.local"), ws.join(".env")).unwrap();
        crate::container::give_to_sandbox(&ws.path);
        let host = ws.host(&in_container(DENIES)).await;
        let changed = run(&host, &format!("{change}; echo ran")).await;
        assert!(changed.contains("ran"), "{change}: {changed}");
        let read = run(&host, "cat cfg/env.local cfg2/env.local; true").await;
        assert!(!read.contains(SECRET), "{change}: {read}");
        let file = read_file(&host, "cfg/env.local").await;
        assert!(!file.contains(SECRET), "{change}: {file}");
        assert_eq!(
            std::fs::read_link(ws.join(".env")).ok(),
            Some(ws.join("cfg/env.local")),
            "{change}: {changed}"
        );
    }
}
