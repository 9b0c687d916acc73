#version 450
// sha256_batch: SHA-256 (FIPS 180-4) of a batch of independent messages, one per invocation.
//
//   binding 0 (set 0): readonly storage buffer Msgs { uint bytes[]; }: all messages' bytes
//              concatenated (in any order, may overlap), packed little-endian into u32
//              (byte j = (bytes[j/4] >> (8*(j%4))) & 0xff), padded to a whole word.
//   binding 1 (set 0): readonly storage buffer Index { uvec2 msg[]; }: per message i,
//              msg[i] = (byte offset into Msgs, byte length); any offset alignment, length 0 ok.
//   binding 2 (set 0): storage buffer Digests { uint digest[]; }: 8 words per message,
//              digest[8*i + k] = H_k, the digest's k-th big-endian word (host: to_be_bytes).
//   push constants (16 bytes, u32 each, in this order):
//              nmsgs       number of messages (the whole batch, not this dispatch)
//              msg_base    added to gl_GlobalInvocationID.x (to split a batch over dispatches)
//              blk_begin   the window of each message's blocks this dispatch compresses:
//              blk_count   blocks blk_begin .. blk_begin + blk_count - 1 (see sha256_msg.glsl).
//                          For blk_begin > 0 the state is read from digest[]; a message with
//                          fewer blocks than blk_begin is left alone. Long messages take one
//                          dispatch per window, in order, with a barrier between them.
//   dispatch:  local_size_x = 256; invocation g hashes message i = msg_base + g (nothing if
//              i >= nmsgs): groups = ceil((nmsgs - msg_base) / 256), at most 65535 per
//              dispatch, msg_base += 65535*256 for the next.
//
// local_size 256: same as the other kernels (one rule for the host); no shared memory is used,
// so the size only sets scheduling granularity.
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
};

#include "sha256_msg.glsl"

void main() {
    uint i = msg_base + gl_GlobalInvocationID.x;
    if (i >= nmsgs) {
        return;
    }
    uvec2 m = msg[i];
    uint o = i * 8u;
    uint h[8] = SHA256_IV;
    if (blk_begin > 0u) {
        // Blocks of the padded message: whole ones, then 1 or 2 for the tail and length.
        if (blk_begin >= (m.y >> 6) + (((m.y & 63u) + 72u) >> 6)) {
            return; // finished in an earlier window
        }
        h = uint[8](digest[o + 0u], digest[o + 1u], digest[o + 2u], digest[o + 3u],
                    digest[o + 4u], digest[o + 5u], digest[o + 6u], digest[o + 7u]);
    }
    sha256_absorb_window(h, m.x, m.y, 0u, blk_begin, blk_count);
    digest[o + 0u] = h[0]; digest[o + 1u] = h[1]; digest[o + 2u] = h[2]; digest[o + 3u] = h[3];
    digest[o + 4u] = h[4]; digest[o + 5u] = h[5]; digest[o + 6u] = h[6]; digest[o + 7u] = h[7];
}
