//! Typed GPU buffers allocated through gpu-allocator.
//!
//! A [`Buffer<T>`] owns an `Arc<RawBuffer>`. Every command that uses the buffer holds another
//! clone of that `Arc` until the timeline value of the submission that carried it is reached, so
//! dropping a `Buffer` while the GPU uses it only drops one reference: the memory is freed when
//! the last user (a retired submission) lets go. Nothing blocks in `Drop`.
//!
//! # Zero-initialised buffers
//! The pool reuses memory, so a new buffer's memory may hold what an earlier buffer (another
//! task's keys, say) left there. Every buffer made by [`Buffer::new`] therefore reads as zeros
//! until it is written. The clear is lazy, so it costs nothing when the first use overwrites the
//! whole buffer anyway:
//!
//! - Each `RawBuffer` starts *fresh* (see [`Init`]): its bytes are not yet defined.
//! - The first host write ([`Buffer::write`], [`Buffer::from_slice`], a direct upload on unified
//!   memory) or host read zeroes, on the host, what that write does not cover, and marks the
//!   buffer defined. The host touches a buffer only while the GPU does not use it.
//! - When a submission is encoded, the first op that uses a fresh buffer decides: a copy that
//!   overwrites the whole buffer (an upload through staging) needs nothing; anything else (a
//!   dispatch, a partial upload, a read-back) gets a `vkCmdFillBuffer` of zeros recorded at the
//!   start of that submission, before its first phase (see [`crate::record::plan`]). The recording
//!   that took the clear marks the buffer defined once it is submitted, and gives the clear back
//!   if it is dropped unsubmitted.
//! - Clears are decided in submission order (at encode time), so recordings submitted in any
//!   order clear a buffer before whichever of them uses it first. If two threads encode work on
//!   the same fresh buffer at once (a race on its contents anyway), both clear it rather than
//!   risk one using it before the other's clear.
//! - Buffers the library makes for itself and overwrites completely (the staging areas of
//!   uploads and read-backs) skip all of this, and so does [`Buffer::new_uninit`].
//!
//! The clear covers the buffer's size rounded up to 4 bytes and to the robust-access alignment
//! (the bytes a kernel may still reach past the end, see [`crate::vk::pool`]), which always lies in
//! the buffer's own chunk.

use crate::error::{Error, Result};
use crate::vk::device::{Device, DeviceShared};
pub use crate::vk::pool::MemoryKind;
use crate::vk::pool::{Chunk, Pool};
use ash::vk;
use bytemuck::Pod;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

/// Whether a buffer's contents are defined yet (the lazy zero-initialisation's state; see the
/// module docs). Stored in an `AtomicU8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Init {
    /// Not yet written by anyone: must read as zeros, so it needs a clear before first use.
    Fresh = 0,
    /// An encoded but not yet submitted recording took the clear (it records the fill, or its
    /// first use overwrites everything). Becomes `Defined` when it is submitted, `Fresh` again if
    /// it is dropped unsubmitted.
    Clearing = 1,
    /// The contents are defined: cleared, written, or handed over as they are (`new_uninit`,
    /// `raw_handle`).
    Defined = 2,
}

/// The answer of [`RawBuffer::claim_clear`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The contents are defined: nothing to do.
    None,
    /// The caller took the clear.
    Took,
    /// Another recording took it and is not submitted: clear as well, to be safe.
    AlsoClear,
}

/// The untyped buffer shared by a [`Buffer`] and the commands that use it: a range of a
/// `VkBuffer`.
pub(crate) struct RawBuffer {
    pub device: Device,
    /// The `VkBuffer` this buffer is a range of.
    pub buffer: vk::Buffer,
    /// Where the range starts in `buffer`.
    pub offset: u64,
    /// The pooled chunk this buffer is (see [`crate::vk::pool`]).
    chunk: Chunk,
    /// Host pointer to the start of the range, when its memory is host-visible.
    mapped: Option<std::ptr::NonNull<u8>>,
    pub size: u64,
    pub kind: MemoryKind,
    /// Unique per device; used as a key for hazard tracking.
    pub id: u64,
    /// Commands recorded that use this buffer and are not yet submitted (or discarded).
    pub pending: AtomicUsize,
    /// The highest timeline value of a submission that used this buffer.
    pub last_use: AtomicU64,
    /// The highest timeline value of a submission that wrote this buffer.
    pub last_write: AtomicU64,
    /// Every GPU use of this buffer is of a byte range that no other submission uses while
    /// this one may run (a staging block's, see [`crate::record::staging`]): a submission that
    /// uses it never waits for another's use of it (see [`crate::record`]).
    disjoint: AtomicBool,
    /// Dropped right after the memory goes back to the pool (a queue's memory-bound lease).
    pub attachment: std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>,
    /// An [`Init`]: whether the contents still need clearing.
    init: AtomicU8,
    /// How many bytes a clear covers: `size` rounded up to 4 and to the device's robust-access
    /// alignment. Always within the chunk.
    pub clear_len: u64,
}

