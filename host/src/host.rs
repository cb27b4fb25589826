//! `Host`: the library entry point. It owns the runtime and the registry,
//! loads plugins, lists tools and runs calls; the CLI and the servers use it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result};
use serde_json::value::RawValue;

use crate::error::{CallError, ErrorKind};
use crate::registry::{Generation, Registry};
use crate::runtime::{Limits, LoadError, PluginSource, PluginVersion, Runtime, plugin_name_for};
use crate::spec::ToolSpec;

/// Builds a [`Host`]. Nothing is loaded unless asked for.
#[derive(Debug, Clone, Default)]
pub struct HostBuilder {
    dirs: Vec<PathBuf>,
    files: Vec<PathBuf>,
    bundled: bool,
    limits: Limits,
}

impl HostBuilder {
    /// Loads every `*.wasm` in `dir` (a missing directory is an empty one).
    pub fn plugin_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dirs.push(dir.into());
        self
    }

    /// Loads one plugin file.
    pub fn plugin_file(mut self, file: impl Into<PathBuf>) -> Self {
        self.files.push(file.into());
        self
    }

    /// Loads the plugins compiled into this binary (default: no). A file
    /// plugin with the same name replaces the bundled one.
    pub fn bundled(mut self, yes: bool) -> Self {
        self.bundled = yes;
        self
    }

    /// Limits of every call (default: [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Loads the plugins. A plugin that fails to load is logged and listed in
    /// [`Host::load_errors`]; the others load. Fails only when the runtime
    /// cannot start or a plugin directory cannot be read.
    pub async fn build(self) -> Result<Host> {
        let runtime = Runtime::shared()?;
        let host = Host {
            inner: Arc::new(Inner {
                runtime,
                registry: Registry::default(),
                limits: self.limits,
                load_errors: Mutex::default(),
            }),
        };
        let mut sources: Vec<(String, PluginSource)> = Vec::new();
        if self.bundled {
            for plugin in crate::bundled::PLUGINS {
                sources.push((plugin.name.to_string(), PluginSource::Bundled));
            }
        }
        for dir in &self.dirs {
            for file in wasm_files(dir)? {
                sources.push((plugin_name_for(&file), PluginSource::File(file)));
            }
        }
        for file in &self.files {
            sources.push((plugin_name_for(file), PluginSource::File(file.clone())));
        }
        // Compile concurrently, then register in a stable order (bundled
        // first, then files), so a file plugin replaces the bundled plugin of
        // the same name.
        let loads: Vec<_> = sources
            .into_iter()
            .map(|(name, source)| {
                let host = host.clone();
                tokio::spawn(async move { host.load(&name, source).await })
            })
            .collect();
        for load in loads {
            let registered = load
                .await
                .context("a plugin load task panicked")?
                .and_then(|version| host.register(version));
            if let Err(e) = registered {
                host.record_load_error(e);
            }
        }
        Ok(host)
    }
}

/// A running toolhost: plugins, tools, and calls. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    runtime: Arc<Runtime>,
    registry: Registry,
    limits: Limits,
    load_errors: Mutex<Vec<LoadError>>,
}

