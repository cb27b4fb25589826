//! Fresh instances made ahead of their call. After a call, a plugin version
//! instantiates the next instance of that tool in the background (after the
//! caller has its answer), so that the next call with the same grants skips
//! instantiation. Each instance still serves exactly one call: nothing of one
//! call can reach the next. Only a caller that pauses between its calls gets
//! them: one whose next call follows at once would not wait for the instance.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::Store;
use wasmtime::component::InstancePre;

use super::flight::Flights;
use crate::capability::grants::Grants;
use crate::capability::sandbox::{Identity, Linked, Sandbox};
use crate::contract::adapter::{ToolExports, ToolGuest};
use crate::policy::Limits;

/// An instance that has not served a call yet.
pub(crate) struct ReadyInstance {
    pub(crate) store: Store<Sandbox>,
    pub(crate) guest: ToolGuest,
}

/// What a new instance is built from: its WASI context and limits depend on
/// these, so an instance only serves calls that would have built the same.
fn same_sandbox(made: &Sandbox, limits: &Limits, grants: &Grants) -> bool {
    made.limiter.limit() == limits.memory.min(crate::policy::MAX_MEMORY)
        && made.grants().builds_like(grants)
}

/// The instances made ahead for one plugin version: at most one per tool.
#[derive(Default)]
pub(crate) struct ReadyInstances {
    /// By tool: a version has a few tools, so a list is found faster than
    /// a hashed name.
    slots: Mutex<Vec<(Arc<str>, Slot)>>,
    closed: AtomicBool,
    /// How long the last fresh instance of the version took to
    /// instantiate, in nanoseconds (0: none was made yet).
    making: AtomicU64,
}

enum Slot {
    /// Being instantiated.
    Making,
    Ready(ReadyInstance),
}

/// What the background instantiation needs.
pub(crate) struct Recipe {
    pub(crate) engine: wasmtime::Engine,
    pub(crate) capabilities: &'static [Linked],
    pub(crate) pre: InstancePre<Sandbox>,
    pub(crate) indices: ToolExports,
    pub(crate) identity: Identity,
    pub(crate) limits: Limits,
    pub(crate) grants: Arc<Grants>,
}

impl ReadyInstances {
    /// Whether a caller that paused this long before its call will likely
    /// pause long enough before the next one for an instance made ahead to
    /// be ready: longer than the last instance took to make. A
    /// caller whose next call follows at once (a batch's lane, a loop of
    /// calls) would not wait for it: making it would only cost CPU.
    pub(crate) fn worth_making(&self, pause: Duration) -> bool {
        pause.as_nanos() > u128::from(self.making.load(Ordering::Relaxed))
    }

    /// Notes how long a fresh instance took to instantiate.
    pub(crate) fn made_in(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.making.store(nanos, Ordering::Relaxed);
    }

    /// The instance made for `tool`, if it was made for these limits and
    /// grants; it is then given the call's `grants` (approvals, subject).
    pub(crate) fn take(
        &self,
        tool: &str,
        limits: &Limits,
        grants: &Arc<Grants>,
    ) -> Option<ReadyInstance> {
        let mut ready = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            let at = slots.iter().position(|(made_for, slot)| {
                **made_for == *tool && matches!(slot, Slot::Ready(_))
            })?;
            match slots.swap_remove(at) {
                (_, Slot::Ready(ready)) => ready,
                (_, Slot::Making) => unreachable!("found ready"),
            }
        };
        if !same_sandbox(ready.store.data(), limits, grants) {
            // Made for another caller (dropped here, outside the lock); the
            // next call makes one for this one.
            return None;
        }
        ready.store.data_mut().call.grants = grants.clone();
        // Its epoch deadline was set when it was made.
        super::instance::yield_fairly(&mut ready.store);
        Some(ready)
    }

    /// Makes the next instance of `tool` in a task of its own, unless one is
    /// ready or being made. `used` (the store of the call that just ended)
    /// is dropped there too, off the caller's path. The task first yields,
    /// so the caller's answer goes out before this work runs. An instance
    /// is kept only for a caller that pauses: when another call of the
    /// version (`flights`, `begun` so far) begins before it is made, that
    /// call makes its own, and this one is not made or dropped.
    pub(crate) fn make_next(
        self: &Arc<Self>,
        tool: &str,
        recipe: impl FnOnce() -> Recipe,
        used: Store<Sandbox>,
        flights: &Arc<Flights>,
        begun: u64,
    ) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let tool: Arc<str> = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            if slots.iter().any(|(made_for, _)| **made_for == *tool) {
                return;
            }
            let tool: Arc<str> = tool.into();
            slots.push((tool.clone(), Slot::Making));
            tool
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            remove(
                &mut self.slots.lock().unwrap_or_else(|e| e.into_inner()),
                &tool,
            );
            return;
        };
        let (this, recipe, flights) = (self.clone(), recipe(), flights.clone());
        let none_since = move || flights.begun() == begun;
        runtime.spawn(async move {
            tokio::task::yield_now().await;
            drop(used);
            let made = if none_since() {
                Some(tokio::time::timeout(recipe.limits.timeout, make(&recipe)).await)
            } else {
                None
            };
            let mut slots = this.slots.lock().unwrap_or_else(|e| e.into_inner());
            let unused = match made {
                Some(Ok(Ok((ready, took)))) => {
                    this.made_in(took);
                    if none_since() && !this.closed.load(Ordering::Acquire) {
                        if let Some((_, slot)) =
                            slots.iter_mut().find(|(made_for, _)| *made_for == tool)
                        {
                            *slot = Slot::Ready(ready);
                        } else {
                            slots.push((tool, Slot::Ready(ready)));
                        }
                        return;
                    }
                    Some(ready)
                }
                Some(Ok(Err(error))) => {
                    // The call that needs it will instantiate and report.
                    tracing::debug!(tool = %tool, %error, "instance made ahead failed");
                    None
                }
                _ => None,
            };
            remove(&mut slots, &tool);
            drop(slots);
            drop(unused);
        });
    }

    /// Drops the instances made ahead and makes no more (the version is
    /// being unloaded).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let ready: Vec<Slot> = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.drain(..).map(|(_, slot)| slot).collect()
        };
        drop(ready);
    }

    /// How many instances are ready now.
    pub(crate) fn len(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, slot)| matches!(slot, Slot::Ready(_)))
            .count()
    }
}

/// Removes `tool`'s slot, if there is one.
fn remove(slots: &mut Vec<(Arc<str>, Slot)>, tool: &str) {
    if let Some(at) = slots.iter().position(|(made_for, _)| **made_for == *tool) {
        slots.swap_remove(at);
    }
}

/// A new instance from `recipe`, and how long instantiating it took.
async fn make(recipe: &Recipe) -> wasmtime::Result<(ReadyInstance, Duration)> {
    let sandbox = Sandbox::new(
        recipe.capabilities,
        recipe.identity.clone(),
        &recipe.limits,
        recipe.grants.clone(),
    );
    let mut store = super::instance::new_store(&recipe.engine, sandbox);
    let began = Instant::now();
    let guest = super::instance::instantiate_tool(&recipe.pre, &recipe.indices, &mut store).await?;
    Ok((ReadyInstance { store, guest }, began.elapsed()))
}
