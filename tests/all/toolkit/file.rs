//! The `file` toolset: reading, writing, editing and comparing files.

use std::path::PathBuf;

use serde_json::{Value, json};
use toolhost::ErrorKind;

use super::{FILES, assert_contains, bundled, fails, ok};
use crate::Workspace;

/// The paths of a `list_dir` answer.
pub(super) fn entry_paths(listing: &Value) -> Vec<&str> {
    listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect()
}

/// A workspace with a few files, one denied file and one outside it.
pub(super) fn files_workspace() -> (Workspace, PathBuf) {
    let ws = Workspace::new(bundled);
    let lines: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    ws.write("ten.txt", lines);
    ws.write(".env", "SECRET=1\n");
    ws.write("secrets/key.txt", "needle in a secret\n");
    ws.write("src/main.rs", "fn main() {\n    // needle\n}\n");
    ws.write("src/lib.rs", "pub fn needle() {}\n");
    ws.write("docs/guide.md", "# Guide\nno match here\n");
    std::fs::create_dir_all(ws.path.join("out")).unwrap();
    let outside = ws.path.join("../outside.txt");
    std::fs::write(&outside, "outside").unwrap();
    (ws, outside)
}

#[tokio::test]
async fn read_file_returns_a_window_of_lines_and_where_to_continue() {
    let (ws, _) = files_workspace();
    let host = ws.host(FILES).await;

    let window = ok(
        &host,
        "read_file",
        json!({"path": "ten.txt", "offset": 3, "limit": 2}),
    )
    .await;
    assert_eq!(window["content"], "line 3\nline 4\n");
    assert_eq!(window["start_line"], 3);
    assert_eq!(window["end_line"], 4);
    assert_eq!(window["next_offset"], 5);
    assert_eq!(window["eof"], false);

    let numbered = ok(
        &host,
        "read_file",
        json!({"path": "ten.txt", "offset": 9, "line_numbers": true}),
    )
    .await;
    assert_eq!(numbered["content"], "     9\tline 9\n    10\tline 10\n");
    assert_eq!(numbered["eof"], true);
    assert!(numbered.get("next_offset").is_none(), "{numbered}");

    // The byte cap stops before the line that would pass it.
    let capped = ok(
        &host,
        "read_file",
        json!({"path": "ten.txt", "max_bytes": 15}),
    )
    .await;
    assert_eq!(capped["content"], "line 1\nline 2\n");
    assert_eq!(capped["next_offset"], 3);
    assert_contains(capped["note"].as_str().unwrap(), "max_bytes");

    let message = fails(
        &host,
        "read_file",
        json!({"path": "ten.txt", "offset": 12}),
        ErrorKind::InvalidArguments,
    )
    .await;
    assert_contains(&message, "past the end of ten.txt, which has 10 lines");
}

#[tokio::test]
async fn read_file_refuses_denied_paths_and_sees_nothing_outside_the_grants() {
    let (ws, outside) = files_workspace();
    let host = ws.host(FILES).await;
    assert_eq!(
        ok(&host, "read_file", json!({"path": ws.path.join("ten.txt")})).await["end_line"],
        10
    );
    for denied in [".env", "secrets/key.txt", "src/../.env"] {
        let message = fails(
            &host,
            "read_file",
            json!({ "path": denied }),
            ErrorKind::Denied,
        )
        .await;
        assert_contains(&message, "is not allowed");
        assert_contains(&message, "file.deny");
    }
    for missing in [outside.to_str().unwrap(), "../outside.txt", "/etc/passwd"] {
        let message = fails(
            &host,
            "read_file",
            json!({ "path": missing }),
            ErrorKind::InvalidArguments,
        )
        .await;
        assert_contains(&message, "no such file or directory");
    }
}

