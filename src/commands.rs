//! Recording GPU commands, and the blocking path that submits them and waits.
//!
//! # Recording and barriers
//! Commands are not written into a Vulkan command buffer when they are recorded. They are kept
//! as a list of [`Op`]s (with a reference to every buffer and kernel they use) and encoded when
//! the list is submitted. Encoding assigns each op a *phase*:
//!
//! - an op that reads a buffer goes one phase after the last op that wrote it;
//! - an op that writes a buffer goes one phase after the last op that read or wrote it;
//! - otherwise it goes in phase 0.
//!
//! Ops are then recorded phase by phase with one global memory barrier between consecutive
//! phases. Ops that touch different buffers share a phase, so the work of many independent tasks
//! (each upload → dispatch → read-back) needs as many barriers as the longest chain, not one per
//! task. A read-only binding (GLSL `readonly`, or a uniform buffer) counts as a read only, so
//! tasks that share a key or a table do not serialise each other.
//!
//! A submission starts with one barrier when a buffer it uses was used by an earlier submission
//! (pipeline barriers order against everything earlier in submission order), and ends with one
//! barrier to host reads when the host will read a result.
//!
//! # Clearing new buffers
//! A buffer reads as zeros until written (see [`crate::Buffer::new`]). While the phases are
//! assigned, the first op of a submission that uses a buffer still *fresh* (never written) takes
//! its clear: if that op is a copy that overwrites the whole buffer (an upload through staging)
//! nothing more is needed; otherwise the buffer's range is zeroed with `vkCmdFillBuffer` in a
//! *clear phase* before phase 0. The fills are transfer writes placed after the submission's
//! opening barrier (which orders them after the memory's earlier users) and followed by one
//! barrier to every later transfer or shader access, so a submission with no fresh buffer to
//! clear records exactly what it did before. A buffer only read back by the host (no op) is
//! cleared the same way. The buffer counts as cleared once the submission is made; a recording
//! dropped unsubmitted gives its clears back.

use crate::buffer::{Buffer, Claim, MemoryKind, RawBuffer};
use crate::device::Device;
use crate::error::{map_oom, Error, Result};
use crate::hash::IdMap;
use crate::kernel::{Arg, Kernel, RawKernel};
use crate::spirv::{BindingInfo, BindingKind};
use ash::vk;
use bytemuck::Pod;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The completion value of a recording that was dropped because it held no command.
pub(crate) const NOTHING_TO_SUBMIT: u64 = u64::MAX;

/// One recorded command. Copy regions hold absolute offsets in the `VkBuffer`s.
pub(crate) enum Op {
    Copy {
        src: Arc<RawBuffer>,
        dst: Arc<RawBuffer>,
        /// One region, or several between the same two buffers (disjoint destinations).
        regions: SmallVec<[vk::BufferCopy; 1]>,
    },
    Dispatch {
        kernel: Arc<RawKernel>,
        groups: [u32; 3],
        args: SmallVec<[Arg; 4]>,
        push: SmallVec<[u8; 64]>,
    },
    /// A GPU timestamp: a fence among the recorded ops (see `encode`).
    Timestamp {
        pool: Arc<crate::timestamps::RawQueryPool>,
        index: u32,
    },
}

impl Op {
    /// Calls `f(buffer, writes)` for every buffer the op touches.
    fn for_each_buffer(&self, mut f: impl FnMut(&Arc<RawBuffer>, bool)) {
        match self {
            Op::Copy { src, dst, .. } => {
                f(src, false);
                f(dst, true);
            }
            Op::Dispatch { kernel, args, .. } => {
                for (arg, info) in args.iter().zip(&kernel.reflection.bindings) {
                    f(&arg.buffer, !info.read_only);
                }
            }
            Op::Timestamp { .. } => {}
        }
    }
}

/// A list of recorded ops and the resources they keep alive.
///
/// While an op is recorded but not submitted, each buffer it uses counts it in
/// `RawBuffer::pending`; [`Recording::mark_submitted`] moves that to `last_use`. Dropping a
/// recording that was never submitted just releases the counts.
pub(crate) struct Recording {
    pub device: Device,
    pub ops: Vec<Op>,
    /// Buffers the host reads in place once this recording completes (no command needed, but
    /// they count as used by it, and the recording ends with a barrier to host reads).
    pub host_reads: Vec<Arc<RawBuffer>>,
    /// The host will read a result of this recording: end with a barrier to host reads.
    pub host_read: bool,
    /// Items of batch kinds, encoded when the recording is (see [`crate::batch`]).
    pub(crate) batches: crate::batch::Batches,
    /// Items in `batches`.
    batch_items: usize,
    /// Set to the submission's timeline value by `mark_submitted` (see
    /// [`crate::batch::Encoder::completion`]).
    completion: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// Fresh buffers whose clear `encode` took (see "Clearing new buffers").
    cleared: Vec<Arc<RawBuffer>>,
    /// Buffers the encoded commands use besides the ops' (the copy kernel's region tables),
    /// held until the recording is dropped, after its submission completed.
    held: Vec<Arc<RawBuffer>>,
    submitted: bool,
    /// GPU timestamps around each command, when tracing or timing (see [`crate::trace`]).
    pub(crate) spans: Option<crate::trace::GpuSpans>,
    /// Which context recorded which ops (`start..end` of `ops`, in order), when timing.
    pub(crate) owners: Vec<(u32, u32, Arc<crate::trace::TaskClock>)>,
}

/// An upload of `data` into `dst` at element `offset`: not empty, and inside the buffer.
fn check_upload<T: Pod>(dst: &Buffer<T>, offset: usize, data: &[T]) -> Result<()> {
    if data.is_empty() {
        return Err(Error::ZeroSize("upload"));
    }
    if offset.checked_add(data.len()).is_none_or(|end| end > dst.len()) {
        return Err(Error::SizeMismatch {
            what: "upload past the end of the buffer",
            expected: dst.len() as u64,
            got: offset.saturating_add(data.len()) as u64,
        });
    }
    Ok(())
}

/// An upload whose data already sits in its own staging buffer (see [`stage_upload`]).
pub(crate) struct StagedUpload {
    staging: Arc<RawBuffer>,
    dst: Arc<RawBuffer>,
    region: vk::BufferCopy,
}

