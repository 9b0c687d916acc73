//! Sub-allocation of small buffers from pooled blocks.
//!
//! Creating a `VkBuffer`, allocating memory for it and binding the two costs microseconds per
//! buffer (and, for large pinned host buffers, milliseconds). Jobs that each need a few small
//! buffers (an upload staging area, a 4 KiB work buffer, a read-back area) would spend most of
//! their host time there. So buffers up to [`MAX_CARVED`] bytes are carved out of 16 MiB blocks,
//! one `VkBuffer` per block, in power-of-two size classes of at least 256 bytes (so every offset
//! satisfies any device's storage and uniform offset alignment). Larger buffers get a block of
//! their own, rounded up to a multiple of 4 MiB, and that block too is kept for the next buffer
//! of the same rounded size.
//!
//! A chunk goes back to its class's free list when its `RawBuffer` is dropped, which happens only
//! after every submission that used it has completed (the submissions hold `Arc`s to it), so a
//! chunk is never handed out while the GPU may still use it. Sharing one `VkBuffer` also lets
//! the encoder merge the copies of many jobs into one `vkCmdCopyBuffer` with many regions.
//!
//! Blocks are kept for reuse; [`crate::Device::trim`] frees the blocks with no chunk in use.
//!
//! Freed chunks first go to a small per-thread stash ([`Stash`]) that the same thread's next
//! buffers take from, so that threads making and dropping buffers at once do not all queue on
//! the pool's lock; a trim (also the one an allocation makes when the device's memory is
//! exhausted) gives the stashed chunks back to the pool first. Chunks move between a shard and
//! the pool in batches, under one hold of the pool's lock: a full shard gives 16 back, and an
//! empty one takes up to 16 free chunks of a small class (at most 64 KiB). Threads that drop
//! buffers are often not those that make them (a queue's finished submissions are retired on
//! whichever thread reads the counter), so without batches most of them took the pool's lock
//! for every buffer: 16 tokio workers running jobs of three buffers each spent a tenth of
//! their time there on the H200 (`BENCHMARKS.md`, 2026-12-01, before `ffbeeeb`).
//!
//! # Chunk alignment and robust buffer access
//! A chunk's neighbours in its block are other buffers, maybe other tasks'. With
//! `robustBufferAccess2` (`VK_EXT_robustness2`, see [`crate::Device::robust_access`]) a kernel's
//! accesses are checked against its descriptor's range, which is exactly the buffer's range,
//! *rounded up* to `robustStorageBufferAccessSizeAlignment` (1 or 4 by the specification) or
//! `robustUniformBufferAccessSizeAlignment` (a power of two of at most 256). Every chunk's offset
//! and size is a multiple of [`CHUNK_ALIGN`] (256): size classes are powers of two of at least
//! 256 bytes or multiples of 4 MiB, and chunks are laid out back to back from offset 0. So the
//! rounded range always ends inside the buffer's own chunk and never reaches a neighbour; the
//! device refuses to count on robustness2 if a driver reports a larger alignment. The bytes
//! between the buffer's end and that rounded end belong to the chunk and are zeroed with the
//! buffer (see [`crate::Buffer::new`]), so they show no earlier data either.

use crate::error::{map_alloc, map_oom, Error, Result};
use crate::util::IdMap;
use crate::vk::device::DeviceShared;
use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme, Allocator};
use gpu_allocator::MemoryLocation;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

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

/// Buffers up to this size are carved out of shared blocks.
pub(crate) const MAX_CARVED: u64 = 4 << 20;
const MIN_CLASS_LOG2: u32 = 8;
/// Every chunk's offset and size is a multiple of this (see the module docs).
pub(crate) const CHUNK_ALIGN: u64 = 1 << MIN_CLASS_LOG2;
const BLOCK_SIZE: u64 = 16 << 20;

/// One `VkBuffer` with its own memory.
pub(crate) struct Block {
    pub buffer: vk::Buffer,
    allocation: Option<Allocation>,
    pub mapped: Option<NonNull<u8>>,
    /// The buffer's device address (0 without buffer device addresses).
    pub address: u64,
    pub size: u64,
    /// Which heap counter of `DeviceShared::heap_used` it is counted in.
    heap: usize,
}

