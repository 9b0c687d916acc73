//! AES-CTR, SHA-256 and HMAC-SHA256 on the GPU, for many independent inputs at once, and a
//! record layer (encrypt-then-MAC) on top.
//!
//! The module is a folder by concern: `aes` (AES keys, AES-CTR on device buffers),
//! `sha` (HMAC keys, message batches, hashing device buffers), `batch` (the coalesced path:
//! every call of every task in one flush as one dispatch per kernel), `record` (seal and open),
//! `host` (the CPU reference and packing helpers, and the host side of the offload).
//!
//! [`Crypto`] holds the pipelines (built from `shaders/`). It offers these layers:
//!
//! 1. **Recording on device buffers** ([`Crypto::record_aes_ctr`], [`Crypto::record_sha256`],
//!    [`Crypto::record_hmac_sha256`]): generic over [`Recorder`], so they work with the blocking
//!    [`CommandList`] and with a task's context. Several of them can work on the same buffers
//!    in one recording with no host round trip; the recorder orders the dependent dispatches.
//! 2. **Coalesced calls from host memory** ([`Crypto::prepare_aes_ctr`],
//!    [`Crypto::prepare_sha256_many`], [`Crypto::prepare_hmac_sha256_many`],
//!    [`Crypto::prepare_encrypt_then_mac`], [`Crypto::prepare_seal`], [`Crypto::prepare_open`]):
//!    each call writes its input once into reused staging memory and adds one item to the
//!    recorder's flush; at the flush, the items of every task become one AES-CTR dispatch and
//!    one SHA-256/HMAC dispatch over a per-flush table of keys, counters, offsets and lengths.
//!    A `Pending*` value's `finish()` reads the results once the flush completed. A flush
//!    that the GPU would not pay back runs on the host instead ([`Offload`]). The async
//!    calls ([`Crypto::aes_ctr`], [`Crypto::seal`], ...) are these plus the wait, so code
//!    written one connection at a time gets coalesced work for free.
//! 3. **The record layer** ([`Crypto::seal`], [`Crypto::open`], [`RecordKeys`]): per-connection
//!    keys, sequence-numbered nonces, constant-time tag checks (see the `record` module docs).
//! 4. **Blocking conveniences** ([`Crypto::aes_ctr_blocking`], [`Crypto::sha256_many_blocking`],
//!    [`Crypto::hmac_sha256_many_blocking`], [`Crypto::encrypt_then_mac_blocking`]): one call,
//!    one submit, one wait (the naive pattern the rest of the crate exists to avoid).
//!
//! If a `prepare_*` or `record_*` call fails, what it recorded before the error stays in the
//! recorder (it only touches buffers the call made itself, or the caller's).
//!
//! # Buffer layout and byte order
//!
//! Two conventions meet here, and mixing them up is the classic bug:
//!
//! - **Byte streams** (AES data, SHA-256/HMAC messages) live in `Buffer<u32>` packed
//!   *little-endian*: byte `j` is `(word[j / 4] >> (8 * (j % 4))) & 0xff`. On a little-endian host
//!   the buffer's memory is simply the bytes. [`pack_le_words`] / [`unpack_le_words`] convert.
//! - **Cryptographic words** (AES round keys, the counter block, SHA-256 states and digests) are
//!   *big-endian* words as in FIPS-197 / FIPS 180-4: `w = b0 << 24 | b1 << 16 | b2 << 8 | b3`.
//!   A digest buffer is a `Buffer<[u32; 8]>` holding each digest's eight words H0..H7;
//!   [`digest_bytes`] turns one into the usual 32 bytes (`to_be_bytes` of each word).
//!
//! AES-CTR works on whole 16-byte blocks: a data buffer must hold `4 * ceil(byte_len / 16)`
//! words, and the bytes between `byte_len` and the end of the last block are XORed with
//! keystream too (they are padding; ignore them). The counter is the full 16-byte block
//! incremented as one 128-bit big-endian integer, wrapping mod 2^128 (SP 800-38A, as in OpenSSL
//! and RustCrypto's `Ctr128BE`). [`ctr_add`] gives the counter block of a later block.
//!
//! A message batch on the device is a `Buffer<u32>` of packed bytes plus a [`MessageIndex`]:
//! one `(byte offset, byte length)` pair per message, checked on the host when it is uploaded
//! so that no dispatch can read past the messages buffer. [`MessageBatch`] packs host messages
//! contiguously and builds both.
//!
//! # Security notes
//!
//! These kernels are for throughput, not for hostile environments: the AES kernel uses table
//! look-ups in shared memory, and the host key expansion uses an S-box table, so neither is
//! constant-time (a co-resident attacker who can measure cache or shared-memory timing may learn
//! key bits, in particular on a CPU device such as lavapipe). Key material is not zeroised: it
//! stays in host memory freed normally, in GPU buffers, and in recorded push constants. CTR mode
//! alone is malleable; authenticate ciphertexts (encrypt-then-MAC with an independent key) and
//! never reuse a counter range under one key.
//!
//! # Example
//!
//! ```no_run
//! use vkasync::crypto::Crypto;
//! use vkasync::Device;
//!
//! let device = Device::new()?;
//! let crypto = Crypto::new(&device)?;
//! let key = [0x2b; 16];
//! let iv = [0u8; 16];
//! let ciphertext = crypto.aes_ctr_blocking(&key, &iv, b"attack at dawn")?;
//! assert_eq!(crypto.aes_ctr_blocking(&key, &iv, &ciphertext)?, b"attack at dawn");
//!
//! let digests = crypto.sha256_many_blocking(&[&b"abc"[..], b"", b"hello"])?;
//! assert_eq!(digests[0][..4], [0xba, 0x78, 0x16, 0xbf]);
//! let macs = crypto.hmac_sha256_many_blocking(b"key", &[b"message one", b"message two"])?;
//! assert_eq!(macs.len(), 2);
//! # Ok::<(), vkasync::Error>(())
//! ```
//!
//! The same on device buffers, recorded into one submission (no host round trip between the
//! steps):
//!
//! ```no_run
//! use vkasync::crypto::{AesKey, Crypto, HmacKey, MessageIndex, pack_le_words};
//! use vkasync::{Buffer, CommandList, Device, MemoryKind, Recorder};
//!
//! let device = Device::new()?;
//! let crypto = Crypto::new(&device)?;
//! let plaintext = vec![7u8; 100];
//! let mut cmds = CommandList::new(&device);
//! let key = AesKey::new(&[1; 32])?.upload(&mut cmds)?;
//! let data = Buffer::<u32>::new(&device, 4 * 7, MemoryKind::Device)?; // 7 blocks >= 100 bytes
//! cmds.upload(&data, &pack_le_words(&plaintext, 16))?;
//! crypto.record_aes_ctr(&mut cmds, &key, &[0; 16], &data, plaintext.len())?;
//! // MAC the two halves of the ciphertext, reading the buffer AES just wrote.
//! let index = MessageIndex::upload(&mut cmds, &[0..50, 50..100])?;
//! let macs = Buffer::<[u32; 8]>::new(&device, 2, MemoryKind::Device)?;
//! crypto.record_hmac_sha256(&mut cmds, &HmacKey::new(b"mac key"), &data, &index, &macs)?;
//! let macs = cmds.read_back(&macs)?;
//! cmds.submit_and_wait()?;
//! let macs: Vec<[u8; 32]> = macs.into_vec()?.iter().map(|d| vkasync::crypto::digest_bytes(d)).collect();
//! # Ok::<(), vkasync::Error>(())
//! ```

