//! Staging memory reused across flushes, for coalesced work ([`crate::record::batch`]).
//!
//! An [`Arena`] hands out [`Slot`]s: byte ranges of large mapped blocks, bump-allocated. A task
//! writes its input straight into its slot (the only host copy in), hands the slot to a batch
//! item, and after the flush completes reads the result straight out of it into the caller's
//! memory (the only host copy out). No buffer is allocated per item.
//!
//! Each block is one buffer in which the GPU works in place. On unified memory (lavapipe,
//! integrated GPUs) it is host-visible, and the host writes inputs and reads results in place.
//! On a discrete GPU a block has a host-cached twin of the same size (`Readback` memory): the
//! host writes the inputs there and reads the results from there, and the batch copies each
//! item's range to the GPU's buffer and back at the same offset (DMA over PCIe, 51 GB/s on the
//! H200, against 10 GB/s for one host thread writing into BAR memory). Host memory also lets
//! the crypto offload compute small flushes on the host, in place.
//!
//! Blocks are reused: a block goes back to the arena's spares when it is full, and is handed
//! out again only when no slot of it is alive and no GPU work uses it any more (its buffers'
//! timeline values were reached). So memory is never reused while the GPU may still use it,
//! and never freed under it (in-flight recordings hold the buffers themselves).
//!
//! So the flushes in flight use disjoint ranges of a block: the block's buffers are marked so
//! (`RawBuffer::mark_disjoint`), and a flush does not wait on the GPU for the one before it
//! (see [`crate::record`]).

#![cfg_attr(not(feature = "crypto"), allow(dead_code))] // staging serves the crypto module today

use crate::error::{Error, Result};
use crate::vk::buffer::{MemoryKind, RawBuffer};
use crate::vk::device::Device;
use std::sync::{Arc, Mutex};

/// Copies of at least this many bytes are spread over host threads ([`par_copy`]).
const PAR_COPY_MIN: usize = 4 << 20;

/// Copies `src` into `dst` (same length); large copies are spread over up to one thread per
/// host core, 2 MiB or more each (one host thread moves about 10 GB/s, far below what PCIe
/// and the GPU take).
pub(crate) fn par_copy(dst: &mut [u8], src: &[u8]) {
    debug_assert_eq!(dst.len(), src.len());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(dst.len() / (2 << 20));
    if dst.len() < PAR_COPY_MIN || threads < 2 {
        dst.copy_from_slice(src);
        return;
    }
    let per = dst.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (d, s_) in dst.chunks_mut(per).zip(src.chunks(per)) {
            s.spawn(move || d.copy_from_slice(s_));
        }
    });
}

