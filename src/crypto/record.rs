//! The record layer: seal and open records of many connections, encrypt-then-MAC.
//!
//! A connection holds [`RecordKeys`]: an AES key (128 or 256 bits), an HMAC-SHA256 key and a
//! 4-byte nonce prefix. Record number `seq` of the connection is sealed as
//!
//! ```text
//! nonce      = prefix (4 bytes) || seq (8 bytes, big-endian) || 0 (4 bytes)
//! ciphertext = AES-CTR(aes_key, counter block = nonce, plaintext)   (128-bit big-endian counter)
//! tag        = HMAC-SHA256(mac_key, nonce || ciphertext)
//! ```
//!
//! The low 32 bits of the counter count the record's blocks, so a record may be up to 64 GiB
//! ([`MAX_RECORD_BYTES`]; a longer one is [`Error::TooLarge`]) and the records of one connection
//! never share keystream. The sequence number is implicit (both sides count records, as in
//! TLS); it must never repeat under one key.
//!
//! # Records of any size
//! A record whose nonce, data and tag fit one staging slot (the device's storage-buffer range:
//! 128 MiB on lavapipe, 4 GiB on an NVIDIA H200) is one item of the coalesced work, its AES-CTR
//! and its HMAC both there (on the GPU or, as [`super::Offload`] decides, on the host). A longer
//! record goes in pieces: its AES-CTR is split like [`Crypto::aes_ctr`]'s (16 MiB pieces, each
//! from its own counter block, which gives the same stream), where the offload decides; its
//! HMAC, one sequential chain that a single GPU thread would hash at a few MB/s, is computed on
//! the host of the calling task (over the ciphertext once it is known when sealing, before any
//! decryption when opening), without copying the record. The output is the same either way.
//!
//! [`Crypto::open`] recomputes the tag and compares it with the given one in constant time;
//! a mismatch is [`Error::AuthenticationFailed`] and no plaintext is released (the staging copy
//! of the decryption is overwritten).
//!
//! Every call is one item of the flush's coalesced crypto work ([`super::batch`]): 10,000
//! connections each sealing a record in their own task go out as one AES dispatch and one
//! HMAC dispatch.
//!
//! # Records the host takes at once
//! Where the offload would compute a record on the host whatever flush it joined (always with
//! [`super::Offload::Host`] and with `Auto` on a CPU device such as lavapipe; with `Auto` on a
//! GPU for records under about 4 KiB, which the GPU path costs more host time than their
//! crypto), [`Crypto::seal`], [`Crypto::seal_in_place`], [`Crypto::open`],
//! [`Crypto::open_in_place`] and the staged calls seal or open it at once in the calling task,
//! on the caller's buffer: no staging copies, no flush, no wait, and on a multi-threaded runtime
//! every worker seals its own tasks' records. With `Auto` on a GPU, larger records go that way
//! too while the load is one the host takes: up to two host-sized flushes of work, until a flush
//! shows the load again (see [`super::credit`]). Records up to 64 KiB; a longer one joins a
//! flush, whose host path computes it. `prepare_seal` and `prepare_open` always add an item to
//! the flush. The output is the same either way.
//!
//! # Records in staging memory
//! [`Crypto::seal`] and friends copy the record into staging memory and the result back out: two
//! host copies per record, which on a discrete GPU also cost host memory bandwidth beside the
//! GPU's own transfers. A [`StagedRecord`] is a record buffer that lives in staging memory: the
//! caller writes the plaintext into it ([`StagedRecord::bytes_mut`]), seals it in place
//! ([`Crypto::seal_staged`]) and reads the ciphertext from it, so that the host moves no record
//! bytes at all; the GPU's transfers (on a discrete GPU, to its own memory and back) and kernels
//! do the rest. While a seal or open of the buffer may still be running on the GPU (its future
//! was dropped before it finished), the buffer's bytes are refused with [`Error::NotReady`];
//! `ctx.synchronize().await` waits for that work.

use super::batch::{HashPart, Inline, Item, Ticket, AES_KEY_BYTES, MAC_KEY_BYTES};
use super::{host, AesKey, Crypto, HmacKey, Io};
use crate::error::{Error, Result};
use crate::record::staging::Slot;
use crate::Recorder;
use std::sync::Arc;

