//! Compiles a crate's GLSL compute shaders at build time into SPIR-V constants for
//! [vkasync](https://docs.rs/vkasync), the way vkasync compiles its own kernels. A build script of
//! one line:
//!
//! ```text
//! // build.rs
//! fn main() {
//!     vkasync_build::compile_shaders();
//! }
//! ```
//!
//! and in the crate:
//!
//! ```text
//! mod kernels {
//!     include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
//! }
//! let saxpy = vkasync::Kernel::new(&device, &kernels::SAXPY)?;
//! ```
//!
//! What every `shaders/*.comp` gets:
//! - `#include "x.glsl"`, resolved against the including file's folder, then `shaders/include/`;
//! - errors as `shaders/x.comp:LINE: error: ...` in cargo's output, and the build fails;
//! - `cargo:rerun-if-changed` for the shader and every file it includes, and a cache in
//!   `$OUT_DIR` so that only changed shaders are compiled again;
//! - validation with SPIRV-Tools' validator (Vulkan 1.2 rules) at build time, cached or not, so
//!   that `Kernel::new` hands the module to the driver without validating it again;
//! - one constant per shader (`SAXPY` for `saxpy.comp`), and `ALL`, with its reflection in a
//!   module of the same name (`saxpy::BINDINGS`, `READ_ONLY`, `PUSH_CONSTANT_BYTES`,
//!   `LOCAL_SIZE`, read from the SPIR-V at build time by [`reflect`], the reader vkasync uses
//!   at run time);
//! - reproducible output: crate-relative file names, no debug information unless
//!   `VKASYNC_SHADER_DEBUG=1`.
//!
//! # How it compiles
//! In this process, with the [`shaderc`](https://docs.rs/shaderc) crate (Vulkan 1.2, SPIR-V 1.5,
//! optimised for performance). No program is run. shaderc's native library is found by
//! shaderc-sys, in this order: `SHADERC_LIB_DIR`, the Vulkan SDK (`VULKAN_SDK`), pkg-config,
//! the system's library folder; where none has it, shaderc-sys builds it from source (cmake,
//! git, python3 and a C++ compiler; several minutes, once). On Debian and Ubuntu the package
//! `libshaderc-dev` (which brings `glslang-dev` and `spirv-tools`) is enough: its archive is not
//! self-contained, and `vkasync-spirv`'s build script links glslang and SPIRV-Tools from beside
//! it. The build prints which of these paths it took.
//!
//! # Features
//! - `shaderc` (default): compile. Without it (documentation builds such as docs.rs, which have
//!   no shaderc) every constant is generated without SPIR-V, and `Kernel::new` refuses it.

#![warn(missing_docs)]

pub use vkasync_spirv::reflect;

use std::collections::hash_map::DefaultHasher;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::{env, fs};

/// Compiles `shaders/*.comp` of the crate being built into `$OUT_DIR/kernels.rs` (constants of
/// type `vkasync::KernelSource`). Prints the errors and exits the build script on failure.
pub fn compile_shaders() {
    Kernels::new().build();
}

/// Options for [`compile_shaders`].
#[derive(Debug, Clone)]
pub struct Kernels {
    dir: PathBuf,
    source_type: String,
    inside_vkasync: bool,
    out_file: String,
}

impl Default for Kernels {
    fn default() -> Self {
        Self::new()
    }
}

impl Kernels {
    /// `shaders/` of the crate being built, for a crate that depends on vkasync.
    pub fn new() -> Self {
        Kernels {
            dir: PathBuf::from("shaders"),
            source_type: "vkasync::KernelSource".into(),
            inside_vkasync: false,
            out_file: "kernels.rs".into(),
        }
    }

