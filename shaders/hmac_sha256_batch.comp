#version 450
// hmac_sha256_batch: HMAC-SHA256 (RFC 2104) of a batch of messages under one key,
// one message per invocation.
//
//   binding 0 (set 0): readonly storage buffer Msgs { uint bytes[]; }: all messages' bytes
//              concatenated, packed little-endian into u32 (byte j = (bytes[j/4] >> (8*(j%4)))
//              & 0xff), padded to a whole word.
//   binding 1 (set 0): readonly storage buffer Index { uvec2 msg[]; }: per message i,
//              msg[i] = (byte offset into Msgs, byte length); any offset alignment, length 0 ok.
//   binding 2 (set 0): storage buffer Digests { uint digest[]; }: 8 words per message,
//              digest[8*i + k] = the MAC's k-th big-endian word (host: to_be_bytes).
//   push constants (80 bytes, u32 each, in this order):
//              nmsgs       number of messages (the whole batch)
//              msg_base    added to gl_GlobalInvocationID.x
//              blk_begin   the window of each message's inner-hash blocks this dispatch
//              blk_count   compresses, as in sha256_batch.comp: for blk_begin > 0 the inner
//                          state is read from digest[]; the outer hash runs in the window that
//                          ends the inner one
//              inner[8]    SHA-256 state after compressing the block K' ^ ipad (0x36 bytes)
//              outer[8]    SHA-256 state after compressing the block K' ^ opad (0x5c bytes)
//              (K' = key, or SHA-256(key) if longer than 64 bytes, zero-padded to 64 bytes;
//              see host.rs hmac_midstates)
//   dispatch:  local_size_x = 256; invocation g handles message i = msg_base + g (nothing if
//              i >= nmsgs): groups = ceil((nmsgs - msg_base) / 256), at most 65535 per
//              dispatch, msg_base += 65535*256 for the next.
//   MAC = SHA256(K'^opad || SHA256(K'^ipad || m)): continue from inner over m (total length
//   64 + len), then from outer over the 32-byte inner digest (total length 96).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) readonly buffer Msgs { uint bytes[]; };
layout(std430, set = 0, binding = 1) readonly buffer Index { uvec2 msg[]; };
layout(std430, set = 0, binding = 2) buffer Digests { uint digest[]; };

layout(push_constant) uniform Push {
    uint nmsgs;
    uint msg_base;
    uint blk_begin;
    uint blk_count;
    uint inner[8];
    uint outer[8];
};

#include "sha256_msg.glsl"

void main() {
    uint i = msg_base + gl_GlobalInvocationID.x;
    if (i >= nmsgs) {
        return;
    }
    uvec2 m = msg[i];
    uint o = i * 8u;

    uint hi[8] = uint[8](inner[0], inner[1], inner[2], inner[3],
                         inner[4], inner[5], inner[6], inner[7]);
    if (blk_begin > 0u) {
        if (blk_begin >= (m.y >> 6) + (((m.y & 63u) + 72u) >> 6)) {
            return; // finished in an earlier window
        }
        hi = uint[8](digest[o + 0u], digest[o + 1u], digest[o + 2u], digest[o + 3u],
                     digest[o + 4u], digest[o + 5u], digest[o + 6u], digest[o + 7u]);
    }
    if (!sha256_absorb_window(hi, m.x, m.y, 64u, blk_begin, blk_count)) {
        // More windows follow: keep the inner state.
        digest[o + 0u] = hi[0]; digest[o + 1u] = hi[1]; digest[o + 2u] = hi[2]; digest[o + 3u] = hi[3];
        digest[o + 4u] = hi[4]; digest[o + 5u] = hi[5]; digest[o + 6u] = hi[6]; digest[o + 7u] = hi[7];
        return;
    }

    // Outer: one block = inner digest (32 bytes) || 0x80 || zeros || bit length 768.
    uint w[16] = uint[16](hi[0], hi[1], hi[2], hi[3], hi[4], hi[5], hi[6], hi[7],
                          0x80000000u, 0u, 0u, 0u, 0u, 0u, 0u, (64u + 32u) * 8u);
    uint ho[8] = uint[8](outer[0], outer[1], outer[2], outer[3],
                         outer[4], outer[5], outer[6], outer[7]);
    sha256_compress(ho, w);

    digest[o + 0u] = ho[0]; digest[o + 1u] = ho[1]; digest[o + 2u] = ho[2]; digest[o + 3u] = ho[3];
    digest[o + 4u] = ho[4]; digest[o + 5u] = ho[5]; digest[o + 6u] = ho[6]; digest[o + 7u] = ho[7];
}