/// One connection's keys for [`Crypto::seal`] / [`Crypto::open`]. Expanded once; cheap to clone.
///
/// Record `seq` is sealed as: nonce = prefix (4 bytes) || `seq` (8 bytes, big-endian) || 0
/// (4 bytes); ciphertext = AES-CTR from the nonce as counter block (128-bit big-endian
/// increment); tag = HMAC-SHA256(mac key, nonce || ciphertext).
///
/// ```
/// use vkasync::crypto::RecordKeys;
/// let keys = RecordKeys::new(&[1; 32], b"a MAC key", [0, 0, 0, 7])?;
/// assert_eq!(keys.nonce(1)[..12], [0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1]);
/// assert!(RecordKeys::new(&[1; 24], b"k", [0; 4]).is_err()); // AES-128 or AES-256 only
/// # Ok::<(), vkasync::Error>(())
/// ```
#[derive(Clone)]
pub struct RecordKeys {
    /// Both keys in one allocation: a connection's keys are made once per connection, often
    /// on the path a server times.
    keys: Arc<Keys>,
    prefix: [u8; 4],
}

struct Keys {
    aes: AesKey,
    mac: HmacKey,
}

impl std::fmt::Debug for RecordKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordKeys").field("aes_bits", &self.aes().bits()).finish_non_exhaustive()
    }
}

impl RecordKeys {
    /// `aes_key` must be 16 or 32 bytes (AES-128 or AES-256), else [`Error::InvalidArgument`];
    /// `mac_key` may have any length.
    pub fn new(aes_key: &[u8], mac_key: &[u8], nonce_prefix: [u8; 4]) -> Result<Self> {
        if aes_key.len() != 16 && aes_key.len() != 32 {
            return Err(Error::InvalidArgument(format!(
                "a record key must be 16 or 32 bytes (AES-128 or AES-256), not {} bytes",
                aes_key.len()
            )));
        }
        // Expanded where they are kept: the schedule is not copied on its way into the `Arc`.
        let mut keys = Arc::new(Keys { aes: AesKey::blank(), mac: HmacKey::new(mac_key) });
        Arc::get_mut(&mut keys).expect("a new Arc has one owner").aes.expand(aes_key)?;
        Ok(RecordKeys { keys, prefix: nonce_prefix })
    }

    fn aes(&self) -> &AesKey {
        &self.keys.aes
    }

    fn mac(&self) -> &HmacKey {
        &self.keys.mac
    }

    /// The nonce (and first counter block) of record `seq`.
    pub fn nonce(&self, seq: u64) -> [u8; 16] {
        let mut n = [0u8; 16];
        n[..4].copy_from_slice(&self.prefix);
        n[4..12].copy_from_slice(&seq.to_be_bytes());
        n
    }
}

/// The longest record: 2^32 AES blocks, the most the low 32 bits of a record's counter count.
pub const MAX_RECORD_BYTES: u64 = 16 << 32;

/// HMAC-SHA256(`mac`, `nonce || data`) on the host, without joining the two.
fn record_tag(mac: &HmacKey, nonce: &[u8; 16], data: &[u8]) -> [u8; 32] {
    if data.len() < 48 {
        let mut msg = nonce.to_vec();
        msg.extend_from_slice(data);
        return host::hmac_sha256_from_midstates(mac.inner, mac.outer, &msg);
    }
    let (first, rest) = data.split_at(48);
    let mut block = [0u8; 64];
    block[..16].copy_from_slice(nonce);
    block[16..].copy_from_slice(first);
    let mut h = mac.inner;
    host::sha256_compress(&mut h, &block);
    // The key's block and the first data block are absorbed: 128 bytes.
    let inner = host::sha256_finish(h, 128, rest);
    host::sha256_finish(mac.outer, 64, &inner)
}

/// Where a record of `len` bytes has its tag in its slot, after the nonce (at 0) and the data
/// (at 16), padded to 16 bytes.
fn record_tag_at(len: u64) -> u64 {
    16 + len.next_multiple_of(16)
}

