//! The pure planning of a flush: the phase of each op, the fills that clear fresh buffers, and
//! how one phase's copies group into commands (see [`super`] for the rules). Nothing here calls
//! Vulkan; [`super::encode`] turns a plan into commands. The rules are property-tested below
//! without a device.

use crate::util::IdMap;
use ash::vk;
use smallvec::SmallVec;

/// What planning needs of an op.
pub(crate) trait Access {
    /// The buffer handle the op holds (`Arc<RawBuffer>` for recorded ops).
    type Buffer;
    /// A fence (a timestamp): it goes after every earlier op, and every later op after it.
    fn is_fence(&self) -> bool;
    /// Calls `f(buffer, id, writes)` for every buffer the op touches.
    fn for_each_access(&self, f: impl FnMut(&Self::Buffer, u64, bool));
}

/// The phases of a flush's ops.
pub(crate) struct Phases {
    /// Each op's phase, in recording order.
    pub of_op: Vec<u32>,
    /// The ops in phase order (recording order within a phase).
    pub order: Vec<usize>,
    /// How many phases (0 without ops).
    pub count: u32,
    /// (last phase that wrote, last phase that read) per buffer id used so far.
    used: IdMap<u64, (Option<u32>, Option<u32>)>,
}

impl Phases {
    /// Marks buffer `id` used by this flush (a host read after the ops); true when this is its
    /// first use.
    pub fn first_use(&mut self, id: u64) -> bool {
        self.used.insert(id, (None, None)).is_none()
    }

    /// The ops of each phase in turn, as slices of [`Phases::order`].
    pub fn runs(&self) -> impl Iterator<Item = &[usize]> + '_ {
        self.order.chunk_by(move |&a, &b| self.of_op[a] == self.of_op[b])
    }
}

/// Assigns each op a phase: one after the last phase that wrote a buffer it reads, and one
/// after the last that read or wrote a buffer it writes; fences split the flush. Calls
/// `first_use(op, buffer)` at the first use of each buffer (by id), where the clear is decided.
pub(crate) fn assign<O: Access>(ops: &[O], mut first_use: impl FnMut(&O, &O::Buffer)) -> Phases {
    let mut used: IdMap<u64, (Option<u32>, Option<u32>)> = IdMap::default();
    used.reserve(ops.len() * 2);
    let mut of_op: Vec<u32> = Vec::with_capacity(ops.len());
    let mut floor = 0;
    let mut highest: Option<u32> = None;
    for op in ops {
        if op.is_fence() {
            let phase = highest.map_or(floor, |h| (h + 1).max(floor));
            of_op.push(phase);
            highest = Some(phase);
            floor = phase + 1;
            continue;
        }
        let mut phase = floor;
        op.for_each_access(|b, id, write| {
            let Some(&(w, r)) = used.get(&id) else {
                // The flush's first use of `id` (marked, so that a second binding of the same
                // buffer in this op does not count as first again).
                used.insert(id, (None, None));
                first_use(op, b);
                return;
            };
            if let Some(w) = w {
                phase = phase.max(w + 1);
            }
            if let (true, Some(r)) = (write, r) {
                phase = phase.max(r + 1);
            }
        });
        op.for_each_access(|_, id, write| {
            let e = used.entry(id).or_insert((None, None));
            let slot = if write { &mut e.0 } else { &mut e.1 };
            *slot = Some(slot.map_or(phase, |p| p.max(phase)));
        });
        of_op.push(phase);
        highest = Some(highest.map_or(phase, |h| h.max(phase)));
    }
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| of_op[i]);
    let count = of_op.iter().max().map_or(0, |p| p + 1);
    Phases { of_op, order, count, used }
}

/// Where an op goes when a flush is split over copy queues (see [`crate::vk::copy_queues`]),
/// in the order the parts run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Part {
    /// The first phase's copies (the uploads).
    Input,
    /// Everything else.
    Compute,
    /// The last phase's copies (the read-backs), when the flush has more than one phase.
    Output,
}

