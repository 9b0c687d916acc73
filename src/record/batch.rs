//! Coalesced launches: operations that many tasks record in one flush, encoded together.
//!
//! # The protocol
//!
//! A *batch kind* ([`BatchKind`]) is a value (usually holding its kernels) that knows how to
//! encode many small items of one kind of work as a few commands. A task hands an item to the
//! recording epoch with [`crate::Ctx::batch`] (or to a blocking [`crate::CommandList`] with
//! [`crate::CommandList::batch`]) instead of recording commands itself; then it awaits
//! [`crate::Ctx::synchronize`] like after any recording.
//!
//! 1. Items are gathered per kind, in the order they were added, in the epoch now recording.
//!    Two kinds are the same kind when they are the same `Arc` (so two `Crypto` values, each
//!    with its own pipelines, gather separately).
//! 2. When the epoch is flushed, before its commands are written into the command buffer, each
//!    kind's [`BatchKind::encode`] is called once with all its items and an [`Encoder`], through
//!    which it records (dispatches, copies) as any task would: the same checks, the same
//!    barrier phases, the same lifetime rules (buffers are kept alive by the submission and
//!    released by timeline value). It runs on the flushing thread, without the queue's lock
//!    (other tasks go on recording into the next epoch meanwhile), but one flush runs at a time
//!    per queue: a long `encode` delays the queue's next submission, so it must not block.
//! 3. If `encode` fails, [`BatchKind::fail`] gives every item the error, and what `encode`
//!    recorded before the error still runs (it only touched its own buffers). The other
//!    kinds and the tasks' own commands are not affected.
//! 4. The work of the items completes with the flush's timeline value, so one host wait covers
//!    it together with everything else in the flush. Right after the submission, before any
//!    wait can see it complete, [`BatchKind::submitted`] tells the kind that value (or that the
//!    flush held no command); the items stay alive until the flush has completed.
//!
//! An item must be self-contained: it may not depend on commands the task recorded before it
//! in the same epoch (the batch is encoded before them, in its own phases), and the task must
//! not touch what the item writes before its `synchronize` resolves. The usual shape is that
//! the task writes the item's input into staging memory it reserved (the crypto batch uses reused mapped chunks),
//! and reads the output from there after the wait; the kind's `encode` points one dispatch at
//! all items' regions through a per-flush table.
//!
//! # Example: a user's own kernel joins
//!
//! ```no_run
//! use std::sync::Arc;
//! use vkasync::batch::{BatchKind, Encoder};
//! use vkasync::{kernels, Arg, Buffer, Error, Executor, Kernel, MemoryKind, Result};
//!
//! /// Runs `mix` (K = 1) over many tasks' buffers: here one dispatch per buffer, all encoded
//! /// together at the flush; a real kind would put the items in a table and dispatch once.
//! struct Mix(Kernel);
//!
//! impl BatchKind for Mix {
//!     type Item = Arc<Buffer<u32>>;
//!     fn encode(&self, items: &mut Vec<Arc<Buffer<u32>>>, enc: &mut Encoder<'_>) -> Result<()> {
//!         for buf in items.iter() {
//!             let n = buf.len() as u32;
//!             let push: Vec<u8> = [n, 1u32].iter().flat_map(|w| w.to_le_bytes()).collect();
//!             enc.dispatch(&self.0, [n.div_ceil(64), 1, 1], &[Arg::storage(&**buf)], &push)?;
//!         }
//!         Ok(())
//!     }
//!     fn fail(&self, _items: Vec<Arc<Buffer<u32>>>, _error: &Error) {}
//! }
//!
//! let device = vkasync::Device::new()?;
//! let mix = Arc::new(Mix(Kernel::new(&device, &kernels::MIX)?));
//! let exec = Executor::new(&device)?;
//! let ctx = exec.context();
//! let buf = Arc::new(Buffer::<u32>::from_slice(&device, &[1, 2, 3])?);
//! exec.block_on(async move {
//!     ctx.batch(&mix, buf)?;
//!     ctx.synchronize().await
//! })?;
//! # Ok::<(), vkasync::Error>(())
//! ```

