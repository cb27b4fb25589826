//! Sandboxes built ahead. Building a command's sandbox (a launcher started,
//! namespaces, some thirty mounts, the walk of the grants) takes longer than
//! running most commands. After a sandboxed command of a profile ends, the
//! next command's sandbox is built in the background, up to the point where
//! it waits for its command line; the next command of that profile takes it
//! and only starts its shell, as wasm calls take instances made ahead.
//!
//! A sandbox built ahead is used only while what it was built from holds:
//! the same profile (the same `Arc`, so a reloaded config builds anew), the
//! same runtime (its pipes and proxy live there), nothing changed inside the
//! grants since they were walked and every granted path resolving to the
//! same directory ([`Watch`]), and its launcher still waiting. Otherwise it
//! is dropped (its processes killed) and the command builds its own, as it
//! does when none is ready. At most [`MOST`] wait at once, one per profile.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::process_group::Launched;
use super::proxy::{Gate, Proxy};
pub(super) use super::spare::Groups;
use super::spare::Spare;
use crate::capability::Profile;
use crate::capability::terminal::TerminalNetwork;
use crate::capability::terminal::confine::guard::{Guard, Watched};
use crate::capability::terminal::confine::plan::Planned;
use crate::capability::terminal::confine::{self, watch::Watch};

/// Most times a sandbox is planned and built again because the grants
/// changed while it was built, before the command is refused.
const TRIES: usize = 3;

/// Most sandboxes waiting at once (one per profile and runtime).
const MOST: usize = 8;

/// How long after a command ends the next one's sandbox starts being built.
const SETTLE: Duration = Duration::from_millis(10);

/// A sandbox being built or built, waiting for its command.
pub(super) struct Built {
    pub(super) launched: Launched,
    /// The command's network proxy (`terminal.network = "proxy"`).
    pub(super) proxy: Option<Proxy>,
    /// The command's pids cgroup and its tenant's cpu cgroup, removed once
    /// the sandbox is dropped (the cpu group with its tenant's last).
    pub(super) pids: Groups,
    /// What the sandbox was planned from, when built ahead.
    watch: Option<Watch>,
    /// A session's sandbox: its mounts and their watch.
    pub(super) planned: Option<Planned>,
    /// What the host puts back when the command ends.
    pub(super) guard: Guard,
    /// The guard, watched while the sandbox lives (not for a session's,
    /// which watches its own).
    pub(super) watched: Option<Watched>,
}

/// Where the sandbox built ahead for one profile waits. Its lock is held
/// while one is being built, so a command arriving then waits for it (it
/// is further along than a sandbox started afresh).
type Slot = Arc<tokio::sync::Mutex<Option<Built>>>;

/// Where a launcher started ahead for one profile waits (see [`Spare`]).
type SpareSlot = Arc<Mutex<Option<Spare>>>;

struct Entry {
    profile: Weak<Profile>,
    runtime: tokio::runtime::Id,
    slot: Slot,
    spare: SpareSlot,
}

static SLOTS: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// The slot of `profile` on the current runtime, made if missing. Slots of
/// profiles no longer in use go (and their sandboxes with them); past
/// [`MOST`], the oldest goes.
fn slot(profile: &Arc<Profile>) -> Slot {
    entry(profile).0
}

/// The slot of `profile` on the current runtime and where its spare
/// launcher waits, made if missing (see [`slot`]).
fn entry(profile: &Arc<Profile>) -> (Slot, SpareSlot) {
    let runtime = tokio::runtime::Handle::current().id();
    let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
    slots.retain(|entry| entry.profile.strong_count() > 0);
    let same = |entry: &Entry| {
        entry.runtime == runtime && std::ptr::eq(entry.profile.as_ptr(), Arc::as_ptr(profile))
    };
    if let Some(entry) = slots.iter().find(|entry| same(entry)) {
        return (entry.slot.clone(), entry.spare.clone());
    }
    if slots.len() >= MOST {
        slots.remove(0);
    }
    let (slot, spare) = (Slot::default(), SpareSlot::default());
    slots.push(Entry {
        profile: Arc::downgrade(profile),
        runtime,
        slot: slot.clone(),
        spare: spare.clone(),
    });
    (slot, spare)
}

/// What [`take`] found for a command.
pub(super) enum Taken {
    /// A sandbox built ahead that still holds.
    Ready(Built),
    /// None that holds: the one that no longer does, if any. Its processes
    /// are killed when it is dropped, which the caller does once its own
    /// command has run: tearing a sandbox down takes the kernel a while,
    /// which would otherwise slow the command's own sandbox.
    Stale(Option<Built>),
}

