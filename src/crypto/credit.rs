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
//! - The credit holds the bytes of crypto work sealed at once since it was last opened. A large
//!   record is sealed at once while that sum, with its own work, stays within its limit (the
//!   record layer asks for [`CREDIT_FLUSHES`] times the model's crossover for the record's
//!   length, the bytes one flush of such records may carry and still run on the host);
//!   otherwise it joins a flush. A new credit is open.
//! - A flush the model sent to the GPU closes it: every large record joins a flush.
//! - A flush the model put on the host re-opens it (the sum goes back to zero) if it carried a
//!   single item, or if it was light (at most half of the model's crossover for it) and the
//!   flush before it was a light host flush too: records arrive one at a time, or a few at a
//!   time, a load the host takes at once.
//! - Any other flush on the host leaves it as it is. A native executor with many ready tasks
//!   submits a few records early when its GPU is idle ([`crate::FlushPolicy::GroupCommit`]), and
//!   while its driver thread computes that flush on the host the loop goes on recording, so that
//!   the next flush is larger: re-opened at the first, the loop would seal the ready records
//!   itself, on one core, where the GPU, or the driver thread beside the loop, would take them
//!   (on the H200, 100 connections of 16 KiB records sealed 1.26× faster through flushes).
//!
//! So at most [`CREDIT_FLUSHES`] host-sized flushes of work are sealed at once before a real
//! flush shows the load. The flushes that then probe it (one or two round trips, each about the
//! fixed cost the crossover's first term stands for) come once per credit: with 16 KiB records,
//! a twentieth to a tenth of the work sealed at once between them. A lone connection or a few
//! seal nearly every record at once, in steady state as at the start; under a load the GPU
//! takes, the cost is that much host work once, after which every record coalesces as before.
//! The credit is two atomic words, written by records sealed at once and by flushes, never by
//! records that join a flush.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The sum that marks a closed credit (no record fits under it).
const CLOSED: u64 = u64::MAX;

/// How many host-sized flushes of work the credit holds (see the module docs).
pub(crate) const CREDIT_FLUSHES: u64 = 2;

/// The bytes of work sealed at once since the credit was last opened, and the light host
/// flushes in a row (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct HostCredit {
    spent: AtomicU64,
    host_flushes: AtomicU32,
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

    /// A flush of `items` ran on the host (`on_host`; `light`: at most half of its crossover)
    /// or went to the GPU.
    pub fn flushed(&self, on_host: bool, items: usize, light: bool) {
        if !on_host {
            self.host_flushes.store(0, Ordering::Relaxed);
            // Most flushes find the credit as they leave it: no write, no cache line taken.
            if self.spent.load(Ordering::Relaxed) != CLOSED {
                self.spent.store(CLOSED, Ordering::Relaxed);
            }
            return;
        }
        if !light && items > 1 {
            self.host_flushes.store(0, Ordering::Relaxed);
            return;
        }
        let in_a_row = self.host_flushes.fetch_add(1, Ordering::Relaxed) + 1;
        if items <= 1 || in_a_row >= 2 {
            self.host_flushes.store(0, Ordering::Relaxed);
            self.spent.store(0, Ordering::Relaxed);
        }
    }

    /// Whether no record fits (a flush went to the GPU since the credit was last opened).
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
    fn a_gpu_flush_closes_the_credit_and_light_host_flushes_open_it() {
        let c = HostCredit::default();
        c.flushed(false, 5, false);
        assert!(c.is_closed() && !c.take(1, u64::MAX - 1), "closed: nothing fits");
        c.flushed(true, 3, true);
        assert!(c.is_closed(), "one light flush of a few items on the host leaves it closed");
        c.flushed(false, 50, false);
        c.flushed(true, 3, true);
        assert!(c.is_closed(), "a GPU flush between two light host flushes: still closed");
        c.flushed(true, 20, false);
        c.flushed(true, 3, true);
        assert!(c.is_closed(), "nor a heavier host flush between them");
        c.flushed(true, 4, true);
        assert!(!c.is_closed() && c.take(100, 100), "two light host flushes in a row open it");
        assert!(!c.take(1, 100), "spent");
        c.flushed(true, 2, true);
        assert!(!c.take(1, 100), "then one light flush of a few leaves the sum");
        c.flushed(true, 1, false);
        assert!(c.take(100, 100), "a lone item on the host opens it at once");
        c.flushed(false, 9, false);
        c.flushed(true, 1, true);
        assert!(c.take(100, 100), "also right after a GPU flush");
    }

    proptest! {
        /// Whatever the order of records and flushes, a record is taken exactly when the credit
        /// is open (no GPU flush since it was opened) and the work taken since it was opened
        /// stays within the record's limit; it opens at a host flush of one item or at the
        /// second light host flush in a row.
        #[test]
        fn the_credit_follows_its_protocol(
            events in prop::collection::vec((0u8..6, 1u64..5000, 1u64..20_000), 0..200)
        ) {
            let c = HostCredit::default();
            let (mut since, mut open, mut in_a_row) = (0u64, true, 0u32);
            for (kind, work, limit) in events {
                match kind {
                    0..=2 => {
                        let items = if kind == 0 { 1 } else { 2 + work as usize % 100 };
                        let light = kind != 2 && work % 2 == 0;
                        c.flushed(true, items, light);
                        if items > 1 && !light {
                            in_a_row = 0;
                            continue;
                        }
                        in_a_row += 1;
                        if items == 1 || in_a_row >= 2 {
                            since = 0;
                            open = true;
                            in_a_row = 0;
                        }
                    }
                    3 => {
                        c.flushed(false, 1 + work as usize % 3, false);
                        open = false;
                        in_a_row = 0;
                    }
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
