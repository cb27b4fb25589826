//! `toolhost new`: the generated Rust project builds to wasm, passes
//! `toolhost check`, loads and answers.

use std::path::PathBuf;
use std::process::Command;

use serde_json::json;
use toolhost::Host;
use toolhost::scaffold::{Lang, create};

#[tokio::test]
async fn a_new_rust_plugin_builds_checks_and_answers() {
    let parent = tempfile::tempdir().unwrap();
    let dir = create("demo", Lang::Rust, parent.path()).unwrap();
    assert!(dir.join("README.md").is_file());
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains("toolhost check target/wasm32-wasip2/release/demo.wasm"));

    // A persistent target directory keeps the dependencies warm between runs.
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/scaffold-test");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .unwrap();
    assert!(status.success(), "the generated project does not build");
    let wasm = target.join("wasm32-wasip2/release/demo.wasm");

    let report = toolhost::check::check_file(&wasm).await.unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.warnings(), 0, "{report}");

    let host = Host::builder().plugin_file(&wasm).build().await.unwrap();
    let result = host.call("demo", json!({"name": "world"})).await.unwrap();
    assert_eq!(result.get(), r#"{"greeting":"Hello, world!"}"#);
}

#[test]
fn a_new_python_plugin_has_its_contract_and_build_script() {
    let parent = tempfile::tempdir().unwrap();
    let dir = create("py-demo", Lang::Python, parent.path()).unwrap();
    let app = std::fs::read_to_string(dir.join("app.py")).unwrap();
    assert!(app.contains("name=\"py_demo\""));
    assert!(
        std::fs::read_to_string(dir.join("wit/plugin.wit"))
            .unwrap()
            .contains("package toolhost:plugin@0.2.2;")
    );
    let script = std::fs::read_to_string(dir.join("build.sh")).unwrap();
    assert!(script.contains("-o py-demo.wasm"));
}

#[test]
fn existing_directories_and_bad_names_are_refused() {
    let parent = tempfile::tempdir().unwrap();
    create("demo", Lang::Rust, parent.path()).unwrap();
    let again = create("demo", Lang::Rust, parent.path()).unwrap_err();
    assert!(again.to_string().contains("already exists"), "{again}");
    let bad = create("Bad Name", Lang::Rust, parent.path()).unwrap_err();
    assert!(bad.to_string().contains("is invalid"), "{bad}");
}
