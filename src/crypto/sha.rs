//! SHA-256 and HMAC-SHA256: keys, message batches on the device, and hashing device buffers
//! ([`Crypto::record_sha256`], [`Crypto::record_hmac_sha256`]); the coalesced path is in
//! [`super::batch`].

use super::batch::Ticket;
use super::{host, too_large, Crypto};
use crate::{Arg, Buffer, Error, MemoryKind, Recorder, Result};
use std::ops::Range;

impl Crypto {
    /// Records SHA-256 of every message of `index` (byte ranges of `messages`, packed
    /// little-endian); digest `i` goes to `digests[i]` as eight big-endian words
    /// ([`super::digest_bytes`]).
    ///
    /// `messages` must reach every range of the index (at least [`MessageIndex::words_needed`]
    /// words) and `digests` must hold at least [`MessageIndex::len`] entries
    /// ([`Error::SizeMismatch`] otherwise).
    pub fn record_sha256<R: Recorder + ?Sized>(
        &self,
        rec: &mut R,
        messages: &Buffer<u32>,
        index: &MessageIndex,
        digests: &Buffer<[u32; 8]>,
    ) -> Result<()> {
        let n = check_batch(messages, index, digests)?;
        let args = [Arg::storage(messages), Arg::storage(&index.buffer), Arg::storage(digests)];
        // One pass per window of blocks (see `host::SHA256_WINDOW_BLOCKS`); the recording
        // orders each pass after the previous one (it writes the digests the next reads).
        for begin in host::block_windows(index.max_len, self.sha256_window) {
            let mut push = [n, 0, begin, self.sha256_window];
            self.dispatch_split(rec, &self.sha256, n, host::LOCAL_SIZE, &args, &mut push, 1)?;
        }
        Ok(())
    }

    /// Records HMAC-SHA256 under `key` of every message of `index`, exactly like
    /// [`Crypto::record_sha256`] (same buffers, same checks); `digests[i]` is message `i`'s MAC.
    pub fn record_hmac_sha256<R: Recorder + ?Sized>(
        &self,
        rec: &mut R,
        key: &HmacKey,
        messages: &Buffer<u32>,
        index: &MessageIndex,
        digests: &Buffer<[u32; 8]>,
    ) -> Result<()> {
        let n = check_batch(messages, index, digests)?;
        let args = [Arg::storage(messages), Arg::storage(&index.buffer), Arg::storage(digests)];
        for begin in host::block_windows(index.max_len, self.sha256_window) {
            let mut push = [0u32; 20];
            push[0] = n;
            push[2] = begin;
            push[3] = self.sha256_window;
            push[4..12].copy_from_slice(&key.inner);
            push[12..20].copy_from_slice(&key.outer);
            self.dispatch_split(rec, &self.hmac, n, host::LOCAL_SIZE, &args, &mut push, 1)?;
        }
        Ok(())
    }
}

/// Checks a batch's buffers against its index; returns the message count.
pub(super) fn check_batch(messages: &Buffer<u32>, index: &MessageIndex, digests: &Buffer<[u32; 8]>) -> Result<u32> {
    if messages.len() < index.words_needed {
        return Err(Error::SizeMismatch {
            what: "messages buffer, in u32 words (the index has byte ranges past its end)",
            expected: index.words_needed as u64,
            got: messages.len() as u64,
        });
    }
    if digests.len() < index.len {
        return Err(Error::SizeMismatch {
            what: "digest buffer, in digests (one per message of the index)",
            expected: index.len as u64,
            got: digests.len() as u64,
        });
    }
    u32::try_from(index.len).map_err(|_| Error::InvalidArgument("more than 2^32 - 1 messages in one batch".into()))
}

/// An HMAC-SHA256 key, held as the two SHA-256 midstates after the key blocks `K ^ ipad` and
/// `K ^ opad` (RFC 2104). Any length is valid; keys longer than 64 bytes are hashed first.
#[derive(Clone)]
pub struct HmacKey {
    pub(super) inner: [u32; 8],
    pub(super) outer: [u32; 8],
}

impl std::fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HmacKey").finish_non_exhaustive()
    }
}

impl HmacKey {
    /// Derives the midstates of `key`.
    pub fn new(key: &[u8]) -> Self {
        let (inner, outer) = host::hmac_midstates(key);
        HmacKey { inner, outer }
    }
}

/// The `(byte offset, byte length)` of each message of a batch, on the device, checked when
/// uploaded so that a dispatch using it cannot read past a large-enough messages buffer.
#[derive(Debug)]
pub struct MessageIndex {
    buffer: Buffer<[u32; 2]>,
    len: usize,
    words_needed: usize,
    /// The longest message, in bytes (how many block windows a hash needs).
    max_len: usize,
}

