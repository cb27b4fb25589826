//! Plugins built for wasm32-unknown-unknown (lean components): they import
//! nothing of WASI, their allocator (the SDK's) serves past its first
//! region, and what needs WASI fails with a clear error rather than reaching
//! anything, whatever the profile grants.

use serde_json::json;
use toolhost::{ErrorKind, Host};

use crate::{call_err, call_ok, profile};

/// A host with the lean test plugin and the wasip2 `files` one, under a
/// profile that grants reading `dir`.
async fn host(dir: &std::path::Path) -> Host {
    Host::builder()
        .plugin_file(toolhost_tests::LEAN)
        .plugin_file(toolhost_tests::FILES)
        .profile(profile("allow = [\"file:*\"]\nfile.read = [\".\"]\n", dir))
        .build()
        .await
        .unwrap()
}

/// What `plugin` imports, as the host lists it.
fn imports(host: &Host, plugin: &str) -> Vec<String> {
    let version = host.plugins().into_iter().find(|p| &**p.name() == plugin);
    version.unwrap().imports().to_vec()
}

#[tokio::test]
async fn the_bundled_echo_imports_nothing_of_wasi_and_clock_reads_the_wall_clock() {
    let host = Host::builder()
        .bundled(true)
        .cache_dir(None)
        .build()
        .await
        .unwrap();
    let echo = imports(&host, "echo");
    assert_eq!(echo, ["toolhost:plugin/types@0.2.2"], "{echo:?}");
    let clock = imports(&host, "clock");
    assert!(
        clock
            .iter()
            .any(|i| i.starts_with("wasi:clocks/wall-clock")),
        "{clock:?}"
    );
    let now = call_ok(&host, "now", "").await;
    assert!(
        now["unix_seconds"].as_u64().unwrap() > 1_700_000_000,
        "{now}"
    );
    let echoed = call_ok(&host, "echo", r#"{"text":"hi","repeat":3}"#).await;
    assert_eq!(echoed, json!({"text": "hihihi"}));
}

#[tokio::test]
async fn a_lean_plugin_allocates_past_its_heaps_first_region_in_every_fresh_instance() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path()).await;
    let imports = host
        .plugins()
        .into_iter()
        .find(|p| &**p.name() == "lean")
        .unwrap();
    assert!(
        imports.imports().iter().all(|i| !i.starts_with("wasi:")),
        "{:?}",
        imports.imports()
    );
    // 1 KiB fits the first region; 4 MiB grows the memory; each call is a
    // fresh instance, so the second small call starts from the arena again.
    for bytes in [1024, 4 << 20, 1024, 4 << 20] {
        let chunks: u64 = u64::try_from(bytes).unwrap().div_ceil(4096);
        let sum: u64 = (0..chunks).map(|i| (i % 251) * 4096).sum();
        let result = call_ok(&host, "lean_fill", &json!({ "bytes": bytes }).to_string()).await;
        assert_eq!(
            result,
            json!({"chunks": chunks, "sum": sum}),
            "{bytes} bytes"
        );
    }
}

#[tokio::test]
async fn a_lean_plugin_reaches_no_file_even_where_the_profile_grants_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    let host = host(dir.path()).await;
    // Allowed: the same grant lets a WASI plugin read the file.
    let read = call_ok(&host, "read", r#"{"path":"notes.txt"}"#).await;
    assert_eq!(read, json!({"ok": "hello"}));
    // Refused: a lean plugin has no file system to reach it through.
    let lean = call_ok(&host, "lean_read", r#"{"path":"notes.txt"}"#).await;
    let error = lean["error"].as_str().unwrap_or_else(|| panic!("{lean}"));
    assert_eq!(error, "operation not supported on this platform");
}

#[tokio::test]
async fn a_lean_plugin_that_needs_the_clock_fails_its_call_and_the_next_call_runs() {
    let dir = tempfile::tempdir().unwrap();
    let host = host(dir.path()).await;
    let (kind, message) = call_err(&host, "lean_clock", "").await;
    // The standard library panics (no clock on this target): with no
    // stderr, the call fails as a trap that names the tool.
    assert_eq!(kind, ErrorKind::Trap, "{message}");
    assert!(
        message.contains(r#"tool "lean_clock" (plugin "lean") crashed"#)
            && message.contains("unreachable"),
        "{message}"
    );
    let result = call_ok(&host, "lean_fill", r#"{"bytes":10}"#).await;
    assert_eq!(result["chunks"], 1);
}
