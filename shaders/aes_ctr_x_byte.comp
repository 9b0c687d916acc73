#version 450
// aes_ctr_x_byte: EXPERIMENT for examples/bench_crypto.rs: aes_ctr.comp with aes_v1.glsl's table-index arithmetic.
// Same interface as aes_ctr.comp.
#extension GL_GOOGLE_include_directive : require
#define AES_TABLE_COPIES_LOG2 5
#define AES_INDEX_BYTE_FIRST
#include "aes_ctr_main.glsl"