/// Checks an upload and, when `dst` is not written by the host directly (device-local memory
/// on a discrete GPU), copies `data` into a new staging buffer of its own. This needs no
/// recording and no lock: concurrent jobs stage their uploads in parallel and take a queue's
/// lock only to record the copy. `None`: `dst` may be written directly; record the upload as
/// usual ([`Recording::upload`] decides under the lock whether the GPU still uses it).
pub(crate) fn stage_upload<T: Pod>(
    device: &Device,
    dst: &Buffer<T>,
    offset: usize,
    data: &[T],
) -> Result<Option<StagedUpload>> {
    if !Arc::ptr_eq(&device.shared, &dst.raw.device.shared) {
        return Err(Error::InvalidArgument("buffer belongs to another device".into()));
    }
    check_upload(dst, offset, data)?;
    if host_writable(&dst.raw) {
        return Ok(None);
    }
    let bytes: &[u8] = bytemuck::cast_slice(data);
    let byte_offset = (offset * std::mem::size_of::<T>()) as u64;
    // Written completely right below: no clear needed.
    let staging = RawBuffer::new(device, bytes.len() as u64, MemoryKind::Upload, false)?;
    staging.write_bytes(0, bytes)?;
    let region = vk::BufferCopy {
        src_offset: staging.offset,
        dst_offset: dst.raw.offset + byte_offset,
        size: bytes.len() as u64,
    };
    Ok(Some(StagedUpload { staging, dst: dst.raw.clone(), region }))
}

/// For a read-back of `src` that goes through a copy (memory the host does not read in place),
/// allocates the read-back buffer, without recording and without a queue's lock; `None` when
/// the host reads `src` in place.
pub(crate) fn stage_read_back<T: Pod>(device: &Device, src: &Buffer<T>) -> Result<Option<Arc<RawBuffer>>> {
    if !Arc::ptr_eq(&device.shared, &src.raw.device.shared) {
        return Err(Error::InvalidArgument("buffer belongs to another device".into()));
    }
    if host_readable(&src.raw) {
        return Ok(None);
    }
    // Overwritten completely by the copy, and only that range is read: no clear needed.
    RawBuffer::new(device, src.raw.size, MemoryKind::Readback, false).map(Some)
}

/// Copies of one phase between one pair of `VkBuffer`s, merged into one command.
type CopyGroup = ((vk::Buffer, vk::Buffer), SmallVec<[vk::BufferCopy; 4]>);

/// Counts from encoding one recording.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EncodeStats {
    pub barriers: u64,
    pub phases: u64,
    pub dispatches: u64,
    /// Dispatches of the copy kernel (see [`crate::copies`]).
    pub copy_dispatches: u64,
}

const SHADER_OR_TRANSFER: vk::PipelineStageFlags = vk::PipelineStageFlags::from_raw(
    vk::PipelineStageFlags::COMPUTE_SHADER.as_raw() | vk::PipelineStageFlags::TRANSFER.as_raw(),
);

fn writes() -> vk::AccessFlags {
    vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE
}

fn reads_and_writes() -> vk::AccessFlags {
    vk::AccessFlags::SHADER_READ
        | vk::AccessFlags::UNIFORM_READ
        | vk::AccessFlags::SHADER_WRITE
        | vk::AccessFlags::TRANSFER_READ
        | vk::AccessFlags::TRANSFER_WRITE
}

/// Whether the host may write `b` directly instead of staging: the memory is host-visible and
/// meant for it (unified memory, or an upload buffer).
fn host_writable(b: &RawBuffer) -> bool {
    b.is_mapped() && (b.device.unified_memory() || b.kind == MemoryKind::Upload)
}

/// Whether the host may read `b` in place: host-visible and meant for it (unified memory, or
/// a host-cached read-back buffer). Reading device-local host-visible memory on a discrete GPU
/// is very slow, so that goes through a read-back copy instead.
fn host_readable(b: &RawBuffer) -> bool {
    b.is_mapped() && (b.device.unified_memory() || b.kind == MemoryKind::Readback)
}

impl Recording {
    pub fn new(device: &Device) -> Self {
        Self::with_capacity(device, 0)
    }

    pub fn with_capacity(device: &Device, ops: usize) -> Self {
        Recording {
            device: device.clone(),
            ops: Vec::with_capacity(ops),
            host_reads: Vec::new(),
            host_read: false,
            batches: Default::default(),
            batch_items: 0,
            completion: None,
            cleared: Vec::new(),
            held: Vec::new(),
            submitted: false,
            spans: None,
            owners: Vec::new(),
        }
    }

    /// A recording for the next epoch that reuses `ops`' allocation (empty, from
    /// [`Recording::take_ops`] of a completed one).
    pub fn with_ops(device: &Device, mut ops: Vec<Op>) -> Self {
        ops.clear();
        let mut r = Recording::with_capacity(device, 0);
        r.ops = ops;
        r
    }

    /// A submitted recording's ops, taken out so that their vector can be reused once they are
    /// dropped (`None` for one never submitted: its drop releases what its ops counted).
    pub fn take_ops(&mut self) -> Option<Vec<Op>> {
        self.submitted.then(|| std::mem::take(&mut self.ops))
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.host_reads.is_empty() && self.batch_items == 0
    }

    /// Recorded commands and batch items.
    pub fn len(&self) -> usize {
        self.ops.len() + self.batch_items
    }

    /// The cell that receives this recording's timeline value when it is submitted
    /// ([`NOTHING_TO_SUBMIT`] if it turned out to hold no command).
    pub(crate) fn completion(&mut self) -> Arc<std::sync::atomic::AtomicU64> {
        self.completion.get_or_insert_with(Default::default).clone()
    }

    /// The recording held no command once its batches were encoded, and is dropped instead of
    /// submitted: its batch items are complete as they are.
    pub(crate) fn mark_nothing_to_submit(&mut self) {
        if let Some(c) = &self.completion {
            c.store(NOTHING_TO_SUBMIT, Ordering::Release);
        }
    }

    /// Adds an item of a batch kind (see [`crate::batch`]).
    pub(crate) fn push_batch<K: crate::batch::BatchKind>(&mut self, kind: &Arc<K>, item: K::Item) {
        self.batches.push(kind, item);
        self.batch_items += 1;
    }

    fn push(&mut self, op: Op) {
        op.for_each_buffer(|b, _| {
            b.pending.fetch_add(1, Ordering::SeqCst);
        });
        self.ops.push(op);
    }

