//! Backpressure: a bound on the bytes of buffers a queue's jobs allocate through
//! [`crate::Ctx::buffer`]. Past the bound, allocation awaits until memory is freed (after the
//! GPU work that uses it completes) instead of failing or growing without bound.
//!
//! A lease is taken before the buffer is allocated and released when its memory goes back to
//! the pool, that is after the last submission using it completed (a buffer dropped in flight
//! is freed when its submission retires). Waiting allocations are woken by that release; a
//! release never happens under the queue's lock (retired work is dropped after the lock is
//! released), so waking them there wakes nobody under a lock.
//!
//! # No silent waits
//! Leased bytes are *live* while their [`crate::Buffer`] handle exists, charged to the job (the
//! context, with its clones) that allocated it, and *retiring* once the handle is dropped (they
//! come back when the GPU work using them completes). A request waits only while it can still be
//! met; it fails with [`Error::MemoryBound`] instead of waiting
//! - at once, if the job's own live bytes plus the request exceed the bound (memory that only
//!   this job could free, and it is waiting);
//! - as soon as the queue is *stalled*: nothing is retiring, no waiting request fits, and every
//!   job that holds live bytes is itself waiting for more. Then nothing can ever free memory,
//!   and every waiting request fails.
//!
//! Bytes are charged to the job that allocated them: a buffer handed to another job still
//! counts as its allocator's.

use crate::error::{Error, Result};
use crate::util::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// The bound and what is leased under it.
pub(crate) struct MemoryBudget {
    pub limit: u64,
    state: Mutex<BudgetState>,
}

#[derive(Default)]
struct BudgetState {
    /// Bytes leased and not yet released.
    used: u64,
    /// Of `used`, the bytes whose buffer handle is alive.
    live: u64,
    peak: u64,
    waiters: Vec<Waker>,
    /// Live bytes per job (context id), for jobs that hold any.
    held: HashMap<u64, u64>,
    /// Waiting requests: id to (job, bytes).
    waiting: HashMap<u64, (u64, u64)>,
    /// Waiting requests found stalled: each fails at its next poll.
    stalled: Vec<u64>,
    next_request: u64,
}

impl BudgetState {
    /// Whether no memory can come back: nothing is retiring, no waiting request fits, and every
    /// job holding live bytes waits.
    fn is_stalled(&self, limit: u64) -> bool {
        self.used <= self.live
            && self.waiting.values().all(|&(_, b)| self.used + b > limit)
            && self.held.iter().all(|(job, &b)| b == 0 || self.waiting.values().any(|(j, _)| j == job))
    }
}

