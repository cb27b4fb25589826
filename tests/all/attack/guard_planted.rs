//! Attack tests: what a command leaves at a name the repository guard
//! keeps is set aside whole, under a name no command can take ahead,
//! without holding up the guards of other sandboxes.

use std::path::Path;
use std::time::{Duration, Instant};

use super::guard::{WRITABLE, bundled, owner_git, run};
use crate::Workspace;

/// Every file beneath `dir` named `name`, with its content.
fn found(dir: &Path, name: &str) -> Vec<(std::path::PathBuf, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            found.extend(self::found(&path, name));
        } else if entry.file_name() == name {
            found.push((
                path.clone(),
                std::fs::read_to_string(&path).unwrap_or_default(),
            ));
        }
    }
    found
}

/// A command moves the owner's directory, holding a `.env` that
/// `file.deny` masks and (as root) another user's files, into a name the
/// guard keeps absent or a link: the guard takes it out of the kept name
/// without destroying what the command could neither read nor remove.
#[tokio::test]
async fn the_guard_destroys_nothing_a_command_moved_into_a_kept_name() {
    let outside = tempfile::tempdir().unwrap();
    for linked in [false, true] {
        let ws = Workspace::new(bundled);
        let proj = ws.join("proj");
        let proj_s = proj.to_str().unwrap();
        owner_git(outside.path(), &["init", "-q", proj_s]);
        owner_git(
            outside.path(),
            &["-C", proj_s, "config", "core.hooksPath", ".githooks"],
        );
        ws.write("proj/app/.env", "API_KEY=owner\n");
        ws.write("proj/app/shared/bob.txt", "bob's\n");
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(proj.join("app/shared"), Some(3000), Some(3000)).unwrap();
            std::os::unix::fs::chown(proj.join("app/shared/bob.txt"), Some(3000), Some(3000))
                .unwrap();
        }
        let plant = if linked {
            ws.mkdir("proj/tools/hooks");
            std::os::unix::fs::symlink("tools/hooks", proj.join(".githooks")).unwrap();
            "rm proj/.githooks && mv proj/app proj/.githooks"
        } else {
            "mkdir proj/stage && mv proj/app proj/stage/ && mv proj/stage proj/.githooks"
        };
        let host = ws.host(WRITABLE).await;
        let masked = run(&host, "cat proj/app/.env; echo read").await;
        assert!(!masked.contains("API_KEY"), "{masked}");
        let result = run(&host, &format!("{plant} && echo moved")).await;
        let env = found(&proj, ".env");
        let bob = found(&proj, "bob.txt");
        assert_eq!(
            env.iter()
                .map(|(_, text)| text.as_str())
                .collect::<Vec<_>>(),
            ["API_KEY=owner\n"],
            "linked: {linked}: the guard destroyed the owner's masked .env ({result})"
        );
        assert_eq!(
            bob.len(),
            1,
            "linked: {linked}: the guard destroyed bob.txt ({result})"
        );
        let githooks = proj.join(".githooks").symlink_metadata();
        if linked {
            assert_eq!(
                std::fs::read_link(proj.join(".githooks")).ok(),
                Some("tools/hooks".into())
            );
        } else {
            assert!(githooks.is_err(), "the planted .githooks stayed ({result})");
        }
        let aside = env[0]
            .0
            .strip_prefix(&proj)
            .unwrap()
            .components()
            .next()
            .unwrap();
        let aside = aside.as_os_str().to_string_lossy().into_owned();
        assert!(
            result.contains(&aside),
            "linked: {linked}: the refusal does not say the planted tree is now {aside}: {result}"
        );
    }
}

