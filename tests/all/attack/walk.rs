//! Attack tests: the planner's walk of the grants. A command hides a
//! directory from the walk (buried past `PATH_MAX`, made unreadable when
//! toolhost is not root) or names one in bytes that are not UTF-8; the
//! walk must not skip what it cannot read (the masked content never
//! appears, repository metadata stays kept), and one odd name must not
//! stop every command. On the kernel sandbox and the container backend.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use serde_json::json;
use toolhost::{Host, HostBuilder};

use crate::Workspace;

fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

const SECRET: &str = "walk-secret-3317";

const PROFILE: &str = r#"
allow = ["terminal:*", "file:read", "file:write"]
file.read = ["."]
file.write = ["."]
file.deny = ["**/.env"]
terminal.dangerous = "allow"
"#;

async fn run(host: &Host, line: &str) -> String {
    match host.call("run_command", json!({ "command": line })).await {
        Ok(result) => result.get().to_string(),
        Err(e) => e.to_string(),
    }
}

/// Buries `app` (which holds the masked `.env`) under directories whose
/// path is longer than `PATH_MAX`, by short relative renames.
const BURY: &str = "python3 - <<'PY'
import os
os.mkdir('x'); os.rename('app', 'x/app')
top = 'x'
for i in range(18):
    n = 'N%02d' % i + 'a' * 240
    os.mkdir(n); os.rename(top, n + '/' + top); top = n
print('buried')
PY";

/// Walks down one name at a time and reads `.env`.
const DIG: &str = "python3 - <<'PY'
import os
while True:
    d = [e for e in os.listdir('.') if e.startswith('N') or e in ('x', 'app')]
    if not d: break
    os.chdir(d[0])
print(open('.env').read())
PY";

async fn buried_mask_holds(host: &Host) {
    let first = run(host, "cat app/.env").await;
    assert!(!first.contains(SECRET), "{first}");
    let buried = run(host, BURY).await;
    assert!(buried.contains("buried"), "{buried}");
    let dug = run(host, DIG).await;
    assert!(!dug.contains(SECRET), "the masked file was read: {dug}");
    assert!(dug.contains("could not be listed"), "{dug}");
}

/// Takes the buried tree away again (its paths are too long for `std`).
fn unbury(ws: &Workspace) {
    let status = std::process::Command::new("rm")
        .args(["-rf", "--"])
        .args(
            std::fs::read_dir(&ws.path)
                .unwrap()
                .flatten()
                .map(|e| e.path()),
        )
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn a_mask_holds_when_its_directory_is_buried_past_path_max() {
    let ws = Workspace::new(bundled);
    ws.write("app/.env", format!("TOKEN={SECRET}\n"));
    let host = ws.host(PROFILE).await;
    buried_mask_holds(&host).await;
    unbury(&ws);
}

#[tokio::test]
async fn in_a_container_a_mask_holds_when_buried_past_path_max() {
    let _alone = crate::container::ONE_AT_A_TIME.lock().await;
    let Some(_socket) = crate::container::engine().await else {
        return;
    };
    let ws = Workspace::new(bundled);
    ws.write("app/.env", format!("TOKEN={SECRET}\n"));
    crate::container::give_to_sandbox(&ws.path);
    let profile = crate::container::profile(
        "file.write = [\".\"]\nfile.deny = [\"**/.env\"]\nterminal.dangerous = \"allow\"\n",
    );
    let host = ws.host(&profile).await;
    buried_mask_holds(&host).await;
    unbury(&ws);
}

/// Buries `app` so that its own path fits in `PATH_MAX` and its `.env`'s
/// does not.
const BURY_JUST: &str = "python3 - <<'PY'
import os
base = os.getcwd()
os.mkdir('x'); os.rename('app', 'x/app'); top = 'x'
need = 4093 - (len(base) + len('/x/app'))
i = 0
while need > 0:
    k = min(200, need - 1)
    if need - (k + 1) == 1:
        k -= 1
    n = ('N%02d' % i + 'a' * 200)[:k]
    os.mkdir(n); os.rename(top, n + '/' + top); top = n; need -= k + 1; i += 1
print('buried', need)
PY";

#[tokio::test]
async fn a_denied_file_whose_path_just_passes_path_max_is_never_read() {
    let ws = Workspace::new(bundled);
    ws.write("app/.env", format!("TOKEN={SECRET}\n"));
    let host = ws.host(PROFILE).await;
    let buried = run(&host, BURY_JUST).await;
    assert!(buried.contains("buried 0"), "{buried}");
    let dug = run(&host, DIG).await;
    assert!(!dug.contains(SECRET), "the masked file was read: {dug}");
    assert!(dug.contains("cannot be looked at"), "{dug}");
    unbury(&ws);
}

/// A directory named with a byte that is not UTF-8, holding a masked file.
fn odd_name() -> &'static std::ffi::OsStr {
    std::ffi::OsStr::from_bytes(b"caf\xe9")
}

