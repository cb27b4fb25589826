//! Bundled plugins listed before they are compiled: their specs as captured
//! from the plugins themselves (`host/bundled-specs.json`, embedded in the
//! binary), and their code compiled at the first call (by the first tier,
//! then by the host's engine in the background), where the plugin's own
//! `describe` must say the same or the call fails.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasmtime::component::Component;

use super::checks::validate_manifest;
use super::load::{described, link};
use super::version::{Deferred, Linked, PluginVersion};
use crate::contract::ContentHash;
use crate::contract::bindings::toolhost::plugin::types::ToolSpec as WitToolSpec;
use crate::error::{CallError, ErrorKind};
use crate::runtime::cache::{ArtifactCache, Compiled};
use crate::runtime::engine::Runtime;
use crate::source::{LoadError, PluginSource};

/// The file the specs are kept in, and how to write it again.
pub const CAPTURED_FILE: &str = "host/bundled-specs.json";
const REGENERATE: &str =
    "TOOLHOST_BLESS=1 cargo nextest run -p toolhost-tests --test all bundled_specs";

/// What a bundled plugin says of itself, captured from its compiled code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapturedPlugin {
    /// The contract version it was built against.
    pub contract: String,
    /// The interfaces it imports.
    pub imports: Vec<String>,
    /// Whether calls with a session id share an instance.
    pub stateful: bool,
    /// Whether it exports the lifecycle hooks.
    pub lifecycle: bool,
    /// Its tools as the host shows them (the JSON of each `ToolSpec`).
    pub tools: Vec<Value>,
}

/// A captured tool: the fields of the contract's `tool-spec`.
#[derive(Deserialize)]
struct CapturedTool {
    name: String,
    description: String,
    parameters: Value,
    toolset: String,
    permissions: Vec<String>,
    requires_env: Vec<String>,
    emoji: Option<String>,
    read_only: bool,
    destructive: bool,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    output_schema: Option<Value>,
}

impl CapturedPlugin {
    /// What `version` says of itself; `None` when a tool has icons (such a
    /// plugin is not captured and loads at start).
    pub fn of(version: &PluginVersion) -> Option<Self> {
        if version.tools.iter().any(|tool| !tool.icons.is_empty()) {
            return None;
        }
        Some(Self {
            contract: version.contract.clone(),
            imports: version.imports.clone(),
            stateful: version.stateful,
            lifecycle: version.has_lifecycle,
            tools: version
                .tools
                .iter()
                .map(|tool| serde_json::to_value(&**tool).expect("a tool spec is JSON"))
                .collect(),
        })
    }

    /// The captured specs of the bundled plugin `name`, if it has some.
    pub fn bundled(name: &str) -> Option<&'static CapturedPlugin> {
        static ALL: OnceLock<BTreeMap<String, CapturedPlugin>> = OnceLock::new();
        ALL.get_or_init(|| {
            serde_json::from_str(crate::bundled::CAPTURED_SPECS).unwrap_or_else(|e| {
                tracing::error!(
                    "{CAPTURED_FILE} does not parse ({e}); the bundled plugins compile at \
                     start; regenerate it with `{REGENERATE}`"
                );
                BTreeMap::new()
            })
        })
        .get(name)
    }

    /// Its tools, validated as a plugin's `describe` answer is.
    fn specs(
        &self,
        plugin: &Arc<str>,
    ) -> Result<Vec<Arc<crate::contract::spec::ToolSpec>>, Vec<String>> {
        let mut raw = Vec::with_capacity(self.tools.len());
        for tool in &self.tools {
            let tool: CapturedTool = serde_json::from_value(tool.clone())
                .map_err(|e| vec![format!("a captured tool spec does not parse: {e}")])?;
            raw.push(WitToolSpec {
                name: tool.name,
                description: tool.description,
                parameters: tool.parameters.to_string(),
                toolset: tool.toolset,
                permissions: tool.permissions,
                requires_env: tool.requires_env,
                emoji: tool.emoji,
                read_only: tool.read_only,
                destructive: tool.destructive,
                title: tool.title,
                output_schema: tool.output_schema.map(|schema| schema.to_string()),
            });
        }
        let (tools, problems) = validate_manifest(plugin, raw, Vec::new());
        if problems.is_empty() {
            Ok(tools)
        } else {
            Err(problems)
        }
    }
}

