//! Host-side helpers for the crypto compute shaders (`aes_ctr.comp`, `sha256_batch.comp`,
//! `hmac_sha256_batch.comp`). Plain Rust.
//!
//! Conventions (see the [`crate::crypto`] module docs):
//! - Byte streams go to the GPU packed little-endian into `u32` words: byte `j` is
//!   `(words[j / 4] >> (8 * (j % 4))) & 0xff` ([`pack_le_words`] / [`unpack_le_words`]).
//! - AES round keys, counter blocks, SHA-256 states and digests are big-endian words
//!   (FIPS-197 / FIPS 180-4: `w = b0 << 24 | b1 << 16 | b2 << 8 | b3`).

/// Blocks of one message that one SHA-256 dispatch compresses at most. llvmpipe (lavapipe)
/// ends a shader invocation's loops after 65,535 iterations in total (its
/// `LP_MAX_TGSI_LOOP_ITERATIONS`, counted over all loops of the invocation), so longer
/// messages are hashed in several dispatches of one window each, the state carried in the
/// digest buffer. 16,384 blocks (1 MiB) leaves room for the tail block's small loops.
pub const SHA256_WINDOW_BLOCKS: u32 = 16_384;

/// SHA-256 blocks of a `len`-byte message, padding included.
pub fn sha256_blocks(len: usize) -> u64 {
    (len as u64 >> 6) + (((len as u64 & 63) + 72) >> 6)
}

/// The first block of each window of `window` blocks that a batch whose longest message has
/// `max_len` bytes needs (with the default window, one, starting at 0, for messages up to a
/// little under 1 MiB).
pub fn block_windows(max_len: usize, window: u32) -> impl Iterator<Item = u32> {
    let blocks = sha256_blocks(max_len);
    let window = window.max(1) as u64;
    (0..blocks.div_ceil(window)).map(move |w| (w * window) as u32)
}

/// Work-group size of all three shaders (`local_size_x`).
pub const LOCAL_SIZE: u32 = 256;
/// Most work groups in one dispatch along x (the Vulkan minimum for maxComputeWorkGroupCount).
pub const MAX_GROUPS: u32 = 65535;

/// Splits `count` items (AES blocks or messages) into dispatches of at most `max_groups`
/// workgroups (`1..=MAX_GROUPS`; [`MAX_GROUPS`] in production, smaller in tests) of `per_group`
/// items each (`LOCAL_SIZE` for one item per invocation, `LOCAL_SIZE * P` for `aes_ctr`'s P
/// blocks per invocation): yields `(base, groups)` with `base` the push constant `block_base` /
/// `msg_base` and `groups` the x group count (`1..=max_groups`). Nothing for `count == 0`.
pub fn dispatches(count: u32, per_group: u32, max_groups: u32) -> impl Iterator<Item = (u32, u32)> {
    let max_groups = max_groups.clamp(1, MAX_GROUPS) as u64;
    let per_group = per_group.max(1) as u64;
    let per = max_groups * per_group;
    let count = count as u64;
    let n = count.div_ceil(per);
    (0..n).map(move |k| {
        let base = k * per;
        let left = count - base;
        let groups = left.div_ceil(per_group);
        (base as u32, groups.min(max_groups) as u32)
    })
}

/// Most AES blocks one `aes_ctr` invocation handles (the push constant `per_inv`).
pub const AES_MAX_BLOCKS_PER_INVOCATION: u32 = 64;

/// The workgroups an `aes_ctr` dispatch should have at least, when the input allows, before
/// [`aes_blocks_per_invocation`] gives invocations more than one block, on a GPU: several times
/// what a large GPU holds at once (an H200 holds at most 132 SMs x 7 groups of `aes_ctr`, by
/// shared memory). On the H200, 256 MiB of AES-128 (P = 8 with this target) ran 15% faster at
/// P = 8 than at P = 1 (BENCHMARKS.md).
pub const AES_TARGET_GROUPS_GPU: u64 = 8192;

/// [`AES_TARGET_GROUPS_GPU`] for a device that runs on the host CPU (lavapipe), whose
/// parallelism is its thread count: there P >= 4 ran about 1.5 times as fast as P = 1.
pub const AES_TARGET_GROUPS_CPU: u64 = 64;

