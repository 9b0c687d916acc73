//! Backpressure: a bound on the bytes of buffers a queue's jobs allocate through
//! [`crate::Ctx::buffer`]. Past the bound, allocation awaits until memory is freed (after the
//! GPU work that uses it completes) instead of failing or growing without bound.
//!
//! A lease is taken before the buffer is allocated and released when its memory goes back to
//! the pool, that is after the last submission using it completed (a buffer dropped in flight
//! is freed when its submission retires). Waiting allocations are woken by that release; a
//! release never happens under the queue's lock (retired work is dropped after the lock is
//! released), so waking them there wakes nobody under a lock.

use super::core::lock;
use std::sync::{Arc, Mutex};
use std::task::Waker;

/// The bound and what is leased under it.
pub(crate) struct MemoryBudget {
    pub limit: u64,
    state: Mutex<BudgetState>,
}

#[derive(Default)]
struct BudgetState {
    used: u64,
    peak: u64,
    waiters: Vec<Waker>,
}

impl MemoryBudget {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(MemoryBudget { limit, state: Mutex::default() })
    }

    /// Takes `bytes` if they fit under the bound; otherwise registers `waker` to be woken at
    /// the next release.
    pub fn try_lease(self: &Arc<Self>, bytes: u64, waker: &Waker) -> Option<Lease> {
        let mut st = lock(&self.state);
        if st.used + bytes <= self.limit {
            st.used += bytes;
            st.peak = st.peak.max(st.used);
            return Some(Lease { budget: self.clone(), bytes });
        }
        if !st.waiters.iter().any(|w| w.will_wake(waker)) {
            st.waiters.push(waker.clone());
        }
        None
    }

    /// Whether allocations wait for memory.
    pub fn has_waiters(&self) -> bool {
        !lock(&self.state).waiters.is_empty()
    }

    /// The most bytes leased at once.
    pub fn peak(&self) -> u64 {
        lock(&self.state).peak
    }
}

/// Bytes leased under a [`MemoryBudget`]; released on drop.
pub(crate) struct Lease {
    budget: Arc<MemoryBudget>,
    bytes: u64,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let wakers = {
            let mut st = lock(&self.budget.state);
            st.used -= self.bytes;
            std::mem::take(&mut st.waiters)
        };
        // Every waiter tries again; those that still do not fit register anew.
        for w in wakers {
            w.wake();
        }
    }
}