mod aes;
mod batch;
mod credit;
mod host;
mod record;
mod sha;

use aes::AesKernel;
pub use aes::{AesKey, AesKeyBuffer, PendingAesCtr};
pub use sha::{DeviceMessages, HmacKey, MessageBatch, MessageIndex, PendingDigests};

pub use host::{ctr_add, digest_bytes, pack_le_words, unpack_le_words};
pub use record::{PendingOpen, PendingSeal, RecordKeys, SealedRecord as Sealed, StagedRecord, MAX_RECORD_BYTES};

use crate::{kernels, Arg, CommandList, Device, Error, Kernel, Recorder, Result};
use batch::{CryptoBatch, HashPart, Item, Ticket};
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;

/// Where the coalesced crypto work of a flush runs (see [`Crypto::with_offload`]).
///
/// Each flush's crypto items are weighed in bytes (AES bytes plus hashed bytes). A flush the
/// rule puts on the host is computed there whole, in the flushing thread, with the RustCrypto
/// crates, and its tasks resume without waiting for the GPU; any other flush goes to the GPU as
/// coalesced dispatches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Offload {
    /// The runtime's choice, by device: a CPU device (lavapipe) computes everything on the
    /// host (its "GPU" is the same host cores, many times slower than RustCrypto). On other
    /// devices a flush runs on the host when its items carry under [`GPU_MIN_ITEM_BYTES`] of
    /// work each on average (records under about 4 KiB: the GPU path costs each item more host
    /// time, in staging, encoding and copies, than its crypto costs on the host), or when its
    /// bytes are below [`GPU_CROSSOVER_BASE_BYTES`] plus [`GPU_CROSSOVER_BYTES_PER_BLOCK`] per
    /// 64-byte block of its longest hashed message (a GPU hashes each message in one thread,
    /// so its latency grows with the longest message and a few records do not pay it back);
    /// but never a flush over [`HOST_MAX_FLUSH_BYTES`], which would hold up the flushing
    /// thread, and the queue's next flush, for milliseconds.
    ///
    /// The record calls ([`Crypto::seal`] and friends) seal records under about 4 KiB at once
    /// on the calling task's thread. Larger ones (up to 64 KiB) go that way too while the load
    /// is one the host takes: at most two flushes' worth of host work (twice the crossover
    /// above) before a record joins a flush again; the credit re-opens at a flush of one record
    /// on the host or at a second light one in a row (at most half of the crossover), and
    /// closes at a flush that went to the GPU. A lone connection, or a few, then seals nearly
    /// as fast as with [`Offload::Host`], and many ready records still coalesce on the GPU.
    #[default]
    Auto,
    /// Always the GPU.
    Gpu,
    /// Always the host.
    Host,
    /// The host below this many bytes per flush, the GPU from there on.
    Below(u64),
}