// SAFETY: the mapped pointer is owned by the allocation this block holds; the block is only
// reached through the pool's mutex or by the single RawBuffer that owns a dedicated block.
unsafe impl Send for Block {}
// SAFETY: as above.
unsafe impl Sync for Block {}

impl Block {
    /// Creates a buffer with its own memory, counted against its heap's size: an allocation that
    /// would take a heap past its size is [`Error::OutOfDeviceMemory`], whatever the driver
    /// would do (lavapipe, for one, never refuses).
    pub fn new(shared: &DeviceShared, allocator: &mut Allocator, size: u64, kind: MemoryKind) -> Result<Block> {
        let device = &shared.device;
        let mut usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::UNIFORM_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        if shared.bda {
            usage |= vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS;
        }
        let info = vk::BufferCreateInfo::default().size(size).usage(usage);
        // With copy queues of another family, buffers are shared with it (no ownership transfers).
        let info = match &shared.concurrent_families {
            Some(families) => info.sharing_mode(vk::SharingMode::CONCURRENT).queue_family_indices(families),
            None => info.sharing_mode(vk::SharingMode::EXCLUSIVE),
        };
        // SAFETY: the device is live and `info` is valid (size > 0 is the callers' invariant).
        let buffer = unsafe { device.create_buffer(&info, None) }.map_err(map_oom("vkCreateBuffer"))?;
        // SAFETY: `buffer` was just created on this device.
        let requirements = unsafe { device.get_buffer_memory_requirements(buffer) };
        let allocation = match allocator.allocate(&AllocationCreateDesc {
            name: "vkasync buffer",
            requirements,
            location: kind.location(),
            linear: true,
            allocation_scheme: AllocationScheme::GpuAllocatorManaged,
        }) {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: the buffer is unbound and unused.
                unsafe { device.destroy_buffer(buffer, None) };
                return Err(map_alloc(e));
            }
        };
        // SAFETY: the memory comes from the allocator for these requirements and is unbound.
        if let Err(e) = unsafe { device.bind_buffer_memory(buffer, allocation.memory(), allocation.offset()) } {
            // SAFETY: unbound, unused buffer; its allocation goes back to the allocator.
            unsafe { device.destroy_buffer(buffer, None) };
            let _ = allocator.free(allocation);
            return Err(map_oom("vkBindBufferMemory")(e));
        }
        let mapped = allocation.mapped_ptr().map(|p| p.cast::<u8>());
        let address = if shared.bda {
            // SAFETY: the buffer is bound to memory allocated with the device-address flag (the
            // allocator sets it when buffer device addresses are on) and has the usage.
            unsafe { device.get_buffer_device_address(&vk::BufferDeviceAddressInfo::default().buffer(buffer)) }
        } else {
            0
        };
        let device_local = allocation.memory_properties().contains(vk::MemoryPropertyFlags::DEVICE_LOCAL);
        let heap = if device_local || shared.heap_size[1] == 0 { 0 } else { 1 };
        let bytes = allocation.size();
        let used = shared.heap_used[heap].fetch_add(bytes, Ordering::Relaxed) + bytes;
        let block = Block { buffer, allocation: Some(allocation), mapped, address, size, heap };
        if used > shared.heap_size[heap] {
            let limit = shared.heap_size[heap];
            block.destroy(shared, allocator);
            return Err(Error::OutOfDeviceMemory(format!(
                "a {size}-byte buffer would take the heap past its {limit} bytes"
            )));
        }
        Ok(block)
    }

    /// Destroys the buffer and frees its memory. The GPU must no longer use it.
    pub fn destroy(mut self, shared: &DeviceShared, allocator: &mut Allocator) {
        // SAFETY: the caller guarantees the GPU no longer uses the buffer.
        unsafe { shared.device.destroy_buffer(self.buffer, None) };
        if let Some(a) = self.allocation.take() {
            shared.heap_used[self.heap].fetch_sub(a.size(), Ordering::Relaxed);
            if let Err(e) = allocator.free(a) {
                log::error!("vkasync: freeing buffer memory failed: {e}");
            }
        }
    }
}

/// A chunk handed out by the pool.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chunk {
    pub buffer: vk::Buffer,
    /// The device address of `buffer` (of offset 0; 0 without buffer device addresses).
    pub base_address: u64,
    pub offset: u64,
    pub mapped: Option<NonNull<u8>>,
    pub block: usize,
    /// The chunk's size: the key of its free list.
    pub class: u64,
}