    /// Records that the ops were submitted with timeline value `value`.
    pub fn mark_submitted(&mut self, value: u64) {
        let mark = |b: &Arc<RawBuffer>| {
            b.last_use.fetch_max(value, Ordering::SeqCst);
            b.pending.fetch_sub(1, Ordering::SeqCst);
        };
        for op in &self.ops {
            op.for_each_buffer(|b, _| mark(b));
        }
        self.host_reads.iter().for_each(mark);
        for b in self.cleared.drain(..) {
            b.clear_submitted();
        }
        if let Some(c) = &self.completion {
            c.store(value, Ordering::Release);
        }
        self.submitted = true;
    }

    /// With GPU spans: for each op, the index in `owners` of the context that recorded it
    /// (`u32::MAX`: none).
    fn op_owners(&self) -> Vec<u32> {
        let mut by_op = vec![u32::MAX; self.ops.len()];
        for (k, &(start, end, _)) in self.owners.iter().enumerate() {
            let end = (end as usize).min(by_op.len());
            if let Some(range) = by_op.get_mut(start as usize..end) {
                range.fill(k as u32);
            }
        }
        by_op
    }

    fn check_same_device(&self, b: &RawBuffer) -> Result<()> {
        if !Arc::ptr_eq(&self.device.shared, &b.device.shared) {
            return Err(Error::InvalidArgument("buffer belongs to another device".into()));
        }
        Ok(())
    }

    /// Uploads `data` into `dst` at element `offset`.
    ///
    /// When `dst` is host-visible and idle (unified-memory devices), the data is written
    /// directly and no command is recorded. Otherwise it goes through a staging buffer.
    pub fn upload<T: Pod>(&mut self, dst: &Buffer<T>, offset: usize, data: &[T]) -> Result<()> {
        self.check_same_device(&dst.raw)?;
        check_upload(dst, offset, data)?;
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let byte_offset = (offset * std::mem::size_of::<T>()) as u64;
        if host_writable(&dst.raw) && dst.raw.is_idle()? {
            return dst.raw.write_bytes(byte_offset, bytes);
        }
        // Written completely right below: no clear needed.
        let staging = RawBuffer::new(&self.device, bytes.len() as u64, MemoryKind::Upload, false)?;
        staging.write_bytes(0, bytes)?;
        self.push(Op::Copy {
            regions: smallvec::smallvec![vk::BufferCopy {
                src_offset: staging.offset,
                dst_offset: dst.raw.offset + byte_offset,
                size: bytes.len() as u64,
            }],
            src: staging,
            dst: dst.raw.clone(),
        });
        Ok(())
    }

    /// Records the copy of an upload staged by [`stage_upload`].
    pub(crate) fn push_staged_upload(&mut self, staged: StagedUpload) {
        self.push(Op::Copy { regions: smallvec::smallvec![staged.region], src: staged.staging, dst: staged.dst });
    }

    /// Copies `len` elements from `src[src_offset..]` to `dst[dst_offset..]`.
    pub fn copy_region<T: Pod>(
        &mut self,
        src: &Buffer<T>,
        src_offset: usize,
        dst: &Buffer<T>,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.check_same_device(&src.raw)?;
        self.check_same_device(&dst.raw)?;
        if len == 0 {
            return Err(Error::ZeroSize("copy"));
        }
        for (what, off, buf_len) in
            [("copy source range", src_offset, src.len()), ("copy destination range", dst_offset, dst.len())]
        {
            if off.checked_add(len).is_none_or(|end| end > buf_len) {
                return Err(Error::SizeMismatch {
                    what,
                    expected: buf_len as u64,
                    got: off.saturating_add(len) as u64,
                });
            }
        }
        if Arc::ptr_eq(&src.raw, &dst.raw) {
            let (a, b) = (src_offset.min(dst_offset), src_offset.max(dst_offset));
            if a + len > b {
                return Err(Error::InvalidArgument("overlapping copy within one buffer".into()));
            }
        }
        let size = std::mem::size_of::<T>();
        self.push(Op::Copy {
            src: src.raw.clone(),
            dst: dst.raw.clone(),
            regions: smallvec::smallvec![vk::BufferCopy {
                src_offset: src.raw.offset + (src_offset * size) as u64,
                dst_offset: dst.raw.offset + (dst_offset * size) as u64,
                size: (len * size) as u64,
            }],
        });
        Ok(())
    }