/// The fixed part of [`Offload::Auto`]'s crossover on GPUs, in bytes of crypto work per
/// flush: what one host core seals (RustCrypto, AES-256-CTR and HMAC-SHA256, about 0.8 GB/s
/// on the NVIDIA H200's host) in the GPU path's fixed latency (submission, wait and wake-up,
/// about 150 µs there).
pub const GPU_CROSSOVER_BASE_BYTES: u64 = 128 * 1024;

/// The part of [`Offload::Auto`]'s crossover that grows with the longest hashed message of a
/// flush, per 64-byte block: one GPU thread compresses a block in about 1.6 µs on the H200 at
/// full clock (a flush's HMAC of 16 KiB records takes about 0.42 ms however many records share
/// the dispatch, with 32 invocations per workgroup), in which one host core seals about 1.3 KB;
/// with the host cost of each record's copies, break-even is near 2.5 KB per block: about 24
/// records of 16 KiB per flush. On the H200 (`tls_pipeline --modes auto,host,coalesced`,
/// `BENCHMARKS.md`), 10 connections of 16 KiB records sealed 4.8× faster on the host than
/// through the GPU, 100 connections 1.37× faster through the GPU. (It was 4096, about 35
/// records, when the HMAC kernel ran 256 invocations per workgroup, 0.6 to 0.9 ms a flush.)
pub const GPU_CROSSOVER_BYTES_PER_BLOCK: u64 = 2560;

/// The average crypto work per item below which [`Offload::Auto`] keeps a flush on the host
/// (a sealed record of `n` bytes is about `2 n` bytes of work): on the H200, 1 KiB records
/// sealed on the native executor were as fast or faster on the host at every flush size
/// measured (1 to 10,000 connections), 16 KiB records faster on the GPU from 100 connections.
pub const GPU_MIN_ITEM_BYTES: u64 = 8 * 1024;

/// The most crypto work [`Offload::Auto`] computes on the host in one flush (in the flushing
/// thread): about 10 ms of one host core.
pub const HOST_MAX_FLUSH_BYTES: u64 = 8 << 20;

impl Offload {
    /// [`Offload::Auto`]'s model on a GPU.
    fn model(self) -> batch::OffloadRule {
        batch::OffloadRule::Model {
            base: GPU_CROSSOVER_BASE_BYTES,
            per_block: GPU_CROSSOVER_BYTES_PER_BLOCK,
            small_item: GPU_MIN_ITEM_BYTES,
            max_host: HOST_MAX_FLUSH_BYTES,
        }
    }

    fn rule(self, device: &Device) -> batch::OffloadRule {
        use batch::OffloadRule::Below;
        match self {
            Offload::Auto if device.info().device_type == crate::DeviceType::Cpu => Below(u64::MAX),
            Offload::Auto => self.model(),
            Offload::Gpu => Below(0),
            Offload::Host => Below(u64::MAX),
            Offload::Below(n) => Below(n),
        }
    }
}

/// The three crypto pipelines of one device. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Crypto {
    device: Device,
    aes: AesKernel,
    sha256: Kernel,
    hmac: Kernel,
    /// Most workgroups per dispatch; more work is split over several dispatches.
    max_groups: u32,
    /// Most bytes of one buffer made by the `prepare_*` functions (a multiple of 16): longer
    /// AES data or message batches are split over several buffers.
    chunk_bytes: usize,
    /// Blocks of one message that one SHA-256 / HMAC dispatch compresses at most.
    sha256_window: u32,
    /// The coalesced path: every call of every task in one flush, encoded together.
    batch: Arc<CryptoBatch>,
}

impl Crypto {
    /// Creates the AES-CTR, SHA-256 and HMAC-SHA256 pipelines on `device`.
    ///
    /// The AES kernel uses 32 KiB of shared memory per workgroup (`kernels::AES_CTR`; lavapipe
    /// has exactly 32 KiB, desktop GPUs 48 KiB or more). On a device with less (the Vulkan
    /// minimum is 16 KiB) it uses `kernels::AES_CTR_C16`, the same kernel with 16 KiB.
    pub fn new(device: &Device) -> Result<Self> {
        let limits = device.limits();
        let max_groups = host::MAX_GROUPS.min(limits.max_compute_work_group_count[0]);
        let aes =
            if limits.max_compute_shared_memory_size >= 32 * 1024 { &kernels::AES_CTR } else { &kernels::AES_CTR_C16 };
        Ok(Crypto {
            device: device.clone(),
            aes: AesKernel::new(device, aes)?,
            sha256: Kernel::new(device, &kernels::SHA256_BATCH)?,
            hmac: Kernel::new(device, &kernels::HMAC_SHA256_BATCH)?,
            max_groups,
            chunk_bytes: chunk_limit(device),
            sha256_window: host::SHA256_WINDOW_BLOCKS,
            batch: Arc::new(CryptoBatch::new(
                device,
                max_groups,
                host::SHA256_WINDOW_BLOCKS,
                Offload::Auto.rule(device),
            )?),
        })
    }