#[tokio::test]
async fn a_name_that_is_not_utf8_is_masked_and_stops_nothing() {
    let ws = Workspace::new(bundled);
    let odd = ws.path.join(odd_name());
    std::fs::create_dir(&odd).unwrap();
    std::fs::write(odd.join(".env"), format!("TOKEN={SECRET}\n")).unwrap();
    let host = ws.host(PROFILE).await;
    let ran = run(&host, "echo ran; cat caf*/.env; ls -b").await;
    assert!(ran.contains("ran\\n"), "{ran}");
    assert!(!ran.contains(SECRET), "the masked file was read: {ran}");
}

#[tokio::test]
async fn in_a_container_a_name_that_is_not_utf8_is_refused_by_name() {
    let _alone = crate::container::ONE_AT_A_TIME.lock().await;
    let Some(_socket) = crate::container::engine().await else {
        return;
    };
    let ws = Workspace::new(bundled);
    let odd = ws.path.join(odd_name());
    std::fs::create_dir(&odd).unwrap();
    std::fs::write(odd.join(".env"), format!("TOKEN={SECRET}\n")).unwrap();
    let profile = crate::container::profile(
        "file.write = [\".\"]\nfile.deny = [\"**/.env\"]\nterminal.dangerous = \"allow\"\n",
    );
    let host = ws.host(&profile).await;
    let ran = run(&host, "cat caf*/.env").await;
    assert!(!ran.contains(SECRET), "the masked file was read: {ran}");
    assert!(
        ran.contains("not UTF-8") && ran.contains("caf\\xe9"),
        "{ran}"
    );
}

/// The user toolhost runs as in [`not_as_root_an_unreadable_directory_hides_nothing`].
const USER: u32 = 1000;

/// `toolhost call run_command` of `line` in `ws`, as [`USER`] when the test
/// runs as root; what it printed.
fn run_as_user(ws: &Path, line: &str) -> String {
    call_as_user(ws, "run_command", json!({ "command": line }))
}

