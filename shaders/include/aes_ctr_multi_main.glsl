// aes_ctr_multi_main.glsl: the body of aes_ctr_multi.comp and aes_ctr_multi_c16.comp (which
// differ only in AES_TABLE_COPIES_LOG2); the interface is documented in aes_ctr_multi.comp.
#ifndef VKASYNC_AES_CTR_MULTI_MAIN_GLSL
#define VKASYNC_AES_CTR_MULTI_MAIN_GLSL

layout(local_size_x = 256) in;

#include "aes.glsl"

layout(std140, set = 0, binding = 0) uniform AesTable { uvec4 te0[64]; };
layout(std430, set = 0, binding = 1) readonly buffer Keys { uvec4 rk[]; };
layout(std430, set = 0, binding = 2) readonly buffer Records { uvec4 rec[]; };
layout(std430, set = 0, binding = 3) buffer Data { uvec4 data[]; };

layout(push_constant) uniform Push {
    uint nrecords;
    uint total_blocks;
    uint block_base;
};

// Rounds 1..nrounds of the schedule at rk[base] with the initial AddRoundKey.
uvec4 aes_encrypt_block(uvec4 s, uint base, uint nrounds, uint lane) {
    s ^= rk[base];
    for (uint r = 1u; r < nrounds; ++r) {
        s = aes_round(s, rk[base + r], lane);
    }
    return aes_final_round(s, rk[base + nrounds], lane);
}

void main() {
    // Every invocation helps fill the shared table before any early return.
    for (uint e = gl_LocalInvocationID.x; e < 256u; e += gl_WorkGroupSize.x) {
        aes_table_store(e, te0[e >> 2][e & 3u]);
    }
    barrier();

    uint b = block_base + gl_GlobalInvocationID.x;
    if (b >= total_blocks || nrecords == 0u) {
        return;
    }
    // The record holding block b: the last one whose first block is <= b (records are in
    // order of their first blocks, which start at 0 and leave no gaps). At most 32 steps.
    uint lo = 0u;
    uint hi = nrecords;
    while (hi - lo > 1u) {
        uint mid = (lo + hi) >> 1;
        if (rec[2u * mid].x <= b) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    uvec4 r = rec[2u * lo];
    uvec4 c = rec[2u * lo + 1u];
    uint j = b - r.x;
    if (j >= (r.z & 0x0fffffffu)) {
        return; // cannot happen with a well-formed table; never write outside a record
    }
    // Counter block c + j, 128-bit big-endian, mod 2^128.
    uint carry;
    uvec4 ctr;
    ctr.w = uaddCarry(c.w, j, carry);
    ctr.z = uaddCarry(c.z, carry, carry);
    ctr.y = uaddCarry(c.y, carry, carry);
    ctr.x = c.x + carry;
    uint nr = r.z >> 28;
    uint key = r.w;
    uint lane = aes_lane();
    uvec4 ks;
    if (nr == 10u) {
        ks = aes_encrypt_block(ctr, key, 10u, lane);
    } else if (nr == 12u) {
        ks = aes_encrypt_block(ctr, key, 12u, lane);
    } else if (nr == 14u) {
        ks = aes_encrypt_block(ctr, key, 14u, lane);
    } else {
        return;
    }
    data[r.y + j] ^= aes_bswap4(ks);
}

#endif // VKASYNC_AES_CTR_MULTI_MAIN_GLSL