/// The slot bytes of a record of `len` bytes: nonce, data, tag, then its keys for the kernels
/// (the AES schedule and the HMAC midstates, see [`Item::put_aes_key`]).
fn record_slot_len(len: u64) -> u64 {
    record_tag_at(len) + 32 + AES_KEY_BYTES + MAC_KEY_BYTES
}

/// The item that seals (or, `mac_first`, opens) the record of `len` bytes at byte 16 of `slot`:
/// writes its nonce at 0, zeros between the record and its tag, and the keys after the tag,
/// then the record's HMAC (after AES when sealing, before it when opening) and its AES-CTR.
fn record_item(slot: Slot, keys: &RecordKeys, seq: u64, len: u64, mac_first: bool) -> Result<Item> {
    let tag_at = record_tag_at(len);
    let nonce = keys.nonce(seq);
    slot.write(0, &nonce)?;
    slot.zero(16 + len, tag_at - 16 - len)?;
    let mut item = Item::new(slot);
    let aes = item.put_aes_key(keys.aes(), tag_at + 32)?;
    let mac = item.put_mac_key(keys.mac(), tag_at + 32 + AES_KEY_BYTES)?;
    let mac = HashPart { at: 0, len: 16 + len, digest_at: tag_at, key_at: Some(mac) };
    if mac_first {
        item.mac_first.push(mac);
    } else {
        item.hashes.push(mac);
    }
    item.add_aes(16, len, aes, nonce);
    Ok(item)
}

/// A sealed record: the ciphertext (as long as the plaintext) and its tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedRecord {
    /// AES-CTR of the plaintext.
    pub ciphertext: Vec<u8>,
    /// HMAC-SHA256 of nonce and ciphertext.
    pub tag: [u8; 32],
}

/// Compares two tags in time that depends only on their length.
fn tags_equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= std::hint::black_box(x ^ y);
    }
    std::hint::black_box(diff) == 0
}

/// A record staged for sealing or opening: nonce at 0, data at 16, tag after the data.
struct Staged {
    ticket: Ticket,
    len: usize,
    tag_at: u64,
}

/// The result of [`Crypto::prepare_seal`], available once the recorded work has completed.
#[must_use = "call finish() after the recorded work has completed to get the result"]
pub struct PendingSeal(Staged);

/// The result of [`Crypto::prepare_open`], available once the recorded work has completed.
#[must_use = "call finish() after the recorded work has completed to get the result"]
pub struct PendingOpen {
    staged: Staged,
    tag: [u8; 32],
}

impl std::fmt::Debug for PendingSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingSeal").field("len", &self.0.len).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for PendingOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingOpen").field("len", &self.staged.len).finish_non_exhaustive()
    }
}

impl PendingSeal {
    /// The sealed record. [`Error::NotReady`] if the work has not completed.
    pub fn finish(self) -> Result<SealedRecord> {
        let mut ciphertext = vec![0u8; self.0.len];
        let tag = self.finish_into(&mut ciphertext)?;
        Ok(SealedRecord { ciphertext, tag })
    }

    /// Writes the ciphertext into `out` (as long as the plaintext) and returns the tag: one copy
    /// out of staging, no allocation.
    pub fn finish_into(self, out: &mut [u8]) -> Result<[u8; 32]> {
        let s = &self.0;
        if out.len() != s.len {
            return Err(Error::SizeMismatch {
                what: "sealed record output",
                expected: s.len as u64,
                got: out.len() as u64,
            });
        }
        s.ticket.read(16, out)?;
        s.ticket.digest(s.tag_at)
    }
}

impl PendingOpen {
    /// The plaintext, if the tag matched; [`Error::AuthenticationFailed`] (and no plaintext)
    /// otherwise. [`Error::NotReady`] if the work has not completed.
    pub fn finish(self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.staged.len];
        self.finish_into(&mut out)?;
        Ok(out)
    }

    /// Writes the plaintext into `out` (as long as the ciphertext) if the tag matched; on
    /// [`Error::AuthenticationFailed`] `out` is left as it was.
    pub fn finish_into(self, out: &mut [u8]) -> Result<()> {
        let s = &self.staged;
        if out.len() != s.len {
            return Err(Error::SizeMismatch {
                what: "opened record output",
                expected: s.len as u64,
                got: out.len() as u64,
            });
        }
        let computed = s.ticket.digest(s.tag_at)?;
        if !tags_equal(&computed, &self.tag) {
            s.ticket.scrub();
            return Err(Error::AuthenticationFailed);
        }
        s.ticket.read(16, out)
    }
}

