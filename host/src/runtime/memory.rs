//! Guest memory: the cap on each instance's linear memory, and the budget
//! all stateful sessions of one host share.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Largest linear memory any guest may have, whatever its profile says.
pub const MAX_MEMORY: usize = 4 << 30;

/// The memory all stateful sessions of one host may hold together
/// (`sessions_memory`): each session's instance is charged for its linear
/// memory as it grows, and gives it back when it is dropped.
#[derive(Debug)]
pub struct SessionMemory {
    limit: usize,
    used: AtomicUsize,
}

impl SessionMemory {
    /// A budget of `limit` bytes, none used.
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// The budget, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes the live sessions hold now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// A charge of nothing yet, for one session's instance.
    pub(crate) fn account(self: &Arc<Self>) -> Charge {
        Charge {
            budget: self.clone(),
            bytes: 0,
        }
    }
}

/// What one session's instance holds of its host's [`SessionMemory`].
#[derive(Debug)]
pub(crate) struct Charge {
    budget: Arc<SessionMemory>,
    bytes: usize,
}

impl Charge {
    /// Takes `more` bytes from the budget; false (and nothing taken) when
    /// the budget does not have them.
    pub(crate) fn grow(&mut self, more: usize) -> bool {
        let taken = self
            .budget
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(more)
                    .filter(|&total| total <= self.budget.limit)
            });
        if taken.is_ok() {
            self.bytes += more;
        }
        taken.is_ok()
    }

    /// The host's budget.
    pub(crate) fn budget(&self) -> &SessionMemory {
        &self.budget
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
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
    /// The size refused because the host's session memory was used up.
    pub(crate) over_budget: Option<usize>,
}

impl MemoryLimiter {
    pub(super) fn new(limit: usize) -> Self {
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
            && !charge.grow(desired.saturating_sub(current))
        {
            self.over_budget = Some(desired);
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
        let mut a = budget.account();
        let mut b = budget.account();
        assert!(a.grow(60));
        assert!(!b.grow(41), "over the budget");
        assert!(b.grow(40));
        assert_eq!(budget.used(), 100);
        drop(a);
        assert_eq!(budget.used(), 40);
        assert!(b.grow(60));
        drop(b);
        assert_eq!(budget.used(), 0);
    }
}