/// `toolhost call tool arguments` in `ws` as [`USER`].
fn call_as_user(ws: &Path, tool: &str, arguments: serde_json::Value) -> String {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut command = if root {
        let mut command = std::process::Command::new("setpriv");
        command.args([
            &format!("--reuid={USER}"),
            &format!("--regid={USER}"),
            "--clear-groups",
        ]);
        command.arg(crate::toolhost_cli());
        command
    } else {
        std::process::Command::new(crate::toolhost_cli())
    };
    let output = command
        .arg("--config")
        .arg(ws.join("toolhost.toml"))
        .args(["call", tool])
        .arg(arguments.to_string())
        .current_dir(ws)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", ws.join("home"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn not_as_root_an_unreadable_directory_hides_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let mark = ws.join("ran");
    std::fs::create_dir_all(ws.join("w/app")).unwrap();
    std::fs::create_dir_all(ws.join("home")).unwrap();
    std::fs::write(ws.join("w/app/.env"), format!("TOKEN={SECRET}\n")).unwrap();
    std::fs::write(
        ws.join("toolhost.toml"),
        "default_profile = \"p\"\naudit = \"off\"\ncache_dir = \"cache\"\nworkspace = \"w\"\n\
         [profiles.p]\nallow = [\"terminal:*\", \"file:read\", \"file:write\"]\n\
         file.read = [\".\"]\nfile.write = [\".\"]\nfile.deny = [\"**/.env\"]\n\
         terminal.dangerous = \"allow\"\n",
    )
    .unwrap();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args([
                "-c",
                "user.name=o",
                "-c",
                "user.email=o@o",
                "-c",
                "safe.directory=*",
            ])
            .args(args)
            .current_dir(ws.join("w"))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", ws.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap()
    };
    git(&["init", "-q", "proj"]);
    std::fs::write(ws.join("w/proj/a"), "a\n").unwrap();
    git(&["-C", "proj", "add", "a"]);
    git(&["-C", "proj", "commit", "-qm", "1"]);
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        let status = std::process::Command::new("chown")
            .args(["-R", &format!("{USER}:{USER}")])
            .arg(&ws)
            .status()
            .unwrap();
        assert!(status.success());
    }
    let hidden = run_as_user(&ws, "chmod 000 app proj; echo hidden");
    assert!(hidden.contains("hidden"), "{hidden}");
    let read = run_as_user(&ws, "chmod 755 app; cat app/.env");
    assert!(!read.contains(SECRET), "the masked file was read: {read}");
    let planted = run_as_user(
        &ws,
        &format!(
            "chmod 755 proj && git -C proj config core.fsmonitor 'touch {}; false' && echo planted",
            mark.display()
        ),
    );
    std::fs::set_permissions(
        ws.join("w/proj"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    git(&["-C", "proj", "status"]);
    assert!(
        !mark.exists(),
        "the owner's git ran what was planted: {planted}"
    );
    // What nobody can read or change stays out of the way of commands: a
    // directory of another user's, unreadable, in the grant.
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        std::fs::set_permissions(
            ws.join("w/app"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        std::fs::create_dir(ws.join("w/theirs")).unwrap();
        std::os::unix::fs::chown(ws.join("w/theirs"), Some(0), Some(0)).unwrap();
        std::fs::set_permissions(
            ws.join("w/theirs"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        let ran = run_as_user(&ws, "echo ran");
        assert!(ran.contains("ran\\n"), "{ran}");
    }
}

#[tokio::test]
async fn a_denied_file_is_masked_under_every_name_it_has_in_the_grants() {
    let ws = Workspace::new(bundled);
    ws.write(".env.example", "API_KEY=\n");
    let host = ws.host(PROFILE).await;
    let linked = run(
        &host,
        "cp .env.example env-template && ln env-template .env && echo linked",
    )
    .await;
    assert!(linked.contains("linked"), "{linked}");
    // The owner fills in the secret in place, as editors that keep links do.
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(ws.join(".env"))
        .and_then(|mut file| {
            std::io::Write::write_all(&mut file, format!("API_KEY={SECRET}\n").as_bytes())
        })
        .unwrap();
    let read = run(
        &host,
        "cat .env; cat env-template; grep -rs API_KEY . ; true",
    )
    .await;
    assert!(
        !read.contains(SECRET),
        "the denied file was read by another name: {read}"
    );
    // A name of the file's own, with no other, is not in the way.
    let other = run(&host, "echo mine > solo && cat solo").await;
    assert!(other.contains("mine"), "{other}");
}

/// A workspace for [`run_as_user`] with the grant `w`, denying `deny`;
/// owned by [`USER`] when the test runs as root.
fn user_workspace(deny: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join("w")).unwrap();
    std::fs::create_dir_all(ws.join("home")).unwrap();
    std::fs::write(
        ws.join("toolhost.toml"),
        format!(
            "default_profile = \"p\"\naudit = \"off\"\ncache_dir = \"cache\"\nworkspace = \"w\"\n\
             [profiles.p]\nallow = [\"terminal:*\", \"file:read\", \"file:write\"]\n\
             file.read = [\".\"]\nfile.write = [\".\"]\nfile.deny = {deny}\n\
             terminal.dangerous = \"allow\"\n"
        ),
    )
    .unwrap();
    dir
}

/// Gives `path` (recursively) to [`USER`] when the test runs as root.
fn give_to_user(path: &Path) {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        let status = std::process::Command::new("chown")
            .args(["-R", &format!("{USER}:{USER}")])
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

/// Host git in `dir` as the repository's owner would run it.
fn owner_git(dir: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args([
            "-c",
            "user.name=o",
            "-c",
            "user.email=o@o",
            "-c",
            "safe.directory=*",
        ])
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap()
}

#[test]
fn not_as_root_the_guard_puts_back_what_an_unsearchable_directory_hid() {
    use std::os::unix::fs::PermissionsExt;
    for hide in ["chmod 0 proj", "chmod 555 proj/.git; chmod 0 proj"] {
        let dir = user_workspace("[\"**/.env\"]");
        let ws = dir.path().canonicalize().unwrap();
        let mark = ws.join("ran");
        let proj = ws.join("w/proj");
        std::fs::create_dir(&proj).unwrap();
        owner_git(&proj, &ws.join("home"), &["init", "-q"]);
        std::fs::write(proj.join("a"), "a\n").unwrap();
        owner_git(&proj, &ws.join("home"), &["add", "a"]);
        owner_git(&proj, &ws.join("home"), &["commit", "-qm", "1"]);
        give_to_user(&ws);
        let planted = run_as_user(
            &ws,
            &format!(
                "cp -r proj/.git evil && printf '#!/bin/sh\\ntouch {mark}\\nexit 1\\n' > evil.sh \
                 && chmod +x evil.sh && printf '[core]\\n\\tfsmonitor = {w}/evil.sh\\n' >> evil/config \
                 && python3 - <<'PY'
import os, subprocess
fd = os.open('proj/.git', os.O_RDONLY | os.O_DIRECTORY)
hide = {hide:?}
if hide.startswith('chmod 555'):
    c = os.open('commondir', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd)
    os.write(c, b'{w}/evil\\n'); os.close(c)
    subprocess.run(hide, shell=True)
else:
    subprocess.run(hide, shell=True)
    c = os.open('commondir', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd)
    os.write(c, b'{w}/evil\\n'); os.close(c)
print('planted')
PY",
                mark = mark.display(),
                w = ws.join("w").display()
            ),
        );
        // The owner gives the directories back their permissions.
        for path in [&proj, &proj.join(".git")] {
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755));
        }
        run_as_user(&ws, "cat proj/.git/commondir");
        owner_git(&proj, &ws.join("home"), &["status"]);
        assert!(
            !mark.exists(),
            "after `{hide}`, the owner's git ran what was planted: {planted}"
        );
    }
}

#[test]
fn not_as_root_another_users_searchable_directory_hides_nothing() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: a directory of another user in the grant needs root to make");
        return;
    }
    let dir = user_workspace("[\"**/.env\", \"**/secrets/**\"]");
    let ws = dir.path().canonicalize().unwrap();
    let shared = ws.join("w/shared");
    std::fs::create_dir_all(shared.join("secrets")).unwrap();
    std::fs::write(shared.join(".env"), format!("TOKEN={SECRET}\n")).unwrap();
    std::fs::write(shared.join("secrets/key"), format!("{SECRET}\n")).unwrap();
    give_to_user(&ws);
    let status = std::process::Command::new("chown")
        .args(["-R", &format!("{}:{}", USER + 1, USER + 1)])
        .arg(&shared)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o711)).unwrap();
    let read = run_as_user(&ws, "echo ran; cat shared/.env shared/secrets/key");
    assert!(!read.contains(SECRET), "the masked file was read: {read}");
    assert!(read.contains("ran"), "{read}");
    // One that cannot be searched either is passed over.
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o700)).unwrap();
    let ran = run_as_user(&ws, "echo ran");
    assert!(ran.contains("ran\\n"), "{ran}");
}