// SAFETY: see Block.
unsafe impl Send for Chunk {}
// SAFETY: see Block.
unsafe impl Sync for Chunk {}

/// Free lists of chunks by (memory kind, size class), and the blocks they come from.
#[derive(Default)]
pub(crate) struct Pool {
    blocks: Vec<Option<(Block, MemoryKind, u64)>>,
    /// Chunks of each block now handed out.
    used: Vec<usize>,
    free: IdMap<(MemoryKind, u64), Vec<Chunk>>,
}

impl Pool {
    /// The chunk size that serves `size` bytes: a power of two of at least 256 bytes up to
    /// [`MAX_CARVED`], else a multiple of 4 MiB (a block of its own). Near `limit` (the largest
    /// buffer), where that would not fit, the size rounded up to [`CHUNK_ALIGN`]. Always a
    /// multiple of [`CHUNK_ALIGN`].
    pub fn class_of(size: u64, limit: u64) -> u64 {
        let class = if size <= MAX_CARVED {
            size.next_power_of_two().max(1 << MIN_CLASS_LOG2)
        } else {
            size.div_ceil(MAX_CARVED) * MAX_CARVED
        };
        if class > limit.max(size) {
            size.next_multiple_of(CHUNK_ALIGN)
        } else {
            class
        }
    }

    /// A chunk of `class` bytes; the allocator is locked only when a new block is needed.
    pub fn alloc(
        &mut self,
        device: &DeviceShared,
        allocator: &std::sync::Mutex<Allocator>,
        kind: MemoryKind,
        class: u64,
    ) -> Result<Chunk> {
        if self.free.get(&(kind, class)).is_none_or(|l| l.is_empty()) {
            let mut alloc = crate::util::lock(allocator);
            let size = class.max(BLOCK_SIZE);
            let block = match Block::new(device, &mut alloc, size, kind) {
                Err(Error::OutOfDeviceMemory(_)) if self.trim(device, &mut alloc) > 0 => {
                    // Blocks kept for reuse made room: try again.
                    Block::new(device, &mut alloc, size, kind)?
                }
                other => other?,
            };
            let list = self.free.entry((kind, class)).or_default();
            let index = self.blocks.len();
            let chunk_size = class;
            for i in (0..block.size / chunk_size).rev() {
                let offset = i * chunk_size;
                list.push(Chunk {
                    buffer: block.buffer,
                    base_address: block.address,
                    offset,
                    // SAFETY: `offset` is inside the block's mapping.
                    mapped: block.mapped.map(|p| unsafe { NonNull::new_unchecked(p.as_ptr().add(offset as usize)) }),
                    block: index,
                    class,
                });
            }
            self.blocks.push(Some((block, kind, class)));
            self.used.push(0);
        }
        let list = self.free.entry((kind, class)).or_default();
        let chunk = list.pop().ok_or_else(|| Error::Allocation("empty pool list".into()))?;
        self.used[chunk.block] += 1;
        Ok(chunk)
    }

    /// Up to `n` free chunks of `kind` and `class` that are already carved (no new block).
    pub fn take_free(&mut self, kind: MemoryKind, class: u64, n: usize) -> Vec<Chunk> {
        let Some(list) = self.free.get_mut(&(kind, class)) else { return Vec::new() };
        let at = list.len().saturating_sub(n);
        let taken: Vec<Chunk> = list.drain(at..).collect();
        for c in &taken {
            self.used[c.block] += 1;
        }
        taken
    }

    pub fn free(&mut self, kind: MemoryKind, chunk: Chunk) {
        self.used[chunk.block] -= 1;
        self.free.entry((kind, chunk.class)).or_default().push(chunk);
    }

    /// Frees every block with no chunk in use. Returns the bytes released.
    pub fn trim(&mut self, device: &DeviceShared, allocator: &mut Allocator) -> u64 {
        // Chunks stashed by threads keep their blocks in use: give them back first.
        device.stash.drain_into(self);
        let idle: Vec<usize> =
            (0..self.blocks.len()).filter(|&i| self.used[i] == 0 && self.blocks[i].is_some()).collect();
        if idle.is_empty() {
            return 0;
        }
        for list in self.free.values_mut() {
            list.retain(|c| !idle.contains(&c.block));
        }
        let mut released = 0;
        for i in idle {
            if let Some((block, _, _)) = self.blocks[i].take() {
                released += block.size;
                block.destroy(device, allocator);
            }
        }
        released
    }

