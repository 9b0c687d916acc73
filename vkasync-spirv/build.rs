//! Links what shaderc-sys leaves out on Debian and Ubuntu.
//!
//! shaderc-sys (with `prefer-static-linking`) links `libshaderc_combined.a` from the first of
//! `$SHADERC_LIB_DIR`, `$VULKAN_SDK/lib`, pkg-config's `shaderc`, and the system's library folder,
//! or else builds shaderc from source. The archive from the Vulkan SDK or from a source build is
//! combined: it holds glslang and SPIRV-Tools. Debian's and Ubuntu's (package `libshaderc-dev`)
//! is not: it holds shaderc's own ten objects, and glslang (package `glslang-dev`) and
//! SPIRV-Tools (package `spirv-tools`) sit beside it as separate archives.
//!
//! This script looks where shaderc-sys looks, reads the archive's symbol index, and only where
//! glslang or SPIRV-Tools is missing from it links the archives beside it that exist (glslang's
//! set of archives differs between releases): with feature `compile`, glslang and SPIRV-Tools
//! (whole archives, so that their order against shaderc's archive, which cargo places after
//! this crate's, does not matter); with `validate` alone, SPIRV-Tools.
//!
//! It prints which path it took as a cargo warning, and fails with the package to install
//! where a part is missing.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SHADERC_LIB_DIR");
    println!("cargo:rerun-if-env-changed=VULKAN_SDK");
    println!("cargo::rustc-check-cfg=cfg(vkasync_link_shaderc_sys)");
    let validate = env::var_os("CARGO_FEATURE_VALIDATE").is_some();
    let compile = env::var_os("CARGO_FEATURE_COMPILE").is_some();
    if !validate {
        return;
    }
    let target_env = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let Some((dir, origin)) = shaderc_dir() else {
        return from_source("no installed shaderc was found");
    };
    let archive = dir.join(if target_env == "msvc" { "shaderc_combined.lib" } else { "libshaderc_combined.a" });
    let Ok(bytes) = std::fs::read(&archive) else {
        return from_source(&format!("there is no {} ({origin})", archive.display()));
    };
    // Symbols the archive defines (its index), not those its objects only refer to.
    let index = symbol_index(&bytes).unwrap_or(&bytes);
    let has_glslang = contains(index, b"InitializeProcess");
    let has_tools = contains(index, b"spvValidateBinary");
    let mut wanted: Vec<&str> = Vec::new();
    if compile && !has_glslang {
        // glslang's archives, in any release's set (Debian 13 merged OGLCompiler and HLSL into
        // glslang), then the optimizer that shaderc runs.
        if !dir.join("libglslang.a").is_file() {
            fail(&format!(
                "{} lacks glslang and there is no libglslang.a beside it: install the Debian/Ubuntu \
                 package `glslang-dev`",
                archive.display()
            ));
        }
        // Since glslang 15 (Debian 13) all but libglslang.a are empty stubs kept for old build
        // files: each defines only `stub_library_function()`, so linking two whole stubs would
        // define it twice. Stubs are left out.
        for lib in ["glslang", "MachineIndependent", "OSDependent", "GenericCodeGen", "OGLCompiler", "HLSL", "SPIRV"] {
            let path = dir.join(format!("lib{lib}.a"));
            if path.is_file() && !is_stub(&path) {
                wanted.push(lib);
            }
        }
        wanted.push("SPIRV-Tools-opt");
    }
    if !has_tools {
        wanted.push("SPIRV-Tools");
    }
    for lib in ["SPIRV-Tools", "SPIRV-Tools-opt"] {
        if wanted.contains(&lib) && !dir.join(format!("lib{lib}.a")).is_file() {
            fail(&format!(
                "{} lacks SPIRV-Tools and there is no lib{lib}.a beside it: install the Debian/Ubuntu package \
                 `spirv-tools`",
                archive.display()
            ));
        }
    }
    if wanted.is_empty() {
        link_shaderc_sys();
        println!("cargo:warning=vkasync-spirv: shaderc from {} ({origin}), a combined archive", dir.display());
        return;
    }
    println!(
        "cargo:warning=vkasync-spirv: shaderc from {} ({origin}); its archive is not combined, so this links {} \
         from the same folder",
        dir.display(),
        wanted.join(", ")
    );
    println!("cargo:rustc-link-search=native={}", dir.display());
    for lib in wanted {
        if compile {
            println!("cargo:rustc-link-lib=static:+whole-archive,-bundle={lib}");
        } else {
            println!("cargo:rustc-link-lib=static:-bundle={lib}");
        }
    }
    // SPIRV-Tools is C++: libstdc++ after it (shaderc-sys asks for it too, but where the linker
    // may meet it before these archives).
    println!("cargo:rustc-link-lib=dylib=stdc++");
}