    /// The device the pipelines belong to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Caps the workgroups per dispatch at `groups` (at least 1; the default is 65,535 or the
    /// device's limit): larger work is split over several dispatches. Smaller dispatches keep
    /// each one short (to share the GPU with other work); the results are the same.
    pub fn with_max_groups_per_dispatch(mut self, groups: u32) -> Self {
        self.max_groups = groups.clamp(1, host::MAX_GROUPS.min(self.device.limits().max_compute_work_group_count[0]));
        self.batch = Arc::new(self.batch.reconfigured(self.max_groups, self.sha256_window, self.batch.offload));
        self
    }

    /// Chooses where coalesced crypto work runs (default [`Offload::Auto`]). Calls made through
    /// the returned value gather in their own batch.
    ///
    /// ```no_run
    /// # use vkasync::{crypto::{Crypto, Offload}, Device};
    /// let device = Device::new()?;
    /// let on_gpu = Crypto::new(&device)?.with_offload(Offload::Gpu);
    /// assert_eq!(on_gpu.offload_threshold(), 0);
    /// # Ok::<(), vkasync::Error>(())
    /// ```
    pub fn with_offload(mut self, offload: Offload) -> Self {
        let rule = offload.rule(&self.device);
        self.batch = Arc::new(self.batch.reconfigured(self.max_groups, self.sha256_window, rule));
        self
    }

    /// [`Offload::Auto`] with the rule it follows on a GPU, whatever the device (on a CPU device
    /// such as lavapipe `Auto` keeps everything on the host): lets tests exercise that rule, and
    /// when it seals large records at once, on lavapipe. Not for applications.
    #[doc(hidden)]
    pub fn with_gpu_auto_rule(mut self) -> Self {
        self.batch = Arc::new(self.batch.reconfigured(self.max_groups, self.sha256_window, Offload::Auto.model()));
        self
    }

    /// The bytes of crypto work per flush below which a flush runs on the host (0: never;
    /// `u64::MAX`: always); for [`Offload::Auto`] on a GPU, [`GPU_CROSSOVER_BASE_BYTES`], the
    /// fixed part of its rule (see [`Offload::Auto`] for the whole rule).
    pub fn offload_threshold(&self) -> u64 {
        match self.batch.offload {
            batch::OffloadRule::Below(n) => n,
            batch::OffloadRule::Model { base, .. } => base,
        }
    }

