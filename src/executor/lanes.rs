//! Recording lanes: coalesced items ([`crate::record::batch`]) that a [`crate::Queue`]'s
//! contexts add without taking the queue's lock.
//!
//! # Why
//! With many threads sealing records through one queue, every item took the queue's lock once
//! (to add the item and register its wait). The hold itself is short, but each one moves the
//! lock's state (the recording, the waiter table, the epoch's reference count) from the last
//! holder's core: about a microsecond per item on the H200's host, one item at a time, while
//! the threads that found the lock taken slept. Traced there
//! (`benchmarks/2026-12-04-h200-d3b62d8/more/`), 16 tokio workers sealed about one record per
//! 1.2–1.5 µs in all, whether one worker or ten were running; with the lanes, the host time per
//! record fell from 17.6–21.5 µs to 11.0–12.7 (`benchmarks/2026-12-04-h200-51a1192/`).
//!
//! # The protocol
//! A queue has one lane per host core (at most [`MAX_LANES`]); a thread records into the lane
//! its index picks (given at its first use, round robin), so that a lane's state stays in its
//! thread's cache and two threads rarely meet on one lane.
//!
//! 1. **Adding.** Under the lane's own lock, a context adds its item (gathered per kind, as in
//!    a recording) and its task's waker, and reads the epoch the lane records into. That epoch
//!    is the queue's recording epoch: a lane's epoch changes only under the queue's lock, in
//!    the same hold as the queue's (see 3).
//! 2. **Taking in.** Under the queue's lock, whoever needs an exact view of what is recorded
//!    (the driver deciding, a flush, [`crate::Ctx::flush`], closing) moves every lane's items
//!    into the recording and their wakers beside the recording's waiters ([`Lanes::drain`]).
//! 3. **Flushing.** A flush drains every lane and, in the same hold of each lane's lock, points
//!    it at the next epoch; then the queue's recording epoch becomes that epoch. An item added
//!    before its lane was drained goes with this flush; one added after, with the next.
//! 4. **Nothing is left behind.** A context uses a lane only while the GPU has no room for
//!    another submission (a flush runs, or the pipeline is full): the driver flushes what
//!    gathered when room comes back. After adding, the context reads (sequentially
//!    consistent, after a fence) whether room came back, whether the driver sleeps, and whether
//!    the queue closed or lost its device; the driver sets each of these before it takes the
//!    lanes in (and, before it sleeps, looks at the lanes once more). One side always sees the
//!    other, so either the driver takes the item in or the context does (under the queue's
//!    lock, as any other recording).
//! 5. **Waking.** A lane's wakers follow their flush: to its timeline value when it is
//!    submitted (woken with the waiters of that value), or woken at once when it ran on the
//!    host, failed, or the queue closed. A woken future reads its epoch's value and the
//!    completed value without the lock (see [`super::seen`]); anything else (a failure, an early
//!    wake) sends it to the waiter table under the lock, as a future that never used a lane.
//!    A wait that was dropped leaves its waker to be woken once, for nothing. A flush sent in
//!    parts ([`crate::DeviceBuilder::split_flushes`]) whose lane items are all of one kind wakes
//!    each part's tasks at that part's value: a lane's wakers come in the order of its items,
//!    lanes are taken in one after another, and the merged items stay in that order after the
//!    recording's own ([`crate::record::batch::Batches::split`] counts them per part). A task
//!    woken so finds its item done through the item (its part's value), not its epoch's.
//!
//! 6. **Groups.** When a lane holds its share of [`GROUP_ITEMS`], the context that filled it
//!    takes the lanes in under the queue's lock and flushes at once, even behind a full
//!    pipeline (or, while a flush runs, asks it to flush again when done), as a group of
//!    commands is. Left to the GPU's pace alone, everything that gathered while the GPU was busy
//!    went out in one flush, and the GPU waited for its encoding: on the H200 at 16 KiB records
//!    that was 4–6 flushes of thousands of items per 10,000 records, and fewer records per
//!    second than with the lock.
//!
//! Items are self-contained ([`crate::record::batch`]), so the order between lanes does not
//! matter; a flush encodes each kind's items from all lanes together. The simulated-queue
//! property tests (`executor::sim`) add items through the lanes, a `loom` model below checks
//! step 4 against the driver going to sleep, and `tests/lanes.rs` runs the lanes on the device.

