//! The waiter table: one slot per suspended `synchronize()` future.
//!
//! A slot is created when a future first has to wait and freed only by that future (when it
//! takes its outcome, or when it is dropped), so a waker never outlives its future. Keys carry a
//! generation, so a stale key (its slot freed and reused) never fires the new occupant.

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

/// Generational slab of waiters.
#[derive(Default)]
pub(crate) struct Waiters {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

impl Waiters {
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

    /// Sets the outcome of a live waiter (first outcome wins) and returns its waker to be woken
    /// once no lock or borrow is held.
    #[must_use]
    pub fn fire(&mut self, key: Key, outcome: Result<(), Error>) -> Option<Waker> {
        let s = self.slot(key)?;
        if s.outcome.is_none() {
            s.outcome = Some(outcome);
        }
        s.waker.take()
    }

    /// The outcome, if fired. Does not free the slot.
    pub fn outcome(&mut self, key: Key) -> Option<Result<(), Error>> {
        self.slot(key).and_then(|s| s.outcome.clone())
    }

    /// Replaces the waker of a live, unfired waiter.
    pub fn update_waker(&mut self, key: Key, waker: &Waker) {
        if let Some(s) = self.slot(key) {
            if s.outcome.is_none() && !s.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                s.waker = Some(waker.clone());
            }
        }
    }

    /// Frees a slot (by its future). Stale keys are ignored.
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
