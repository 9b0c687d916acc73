//! What a flush is made of: [`Recording`], a list of [`Op`]s with a reference to every buffer
//! and kernel they use, checked as they are recorded and encoded later (see [`super`] for the
//! protocol, [`super::plan`] and [`super::encode`] for how a recording becomes commands).

use crate::error::{Error, Result};
use crate::record::batch::{BatchKind, Batches};
use crate::vk::buffer::{Buffer, MemoryKind, RawBuffer};
use crate::vk::device::Device;
use crate::vk::kernel::{Arg, Kernel, RawKernel};
use crate::vk::spirv::{BindingInfo, BindingKind};
use ash::vk;
use bytemuck::Pod;
use smallvec::SmallVec;
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
        pool: Arc<crate::vk::timestamps::RawQueryPool>,
        index: u32,
    },
}

impl Op {
    /// Calls `f(buffer, writes)` for every buffer the op touches.
    pub(super) fn for_each_buffer(&self, mut f: impl FnMut(&Arc<RawBuffer>, bool)) {
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
    /// Items of batch kinds, encoded when the recording is (see [`crate::record::batch`]).
    pub(crate) batches: Batches,
    /// Items in `batches`.
    batch_items: usize,
    /// The encoded batches' items, told the submission's value by `mark_submitted` and kept
    /// until the recording is dropped (see [`crate::record::batch::BatchKind::submitted`]).
    encoded: Batches,
    /// Fresh buffers whose clear `encode` took (see "Clearing new buffers").
    pub(super) cleared: Vec<Arc<RawBuffer>>,
    /// Buffers the encoded commands use besides the ops' (the copy kernel's region tables),
    /// held until the recording is dropped, after its submission completed.
    pub(super) held: Vec<Arc<RawBuffer>>,
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
    if !device.same_device(&dst.raw.device) {
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
    if !device.same_device(&src.raw.device) {
        return Err(Error::InvalidArgument("buffer belongs to another device".into()));
    }
    if host_readable(&src.raw) {
        return Ok(None);
    }
    // Overwritten completely by the copy, and only that range is read: no clear needed.
    RawBuffer::new(device, src.raw.size, MemoryKind::Readback, false).map(Some)
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
            encoded: Batches::default(),
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

    /// Makes room for `n` batch items of a kind ahead (an empty recording's; see
    /// [`Batches::with_room`]).
    pub(crate) fn expect_batch_items(&mut self, n: usize) {
        debug_assert_eq!(self.batch_items, 0, "room is made before any item is added");
        self.batches = Batches::with_room(n);
    }

    /// Batch items recorded.
    pub(crate) fn batch_items(&self) -> usize {
        self.batch_items
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.host_reads.is_empty() && self.batch_items == 0
    }

    /// Recorded commands and batch items.
    pub fn len(&self) -> usize {
        self.ops.len() + self.batch_items
    }

    /// The recording held no command once its batches were encoded, and is dropped instead of
    /// submitted: its batch items are complete as they are.
    pub(crate) fn mark_nothing_to_submit(&mut self) {
        self.encoded.submitted(NOTHING_TO_SUBMIT);
    }

    /// Adds an item of a batch kind (see [`crate::record::batch`]).
    pub(crate) fn push_batch<K: BatchKind>(&mut self, kind: &Arc<K>, item: K::Item) -> Result<()> {
        if kind.device().is_some_and(|d| !d.same_device(&self.device)) {
            return Err(Error::InvalidArgument("a batch item of a kind made for another device".into()));
        }
        self.batches.push(kind, item);
        self.batch_items += 1;
        Ok(())
    }

    /// Adds `n` batch items gathered apart (a queue's lanes, see [`crate::executor`]), whose
    /// kinds were checked against this recording's device when they were added.
    pub(crate) fn absorb_batches(&mut self, batches: Batches, n: usize) {
        self.batches.merge(batches);
        self.batch_items += n;
    }

    /// A flush on copy queues whose batch items carry at least twice `part_bytes` (see
    /// [`crate::record::batch::BatchKind::bytes`]) keeps the first of up to `max_parts` runs of
    /// its items and returns recordings holding the others, in order, to be submitted after it;
    /// otherwise nothing. The commands and host reads stay here. With them, where the lanes'
    /// items can be told apart (see [`Batches::split`]), how many of them each part holds, this
    /// one first.
    pub(crate) fn split_batches(&mut self, part_bytes: u64, max_parts: usize) -> (Vec<Recording>, Option<Vec<usize>>) {
        if part_bytes == 0 || self.batch_items < 2 || max_parts < 2 {
            return (Vec::new(), None);
        }
        let parts = (self.batches.bytes() / part_bytes).min(max_parts as u64).min(self.batch_items as u64);
        if parts < 2 {
            return (Vec::new(), None);
        }
        let (runs, laned) = self.batches.split(parts as usize);
        let rest = runs
            .into_iter()
            .map(|(batches, n)| {
                self.batch_items -= n;
                let mut r = Recording::new(&self.device);
                r.absorb_batches(batches, n);
                r
            })
            .collect();
        (rest, laned)
    }

    fn push(&mut self, op: Op) {
        op.for_each_buffer(|b, _| {
            b.pending.fetch_add(1, Ordering::SeqCst);
        });
        self.ops.push(op);
    }

    /// Records that the ops were submitted with timeline value `value`.
    pub fn mark_submitted(&mut self, value: u64) {
        let mark = |b: &Arc<RawBuffer>, writes: bool| {
            b.last_use.fetch_max(value, Ordering::SeqCst);
            if writes {
                b.last_write.fetch_max(value, Ordering::SeqCst);
            }
            b.pending.fetch_sub(1, Ordering::SeqCst);
        };
        for op in &self.ops {
            op.for_each_buffer(mark);
        }
        // A buffer only read back may have been cleared by this submission: count it written.
        self.host_reads.iter().for_each(|b| mark(b, true));
        for b in self.cleared.drain(..) {
            b.clear_submitted();
        }
        self.encoded.submitted(value);
        self.submitted = true;
    }

    /// With GPU spans: for each op, the index in `owners` of the context that recorded it
    /// (`u32::MAX`: none).
    pub(super) fn op_owners(&self) -> Vec<u32> {
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
        if !self.device.same_device(&b.device) {
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
        if !k.made_by(&self.device) {
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
        if !self.device.same_device(&ts.raw.device) {
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

    /// Lets the batch kinds record their coalesced work, as ops like any other (see
    /// [`crate::record::batch`]). Done by `encode` if not before.
    pub(crate) fn encode_batches(&mut self) {
        self.batch_items = 0;
        for mut b in self.batches.take() {
            b.encode(self);
            self.encoded.keep(b);
        }
    }
}

impl crate::vk::device::Ordered for Recording {
    /// Whether a buffer this recording reads was written, or one it writes was used, by a
    /// submission that may still run (above `completed`; see [`RawBuffer::follows_running`]). A
    /// clear is a write, and so is a host read-back, which may clear. Pooled memory comes back
    /// only after every submission that used it completed, so a buffer made on reused memory
    /// starts with no such use.
    fn follows_running(&self, completed: u64) -> bool {
        let mut follows = self.host_reads.iter().any(|b| b.follows_running(true, completed));
        for op in &self.ops {
            if follows {
                break;
            }
            op.for_each_buffer(|b, writes| follows |= b.follows_running(writes, completed));
        }
        follows
    }

    fn submitted(&mut self, value: u64) {
        self.mark_submitted(value);
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

/// The contents of a buffer, available on the host once the work that produces it completes.
pub struct Readback<T: Pod> {
    pub(super) buffer: Arc<RawBuffer>,
    pub(super) len: usize,
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
        self.buffer.read_vec(self.len)
    }
}

/// Checks the size of a buffer bound at `info`: at most the device's range for its descriptor
/// type (the descriptor covers the whole buffer), and at least the static size of the kernel's
/// block, so that the kernel's fixed members lie inside the buffer.
fn check_binding_size(
    kernel: &RawKernel,
    info: &BindingInfo,
    size: u64,
    limits: &crate::vk::device::Limits,
) -> Result<()> {
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
