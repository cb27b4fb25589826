//! Bundled plugins listed from the specs captured when toolhost was built
//! (`host/bundled-specs.json`) and compiled at their first call: the specs
//! match the compiled plugins, and a plugin that does not compile or
//! describes itself otherwise fails its calls with the reason.

use std::collections::BTreeMap;

use toolhost::runtime::{CAPTURED_FILE, CapturedPlugin, Compiled};
use toolhost::{ErrorKind, Host, PluginSource, PluginVersion};

use crate::{call_err, call_ok};

/// What every bundled plugin says of itself once compiled, by name.
async fn compiled_specs() -> BTreeMap<String, CapturedPlugin> {
    let host = Host::builder().cache_dir(None).build().await.unwrap();
    let mut all = BTreeMap::new();
    for plugin in toolhost::bundled::PLUGINS {
        let version = host
            .load(plugin.name, PluginSource::Bundled)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        if let Some(captured) = CapturedPlugin::of(&version) {
            all.insert(plugin.name.to_string(), captured);
        }
    }
    all
}

/// `TOOLHOST_BLESS=1` writes the file from the compiled plugins instead.
#[tokio::test]
async fn bundled_specs_are_those_of_the_compiled_plugins() {
    let compiled = compiled_specs().await;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../host/bundled-specs.json");
    if std::env::var_os("TOOLHOST_BLESS").is_some() {
        let text = serde_json::to_string_pretty(&compiled).unwrap() + "\n";
        std::fs::write(path, text).unwrap();
        return;
    }
    let captured: BTreeMap<String, CapturedPlugin> =
        serde_json::from_str(toolhost::bundled::CAPTURED_SPECS).unwrap();
    assert!(
        captured == compiled,
        "{CAPTURED_FILE} is not what the bundled plugins say of themselves; regenerate it \
         with `TOOLHOST_BLESS=1 cargo nextest run -p toolhost-tests --test all bundled_specs` \
         and rebuild"
    );
    assert_eq!(compiled.len(), toolhost::bundled::PLUGINS.len());
}

#[tokio::test]
async fn bundled_plugins_are_listed_before_they_compile_and_compile_at_their_first_call() {
    let cache = tempfile::tempdir().unwrap();
    let start = || {
        Host::builder()
            .bundled(true)
            .cache_dir(Some(cache.path().to_path_buf()))
            .build()
    };
    let host = start().await.unwrap();
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    let echo = || {
        host.plugins()
            .into_iter()
            .find(|p| &**p.name() == "echo")
            .unwrap()
    };
    assert!(
        host.plugins()
            .iter()
            .all(|p| p.compiled() == Compiled::Pending)
    );
    assert!(host.tools().iter().any(|t| t.name == "word_count"));
    let result = call_ok(&host, "echo", r#"{"text":"hi"}"#).await;
    assert_eq!(result["text"], "hi");
    assert_eq!(echo().compiled(), Compiled::Fresh);
    let others = host.plugins().into_iter().filter(|p| &**p.name() != "echo");
    assert!(
        others
            .into_iter()
            .all(|p| p.compiled() == Compiled::Pending)
    );
    // The first tier's code serves until the host's engine has compiled it.
    let began = std::time::Instant::now();
    while echo().runs_first_tier() {
        assert!(began.elapsed() < std::time::Duration::from_secs(120));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let result = call_ok(&host, "echo", r#"{"text":"again"}"#).await;
    assert_eq!(result["text"], "again");
    // The next start takes echo from the cache.
    let host = start().await.unwrap();
    call_ok(&host, "echo", r#"{"text":"hi"}"#).await;
    let echo = host
        .plugins()
        .into_iter()
        .find(|p| &**p.name() == "echo")
        .unwrap();
    assert_eq!(echo.compiled(), Compiled::Cached);
    assert!(!echo.runs_first_tier());
}

/// A host with one deferred plugin compiled from `bytes` and listed as echo.
async fn deferred(bytes: &'static [u8], captured: &CapturedPlugin) -> Host {
    let host = Host::builder().cache_dir(None).build().await.unwrap();
    let version = PluginVersion::deferred("echo", PluginSource::Bundled, bytes, captured, None)
        .unwrap_or_else(|e| panic!("{e}"));
    host.register(version).unwrap();
    host
}

fn echo_bytes() -> &'static [u8] {
    toolhost::bundled::PLUGINS
        .iter()
        .find(|p| p.name == "echo")
        .unwrap()
        .wasm
}

#[tokio::test]
async fn a_plugin_that_does_not_compile_at_its_first_call_fails_its_calls_with_the_reason() {
    let captured = CapturedPlugin::bundled("echo").unwrap();
    let allowed = deferred(echo_bytes(), captured).await;
    call_ok(&allowed, "echo", r#"{"text":"hi"}"#).await;

    // A component header, then nothing that parses.
    let host = deferred(b"\0asm\r\0\x01\0 not a component", captured).await;
    for _ in 0..2 {
        let (kind, text) = call_err(&host, "echo", r#"{"text":"hi"}"#).await;
        assert_eq!(kind, ErrorKind::Unavailable, "{text}");
        assert!(
            text.contains("plugin \"echo\" (bundled): does not compile at its first call"),
            "{text}"
        );
    }
    // A component that is not a plugin.
    let bytes = std::fs::read(toolhost_tests::NOT_A_PLUGIN).unwrap();
    let host = deferred(Box::leak(bytes.into_boxed_slice()), captured).await;
    let (kind, text) = call_err(&host, "echo", r#"{"text":"hi"}"#).await;
    assert_eq!(kind, ErrorKind::Unavailable, "{text}");
    assert!(text.contains("does not link at its first call"), "{text}");
}

#[tokio::test]
async fn a_plugin_that_describes_itself_otherwise_than_its_captured_specs_is_refused() {
    let mut captured = CapturedPlugin::bundled("echo").unwrap().clone();
    captured.tools[0]["description"] = "Another description.".into();
    let host = deferred(echo_bytes(), &captured).await;
    let (kind, text) = call_err(&host, "echo", r#"{"text":"hi"}"#).await;
    assert_eq!(kind, ErrorKind::Unavailable, "{text}");
    assert!(text.contains("describes itself otherwise"), "{text}");
    assert!(text.contains(CAPTURED_FILE), "{text}");
}
