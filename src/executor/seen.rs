//! What a woken wait reads without the queue's lock.
//!
//! Everything else about waiters lives behind the queue's mutex (see
//! [`crate::executor`], "When a task is woken"), or, for a `Queue`'s lane items until a flush
//! takes them, behind their lane's (see [`super::lanes`]). This is the one exception, and the
//! whole of it:
//!
//! - an epoch's submitted value ([`SubmittedValue`]), written under the lock when its flush is
//!   published;
//! - the last completed value the queue has read ([`Seen::completed`]), stored under the lock
//!   *before* the waiters it completes are fired (a success frees the waiter's slot as it fires);
//! - whether any waiter was ever fired with a failure ([`Seen::failure`]), set under the lock
//!   when it happens.
//!
//! A woken `synchronize` future whose epoch's value is at or below the completed value, with no
//! failure ever fired, returns success without the lock: its slot was freed by the same hold of
//! the lock that stored the completed value (a submitted value is never left waiting at or
//! below the completed value). After a failure, a slot may hold that failure even though its
//! work later completed, so from then on woken futures read their slot under the lock. The
//! failure flag is stored before (in lock order) any completed value that could make a failed
//! slot look successful, so an `Acquire` load of the completed value that sees such a value also
//! sees the flag. The `loom` model below checks these orderings (run it with
//! `cargo test --lib --features loom-model loom_model`; `cargo xtask test` does).

#[cfg(feature = "loom-model")]
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(not(feature = "loom-model"))]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The queue's side (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Seen {
    completed: AtomicU64,
    failed: AtomicBool,
}

impl Seen {
    /// Under the lock: a waiter was fired with a failure.
    pub fn failure(&self) {
        self.failed.store(true, Ordering::Relaxed);
    }

    /// Under the lock, before firing the waiters at or below `c`: the counter was read as `c`.
    pub fn completed(&self, c: u64) {
        self.completed.store(c, Ordering::Release);
    }

    /// Without the lock: whether work submitted as `value` is known to have succeeded and its
    /// waiter's slot is (or is being, by the holder of the lock) freed.
    pub fn succeeded(&self, value: u64) -> bool {
        value <= self.completed.load(Ordering::Acquire) && !self.failed.load(Ordering::Relaxed)
    }
}

/// An epoch's side: the value its submission signals, once submitted.
#[derive(Debug)]
pub(crate) struct SubmittedValue(AtomicU64);

impl SubmittedValue {
    const NONE: u64 = u64::MAX;

    pub fn new() -> Self {
        SubmittedValue(AtomicU64::new(Self::NONE))
    }

    /// Under the lock, with the epoch's status.
    pub fn set(&self, v: Option<u64>) {
        self.0.store(v.unwrap_or(Self::NONE), Ordering::Release);
    }

    /// Without the lock.
    pub fn get(&self) -> Option<u64> {
        Some(self.0.load(Ordering::Acquire)).filter(|&v| v != Self::NONE)
    }
}

#[cfg(all(test, feature = "loom-model"))]
mod loom_model {
    //! The queue's lock and one waiter's slot, driven by the real [`Seen`] and
    //! [`SubmittedValue`]: a driver thread publishes a submission, then fires the slot (a
    //! failure, then a completion, or a completion alone); the waiting thread looks without
    //! the lock first, as `SyncFuture::poll` does, then under it.
    use super::*;
    use loom::sync::{Arc, Mutex};

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Slot {
        Waiting,
        Failed,
        Freed,
    }

    struct Queue {
        lock: Mutex<Slot>,
        seen: Seen,
        value: SubmittedValue,
    }

    /// The waiter's poll: `Some(true)` success, `Some(false)` failure, `None` still waiting.
    fn poll(q: &Queue) -> (Option<bool>, bool) {
        if q.value.get().is_some_and(|v| q.seen.succeeded(v)) {
            return (Some(true), true);
        }
        let slot = *q.lock.lock().unwrap();
        let out = match slot {
            Slot::Waiting => None,
            Slot::Failed => Some(false),
            Slot::Freed => Some(true),
        };
        (out, false)
    }

    fn run(fail_first: bool) {
        loom::model(move || {
            let q = Arc::new(Queue {
                lock: Mutex::new(Slot::Waiting),
                seen: Seen::default(),
                value: SubmittedValue::new(),
            });
            let driver = {
                let q = q.clone();
                loom::thread::spawn(move || {
                    {
                        let _g = q.lock.lock().unwrap();
                        q.value.set(Some(1));
                    }
                    if fail_first {
                        // A timeout: the slot keeps the failure (first outcome wins).
                        let mut g = q.lock.lock().unwrap();
                        q.seen.failure();
                        *g = Slot::Failed;
                    }
                    // The counter reaches 1: the completed value first, then the slot fired.
                    let mut g = q.lock.lock().unwrap();
                    q.seen.completed(1);
                    if *g == Slot::Waiting {
                        *g = Slot::Freed;
                    }
                })
            };
            let (out, fast) = poll(&q);
            driver.join().unwrap();
            let end = *q.lock.lock().unwrap();
            if fast {
                // A success seen without the lock: the slot was freed by the driver, never
                // left holding a failure (which would leak it and hide the error).
                assert_eq!(end, Slot::Freed);
            }
            if fail_first {
                assert_ne!(out, Some(true), "a failed wait looked successful");
            }
            if let Some(false) = out {
                assert!(fail_first);
            }
        });
    }

    #[test]
    fn a_lock_free_success_always_finds_its_slot_freed() {
        run(false);
    }

    #[test]
    fn a_failure_is_never_read_as_success_without_the_lock() {
        run(true);
    }
}
