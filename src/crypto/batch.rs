//! The batch table: every crypto call of every task in one flush, as one AES-CTR dispatch and
//! one SHA-256/HMAC dispatch (per staging chunk, and per window of long messages).
//!
//! A call ([`super::Crypto::prepare_aes_ctr`] and friends) reserves a staging slot
//! ([`crate::record::staging`]), writes its input there, and adds one [`Item`] to the flush through
//! [`crate::Recorder::batch`]. An item lists its parts:
//!
//! - `mac_first`: SHA-256/HMAC of ranges of the slot, run before AES (decrypt-side: verify
//!   the MAC of the ciphertext, then decrypt it in place);
//! - `aes`: AES-CTR in place over ranges of the slot, each with its own key and counter;
//! - `hashes`: SHA-256/HMAC of ranges of the slot, run after AES (encrypt-then-MAC);
//!
//! each digest written into the slot where the item asked.
//!
//! The item also writes its keys into its slot: the AES schedule ([`Item::put_aes_key`]) and
//! the HMAC midstates ([`Item::put_mac_key`]), after its data. The kernels read them there (the
//! staging chunk is bound as their key table too), so the calling task, on its own thread,
//! does everything per item that does not depend on the flush. The keys stay in the slot's
//! memory until it is written again: host memory of this process, of which a caller can read
//! only its results (a record's bytes and tag, a digest). At the flush,
//! [`CryptoBatch::encode`] only builds the row tables (one row per AES range with its place,
//! length, key place and counter; one row per message; in memory kept from the flushes before,
//! see [`Spare`]), touching nothing of the keys, and records,
//! per staging chunk: on a discrete GPU one copy of every item's slot from the chunk's host
//! side to the GPU's buffer, the `mac_first` hashes, the AES ranges, the hashes, and one copy
//! back. The recording orders them (they all use the chunk) and ends with a barrier to host
//! reads. When the flush completes, the caller reads its results out of its slot ([`Ticket`]).
//!
//! # Offload
//!
//! A flush that the offload rule puts on the host ([`OffloadRule`], see [`super::Offload`]) is
//! not sent to the GPU at all: `encode` computes every item on the host, in place in the slots,
//! with the RustCrypto crates, and marks the items done. The caller's wait returns as soon as
//! it sees that, without waiting for the flush's (then empty) submission.

use super::aes::HostCipher;
use super::credit::{HostCredit, CREDIT_FLUSHES};
use super::host;
use super::{AesKey, HmacKey};
use crate::error::{Error, Result};
use crate::record::batch::{BatchKind, Encoder};
use crate::record::staging::{Arena, Slot};
use crate::util::{lock, IdMap};
use crate::{kernels, Arg, Buffer, Device, Kernel, MemoryKind, Recorder};
use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Bytes of slot an AES key takes ([`Item::put_aes_key`]): the schedule's 15 round keys at
/// most (AES-256's; a shorter one is followed by zeros).
pub(crate) const AES_KEY_BYTES: u64 = 240;
/// Bytes of slot an HMAC key takes ([`Item::put_mac_key`]): its two midstates.
pub(crate) const MAC_KEY_BYTES: u64 = 64;

/// Where an item wrote an AES key into its slot ([`Item::put_aes_key`]; a multiple of 16), and
/// the key's rounds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AesKeyAt {
    pub at: u64,
    pub rounds: u32,
}

/// AES-CTR over `len` bytes at byte `at` of the slot (a multiple of 16), from `counter`, with
/// the key the item wrote at `key.at` of its slot. The item holds nothing of the key itself:
/// the GPU and the host path read it from the slot.
pub(crate) struct AesPart {
    pub at: u64,
    pub len: u64,
    pub key: AesKeyAt,
    pub counter: [u8; 16],
}

/// SHA-256 (no key) or HMAC-SHA256 of `len` bytes at byte `at` of the slot; the digest (eight
/// big-endian words) goes to byte `digest_at` (a multiple of 4, apart from every message); the
/// HMAC key's midstates are at `key_at` of the slot ([`Item::put_mac_key`]).
pub(crate) struct HashPart {
    pub at: u64,
    pub len: u64,
    pub digest_at: u64,
    pub key_at: Option<u64>,
}

/// What a task and its item share: the slot, an encoding error, and the timeline value of the
/// flush. The slot is here, not in the item, so that the flushing thread, which drops the
/// items, does not touch the staging chunk's reference count that every task's slot shares.
pub(crate) struct ItemState {
    slot: Slot,
    error: OnceLock<Error>,
    /// The flush's submission value (0 until submitted; `NOTHING_TO_SUBMIT` if the flush held
    /// no command), stored by [`CryptoBatch`]'s `submitted`.
    value: AtomicU64,
    /// Computed on the host when the flush was encoded (the offload).
    host_done: AtomicBool,
}