/// Blocks per invocation for `blocks` AES blocks (the push constant `per_inv`): the largest
/// power of two up to [`AES_MAX_BLOCKS_PER_INVOCATION`] that still leaves `target_groups`
/// workgroups, at least 1. Each workgroup fills its 32 KiB table once, so more blocks per
/// invocation amortise that fill, but too few workgroups would leave a large GPU idle.
pub fn aes_blocks_per_invocation(blocks: u64, target_groups: u64) -> u32 {
    let mut p = 1u32;
    while p < AES_MAX_BLOCKS_PER_INVOCATION && blocks >= target_groups * LOCAL_SIZE as u64 * (2 * p as u64) {
        p *= 2;
    }
    p
}

// ---------------------------------------------------------------- byte packing

/// Packs `bytes` little-endian into words, zero-padding the byte length up to a multiple of
/// `pad_to` bytes (0 or 1: no padding beyond a whole word) and then to a whole word.
/// Use `pad_to = 16` for `aes_ctr`'s Data and `4` for the SHA/HMAC Msgs buffer.
/// An empty input gives an empty vector (a Vulkan buffer must still be >= 1 word).
pub fn pack_le_words(bytes: &[u8], pad_to: usize) -> Vec<u32> {
    let mut len = bytes.len();
    if pad_to > 1 {
        len = len.div_ceil(pad_to) * pad_to;
    }
    pack_le_parts(len.div_ceil(4), [(0, bytes)])
}

/// `nwords` words holding each `(byte offset, bytes)` part packed little-endian, zeros
/// elsewhere. Panics if a part does not fit.
pub(crate) fn pack_le_parts<'a>(nwords: usize, parts: impl IntoIterator<Item = (usize, &'a [u8])>) -> Vec<u32> {
    let mut words = vec![0u32; nwords];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
    for (offset, part) in parts {
        bytes[offset..offset + part.len()].copy_from_slice(part);
    }
    // The bytes were written in memory order; as little-endian words that is a no-op on a
    // little-endian host and a byte swap on a big-endian one.
    for w in &mut words {
        *w = u32::from_le(*w);
    }
    words
}

/// The first `len` bytes of little-endian packed `words` (the inverse of [`pack_le_words`]).
/// Panics if `len > 4 * words.len()`.
pub fn unpack_le_words(words: &[u32], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    extend_unpacked(&mut out, words, len);
    out
}

/// Appends the first `len` bytes of little-endian packed `words` to `out`.
/// Panics if `len > 4 * words.len()`.
pub(crate) fn extend_unpacked(out: &mut Vec<u8>, words: &[u32], len: usize) {
    assert!(len <= words.len() * 4, "unpack_le_words: {} bytes from {} words", len, words.len());
    if cfg!(target_endian = "little") {
        // The words' memory is the bytes: one copy.
        out.extend_from_slice(&bytemuck::cast_slice::<u32, u8>(words)[..len]);
    } else {
        for w in &words[..len.div_ceil(4)] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.truncate(out.len() - (len.div_ceil(4) * 4 - len));
    }
}

/// The 16-byte initial counter block as the push constants `ctr0..ctr3` (big-endian words).
pub fn ctr_words(iv: &[u8; 16]) -> [u32; 4] {
    let mut c = [0u32; 4];
    for (k, w) in c.iter_mut().enumerate() {
        *w = u32::from_be_bytes([iv[4 * k], iv[4 * k + 1], iv[4 * k + 2], iv[4 * k + 3]]);
    }
    c
}

/// The counter block `iv + blocks` (a 128-bit big-endian addition mod 2^128): the counter of
/// block `blocks` of the CTR stream that starts at `iv`.
pub fn ctr_add(iv: &[u8; 16], blocks: u64) -> [u8; 16] {
    u128::from_be_bytes(*iv).wrapping_add(blocks as u128).to_be_bytes()
}

/// Digest bytes from the 8 big-endian words the SHA/HMAC shaders write per message.
pub fn digest_bytes(words: &[u32]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (k, w) in words[..8].iter().enumerate() {
        out[4 * k..4 * k + 4].copy_from_slice(&w.to_be_bytes());
    }
    out
}

