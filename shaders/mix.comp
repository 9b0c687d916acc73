#version 450
// mix: the benchmark kernel.
//   binding 0: buffer of n u32, updated in place
//   push constants: n, K
//   dispatch: ceil(n / 64) groups
// Per element: x = data[i]; K times { x = x * 1664525u + 1013904223u; x ^= x >> 16u; }; data[i] = x.
// K is at most 65,000 per dispatch (dispatch again for more): llvmpipe (lavapipe) ends an
// invocation's loops after 65,535 iterations in total, and no split inside one invocation
// avoids that (the count covers every loop of the invocation, nested ones included).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) buffer Data { uint data[]; };

layout(push_constant) uniform Push {
    uint n;
    uint K;
};

void main() {
    uint i = global_index();
    if (i >= n) {
        return;
    }
    uint x = data[i];
    for (uint k = 0u; k < K; ++k) {
        x = x * 1664525u + 1013904223u;
        x ^= x >> 16u;
    }
    data[i] = x;
}