use crate::error::{Error, Result};
use crate::record::recording::Recording;
use crate::vk::buffer::RawBuffer;
use crate::vk::kernel::{Arg, Kernel};
use std::any::Any;
use std::sync::Arc;

/// A kind of work that many tasks record as small items and one flush encodes together. See
/// the [module docs](self).
pub trait BatchKind: Send + Sync + 'static {
    /// One task's share of the work.
    type Item: Send + 'static;

    /// Records the work of `items` (every item of this kind in one flush, in the order they
    /// were added). Called on the flushing thread, without the queue's lock, one flush at a time:
    /// keep it short and never block. On error, [`BatchKind::fail`]
    /// gets the items that are left in `items`.
    fn encode(&self, items: &mut Vec<Self::Item>, enc: &mut Encoder<'_>) -> Result<()>;

    /// The device whose kernels and buffers the kind's work uses, if it has one: a recording of
    /// another device refuses its items with [`Error::InvalidArgument`] instead of binding them
    /// there. Default `None` (not checked).
    fn device(&self) -> Option<&crate::Device> {
        None
    }

    /// `encode` failed with `error`: tell each item (they will not run).
    fn fail(&self, items: Vec<Self::Item>, error: &Error);

    /// The flush that carried `items` (encoded without error) was submitted with the timeline
    /// value `value`, or turned out to hold no command at all (`value` is `u64::MAX`). Called on
    /// the submitting thread right after the submission, before any wait can see the flush
    /// complete, so that each item may learn its value there rather than in `encode`, ahead of
    /// the submission. The items are dropped once the flush completed. Default: nothing.
    fn submitted(&self, items: &[Self::Item], value: u64) {
        let _ = (items, value);
    }

    /// The bytes `items` carry between host and GPU memory. A flush on copy queues whose items
    /// carry many more bytes than its device's split size ([`crate::DeviceBuilder::split_flushes`])
    /// goes to the GPU as several submissions, each with a run of consecutive items of every
    /// kind, so that the copy queues move one run while the compute queue runs another. Default
    /// 0: the kind's items never make a flush split.
    fn bytes(&self, items: &[Self::Item]) -> u64 {
        let _ = items;
        0
    }
}

/// Records a batch's commands into the flush being encoded. It offers the recording vocabulary
/// of a task ([`Recorder`](crate::Recorder)).
pub struct Encoder<'a> {
    pub(super) rec: &'a mut Recording,
}

impl std::fmt::Debug for Encoder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder").finish_non_exhaustive()
    }
}

impl Encoder<'_> {
    #[cfg_attr(not(feature = "crypto"), allow(dead_code))] // used by the crypto module
    /// Copies byte ranges `(src_offset, dst_offset, len)` between two buffers as one command.
    pub(crate) fn copy_ranges(
        &mut self,
        src: &Arc<RawBuffer>,
        dst: &Arc<RawBuffer>,
        ranges: &[(u64, u64, u64)],
    ) -> Result<()> {
        self.rec.copy_ranges(src, dst, ranges)
    }

    #[cfg_attr(not(feature = "crypto"), allow(dead_code))] // used by the crypto module
    /// The host reads results of this flush in place (mapped memory): the flush ends with a
    /// barrier to host reads.
    pub(crate) fn host_will_read(&mut self) {
        self.rec.host_read = true;
    }

    /// Records a dispatch (checked like [`Recorder::dispatch`](crate::Recorder::dispatch)).
    pub fn dispatch(&mut self, kernel: &Kernel, groups: [u32; 3], args: &[Arg], push: &[u8]) -> Result<()> {
        self.rec.dispatch(kernel, groups, args, push)
    }
}