impl Crypto {
    /// Whether a record of `len` bytes goes in one staging slot (nonce, data and tag), as one
    /// item of the coalesced work; a longer one goes in pieces (see the module docs). A record
    /// over [`MAX_RECORD_BYTES`] is [`Error::TooLarge`].
    fn record_fits_one_slot(&self, len: usize) -> Result<bool> {
        let len = len as u64;
        if len > MAX_RECORD_BYTES {
            return Err(Error::TooLarge { what: "record", requested: len, limit: MAX_RECORD_BYTES });
        }
        Ok(record_slot_len(len) <= self.batch.arena.max_slot())
    }

    /// Seals a record too long for one slot: AES-CTR in pieces, then its tag on the host.
    ///
    /// The record calls box this future (and [`Crypto::open_pieces`]'s): records this long are
    /// rare and an allocation is nothing beside their work, while inline its 528 bytes would
    /// size the future of every call, and so every task that waits on one (see
    /// `run_staged`).
    async fn seal_pieces(&self, ctx: &crate::Ctx, keys: &RecordKeys, seq: u64, io: Io<'_>) -> Result<[u8; 32]> {
        let nonce = keys.nonce(seq);
        let out = match io {
            Io::InPlace(buf) => {
                self.aes_ctr_pieces(ctx, Some(keys.aes()), &nonce, Io::InPlace(&mut *buf)).await?;
                &*buf
            }
            Io::Separate(input, out) => {
                self.aes_ctr_pieces(ctx, Some(keys.aes()), &nonce, Io::Separate(input, &mut *out)).await?;
                &*out
            }
        };
        Ok(record_tag(keys.mac(), &nonce, out))
    }

    /// Opens a record too long for one slot: its tag is checked on the host first (nothing is
    /// decrypted for a forged record), then AES-CTR in pieces.
    async fn open_pieces(
        &self,
        ctx: &crate::Ctx,
        keys: &RecordKeys,
        seq: u64,
        io: Io<'_>,
        tag: &[u8; 32],
    ) -> Result<()> {
        let nonce = keys.nonce(seq);
        if !tags_equal(&record_tag(keys.mac(), &nonce, io.input(0..io.len())), tag) {
            return Err(Error::AuthenticationFailed);
        }
        self.aes_ctr_pieces(ctx, Some(keys.aes()), &nonce, io).await
    }

    /// Whether a record of `len` bytes is sealed or opened at once in the calling task (see
    /// the module docs, "Records the host takes at once").
    fn record_inline(&self, len: usize) -> bool {
        match self.batch.offload.inline(len as u64) {
            Inline::Always => true,
            Inline::Credit { work, limit } => self.batch.credit.take(work, limit),
            Inline::Never => false,
        }
    }

    /// Seals `buf` in place at once on this thread: AES-CTR with the connection's expanded key,
    /// then the tag over nonce and ciphertext.
    fn seal_inline(keys: &RecordKeys, seq: u64, buf: &mut [u8]) -> [u8; 32] {
        let nonce = keys.nonce(seq);
        keys.aes().host_cipher().apply_ctr(&nonce, buf);
        record_tag(keys.mac(), &nonce, buf)
    }

    /// Opens `buf` in place at once on this thread: the tag first (nothing is decrypted for a
    /// forged record), then AES-CTR.
    fn open_inline(keys: &RecordKeys, seq: u64, buf: &mut [u8], tag: &[u8; 32]) -> Result<()> {
        let nonce = keys.nonce(seq);
        if !tags_equal(&record_tag(keys.mac(), &nonce, buf), tag) {
            return Err(Error::AuthenticationFailed);
        }
        keys.aes().host_cipher().apply_ctr(&nonce, buf);
        Ok(())
    }

