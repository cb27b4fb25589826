//! Hot reload with the real watcher on real files: add, replace in place and
//! by rename, delete, half-written and broken files, tool-name collisions,
//! config changes, a replacement storm under load, and draining.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::Receiver;
use toolhost::config::{Config, ConfigSource};
use toolhost::{CallRequest, ErrorKind, Host, Selection};
use toolhost::{ReloadEvent, WatchOptions, Watcher};

const FAST: WatchOptions = WatchOptions {
    debounce: Duration::from_millis(60),
    grace: Duration::from_secs(10),
};

struct Dir {
    _temp: tempfile::TempDir,
    plugins: PathBuf,
}

impl Dir {
    fn new() -> Self {
        let temp = tempfile::tempdir().unwrap();
        let plugins = temp.path().join("plugins");
        std::fs::create_dir(&plugins).unwrap();
        Self {
            _temp: temp,
            plugins,
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.plugins.join(name)
    }

    /// Replaces `name` atomically, as editors and `cargo build` do.
    fn install(&self, name: &str, wasm: &str) {
        let staging = self.plugins.join(format!(".{name}.partial"));
        std::fs::copy(wasm, &staging).unwrap();
        std::fs::rename(&staging, self.file(name)).unwrap();
    }
}

async fn watched(dir: &Path, options: WatchOptions) -> (Host, Watcher, Receiver<ReloadEvent>) {
    let host = Host::builder().bundled(true).build().await.unwrap();
    let events = host.events();
    let watcher = host.watch(dir, None, options).unwrap();
    (host, watcher, events)
}

/// The next event that matches, within a few seconds.
async fn next_event(
    events: &mut Receiver<ReloadEvent>,
    what: &str,
    matches: impl Fn(&ReloadEvent) -> bool,
) -> ReloadEvent {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Ok(event)) if matches(&event) => return event,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("event channel: {e}"),
            Err(_) => panic!("no {what} event"),
        }
    }
}

async fn which(host: &Host) -> Result<String, toolhost::CallError> {
    let result = host.call("which", json!({})).await?;
    let value: Value = serde_json::from_str(result.get()).unwrap();
    Ok(value["version"].as_str().unwrap().to_string())
}

fn is_loaded(event: &ReloadEvent) -> bool {
    matches!(event, ReloadEvent::Loaded { .. })
}

fn is_replaced(event: &ReloadEvent) -> bool {
    matches!(event, ReloadEvent::Replaced { .. })
}

#[tokio::test]
async fn reading_a_plugin_or_rewriting_the_same_bytes_does_not_reload_it() {
    let dir = Dir::new();
    let (_host, _watcher, mut events) = watched(&dir.plugins, FAST).await;
    std::fs::copy(toolhost_tests::FLIP_A, dir.file("flip.wasm")).unwrap();
    next_event(&mut events, "loaded", is_loaded).await;
    // Loading opened and read the file; a reader of it, or the same bytes
    // written again, must not start another load (or a loop of them).
    std::fs::read(dir.file("flip.wasm")).unwrap();
    std::fs::copy(toolhost_tests::FLIP_A, dir.file("flip.wasm")).unwrap();
    tokio::time::sleep(FAST.debounce * 15).await;
    let mut later = Vec::new();
    while let Ok(event) = events.try_recv() {
        later.push(event);
    }
    assert!(later.is_empty(), "unexpected events: {later:?}");
}