/// The mean region size from which a copy goes to a copy queue when the copy kernel is there
/// (see [`for_copy_queue`]): the kernel's largest region.
pub(crate) const QUEUE_REGION: u64 = super::copies::MAX_REGION;

/// Whether a copy of the first or last phase, with `regions`, goes to a copy queue when the
/// flush is split (`kernel`: the compute part has the copy kernel).
///
/// A copy queue's engine runs a command's regions one after another, at a cost per region
/// (about 1.6 µs for 4 KiB on an H200, see [`super::copies`]), and each part the submission
/// adds is one more hop between queues; the copy kernel copies small regions all at once.
/// So with the kernel, only copies of large regions (`QUEUE_REGION` on average or more) leave
/// the compute part: the staged ranges of many records that lie together, a large upload.
/// Scattered records' ranges (many records of one connection between each flush's) and a lone
/// job's small upload stay with the kernels, as without copy queues. Without the kernel every
/// such copy goes to its queue, where it at least runs beside another flush's kernels.
pub(crate) fn for_copy_queue(regions: &[vk::BufferCopy], kernel: bool) -> bool {
    let bytes: u64 = regions.iter().map(|r| r.size).sum();
    !kernel || bytes >= regions.len() as u64 * QUEUE_REGION
}

/// Each op's part: a copy that goes to a copy queue (`to_queue(op)`, see [`for_copy_queue`])
/// of the first phase goes to the input part, one of the last phase (of two or more) to the
/// output part, every other op to the compute part. The parts run one after another, so every
/// hazard stays ordered: an op depends only on ops of earlier phases, no op of the first phase
/// depends on another, and nothing follows an op of the last phase.
pub(crate) fn parts(phases: &Phases, to_queue: impl Fn(usize) -> bool) -> Vec<Part> {
    let last = phases.count.saturating_sub(1);
    (phases.of_op.iter().enumerate())
        .map(|(i, &phase)| match (to_queue(i), phase) {
            (true, 0) => Part::Input,
            (true, p) if p == last => Part::Output,
            _ => Part::Compute,
        })
        .collect()
}

/// A fresh buffer's clear: its `VkBuffer` (`K`), the offset and length to zero, and whether
/// that reaches the end of its chunk (only then may the next chunk's fill join it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fill<K> {
    pub buffer: K,
    pub offset: u64,
    pub len: u64,
    pub to_chunk_end: bool,
}

/// Merges fills, sorted by buffer and offset, into `(buffer, offset, len)` runs: a fill joins
/// the run before it when it is in the same buffer, starts where that run ends, and the run's
/// last fill reached its chunk's end.
pub(crate) fn clear_runs<K: Copy + Eq>(fills: &[Fill<K>]) -> SmallVec<[(K, u64, u64); 4]> {
    let mut runs = SmallVec::new();
    let mut run: Option<(K, u64, u64)> = None;
    for f in fills {
        run = match run {
            Some((buffer, offset, len)) if buffer == f.buffer && offset + len == f.offset => {
                Some((buffer, offset, len + f.len))
            }
            other => {
                runs.extend(other);
                Some((f.buffer, f.offset, f.len))
            }
        };
        if !f.to_chunk_end {
            runs.extend(run.take());
        }
    }
    runs.extend(run);
    runs
}

/// One phase's copies between one pair of `VkBuffer`s (`K`), merged into one command.
#[derive(Debug)]
pub(crate) struct CopyGroup<K> {
    /// (source, destination).
    pub key: (K, K),
    /// The device addresses of the two buffers at offset 0 (0: none).
    pub bases: (u64, u64),
    pub regions: SmallVec<[vk::BufferCopy; 4]>,
    /// With GPU spans: the ops behind the group and their bytes.
    pub ops: SmallVec<[(usize, u64); 1]>,
}

/// A phase's copies, grouped by buffer pair in order of first appearance. Kept between phases
/// to reuse its allocations.
#[derive(Debug)]
pub(crate) struct CopyGroups<K> {
    pub groups: Vec<CopyGroup<K>>,
    index: IdMap<(K, K), usize>,
}

