//! Typed GPU buffers allocated through gpu-allocator.
//!
//! A [`Buffer<T>`] owns an `Arc<RawBuffer>`. Every command that uses the buffer holds another
//! clone of that `Arc` until the timeline value of the submission that carried it is reached, so
//! dropping a `Buffer` while the GPU uses it only drops one reference: the memory is freed when
//! the last user (a retired submission) lets go. Nothing blocks in `Drop`.

use crate::device::{Device, DeviceShared};
use crate::error::{map_alloc, map_oom, Error, Result};
use ash::vk;
use bytemuck::Pod;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
    fn location(self) -> MemoryLocation {
        match self {
            MemoryKind::Device => MemoryLocation::GpuOnly,
            MemoryKind::Upload => MemoryLocation::CpuToGpu,
            MemoryKind::Readback => MemoryLocation::GpuToCpu,
        }
    }
}

/// The untyped buffer shared by a [`Buffer`] and the commands that use it.
pub(crate) struct RawBuffer {
    pub device: Device,
    pub buffer: vk::Buffer,
    allocation: Mutex<Option<Allocation>>,
    /// Host pointer to the start of the buffer, when its memory is host-visible.
    mapped: Option<std::ptr::NonNull<u8>>,
    pub size: u64,
    pub kind: MemoryKind,
    /// Unique per device; used as a key for hazard tracking.
    pub id: u64,
    /// Commands recorded that use this buffer and are not yet submitted (or discarded).
    pub pending: AtomicUsize,
    /// The highest timeline value of a submission that used this buffer.
    pub last_use: AtomicU64,
}

// SAFETY: the mapped pointer refers to memory owned by this object's allocation, which lives as
// long as the object. Host access through it is only done by `read_into`/`write_from`, which
// check that the GPU is not using the buffer (`is_idle`), and through `&mut`/`&` borrows that
// follow Rust's aliasing rules for the host side.
unsafe impl Send for RawBuffer {}
// SAFETY: as above; the mutable state is atomics and a mutex.
unsafe impl Sync for RawBuffer {}

impl RawBuffer {
    pub(crate) fn new(device: &Device, size: u64, kind: MemoryKind, name: &str) -> Result<Arc<Self>> {
        if size == 0 {
            return Err(Error::ZeroSize("buffer"));
        }
        let limit = device.limits().max_buffer_size;
        if size > limit {
            return Err(Error::TooLarge { what: "buffer", requested: size, limit });
        }
        device.shared.check_lost()?;
        let raw = device.raw();
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(
                vk::BufferUsageFlags::STORAGE_BUFFER
                    | vk::BufferUsageFlags::UNIFORM_BUFFER
                    | vk::BufferUsageFlags::TRANSFER_SRC
                    | vk::BufferUsageFlags::TRANSFER_DST,
            )
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: the device is live and `info` is valid (size > 0 checked above).
        let buffer = unsafe { raw.create_buffer(&info, None) }.map_err(map_oom("vkCreateBuffer"))?;
        // SAFETY: `buffer` was just created on this device.
        let requirements = unsafe { raw.get_buffer_memory_requirements(buffer) };
        let allocated =
            device.shared.allocator.lock().unwrap_or_else(|p| p.into_inner()).allocate(&AllocationCreateDesc {
                name,
                requirements,
                location: kind.location(),
                linear: true,
                allocation_scheme: AllocationScheme::GpuAllocatorManaged,
            });
        let allocation = match allocated {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: the buffer is unbound and unused; destroy it so it does not leak.
                unsafe { raw.destroy_buffer(buffer, None) };
                return Err(map_alloc(e));
            }
        };
        // SAFETY: the memory comes from the allocator for these requirements and is not bound.
        if let Err(e) = unsafe { raw.bind_buffer_memory(buffer, allocation.memory(), allocation.offset()) } {
            // SAFETY: unbound, unused buffer; the allocation is returned to the allocator.
            unsafe { raw.destroy_buffer(buffer, None) };
            let _ = device.shared.allocator.lock().unwrap_or_else(|p| p.into_inner()).free(allocation);
            return Err(map_oom("vkBindBufferMemory")(e));
        }
        let mapped = allocation.mapped_ptr().map(|p| p.cast::<u8>());
        Ok(Arc::new(RawBuffer {
            device: device.clone(),
            buffer,
            allocation: Mutex::new(Some(allocation)),
            mapped,
            size,
            kind,
            id: device.next_id(),
            pending: AtomicUsize::new(0),
            last_use: AtomicU64::new(0),
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
        // SAFETY: the range is inside the mapped allocation (checked above); the GPU is not
        // using the buffer (the caller checked `is_idle`), and host writes to coherent memory
        // become visible to later submissions at submit time.
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
        // SAFETY: inside the mapped allocation; the GPU finished writing (caller checked
        // `is_idle`), and the submission that wrote it ended with a barrier to host reads.
        unsafe { std::ptr::copy_nonoverlapping(ptr.as_ptr(), out.as_mut_ptr(), out.len()) };
        Ok(())
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        // Every submission that used this buffer held an Arc to it until its timeline value was
        // reached (or the device was lost), so the GPU no longer uses it.
        // SAFETY: see above; the buffer is not referenced by any pending command buffer.
        unsafe { self.device.raw().destroy_buffer(self.buffer, None) };
        if let Some(a) = self.allocation.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            if let Err(e) = self.device.shared.allocator.lock().unwrap_or_else(|p| p.into_inner()).free(a) {
                log::error!("vkasync: freeing a buffer's memory failed: {e}");
            }
        }
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

    /// Interop: the raw buffer handle. Work submitted by hand with [`Device::submit_raw`] is not
    /// tracked: keep the `Buffer` alive until that work completes.
    pub fn raw_handle(&self) -> vk::Buffer {
        self.raw.buffer
    }

    /// The device this buffer was allocated on.
    pub fn device(&self) -> &Device {
        &self.raw.device
    }
}
