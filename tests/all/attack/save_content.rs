//! Attack tests: `toolhost call --save-content DIR` names the files it writes
//! itself (`TOOL-N.EXT`, the extension from the checked MIME type), never
//! after a plugin's URI, and never follows or replaces what is in DIR.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

/// Runs `toolhost call media_blob` with a resource at `uri`, saving into
/// `out` under `dir` (which holds the media guest in `plugins`).
fn save_blob(dir: &Path, uri: &str, mime_type: &str) -> Output {
    let arguments = json!({ "uri": uri, "mime_type": mime_type, "data": "planted" }).to_string();
    std::process::Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .current_dir(dir)
        .args(["--plugins", "plugins", "--no-bundled", "call"])
        .args(["--save-content", "out", "media_blob", &arguments])
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("plugins")).unwrap();
    std::fs::create_dir(dir.path().join("out")).unwrap();
    std::fs::copy(toolhost_tests::MEDIA, dir.path().join("plugins/media.wasm")).unwrap();
    dir
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_plugins_uri_never_names_the_saved_file() {
    let dir = project();
    let out = dir.path().join("out");
    let uris = [
        "https://reports.example/toolhost.toml",
        "https://reports.example/index.html",
        "https://reports.example/a/../x",
        "file:///conftest.py",
        "https://reports.example/Makefile?x#y",
    ];
    for (n, uri) in uris.iter().enumerate() {
        let output = save_blob(dir.path(), uri, "application/octet-stream");
        assert!(output.status.success(), "{uri}: {output:?}");
        let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
        // Each call starts at 1; the earlier calls' files push it on.
        let expected = format!("out/media_blob-{}.bin", n + 1);
        assert_eq!(printed["content"][0]["file"], expected, "{uri}: {printed}");
        assert_eq!(
            std::fs::read(dir.path().join(&expected)).unwrap(),
            b"planted"
        );
    }
    assert_eq!(
        names(&out),
        (1..=uris.len())
            .map(|n| format!("media_blob-{n}.bin"))
            .collect::<Vec<_>>()
    );
    assert_eq!(names(dir.path()), ["out", "plugins"]);
}

#[test]
fn an_existing_file_or_link_is_never_followed_or_replaced() {
    let dir = project();
    let out = dir.path().join("out");
    let outside = dir.path().join("outside.txt");
    std::fs::write(&outside, "the operator's").unwrap();
    // The first name is a link out of DIR, the second a file already there,
    // the third a dangling link.
    std::os::unix::fs::symlink(&outside, out.join("media_blob-1.pdf")).unwrap();
    std::fs::write(out.join("media_blob-2.pdf"), "kept").unwrap();
    std::os::unix::fs::symlink(dir.path().join("gone"), out.join("media_blob-3.pdf")).unwrap();

    let output = save_blob(dir.path(), "file:///report.pdf", "application/pdf");
    assert!(output.status.success(), "{output:?}");
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed["content"][0]["file"], "out/media_blob-4.pdf");
    assert_eq!(
        std::fs::read(out.join("media_blob-4.pdf")).unwrap(),
        b"planted"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "the operator's");
    assert_eq!(
        std::fs::read_to_string(out.join("media_blob-2.pdf")).unwrap(),
        "kept"
    );
    assert!(!dir.path().join("gone").exists());
    assert!(
        std::fs::symlink_metadata(out.join("media_blob-3.pdf"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}