    /// Copies byte ranges `(src_offset, dst_offset, len)` (relative to each buffer's start)
    /// from `src` to `dst` as one op. The ranges must lie inside the buffers and their
    /// destinations must not overlap (checked); a batch encoder uses it to bring many items'
    /// results home with one command.
    pub(crate) fn copy_ranges(
        &mut self,
        src: &Arc<RawBuffer>,
        dst: &Arc<RawBuffer>,
        ranges: &[(u64, u64, u64)],
    ) -> Result<()> {
        if ranges.is_empty() {
            return Ok(());
        }
        self.check_same_device(src)?;
        self.check_same_device(dst)?;
        let mut regions: SmallVec<[vk::BufferCopy; 1]> = SmallVec::with_capacity(ranges.len());
        for &(s, d, len) in ranges {
            if len == 0
                || s.checked_add(len).is_none_or(|e| e > src.size)
                || d.checked_add(len).is_none_or(|e| e > dst.size)
            {
                return Err(Error::InvalidArgument(format!("copy range {s}..+{len} -> {d} outside its buffers")));
            }
            regions.push(vk::BufferCopy { src_offset: src.offset + s, dst_offset: dst.offset + d, size: len });
        }
        let mut sorted: Vec<(u64, u64)> = regions.iter().map(|r| (r.dst_offset, r.size)).collect();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
            return Err(Error::InvalidArgument("overlapping copy destinations".into()));
        }
        self.push(Op::Copy { src: src.clone(), dst: dst.clone(), regions });
        Ok(())
    }

    /// Records a dispatch, after checking it against the kernel and the device limits.
    pub fn dispatch(&mut self, kernel: &Kernel, groups: [u32; 3], args: &[Arg], push: &[u8]) -> Result<()> {
        let k = &kernel.raw;
        if !Arc::ptr_eq(&self.device.shared, &k.device.shared) {
            return Err(Error::InvalidArgument("kernel belongs to another device".into()));
        }
        let limits = self.device.limits();
        if groups.contains(&0) {
            return Err(Error::ZeroSize("dispatch group count"));
        }
        let max = limits.max_compute_work_group_count;
        if groups.iter().zip(max).any(|(g, m)| *g > m) {
            return Err(Error::GroupCountTooLarge { requested: groups, limit: max });
        }
        let want = k.reflection.push_constant_size as usize;
        if push.len() != want {
            return Err(Error::PushConstants {
                kernel: k.name.clone(),
                reason: format!("the kernel's block is {want} bytes, {} were given", push.len()),
            });
        }
        let bindings = &k.reflection.bindings;
        if args.len() != bindings.len() {
            return Err(Error::BindingMismatch {
                kernel: k.name.clone(),
                reason: format!("the kernel has {} buffer bindings, {} buffers were given", bindings.len(), args.len()),
            });
        }
        for (arg, info) in args.iter().zip(bindings) {
            self.check_same_device(&arg.buffer)?;
            if arg.kind != info.kind {
                return Err(Error::BindingMismatch {
                    kernel: k.name.clone(),
                    reason: format!(
                        "binding {} is a {:?} buffer, a {:?} buffer was given",
                        info.binding, info.kind, arg.kind
                    ),
                });
            }
            check_binding_size(k, info, arg.buffer.size, limits)?;
        }
        self.push(Op::Dispatch { kernel: k.clone(), groups, args: args.iter().cloned().collect(), push: push.into() });
        Ok(())
    }

    /// Records a timestamp.
    pub fn write_timestamp(&mut self, ts: &crate::Timestamps, index: u32) -> Result<()> {
        if !Arc::ptr_eq(&self.device.shared, &ts.raw.device.shared) {
            return Err(Error::InvalidArgument("timestamps belong to another device".into()));
        }
        if index >= ts.raw.count {
            return Err(Error::InvalidArgument(format!("timestamp {index} of a pool of {}", ts.raw.count)));
        }
        self.ops.push(Op::Timestamp { pool: ts.raw.clone(), index });
        Ok(())
    }

    /// Arranges for `src`'s contents, as this recording leaves them, to be readable on the host
    /// once the recording completes.
    pub fn read_back<T: Pod>(&mut self, src: &Buffer<T>) -> Result<Readback<T>> {
        self.check_same_device(&src.raw)?;
        self.host_read = true;
        if host_readable(&src.raw) {
            src.raw.pending.fetch_add(1, Ordering::SeqCst);
            self.host_reads.push(src.raw.clone());
            return Ok(Readback { buffer: src.raw.clone(), len: src.len(), _t: PhantomData });
        }
        // Overwritten completely by the copy, and only that range is read: no clear needed.
        let staging = RawBuffer::new(&self.device, src.raw.size, MemoryKind::Readback, false)?;
        Ok(self.push_read_back(src, staging))
    }

    /// Records the copy of `src` into `staging` (a read-back buffer of `src`'s size, made by
    /// the caller, possibly before taking a queue's lock) and returns its [`Readback`].
    pub(crate) fn push_read_back<T: Pod>(&mut self, src: &Buffer<T>, staging: Arc<RawBuffer>) -> Readback<T> {
        self.host_read = true;
        self.push(Op::Copy {
            src: src.raw.clone(),
            dst: staging.clone(),
            regions: smallvec::smallvec![vk::BufferCopy {
                src_offset: src.raw.offset,
                dst_offset: staging.offset,
                size: src.raw.size
            }],
        });
        Readback { buffer: staging, len: src.len(), _t: PhantomData }
    }

    /// Writes the ops into `cmd` phase by phase (see the module docs). `cmd` is in the
    /// recording state. Within a phase, copies between the same two `VkBuffer`s (e.g. many
    /// jobs' uploads from one pooled staging block into one pooled device block) become one
    /// `vkCmdCopyBuffer` with many regions.
    /// Lets the batch kinds record their coalesced work, as ops like any other (see
    /// [`crate::batch`]). Done by `encode` if not before.
    pub(crate) fn encode_batches(&mut self) {
        self.batch_items = 0;
        for b in self.batches.take() {
            b.encode(self);
        }
    }

    pub fn encode(&mut self, cmd: vk::CommandBuffer) -> EncodeStats {
        self.encode_batches();
        let d = self.device.raw();
        let mut stats = EncodeStats::default();
        // (last phase that wrote, last phase that read) per buffer id.
        let mut state: IdMap<u64, (Option<u32>, Option<u32>)> = IdMap::default();
        state.reserve(self.ops.len() * 2);
        let mut phases: Vec<u32> = Vec::with_capacity(self.ops.len());
        // Timestamps are fences: they take a phase after every op before them, and every op
        // after them goes in a later phase.
        let mut floor = 0;
        let mut highest: Option<u32> = None;
        // Fresh buffers to zero in the clear phase (see "Clearing new buffers").
        let mut fills: SmallVec<[Arc<RawBuffer>; 4]> = SmallVec::new();
        let cleared = &mut self.cleared;
        for op in &self.ops {
            if let Op::Timestamp { .. } = op {
                let phase = highest.map_or(floor, |h| (h + 1).max(floor));
                phases.push(phase);
                highest = Some(phase);
                floor = phase + 1;
                continue;
            }
            let mut phase = floor;
            op.for_each_buffer(|b, write| {
                let Some(&(w, r)) = state.get(&b.id) else {
                    // This submission's first use of `b` (marked, so that a second binding of
                    // `b` in the same op does not count as first again).
                    state.insert(b.id, (None, None));
                    let claim = b.claim_clear();
                    if claim != Claim::None && !overwrites_all(op, b) {
                        fills.push(b.clone());
                    }
                    if claim == Claim::Took {
                        cleared.push(b.clone());
                    }
                    return;
                };
                if let Some(w) = w {
                    phase = phase.max(w + 1);
                }
                if write {
                    if let Some(r) = r {
                        phase = phase.max(r + 1);
                    }
                }
            });
            op.for_each_buffer(|b, write| {
                let e = state.entry(b.id).or_insert((None, None));
                if write {
                    e.0 = Some(e.0.map_or(phase, |w| w.max(phase)));
                } else {
                    e.1 = Some(e.1.map_or(phase, |r| r.max(phase)));
                }
            });
            phases.push(phase);
            highest = Some(highest.map_or(phase, |h| h.max(phase)));
        }
        for b in &self.host_reads {
            if state.contains_key(&b.id) {
                continue; // an op, or an earlier host read, of this recording used it first
            }
            state.insert(b.id, (None, None));
            match b.claim_clear() {
                Claim::None => {}
                Claim::Took => {
                    fills.push(b.clone());
                    cleared.push(b.clone());
                }
                Claim::AlsoClear => fills.push(b.clone()),
            }
        }
        let mut order: Vec<usize> = (0..self.ops.len()).collect();
        order.sort_by_key(|&i| phases[i]);
        let mut spans = self.spans.take();
        // Without per-context time (a trace alone) there are no owners.
        let by_op = if spans.is_some() && !self.owners.is_empty() { self.op_owners() } else { Vec::new() };
        let owner = |i: usize| by_op.get(i).copied().filter(|&o| o != u32::MAX);
        if let Some(sp) = &mut spans {
            let count = phases.iter().max().map_or(0, |p| p + 1);
            sp.start(cmd, count, self.ops.len() as u32, !by_op.is_empty());
        }
        let barrier = |src_stage, src_access, dst_stage, dst_access| {
            let mb = [vk::MemoryBarrier::default().src_access_mask(src_access).dst_access_mask(dst_access)];
            // SAFETY: `cmd` is recording; the barrier has no handles.
            unsafe { d.cmd_pipeline_barrier(cmd, src_stage, dst_stage, vk::DependencyFlags::empty(), &mb, &[], &[]) };
        };
        // Memory may have been used by an earlier submission (pooled chunks are reused, and a
        // buffer may be used again): order this submission's accesses after it.
        if (!self.ops.is_empty() || !fills.is_empty()) && self.device.last_submitted() > 0 {
            barrier(SHADER_OR_TRANSFER, writes(), SHADER_OR_TRANSFER, reads_and_writes());
            stats.barriers += 1;
        }
        if !fills.is_empty() {
            // The clear phase. Neighbouring chunks of one block are cleared by one fill.
            fills.sort_unstable_by_key(|b| (vk::Handle::as_raw(b.buffer), b.offset));
            let mut run: Option<(vk::Buffer, u64, u64)> = None;
            let flush = |run: Option<(vk::Buffer, u64, u64)>| {
                if let Some((buffer, offset, len)) = run {
                    // SAFETY: the buffer is live (held by an op or a host read of this
                    // recording); offset and length are multiples of 4 inside the chunks being
                    // cleared (`clear_len` fits in its chunk; chunk offsets are multiples of
                    // 256), and the buffer was created with TRANSFER_DST.
                    unsafe { d.cmd_fill_buffer(cmd, buffer, offset, len, 0) };
                }
            };
            for b in &fills {
                run = match run {
                    // Contiguous with the run only if the run's last chunk is cleared to its end.
                    Some((buffer, offset, len)) if buffer == b.buffer && offset + len == b.offset => {
                        Some((buffer, offset, len + b.clear_len))
                    }
                    other => {
                        flush(other);
                        Some((b.buffer, b.offset, b.clear_len))
                    }
                };
                if b.clear_len != b.chunk_class() {
                    // The chunk's tail is not cleared: the next chunk starts a new fill.
                    flush(run.take());
                }
            }
            flush(run);
            if let Some(sp) = &mut spans {
                sp.command(cmd, crate::trace::Command::Clear, || 0.0, None);
                sp.end_group(cmd);
            }
            if !self.ops.is_empty() {
                barrier(
                    vk::PipelineStageFlags::TRANSFER,
                    vk::AccessFlags::TRANSFER_WRITE,
                    SHADER_OR_TRANSFER,
                    reads_and_writes(),
                );
                stats.barriers += 1;
            }
        }
        let mut bound: Option<vk::Pipeline> = None;
        // Push constants stay set across dispatches with compatible layouts: skip repeats.
        let mut pushed: Option<(vk::PipelineLayout, &[u8])> = None;
        let mut copies: Vec<CopyGroup> = Vec::new();
        // The device addresses of each group's two buffers (see `crate::copies`).
        let mut copy_bases: Vec<(u64, u64)> = Vec::new();
        let copy_kernel = crate::copies::kernel(&self.device).cloned();
        let mut kernel_regions: Vec<crate::copies::Region> = Vec::new();
        let mut copy_index: IdMap<(vk::Buffer, vk::Buffer), usize> = IdMap::default();
        // With GPU spans: the ops (and their bytes) behind each merged copy.
        let mut copy_ops: Vec<SmallVec<[(usize, u64); 1]>> = Vec::new();
        let mut at = 0;
        while at < order.len() {
            let phase = phases[order[at]];
            let end = at + order[at..].iter().take_while(|&&i| phases[i] == phase).count();
            if at > 0 {
                barrier(SHADER_OR_TRANSFER, writes(), SHADER_OR_TRANSFER, reads_and_writes());
                stats.barriers += 1;
            }
            copies.clear();
            copy_bases.clear();
            copy_index.clear();
            copy_ops.clear();
            for &i in &order[at..end] {
                match &self.ops[i] {
                    Op::Copy { src, dst, regions } => {
                        let key = (src.buffer, dst.buffer);
                        let slot = *copy_index.entry(key).or_insert_with(|| {
                            copies.push((key, SmallVec::new()));
                            copy_bases.push((src.base_address(), dst.base_address()));
                            copies.len() - 1
                        });
                        copies[slot].1.extend_from_slice(regions);
                        if spans.is_some() {
                            if copy_ops.len() <= slot {
                                copy_ops.resize_with(slot + 1, SmallVec::new);
                            }
                            copy_ops[slot].push((i, regions.iter().map(|r| r.size).sum()));
                        }
                    }
                    Op::Dispatch { kernel, groups, args, push } => {
                        if bound != Some(kernel.pipeline) {
                            // SAFETY: the pipeline is live (held by the op).
                            unsafe { d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, kernel.pipeline) };
                            bound = Some(kernel.pipeline);
                        }
                        let infos: SmallVec<[vk::DescriptorBufferInfo; 4]> = args
                            .iter()
                            .map(|a| vk::DescriptorBufferInfo {
                                buffer: a.buffer.buffer,
                                offset: a.buffer.offset,
                                range: a.buffer.size,
                            })
                            .collect();
                        let writes: SmallVec<[vk::WriteDescriptorSet; 4]> = kernel
                            .reflection
                            .bindings
                            .iter()
                            .zip(&infos)
                            .map(|(b, info)| {
                                vk::WriteDescriptorSet::default()
                                    .dst_binding(b.binding)
                                    .descriptor_type(match b.kind {
                                        crate::spirv::BindingKind::Storage => vk::DescriptorType::STORAGE_BUFFER,
                                        crate::spirv::BindingKind::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
                                    })
                                    .buffer_info(std::slice::from_ref(info))
                            })
                            .collect();
                        // SAFETY: the layout matches the kernel's reflection; bindings, push size
                        // and group counts were checked against the kernel and the device at
                        // record time; the buffers are live (held by the op).
                        unsafe {
                            if !writes.is_empty() {
                                self.device.shared.push_descriptor.cmd_push_descriptor_set(
                                    cmd,
                                    vk::PipelineBindPoint::COMPUTE,
                                    kernel.layout,
                                    0,
                                    &writes,
                                );
                            }
                            if !push.is_empty() && pushed != Some((kernel.layout, &push[..])) {
                                d.cmd_push_constants(cmd, kernel.layout, vk::ShaderStageFlags::COMPUTE, 0, push);
                                pushed = Some((kernel.layout, &push[..]));
                            }
                            d.cmd_dispatch(cmd, groups[0], groups[1], groups[2]);
                        }
                        stats.dispatches += 1;
                        if let Some(sp) = &mut spans {
                            sp.command(
                                cmd,
                                crate::trace::Command::Dispatch(i as u32, Arc::as_ptr(kernel) as usize),
                                || crate::trace::dispatch_weight(kernel, *groups),
                                owner(i).map(|o| (o, 1)),
                            );
                        }
                    }
                    Op::Timestamp { pool, index } => {
                        // SAFETY: the pool is live (held by the op), was reset on the host, and
                        // the index was checked when recorded.
                        unsafe {
                            d.cmd_write_timestamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, pool.pool, *index)
                        };
                    }
                }
            }
            // Groups whose regions all qualify go to one dispatch of the copy kernel when
            // enough do (see `crate::copies`); the others to `vkCmdCopyBuffer`.
            let mut by_kernel: SmallVec<[bool; 8]> = SmallVec::new();
            if let Some(ck) = &copy_kernel {
                by_kernel.extend(
                    copies
                        .iter()
                        .zip(&copy_bases)
                        .map(|((_, regions), &(sb, db))| regions.iter().all(|r| crate::copies::qualifies(sb, db, r))),
                );
                kernel_regions.clear();
                for (((_, regions), &(sb, db)), _) in copies.iter().zip(&copy_bases).zip(&by_kernel).filter(|(_, &k)| k)
                {
                    kernel_regions.extend(regions.iter().map(|r| (sb + r.src_offset, db + r.dst_offset, r.size)));
                }
                let table = (kernel_regions.len() >= crate::copies::MIN_REGIONS)
                    .then(|| crate::copies::table(&self.device, &kernel_regions).ok())
                    .flatten();
                match table {
                    Some((table, address)) => {
                        let raw = &ck.raw;
                        // SAFETY: the pipeline is live (the device holds the kernel).
                        unsafe { d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, raw.pipeline) };
                        // One workgroup per region: more regions than the device's workgroup
                        // count allows go in several dispatches over parts of the table.
                        let per = self.device.limits().max_compute_work_group_count[0].max(1) as usize;
                        for first in (0..kernel_regions.len()).step_by(per) {
                            let count = (kernel_regions.len() - first).min(per) as u32;
                            let at = address + (first * crate::copies::ENTRY) as u64;
                            let push = crate::copies::push_constants(at, count);
                            // SAFETY: the layout is the kernel's; the table is live (held by
                            // this recording until its submission completed) and lists only
                            // regions checked against their buffers when recorded, which this
                            // phase writes disjointly and which the ops hold alive (see
                            // `crate::copies`); `at` and `count` stay inside the table; the
                            // push block is the kernel's 12 bytes; `count` is within the
                            // device's workgroup count.
                            unsafe {
                                d.cmd_push_constants(cmd, raw.layout, vk::ShaderStageFlags::COMPUTE, 0, &push);
                                d.cmd_dispatch(cmd, count, 1, 1);
                            }
                            stats.copy_dispatches += 1;
                        }
                        bound = Some(raw.pipeline);
                        pushed = None;
                        self.held.push(table);
                        if let Some(sp) = &mut spans {
                            let bytes: u64 = kernel_regions.iter().map(|r| r.2).sum();
                            let owners = (0..copies.len())
                                .filter(|&slot| by_kernel[slot])
                                .flat_map(|slot| copy_ops.get(slot).map_or(&[][..], |o| &o[..]))
                                .filter_map(|&(i, b)| owner(i).map(|o| (o, b)));
                            let what = crate::trace::Command::Copy(bytes, kernel_regions.len() as u32);
                            sp.command(cmd, what, || crate::trace::copy_weight(bytes), owners);
                        }
                    }
                    None => by_kernel.clear(),
                }
            }
            for (slot, ((src, dst), regions)) in copies.iter().enumerate() {
                if by_kernel.get(slot).copied().unwrap_or(false) {
                    continue;
                }
                // Within one `VkBuffer` (two chunks of one pooled block), one region per
                // command: the copy is valid with any number of disjoint regions, but validation
                // layers before 1.3.239 (Ubuntu 22.04's 1.3.204) compare the regions' bounding
                // ranges and report an overlap that is not there.
                let per: &mut dyn Iterator<Item = &[vk::BufferCopy]> =
                    if src == dst { &mut regions.chunks(1) } else { &mut std::iter::once(&regions[..]) };
                for part in per {
                    // SAFETY: both buffers are live (the ops hold them); every region was checked
                    // against its buffer's range when recorded, and regions within one phase
                    // touch disjoint destination ranges (a conflict would have put them in later
                    // phases).
                    unsafe { d.cmd_copy_buffer(cmd, *src, *dst, part) };
                }
                if let Some(sp) = &mut spans {
                    let ops = copy_ops.get(slot).map_or(&[][..], |o| &o[..]);
                    let bytes: u64 = regions.iter().map(|r| r.size).sum();
                    let owners = ops.iter().filter_map(|&(i, b)| owner(i).map(|o| (o, b)));
                    let what = crate::trace::Command::Copy(bytes, regions.len() as u32);
                    sp.command(cmd, what, || crate::trace::copy_weight(bytes), owners);
                }
            }
            if let Some(sp) = &mut spans {
                sp.end_group(cmd);
            }
            at = end;
        }
        stats.phases = phases.iter().max().map_or(0, |p| *p as u64 + 1);
        self.spans = spans;
        if self.host_read {
            barrier(SHADER_OR_TRANSFER, writes(), vk::PipelineStageFlags::HOST, vk::AccessFlags::HOST_READ);
            stats.barriers += 1;
        }
        stats
    }
}

