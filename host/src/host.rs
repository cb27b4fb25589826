//! `Host`: the library entry point. It owns the runtime and the registry,
//! loads plugins, lists tools and runs calls; the CLI and the servers use it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use anyhow::{Context as _, Result};
use arc_swap::ArcSwap;

use crate::approval::{Approvals, Approver, DenyApprover};
use crate::audit::AuditLog;
use crate::caller::Caller;
use crate::config::{AuditTarget, Config};
use crate::contract::spec::ToolSpec;
use crate::hooks::CallHook;
use crate::policy::Profile;
use crate::registry::{Generation, Registry};
use crate::runtime::{
    ArtifactCache, Limits, LoadError, PluginSource, PluginVersion, Runtime, SessionMemory,
    is_declarative_file, plugin_files, plugin_name_for,
};
use crate::toolsets::{CompositeToolset, Selection, Toolsets};

/// What can change while the host runs (on config reload), swapped as one.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) caller: Caller,
    pub(crate) toolsets: Toolsets,
    pub(crate) config: Option<Arc<Config>>,
}

/// A tool in a listing, and why it is hidden from the caller, if it is.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The tool.
    pub spec: Arc<ToolSpec>,
    /// Why the caller is not offered it.
    pub hidden: Option<String>,
}

/// Default number of calls of one batch in flight at once.
pub const DEFAULT_BATCH_CONCURRENCY: usize = 16;

/// Default idle time after which a stateful session's instance is torn down.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(600);

/// Default memory all stateful sessions of a host may hold together.
pub const DEFAULT_SESSIONS_MEMORY: usize = 1 << 30;

/// Builds a [`Host`]. Nothing is loaded unless asked for; see each method for
/// its default.
#[derive(Clone)]
pub struct HostBuilder {
    dirs: Vec<PathBuf>,
    files: Vec<PathBuf>,
    bundled: bool,
    profile: Option<Arc<Profile>>,
    limits: Option<Limits>,
    approver: Arc<dyn Approver>,
    approval_timeout: Duration,
    allowlist: Option<PathBuf>,
    audit: Option<Arc<AuditLog>>,
    config: Option<Arc<Config>>,
    toolsets: BTreeMap<String, CompositeToolset>,
    hooks: Vec<Arc<dyn CallHook>>,
    batch_concurrency: usize,
    session_idle: Duration,
    sessions_memory: usize,
    cache: Option<ArtifactCache>,
    background: bool,
}

impl Default for HostBuilder {
    fn default() -> Self {
        Self {
            dirs: Vec::new(),
            files: Vec::new(),
            bundled: false,
            profile: None,
            limits: None,
            approver: Arc::new(DenyApprover),
            approval_timeout: Duration::from_secs(60),
            allowlist: None,
            audit: None,
            config: None,
            toolsets: BTreeMap::new(),
            hooks: Vec::new(),
            batch_concurrency: DEFAULT_BATCH_CONCURRENCY,
            session_idle: DEFAULT_SESSION_IDLE,
            sessions_memory: DEFAULT_SESSIONS_MEMORY,
            background: false,
            cache: ArtifactCache::default_dir().map(ArtifactCache::new),
        }
    }
}