    /// Splits the data of [`Crypto::prepare_aes_ctr`] and the batches of
    /// [`Crypto::prepare_sha256_many`] / [`Crypto::prepare_hmac_sha256_many`] into staging slots
    /// of at most `bytes` (rounded down to whole blocks, at least one block; the default and the
    /// most is what one dispatch can bind, `maxStorageBufferRange`). The results are the same.
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = (bytes / 16 * 16).clamp(16, chunk_limit(&self.device));
        self
    }

    /// Hashes at most `blocks` 64-byte blocks of each message per dispatch (at least 1; the
    /// default and the most is 16,384, within llvmpipe's limit of 65,535 loop iterations per
    /// invocation): longer messages are hashed in several dispatches, the state kept between
    /// them. The results are the same.
    pub fn with_sha256_blocks_per_dispatch(mut self, blocks: u32) -> Self {
        self.sha256_window = blocks.clamp(1, host::SHA256_WINDOW_BLOCKS);
        self.batch = Arc::new(self.batch.reconfigured(self.max_groups, self.sha256_window, self.batch.offload));
        self
    }

    /// Records `count` items of `kernel` (`per_group` per workgroup) as as many dispatches as
    /// the group cap needs, writing each dispatch's first item into `push[base_at]`.
    #[allow(clippy::too_many_arguments)]
    fn dispatch_split<R: Recorder + ?Sized>(
        &self,
        rec: &mut R,
        kernel: &Kernel,
        count: u32,
        per_group: u32,
        args: &[Arg],
        push: &mut [u32],
        base_at: usize,
    ) -> Result<()> {
        for (base, groups) in host::dispatches(count, per_group, self.max_groups) {
            push[base_at] = base;
            rec.dispatch(kernel, [groups, 1, 1], args, bytemuck::cast_slice(push))?;
        }
        Ok(())
    }

    // ------------------------------------------------------------------ recording on buffers

    // ------------------------------------------------------------------ prepare / finish

    /// Stages `data` and adds AES-CTR over it to the recorder's coalesced crypto work (see
    /// [`crate::record::batch`]): every call in one flush, from any number of tasks, runs as one
    /// dispatch. [`PendingAesCtr::finish`] gives the result once the recorder's work has
    /// completed. Empty `data` records nothing.
    ///
    /// The data is written once into reused staging memory (no buffer per call) and the
    /// result is read once out of it. Data longer than one staging slot can hold
    /// (`maxStorageBufferRange`: 128 MiB on lavapipe) is split over several, each encrypted
    /// from its own counter block (`iv` plus the piece's first block), which gives the same
    /// stream as one piece.
    pub fn prepare_aes_ctr<R: Recorder + ?Sized>(
        &self,
        rec: &mut R,
        key: &AesKey,
        iv: &[u8; 16],
        data: &[u8],
    ) -> Result<PendingAesCtr> {
        let mut pieces = Vec::with_capacity(data.len().div_ceil(self.chunk_bytes));
        for (k, piece) in data.chunks(self.chunk_bytes).enumerate() {
            let counter = ctr_add(iv, (k * self.chunk_bytes / 16) as u64);
            pieces.push((self.stage_aes(rec, Some(key), &counter, piece)?, piece.len()));
        }
        Ok(PendingAesCtr { pieces, len: data.len() })
    }

    /// Stages one piece of AES-CTR data and adds it to the batch.
    fn stage_aes<R: Recorder + ?Sized>(
        &self,
        rec: &mut R,
        key: Option<&AesKey>,
        counter: &[u8; 16],
        data: &[u8],
    ) -> Result<Ticket> {
        // The data, padded to whole blocks, then the key for the kernel.
        let len = data.len() as u64;
        let key_at = len.next_multiple_of(16);
        let slot = self.batch.arena.reserve(key_at + if key.is_some() { batch::AES_KEY_BYTES } else { 0 })?;
        slot.write_par(0, data)?;
        slot.zero(len, key_at - len)?;
        let mut item = Item::new(slot);
        if let Some(key) = key {
            let key = item.put_aes_key(key, key_at)?;
            item.add_aes(0, len, key, *counter);
        }
        let ticket = item.ticket();
        rec.batch(&self.batch, item)?;
        Ok(ticket)
    }

    /// Uploads `messages` as one batch and records their SHA-256 and its read-back. No
    /// messages records nothing (and finishes as an empty vector).
    ///
    /// A batch whose bytes (or digests) do not fit in one buffer that a dispatch can bind
    /// (`maxStorageBufferRange`: 128 MiB on lavapipe) is split into several batches of
    /// consecutive messages. A single message longer than that is [`Error::TooLarge`].
    pub fn prepare_sha256_many<R: Recorder + ?Sized, M: AsRef<[u8]>>(
        &self,
        rec: &mut R,
        messages: &[M],
    ) -> Result<PendingDigests> {
        self.prepare_digests(rec, None, messages)
    }

    /// Uploads `messages` as one batch and records their HMAC-SHA256 under `key` and its
    /// read-back. No messages records nothing (and finishes as an empty vector).
    pub fn prepare_hmac_sha256_many<R: Recorder + ?Sized, M: AsRef<[u8]>>(
        &self,
        rec: &mut R,
        key: &HmacKey,
        messages: &[M],
    ) -> Result<PendingDigests> {
        self.prepare_digests(rec, Some(key), messages)
    }

    fn prepare_digests<R: Recorder + ?Sized, M: AsRef<[u8]>>(
        &self,
        rec: &mut R,
        key: Option<&HmacKey>,
        messages: &[M],
    ) -> Result<PendingDigests> {
        let limit = (self.batch.arena.max_slot() as usize).min(self.chunk_bytes);
        let mut batches = Vec::new();
        let mut rest = messages;
        while !rest.is_empty() {
            let n = batch_prefix(rest, limit);
            let (part, tail) = rest.split_at(n);
            rest = tail;
            if let [m] = part {
                if m.as_ref().len() > limit {
                    let limit = limit as u64;
                    return Err(Error::TooLarge { what: "message", requested: m.as_ref().len() as u64, limit });
                }
            }
            batches.push(self.stage_digests(rec, key, part)?);
        }
        Ok(PendingDigests { batches })
    }

    /// Stages messages (their bytes, then room for their digests) in one slot and adds their
    /// hashes to the batch.
    fn stage_digests<R: Recorder + ?Sized, M: AsRef<[u8]>>(
        &self,
        rec: &mut R,
        key: Option<&HmacKey>,
        messages: &[M],
    ) -> Result<(Ticket, u64, usize)> {
        let bytes: u64 = messages.iter().map(|m| m.as_ref().len() as u64).sum();
        let digests_at = bytes.next_multiple_of(4);
        // The key for the kernel after the digests.
        let key_at = (digests_at + 32 * messages.len() as u64).next_multiple_of(16);
        let slot = self.batch.arena.reserve(key_at + if key.is_some() { batch::MAC_KEY_BYTES } else { 0 })?;
        let parts: Vec<&[u8]> = messages.iter().map(|m| m.as_ref()).collect();
        slot.write_parts(0, &parts)?;
        let mut item = Item::new(slot);
        let key_at = key.map(|k| item.put_mac_key(k, key_at)).transpose()?;
        let mut at = 0u64;
        for (i, m) in messages.iter().enumerate() {
            let m = m.as_ref();
            let digest_at = digests_at + 32 * i as u64;
            item.hashes.push(HashPart { at, len: m.len() as u64, digest_at, key_at });
            at += m.len() as u64;
        }
        // The tail of the last message's word is read (never hashed): keep it defined.
        item.slot().zero(at, digests_at - at)?;
        let ticket = item.ticket();
        rec.batch(&self.batch, item)?;
        Ok((ticket, digests_at, messages.len()))
    }

    /// Encrypt-then-MAC of `records` in one recording: the records are uploaded into one buffer,
    /// each starting at a 16-byte boundary; AES-CTR encrypts the buffer in place as one stream
    /// from `iv`; HMAC-SHA256 under `mac_key` then reads each record's ciphertext straight from
    /// that buffer. One read-back brings ciphertexts and MACs home.
    ///
    /// Record `i` starting at byte `s_i` (a multiple of 16) is therefore the AES-CTR encryption
    /// of the record alone from counter block `ctr_add(iv, s_i / 16)`, given in
    /// [`SealedRecord::counter`]. This is a demonstration of chaining kernels on device buffers,
    /// not a protocol: a real one would also authenticate the counter and associated data.
    /// No records records nothing.
    pub fn prepare_encrypt_then_mac<R: Recorder + ?Sized, M: AsRef<[u8]>>(
        &self,
        rec: &mut R,
        aes_key: &AesKey,
        mac_key: &HmacKey,
        iv: &[u8; 16],
        records: &[M],
    ) -> Result<PendingEncryptThenMac> {
        if records.is_empty() {
            return Ok(PendingEncryptThenMac { ticket: None, macs_at: 0, ranges: Vec::new(), iv: *iv });
        }
        let mut ranges = Vec::with_capacity(records.len());
        let mut next = 0usize;
        for r in records {
            let start = next;
            let end = start.checked_add(r.as_ref().len()).ok_or_else(|| too_large("records", u64::MAX))?;
            ranges.push(start..end);
            next = end.checked_next_multiple_of(16).ok_or_else(|| too_large("records", u64::MAX))?;
        }
        let stream_len = ranges.last().map_or(0, |r| r.end) as u64;
        let macs_at = (next as u64).max(16);
        // The keys for the kernels after the MACs.
        let keys_at = macs_at + 32 * ranges.len() as u64;
        let slot = self.batch.arena.reserve(keys_at + batch::AES_KEY_BYTES + batch::MAC_KEY_BYTES)?;
        slot.zero(0, macs_at)?;
        let mut item = Item::new(slot);
        for (r, m) in ranges.iter().zip(records) {
            if !r.is_empty() {
                item.slot().write(r.start as u64, m.as_ref())?;
            }
        }
        let aes_key = item.put_aes_key(aes_key, keys_at)?;
        let mac_key = item.put_mac_key(mac_key, keys_at + batch::AES_KEY_BYTES)?;
        item.add_aes(0, stream_len, aes_key, *iv);
        for (i, r) in ranges.iter().enumerate() {
            item.hashes.push(HashPart {
                at: r.start as u64,
                len: r.len() as u64,
                digest_at: macs_at + 32 * i as u64,
                key_at: Some(mac_key),
            });
        }
        let ticket = item.ticket();
        rec.batch(&self.batch, item)?;
        Ok(PendingEncryptThenMac { ticket: Some(ticket), macs_at, ranges, iv: *iv })
    }

    // ------------------------------------------------------------------ async, inside executor tasks

    /// AES-CTR of `data` inside an executor task: records the work and awaits it. The GPU work
    /// goes out with the other tasks' work in the executor's next flush.
    ///
    /// ```no_run
    /// # use vkasync::{crypto::Crypto, Device, Executor};
    /// let device = Device::new()?;
    /// let crypto = Crypto::new(&device)?;
    /// let exec = Executor::new(&device)?;
    /// let ctx = exec.context();
    /// let ct = exec.block_on(async move { crypto.aes_ctr(&ctx, &[7u8; 32], &[0u8; 16], b"attack at dawn").await })?;
    /// assert_eq!(ct.len(), 14);
    /// # Ok::<(), vkasync::Error>(())
    /// ```
    pub async fn aes_ctr(&self, ctx: &crate::Ctx, key: &[u8], iv: &[u8; 16], data: &[u8]) -> Result<Vec<u8>> {
        let key = AesKey::new(key)?;
        if data.len() <= PIECE_BYTES {
            let pending = self.prepare_aes_ctr(&mut ctx.clone(), &key, iv, data)?;
            settle(ctx, || pending.settled()).await?;
            return pending.finish();
        }
        let mut out = vec![0u8; data.len()];
        self.aes_ctr_pieces(ctx, Some(&key), iv, Io::Separate(data, &mut out)).await?;
        Ok(out)
    }

    /// AES-CTR of `data` in place inside a task: one host copy into staging and one out, no
    /// allocation. Data longer than 16 MiB goes through in pieces that are each submitted at
    /// once, so that staging the next piece overlaps the GPU's work on this one, and large
    /// copies are spread over the host's cores.
    pub async fn aes_ctr_in_place(&self, ctx: &crate::Ctx, key: &AesKey, iv: &[u8; 16], data: &mut [u8]) -> Result<()> {
        self.aes_ctr_pieces(ctx, Some(key), iv, Io::InPlace(data)).await
    }

    /// Moves `data` through the same staging path as [`Crypto::aes_ctr_in_place`] (host copy
    /// in, on a discrete GPU the DMA copies to the device and back, host copy out), with no
    /// kernel: the copy ceiling of the coalesced path, for benchmarks (with
    /// [`Offload::Gpu`]; otherwise a small call stays on the host). `data` comes back unchanged.
    pub async fn copy_round_trip(&self, ctx: &crate::Ctx, data: &mut [u8]) -> Result<()> {
        self.aes_ctr_pieces(ctx, None, &[0; 16], Io::InPlace(data)).await
    }

    async fn aes_ctr_pieces(
        &self,
        ctx: &crate::Ctx,
        key: Option<&AesKey>,
        iv: &[u8; 16],
        mut io: Io<'_>,
    ) -> Result<()> {
        let len = io.len();
        let pieces = len.div_ceil(PIECE_BYTES);
        let mut in_flight = std::collections::VecDeque::new();
        for k in 0..pieces {
            let r = k * PIECE_BYTES..len.min((k + 1) * PIECE_BYTES);
            let counter = ctr_add(iv, (r.start / 16) as u64);
            let ticket = self.stage_aes(&mut ctx.clone(), key, &counter, io.input(r.clone()))?;
            if pieces > 1 {
                ctx.flush();
            }
            in_flight.push_back((r, ticket, ctx.synchronize()));
            // Two pieces on the GPU while the host stages the next and reads the oldest.
            while in_flight.len() > 2 || (k + 1 == pieces && !in_flight.is_empty()) {
                let (r, ticket, sync) = in_flight.pop_front().expect("not empty");
                settle_on(sync, || ticket.settled()).await?;
                ticket.read_par(0, io.output(r))?;
            }
        }
        Ok(())
    }

    /// SHA-256 of each message inside a task; the messages join the flush's coalesced work.
    pub async fn sha256_many<M: AsRef<[u8]>>(&self, ctx: &crate::Ctx, messages: &[M]) -> Result<Vec<[u8; 32]>> {
        self.digests_pieces(ctx, None, messages).await
    }

    async fn digests_pieces<M: AsRef<[u8]>>(
        &self,
        ctx: &crate::Ctx,
        key: Option<&HmacKey>,
        messages: &[M],
    ) -> Result<Vec<[u8; 32]>> {
        // One batch as large as a slot may be: hashing is one thread per message, so the GPU
        // wants every message of the call in one dispatch (pieces would run one after another,
        // each as slow as its longest message). The copy into staging uses every host core.
        let pending = self.prepare_digests(&mut ctx.clone(), key, messages)?;
        settle(ctx, || pending.settled()).await?;
        pending.finish()
    }

    /// HMAC-SHA256 of each message under `key` inside an executor task.
    pub async fn hmac_sha256_many<M: AsRef<[u8]>>(
        &self,
        ctx: &crate::Ctx,
        key: &[u8],
        messages: &[M],
    ) -> Result<Vec<[u8; 32]>> {
        self.digests_pieces(ctx, Some(&HmacKey::new(key)), messages).await
    }

    /// Encrypt-then-MAC of each record inside an executor task (no host round trip between the
    /// two kernels).
    pub async fn encrypt_then_mac<M: AsRef<[u8]>>(
        &self,
        ctx: &crate::Ctx,
        aes_key: &[u8],
        mac_key: &[u8],
        iv: &[u8; 16],
        records: &[M],
    ) -> Result<Vec<SealedRecord>> {
        let aes_key = AesKey::new(aes_key)?;
        let mac_key = HmacKey::new(mac_key);
        let pending = self.prepare_encrypt_then_mac(&mut ctx.clone(), &aes_key, &mac_key, iv, records)?;
        settle(ctx, || pending.settled()).await?;
        pending.finish()
    }

    // ------------------------------------------------------------------ blocking conveniences

    /// AES-CTR of `data` under `key` (16, 24 or 32 bytes) from counter block `iv`, on the GPU,
    /// blocking until done. Encrypts and decrypts. Empty `data` gives an empty vector without
    /// GPU work (the key is still checked).
    pub fn aes_ctr_blocking(&self, key: &[u8], iv: &[u8; 16], data: &[u8]) -> Result<Vec<u8>> {
        let key = AesKey::new(key)?;
        let mut cmds = CommandList::new(&self.device);
        let pending = self.prepare_aes_ctr(&mut cmds, &key, iv, data)?;
        cmds.submit_and_wait()?;
        pending.finish()
    }

    /// SHA-256 of each message, on the GPU in one batch, blocking until done.
    pub fn sha256_many_blocking<M: AsRef<[u8]>>(&self, messages: &[M]) -> Result<Vec<[u8; 32]>> {
        let mut cmds = CommandList::new(&self.device);
        let pending = self.prepare_sha256_many(&mut cmds, messages)?;
        cmds.submit_and_wait()?;
        pending.finish()
    }

    /// HMAC-SHA256 of each message under `key` (any length), on the GPU in one batch, blocking
    /// until done.
    pub fn hmac_sha256_many_blocking<M: AsRef<[u8]>>(&self, key: &[u8], messages: &[M]) -> Result<Vec<[u8; 32]>> {
        let key = HmacKey::new(key);
        let mut cmds = CommandList::new(&self.device);
        let pending = self.prepare_hmac_sha256_many(&mut cmds, &key, messages)?;
        cmds.submit_and_wait()?;
        pending.finish()
    }

    /// [`Crypto::prepare_encrypt_then_mac`] on a [`CommandList`], blocking until done.
    pub fn encrypt_then_mac_blocking<M: AsRef<[u8]>>(
        &self,
        aes_key: &[u8],
        mac_key: &[u8],
        iv: &[u8; 16],
        records: &[M],
    ) -> Result<Vec<SealedRecord>> {
        let aes_key = AesKey::new(aes_key)?;
        let mac_key = HmacKey::new(mac_key);
        let mut cmds = CommandList::new(&self.device);
        let pending = self.prepare_encrypt_then_mac(&mut cmds, &aes_key, &mac_key, iv, records)?;
        cmds.submit_and_wait()?;
        pending.finish()
    }
}