/// One call's work in one flush.
pub(crate) struct Item {
    pub mac_first: SmallVec<[HashPart; 1]>,
    pub aes: SmallVec<[AesPart; 1]>,
    pub hashes: SmallVec<[HashPart; 1]>,
    pub state: Arc<ItemState>,
    /// Where the slot lies, kept beside the parts: the flush reads the items in order, while
    /// each state was written by the thread that added the item (a load from another core's
    /// cache per item), so `encode` reads no state but a chunk's first item's.
    at: SlotAt,
}

/// An item's slot: its chunk's identity (the `Arc`'s address), its offset and length in the
/// chunk, and whether the chunk has a host side to copy from and back to (a discrete GPU).
#[derive(Debug, Clone, Copy)]
struct SlotAt {
    chunk: usize,
    offset: u64,
    len: u64,
    home: bool,
}

impl Item {
    pub fn new(slot: Slot) -> Self {
        let chunk = Arc::as_ptr(&slot.chunk) as usize;
        let at = SlotAt { chunk, offset: slot.offset, len: slot.len, home: slot.chunk.home.is_some() };
        let state =
            ItemState { slot, error: OnceLock::new(), value: AtomicU64::new(0), host_done: AtomicBool::new(false) };
        let (mac_first, aes, hashes) = (SmallVec::new(), SmallVec::new(), SmallVec::new());
        Item { mac_first, aes, hashes, state: Arc::new(state), at }
    }

    /// The item's staging slot.
    pub fn slot(&self) -> &Slot {
        &self.state.slot
    }

    /// Writes `key`'s schedule at byte `at` of the slot (a multiple of 16, with
    /// [`AES_KEY_BYTES`] of room) and returns the key for the item's [`AesPart`]s.
    pub fn put_aes_key(&self, key: &AesKey, at: u64) -> Result<AesKeyAt> {
        debug_assert_eq!(at % 16, 0, "a key's place in a slot is a multiple of 16");
        self.slot().write(at, bytemuck::cast_slice(&key.schedule))?;
        Ok(AesKeyAt { at, rounds: key.rounds })
    }

    /// Writes `key`'s midstates at byte `at` of the slot (a multiple of 16, with
    /// [`MAC_KEY_BYTES`] of room) and returns that place for the item's [`HashPart`]s.
    pub fn put_mac_key(&self, key: &HmacKey, at: u64) -> Result<u64> {
        debug_assert_eq!(at % 16, 0, "a key's place in a slot is a multiple of 16");
        let mut words = [0u32; 16];
        words[..8].copy_from_slice(&key.inner);
        words[8..].copy_from_slice(&key.outer);
        self.slot().write(at, bytemuck::cast_slice(&words))?;
        Ok(at)
    }

    /// Adds AES-CTR over `len` bytes at byte `at` of the slot from `counter`, with a key the
    /// item wrote into its slot.
    pub fn add_aes(&mut self, at: u64, len: u64, key: AesKeyAt, counter: [u8; 16]) {
        self.aes.push(AesPart { at, len, key, counter });
    }

    /// The caller's side of the item.
    pub fn ticket(&self) -> Ticket {
        Ticket { state: self.state.clone() }
    }

    /// The bytes the item's kernels read.
    fn work_bytes(&self) -> u64 {
        let hashes = self.mac_first.iter().chain(&self.hashes).map(|p| p.len).sum::<u64>();
        hashes + self.aes.iter().map(|p| p.len).sum::<u64>()
    }

    /// Computes the item on the host, in place in its slot (the offload).
    fn run_on_host(&self) -> Result<()> {
        // SAFETY: the item is being encoded: it was never handed to GPU work, its slot belongs
        // to it alone, and the caller reads the slot only after `host_done` is set below.
        let bytes = unsafe { self.slot().host_bytes()? };
        for p in &self.mac_first {
            hash_on_host(bytes, p);
        }
        for p in &self.aes {
            let cipher = HostCipher::new(&aes_key_in(bytes, p.key))?;
            let (at, len) = (p.at as usize, p.len as usize);
            cipher.apply_ctr(&p.counter, &mut bytes[at..at + len]);
        }
        for p in &self.hashes {
            hash_on_host(bytes, p);
        }
        self.state.host_done.store(true, Ordering::Release);
        Ok(())
    }
}

impl Drop for Item {
    /// An item dropped before a flush took it (its recording was discarded unsubmitted: a
    /// command list dropped, a queue closed or a device lost before the flush) never reaches
    /// the GPU: its caller is told so, instead of waiting for ever.
    fn drop(&mut self) {
        if self.state.value.load(Ordering::Acquire) == 0 && !self.state.host_done.load(Ordering::Acquire) {
            let _ = self.state.error.set(Error::SubmitFailed(
                "the work was discarded before it was submitted (its recording was dropped)".into(),
            ));
        }
    }
}

/// `N` native words at byte `at` of `bytes` (a key as [`Item::put_aes_key`] and
/// [`Item::put_mac_key`] wrote it).
fn words_in<const N: usize>(bytes: &[u8], at: u64) -> [u32; N] {
    let mut w = [0u32; N];
    for (k, word) in w.iter_mut().enumerate() {
        let b = at as usize + 4 * k;
        *word = u32::from_ne_bytes([bytes[b], bytes[b + 1], bytes[b + 2], bytes[b + 3]]);
    }
    w
}

