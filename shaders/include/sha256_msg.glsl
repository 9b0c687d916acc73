// sha256_msg.glsl: SHA-256 over a message held in a little-endian-packed byte buffer,
// starting from an arbitrary chaining state (used by sha256_batch and hmac_sha256_batch).
//
// The including shader must declare, before including this file, a storage buffer with
//     uint bytes[];   // byte j = (bytes[j >> 2] >> (8 * (j & 3))) & 0xff
// padded to a whole number of words (no word past the last message byte is read).
//
//   bool sha256_absorb_window(inout uint h[8], uint off, uint len, uint prefix_len,
//                             uint blk_begin, uint blk_count)
//       The message's blocks, padding included, are numbered 0 .. nblk-1.  Continues the hash
//       in h over blocks blk_begin .. min(nblk, blk_begin + blk_count) - 1 of the len message
//       bytes at byte offset off (any alignment), where h is the state before block
//       blk_begin (for blk_begin = 0: after prefix_len bytes, prefix_len a multiple of 64: 0 for
//       a plain hash, 64 after an HMAC ipad/opad block), with the final padding for a total
//       length of prefix_len + len bytes.  Returns true when the window reached the last
//       block: h is then the digest as 8 big-endian words; otherwise h is the state before
//       block blk_begin + blk_count, to be continued by the next window.
//
//       Windows bound the loop: llvmpipe (lavapipe) ends a shader invocation's loops after
//       65,535 iterations in total, counted over every loop of the invocation, so one
//       invocation must never loop over a whole long message.  The host hashes long messages
//       in several dispatches of at most SHA256_WINDOW_BLOCKS blocks each.
#ifndef VKASYNC_SHA256_MSG_GLSL
#define VKASYNC_SHA256_MSG_GLSL

#include "sha256.glsl"

// Byte at byte offset p.
uint sha256_msg_byte(uint p) {
    return (bytes[p >> 2] >> ((p & 3u) << 3)) & 0xffu;
}

// The 4 bytes at byte offset p (any alignment) as a big-endian word.  All 4 bytes must lie
// inside the message: for an unaligned p the second word read holds byte p+3, so it exists.
uint sha256_msg_be_word(uint p) {
    uint i = p >> 2;
    uint sh = (p & 3u) << 3;
    uint v = bytes[i];
    if (sh != 0u) {
        v = (v >> sh) | (bytes[i + 1u] << (32u - sh));
    }
    // v holds bytes p..p+3 little-endian; swap to big-endian.
    return (v << 24) | ((v & 0xff00u) << 8) | ((v >> 8) & 0xff00u) | (v >> 24);
}

// Word j (0..15) of the last message block: the r (< 64) tail bytes at p, then 0x80, then
// zeros.  Only bytes below r are read from memory.
uint sha256_tail_word(uint p, uint r, uint j) {
    uint o = j << 2;
    if (o + 4u <= r) {
        return sha256_msg_be_word(p + o);
    }
    uint v = 0u;
    for (uint k = 0u; k < 4u; ++k) {
        uint q = o + k;
        uint byt = 0u;
        if (q < r) {
            byt = sha256_msg_byte(p + q);
        } else if (q == r) {
            byt = 0x80u;
        }
        v = (v << 8) | byt;
    }
    return v;
}

uint sha256_bswap(uint v) {
    return (v << 24) | ((v & 0xff00u) << 8) | ((v >> 8) & 0xff00u) | (v >> 24);
}

// The 16 words at word index i, and the same as big-endian words (constant indices only).
#define SHA256_LOAD16(d, i)                                                                   \
    d[0] = bytes[(i) + 0u];   d[1] = bytes[(i) + 1u];   d[2] = bytes[(i) + 2u];                \
    d[3] = bytes[(i) + 3u];   d[4] = bytes[(i) + 4u];   d[5] = bytes[(i) + 5u];                \
    d[6] = bytes[(i) + 6u];   d[7] = bytes[(i) + 7u];   d[8] = bytes[(i) + 8u];                \
    d[9] = bytes[(i) + 9u];   d[10] = bytes[(i) + 10u]; d[11] = bytes[(i) + 11u];              \
    d[12] = bytes[(i) + 12u]; d[13] = bytes[(i) + 13u]; d[14] = bytes[(i) + 14u];              \
    d[15] = bytes[(i) + 15u];
#define SHA256_BSWAP16(d, s)                                                                  \
    d[0] = sha256_bswap(s[0]);   d[1] = sha256_bswap(s[1]);   d[2] = sha256_bswap(s[2]);       \
    d[3] = sha256_bswap(s[3]);   d[4] = sha256_bswap(s[4]);   d[5] = sha256_bswap(s[5]);       \
    d[6] = sha256_bswap(s[6]);   d[7] = sha256_bswap(s[7]);   d[8] = sha256_bswap(s[8]);       \
    d[9] = sha256_bswap(s[9]);   d[10] = sha256_bswap(s[10]); d[11] = sha256_bswap(s[11]);     \
    d[12] = sha256_bswap(s[12]); d[13] = sha256_bswap(s[13]); d[14] = sha256_bswap(s[14]);     \
    d[15] = sha256_bswap(s[15]);