/// shaderc-sys builds shaderc from source (`why`: no installed one): fails at once (instead of
/// deep inside a cmake run) when a tool that build needs is missing, naming it and the packaged
/// alternatives; else says so. SPIRV-Tools is then in shaderc-sys's combined archive.
fn from_source(why: &str) {
    require_source_build_tools(why);
    link_shaderc_sys();
    println!(
        "cargo:warning=vkasync-spirv: {why}; shaderc-sys builds shaderc from source (cmake, make, python3 and a \
         C++ compiler), and that archive holds glslang and SPIRV-Tools. On Debian and Ubuntu, `apt-get install \
         libshaderc-dev` links the system's instead"
    );
}

/// Fails, naming them, when a tool that building shaderc from source needs is missing.
fn require_source_build_tools(why: &str) {
    let runs = |program: &str| {
        std::process::Command::new(program)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let msvc = env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|e| e == "msvc");
    let mut missing = Vec::new();
    if !runs("cmake") {
        missing.push("cmake");
    }
    if !msvc && !runs("make") && !runs("ninja") {
        missing.push("make (or ninja)");
    }
    if !runs("python3") && !runs("python") {
        missing.push("python3");
    }
    if !msvc && !runs("c++") && !runs("g++") && !runs("clang++") {
        missing.push("a C++ compiler (g++)");
    }
    if missing.is_empty() {
        return;
    }
    fail(&format!(
        "{why}, so shaderc would be built from source, which needs {}. Either install shaderc: on Debian \
         and Ubuntu `apt-get install libshaderc-dev g++` (or run vkasync's scripts/install-deps.sh), on \
         Windows the Vulkan SDK (https://vulkan.lunarg.com, which sets VULKAN_SDK); or set SHADERC_LIB_DIR to a \
         folder holding libshaderc_combined.a; or install the missing tools",
        missing.join(", ")
    ));
}

/// SPIRV-Tools is in the archive shaderc-sys links (combined, or built from source): the crate
/// names shaderc-sys so that it is linked (see `src/lib.rs`).
fn link_shaderc_sys() {
    println!("cargo:rustc-cfg=vkasync_link_shaderc_sys");
}

fn fail(message: &str) -> ! {
    eprintln!("error: vkasync-spirv: {message}");
    std::process::exit(1);
}

/// The names in an archive's symbol index (the first member, `/` or `/SYM64/`, of a GNU or
/// COFF archive): the symbols its objects define. `None` where there is no index.
fn symbol_index(bytes: &[u8]) -> Option<&[u8]> {
    let body = bytes.strip_prefix(b"!<arch>\n")?;
    let header = body.get(..60)?;
    let size: usize = std::str::from_utf8(&header[48..58]).ok()?.trim().parse().ok()?;
    let member = body.get(60..60 + size)?;
    let width = if header.starts_with(b"/SYM64/") {
        8
    } else if header.starts_with(b"/ ") {
        4
    } else {
        return None;
    };
    let count = member.get(..width)?.iter().fold(0usize, |n, &b| (n << 8) | b as usize);
    member.get(width + count.checked_mul(width)?..)
}

/// Whether every symbol an archive defines is glslang's `stub_library_function()`.
fn is_stub(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(path) else { return false };
    let Some(names) = symbol_index(&bytes) else { return false };
    let mut names = names.split(|&b| b == 0).filter(|n| !n.is_empty()).peekable();
    names.peek().is_some() && names.all(|n| contains(n, b"stub_library_function"))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The folder shaderc-sys links shaderc from (its `get_search_dir`, same order), and why.
fn shaderc_dir() -> Option<(PathBuf, &'static str)> {
    if let Some(dir) = env::var_os("SHADERC_LIB_DIR") {
        return Some((PathBuf::from(dir), "SHADERC_LIB_DIR"));
    }
    if let Some(sdk) = env::var_os("VULKAN_SDK") {
        return Some((Path::new(&sdk).join("lib"), "VULKAN_SDK"));
    }
    if let Some(dir) = pkg_config_dir() {
        return Some((dir, "pkg-config"));
    }
    if env::var("CARGO_CFG_TARGET_OS").ok()? != "linux" {
        return None;
    }
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").ok()?.as_str() {
        "x86" => "i386".to_string(),
        a => a.to_string(),
    };
    let debian = PathBuf::from(format!("/usr/lib/{arch}-linux-gnu"));
    if debian.is_dir() {
        return Some((debian, "the system's library folder"));
    }
    if arch == "x86_64" && Path::new("/usr/lib64").is_dir() {
        return Some((PathBuf::from("/usr/lib64"), "the system's library folder"));
    }
    Some((PathBuf::from("/usr/lib"), "the system's library folder"))
}

/// `pkg-config --libs-only-L shaderc`'s first folder, when pkg-config knows shaderc (native
/// builds only, as with the pkg-config crate that shaderc-sys uses).
fn pkg_config_dir() -> Option<PathBuf> {
    if env::var("HOST").ok()? != env::var("TARGET").ok()? {
        return None;
    }
    // The pkg-config crate asks with system folders allowed, so that -L is printed for them too.
    let out = std::process::Command::new("pkg-config")
        .args(["--libs-only-L", "shaderc"])
        .env("PKG_CONFIG_ALLOW_SYSTEM_LIBS", "1")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().find_map(|t| t.strip_prefix("-L")).map(PathBuf::from)
}
