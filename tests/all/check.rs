//! `toolhost check`: a one-screen report for good and bad plugin files.

use std::path::Path;

use toolhost::check::check_file;

#[tokio::test]
async fn a_good_plugin_reports_its_tools() {
    let report = check_file(Path::new(toolhost_tests::MISBEHAVE))
        .await
        .unwrap();
    let text = report.to_string();
    assert!(report.is_ok(), "{text}");
    assert!(text.contains("plugin    misbehave"), "{text}");
    assert!(
        text.contains("contract  built against toolhost:plugin@0.2.2"),
        "{text}"
    );
    assert!(text.contains("  flood  [misbehave]"), "{text}");
    assert!(
        text.contains("arguments: bytes: integer (required)"),
        "{text}"
    );
    assert!(text.contains("✓ ok: 12 tools would load"), "{text}");
    assert!(text.lines().count() < 60, "{text}");
}

#[tokio::test]
async fn bad_plugins_report_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    for (path, expected) in [
        (
            Path::new(toolhost_tests::BADSPEC),
            "tool name \"bad name!\" is invalid",
        ),
        (
            Path::new(toolhost_tests::NOT_A_PLUGIN),
            "does not export toolhost:plugin/tool@0.2.2",
        ),
        (core.as_path(), "core WebAssembly module"),
    ] {
        let report = check_file(path).await.unwrap();
        let text = report.to_string();
        assert!(!report.is_ok(), "{text}");
        assert!(text.contains("✗ does not load:"), "{text}");
        assert!(text.contains(expected), "{text}");
        assert!(text.lines().count() < 25, "{text}");
    }
}