bool sha256_absorb_window(inout uint h[8], uint off, uint len, uint prefix_len, uint blk_begin, uint blk_count) {
    // Total bit length (64-bit, big-endian words hi:lo) of prefix_len + len bytes.
    uint carry;
    uint total = uaddCarry(prefix_len, len, carry);
    uint bits_hi = (total >> 29) | (carry << 3);
    uint bits_lo = total << 3;

    uint nfull = len >> 6;          // whole 64-byte message blocks
    uint r = len & 63u;             // bytes in the last, partial block (0..63)
    // Blocks to compress: the whole ones, then the tail + 0x80 (+ the length if r < 56),
    // then, if r >= 56, one more block of zeros + the length.
    uint nblk = nfull + ((r + 72u) >> 6);
    uint blk_end = nblk - blk_begin <= blk_count ? nblk : blk_begin + blk_count;

    // One compression call site per loop (the unrolled compression is large).
    uint w[16];
    uint p = off + (blk_begin << 6);
    uint blk = blk_begin;
    uint full_end = min(blk_end, nfull);
    if ((p & 3u) == 0u && blk + 1u < full_end) {
        // Two or more whole, word-aligned blocks: the next block's 16 words are loaded before
        // the current block is compressed, so that the loads' latency overlaps the rounds (one
        // message per invocation leaves few warps per SM to hide it otherwise; on the H200,
        // SHA-256 of 10,000 messages of 16 KiB went from 170.7 to 189.6 GB/s). The last
        // iteration loads its own block again (in bounds) instead of branching. Shorter
        // messages, where nothing overlaps, keep the plain loop (64-byte messages lost 5 %
        // through the prefetching one).
        uint i = p >> 2;
        uint nx[16];
        SHA256_LOAD16(nx, i)
        for (; blk < full_end; ++blk) {
            SHA256_BSWAP16(w, nx)
            i = blk + 1u < full_end ? i + 16u : i;
            SHA256_LOAD16(nx, i)
            sha256_compress(h, w);
        }
        p = off + (blk << 6);
    }
    for (; blk < blk_end; ++blk) {
        // Written out so that w is only indexed with constants.
        if (blk < nfull) {
            w[0] = sha256_msg_be_word(p);         w[1] = sha256_msg_be_word(p + 4u);
            w[2] = sha256_msg_be_word(p + 8u);    w[3] = sha256_msg_be_word(p + 12u);
            w[4] = sha256_msg_be_word(p + 16u);   w[5] = sha256_msg_be_word(p + 20u);
            w[6] = sha256_msg_be_word(p + 24u);   w[7] = sha256_msg_be_word(p + 28u);
            w[8] = sha256_msg_be_word(p + 32u);   w[9] = sha256_msg_be_word(p + 36u);
            w[10] = sha256_msg_be_word(p + 40u);  w[11] = sha256_msg_be_word(p + 44u);
            w[12] = sha256_msg_be_word(p + 48u);  w[13] = sha256_msg_be_word(p + 52u);
            w[14] = sha256_msg_be_word(p + 56u);  w[15] = sha256_msg_be_word(p + 60u);
        } else if (blk == nfull) {
            w[0] = sha256_tail_word(p, r, 0u);    w[1] = sha256_tail_word(p, r, 1u);
            w[2] = sha256_tail_word(p, r, 2u);    w[3] = sha256_tail_word(p, r, 3u);
            w[4] = sha256_tail_word(p, r, 4u);    w[5] = sha256_tail_word(p, r, 5u);
            w[6] = sha256_tail_word(p, r, 6u);    w[7] = sha256_tail_word(p, r, 7u);
            w[8] = sha256_tail_word(p, r, 8u);    w[9] = sha256_tail_word(p, r, 9u);
            w[10] = sha256_tail_word(p, r, 10u);  w[11] = sha256_tail_word(p, r, 11u);
            w[12] = sha256_tail_word(p, r, 12u);  w[13] = sha256_tail_word(p, r, 13u);
            w[14] = sha256_tail_word(p, r, 14u);  w[15] = sha256_tail_word(p, r, 15u);
        } else {
            // The extra block when r >= 56: the 0x80 was in the previous one.
            w[0] = 0u;  w[1] = 0u;  w[2] = 0u;  w[3] = 0u;  w[4] = 0u;  w[5] = 0u;  w[6] = 0u;  w[7] = 0u;
            w[8] = 0u;  w[9] = 0u;  w[10] = 0u; w[11] = 0u; w[12] = 0u; w[13] = 0u; w[14] = 0u; w[15] = 0u;
        }
        if (blk + 1u == nblk) {
            w[14] = bits_hi;
            w[15] = bits_lo;
        }
        sha256_compress(h, w);
        p += 64u;
    }
    return blk_end == nblk;
}

#endif // VKASYNC_SHA256_MSG_GLSL
