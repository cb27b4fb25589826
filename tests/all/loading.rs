//! Loading plugins: good ones, and every kind of bad file.

use std::path::Path;

use toolhost::{Host, PluginSource};

use crate::call_ok;

async fn load_error(path: &Path) -> String {
    let host = Host::builder().plugin_file(path).build().await.unwrap();
    assert!(host.tools().is_empty(), "a bad plugin registered tools");
    let errors = host.load_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    errors[0].to_string()
}

#[tokio::test]
async fn bundled_plugins_load_and_describe_themselves() {
    let host = Host::builder().bundled(true).build().await.unwrap();
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    let tools = host.tools();
    let echo = tools
        .iter()
        .find(|t| t.name == "echo")
        .expect("echo is bundled");
    assert_eq!(echo.toolset, "demo");
    assert_eq!(&*echo.plugin, "echo");
    assert!(echo.read_only);
    assert_eq!(echo.emoji.as_deref(), Some("🔁"));
    assert_eq!(
        echo.description,
        "Echo the text back, optionally upper-cased and repeated."
    );
    assert_eq!(echo.parameters["type"], "object");
    assert_eq!(echo.parameters["required"], serde_json::json!(["text"]));
    assert_eq!(
        echo.parameters["properties"]["text"]["description"],
        "The text to echo."
    );
    let plugin = host
        .plugins()
        .into_iter()
        .find(|p| &**p.name() == "echo")
        .unwrap();
    assert_eq!(plugin.source(), &PluginSource::Bundled);
    assert!(!plugin.is_stateful());
}

#[tokio::test]
async fn a_plugin_file_loads_from_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(toolhost_tests::MISBEHAVE, dir.path().join("misbehave.wasm")).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a plugin").unwrap();
    let host = Host::builder()
        .plugin_dir(dir.path())
        .build()
        .await
        .unwrap();
    assert!(host.load_errors().is_empty());
    let names: Vec<String> = host.tools().iter().map(|t| t.name.clone()).collect();
    assert!(names.contains(&"flood".to_string()), "{names:?}");
    assert!(call_ok(&host, "flood", r#"{"bytes": 3}"#).await == "xxx");
}

#[tokio::test]
async fn a_missing_plugin_directory_is_empty() {
    let host = Host::builder()
        .plugin_dir("/nonexistent/toolhost/plugins")
        .build()
        .await
        .unwrap();
    assert!(host.tools().is_empty());
}

#[tokio::test]
async fn a_file_that_is_not_wasm_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("text.wasm");
    std::fs::write(&path, "hello, I am text").unwrap();
    let error = load_error(&path).await;
    assert!(error.starts_with("plugin \"text\" ("), "{error}");
    assert!(error.contains("is not a WebAssembly file"), "{error}");
}

#[tokio::test]
async fn a_core_module_is_reported_with_how_to_fix_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("core.wasm");
    std::fs::write(&path, b"\0asm\x01\0\0\0").unwrap();
    let error = load_error(&path).await;
    assert!(
        error.contains("core WebAssembly module, not a component"),
        "{error}"
    );
    assert!(error.contains("wasm32-wasip2"), "{error}");
}

#[tokio::test]
async fn a_corrupt_component_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corrupt.wasm");
    let bytes = std::fs::read(toolhost_tests::MISBEHAVE).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let error = load_error(&path).await;
    assert!(
        error.contains("is not a valid WebAssembly component"),
        "{error}"
    );
}

#[tokio::test]
async fn a_component_of_another_world_is_reported() {
    let error = load_error(Path::new(toolhost_tests::NOT_A_PLUGIN)).await;
    assert!(
        error.contains("does not export toolhost:plugin/tool@0.2.2"),
        "{error}"
    );
    assert!(error.contains("wasi:cli/run"), "{error}");
}

#[tokio::test]
async fn a_plugin_with_an_invalid_spec_is_reported_with_every_problem() {
    let error = load_error(Path::new(toolhost_tests::BADSPEC)).await;
    assert!(
        error.contains("tool name \"bad name!\" is invalid"),
        "{error}"
    );
    assert!(error.contains("empty description"), "{error}");
    assert!(error.contains("must describe an object"), "{error}");
    assert!(
        error.contains("permission \"Not A Permission\" is invalid"),
        "{error}"
    );
}

#[tokio::test]
async fn good_plugins_load_beside_bad_ones() {
    let host = Host::builder()
        .bundled(true)
        .plugin_file(toolhost_tests::BADSPEC)
        .plugin_file(toolhost_tests::NOT_A_PLUGIN)
        .build()
        .await
        .unwrap();
    assert_eq!(host.load_errors().len(), 2);
    assert_eq!(
        call_ok(&host, "echo", r#"{"text":"still here"}"#).await["text"],
        "still here"
    );
}

#[tokio::test]
async fn the_compile_cache_is_used_and_bad_entries_are_rebuilt() {
    use toolhost::runtime::Compiled;
    let cache = tempfile::tempdir().unwrap();
    let load = || async {
        let host = Host::builder()
            .plugin_file(toolhost_tests::SHAPES)
            .cache_dir(Some(cache.path().to_path_buf()))
            .build()
            .await
            .unwrap();
        let plugin = host.plugins().pop().unwrap();
        assert!(host.call("forget_shapes", "{}").await.is_ok());
        plugin.compiled()
    };
    assert_eq!(load().await, Compiled::Fresh);
    assert_eq!(load().await, Compiled::Cached);

    let entry = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .expect("a cache entry was written");
    // Corrupt one byte in the middle: detected by the checksum, rebuilt.
    let mut bytes = std::fs::read(&entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    assert_eq!(load().await, Compiled::Fresh);
    assert_eq!(load().await, Compiled::Cached);

    // Truncated: rebuilt too.
    let bytes = std::fs::read(&entry).unwrap();
    std::fs::write(&entry, &bytes[..bytes.len() / 3]).unwrap();
    assert_eq!(load().await, Compiled::Fresh);
    // Not a cache entry at all.
    std::fs::write(&entry, b"hello").unwrap();
    assert_eq!(load().await, Compiled::Fresh);
    assert_eq!(load().await, Compiled::Cached);
}

#[tokio::test]
async fn a_plugin_built_against_a_newer_minor_contract_loads() {
    let host = Host::builder()
        .plugin_file(toolhost_tests::CONTRACT_NEXT)
        .build()
        .await
        .unwrap();
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    assert_eq!(host.plugins()[0].contract(), "0.2.3");
    assert_eq!(call_ok(&host, "contract_version", "{}").await, "0.2.3");
}

#[tokio::test]
async fn a_plugin_built_against_an_unknown_contract_is_refused_naming_what_loads() {
    let error = load_error(Path::new(toolhost_tests::CONTRACT_FUTURE)).await;
    assert!(
        error.contains(
            "was built against contract toolhost:plugin@0.3.0, which this host does not know: \
             it speaks toolhost:plugin@0.2.2 and loads every released version (0.1.0, 0.2.0, \
             0.2.1, 0.2.2, that is 0.1.x and 0.2.x); run a toolhost that speaks 0.3.0"
        ),
        "{error}"
    );
}
