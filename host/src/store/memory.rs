//! Guest memory: each instance's limiter (capped at `policy::MAX_MEMORY`),
//! and the budget all stateful sessions of one host share, of which each
//! tenant holds at most its share (`tenant_caps.sessions_memory`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::policy::MAX_MEMORY;

/// The memory all stateful sessions of one host may hold together
/// (`sessions_memory`): each session's instance is charged for its linear
/// memory as it grows, and gives it back when it is dropped.
#[derive(Debug)]
pub struct SessionMemory {
    limit: usize,
    used: AtomicUsize,
    /// Most one tenant's sessions hold together.
    share: AtomicUsize,
    /// What each tenant's sessions hold (`""`: the local caller's).
    by_tenant: Mutex<HashMap<String, usize>>,
}

impl SessionMemory {
    /// A budget of `limit` bytes, none used.
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicUsize::new(0),
            share: AtomicUsize::new(limit),
            by_tenant: Mutex::new(HashMap::new()),
        })
    }

    /// Sets the most one tenant's sessions may hold together.
    pub fn set_share(&self, bytes: usize) {
        self.share.store(bytes.max(1), Ordering::Relaxed);
    }

    /// The most one tenant's sessions may hold together.
    pub fn share(&self) -> usize {
        self.share.load(Ordering::Relaxed)
    }

    /// Bytes `tenant`'s sessions hold now.
    pub fn used_by(&self, tenant: &str) -> usize {
        let held = self.by_tenant.lock().unwrap_or_else(|e| e.into_inner());
        held.get(tenant).copied().unwrap_or(0)
    }

    /// The budget, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes the live sessions hold now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// A charge of nothing yet, for one session's instance of `tenant`
    /// (`""`: the local caller).
    pub(crate) fn account(self: &Arc<Self>, tenant: &str) -> Charge {
        Charge {
            budget: self.clone(),
            tenant: tenant.to_string(),
            bytes: 0,
        }
    }
}

/// Which budget a session could not grow within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shortage {
    /// `sessions_memory`, all sessions of the host.
    Host,
    /// The tenant's share of it.
    Tenant,
}

/// What one session's instance holds of its host's [`SessionMemory`].
#[derive(Debug)]
pub(crate) struct Charge {
    budget: Arc<SessionMemory>,
    tenant: String,
    bytes: usize,
}

impl Charge {
    /// Takes `more` bytes from the tenant's share and the host's budget;
    /// the shortage (and nothing taken) when either does not have them.
    pub(crate) fn grow(&mut self, more: usize) -> Result<(), Shortage> {
        let mut held = self
            .budget
            .by_tenant
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mine = held.get(&self.tenant).copied().unwrap_or(0);
        if mine.saturating_add(more) > self.budget.share() {
            return Err(Shortage::Tenant);
        }
        let taken = self
            .budget
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(more)
                    .filter(|&total| total <= self.budget.limit)
            });
        if taken.is_err() {
            return Err(Shortage::Host);
        }
        self.bytes += more;
        *held.entry(self.tenant.clone()).or_insert(0) += more;
        Ok(())
    }

    /// The tenant charged (`""`: the local caller).
    pub(crate) fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The host's budget.
    pub(crate) fn budget(&self) -> &SessionMemory {
        &self.budget
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        let mut held = self
            .budget
            .by_tenant
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(mine) = held.get_mut(&self.tenant) {
            *mine = mine.saturating_sub(self.bytes);
            if *mine == 0 {
                held.remove(&self.tenant);
            }
        }
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Caps linear memory and table growth, remembering whether the cap was hit
/// so that the resulting trap can be reported as a memory error.
#[derive(Debug)]
pub(crate) struct MemoryLimiter {
    limit: usize,
    pub(crate) exceeded: Option<usize>,
    /// A stateful session's share of its host's session memory.
    pub(crate) session: Option<Charge>,
    /// The size refused because the host's session memory, or the
    /// tenant's share of it, was used up.
    pub(crate) over_budget: Option<(usize, Shortage)>,
}

impl MemoryLimiter {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit: limit.min(MAX_MEMORY),
            exceeded: None,
            session: None,
            over_budget: None,
        }
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.exceeded = Some(desired);
            return Ok(false);
        }
        if let Some(charge) = &mut self.session
            && let Err(shortage) = charge.grow(desired.saturating_sub(current))
        {
            self.over_budget = Some((desired, shortage));
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_share_one_budget_and_give_it_back_when_dropped() {
        let budget = SessionMemory::new(100);
        let mut a = budget.account("a");
        let mut b = budget.account("b");
        assert!(a.grow(60).is_ok());
        assert_eq!(b.grow(41), Err(Shortage::Host), "over the budget");
        assert!(b.grow(40).is_ok());
        assert_eq!(budget.used(), 100);
        drop(a);
        assert_eq!(budget.used(), 40);
        assert!(b.grow(60).is_ok());
        drop(b);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_tenant_at_its_share_leaves_the_rest_to_others() {
        let budget = SessionMemory::new(90);
        budget.set_share(30);
        let mut a1 = budget.account("a");
        let mut a2 = budget.account("a");
        assert!(a1.grow(20).is_ok());
        assert_eq!(a2.grow(11), Err(Shortage::Tenant));
        assert!(a2.grow(10).is_ok());
        let mut b = budget.account("b");
        assert!(b.grow(30).is_ok());
        assert_eq!(budget.used_by("a"), 30);
        drop(a1);
        assert_eq!(budget.used_by("a"), 10);
        drop((a2, b));
        assert_eq!(budget.used(), 0);
        assert_eq!(budget.used_by("a"), 0);
    }
}
