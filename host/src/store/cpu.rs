//! A fair share of the async workers for guest code. Guests run as futures
//! on the runtime's workers and give way at each epoch tick; past its first
//! tick, a guest runs on only with a turn of the [`CpuGate`], which has as
//! many turns as there are cores and hands a freed one to the waiting tenant
//! with the fewest running. One tenant's CPU-bound calls then wait among
//! themselves, parked, instead of queueing every other tenant's work (their
//! requests, their short calls) behind a run queue full of their slices.
//! A guest gives its turn back at each tick and whenever it calls the host.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::oneshot;

/// The turns guests take to run past their first tick.
pub(crate) struct CpuGate {
    capacity: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Turns taken, in all.
    running: usize,
    /// Turns taken, by tenant.
    by_tenant: HashMap<Arc<str>, usize>,
    /// The guests waiting, by tenant, first come first.
    waiting: HashMap<Arc<str>, VecDeque<oneshot::Sender<()>>>,
    /// The tenants with guests waiting, in the order they came.
    order: VecDeque<Arc<str>>,
}

/// A turn taken: given back when dropped.
pub(crate) struct Turn {
    gate: Arc<CpuGate>,
    tenant: Arc<str>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.gate.give_back(&self.tenant);
    }
}

impl CpuGate {
    /// A gate of `capacity` turns.
    pub(crate) fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            capacity: capacity.max(1),
            state: Mutex::new(State::default()),
        })
    }

    /// The process's gate: a turn per core.
    pub(crate) fn shared() -> &'static Arc<CpuGate> {
        static GATE: OnceLock<Arc<CpuGate>> = OnceLock::new();
        GATE.get_or_init(|| Self::new(std::thread::available_parallelism().map_or(2, |n| n.get())))
    }

    /// A turn for a guest of `tenant`, once one is free and it is this
    /// tenant's to have.
    pub(crate) async fn turn(self: &Arc<Self>, tenant: Arc<str>) -> Turn {
        let receiver = {
            let mut state = self.lock();
            if state.running < self.capacity && state.order.is_empty() {
                state.take(&tenant);
                return Turn {
                    gate: self.clone(),
                    tenant,
                };
            }
            let (sender, receiver) = oneshot::channel();
            let queue = state.waiting.entry(tenant.clone()).or_default();
            queue.push_back(sender);
            if queue.len() == 1 {
                state.order.push_back(tenant.clone());
            }
            receiver
        };
        let mut waiting = Waiting {
            receiver,
            gate: self.clone(),
            tenant: tenant.clone(),
            granted: false,
        };
        // A sender is only dropped once its turn was given (then the value
        // came) or with the gate, which lives as long as the process.
        let _ = (&mut waiting.receiver).await;
        waiting.granted = true;
        Turn {
            gate: self.clone(),
            tenant,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives a turn of `tenant` back, and hands it on.
    fn give_back(&self, tenant: &Arc<str>) {
        let mut state = self.lock();
        state.untake(tenant);
        state.hand_on(self.capacity);
    }
}

impl State {
    fn take(&mut self, tenant: &Arc<str>) {
        self.running += 1;
        *self.by_tenant.entry(tenant.clone()).or_default() += 1;
    }

    /// Undoes [`Self::take`].
    fn untake(&mut self, tenant: &Arc<str>) {
        self.running = self.running.saturating_sub(1);
        if let Some(count) = self.by_tenant.get_mut(tenant) {
            *count -= 1;
            if *count == 0 {
                self.by_tenant.remove(tenant);
            }
        }
    }

    /// Gives free turns to waiting guests: each to the waiting tenant with
    /// the fewest turns (the first come among equals).
    fn hand_on(&mut self, capacity: usize) {
        while self.running < capacity {
            let Some(at) = (0..self.order.len())
                .min_by_key(|&at| self.by_tenant.get(&self.order[at]).copied().unwrap_or(0))
            else {
                return;
            };
            let tenant = self.order[at].clone();
            let queue = self.waiting.get_mut(&tenant);
            let sender = queue.and_then(VecDeque::pop_front);
            if self.waiting.get(&tenant).is_none_or(VecDeque::is_empty) {
                self.waiting.remove(&tenant);
                self.order.remove(at);
            } else {
                // Its next guest waits behind the other tenants'.
                self.order.remove(at);
                self.order.push_back(tenant.clone());
            }
            let Some(sender) = sender else {
                continue;
            };
            // Counted before it is sent: a guest that stopped waiting gives
            // it back itself (see `Waiting`).
            self.take(&tenant);
            if sender.send(()).is_err() {
                // It stopped waiting before this.
                self.untake(&tenant);
            }
        }
    }
}

/// A guest waiting for a turn; one that stops waiting (its call cancelled)
/// after its turn was sent gives it back.
struct Waiting {
    receiver: oneshot::Receiver<()>,
    gate: Arc<CpuGate>,
    tenant: Arc<str>,
    /// The turn came and became a [`Turn`].
    granted: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.granted && self.receiver.try_recv().is_ok() {
            self.gate.give_back(&self.tenant);
        }
    }
}

