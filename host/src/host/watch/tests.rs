//! The watcher's decisions: which events may have changed a file, and what
//! a changed path is.

use notify::event::{AccessKind, AccessMode, CreateKind, EventKind, ModifyKind, RemoveKind};

use super::*;

#[test]
fn reading_a_file_is_no_change_and_closing_a_written_one_is() {
    assert!(!is_change(&EventKind::Access(AccessKind::Open(
        AccessMode::Read
    ))));
    assert!(!is_change(&EventKind::Access(AccessKind::Close(
        AccessMode::Read
    ))));
    assert!(!is_change(&EventKind::Access(AccessKind::Read)));
    assert!(is_change(&EventKind::Access(AccessKind::Close(
        AccessMode::Write
    ))));
    assert!(is_change(&EventKind::Create(CreateKind::File)));
    assert!(is_change(&EventKind::Modify(ModifyKind::Any)));
    assert!(is_change(&EventKind::Remove(RemoveKind::File)));
}

#[test]
fn a_path_is_the_config_the_directory_or_a_plugin_directly_in_it() {
    let watcher = notify::recommended_watcher(|_| {}).unwrap();
    let watched = Watched {
        dir: "/p".into(),
        config: Some("/etc/toolhost.toml".into()),
        watcher: Arc::new(std::sync::Mutex::new(watcher)),
    };
    let kind = |path: &str| watched.kind(Path::new(path));
    assert_eq!(kind("/etc/toolhost.toml"), Some(Kind::Config));
    assert_eq!(kind("/p"), Some(Kind::Directory));
    assert_eq!(kind("/p/echo.wasm"), Some(Kind::Plugin));
    assert_eq!(kind("/p/api.toml"), Some(Kind::Plugin));
    assert_eq!(kind("/p/jira.yaml"), Some(Kind::Plugin));
    assert_eq!(kind("/p/jira.yml"), Some(Kind::Plugin));
    assert_eq!(kind("/p/notes.txt"), None);
    assert_eq!(kind("/p/sub/echo.wasm"), None, "only the directory itself");
    assert_eq!(kind("/elsewhere/echo.wasm"), None);
}

#[test]
fn a_file_written_just_now_counts_as_still_changing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.wasm");
    assert_eq!(fingerprint(&path), None);
    assert!(!recently_modified(&path));
    std::fs::write(&path, b"1234").unwrap();
    assert_eq!(fingerprint(&path).map(|(len, _)| len), Some(4));
    assert!(recently_modified(&path));
}