// SAFETY: the mapped pointer refers to memory owned by this object's backing, which lives as
// long as the object (a pooled chunk is not handed out again before this object drops). Host
// access through it is only done by `read_bytes`/`write_bytes`, whose callers check that the GPU
// is not using the buffer (`is_idle`).
unsafe impl Send for RawBuffer {}
// SAFETY: as above; the mutable state is atomics.
unsafe impl Sync for RawBuffer {}

impl RawBuffer {
    /// A buffer of `size` bytes. With `zeroed`, it reads as zeros until written (lazily cleared,
    /// see the module docs); without, it holds whatever its memory held, which only buffers
    /// that are completely overwritten before any read may do.
    pub(crate) fn new(device: &Device, size: u64, kind: MemoryKind, zeroed: bool) -> Result<Arc<Self>> {
        if size == 0 {
            return Err(Error::ZeroSize("buffer"));
        }
        let limit = device.limits().max_buffer_size;
        if size > limit {
            return Err(Error::TooLarge { what: "buffer", requested: size, limit });
        }
        let shared = &device.shared;
        shared.check_lost()?;
        let class = Pool::class_of(size, limit);
        // (On exhausted memory the pool trims, which takes back stashed chunks first.)
        let chunk = crate::vk::pool::take(shared, kind, class)?;
        shared.live_buffers.fetch_add(1, Ordering::Relaxed);
        shared.live_bytes.fetch_add(size, Ordering::Relaxed);
        let clear_len = size.next_multiple_of(shared.clear_align);
        debug_assert!(clear_len <= chunk.class, "a clear of {clear_len} bytes leaves a chunk of {}", chunk.class);
        Ok(Arc::new(RawBuffer {
            device: device.clone(),
            buffer: chunk.buffer,
            offset: chunk.offset,
            chunk,
            mapped: chunk.mapped,
            size,
            kind,
            id: device.next_id(),
            pending: AtomicUsize::new(0),
            last_use: AtomicU64::new(0),
            last_write: AtomicU64::new(0),
            disjoint: AtomicBool::new(false),
            attachment: std::sync::OnceLock::new(),
            init: AtomicU8::new(if zeroed { Init::Fresh } else { Init::Defined } as u8),
            clear_len,
        }))
    }

    /// The device address of `buffer` at offset 0 (0 without buffer device addresses; see
    /// [`crate::record::copies`]).
    pub(crate) fn base_address(&self) -> u64 {
        self.chunk.base_address
    }

    /// The size of the pooled chunk the buffer occupies.
    pub(crate) fn chunk_class(&self) -> u64 {
        self.chunk.class
    }

    /// Whether the contents still need a clear (no recording has taken it yet).
    #[inline]
    pub(crate) fn is_fresh(&self) -> bool {
        self.init.load(Ordering::Acquire) == Init::Fresh as u8
    }

    /// What a recording being encoded must do about the clear when it uses this buffer first.
    /// `Fresh` becomes `Clearing` and the caller gets [`Claim::Took`] (it must then call
    /// [`RawBuffer::clear_submitted`] or [`RawBuffer::clear_abandoned`]).
    ///
    /// `Clearing` means another thread's recording took the clear and is not submitted yet.
    /// Using one buffer from two recordings that no order ties together is a race on its
    /// contents anyway, but it must not show stale memory: that caller clears too
    /// ([`Claim::AlsoClear`]), without owning the state.
    #[inline]
    pub(crate) fn claim_clear(&self) -> Claim {
        if self.init.load(Ordering::Acquire) == Init::Defined as u8 {
            return Claim::None;
        }
        match self.init.compare_exchange(Init::Fresh as u8, Init::Clearing as u8, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Claim::Took,
            Err(s) if s == Init::Clearing as u8 => Claim::AlsoClear,
            Err(_) => Claim::None,
        }
    }