/// The AES key whose schedule is at `key.at` of `bytes`: its first `rounds - 6` words, which
/// FIPS-197's expansion copies from the key (big-endian).
fn aes_key_in(bytes: &[u8], key: AesKeyAt) -> SmallVec<[u8; 32]> {
    let w: [u32; 8] = words_in(bytes, key.at);
    let nk = (key.rounds.saturating_sub(6) as usize).min(8);
    w[..nk].iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// SHA-256 or HMAC-SHA256 of a range of `bytes`, its digest written as the kernel writes it
/// (eight big-endian words, each stored as a native `u32`).
fn hash_on_host(bytes: &mut [u8], p: &HashPart) {
    let msg = &bytes[p.at as usize..(p.at + p.len) as usize];
    let digest = match p.key_at {
        None => host::sha256(msg),
        Some(at) => {
            let mid: [u32; 16] = words_in(bytes, at);
            let (inner, outer) = (mid[..8].try_into().expect("8"), mid[8..].try_into().expect("8"));
            host::hmac_sha256_from_midstates(inner, outer, msg)
        }
    };
    let at = p.digest_at as usize;
    for (k, w) in digest.chunks_exact(4).enumerate() {
        let word = u32::from_be_bytes([w[0], w[1], w[2], w[3]]);
        bytes[at + 4 * k..at + 4 * k + 4].copy_from_slice(&word.to_ne_bytes());
    }
}

/// The caller's side of an [`Item`]: reads its results once its flush has completed.
#[derive(Clone)]
pub(crate) struct Ticket {
    state: Arc<ItemState>,
}

impl Ticket {
    /// `Ok` once the item's flush has completed; [`Error::NotReady`] before; the encoding
    /// error if its batch failed.
    fn ready(&self) -> Result<()> {
        if let Some(e) = self.state.error.get() {
            return Err(e.clone());
        }
        match self.progress()? {
            Some(true) => Ok(()),
            _ => Err(Error::NotReady),
        }
    }

    /// Where the item's work stands, its error aside: `None` while no submitted flush carries it
    /// (not yet encoded, or never submitted); `Some(done)` once it was computed on the host or
    /// its flush was submitted. An error reading the device's counter is returned.
    fn progress(&self) -> Result<Option<bool>> {
        self.progress_by(true)
    }

    /// [`Ticket::progress`], the counter read only where `read` (else the last value read).
    fn progress_by(&self, read: bool) -> Result<Option<bool>> {
        if self.state.host_done.load(Ordering::Acquire) {
            return Ok(Some(true));
        }
        let value = self.state.value.load(Ordering::Acquire);
        if value == 0 {
            return Ok(None);
        }
        if value == crate::record::recording::NOTHING_TO_SUBMIT {
            return Ok(Some(true));
        }
        let device = &self.state.slot.chunk.work.device;
        Ok(Some(value <= device.cached_completed() || (read && value <= device.completed_value()?)))
    }

    /// Whether GPU work may still read or write the item's slot: its flush is not yet encoded,
    /// or was submitted and has not completed. `false` once the item was computed on the host,
    /// once its flush completed, and once its batch failed before it was submitted (a failed
    /// batch whose flush was submitted anyway is in use until that flush completes).
    pub fn in_use(&self) -> bool {
        match self.progress() {
            Ok(Some(done)) => !done,
            // Not yet encoded, or encoding failed before this item was given its flush, or the
            // flush was dropped unsubmitted: only the error tells the last two apart.
            Ok(None) => self.state.error.get().is_none(),
            // The counter cannot be read (the device is lost): the GPU may still hold it.
            Err(_) => true,
        }
    }

    /// Whether the caller need not wait for the GPU: the item was computed on the host, its
    /// batch failed (the error is in [`Ticket::read`]'s result), or the submission that carried
    /// it is known to have completed (the last counter value read, no new read). The last lets
    /// an item of a flush sent in parts finish when its own part completes, before the flush's
    /// last part (see [`crate::executor::backend`]'s `part_wakes`).
    pub fn settled(&self) -> bool {
        self.state.error.get().is_some() || matches!(self.progress_by(false), Ok(Some(true)))
    }

    /// Copies `out.len()` result bytes at byte `at` of the slot into `out`.
    pub fn read(&self, at: u64, out: &mut [u8]) -> Result<()> {
        self.ready()?;
        // SAFETY: the flush that carried the item completed (checked just above), it ended with
        // a barrier to host reads, and nothing else writes the slot: the item owned it alone.
        unsafe { self.state.slot.read(at, out) }
    }

    /// As [`Ticket::read`], spreading a large copy over host threads.
    pub fn read_par(&self, at: u64, out: &mut [u8]) -> Result<()> {
        self.ready()?;
        if at.checked_add(out.len() as u64).is_none_or(|e| e > self.state.slot.len) {
            return Err(Error::SizeMismatch {
                what: "range of a staging slot",
                expected: self.state.slot.len,
                got: at,
            });
        }
        // SAFETY: as in `read`; nothing else uses the slot's bytes while the slice lives.
        let all = unsafe { self.state.slot.host_bytes()? };
        crate::record::staging::par_copy(out, &all[at as usize..at as usize + out.len()]);
        Ok(())
    }

    /// Eight big-endian words at byte `at` of the slot, as the usual 32 digest bytes.
    pub fn digest(&self, at: u64) -> Result<[u8; 32]> {
        let mut raw = [0u8; 32];
        self.read(at, &mut raw)?;
        let words: [u32; 8] = bytemuck::cast(raw);
        Ok(host::digest_bytes(&words))
    }

    /// Overwrites the slot's readable copy with zeros (plaintext that must not be released).
    pub fn scrub(&self) {
        if self.ready().is_ok() {
            let buf = self.state.slot.chunk.result_buffer();
            // SAFETY: the flush completed (checked), and the slot belongs to this item alone.
            let _ = unsafe { buf.zero_range(self.state.slot.offset, self.state.slot.len) };
        }
    }
}

/// The batch kind of one [`super::Crypto`]: its multi-record kernels and staging arena.
pub(crate) struct CryptoBatch {
    pub arena: Arena,
    /// The blocks of [`super::StagedRecord`]s, apart from the per-call slots of `arena`: a block
    /// is reused only once no slot of it is alive, and records kept for long would otherwise
    /// hold back the blocks that calls cycle through.
    pub staged: Arena,
    aes: Kernel,
    hash: Kernel,
    /// Te0 as the AES kernel's uniform table.
    table: Arc<Buffer<u32>>,
    max_groups: u32,
    pub window: u32,
    /// Which flushes run on the host.
    pub offload: OffloadRule,
    /// How much `Auto` seals at once before records join a flush again (see [`super::credit`]).
    pub credit: HostCredit,
    /// The row tables of flushes encoded before, cleared, for the next (see [`Spare`]).
    spare: Mutex<Spare>,
}

/// When a flush runs on the host (see [`super::Offload`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OffloadRule {
    /// Below this many bytes.
    Below(u64),
    /// The runtime's model on a GPU (see [`super::Offload::Auto`]): on the host when the
    /// flush's items are small on average (below `small_item` bytes of work each: the GPU path
    /// costs each item more host time, in staging, encoding and copies, than its crypto costs
    /// on the host) or when the flush is below `base` plus `per_block` per 64-byte block of its
    /// longest hashed message (the GPU's latency, which grows with that message, is not paid
    /// back); never for more than `max_host` bytes (the flushing thread would hold up the
    /// queue's next flush for milliseconds).
    Model { base: u64, per_block: u64, small_item: u64, max_host: u64 },
}