/// Bytes per piece of a large input on the async path.
const PIECE_BYTES: usize = 16 << 20;

/// A large call's input and output: one buffer in place, or two.
enum Io<'a> {
    InPlace(&'a mut [u8]),
    Separate(&'a [u8], &'a mut [u8]),
}

impl Io<'_> {
    fn len(&self) -> usize {
        match self {
            Io::InPlace(b) => b.len(),
            Io::Separate(i, _) => i.len(),
        }
    }
    fn input(&self, r: Range<usize>) -> &[u8] {
        match self {
            Io::InPlace(b) => &b[r],
            Io::Separate(i, _) => &i[r],
        }
    }
    fn output(&mut self, r: Range<usize>) -> &mut [u8] {
        match self {
            Io::InPlace(b) => &mut b[r],
            Io::Separate(_, o) => &mut o[r],
        }
    }
}

/// Awaits one captured wait, or less: returns as soon as `settled()` says the caller's items
/// need no GPU wait (computed on the host by the offload, or failed).
async fn settle_on(mut sync: crate::executor::Synchronize, settled: impl Fn() -> bool) -> Result<()> {
    std::future::poll_fn(|cx| match std::pin::Pin::new(&mut sync).poll(cx) {
        std::task::Poll::Pending if settled() => std::task::Poll::Ready(Ok(())),
        other => other,
    })
    .await
}

