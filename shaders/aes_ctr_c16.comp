#version 450
// aes_ctr_c16: aes_ctr.comp with the T-table in 16 copies (16 KiB of shared memory, at most
// 2-way bank conflicts on 32-lane warps), for devices whose maxComputeSharedMemorySize is
// below 32 KiB (Vulkan guarantees 16 KiB). Same bindings, push constants and dispatch rule as
// aes_ctr.comp.
#extension GL_GOOGLE_include_directive : require
#define AES_TABLE_COPIES_LOG2 4
#include "aes_ctr_main.glsl"