/// Whether `op` overwrites all of `b` that a clear would cover (so `b` needs no clear when this
/// op is its first use).
fn overwrites_all(op: &Op, b: &RawBuffer) -> bool {
    match op {
        Op::Copy { dst, regions, .. } => {
            std::ptr::eq(&**dst, b) && regions.iter().any(|r| r.dst_offset == b.offset && r.size >= b.clear_len)
        }
        _ => false,
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if !self.submitted {
            let release = |b: &Arc<RawBuffer>| {
                b.pending.fetch_sub(1, Ordering::SeqCst);
            };
            for op in &self.ops {
                op.for_each_buffer(|b, _| release(b));
            }
            self.host_reads.iter().for_each(release);
            for b in &self.cleared {
                b.clear_abandoned();
            }
        }
    }
}

/// A command pool with command buffers recycled by timeline value.
pub(crate) struct CommandPool {
    pool: vk::CommandPool,
    free: Vec<vk::CommandBuffer>,
    /// Submitted command buffers, oldest first, with their timeline values.
    in_flight: VecDeque<(u64, vk::CommandBuffer)>,
}

impl CommandPool {
    pub fn new(device: &Device) -> Result<Self> {
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(device.queue_family())
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER | vk::CommandPoolCreateFlags::TRANSIENT);
        // SAFETY: the device is live.
        let pool = unsafe { device.raw().create_command_pool(&info, None) }.map_err(map_oom("vkCreateCommandPool"))?;
        Ok(CommandPool { pool, free: Vec::new(), in_flight: VecDeque::new() })
    }

    /// A command buffer in the recording state. Buffers whose value is `<= completed` are reused.
    pub fn begin(&mut self, device: &Device, completed: u64) -> Result<vk::CommandBuffer> {
        while self.in_flight.front().is_some_and(|(v, _)| *v <= completed) {
            let (_, cb) = self.in_flight.pop_front().expect("checked non-empty");
            self.free.push(cb);
        }
        let d = device.raw();
        let cb = match self.free.pop() {
            Some(cb) => cb,
            None => {
                let info = vk::CommandBufferAllocateInfo::default()
                    .command_pool(self.pool)
                    .level(vk::CommandBufferLevel::PRIMARY)
                    .command_buffer_count(1);
                // SAFETY: the pool is live and externally synchronised by `&mut self`.
                unsafe { d.allocate_command_buffers(&info) }.map_err(map_oom("vkAllocateCommandBuffers"))?[0]
            }
        };
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: `cb` is not pending: it is new, or its submission's value was reached. Resetting
        // (implicit in begin, allowed by RESET_COMMAND_BUFFER) is therefore valid.
        if let Err(e) = unsafe { d.begin_command_buffer(cb, &begin) } {
            self.free.push(cb);
            return Err(map_oom("vkBeginCommandBuffer")(e));
        }
        Ok(cb)
    }

    /// Ends recording of `cb`.
    pub fn end(&mut self, device: &Device, cb: vk::CommandBuffer) -> Result<()> {
        // SAFETY: `cb` is in the recording state (from `begin`).
        unsafe { device.raw().end_command_buffer(cb) }.map_err(|e| {
            self.free.push(cb);
            map_oom("vkEndCommandBuffer")(e)
        })
    }

    /// Hands `cb` back: it was submitted with `value`, or (`None`) never submitted.
    pub fn release(&mut self, cb: vk::CommandBuffer, value: Option<u64>) {
        match value {
            Some(v) => self.in_flight.push_back((v, cb)),
            None => self.free.push(cb),
        }
    }

    /// Destroys the pool and its command buffers. The caller ensures none is pending (their
    /// values were reached, or the device was lost).
    pub fn destroy(self, device: &ash::Device) {
        // SAFETY: see above.
        unsafe { device.destroy_command_pool(self.pool, None) };
    }
}