/// The longest record the record layer seals or opens at once in the calling task (see
/// [`OffloadRule::inline`]): about 80 µs of one host core.
const INLINE_MAX_BYTES: u64 = 64 * 1024;

/// Whether a record goes to the host at once, in the calling task (see [`OffloadRule::inline`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inline {
    /// Always: every flush it could join would run on the host.
    Always,
    /// While the [`HostCredit`] has room for the record's `work` (its AES and HMAC bytes) within
    /// `limit` bytes ([`CREDIT_FLUSHES`] times `Auto`'s crossover for a flush of such records;
    /// see [`super::credit`]).
    Credit { work: u64, limit: u64 },
    /// Never: it joins a flush.
    Never,
}

impl OffloadRule {
    /// Where a record of `len` bytes goes: at once on the host whatever flush it would join
    /// (always on the host, [`super::Offload::Host`] or `Auto` on a CPU device; or `Auto`'s
    /// model with a record too small for the GPU to pay back), at once while the load is one
    /// the host takes (`Auto`'s model with a larger record that a flush of a few would keep on
    /// the host), or through a flush. At once means in the calling task, on the caller's buffer,
    /// with no staging, no flush and no wait, and only up to [`INLINE_MAX_BYTES`]: a longer
    /// record joins a flush and runs there.
    pub fn inline(self, len: u64) -> Inline {
        let work = 2 * (16 + len);
        if len > INLINE_MAX_BYTES {
            return Inline::Never;
        }
        match self {
            OffloadRule::Below(n) if n == u64::MAX => Inline::Always,
            OffloadRule::Below(_) => Inline::Never,
            OffloadRule::Model { small_item, .. } if work < small_item => Inline::Always,
            OffloadRule::Model { base, per_block, .. } => {
                // The record's HMAC covers its nonce and data (one message, as `encode` counts it).
                let limit = base.saturating_add(per_block.saturating_mul(message_blocks(16 + len)));
                if work <= limit {
                    Inline::Credit { work, limit: limit.saturating_mul(CREDIT_FLUSHES) }
                } else {
                    Inline::Never
                }
            }
        }
    }