    /// Another folder (relative to the crate's root) instead of `shaders/`.
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = dir.into();
        self
    }

    /// Another file in `$OUT_DIR` instead of `kernels.rs` (for a second folder of kernels).
    pub fn out_file(mut self, name: impl Into<String>) -> Self {
        self.out_file = name.into();
        self
    }

    /// For vkasync's own build script: the constants refer to `crate::KernelSource`.
    #[doc(hidden)]
    pub fn inside_vkasync(mut self) -> Self {
        self.source_type = "crate::KernelSource".into();
        self.inside_vkasync = true;
        self
    }

    /// Compiles, validates and writes `$OUT_DIR/kernels.rs` (or [`Kernels::out_file`]); on any error, prints it and exits
    /// the build script with status 1.
    pub fn build(&self) {
        let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("run from a build script"));
        let out = PathBuf::from(env::var("OUT_DIR").expect("run from a build script"));
        let shader_dir = root.join(&self.dir);
        let include_dir = shader_dir.join("include");
        let rel_dir = self.dir.to_string_lossy().replace('\\', "/");
        println!("cargo:rerun-if-changed={rel_dir}");
        println!("cargo:rerun-if-changed={rel_dir}/include");
        println!("cargo:rerun-if-env-changed=VKASYNC_SHADER_DEBUG");
        let mut shaders: Vec<PathBuf> = match fs::read_dir(&shader_dir) {
            Ok(entries) => entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "comp"))
                .collect(),
            Err(e) => {
                eprintln!("error: cannot read the shader folder {}: {e}", shader_dir.display());
                std::process::exit(1);
            }
        };
        shaders.sort();
        let mut generated = format!("// @generated by vkasync-build from {rel_dir}/*.comp\n\n");
        if !cfg!(feature = "shaderc") {
            println!(
                "cargo:warning=vkasync-build: built without its `shaderc` feature (documentation builds): \
                 {rel_dir}/*.comp get constants without SPIR-V, which `Kernel::new` refuses"
            );
        }
        let mut all = Vec::new();
        let mut failed = false;
        for path in &shaders {
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            let rel = format!("{rel_dir}/{stem}.comp");
            // Builds with and without debug information keep their own cached SPIR-V.
            let flavour = if env::var("VKASYNC_SHADER_DEBUG").is_ok_and(|v| v == "1") { "g" } else { "o" };
            let spv_path = out.join(format!("{stem}.{flavour}.spv"));
            let stamp_path = out.join(format!("{stem}.{flavour}.stamp"));
            let words = if !cfg!(feature = "shaderc") {
                Vec::new()
            } else {
                let words = match cached(&stamp_path, &spv_path) {
                    Some(words) => words,
                    None => match compile(&root, &rel, &include_dir) {
                        Ok((words, deps)) => {
                            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
                            fs::write(&spv_path, bytes).unwrap();
                            fs::write(&stamp_path, stamp(&deps)).unwrap();
                            words
                        }
                        Err(msg) => {
                            eprintln!("error: GLSL compilation failed for {rel}:\n{msg}");
                            failed = true;
                            continue;
                        }
                    },
                };
                // Cached or not: the cache is a file anyone could have changed.
                if let Err(msg) = validate(&words) {
                    eprintln!("error: the SPIR-V compiled from {rel} is invalid (SPIRV-Tools' validator):\n{msg}");
                    failed = true;
                    continue;
                }
                words
            };
            if !words.is_empty() {
                for dep in deps_of(&stamp_path) {
                    println!("cargo:rerun-if-changed={}", dep.display());
                }
            }
            let ident = stem.to_uppercase().replace(['-', '.'], "_");
            let ty = &self.source_type;
            let r = match reflect::reflect(&words) {
                Ok(r) => r,
                Err(_) if words.is_empty() => reflect::Reflection {
                    entry_point: String::new(),
                    bindings: Vec::new(),
                    push_constant_size: 0,
                    local_size: [0; 3],
                },
                Err(e) => {
                    eprintln!("error: {rel}: the SPIR-V cannot be reflected: {e}");
                    failed = true;
                    continue;
                }
            };
            let bindings: Vec<String> = r
                .bindings
                .iter()
                .map(|b| {
                    let kind = match b.kind {
                        reflect::BindingKind::Storage => "storage",
                        reflect::BindingKind::Uniform => "uniform",
                    };
                    let ro = if b.read_only { ", read-only" } else { "" };
                    format!("{} ({kind}{ro}, at least {} bytes)", b.binding, b.min_size)
                })
                .collect();
            let mod_name = stem.replace(['-', '.'], "_");
            writeln!(
                generated,
                "/// The reflection of `{rel}`, read at build time.\n#[allow(dead_code)]\npub mod {mod_name} {{"
            )
            .unwrap();
            writeln!(generated, "    /// Binding numbers of set 0, in order.").unwrap();
            let nums: Vec<String> = r.bindings.iter().map(|b| b.binding.to_string()).collect();
            writeln!(generated, "    pub const BINDINGS: &[u32] = &[{}];", nums.join(", ")).unwrap();
            writeln!(generated, "    /// Whether each binding is only read (`readonly`, or a uniform buffer).")
                .unwrap();
            let ro: Vec<String> = r.bindings.iter().map(|b| b.read_only.to_string()).collect();
            writeln!(generated, "    pub const READ_ONLY: &[bool] = &[{}];", ro.join(", ")).unwrap();
            writeln!(generated, "    /// Size of the push-constant block in bytes.").unwrap();
            writeln!(generated, "    pub const PUSH_CONSTANT_BYTES: u32 = {};", r.push_constant_size).unwrap();
            writeln!(generated, "    /// `local_size_x/y/z`.").unwrap();
            writeln!(generated, "    pub const LOCAL_SIZE: [u32; 3] = {:?};", r.local_size).unwrap();
            writeln!(generated, "}}\n").unwrap();
            writeln!(
                generated,
                "/// The kernel compiled from `{rel}`: bindings {}; {} bytes of push constants; workgroup \
                 size {:?}. Its reflection is in the module `{}`.",
                if bindings.is_empty() { "none".to_string() } else { bindings.join(", ") },
                r.push_constant_size,
                r.local_size,
                stem.replace(['-', '.'], "_")
            )
            .unwrap();
            if self.inside_vkasync {
                writeln!(
                    generated,
                    "pub const {ident}: {ty} = {ty} {{ name: {stem:?}, path: {rel:?}, spirv: &{words:?} }};\n"
                )
                .unwrap();
            } else {
                writeln!(
                    generated,
                    "// SAFETY: vkasync-build validated these words with SPIRV-Tools (Vulkan 1.2) at build time \
                     (or left them empty, which `Kernel::new` refuses, in a build without shaderc).\n\
                     pub const {ident}: {ty} = unsafe {{ {ty}::prevalidated({stem:?}, {rel:?}, &{words:?}) }};\n"
                )
                .unwrap();
            }
            all.push(ident);
        }
        if failed {
            std::process::exit(1);
        }
        writeln!(generated, "/// Every kernel compiled from `{rel_dir}/`.").unwrap();
        writeln!(generated, "pub const ALL: &[{}] = &[{}];", self.source_type, all.join(", ")).unwrap();
        fs::write(out.join(&self.out_file), generated).unwrap();
    }
}