/// Records GPU work for the blocking path: commands are submitted together by
/// [`CommandList::submit_and_wait`], which blocks until the GPU is done.
///
/// This is the naive pattern (one submit and one wait per call) that the executor improves on;
/// it is also the simplest way to run a kernel once.
///
/// ```no_run
/// use vkasync::{kernels, Buffer, CommandList, Device, Kernel, MemoryKind, Recorder};
/// let device = Device::new()?;
/// let mix = Kernel::new(&device, &kernels::MIX)?;
/// let data: Vec<u32> = (0..1000).collect();
/// let buf = Buffer::<u32>::new(&device, data.len(), MemoryKind::Device)?;
/// let mut cmds = CommandList::new(&device);
/// cmds.upload(&buf, &data)?;
/// cmds.dispatch(&mix, [mix.groups_for(1000), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[1000u32, 1]))?;
/// let result = cmds.read_back(&buf)?;
/// cmds.submit_and_wait()?;
/// let out: Vec<u32> = result.into_vec()?;
/// # Ok::<(), vkasync::Error>(())
/// ```
pub struct CommandList {
    rec: Recording,
}

impl std::fmt::Debug for CommandList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandList").field("ops", &self.rec.len()).finish()
    }
}

impl CommandList {
    /// An empty list for `device`.
    pub fn new(device: &Device) -> Self {
        CommandList { rec: Recording::new(device) }
    }

