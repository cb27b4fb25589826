//! `Host`: the library entry point. It owns the runtime and the registry,
//! loads plugins, lists tools and runs calls; the CLI and the servers use it.
//! Built by `builder`; its plugins loaded, registered and removed in
//! `plugins`; one call end to end in `call` (`request`: what is asked;
//! `checks`: what arguments and output must be; `output`: the result
//! normalized), many at once in `batch`; reloaded in `reload`, from the
//! watcher of `watch`; tools as approval hooks in `hook`.

pub(crate) mod batch;
mod builder;
pub(crate) mod call;
mod checks;
mod hook;
mod output;
mod plugins;
mod reload;
mod request;
mod unique;
pub(crate) mod watch;

pub use request::{Arguments, CallRequest};
pub use watch::{DEFAULT_DEBOUNCE, DEFAULT_GRACE, WatchOptions, Watcher};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::audit::AuditLog;
use crate::caller::Caller;
use crate::capability::terminal::Terminals;
use crate::config::Config;
use crate::contract::spec::ToolSpec;
use crate::hooks::CallHook;
use crate::policy::Limits;
use crate::registry::{Generation, Registry};
use crate::runtime::{ArtifactCache, PluginVersion, Runtime};
use crate::source::LoadError;
use crate::store::SessionMemory;
use crate::toolsets::{Selection, Toolsets};

pub use builder::HostBuilder;

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
    /// The terminal sessions of the callers' sessions.
    terminals: Arc<Terminals>,
    /// The handles of callers without sessions.
    handles: Arc<crate::handles::Handles>,
    /// Calls running (or finished) as tasks.
    tasks: Arc<crate::tasks::Tasks>,
    /// True once the plugins found at start are loaded (or failed to).
    loaded: tokio::sync::watch::Sender<bool>,
    cache: Option<ArtifactCache>,
    /// Why the plugin directory (or the config) is not watched now, if it
    /// is not.
    not_watching: Mutex<Option<String>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("generation", &self.registry.snapshot().number())
            .field("profile", &self.settings.load().caller.profile().name)
            .finish_non_exhaustive()
    }
}

impl Host {
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

    /// How much each tenant may make the host hold (`[tenant_caps]`; the
    /// defaults when it was built without a config).
    pub fn tenant_caps(&self) -> crate::config::TenantCaps {
        self.config()
            .map_or_else(Default::default, |c| c.tenant_caps)
    }

    /// Why the plugin directory and config file are not watched for
    /// changes now, if they are not (a watcher retries on an interval).
    pub fn not_watching(&self) -> Option<String> {
        self.inner
            .not_watching
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn set_not_watching(&self, why: Option<String>) {
        *self
            .inner
            .not_watching
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = why;
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

    /// The terminal sessions kept for the callers' sessions.
    pub fn terminals(&self) -> &Arc<Terminals> {
        &self.inner.terminals
    }

    /// The handles naming the state of callers without sessions.
    pub fn handles(&self) -> &Arc<crate::handles::Handles> {
        &self.inner.handles
    }

    /// The generation of the configuration running, if the host has one
    /// (a profile made under another is stale).
    pub fn running_generation(&self) -> Option<u64> {
        self.inner
            .settings
            .load()
            .config
            .as_ref()
            .map(|config| config.generation)
    }

    /// The calls running (or finished) as tasks, and their settings
    /// (`[tasks]`, the defaults without a config).
    pub fn tasks(&self) -> (&Arc<crate::tasks::Tasks>, crate::tasks::TaskSettings) {
        let settings = self.config().map(|c| c.tasks).unwrap_or_default();
        (&self.inner.tasks, settings)
    }

    /// Ends session `session` of `tenant` (`None`: the local caller): its
    /// terminal and every process in it. True if it had a terminal.
    pub fn end_session(&self, tenant: Option<&str>, session: &str) -> bool {
        self.inner
            .terminals
            .end(&crate::runtime::session_key(tenant, session))
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
}
