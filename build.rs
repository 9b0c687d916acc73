//! vkasync's build script: its kernels are compiled by `vkasync-build`, the helper that crates
//! depending on vkasync use too (shaderc in this process, SPIRV-Tools' validator, a cache per
//! shader, reflection constants; see that crate's docs).
//!
//! - `shaders/*.comp` become `$OUT_DIR/kernels.rs` (`vkasync::kernels::*`, one `KernelSource`
//!   constant per shader, so kernels are named by items the compiler checks);
//! - `shaders/internal/*.comp` become `$OUT_DIR/internal_kernels.rs` (the library's own copy
//!   kernels, `src/record/copies.rs`).
//!
//! Nothing is linked here: run-time validation (feature `spirv-validation`) takes SPIRV-Tools
//! from shaderc's link through `vkasync-spirv`.

fn main() {
    vkasync_build::Kernels::new().inside_vkasync().build();
    vkasync_build::Kernels::new().inside_vkasync().dir("shaders/internal").out_file("internal_kernels.rs").build();
}
