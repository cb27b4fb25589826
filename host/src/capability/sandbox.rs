//! The state of one guest instance (a wasmtime `Store`'s data): its WASI
//! context, which inherits nothing from the host, its resource limits, its
//! captured stdio, the call it serves, and one room per capability.
//!
//! A capability ([`Capability`]) is a host import (or a part of WASI) that a
//! permission grants. Each has its own state in every store, built from the
//! call's grants, and its imports reach the store through a [`Room`]: that
//! state, the call, and the resource table, nothing of another capability.

use std::any::{Any, TypeId};
use std::marker::PhantomData;
use std::sync::Arc;

use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::grants::Grants;
use crate::contract::{CapabilityUse, Permission};
use crate::policy::Limits;
use crate::store::capture::Capture;
use crate::store::memory::MemoryLimiter;

/// How much of a guest's stdout and stderr is kept for the log.
const CAPTURE_BYTES: usize = 16 * 1024;

/// The most capability uses remembered per call for the audit line.
const MAX_CAPABILITY_USES: usize = 64;

/// Who is running: used in log records and error messages.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub(crate) plugin: Arc<str>,
    pub(crate) tool: Option<Arc<str>>,
}

impl Identity {
    /// `tool "x" of plugin "p"`, or `plugin "p"` between calls.
    pub(crate) fn describe(&self) -> String {
        let plugin = &*self.plugin;
        match self.tool.as_deref() {
            Some(tool) => format!("tool {tool:?} of plugin {plugin:?}"),
            None => format!("plugin {plugin:?}"),
        }
    }

    /// The tool's name for log fields, `-` between calls.
    pub(crate) fn tool_name(&self) -> &str {
        self.tool.as_deref().unwrap_or("-")
    }
}

/// What a capability is, for people and for the audit: the same for every
/// store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapabilityInfo {
    /// Its name in audit records (a use's `capability`) and in `toolhost check`.
    pub name: &'static str,
    /// The permissions that grant it (a tool declares one and the profile
    /// allows it); empty for what every tool has (log, progress).
    pub permissions: &'static [Permission],
    /// The profile section that shapes it (`file`, `network`, `terminal`).
    pub section: Option<&'static str>,
    /// What it lets a tool do, in one line.
    pub description: &'static str,
    /// What each of `permissions` lets a tool do, in their order, where they
    /// grant different things (empty: `description` says it for each).
    pub each: &'static [&'static str],
}

impl CapabilityInfo {
    /// What `declared` (some of its permissions) let a tool do.
    pub fn describe(&self, declared: &[&str]) -> String {
        if self.each.is_empty() || self.each.len() != self.permissions.len() {
            return self.description.to_string();
        }
        let parts: Vec<&str> = self
            .permissions
            .iter()
            .zip(self.each)
            .filter(|(permission, _)| declared.contains(&permission.as_str()))
            .map(|(_, what)| *what)
            .collect();
        parts.join("; ")
    }
}

/// A capability guests may be given. Implemented by one folder under
/// `capability/` and listed once in `capability::CAPABILITIES`.
pub(crate) trait Capability: 'static {
    /// Its name, permissions, profile section and description.
    const INFO: CapabilityInfo;

    /// Whether it replaces a WASI interface linked before it (the
    /// filesystem does, to enforce `file.deny`).
    const REPLACES_WASI: bool = false;

    /// Its state in each store.
    type State: Send + 'static;

    /// The state of a new store whose calls have `grants`. May configure
    /// what WASI gives the guest (directories, environment).
    fn state(grants: &Grants, wasi: &mut WasiCtxBuilder) -> Self::State;

    /// Readies the state for the next call of a reused instance.
    fn begin_call(_state: &mut Self::State) {}

    /// Adds its imports, each reaching the store through [`Sandbox::room`].
    fn add_to_linker(linker: &mut Linker<Sandbox>) -> wasmtime::Result<()>;
}