/// [`settle_on`] the context's work recorded so far.
async fn settle(ctx: &crate::Ctx, settled: impl Fn() -> bool) -> Result<()> {
    settle_on(ctx.synchronize(), settled).await
}

/// How many of the first `messages` go into one batch whose buffers hold at most `limit` bytes:
/// the message bytes, 8 index bytes and 32 digest bytes per message each within `limit`. At
/// least one (a message too long alone fails later, when its buffer is bound).
fn batch_prefix<M: AsRef<[u8]>>(messages: &[M], limit: usize) -> usize {
    let max_count = (limit / 32).max(1);
    let mut bytes = 0usize;
    for (i, m) in messages.iter().enumerate() {
        bytes = bytes.saturating_add(m.as_ref().len());
        if i > 0 && (bytes > limit || i >= max_count) {
            return i;
        }
    }
    messages.len()
}

/// The most bytes of AES data one buffer of [`Crypto::prepare_aes_ctr`] holds on `device`: what
/// one dispatch can bind and one buffer can be, in whole blocks.
fn chunk_limit(device: &Device) -> usize {
    let limits = device.limits();
    let bytes = limits.max_storage_buffer_range.min(limits.max_buffer_size).min(usize::MAX as u64) as usize;
    (bytes / 16 * 16).max(16)
}

