//! `HostBuilder`: what a [`Host`] loads and how it runs, and building it
//! (compiling the plugins, in the background if asked).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use anyhow::{Context as _, Result};
use arc_swap::ArcSwap;

use super::{Host, Inner, Settings};
use crate::approval::{Approvals, Approver, DenyApprover};
use crate::audit::AuditLog;
use crate::caller::Caller;
use crate::capability::Profile;
use crate::capability::terminal::Terminals;
use crate::config::{
    AuditTarget, Config, DEFAULT_BATCH_CONCURRENCY, DEFAULT_SESSION_IDLE, DEFAULT_SESSIONS_MEMORY,
    default_cache_dir,
};
use crate::hooks::CallHook;
use crate::policy::Limits;
use crate::registry::Registry;
use crate::runtime::{ArtifactCache, Runtime};
use crate::source::{LoadError, PluginSource, plugin_files, plugin_name_for};
use crate::store::SessionMemory;
use crate::toolsets::{CompositeToolset, Toolsets};

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
    approvals_auto: Vec<String>,
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
            approvals_auto: Vec::new(),
            audit: None,
            config: None,
            toolsets: BTreeMap::new(),
            hooks: Vec::new(),
            batch_concurrency: DEFAULT_BATCH_CONCURRENCY,
            session_idle: DEFAULT_SESSION_IDLE,
            sessions_memory: DEFAULT_SESSIONS_MEMORY,
            background: false,
            cache: default_cache_dir().map(ArtifactCache::new),
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

    /// Rule sets that answer approvals before the approver is asked
    /// (`approvals.auto`, e.g. `"build-dirs"`).
    pub fn approvals_auto(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.approvals_auto = names.into_iter().map(Into::into).collect();
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
        self.approvals_auto = config.approvals_auto.clone();
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
    /// [`default_cache_dir`]); `None` compiles every load.
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
        let auto =
            crate::approval::auto::rules(&self.approvals_auto).map_err(anyhow::Error::msg)?;
        let approvals = Arc::new(
            Approvals::new(self.approver, self.approval_timeout, self.allowlist)
                .with_auto(auto.clone())
                .editing(self.config.as_ref().map(|c| c.source.clone())),
        );
        let caller = Caller::new(profile, approvals);
        let toolsets = Toolsets::new(self.toolsets).map_err(|problems| {
            anyhow::anyhow!("invalid toolsets:\n  {}", problems.join("\n  "))
        })?;
        let terminals = Arc::new(Terminals::default());
        // The repository guard's inotify instance, taken before any command
        // could take every one of toolhost's user.
        crate::capability::terminal::confine::guard::start_watcher();
        let sessions_memory = SessionMemory::new(self.sessions_memory);
        if let Some(config) = &self.config {
            terminals.set_output_cap(config.tenant_caps.background_output);
            sessions_memory.set_share(
                config
                    .tenant_caps
                    .sessions_memory_share(self.sessions_memory, config.tenants.len()),
            );
        }
        let handles = Arc::new(crate::handles::Handles::new(
            self.config
                .as_ref()
                .map(|config| config.state.clone())
                .unwrap_or_default(),
            self.session_idle,
            terminals.clone(),
        ));
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
                sessions_memory,
                terminals,
                handles,
                tasks: Default::default(),
                loaded: tokio::sync::watch::channel(false).0,
                cache: self.cache,
                not_watching: Mutex::default(),
            }),
        };
        host.bind_hooks(&auto);
        let weak = Arc::downgrade(&host.inner);
        host.inner
            .handles
            .end_plugin_sessions_with(Box::new(move |key: &str| {
                if let Some(inner) = weak.upgrade() {
                    for plugin in inner.registry.snapshot().plugins() {
                        plugin.end_session(key);
                    }
                }
            }));
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
                    tokio::spawn(async move { host.load_at_start(&name, task_source).await }),
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

impl Host {
    /// A builder with nothing to load.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
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
            let terminals = host.terminals.clone();
            drop(host);
            let ended = terminals.expire_idle(idle);
            if ended > 0 {
                tracing::debug!(ended, "idle terminal sessions ended");
            }
            for plugin in plugins {
                let expired = plugin.expire_idle_sessions(idle).await;
                if expired > 0 {
                    tracing::debug!(plugin = %plugin.name(), expired, "idle sessions torn down");
                }
            }
        }
    });
}