// ---------------------------------------------------------------- AES key schedule

const AES_SBOX: [u8; 256] = [
    0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76, 0xca, 0x82, 0xc9,
    0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0, 0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f,
    0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15, 0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07,
    0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75, 0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3,
    0x29, 0xe3, 0x2f, 0x84, 0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58,
    0xcf, 0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8, 0x51, 0xa3,
    0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2, 0xcd, 0x0c, 0x13, 0xec, 0x5f,
    0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73, 0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88,
    0x46, 0xee, 0xb8, 0x14, 0xde, 0x5e, 0x0b, 0xdb, 0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac,
    0x62, 0x91, 0x95, 0xe4, 0x79, 0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a,
    0xae, 0x08, 0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a, 0x70,
    0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e, 0xe1, 0xf8, 0x98, 0x11,
    0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf, 0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42,
    0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16,
];

fn sub_word(w: u32) -> u32 {
    let b = w.to_be_bytes();
    u32::from_be_bytes([
        AES_SBOX[b[0] as usize],
        AES_SBOX[b[1] as usize],
        AES_SBOX[b[2] as usize],
        AES_SBOX[b[3] as usize],
    ])
}

/// `xtime`: multiplication by {02} in GF(2^8) (FIPS-197 4.2.1).
const fn xtime(x: u8) -> u8 {
    (x << 1) ^ if x & 0x80 != 0 { 0x1b } else { 0 }
}

/// Te0 of `shaders/include/aes.glsl`: `{02}.S[x] << 24 | S[x] << 16 | S[x] << 8 | {03}.S[x]`.
pub const AES_TE0: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut x = 0;
    while x < 256 {
        let s = AES_SBOX[x];
        let s2 = xtime(s);
        t[x] = u32::from_be_bytes([s2, s, s, s2 ^ s]);
        x += 1;
    }
    t
};

/// Words of `aes_ctr`'s uniform buffer `AesKeyTables`: 15 round keys, then Te0.
pub const AES_KEY_TABLES_WORDS: usize = 60 + 256;

/// `aes_ctr`'s uniform buffer for the schedule `w` ([`aes_expand_key_into`]): `w` padded with zeros
/// to 60 words (15 round keys), then the 256 words of [`AES_TE0`]. The schedule comes first, so
/// the same buffer also serves `aes_ctr_v1`, which reads it as a storage buffer of round keys.
pub fn aes_key_tables(w: &[u32]) -> Vec<u32> {
    let mut out = vec![0u32; AES_KEY_TABLES_WORDS];
    out[..w.len()].copy_from_slice(w);
    out[60..].copy_from_slice(&AES_TE0);
    out
}

/// FIPS-197 key expansion into `w`, where the key is kept (so that no copy of the schedule is
/// made on the way there). Returns `nr` = 10/12/14 for a 16/24/32-byte key, and leaves in `w`
/// the schedule in FIPS-197 `w[i]` order (big-endian words): its first `4 * (nr + 1)` words;
/// the words after them are left as they were (zeros in a new key). Upload
/// [`aes_key_tables`]`(w)` as `aes_ctr`'s binding 0 and push `nr`. `None` for any other key
/// length, `w` untouched.
///
/// On an x86-64 host with AES-NI, 16- and 32-byte keys are expanded with `AESKEYGENASSIST`
/// ([`ni`]): no table lookups, a few nanoseconds (a key per connection is on every connection's
/// path). Otherwise, and for 24-byte keys, in plain Rust ([`aes_expand_key_soft`]).
pub fn aes_expand_key_into(key: &[u8], w: &mut [u32; 60]) -> Option<u32> {
    let nr = match key.len() {
        16 => 10,
        24 => 12,
        32 => 14,
        _ => return None,
    };
    #[cfg(target_arch = "x86_64")]
    if key.len() != 24 && std::arch::is_x86_feature_detected!("aes") {
        // SAFETY: the CPU has AES-NI (checked just above), and `key` is 16 or 32 bytes.
        unsafe { ni::expand(key, w) };
        return Some(nr);
    }
    aes_expand_key_soft(key, w);
    Some(nr)
}