/// Where a store keeps the turn its guest runs with: taken by the future
/// the epoch callback yields to, given back by the store's call hook.
#[derive(Default)]
pub(crate) struct TurnSlot {
    held: AtomicBool,
    turn: Mutex<Option<Turn>>,
}

impl TurnSlot {
    pub(crate) fn hold(&self, turn: Turn) {
        *self.turn.lock().unwrap_or_else(|e| e.into_inner()) = Some(turn);
        self.held.store(true, Ordering::Release);
    }

    /// Gives back the turn held, if one is (cheap when none is).
    pub(crate) fn give_back(&self) {
        if self.held.swap(false, Ordering::AcqRel) {
            drop(self.turn.lock().unwrap_or_else(|e| e.into_inner()).take());
        }
    }

    /// Gives back the turn held when dropped: held across a guest call, so
    /// that a call dropped mid-slice (its caller gone, a task cancelled)
    /// leaves no turn taken in a store that lives on (a stateful session).
    pub(crate) fn until_dropped(self: &Arc<Self>) -> GiveBack {
        GiveBack(self.clone())
    }
}

/// See [`TurnSlot::until_dropped`].
pub(crate) struct GiveBack(Arc<TurnSlot>);

impl Drop for GiveBack {
    fn drop(&mut self) {
        self.0.give_back();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(tenant: &str) -> Arc<str> {
        Arc::from(tenant)
    }

    /// Two turns, both taken by tenant a; a's third guest comes before b's
    /// first. The turn a gives back goes to b, which has none running, then
    /// the next to a.
    #[tokio::test]
    async fn a_freed_turn_goes_to_the_waiting_tenant_with_the_fewest() {
        let gate = CpuGate::new(2);
        let first = gate.turn(name("a")).await;
        let second = gate.turn(name("a")).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for (tenant, label) in [("a", "a3"), ("b", "b1")] {
            let (gate, order) = (gate.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let turn = gate.turn(name(tenant)).await;
                order.lock().unwrap().push(label);
                turn
            }));
            // Each is queued before the next comes.
            tokio::task::yield_now().await;
        }
        drop(first);
        tokio::task::yield_now().await;
        assert_eq!(*order.lock().unwrap(), ["b1"]);
        drop(second);
        let mut turns = Vec::new();
        for task in waiting {
            turns.push(task.await.unwrap());
        }
        assert_eq!(*order.lock().unwrap(), ["b1", "a3"]);
        assert_eq!(gate.lock().running, 2);
        drop(turns);
        assert_eq!(gate.lock().running, 0);
    }

    /// A guest that stops waiting (its call cancelled), whether before or
    /// after its turn came, leaves no turn taken.
    #[tokio::test]
    async fn a_guest_that_stops_waiting_leaves_no_turn_taken() {
        let gate = CpuGate::new(1);
        let first = gate.turn(name("a")).await;
        let gone = {
            let gate = gate.clone();
            tokio::spawn(async move {
                let _turn = gate.turn(name("b")).await;
                std::future::pending::<()>().await;
            })
        };
        tokio::task::yield_now().await;
        gone.abort();
        let _ = gone.await;
        drop(first);
        assert_eq!(gate.lock().running, 0);
        let again = gate.turn(name("c")).await;
        assert_eq!(gate.lock().running, 1);
        drop(again);
        assert_eq!(gate.lock().running, 0);
    }

    /// A store that lives on after a call dropped mid-slice (a stateful
    /// session's) keeps no turn: the call's guard gives it back.
    #[tokio::test]
    async fn a_call_dropped_mid_slice_leaves_no_turn_in_its_store() {
        let gate = CpuGate::new(1);
        let slot = Arc::new(TurnSlot::default());
        let call = {
            let (gate, slot) = (gate.clone(), slot.clone());
            tokio::spawn(async move {
                let _turn = slot.until_dropped();
                slot.hold(gate.turn(name("a")).await);
                std::future::pending::<()>().await;
            })
        };
        while gate.lock().running == 0 {
            tokio::task::yield_now().await;
        }
        call.abort();
        let _ = call.await;
        assert_eq!(gate.lock().running, 0);
    }
}
