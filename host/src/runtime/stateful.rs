//! Instances of stateful plugins kept per session id: reused by that
//! session's calls, discarded after a trap or timeout, torn down when idle or
//! when their plugin version is unloaded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::Store;

use crate::capability::Profile;
use crate::capability::sandbox::Sandbox;
use crate::contract::adapter::{LifecycleGuest, ToolGuest};

/// How long `teardown` may run.
const TEARDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The most sessions one plugin version keeps at once.
pub const MAX_SESSIONS: usize = 256;

/// The most sessions of one plugin version one tenant may hold, so that a
/// tenant cannot take every slot from the others.
pub(crate) const MAX_SESSIONS_PER_TENANT: usize = MAX_SESSIONS / 4;

/// What the session id of a handle's state starts with.
pub(crate) const HANDLE_SESSION: &str = "h:";
/// What the session id of an MCP session starts with.
pub(crate) const MCP_SESSION: &str = "mcp-";

/// Checks a session id a caller names (`/v1`'s `session` and
/// `Toolhost-Session`, `POST /v1/sessions`, `call --session`): no control
/// character, and not in the ids toolhost makes for handles and MCP
/// sessions, so a named session never reaches their state. (Its length is
/// bounded where ids are, with the call id.) The error says which rule and
/// what to send.
pub fn check_session_name(name: &str) -> Result<(), String> {
    let mut shown: String = name.chars().take(40).collect();
    if shown.len() < name.len() {
        shown.push('…');
    }
    if name.chars().any(char::is_control) {
        return Err(format!(
            "the session id {shown:?} has a control character; name it with printable characters"
        ));
    }
    if let Some(prefix) = [HANDLE_SESSION, MCP_SESSION]
        .into_iter()
        .find(|prefix| name.starts_with(prefix))
    {
        return Err(format!(
            "the session id {shown:?} starts with {prefix:?}, which toolhost's own sessions (of \
             handles and MCP sessions) use; name it otherwise"
        ));
    }
    Ok(())
}

/// The key of `session` of `tenant` (`None`: the local caller). Sessions
/// are kept per tenant, so two tenants never share an instance or a
/// terminal.
pub fn session_key(tenant: Option<&str>, session: &str) -> String {
    match tenant {
        Some(tenant) => format!("{tenant}\u{0}{session}"),
        None => session.to_string(),
    }
}

/// The tenant part of a session key (`tenant\0session`); empty for the
/// local caller.
fn tenant_of(key: &str) -> &str {
    key.split_once('\0').map_or("", |(tenant, _)| tenant)
}

/// The session id a plugin is told: the caller's own, without the tenant.
pub(crate) fn guest_session_id(key: &str) -> &str {
    key.split_once('\0').map_or(key, |(_, session)| session)
}

/// A live instance of a stateful plugin.
pub(crate) struct LiveInstance {
    pub(crate) store: Store<Sandbox>,
    pub(crate) tool: ToolGuest,
    pub(crate) lifecycle: Option<LifecycleGuest>,
}

impl LiveInstance {
    /// Runs the guest's `teardown`, if it has one, bounded in time.
    pub(crate) async fn teardown(mut self) {
        if let Some(lifecycle) = self.lifecycle.take() {
            let result =
                tokio::time::timeout(TEARDOWN_TIMEOUT, lifecycle.teardown(&mut self.store)).await;
            if !matches!(result, Ok(Ok(()))) {
                tracing::warn!(
                    plugin = %self.store.data().identity().plugin,
                    "teardown failed or timed out; the instance is dropped anyway"
                );
            }
        }
        self.store.data().flush_output();
    }
}

/// One session's slot. The async mutex serializes that session's calls.
pub(crate) struct Slot {
    pub(crate) live: Option<LiveInstance>,
    /// The caller's profile the live instance was made under: under
    /// another one (narrowed, reloaded) it is made again.
    pub(crate) made_under: Option<Arc<Profile>>,
    pub(crate) last_used: Instant,
    pub(crate) closed: bool,
}

type SharedSlot = Arc<tokio::sync::Mutex<Slot>>;

/// What a session holds (see [`crate::runtime::PluginVersion::keep_session`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// A live instance.
    Live,
    /// A slot whose instance was discarded (a trap or timeout) or closed.
    Empty,
    /// No slot: never made, torn down when idle, or closed with its version.
    Missing,
}

/// Why a session slot is not available.
pub(crate) enum NoSlot {
    /// The version keeps [`MAX_SESSIONS`] already.
    Full,
    /// The caller's tenant holds [`MAX_SESSIONS_PER_TENANT`] already.
    TenantFull,
    /// The version was unloaded.
    Closed,
}

/// The sessions of one plugin version.
#[derive(Default)]
pub(crate) struct Sessions {
    slots: Mutex<HashMap<String, SharedSlot>>,
    closed: AtomicBool,
}