/// Copies `parts` one after another into the start of `dst`, spread over host threads like
/// [`par_copy`] when they are large.
pub(crate) fn par_gather<M: AsRef<[u8]> + Sync>(dst: &mut [u8], parts: &[M]) {
    let total: usize = parts.iter().map(|p| p.as_ref().len()).sum();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(total / (2 << 20));
    let serial = |dst: &mut [u8], parts: &[M]| {
        let mut at = 0;
        for p in parts {
            let p = p.as_ref();
            dst[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
    };
    if total < PAR_COPY_MIN || threads < 2 {
        serial(dst, parts);
        return;
    }
    let per = total.div_ceil(threads);
    std::thread::scope(|s| {
        let mut rest_dst = &mut dst[..total];
        let mut rest = parts;
        while !rest.is_empty() {
            // A run of whole parts of about `per` bytes.
            let mut n = 0;
            let mut bytes = 0;
            while n < rest.len() && (n == 0 || bytes < per) {
                bytes += rest[n].as_ref().len();
                n += 1;
            }
            let (run, tail) = rest.split_at(n);
            let (d, dt) = std::mem::take(&mut rest_dst).split_at_mut(bytes);
            s.spawn(move || serial(d, run));
            rest = tail;
            rest_dst = dt;
        }
    });
}

/// Slots start at multiples of this many bytes, and their lengths are rounded up to it
/// (whole AES blocks).
pub(crate) const SLOT_ALIGN: u64 = 16;
/// The default block size.
const CHUNK_BYTES: u64 = 32 << 20;
/// Full blocks kept for reuse at most.
const MAX_SPARES: usize = 8;

/// One block: the buffer the GPU works in, and its host-side twin on a discrete GPU.
pub(crate) struct StagingBlock {
    pub work: Arc<RawBuffer>,
    pub home: Option<Arc<RawBuffer>>,
}

impl StagingBlock {
    fn host_side<'a>(work: &'a Arc<RawBuffer>, home: &'a Option<Arc<RawBuffer>>) -> &'a Arc<RawBuffer> {
        home.as_ref().unwrap_or(work)
    }

    fn idle(&self) -> bool {
        self.work.is_idle().unwrap_or(false) && self.home.as_ref().is_none_or(|h| h.is_idle().unwrap_or(false))
    }

    /// The buffer the host writes inputs into and reads results from.
    pub fn result_buffer(&self) -> &Arc<RawBuffer> {
        self.home.as_ref().unwrap_or(&self.work)
    }
}

struct State {
    current: Option<Arc<StagingBlock>>,
    used: u64,
    spares: Vec<Arc<StagingBlock>>,
}

/// Mapped staging memory, bump-allocated into [`Slot`]s (see the module docs).
pub(crate) struct Arena {
    device: Device,
    chunk_bytes: u64,
    /// The most one slot may hold: what one dispatch can bind.
    max_slot: u64,
    state: Mutex<State>,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena").field("chunk_bytes", &self.chunk_bytes).finish_non_exhaustive()
    }
}

/// A byte range of an arena chunk, owned by one item (clones refer to the same range). See
/// [`Arena`].
#[derive(Clone)]
pub(crate) struct Slot {
    pub chunk: Arc<StagingBlock>,
    pub offset: u64,
    pub len: u64,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").field("offset", &self.offset).field("len", &self.len).finish()
    }
}

impl Arena {
    pub fn new(device: &Device) -> Self {
        let limits = device.limits();
        let max_slot = limits.max_storage_buffer_range.min(limits.max_buffer_size) / SLOT_ALIGN * SLOT_ALIGN;
        Arena {
            device: device.clone(),
            chunk_bytes: CHUNK_BYTES.min(max_slot),
            max_slot,
            state: Mutex::new(State { current: None, used: 0, spares: Vec::new() }),
        }
    }

    /// The most bytes one slot may hold.
    pub fn max_slot(&self) -> u64 {
        self.max_slot
    }

    fn new_chunk(&self, size: u64) -> Result<Arc<StagingBlock>> {
        // Every slot is written before the GPU uses it: no clear needed.
        let (work, home) = if self.device.unified_memory() {
            (RawBuffer::new(&self.device, size, MemoryKind::Upload, false)?, None)
        } else {
            let work = RawBuffer::new(&self.device, size, MemoryKind::Device, false)?;
            (work, Some(RawBuffer::new(&self.device, size, MemoryKind::Readback, false)?))
        };
        if !StagingBlock::host_side(&work, &home).is_mapped() {
            return Err(Error::BufferUsage("the device offers no host-visible memory for staging".into()));
        }
        // Slots are bump-allocated and a block is reused only once no GPU work uses it: the
        // submissions in flight use disjoint ranges of it, and need not wait for each other.
        work.mark_disjoint();
        if let Some(h) = &home {
            h.mark_disjoint();
        }
        Ok(Arc::new(StagingBlock { work, home }))
    }