    /// Stages `data` (nonce first) and adds its AES-CTR and HMAC to the batch, in the order
    /// `mac_first` says.
    fn stage_record<R: Recorder + ?Sized>(
        &self,
        rec: &mut R,
        keys: &RecordKeys,
        seq: u64,
        data: &[u8],
        mac_first: bool,
    ) -> Result<Staged> {
        let (item, staged) = self.stage_item(keys, seq, data, mac_first)?;
        rec.batch(&self.batch, item)?;
        Ok(staged)
    }

    /// Stages `data` (nonce first) in a batch item, not yet recorded: its AES-CTR and HMAC in
    /// the order `mac_first` says.
    fn stage_item(&self, keys: &RecordKeys, seq: u64, data: &[u8], mac_first: bool) -> Result<(Item, Staged)> {
        let len = data.len() as u64;
        let tag_at = record_tag_at(len);
        let slot = self.batch.arena.reserve(record_slot_len(len))?;
        slot.write(16, data)?;
        let item = record_item(slot, keys, seq, len, mac_first)?;
        let ticket = item.ticket();
        Ok((item, Staged { ticket, len: data.len(), tag_at }))
    }

    /// Stages a record, adds it to the batch and waits for its flush, taking the queue's lock
    /// once for both ([`crate::Ctx::batch_and_settle`]).
    async fn run_record(
        &self,
        ctx: &crate::Ctx,
        keys: &RecordKeys,
        seq: u64,
        data: &[u8],
        mac_first: bool,
    ) -> Result<Staged> {
        let staged;
        // The item is made inside the call and held by no local (see `run_staged`).
        ctx.batch_and_settle(
            &self.batch,
            {
                let (item, s) = self.stage_item(keys, seq, data, mac_first)?;
                staged = s;
                item
            },
            || staged.ticket.settled(),
        )
        .await?;
        Ok(staged)
    }

    /// Stages record `seq` of a connection for sealing (see [`RecordKeys`] for the format); its AES
    /// and HMAC join the flush's coalesced work. The record must fit one staging slot (the
    /// device's storage-buffer range, see [`Crypto::seal`]): a longer one is
    /// [`Error::TooLarge`] here, and goes through [`Crypto::seal`] or [`Crypto::seal_in_place`].
    pub fn prepare_seal<R: Recorder + ?Sized>(
        &self,
        rec: &mut R,
        keys: &RecordKeys,
        seq: u64,
        plaintext: &[u8],
    ) -> Result<PendingSeal> {
        Ok(PendingSeal(self.stage_record(rec, keys, seq, plaintext, false)?))
    }

    /// Stages record `seq` of a connection for opening: the tag of the ciphertext is computed
    /// before it is decrypted, in the same flush; [`PendingOpen::finish`] compares it with `tag`.
    /// As with [`Crypto::prepare_seal`], a record longer than one staging slot is
    /// [`Error::TooLarge`] here and goes through [`Crypto::open`] or [`Crypto::open_in_place`].
    pub fn prepare_open<R: Recorder + ?Sized>(
        &self,
        rec: &mut R,
        keys: &RecordKeys,
        seq: u64,
        ciphertext: &[u8],
        tag: &[u8; 32],
    ) -> Result<PendingOpen> {
        Ok(PendingOpen { staged: self.stage_record(rec, keys, seq, ciphertext, true)?, tag: *tag })
    }

