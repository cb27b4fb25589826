//! Relative paths under a profile that grants a directory inside the
//! workspace but not the workspace itself.

use serde_json::json;
use toolhost::ErrorKind;

use super::file::entry_paths;
use super::{assert_contains, bundled, call, fails, ok};
use crate::Workspace;

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