/// The items of one kind gathered in one epoch, with the kind's type erased.
pub(crate) trait Gathered: Send {
    /// The kind's identity (its `Arc`'s address).
    fn key(&self) -> usize;
    fn as_any(&mut self) -> &mut dyn Any;
    /// Encodes the items into `rec` (see the protocol); they stay here until the recording is
    /// dropped.
    fn encode(&mut self, rec: &mut Recording);
    /// The recording was submitted with `value` (see [`BatchKind::submitted`]).
    fn submitted(&mut self, value: u64);
    /// Adds the items after those of the same kind in `into` (or adds them as a new kind),
    /// moving their vectors, not the items. Merged vectors stay apart from the vector that
    /// `into` pushes to, so that the items merged in (a lane's) are the merged ones, in order.
    fn merge_into(self: Box<Self>, into: &mut Vec<Box<dyn Gathered>>);
    /// How many items were merged in (from lanes), as opposed to pushed here.
    fn merged_len(&self) -> usize;
    /// How many items were pushed here.
    fn own_len(&self) -> usize;
    /// The bytes the items carry (see [`BatchKind::bytes`]).
    fn bytes(&mut self) -> u64;
    /// Keeps the first of `parts` runs of consecutive items (as even as their number allows; as
    /// many runs as items where they are fewer) and returns the others in order, each with its
    /// number of items (never 0).
    fn split(&mut self, parts: usize) -> Vec<(Box<dyn Gathered>, usize)>;
}

struct Items<K: BatchKind> {
    kind: Arc<K>,
    items: Vec<K::Item>,
    /// Items merged in from elsewhere (a lane's), after `items`, each vector as it came: a merge
    /// (under the queue's lock) moves vectors, not items, and they are joined to `items` when
    /// encoded (in the flush, outside the lock). Joining thousands of 16 KiB records' items
    /// under the lock held it 0.2–1.9 ms on an H100, while the other threads' due groups
    /// waited for it.
    merged: Vec<Vec<K::Item>>,
}

impl<K: BatchKind> Items<K> {
    /// Moves the merged items after `items`, in the order they came.
    fn join(&mut self) {
        if self.merged.is_empty() {
            return;
        }
        self.items.reserve(self.merged.iter().map(Vec::len).sum());
        for mut v in self.merged.drain(..) {
            self.items.append(&mut v);
        }
    }

    /// The item vectors in order: `items`, then the merged ones, as they came.
    fn runs(&mut self) -> impl Iterator<Item = Vec<K::Item>> + '_ {
        std::iter::once(std::mem::take(&mut self.items)).chain(self.merged.drain(..))
    }

    /// Items of `kind` from the vectors `runs`, in order, without moving an item.
    fn of_runs(kind: &Arc<K>, mut runs: Vec<Vec<K::Item>>) -> Self {
        let items = if runs.is_empty() { Vec::new() } else { runs.remove(0) };
        Items { kind: kind.clone(), items, merged: runs }
    }
}

/// Cuts `runs` (vectors of `n` items in all, in order) into `parts` runs of consecutive items,
/// as even as their number allows: part `k` holds items `n * k / parts ..n * (k + 1) / parts`.
/// Vectors move whole where they fit in a part; one that spans a cut is split from its back,
/// each `split_off` moving only its own piece, so no item moves more than once. Returns each
/// part's vectors (empty vectors left out).
fn cut_runs<T>(runs: impl Iterator<Item = Vec<T>>, n: usize, parts: usize) -> Vec<Vec<Vec<T>>> {
    let parts = parts.clamp(1, n.max(1));
    let cut = |k: usize| n * k / parts;
    let mut out: Vec<Vec<Vec<T>>> = (0..parts).map(|_| Vec::new()).collect();
    let mut start = 0;
    for mut v in runs {
        let len = v.len();
        if len == 0 {
            continue;
        }
        // The part of the vector's first item, and the cuts inside the vector.
        let first = (0..parts).rfind(|&k| cut(k) <= start).unwrap_or(0);
        let inside: Vec<usize> = (first + 1..parts).take_while(|&k| cut(k) < start + len).collect();
        let mut pieces = Vec::with_capacity(inside.len());
        for &k in inside.iter().rev() {
            pieces.push((k, v.split_off(cut(k) - start)));
        }
        out[first].push(v);
        for (k, piece) in pieces.into_iter().rev() {
            out[k].push(piece);
        }
        start += len;
    }
    out
}

