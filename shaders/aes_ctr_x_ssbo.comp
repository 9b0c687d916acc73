#version 450
// aes_ctr_x_ssbo: EXPERIMENT for examples/bench_crypto.rs: aes_ctr.comp with binding 0 read as a storage buffer.
// Same interface as aes_ctr.comp (binding 0 a storage buffer).
#extension GL_GOOGLE_include_directive : require
#define AES_TABLE_COPIES_LOG2 5
#define AES_KEYS_IN_STORAGE
#include "aes_ctr_main.glsl"