    /// Whether a flush of `bytes` whose longest hashed message has `longest_blocks` is light: at
    /// most half of `Auto`'s crossover for it (see [`super::credit`]); never for other rules.
    fn light(self, bytes: u64, longest_blocks: u64) -> bool {
        match self {
            OffloadRule::Below(_) => false,
            OffloadRule::Model { base, per_block, .. } => {
                bytes.saturating_mul(2) <= base.saturating_add(per_block.saturating_mul(longest_blocks))
            }
        }
    }

    fn on_host(self, bytes: u64, longest_blocks: u64, items: usize) -> bool {
        match self {
            OffloadRule::Below(n) => bytes < n,
            OffloadRule::Model { base, per_block, small_item, max_host } => {
                bytes <= max_host
                    && (bytes < small_item.saturating_mul(items as u64)
                        || bytes < base.saturating_add(per_block.saturating_mul(longest_blocks)))
            }
        }
    }
}

/// The blocks an HMAC of a `len`-byte message compresses (with its padding and the outer hash).
fn message_blocks(len: u64) -> u64 {
    (len + 9).div_ceil(64) + 1
}

impl std::fmt::Debug for CryptoBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CryptoBatch").finish_non_exhaustive()
    }
}

impl CryptoBatch {
    pub fn new(device: &Device, max_groups: u32, window: u32, offload: OffloadRule) -> Result<Self> {
        let limits = device.limits();
        let aes = if limits.max_compute_shared_memory_size >= 32 * 1024 {
            &kernels::AES_CTR_MULTI
        } else {
            &kernels::AES_CTR_MULTI_C16
        };
        let te0 = host::aes_key_tables(&[0; 60])[60..].to_vec();
        let table = Buffer::<u32>::new_uninit(device, te0.len(), MemoryKind::Upload)?;
        table.write(&te0)?;
        let table = Arc::new(table);
        Ok(CryptoBatch {
            arena: Arena::new(device),
            staged: Arena::new(device),
            aes: Kernel::new(device, aes)?,
            hash: Kernel::new(device, &kernels::SHA256_MULTI)?,
            table,
            max_groups,
            window,
            offload,
            credit: HostCredit::default(),
            spare: Mutex::default(),
        })
    }
}

impl CryptoBatch {
    /// The same kernels with other dispatch limits (tests), and an arena of its own.
    pub fn reconfigured(&self, max_groups: u32, window: u32, offload: OffloadRule) -> Self {
        CryptoBatch {
            arena: Arena::new(self.table.device()),
            staged: Arena::new(self.table.device()),
            aes: self.aes.clone(),
            hash: self.hash.clone(),
            table: self.table.clone(),
            max_groups,
            window,
            offload,
            credit: HostCredit::default(),
            spare: Mutex::default(),
        }
    }
}

/// A small host-written table for one flush.
fn table<T: bytemuck::Pod + Default>(device: &Device, rows: &[T]) -> Result<Buffer<T>> {
    let buf = Buffer::<T>::new_uninit(device, rows.len().max(1), MemoryKind::Upload)?;
    if rows.is_empty() {
        buf.write(&[T::default()])?;
    } else {
        buf.write(rows)?;
    }
    Ok(buf)
}

/// One chunk's rows.
#[derive(Default)]
struct Group {
    mac_first: Vec<[u32; 4]>,
    mac_first_max: u64,
    aes: Vec<[u32; 4]>,
    aes_blocks: u64,
    hashes: Vec<[u32; 4]>,
    hashes_max: u64,
    /// Slot ranges to bring home (discrete GPUs).
    home: Vec<(u64, u64)>,
}

/// A flush's rows, from [`CryptoBatch::rows`].
struct Rows {
    groups: Vec<(Arc<crate::record::staging::StagingBlock>, Group)>,
    built: Result<()>,
    bytes: u64,
    longest: Option<u64>,
}

fn to_u32(v: u64, what: &'static str) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::TooLarge { what, requested: v, limit: u32::MAX as u64 })
}

/// Cleared row tables of earlier flushes, kept with their memory: allocated afresh, the rows of
/// thousands of items are new pages, each faulted in on its first write. Kept, the next flush
/// writes into memory already mapped (on the H200's host, with the keys then in tables of their
/// own, the rows of 10,000 records took 1.9–2.2 ms per run instead of 3.5–3.6 at 16 KiB:
/// `benchmarks/2026-12-04-h200-2b64879/`). At most [`SPARE_GROUPS`] groups are kept, none
/// larger than [`SPARE_MAX_BYTES`] (a rare huge flush does not keep its memory for ever).
#[derive(Default)]
struct Spare {
    groups: Vec<Group>,
}

/// Groups kept at most (a flush has one per staging chunk its items use).
const SPARE_GROUPS: usize = 32;
/// The largest table kept (about a million rows).
const SPARE_MAX_BYTES: usize = 16 << 20;

