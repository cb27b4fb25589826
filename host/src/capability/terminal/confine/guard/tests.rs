//! The guard sets aside what appeared at a kept name and makes a replaced
//! link again, at once while watched.

use super::*;

#[test]
fn what_appeared_is_removed_and_a_replaced_link_made_again() {
    let dir = tempfile::tempdir().unwrap();
    let git = dir.path().join(".git");
    std::fs::create_dir(&git).unwrap();
    std::os::unix::fs::symlink("../hooks", git.join("hooks")).unwrap();
    let mut guard = Guard::default();
    let root = dir.path();
    guard.absent(root, git.join("commondir"));
    guard.absent(root, git.join("info"));
    guard.link(root, git.join("hooks"), "../hooks".into());
    assert_eq!(guard.undo(), Ok(()));

    std::fs::write(git.join("commondir"), "../evil\n").unwrap();
    std::fs::create_dir_all(git.join("info/deep")).unwrap();
    std::fs::remove_file(git.join("hooks")).unwrap();
    std::fs::create_dir(git.join("hooks")).unwrap();
    let reason = guard.undo().unwrap_err();
    assert!(
        reason.contains("commondir") && reason.contains("info") && reason.contains("hooks"),
        "{reason}"
    );
    assert!(!git.join("commondir").exists() && !git.join("info").exists());
    // Set aside beside their names, nothing in them removed; the reason
    // says where.
    let aside: Vec<_> = std::fs::read_dir(&git)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(beneath::ASIDE))
        .collect();
    assert_eq!(aside.len(), 3, "{aside:?}");
    for name in &aside {
        assert!(reason.contains(name.as_str()), "{reason}");
    }
    let info = aside.iter().find(|name| name.starts_with("info")).unwrap();
    assert!(git.join(info).join("deep").is_dir());
    assert_eq!(
        std::fs::read_link(git.join("hooks")).unwrap(),
        Path::new("../hooks")
    );
    assert_eq!(guard.undo(), Ok(()));
}

#[test]
fn a_watched_guard_is_put_back_as_soon_as_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let mut guard = Guard::default();
    guard.absent(dir.path(), dir.path().join("commondir"));
    let (sender, receiver) = std::sync::mpsc::channel();
    let sender = Mutex::new(sender);
    let watched = guard
        .watch(
            Box::new(move |reason| {
                let _ = sender.lock().unwrap().send(reason.to_string());
            }),
            None,
        )
        .expect("inotify");
    std::fs::write(dir.path().join("commondir"), "../evil").unwrap();
    let reason = receiver
        .recv_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    assert!(reason.contains("commondir"), "{reason}");
    assert!(!dir.path().join("commondir").exists());
    drop(watched);
}