impl<K> Default for CopyGroups<K> {
    fn default() -> Self {
        CopyGroups { groups: Vec::new(), index: IdMap::default() }
    }
}

impl<K: Copy + Eq + std::hash::Hash> CopyGroups<K> {
    pub fn clear(&mut self) {
        self.groups.clear();
        self.index.clear();
    }

    /// Adds op `op`'s `regions` between `key`'s buffers (whose addresses `bases` gives when the
    /// pair is new); `track`: remember the op (for GPU spans).
    pub fn add(
        &mut self,
        op: usize,
        key: (K, K),
        bases: impl FnOnce() -> (u64, u64),
        regions: &[vk::BufferCopy],
        track: bool,
    ) {
        let groups = &mut self.groups;
        let slot = *self.index.entry(key).or_insert_with(|| {
            groups.push(CopyGroup { key, bases: bases(), regions: SmallVec::new(), ops: SmallVec::new() });
            groups.len() - 1
        });
        let g = &mut self.groups[slot];
        g.regions.extend_from_slice(regions);
        if track {
            g.ops.push((op, regions.iter().map(|r| r.size).sum()));
        }
    }

    /// Which groups go to the copy kernel, and the kernel's regions `(source address,
    /// destination address, bytes)`: the groups whose every region `qualifies`, when they hold
    /// at least `min_regions` regions together; `None` otherwise (all go to `vkCmdCopyBuffer`).
    pub fn for_kernel(
        &self,
        min_regions: usize,
        qualifies: impl Fn(u64, u64, &vk::BufferCopy) -> bool,
        regions: &mut Vec<(u64, u64, u64)>,
    ) -> Option<SmallVec<[bool; 8]>> {
        regions.clear();
        let by_kernel: SmallVec<[bool; 8]> =
            self.groups.iter().map(|g| g.regions.iter().all(|r| qualifies(g.bases.0, g.bases.1, r))).collect();
        for g in self.groups.iter().zip(&by_kernel).filter(|(_, &k)| k).map(|(g, _)| g) {
            let (sb, db) = g.bases;
            regions.extend(g.regions.iter().map(|r| (sb + r.src_offset, db + r.dst_offset, r.size)));
        }
        (regions.len() >= min_regions).then_some(by_kernel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeSet, HashMap};

    /// A test op: a fence, or buffer accesses `(id, writes)`.
    #[derive(Debug, Clone)]
    enum TestOp {
        Fence,
        Uses(Vec<(u64, bool)>),
    }

    impl Access for TestOp {
        type Buffer = u64;
        fn is_fence(&self) -> bool {
            matches!(self, TestOp::Fence)
        }
        fn for_each_access(&self, mut f: impl FnMut(&u64, u64, bool)) {
            if let TestOp::Uses(u) = self {
                for (id, w) in u {
                    f(id, *id, *w);
                }
            }
        }
    }

    fn ops() -> impl Strategy<Value = Vec<TestOp>> {
        let op = prop_oneof![
            1 => Just(TestOp::Fence),
            8 => prop::collection::vec((0u64..6, any::<bool>()), 0..4).prop_map(TestOp::Uses),
        ];
        prop::collection::vec(op, 0..40)
    }

    fn conflict(a: &TestOp, b: &TestOp) -> bool {
        let (TestOp::Uses(a), TestOp::Uses(b)) = (a, b) else { return false };
        a.iter().any(|&(x, wa)| b.iter().any(|&(y, wb)| x == y && (wa || wb)))
    }

    proptest! {
        /// Every hazard is ordered, fences split the flush, nothing waits without a reason,
        /// and each buffer's first use is reported once, at its first op.
        #[test]
        fn phases_order_every_hazard_and_no_more(ops in ops()) {
            let mut firsts: Vec<(usize, u64)> = Vec::new();
            let base = ops.as_ptr() as usize;
            let size = std::mem::size_of::<TestOp>();
            let p = assign(&ops, |op, &b| firsts.push(((op as *const TestOp as usize - base) / size, b)));
            prop_assert_eq!(p.of_op.len(), ops.len());
            for j in 0..ops.len() {
                for i in 0..j {
                    let ordered = conflict(&ops[i], &ops[j]) || ops[i].is_fence() || ops[j].is_fence();
                    if ordered {
                        prop_assert!(p.of_op[i] < p.of_op[j], "op {} (phase {}) before op {} (phase {})", i, p.of_op[i], j, p.of_op[j]);
                    }
                }
                if !ops[j].is_fence() {
                    // Tight: its phase is the floor after the last fence, or one past an
                    // earlier op that it must follow.
                    let floor = (0..j).rev().find(|&i| ops[i].is_fence()).map_or(0, |f| p.of_op[f] + 1);
                    let reason = (0..j).any(|i| conflict(&ops[i], &ops[j]) && p.of_op[i] + 1 == p.of_op[j]);
                    prop_assert!(p.of_op[j] == floor || reason, "op {} waits for nothing", j);
                }
            }
            let mut sorted = p.order.clone();
            sorted.sort_unstable();
            prop_assert_eq!(sorted, (0..ops.len()).collect::<Vec<_>>());
            prop_assert!(p.order.windows(2).all(|w| (p.of_op[w[0]], w[0]) < (p.of_op[w[1]], w[1])));
            prop_assert_eq!(p.count, p.of_op.iter().max().map_or(0, |m| m + 1));
            let runs: Vec<&[usize]> = p.runs().collect();
            prop_assert_eq!(runs.len() as u32, p.order.iter().map(|&i| p.of_op[i]).collect::<BTreeSet<_>>().len() as u32);
            let mut want: Vec<(usize, u64)> = Vec::new();
            let mut seen = BTreeSet::new();
            for (i, op) in ops.iter().enumerate() {
                if let TestOp::Uses(u) = op {
                    for &(b, _) in u {
                        if seen.insert(b) {
                            want.push((i, b));
                        }
                    }
                }
            }
            prop_assert_eq!(firsts, want);
        }

        /// Split over copy queues, every hazard still runs in order (an earlier part, or an
        /// earlier phase of the same part), only copies leave the compute part, the input part
        /// holds first-phase copies and the output part last-phase ones.
        #[test]
        fn parts_keep_every_hazard_in_order(ops in ops(), copy in prop::collection::vec(any::<bool>(), 40)) {
            let is_copy = |i: usize| copy[i] && !ops[i].is_fence();
            let p = assign(&ops, |_, _| {});
            let part = parts(&p, is_copy);
            prop_assert_eq!(part.len(), ops.len());
            for j in 0..ops.len() {
                match part[j] {
                    Part::Input => prop_assert!(is_copy(j) && p.of_op[j] == 0),
                    Part::Output => prop_assert!(is_copy(j) && p.of_op[j] + 1 == p.count && p.count > 1),
                    Part::Compute => prop_assert!(!is_copy(j) || (p.of_op[j] > 0 && p.of_op[j] + 1 < p.count)),
                }
                for i in 0..j {
                    if conflict(&ops[i], &ops[j]) || ops[i].is_fence() || ops[j].is_fence() {
                        prop_assert!(
                            (part[i], p.of_op[i]) < (part[j], p.of_op[j]),
                            "op {} ({:?}, phase {}) not before op {} ({:?}, phase {})",
                            i, part[i], p.of_op[i], j, part[j], p.of_op[j]
                        );
                    }
                }
            }
        }

        /// With the copy kernel, a copy leaves the compute part exactly when its regions
        /// average `QUEUE_REGION` bytes or more; without it, always.
        #[test]
        fn copies_of_large_regions_take_the_copy_queues(sizes in prop::collection::vec(1u64..4 * QUEUE_REGION, 1..12)) {
            let regions: Vec<vk::BufferCopy> =
                sizes.iter().map(|&size| vk::BufferCopy { src_offset: 0, dst_offset: 0, size }).collect();
            let mean = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
            prop_assert_eq!(for_copy_queue(&regions, true), mean >= QUEUE_REGION as f64);
            prop_assert!(for_copy_queue(&regions, false));
        }

        /// Runs cover exactly the bytes of the fills, never overlap, and a fill that stops short
        /// of its chunk's end ends its run.
        #[test]
        fn clear_runs_cover_the_fills(raw in prop::collection::vec((0u8..3, 0u64..6, 1u64..5, any::<bool>()), 0..24)) {
            // Chunks of 8 units, one fill per chunk at most, `len` units from its start.
            let mut chunks: BTreeSet<(u8, u64)> = BTreeSet::new();
            let mut fills: Vec<Fill<u8>> = Vec::new();
            for (buffer, chunk, len, full) in raw {
                if chunks.insert((buffer, chunk)) {
                    let len = if full { 8 } else { len };
                    fills.push(Fill { buffer, offset: chunk * 8, len, to_chunk_end: len == 8 });
                }
            }
            fills.sort_by_key(|f| (f.buffer, f.offset));
            let runs = clear_runs(&fills);
            let bytes = |v: &mut dyn Iterator<Item = (u8, u64, u64)>| -> BTreeSet<(u8, u64)> {
                v.flat_map(|(b, o, l)| (o..o + l).map(move |x| (b, x))).collect()
            };
            let want = bytes(&mut fills.iter().map(|f| (f.buffer, f.offset, f.len)));
            let got = bytes(&mut runs.iter().copied());
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(runs.iter().map(|r| r.2).sum::<u64>(), want.len() as u64, "runs overlap");
            for f in fills.iter().filter(|f| !f.to_chunk_end) {
                prop_assert!(runs.iter().any(|&(b, o, l)| b == f.buffer && o + l == f.offset + f.len));
            }
            prop_assert!(runs.len() <= fills.len());
        }

        /// Grouping keeps every region, in order, under its pair, one group per pair in order of
        /// first appearance; the kernel takes only groups whose regions all qualify, and only
        /// enough of them.
        #[test]
        fn copy_groups_keep_every_region(copies in prop::collection::vec((0u8..3, 0u8..3, 1u64..200), 0..30), min in 1usize..6) {
            let mut groups = CopyGroups::<u8>::default();
            let mut want: HashMap<(u8, u8), Vec<u64>> = HashMap::new();
            let mut first: Vec<(u8, u8)> = Vec::new();
            for (i, &(s, d, size)) in copies.iter().enumerate() {
                let r = vk::BufferCopy { src_offset: i as u64 * 256, dst_offset: i as u64 * 256, size };
                groups.add(i, (s, d), || (u64::from(s) << 32, u64::from(d) << 32), &[r], true);
                if !want.contains_key(&(s, d)) {
                    first.push((s, d));
                }
                want.entry((s, d)).or_default().push(size);
            }
            prop_assert_eq!(groups.groups.iter().map(|g| g.key).collect::<Vec<_>>(), first);
            for g in &groups.groups {
                prop_assert_eq!(g.regions.iter().map(|r| r.size).collect::<Vec<_>>(), want[&g.key].clone());
                prop_assert_eq!(g.ops.len(), g.regions.len());
            }
            // Regions of up to 100 bytes qualify.
            let mut regions = Vec::new();
            let split = groups.for_kernel(min, |_, _, r| r.size <= 100, &mut regions);
            let qualifying: Vec<bool> = groups.groups.iter().map(|g| g.regions.iter().all(|r| r.size <= 100)).collect();
            let n: usize = groups.groups.iter().zip(&qualifying).filter(|(_, &q)| q).map(|(g, _)| g.regions.len()).sum();
            prop_assert_eq!(regions.len(), n);
            match split {
                Some(by_kernel) => {
                    prop_assert!(n >= min);
                    prop_assert_eq!(by_kernel.to_vec(), qualifying);
                }
                None => prop_assert!(n < min),
            }
        }
    }
}