/// Why `slots` has no room for a new session of `tenant`, if it has none.
fn full<V>(slots: &HashMap<String, V>, tenant: &str) -> Option<NoSlot> {
    if slots.len() >= MAX_SESSIONS {
        return Some(NoSlot::Full);
    }
    let held = slots.keys().filter(|k| tenant_of(k) == tenant).count();
    (held >= MAX_SESSIONS_PER_TENANT).then_some(NoSlot::TenantFull)
}

impl Sessions {
    /// The slot for `key`, created empty if new.
    #[cfg(test)]
    pub(crate) fn slot(&self, key: &str) -> Result<SharedSlot, NoSlot> {
        self.slot_if(key, true)
            .map(|slot| slot.expect("made when missing"))
    }

    /// The slot for `key`; when it is new, created empty if `make`, else
    /// `None`.
    pub(crate) fn slot_if(&self, key: &str, make: bool) -> Result<Option<SharedSlot>, NoSlot> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if self.closed.load(Ordering::Acquire) {
            return Err(NoSlot::Closed);
        }
        if let Some(slot) = slots.get(key) {
            return Ok(Some(slot.clone()));
        }
        if !make {
            return Ok(None);
        }
        if let Some(full) = full(&slots, tenant_of(key)) {
            return Err(full);
        }
        let slot = Arc::new(tokio::sync::Mutex::new(Slot {
            live: None,
            made_under: None,
            last_used: Instant::now(),
            closed: false,
        }));
        slots.insert(key.to_string(), slot.clone());
        Ok(Some(slot))
    }

    /// Whether a new session of `tenant` would get a slot.
    pub(crate) fn has_room(&self, tenant: &str) -> bool {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        full(&slots, tenant).is_none()
    }

    /// The state of session `key`, marking it used now (so it is not torn
    /// down as idle right after); makes none.
    pub(crate) fn keep(&self, key: &str) -> SessionState {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = slots.get(key) else {
            return SessionState::Missing;
        };
        // A call in progress holds the lock: the instance is live.
        let Ok(mut slot) = slot.try_lock() else {
            return SessionState::Live;
        };
        if slot.closed || slot.live.is_none() {
            return SessionState::Empty;
        }
        slot.last_used = Instant::now();
        SessionState::Live
    }

    /// How many sessions have a live instance or a call in progress.
    pub(crate) fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Removes the sessions idle for longer than `idle` and tears them down.
    /// Sessions with a call in progress are skipped.
    pub(crate) async fn expire_idle(&self, idle: Duration) -> usize {
        let now = Instant::now();
        let mut expired = Vec::new();
        {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.retain(|_, slot| {
                let Ok(mut guard) = slot.try_lock() else {
                    return true;
                };
                if now.duration_since(guard.last_used) < idle {
                    return true;
                }
                guard.closed = true;
                if let Some(live) = guard.live.take() {
                    expired.push(live);
                }
                false
            });
        }
        let count = expired.len();
        for live in expired {
            live.teardown().await;
        }
        count
    }

    /// Removes session `key` unless a call is in progress in it, so its slot
    /// is free at once; tears its instance down in the background.
    pub(crate) fn end(&self, key: &str) {
        let live = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            let Some(slot) = slots.get(key) else {
                return;
            };
            let Ok(mut guard) = slot.try_lock() else {
                return;
            };
            guard.closed = true;
            let live = guard.live.take();
            drop(guard);
            slots.remove(key);
            live
        };
        if let (Some(live), Ok(runtime)) = (live, tokio::runtime::Handle::try_current()) {
            runtime.spawn(async move { live.teardown().await });
        }
    }

    /// Closes every session (their next call is refused) and tears down
    /// their instances, waiting for calls in progress to finish first.
    pub(crate) async fn close_all(&self) -> usize {
        let slots: Vec<SharedSlot> = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            self.closed.store(true, Ordering::Release);
            slots.drain().map(|(_, slot)| slot).collect()
        };
        let mut count = 0;
        for slot in slots {
            let mut guard = slot.lock().await;
            guard.closed = true;
            if let Some(live) = guard.live.take() {
                live.teardown().await;
                count += 1;
            }
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_holds_at_most_its_share_of_the_slots() {
        let sessions = Sessions::default();
        for i in 0..MAX_SESSIONS_PER_TENANT {
            assert!(sessions.slot(&format!("greedy\0s{i}")).is_ok());
        }
        assert!(matches!(
            sessions.slot("greedy\0one-more"),
            Err(NoSlot::TenantFull)
        ));
        // Its existing sessions stay usable, and other tenants still get in.
        assert!(sessions.slot("greedy\0s0").is_ok());
        assert!(sessions.slot("other\0s0").is_ok());
        assert!(sessions.slot("local").is_ok());
    }

    #[test]
    fn plugins_see_the_callers_session_id_without_the_tenant() {
        assert_eq!(guest_session_id("acme\0task-7"), "task-7");
        assert_eq!(guest_session_id("task-7"), "task-7");
    }
}