/// Compiles `rel` (a path inside the crate, so that no absolute path reaches the SPIR-V) with
/// shaderc, in this process: Vulkan 1.2, SPIR-V 1.5, optimised for performance, `#include`
/// resolved against the including file's folder, then `include_dir`. Returns the words and
/// every file read (the shader first). Errors come back as shaderc prints them, `file:line`
/// first; warnings go to cargo's output.
#[cfg(feature = "shaderc")]
fn compile(root: &Path, rel: &str, include_dir: &Path) -> Result<(Vec<u32>, Vec<PathBuf>), String> {
    use std::cell::RefCell;
    let source = fs::read_to_string(root.join(rel)).map_err(|e| format!("{rel}: {e}"))?;
    let include_rel = include_dir.strip_prefix(root).unwrap_or(include_dir).to_path_buf();
    let deps = RefCell::new(vec![root.join(rel)]);
    let compiler = shaderc::Compiler::new().map_err(|e| format!("shaderc could not start: {e}"))?;
    let mut options = shaderc::CompileOptions::new().map_err(|e| format!("shaderc could not start: {e}"))?;
    options.set_target_env(shaderc::TargetEnv::Vulkan, shaderc::EnvVersion::Vulkan1_2 as u32);
    options.set_target_spirv(shaderc::SpirvVersion::V1_5);
    options.set_optimization_level(shaderc::OptimizationLevel::Performance);
    if env::var("VKASYNC_SHADER_DEBUG").is_ok_and(|v| v == "1") {
        options.set_generate_debug_info();
    }
    options.set_include_callback(|requested, kind, requesting, _depth| {
        // Crate-relative names throughout: they are what the SPIR-V's debug information and the
        // error messages carry.
        let beside = Path::new(requesting).parent().unwrap_or(Path::new("")).join(requested);
        let candidates = match kind {
            shaderc::IncludeType::Relative => vec![beside, include_rel.join(requested)],
            shaderc::IncludeType::Standard => vec![include_rel.join(requested), beside],
        };
        for name in candidates {
            if let Ok(content) = fs::read_to_string(root.join(&name)) {
                let mut deps = deps.borrow_mut();
                if !deps.contains(&root.join(&name)) {
                    deps.push(root.join(&name));
                }
                let resolved_name = name.to_string_lossy().replace('\\', "/");
                return Ok(shaderc::ResolvedInclude { resolved_name, content });
            }
        }
        Err(format!("cannot find \"{requested}\" beside {requesting} or in {}", include_rel.display()))
    });
    let artifact = compiler
        .compile_into_spirv(&source, shaderc::ShaderKind::Compute, rel, "main", Some(&options))
        .map_err(|e| match e {
            shaderc::Error::CompilationError(_, text) => text.trim().to_string(),
            other => other.to_string(),
        })?;
    let warnings = artifact.get_warning_messages();
    if !warnings.trim().is_empty() {
        for line in warnings.lines().filter(|l| !l.trim().is_empty()) {
            println!("cargo:warning={line}");
        }
    }
    let words = artifact.as_binary().to_vec();
    drop(options);
    Ok((words, deps.into_inner()))
}