impl Spare {
    fn group(&mut self) -> Group {
        self.groups.pop().unwrap_or_default()
    }

    fn give_back(&mut self, groups: impl IntoIterator<Item = Group>) {
        for mut g in groups {
            if self.groups.len() >= SPARE_GROUPS {
                break;
            }
            let rows = g.mac_first.capacity() + g.aes.capacity() + g.hashes.capacity() + g.home.capacity();
            if 16 * rows <= SPARE_MAX_BYTES {
                g.clear();
                self.groups.push(g);
            }
        }
    }
}

impl Group {
    /// Empties the rows for the next flush, keeping their memory.
    fn clear(&mut self) {
        self.mac_first.clear();
        self.aes.clear();
        self.hashes.clear();
        self.home.clear();
        (self.mac_first_max, self.aes_blocks, self.hashes_max) = (0, 0, 0);
    }

    /// The rows of `it`, whose slot is at `offset` in this group's chunk, `len` bytes long;
    /// `home`: the slot has a host side to copy from and back to.
    fn add(&mut self, it: &Item, offset: u64, len: u64, home: bool) -> Result<()> {
        for p in &it.mac_first {
            self.mac_first.push(Group::hash_row(offset, p)?);
            self.mac_first_max = self.mac_first_max.max(p.len);
        }
        for p in it.aes.iter().filter(|p| p.len > 0) {
            self.aes_rows(offset, p)?;
        }
        for p in &it.hashes {
            self.hashes.push(Group::hash_row(offset, p)?);
            self.hashes_max = self.hashes_max.max(p.len);
        }
        if home {
            self.home.push((offset, len));
        }
        Ok(())
    }

    /// The kernel's row of a message of the item whose slot is at `offset` in its chunk (see
    /// `shaders/sha256_multi.comp`): its key is read from the slot.
    fn hash_row(offset: u64, p: &HashPart) -> Result<[u32; 4]> {
        let key = match p.key_at {
            Some(at) => to_u32((offset + at) / 16, "key offset in a staging chunk")?,
            None => u32::MAX,
        };
        Ok([
            to_u32(offset + p.at, "message offset in a staging chunk")?,
            to_u32(p.len, "message")?,
            key,
            to_u32((offset + p.digest_at) / 4, "digest offset in a staging chunk")?,
        ])
    }

    /// The kernel's two rows of an AES range of the item whose slot is at `offset` in its chunk
    /// (see `shaders/aes_ctr_multi.comp`), its first block after the group's blocks so far; its
    /// key is read from the slot.
    fn aes_rows(&mut self, offset: u64, p: &AesPart) -> Result<()> {
        let blocks = p.len.div_ceil(16);
        if blocks >= 1 << 28 {
            return Err(Error::TooLarge { what: "AES range (blocks)", requested: blocks, limit: (1 << 28) - 1 });
        }
        self.aes.push([
            to_u32(self.aes_blocks, "AES blocks in one flush")?,
            to_u32((offset + p.at) / 16, "AES data offset in a staging chunk")?,
            blocks as u32 | p.key.rounds << 28,
            to_u32((offset + p.key.at) / 16, "key offset in a staging chunk")?,
        ]);
        self.aes.push(host::ctr_words(&p.counter));
        self.aes_blocks += blocks;
        Ok(())
    }
}

impl BatchKind for CryptoBatch {
    type Item = Item;

    fn encode(&self, items: &mut Vec<Item>, enc: &mut Encoder<'_>) -> Result<()> {
        let Rows { mut groups, built, bytes, longest } = self.rows(items);
        let longest_blocks = longest.map_or(0, message_blocks);
        let on_host = self.offload.on_host(bytes, longest_blocks, items.len());
        self.credit.flushed(on_host, items.len(), self.offload.light(bytes, longest_blocks));
        if on_host || built.is_err() {
            lock(&self.spare).give_back(groups.into_iter().map(|(_, g)| g));
            if !on_host {
                return built;
            }
            for it in items.iter() {
                it.run_on_host()?;
            }
            return Ok(());
        }
        let device = enc.device().clone();
        for (chunk, group) in groups.iter_mut() {
            let data = Arg { buffer: chunk.work.clone(), kind: crate::BindingKind::Storage };
            // On a discrete GPU: the inputs from the host side, then the same ranges back.
            let mut ranges: Vec<(u64, u64, u64)> = Vec::with_capacity(group.home.len());
            if let Some(home) = &chunk.home {
                group.home.sort_unstable();
                for &(off, len) in &group.home {
                    match ranges.last_mut() {
                        Some(r) if r.0 + r.2 == off => r.2 += len,
                        _ => ranges.push((off, off, len)),
                    }
                }
                enc.copy_ranges(home, &chunk.work, &ranges)?;
            }
            // The keys are in the items' slots: the chunk is the kernels' key table too.
            self.hashes(enc, &data, &group.mac_first, group.mac_first_max)?;
            if !group.aes.is_empty() {
                let records = table(&device, &group.aes)?;
                let nrecords = to_u32(group.aes.len() as u64 / 2, "AES ranges in one flush")?;
                let total = to_u32(group.aes_blocks, "AES blocks in one flush")?;
                let args = [Arg::uniform(&*self.table), data.clone(), Arg::storage(&records), data.clone()];
                for (base, groups) in host::dispatches(total, host::LOCAL_SIZE, self.max_groups) {
                    let push = [nrecords, total, base];
                    enc.dispatch(&self.aes, [groups, 1, 1], &args, bytemuck::cast_slice(&push))?;
                }
            }
            self.hashes(enc, &data, &group.hashes, group.hashes_max)?;
            if let Some(home) = &chunk.home {
                enc.copy_ranges(&chunk.work, home, &ranges)?;
            }
        }
        enc.host_will_read();
        lock(&self.spare).give_back(groups.into_iter().map(|(_, g)| g));
        Ok(())
    }