#[tokio::test]
async fn add_replace_in_place_replace_by_rename_and_delete() {
    let dir = Dir::new();
    let (host, _watcher, mut events) = watched(&dir.plugins, FAST).await;

    std::fs::copy(toolhost_tests::FLIP_A, dir.file("flip.wasm")).unwrap();
    let loaded = next_event(&mut events, "loaded", is_loaded).await;
    assert!(matches!(&loaded, ReloadEvent::Loaded { plugin, tools, .. }
        if plugin == "flip" && tools == &["which"]));
    assert_eq!(which(&host).await.unwrap(), "a");

    // In place: truncate and write.
    std::fs::write(
        dir.file("flip.wasm"),
        std::fs::read(toolhost_tests::FLIP_B).unwrap(),
    )
    .unwrap();
    next_event(&mut events, "replaced", is_replaced).await;
    assert_eq!(which(&host).await.unwrap(), "b");

    // By rename.
    dir.install("flip.wasm", toolhost_tests::FLIP_A);
    next_event(&mut events, "replaced", is_replaced).await;
    assert_eq!(which(&host).await.unwrap(), "a");

    std::fs::remove_file(dir.file("flip.wasm")).unwrap();
    next_event(&mut events, "removed", |e| {
        matches!(e, ReloadEvent::Removed { .. })
    })
    .await;
    let error = which(&host).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert!(
        error.message().contains("its plugin \"flip\" was removed"),
        "{error}"
    );
    assert!(
        !host
            .select(&Selection::all())
            .unwrap()
            .iter()
            .any(|t| t.name == "which")
    );
}

#[tokio::test]
async fn a_half_written_file_is_retried_not_failed() {
    let dir = Dir::new();
    let (host, _watcher, mut events) = watched(&dir.plugins, FAST).await;
    let bytes = std::fs::read(toolhost_tests::FLIP_B).unwrap();
    let path = dir.file("flip.wasm");
    // A slow writer: half now, the rest after longer than the debounce.
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(&bytes[bytes.len() / 2..]).unwrap();
    drop(file);
    let event = next_event(&mut events, "loaded or failed", |e| {
        matches!(e, ReloadEvent::Loaded { .. } | ReloadEvent::Failed { .. })
    })
    .await;
    assert!(is_loaded(&event), "{event}");
    assert_eq!(which(&host).await.unwrap(), "b");
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
}

#[tokio::test]
async fn a_broken_replacement_leaves_the_old_version_serving() {
    let dir = Dir::new();
    let (host, _watcher, mut events) = watched(&dir.plugins, FAST).await;
    dir.install("flip.wasm", toolhost_tests::FLIP_A);
    next_event(&mut events, "loaded", is_loaded).await;

    // Garbage, written atomically (so it is complete and final).
    let staging = dir.file(".broken");
    std::fs::write(&staging, b"\0asm\x0d\0\x01\0garbage").unwrap();
    std::fs::rename(&staging, dir.file("flip.wasm")).unwrap();
    let failed = next_event(&mut events, "failed", |e| {
        matches!(e, ReloadEvent::Failed { .. })
    })
    .await;
    assert!(
        failed
            .to_string()
            .contains("not a valid WebAssembly component"),
        "{failed}"
    );
    assert_eq!(which(&host).await.unwrap(), "a");
    let errors = host.load_errors();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].plugin, "flip");

    // A good version clears the error.
    dir.install("flip.wasm", toolhost_tests::FLIP_B);
    next_event(&mut events, "replaced", is_replaced).await;
    assert_eq!(which(&host).await.unwrap(), "b");
    assert!(host.load_errors().is_empty());
}