impl Host {
    /// A builder with nothing to load.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// The engine and linker.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.inner.runtime
    }

    /// The current registry generation.
    pub fn snapshot(&self) -> Arc<Generation> {
        self.inner.registry.snapshot()
    }

    /// Every tool, sorted by name.
    pub fn tools(&self) -> Vec<Arc<ToolSpec>> {
        self.snapshot().tools().map(|t| t.spec.clone()).collect()
    }

    /// Every loaded plugin version, sorted by name.
    pub fn plugins(&self) -> Vec<Arc<PluginVersion>> {
        self.snapshot().plugins().cloned().collect()
    }

    /// Plugins that failed to load, with why.
    pub fn load_errors(&self) -> Vec<LoadError> {
        self.inner
            .load_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The call limits.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Loads (compiles, describes, validates) one plugin without registering it.
    pub async fn load(&self, name: &str, source: PluginSource) -> Result<PluginVersion, LoadError> {
        let bytes: Arc<[u8]> = match &source {
            PluginSource::Bundled => crate::bundled::PLUGINS
                .iter()
                .find(|p| p.name == name)
                .map(|p| Arc::from(p.wasm))
                .ok_or_else(|| LoadError {
                    plugin: name.to_string(),
                    source: source.clone(),
                    problems: vec!["no bundled plugin has this name".into()],
                })?,
            PluginSource::File(path) => {
                tokio::fs::read(path)
                    .await
                    .map(Arc::from)
                    .map_err(|e| LoadError {
                        plugin: name.to_string(),
                        source: source.clone(),
                        problems: vec![format!("cannot read the file: {e}")],
                    })?
            }
        };
        PluginVersion::load(&self.inner.runtime, name, source, bytes).await
    }

    /// Makes a loaded plugin version live (replacing any version of the same
    /// plugin). Tool-name collisions are reported as an error; see
    /// [`Registry::add`].
    pub fn register(&self, version: PluginVersion) -> Result<(), LoadError> {
        let version = Arc::new(version);
        let added = self.inner.registry.add(version.clone())?;
        match &added.replaced {
            Some(old) => tracing::info!(
                plugin = %version.name(), source = %version.source(),
                from = %old.hash().short(), to = %version.hash().short(),
                "plugin replaced"
            ),
            None => tracing::info!(
                plugin = %version.name(), source = %version.source(),
                version = %version.hash().short(), tools = version.tools().len(),
                "plugin loaded"
            ),
        }
        match added.collisions {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn record_load_error(&self, error: LoadError) {
        tracing::error!("{error}");
        self.inner
            .load_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(error);
    }

    /// Calls `tool` with `arguments` (a JSON object as text; empty means `{}`)
    /// in a fresh sandbox. The result is JSON: a tool's plain-text result
    /// becomes a JSON string.
    pub async fn call(&self, tool: &str, arguments: &str) -> Result<Box<RawValue>, CallError> {
        let snapshot = self.snapshot();
        let Some(entry) = snapshot.tool(tool) else {
            return Err(unknown_tool(tool, &snapshot));
        };
        let arguments = check_arguments(&entry.spec, arguments, &self.inner.limits)?;
        let output = entry
            .plugin
            .call(
                &self.inner.runtime,
                &entry.spec,
                arguments,
                &self.inner.limits,
            )
            .await?;
        normalize_output(&entry.spec, output)
    }
}

/// Every `*.wasm` file directly in `dir`, sorted; a missing dir has none.
fn wasm_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(e).with_context(|| format!("reading plugin directory {}", dir.display()));
        }
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("reading plugin directory {}", dir.display()))?
            .path();
        if path.extension().is_some_and(|e| e == "wasm") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn unknown_tool(name: &str, snapshot: &Generation) -> CallError {
    let mut known: Vec<&str> = snapshot.tools().map(|t| t.spec.name.as_str()).collect();
    let shown = crate::error::bounded(name, 80);
    let hint = if known.is_empty() {
        "no tools are loaded".to_string()
    } else {
        known.truncate(30);
        format!("available tools: {}", known.join(", "))
    };
    CallError::new(
        ErrorKind::UnknownTool,
        format!("no tool named {shown:?}; {hint}"),
    )
}

/// Checks that the arguments are a JSON object within the size limit.
/// Returns the text to pass to the guest.
fn check_arguments<'a>(
    spec: &ToolSpec,
    arguments: &'a str,
    limits: &Limits,
) -> Result<&'a str, CallError> {
    if arguments.len() > limits.max_arguments {
        return Err(CallError::new(
            ErrorKind::InvalidArguments,
            format!(
                "arguments of tool {:?} are {} bytes, more than the limit of {} bytes",
                spec.name,
                arguments.len(),
                limits.max_arguments
            ),
        ));
    }
    let trimmed = arguments.trim();
    if trimmed.is_empty() {
        return Ok("{}");
    }
    match serde_json::from_str::<&RawValue>(trimmed) {
        Ok(raw) if raw.get().starts_with('{') => Ok(trimmed),
        Ok(raw) => Err(CallError::new(
            ErrorKind::InvalidJson,
            format!(
                "arguments of tool {:?} must be a JSON object, got {}",
                spec.name,
                json_type_name(raw.get())
            ),
        )),
        Err(e) => Err(CallError::new(
            ErrorKind::InvalidJson,
            format!("arguments of tool {:?} are not valid JSON: {e}", spec.name),
        )),
    }
}

fn json_type_name(json: &str) -> &'static str {
    match json.as_bytes().first() {
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// A tool's output as JSON: valid JSON passes through; text that does not
/// start like JSON becomes a JSON string; text that starts like JSON but does
/// not parse is an error (a broken result, not prose).
fn normalize_output(spec: &ToolSpec, output: String) -> Result<Box<RawValue>, CallError> {
    match serde_json::from_str::<Box<RawValue>>(&output) {
        Ok(raw) => Ok(raw),
        Err(e) if output.trim_start().starts_with(['{', '[', '"']) => Err(CallError::new(
            ErrorKind::InvalidOutput,
            format!(
                "tool {:?} (plugin {:?}) returned malformed JSON: {e}",
                spec.name, &*spec.plugin
            ),
        )),
        Err(_) => {
            let text = serde_json::to_string(&output).expect("strings serialize");
            Ok(RawValue::from_string(text).expect("a JSON string is valid JSON"))
        }
    }
}
