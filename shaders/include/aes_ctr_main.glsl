// aes_ctr_main.glsl: the body of aes_ctr.comp and aes_ctr_c16.comp (which differ only in
// AES_TABLE_COPIES_LOG2); the interface is documented in aes_ctr.comp.
#ifndef VKASYNC_AES_CTR_MAIN_GLSL
#define VKASYNC_AES_CTR_MAIN_GLSL

layout(local_size_x = 256) in;

#include "aes.glsl"

layout(std140, set = 0, binding = 0) uniform AesKeyTables {
    uvec4 rk[15];  // round key r = FIPS-197 w[4r..4r+3]; rounds past nr are zero
    uvec4 te0[64]; // Te0[e] = te0[e / 4][e % 4]
};
layout(std430, set = 0, binding = 1) buffer Data { uvec4 data[]; };

layout(push_constant) uniform Push {
    uint nblocks;
    uint nr;
    uint ctr0;
    uint ctr1;
    uint ctr2;
    uint ctr3;
    uint block_base;
    uint per_inv;
};

// Rounds 1..nrounds with the initial AddRoundKey; called with a literal nrounds so that the
// driver can unroll the loop (and take the round keys straight from the uniform buffer).
uvec4 aes_encrypt_block(uvec4 s, uint nrounds, uint lane) {
    s ^= rk[0];
    for (uint r = 1u; r < nrounds; ++r) {
        s = aes_round(s, rk[r], lane);
    }
    return aes_final_round(s, rk[nrounds], lane);
}

// The counter block of block b: (ctr0..ctr3) + b as a 128-bit big-endian integer (ctr3 least
// significant), carry propagated, mod 2^128.
uvec4 aes_counter(uint b) {
    uvec4 c;
    uint carry;
    c.w = uaddCarry(ctr3, b, carry);
    c.z = uaddCarry(ctr2, carry, carry);
    c.y = uaddCarry(ctr1, carry, carry);
    c.x = ctr0 + carry;
    return c;
}

// This invocation's blocks first, first + 256, ... (per_inv of them, stopping at nblocks).
void aes_ctr_blocks(uint first, uint nrounds, uint lane) {
    // per_inv is at most 64 (host: AES_MAX_BLOCKS_PER_INVOCATION), so an invocation loops at
    // most 64 x 14 times: far below llvmpipe's 65,535 loop iterations per invocation.
    for (uint j = 0u; j < per_inv; ++j) {
        uint b = first + j * gl_WorkGroupSize.x;
        if (b >= nblocks) {
            return;
        }
        // The keystream words are big-endian (first byte in bits 24..31); data words are
        // little-endian packed.
        data[b] ^= aes_bswap4(aes_encrypt_block(aes_counter(b), nrounds, lane));
    }
}

void main() {
    // Every invocation helps fill the shared table before any early return.
    for (uint e = gl_LocalInvocationID.x; e < 256u; e += gl_WorkGroupSize.x) {
        aes_table_store(e, te0[e >> 2][e & 3u]);
    }
    barrier();

    uint first = block_base + gl_WorkGroupID.x * gl_WorkGroupSize.x * per_inv + gl_LocalInvocationID.x;
    uint lane = aes_lane();
    if (nr == 10u) {
        aes_ctr_blocks(first, 10u, lane);
    } else if (nr == 12u) {
        aes_ctr_blocks(first, 12u, lane);
    } else if (nr == 14u) {
        aes_ctr_blocks(first, 14u, lane);
    }
}

#endif // VKASYNC_AES_CTR_MAIN_GLSL
