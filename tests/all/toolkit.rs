//! The bundled toolkit (`file`, `web`, `terminal` and `data` toolsets),
//! called through the host under profiles that grant and that refuse each
//! capability.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};
use serde_json::{Value, json};
use toolhost::approval::{Approval, ScriptedApprover};
use toolhost::{ErrorKind, Host, HostBuilder};

use crate::Workspace;
// Reads the whole workspace, writes only `out/`, never `.env` or `secrets/`.
use crate::files::PROFILE as FILES;

/// Hosts with the bundled plugins.
fn bundled(builder: HostBuilder) -> HostBuilder {
    builder.bundled(true)
}

/// Calls a tool; the result as JSON, or the error's kind and message.
async fn call(host: &Host, tool: &str, arguments: Value) -> Result<Value, (ErrorKind, String)> {
    match host.call(tool, arguments).await {
        Ok(result) => Ok(serde_json::from_str(result.get()).unwrap()),
        Err(e) => Err((e.kind(), e.message().to_string())),
    }
}

/// Calls a tool that must succeed.
async fn ok(host: &Host, tool: &str, arguments: Value) -> Value {
    call(host, tool, arguments.clone())
        .await
        .unwrap_or_else(|(kind, message)| panic!("{tool} {arguments}: {kind:?}: {message}"))
}

/// Calls a tool that must fail with `kind`; returns the message.
async fn fails(host: &Host, tool: &str, arguments: Value, kind: ErrorKind) -> String {
    match call(host, tool, arguments.clone()).await {
        Ok(result) => panic!("{tool} {arguments} succeeded: {result}"),
        Err((actual, message)) => {
            assert_eq!(actual, kind, "{tool} {arguments}: {message}");
            message
        }
    }
}

#[track_caller]
fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{part:?} not in {text:?}");
}

// ---- file

/// The paths of a `list_dir` answer.
fn entry_paths(listing: &Value) -> Vec<&str> {
    listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect()
}

