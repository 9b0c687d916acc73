//! vkasync's build script. Its kernels are compiled by `vkasync-build` (the helper that crates
//! depending on vkasync use too); below is what that helper does for them, and the linking of
//! SPIRV-Tools for run-time validation.
//!
//! Compiles every GLSL compute shader `shaders/*.comp` to SPIR-V (Vulkan 1.2, optimised for
//! performance) by running `glslc`, checks each module by running `spirv-val`, and generates `$OUT_DIR/kernels.rs`, which holds one `KernelSource` constant per
//! shader, so that kernels are named by items the compiler checks.
//!
//! - `#include "x.glsl"` resolves against the including file's folder, then `shaders/include/`.
//! - Each shader is recompiled only when its own text or the text of one of its includes changed:
//!   the last build's SPIR-V is kept in `$OUT_DIR` next to a hash of every file it read.
//! - A GLSL error fails the build with the shader's path, the line and the compiler's message.
//! - Builds are reproducible: shaders are named by their path inside the crate (`shaders/x.comp`,
//!   `shaders/include/y.glsl`), never by the build machine's absolute path, and the SPIR-V
//!   carries no debug information unless `VKASYNC_SHADER_DEBUG=1` asks for it (then it holds
//!   those crate-relative names and the source lines).
//! - Every module then goes through `spirv-val` (SPIRV-Tools' validator, Vulkan 1.2 rules), cached
//!   or not; a module it rejects fails the build with the shader's path. That is why
//!   `Kernel::new` does not validate build-time kernels at run time.
//! - The library links Debian's static `libSPIRV-Tools.a` (package `spirv-tools`) for run-time
//!   validation (`src/spirv_val.rs`), and libstdc++ statically where `libstdc++.a` is found, so
//!   binaries need only libc, libm and libgcc_s at run time. `SPIRV_TOOLS_LIB_DIR` overrides the
//!   folder; Windows targets use `%VULKAN_SDK%/Lib`.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    vkasync_build::Kernels::new().inside_vkasync().build();
    // The library's own kernels (`src/copies.rs`), not exported as `kernels::*`.
    vkasync_build::Kernels::new().inside_vkasync().dir("shaders/internal").out_file("internal_kernels.rs").build();
    link_spirv_tools();
}

/// Tells cargo to link SPIRV-Tools (and libstdc++, which it needs) into the library.
fn link_spirv_tools() {
    println!("cargo:rerun-if-env-changed=SPIRV_TOOLS_LIB_DIR");
    println!("cargo:rerun-if-env-changed=VULKAN_SDK");
    println!("cargo:rerun-if-env-changed=CXX");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let override_dir = env::var_os("SPIRV_TOOLS_LIB_DIR").map(PathBuf::from);
    if os == "windows" {
        // The Vulkan SDK ships SPIRV-Tools.lib. Not bundled, so `cargo check` needs no SDK.
        match override_dir.or_else(|| env::var_os("VULKAN_SDK").map(|sdk| PathBuf::from(sdk).join("Lib"))) {
            Some(dir) => println!("cargo:rustc-link-search=native={}", dir.display()),
            None => println!(
                "cargo:warning=neither SPIRV_TOOLS_LIB_DIR nor VULKAN_SDK is set: linking SPIRV-Tools.lib will fail"
            ),
        }
        println!("cargo:rustc-link-lib=static:-bundle=SPIRV-Tools");
        return;
    }
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let candidates: Vec<PathBuf> = match override_dir {
        Some(dir) => vec![dir],
        None => [format!("/usr/lib/{arch}-linux-gnu"), "/usr/lib64".into(), "/usr/lib".into(), "/usr/local/lib".into()]
            .into_iter()
            .map(PathBuf::from)
            .collect(),
    };
    let Some(dir) = candidates.iter().find(|d| d.join("libSPIRV-Tools.a").is_file()) else {
        eprintln!(
            "error: libSPIRV-Tools.a not found in {candidates:?}. vkasync validates run-time SPIR-V with SPIRV-Tools: \
             install the Debian/Ubuntu package `spirv-tools` (apt-get install spirv-tools), or set \
             SPIRV_TOOLS_LIB_DIR to the folder that holds libSPIRV-Tools.a"
        );
        std::process::exit(1);
    };
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=static=SPIRV-Tools");
    // libstdc++ statically where the compiler knows its archive, so that binaries copied to
    // another machine do not need libstdc++.so.
    let cxx = env::var("CXX").unwrap_or_else(|_| "g++".into());
    let archive = std::process::Command::new(&cxx)
        .arg("-print-file-name=libstdc++.a")
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|p| p.is_absolute() && p.is_file());
    match archive.as_deref().and_then(Path::parent) {
        Some(dir) => {
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=static=stdc++");
        }
        None => {
            println!("cargo:warning=libstdc++.a not found through `{cxx} -print-file-name`; linking libstdc++.so");
            println!("cargo:rustc-link-lib=dylib=stdc++");
        }
    }
}
