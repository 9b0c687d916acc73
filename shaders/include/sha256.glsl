// sha256.glsl: SHA-256 (FIPS 180-4) compression function and constants.
//
//   const uint SHA256_K[64], SHA256_IV[8]
//   void sha256_compress(inout uint h[8], uint w[16])
//       h: the chaining state (words H0..H7); w: one 64-byte message block as 16 big-endian
//       words (w[i] = byte 4i << 24 | byte 4i+1 << 16 | byte 4i+2 << 8 | byte 4i+3).
//
// The 64 rounds are written out with constant indices (macros) so that h and w stay in
// registers even if a driver does not unroll loops.
#ifndef VKASYNC_SHA256_GLSL
#define VKASYNC_SHA256_GLSL

const uint SHA256_K[64] = uint[64](
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u
);

const uint SHA256_IV[8] = uint[8](
    0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au, 0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u
);

uint sha256_rotr(uint x, uint n) { return (x >> n) | (x << (32u - n)); }
uint sha256_bsig0(uint x) { return sha256_rotr(x, 2u) ^ sha256_rotr(x, 13u) ^ sha256_rotr(x, 22u); }
uint sha256_bsig1(uint x) { return sha256_rotr(x, 6u) ^ sha256_rotr(x, 11u) ^ sha256_rotr(x, 25u); }
uint sha256_ssig0(uint x) { return sha256_rotr(x, 7u) ^ sha256_rotr(x, 18u) ^ (x >> 3); }
uint sha256_ssig1(uint x) { return sha256_rotr(x, 17u) ^ sha256_rotr(x, 19u) ^ (x >> 10); }
uint sha256_ch(uint x, uint y, uint z) { return z ^ (x & (y ^ z)); }
uint sha256_maj(uint x, uint y, uint z) { return (x & y) | (z & (x | y)); }

// Round i (0..63) on working variables a..h (names rotate instead of values), word w[i & 15].
#define SHA256_RND(a, b, c, d, e, f, g, h, i) {                                             \
        uint t1_ = h + sha256_bsig1(e) + sha256_ch(e, f, g) + SHA256_K[i] + w[(i) & 15];      \
        d += t1_;                                                                             \
        h = t1_ + sha256_bsig0(a) + sha256_maj(a, b, c);                                      \
    }
// Message schedule: replace w[i & 15] (= W[i-16]) by W[i], for i >= 16.
#define SHA256_SCHED(i)                                                                       \
    w[(i) & 15] += sha256_ssig1(w[((i) - 2) & 15]) + w[((i) - 7) & 15] + sha256_ssig0(w[((i) - 15) & 15]);
#define SHA256_8RND(i)                                                                        \
    SHA256_RND(a, b, c, d, e, f, g, h, (i) + 0)                                               \
    SHA256_RND(h, a, b, c, d, e, f, g, (i) + 1)                                               \
    SHA256_RND(g, h, a, b, c, d, e, f, (i) + 2)                                               \
    SHA256_RND(f, g, h, a, b, c, d, e, (i) + 3)                                               \
    SHA256_RND(e, f, g, h, a, b, c, d, (i) + 4)                                               \
    SHA256_RND(d, e, f, g, h, a, b, c, (i) + 5)                                               \
    SHA256_RND(c, d, e, f, g, h, a, b, (i) + 6)                                               \
    SHA256_RND(b, c, d, e, f, g, h, a, (i) + 7)
#define SHA256_8SCHED(i)                                                                      \
    SHA256_SCHED((i) + 0) SHA256_SCHED((i) + 1) SHA256_SCHED((i) + 2) SHA256_SCHED((i) + 3)   \
    SHA256_SCHED((i) + 4) SHA256_SCHED((i) + 5) SHA256_SCHED((i) + 6) SHA256_SCHED((i) + 7)

void sha256_compress(inout uint hs[8], uint w[16]) {
    uint a = hs[0], b = hs[1], c = hs[2], d = hs[3];
    uint e = hs[4], f = hs[5], g = hs[6], h = hs[7];
    SHA256_8RND(0)
    SHA256_8RND(8)
    SHA256_8SCHED(16) SHA256_8RND(16)
    SHA256_8SCHED(24) SHA256_8RND(24)
    SHA256_8SCHED(32) SHA256_8RND(32)
    SHA256_8SCHED(40) SHA256_8RND(40)
    SHA256_8SCHED(48) SHA256_8RND(48)
    SHA256_8SCHED(56) SHA256_8RND(56)
    hs[0] += a; hs[1] += b; hs[2] += c; hs[3] += d;
    hs[4] += e; hs[5] += f; hs[6] += g; hs[7] += h;
}

#undef SHA256_RND
#undef SHA256_SCHED
#undef SHA256_8RND
#undef SHA256_8SCHED

#endif // VKASYNC_SHA256_GLSL