/// [`aes_expand_key_into`] in plain Rust, for a 16-, 24- or 32-byte key (FIPS-197 5.2).
pub fn aes_expand_key_soft(key: &[u8], w: &mut [u32; 60]) {
    let nk = key.len() / 4;
    let total = 4 * (nk + 7);
    for i in 0..nk {
        w[i] = u32::from_be_bytes([key[4 * i], key[4 * i + 1], key[4 * i + 2], key[4 * i + 3]]);
    }
    let mut rcon: u32 = 0x01;
    for i in nk..total {
        let mut t = w[i - 1];
        if i % nk == 0 {
            t = sub_word(t.rotate_left(8)) ^ (rcon << 24);
            rcon = (rcon << 1) ^ if rcon & 0x80 != 0 { 0x11b } else { 0 };
        } else if nk > 6 && i % nk == 4 {
            t = sub_word(t);
        }
        w[i] = w[i - nk] ^ t;
    }
}

/// AES-128 and AES-256 key expansion with AES-NI (the sequences of Intel's AES-NI white paper,
/// "Intel Advanced Encryption Standard (AES) New Instructions Set", section 4.1).
#[cfg(target_arch = "x86_64")]
mod ni {
    use std::arch::x86_64::{
        __m128i, _mm_aeskeygenassist_si128, _mm_loadu_si128, _mm_shuffle_epi32, _mm_slli_si128, _mm_storeu_si128,
        _mm_xor_si128,
    };

    /// `k` with each of its words XORed with every word before it, then XORed with `t`'s
    /// word `T` broadcast (`_mm_shuffle_epi32::<T>`): the next round key.
    #[inline]
    #[target_feature(enable = "aes")]
    unsafe fn step<const T: i32>(k: __m128i, t: __m128i) -> __m128i {
        let mut k = k;
        k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        _mm_xor_si128(k, _mm_shuffle_epi32::<T>(t))
    }

    /// Writes round key `i` (its 16 bytes in FIPS-197 order) as four big-endian words.
    #[inline]
    #[target_feature(enable = "aes")]
    unsafe fn put(w: &mut [u32; 60], i: usize, k: __m128i) {
        let mut b = [0u8; 16];
        // SAFETY: `b` is 16 writable bytes; the store is unaligned.
        unsafe { _mm_storeu_si128(b.as_mut_ptr().cast(), k) };
        for j in 0..4 {
            w[4 * i + j] = u32::from_be_bytes([b[4 * j], b[4 * j + 1], b[4 * j + 2], b[4 * j + 3]]);
        }
    }

    /// Expands a 16- or 32-byte `key` into `w` (the words a longer schedule would hold past its
    /// end are left as they are).
    ///
    /// # Safety
    /// The CPU supports AES-NI, and `key` is 16 or 32 bytes long.
    #[target_feature(enable = "aes")]
    pub(super) unsafe fn expand(key: &[u8], w: &mut [u32; 60]) {
        // SAFETY: `key` holds at least 16 bytes (and 32 where the second load is made).
        let k0 = unsafe { _mm_loadu_si128(key.as_ptr().cast()) };
        put(w, 0, k0);
        if key.len() == 16 {
            macro_rules! round {
                ($k:ident, $i:expr, $rcon:expr) => {
                    $k = step::<0xff>($k, _mm_aeskeygenassist_si128::<$rcon>($k));
                    put(w, $i, $k);
                };
            }
            let mut k = k0;
            round!(k, 1, 0x01);
            round!(k, 2, 0x02);
            round!(k, 3, 0x04);
            round!(k, 4, 0x08);
            round!(k, 5, 0x10);
            round!(k, 6, 0x20);
            round!(k, 7, 0x40);
            round!(k, 8, 0x80);
            round!(k, 9, 0x1b);
            round!(k, 10, 0x36);
            return;
        }
        // SAFETY: as above, the key's second half.
        let k1 = unsafe { _mm_loadu_si128(key.as_ptr().add(16).cast()) };
        put(w, 1, k1);
        let (mut a, mut b) = (k0, k1);
        macro_rules! pair {
            ($i:expr, $rcon:expr) => {
                a = step::<0xff>(a, _mm_aeskeygenassist_si128::<$rcon>(b));
                put(w, $i, a);
                if $i < 14 {
                    b = step::<0xaa>(b, _mm_aeskeygenassist_si128::<0>(a));
                    put(w, $i + 1, b);
                }
            };
        }
        pair!(2, 0x01);
        pair!(4, 0x02);
        pair!(6, 0x04);
        pair!(8, 0x08);
        pair!(10, 0x10);
        pair!(12, 0x20);
        pair!(14, 0x40);
    }
}