impl MessageIndex {
    /// Uploads one byte range per message. Empty ranges are allowed; an empty list is
    /// [`Error::InvalidArgument`] (a buffer cannot be empty), a range with `start > end` too, and
    /// ranges past 4 GiB are [`Error::TooLarge`] (offsets are 32-bit on the device).
    pub fn upload<R: Recorder + ?Sized>(rec: &mut R, ranges: &[Range<usize>]) -> Result<Self> {
        if ranges.is_empty() {
            return Err(Error::InvalidArgument("empty message batch: at least one message is needed".into()));
        }
        let mut entries = Vec::with_capacity(ranges.len());
        let mut max_end = 0;
        let mut max_len = 0;
        for (i, r) in ranges.iter().enumerate() {
            if r.start > r.end {
                return Err(Error::InvalidArgument(format!("message {i} has the reversed byte range {r:?}")));
            }
            if r.end > u32::MAX as usize {
                return Err(too_large("message byte range", r.end as u64));
            }
            max_end = max_end.max(r.end);
            max_len = max_len.max(r.end - r.start);
            entries.push([r.start as u32, (r.end - r.start) as u32]);
        }
        let buffer = Buffer::new(rec.device(), entries.len(), MemoryKind::Device)?;
        rec.upload(&buffer, &entries)?;
        Ok(MessageIndex { buffer, len: ranges.len(), words_needed: max_end.div_ceil(4), max_len })
    }

    /// The number of messages.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: an index has at least one message.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The fewest `u32` words a messages buffer needs for every range to lie inside it.
    pub fn words_needed(&self) -> usize {
        self.words_needed
    }
}

/// Host messages packed for the SHA-256 / HMAC kernels: their bytes concatenated and packed
/// little-endian into words (at least one word, even if every message is empty), and each
/// message's byte range.
///
/// ```
/// use vkasync::crypto::MessageBatch;
/// let batch = MessageBatch::new(&[&b"abcde"[..], b"", b"fg"])?;
/// assert_eq!(batch.words(), &[0x6463_6261, 0x0067_6665]);
/// assert_eq!(batch.ranges(), &[0..5, 5..5, 5..7]);
/// assert!(MessageBatch::new::<&[u8]>(&[]).is_err());
/// # Ok::<(), vkasync::Error>(())
/// ```
#[derive(Clone)]
pub struct MessageBatch {
    words: Vec<u32>,
    ranges: Vec<Range<usize>>,
}

impl std::fmt::Debug for MessageBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageBatch").field("messages", &self.len()).field("bytes", &self.byte_len()).finish()
    }
}

impl MessageBatch {
    /// Packs `messages`. No messages is [`Error::InvalidArgument`]; more than 4 GiB in all is
    /// [`Error::TooLarge`].
    pub fn new<M: AsRef<[u8]>>(messages: &[M]) -> Result<Self> {
        if messages.is_empty() {
            return Err(Error::InvalidArgument("empty message batch: at least one message is needed".into()));
        }
        let mut ranges = Vec::with_capacity(messages.len());
        let mut end = 0usize;
        for m in messages {
            let start = end;
            end = end.saturating_add(m.as_ref().len());
            ranges.push(start..end);
        }
        if end > u32::MAX as usize {
            return Err(too_large("message batch", end as u64));
        }
        let words = host::pack_le_parts(
            end.div_ceil(4).max(1),
            ranges.iter().zip(messages).map(|(r, m)| (r.start, m.as_ref())),
        );
        Ok(MessageBatch { words, ranges })
    }

    /// The number of messages (at least one).
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Always false: a batch has at least one message.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The total number of message bytes.
    pub fn byte_len(&self) -> usize {
        self.ranges.last().map_or(0, |r| r.end)
    }

    /// The packed bytes.
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// Each message's byte range in [`MessageBatch::words`].
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// Uploads the packed bytes and the index into new device buffers.
    pub fn upload<R: Recorder + ?Sized>(&self, rec: &mut R) -> Result<DeviceMessages> {
        let bytes = Buffer::new(rec.device(), self.words.len(), MemoryKind::Device)?;
        rec.upload(&bytes, &self.words)?;
        let index = MessageIndex::upload(rec, &self.ranges)?;
        Ok(DeviceMessages { bytes, index })
    }
}

/// A [`MessageBatch`] on the device.
#[derive(Debug)]
pub struct DeviceMessages {
    /// The packed message bytes.
    pub bytes: Buffer<u32>,
    /// Each message's byte range in `bytes`.
    pub index: MessageIndex,
}

/// The result of [`Crypto::prepare_sha256_many`] or [`Crypto::prepare_hmac_sha256_many`].
#[must_use = "call finish() after the recorded work has completed to get the result"]
pub struct PendingDigests {
    /// One staged slot per batch of consecutive messages: where its digests start, and how many.
    pub(super) batches: Vec<(Ticket, u64, usize)>,
}

impl std::fmt::Debug for PendingDigests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingDigests").finish_non_exhaustive()
    }
}

impl PendingDigests {
    pub(crate) fn settled(&self) -> bool {
        self.batches.iter().all(|(t, _, _)| t.settled())
    }

    /// One digest (or MAC) per message, in order. [`Error::NotReady`] if the work has not
    /// completed.
    pub fn finish(self) -> Result<Vec<[u8; 32]>> {
        let mut out = Vec::new();
        for (ticket, at, n) in &self.batches {
            for i in 0..*n as u64 {
                out.push(ticket.digest(at + 32 * i)?);
            }
        }
        Ok(out)
    }
}