fn too_large(what: &'static str, requested: u64) -> Error {
    Error::TooLarge { what, requested, limit: u32::MAX as u64 }
}

// ---------------------------------------------------------------------- pending results

/// One record encrypted and authenticated by [`Crypto::prepare_encrypt_then_mac`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedRecord {
    /// The counter block this record's keystream starts at (decrypt with AES-CTR from it).
    pub counter: [u8; 16],
    /// The ciphertext, as long as the plaintext.
    pub ciphertext: Vec<u8>,
    /// HMAC-SHA256 of the ciphertext.
    pub mac: [u8; 32],
}

/// The result of [`Crypto::prepare_encrypt_then_mac`].
#[must_use = "call finish() after the recorded work has completed to get the result"]
pub struct PendingEncryptThenMac {
    ticket: Option<Ticket>,
    macs_at: u64,
    ranges: Vec<Range<usize>>,
    iv: [u8; 16],
}

impl std::fmt::Debug for PendingEncryptThenMac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingEncryptThenMac").field("records", &self.ranges.len()).finish_non_exhaustive()
    }
}

impl PendingEncryptThenMac {
    pub(crate) fn settled(&self) -> bool {
        self.ticket.as_ref().is_none_or(|t| t.settled())
    }

    /// The sealed records, in order. [`Error::NotReady`] if the work has not completed.
    pub fn finish(self) -> Result<Vec<SealedRecord>> {
        let Some(ticket) = self.ticket else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(self.ranges.len());
        for (i, r) in self.ranges.into_iter().enumerate() {
            let mut ciphertext = vec![0u8; r.len()];
            ticket.read(r.start as u64, &mut ciphertext)?;
            out.push(SealedRecord {
                counter: ctr_add(&self.iv, (r.start / 16) as u64),
                ciphertext,
                mac: ticket.digest(self.macs_at + 32 * i as u64)?,
            });
        }
        Ok(out)
    }
}