impl std::fmt::Debug for HostBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuilder")
            .field("dirs", &self.dirs)
            .field("files", &self.files)
            .field("bundled", &self.bundled)
            .field("hooks", &self.hooks.len())
            .finish_non_exhaustive()
    }
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

    /// The profile of the default caller (default: one that allows nothing,
    /// so only tools without permissions are available).
    pub fn profile(mut self, profile: Arc<Profile>) -> Self {
        self.profile = Some(profile);
        self
    }

    /// Limits of the default caller's calls (default: the profile's).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Who approves approval-required calls and dangerous commands (default:
    /// nobody, so they are denied).
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = approver;
        self
    }

    /// How long the approver has to answer (default 60 s).
    pub fn approval_timeout(mut self, timeout: Duration) -> Self {
        self.approval_timeout = timeout;
        self
    }

    /// File where `always` approvals are kept (default: none, memory only).
    pub fn allowlist(mut self, path: impl Into<PathBuf>) -> Self {
        self.allowlist = Some(path.into());
        self
    }

    /// Writes one audit line per call (default: none).
    pub fn audit(mut self, audit: AuditLog) -> Self {
        self.audit = Some(Arc::new(audit));
        self
    }

    /// Everything a configuration says: plugin directory, bundled plugins,
    /// default profile, toolsets, cache, audit, approvals, batch concurrency
    /// and session idle time. Builder calls after this one override it.
    pub fn config(mut self, config: &Config) -> Result<Self> {
        let profile = config
            .profile(&config.default_profile, None)
            .map_err(anyhow::Error::msg)?;
        if let Some(dir) = &config.plugins {
            self.dirs.push(dir.clone());
        }
        self.bundled = config.bundled;
        self.profile = Some(profile);
        self.toolsets = config.toolsets.composites().clone();
        self.cache = config.cache_dir.clone().map(ArtifactCache::new);
        self.audit = match &config.audit {
            AuditTarget::Off => None,
            AuditTarget::Stderr => Some(Arc::new(AuditLog::stderr())),
            AuditTarget::File(path) => {
                Some(Arc::new(AuditLog::file(path).with_context(|| {
                    format!("opening the audit log {}", path.display())
                })?))
            }
        };
        self.allowlist = Some(config.allowlist.clone());
        self.approval_timeout = config.approval_timeout;
        self.batch_concurrency = config.batch_concurrency;
        self.session_idle = config.session_idle;
        self.sessions_memory = config.sessions_memory;
        for name in config.unconfined_terminal_profiles() {
            tracing::warn!(
                profile = name,
                "terminal.sandbox = \"none\": this profile's terminal commands run unconfined, \
                 with toolhost's own rights"
            );
        }
        self.config = Some(Arc::new(config.clone()));
        Ok(self)
    }

    /// Adds a composite toolset (default: none).
    pub fn toolset(mut self, name: impl Into<String>, toolset: CompositeToolset) -> Self {
        self.toolsets.insert(name.into(), toolset);
        self
    }

    /// Adds a hook that sees every call (default: none).
    pub fn hook(mut self, hook: impl CallHook) -> Self {
        self.hooks.push(Arc::new(hook));
        self
    }

    /// How many calls of one batch run at once (default:
    /// [`DEFAULT_BATCH_CONCURRENCY`]).
    pub fn batch_concurrency(mut self, calls: usize) -> Self {
        self.batch_concurrency = calls.max(1);
        self
    }

    /// How long a stateful session may sit idle before its instance is torn
    /// down (default: [`DEFAULT_SESSION_IDLE`]).
    pub fn session_idle(mut self, idle: Duration) -> Self {
        self.session_idle = idle;
        self
    }

    /// Memory all stateful sessions may hold together, in bytes (default:
    /// [`DEFAULT_SESSIONS_MEMORY`]). A session whose instance would grow past
    /// it fails with a memory error naming the quota.
    pub fn sessions_memory(mut self, bytes: usize) -> Self {
        self.sessions_memory = bytes;
        self
    }

    /// Where compiled plugins are cached (default:
    /// [`ArtifactCache::default_dir`]); `None` compiles every load.
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache = dir.map(ArtifactCache::new);
        self
    }

    /// Compile and register the plugins in the background (default: no):
    /// [`HostBuilder::build`] returns at once, tools appear as their plugins
    /// finish (bundled and file plugins compiled in parallel, registered in
    /// the usual order), and [`Host::loaded`] resolves when all have. A server
    /// uses it to answer `initialize` before any plugin is compiled.
    pub fn load_in_background(mut self, yes: bool) -> Self {
        self.background = yes;
        self
    }

    /// Loads the plugins. A plugin that fails to load is logged and listed in
    /// [`Host::load_errors`]; the others load. Fails when the runtime cannot
    /// start, a plugin directory cannot be read, or the toolsets are invalid.
    pub async fn build(self) -> Result<Host> {
        let runtime = Runtime::shared()?;
        let workspace = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let mut profile = self
            .profile
            .unwrap_or_else(|| Arc::new(Profile::deny_all("none", workspace)));
        if let Some(limits) = self.limits {
            Arc::make_mut(&mut profile).limits = limits;
        }
        let approvals = Arc::new(Approvals::new(
            self.approver,
            self.approval_timeout,
            self.allowlist,
        ));
        let caller = Caller::new(profile, approvals);
        let toolsets = Toolsets::new(self.toolsets).map_err(|problems| {
            anyhow::anyhow!("invalid toolsets:\n  {}", problems.join("\n  "))
        })?;
        let host = Host {
            inner: Arc::new(Inner {
                runtime,
                registry: Registry::default(),
                settings: ArcSwap::from_pointee(Settings {
                    caller,
                    toolsets,
                    config: self.config,
                }),
                audit: self.audit,
                load_errors: Mutex::default(),
                events: tokio::sync::broadcast::channel(256).0,
                hooks: self.hooks,
                batch_concurrency: self.batch_concurrency,
                session_idle: self.session_idle,
                sessions_memory: SessionMemory::new(self.sessions_memory),
                loaded: tokio::sync::watch::channel(false).0,
                cache: self.cache,
            }),
        };
        spawn_session_sweeper(Arc::downgrade(&host.inner), self.session_idle);
        let mut sources: Vec<(String, PluginSource)> = Vec::new();
        if self.bundled {
            for plugin in crate::bundled::PLUGINS {
                sources.push((plugin.name.to_string(), PluginSource::Bundled));
            }
        }
        for dir in &self.dirs {
            for file in plugin_files(dir)
                .with_context(|| format!("reading plugin directory {}", dir.display()))?
            {
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
                let task_source = source.clone();
                (
                    name.clone(),
                    source,
                    tokio::spawn(async move { host.load(&name, task_source).await }),
                )
            })
            .collect();
        let register = {
            let host = host.clone();
            async move {
                for (name, source, load) in loads {
                    let registered = match load.await {
                        Ok(loaded) => loaded.and_then(|version| host.register(version)),
                        Err(e) => Err(LoadError::new(
                            &name,
                            &source,
                            format!("its load task failed: {e}"),
                        )),
                    };
                    if let Err(e) = registered {
                        host.record_load_error(e);
                    }
                }
                host.inner.loaded.send_replace(true);
            }
        };
        if self.background {
            tokio::spawn(register);
        } else {
            register.await;
        }
        Ok(host)
    }
}