/// A command learns where the guard moves a planted directory (through a
/// descriptor it holds of it) and takes, ahead, the names the guard would
/// choose next: the next plant is taken away all the same.
#[tokio::test]
async fn a_name_taken_ahead_leaves_no_planted_hook_in_place() {
    let outside = tempfile::tempdir().unwrap();
    let mark = outside.path().join("ran");
    let ws = Workspace::new(bundled);
    let r2 = ws.join("r2");
    let r2_s = r2.to_str().unwrap();
    owner_git(outside.path(), &["init", "-q", r2_s]);
    std::fs::remove_dir_all(r2.join(".git/hooks")).unwrap();
    let host = ws.host(WRITABLE).await;
    run(
        &host,
        "mkdir r2/.git/st && touch r2/.git/st/f$(seq -s ' r2/.git/st/f' 20000) && \
         { (exec 3<r2/.git/st; while :; do readlink /proc/self/fd/3; done > seen.txt) & } \
         && sleep 0.3 && mv r2/.git/st r2/.git/hooks; sleep 2",
    )
    .await;
    let learned = std::fs::read_to_string(ws.join("seen.txt")).unwrap_or_default();
    let seen = learned
        .split(['\n', ' '])
        .filter_map(|word| Path::new(word).file_name()?.to_str())
        .find(|name| name.starts_with(".toolhost") || name.starts_with("hooks."))
        .map(str::to_string);
    // The names that follow the one seen, where it counts up.
    let taken = seen.as_deref().map_or(String::new(), |seen| {
        let (stem, last) = seen.rsplit_once('.').unwrap_or((seen, ""));
        let next: u64 = last.parse().unwrap_or(0);
        (next..next + 500)
            .map(|n| format!("touch r2/.git/'{stem}.{n}'; "))
            .collect()
    });
    run(&host, &taken).await;
    let planted = run(
        &host,
        &format!(
            "mkdir r2/p && printf '#!/bin/sh\\ntouch {}\\n' > r2/p/pre-commit && chmod +x \
             r2/p/pre-commit && mv r2/p r2/.git/hooks && echo planted",
            mark.display()
        ),
    )
    .await;
    owner_git(
        outside.path(),
        &["-C", r2_s, "commit", "-q", "--allow-empty", "-m", "x"],
    );
    assert!(
        !mark.exists(),
        "the owner's commit ran a hook planted after taking {seen:?} and what follows: {planted}"
    );
    assert!(!r2.join(".git/hooks").exists(), "{planted}");
}

/// A command keeps making directories in the tree it plants at a kept
/// name, through a descriptor it holds; meanwhile another command plants
/// a hook in another repository: that one is taken away at once, and the
/// other command is not held up. Unlike the others here, this one passed
/// before the fix too (the in-process host did not show the stall a
/// server showed); it keeps setting aside from ever growing with the tree.
#[tokio::test]
async fn a_planted_tree_that_keeps_growing_holds_up_no_other_guard() {
    let outside = tempfile::tempdir().unwrap();
    let mark = outside.path().join("ran");
    let ws = Workspace::new(bundled);
    let (proj, r2) = (ws.join("proj"), ws.join("r2"));
    owner_git(outside.path(), &["init", "-q", proj.to_str().unwrap()]);
    owner_git(
        outside.path(),
        &[
            "-C",
            proj.to_str().unwrap(),
            "config",
            "core.hooksPath",
            ".githooks",
        ],
    );
    owner_git(outside.path(), &["init", "-q", r2.to_str().unwrap()]);
    std::fs::remove_dir_all(r2.join(".git/hooks")).unwrap();
    ws.write(
        "filler.py",
        "import os, sys, time\nfd = os.open(sys.argv[1], os.O_RDONLY)\nend = time.time() + 15\n\
         while time.time() < end:\n    for i in range(500):\n        try: os.mkdir('d%d' % i, dir_fd=fd)\n\
         \x20       except OSError: pass\n",
    );
    let host = ws.host(WRITABLE).await;
    let filler = run(
        &host,
        "mkdir -p proj/stage/x && (python3 filler.py proj/stage/x &) && sleep 1 \
         && mv proj/stage proj/.githooks && sleep 15",
    );
    let other = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let start = Instant::now();
        let planted = run(
            &host,
            &format!(
                "mkdir -p r2/.git/hooks && printf '#!/bin/sh\\ntouch {}\\n' > \
                 r2/.git/hooks/pre-commit && chmod +x r2/.git/hooks/pre-commit && echo planted",
                mark.display()
            ),
        )
        .await;
        let took = start.elapsed();
        owner_git(
            outside.path(),
            &[
                "-C",
                r2.to_str().unwrap(),
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "x",
            ],
        );
        (planted, took)
    };
    let (_, (planted, took)) = tokio::join!(filler, other);
    assert!(
        !mark.exists(),
        "the owner's commit ran a hook planted while another tree grew: {planted}"
    );
    assert!(
        took < Duration::from_secs(8),
        "the other command took {took:?}: {planted}"
    );
}