impl PluginVersion {
    /// A version listed from `captured` and compiled from `bytes` (through
    /// `cache`) at its first call, which fails with the reason when they do
    /// not compile or describe themselves otherwise.
    #[doc(hidden)]
    pub fn deferred(
        name: &str,
        source: PluginSource,
        bytes: &'static [u8],
        captured: &CapturedPlugin,
        cache: Option<ArtifactCache>,
    ) -> Result<PluginVersion, LoadError> {
        let hash = ContentHash::of(bytes);
        Self::deferred_hashed(name, source, bytes, hash, captured, cache)
    }

    /// The bundled `plugin`, listed from `captured` like
    /// [`PluginVersion::deferred`], named by the hash computed when it was
    /// embedded: a start reads none of its bytes until its first call.
    pub(crate) fn bundled(
        plugin: &'static crate::bundled::BundledPlugin,
        captured: &CapturedPlugin,
        cache: Option<ArtifactCache>,
    ) -> Result<PluginVersion, LoadError> {
        let (source, hash) = (PluginSource::Bundled, ContentHash(plugin.hash));
        Self::deferred_hashed(plugin.name, source, plugin.wasm, hash, captured, cache)
    }

    fn deferred_hashed(
        name: &str,
        source: PluginSource,
        bytes: &'static [u8],
        hash: ContentHash,
        captured: &CapturedPlugin,
        cache: Option<ArtifactCache>,
    ) -> Result<PluginVersion, LoadError> {
        let plugin: Arc<str> = name.into();
        let runtime = Runtime::shared()
            .map_err(|e| LoadError::new(name, &source, format!("no runtime: {e:#}")))?;
        let tools = captured.specs(&plugin).map_err(|problems| LoadError {
            plugin: name.to_string(),
            source: source.clone(),
            problems,
        })?;
        Ok(PluginVersion {
            name: plugin,
            source,
            hash,
            size: bytes.len(),
            code: tokio::sync::OnceCell::new(),
            upgraded: Arc::default(),
            deferred: Some(Deferred {
                bytes,
                cache,
                runtime,
            }),
            tools,
            stateful: captured.stateful,
            has_lifecycle: captured.lifecycle,
            imports: captured.imports.clone(),
            contract: captured.contract.clone(),
            sessions: Default::default(),
            ready: Arc::default(),
            flights: Arc::default(),
            adapter: None,
        })
    }

    /// The linked code, compiled now when this is its first call.
    pub(super) async fn linked(&self, runtime: &Runtime) -> Result<&Linked, CallError> {
        if let Some(linked) = self.upgraded.get() {
            return Ok(linked);
        }
        let code = match self.code.get() {
            Some(code) => code,
            None => self.code.get_or_init(|| self.compile(runtime)).await,
        };
        code.as_ref().map_err(|problem| {
            CallError::new(
                ErrorKind::Unavailable,
                format!("plugin {:?} ({}): {problem}", &*self.name, self.source),
            )
        })
    }

    async fn compile(&self, runtime: &Runtime) -> Result<Linked, String> {
        let began = Instant::now();
        let compiled = self.compile_deferred(runtime).await;
        match &compiled {
            Ok(linked) => tracing::info!(
                plugin = %self.name, compiled = ?linked.compiled,
                ms = began.elapsed().as_millis() as u64,
                "plugin compiled at its first call"
            ),
            Err(problem) => {
                tracing::error!("plugin {:?} ({}): {problem}", &*self.name, self.source)
            }
        }
        compiled
    }