/// A running toolhost: plugins, tools, and calls. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Arc<Runtime>,
    registry: Registry,
    settings: ArcSwap<Settings>,
    audit: Option<Arc<AuditLog>>,
    load_errors: Mutex<BTreeMap<String, LoadError>>,
    events: tokio::sync::broadcast::Sender<crate::registry::ReloadEvent>,
    hooks: Vec<Arc<dyn CallHook>>,
    batch_concurrency: usize,
    session_idle: Duration,
    sessions_memory: Arc<SessionMemory>,
    /// True once the plugins found at start are loaded (or failed to).
    loaded: tokio::sync::watch::Sender<bool>,
    cache: Option<ArtifactCache>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("generation", &self.registry.snapshot().number())
            .field("profile", &self.settings.load().caller.profile().name)
            .finish_non_exhaustive()
    }
}

/// Tears down idle stateful sessions until the host is dropped.
fn spawn_session_sweeper(host: Weak<Inner>, idle: Duration) {
    let period = (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(10));
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Some(host) = host.upgrade() else { return };
            let plugins: Vec<_> = host
                .registry
                .snapshot()
                .plugins()
                .filter(|p| p.is_stateful())
                .cloned()
                .collect();
            drop(host);
            for plugin in plugins {
                let expired = plugin.expire_idle_sessions(idle).await;
                if expired > 0 {
                    tracing::debug!(plugin = %plugin.name(), expired, "idle sessions torn down");
                }
            }
        }
    });
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

    /// Plugins that failed to load (their latest failure), with why.
    pub fn load_errors(&self) -> Vec<LoadError> {
        self.inner
            .load_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    pub(crate) fn clear_load_error(&self, plugin: &str) {
        self.inner
            .load_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(plugin);
    }

    /// The call limits of the default caller.
    pub fn limits(&self) -> Limits {
        self.caller().profile().limits.clone()
    }

    /// The default caller (the local user: CLI, MCP over stdio).
    pub fn caller(&self) -> Caller {
        self.inner.settings.load().caller.clone()
    }

    /// The configuration the host runs on, if it was built from one.
    pub fn config(&self) -> Option<Arc<Config>> {
        self.inner.settings.load().config.clone()
    }

    pub(crate) fn settings(&self) -> Arc<Settings> {
        self.inner.settings.load_full()
    }

    pub(crate) fn set_settings(&self, settings: Settings) {
        self.inner.settings.store(Arc::new(settings));
    }

    pub(crate) fn events_sender(
        &self,
    ) -> &tokio::sync::broadcast::Sender<crate::registry::ReloadEvent> {
        &self.inner.events
    }

    /// Reload events (loaded, replaced, removed, drained, failed, config).
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<crate::registry::ReloadEvent> {
        self.inner.events.subscribe()
    }

    pub(crate) fn audit_log(&self) -> Option<&AuditLog> {
        self.inner.audit.as_deref()
    }

    /// The composite toolsets.
    pub fn toolsets(&self) -> Toolsets {
        self.inner.settings.load().toolsets.clone()
    }

    pub(crate) fn hooks(&self) -> &[Arc<dyn CallHook>] {
        &self.inner.hooks
    }

    pub(crate) fn batch_concurrency(&self) -> usize {
        self.inner.batch_concurrency
    }

    /// How long stateful sessions may sit idle.
    pub fn session_idle(&self) -> Duration {
        self.inner.session_idle
    }

    /// Resolves once the plugins found at start are loaded (or failed to);
    /// at once unless the host was built with
    /// [`HostBuilder::load_in_background`].
    pub async fn loaded(&self) {
        let mut done = self.inner.loaded.subscribe();
        let _ = done.wait_for(|loaded| *loaded).await;
    }

    /// The memory budget of every stateful session together, and its use.
    pub fn sessions_memory(&self) -> &Arc<SessionMemory> {
        &self.inner.sessions_memory
    }

    /// The tools a selection of toolsets offers the default caller, sorted
    /// by name.
    pub fn select(&self, selection: &Selection) -> Result<Vec<Arc<ToolSpec>>, String> {
        self.select_for(&self.caller(), selection)
    }

    /// The tools a selection of toolsets offers `caller`: those available
    /// under its profile.
    pub fn select_for(
        &self,
        caller: &Caller,
        selection: &Selection,
    ) -> Result<Vec<Arc<ToolSpec>>, String> {
        Ok(self
            .listing(caller, selection)?
            .into_iter()
            .filter(|listed| listed.hidden.is_none())
            .map(|listed| listed.spec)
            .collect())
    }

    /// Every tool of a selection with, for those not offered to `caller`,
    /// why they are hidden.
    pub fn listing(&self, caller: &Caller, selection: &Selection) -> Result<Vec<Listed>, String> {
        let snapshot = self.snapshot();
        let names = self
            .inner
            .settings
            .load()
            .toolsets
            .select(selection, &*snapshot)?;
        Ok(names
            .iter()
            .filter_map(|name| snapshot.tool(name))
            .map(|entry| Listed {
                spec: entry.spec.clone(),
                hidden: crate::availability::check(&entry.spec, caller.profile()).err(),
            })
            .collect())
    }

    /// Unloads the plugin called `name` now: its tools disappear at once,
    /// calls in flight finish (see [`Host::unload`] for a bounded drain), its
    /// stateful sessions are torn down. Returns the version removed.
    pub async fn remove_plugin(&self, name: &str) -> Option<Arc<PluginVersion>> {
        let removed = self.remove_from_registry(name)?;
        removed.drain(Duration::MAX).await;
        tracing::info!(plugin = %name, version = %removed.hash().short(), "plugin removed");
        Some(removed)
    }

    pub(crate) fn remove_from_registry(&self, name: &str) -> Option<Arc<PluginVersion>> {
        self.inner.registry.remove(name)
    }

    /// Makes `version` live and returns the version it replaced; refuses it
    /// (keeping the old one) when a tool name collides with another plugin's.
    pub(crate) fn swap_in(
        &self,
        version: PluginVersion,
    ) -> Result<Option<Arc<PluginVersion>>, LoadError> {
        let added = self.inner.registry.add(Arc::new(version))?;
        match added.collisions {
            Some(error) => {
                self.record_load_error(error);
                Ok(added.replaced)
            }
            None => Ok(added.replaced),
        }
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
            PluginSource::File(path) if is_declarative_file(path) => {
                return self.load_declarative(name, path).await;
            }
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
        PluginVersion::load(
            &self.inner.runtime,
            name,
            source,
            bytes,
            self.inner.cache.as_ref(),
        )
        .await
    }

    /// Loads a declarative tool file: validates it and pairs its tools with
    /// the wrapper plugin that runs them.
    async fn load_declarative(&self, name: &str, path: &Path) -> Result<PluginVersion, LoadError> {
        let source = PluginSource::File(path.to_path_buf());
        let text = tokio::fs::read_to_string(path)
            .await
            .map_err(|e| LoadError::new(name, &source, format!("cannot read the file: {e}")))?;
        PluginVersion::declarative(
            &self.inner.runtime,
            name,
            source,
            &text,
            self.inner.cache.as_ref(),
        )
        .await
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

    pub(crate) fn record_load_error(&self, error: LoadError) {
        tracing::error!("{error}");
        self.inner
            .load_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(error.plugin.clone(), error);
    }
}