impl<K: BatchKind> Gathered for Items<K> {
    fn key(&self) -> usize {
        Arc::as_ptr(&self.kind) as *const () as usize
    }
    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
    fn encode(&mut self, rec: &mut Recording) {
        self.join();
        let mut enc = Encoder { rec };
        if let Err(e) = self.kind.encode(&mut self.items, &mut enc) {
            log::warn!("vkasync: a batch of {} item(s) failed to encode: {e}", self.items.len());
            self.kind.fail(std::mem::take(&mut self.items), &e);
        }
    }
    fn submitted(&mut self, value: u64) {
        self.join();
        self.kind.submitted(&self.items, value);
    }
    fn merge_into(mut self: Box<Self>, into: &mut Vec<Box<dyn Gathered>>) {
        let key = self.key();
        if let Some(g) = into.iter_mut().find(|g| g.key() == key) {
            if let Some(items) = g.as_any().downcast_mut::<Items<K>>() {
                if !self.items.is_empty() {
                    items.merged.push(std::mem::take(&mut self.items));
                }
                items.merged.append(&mut self.merged);
                return;
            }
        }
        // A new kind: its vectors all count as merged, and later pushes get a vector of their
        // own.
        let items = std::mem::take(&mut self.items);
        if !items.is_empty() {
            self.merged.insert(0, items);
        }
        into.push(self);
    }
    fn merged_len(&self) -> usize {
        self.merged.iter().map(Vec::len).sum()
    }
    fn own_len(&self) -> usize {
        self.items.len()
    }
    fn bytes(&mut self) -> u64 {
        // Vector by vector: counting joins nothing.
        self.kind.bytes(&self.items) + self.merged.iter().map(|v| self.kind.bytes(v)).sum::<u64>()
    }
    fn split(&mut self, parts: usize) -> Vec<(Box<dyn Gathered>, usize)> {
        // The vectors are handed out as they are, cut only where a part ends inside one, and
        // each part joins its own when it is encoded: the first part of a heavy flush goes to
        // the GPU without the flush's other items being moved first. (Joined and then cut, the
        // items of 2,600–7,000 16 KiB records took 0.4–1.1 ms on an H100 host before the first
        // part was encoded: `benchmarks/2026-12-06-h100-504233d-pipeline/`.)
        let n = self.items.len() + self.merged.iter().map(Vec::len).sum::<usize>();
        let mut cut = cut_runs(self.runs(), n, parts).into_iter();
        let kind = self.kind.clone();
        *self = Items::of_runs(&kind, cut.next().unwrap_or_default());
        cut.map(|runs| {
            let len = runs.iter().map(Vec::len).sum();
            (Box::new(Items::of_runs(&kind, runs)) as Box<dyn Gathered>, len)
        })
        .filter(|(_, len)| *len > 0)
        .collect()
    }
}

/// A recording's gathered items. Only reachable through `&mut` (never shared), so it is `Sync`
/// whatever the items are, as `std::sync::Exclusive` would make it.
#[derive(Default)]
pub(crate) struct Batches {
    kinds: Vec<Box<dyn Gathered>>,
    /// Room a kind's items get when its first item arrives: a flush's recording is made with
    /// as many as the flush before it carried ([`Batches::with_room`]), so that its items do not
    /// grow their vector from one item, moving every item once per doubling.
    room: usize,
}

/// The most items a kind reserves room for ahead (about 2 MB of crypto items).
const MAX_ROOM: usize = 1 << 13;

// SAFETY: no method gives shared (`&self`) access to the contents; every access takes
// `&mut self` or `self`, so sharing a `&Batches` between threads exposes nothing.
unsafe impl Sync for Batches {}

