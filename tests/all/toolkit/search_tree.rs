//! `search_files` on the tree `scripts/search-tree.py` writes (10,000 files
//! with ignored, hidden, binary, linked and denied ones): the matches the
//! script expects, the same as `rg` with the flags that give its rules, and
//! nothing from the paths the profile denies.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::{bundled, ok};
use crate::Workspace;

/// Writes the tree into `root` (empty), as the benchmark does.
fn generate(root: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/search-tree.py");
    let status = Command::new("python3")
        .arg(script)
        .arg(root)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("running python3 scripts/search-tree.py");
    assert!(status.success(), "scripts/search-tree.py failed");
}

/// The body of the generated config's default profile.
fn generated_profile(root: &Path) -> String {
    let config = std::fs::read_to_string(root.join("toolhost.toml")).unwrap();
    let (_, body) = config.split_once("[profiles.default]\n").unwrap();
    body.to_string()
}

/// `rg` run in `root` on `tree` with `args`: each line it prints (a match
/// as `path:line:text`), sorted; `None` when ripgrep is not installed.
fn rg(root: &Path, args: &[&str]) -> Option<Vec<String>> {
    let output = Command::new("rg")
        .current_dir(root)
        .args(["-n", "--no-heading", "--with-filename", "--color", "never"])
        .args(args)
        .arg("tree")
        .output()
        .ok()?;
    // 1: nothing found.
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "rg failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut lines: Vec<String> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    Some(lines)
}

/// The matches of a `search_files` answer as `rg` prints them, sorted.
fn as_rg_lines(found: &Value) -> Vec<String> {
    let mut lines: Vec<String> = found["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let path = m["path"].as_str().unwrap();
            format!("{path}:{}:{}", m["line"], m["text"].as_str().unwrap())
        })
        .collect();
    lines.sort();
    lines
}

/// Searches `tree` for `pattern`, with `include` added to the arguments.
async fn search(host: &toolhost::Host, pattern: &str, include: &Value) -> Value {
    let mut arguments = json!({"pattern": pattern, "path": "tree", "max_results": 1000});
    let extra = include.as_object().unwrap().clone();
    arguments.as_object_mut().unwrap().extend(extra);
    ok(host, "search_files", arguments).await
}

#[tokio::test]
async fn search_files_finds_what_is_expected_and_nothing_denied() {
    let ws = Workspace::new(bundled);
    generate(&ws.path);
    let host = ws.host(&generated_profile(&ws.path)).await;

    // What the script put there, by search_files' rules.
    let expected = std::fs::read_to_string(ws.path.join("expected-needle")).unwrap();
    let expected: Vec<String> = expected.lines().map(str::to_string).collect();
    assert!(expected.len() > 150, "{}", expected.len());
    let found = search(&host, "needle", &json!({})).await;
    assert_eq!(as_rg_lines(&found), expected);
    assert_eq!(found["truncated"], false);
    assert_eq!(found["files_searched"], 9600);
    assert_eq!(found["skipped_binary"], 60);

    // ripgrep with the flags that give the same rules agrees, with hidden
    // and ignored files too.
    let flags = std::fs::read_to_string(ws.path.join("rg-flags")).unwrap();
    let flags: Vec<&str> = flags.lines().collect();
    for (extra, include) in [
        (&[][..], json!({})),
        (&["--hidden"][..], json!({"include_hidden": true})),
        (&["--no-ignore"][..], json!({"include_ignored": true})),
        (
            &["--hidden", "--no-ignore"][..],
            json!({"include_hidden": true, "include_ignored": true}),
        ),
    ] {
        let Some(from_rg) = rg(&ws.path, &[&flags[..], extra, &["needle"]].concat()) else {
            eprintln!("ripgrep (rg) is not installed: search_files is not compared with it");
            break;
        };
        let found = search(&host, "needle", &include).await;
        assert_eq!(as_rg_lines(&found), from_rg, "{include}");
        assert_eq!(found["truncated"], false, "{include}");
        // The same files walked: binary ones are opened, then skipped.
        let files = rg(&ws.path, &[&flags[..], extra, &["--files"]].concat()).unwrap();
        assert_eq!(found["files_searched"], files.len(), "{include}");
        assert_eq!(found["skipped_binary"], 60, "{include}");
    }

    // The tree holds the word in what the profile denies; search_files
    // never reads it, however widely it searches.
    let everywhere = search(
        &host,
        "needle",
        &json!({"include_hidden": true, "include_ignored": true}),
    )
    .await;
    let searched = as_rg_lines(&everywhere);
    for denied in [
        "tree/.env",
        "tree/pkg02/.env.local",
        "tree/secrets/s0/secret00.txt",
        "tree/certs/server.pem",
        "tree/keys/api.key",
        "tree/.git/objects/o00",
    ] {
        let content = std::fs::read_to_string(ws.path.join(denied)).unwrap();
        assert!(content.contains("needle"), "{denied} holds no needle");
        assert!(
            !searched.iter().any(|line| line.starts_with(denied)),
            "search_files read {denied}: {searched:?}"
        );
    }
    // Links are not followed, not even to an allowed file.
    assert!(!searched.iter().any(|line| line.contains("link-to-")));

    // A word that is not there: nothing.
    let nothing = search(&host, "zebrafish", &json!({})).await;
    assert_eq!(nothing["count"], 0);
    assert_eq!(nothing["files_searched"], 9600);
}
