// aes.glsl: AES (FIPS-197) encryption rounds with one T-table in shared memory.
//
// Word convention: FIPS-197 big-endian state columns, w = b0<<24 | b1<<16 | b2<<8 | b3,
// where b0..b3 are bytes 4c..4c+3 of the 16-byte block / round key (column c).
// A block is a uvec4 (x = column 0 .. w = column 3).
//
// Table: Te0[x] = {02}.S[x] << 24 | S[x] << 16 | S[x] << 8 | {03}.S[x]  (OpenSSL's Te0).
// Te1..Te3 are byte rotations of Te0 (Te_k = ror(Te0, 8k)); the S-box for the last
// round is taken from Te0's middle bytes, so Te0 is the only table. The including shader
// supplies its 256 words (aes_ctr.comp reads them from its uniform buffer): a table in a
// shader constant array is, once indexed at run time, copied into a per-invocation array
// by glslang, which a driver may place in (slow) local memory.
//
// The table lives in shared memory, replicated AES_TABLE_COPIES = 1 << AES_TABLE_COPIES_LOG2
// times and interleaved: entry x, copy c sits at word (x << LOG2) | c. The invocation with
// local index l uses copy l & (COPIES-1). With 32 copies each lane of a 32-wide NVIDIA warp
// (= 32 consecutive local indices) reads its own bank, so the random look-ups are free of
// bank conflicts. Shared use: 1 KiB * AES_TABLE_COPIES (32 KiB at the default, exactly
// lavapipe's maxComputeSharedMemorySize, so the including shader must not declare any other
// shared variable at LOG2 = 5). Define AES_TABLE_COPIES_LOG2 (0..5) before including to trade
// shared memory for bank conflicts (16 copies: at most 2-way conflicts, 16 KiB).
//
// Usage:
//     aes_table_store(e, Te0[e]) for every e in 0..255 (spread over the workgroup);
//     barrier();                      // in uniform control flow, before any early return
//     uint lane = aes_lane();
//     s ^= rk0;                       // initial AddRoundKey
//     s = aes_round(s, rk_r, lane);   // rounds 1 .. Nr-1
//     s = aes_final_round(s, rk_Nr, lane);
#ifndef VKASYNC_AES_GLSL
#define VKASYNC_AES_GLSL

#ifndef AES_TABLE_COPIES_LOG2
#define AES_TABLE_COPIES_LOG2 5
#endif
#define AES_TABLE_COPIES (1u << AES_TABLE_COPIES_LOG2)

shared uint aes_sT[256u * AES_TABLE_COPIES];

// Stores Te0[e] = v into all copies. Each entry's copies are written in an order rotated by
// the entry, so that the 32 lanes of a warp storing 32 consecutive entries hit 32 different
// banks at every store.
void aes_table_store(uint e, uint v) {
    for (uint c = 0u; c < AES_TABLE_COPIES; ++c) {
        aes_sT[(e << AES_TABLE_COPIES_LOG2) | ((c + e) & (AES_TABLE_COPIES - 1u))] = v;
    }
}

// This invocation's copy index.
uint aes_lane() {
    return gl_LocalInvocationID.x & (AES_TABLE_COPIES - 1u);
}

// The table-word index of Te0[byte k of w] in copy `lane`, for k = 3 (bits 24..31) .. 0:
// extract the byte, then shift it into place. (Written as one shift and one and-or, e.g.
// ((w >> 11) & 0x1fe0) | lane, the kernel ran 20% slower on the H200: see BENCHMARKS.md.)
uint aes_i3(uint w, uint lane) { return ((w >> 24) << AES_TABLE_COPIES_LOG2) | lane; }
uint aes_i2(uint w, uint lane) { return (((w >> 16) & 0xffu) << AES_TABLE_COPIES_LOG2) | lane; }
uint aes_i1(uint w, uint lane) { return (((w >> 8) & 0xffu) << AES_TABLE_COPIES_LOG2) | lane; }
uint aes_i0(uint w, uint lane) { return ((w & 0xffu) << AES_TABLE_COPIES_LOG2) | lane; }

uint aes_ror8(uint x) { return (x >> 8) | (x << 24); }
uint aes_ror16(uint x) { return (x >> 16) | (x << 16); }
uint aes_ror24(uint x) { return (x >> 24) | (x << 8); }

// One output column of a full round: Te0[a3] ^ Te1[b2] ^ Te2[c1] ^ Te3[d0] ^ k.
uint aes_column(uint a, uint b, uint c, uint d, uint k, uint lane) {
    return aes_sT[aes_i3(a, lane)] ^ aes_ror8(aes_sT[aes_i2(b, lane)]) ^ aes_ror16(aes_sT[aes_i1(c, lane)])
        ^ aes_ror24(aes_sT[aes_i0(d, lane)]) ^ k;
}

// One full round (SubBytes, ShiftRows, MixColumns, AddRoundKey k).
uvec4 aes_round(uvec4 s, uvec4 k, uint lane) {
    return uvec4(aes_column(s.x, s.y, s.z, s.w, k.x, lane), aes_column(s.y, s.z, s.w, s.x, k.y, lane),
                 aes_column(s.z, s.w, s.x, s.y, k.z, lane), aes_column(s.w, s.x, s.y, s.z, k.w, lane));
}

// One output column of the last round (SubBytes, ShiftRows, AddRoundKey; no MixColumns).
// S[x] is bits 8..15 (and 16..23) of Te0[x].
uint aes_final_column(uint a, uint b, uint c, uint d, uint k, uint lane) {
    return ((aes_sT[aes_i3(a, lane)] << 8) & 0xff000000u) ^ (aes_sT[aes_i2(b, lane)] & 0x00ff0000u)
        ^ (aes_sT[aes_i1(c, lane)] & 0x0000ff00u) ^ ((aes_sT[aes_i0(d, lane)] >> 8) & 0xffu) ^ k;
}

// The last round.
uvec4 aes_final_round(uvec4 s, uvec4 k, uint lane) {
    return uvec4(aes_final_column(s.x, s.y, s.z, s.w, k.x, lane), aes_final_column(s.y, s.z, s.w, s.x, k.y, lane),
                 aes_final_column(s.z, s.w, s.x, s.y, k.z, lane), aes_final_column(s.w, s.x, s.y, s.z, k.w, lane));
}

// Byte-swap each word: converts an AES big-endian output word to the little-endian
// packed word holding the same 4 stream bytes (and back).
uvec4 aes_bswap4(uvec4 v) {
    return (v << 24) | ((v & 0xff00u) << 8) | ((v >> 8) & 0xff00u) | (v >> 24);
}

#endif // VKASYNC_AES_GLSL
