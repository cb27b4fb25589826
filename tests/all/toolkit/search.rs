//! The `file` toolset's listings and searches, and the ignore files they
//! honour.

use serde_json::{Value, json};
use toolhost::ErrorKind;

use super::file::{entry_paths, files_workspace};
use super::{FILES, assert_contains, fails, ok};

#[tokio::test]
async fn list_dir_recurses_filters_and_leaves_denied_entries_out() {
    let (ws, _) = files_workspace();
    let host = ws.host(FILES).await;
    let top = ok(&host, "list_dir", json!({})).await;
    assert_eq!(entry_paths(&top), ["docs", "out", "src", "ten.txt"]);
    assert_eq!(
        top["entries"][3],
        json!({"path": "ten.txt", "type": "file", "size": 71})
    );

    let deep = ok(
        &host,
        "list_dir",
        json!({"depth": 3, "glob": "*.rs", "include_hidden": true}),
    )
    .await;
    assert_eq!(entry_paths(&deep), ["src/lib.rs", "src/main.rs"]);

    let hidden = ok(&host, "list_dir", json!({"include_hidden": true})).await;
    assert!(!hidden.to_string().contains(".env"), "{hidden}");
    assert!(!hidden.to_string().contains("secrets"), "{hidden}");
}

#[tokio::test]
async fn search_files_finds_lines_and_names_and_stops_at_the_cap() {
    let (ws, _) = files_workspace();
    for i in 0..30 {
        ws.write(&format!("many/f{i:02}.txt"), "needle\nhay\nneedle again\n");
    }
    let host = ws.host(FILES).await;

    let found = ok(
        &host,
        "search_files",
        json!({"pattern": "needle", "path": "src"}),
    )
    .await;
    assert_eq!(
        found["matches"],
        json!([
            {"path": "src/lib.rs", "line": 1, "text": "pub fn needle() {}"},
            {"path": "src/main.rs", "line": 2, "text": "    // needle"},
        ])
    );
    assert_eq!(found["truncated"], false);

    // The denied directory is never searched.
    let everywhere = ok(
        &host,
        "search_files",
        json!({"pattern": "needle", "include_hidden": true, "max_results": 1000}),
    )
    .await;
    assert_eq!(everywhere["count"], 62);
    assert!(!everywhere.to_string().contains("secret"), "{everywhere}");

    let capped = ok(
        &host,
        "search_files",
        json!({"pattern": "NEEDLE", "case_insensitive": true, "glob": "many/*.txt", "max_results": 5}),
    )
    .await;
    assert_eq!(capped["count"], 5);
    assert_eq!(capped["truncated"], true);
    assert_contains(capped["note"].as_str().unwrap(), "stopped at 5 results");
    assert_eq!(
        capped["matches"][2],
        json!({"path": "many/f01.txt", "line": 1, "text": "needle"})
    );

    let names = ok(&host, "search_files", json!({"glob": "*.md"})).await;
    assert_eq!(names["files"], json!(["docs/guide.md"]));

    let message = fails(
        &host,
        "search_files",
        json!({"pattern": "("}),
        ErrorKind::InvalidArguments,
    )
    .await;
    assert_contains(&message, "not a valid regular expression");
}

/// The `path` of each match of a `search_files` answer.
fn match_paths(found: &Value) -> Vec<&str> {
    found["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn search_and_listing_leave_out_what_ignore_files_exclude_unless_asked() {
    let (ws, _) = files_workspace();
    ws.write(".gitignore", "target/\n*.log\n!keep.log\n");
    ws.write("target/debug/out.rs", "needle in build output\n");
    ws.write("src/build.log", "needle in a log\n");
    ws.write("src/keep.log", "needle kept\n");
    ws.write("src/.ignore", "generated.rs\n");
    ws.write("src/generated.rs", "// needle generated\n");
    let host = ws.host(FILES).await;

    let found = ok(&host, "search_files", json!({"pattern": "needle"})).await;
    assert_eq!(
        match_paths(&found),
        ["src/keep.log", "src/lib.rs", "src/main.rs"]
    );
    let listed = ok(&host, "list_dir", json!({"depth": 3})).await;
    assert_eq!(
        entry_paths(&listed),
        [
            "docs",
            "docs/guide.md",
            "out",
            "src",
            "src/keep.log",
            "src/lib.rs",
            "src/main.rs",
            "ten.txt"
        ]
    );

    // Asked for, ignored files are searched and listed; denied ones never.
    let everything = json!({"pattern": "needle", "include_ignored": true, "include_hidden": true});
    let found = ok(&host, "search_files", everything).await;
    assert_eq!(
        match_paths(&found),
        [
            "src/build.log",
            "src/generated.rs",
            "src/keep.log",
            "src/lib.rs",
            "src/main.rs",
            "target/debug/out.rs"
        ]
    );
    let listed = ok(
        &host,
        "list_dir",
        json!({"depth": 3, "include_ignored": true, "include_hidden": true}),
    )
    .await;
    let paths = entry_paths(&listed);
    for path in [".gitignore", "src/build.log", "target/debug", "src/.ignore"] {
        assert!(paths.contains(&path), "{path} not in {paths:?}");
    }
    assert!(!listed.to_string().contains("secret"), "{listed}");
    assert!(!listed.to_string().contains(".env"), "{listed}");

    // A directory named outright is searched even when it is ignored, as
    // ripgrep does.
    let named = ok(
        &host,
        "search_files",
        json!({"pattern": "needle", "path": "target"}),
    )
    .await;
    assert_eq!(match_paths(&named), ["target/debug/out.rs"]);
    // Below the workspace, the ignore files of the directories above apply.
    let sub = ok(
        &host,
        "search_files",
        json!({"pattern": "needle", "path": "src"}),
    )
    .await;
    assert_eq!(
        match_paths(&sub),
        ["src/keep.log", "src/lib.rs", "src/main.rs"]
    );
}