impl Batches {
    /// Empty, a kind's first item making room for `room` items (at most [`MAX_ROOM`]).
    pub fn with_room(room: usize) -> Self {
        Batches { kinds: Vec::new(), room: room.min(MAX_ROOM) }
    }
    pub fn take(&mut self) -> Vec<Box<dyn Gathered>> {
        std::mem::take(&mut self.kinds)
    }
    pub fn push<K: BatchKind>(&mut self, kind: &Arc<K>, item: K::Item) {
        push(&mut self.kinds, kind, item, self.room)
    }
    /// Adds `other`'s items, each kind's after this one's items of that kind, moving their
    /// vectors (the items are joined when encoded). Items pushed here later go before the
    /// merged ones: items are self-contained, and their order within a kind does not matter.
    pub fn merge(&mut self, other: Batches) {
        for g in other.kinds {
            g.merge_into(&mut self.kinds);
        }
    }
    /// Keeps `encoded`'s items (see [`Gathered::encode`]).
    pub fn keep(&mut self, encoded: Box<dyn Gathered>) {
        self.kinds.push(encoded);
    }
    /// The bytes every kind's items carry (see [`BatchKind::bytes`]).
    pub fn bytes(&mut self) -> u64 {
        self.kinds.iter_mut().map(|g| g.bytes()).sum()
    }
    /// Keeps the first of `parts` runs of each kind's items and returns the others: run `k` of
    /// every kind in the `k`-th (from 1) of the returned batches, with their number of items.
    /// Batches with no item are left out.
    ///
    /// Also returns, where only one kind holds merged items (a lane's items are all of that
    /// kind), how many merged items each part holds: the kept part's first, then the returned
    /// ones' in order. Merged items follow the kind's own in its runs, and the lanes' wakers
    /// come in the order their items were merged, so those counts cut the wakers as the items
    /// were cut (see [`crate::executor::lanes`]).
    pub fn split(&mut self, parts: usize) -> (Vec<(Batches, usize)>, Option<Vec<usize>>) {
        let laned: Vec<usize> = (0..self.kinds.len()).filter(|&i| self.kinds[i].merged_len() > 0).collect();
        // The one kind with merged items: its index, its own items, all its items.
        let lane_kind = match laned[..] {
            [i] => Some((i, self.kinds[i].own_len(), self.kinds[i].own_len() + self.kinds[i].merged_len())),
            _ => None,
        };
        // That kind's items in each part, the kept one first.
        let mut lane_lens = vec![0; parts.max(1)];
        let mut out: Vec<(Batches, usize)> = Vec::new();
        out.resize_with(parts.saturating_sub(1), || (Batches::default(), 0));
        for (i, g) in self.kinds.iter_mut().enumerate() {
            // A kind with fewer items than parts fills the first parts only.
            for (k, ((batches, n), (run, len))) in out.iter_mut().zip(g.split(parts)).enumerate() {
                batches.kinds.push(run);
                *n += len;
                if lane_kind.is_some_and(|(j, ..)| j == i) {
                    lane_lens[k + 1] = len;
                }
            }
        }
        let kept: Vec<bool> = out.iter().map(|(_, n)| *n > 0).collect();
        out.retain(|(_, n)| *n > 0);
        let merged = lane_kind.map(|(_, own, n)| {
            lane_lens[0] = n - lane_lens[1..].iter().sum::<usize>();
            // The kind's own items come first in its runs: the rest of each part is merged.
            let mut start = 0;
            let counts = lane_lens.iter().map(|&len| {
                let c = (start + len).max(own) - start.max(own);
                start += len;
                c
            });
            let mut keep = std::iter::once(true).chain(kept.iter().copied());
            counts.filter(|_| keep.next().unwrap_or(false)).collect()
        });
        (out, merged)
    }
    /// Tells every kind that the recording was submitted with `value`.
    pub fn submitted(&mut self, value: u64) {
        for g in &mut self.kinds {
            g.submitted(value);
        }
    }
    /// How many kinds hold items.
    #[cfg(test)]
    pub fn kinds(&self) -> usize {
        self.kinds.len()
    }
    /// Takes every item of kind `K` out (the simulated queue's items, which it does not
    /// encode).
    #[cfg(test)]
    pub fn take_items<K: BatchKind>(&mut self) -> Vec<K::Item> {
        let mut out = Vec::new();
        for g in &mut self.kinds {
            if let Some(items) = g.as_any().downcast_mut::<Items<K>>() {
                items.join();
                out.append(&mut items.items);
            }
        }
        out
    }
}