// ---------------------------------------------------------------- SHA-256 / HMAC

/// SHA-256 initial state.
pub const SHA256_IV: [u32; 8] =
    [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/// The SHA-256 compression function on one 64-byte block (RustCrypto's, which uses the
/// host's SHA extensions where it has them).
pub fn sha256_compress(h: &mut [u32; 8], block: &[u8; 64]) {
    sha2::compress256(h, &[*sha2::digest::generic_array::GenericArray::from_slice(block)]);
}

/// Continues a SHA-256 state `h` that has absorbed `prefix_len` bytes (a multiple of 64) over
/// `data`, pads for a total of `prefix_len + data.len()` bytes and returns the digest bytes.
/// (The CPU twin of the shaders' `sha256_absorb_final`.)
pub fn sha256_finish(mut h: [u32; 8], prefix_len: u64, data: &[u8]) -> [u8; 32] {
    let mut chunks = data.chunks_exact(64);
    for block in &mut chunks {
        sha256_compress(&mut h, block.try_into().unwrap());
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 128];
    tail[..rest.len()].copy_from_slice(rest);
    tail[rest.len()] = 0x80;
    let n = if rest.len() < 56 { 64 } else { 128 };
    let bits = (prefix_len + data.len() as u64) * 8;
    tail[n - 8..n].copy_from_slice(&bits.to_be_bytes());
    for block in tail[..n].chunks_exact(64) {
        sha256_compress(&mut h, block.try_into().unwrap());
    }
    let mut out = [0u8; 32];
    for (k, w) in h.iter().enumerate() {
        out[4 * k..4 * k + 4].copy_from_slice(&w.to_be_bytes());
    }
    out
}

/// SHA-256 of `data` on the CPU.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    sha256_finish(SHA256_IV, 0, data)
}

