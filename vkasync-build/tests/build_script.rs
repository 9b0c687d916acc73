//! The build helper as a crate's build script uses it: a probe crate made in a temporary
//! folder, with its own `shaders/`, is built by cargo (shaderc compiles in the build script's
//! process) and run.
//!
//! - an `#include` from `shaders/include/` is resolved, and the reflection constants are right;
//! - a changed include rebuilds the shader (its `rerun-if-changed` and the cache's stamp);
//! - a GLSL error fails the build with `shaders/NAME.comp:LINE:` in cargo's output;
//! - the generated code names no absolute path of the build machine.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A probe crate in a fresh temporary folder; its target folder is kept apart from the
/// workspace's, which the running `cargo test` holds.
struct Probe {
    dir: PathBuf,
    target: PathBuf,
    /// Also the crate's name (`probe-NAME`): each probe has its own package and binary.
    name: String,
}

impl Probe {
    fn new(name: &str) -> Probe {
        let helper = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = std::env::temp_dir().join(format!("vkasync-build-probe-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::create_dir_all(dir.join("shaders/include")).unwrap();
        let manifest = format!(
            "[package]\nname = \"probe-{name}\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
             [build-dependencies]\nvkasync-build = {{ path = {:?} }}\n\n[workspace]\n",
            helper.display().to_string()
        );
        std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
        // The generated constants name `crate::KernelSource` (the form vkasync's own build
        // uses), so the probe needs no vkasync: it declares that type itself.
        std::fs::write(dir.join("build.rs"), "fn main() { vkasync_build::Kernels::new().inside_vkasync().build(); }\n")
            .unwrap();
        std::fs::write(
            dir.join("src/main.rs"),
            "#[allow(dead_code)]\npub struct KernelSource { name: &'static str, path: &'static str, spirv: &'static [u32] }\n\
             mod kernels { include!(concat!(env!(\"OUT_DIR\"), \"/kernels.rs\")); }\n\
             fn main() {\n\
                 let k = &kernels::DOUBLE;\n\
                 assert_eq!(k.spirv[0], 0x0723_0203, \"SPIR-V magic\");\n\
                 println!(\"{} {} {} local={:?} bindings={:?} read_only={:?} push={}\", kernels::ALL.len(), k.name, k.path,\n\
                     kernels::double::LOCAL_SIZE, kernels::double::BINDINGS, kernels::double::READ_ONLY,\n\
                     kernels::double::PUSH_CONSTANT_BYTES);\n\
             }\n",
        )
        .unwrap();
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/vkasync-build-probe");
        Probe { dir, target, name: name.to_string() }
    }

    /// Writes a file of the probe, dated a few seconds ahead so that cargo sees it as changed
    /// since any earlier build, however coarse the file system's clock.
    fn write(&self, rel: &str, text: &str) {
        let path = self.dir.join(rel);
        std::fs::write(&path, text).unwrap();
        let ahead = std::time::SystemTime::now() + std::time::Duration::from_secs(2);
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(ahead).unwrap();
    }

    fn cargo(&self, verb: &str) -> Output {
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args([verb, "--quiet"])
            .current_dir(&self.dir)
            .env("CARGO_TARGET_DIR", &self.target)
            .env_remove("VKASYNC_SHADER_DEBUG")
            .output()
            .expect("cargo runs")
    }

    /// The generated `kernels.rs` of the probe's last build.
    fn generated(&self) -> String {
        let build = self.target.join("debug/build");
        let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
        for e in std::fs::read_dir(&build).unwrap().flatten() {
            let f = e.path().join("out/kernels.rs");
            if e.file_name().to_string_lossy().starts_with(&format!("probe-{}-", self.name)) && f.is_file() {
                let t = f.metadata().unwrap().modified().unwrap();
                if newest.as_ref().is_none_or(|(n, _)| t > *n) {
                    newest = Some((t, f));
                }
            }
        }
        std::fs::read_to_string(newest.expect("a generated kernels.rs").1).unwrap()
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const DOUBLE: &str = "#version 450\n#include \"size.glsl\"\nlayout(local_size_x = SIZE) in;\n\
    layout(std430, set = 0, binding = 0) readonly buffer A { uint a[]; };\n\
    layout(std430, set = 0, binding = 1) buffer B { uint b[]; };\n\
    layout(push_constant) uniform P { uint n; };\n\
    void main() { uint i = gl_GlobalInvocationID.x; if (i < n) { b[i] = 2u * a[i]; } }\n";

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn includes_reflection_and_rebuilds_on_a_changed_include() {
    let probe = Probe::new("ok");
    probe.write("shaders/include/size.glsl", "#define SIZE 64\n");
    probe.write("shaders/double.comp", DOUBLE);
    let out = probe.cargo("run");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "1 double shaders/double.comp local=[64, 1, 1] bindings=[0, 1] read_only=[true, false] push=4"
    );
    // No absolute path of this machine in what the crate compiles in.
    let generated = probe.generated();
    assert!(!generated.contains(&*probe.dir.to_string_lossy()), "an absolute path in kernels.rs");
    // The include changes: the shader is compiled again (not taken from the cache).
    probe.write("shaders/include/size.glsl", "#define SIZE 128\n");
    let out = probe.cargo("run");
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("local=[128, 1, 1]"), "{}", text(&out));
}

#[test]
fn a_glsl_error_fails_the_build_at_its_file_and_line() {
    let probe = Probe::new("error");
    probe.write("shaders/include/size.glsl", "#define SIZE 64\n");
    probe.write("shaders/double.comp", DOUBLE);
    probe.write("shaders/broken.comp", "#version 450\nlayout(local_size_x = 1) in;\nvoid main() { undeclared = 1; }\n");
    let out = probe.cargo("build");
    assert!(!out.status.success(), "a broken shader must fail the build");
    let all = text(&out);
    assert!(all.contains("shaders/broken.comp:3:"), "no file:line in cargo's output:\n{all}");
    assert!(all.contains("undeclared"), "the compiler's message is missing:\n{all}");
}
