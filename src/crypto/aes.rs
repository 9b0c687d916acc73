//! AES (FIPS-197) keys, and AES-CTR on device buffers ([`Crypto::record_aes_ctr`], the
//! `aes_ctr` kernel); the coalesced path is in [`super::batch`].

use super::batch::Ticket;
use super::{host, Crypto};
use crate::{Arg, Buffer, Device, Error, Kernel, MemoryKind, Recorder, Result};

/// The AES-CTR pipeline for device buffers ([`Crypto::record_aes_ctr`]).
#[derive(Debug, Clone)]
pub(super) struct AesKernel {
    kernel: Kernel,
    /// The workgroups to keep per dispatch before P grows ([`host::AES_TARGET_GROUPS_GPU`]).
    target_groups: u64,
}

impl AesKernel {
    pub(super) fn new(device: &Device, source: &crate::KernelSource) -> Result<Self> {
        let kernel = Kernel::new(device, source)?;
        let target_groups = match device.info().device_type {
            crate::DeviceType::Cpu => host::AES_TARGET_GROUPS_CPU,
            _ => host::AES_TARGET_GROUPS_GPU,
        };
        Ok(AesKernel { kernel, target_groups })
    }

    /// Blocks per invocation for `blocks` blocks in one buffer.
    fn blocks_per_invocation(&self, blocks: u64) -> u32 {
        host::aes_blocks_per_invocation(blocks, self.target_groups)
    }
}

impl Crypto {
    /// Records AES-CTR over the first `byte_len` bytes of `data`, in place: byte `j` is XORed
    /// with byte `j % 16` of AES(`iv + j / 16`). Encryption and decryption are the same.
    ///
    /// `data` holds the bytes packed little-endian ([`super::pack_le_words`]) and must have room for
    /// whole blocks: at least `4 * ceil(byte_len / 16)` words, else [`Error::SizeMismatch`]. The
    /// padding bytes of the last block are XORed with keystream too. `byte_len == 0` records
    /// nothing.
    pub fn record_aes_ctr<R: Recorder + ?Sized>(
        &self,
        rec: &mut R,
        key: &AesKeyBuffer,
        iv: &[u8; 16],
        data: &Buffer<u32>,
        byte_len: usize,
    ) -> Result<()> {
        if byte_len == 0 {
            return Ok(());
        }
        let blocks = byte_len.div_ceil(16);
        let words = blocks.saturating_mul(4);
        if words > data.len() {
            return Err(Error::SizeMismatch {
                what: "AES-CTR data buffer, in u32 words (whole 16-byte blocks of byte_len)",
                expected: words as u64,
                got: data.len() as u64,
            });
        }
        let blocks = u32::try_from(blocks).map_err(|_| {
            Error::InvalidArgument(format!("AES-CTR over {blocks} blocks: at most 2^32 - 1 blocks per call"))
        })?;
        let c = host::ctr_words(iv);
        let aes = &self.aes;
        let per_inv = aes.blocks_per_invocation(blocks as u64);
        let mut push = [blocks, key.rounds, c[0], c[1], c[2], c[3], 0, per_inv];
        let args = [Arg::uniform(&key.buffer), Arg::storage(data)];
        self.dispatch_split(rec, &aes.kernel, blocks, host::LOCAL_SIZE * per_inv, &args, &mut push, 6)
    }
}

/// An AES key (128, 192 or 256 bits) with its expanded key schedule.
///
/// ```
/// use vkasync::crypto::AesKey;
/// assert_eq!(AesKey::new(&[0; 24])?.bits(), 192);
/// assert!(AesKey::new(&[0; 20]).is_err());
/// # Ok::<(), vkasync::Error>(())
/// ```
#[derive(Clone)]
pub struct AesKey {
    pub(super) rounds: u32,
    /// FIPS-197 `w[0..4 * (rounds + 1)]`, big-endian words, zero after them (the 15 round keys
    /// of AES-256 at most; inline, so that a connection's keys cost no allocation of their own
    /// and the schedule is read where the key is).
    pub(super) schedule: [u32; 60],
    /// The key itself (its first `16 + 8 * (rounds - 10)` bytes), for the host side of the
    /// offload.
    raw: [u8; 32],
    /// RustCrypto's expanded key for the host side of the offload, made at its first use:
    /// records of one connection then expand their key once, not once per record. Boxed: it
    /// is 1 KiB, and keys whose records all go to the GPU never make it.
    host: std::sync::OnceLock<Box<HostCipher>>,
}

/// An expanded AES key for RustCrypto's AES-CTR on the host.
#[derive(Clone)]
pub(super) enum HostCipher {
    Aes128(aes::Aes128),
    Aes192(aes::Aes192),
    Aes256(aes::Aes256),
}

impl HostCipher {
    /// RustCrypto's expansion of `key` (16, 24 or 32 bytes, else [`Error::InvalidArgument`]).
    pub(super) fn new(key: &[u8]) -> Result<Self> {
        use aes::cipher::KeyInit;
        Ok(match key.len() {
            16 => HostCipher::Aes128(aes::Aes128::new(key.into())),
            24 => HostCipher::Aes192(aes::Aes192::new(key.into())),
            32 => HostCipher::Aes256(aes::Aes256::new(key.into())),
            n => return Err(Error::InvalidArgument(format!("an AES key of {n} bytes"))),
        })
    }

