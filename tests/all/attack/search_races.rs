//! Attack tests: files swapped while `search_files` walks and reads them.
//! Opens that only read take a short path through the host (the kernel
//! resolves the name with no symlink on the way); a symlink swapped in for
//! a file or a directory, or a directory renamed into a denied place and
//! back, must never let a search read what `file.deny` covers.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;
use toolhost::HostBuilder;

use crate::Workspace;

fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

/// In the denied files only (and never in a file while it may be read).
const SECRET: &str = "race-secret-5521";

const PROFILE: &str = r#"
allow = ["file:read"]
file.read = ["."]
file.deny = ["**/secrets/**"]
"#;

/// Replaces `path` with a new file holding `content` (a new inode, so a
/// descriptor opened on the old one never sees it).
fn replace(path: &Path, content: &str) {
    let temp = path.with_extension("tmp-swap");
    std::fs::write(&temp, content).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// Swaps, until `stop`: `tree/file/f.txt` between a file and a symlink to a
/// denied file; `tree/dir` between a directory and a symlink to the denied
/// directory; `tree/moving` into the denied directory (where its file
/// holds the secret, as a new file) and back (public again, before it
/// leaves).
fn swap(root: &Path, stop: &AtomicBool) -> usize {
    let tree = root.join("tree");
    let mut rounds = 0;
    while !stop.load(Ordering::Relaxed) {
        let file = tree.join("file/f.txt");
        let _ = std::fs::remove_file(&file);
        std::os::unix::fs::symlink("../../secrets/s.txt", &file).unwrap();
        let _ = std::fs::remove_file(&file);
        std::fs::write(&file, "public needle\n").unwrap();

        let dir = tree.join("dir");
        let aside = tree.join("dir-aside");
        std::fs::rename(&dir, &aside).unwrap();
        std::os::unix::fs::symlink("../secrets", &dir).unwrap();
        std::fs::remove_file(&dir).unwrap();
        std::fs::rename(&aside, &dir).unwrap();

        let moving = tree.join("moving");
        let hidden = root.join("secrets/moving");
        std::fs::rename(&moving, &hidden).unwrap();
        replace(&hidden.join("f.txt"), &format!("{SECRET} needle\n"));
        replace(&hidden.join("f.txt"), "public needle\n");
        std::fs::rename(&hidden, &moving).unwrap();
        rounds += 1;
    }
    rounds
}

#[tokio::test]
async fn swapped_links_and_renames_never_yield_denied_content() {
    let ws = Workspace::new(bundled);
    ws.write("secrets/s.txt", format!("{SECRET} needle\n"));
    ws.write("secrets/f.txt", format!("{SECRET} needle\n"));
    ws.write("tree/file/f.txt", "public needle\n");
    ws.write("tree/dir/f.txt", "public needle\n");
    ws.write("tree/moving/f.txt", "public needle\n");
    for i in 0..200 {
        ws.write(&format!("tree/plain/p{i:03}.txt"), "public needle\n");
    }
    let host = ws.host(PROFILE).await;

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let root = ws.path.clone();
        let stop = stop.clone();
        std::thread::spawn(move || swap(&root, &stop))
    };
    let mut searched = 0;
    for _ in 0..40 {
        for path in ["tree", "tree/dir", "tree/file", "tree/moving"] {
            let arguments = json!({"pattern": "needle", "path": path, "max_results": 1000});
            // A path swapped away mid-call may fail the call; what matters
            // is what a call that answers holds.
            if let Ok(found) = host.call("search_files", arguments).await {
                let found = found.get().to_string();
                assert!(!found.contains(SECRET), "{path}: {found}");
                searched += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = swapper.join().unwrap();
    assert!(rounds > 10, "the files were swapped only {rounds} times");
    assert!(searched > 40, "only {searched} searches answered");

    // Allowed: with nothing swapping, the public files are found.
    let found = host
        .call(
            "search_files",
            json!({"pattern": "needle", "path": "tree", "max_results": 1000}),
        )
        .await
        .unwrap();
    let found: serde_json::Value = serde_json::from_str(found.get()).unwrap();
    assert_eq!(found["count"], 203, "{found}");
    assert!(!found.to_string().contains(SECRET));
}

/// Reads of the held file while it moves.
const READS: usize = 1500;

/// Moves `tree/held` (a granted directory, which the guest holds open as a
/// preopen) into the denied directory, where its file holds the secret (a
/// new file), and back (public again, before it leaves), until `stop`.
fn move_held(root: &Path, stop: &AtomicBool) -> usize {
    let held = root.join("tree/held");
    let hidden = root.join("secrets/held");
    let mut rounds = 0;
    let pause = std::time::Duration::from_micros(300);
    while !stop.load(Ordering::Relaxed) {
        std::fs::rename(&held, &hidden).unwrap();
        replace(&hidden.join("f.txt"), &format!("{SECRET}\n"));
        std::thread::sleep(pause);
        replace(&hidden.join("f.txt"), "public\n");
        std::fs::rename(&hidden, &held).unwrap();
        std::thread::sleep(pause);
        rounds += 1;
    }
    rounds
}

#[tokio::test]
async fn a_held_directory_moved_into_a_denied_place_never_yields_its_content() {
    fn files(builder: HostBuilder) -> HostBuilder {
        builder.plugin_file(toolhost_tests::FILES)
    }
    let ws = Workspace::new(files);
    ws.write("secrets/other.txt", "x");
    let file = ws.write("tree/held/f.txt", "public\n");
    // `tree/held` is a grant of its own: the guest opens the file by its
    // absolute path through that directory's descriptor, which follows the
    // directory wherever it is moved.
    let host = ws
        .host(
            r#"
allow = ["file:read"]
file.read = [".", "tree/held"]
file.deny = ["**/secrets/**"]
"#,
        )
        .await;
    let path = file.to_string_lossy().into_owned();

    // Allowed: read where it is.
    let read = host.call("read", json!({ "path": path })).await.unwrap();
    assert_eq!(read.get(), r#"{"ok":"public\n"}"#);

    let stop = Arc::new(AtomicBool::new(false));
    let mover = {
        let root = ws.path.clone();
        let stop = stop.clone();
        std::thread::spawn(move || move_held(&root, &stop))
    };
    let mut read_public = 0;
    for _ in 0..READS {
        let read = host.call("read", json!({ "path": path })).await.unwrap();
        let read = read.get();
        assert!(!read.contains(SECRET), "read {read}");
        read_public += usize::from(read.contains(r#""ok":"public"#));
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = mover.join().unwrap();
    assert!(rounds > 10, "the directory moved only {rounds} times");
    // Denied: read where it was moved to, by that name.
    let moved = ws.path.join("secrets/held-now");
    std::fs::rename(ws.path.join("tree/held"), &moved).unwrap();
    let denied = host
        .call("read", json!({ "path": moved.join("f.txt") }))
        .await
        .unwrap();
    assert!(denied.get().contains(r#""error""#), "{}", denied.get());
    // Some reads land while it is in place.
    assert!(read_public > 0, "no read found the public file");
}