    /// The recording that took the clear was submitted: the contents are defined from now on.
    pub(crate) fn clear_submitted(&self) {
        self.init.store(Init::Defined as u8, Ordering::Release);
    }

    /// The recording that took the clear was dropped unsubmitted: the buffer is fresh again.
    pub(crate) fn clear_abandoned(&self) {
        let _ =
            self.init.compare_exchange(Init::Clearing as u8, Init::Fresh as u8, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Zeroes a fresh buffer on the host, except `[keep_from, keep_to)` (which the caller is
    /// about to write), and marks it defined. Nothing if it is not fresh. The caller checked
    /// that the GPU does not use the buffer (`is_idle`) and that it is mapped.
    fn define_on_host(&self, ptr: std::ptr::NonNull<u8>, keep_from: u64, keep_to: u64) {
        if !self.is_fresh()
            || self
                .init
                .compare_exchange(Init::Fresh as u8, Init::Defined as u8, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return;
        }
        debug_assert!(keep_from <= keep_to && keep_to <= self.clear_len);
        // SAFETY: both ranges lie inside the chunk's mapping (`clear_len` fits in the chunk);
        // the GPU does not use the buffer (the caller checked `is_idle`), and no other host
        // access runs: only the caller that won the compare-exchange above gets here.
        unsafe {
            std::ptr::write_bytes(ptr.as_ptr(), 0, keep_from as usize);
            std::ptr::write_bytes(ptr.as_ptr().add(keep_to as usize), 0, (self.clear_len - keep_to) as usize);
        }
    }

    /// Marks the contents defined as they are, for interop that hands the memory to the
    /// caller's own commands. A host-visible, idle, fresh buffer is zeroed on the host first.
    fn hand_over(&self) {
        if !self.is_fresh() {
            return;
        }
        if let (Some(ptr), Ok(true)) = (self.mapped, self.is_idle()) {
            self.define_on_host(ptr, 0, 0);
        } else {
            let _ =
                self.init.compare_exchange(Init::Fresh as u8, Init::Defined as u8, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// Whether the host may touch the contents: no recorded-but-unsubmitted command uses the
    /// buffer and every submission that used it has completed.
    pub(crate) fn is_idle(&self) -> Result<bool> {
        if self.pending.load(Ordering::SeqCst) > 0 {
            return Ok(false);
        }
        let last = self.last_use.load(Ordering::SeqCst);
        let shared: &DeviceShared = &self.device.shared;
        if last <= shared.cached_completed() {
            return Ok(true);
        }
        Ok(last <= shared.completed_value()?)
    }

    /// Marks the buffer as one whose submissions use disjoint ranges while in flight (see
    /// `disjoint`). Its owner keeps to that: a range is used again only after every submission
    /// that used it completed.
    pub(crate) fn mark_disjoint(&self) {
        self.disjoint.store(true, Ordering::Relaxed);
    }

    /// Whether a submission that reads (`writes` false) or writes this buffer must be ordered
    /// after an earlier submission's use of it: one that may still run (above `completed`, the
    /// last counter value read) used it (wrote it, for a read). Never for a buffer whose ranges
    /// its owner keeps apart. Decided under the queue's lock, when every earlier submission has
    /// marked its uses (see `DeviceShared::submit_ordered`).
    pub(crate) fn follows_running(&self, writes: bool, completed: u64) -> bool {
        if self.disjoint.load(Ordering::Relaxed) {
            return false;
        }
        let last = if writes { &self.last_use } else { &self.last_write };
        last.load(Ordering::SeqCst) > completed
    }

    pub(crate) fn is_mapped(&self) -> bool {
        self.mapped.is_some()
    }

    #[cfg_attr(not(feature = "crypto"), allow(dead_code))] // used by the crypto module
    /// Copies `bytes` into `[offset, offset + len)` of a mapped buffer from the host, without
    /// the whole-buffer idleness check (staging arenas, where the GPU uses other ranges of the
    /// same buffer meanwhile).
    ///
    /// # Safety
    /// No GPU work that may still run accesses this range, and no other thread accesses it.
    pub(crate) unsafe fn write_range(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        let ptr = self.mapped.ok_or_else(|| Error::BufferUsage("buffer memory is not host-visible".into()))?;
        if offset.checked_add(bytes.len() as u64).is_none_or(|e| e > self.size) {
            return Err(Error::SizeMismatch {
                what: "write past the end of the buffer",
                expected: self.size,
                got: offset,
            });
        }
        // SAFETY: inside the mapping (checked above); exclusive access to the range is the
        // caller's contract; host writes to coherent memory become visible at the next submit.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr().add(offset as usize), bytes.len()) };
        Ok(())
    }

    #[cfg_attr(not(feature = "crypto"), allow(dead_code))] // used by the crypto module
    /// Fills `[offset, offset + len)` of a mapped buffer with zeros (see [`Self::write_range`]).
    ///
    /// # Safety
    /// As [`Self::write_range`].
    pub(crate) unsafe fn zero_range(&self, offset: u64, len: u64) -> Result<()> {
        let ptr = self.mapped.ok_or_else(|| Error::BufferUsage("buffer memory is not host-visible".into()))?;
        if offset.checked_add(len).is_none_or(|e| e > self.size) {
            return Err(Error::SizeMismatch {
                what: "write past the end of the buffer",
                expected: self.size,
                got: offset,
            });
        }
        // SAFETY: as in `write_range`.
        unsafe { std::ptr::write_bytes(ptr.as_ptr().add(offset as usize), 0, len as usize) };
        Ok(())
    }

    #[cfg_attr(not(feature = "crypto"), allow(dead_code))] // used by the crypto module
    /// `[offset, offset + len)` of a mapped buffer as a mutable slice (the host side of the
    /// crypto offload computes in place there).
    ///
    /// # Safety
    /// No GPU work that may still run accesses this range, no other thread accesses it while
    /// the slice lives, and the memory is host-readable at a reasonable speed (not BAR).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn range_mut(&self, offset: u64, len: u64) -> Result<&mut [u8]> {
        let ptr = self.mapped.ok_or_else(|| Error::BufferUsage("buffer memory is not host-visible".into()))?;
        if offset.checked_add(len).is_none_or(|e| e > self.size) {
            return Err(Error::SizeMismatch {
                what: "range past the end of the buffer",
                expected: self.size,
                got: offset,
            });
        }
        // SAFETY: inside the mapping (checked above); exclusivity is the caller's contract.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr().add(offset as usize), len as usize) })
    }

    #[cfg_attr(not(feature = "crypto"), allow(dead_code))] // used by the crypto module
    /// Copies `[offset, offset + out.len())` of a mapped buffer into `out`, without the
    /// whole-buffer idleness check (see [`Self::write_range`]).
    ///
    /// # Safety
    /// The GPU work that wrote this range has completed, its submission ended with a barrier to
    /// host reads, and no GPU work that may still run writes the range.
    pub(crate) unsafe fn read_range(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        let ptr = self.mapped.ok_or_else(|| Error::BufferUsage("buffer memory is not host-visible".into()))?;
        if offset.checked_add(out.len() as u64).is_none_or(|e| e > self.size) {
            return Err(Error::SizeMismatch {
                what: "read past the end of the buffer",
                expected: self.size,
                got: offset,
            });
        }
        // SAFETY: inside the mapping (checked above); completion is the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(ptr.as_ptr().add(offset as usize), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Copies `bytes` into the buffer at `offset` from the host. The caller checked `is_idle`.
    pub(crate) fn write_bytes(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        let ptr = self.mapped.ok_or_else(|| Error::BufferUsage("buffer memory is not host-visible".into()))?;
        if offset + bytes.len() as u64 > self.size {
            return Err(Error::SizeMismatch {
                what: "write past the end of the buffer",
                expected: self.size,
                got: offset + bytes.len() as u64,
            });
        }
        self.define_on_host(ptr, offset, offset + bytes.len() as u64);
        // SAFETY: the range is inside the mapped range (checked above); the GPU is not using the
        // buffer (the caller checked `is_idle`), and host writes to coherent memory become
        // visible to later submissions at submit time.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr().add(offset as usize), bytes.len()) };
        Ok(())
    }

    /// The buffer's first `len` elements of `T` as a new vector. The caller checked `is_idle`.
    /// The copy writes every byte, so the vector is not zeroed first: for a 4 KiB read-back
    /// that zeroing was a fifth of an executor thread's instructions per job (callgrind on
    /// lavapipe, `bench_tasks --modes executor`).
    pub(crate) fn read_vec<T: bytemuck::Pod>(&self, len: usize) -> Result<Vec<T>> {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or(Error::SizeMismatch {
            what: "read past the end of the buffer",
            expected: self.size,
            got: u64::MAX,
        })?;
        let mut out: Vec<T> = Vec::with_capacity(len);
        // SAFETY: the vector's capacity holds at least `len` elements, `bytes` bytes, viewed
        // as bytes that may be uninitialised (`MaybeUninit<u8>` has no validity requirement).
        let spare =
            unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<std::mem::MaybeUninit<u8>>(), bytes) };
        self.read_bytes_uninit(spare)?;
        // SAFETY: the read wrote all `bytes` bytes (it returned `Ok`), and every bit pattern is
        // a valid `T` (`Pod`).
        unsafe { out.set_len(len) };
        Ok(out)
    }

    /// Copies the buffer's first `out.len()` bytes into `out`, memory that need not be
    /// initialised: on success every byte of `out` is written. The caller checked `is_idle`.
    pub(crate) fn read_bytes_uninit(&self, out: &mut [std::mem::MaybeUninit<u8>]) -> Result<()> {
        let ptr = self.mapped.ok_or_else(|| Error::BufferUsage("buffer memory is not host-visible".into()))?;
        if out.len() as u64 > self.size {
            return Err(Error::SizeMismatch {
                what: "read past the end of the buffer",
                expected: self.size,
                got: out.len() as u64,
            });
        }
        // Never written: zero it (reading zeros would do, but later GPU work must see them too).
        self.define_on_host(ptr, 0, 0);
        // SAFETY: inside the mapped range; the GPU finished writing (caller checked `is_idle`),
        // and the submission that wrote it ended with a barrier to host reads.
        unsafe { std::ptr::copy_nonoverlapping(ptr.as_ptr(), out.as_mut_ptr().cast::<u8>(), out.len()) };
        Ok(())
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        // Every submission that used this buffer held an Arc to it until its timeline value was
        // reached, so the GPU no longer uses it: the range can be reused or freed.
        let shared = &self.device.shared;
        shared.live_buffers.fetch_sub(1, Ordering::Relaxed);
        shared.live_bytes.fetch_sub(self.size, Ordering::Relaxed);
        crate::vk::pool::give_back(shared, self.kind, self.chunk);
    }
}

/// A GPU buffer of `len` elements of the plain-old-data type `T`.
///
/// ```no_run
/// use vkasync::{Buffer, Device, MemoryKind};
/// let device = Device::new()?;
/// let buf: Buffer<u32> = Buffer::new(&device, 1024, MemoryKind::Device)?;
/// assert_eq!(buf.len(), 1024);
/// # Ok::<(), vkasync::Error>(())
/// ```
pub struct Buffer<T: Pod> {
    /// Dropped with the handle, before `raw` (a job's live bytes under a queue's memory bound).
    pub(crate) hold: Option<Box<dyn Send + Sync>>,
    pub(crate) raw: Arc<RawBuffer>,
    len: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T: Pod> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("len", &self.len)
            .field("kind", &self.raw.kind)
            .field("id", &self.raw.id)
            .finish()
    }
}

impl<T: Pod> Buffer<T> {
    /// Allocates a buffer of `len` elements that reads as zeros until it is written, whatever
    /// its (pooled, reused) memory held before. Zero elements, or more bytes than the device
    /// allows in one buffer, are errors; so is an exhausted heap.
    ///
    /// The clear is lazy and costs nothing when the buffer's first use overwrites all of it (a
    /// full [`Buffer::write`] or upload); otherwise it is one `vkCmdFillBuffer` at the start of
    /// the submission that first uses the buffer, or a host `memset` when the host writes or
    /// reads it first.
    pub fn new(device: &Device, len: usize, kind: MemoryKind) -> Result<Self> {
        Self::with_init(device, len, kind, true)
    }

    /// Allocates a buffer of `len` elements **without clearing it**: it holds whatever its
    /// memory held, which may be the data of an earlier buffer, of another task. Use it only
    /// for a buffer whose every element is written before anything reads it, where even the
    /// lazy clear of [`Buffer::new`] must be avoided (a buffer that a kernel fills completely,
    /// say); a full upload or [`Buffer::write`] into a [`Buffer::new`] buffer already costs
    /// nothing extra.
    ///
    /// This is safe in Rust's sense (`T: Pod`, so any bytes are a valid `T`) but not
    /// confidential: a bug that reads an element before writing it shows another task's data.
    pub fn new_uninit(device: &Device, len: usize, kind: MemoryKind) -> Result<Self> {
        Self::with_init(device, len, kind, false)
    }

    fn with_init(device: &Device, len: usize, kind: MemoryKind, zeroed: bool) -> Result<Self> {
        if len == 0 {
            return Err(Error::ZeroSize("buffer"));
        }
        let size = (len as u64).checked_mul(std::mem::size_of::<T>() as u64).ok_or(Error::TooLarge {
            what: "buffer",
            requested: u64::MAX,
            limit: device.limits().max_buffer_size,
        })?;
        if std::mem::size_of::<T>() == 0 {
            return Err(Error::ZeroSize("buffer element type"));
        }
        let raw = RawBuffer::new(device, size, kind, zeroed)?;
        Ok(Buffer { hold: None, raw, len, _t: PhantomData })
    }

    /// Allocates a host-visible [`MemoryKind::Upload`] buffer holding `data`.
    pub fn from_slice(device: &Device, data: &[T]) -> Result<Self> {
        let buf = Self::new(device, data.len(), MemoryKind::Upload)?;
        buf.raw.write_bytes(0, bytemuck::cast_slice(data))?;
        Ok(buf)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: buffers have at least one element.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.raw.size
    }

    /// Where the buffer lives.
    pub fn kind(&self) -> MemoryKind {
        self.raw.kind
    }

    /// Whether the host can map it (always for upload and read-back buffers; for device buffers
    /// only on unified-memory devices).
    pub fn is_host_visible(&self) -> bool {
        self.raw.is_mapped()
    }

    /// Whether no GPU work uses the buffer now, so the host may read or write it.
    pub fn is_idle(&self) -> Result<bool> {
        self.raw.is_idle()
    }

    /// Writes `data` from the host. The buffer must be host-visible and idle
    /// ([`Error::NotReady`] otherwise); `data` must have exactly `len()` elements.
    pub fn write(&self, data: &[T]) -> Result<()> {
        if data.len() != self.len {
            return Err(Error::SizeMismatch {
                what: "buffer write",
                expected: self.len as u64,
                got: data.len() as u64,
            });
        }
        if !self.raw.is_idle()? {
            return Err(Error::NotReady);
        }
        self.raw.write_bytes(0, bytemuck::cast_slice(data))
    }

    /// Reads the contents on the host. The buffer must be host-visible and idle.
    pub fn read(&self) -> Result<Vec<T>> {
        if !self.raw.is_idle()? {
            return Err(Error::NotReady);
        }
        self.raw.read_vec(self.len)
    }

    /// Interop: the raw `VkBuffer` and the byte offset where this buffer starts in it (small
    /// buffers are ranges of a shared pooled `VkBuffer`). Work submitted by hand with
    /// [`Device::submit_raw`] is not tracked: keep the `Buffer` alive until that work completes.
    ///
    /// From this call on, vkasync leaves the contents to the caller: it no longer clears the
    /// buffer lazily (which could overwrite what the caller's own commands wrote). A new buffer
    /// that the host can map and that no work uses is zeroed on the host first; any other new
    /// buffer is handed over as its memory is, possibly with an earlier buffer's data (work
    /// recorded by hand can reach the whole shared `VkBuffer` anyway).
    pub fn raw_handle(&self) -> (vk::Buffer, u64) {
        self.raw.hand_over();
        (self.raw.buffer, self.raw.offset)
    }

    /// For tests and diagnostics: the `VkBuffer`, the byte offset in it and the size of the
    /// pooled chunk this buffer occupies (its neighbour in the same `VkBuffer`, if any, starts
    /// at `offset + chunk size`). Unlike [`Buffer::raw_handle`] it changes nothing.
    #[doc(hidden)]
    pub fn pool_location(&self) -> (vk::Buffer, u64, u64) {
        (self.raw.buffer, self.raw.offset, self.raw.chunk_class())
    }

    /// The device this buffer was allocated on.
    pub fn device(&self) -> &Device {
        &self.raw.device
    }
}