/// The owner's configuration includes a file in a directory that does not
/// exist yet; a command makes the directory, then plants the file: the
/// guard watches the directory from the moment it appears, so the plant
/// is set aside and the command ended at once, not when it ends.
#[tokio::test]
async fn a_plant_below_a_directory_made_after_the_command_started_is_seen_at_once() {
    let outside = tempfile::tempdir().unwrap();
    let ws = Workspace::new(bundled);
    let proj = ws.join("proj");
    let proj_s = proj.to_str().unwrap();
    owner_git(outside.path(), &["init", "-q", proj_s]);
    owner_git(
        outside.path(),
        &[
            "-C",
            proj_s,
            "config",
            "include.path",
            "../conf/local.gitconfig",
        ],
    );
    let host = ws.host(WRITABLE).await;
    let started = Instant::now();
    let result = run(
        &host,
        "mkdir proj/conf && sleep 0.5 && printf '[core]\\n\\tfsmonitor = true\\n' \
         > proj/conf/local.gitconfig && sleep 8; echo $((6 * 7))-finished",
    )
    .await;
    let took = started.elapsed();
    assert!(!result.contains("42-finished"), "{result}");
    assert!(result.contains("toolhost-planted-"), "{result}");
    assert!(took < Duration::from_secs(6), "{took:?}: {result}");
    assert!(!proj.join("conf/local.gitconfig").exists(), "{result}");
}

/// A command's inotify instances are its sandbox's own few: it cannot take
/// every one of toolhost's user (the guard's own was taken at start).
#[tokio::test]
async fn a_command_takes_at_most_two_inotify_instances() {
    let ws = Workspace::new(bundled);
    let host = ws.host(WRITABLE).await;
    let result = run(
        &host,
        "python3 -c 'import ctypes; l = ctypes.CDLL(None); \
         print(sum(l.inotify_init1(0) >= 0 for _ in range(200)), \"instances\")'",
    )
    .await;
    assert!(result.contains("2 instances"), "{result}");
}

/// Fills the disk and the git directory's entries (argv: git directory,
/// the kept name to plant at, the name length that fills the last slot),
/// then renames a directory holding an executable `pre-commit` to it.
const FILL: &str = r##"
import os, sys
g, plant, hole = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(f"{g}/x", exist_ok=True)
with open(f"{g}/x/pre-commit", "w") as f:
    f.write("#!/bin/sh\necho ran > \"$(git rev-parse --show-toplevel)/../PWNED\"\n")
os.chmod(f"{g}/x/pre-commit", 0o755)
fd = os.open("fill", os.O_WRONLY | os.O_CREAT, 0o644)
for size in (1 << 20, 65536, 4096, 1024, 1):
    while True:
        try:
            if os.write(fd, b"\0" * size) <= 0: break
        except OSError: break
os.fsync(fd); os.close(fd)
n = 0; made = []
while True:
    name = f"{g}/" + ("f%0*d" % (hole - 1, n))
    try: open(name, "w").close()
    except OSError: break
    made.append(name); n += 1
for L in range(hole - 1, 0, -1):
    k = 0
    while True:
        name = f"{g}/" + ("s%0*d" % (L - 1, k)) if L > 1 else f"{g}/" + chr(ord('A') + k)
        try: open(name, "w").close()
        except OSError: break
        k += 1
        if L == 1 and k >= 26: break