    /// Bytes held in blocks.
    pub fn reserved(&self) -> u64 {
        self.blocks.iter().flatten().map(|(b, _, _)| b.size).sum()
    }

    /// Frees every block at device destruction. Chunks still in use (leaked after a device loss)
    /// are freed with them: the device is being destroyed.
    pub fn destroy_all(&mut self, device: &DeviceShared, allocator: &mut Allocator) {
        self.free.clear();
        for (block, _, _) in self.blocks.drain(..).flatten() {
            block.destroy(device, allocator);
        }
    }
}

/// Shards of the stash: threads are spread over them round-robin.
const STASH_SHARDS: usize = 16;
/// Free chunks one shard keeps at most (of any kinds and classes).
const STASH_CAP: usize = 32;
/// Chunks moved between a shard and the pool under one hold of the pool's lock: a shard that
/// is full gives this many back, and an empty one takes up to this many of a small class.
const STASH_BATCH: usize = 16;
/// The largest class a shard takes in batches (bigger chunks are taken one at a time, so that
/// no shard holds much memory that other threads cannot see).
const STASH_BATCH_CLASS: u64 = 64 << 10;
/// Chunks an empty shard takes besides the one asked for.
const STASH_REFILL: usize = STASH_BATCH - 1;

/// A chunk of `kind` and `class`: from this thread's stash, else from the pool, which then
/// also refills the stash with a batch of small chunks under the same hold of its lock.
pub(crate) fn take(shared: &DeviceShared, kind: MemoryKind, class: u64) -> Result<Chunk> {
    if let Some(c) = shared.stash.take(kind, class) {
        return Ok(c);
    }
    let (chunk, more) = {
        let mut pool = crate::util::lock(&shared.pool);
        let chunk = pool.alloc(shared, &shared.allocator, kind, class)?;
        let more = if Stash::batches(class) { pool.take_free(kind, class, STASH_REFILL) } else { Vec::new() };
        (chunk, more)
    };
    if !more.is_empty() {
        free_all(shared, shared.stash.refill(kind, more));
    }
    Ok(chunk)
}

/// Gives a freed chunk back: to this thread's stash, and a batch of it to the pool when it is
/// full.
pub(crate) fn give_back(shared: &DeviceShared, kind: MemoryKind, chunk: Chunk) {
    free_all(shared, shared.stash.put(kind, chunk));
}

/// Returns `chunks` to the pool under one hold of its lock.
fn free_all(shared: &DeviceShared, chunks: Vec<(MemoryKind, Chunk)>) {
    if chunks.is_empty() {
        return;
    }
    let mut pool = crate::util::lock(&shared.pool);
    for (kind, chunk) in chunks {
        pool.free(kind, chunk);
    }
}

/// Small caches of free chunks in front of the pool's lock. Many threads that make and drop
/// buffers at once (a `Queue` under tokio: three buffers per job) otherwise all queue on the one
/// pool lock; each thread now takes and returns chunks through its own shard first. Stashed
/// chunks stay counted as used by their blocks, so [`Pool::trim`] gives them back first
/// ([`Stash::drain_into`]).
pub(crate) struct Stash {
    shards: [std::sync::Mutex<Vec<(MemoryKind, Chunk)>>; STASH_SHARDS],
}

impl Default for Stash {
    fn default() -> Self {
        Stash { shards: std::array::from_fn(|_| std::sync::Mutex::new(Vec::new())) }
    }
}