/// The sandbox built ahead for `profile`, if one is ready (or being built)
/// and still holds.
pub(super) async fn take(profile: &Arc<Profile>) -> Taken {
    let slot = slot(profile);
    let Some(mut built) = slot.lock().await.take() else {
        return Taken::Stale(None);
    };
    let fresh = match &built.watch {
        Some(watch) => watch.unchanged(profile),
        None => Err("it was not watched".into()),
    };
    if let Err(reason) = fresh {
        tracing::debug!(profile = %profile.name, %reason, "a sandbox built ahead is stale");
        return Taken::Stale(Some(built));
    }
    if !built.launched.alive() {
        tracing::debug!(profile = %profile.name, "a sandbox built ahead has exited");
        return Taken::Stale(None);
    }
    built.guard.set_idle(false);
    Taken::Ready(built)
}

/// Starts building the next command's sandbox for `profile` in the
/// background, unless one is built or being built.
pub(super) fn build_next(profile: &Arc<Profile>, launcher: PathBuf) {
    let profile = profile.clone();
    tokio::spawn(async move {
        // Building takes both cores of a small machine for a while; the
        // call that just ran its command is let finish first.
        tokio::time::sleep(SETTLE).await;
        let (slot, spare) = entry(&profile);
        if let Ok(mut guard) = slot.try_lock_owned()
            && guard.is_none()
        {
            match build(&profile, &launcher, true).await {
                Ok(built) => *guard = Some(built),
                Err(reason) => {
                    tracing::debug!(profile = %profile.name, %reason, "no sandbox built ahead");
                }
            }
        }
        // A launcher for the next sandbox built at a call.
        let mut spare = spare.lock().unwrap_or_else(|e| e.into_inner());
        if spare.is_none() {
            let (limit, relay) = limits(&profile);
            *spare = Spare::start(&launcher, limit, relay, profile.terminal.sandbox_id)
                .inspect_err(|reason| {
                    tracing::debug!(profile = %profile.name, %reason, "no spare launcher");
                })
                .ok();
        }
    });
}

/// The process limit of `profile`'s commands, and whether their sandbox
/// runs a proxy relay (as [`build_once`] finds them in the plan).
fn limits(profile: &Profile) -> (u64, bool) {
    let settings = &profile.terminal;
    (
        settings.max_processes,
        settings.network == TerminalNetwork::Proxy,
    )
}

/// The launcher of a sandbox for `profile` in its pids cgroup and its
/// tenant's cpu cgroup: the spare one started ahead if it fits, else one
/// started now.
fn launch(
    profile: &Arc<Profile>,
    launcher: &Path,
    limit: u64,
    relay: bool,
) -> Result<(Launched, Groups), String> {
    let tenant = profile.terminal.sandbox_id;
    let spare = entry(profile)
        .1
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(ready) = spare.and_then(|spare| spare.take(launcher, limit, relay, tenant)) {
        return Ok(ready);
    }
    Spare::start(launcher, limit, relay, tenant)?
        .take(launcher, limit, relay, tenant)
        .ok_or_else(|| format!("the sandbox launcher {} ended at once", launcher.display()))
}

/// Builds a sandbox for `profile`: its proxy started, the grants walked
/// (and watched, when `ahead`), its launcher started. `Err` says why the
/// command may not run.
pub(super) async fn build(
    profile: &Arc<Profile>,
    launcher: &Path,
    ahead: bool,
) -> Result<Built, String> {
    build_spec(profile, launcher, ahead, None).await
}

/// Builds the sandbox of a terminal session for `profile`: it runs every
/// command it is sent until it is dropped; its proxy serves while the
/// session's `gate` is open.
pub(super) async fn build_session(
    profile: &Arc<Profile>,
    launcher: &Path,
    gate: &Gate,
) -> Result<Built, String> {
    build_spec(profile, launcher, false, Some(gate)).await
}

/// Builds a sandbox: a session's when it has the session's `gate`.
async fn build_spec(
    profile: &Arc<Profile>,
    launcher: &Path,
    ahead: bool,
    session_gate: Option<&Gate>,
) -> Result<Built, String> {
    let mut last = String::new();
    for _ in 0..TRIES {
        match build_once(profile, launcher, ahead, session_gate).await {
            Ok(built) => return Ok(built),
            Err(Attempt::Moved(reason)) => last = reason,
            Err(Attempt::Failed(reason)) => return Err(reason),
        }
    }
    Err(format!(
        "the granted directories changed while the command's sandbox was built, {TRIES} times \
         in a row (last: {last}); the command is refused rather than run with something \
         file.deny masks, or repository metadata, unprotected. Try again once they settle"
    ))
}

