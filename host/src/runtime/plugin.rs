//! A loaded plugin version: the compiled component, its `InstancePre`, its
//! validated tool specs, and how to run one call in a fresh instance.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, InstancePre};
use wasmtime::{CallHook, Store, Trap};

use super::bindings::exports::toolhost::plugin::tool::Guest as ToolGuest;
use super::bindings::{GuestToolError, LifecycleIndices, Manifest, ToolIndices};
use super::cache::{ArtifactCache, Compiled};
use super::engine::{Running, Runtime};
use super::flight::{Drained, Flight, Flights};
use super::grants::Grants;
use super::ready::{ReadyInstances, Recipe};
use super::sandbox::{Identity, Limits, Sandbox};
use super::session::{
    LiveInstance, MAX_SESSIONS, MAX_SESSIONS_PER_TENANT, NoSlot, SessionMemory, Sessions,
    guest_session_id,
};
use crate::declarative::{Adapter, Declared};
use crate::error::{CallError, ErrorKind, bounded};
use crate::spec::{self, ToolSpec};

/// The contract version this host speaks.
pub const CONTRACT_VERSION: &str = "0.2.0";
/// The versions it loads: any with the same major and minor (minor releases
/// only add).
pub const CONTRACT_SERIES: &str = "0.2.x";
/// The name of the interface every plugin must export.
pub const TOOL_INTERFACE: &str = "toolhost:plugin/tool@0.2.0";
/// The optional lifecycle interface, without its version.
const LIFECYCLE_INTERFACE: &str = "toolhost:plugin/lifecycle@";

/// Limits of the one-off instance that runs `describe` at load time.
const DESCRIBE_LIMITS: Limits = Limits {
    memory: 256 << 20,
    timeout: Duration::from_secs(10),
    max_output: 0,
    max_arguments: 0,
    concurrency: 1,
};

/// Grants of instances that run without a call: `describe`, benchmarks.
fn no_grants() -> Arc<Grants> {
    static NONE: std::sync::OnceLock<Arc<Grants>> = std::sync::OnceLock::new();
    NONE.get_or_init(|| {
        Arc::new(Grants::none(Arc::new(crate::policy::Profile::deny_all(
            "none", "/",
        ))))
    })
    .clone()
}

/// Where a plugin's bytes came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// A file in the plugin directory (or given on the command line).
    File(PathBuf),
    /// Compiled into the `toolhost` binary.
    Bundled,
}

impl fmt::Display for PluginSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Bundled => f.write_str("bundled"),
        }
    }
}

/// SHA-256 of a plugin's bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentHash(pub [u8; 32]);

impl ContentHash {
    /// Hashes `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The first 12 hex digits, enough to tell versions apart in logs.
    pub fn short(&self) -> String {
        self.to_string()[..12].to_string()
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentHash({})", self.short())
    }
}

/// Why a plugin could not be loaded. The message says which plugin, where it
/// came from, what is wrong and, where it can, what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The plugin's name.
    pub plugin: String,
    /// Where it came from.
    pub source: PluginSource,
    /// Every problem found.
    pub problems: Vec<String>,
}

impl LoadError {
    pub(crate) fn new(plugin: &str, source: &PluginSource, problem: impl Into<String>) -> Self {
        Self {
            plugin: plugin.to_string(),
            source: source.clone(),
            problems: vec![problem.into()],
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "plugin {:?} ({}): ", self.plugin, self.source)?;
        match self.problems.as_slice() {
            [one] => f.write_str(one),
            many => {
                write!(f, "{} problems:", many.len())?;
                many.iter().try_for_each(|p| write!(f, "\n  - {p}"))
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// Whether a file in the plugin directory is a plugin: a `*.wasm` component
/// or a declarative `*.toml` tool file (but not a `toolhost.toml` config).
pub fn is_plugin_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "wasm") || is_declarative_file(path)
}

/// Whether a plugin file is a declarative `*.toml` tool file.
pub fn is_declarative_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "toml")
        && path.file_name().is_some_and(|n| n != "toolhost.toml")
}

