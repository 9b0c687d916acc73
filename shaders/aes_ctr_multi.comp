#version 450
// aes_ctr_multi: AES-CTR (NIST SP 800-38A) in place over many records at once, each with its
// own key (AES-128/192/256) and counter block: the coalesced launch of a flush (see
// src/crypto/batch.rs).
//
//   binding 0 (set 0): uniform buffer AesTable (std140, 1024 bytes): te0[64] (uvec4), the 256
//              words of Te0 (see include/aes.glsl), Te0[e] = te0[e/4][e%4].
//   binding 1 (set 0): readonly storage buffer Keys: the key schedules, usually the same
//              buffer as binding 3 (each item carries its key in its own staging slot): the
//              schedule at uvec4 k holds round r at rk[k + r] (FIPS-197 w[4r..4r+3], big-endian
//              words), for r = 0..nr.
//   binding 2 (set 0): readonly storage buffer Records: 2 uvec4 per record i:
//              rec[2i]   = (first_block, data_block, nblocks | nr << 28, key)
//              rec[2i+1] = the record's initial counter block as 4 big-endian words
//              first_block: the record's first block in this dispatch's block numbering
//              (record 0 starts at 0, record i+1 at first_block_i + nblocks_i; nblocks >= 1,
//              below 2^28); data_block: where its data starts in Data, in 16-byte blocks; nr:
//              10, 12 or 14 (any other value leaves the record unchanged); key: where its
//              schedule starts in Keys, in 16-byte units.
//   binding 3 (set 0): storage buffer Data { uvec4 data[]; }: the records' bytes packed
//              little-endian, each record padded to whole blocks (the padding is XORed too).
//   push constants (12 bytes): nrecords, total_blocks (sum of nblocks), block_base (this
//              dispatch's first block, to split the blocks over dispatches).
//   dispatch:  local_size_x = 256, one block per invocation: block b = block_base +
//              gl_GlobalInvocationID.x (nothing if b >= total_blocks); groups =
//              ceil((total_blocks - block_base) / 256), at most 65535 per dispatch.
//   per block: its record is found by binary search over first_block; j = b - first_block;
//              data[data_block + j] ^= AES_key(counter + j) (as in aes_ctr.comp).
//   shared memory: 32 KiB (the T-table in 32 copies); aes_ctr_multi_c16.comp has 16 copies.
#extension GL_GOOGLE_include_directive : require
#define AES_TABLE_COPIES_LOG2 5
#include "aes_ctr_multi_main.glsl"
