//! When [`super::Offload::Auto`] seals a large record at once on the caller's thread.
//!
//! A record of a few KiB or more is worth the GPU only when enough of them share a flush: the
//! model ([`super::batch::OffloadRule::Model`]) puts a flush of few large records on the host.
//! Such a record still went through staging, the flush and a wake-up before it ran on the host,
//! where [`super::Offload::Host`] seals it at once in the calling task: with one connection or
//! ten, `Auto` was a third slower than `Host`. But whether the record's flush will be small is
//! not known when the record arrives, and a record sealed at once joins no flush, so flushes
//! cannot show the load while records go that way.
//!
//! The protocol, one [`HostCredit`] per batch kind (one per [`super::Crypto`] configuration):
//!
//! - The credit holds the bytes of crypto work sealed at once since it was last opened. A
//!   large record is sealed at once when that sum, with its own work, stays within the model's
//!   crossover for its length (the bytes one flush of such records may carry and still run on
//!   the host); otherwise it joins a flush. A new credit is open.
//! - A flush of a single item that the model put on the host re-opens the credit (the sum goes
//!   back to zero): records arrive one at a time, a load the host takes at once.
//! - A flush the model sent to the GPU closes it: every large record joins a flush until a
//!   flush of a single item runs on the host.
//! - Other flushes leave it as it is. A flush of a few records on the host does not re-open it:
//!   a native executor with many ready tasks submits a few records early when its GPU is idle
//!   ([`crate::FlushPolicy::GroupCommit`]), and while its driver thread computes that flush on
//!   the host the loop goes on recording, so that the next flush is large and goes to the GPU;
//!   re-opened there, the loop would seal the ready records itself, one core instead of the GPU.
//!
//! So at most one host-sized flush of work is sealed at once before the first real flush shows
//! the load: a lone connection never waits for a flush (but for one record in every
//! crossover's worth), ten connections sealing a few records each seal nearly all at once, and
//! under a load the GPU takes the cost is that much host work once, after which every record
//! coalesces as before. The credit is one atomic word, written by records sealed at once and
//! by flushes, never by records that join a flush.

use std::sync::atomic::{AtomicU64, Ordering};

/// The sum that marks a closed credit (no record fits under it).
const CLOSED: u64 = u64::MAX;

/// The bytes of work sealed at once since the last flush that ran on the host (see the module
/// docs).
#[derive(Debug, Default)]
pub(crate) struct HostCredit {
    spent: AtomicU64,
}

impl HostCredit {
    /// Takes `work` bytes if the sum stays within `limit`; whether the record is sealed at once.
    pub fn take(&self, work: u64, limit: u64) -> bool {
        // Relaxed: the credit is a heuristic that orders no memory; a race costs at most one
        // record on the other path, whose output is the same.
        self.spent
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| s.checked_add(work).filter(|&n| n <= limit))
            .is_ok()
    }

    /// A flush of `items` ran on the host (`on_host`; a single item opens the credit) or went
    /// to the GPU (the credit closes).
    pub fn flushed(&self, on_host: bool, items: usize) {
        let to = match (on_host, items) {
            (false, _) => CLOSED,
            (true, 1) => 0,
            (true, _) => return,
        };
        // Most flushes find the credit as they leave it: no write, no cache line taken.
        if self.spent.load(Ordering::Relaxed) != to {
            self.spent.store(to, Ordering::Relaxed);
        }
    }

    /// Whether no record fits (a flush went to the GPU since the last host flush).
    #[cfg(test)]
    pub fn is_closed(&self) -> bool {
        self.spent.load(Ordering::Relaxed) == CLOSED
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_new_credit_takes_up_to_its_limit_then_refuses() {
        let c = HostCredit::default();
        assert!(c.take(40, 100) && c.take(40, 100), "80 of 100");
        assert!(!c.take(40, 100), "120 would pass the limit");
        assert!(c.take(20, 100), "exactly the limit fits");
        assert!(!c.take(1, 100));
    }

    #[test]
    fn a_gpu_flush_closes_the_credit_and_a_lone_item_on_the_host_opens_it() {
        let c = HostCredit::default();
        c.flushed(false, 5);
        assert!(c.is_closed() && !c.take(1, u64::MAX - 1), "closed: nothing fits");
        c.flushed(true, 3);
        assert!(c.is_closed(), "a few items on the host leave it closed");
        c.flushed(true, 1);
        assert!(!c.is_closed() && c.take(100, 100), "opened: the whole limit again");
        assert!(!c.take(1, 100), "spent");
        c.flushed(true, 2);
        assert!(!c.take(1, 100), "a flush of a few leaves the sum");
        c.flushed(true, 1);
        assert!(c.take(100, 100), "each lone host flush opens it anew");
    }

    proptest! {
        /// Whatever the order of records and flushes, the work taken since the last lone host
        /// flush (or the start) never exceeds the limit of the record that takes it, and none is
        /// taken after a GPU flush until a lone host flush.
        #[test]
        fn the_work_taken_between_lone_host_flushes_stays_within_the_limit(
            events in prop::collection::vec((0u8..5, 1u64..5000, 1u64..20_000), 0..200)
        ) {
            let c = HostCredit::default();
            let (mut since, mut open) = (0u64, true);
            for (kind, work, limit) in events {
                match kind {
                    0 => { c.flushed(true, 1); since = 0; open = true; }
                    1 => { c.flushed(false, 1 + work as usize % 3); open = false; }
                    2 => c.flushed(true, 2 + work as usize % 100),
                    _ => {
                        let took = c.take(work, limit);
                        prop_assert_eq!(took, open && since + work <= limit);
                        if took { since += work; }
                    }
                }
            }
        }
    }
}
