#version 450
// aes_ctr: AES-CTR (NIST SP 800-38A) encryption/decryption in place, AES-128/192/256.
//
//   binding 0 (set 0): uniform buffer AesKeyTables (std140, 1264 bytes):
//              rk[15] (uvec4): the expanded key schedule, round r = FIPS-197 w[4r..4r+3]
//              (w = b0<<24|b1<<16|b2<<8|b3), zero past round nr (60 words in all);
//              te0[64] (uvec4): the 256 words of Te0 (see include/aes.glsl), Te0[e] =
//              te0[e/4][e%4]. (The same bytes bound as a storage buffer ran 3% slower on the
//              H200.)
//   binding 1 (set 0): storage buffer Data, read and written in place: the stream bytes packed
//              little-endian into u32 (byte j = (word[j/4] >> (8*(j%4))) & 0xff), padded by the
//              host to a multiple of 16 bytes.  Declared as uvec4 data[] (one AES block each);
//              the bytes are identical to uint[4*nblocks].
//   push constants (32 bytes, u32 each, in this order):
//              nblocks     number of 16-byte blocks in Data (the whole stream, not this dispatch)
//              nr          10, 12 or 14 (AES-128/192/256); any other value: Data left unchanged
//              ctr0..ctr3  the initial 16-byte counter block as 4 big-endian words
//                          (ctr0 = bytes 0..3, ctr3 = bytes 12..15)
//              block_base  the first block of this dispatch (to split a stream over dispatches)
//              per_inv     blocks per invocation, P >= 1
//   dispatch:  local_size_x = 256; workgroup g covers the 256*P blocks from
//              block_base + 256*P*g; its invocation l handles the blocks
//              block_base + 256*P*g + l + 256*j for j = 0..P-1 (consecutive invocations,
//              consecutive blocks: coalesced). Blocks >= nblocks are left alone. So
//              groups = ceil((nblocks - block_base) / (256*P)), at most 65535 per dispatch;
//              block_base += 65535*256*P for the next dispatch.
//   per block: counter = (ctr0..ctr3) + b as a 128-bit big-endian integer (mod 2^128);
//              keystream = AES_K(counter) (its 16 bytes in FIPS-197 output order);
//              stream bytes 16b..16b+15 ^= keystream bytes.
//   shared memory: 32 KiB (the T-table in 32 copies, see include/aes.glsl); aes_ctr_c16.comp
//              is the same kernel with 16 copies (16 KiB) for devices with less.
//
// Each workgroup fills its shared table once (32 stores per invocation) and then encrypts 256*P
// blocks (160 to 224 table look-ups each), so a larger P amortises the fill.
#extension GL_GOOGLE_include_directive : require
#define AES_TABLE_COPIES_LOG2 5
#include "aes_ctr_main.glsl"
