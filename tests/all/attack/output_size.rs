//! Attack tests: a tool's JSON result counts toward `limits.max_output` as
//! clients receive it, escaped inside a JSON string, so quotes and
//! backslashes cannot send out twice the limit.

use std::process::Command;

use serde_json::json;

fn call(config: &std::path::Path, arguments: &serde_json::Value) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_toolhost-cli"))
        .arg("--config")
        .arg(config)
        .args(["call", "echo", &arguments.to_string()])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| json!({ "error": String::from_utf8_lossy(&output.stdout) }))
}

#[test]
fn a_json_result_counts_as_it_is_sent_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolhost.toml");
    std::fs::write(
        &config,
        "default_profile = \"p\"\n[profiles.p]\nlimits = { max_output = \"64KiB\" }\n",
    )
    .unwrap();
    // 30,000 characters: about 30 KB as JSON text, as sent too.
    let plain = call(&config, &json!({ "text": "A".repeat(30_000) }));
    assert_eq!(
        plain["text"].as_str().map(str::len),
        Some(30_000),
        "{plain}"
    );
    // 30,000 quotes: 60 KB of JSON text (`\"` each), 120 KB inside the JSON
    // string a client receives (`\\\"` each).
    let quotes = call(&config, &json!({ "text": "\"".repeat(30_000) }));
    let error = quotes["error"]
        .as_str()
        .unwrap_or_else(|| panic!("answered"));
    assert!(
        error.starts_with("output_too_large") && error.contains("escaped"),
        "{error}"
    );
}
