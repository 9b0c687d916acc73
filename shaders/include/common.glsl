// Helpers shared by vkasync's kernels.
#ifndef VKASYNC_COMMON_GLSL
#define VKASYNC_COMMON_GLSL

// The flat index of this invocation for a 1-D dispatch (x only).
uint global_index() {
    return gl_GlobalInvocationID.x;
}

#endif