/// Why one attempt to build a sandbox did not give one.
enum Attempt {
    /// The grants changed while it was built: plan it again.
    Moved(String),
    /// It cannot be built: why.
    Failed(String),
}

async fn build_once(
    profile: &Arc<Profile>,
    launcher: &Path,
    ahead: bool,
    session_gate: Option<&Gate>,
) -> Result<Built, Attempt> {
    let session = session_gate.is_some();
    let proxy = if profile.terminal.network == TerminalNetwork::Proxy {
        let gate = session_gate
            .cloned()
            .unwrap_or_else(|| Gate::for_profile(profile));
        let proxy = Proxy::start(profile.network.hosts.clone(), gate).map_err(|e| {
            Attempt::Failed(format!(
                "could not start the network proxy of the command: {e}"
            ))
        })?;
        Some(proxy)
    } else {
        None
    };
    let planning = profile.clone();
    let (spec, watch) = tokio::task::spawn_blocking(move || {
        // A sandbox built ahead must be watched; any other is checked with
        // a watch where it can be (else by walking again).
        let mut watch = if ahead {
            Some(Watch::new(&planning).map_err(|e| format!("watching the grants: {e}"))?)
        } else {
            Watch::new(&planning).ok()
        };
        let spec = confine::plan(&planning, watch.as_mut())?;
        if let Some(broken) = watch.as_ref().and_then(Watch::broken) {
            if ahead {
                return Err(format!("the grants cannot be watched: {broken}"));
            }
            watch = None;
        }
        Ok((spec, watch))
    })
    .await
    .map_err(|e| Attempt::Failed(format!("planning the sandbox failed: {e}")))?
    .map_err(|reason| {
        if reason.contains(confine::MOVED) {
            Attempt::Moved(reason)
        } else {
            Attempt::Failed(reason)
        }
    })?;
    if let (Some(proxy), Some(id)) = (&proxy, spec.identity) {
        // The relay inside runs as the command's id: the proxy's private
        // directory is its.
        proxy.give_to(id).map_err(|e| {
            Attempt::Failed(format!(
                "giving the network proxy to the command's id {id}: {e}"
            ))
        })?;
    }
    let relay = proxy.is_some() && !spec.host_network;
    // Its launcher joined its pids cgroup and its tenant's cpu cgroup when
    // it started.
    let (mut launched, pids) =
        launch(profile, launcher, spec.limits.processes, relay).map_err(Attempt::Failed)?;
    let spec = confine::Spec {
        proxy: proxy.as_ref().map(Proxy::socket),
        pids: None,
        cpu: None,
        session,
        ..spec
    };
    launched.send_spec(&spec).await.map_err(|e| {
        Attempt::Failed(format!(
            "could not start the sandbox launcher {}: {e}",
            launcher.display()
        ))
    })?;
    // Its mounts made, the plan must still hold: what moved meanwhile
    // could have escaped a mask.
    launched.built().await.map_err(|reason| {
        if reason.contains(confine::MOVED) {
            Attempt::Moved(reason)
        } else {
            Attempt::Failed(format!("its sandbox could not be built: {reason}"))
        }
    })?;
    let checking = profile.clone();
    let mounts = spec.mounts.clone();
    let (verified, watch) = tokio::task::spawn_blocking(move || {
        let verified = confine::plan::verify(&checking, &mounts, watch.as_ref(), false);
        (verified, watch)
    })
    .await
    .map_err(|e| Attempt::Failed(format!("checking the sandbox's mounts failed: {e}")))?;
    verified.map_err(Attempt::Moved)?;
    let guard = spec.guard;
    guard.set_idle(ahead);
    let (watch, planned) = if session {
        (None, Some(Planned::of(spec.mounts, guard.clone(), watch)))
    } else {
        (watch, None)
    };
    let watched = if session {
        None
    } else {
        launched
            .watch_guard(guard.clone(), None)
            .map_err(Attempt::Failed)?
    };
    Ok(Built {
        launched,
        proxy,
        pids,
        watch,
        planned,
        guard,
        watched,
    })
}
