//! Compiles shaders/saxpy.comp with glslc (the program vkasync's own build runs), so that the
//! crate's kernel ships inside the binary. No linker configuration is needed: nothing here
//! links shaderc.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=shaders/saxpy.comp");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("saxpy.spv");
    let glslc = std::env::var("GLSLC").unwrap_or_else(|_| "glslc".into());
    let status = Command::new(&glslc)
        .args(["-fshader-stage=compute", "--target-env=vulkan1.2", "-O", "-o"])
        .arg(&out)
        .arg("shaders/saxpy.comp")
        .status()
        .unwrap_or_else(|e| panic!("could not run {glslc} (install the package glslc): {e}"));
    assert!(status.success(), "glslc failed on shaders/saxpy.comp");
}