#[tokio::test]
async fn a_replacement_whose_tool_collides_is_refused() {
    let dir = Dir::new();
    let (host, _watcher, mut events) = watched(&dir.plugins, FAST).await;
    dir.install("flip.wasm", toolhost_tests::FLIP_A);
    next_event(&mut events, "loaded", is_loaded).await;
    // The new "flip" declares `echo`, which the bundled echo plugin has.
    dir.install("flip.wasm", toolhost_tests::CLASH);
    let failed = next_event(&mut events, "failed", |e| {
        matches!(e, ReloadEvent::Failed { .. })
    })
    .await;
    let text = failed.to_string();
    assert!(
        text.contains("tool \"echo\" is already provided by plugin \"echo\""),
        "{text}"
    );
    assert!(text.contains("keeps serving"), "{text}");
    assert_eq!(which(&host).await.unwrap(), "a");
    let echo = host.call("echo", json!({"text": "x"})).await.unwrap();
    assert_eq!(echo.get(), r#"{"text":"x"}"#);
}

#[tokio::test]
async fn a_directory_created_after_start_and_many_files_at_once() {
    let temp = tempfile::tempdir().unwrap();
    let plugins = temp.path().join("later");
    let host = Host::builder().build().await.unwrap();
    let mut events = host.events();
    let _watcher = host.watch(&plugins, None, FAST).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    std::fs::create_dir(&plugins).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut names = Vec::new();
    for plugin in toolhost::bundled::PLUGINS {
        std::fs::write(plugins.join(format!("{}.wasm", plugin.name)), plugin.wasm).unwrap();
        names.push(plugin.name.to_string());
    }
    for (name, path) in [
        ("misbehave", toolhost_tests::MISBEHAVE),
        ("shapes", toolhost_tests::SHAPES),
    ] {
        std::fs::copy(path, plugins.join(format!("{name}.wasm"))).unwrap();
        names.push(name.to_string());
    }
    let mut loaded = Vec::new();
    while loaded.len() < names.len() {
        if let ReloadEvent::Loaded { plugin, .. } =
            next_event(&mut events, "loaded", is_loaded).await
        {
            loaded.push(plugin);
        }
    }
    loaded.sort();
    names.sort();
    assert_eq!(loaded, names);
    assert!(host.call("echo", json!({"text": "x"})).await.is_ok());
}

#[tokio::test]
async fn config_changes_apply_when_valid_and_are_rejected_when_not() {
    let dir = Dir::new();
    let config_path = dir.plugins.parent().unwrap().join("toolhost.toml");
    let write_config = |text: &str| {
        let staging = config_path.with_extension("tmp");
        std::fs::write(&staging, text).unwrap();
        std::fs::rename(&staging, &config_path).unwrap();
    };
    write_config("[profiles.default]\nallow = []\n");
    let config = Config::load(&config_path).unwrap();
    let host = Host::builder()
        .bundled(true)
        .config(&config)
        .unwrap()
        .build()
        .await
        .unwrap();
    let mut events = host.events();
    let _watcher = host.watch(&dir.plugins, Some(&config_path), FAST).unwrap();
    assert!(host.select(&Selection::only(["chat"])).is_err());

    write_config(
        "[profiles.default]\nallow = []\n[toolsets.chat]\nincludes = [\"demo\"]\ntools = [\"word_count\"]\n",
    );
    next_event(&mut events, "config reloaded", |e| {
        matches!(e, ReloadEvent::ConfigReloaded { .. })
    })
    .await;
    let chat: Vec<String> = host
        .select(&Selection::only(["chat"]))
        .unwrap()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(chat, ["echo", "now", "word_count"]);

    write_config(
        "[profiles.default]\nallow = [\"Not Valid\"]\n[toolsets.chat]\nincludes = [\"chat\"]\n",
    );
    let rejected = next_event(&mut events, "config rejected", |e| {
        matches!(e, ReloadEvent::ConfigRejected { .. })
    })
    .await;
    let text = rejected.to_string();
    assert!(text.contains("profiles.default.allow[0]"), "{text}");
    assert!(text.contains("toolsets.chat"), "{text}");
    // The running config stays.
    assert_eq!(host.select(&Selection::only(["chat"])).unwrap().len(), 3);
    let _ = ConfigSource::Embedded;
}

#[tokio::test]
async fn a_replacement_storm_under_load_fails_no_call_and_leaks_no_version() {
    let dir = Dir::new();
    let options = WatchOptions {
        debounce: Duration::from_millis(15),
        grace: Duration::from_secs(10),
    };
    let (host, watcher, mut events) = watched(&dir.plugins, options).await;
    dir.install("flip.wasm", toolhost_tests::FLIP_A);
    next_event(&mut events, "loaded", is_loaded).await;

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let host = host.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut answers = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let result = host.call("which", json!({})).await;
                    answers.push(
                        result
                            .map(|r| r.get().to_string())
                            .map_err(|e| e.to_string()),
                    );
                }
                answers
            })
        })
        .collect();

    let mut versions = Vec::new();
    let mut replaced = 0;
    for round in 0..110 {
        let wasm = if round % 2 == 0 {
            toolhost_tests::FLIP_B
        } else {
            toolhost_tests::FLIP_A
        };
        dir.install("flip.wasm", wasm);
        next_event(&mut events, "replaced", is_replaced).await;
        replaced += 1;
        if let Some(version) = host.snapshot().plugin("flip") {
            versions.push(Arc::downgrade(version));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut calls = 0;
    for caller in callers {
        for answer in caller.await.unwrap() {
            calls += 1;
            let answer = answer.unwrap_or_else(|e| panic!("a call failed during the storm: {e}"));
            let answer: Value = serde_json::from_str(&answer).unwrap();
            let version = answer["version"].as_str().unwrap();
            assert!(version == "a" || version == "b", "{answer}");
            assert_eq!(answer["answer"], format!("answered by version {version}"));
        }
    }
    assert!(replaced >= 100);
    assert!(calls > 100, "only {calls} calls ran during the storm");
    drop(watcher);
    // Every replaced version drains and is released; exactly one is alive.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let alive = versions.iter().filter(|v| v.strong_count() > 0).count();
        if alive == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{alive} versions still alive"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn deleting_a_plugin_drains_its_calls_then_cancels_late_ones() {
    let dir = Dir::new();
    let (host, _watcher, mut events) = watched(
        &dir.plugins,
        WatchOptions {
            debounce: Duration::from_millis(60),
            grace: Duration::from_millis(700),
        },
    )
    .await;
    dir.install("flip.wasm", toolhost_tests::FLIP_A);
    next_event(&mut events, "loaded", is_loaded).await;
    let slow = {
        let host = host.clone();
        tokio::spawn(async move { host.call("which", json!({"sleep_ms": 300})).await })
    };
    let too_slow = {
        let host = host.clone();
        tokio::spawn(async move {
            host.dispatch(CallRequest::new("which", json!({"sleep_ms": 20000})))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    std::fs::remove_file(dir.file("flip.wasm")).unwrap();
    next_event(&mut events, "removed", |e| {
        matches!(e, ReloadEvent::Removed { .. })
    })
    .await;

    let after = which(&host).await.unwrap_err();
    assert_eq!(after.kind(), ErrorKind::Unavailable);

    let finished = slow.await.unwrap().unwrap();
    assert!(finished.get().contains("\"version\":\"a\""));
    let cancelled = too_slow.await.unwrap().unwrap_err();
    assert_eq!(cancelled.kind(), ErrorKind::Cancelled, "{cancelled}");
    assert!(
        cancelled.message().contains("drain grace period"),
        "{cancelled}"
    );

    let drained = next_event(&mut events, "drained", |e| {
        matches!(e, ReloadEvent::Drained { .. })
    })
    .await;
    assert!(
        matches!(
            drained,
            ReloadEvent::Drained {
                in_flight: 2,
                cancelled: 1,
                ..
            }
        ),
        "{drained}"
    );
}

#[tokio::test]
async fn a_profile_chosen_on_the_command_line_survives_config_reloads() {
    use toolhost::config::{Config, ConfigSource};
    let parse =
        |text: &str| Config::parse(text, ConfigSource::Embedded, &std::env::temp_dir()).unwrap();
    let two = "default_profile = \"wide\"\n[profiles.wide]\nallow = [\"*\"]\n[profiles.narrow]\n";
    let mut config = parse(two);
    config.default_profile = "narrow".into();
    config.pinned_profile = Some("narrow".into());
    let host = Host::builder()
        .config(&config)
        .unwrap()
        .build()
        .await
        .unwrap();
    assert_eq!(host.caller().profile().name, "narrow");

    // The file changes (its default is still "wide"): the pin holds.
    host.apply_config(parse(&format!("{two}# edited\n")))
        .unwrap();
    assert_eq!(host.caller().profile().name, "narrow");

    // A file without the pinned profile is refused; the running one stays.
    let error = host
        .apply_config(parse("default_profile = \"wide\"\n[profiles.wide]\n"))
        .unwrap_err();
    assert!(
        error.contains("\"narrow\" (chosen with --profile) is no longer defined"),
        "{error}"
    );
    assert_eq!(host.caller().profile().name, "narrow");
}