    /// Seals record `seq` of a connection inside a task: records it and awaits the flush that
    /// carries it (with every other task's records).
    ///
    /// Records of any length up to [`MAX_RECORD_BYTES`] (64 GiB; longer is
    /// [`Error::TooLarge`]) are accepted here and by [`Crypto::seal_in_place`], [`Crypto::open`]
    /// and [`Crypto::open_in_place`]. One whose nonce, data and tag fit one staging slot (the
    /// device's storage-buffer range: 128 MiB on lavapipe, 4 GiB on an NVIDIA H200) is one item of
    /// the coalesced work. A longer one goes in pieces: its AES-CTR is split like
    /// [`Crypto::aes_ctr`]'s (16 MiB pieces, where the [`Offload`](super::Offload) says), and its
    /// HMAC, one sequential chain that a single GPU thread would hash at a few MB/s, is computed
    /// on the calling task's thread (after encrypting; before decrypting, so a forged record
    /// releases nothing). The output is the same either way.
    ///
    /// ```no_run
    /// # use vkasync::{crypto::{Crypto, RecordKeys}, Device, Executor};
    /// let device = Device::new()?;
    /// let crypto = Crypto::new(&device)?;
    /// let exec = Executor::new(&device)?;
    /// let ctx = exec.context();
    /// let keys = RecordKeys::new(&[7; 32], b"mac key", [0; 4])?;
    /// let (sealed, opened) = exec.block_on(async move {
    ///     let sealed = crypto.seal(&ctx, &keys, 0, b"attack at dawn").await?;
    ///     let opened = crypto.open(&ctx, &keys, 0, &sealed.ciphertext, &sealed.tag).await?;
    ///     Ok::<_, vkasync::Error>((sealed, opened))
    /// })?;
    /// assert_eq!(opened, b"attack at dawn");
    /// # Ok::<(), vkasync::Error>(())
    /// ```
    pub async fn seal(&self, ctx: &crate::Ctx, keys: &RecordKeys, seq: u64, plaintext: &[u8]) -> Result<SealedRecord> {
        if self.record_inline(plaintext.len()) {
            let mut ciphertext = plaintext.to_vec();
            let tag = Self::seal_inline(keys, seq, &mut ciphertext);
            return Ok(SealedRecord { ciphertext, tag });
        }
        if !self.record_fits_one_slot(plaintext.len())? {
            let mut ciphertext = vec![0u8; plaintext.len()];
            let tag = Box::pin(self.seal_pieces(ctx, keys, seq, Io::Separate(plaintext, &mut ciphertext))).await?;
            return Ok(SealedRecord { ciphertext, tag });
        }
        PendingSeal(self.run_record(ctx, keys, seq, plaintext, false).await?).finish()
    }

    /// Seals record `seq` in place: `buf` holds the plaintext and receives the ciphertext; the
    /// tag is returned. One host copy in, one out, no allocation.
    pub async fn seal_in_place(
        &self,
        ctx: &crate::Ctx,
        keys: &RecordKeys,
        seq: u64,
        buf: &mut [u8],
    ) -> Result<[u8; 32]> {
        if self.record_inline(buf.len()) {
            return Ok(Self::seal_inline(keys, seq, buf));
        }
        if !self.record_fits_one_slot(buf.len())? {
            return Box::pin(self.seal_pieces(ctx, keys, seq, Io::InPlace(buf))).await;
        }
        PendingSeal(self.run_record(ctx, keys, seq, buf, false).await?).finish_into(buf)
    }

    /// Opens record `seq`: the plaintext if `tag` matches, else [`Error::AuthenticationFailed`].
    pub async fn open(
        &self,
        ctx: &crate::Ctx,
        keys: &RecordKeys,
        seq: u64,
        ciphertext: &[u8],
        tag: &[u8; 32],
    ) -> Result<Vec<u8>> {
        if self.record_inline(ciphertext.len()) {
            let mut plaintext = ciphertext.to_vec();
            Self::open_inline(keys, seq, &mut plaintext, tag)?;
            return Ok(plaintext);
        }
        if !self.record_fits_one_slot(ciphertext.len())? {
            let mut plaintext = vec![0u8; ciphertext.len()];
            Box::pin(self.open_pieces(ctx, keys, seq, Io::Separate(ciphertext, &mut plaintext), tag)).await?;
            return Ok(plaintext);
        }
        let staged = self.run_record(ctx, keys, seq, ciphertext, true).await?;
        PendingOpen { staged, tag: *tag }.finish()
    }

