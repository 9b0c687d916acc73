//! The crate's kernels (`shaders/*.comp`) become `kernels::NAME` constants, compiled, checked and
//! cached by vkasync's build helper. No linker configuration is needed.
fn main() {
    vkasync_build::compile_shaders();
}