    async fn compile_deferred(&self, runtime: &Runtime) -> Result<Linked, String> {
        let Some(Deferred {
            bytes,
            cache,
            runtime: host,
        }) = &self.deferred
        else {
            return Err("has no code to compile".into());
        };
        let (bytes, hash) = (*bytes, self.hash);
        // The host engine's code when the cache has it; otherwise the first
        // tier's, while the host's engine compiles it in the background.
        let (cached, engine) = (cache.clone(), runtime.engine().clone());
        let cached = tokio::task::spawn_blocking(move || cached?.load(&engine, &hash))
            .await
            .map_err(|e| format!("reading it from the cache was interrupted: {e}"))?;
        let (linked, interfaces) = match cached {
            Some(component) => link(runtime, component, Compiled::Cached)
                .map_err(|e| format!("does not link at its first call: {e}"))?,
            None => {
                let tier = runtime
                    .first_tier()
                    .map_err(|e| format!("cannot start the first tier's engine: {e:#}"))?;
                let engine = tier.engine().clone();
                let component = tokio::task::spawn_blocking(move || Component::new(&engine, bytes))
                    .await
                    .map_err(|e| format!("compiling it at its first call was interrupted: {e}"))?
                    .map_err(|e| format!("does not compile at its first call: {e:#}"))?;
                let (mut linked, interfaces) = link(&tier, component, Compiled::Fresh)
                    .map_err(|e| format!("does not link at its first call: {e}"))?;
                linked.tier = Some(tier);
                (linked, interfaces)
            }
        };
        let (tools, stateful) = described(runtime, &self.name, &linked)
            .await
            .map_err(|problems| format!("does not describe itself: {}", problems.join("; ")))?;
        let now = CapturedPlugin {
            contract: interfaces.contract,
            imports: interfaces.imports,
            stateful,
            lifecycle: linked.lifecycle.is_some(),
            tools: tools
                .iter()
                .map(|tool| serde_json::to_value(&**tool).expect("a tool spec is JSON"))
                .collect(),
        };
        if Some(now) != CapturedPlugin::of(self) {
            return Err(format!(
                "describes itself otherwise than the specs it was listed with ({CAPTURED_FILE}, \
                 captured when toolhost was built); regenerate them with `{REGENERATE}` and \
                 rebuild"
            ));
        }
        if linked.tier.is_some() {
            self.upgrade(host.clone(), cache.clone(), bytes);
        }
        Ok(linked)
    }

    /// Compiles the code with the host's engine (through the cache) in the
    /// background; calls that start after it is done run it.
    fn upgrade(&self, host: Arc<Runtime>, cache: Option<ArtifactCache>, bytes: &'static [u8]) {
        let (name, hash, upgraded) = (self.name.clone(), self.hash, self.upgraded.clone());
        tokio::task::spawn_blocking(move || {
            let compiled = match cache {
                Some(cache) => cache.load_or_compile(host.engine(), &hash, bytes),
                None => Component::new(host.engine(), bytes).map(|c| (c, Compiled::Fresh)),
            };
            let linked = compiled
                .map_err(|e| format!("{e:#}"))
                .and_then(|(component, compiled)| link(&host, component, compiled));
            match linked {
                Ok((linked, _)) => {
                    let _ = upgraded.set(linked);
                    // Gives back what the compiler freed on this thread's
                    // heap (most of it), not kept for a compilation that
                    // may never come.
                    #[cfg(target_env = "gnu")]
                    // SAFETY: malloc_trim only returns free memory to the OS.
                    unsafe {
                        libc::malloc_trim(0);
                    }
                    tracing::debug!(plugin = %name, "plugin's optimised code serves its calls");
                }
                Err(e) => tracing::warn!(
                    plugin = %name,
                    "the optimised compilation failed; the first tier's code goes on serving: {e}"
                ),
            }
        });
    }
}