    /// XORs `data` with the AES-CTR keystream from counter block `iv` (128-bit big-endian
    /// increment).
    pub(super) fn apply_ctr(&self, iv: &[u8; 16], data: &mut [u8]) {
        use aes::cipher::{InnerIvInit, StreamCipher};
        use ctr::flavors::Ctr128BE;
        let iv = iv.into();
        match self {
            HostCipher::Aes128(c) => {
                ctr::Ctr128BE::from_core(ctr::CtrCore::<_, Ctr128BE>::inner_iv_init(c.clone(), iv))
                    .apply_keystream(data)
            }
            HostCipher::Aes192(c) => {
                ctr::Ctr128BE::from_core(ctr::CtrCore::<_, Ctr128BE>::inner_iv_init(c.clone(), iv))
                    .apply_keystream(data)
            }
            HostCipher::Aes256(c) => {
                ctr::Ctr128BE::from_core(ctr::CtrCore::<_, Ctr128BE>::inner_iv_init(c.clone(), iv))
                    .apply_keystream(data)
            }
        }
    }
}

impl std::fmt::Debug for AesKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AesKey").field("bits", &self.bits()).finish_non_exhaustive()
    }
}

impl AesKey {
    /// Validates `key` (16, 24 or 32 bytes, else [`Error::InvalidArgument`]) and expands it.
    pub fn new(key: &[u8]) -> Result<Self> {
        let mut k = Self::blank();
        k.expand(key)?;
        Ok(k)
    }

    /// A key of no rounds, all zeros, for [`AesKey::expand`] to fill where it is kept.
    pub(super) fn blank() -> Self {
        AesKey { rounds: 0, schedule: [0; 60], raw: [0; 32], host: std::sync::OnceLock::new() }
    }

    /// Validates `key` (16, 24 or 32 bytes, else [`Error::InvalidArgument`]) and expands it into
    /// this [`AesKey::blank`] key, in place.
    pub(super) fn expand(&mut self, key: &[u8]) -> Result<()> {
        debug_assert_eq!(self.rounds, 0, "only a blank key is expanded");
        self.rounds = host::aes_expand_key_into(key, &mut self.schedule).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "an AES key must be 16, 24 or 32 bytes (AES-128/192/256), not {} bytes",
                key.len()
            ))
        })?;
        self.raw[..key.len()].copy_from_slice(key);
        Ok(())
    }

    /// The key's bytes.
    fn raw(&self) -> &[u8] {
        &self.raw[..(self.bits() / 8) as usize]
    }

    /// RustCrypto's expanded key (made once).
    pub(super) fn host_cipher(&self) -> &HostCipher {
        self.host.get_or_init(|| Box::new(HostCipher::new(self.raw()).expect("a validated key length")))
    }

    /// The key size in bits: 128, 192 or 256.
    pub fn bits(&self) -> u32 {
        (self.rounds - 6) * 32
    }

    /// The number of rounds: 10, 12 or 14.
    pub fn rounds(&self) -> u32 {
        self.rounds
    }

    /// Uploads the key schedule (with the kernel's T-table, 1264 bytes in all) into a new device
    /// buffer, which any number of [`Crypto::record_aes_ctr`] calls can then share.
    pub fn upload<R: Recorder + ?Sized>(&self, rec: &mut R) -> Result<AesKeyBuffer> {
        let words = host::aes_key_tables(&self.schedule);
        let buffer = Buffer::new(rec.device(), words.len(), MemoryKind::Device)?;
        rec.upload(&buffer, &words)?;
        Ok(AesKeyBuffer { buffer, rounds: self.rounds })
    }
}

/// An AES key schedule on the device, made by [`AesKey::upload`].
#[derive(Debug)]
pub struct AesKeyBuffer {
    buffer: Buffer<u32>,
    rounds: u32,
}

impl AesKeyBuffer {
    /// The number of rounds: 10, 12 or 14.
    pub fn rounds(&self) -> u32 {
        self.rounds
    }
}

/// The result of [`Crypto::prepare_aes_ctr`], available once the recorded work has completed.
#[must_use = "call finish() after the recorded work has completed to get the result"]
pub struct PendingAesCtr {
    /// One staged piece per slot, with its length in bytes.
    pub(super) pieces: Vec<(Ticket, usize)>,
    pub(super) len: usize,
}

impl std::fmt::Debug for PendingAesCtr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingAesCtr").field("len", &self.len).finish_non_exhaustive()
    }
}

impl PendingAesCtr {
    pub(crate) fn settled(&self) -> bool {
        self.pieces.iter().all(|(t, _)| t.settled())
    }

    /// The output bytes. [`Error::NotReady`] if the work has not completed.
    pub fn finish(self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.len];
        self.finish_into(&mut out)?;
        Ok(out)
    }

    /// Writes the output into `out` (as long as the input, else [`Error::SizeMismatch`]): one
    /// copy from staging, no allocation. [`Error::NotReady`] if the work has not completed.
    pub fn finish_into(self, out: &mut [u8]) -> Result<()> {
        if out.len() != self.len {
            return Err(Error::SizeMismatch {
                what: "AES-CTR output",
                expected: self.len as u64,
                got: out.len() as u64,
            });
        }
        let mut at = 0;
        for (ticket, len) in &self.pieces {
            ticket.read(0, &mut out[at..at + len])?;
            at += len;
        }
        Ok(())
    }
}