#[tokio::test]
async fn read_file_refuses_binary_files_unless_asked_for_base64() {
    let (ws, _) = files_workspace();
    ws.write("blob.bin", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    let host = ws.host(FILES).await;
    let message = fails(
        &host,
        "read_file",
        json!({"path": "blob.bin"}),
        ErrorKind::InvalidArguments,
    )
    .await;
    assert_contains(&message, "looks like a binary file");
    let raw = ok(
        &host,
        "read_file",
        json!({"path": "blob.bin", "encoding": "base64", "offset": 1, "max_bytes": 3}),
    )
    .await;
    assert_eq!(raw["base64"], "UE5H");
    assert_eq!(raw["next_offset"], 4);
}

#[tokio::test]
async fn write_file_creates_directories_and_leaves_no_temporary_file() {
    let (ws, _) = files_workspace();
    let host = ws.host(FILES).await;
    let wrote = ok(
        &host,
        "write_file",
        json!({"path": "out/a/b/new.txt", "content": "one\ntwo\n"}),
    )
    .await;
    assert_eq!(
        wrote,
        json!({"path": "out/a/b/new.txt", "bytes": 8, "lines": 2, "created": true})
    );
    assert_eq!(ws.read("out/a/b/new.txt"), "one\ntwo\n");

    let replaced = ok(
        &host,
        "write_file",
        json!({"path": "out/a/b/new.txt", "content": "three"}),
    )
    .await;
    assert_eq!(replaced["created"], false);
    assert_eq!(ws.read("out/a/b/new.txt"), "three");
    let names: Vec<_> = std::fs::read_dir(ws.path.join("out/a/b"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["new.txt"]);

    let message = fails(
        &host,
        "write_file",
        json!({"path": "out/a/b/new.txt", "content": "x", "overwrite": false}),
        ErrorKind::InvalidArguments,
    )
    .await;
    assert_contains(&message, "already exists");
    assert_eq!(ws.read("out/a/b/new.txt"), "three");
}

#[tokio::test]
async fn write_file_is_denied_outside_the_write_grants_and_unavailable_read_only() {
    let (ws, _) = files_workspace();
    let host = ws.host(FILES).await;
    for path in ["ten.txt", "secrets/new.txt", "out/../.env"] {
        let message = fails(
            &host,
            "write_file",
            json!({ "path": path, "content": "x" }),
            ErrorKind::Denied,
        )
        .await;
        assert_contains(&message, "is not allowed");
    }
    assert!(ws.read("ten.txt").starts_with("line 1\n"));
    assert!(!ws.path.join("secrets/new.txt").exists());
    assert_eq!(ws.read(".env"), "SECRET=1\n");

    let read_only = ws
        .host("allow = [\"file:read\"]\nfile.read = [\".\"]")
        .await;
    for (tool, arguments) in [
        ("write_file", json!({"path": "out/x.txt", "content": "x"})),
        (
            "edit_file",
            json!({"path": "out/x.txt", "old_text": "a", "new_text": "b"}),
        ),
    ] {
        let message = fails(&read_only, tool, arguments, ErrorKind::Unavailable).await;
        assert_contains(&message, "file:write");
    }
    assert!(!ws.path.join("out/x.txt").exists());
}

#[tokio::test]
async fn edit_file_replaces_a_unique_match_and_shows_the_diff() {
    let (ws, _) = files_workspace();
    ws.write(
        "out/code.rs",
        "fn a() {\n    one();\n}\nfn b() {\n    two();\n}\n",
    );
    let host = ws.host(FILES).await;
    let edited = ok(
        &host,
        "edit_file",
        json!({"path": "out/code.rs", "old_text": "    two();\n", "new_text": "    2();\n"}),
    )
    .await;
    assert_eq!(edited["replacements"], 1);
    assert_eq!(edited["line"], 5);
    assert_contains(edited["diff"].as_str().unwrap(), "-    two();\n+    2();\n");
    assert_eq!(
        ws.read("out/code.rs"),
        "fn a() {\n    one();\n}\nfn b() {\n    2();\n}\n"
    );

    let all = ok(
        &host,
        "edit_file",
        json!({"path": "out/code.rs", "old_text": "fn ", "new_text": "pub fn ", "replace_all": true}),
    )
    .await;
    assert_eq!(all["replacements"], 2);
    assert_eq!(ws.read("out/code.rs").matches("pub fn ").count(), 2);
}

#[tokio::test]
async fn edit_file_refuses_text_that_is_missing_or_found_twice() {
    let (ws, _) = files_workspace();
    let original = "x = 1\ny = 2\nx = 1\n    indented()\n";
    ws.write("out/conf.txt", original);
    let host = ws.host(FILES).await;

    let message = fails(
        &host,
        "edit_file",
        json!({"path": "out/conf.txt", "old_text": "x = 1", "new_text": "x = 3"}),
        ErrorKind::InvalidArguments,
    )
    .await;
    assert_contains(&message, "found 2 times in out/conf.txt (at lines 1, 3)");
    assert_contains(&message, "replace_all");

    let message = fails(
        &host,
        "edit_file",
        json!({"path": "out/conf.txt", "old_text": "z = 9", "new_text": "z = 0"}),
        ErrorKind::InvalidArguments,
    )
    .await;
    assert_contains(
        &message,
        "was not found in out/conf.txt; nothing was changed",
    );

    // Wrong indentation: the message points at the line that nearly matches.
    let message = fails(
        &host,
        "edit_file",
        json!({"path": "out/conf.txt", "old_text": "\tindented()", "new_text": "x"}),
        ErrorKind::InvalidArguments,
    )
    .await;
    assert_contains(&message, "appears at line 4");
    assert_eq!(ws.read("out/conf.txt"), original);
}

#[tokio::test]
async fn file_diff_compares_two_files_or_a_file_and_proposed_content() {
    let (ws, _) = files_workspace();
    ws.write("a.txt", "one\ntwo\nthree\n");
    ws.write("b.txt", "one\n2\nthree\nfour\n");
    let host = ws.host(FILES).await;
    let diff = ok(
        &host,
        "file_diff",
        json!({"path": "a.txt", "other_path": "b.txt"}),
    )
    .await;
    assert_eq!(
        diff["diff"],
        "--- a/a.txt\n+++ b/b.txt\n@@ -1,3 +1,4 @@\n one\n-two\n+2\n three\n+four\n"
    );
    assert_eq!(
        (diff["added"].clone(), diff["removed"].clone()),
        (json!(2), json!(1))
    );

    let same = ok(
        &host,
        "file_diff",
        json!({"path": "a.txt", "content": "one\ntwo\nthree\n"}),
    )
    .await;
    assert_eq!(same["identical"], true);
    assert_eq!(same["diff"], "");

    fails(
        &host,
        "file_diff",
        json!({"path": "a.txt", "other_path": ".env"}),
        ErrorKind::Denied,
    )
    .await;
}