use crate::record::batch::{BatchKind, Batches};
use crate::util::lock;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;

/// The most lanes a queue has.
pub(crate) const MAX_LANES: usize = 64;

/// Items a lane holds before a context records through the queue's lock instead (where the
/// queue's bound on recorded work applies).
const LANE_BOUND: usize = 4096;

/// About how many items all lanes gather before a flush is due even while the GPU has no room
/// (each lane's share, [`Lanes::group`], counts): a flush of everything that gathered while
/// the GPU was busy would keep the GPU idle while the host encodes it.
const GROUP_ITEMS: usize = 2048;

/// One lane, on a cache line of its own.
#[repr(align(128))]
struct Padded<E>(Mutex<Lane<E>>);

struct Lane<E> {
    /// The epoch this lane records into (the queue's recording epoch).
    epoch: Arc<E>,
    batches: Batches,
    items: usize,
    wakers: Vec<Waker>,
    /// Items ever added (for the queue's statistics).
    added: u64,
}

/// A queue's lanes, generic over the queue's epoch cell.
pub(crate) struct Lanes<E> {
    lanes: Box<[Padded<E>]>,
    /// Items per lane that make a flush due (see [`GROUP_ITEMS`]).
    group: usize,
}

thread_local! {
    /// The calling thread's lane index (before the modulo), given at its first use.
    static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The next thread's lane index.
static NEXT: AtomicUsize = AtomicUsize::new(0);

fn thread_index() -> usize {
    INDEX.with(|i| {
        if i.get() == usize::MAX {
            i.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        i.get()
    })
}

impl<E> Lanes<E> {
    /// One lane per host core (at most [`MAX_LANES`]), each recording into `epoch`.
    pub fn new(epoch: &Arc<E>) -> Self {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, MAX_LANES);
        let lanes = (0..n)
            .map(|_| {
                Padded(Mutex::new(Lane {
                    epoch: epoch.clone(),
                    batches: Batches::default(),
                    items: 0,
                    wakers: Vec::new(),
                    added: 0,
                }))
            })
            .collect();
        Lanes { group: (GROUP_ITEMS / n).max(64), lanes }
    }

    /// Adds `item` of `kind` and `waker` to the calling thread's lane and returns the epoch it
    /// joined, with whether the lane now holds its share of a group (a flush is due), or gives
    /// the item back if the lane is full.
    pub fn push<K: BatchKind>(&self, kind: &Arc<K>, item: K::Item, waker: &Waker) -> Result<(Arc<E>, bool), K::Item> {
        let lane = &self.lanes[thread_index() % self.lanes.len()].0;
        let mut l = lock(lane);
        if l.items >= LANE_BOUND {
            return Err(item);
        }
        l.batches.push(kind, item);
        l.items += 1;
        l.added += 1;
        l.wakers.push(waker.clone());
        Ok((l.epoch.clone(), l.items % self.group == 0))
    }

    /// Under the queue's lock: moves every lane's items into `batches` and their wakers into
    /// `wakers`; with `next`, each lane records into `next` from then on. Returns how many
    /// items moved.
    pub fn drain(&self, batches: &mut Batches, wakers: &mut Vec<Waker>, next: Option<&Arc<E>>) -> usize {
        let mut n = 0;
        for lane in self.lanes.iter() {
            let mut l = lock(&lane.0);
            if l.items > 0 {
                n += std::mem::take(&mut l.items);
                batches.merge(std::mem::take(&mut l.batches));
                wakers.append(&mut l.wakers);
            }
            if let Some(next) = next {
                l.epoch = next.clone();
            }
        }
        n
    }

    /// Items ever added through the lanes.
    pub fn added(&self) -> u64 {
        self.lanes.iter().map(|l| lock(&l.0).added).sum()
    }

    /// Whether any lane holds an item.
    pub fn any(&self) -> bool {
        self.lanes.iter().any(|l| lock(&l.0).items > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::batch::tests::Kind;

    #[test]
    fn items_go_with_the_epoch_their_lane_recorded_into() {
        let (first, second) = (Arc::new(1u32), Arc::new(2u32));
        let lanes = Lanes::new(&first);
        let kind = Arc::new(Kind);
        let waker = futures::task::noop_waker();
        assert!(!lanes.any());
        let (joined, due) = lanes.push(&kind, 7, &waker).unwrap_or_else(|_| panic!("room"));
        assert!(Arc::ptr_eq(&joined, &first));
        assert!(!due, "one item is no group");
        assert!(lanes.any());
        let (mut batches, mut wakers) = (Batches::default(), Vec::new());
        assert_eq!(lanes.drain(&mut batches, &mut wakers, Some(&second)), 1);
        assert_eq!(wakers.len(), 1);
        assert!(!lanes.any());
        let (joined, _) = lanes.push(&kind, 8, &waker).unwrap_or_else(|_| panic!("room"));
        assert!(Arc::ptr_eq(&joined, &second), "after the drain the lane records into the next epoch");
        assert_eq!(lanes.drain(&mut batches, &mut wakers, None), 1);
        assert_eq!(batches.kinds(), 1, "one kind, its items merged");
        assert_eq!(batches.take_items::<Kind>(), vec![7, 8]);
    }

    #[test]
    fn a_full_lane_gives_the_item_back() {
        let lanes = Lanes::new(&Arc::new(0u8));
        let kind = Arc::new(Kind);
        let waker = futures::task::noop_waker();
        let mut due = 0;
        for i in 0..LANE_BOUND as u32 {
            due += lanes.push(&kind, i, &waker).unwrap_or_else(|_| panic!("room")).1 as usize;
        }
        assert_eq!(due, LANE_BOUND / lanes.group, "a flush is due at every group's worth");
        assert_eq!(lanes.push(&kind, 9, &waker).err(), Some(9));
    }
}

#[cfg(all(test, feature = "loom-model"))]
mod loom_model {
    //! Step 4 of the protocol (nothing is left behind), with loom's mutexes, atomics and fence
    //! in place of the queue's: a context adds an item to its lane, then reads the flags; the
    //! driver, about to sleep with no flush running, sets its flag, then looks at the lanes. In
    //! every interleaving either the driver takes the item in or the context sees the flag
    //! (and takes it in itself, under the queue's lock, which also wakes the driver).
    use loom::sync::atomic::{fence, AtomicBool, Ordering};
    use loom::sync::{Arc, Mutex};

    #[derive(Default)]
    struct Queue {
        /// The queue's lock: items taken in, whether the driver sleeps (un-notified).
        state: Mutex<(u32, bool)>,
        /// One lane: its items.
        lane: Mutex<u32>,
        driver_idle: AtomicBool,
    }

    fn take_in(q: &Queue, st: &mut (u32, bool)) {
        let mut l = q.lane.lock().unwrap();
        st.0 += std::mem::take(&mut *l);
    }

    #[test]
    fn an_item_added_as_the_driver_goes_to_sleep_is_never_left_in_its_lane() {
        loom::model(|| {
            let q = Arc::new(Queue::default());
            let context = {
                let q = q.clone();
                loom::thread::spawn(move || {
                    *q.lane.lock().unwrap() += 1;
                    fence(Ordering::SeqCst);
                    if q.driver_idle.load(Ordering::SeqCst) {
                        let mut st = q.state.lock().unwrap();
                        take_in(&q, &mut st);
                        // `notify_driver`: the flag is cleared with the notification.
                        if st.1 {
                            st.1 = false;
                            q.driver_idle.store(false, Ordering::SeqCst);
                        }
                    }
                })
            };
            {
                // The driver decided to sleep (after taking the lanes in) in this hold.
                let mut st = q.state.lock().unwrap();
                take_in(&q, &mut st);
                q.driver_idle.store(true, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                if *q.lane.lock().unwrap() > 0 {
                    take_in(&q, &mut st);
                    q.driver_idle.store(false, Ordering::SeqCst);
                } else {
                    st.1 = true;
                }
            }
            context.join().unwrap();
            let st = q.state.lock().unwrap();
            let left = *q.lane.lock().unwrap();
            // The item was taken in, or the driver was woken to do it.
            assert!(left == 0 || !st.1, "an item was left in its lane while the driver slept");
            assert!(st.0 + left == 1);
        });
    }
}
