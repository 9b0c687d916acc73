#version 450
// aes_ctr_v1: the first AES-CTR kernel (one block per invocation, T-table from a constant array),
// kept unchanged so that examples/bench_crypto.rs can measure the current kernel (aes_ctr.comp)
// against it in the same run. Crypto uses it only when asked to (Crypto::with_aes_kernel).
// AES-CTR (NIST SP 800-38A) encryption/decryption in place, AES-128/192/256.
//
//   binding 0 (set 0): readonly storage buffer RoundKeys, the expanded key schedule:
//              4*(nr+1) u32 words in FIPS-197 w[i] order (w = b0<<24|b1<<16|b2<<8|b3).
//              Declared as uvec4 rk[] (round r = rk[r]); the bytes are identical to uint[4*(nr+1)].
//   binding 1 (set 0): storage buffer Data, read and written in place: the stream bytes packed
//              little-endian into u32 (byte j = (word[j/4] >> (8*(j%4))) & 0xff), padded by the
//              host to a multiple of 16 bytes.  Declared as uvec4 data[] (one AES block each);
//              the bytes are identical to uint[4*nblocks].
//   push constants (28 bytes, u32 each, in this order):
//              nblocks     number of 16-byte blocks in Data (the whole stream, not this dispatch)
//              nr          10, 12 or 14 (AES-128/192/256); any other value: Data left unchanged
//              ctr0..ctr3  the initial 16-byte counter block as 4 big-endian words
//                          (ctr0 = bytes 0..3, ctr3 = bytes 12..15)
//              block_base  added to gl_GlobalInvocationID.x (to split a stream over dispatches)
//   dispatch:  local_size_x = 256; invocation i handles block b = block_base + i, i.e.
//              groups = ceil((nblocks - block_base) / 256), at most 65535 per dispatch; then
//              block_base += 65535*256 for the next dispatch.  Invocations with b >= nblocks
//              do nothing.
//   per block: counter = (ctr0..ctr3) + b as a 128-bit big-endian integer (mod 2^128);
//              keystream = AES_K(counter) (its 16 bytes in FIPS-197 output order);
//              stream bytes 16b..16b+15 ^= keystream bytes.
//   shared memory: 32 KiB (the replicated T-table, see include/aes_v1.glsl).
//
// local_size 256: the 32 KiB table fill (256 entries, one per invocation) is amortised over 256
// blocks, and 256 = number of table entries makes the fill one entry per invocation.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;

#include "aes_v1.glsl"

layout(std430, set = 0, binding = 0) readonly buffer RoundKeys { uvec4 rk[]; };
layout(std430, set = 0, binding = 1) buffer Data { uvec4 data[]; };

layout(push_constant) uniform Push {
    uint nblocks;
    uint nr;
    uint ctr0;
    uint ctr1;
    uint ctr2;
    uint ctr3;
    uint block_base;
};

// Rounds 1..nrounds with the initial AddRoundKey; called with a literal nrounds so that the
// driver can unroll the loop after inlining.
uvec4 aes_encrypt_block(uvec4 s, uint nrounds, uint lane) {
    s ^= rk[0];
    for (uint r = 1u; r < nrounds; ++r) {
        s = aes_round(s, rk[r], lane);
    }
    return aes_final_round(s, rk[nrounds], lane);
}

void main() {
    // Every invocation helps fill the shared table before any early return.
    aes_tables_init();

    uint b = block_base + gl_GlobalInvocationID.x;
    if (b >= nblocks) {
        return;
    }

    // counter = ctr + b, 128-bit big-endian (ctr3 least significant), carry propagated.
    uvec4 c;
    uint carry;
    c.w = uaddCarry(ctr3, b, carry);
    c.z = uaddCarry(ctr2, carry, carry);
    c.y = uaddCarry(ctr1, carry, carry);
    c.x = ctr0 + carry;

    uint lane = aes_lane();
    uvec4 ks;
    if (nr == 10u) {
        ks = aes_encrypt_block(c, 10u, lane);
    } else if (nr == 12u) {
        ks = aes_encrypt_block(c, 12u, lane);
    } else if (nr == 14u) {
        ks = aes_encrypt_block(c, 14u, lane);
    } else {
        return;
    }

    // ks words are big-endian (first byte in bits 24..31); data words are little-endian packed.
    data[b] ^= aes_bswap4(ks);
}