/// A workspace with a few files, one denied file and one outside it.
fn files_workspace() -> (Workspace, PathBuf) {
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

/// Grants a directory inside the workspace, not the workspace itself.
const SUBDIR: &str = r#"
allow = ["file:*"]
file.read = ["ws"]
file.write = ["ws/out"]
file.deny = ["**/.env"]
"#;

/// A workspace whose `ws/` the [`SUBDIR`] profile grants, with files beside it.
fn subdir_workspace() -> Workspace {
    let ws = Workspace::new(bundled);
    ws.write("ws/notes.txt", "a needle in ws\n");
    ws.write("ws/sub/deep.txt", "another needle\n");
    ws.write("ws/doc.json", r#"{"a": 1}"#);
    ws.write("ws/.env", "SECRET=needle\n");
    ws.write("ws/out/old.txt", "one\ntwo\n");
    ws.write("other/x", "a needle beside the grant\n");
    ws.write("top.txt", "a needle at the top\n");
    ws
}

#[tokio::test]
async fn every_file_tool_takes_paths_relative_to_a_workspace_it_does_not_grant() {
    let ws = subdir_workspace();
    let host = ws.host(SUBDIR).await;

    let read = ok(&host, "read_file", json!({"path": "ws/notes.txt"})).await;
    assert_eq!(read["content"], "a needle in ws\n");
    // The workspace lists only what is granted in it.
    assert_eq!(entry_paths(&ok(&host, "list_dir", json!({})).await), ["ws"]);
    let inside = ok(&host, "list_dir", json!({"path": "ws", "depth": 2})).await;
    assert_eq!(
        entry_paths(&inside),
        [
            "ws/doc.json",
            "ws/notes.txt",
            "ws/out",
            "ws/out/old.txt",
            "ws/sub",
            "ws/sub/deep.txt"
        ]
    );
    let found = ok(
        &host,
        "search_files",
        json!({"pattern": "needle", "path": "ws"}),
    )
    .await;
    assert_eq!(found["count"], 2, "{found}");
    // From the workspace: the grant is searched, nothing beside it.
    let everywhere = ok(
        &host,
        "search_files",
        json!({"pattern": "needle", "include_hidden": true}),
    )
    .await;
    assert_eq!(everywhere["count"], 2, "{everywhere}");
    for unseen in ["beside", "at the top", "SECRET"] {
        assert!(!everywhere.to_string().contains(unseen), "{everywhere}");
    }

    ok(
        &host,
        "write_file",
        json!({"path": "ws/out/new.txt", "content": "fresh\n"}),
    )
    .await;
    assert_eq!(ws.read("ws/out/new.txt"), "fresh\n");
    ok(
        &host,
        "edit_file",
        json!({"path": "ws/out/old.txt", "old_text": "two", "new_text": "2"}),
    )
    .await;
    assert_eq!(ws.read("ws/out/old.txt"), "one\n2\n");
    let diff = ok(
        &host,
        "file_diff",
        json!({"path": "ws/out/old.txt", "other_path": "ws/notes.txt"}),
    )
    .await;
    assert_contains(diff["diff"].as_str().unwrap(), "+a needle in ws");
    let value = ok(
        &host,
        "json_query",
        json!({"path": "ws/doc.json", "query": "a"}),
    )
    .await;
    assert_eq!(value, json!({"value": 1}));
}

#[tokio::test]
async fn relative_paths_beside_or_above_a_granted_subdirectory_fail_for_every_file_tool() {
    let ws = subdir_workspace();
    let host = ws.host(SUBDIR).await;
    for path in ["other/x", "./other/x", "ws/../other/x", "top.txt", "../x"] {
        let attempts = [
            ("read_file", json!({"path": path})),
            ("list_dir", json!({"path": path})),
            ("search_files", json!({"pattern": "needle", "path": path})),
            (
                "write_file",
                json!({"path": path, "content": "overwritten"}),
            ),
            (
                "edit_file",
                json!({"path": path, "old_text": "needle", "new_text": "pin"}),
            ),
            (
                "file_diff",
                json!({"path": "ws/notes.txt", "other_path": path}),
            ),
            ("json_query", json!({"path": path, "query": ""})),
        ];
        for (tool, arguments) in attempts {
            let message = match call(&host, tool, arguments.clone()).await {
                Ok(result) => panic!("{tool} {arguments} succeeded: {result}"),
                // Making `other/` for a write: writing in the workspace is
                // refused, since the workspace can be read.
                Err((ErrorKind::Denied, message)) if tool == "write_file" => message,
                Err((ErrorKind::InvalidArguments, message)) => {
                    assert_contains(&message, "no such file");
                    message
                }
                Err(other) => panic!("{tool} {arguments}: {other:?}"),
            };
            assert_contains(&message, path);
        }
    }
    for dir in ["other", "..", "ws/../other"] {
        let message = fails(
            &host,
            "list_dir",
            json!({"path": dir}),
            ErrorKind::InvalidArguments,
        )
        .await;
        assert_contains(&message, "no such file or directory");
    }
    assert_eq!(ws.read("other/x"), "a needle beside the grant\n");
    assert_eq!(ws.read("top.txt"), "a needle at the top\n");
    // Inside the grant the rules hold as well: denied, and read-only.
    fails(
        &host,
        "read_file",
        json!({"path": "ws/.env"}),
        ErrorKind::Denied,
    )
    .await;
    fails(
        &host,
        "write_file",
        json!({"path": "ws/notes.txt", "content": "no"}),
        ErrorKind::Denied,
    )
    .await;
    assert_eq!(ws.read("ws/notes.txt"), "a needle in ws\n");
}

// ---- web

const PAGE: &str = r#"<!doctype html>
<html><head><title>Toolkit &amp; Tests</title><style>p { color: red }</style></head>
<body><nav><a href="/">Home</a></nav>
<main><h1>Hello</h1><p>The <a href="docs/guide.html">guide</a> explains it.</p>
<ul><li>first</li><li>second</li></ul><script>alert(1)</script></main>
<footer>Copyright</footer></body></html>"#;

/// A server on 127.0.0.1: `/data.json`, `/echo` (POST, 201 with the body
/// and content-type it got), `/page.html`, `/logo.png`; anything else 404.
async fn web_server() -> SocketAddr {
    let router = Router::new()
        .route(
            "/data.json",
            get(|| async { axum::Json(json!({"items": [{"id": 1}, {"id": 2}]})) }),
        )
        .route(
            "/echo",
            post(|headers: HeaderMap, body: Bytes| async move {
                let content_type = headers
                    .get(header::CONTENT_TYPE)
                    .cloned()
                    .unwrap_or(header::HeaderValue::from_static("text/plain"));
                (
                    StatusCode::CREATED,
                    [(header::CONTENT_TYPE, content_type)],
                    body,
                )
            }),
        )
        .route("/page.html", get(|| async { Html(PAGE) }))
        .route(
            "/logo.png",
            get(|| async { ([(header::CONTENT_TYPE, "image/png")], vec![0x89u8, b'P', 0]) }),
        )
        .fallback(|| async { (StatusCode::NOT_FOUND, "no such page").into_response() });
    crate::network::serve(crate::network::listener().await, router).await
}

/// Fetching from 127.0.0.1 only (loopback must be listed explicitly).
const WEB: &str = r#"
allow = ["network:fetch"]
network.allow_hosts = ["127.0.0.1"]
"#;

#[tokio::test]
async fn http_request_reaches_an_allowed_host() {
    let addr = web_server().await;
    let ws = Workspace::new(bundled);
    let host = ws.host(WEB).await;

    let got = ok(
        &host,
        "http_request",
        json!({"url": format!("http://{addr}/data.json")}),
    )
    .await;
    assert_eq!(got["status"], 200);
    assert_eq!(got["ok"], true);
    assert_eq!(got["body"], json!({"items": [{"id": 1}, {"id": 2}]}));
    assert_eq!(got["content_type"], "application/json");

    let posted = ok(
        &host,
        "http_request",
        json!({"url": format!("http://{addr}/echo"), "method": "POST", "json": {"name": "x"}}),
    )
    .await;
    assert_eq!(posted["status"], 201);
    assert_eq!(posted["body"], json!({"name": "x"}));

    let text = ok(
        &host,
        "http_request",
        json!({
            "url": format!("http://{addr}/echo"),
            "method": "POST",
            "body": "0123456789",
            "headers": {"content-type": "text/plain"},
            "max_bytes": 4,
        }),
    )
    .await;
    assert_eq!(text["body"], "0123");
    assert_eq!(text["truncated"], true);
    assert_eq!(text["body_bytes"], 10);

    let missing = ok(
        &host,
        "http_request",
        json!({"url": format!("http://{addr}/nope")}),
    )
    .await;
    assert_eq!(
        (missing["status"].clone(), missing["ok"].clone()),
        (json!(404), json!(false))
    );

    let image = ok(
        &host,
        "http_request",
        json!({"url": format!("http://{addr}/logo.png")}),
    )
    .await;
    assert_eq!(image["body"], Value::Null);
    assert_contains(
        image["note"].as_str().unwrap(),
        "binary body (3 bytes of image/png)",
    );
}

#[tokio::test]
async fn web_tools_are_denied_hosts_the_profile_does_not_allow() {
    let addr = web_server().await;
    let ws = Workspace::new(bundled);
    let host = ws.host(WEB).await;
    for url in [
        "http://example.invalid/".to_string(),
        format!("http://localhost:{}/data.json", addr.port()),
    ] {
        let message = fails(
            &host,
            "http_request",
            json!({ "url": url }),
            ErrorKind::Denied,
        )
        .await;
        assert_contains(&message, "network.allow_hosts");
        let message = fails(
            &host,
            "web_extract",
            json!({ "url": url }),
            ErrorKind::Denied,
        )
        .await;
        assert_contains(&message, "network.allow_hosts");
    }
    // A wildcard does not open loopback.
    let wildcard = ws
        .host("allow = [\"network:fetch\"]\nnetwork.allow_hosts = [\"*\"]")
        .await;
    let message = fails(
        &wildcard,
        "http_request",
        json!({"url": format!("http://{addr}/data.json")}),
        ErrorKind::Denied,
    )
    .await;
    assert_contains(&message, "is loopback");

    let offline = ws.host("allow = [\"file:read\"]").await;
    for tool in ["http_request", "web_extract"] {
        let message = fails(
            &offline,
            tool,
            json!({"url": format!("http://{addr}/data.json")}),
            ErrorKind::Unavailable,
        )
        .await;
        assert_contains(&message, "network:fetch");
    }
}

#[tokio::test]
async fn web_extract_returns_readable_markdown_or_text_with_absolute_links() {
    let addr = web_server().await;
    let ws = Workspace::new(bundled);
    let host = ws.host(WEB).await;
    let url = format!("http://{addr}/page.html");

    let page = ok(&host, "web_extract", json!({ "url": url })).await;
    assert_eq!(page["title"], "Toolkit & Tests");
    assert_eq!(
        page["content"],
        format!(
            "# Hello\n\nThe [guide](http://{addr}/docs/guide.html) explains it.\n\n- first\n- second"
        )
    );
    assert_eq!(page["truncated"], false);

    let text = ok(
        &host,
        "web_extract",
        json!({"url": url, "format": "text", "max_length": 12}),
    )
    .await;
    assert_eq!(text["content"], "Hello\n\nThe g");
    assert_eq!(text["truncated"], true);
    assert_eq!(
        text["links"],
        json!([{"text": "guide", "url": format!("http://{addr}/docs/guide.html")}])
    );

    let message = fails(
        &host,
        "web_extract",
        json!({"url": format!("http://{addr}/nope")}),
        ErrorKind::ToolFailed,
    )
    .await;
    assert_contains(&message, "answered with status 404");
    let message = fails(
        &host,
        "web_extract",
        json!({"url": format!("http://{addr}/logo.png")}),
        ErrorKind::InvalidArguments,
    )
    .await;
    assert_contains(&message, "is not a web page");
}

// ---- terminal

#[tokio::test]
async fn run_command_runs_allowed_commands_in_the_workspace() {
    let ws = Workspace::new(bundled);
    ws.write("sub/file.txt", "x");
    let host = ws.host(crate::terminal::RUNS).await;
    let ran = ok(
        &host,
        "run_command",
        json!({"command": "pwd; echo oops >&2; exit 3"}),
    )
    .await;
    assert_eq!(
        ran,
        json!({
            "exit_code": 3,
            "success": false,
            "stdout": format!("{}\n", ws.path.display()),
            "stderr": "oops\n",
            "truncated": false,
        })
    );
    let ls = ok(
        &host,
        "run_command",
        json!({"command": "ls; tr a-z A-Z", "cwd": "sub", "stdin": "quiet"}),
    )
    .await;
    assert_eq!(ls["stdout"], "file.txt\nQUIET");
    assert_eq!(ls["success"], true);
}

#[tokio::test]
async fn run_command_is_refused_by_the_profile_rules() {
    let ws = Workspace::new(bundled);
    ws.write("build/keep", "");
    let host = ws
        .host(
            r#"
            allow = ["terminal:execute"]
            file.read = ["."]
            terminal.deny_commands = ["git push*"]
            "#,
        )
        .await;
    let message = fails(
        &host,
        "run_command",
        json!({"command": "echo a && git push origin main"}),
        ErrorKind::Denied,
    )
    .await;
    assert_contains(&message, "terminal.deny_commands");
    // Dangerous commands are refused by default.
    let message = fails(
        &host,
        "run_command",
        json!({"command": "rm -rf build"}),
        ErrorKind::Denied,
    )
    .await;
    assert_contains(&message, "recursive_delete");
    assert!(ws.path.join("build/keep").exists());
    let message = fails(
        &host,
        "run_command",
        json!({"command": "echo x", "cwd": "/"}),
        ErrorKind::Denied,
    )
    .await;
    assert_contains(&message, "working directory");

    let no_terminal = ws
        .host("allow = [\"*\"]\ndeny = [\"terminal:*\"]\nfile.read = [\".\"]")
        .await;
    let message = fails(
        &no_terminal,
        "run_command",
        json!({"command": "echo hi"}),
        ErrorKind::Unavailable,
    )
    .await;
    assert_contains(&message, "terminal:execute");
}

#[tokio::test]
async fn run_command_asks_before_dangerous_commands_in_approve_mode() {
    let ws = Workspace::new(bundled);
    ws.write("scratch/file", "");
    let approver = Arc::new(ScriptedApprover::new([Approval::Deny, Approval::Once]));
    let host = ws
        .host_with(
            r#"
            allow = ["terminal:execute", "file:write"]
            file.write = ["."]
            terminal.dangerous = "approve"
            "#,
            |builder| builder.approver(approver.clone()),
        )
        .await;
    let delete = json!({"command": "rm -rf ./scratch"});
    let message = fails(&host, "run_command", delete.clone(), ErrorKind::Denied).await;
    assert_contains(&message, "was not approved");
    assert!(ws.path.join("scratch").exists());
    assert_eq!(ok(&host, "run_command", delete).await["success"], true);
    assert!(!ws.path.join("scratch").exists());
    assert_eq!(approver.asked().len(), 2);
    assert_eq!(approver.asked()[0].tool, "run_command");
}

// ---- data

/// Data tools need `file:read` (they may read their input from a file).
const DATA: &str = r#"
allow = ["file:read"]
file.read = ["."]
file.deny = ["secrets/**"]
"#;

#[tokio::test]
async fn json_query_selects_by_path_wildcard_and_pointer() {
    let ws = Workspace::new(bundled);
    let host = ws.host(DATA).await;
    let doc = r#"{"items": [{"id": 1, "tags": ["a"]}, {"id": 2}], "meta": {"content-type": "x"}}"#;
    for (query, expected) in [
        ("items[1].id", json!({"value": 2})),
        ("$.items[-1]", json!({"value": {"id": 2}})),
        ("/items/0/tags/0", json!({"value": "a"})),
        ("meta[\"content-type\"]", json!({"value": "x"})),
        ("items[*].id", json!({"value": [1, 2], "count": 2})),
        ("items[*].tags[0]", json!({"value": ["a"], "count": 1})),
        (
            "",
            serde_json::from_str::<Value>(&format!("{{\"value\": {doc}}}")).unwrap(),
        ),
    ] {
        let result = ok(&host, "json_query", json!({"json": doc, "query": query})).await;
        assert_eq!(result, expected, "{query}");
    }
    // The document may be given as a value rather than as text.
    let result = ok(
        &host,
        "json_query",
        json!({"json": {"a": [true, null]}, "query": "a[0]"}),
    )
    .await;
    assert_eq!(result, json!({"value": true}));
}

#[tokio::test]
async fn json_query_explains_bad_queries_documents_and_missing_keys() {
    let ws = Workspace::new(bundled);
    let host = ws.host(DATA).await;
    let doc = r#"{"items": [{"id": 1}], "n": 3}"#;
    for (query, json, expected) in [
        (
            "items[0].name",
            doc,
            "$.items[0] has no key \"name\"; its keys are: id",
        ),
        (
            "items[4]",
            doc,
            "$.items has 1 element; index 4 is out of range",
        ),
        ("n.x", doc, "$.n is a number, not an object"),
        ("items[x]", doc, "brackets hold an integer index"),
        ("items", "{\"items\": [1,", "the input is not valid JSON"),
    ] {
        let message = fails(
            &host,
            "json_query",
            json!({ "json": json, "query": query }),
            ErrorKind::InvalidArguments,
        )
        .await;
        assert_contains(&message, expected);
    }
    let message = fails(
        &host,
        "json_query",
        json!({"query": "a"}),
        ErrorKind::InvalidArguments,
    )
    .await;
    assert_contains(&message, "give json (the document itself) or path");
}

const PEOPLE: &str =
    "name,age,city\nAda,36,London\nAlan,41,Wilmslow\n\"Grace, RA\",85,Arlington\nLinus,28,\n";

#[tokio::test]
async fn csv_query_filters_selects_and_limits_rows() {
    let ws = Workspace::new(bundled);
    let host = ws.host(DATA).await;
    let older = ok(
        &host,
        "csv_query",
        json!({
            "csv": PEOPLE,
            "columns": ["name", "age"],
            "where": [{"column": "age", "op": ">", "value": 30}],
        }),
    )
    .await;
    assert_eq!(
        older,
        json!({
            "columns": ["name", "age"],
            "rows": [
                {"name": "Ada", "age": "36"},
                {"name": "Alan", "age": "41"},
                {"name": "Grace, RA", "age": "85"},
            ],
            "matched": 3,
            "total": 4,
        })
    );

    let page = ok(
        &host,
        "csv_query",
        json!({
            "csv": PEOPLE,
            "columns": ["name"],
            "where": [{"column": "name", "op": "starts_with", "value": "A"}, {"column": "city", "op": "not_empty"}],
            "limit": 1,
        }),
    )
    .await;
    assert_eq!(page["rows"], json!([{"name": "Ada"}]));
    assert_eq!(page["matched"], 2);
    assert_eq!(page["truncated"], true);
    assert_contains(page["note"].as_str().unwrap(), "pass offset 1");

    let no_header = ok(
        &host,
        "csv_query",
        json!({"csv": "a;1\nb;2\n", "delimiter": ";", "has_header": false, "where": [{"column": "2", "op": "==", "value": "2"}]}),
    )
    .await;
    assert_eq!(no_header["rows"], json!([{"1": "b", "2": "2"}]));
}

#[tokio::test]
async fn csv_query_explains_unknown_columns_and_malformed_csv() {
    let ws = Workspace::new(bundled);
    let host = ws.host(DATA).await;
    for (arguments, expected) in [
        (
            json!({"csv": PEOPLE, "columns": ["email"]}),
            "has no column \"email\"; its columns are: name, age, city",
        ),
        (
            json!({"csv": PEOPLE, "where": [{"column": "age", "op": ">"}]}),
            "needs a value",
        ),
        (
            json!({"csv": "a,b\n1,2\n3\n"}),
            "not valid CSV: CSV error: record 2 (line: 3, byte: 8): found record with 1 field",
        ),
        (
            json!({"csv": PEOPLE, "delimiter": "::"}),
            "one ASCII character",
        ),
    ] {
        let message = fails(&host, "csv_query", arguments, ErrorKind::InvalidArguments).await;
        assert_contains(&message, expected);
    }
    // The schema refuses an unknown operator before the tool runs.
    fails(
        &host,
        "csv_query",
        json!({"csv": PEOPLE, "where": [{"column": "age", "op": "~", "value": 1}]}),
        ErrorKind::InvalidArguments,
    )
    .await;
}

#[tokio::test]
async fn data_tools_read_input_files_only_where_the_profile_allows() {
    let ws = Workspace::new(bundled);
    ws.write(
        "data/people.tsv",
        PEOPLE.replace(',', "\t").replace("\"Grace\tRA\"", "Grace"),
    );
    ws.write("data/doc.json", r#"{"a": {"b": [10, 20]}}"#);
    ws.write("secrets/doc.json", r#"{"a": 1}"#);
    let host = ws.host(DATA).await;
    let rows = ok(
        &host,
        "csv_query",
        json!({"path": "data/people.tsv", "where": [{"column": "age", "op": "<", "value": 30}]}),
    )
    .await;
    assert_eq!(
        rows["rows"],
        json!([{"name": "Linus", "age": "28", "city": ""}])
    );
    assert_eq!(
        ok(
            &host,
            "json_query",
            json!({"path": "data/doc.json", "query": "a.b[1]"})
        )
        .await,
        json!({"value": 20})
    );
    let message = fails(
        &host,
        "json_query",
        json!({"path": "secrets/doc.json", "query": "a"}),
        ErrorKind::Denied,
    )
    .await;
    assert_contains(&message, "not allowed");
    let outside = ws.path.join("../elsewhere.json");
    std::fs::write(&outside, "{}").unwrap();
    let message = fails(
        &host,
        "json_query",
        json!({"path": outside, "query": ""}),
        ErrorKind::InvalidArguments,
    )
    .await;
    assert_contains(&message, "no such file");
    std::fs::remove_file(outside).unwrap();
}

// ---- specs

#[tokio::test]
async fn toolkit_tools_declare_their_toolsets_permissions_and_hints() {
    let host = Host::builder().bundled(true).build().await.unwrap();
    let specs = host.tools();
    let spec = |name: &str| {
        specs
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no tool {name}"))
            .clone()
    };
    for (name, toolset, permissions, read_only, destructive) in [
        ("read_file", "file", &["file:read"][..], true, false),
        (
            "write_file",
            "file",
            &["file:read", "file:write"],
            false,
            true,
        ),
        (
            "edit_file",
            "file",
            &["file:read", "file:write"],
            false,
            true,
        ),
        ("list_dir", "file", &["file:read"], true, false),
        ("search_files", "file", &["file:read"], true, false),
        ("file_diff", "file", &["file:read"], true, false),
        ("http_request", "web", &["network:fetch"], false, true),
        ("web_extract", "web", &["network:fetch"], true, false),
        (
            "run_command",
            "terminal",
            &["terminal:execute"],
            false,
            true,
        ),
        ("json_query", "data", &["file:read"], true, false),
        ("csv_query", "data", &["file:read"], true, false),
    ] {
        let tool = spec(name);
        assert_eq!(tool.toolset, toolset, "{name}");
        assert_eq!(tool.permissions, permissions, "{name}");
        assert_eq!(
            (tool.read_only, tool.destructive),
            (read_only, destructive),
            "{name}"
        );
        assert_eq!(tool.plugin.as_ref(), toolset, "{name}");
        assert!(tool.description.len() < 900, "{name}: {}", tool.description);
    }
}