/// Without the `shaderc` feature (documentation builds such as docs.rs) nothing is compiled.
#[cfg(not(feature = "shaderc"))]
fn compile(_root: &Path, _rel: &str, _include_dir: &Path) -> Result<(Vec<u32>, Vec<PathBuf>), String> {
    unreachable!("the build without shaderc writes no SPIR-V")
}

/// Validates a compiled module with SPIRV-Tools (Vulkan 1.2 rules), linked with shaderc.
#[cfg(feature = "shaderc")]
fn validate(words: &[u32]) -> Result<(), String> {
    vkasync_spirv::validate::validate(words).map_err(|e| e.0)
}

/// Without the `shaderc` feature nothing is compiled, so nothing is validated.
#[cfg(not(feature = "shaderc"))]
fn validate(_words: &[u32]) -> Result<(), String> {
    unreachable!("the build without shaderc writes no SPIR-V")
}

fn hash_file(path: &Path) -> Option<u64> {
    let bytes = fs::read(path).ok()?;
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    Some(h.finish())
}

fn stamp(deps: &[PathBuf]) -> String {
    deps.iter().map(|d| format!("{:016x} {}\n", hash_file(d).unwrap_or(0), d.display())).collect()
}

fn deps_of(stamp_path: &Path) -> Vec<PathBuf> {
    fs::read_to_string(stamp_path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(_, p)| PathBuf::from(p)))
        .collect()
}

/// The last build's SPIR-V, if no file it was compiled from has changed since.
fn cached(stamp_path: &Path, spv_path: &Path) -> Option<Vec<u32>> {
    let text = fs::read_to_string(stamp_path).ok()?;
    for line in text.lines() {
        let (hash, path) = line.split_once(' ')?;
        if format!("{:016x}", hash_file(Path::new(path))?) != hash {
            return None;
        }
    }
    let bytes = fs::read(spv_path).ok()?;
    Some(bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect())
}