/// Two guards keeping the same link, checked at once from two threads (the
/// watcher and a command's end do that): one puts it back, the other finds
/// it done. Neither reports a failure nor marks the path as planted for
/// good, and nothing correct is moved aside.
#[test]
fn guards_keeping_one_path_checked_at_once_neither_fail_nor_undo_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let git = dir.path().join(".git");
    std::fs::create_dir(&git).unwrap();
    let hooks = git.join("hooks");
    std::os::unix::fs::symlink("../hooks", &hooks).unwrap();
    let mut guard = Guard::default();
    guard.link(dir.path(), hooks.clone(), "../hooks".into());
    guard.absent(dir.path(), git.join("commondir"));
    let guards = [guard.clone(), guard];
    for round in 0..300 {
        std::fs::remove_file(&hooks).unwrap();
        std::fs::create_dir(&hooks).unwrap();
        std::fs::write(git.join("commondir"), "../evil\n").unwrap();
        let barrier = std::sync::Barrier::new(2);
        let reasons: Vec<Result<(), String>> = std::thread::scope(|scope| {
            let threads: Vec<_> = guards
                .iter()
                .map(|guard| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        guard.undo()
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        for reason in reasons.iter().filter_map(|r| r.as_ref().err()) {
            assert!(!reason.contains("could not"), "round {round}: {reason}");
        }
        assert_eq!(
            reasons.iter().filter(|r| r.is_err()).count(),
            1,
            "round {round}: {reasons:?}"
        );
        assert_eq!(std::fs::read_link(&hooks).unwrap(), Path::new("../hooks"));
        assert_eq!(unsettled(&hooks), None, "round {round}");
        // What was set aside is the planted directory and file, never the link.
        for entry in std::fs::read_dir(&git).unwrap() {
            let entry = entry.unwrap();
            if entry.file_name().to_string_lossy().contains(beneath::ASIDE) {
                assert!(
                    !entry.file_type().unwrap().is_symlink(),
                    "round {round}: a correct link was moved aside"
                );
                let path = entry.path();
                if path.is_dir() {
                    std::fs::remove_dir(&path).unwrap();
                } else {
                    std::fs::remove_file(&path).unwrap();
                }
            }
        }
    }
}

/// `chattr FLAG path`; false where it cannot be set (not root, a
/// filesystem without the attribute).
fn chattr(flag: &str, path: &Path) -> bool {
    std::process::Command::new("chattr")
        .arg(flag)
        .arg(path)
        .status()
        .is_ok_and(|status| status.success())
}

/// Where what a command planted cannot be moved aside (no room for the
/// longer name on a full disk; here a directory entries cannot be renamed
/// in), it is made harmless where it is, which needs no room: every
/// permission taken away, so that the owner's git and toolhost neither
/// read nor run it, and the answer says so. Run as root, whom permissions
/// do not stop, what it holds is emptied as well, except what the plan
/// masked (the owner's, moved there inside a directory).
#[test]
fn what_cannot_be_moved_aside_is_made_harmless_where_it_is() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let git = dir.path().join(".git");
    std::fs::create_dir(&git).unwrap();
    let mut guard = Guard::default();
    guard.absent(dir.path(), git.join("commondir"));
    guard.absent(dir.path(), git.join("hooks"));
    std::fs::write(git.join("commondir"), "../evil\n").unwrap();
    std::fs::create_dir_all(git.join("hooks/d")).unwrap();
    std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\necho ran\n").unwrap();
    std::os::unix::fs::symlink("/bin/sh", git.join("hooks/post-commit")).unwrap();
    // The owner's masked file, moved there inside a directory.
    std::fs::write(git.join("hooks/d/.env"), "KEY=owner\n").unwrap();
    guard.spare(&std::fs::metadata(git.join("hooks/d/.env")).unwrap());
    // Append-only: names may be added to it, none renamed.
    if !chattr("+a", &git) {
        eprintln!("skipped: chattr +a needs root and a filesystem that has it");
        return;
    }
    let reason = guard.undo();
    assert!(chattr("-a", &git));
    let reason = reason.unwrap_err();
    assert!(
        reason.contains("could not be moved aside") && reason.contains("mode 000"),
        "{reason}"
    );
    for name in ["commondir", "hooks", "hooks/d", "hooks/pre-commit"] {
        let mode = std::fs::symlink_metadata(git.join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0, "{name}: {mode:o}");
    }
    // chattr +a worked: this is root. What was planted is empty, the link
    // in it gone, the owner's file whole.
    assert!(
        reason.contains("files truncated: 1, links removed: 0)"),
        "{reason}"
    );
    assert!(
        reason.contains(
            "files truncated: 1, links removed: 1, files the sandbox masked left whole: 1)"
        ),
        "{reason}"
    );
    for name in ["commondir", "hooks/pre-commit"] {
        assert_eq!(
            std::fs::metadata(git.join(name)).unwrap().size(),
            0,
            "{name}"
        );
    }
    assert!(std::fs::symlink_metadata(git.join("hooks/post-commit")).is_err());
    assert_eq!(
        std::fs::read_to_string(git.join("hooks/d/.env")).unwrap(),
        "KEY=owner\n"
    );
    // The owner can look and remove it.
    std::fs::set_permissions(git.join("hooks"), std::fs::Permissions::from_mode(0o700)).unwrap();
}
