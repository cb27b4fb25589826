//! The second language: the Python plugin in `plugins/python`, built with
//! componentize-py by `plugins/python/build.sh`, loads and answers.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use toolhost::Host;

use crate::call_ok;

/// Builds the Python plugins; `None` (with the reason printed) when the
/// toolchain cannot be installed here.
fn build() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = root.join("target/python-plugins-test");
    let sources = root.join("plugins/python");
    let before = files_under(&sources);
    let output = Command::new("bash")
        .arg(sources.join("build.sh"))
        .arg(&out)
        .output()
        .expect("bash runs");
    // Nothing is written beside the sources: the build scripts watch
    // plugins/, and a new file there (CPython's __pycache__) would make the
    // next cargo command build the host again.
    assert_eq!(
        files_under(&sources),
        before,
        "building the Python plugins wrote into {}",
        sources.display()
    );
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains("No matching distribution")
            || stderr.contains("Could not find a version")
            || stderr.contains("No module named venv")
            || stderr.contains("ensurepip")
        {
            eprintln!("skipped: componentize-py cannot be installed here:\n{stderr}");
            return None;
        }
        panic!("plugins/python/build.sh failed:\n{stderr}");
    }
    Some(out.join("words.wasm"))
}

/// Every path under `dir`, with its modification time.
fn files_under(dir: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                pending.push(entry.path());
            }
            found.push((entry.path(), meta.modified().unwrap()));
        }
    }
    found.sort();
    found
}

#[tokio::test]
async fn the_python_plugin_loads_and_answers() {
    let Some(wasm) = build() else { return };
    // Default limits (64 MiB) are enough for CPython.
    let host = Host::builder().plugin_file(&wasm).build().await.unwrap();
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    let plugin = &host.plugins()[0];
    assert_eq!(plugin.contract(), toolhost::contract::CONTRACT_VERSION);
    let tool = &plugin.tools()[0];
    assert_eq!(tool.name, "word_frequencies");
    assert_eq!(tool.toolset, "text");
    // Declared in Python: checked against every result.
    assert_eq!(tool.title.as_deref(), Some("Word frequencies"));
    assert_eq!(tool.output_schema.as_ref().unwrap()["required"][0], "total");
    let result = call_ok(
        &host,
        "word_frequencies",
        &json!({"text": "the cat and the hat and the bat", "top": 2}).to_string(),
    )
    .await;
    assert_eq!(result["total"], 8);
    assert_eq!(
        result["top"],
        json!([{"word": "the", "count": 3}, {"word": "and", "count": 2}])
    );
    // Schema validation happens in the host, before Python runs.
    let error = host
        .call("word_frequencies", json!({"top": 2}))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), toolhost::ErrorKind::InvalidArguments);
}
