//! The waiter table: one slot per suspended `synchronize()` future.
//!
//! A slot is created when a future first has to wait. A success frees it when it fires (the
//! future learns of the success without the lock, from its epoch's value and the queue's
//! completed value, or finds its slot gone); a failure stays in the slot until the future takes
//! it; a future that is dropped frees its slot. Keys carry a generation, so a stale key (its
//! slot freed and reused) never fires, reads or frees the new occupant.

use crate::error::Error;
use std::task::Waker;

/// A slot's key: index and generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    index: u32,
    gen: u32,
}

struct Slot {
    gen: u32,
    occupied: bool,
    waker: Option<Waker>,
    outcome: Option<Result<(), Error>>,
}

/// Where a waiter stands ([`Waiters::state`]).
#[derive(Debug)]
pub(crate) enum SlotState {
    /// Not fired yet.
    Waiting,
    /// Fired with a failure (kept until the future frees the slot).
    Fired(Result<(), Error>),
    /// Freed: only a success frees a slot that its future did not free itself.
    Freed,
}

/// Generational slab of waiters.
#[derive(Default)]
pub(crate) struct Waiters {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
    /// Told of every failure fired: from then on a slot may hold a failure that a later
    /// success does not free, so a woken future must look at its slot under the lock (see
    /// [`super::seen`]).
    seen: std::sync::Arc<super::seen::Seen>,
}

impl Waiters {
    /// What a woken future reads without the lock (shared with the queue's core).
    pub fn seen(&self) -> std::sync::Arc<super::seen::Seen> {
        self.seen.clone()
    }

    /// Registers a waiter with its waker.
    pub fn insert(&mut self, waker: Waker) -> Key {
        self.live += 1;
        if let Some(index) = self.free.pop() {
            let s = &mut self.slots[index as usize];
            s.occupied = true;
            s.waker = Some(waker);
            s.outcome = None;
            return Key { index, gen: s.gen };
        }
        self.slots.push(Slot { gen: 0, occupied: true, waker: Some(waker), outcome: None });
        Key { index: (self.slots.len() - 1) as u32, gen: 0 }
    }

    fn slot(&mut self, key: Key) -> Option<&mut Slot> {
        self.slots.get_mut(key.index as usize).filter(|s| s.occupied && s.gen == key.gen)
    }

    /// Fires a live waiter and returns its waker, to be woken once no lock or borrow is held.
    /// A success frees the slot at once (its future then finds it gone: [`SlotState::Freed`]);
    /// a failure is kept for the future to take (first outcome wins).
    #[must_use]
    pub fn fire(&mut self, key: Key, outcome: Result<(), Error>) -> Option<Waker> {
        let fired = self.slot(key)?.outcome.is_some();
        if outcome.is_err() {
            self.seen.failure();
        }
        if !fired && outcome.is_ok() {
            return self.remove(key);
        }
        let s = self.slot(key)?;
        if !fired {
            s.outcome = Some(outcome);
        }
        s.waker.take()
    }

    /// Where a future's waiter stands.
    pub fn state(&mut self, key: Key) -> SlotState {
        match self.slot(key) {
            None => SlotState::Freed,
            Some(s) => match &s.outcome {
                None => SlotState::Waiting,
                Some(o) => SlotState::Fired(o.clone()),
            },
        }
    }

    /// Replaces the waker of a live, unfired waiter.
    pub fn update_waker(&mut self, key: Key, waker: &Waker) {
        if let Some(s) = self.slot(key) {
            if s.outcome.is_none() && !s.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                s.waker = Some(waker.clone());
            }
        }
    }

    /// Frees a slot (by its future, or by a success). Stale keys are ignored.
    pub fn remove(&mut self, key: Key) -> Option<Waker> {
        let s = self.slot(key)?;
        s.occupied = false;
        s.gen = s.gen.wrapping_add(1);
        s.outcome = None;
        let w = s.waker.take();
        self.free.push(key.index);
        self.live -= 1;
        w
    }

    /// Number of live slots.
    #[allow(dead_code)] // used by tests
    pub fn len(&self) -> usize {
        self.live
    }

    /// Takes every waker (at shutdown, to break task ↔ executor reference cycles).
    pub fn take_all_wakers(&mut self) -> Vec<Waker> {
        self.slots.iter_mut().filter_map(|s| s.waker.take()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_frees_the_slot_a_failure_stays_until_taken() {
        let mut w = Waiters::default();
        let seen = w.seen();
        let ok = w.insert(Waker::noop().clone());
        let err = w.insert(Waker::noop().clone());
        assert_eq!(w.len(), 2);
        assert!(matches!(w.state(ok), SlotState::Waiting));
        assert!(w.fire(ok, Ok(())).is_some(), "the waker comes back to be woken");
        assert!(matches!(w.state(ok), SlotState::Freed));
        assert_eq!(w.len(), 1);
        assert!(seen.succeeded(0), "no failure fired yet"); // nothing completed: value 0 only
                                                            // A stale key neither fires nor frees the slot's next occupant.
        let next = w.insert(Waker::noop().clone());
        assert!(w.fire(ok, Err(Error::DeviceLost)).is_none());
        assert!(w.remove(ok).is_none());
        assert!(matches!(w.state(next), SlotState::Waiting));

        assert!(w.fire(err, Err(Error::DeviceLost)).is_some());
        assert!(!seen.succeeded(0), "after a failure, woken futures look under the lock");
        // First outcome wins: a later success does not free the failure.
        assert!(w.fire(err, Ok(())).is_none());
        assert!(matches!(w.state(err), SlotState::Fired(Err(Error::DeviceLost))));
        assert!(w.remove(err).is_none());
        assert!(matches!(w.state(err), SlotState::Freed));
        assert!(w.remove(next).is_some());
        assert_eq!(w.len(), 0);
    }
}
