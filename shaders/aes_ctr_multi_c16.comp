#version 450
// aes_ctr_multi_c16: aes_ctr_multi.comp (see there) with 16 copies of the T-table (16 KiB of
// shared memory) for devices with less than 32 KiB.
#extension GL_GOOGLE_include_directive : require
#define AES_TABLE_COPIES_LOG2 4
#include "aes_ctr_multi_main.glsl"