    fn device(&self) -> Option<&Device> {
        Some(self.table.device())
    }

    /// The items' slots: each is copied to the GPU and back whole (records, keys, tags).
    fn bytes(&self, items: &[Item]) -> u64 {
        items.iter().map(|it| it.at.len).sum()
    }

    fn fail(&self, items: Vec<Item>, error: &Error) {
        for it in items {
            let _ = it.state.error.set(error.clone());
        }
    }

    /// Each item learns its flush's value here, after the submission, with a plain store. In
    /// `encode` it was an atomic update of memory the adding thread had written, ahead of the
    /// submission; without it, and with each slot's place read from the item, `encode` reads no
    /// item's state: the flushing thread's time per item went from 336 to 243 ns on an H100
    /// host at 1 KiB records (`BENCHMARKS.md`).
    fn submitted(&self, items: &[Item], value: u64) {
        for it in items {
            it.state.value.store(value, Ordering::Release);
        }
    }
}

impl CryptoBatch {
    /// Every staging chunk's rows of `items`, the bytes their kernels read and their longest
    /// message, in one pass over the items. The items were written by the threads that added
    /// them, and a flush of 10,000 holds about 2 MiB of them, which each further pass would
    /// load again. (On an H100 host, where a flush's encoding took 200–270 ns per 1 KiB record
    /// in three passes, one pass sealed inside the spread of three: `BENCHMARKS.md`.) The rows
    /// stop at the first item whose rows do not fit their tables (`built` holds the error);
    /// bytes and the longest message still count every item, for the offload's choice, which
    /// does not need the rows.
    fn rows(&self, items: &[Item]) -> Rows {
        let mut rows = Rows { groups: Vec::new(), built: Ok(()), bytes: 0, longest: None };
        let mut group_ix: IdMap<usize, usize> = IdMap::default();
        let mut last: Option<(usize, usize)> = None;
        for it in items {
            rows.bytes += it.work_bytes();
            for p in it.mac_first.iter().chain(&it.hashes) {
                rows.longest = Some(rows.longest.map_or(p.len, |l: u64| l.max(p.len)));
            }
            if rows.built.is_err() {
                continue;
            }
            let SlotAt { chunk, offset, len, home } = it.at;
            // Consecutive items mostly share a chunk: skip the map then.
            let g = match last {
                Some((p, g)) if p == chunk => g,
                _ => *group_ix.entry(chunk).or_insert_with(|| {
                    rows.groups.push((it.slot().chunk.clone(), lock(&self.spare).group()));
                    rows.groups.len() - 1
                }),
            };
            last = Some((chunk, g));
            rows.built = rows.groups[g].1.add(it, offset, len, home);
        }
        rows
    }