    /// The number of GPU commands (and batch items) recorded.
    pub fn len(&self) -> usize {
        self.rec.len()
    }

    /// Adds `item` to the coalesced work of `kind` (see [`crate::batch`]); it is encoded with
    /// the other items of its kind when the list is submitted.
    pub fn batch<K: crate::batch::BatchKind>(&mut self, kind: &Arc<K>, item: K::Item) -> Result<()> {
        self.rec.push_batch(kind, item);
        Ok(())
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.rec.is_empty()
    }

    /// Submits everything in one `vkQueueSubmit` and blocks on the timeline semaphore until the
    /// GPU is done. Returns the submission's timeline value.
    ///
    /// The list keeps every buffer and kernel its commands use alive until the wait returns, so
    /// buffers the caller dropped after recording (a staging copy, a key or index buffer made by a
    /// helper) are not destroyed while the GPU still uses them.
    pub fn submit_and_wait(mut self) -> Result<u64> {
        let device = self.rec.device.clone();
        let value = self.submit_inner(&device)?;
        match device.shared.wait(value, None) {
            Ok(_) => Ok(value),
            Err(e) => {
                // The GPU may still use the resources: leak them rather than destroy them in
                // use. That holds after device loss too: lavapipe's queue thread finishes the
                // command buffer it is running, and freeing under it corrupts memory.
                std::mem::forget(self);
                Err(e)
            }
        }
    }