/// A capability in the runtime's list: its description and its functions.
pub(crate) struct Linked {
    /// What it is.
    pub(crate) info: CapabilityInfo,
    /// Whether linking it replaces a WASI interface.
    pub(crate) replaces_wasi: bool,
    id: fn() -> TypeId,
    state: fn(&Grants, &mut WasiCtxBuilder) -> Box<dyn Any + Send>,
    begin_call: fn(&mut (dyn Any + Send)),
    /// Adds its imports to a linker.
    pub(crate) add_to_linker: fn(&mut Linker<Sandbox>) -> wasmtime::Result<()>,
}

impl Linked {
    /// The entry of capability `C`.
    pub(crate) const fn of<C: Capability>() -> Self {
        Self {
            info: C::INFO,
            replaces_wasi: C::REPLACES_WASI,
            id: TypeId::of::<C>,
            state: boxed_state::<C>,
            begin_call: begin_call::<C>,
            add_to_linker: C::add_to_linker,
        }
    }
}

fn boxed_state<C: Capability>(grants: &Grants, wasi: &mut WasiCtxBuilder) -> Box<dyn Any + Send> {
    Box::new(C::state(grants, wasi))
}

fn begin_call<C: Capability>(state: &mut (dyn Any + Send)) {
    if let Some(state) = state.downcast_mut::<C::State>() {
        C::begin_call(state);
    }
}

/// The call a store serves, as every capability sees it.
pub(crate) struct CallScope {
    /// Who runs.
    pub(crate) identity: Identity,
    /// What the call may do.
    pub(crate) grants: Arc<Grants>,
    uses: Vec<CapabilityUse>,
}

impl CallScope {
    /// Remembers a capability use (or refusal) for the audit line.
    pub(crate) fn record(&mut self, used: CapabilityUse) {
        if self.uses.len() < MAX_CAPABILITY_USES {
            self.uses.push(used);
        }
    }
}

/// What an import of capability `C` reaches: its own state, the call, and
/// the store's resource table.
pub(crate) struct Room<'a, C: Capability> {
    /// The capability's state in this store.
    pub(crate) state: &'a mut C::State,
    /// The call.
    pub(crate) call: &'a mut CallScope,
    /// The store's resources.
    pub(crate) table: &'a mut ResourceTable,
}

impl<C: Capability> Room<'_, C> {
    /// Records an allowed use of the capability.
    pub(crate) fn allowed(&mut self, target: impl Into<String>) {
        self.call
            .record(CapabilityUse::allowed(C::INFO.name, target));
    }

    /// Records a refused use of the capability, and why.
    pub(crate) fn refused(&mut self, target: impl Into<String>, reason: impl Into<String>) {
        self.call
            .record(CapabilityUse::refused(C::INFO.name, target, reason));
    }

    /// Whether the call has one of the capability's permissions.
    pub(crate) fn granted(&self) -> bool {
        C::INFO
            .permissions
            .iter()
            .any(|permission| self.call.grants.allows(permission.as_str()))
    }
}

/// Links the imports of capability `C` to its [`Room`].
pub(crate) struct InRoom<C>(PhantomData<C>);

impl<C: Capability> HasData for InRoom<C> {
    type Data<'a> = Room<'a, C>;
}

/// A capability's room plus the WASI context, for the capability that
/// wraps part of WASI.
pub(crate) struct WasiRoom<'a, C: Capability> {
    /// The room.
    pub(crate) room: Room<'a, C>,
    /// The store's WASI context.
    pub(crate) wasi: &'a mut WasiCtx,
}

/// The data of one guest `Store`.
pub struct Sandbox {
    /// Made when first used when no capability is linked (a component that
    /// imports no WASI never uses it: a lean plugin's).
    wasi: Option<WasiCtx>,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stdout: Capture,
    pub(crate) stderr: Capture,
    pub(crate) call: CallScope,
    rooms: Vec<(TypeId, Box<dyn Any + Send>)>,
    capabilities: &'static [Linked],
    /// Held while this store runs guest code, so the epoch ticks.
    pub(crate) running: Option<crate::store::epoch::Running>,
    /// The turn its guest runs with past its first tick (see
    /// [`crate::store::cpu`]).
    pub(crate) turn: Arc<crate::store::cpu::TurnSlot>,
}