impl Stash {
    /// This thread's shard.
    fn shard(&self) -> std::sync::MutexGuard<'_, Vec<(MemoryKind, Chunk)>> {
        use std::sync::atomic::AtomicUsize;
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STASH_SHARDS;
        }
        let i = SHARD.try_with(|s| *s).unwrap_or(0);
        crate::util::lock(&self.shards[i])
    }

    /// A stashed free chunk of `kind` and `class`, if this thread's shard has one.
    pub fn take(&self, kind: MemoryKind, class: u64) -> Option<Chunk> {
        let mut shard = self.shard();
        let i = shard.iter().rposition(|(k, c)| *k == kind && c.class == class)?;
        Some(shard.swap_remove(i).1)
    }

    /// Keeps a freed chunk in this thread's shard. When the shard is full, returns its oldest
    /// [`STASH_BATCH`] chunks, for the caller to give back to the pool under one hold of its
    /// lock (threads that free chunks are often not those that take them: a queue's
    /// submissions are retired, and their buffers dropped, on whichever thread reads the
    /// counter).
    pub fn put(&self, kind: MemoryKind, chunk: Chunk) -> Vec<(MemoryKind, Chunk)> {
        let mut shard = self.shard();
        let spill = if shard.len() >= STASH_CAP { shard.drain(..STASH_BATCH).collect() } else { Vec::new() };
        shard.push((kind, chunk));
        spill
    }

    /// Whether an empty shard should take a batch of chunks of `class` from the pool.
    pub fn batches(class: u64) -> bool {
        class <= STASH_BATCH_CLASS
    }

    /// Adds chunks taken from the pool for this thread's next buffers (those that do not fit
    /// are returned).
    pub fn refill(&self, kind: MemoryKind, chunks: Vec<Chunk>) -> Vec<(MemoryKind, Chunk)> {
        let mut shard = self.shard();
        let mut rest = Vec::new();
        for c in chunks {
            if shard.len() < STASH_CAP {
                shard.push((kind, c));
            } else {
                rest.push((kind, c));
            }
        }
        rest
    }

    /// Returns every stashed chunk to `pool` (at the start of [`Pool::trim`]). Lock order: the
    /// pool, then the shards (the other paths never hold a shard while they take the pool's
    /// lock).
    pub fn drain_into(&self, pool: &mut Pool) {
        for s in &self.shards {
            for (kind, chunk) in crate::util::lock(s).drain(..) {
                pool.free(kind, chunk);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(block: usize, offset: u64) -> Chunk {
        Chunk { buffer: vk::Buffer::null(), base_address: 0, offset, mapped: None, block, class: 256 }
    }

    #[test]
    fn a_full_shard_gives_back_a_batch_and_an_empty_one_takes_a_batch() {
        let stash = Stash::default();
        for i in 0..STASH_CAP as u64 {
            assert!(stash.put(MemoryKind::Device, chunk(0, i * 256)).is_empty());
        }
        // The shard is full: the next chunk stays, the oldest batch comes back for the pool.
        let spill = stash.put(MemoryKind::Device, chunk(0, 99 * 256));
        assert_eq!(spill.len(), STASH_BATCH);
        assert_eq!(spill[0].1.offset, 0);
        assert_eq!(stash.shard().len(), STASH_CAP - STASH_BATCH + 1);
        // A refill keeps what fits and returns the rest.
        let rest = stash.refill(MemoryKind::Device, (0..STASH_CAP as u64).map(|i| chunk(1, i * 256)).collect());
        assert_eq!(rest.len(), STASH_BATCH + 1);
        assert_eq!(stash.shard().len(), STASH_CAP);
        // Taking finds the chunks of a kind and class.
        assert!(stash.take(MemoryKind::Upload, 256).is_none());
        assert!(stash.take(MemoryKind::Device, 256).is_some());
        assert!(Stash::batches(4096) && !Stash::batches(1 << 20));
    }

    #[test]
    fn taking_free_chunks_counts_them_as_used_by_their_block() {
        let mut pool = Pool::default();
        pool.used.push(0);
        for i in 0..4 {
            pool.free.entry((MemoryKind::Device, 256)).or_default().push(chunk(0, i * 256));
        }
        let taken = pool.take_free(MemoryKind::Device, 256, 3);
        assert_eq!(taken.len(), 3);
        assert_eq!(pool.used[0], 3);
        assert_eq!(pool.take_free(MemoryKind::Device, 256, 3).len(), 1);
        assert_eq!(pool.used[0], 4);
        assert!(pool.take_free(MemoryKind::Upload, 256, 3).is_empty());
        for c in taken {
            pool.free(MemoryKind::Device, c);
        }
        assert_eq!(pool.used[0], 1);
    }
}