    /// Opens record `seq` in place: on success `buf` holds the plaintext; on
    /// [`Error::AuthenticationFailed`] it still holds the ciphertext.
    pub async fn open_in_place(
        &self,
        ctx: &crate::Ctx,
        keys: &RecordKeys,
        seq: u64,
        buf: &mut [u8],
        tag: &[u8; 32],
    ) -> Result<()> {
        if self.record_inline(buf.len()) {
            return Self::open_inline(keys, seq, buf, tag);
        }
        if !self.record_fits_one_slot(buf.len())? {
            return Box::pin(self.open_pieces(ctx, keys, seq, Io::InPlace(buf), tag)).await;
        }
        let staged = self.run_record(ctx, keys, seq, buf, true).await?;
        PendingOpen { staged, tag: *tag }.finish_into(buf)
    }
}

/// A record buffer in staging memory, which the GPU reads and writes: sealing or opening it
/// ([`Crypto::seal_staged`], [`Crypto::open_staged`]) moves no record bytes on the host. Made by
/// [`Crypto::staged_record`], zeroed; reusable for any number of records of its length.
///
/// Staged records share staging blocks of 32 MiB (apart from the staging of the other calls),
/// and a block is reused once every record in it is dropped: make a staged record for a
/// buffer that lives long (a connection's record buffer), and reuse it, rather than one per
/// record.
///
/// ```no_run
/// # use vkasync::{crypto::{Crypto, RecordKeys}, Device, Executor};
/// let device = Device::new()?;
/// let crypto = Crypto::new(&device)?;
/// let exec = Executor::new(&device)?;
/// let ctx = exec.context();
/// let keys = RecordKeys::new(&[7; 32], b"mac key", [0; 4])?;
/// let mut record = crypto.staged_record(14)?;
/// record.bytes_mut()?.copy_from_slice(b"attack at dawn");
/// let mut record = exec.block_on(async move {
///     let tag = crypto.seal_staged(&ctx, &keys, 0, &mut record).await?; // ciphertext in `record`
///     crypto.open_staged(&ctx, &keys, 0, &mut record, &tag).await?; // plaintext again
///     Ok::<_, vkasync::Error>(record)
/// })?;
/// assert_eq!(record.bytes()?, b"attack at dawn");
/// # Ok::<(), vkasync::Error>(())
/// ```
pub struct StagedRecord {
    /// Nonce at 0, the record at 16, zeros to `tag_at`, the tag after (as [`Staged`]).
    slot: Slot,
    len: usize,
    tag_at: u64,
    /// The last seal or open of the buffer, until it is known to be off the GPU.
    pending: Option<Ticket>,
}

impl std::fmt::Debug for StagedRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedRecord").field("len", &self.len).finish_non_exhaustive()
    }
}

impl StagedRecord {
    /// The record's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the record is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// [`Error::NotReady`] while GPU work may still use the buffer (see the module docs).
    fn check_idle(&mut self) -> Result<()> {
        match &self.pending {
            Some(t) if t.in_use() => Err(Error::NotReady),
            _ => {
                self.pending = None;
                Ok(())
            }
        }
    }

    /// The record's bytes: the plaintext written, or the result of the last seal or open.
    /// [`Error::NotReady`] while a seal or open of it may still run on the GPU.
    pub fn bytes(&mut self) -> Result<&[u8]> {
        Ok(self.bytes_mut()?)
    }

    /// The record's bytes, to write a plaintext (or ciphertext) into. [`Error::NotReady`] while a
    /// seal or open of it may still run on the GPU.
    pub fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        self.check_idle()?;
        // SAFETY: no GPU work uses the slot (checked just above: any item of it completed, was
        // computed on the host or never reached the GPU), this value owns the slot alone (items
        // and tickets of it are only made by `&mut self` methods, which return before handing
        // out bytes), and the slice borrows `self` mutably.
        let all = unsafe { self.slot.host_bytes()? };
        Ok(&mut all[16..16 + self.len])
    }
}