    fn submit_inner(&mut self, device: &Device) -> Result<u64> {
        self.rec.encode_batches();
        if self.rec.is_empty() {
            // Nothing for the GPU (batches computed on the host, or nothing recorded).
            self.rec.mark_nothing_to_submit();
            return Ok(device.last_submitted());
        }
        let completed = device.shared.completed_value()?;
        let mut guard = device.shared.blocking_pool.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(CommandPool::new(device)?);
        }
        let pool = guard.as_mut().expect("just created");
        let cb = pool.begin(device, completed)?;
        self.rec.encode(cb);
        pool.end(device, cb)?;
        match device.submit(&[cb]) {
            Ok(value) => {
                pool.release(cb, Some(value));
                self.rec.mark_submitted(value);
                Ok(value)
            }
            Err(e) => {
                pool.release(cb, None);
                Err(e)
            }
        }
    }
}

/// What records GPU work: the blocking [`CommandList`] and the executor's task context. Code
/// written against this trait (e.g. the crypto kernels' recording functions) works with both.
pub trait Recorder {
    /// The device the work is for.
    fn device(&self) -> &Device;
    /// Uploads `data` into `dst` starting at element `offset`. The data is copied out of `data`
    /// now; on unified-memory devices an idle `dst` is written directly.
    fn upload_at<T: Pod>(&mut self, dst: &Buffer<T>, offset: usize, data: &[T]) -> Result<()>;
    /// Copies `len` elements from `src[src_offset..]` to `dst[dst_offset..]`.
    fn copy_region<T: Pod>(
        &mut self,
        src: &Buffer<T>,
        src_offset: usize,
        dst: &Buffer<T>,
        dst_offset: usize,
        len: usize,
    ) -> Result<()>;
    /// Records a dispatch of `kernel` with `groups` workgroups, its buffers in binding order,
    /// and its push constants as bytes (e.g. `bytemuck::bytes_of(&push)`).
    fn dispatch(&mut self, kernel: &Kernel, groups: [u32; 3], args: &[Arg], push: &[u8]) -> Result<()>;
    /// Arranges for `src`'s contents, as the recorded work leaves them, to be readable on the
    /// host once that work completes.
    fn read_back<T: Pod>(&mut self, src: &Buffer<T>) -> Result<Readback<T>>;
    /// Records a GPU timestamp at `index` of `ts`: written once everything recorded before it
    /// completes; nothing recorded after it starts earlier.
    fn write_timestamp(&mut self, ts: &crate::Timestamps, index: u32) -> Result<()>;

    /// Adds `item` to the coalesced work of `kind` in this recording (see [`crate::batch`]).
    fn batch<K: crate::batch::BatchKind>(&mut self, kind: &Arc<K>, item: K::Item) -> Result<()>;

    /// Uploads `data` into the start of `dst`.
    fn upload<T: Pod>(&mut self, dst: &Buffer<T>, data: &[T]) -> Result<()> {
        self.upload_at(dst, 0, data)
    }
    /// Copies all of `src` to `dst`; both must have the same length.
    fn copy<T: Pod>(&mut self, src: &Buffer<T>, dst: &Buffer<T>) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::SizeMismatch { what: "copy", expected: dst.len() as u64, got: src.len() as u64 });
        }
        self.copy_region(src, 0, dst, 0, src.len())
    }
}

impl Recorder for CommandList {
    fn device(&self) -> &Device {
        &self.rec.device
    }
    fn upload_at<T: Pod>(&mut self, dst: &Buffer<T>, offset: usize, data: &[T]) -> Result<()> {
        self.rec.upload(dst, offset, data)
    }
    fn copy_region<T: Pod>(
        &mut self,
        src: &Buffer<T>,
        src_offset: usize,
        dst: &Buffer<T>,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.rec.copy_region(src, src_offset, dst, dst_offset, len)
    }
    fn dispatch(&mut self, kernel: &Kernel, groups: [u32; 3], args: &[Arg], push: &[u8]) -> Result<()> {
        self.rec.dispatch(kernel, groups, args, push)
    }
    fn read_back<T: Pod>(&mut self, src: &Buffer<T>) -> Result<Readback<T>> {
        self.rec.read_back(src)
    }
    fn write_timestamp(&mut self, ts: &crate::Timestamps, index: u32) -> Result<()> {
        self.rec.write_timestamp(ts, index)
    }
    fn batch<K: crate::batch::BatchKind>(&mut self, kind: &Arc<K>, item: K::Item) -> Result<()> {
        CommandList::batch(self, kind, item)
    }
}

/// The contents of a buffer, available on the host once the work that produces it completes.
pub struct Readback<T: Pod> {
    buffer: Arc<RawBuffer>,
    len: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T: Pod> std::fmt::Debug for Readback<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readback").field("len", &self.len).finish()
    }
}

impl<T: Pod> Readback<T> {
    /// Whether the GPU finished producing the contents.
    pub fn is_ready(&self) -> Result<bool> {
        self.buffer.is_idle()
    }

    /// The contents. [`Error::NotReady`] if the work is not complete (or not submitted).
    pub fn into_vec(self) -> Result<Vec<T>> {
        if !self.buffer.is_idle()? {
            return Err(Error::NotReady);
        }
        let mut out = vec![T::zeroed(); self.len];
        self.buffer.read_bytes(bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }
}

/// Checks the size of a buffer bound at `info`: at most the device's range for its descriptor
/// type (the descriptor covers the whole buffer), and at least the static size of the kernel's
/// block, so that the kernel's fixed members lie inside the buffer.
fn check_binding_size(kernel: &RawKernel, info: &BindingInfo, size: u64, limits: &crate::device::Limits) -> Result<()> {
    let (limit, kind, limit_name) = match info.kind {
        BindingKind::Storage => (limits.max_storage_buffer_range, "storage", "maxStorageBufferRange"),
        BindingKind::Uniform => (limits.max_uniform_buffer_range, "uniform", "maxUniformBufferRange"),
    };
    let err = |reason: String| Error::BindingSize { kernel: kernel.name.clone(), binding: info.binding, size, reason };
    if size > limit {
        return Err(err(format!(
            "a {size}-byte buffer is bound as a {kind} buffer, past the device's {limit_name} of {limit} bytes"
        )));
    }
    if size < info.min_size {
        return Err(err(format!(
            "a {size}-byte buffer is bound where the kernel's {kind} block is {} bytes",
            info.min_size
        )));
    }
    Ok(())
}

impl crate::trace::SpanSource for Recording {
    fn owners(&self) -> &[(u32, u32, Arc<crate::trace::TaskClock>)] {
        &self.owners
    }

    fn kernel(&self, op: u32) -> Option<&Arc<RawKernel>> {
        match self.ops.get(op as usize) {
            Some(Op::Dispatch { kernel, .. }) => Some(kernel),
            _ => None,
        }
    }
}