impl Sandbox {
    /// A sandbox with what `grants` allows and nothing else: each of
    /// `capabilities` sets up its state from the grants, on a WASI context
    /// with no env vars, directories or sockets, closed stdin, and captured
    /// stdout/stderr.
    pub(crate) fn new(
        capabilities: &'static [Linked],
        identity: Identity,
        limits: &Limits,
        grants: Arc<Grants>,
    ) -> Self {
        let stdout = Capture::new(CAPTURE_BYTES);
        let stderr = Capture::new(CAPTURE_BYTES);
        let (wasi, rooms) = if capabilities.is_empty() {
            (None, Vec::new())
        } else {
            let mut wasi = bare_wasi(&stdout, &stderr);
            let rooms = capabilities
                .iter()
                .map(|linked| ((linked.id)(), (linked.state)(&grants, &mut wasi)))
                .collect();
            (Some(wasi.build()), rooms)
        };
        Self {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(limits.memory),
            stdout,
            stderr,
            call: CallScope {
                identity,
                grants,
                uses: Vec::new(),
            },
            rooms,
            capabilities,
            running: None,
            turn: Arc::default(),
        }
    }

    /// The tenant whose call this store runs, if any.
    pub(crate) fn tenant(&self) -> Option<&str> {
        self.call
            .grants
            .approvals
            .as_ref()
            .and_then(|scope| scope.tenant.as_deref())
    }

    /// The room of capability `C`: what its imports reach.
    pub(crate) fn room<C: Capability>(&mut self) -> Room<'_, C> {
        self.wasi_room::<C>().room
    }

    /// The room of capability `C`, with the WASI context.
    pub(crate) fn wasi_room<C: Capability>(&mut self) -> WasiRoom<'_, C> {
        let id = TypeId::of::<C>();
        let state = self
            .rooms
            .iter_mut()
            .find(|(room, _)| *room == id)
            .and_then(|(_, state)| state.downcast_mut::<C::State>())
            .unwrap_or_else(|| {
                panic!(
                    "capability {:?} is linked but has no state in this store",
                    C::INFO.name
                )
            });
        WasiRoom {
            room: Room {
                state,
                call: &mut self.call,
                table: &mut self.table,
            },
            wasi: self
                .wasi
                .get_or_insert_with(|| bare_wasi(&self.stdout, &self.stderr).build()),
        }
    }

    /// The call's grants.
    pub(crate) fn grants(&self) -> &Arc<Grants> {
        &self.call.grants
    }

    /// Who runs.
    pub(crate) fn identity(&self) -> &Identity {
        &self.call.identity
    }

    /// Capability uses and refusals of the current call.
    pub(crate) fn capability_uses(&self) -> Vec<CapabilityUse> {
        self.call.uses.clone()
    }

    /// Prepares a reused instance for its next call: new tool name, fresh
    /// output capture, capabilities' per-call state and limit flags.
    pub(crate) fn begin_call(&mut self, tool: &str) {
        if self.call.identity.tool.as_deref() != Some(tool) {
            self.call.identity.tool = Some(tool.into());
        }
        self.stdout.clear();
        self.stderr.clear();
        self.limiter.exceeded = None;
        self.call.uses.clear();
        for (linked, (_, state)) in self.capabilities.iter().zip(&mut self.rooms) {
            (linked.begin_call)(state.as_mut());
        }
    }

    /// Writes what the guest printed to the host log.
    pub(crate) fn flush_output(&self) {
        for (stream, capture) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            if !capture.is_empty() {
                tracing::debug!(
                    plugin = %self.call.identity.plugin,
                    tool = self.call.identity.tool_name(),
                    stream,
                    output = %capture.text(),
                    "guest output"
                );
            }
        }
    }
}

/// A WASI context with no env vars, directories or sockets, closed stdin,
/// and stdout and stderr captured.
fn bare_wasi(stdout: &Capture, stderr: &Capture) -> WasiCtxBuilder {
    let mut wasi = WasiCtx::builder();
    wasi.stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    wasi
}

impl WasiView for Sandbox {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: self
                .wasi
                .get_or_insert_with(|| bare_wasi(&self.stdout, &self.stderr).build()),
            table: &mut self.table,
        }
    }
}