impl Crypto {
    /// A zeroed record buffer of `len` bytes in staging memory (see [`StagedRecord`]). A record
    /// whose nonce, data and tag do not fit one staging slot (the device's storage-buffer range)
    /// is [`Error::TooLarge`]; [`Crypto::seal_in_place`] takes any length.
    pub fn staged_record(&self, len: usize) -> Result<StagedRecord> {
        if !self.record_fits_one_slot(len)? {
            return Err(Error::TooLarge {
                what: "staged record (nonce, data and tag in one staging slot)",
                requested: len as u64,
                limit: self.batch.arena.max_slot().saturating_sub(record_slot_len(0)),
            });
        }
        let tag_at = record_tag_at(len as u64);
        let slot = self.batch.staged.reserve(record_slot_len(len as u64))?;
        // Staging memory is reused: nothing of an earlier user's records shows through.
        slot.zero(0, slot.len)?;
        Ok(StagedRecord { slot, len, tag_at, pending: None })
    }

    /// A staged record and a context of this device ([`Error::InvalidArgument`] if of another:
    /// its memory cannot be bound there), and no GPU work uses the record any more
    /// ([`Error::NotReady`]).
    fn check_staged(&self, ctx: &crate::Ctx, record: &mut StagedRecord) -> Result<()> {
        if !record.slot.chunk.work.device.same_device(self.device()) || !ctx.device().same_device(self.device()) {
            return Err(Error::InvalidArgument("a staged record or context of another device".into()));
        }
        record.check_idle()
    }

    /// Seals record `seq` of a connection in place in `record` (see [`RecordKeys`] for the
    /// format) and returns its tag: the same ciphertext and tag as [`Crypto::seal_in_place`],
    /// with no host copy of the record. [`Error::NotReady`] if an earlier seal or open of
    /// `record` may still run on the GPU; [`Error::InvalidArgument`] if `record` or `ctx` is of
    /// another device.
    pub async fn seal_staged(
        &self,
        ctx: &crate::Ctx,
        keys: &RecordKeys,
        seq: u64,
        record: &mut StagedRecord,
    ) -> Result<[u8; 32]> {
        self.check_staged(ctx, record)?;
        if self.record_inline(record.len) {
            return Ok(Self::seal_inline(keys, seq, record.bytes_mut()?));
        }
        self.run_staged(ctx, keys, seq, record, false).await
    }

    /// Seals (or, `mac_first`, opens) `record` through the flush and returns the tag it
    /// computed. Until the flush's work is known done, `record` keeps its ticket, so that a
    /// dropped future leaves the buffer refused rather than shared with the GPU.
    async fn run_staged(
        &self,
        ctx: &crate::Ctx,
        keys: &RecordKeys,
        seq: u64,
        record: &mut StagedRecord,
        mac_first: bool,
    ) -> Result<[u8; 32]> {
        let ticket;
        // The item is made inside the call and held by no local: a local's 192 bytes would stay
        // in this future (in every task that seals) across the await, though the item moved
        // into the batch before it (this future 528 -> 336 bytes).
        ctx.batch_and_settle(
            &self.batch,
            {
                let item = record_item(record.slot.clone(), keys, seq, record.len as u64, mac_first)?;
                ticket = item.ticket();
                record.pending = Some(ticket.clone());
                item
            },
            || ticket.settled(),
        )
        .await?;
        let tag = ticket.digest(record.tag_at)?;
        record.pending = None;
        Ok(tag)
    }

    /// Opens record `seq` in place in `record`: on success it holds the plaintext; if `tag`
    /// does not match, [`Error::AuthenticationFailed`] and the record is zeroed (no decryption
    /// of a forged record is released). [`Error::NotReady`] if an earlier seal or open of
    /// `record` may still run on the GPU.
    pub async fn open_staged(
        &self,
        ctx: &crate::Ctx,
        keys: &RecordKeys,
        seq: u64,
        record: &mut StagedRecord,
        tag: &[u8; 32],
    ) -> Result<()> {
        self.check_staged(ctx, record)?;
        if self.record_inline(record.len) {
            let bytes = record.bytes_mut()?;
            let opened = Self::open_inline(keys, seq, bytes, tag);
            if opened.is_err() {
                bytes.fill(0);
            }
            return opened;
        }
        let computed = self.run_staged(ctx, keys, seq, record, true).await?;
        if !tags_equal(&computed, tag) {
            record.bytes_mut()?.fill(0);
            return Err(Error::AuthenticationFailed);
        }
        Ok(())
    }
}