impl MemoryBudget {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(MemoryBudget { limit, state: Mutex::default() })
    }

    /// A request for `bytes` by the job `job` (a context's id), to be polled.
    pub fn request(self: &Arc<Self>, job: u64, bytes: u64) -> Request {
        Request { budget: self.clone(), job, bytes, id: None }
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

/// One allocation's wait for its bytes (see the module docs). Dropping it withdraws it.
pub(crate) struct Request {
    budget: Arc<MemoryBudget>,
    job: u64,
    bytes: u64,
    /// Set while the request waits.
    id: Option<u64>,
}

impl Request {
    /// Takes the bytes if they fit under the bound; fails if the request can never be met;
    /// otherwise waits (registering `cx`'s waker for the next release).
    pub fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Granted>> {
        let limit = self.budget.limit;
        let mut wake = Vec::new();
        let budget = self.budget.clone();
        let out = {
            let mut st = lock(&budget.state);
            let stalled = self.id.is_some_and(|id| st.stalled.contains(&id));
            if stalled {
                self.withdraw(&mut st);
                let held = st.held.get(&self.job).copied().unwrap_or(0);
                Poll::Ready(Err(self.error(held, true)))
            } else if st.used + self.bytes <= limit {
                self.withdraw(&mut st);
                st.used += self.bytes;
                st.live += self.bytes;
                st.peak = st.peak.max(st.used);
                *st.held.entry(self.job).or_default() += self.bytes;
                let lease = Lease { budget: self.budget.clone(), bytes: self.bytes };
                let holding = Holding { budget: self.budget.clone(), job: self.job, bytes: self.bytes };
                Poll::Ready(Ok(Granted { lease, holding }))
            } else {
                let held = st.held.get(&self.job).copied().unwrap_or(0);
                if held + self.bytes > limit {
                    self.withdraw(&mut st);
                    Poll::Ready(Err(self.error(held, false)))
                } else {
                    if self.id.is_none() {
                        let id = st.next_request;
                        st.next_request += 1;
                        st.waiting.insert(id, (self.job, self.bytes));
                        self.id = Some(id);
                    }
                    if !st.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                        st.waiters.push(cx.waker().clone());
                    }
                    if st.is_stalled(limit) {
                        // Nothing can free memory any more: every waiting request fails,
                        // this one now, the others when woken.
                        let others: Vec<u64> = st.waiting.keys().copied().filter(|&k| Some(k) != self.id).collect();
                        st.stalled.extend(others);
                        wake = std::mem::take(&mut st.waiters);
                        self.withdraw(&mut st);
                        Poll::Ready(Err(self.error(held, true)))
                    } else {
                        Poll::Pending
                    }
                }
            }
        };
        for w in wake {
            w.wake();
        }
        out
    }

    fn withdraw(&mut self, st: &mut BudgetState) {
        if let Some(id) = self.id.take() {
            st.waiting.remove(&id);
            st.stalled.retain(|&k| k != id);
        }
    }

    fn error(&self, held: u64, stalled: bool) -> Error {
        Error::MemoryBound {
            requested: self.bytes,
            held,
            limit: self.budget.limit,
            reason: if stalled {
                "the whole bound is held by jobs that all wait for more, and nothing in flight will free any"
            } else {
                "this job's own live buffers and the request together exceed the bound"
            },
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if self.id.is_some() {
            let budget = self.budget.clone();
            let mut st = lock(&budget.state);
            self.withdraw(&mut st);
        }
    }
}

/// What a granted request holds: the lease, released when the buffer's memory goes back to the
/// pool, and the holding, released when the buffer's handle is dropped.
pub(crate) struct Granted {
    pub lease: Lease,
    pub holding: Holding,
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

/// Live bytes of a job: its buffer handle exists. Dropped with the handle (before the lease).
pub(crate) struct Holding {
    budget: Arc<MemoryBudget>,
    job: u64,
    bytes: u64,
}

impl Drop for Holding {
    fn drop(&mut self) {
        let mut st = lock(&self.budget.state);
        st.live -= self.bytes;
        if let Some(h) = st.held.get_mut(&self.job) {
            *h -= self.bytes;
            if *h == 0 {
                st.held.remove(&self.job);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn poll(r: &mut Request) -> Poll<Result<Granted>> {
        r.poll(&mut Context::from_waker(Waker::noop()))
    }

    fn is_bound(p: &Poll<Result<Granted>>, held: u64) -> bool {
        matches!(p, Poll::Ready(Err(Error::MemoryBound { held: h, .. })) if *h == held)
    }

    #[test]
    fn a_job_whose_own_live_bytes_and_request_exceed_the_bound_fails_at_once() {
        let b = MemoryBudget::new(100);
        let Poll::Ready(Ok(first)) = poll(&mut b.request(1, 60)) else { panic!("fits") };
        assert!(is_bound(&poll(&mut b.request(1, 60)), 60));
        // Once its handle is dropped the bytes are retiring: the same request waits for them.
        drop(first.holding);
        let mut again = b.request(1, 60);
        assert!(poll(&mut again).is_pending());
        drop(first.lease);
        assert!(matches!(poll(&mut again), Poll::Ready(Ok(_))));
    }

    #[test]
    fn a_stall_fails_every_waiting_request_and_a_wait_on_a_busy_holder_does_not() {
        let b = MemoryBudget::new(100);
        let Poll::Ready(Ok(a)) = poll(&mut b.request(1, 50)) else { panic!() };
        let Poll::Ready(Ok(c)) = poll(&mut b.request(2, 50)) else { panic!() };
        // Job 1 waits; job 2 holds bytes and does not wait: no stall.
        let mut wait1 = b.request(1, 40);
        assert!(poll(&mut wait1).is_pending());
        // Job 2 waits too: nothing can come back; both fail.
        assert!(is_bound(&poll(&mut b.request(2, 40)), 50));
        assert!(is_bound(&poll(&mut wait1), 50));
        // A withdrawn request counts no more: job 1 waits again, job 2 frees its bytes.
        let mut wait1 = b.request(1, 40);
        assert!(poll(&mut wait1).is_pending());
        let mut gone = b.request(2, 40);
        drop(c);
        assert!(matches!(poll(&mut wait1), Poll::Ready(Ok(_))));
        drop(gone.poll(&mut Context::from_waker(Waker::noop())));
        drop((a, gone));
        let st = lock(&b.state);
        assert!(st.waiting.is_empty() && st.stalled.is_empty(), "withdrawn requests leave nothing behind");
    }
}