/// HMAC-SHA256 midstates for `hmac_sha256_batch`'s push constants: `(inner, outer)` = the
/// SHA-256 state after compressing the single block `K' ^ ipad` resp. `K' ^ opad`, where `K'` is
/// the key (or SHA-256(key) if the key is longer than 64 bytes) zero-padded to 64 bytes.
pub fn hmac_midstates(key: &[u8]) -> ([u32; 8], [u32; 8]) {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&sha256(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let ipad = k.map(|b| b ^ 0x36);
    let opad = k.map(|b| b ^ 0x5c);
    let mut inner = SHA256_IV;
    sha256_compress(&mut inner, &ipad);
    let mut outer = SHA256_IV;
    sha256_compress(&mut outer, &opad);
    (inner, outer)
}

/// HMAC-SHA256 on the CPU from midstates (what the shader computes per message).
pub fn hmac_sha256_from_midstates(inner: [u32; 8], outer: [u32; 8], msg: &[u8]) -> [u8; 32] {
    let ih = sha256_finish(inner, 64, msg);
    sha256_finish(outer, 64, &ih)
}

/// HMAC-SHA256 on the CPU.
#[cfg(test)]
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let (inner, outer) = hmac_midstates(key);
    hmac_sha256_from_midstates(inner, outer, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(nr, w)` of a key expanded into a new schedule of zeros.
    fn aes_expand_key(key: &[u8]) -> Option<(u32, [u32; 60])> {
        let mut w = [0u32; 60];
        aes_expand_key_into(key, &mut w).map(|nr| (nr, w))
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{:02x}", x)).collect()
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn key_expansion_fips197_a1() {
        let (nr, w) = aes_expand_key(&unhex("2b7e151628aed2a6abf7158809cf4f3c")).unwrap();
        assert_eq!(nr, 10);
        assert!(w[44..].iter().all(|&x| x == 0));
        assert_eq!(&w[..4], &[0x2b7e1516, 0x28aed2a6, 0xabf71588, 0x09cf4f3c]);
        assert_eq!(w[4], 0xa0fafe17); // FIPS-197 A.1, i = 4
        assert_eq!(&w[40..44], &[0xd014f9a8, 0xc9ee2589, 0xe13f0cc8, 0xb6630ca6]);
    }

    #[test]
    fn key_expansion_192_256() {
        // FIPS-197 A.2 and A.3: last words of the schedule.
        let (nr, w) = aes_expand_key(&unhex("8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b")).unwrap();
        assert_eq!(nr, 12);
        assert!(w[52..].iter().all(|&x| x == 0));
        assert_eq!(&w[48..52], &[0xe98ba06f, 0x448c773c, 0x8ecc7204, 0x01002202]);
        let (nr, w) =
            aes_expand_key(&unhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")).unwrap();
        assert_eq!(nr, 14);
        assert_eq!(&w[56..60], &[0xfe4890d1, 0xe6188d0b, 0x046df344, 0x706c631e]);
        assert!(aes_expand_key(&[0u8; 15]).is_none());
        assert!(aes_expand_key(&[0u8; 20]).is_none());
        assert!(aes_expand_key(&[]).is_none());
    }

    #[test]
    fn the_aes_ni_key_expansion_gives_the_fips_schedule() {
        // FIPS-197 A.1 and A.3 through the plain-Rust expansion, then 2,000 keys (of 16 and 32
        // bytes, each byte pattern different) through both expansions.
        let mut w = [0u32; 60];
        aes_expand_key_soft(&unhex("2b7e151628aed2a6abf7158809cf4f3c"), &mut w);
        assert_eq!(&w[40..44], &[0xd014f9a8, 0xc9ee2589, 0xe13f0cc8, 0xb6630ca6]);
        aes_expand_key_soft(&unhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"), &mut w);
        assert_eq!(&w[56..60], &[0xfe4890d1, 0xe6188d0b, 0x046df344, 0x706c631e]);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("aes") {
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for n in 0..2000 {
                let len = if n % 2 == 0 { 16 } else { 32 };
                let key: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                let (mut soft, mut fast) = ([0u32; 60], [0u32; 60]);
                aes_expand_key_soft(&key, &mut soft);
                // SAFETY: the CPU has AES-NI (checked above); the key is 16 or 32 bytes.
                unsafe { ni::expand(&key, &mut fast) };
                assert_eq!(soft, fast, "key {}", hex(&key));
            }
        }
    }

    #[test]
    fn sha256_known() {
        assert_eq!(hex(&sha256(b"abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(hex(&sha256(b"")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(
            hex(&sha256(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
    }

    #[test]
    fn hmac_rfc4231() {
        // Test case 1.
        let (inner, outer) = hmac_midstates(&[0x0b; 20]);
        assert_eq!(inner[0], 0x2bb21804);
        assert_eq!(outer[7], 0x10234b40);
        assert_eq!(
            hex(&hmac_sha256_from_midstates(inner, outer, b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // Test case 2 (short key).
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6 (131-byte key, hashed first).
        assert_eq!(
            hex(&hmac_sha256(&[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn packing() {
        let b: Vec<u8> = (1..=7).collect();
        let w = pack_le_words(&b, 4);
        assert_eq!(w, vec![0x04030201, 0x00070605]);
        assert_eq!(unpack_le_words(&w, 7), b);
        assert_eq!(pack_le_words(&b, 16).len(), 4);
        assert_eq!(pack_le_words(&[0u8; 16], 16).len(), 4);
        assert_eq!(pack_le_words(&[0u8; 17], 16).len(), 8);
        assert!(pack_le_words(&[], 16).is_empty());
        for len in 0..12 {
            let bytes: Vec<u8> = (1..=len as u8).collect();
            let words = pack_le_words(&bytes, 16);
            assert_eq!(unpack_le_words(&words, len), bytes);
            let mut out = vec![9];
            extend_unpacked(&mut out, &words, len);
            assert_eq!(out[1..], bytes[..]);
        }
        assert_eq!(ctr_words(&[0xf0, 0xf1, 0xf2, 0xf3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15])[0], 0xf0f1f2f3);
        assert_eq!(digest_bytes(&[0x01020304, 0, 0, 0, 0, 0, 0, 0x0a0b0c0d])[..4], [1, 2, 3, 4]);
    }

    #[test]
    fn dispatch_split() {
        let d = |count| dispatches(count, LOCAL_SIZE, MAX_GROUPS).collect::<Vec<_>>();
        assert_eq!(d(0), vec![]);
        assert_eq!(d(1), vec![(0, 1)]);
        assert_eq!(d(257), vec![(0, 2)]);
        let per = MAX_GROUPS * LOCAL_SIZE;
        assert_eq!(d(per), vec![(0, MAX_GROUPS)]);
        assert_eq!(d(per + 1), vec![(0, MAX_GROUPS), (per, 1)]);
        assert_eq!(d(u32::MAX).last().unwrap().0, 256 * per);
        // The last dispatch never runs past u32::MAX invocations (no wrap of block_base + id).
        let (base, groups) = *d(u32::MAX).last().unwrap();
        assert!(base as u64 + groups as u64 * LOCAL_SIZE as u64 - 1 <= u32::MAX as u64);
        // A smaller cap (as the tests use to force splitting); 0 is treated as 1.
        assert_eq!(dispatches(1000, LOCAL_SIZE, 2).collect::<Vec<_>>(), vec![(0, 2), (512, 2)]);
        assert_eq!(dispatches(513, LOCAL_SIZE, 0).collect::<Vec<_>>(), vec![(0, 1), (256, 1), (512, 1)]);
        // Several items per invocation (aes_ctr's per_inv = 4: 1024 blocks per group).
        assert_eq!(dispatches(5000, 1024, 2).collect::<Vec<_>>(), vec![(0, 2), (2048, 2), (4096, 1)]);
        let (base, groups) = *dispatches(u32::MAX, 4096, MAX_GROUPS).collect::<Vec<_>>().last().unwrap();
        assert!(base as u64 + groups as u64 * 4096 - 1 <= u32::MAX as u64 + 4095);
    }

    #[test]
    fn aes_blocks_per_invocation_keeps_enough_groups() {
        let t = AES_TARGET_GROUPS_GPU;
        let min = t * LOCAL_SIZE as u64;
        assert_eq!(aes_blocks_per_invocation(0, t), 1);
        assert_eq!(aes_blocks_per_invocation(2 * min - 1, t), 1);
        assert_eq!(aes_blocks_per_invocation(2 * min, t), 2);
        assert_eq!(aes_blocks_per_invocation(16 * min, t), 16);
        // 256 MiB on a GPU: P = 8, 8192 groups.
        assert_eq!(aes_blocks_per_invocation(1 << 24, t), 8);
        assert_eq!(aes_blocks_per_invocation(u32::MAX as u64, t), AES_MAX_BLOCKS_PER_INVOCATION);
        assert_eq!(aes_blocks_per_invocation(1 << 20, AES_TARGET_GROUPS_CPU), AES_MAX_BLOCKS_PER_INVOCATION);
        assert_eq!(aes_blocks_per_invocation(1 << 20, 0), AES_MAX_BLOCKS_PER_INVOCATION);
    }

    #[test]
    fn te0_matches_the_first_entries_of_openssl() {
        assert_eq!(&AES_TE0[..4], &[0xc66363a5, 0xf87c7c84, 0xee777799, 0xf67b7b8d]);
        assert_eq!(AES_TE0[255], 0x2c16163a);
        let tables = aes_key_tables(&aes_expand_key(&[0; 16]).unwrap().1);
        assert_eq!((tables.len(), tables[44], tables[60]), (316, 0, 0xc66363a5));
    }

    #[test]
    fn counter_addition_carries_and_wraps() {
        assert_eq!(ctr_add(&[0; 16], 1)[15], 1);
        let mut iv = [0u8; 16];
        iv[12..].copy_from_slice(&[0xff; 4]);
        let c = ctr_add(&iv, 1);
        assert_eq!(&c[11..], &[1, 0, 0, 0, 0]);
        assert_eq!(ctr_add(&[0xff; 16], 2), {
            let mut one = [0u8; 16];
            one[15] = 1;
            one
        });
    }
}
