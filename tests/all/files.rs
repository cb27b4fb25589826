//! Files: the profile's read and write grants are preopened, and `file.deny`
//! is enforced on every path operation, through `..`, absolute paths and
//! symlinks. Outside the grants nothing exists.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use toolhost::{ErrorKind, Host};

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    host: Host,
}

impl Fixture {
    fn ws(&self, rel: &str) -> String {
        self.root
            .join("workspace")
            .join(rel)
            .to_string_lossy()
            .into_owned()
    }

    async fn call(&self, tool: &str, arguments: Value) -> Value {
        let result = self
            .host
            .call(tool, arguments.clone())
            .await
            .unwrap_or_else(|e| panic!("{tool} {arguments}: {e}"));
        serde_json::from_str(result.get()).unwrap()
    }

    async fn read(&self, path: &str) -> Value {
        self.call("read", json!({ "path": path })).await
    }
}

pub(crate) const PROFILE: &str = r#"
allow = ["file:*"]
file.read = ["."]
file.write = ["out"]
file.deny = [".env", "secrets/**"]
"#;

async fn fixture(profile: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let ws = root.join("workspace");
    for sub in ["sub", "secrets", "out"] {
        std::fs::create_dir_all(ws.join(sub)).unwrap();
    }
    std::fs::create_dir_all(root.join("outside")).unwrap();
    std::fs::write(ws.join("notes.txt"), "hello").unwrap();
    std::fs::write(ws.join(".env"), "SECRET=1").unwrap();
    std::fs::write(ws.join("secrets/key.txt"), "key").unwrap();
    std::fs::write(ws.join("sub/a.txt"), "a").unwrap();
    std::fs::write(root.join("outside/x.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(ws.join(".env"), ws.join("link_to_env")).unwrap();
    std::os::unix::fs::symlink(root.join("outside/x.txt"), ws.join("link_out")).unwrap();
    std::os::unix::fs::symlink(ws.join("secrets"), ws.join("sub/secrets_dir")).unwrap();
    let host = Host::builder()
        .plugin_file(toolhost_tests::FILES)
        .profile(crate::profile(profile, &ws))
        .build()
        .await
        .unwrap();
    Fixture {
        _dir: dir,
        root,
        host,
    }
}

fn error_of(value: &Value) -> &str {
    value["error"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error: {value}"))
}

#[tokio::test]
async fn granted_files_are_readable_by_absolute_and_relative_path() {
    let f = fixture(PROFILE).await;
    assert_eq!(f.read(&f.ws("notes.txt")).await, json!({"ok": "hello"}));
    assert_eq!(f.read("notes.txt").await, json!({"ok": "hello"}));
    assert_eq!(f.read("sub/a.txt").await, json!({"ok": "a"}));
}

#[tokio::test]
async fn denied_files_are_refused_by_every_spelling() {
    let f = fixture(PROFILE).await;
    for path in [
        f.ws(".env"),
        ".env".to_string(),
        "sub/../.env".to_string(),
        f.ws("sub/../secrets/key.txt"),
        "secrets/key.txt".to_string(),
        "./secrets/../.env".to_string(),
    ] {
        let result = f.read(&path).await;
        assert_eq!(error_of(&result), "permission_denied", "{path}: {result}");
    }
}

#[tokio::test]
async fn paths_outside_the_grants_do_not_exist() {
    let f = fixture(PROFILE).await;
    let outside = f.root.join("outside/x.txt").to_string_lossy().into_owned();
    for path in [outside.as_str(), "../outside/x.txt", "/etc/passwd"] {
        let result = f.read(path).await;
        assert_eq!(error_of(&result), "not_found", "{path}: {result}");
    }
}

#[tokio::test]
async fn symlinks_to_denied_or_ungranted_places_fail() {
    let f = fixture(PROFILE).await;
    assert_eq!(error_of(&f.read("link_to_env").await), "permission_denied");
    assert_ne!(f.read("link_out").await.get("ok"), Some(&json!("outside")));
    assert!(f.read("link_out").await.get("error").is_some());
    assert_eq!(
        error_of(&f.read("sub/secrets_dir/key.txt").await),
        "permission_denied"
    );
    assert!(
        f.call("readlink", json!({"path": "link_to_env"}))
            .await
            .get("error")
            .is_some()
    );
}

#[tokio::test]
async fn listings_leave_denied_entries_out_and_stat_refuses_them() {
    let f = fixture(PROFILE).await;
    let listed = f.call("list", json!({"path": "."})).await;
    let names: Vec<&str> = listed["ok"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(names.contains(&"notes.txt"), "{names:?}");
    assert!(!names.contains(&".env"), "{names:?}");
    assert!(!names.contains(&"secrets"), "{names:?}");
    let listed = f.call("list", json!({"path": "secrets"})).await;
    assert_eq!(error_of(&listed), "permission_denied");
    assert_eq!(
        f.call("stat", json!({"path": ".env"})).await["error"],
        "permission_denied"
    );
    assert_eq!(
        f.call("stat", json!({"path": "notes.txt"})).await,
        json!({"ok": 5})
    );
}

#[tokio::test]
async fn writes_only_in_write_grants_and_never_to_denied_paths() {
    let f = fixture(PROFILE).await;
    let wrote = f
        .call("write", json!({"path": "out/new.txt", "content": "x"}))
        .await;
    assert_eq!(wrote, json!({"ok": null}));
    assert_eq!(std::fs::read_to_string(f.ws("out/new.txt")).unwrap(), "x");

    let refused = f
        .call("write", json!({"path": "notes.txt", "content": "x"}))
        .await;
    assert!(refused.get("error").is_some(), "{refused}");
    assert_eq!(std::fs::read_to_string(f.ws("notes.txt")).unwrap(), "hello");

    for (tool, args) in [
        ("write", json!({"path": "out/../.env", "content": "x"})),
        ("remove", json!({"path": ".env"})),
        ("mkdir", json!({"path": "secrets/sub"})),
        (
            "rename",
            json!({"from": "out/new.txt", "to": "secrets/new.txt"}),
        ),
        ("rename", json!({"from": ".env", "to": "out/stolen"})),
    ] {
        let result = f.call(tool, args.clone()).await;
        assert!(result.get("error").is_some(), "{tool} {args}: {result}");
    }
    assert!(Path::new(&f.ws(".env")).exists());
    assert!(!Path::new(&f.ws("secrets/new.txt")).exists());
    assert!(!Path::new(&f.ws("out/stolen")).exists());
}

#[tokio::test]
async fn a_guest_cannot_link_to_a_denied_file() {
    let f = fixture(PROFILE).await;
    // Link targets are relative (absolute ones would leave the directory).
    let refused = f
        .call(
            "symlink",
            json!({"from": "../.env", "to": f.ws("out/env_link")}),
        )
        .await;
    assert_eq!(error_of(&refused), "permission_denied", "{refused}");
    assert!(!Path::new(&f.ws("out/env_link")).exists());
    let allowed = f
        .call(
            "symlink",
            json!({"from": "../notes.txt", "to": f.ws("out/notes_link")}),
        )
        .await;
    assert_eq!(allowed, json!({"ok": null}));
    // Read through the workspace (a link may not leave the directory it was
    // opened from, so not through the `out` grant itself).
    assert_eq!(f.read("out/notes_link").await, json!({"ok": "hello"}));
}

#[tokio::test]
async fn a_tool_that_did_not_declare_file_access_sees_no_files() {
    let f = fixture(PROFILE).await;
    let result = f
        .call("sneaky_read", json!({"path": f.ws("notes.txt")}))
        .await;
    assert_eq!(error_of(&result), "not_found", "{result}");
}

#[tokio::test]
async fn a_profile_without_file_write_hides_writing_tools() {
    let f = fixture(
        r#"
        allow = ["file:read"]
        file.read = ["."]
        "#,
    )
    .await;
    assert_eq!(f.read("notes.txt").await, json!({"ok": "hello"}));
    let error = f
        .host
        .call("write", json!({"path": "notes.txt", "content": "x"}))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert!(error.message().contains("file:write"), "{error}");
}

#[tokio::test]
async fn dot_dot_after_a_symlink_is_judged_where_the_kernel_goes() {
    // F1: `out/n -> ../sub`, so `out/n/..` is the workspace, not `out`.
    let f = fixture(PROFILE).await;
    std::os::unix::fs::symlink("../sub", f.ws("out/n")).unwrap();
    for path in ["out/n/../secrets/key.txt", "out/n/../.env"] {
        let result = f.read(path).await;
        assert_eq!(error_of(&result), "permission_denied", "{path}: {result}");
    }
    // Lexically `out/planted.txt` (writable); really the read-only workspace.
    let result = f
        .call(
            "write",
            json!({"path": "out/n/../planted.txt", "content": "x"}),
        )
        .await;
    assert!(result.get("error").is_some(), "{result}");
    assert!(!Path::new(&f.ws("planted.txt")).exists());
    // Where the symlink really leads and is allowed, it still works.
    assert_eq!(f.read("out/n/../notes.txt").await, json!({"ok": "hello"}));
    assert_eq!(f.read("out/n/a.txt").await, json!({"ok": "a"}));
}

#[tokio::test]
async fn renaming_an_ancestor_of_a_denied_path_is_refused() {
    // F2: with `config/secrets/**` denied and `config/` writable, renaming
    // `config` would expose the secret under a name no rule covers.
    let f = fixture(
        r#"
        allow = ["file:*"]
        file.read = ["."]
        file.write = ["."]
        file.deny = ["config/secrets/**", "**/.env"]
        "#,
    )
    .await;
    std::fs::create_dir_all(f.ws("config/secrets")).unwrap();
    std::fs::write(f.ws("config/secrets/token"), "t0ken").unwrap();
    std::fs::create_dir_all(f.ws("app/deep")).unwrap();
    std::fs::write(f.ws("app/deep/.env"), "E=1").unwrap();
    for (from, to) in [
        ("config", "cfg"),
        ("config", "out/cfg"),
        ("app", "app2"),
        ("app/deep", "out/deep"),
    ] {
        let result = f.call("rename", json!({"from": from, "to": to})).await;
        assert_eq!(error_of(&result), "permission_denied", "{from}: {result}");
        assert!(Path::new(&f.ws(from)).exists(), "{from} was moved");
    }
    assert_eq!(f.read("cfg/secrets/token").await["error"], "not_found");
    // A directory without denied paths inside moves.
    let result = f.call("rename", json!({"from": "sub", "to": "sub2"})).await;
    assert_eq!(result, json!({"ok": null}));
}

#[tokio::test]
async fn one_call_holds_a_bounded_number_of_open_files() {
    // F4: a guest that opens without closing gets "too many open files" at
    // the quota; the host, and the next call, are unaffected.
    let f = fixture(PROFILE).await;
    let held = f
        .call("hold_open", json!({"path": "notes.txt", "count": 5000}))
        .await;
    let opened = held["opened"].as_u64().unwrap();
    assert!((200..=256).contains(&opened), "{held}");
    assert!(held["error"].is_string(), "{held}");
    // Each call has its own quota.
    let again = f
        .call("hold_open", json!({"path": "notes.txt", "count": 100}))
        .await;
    assert_eq!(again, json!({"opened": 100}));
    assert_eq!(f.read("notes.txt").await, json!({"ok": "hello"}));
}

/// Spellings of a way to `.env` (or into `secrets/`) from the workspace;
/// `{ws}` is the workspace's absolute path.
const TRAVERSALS: &[&str] = &[
    ".env",
    "./.env",
    ".//.env",
    "./././.env",
    "sub/../.env",
    "sub/./../.env",
    "sub//..//.env",
    "out/../.env",
    "out/../../workspace/.env",
    "../workspace/.env",
    "sub/secrets_dir/key.txt",
    "sub/secrets_dir/../.env",
    "link_to_env",
    "secrets/key.txt",
    "secrets/./key.txt",
    "secrets//key.txt",
    "secrets/../secrets/key.txt",
    "sub/../secrets/key.txt",
    "{ws}/.env",
    "{ws}//.env",
    "{ws}/./.env",
    "{ws}/sub/../.env",
    "{ws}/secrets/key.txt",
    "/{ws}/.env",
];

/// Spellings that look like the way in but name other files (they must not
/// be taken for it, and must not reach it).
const LOOK_ALIKES: &[&str] = &[
    "%2eenv",
    ".env%00",
    "．env",
    ".env\u{200b}",
    "secrets%2fkey.txt",
    "secrets\\key.txt",
    ".env/",
    ".env/.",
    "secrets/key.txt/",
];

#[tokio::test]
async fn every_spelling_of_a_denied_path_is_refused() {
    let f = fixture(PROFILE).await;
    let ws = f.ws("");
    let ws = ws.trim_end_matches('/');
    for spelling in TRAVERSALS.iter().chain(LOOK_ALIKES) {
        let path = spelling.replace("{ws}", ws);
        let result = f.read(&path).await;
        assert!(result.get("error").is_some(), "{path:?} was read: {result}");
        let text = result.to_string();
        assert!(
            !text.contains("SECRET=1") && !text.contains("\"key\""),
            "{path:?}: {result}"
        );
    }
}

#[tokio::test]
async fn a_listing_through_a_symlink_leaves_denied_entries_out() {
    // `sub/up -> ..` lists the workspace: its `.env` and `secrets` are
    // judged where they are, not under the name `sub/up`.
    let f = fixture(PROFILE).await;
    std::os::unix::fs::symlink("..", f.ws("sub/up")).unwrap();
    let listed = f.call("list", json!({"path": "sub/up"})).await;
    let names = listed["ok"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(names.contains(&json!("notes.txt")), "{listed}");
    assert!(!names.contains(&json!(".env")), "{listed}");
    assert!(!names.contains(&json!("secrets")), "{listed}");
}

/// A profile that may read and write the whole workspace but `deny`.
fn writable_profile(deny: &str) -> String {
    format!(
        "allow = [\"file:*\"]\nfile.read = [\".\"]\nfile.write = [\".\"]\nfile.deny = [{deny:?}]\n"
    )
}

#[tokio::test]
async fn renaming_through_dot_dot_after_a_symlink_carries_no_denied_path() {
    // `out/n/../config` is `config` to the kernel, which holds a secret.
    let f = fixture(&writable_profile("config/secrets/**")).await;
    std::fs::create_dir_all(f.ws("config/secrets")).unwrap();
    std::fs::write(f.ws("config/secrets/token"), "t0ken").unwrap();
    std::os::unix::fs::symlink("../sub", f.ws("out/n")).unwrap();
    let result = f
        .call("rename", json!({"from": "out/n/../config", "to": "cfg"}))
        .await;
    assert_eq!(error_of(&result), "permission_denied", "{result}");
    assert!(Path::new(&f.ws("config/secrets/token")).exists());
    assert!(!Path::new(&f.ws("cfg")).exists());
}

#[tokio::test]
async fn writing_through_a_dangling_symlink_is_judged_where_it_creates() {
    // Opening a dangling symlink to create makes its target: a denied
    // file, or one outside the write grants.
    let f = fixture(PROFILE).await;
    std::os::unix::fs::symlink("../secrets/new.txt", f.ws("out/d")).unwrap();
    std::os::unix::fs::symlink("../planted.txt", f.ws("out/p")).unwrap();
    for (path, made) in [("out/d", "secrets/new.txt"), ("out/p", "planted.txt")] {
        let result = f.call("write", json!({"path": path, "content": "x"})).await;
        assert!(result.get("error").is_some(), "{path}: {result}");
        assert!(!Path::new(&f.ws(made)).exists(), "{made} was created");
    }
    // A dangling symlink to a writable place still creates its target.
    std::os::unix::fs::symlink("made.txt", f.ws("out/m")).unwrap();
    let result = f
        .call("write", json!({"path": "out/m", "content": "x"}))
        .await;
    assert_eq!(result, json!({"ok": null}));
    assert_eq!(std::fs::read_to_string(f.ws("out/made.txt")).unwrap(), "x");
}

#[tokio::test]
async fn a_symlink_points_from_the_directory_it_really_is_in() {
    // `out/n/../sub/l` is really `sub/l`, so `../secrets/key.txt` from
    // there is the denied key (from `out/sub` it would name nothing).
    let f = fixture(&writable_profile("secrets/**")).await;
    std::os::unix::fs::symlink("../sub", f.ws("out/n")).unwrap();
    let result = f
        .call(
            "symlink",
            json!({"from": "../secrets/key.txt", "to": f.ws("out/n/../sub/l")}),
        )
        .await;
    assert_eq!(error_of(&result), "permission_denied", "{result}");
    assert!(std::fs::symlink_metadata(f.ws("sub/l")).is_err());
}

#[tokio::test]
async fn renaming_a_directory_that_holds_a_grant_is_refused() {
    // The call's handle to `a/secrets` would follow it to `cfg/secrets`
    // (denied) while paths through it are judged as `a/secrets/...`.
    let f = fixture(
        r#"
        allow = ["file:*"]
        file.read = ["."]
        file.write = [".", "a/secrets"]
        file.deny = ["cfg/secrets/**"]
        "#,
    )
    .await;
    std::fs::create_dir_all(f.ws("a/secrets")).unwrap();
    std::fs::write(f.ws("a/secrets/token"), "t0ken").unwrap();
    for (from, to) in [("a", "cfg"), ("a/secrets", "moved"), ("sub", "a/secrets")] {
        let result = f.call("rename", json!({"from": from, "to": to})).await;
        assert_eq!(error_of(&result), "permission_denied", "{from}: {result}");
    }
    assert!(Path::new(&f.ws("a/secrets/token")).exists());
    assert!(!Path::new(&f.ws("cfg")).exists());
}