os.unlink(made[len(made) // 2])
os.rename(f"{g}/x", f"{g}/{plant}")
print("planted", flush=True)
"##;

/// A loop-mounted ext4 made without blocks reserved for root, unmounted
/// when dropped; `None` where that cannot be made (not root, no loop
/// devices).
struct NoReserve(tempfile::TempDir);

impl NoReserve {
    fn new() -> Option<Self> {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("image");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let ok = |program: &str, args: &[&std::ffi::OsStr]| {
            std::process::Command::new(program)
                .args(args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let made = ok(
            "truncate",
            &["-s".as_ref(), "16M".as_ref(), image.as_os_str()],
        ) && ok(
            "mkfs.ext4",
            &[
                "-q".as_ref(),
                "-m".as_ref(),
                "0".as_ref(),
                "-F".as_ref(),
                image.as_os_str(),
            ],
        ) && ok(
            "mount",
            &[
                "-o".as_ref(),
                "loop".as_ref(),
                image.as_os_str(),
                mnt.as_os_str(),
            ],
        );
        made.then_some(Self(dir))
    }

    fn path(&self) -> std::path::PathBuf {
        self.0.path().join("mnt")
    }
}

impl Drop for NoReserve {
    fn drop(&mut self) {
        for _ in 0..10 {
            let done = std::process::Command::new("umount")
                .arg(self.path())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if done {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// toolhost and the owner root, on a disk with no blocks reserved for root
/// (XFS, btrfs, ext4 `-m 0`): a command fills it and the git directory's
/// entries, then renames a directory holding an executable hook to the
/// kept-absent `hooks`. The guard cannot move it aside (no room), and
/// permissions do not stop root: what it holds is emptied where it is, so
/// the owner's next commit runs nothing.
#[test]
fn on_a_full_disk_without_a_root_reserve_a_planted_hook_never_runs_for_root() {
    crate::use_launcher();
    let Some(disk) = NoReserve::new() else {
        eprintln!("skipped: needs root and a loop-mounted ext4");
        return;
    };
    let dir = disk.path().join("d");
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("fill.py"), FILL).unwrap();
    let home = tempfile::tempdir().unwrap();
    let r2 = ws.join("r2");
    let r2 = r2.to_str().unwrap();
    owner_git(home.path(), &["init", "-q", r2]);
    std::fs::remove_dir_all(ws.join("r2/.git/hooks")).unwrap();
    std::fs::write(
        dir.join("toolhost.toml"),
        "cache_dir = \"cache\"\nworkspace = \"ws\"\ndefault_profile = \"agent\"\n\
         [profiles.agent]\nallow = [\"terminal:*\", \"file:read\", \"file:write\"]\n\
         file.read = [\".\"]\nfile.write = [\".\"]\nterminal.dangerous = \"allow\"\n\
         terminal.timeout = \"60s\"\n",
    )
    .unwrap();
    let planted = super::masks::cli(
        &dir,
        "run_command",
        serde_json::json!({ "command": "python3 fill.py r2/.git hooks 5; sleep 5" }),
    );
    assert!(planted.contains("could not be moved aside"), "{planted}");
    assert!(planted.contains("emptied"), "{planted}");
    let hook = ws.join("r2/.git/hooks/pre-commit");
    assert_eq!(
        std::fs::metadata(&hook).map(|m| m.len()).ok(),
        Some(0),
        "{planted}"
    );
    // The owner frees the room and commits.
    std::fs::remove_file(ws.join("fill")).unwrap();
    let commit = owner_git(
        home.path(),
        &["-C", r2, "commit", "-q", "--allow-empty", "-m", "owner"],
    );
    assert!(commit.status.success(), "{commit:?}");
    assert!(
        !ws.join("PWNED").exists(),
        "the planted hook ran: {planted}"
    );
}