/// Adds `item` to the epoch's items of `kind`.
fn push<K: BatchKind>(batches: &mut Vec<Box<dyn Gathered>>, kind: &Arc<K>, item: K::Item, room: usize) {
    let key = Arc::as_ptr(kind) as *const () as usize;
    if let Some(g) = batches.iter_mut().find(|g| g.key() == key) {
        if let Some(items) = g.as_any().downcast_mut::<Items<K>>() {
            items.items.push(item);
            return;
        }
    }
    let mut items = Vec::with_capacity(room.max(1));
    items.push(item);
    batches.push(Box::new(Items { kind: kind.clone(), items, merged: Vec::new() }));
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A kind of `u32` items that encodes nothing (for tests of gathering).
    pub(crate) struct Kind;
    impl BatchKind for Kind {
        type Item = u32;
        fn encode(&self, _items: &mut Vec<u32>, _enc: &mut Encoder<'_>) -> Result<()> {
            Ok(())
        }
        fn fail(&self, _items: Vec<u32>, _error: &crate::Error) {}
    }

    /// Another kind of `u32` items, whose items carry 100 bytes each.
    struct Other;
    impl BatchKind for Other {
        type Item = u32;
        fn encode(&self, _items: &mut Vec<u32>, _enc: &mut Encoder<'_>) -> Result<()> {
            Ok(())
        }
        fn fail(&self, _items: Vec<u32>, _error: &crate::Error) {}
        fn bytes(&self, items: &[u32]) -> u64 {
            items.len() as u64 * 100
        }
    }

    /// The capacity of the items of kind `Kind` in `batches`.
    fn room_of(batches: &mut Batches) -> usize {
        batches
            .kinds
            .iter_mut()
            .find_map(|g| g.as_any().downcast_mut::<Items<Kind>>())
            .map_or(0, |i| i.items.capacity())
    }

    #[test]
    fn a_kinds_first_item_makes_the_room_its_batches_were_given() {
        let kind = Arc::new(Kind);
        let mut batches = Batches::with_room(100);
        batches.push(&kind, 1);
        assert!(room_of(&mut batches) >= 100, "pushed into a vector of room for 100");
        // Items merged in from elsewhere (a lane's) keep their vector: a merge moves it.
        let mut lane = Batches::default();
        lane.push(&kind, 2);
        assert_eq!(room_of(&mut lane), 1, "no room given, none made");
        let mut merged = Batches::with_room(50);
        merged.merge(lane);
        let moved = merged.kinds.iter_mut().find_map(|g| g.as_any().downcast_mut::<Items<Kind>>()).unwrap();
        assert_eq!(moved.items.len(), 0, "kept apart from the vector pushes go to");
        assert_eq!(moved.merged.iter().map(Vec::capacity).collect::<Vec<_>>(), vec![1], "the lane's vector, moved");
        // A bound on the room made ahead.
        let mut big = Batches::with_room(usize::MAX);
        big.push(&kind, 3);
        assert!((MAX_ROOM..2 * MAX_ROOM).contains(&room_of(&mut big)));
        assert_eq!(batches.take_items::<Kind>(), vec![1]);
        assert_eq!(merged.take_items::<Kind>(), vec![2]);
    }

    /// Merged items follow the recording's own items of their kind, lane after lane, each in
    /// its order, however many merges brought them; another kind's stay apart.
    #[test]
    fn merged_items_come_after_the_recordings_own_in_the_order_they_came() {
        let (kind, other) = (Arc::new(Kind), Arc::new(Other));
        let mut rec = Batches::with_room(8);
        rec.push(&kind, 1);
        let lane = |items: &[u32]| {
            let mut b = Batches::default();
            for &i in items {
                b.push(&kind, i);
            }
            b
        };
        rec.merge(lane(&[2, 3]));
        rec.merge(lane(&[]));
        // A lane that itself holds merged items (lanes gathered into one, then merged).
        let mut two = lane(&[4]);
        two.merge(lane(&[5, 6]));
        rec.merge(two);
        rec.push(&kind, 7);
        let mut apart = Batches::default();
        apart.push(&other, 100);
        rec.merge(apart);
        assert_eq!(rec.kinds(), 2);
        // Pushed after the merges, 7 is in the recording's own vector: before the merged items.
        assert_eq!(rec.take_items::<Kind>(), vec![1, 7, 2, 3, 4, 5, 6]);
        assert_eq!(rec.take_items::<Other>(), vec![100]);
    }

    /// A split keeps the first run of each kind and hands out the others in order, runs of
    /// consecutive items (across merged vectors); a kind with fewer items than parts fills
    /// the first parts only, and no part is empty. Where one kind holds merged (lane) items,
    /// the split tells how many each part got.
    #[test]
    fn a_split_keeps_the_first_run_and_hands_out_the_others_in_order() {
        let (kind, other) = (Arc::new(Kind), Arc::new(Other));
        let mut rec = Batches::default();
        for i in 0..4 {
            rec.push(&kind, i);
        }
        let mut lane = Batches::default();
        for i in 4..10 {
            lane.push(&kind, i);
        }
        rec.merge(lane);
        rec.push(&other, 100);
        rec.push(&other, 101);
        assert_eq!(rec.bytes(), 200, "`Kind` carries no bytes (the default), `Other` 100 an item");
        let (mut parts, laned) = rec.split(3);
        assert_eq!(parts.iter().map(|(_, n)| *n).collect::<Vec<_>>(), vec![4, 4]);
        // `Kind`: 4 own items, then 6 merged, cut 3 / 3 / 4.
        assert_eq!(laned, Some(vec![0, 2, 4]));
        assert_eq!(rec.take_items::<Kind>(), vec![0, 1, 2]);
        assert_eq!(rec.take_items::<Other>(), vec![100], "two items: two runs, the first kept");
        assert_eq!(parts[0].0.take_items::<Kind>(), vec![3, 4, 5]);
        assert_eq!(parts[0].0.take_items::<Other>(), vec![101]);
        assert_eq!(parts[1].0.take_items::<Kind>(), vec![6, 7, 8, 9]);
        assert_eq!(parts[1].0.take_items::<Other>(), Vec::<u32>::new());
        // Fewer items than parts: one item a part, none empty.
        let mut few = Batches::default();
        few.push(&kind, 1);
        few.push(&kind, 2);
        let (parts, laned) = few.split(8);
        assert_eq!(parts.len(), 1);
        assert_eq!(laned, None, "no merged items");
        assert_eq!(few.take_items::<Kind>(), vec![1]);
        // Merged items of two kinds: a lane's wakers cannot be told apart by kind.
        let mut two = Batches::default();
        for (k, i) in [(&kind, 1), (&kind, 2)] {
            let mut lane = Batches::default();
            lane.push(k, i);
            two.merge(lane);
        }
        let mut lane = Batches::default();
        lane.push(&other, 3);
        two.merge(lane);
        assert_eq!(two.split(2).1, None);
    }

    proptest::proptest! {
        /// Cut into parts, vectors of items keep their order, each part holds its even share,
        /// and a vector that lies inside one part moves there whole (its buffer unchanged).
        #[test]
        fn cuts_keep_the_order_give_even_parts_and_move_whole_vectors(
            lens in proptest::collection::vec(0usize..40, 0..12),
            parts in 1usize..10,
        ) {
            let mut next = 0u32;
            let runs: Vec<Vec<u32>> = lens
                .iter()
                .map(|&len| (0..len).map(|_| { next += 1; next }).collect())
                .collect();
            let n = next as usize;
            // Where each vector's buffer is, and its first and last item's place.
            let mut bounds = Vec::new();
            let mut at = 0;
            for v in &runs {
                bounds.push((v.as_ptr(), at, at + v.len()));
                at += v.len();
            }
            let cut = cut_runs(runs.into_iter(), n, parts);
            let p = parts.min(n.max(1));
            proptest::prop_assert_eq!(cut.len(), p);
            let flat: Vec<u32> = cut.iter().flatten().flatten().copied().collect();
            proptest::prop_assert_eq!(flat, (1..=n as u32).collect::<Vec<_>>());
            for (k, part) in cut.iter().enumerate() {
                let len: usize = part.iter().map(Vec::len).sum();
                proptest::prop_assert_eq!(len, n * (k + 1) / p - n * k / p);
                proptest::prop_assert!(part.iter().all(|v| !v.is_empty()));
            }
            for (ptr, first, end) in bounds {
                let inside = (0..p).any(|k| n * k / p <= first && end <= n * (k + 1) / p);
                if inside && end > first {
                    proptest::prop_assert!(cut.iter().flatten().any(|v| v.as_ptr() == ptr && v.len() == end - first));
                }
            }
        }
    }
}
