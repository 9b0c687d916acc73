#version 450
// copy_regions: the library's copy of many small regions in one dispatch (src/copies.rs).
//   push constants: the device address of a table of `count` regions
//   dispatch: `count` workgroups, one per region
// A region is { uvec2 src; uvec2 dst; uint words; 3 x pad }: 32 bytes, addresses as two 32-bit
// halves (low first), sizes in 4-byte words. Each workgroup copies its region word by word.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require

layout(local_size_x = 256) in;

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint w[]; };

struct Region {
    uvec2 src;
    uvec2 dst;
    uint words;
    uint pad0;
    uint pad1;
    uint pad2;
};

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Table { Region r[]; };

layout(push_constant) uniform Push {
    uvec2 table;
    uint count;
};

void main() {
    uint g = gl_WorkGroupID.x;
    if (g >= count) {
        return;
    }
    Region r = Table(table).r[g];
    Words s = Words(r.src);
    Words d = Words(r.dst);
    for (uint i = gl_LocalInvocationID.x; i < r.words; i += 256u) {
        d.w[i] = s.w[i];
    }
}