    /// One SHA-256/HMAC pass over `rows` (one dispatch per window of the longest message).
    fn hashes(&self, enc: &mut Encoder<'_>, data: &Arg, rows: &[[u32; 4]], max_len: u64) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let device = enc.device().clone();
        let index = table(&device, rows)?;
        let n = to_u32(rows.len() as u64, "messages in one flush")?;
        let args = [data.clone(), Arg::storage(&index), data.clone(), data.clone()];
        for begin in host::block_windows(max_len as usize, self.window) {
            for (base, groups) in host::dispatches(n, kernels::sha256_multi::LOCAL_SIZE[0], self.max_groups) {
                let push = [n, base, begin, self.window];
                enc.dispatch(&self.hash, [groups, 1, 1], &args, bytemuck::cast_slice(&push))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of one hashed message of `len` bytes after a 16-byte nonce, as `encode` counts them.
    fn blocks(len: u64) -> u64 {
        (16 + len + 9).div_ceil(64) + 1
    }

    #[test]
    fn the_model_keeps_small_records_and_few_large_ones_on_the_host() {
        let rule = crate::crypto::Offload::Auto.model();
        // A sealed record of `len` bytes is about `2 * len` bytes of work (AES and HMAC).
        let host = |n: u64, len: u64| rule.on_host(n * 2 * (len + 16), blocks(len), n as usize);
        assert!(host(1, 16384) && host(10, 16384), "a few 16 KiB records: the host");
        assert!(!host(100, 16384) && !host(10_000, 16384), "many 16 KiB records: the GPU");
        assert!(host(1, 1024) && host(100, 1024) && host(1000, 1024), "1 KiB records: the host");
        assert!(!host(10_000, 1024), "but never a flush longer than one thread should take");
        assert!(!host(1, 64 << 20), "a 64 MiB record: the GPU");
        assert!(OffloadRule::Below(100).on_host(99, 0, 1) && !OffloadRule::Below(100).on_host(100, 0, 1));
    }

    #[test]
    fn records_go_inline_where_every_flush_would_compute_them_on_the_host_or_while_the_credit_lasts() {
        let model = crate::crypto::Offload::Auto.model();
        assert_eq!(model.inline(1024), Inline::Always);
        assert_eq!(model.inline(3000), Inline::Always);
        // A 16 KiB record: at once while the credit lasts, which holds as many such records as
        // `CREDIT_FLUSHES` flushes that stay on the host.
        let Inline::Credit { work, limit } = model.inline(16384) else { panic!("16 KiB: by credit") };
        assert_eq!(work, 2 * (16384 + 16), "AES and HMAC of the nonce and record");
        let per_flush = limit / CREDIT_FLUSHES / work;
        assert!(rule_host(&model, per_flush, 16384), "a flush of that many stays on the host");
        assert!(!rule_host(&model, per_flush + 1, 16384), "one more goes to the GPU");
        assert_eq!(model.inline(1 << 20), Inline::Never, "over 64 KiB: through a flush");
        assert_eq!(OffloadRule::Below(u64::MAX).inline(16384), Inline::Always);
        assert_eq!(OffloadRule::Below(u64::MAX).inline(1 << 20), Inline::Never);
        assert_eq!(OffloadRule::Below(0).inline(16), Inline::Never);
        assert_eq!(OffloadRule::Below(10_000).inline(16), Inline::Never);
    }

    #[test]
    fn spare_tables_come_back_empty_with_their_memory() {
        let mut spare = Spare::default();
        let mut group = spare.group();
        group.mac_first.push([1; 4]);
        group.aes.extend([[2; 4], [3; 4]]);
        group.hashes.push([4; 4]);
        group.home.extend((0..100).map(|i| (i, 6)));
        (group.mac_first_max, group.aes_blocks, group.hashes_max) = (7, 8, 9);
        let capacity = group.home.capacity();
        spare.give_back([group]);
        let group = spare.group();
        assert!(group.mac_first.is_empty() && group.aes.is_empty() && group.hashes.is_empty());
        assert!(group.home.is_empty(), "no range of an earlier flush is copied again");
        assert_eq!((group.mac_first_max, group.aes_blocks, group.hashes_max), (0, 0, 0));
        assert_eq!(group.home.capacity(), capacity, "the memory is kept");
        // None too large is kept.
        let mut wide = Group::default();
        wide.aes.reserve(SPARE_MAX_BYTES / 16 + 1);
        spare.give_back([wide]);
        assert!(spare.groups.is_empty(), "a huge flush's tables are freed");
        // At most so many are kept.
        for _ in 0..2 {
            spare.give_back((0..SPARE_GROUPS + 2).map(|_| Group::default()));
        }
        assert_eq!(spare.groups.len(), SPARE_GROUPS);
    }

    #[test]
    fn rows_point_the_kernels_at_the_keys_in_the_slot() {
        let part = AesPart { at: 16, len: 33, key: AesKeyAt { at: 64, rounds: 10 }, counter: [0; 16] };
        let mut group = Group { aes_blocks: 5, ..Group::default() };
        // The slot at byte 4096 of its chunk.
        group.aes_rows(4096, &part).unwrap();
        // First block after the group's 5; data at (4096 + 16) / 16; 3 blocks, 10 rounds; key
        // at (4096 + 64) / 16.
        assert_eq!(group.aes[0], [5, 257, 3 | 10 << 28, 260]);
        assert_eq!(group.aes_blocks, 8);
        let hash = HashPart { at: 0, len: 49, digest_at: 96, key_at: Some(128) };
        assert_eq!(Group::hash_row(4096, &hash).unwrap(), [4096, 49, (4096 + 128) / 16, (4096 + 96) / 4]);
        let plain = HashPart { key_at: None, ..hash };
        assert_eq!(Group::hash_row(4096, &plain).unwrap()[2], u32::MAX, "no key: plain SHA-256");
        // A range of 2^28 blocks or more does not fit the row.
        let huge = AesPart { len: 16 << 28, ..part };
        assert!(matches!(group.aes_rows(4096, &huge), Err(Error::TooLarge { .. })));
    }

    /// Whether `rule` keeps a flush of `n` sealed records of `len` bytes on the host.
    fn rule_host(rule: &OffloadRule, n: u64, len: u64) -> bool {
        rule.on_host(n * 2 * (len + 16), blocks(len), n as usize)
    }
}