    /// Reserves `len` bytes (rounded up to [`SLOT_ALIGN`]). A slot larger than the chunk size
    /// gets a chunk of its own; one larger than [`Arena::max_slot`] is [`Error::TooLarge`].
    pub fn reserve(&self, len: u64) -> Result<Slot> {
        let len = len.max(1).next_multiple_of(SLOT_ALIGN);
        if len > self.max_slot {
            return Err(Error::TooLarge {
                what: "staging slot (one batch item)",
                requested: len,
                limit: self.max_slot,
            });
        }
        if len > self.chunk_bytes {
            return Ok(Slot { chunk: self.new_chunk(len)?, offset: 0, len });
        }
        let mut st = crate::util::lock(&self.state);
        if st.current.is_some() && st.used + len <= self.chunk_bytes {
            let offset = st.used;
            st.used += len;
            let chunk = st.current.clone().expect("checked");
            return Ok(Slot { chunk, offset, len });
        }
        // The current chunk is full: keep it for reuse, take an idle spare or a new chunk.
        if let Some(full) = st.current.take() {
            st.spares.push(full);
        }
        let chunk = match st.spares.iter().position(|c| Arc::strong_count(c) == 1 && c.idle()) {
            Some(i) => st.spares.swap_remove(i),
            None => {
                if st.spares.len() > MAX_SPARES {
                    // Oldest first; the GPU work that may still use one holds its buffers.
                    st.spares.remove(0);
                }
                self.new_chunk(self.chunk_bytes)?
            }
        };
        st.current = Some(chunk.clone());
        st.used = len;
        Ok(Slot { chunk, offset: 0, len })
    }
}

impl Slot {
    /// Writes `bytes` at `at` within the slot.
    pub fn write(&self, at: u64, bytes: &[u8]) -> Result<()> {
        self.check(at, bytes.len() as u64)?;
        // SAFETY: the range lies in this slot (checked), which this item owns alone; the item is
        // handed to a batch only after its writes, so no GPU work uses the range yet.
        unsafe { self.chunk.result_buffer().write_range(self.offset + at, bytes) }
    }

    /// Writes `bytes` at `at` within the slot, spreading a large copy over host threads.
    pub fn write_par(&self, at: u64, bytes: &[u8]) -> Result<()> {
        self.check(at, bytes.len() as u64)?;
        // SAFETY: as in `write`; the slice lives only for the copy.
        let all = unsafe { self.host_bytes()? };
        par_copy(&mut all[at as usize..at as usize + bytes.len()], bytes);
        Ok(())
    }

    /// Writes `parts` one after another from `at` within the slot (large copies spread over
    /// host threads).
    pub fn write_parts<M: AsRef<[u8]> + Sync>(&self, at: u64, parts: &[M]) -> Result<()> {
        let total: u64 = parts.iter().map(|p| p.as_ref().len() as u64).sum();
        self.check(at, total)?;
        // SAFETY: as in `write`; the slice lives only for the copy.
        let all = unsafe { self.host_bytes()? };
        par_gather(&mut all[at as usize..], parts);
        Ok(())
    }

    /// Zeroes `len` bytes at `at` within the slot.
    pub fn zero(&self, at: u64, len: u64) -> Result<()> {
        self.check(at, len)?;
        // SAFETY: as in `write`.
        unsafe { self.chunk.result_buffer().zero_range(self.offset + at, len) }
    }

    /// Reads `out.len()` bytes at `at` of the slot's results.
    ///
    /// # Safety
    /// The flush that carried this slot's item has completed (its `synchronize` resolved
    /// with `Ok`), and no later work writes the range.
    pub unsafe fn read(&self, at: u64, out: &mut [u8]) -> Result<()> {
        self.check(at, out.len() as u64)?;
        // SAFETY: the caller's contract; the batch ended its flush with a barrier to host reads.
        unsafe { self.chunk.result_buffer().read_range(self.offset + at, out) }
    }

    /// The slot's bytes on the host side, for computing in place on the host.
    ///
    /// # Safety
    /// The slot's item is not handed to GPU work (or that work completed), and no other
    /// reference to the slot's bytes is alive.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn host_bytes(&self) -> Result<&mut [u8]> {
        // SAFETY: the caller's contract; the host side is host memory (never BAR).
        unsafe { self.chunk.result_buffer().range_mut(self.offset, self.len) }
    }

    fn check(&self, at: u64, len: u64) -> Result<()> {
        if at.checked_add(len).is_none_or(|e| e > self.len) {
            return Err(Error::SizeMismatch { what: "range of a staging slot", expected: self.len, got: at + len });
        }
        Ok(())
    }
}
