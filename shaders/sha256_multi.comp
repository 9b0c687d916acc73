#version 450
// sha256_multi: SHA-256 or HMAC-SHA256 (RFC 2104) of many messages at once, each with its own
// key (or none), one message per invocation: the coalesced launch of a flush (see
// src/crypto/batch.rs).
//
//   binding 0 (set 0): readonly storage buffer Keys { uint mid[]; }: the HMAC keys' midstates,
//              usually the same buffer as binding 2 (each item carries its key in its own
//              staging slot): 16 words at word 4k for the key at k: mid[4k .. 4k+7] the
//              SHA-256 state after the block K' ^ ipad, mid[4k+8 .. 4k+15] after K' ^ opad
//              (host.rs hmac_midstates).
//   binding 1 (set 0): readonly storage buffer Index { uvec4 msg[]; }: per message i,
//              (byte offset in Data, byte length, where its key starts in Keys in 16-byte
//              units (k above) or 0xffffffff for plain SHA-256, word offset in Data of its
//              8-word digest).
//   binding 2 (set 0): readonly storage buffer Data { uint bytes[]; }: the messages' bytes
//              packed little-endian (any offset alignment).
//   binding 3 (set 0): storage buffer Digests { uint digest[]; }: the same buffer as binding 2,
//              bound again for writing: the digests, which the host placed apart from every
//              message: digest k-th big-endian word at digest[m.w + k]. (Reading the messages
//              through a readonly binding lets the driver use its read-only cache path.)
//   push constants (16 bytes): nmsgs, msg_base (added to gl_GlobalInvocationID.x), blk_begin
//              and blk_count: the window of each message's (inner) blocks this dispatch
//              compresses, as in sha256_batch.comp; for blk_begin > 0 the state is read from
//              the digest slot.
//   dispatch:  local_size_x = 32; invocation g handles message msg_base + g (nothing past
//              nmsgs); at most 65535 groups per dispatch. A flush holds a few thousand
//              messages at most, each a chain of blocks: one warp per workgroup spreads them over
//              every SM instead of packing 8 warps onto a few (on the H200 a flush of 16 KiB
//              HMACs went from 0.72-0.77 to 0.42 ms of GPU time against 256 per workgroup).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 32) in;

layout(std430, set = 0, binding = 0) readonly buffer Keys { uint mid[]; };
layout(std430, set = 0, binding = 1) readonly buffer Index { uvec4 msg[]; };
layout(std430, set = 0, binding = 2) readonly buffer Data { uint bytes[]; };
layout(std430, set = 0, binding = 3) buffer Digests { uint digest[]; };

layout(push_constant) uniform Push {
    uint nmsgs;
    uint msg_base;
    uint blk_begin;
    uint blk_count;
};

#include "sha256_msg.glsl"

void main() {
    uint i = msg_base + gl_GlobalInvocationID.x;
    if (i >= nmsgs) {
        return;
    }
    uvec4 m = msg[i];
    uint o = m.w;
    bool keyed = m.z != 0xffffffffu;
    uint prefix = keyed ? 64u : 0u;

    uint h[8];
    if (blk_begin > 0u) {
        if (blk_begin >= (m.y >> 6) + (((m.y & 63u) + 72u) >> 6)) {
            return; // finished in an earlier window
        }
        h = uint[8](digest[o + 0u], digest[o + 1u], digest[o + 2u], digest[o + 3u],
                    digest[o + 4u], digest[o + 5u], digest[o + 6u], digest[o + 7u]);
    } else if (keyed) {
        uint k = m.z * 4u;
        h = uint[8](mid[k + 0u], mid[k + 1u], mid[k + 2u], mid[k + 3u],
                    mid[k + 4u], mid[k + 5u], mid[k + 6u], mid[k + 7u]);
    } else {
        h = uint[8](0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                    0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u);
    }
    bool done = sha256_absorb_window(h, m.x, m.y, prefix, blk_begin, blk_count);
    if (done && keyed) {
        // Outer: one block = inner digest (32 bytes) || 0x80 || zeros || bit length 768.
        uint w[16] = uint[16](h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7],
                              0x80000000u, 0u, 0u, 0u, 0u, 0u, 0u, (64u + 32u) * 8u);
        uint k = m.z * 4u + 8u;
        uint ho[8] = uint[8](mid[k + 0u], mid[k + 1u], mid[k + 2u], mid[k + 3u],
                             mid[k + 4u], mid[k + 5u], mid[k + 6u], mid[k + 7u]);
        sha256_compress(ho, w);
        h = ho;
    }
    digest[o + 0u] = h[0]; digest[o + 1u] = h[1]; digest[o + 2u] = h[2]; digest[o + 3u] = h[3];
    digest[o + 4u] = h[4]; digest[o + 5u] = h[5]; digest[o + 6u] = h[6]; digest[o + 7u] = h[7];
}