/// Every plugin file directly in `dir`, sorted; a missing dir has none.
pub fn plugin_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if is_plugin_file(&path) && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The plugin name for a file: its stem (`plugins/weather.wasm` → `weather`).
pub fn plugin_name_for(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// One loaded version of a plugin. Cheap to share; calls hold an `Arc` of the
/// version they started on, so a replaced version lives until they finish.
pub struct PluginVersion {
    name: Arc<str>,
    source: PluginSource,
    hash: ContentHash,
    size: usize,
    pre: InstancePre<Sandbox>,
    tool_indices: ToolIndices,
    lifecycle: Option<LifecycleIndices>,
    tools: Vec<Arc<ToolSpec>>,
    stateful: bool,
    imports: Vec<String>,
    contract: String,
    sessions: Sessions,
    /// Fresh instances made ahead of the next call of each tool.
    ready: Arc<ReadyInstances>,
    compiled: Compiled,
    flights: Arc<Flights>,
    /// For a declarative tool file: runs its tools through the wrapper.
    adapter: Option<Arc<Adapter>>,
}

impl fmt::Debug for PluginVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginVersion")
            .field("name", &self.name)
            .field("source", &self.source)
            .field("hash", &self.hash)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl PluginVersion {
    /// Loads a plugin: checks the bytes are a component of our world, compiles
    /// it on a blocking thread (or takes it from `cache`), asks it to describe
    /// itself and validates the answer.
    pub async fn load(
        runtime: &Arc<Runtime>,
        name: &str,
        source: PluginSource,
        bytes: Arc<[u8]>,
        cache: Option<&ArtifactCache>,
    ) -> Result<PluginVersion, LoadError> {
        let fail = |problem: String| LoadError::new(name, &source, problem);
        sniff(&bytes).map_err(fail)?;
        let hash = ContentHash::of(&bytes);
        let size = bytes.len();
        let (component, compiled) = {
            let runtime = runtime.clone();
            let cache = cache.cloned();
            tokio::task::spawn_blocking(move || match cache {
                Some(cache) => cache.load_or_compile(runtime.engine(), &hash, &bytes),
                None => Component::new(runtime.engine(), &*bytes).map(|c| (c, Compiled::Fresh)),
            })
            .await
            .map_err(|e| fail(format!("compilation was interrupted: {e}")))?
            .map_err(|e| fail(format!("is not a valid WebAssembly component: {e:#}")))?
        };
        let mut version =
            Self::from_component(runtime, name, source, hash, size, component).await?;
        version.compiled = compiled;
        Ok(version)
    }

    /// Finishes loading an already compiled component.
    pub(crate) async fn from_component(
        runtime: &Arc<Runtime>,
        name: &str,
        source: PluginSource,
        hash: ContentHash,
        size: usize,
        component: Component,
    ) -> Result<PluginVersion, LoadError> {
        Self::assemble(runtime, name, source, hash, size, component, None).await
    }

    /// A declarative tool file's version: the tools it declares, run by the
    /// bundled wrapper plugin (see [`crate::declarative`]).
    pub(crate) async fn declarative(
        runtime: &Arc<Runtime>,
        name: &str,
        source: PluginSource,
        text: &str,
        cache: Option<&ArtifactCache>,
    ) -> Result<PluginVersion, LoadError> {
        let declared = crate::declarative::parse(name, text).map_err(|problems| LoadError {
            plugin: name.to_string(),
            source: source.clone(),
            problems,
        })?;
        // Compiled once per process, and only once a file is valid.
        let wrapper = runtime
            .declarative_wrapper(cache)
            .await
            .map_err(|problem| LoadError::new(name, &source, problem))?;
        let hash = ContentHash::of(text.as_bytes());
        Self::assemble(
            runtime,
            name,
            source,
            hash,
            text.len(),
            wrapper,
            Some(declared),
        )
        .await
    }

    async fn assemble(
        runtime: &Arc<Runtime>,
        name: &str,
        source: PluginSource,
        hash: ContentHash,
        size: usize,
        component: Component,
        declared: Option<Declared>,
    ) -> Result<PluginVersion, LoadError> {
        let fail = |problem: String| LoadError::new(name, &source, problem);
        let engine = runtime.engine();
        let ty = component.component_type();
        let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
        let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
        let contract = contract_version(&exports).map_err(fail)?;
        let pre = runtime
            .linker()
            .instantiate_pre(&component)
            .map_err(|e| fail(describe_link_error(&e, &imports)))?;
        let tool_indices = ToolIndices::new(&pre).map_err(|e| {
            fail(format!(
                "exports {TOOL_INTERFACE} with the wrong signature (built against another \
                 contract version?): {e:#}"
            ))
        })?;
        let lifecycle = if exports.iter().any(|e| e.starts_with(LIFECYCLE_INTERFACE)) {
            Some(LifecycleIndices::new(&pre).map_err(|e| {
                fail(format!(
                    "exports {LIFECYCLE_INTERFACE} with the wrong signature: {e:#}"
                ))
            })?)
        } else {
            None
        };
        let name: Arc<str> = name.into();
        let (specs, stateful, adapter) = match declared {
            Some(declared) => (declared.specs, false, Some(Arc::new(declared.definitions))),
            None => {
                let manifest = describe(runtime, &name, &pre, &tool_indices)
                    .await
                    .map_err(|e| fail(format!("`describe` failed: {e}")))?;
                (manifest.tools, manifest.stateful, None)
            }
        };
        let (tools, problems) = validate_manifest(&name, specs);
        if !problems.is_empty() {
            return Err(LoadError {
                plugin: name.to_string(),
                source,
                problems,
            });
        }
        Ok(PluginVersion {
            name,
            source,
            hash,
            size,
            pre,
            tool_indices,
            lifecycle,
            tools,
            stateful,
            imports,
            contract,
            sessions: Sessions::default(),
            ready: Arc::default(),
            compiled: Compiled::Fresh,
            flights: Arc::default(),
            adapter,
        })
    }

    /// The plugin's name.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// Where it was loaded from.
    pub fn source(&self) -> &PluginSource {
        &self.source
    }

    /// SHA-256 of its bytes.
    pub fn hash(&self) -> ContentHash {
        self.hash
    }

    /// Size of the `.wasm`, in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Its tools, in the order it declared them.
    pub fn tools(&self) -> &[Arc<ToolSpec>] {
        &self.tools
    }

    /// Whether it was compiled at load or read from the cache.
    pub fn compiled(&self) -> Compiled {
        self.compiled
    }

    /// Whether calls with a session id share an instance.
    pub fn is_stateful(&self) -> bool {
        self.stateful
    }

    /// Whether it exports the lifecycle hooks.
    pub fn has_lifecycle(&self) -> bool {
        self.lifecycle.is_some()
    }

    /// The contract version it was built against (`0.2.0`).
    pub fn contract(&self) -> &str {
        &self.contract
    }

    /// The interfaces it imports.
    pub fn imports(&self) -> &[String] {
        &self.imports
    }

    /// Creates a fresh store and instance and drops them without calling
    /// anything: the fixed cost of every call, for benchmarks.
    #[doc(hidden)]
    pub async fn instantiate_only(
        &self,
        runtime: &Runtime,
        limits: &Limits,
    ) -> wasmtime::Result<()> {
        let identity = Identity {
            plugin: self.name.clone(),
            tool: None,
        };
        let mut store = new_store(
            runtime.engine(),
            Sandbox::new(identity, limits, no_grants()),
        );
        instantiate_tool(&self.pre, &self.tool_indices, &mut store).await?;
        Ok(())
    }

    /// Runs `tool` with `arguments` (JSON text) in a fresh instance with
    /// `grants`. Returns the output and the capability uses of the call.
    ///
    /// The instance is the one made ahead for this tool when there is one for
    /// the same limits and grants (never used before), otherwise it is made
    /// now. With `make_ahead`, and when no other call of this version
    /// overlapped this one, the next instance is made in the background once
    /// the call has its result, and this call's store is dropped there.
    /// Callers that run another call at once (a batch's lane) pass `false`.
    pub async fn call(
        &self,
        runtime: &Runtime,
        tool: &Arc<ToolSpec>,
        arguments: &str,
        limits: &Limits,
        grants: Arc<Grants>,
        make_ahead: bool,
    ) -> (Result<String, CallError>, Vec<super::CapabilityUse>) {
        let identity = || Identity {
            plugin: self.name.clone(),
            tool: Some(tool.name.as_str().into()),
        };
        // Alone when it starts (this call's own flight is counted).
        let lone = make_ahead && self.flights.count() <= 1;
        let (mut store, ready) = match self.ready.take(&tool.name, limits, &grants) {
            Some(ready) => (ready.store, Some(ready.guest)),
            None => {
                let sandbox = Sandbox::new(identity(), limits, grants.clone());
                (new_store(runtime.engine(), sandbox), None)
            }
        };
        let run = async {
            let guest = match ready {
                Some(guest) => guest,
                None => instantiate_tool(&self.pre, &self.tool_indices, &mut store).await?,
            };
            let (name, arguments) = self.guest_call(tool, arguments);
            guest.call_call(&mut store, name, &arguments).await
        };
        let outcome = tokio::time::timeout(limits.timeout, run).await;
        let result = self.finish(tool, outcome, store.data(), limits);
        let uses = store.data().capability_uses();
        // Only for a lone caller (an agent calling one tool after another,
        // over stdio, one HTTP connection or the CLI): no other call of this
        // version ran when this one started or runs now. Under concurrent
        // load the next call comes at once and would wait for the background
        // work anyway, or take an instance made on another worker thread.
        if !lone || self.flights.count() > 1 {
            return (result, uses);
        }
        self.ready.make_next(
            &tool.name,
            || Recipe {
                engine: runtime.engine().clone(),
                pre: self.pre.clone(),
                indices: self.tool_indices.clone(),
                identity: identity(),
                limits: limits.clone(),
                grants,
            },
            store,
        );
        (result, uses)
    }

    /// Runs `tool` in the instance kept for `session` (created on first use
    /// with `grants`, which should cover every tool of the plugin), for
    /// stateful plugins. A trap or timeout discards the instance; the
    /// session's next call starts a fresh one.
    #[allow(clippy::too_many_arguments)]
    pub async fn call_in_session(
        &self,
        runtime: &Runtime,
        tool: &Arc<ToolSpec>,
        arguments: &str,
        limits: &Limits,
        session: &str,
        memory: &Arc<SessionMemory>,
        grants: impl FnOnce() -> Arc<Grants>,
    ) -> (Result<String, CallError>, Vec<super::CapabilityUse>) {
        match self
            .session_call(runtime, tool, arguments, limits, session, memory, grants)
            .await
        {
            Ok(done) => done,
            Err(error) => (Err(error), Vec::new()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn session_call(
        &self,
        runtime: &Runtime,
        tool: &Arc<ToolSpec>,
        arguments: &str,
        limits: &Limits,
        session: &str,
        memory: &Arc<SessionMemory>,
        grants: impl FnOnce() -> Arc<Grants>,
    ) -> Result<(Result<String, CallError>, Vec<super::CapabilityUse>), CallError> {
        let unloaded = || {
            CallError::new(
                ErrorKind::Unavailable,
                format!(
                    "tool {:?}: this version of plugin {:?} was unloaded",
                    tool.name, &*self.name
                ),
            )
        };
        let slot = match self.sessions.slot(session) {
            Ok(slot) => slot,
            Err(NoSlot::Closed) => return Err(unloaded()),
            Err(NoSlot::Full) => {
                return Err(CallError::new(
                    ErrorKind::Busy,
                    format!(
                        "plugin {:?} already keeps {MAX_SESSIONS} sessions; retry when some expire",
                        &*self.name
                    ),
                ));
            }
            Err(NoSlot::TenantFull) => {
                return Err(CallError::new(
                    ErrorKind::Busy,
                    format!(
                        "plugin {:?} already keeps {MAX_SESSIONS_PER_TENANT} sessions of this \
                         caller, the most one tenant may hold; end some or retry when they expire",
                        &*self.name
                    ),
                ));
            }
        };
        let mut slot = slot.lock().await;
        if slot.closed {
            return Err(unloaded());
        }
        // One deadline for starting the instance (if needed) and the call.
        let deadline = tokio::time::Instant::now() + limits.timeout;
        if slot.live.is_none() {
            let live = tokio::time::timeout_at(
                deadline,
                self.start_session(runtime, session, limits, memory, grants()),
            )
            .await
            .map_err(|_| {
                CallError::new(
                    ErrorKind::Timeout,
                    format!(
                        "plugin {:?} did not start session {session:?} within {:?}",
                        &*self.name, limits.timeout
                    ),
                )
            })??;
            slot.live = Some(live);
        }
        let live = slot.live.as_mut().expect("just started");
        live.store.data_mut().begin_call(&tool.name);
        let (name, arguments) = self.guest_call(tool, arguments);
        let outcome = tokio::time::timeout_at(
            deadline,
            live.tool.call_call(&mut live.store, name, &arguments),
        )
        .await;
        let crashed = !matches!(outcome, Ok(Ok(_)));
        let result = self.finish(tool, outcome, live.store.data(), limits);
        let uses = live.store.data().capability_uses();
        if crashed {
            // The instance stopped mid-call; its state cannot be trusted.
            slot.live = None;
        }
        slot.last_used = std::time::Instant::now();
        Ok((result, uses))
    }

    async fn start_session(
        &self,
        runtime: &Runtime,
        session: &str,
        limits: &Limits,
        memory: &Arc<SessionMemory>,
        grants: Arc<Grants>,
    ) -> Result<LiveInstance, CallError> {
        let identity = Identity {
            plugin: self.name.clone(),
            tool: None,
        };
        let mut sandbox = Sandbox::new(identity, limits, grants);
        sandbox.limiter.session = Some(memory.account());
        let mut store = new_store(runtime.engine(), sandbox);
        let fail = |e: wasmtime::Error, store: &Store<Sandbox>| {
            trap_error(
                &format!("plugin {:?} session start", &*self.name),
                &e,
                store.data(),
            )
        };
        let instance = match self.pre.instantiate_async(&mut store).await {
            Ok(instance) => instance,
            Err(e) => return Err(fail(e, &store)),
        };
        let tool = self
            .tool_indices
            .load(&mut store, &instance)
            .map_err(|e| fail(e, &store))?;
        let lifecycle = match &self.lifecycle {
            Some(indices) => Some(
                indices
                    .load(&mut store, &instance)
                    .map_err(|e| fail(e, &store))?,
            ),
            None => None,
        };
        if let Some(lifecycle) = &lifecycle {
            match lifecycle
                .call_setup(&mut store, guest_session_id(session))
                .await
            {
                Ok(Ok(())) => {}
                Ok(Err(message)) => {
                    return Err(CallError::new(
                        ErrorKind::ToolFailed,
                        format!(
                            "plugin {:?} refused to start session {session:?}: {message}",
                            &*self.name
                        ),
                    ));
                }
                Err(e) => return Err(fail(e, &store)),
            }
        }
        Ok(LiveInstance {
            store,
            tool,
            lifecycle,
        })
    }

    /// The guest tool and arguments that run `tool`: itself, or for a
    /// declarative tool the wrapper's `invoke` with the tool's definition.
    fn guest_call<'a>(&self, tool: &'a ToolSpec, arguments: &'a str) -> (&'a str, Cow<'a, str>) {
        match &self.adapter {
            Some(adapter) => (
                Adapter::TOOL,
                Cow::Owned(adapter.arguments(&tool.name, arguments)),
            ),
            None => (&tool.name, Cow::Borrowed(arguments)),
        }
    }

    /// Whether this version is a declarative tool file.
    pub fn is_declarative(&self) -> bool {
        self.adapter.is_some()
    }

    /// How many fresh instances are made ahead of their call (at most one
    /// per tool; see [`PluginVersion::call`]).
    pub fn ready_instances(&self) -> usize {
        self.ready.len()
    }

    /// How many sessions this version keeps.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Registers a call on this version; `None` once it is being drained
    /// (the caller should resolve the tool again).
    pub fn begin_call(&self) -> Option<Flight> {
        self.flights.begin()
    }

    /// Resolves when the calls still running on this drained version are
    /// cancelled.
    pub(crate) async fn cancelled(&self) {
        self.flights.cancelled().await
    }

    /// Calls running on this version now.
    pub fn in_flight(&self) -> usize {
        self.flights.count()
    }

    /// Retires this version: no new calls start on it, calls in flight finish
    /// within `grace` or are cancelled, then its stateful sessions are torn
    /// down.
    pub async fn drain(&self, grace: Duration) -> Drained {
        self.ready.close();
        let drained = self.flights.drain(grace).await;
        self.sessions.close_all().await;
        drained
    }

    /// Tears down the sessions idle for longer than `idle`; returns how many.
    pub async fn expire_idle_sessions(&self, idle: Duration) -> usize {
        self.sessions.expire_idle(idle).await
    }

    /// Closes every session of this version (used when it is unloaded or
    /// replaced): waits for calls in progress, runs `teardown`, and refuses
    /// later calls. Returns how many instances were torn down.
    pub async fn close_sessions(&self) -> usize {
        self.ready.close();
        self.sessions.close_all().await
    }

    /// Maps the outcome of a guest call to the caller's result.
    fn finish(
        &self,
        tool: &ToolSpec,
        outcome: Result<
            wasmtime::Result<Result<String, GuestToolError>>,
            tokio::time::error::Elapsed,
        >,
        sandbox: &Sandbox,
        limits: &Limits,
    ) -> Result<String, CallError> {
        sandbox.flush_output();
        let what = || format!("tool {:?} (plugin {:?})", tool.name, &*self.name);
        match outcome {
            Err(_elapsed) => Err(CallError::new(
                ErrorKind::Timeout,
                format!("{} exceeded its time limit of {:?}", what(), limits.timeout),
            )),
            Ok(Err(trap)) => Err(trap_error(&what(), &trap, sandbox)),
            Ok(Ok(Err(tool_error))) => Err(guest_error(&what(), tool_error)),
            Ok(Ok(Ok(output))) if output.len() > limits.max_output => Err(CallError::new(
                ErrorKind::OutputTooLarge,
                format!(
                    "{} returned {} bytes, more than the limit of {} bytes",
                    what(),
                    output.len(),
                    limits.max_output
                ),
            )),
            Ok(Ok(Ok(output))) => Ok(output),
        }
    }
}

pub(crate) fn new_store(engine: &wasmtime::Engine, sandbox: Sandbox) -> Store<Sandbox> {
    let mut store = Store::new(engine, sandbox);
    store.limiter(|s| &mut s.limiter);
    store.epoch_deadline_async_yield_and_update(1);
    // The epoch ticks only while some store runs guest code (host imports,
    // however long they wait, are not guest code).
    store.call_hook(|mut store, hook| {
        let sandbox = store.data_mut();
        match hook {
            CallHook::CallingWasm | CallHook::ReturningFromHost => {
                if sandbox.running.is_none() {
                    sandbox.running = Some(Running::enter());
                }
            }
            CallHook::ReturningFromWasm | CallHook::CallingHost => sandbox.running = None,
        }
        Ok(())
    });
    store
}

/// Instantiates `pre` in `store` and finds the instance's `tool` export.
pub(crate) async fn instantiate_tool(
    pre: &InstancePre<Sandbox>,
    indices: &ToolIndices,
    store: &mut Store<Sandbox>,
) -> wasmtime::Result<ToolGuest> {
    let instance = pre.instantiate_async(&mut *store).await?;
    indices.load(store, &instance)
}

/// Checks the first bytes: a component, not a core module or something else.
fn sniff(bytes: &[u8]) -> Result<(), String> {
    const MAGIC: &[u8; 4] = b"\0asm";
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err(if bytes.is_empty() {
            "the file is empty".to_string()
        } else {
            "is not a WebAssembly file (no \\0asm header)".to_string()
        });
    }
    match (
        bytes[4..6] == [1, 0],
        bytes[6..8] == [0, 0],
        bytes[6..8] == [1, 0],
    ) {
        (true, true, _) => Err("is a core WebAssembly module, not a component: build with \
             `--target wasm32-wasip2` (or wrap it with `wasm-tools component new`)"
            .to_string()),
        (_, _, true) => Ok(()),
        _ => Err(format!(
            "has an unknown WebAssembly version/layer {:02x?}",
            &bytes[4..8]
        )),
    }
}

/// The contract version of the `tool` interface a component exports: any
/// of [`CONTRACT_SERIES`] loads; anything else is refused with both versions
/// named.
fn contract_version(exports: &[String]) -> Result<String, String> {
    const PREFIX: &str = "toolhost:plugin/tool@";
    let Some(version) = exports.iter().find_map(|e| e.strip_prefix(PREFIX)) else {
        let found = if exports.is_empty() {
            "nothing".to_string()
        } else {
            exports.join(", ")
        };
        return Err(format!(
            "does not export {TOOL_INTERFACE}, so it is not a toolhost plugin \
             (it exports {found}); build it against the toolhost WIT, for example with toolhost-sdk"
        ));
    };
    fn compatible(version: &str) -> (Option<&str>, Option<&str>) {
        let mut parts = version.split('.');
        (parts.next(), parts.next())
    }
    if compatible(version) == compatible(CONTRACT_VERSION) {
        Ok(version.to_string())
    } else {
        Err(format!(
            "was built against contract toolhost:plugin@{version}, but this host speaks \
             toolhost:plugin@{CONTRACT_VERSION} (it loads any {CONTRACT_SERIES}); rebuild the plugin \
             against {CONTRACT_VERSION} or run a toolhost that speaks {version}"
        ))
    }
}

/// Says which import could not be satisfied, in terms an author can act on.
fn describe_link_error(error: &wasmtime::Error, imports: &[String]) -> String {
    let text = format!("{error:#}");
    let missing = imports.iter().find(|i| text.contains(i.as_str()));
    match missing {
        Some(import) => format!(
            "imports {import}, which toolhost does not provide (toolhost gives plugins \
             toolhost:plugin/{{http,terminal,log,progress}} and wasi:cli/filesystem/clocks/random/io 0.2): {text}"
        ),
        None => format!("cannot be linked against the host's imports: {text}"),
    }
}

async fn describe(
    runtime: &Runtime,
    plugin: &Arc<str>,
    pre: &InstancePre<Sandbox>,
    indices: &ToolIndices,
) -> Result<Manifest, String> {
    let identity = Identity {
        plugin: plugin.clone(),
        tool: None,
    };
    let mut store = new_store(
        runtime.engine(),
        Sandbox::new(identity, &DESCRIBE_LIMITS, no_grants()),
    );
    let run = async {
        let guest = instantiate_tool(pre, indices, &mut store).await?;
        guest.call_describe(&mut store).await
    };
    let outcome = tokio::time::timeout(DESCRIBE_LIMITS.timeout, run).await;
    store.data().flush_output();
    match outcome {
        Err(_) => Err(format!(
            "it did not finish within {:?}",
            DESCRIBE_LIMITS.timeout
        )),
        Ok(Err(trap)) => Err(trap_error("describe", &trap, store.data())
            .message()
            .to_string()),
        Ok(Ok(manifest)) => Ok(manifest),
    }
}

/// Most tools one plugin may declare.
const MAX_TOOLS: usize = 128;

/// Validates every spec; a plugin with any invalid spec is rejected whole.
fn validate_manifest(
    plugin: &Arc<str>,
    raw: Vec<super::bindings::toolhost::plugin::types::ToolSpec>,
) -> (Vec<Arc<ToolSpec>>, Vec<String>) {
    let mut tools: Vec<Arc<ToolSpec>> = Vec::new();
    let mut problems = Vec::new();
    if raw.is_empty() {
        problems.push("declares no tools".to_string());
    }
    if raw.len() > MAX_TOOLS {
        problems.push(format!(
            "declares {} tools, more than the {MAX_TOOLS} one plugin may; split it into plugins",
            raw.len()
        ));
        return (tools, problems);
    }
    for spec in raw {
        match spec::validate(plugin, spec) {
            Ok(spec) if tools.iter().any(|t| t.name == spec.name) => {
                problems.push(format!("declares tool {:?} twice", spec.name));
            }
            Ok(spec) => tools.push(Arc::new(spec)),
            Err(mut p) => problems.append(&mut p),
        }
    }
    (tools, problems)
}

fn guest_error(what: &str, error: GuestToolError) -> CallError {
    match error {
        GuestToolError::InvalidArguments(m) => {
            CallError::new(ErrorKind::InvalidArguments, format!("{what}: {m}"))
        }
        GuestToolError::Denied(m) => CallError::new(ErrorKind::Denied, format!("{what}: {m}")),
        GuestToolError::Failed(m) => CallError::new(ErrorKind::ToolFailed, format!("{what}: {m}")),
    }
}

/// Turns a trap into the error the caller sees: a memory error when the
/// limiter refused growth, otherwise the trap with the guest's last words on
/// stderr (a Rust panic message lands there).
fn trap_error(what: &str, error: &wasmtime::Error, sandbox: &Sandbox) -> CallError {
    if let (Some(desired), Some(charge)) = (sandbox.limiter.over_budget, &sandbox.limiter.session) {
        let budget = charge.budget();
        return CallError::new(
            ErrorKind::Memory,
            format!(
                "{what} could not grow its memory to {}: the stateful sessions of this host \
                 hold {} of sessions_memory = {}; end sessions (or wait for session_idle) or \
                 raise sessions_memory",
                human_bytes(desired),
                human_bytes(budget.used()),
                human_bytes(budget.limit())
            ),
        );
    }
    if let Some(desired) = sandbox.limiter.exceeded {
        return CallError::new(
            ErrorKind::Memory,
            format!(
                "{what} exceeded its memory limit of {} (tried to grow to {})",
                human_bytes(sandbox.limiter.limit()),
                human_bytes(desired)
            ),
        );
    }
    let cause = match error.downcast_ref::<Trap>() {
        Some(trap) => format!("crashed ({trap})"),
        None => format!("failed in the host: {error:#}"),
    };
    let stderr = sandbox.stderr.text();
    let last_words = stderr.trim();
    if last_words.is_empty() {
        CallError::new(ErrorKind::Trap, format!("{what} {cause}"))
    } else {
        CallError::new(
            ErrorKind::Trap,
            format!("{what} {cause}; stderr: {}", bounded(last_words, 1024)),
        )
    }
}

/// `65536` → `64 KiB`.
pub fn human_bytes(n: usize) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_formats() {
        assert!(sniff(b"").unwrap_err().contains("empty"));
        assert!(
            sniff(b"hello world!")
                .unwrap_err()
                .contains("not a WebAssembly file")
        );
        assert!(
            sniff(b"\0asm\x01\0\0\0")
                .unwrap_err()
                .contains("core WebAssembly module")
        );
        assert!(sniff(b"\0asm\x0d\0\x01\0").is_ok());
    }

    #[test]
    fn contract_versions() {
        let exports = |v: &str| vec![format!("toolhost:plugin/tool@{v}")];
        assert_eq!(contract_version(&exports("0.2.0")).unwrap(), "0.2.0");
        assert_eq!(contract_version(&exports("0.2.7")).unwrap(), "0.2.7");
        let newer = contract_version(&exports("0.3.0")).unwrap_err();
        assert!(newer.contains("toolhost:plugin@0.3.0"), "{newer}");
        assert!(newer.contains("toolhost:plugin@0.2.0"), "{newer}");
        assert!(newer.contains("any 0.2.x"), "{newer}");
        let older = contract_version(&exports("0.1.0")).unwrap_err();
        assert!(older.contains("toolhost:plugin@0.1.0"), "{older}");
        assert!(
            contract_version(&[])
                .unwrap_err()
                .contains("exports nothing")
        );
    }

    #[test]
    fn a_plugin_declares_a_bounded_number_of_tools() {
        use super::super::bindings::toolhost::plugin::types::ToolSpec as Raw;
        let raw = |i: usize| Raw {
            name: format!("t{i}"),
            description: "does things".into(),
            parameters: r#"{"type":"object"}"#.into(),
            toolset: "demo".into(),
            permissions: vec![],
            requires_env: vec![],
            emoji: None,
            read_only: true,
            destructive: false,
            title: None,
            output_schema: None,
        };
        let plugin: Arc<str> = "p".into();
        let (tools, problems) = validate_manifest(&plugin, (0..MAX_TOOLS).map(raw).collect());
        assert_eq!(
            (tools.len(), problems.len()),
            (MAX_TOOLS, 0),
            "{problems:?}"
        );
        let (tools, problems) = validate_manifest(&plugin, (0..=MAX_TOOLS).map(raw).collect());
        assert!(tools.is_empty());
        assert!(problems[0].contains("declares 129 tools"), "{problems:?}");
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(64 << 20), "64 MiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(10), "10 B");
    }

    #[test]
    fn load_errors_list_problems() {
        let e = LoadError {
            plugin: "w".into(),
            source: PluginSource::File("plugins/w.wasm".into()),
            problems: vec!["a".into(), "b".into()],
        };
        assert_eq!(
            e.to_string(),
            "plugin \"w\" (plugins/w.wasm): 2 problems:\n  - a\n  - b"
        );
    }
}
