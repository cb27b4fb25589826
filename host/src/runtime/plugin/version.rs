//! A loaded plugin version: the compiled component, its `InstancePre`, its
//! validated tool specs, and the state its calls share (made-ahead
//! instances, sessions, calls in flight). The code of a bundled plugin may
//! be compiled at its first call (see `captured`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::InstancePre;

use crate::capability::sandbox::Sandbox;
use crate::contract::ContentHash;
use crate::contract::adapter::{LifecycleExports, ToolExports};
use crate::contract::spec::ToolSpec;
use crate::runtime::cache::{ArtifactCache, Compiled};
use crate::runtime::engine::Runtime;
use crate::runtime::flight::{Drained, Flight, Flights};
use crate::runtime::ready::ReadyInstances;
use crate::runtime::stateful::Sessions;
use crate::source::PluginSource;
use crate::source::declarative::Adapter;

/// One loaded version of a plugin. Cheap to share; calls hold an `Arc` of the
/// version they started on, so a replaced version lives until they finish.
pub struct PluginVersion {
    pub(super) name: Arc<str>,
    pub(super) source: PluginSource,
    pub(super) hash: ContentHash,
    pub(super) size: usize,
    /// The linked code: set at load, or at the first call of a version
    /// loaded from its captured specs.
    pub(super) code: tokio::sync::OnceCell<Result<Linked, String>>,
    /// The host engine's code, when `code` is the first tier's.
    pub(super) upgraded: Arc<std::sync::OnceLock<Linked>>,
    /// The bytes to compile `code` from at the first call, when it is not set.
    pub(super) deferred: Option<Deferred>,
    pub(super) tools: Vec<Arc<ToolSpec>>,
    pub(super) stateful: bool,
    pub(super) has_lifecycle: bool,
    pub(super) imports: Vec<String>,
    pub(super) contract: String,
    pub(super) sessions: Sessions,
    /// Fresh instances made ahead of the next call of each tool.
    pub(super) ready: Arc<ReadyInstances>,
    pub(super) flights: Arc<Flights>,
    /// For a declarative tool file: runs its tools through the wrapper.
    pub(super) adapter: Option<Arc<Adapter>>,
}

/// A version's compiled component, linked, and where its exports are.
pub(super) struct Linked {
    pub(super) pre: InstancePre<Sandbox>,
    pub(super) tool_exports: ToolExports,
    pub(super) lifecycle: Option<LifecycleExports>,
    pub(super) compiled: Compiled,
    /// What its stores set up: the host's capabilities (and WASI), or none
    /// for a component that imports no function (see `load::needs_host`).
    pub(super) capabilities: &'static [crate::capability::sandbox::Linked],
    /// The first tier's runtime when the code is compiled by it (see
    /// [`Runtime::first_tier`]); `None` for the host's.
    pub(super) tier: Option<Arc<Runtime>>,
}

impl Linked {
    /// The engine of the code: stores for it must be made on it.
    pub(super) fn engine<'a>(&'a self, host: &'a Runtime) -> &'a wasmtime::Engine {
        self.tier
            .as_ref()
            .map_or(host.engine(), |tier| tier.engine())
    }
}

/// What a version compiles from at its first call.
pub(super) struct Deferred {
    pub(super) bytes: &'static [u8],
    pub(super) cache: Option<ArtifactCache>,
    /// The host's runtime, which compiles the code in the background once
    /// the first tier's serves.
    pub(super) runtime: Arc<Runtime>,
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

    /// Whether it was compiled at load or read from the cache, or is not
    /// compiled yet.
    pub fn compiled(&self) -> Compiled {
        if let Some(linked) = self.upgraded.get() {
            return linked.compiled;
        }
        match self.code.get() {
            Some(Ok(linked)) => linked.compiled,
            Some(Err(_)) | None => Compiled::Pending,
        }
    }

    /// Whether new calls run code of the first tier (compiled fast at the
    /// first call, while the host's engine compiles it in the background).
    pub fn runs_first_tier(&self) -> bool {
        self.upgraded.get().is_none()
            && matches!(self.code.get(), Some(Ok(linked)) if linked.tier.is_some())
    }

    /// Whether calls with a session id share an instance.
    pub fn is_stateful(&self) -> bool {
        self.stateful
    }

    /// Whether it exports the lifecycle hooks.
    pub fn has_lifecycle(&self) -> bool {
        self.has_lifecycle
    }

    /// The contract version it was built against (`0.2.0`).
    pub fn contract(&self) -> &str {
        &self.contract
    }

    /// The interfaces it imports.
    pub fn imports(&self) -> &[String] {
        &self.imports
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

    /// What session `key` (`tenant\0session`) holds, marking it used now;
    /// makes none.
    pub fn keep_session(&self, key: &str) -> crate::runtime::SessionState {
        self.sessions.keep(key)
    }

    /// Whether a new session of `tenant` (`""`: the local caller) would get
    /// a slot: under the version's cap and the tenant's share.
    pub fn has_session_room(&self, tenant: &str) -> bool {
        self.sessions.has_room(tenant)
    }

    /// Ends session `key` (its slot is free at once) unless a call is in
    /// progress in it.
    pub fn end_session(&self, key: &str) {
        self.sessions.end(key);
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
}