#[test]
fn not_as_root_read_file_reaches_no_denied_file_in_an_unlistable_directory() {
    // Enterable but not listable; listable but not searchable; neither.
    for mode in ["311", "600", "000"] {
        let dir = user_workspace("[\"**/.env\"]");
        let ws = dir.path().canonicalize().unwrap();
        give_to_user(&ws);
        let made = run_as_user(
            &ws,
            &format!("mkdir app && : > app/.env && ln app/.env k && chmod {mode} app && echo made"),
        );
        assert!(made.contains("made"), "{mode}: {made}");
        // The owner fills the file, through its other name (its directory
        // cannot be entered now, whoever toolhost runs as but root).
        std::fs::write(ws.join("w/k"), format!("TOKEN={SECRET}\n")).unwrap();
        let read = call_as_user(&ws, "read_file", json!({ "path": "k" }));
        assert!(
            !read.contains(SECRET),
            "{mode}: read_file read the denied file: {read}"
        );
        let read = run_as_user(&ws, "chmod 700 app; cat k app/.env");
        assert!(
            !read.contains(SECRET),
            "{mode}: a command read the denied file: {read}"
        );
    }
}

/// A command makes a directory of its own unlistable (`chmod 000 d`): the
/// walks that must see every entry give it back its owner's permissions
/// (the command could have) rather than refuse every later call; one that
/// hid a denied name that way (`chmod 100 d`: searchable, not listable)
/// still has it masked.
#[test]
fn not_as_root_a_directory_a_command_made_unlistable_locks_nothing_out() {
    let dir = user_workspace("[\"**/.env\"]");
    let ws = dir.path().canonicalize().unwrap();
    std::fs::write(ws.join("w/a.txt"), "hello-a\n").unwrap();
    give_to_user(&ws);
    let locked = run_as_user(
        &ws,
        &format!(
            "mkdir d h && chmod 000 d && echo TOKEN={SECRET} > h/.env && chmod 100 h && echo locked"
        ),
    );
    assert!(locked.contains("locked"), "{locked}");
    let read = call_as_user(&ws, "read_file", json!({ "path": "a.txt" }));
    assert!(read.contains("hello-a"), "{read}");
    let ran = run_as_user(&ws, "cat h/.env; ls -d d; echo still-runs");
    assert!(ran.contains("still-runs"), "{ran}");
    assert!(!ran.contains(SECRET), "{ran}");
    let hidden = call_as_user(&ws, "read_file", json!({ "path": "h/.env" }));
    assert!(!hidden.contains(SECRET), "{hidden}");
}
