//! Typed GPU buffers allocated through gpu-allocator.
//!
//! A [`Buffer<T>`] owns an `Arc<RawBuffer>`. Every command that uses the buffer holds another
//! clone of that `Arc` until the timeline value of the submission that carried it is reached, so
//! dropping a `Buffer` while the GPU uses it only drops one reference: the memory is freed when
//! the last user (a retired submission) lets go. Nothing blocks in `Drop`.

use crate::device::{Device, DeviceShared};
use crate::error::{Error, Result};
use crate::pool::{Chunk, Pool};
use ash::vk;
use bytemuck::Pod;
use gpu_allocator::MemoryLocation;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Where a buffer lives, which decides how the host reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// Device-local storage: fastest for kernels. Host-visible only on unified-memory devices.
    Device,
    /// Host-visible memory written by the host and read by the GPU (staging for uploads).
    Upload,
    /// Host-visible, host-cached memory written by the GPU and read by the host (read-backs).
    Readback,
}

impl MemoryKind {
    pub(crate) fn location(self) -> MemoryLocation {
        match self {
            MemoryKind::Device => MemoryLocation::GpuOnly,
            MemoryKind::Upload => MemoryLocation::CpuToGpu,
            MemoryKind::Readback => MemoryLocation::GpuToCpu,
        }
    }
}

/// The untyped buffer shared by a [`Buffer`] and the commands that use it: a range of a
/// `VkBuffer`.
pub(crate) struct RawBuffer {
    pub device: Device,
    /// The `VkBuffer` this buffer is a range of.
    pub buffer: vk::Buffer,
    /// Where the range starts in `buffer`.
    pub offset: u64,
    /// The pooled chunk this buffer is (see [`crate::pool`]).
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
    /// Dropped right after the memory goes back to the pool (a queue's memory-bound lease).
    pub attachment: std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>,
}

// SAFETY: the mapped pointer refers to memory owned by this object's backing, which lives as
// long as the object (a pooled chunk is not handed out again before this object drops). Host
// access through it is only done by `read_bytes`/`write_bytes`, whose callers check that the GPU
// is not using the buffer (`is_idle`).
unsafe impl Send for RawBuffer {}
// SAFETY: as above; the mutable state is atomics.
unsafe impl Sync for RawBuffer {}

impl RawBuffer {
    pub(crate) fn new(device: &Device, size: u64, kind: MemoryKind, _name: &str) -> Result<Arc<Self>> {
        if size == 0 {
            return Err(Error::ZeroSize("buffer"));
        }
        let limit = device.limits().max_buffer_size;
        if size > limit {
            return Err(Error::TooLarge { what: "buffer", requested: size, limit });
        }
        let shared = &device.shared;
        shared.check_lost()?;
        // Near the limit, the rounded-up chunk would not fit: take the size itself.
        let class = Pool::class_of(size).min(limit.max(size));
        let chunk = {
            let mut pool = shared.pool.lock().unwrap_or_else(|p| p.into_inner());
            pool.alloc(shared, &shared.allocator, kind, class)?
        };
        shared.live_buffers.fetch_add(1, Ordering::Relaxed);
        shared.live_bytes.fetch_add(size, Ordering::Relaxed);
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
            attachment: std::sync::OnceLock::new(),
        }))
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

    pub(crate) fn is_mapped(&self) -> bool {
        self.mapped.is_some()
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
        // SAFETY: the range is inside the mapped range (checked above); the GPU is not using the
        // buffer (the caller checked `is_idle`), and host writes to coherent memory become
        // visible to later submissions at submit time.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr().add(offset as usize), bytes.len()) };
        Ok(())
    }

    /// Copies the buffer's first `out.len()` bytes into `out`. The caller checked `is_idle`.
    pub(crate) fn read_bytes(&self, out: &mut [u8]) -> Result<()> {
        let ptr = self.mapped.ok_or_else(|| Error::BufferUsage("buffer memory is not host-visible".into()))?;
        if out.len() as u64 > self.size {
            return Err(Error::SizeMismatch {
                what: "read past the end of the buffer",
                expected: self.size,
                got: out.len() as u64,
            });
        }
        // SAFETY: inside the mapped range; the GPU finished writing (caller checked `is_idle`),
        // and the submission that wrote it ended with a barrier to host reads.
        unsafe { std::ptr::copy_nonoverlapping(ptr.as_ptr(), out.as_mut_ptr(), out.len()) };
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
        shared.pool.lock().unwrap_or_else(|p| p.into_inner()).free(self.kind, self.chunk);
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
    /// Allocates a buffer of `len` elements. Zero elements, or more bytes than the device allows
    /// in one buffer, are errors; so is an exhausted heap.
    pub fn new(device: &Device, len: usize, kind: MemoryKind) -> Result<Self> {
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
        let raw = RawBuffer::new(device, size, kind, std::any::type_name::<T>())?;
        Ok(Buffer { raw, len, _t: PhantomData })
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
        let mut out = vec![T::zeroed(); self.len];
        self.raw.read_bytes(bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }

    /// Interop: the raw `VkBuffer` and the byte offset where this buffer starts in it (small
    /// buffers are ranges of a shared pooled `VkBuffer`). Work submitted by hand with
    /// [`Device::submit_raw`] is not tracked: keep the `Buffer` alive until that work completes.
    pub fn raw_handle(&self) -> (vk::Buffer, u64) {
        (self.raw.buffer, self.raw.offset)
    }

    /// The device this buffer was allocated on.
    pub fn device(&self) -> &Device {
        &self.raw.device
    }
}
