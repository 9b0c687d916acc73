//! The repository's two commands, as cargo commands (the `cargo xtask` convention), so that a
//! machine with only Rust needs nothing else to start:
//!
//! ```text
//! cargo xtask example [ARGS..]   installs what is missing, then runs the main example (tls_pipeline)
//! cargo xtask test               installs what is missing, then runs the whole suite with validation
//! cargo xtask deps               only installs what is missing
//! cargo xtask repeat N [NAME..]  runs the test binaries that start queues (or the NAMEd ones)
//!                                N times each, in a row, and counts clean runs
//! cargo xtask imports [--max N]  the import graph of src/ and its cycles (fails past N files),
//!                                upward imports between layers and functions over 120 lines
//! cargo xtask bare               the library without its crypto and trace features: build and tests
//! ```
//!
//! On Debian and Ubuntu, "installs what is missing" runs `scripts/install-deps.sh` (apt-get,
//! through sudo when not root; it names every package and says what it is for). Elsewhere it says
//! what to install by hand and goes on.

mod imports;

use std::path::PathBuf;
use std::process::{Command, ExitCode};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the repository").to_path_buf()
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root());
    c
}

/// Runs `cmd`, echoing it first; `Err` with a message if it fails.
fn run(what: &str, mut cmd: Command) -> Result<(), String> {
    println!("xtask: {what}");
    let status = cmd.status().map_err(|e| format!("could not start {:?}: {e}", cmd.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what}: failed ({status})"))
    }
}

fn deps() -> Result<(), String> {
    if cfg!(target_os = "linux") && std::path::Path::new("/usr/bin/dpkg-query").exists() {
        let mut c = Command::new("bash");
        c.arg(root().join("scripts/install-deps.sh"));
        return run("installing what is missing (scripts/install-deps.sh)", c);
    }
    if cfg!(windows) {
        println!(
            "xtask: on Windows, install by hand: a GPU driver with Vulkan 1.2 (or Mesa's lavapipe), and the \
             Vulkan SDK (https://vulkan.lunarg.com), which brings shaderc (with glslang and SPIRV-Tools) and the \
             validation layer; then open a new terminal so that VULKAN_SDK is set."
        );
    } else {
        println!(
            "xtask: not a Debian/Ubuntu system: install by hand a Vulkan loader and driver (or lavapipe), the \
             Khronos validation layer, a C++ compiler, and shaderc with glslang and SPIRV-Tools (or cmake, git and \
             python3, with which the shaderc crate builds it from source)."
        );
    }
    Ok(())
}

fn example(args: &[String]) -> Result<(), String> {
    deps()?;
    let mut c = cargo();
    c.args(["run", "--release", "--example", "tls_pipeline", "--"]).args(args);
    run("running the main example (cargo run --release --example tls_pipeline)", c)
}

/// The installed Khronos validation layer's version, where it is older than 1.3.275 and so has
/// a data race between threads: it inserts every new device into a process-wide map that calls
/// on other devices read without a lock (`GetLayerDataPtr`, KhronosGroup/Vulkan-ValidationLayers
/// #4391). Creating a device while another thread uses its own then crashes inside the layer
/// now and then: Debian 12's 1.3.239 did so in `vkCreateBuffer` in 2 of 114 runs of
/// tests/crypto.rs on a busy 2-core machine (2026-12-03), and in 1 of 3 in CI. With such a layer the
/// validated passes run one test at a time, so that no device is created beside another's work.
fn racy_validation_layer() -> Option<String> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for var in ["VK_LAYER_PATH", "VK_ADD_LAYER_PATH"] {
        if let Some(v) = std::env::var_os(var) {
            dirs.extend(std::env::split_paths(&v));
        }
    }
    for base in ["/usr/local/share", "/usr/share", "/etc"] {
        dirs.push(PathBuf::from(base).join("vulkan/explicit_layer.d"));
    }
    for dir in dirs {
        let Ok(text) = std::fs::read_to_string(dir.join("VkLayer_khronos_validation.json")) else { continue };
        let version = text.split("\"api_version\"").nth(1)?.split('"').nth(1)?.to_string();
        let parts: Vec<u32> = version.split('.').filter_map(|p| p.parse().ok()).collect();
        return (parts.len() == 3 && (parts[0], parts[1], parts[2]) < (1, 3, 275)).then_some(version);
    }
    None
}

fn test() -> Result<(), String> {
    println!("xtask: the layers of src/ (cargo xtask imports --max 2: no upward import, no cycle of more than two files, no function over 120 lines)");
    imports::run(&root(), &["--max".to_string(), "2".to_string()])?;
    deps()?;
    let racy = racy_validation_layer();
    let mut c = cargo();
    c.args(["test", "--all-targets"]).env("VKASYNC_VALIDATION", "1");
    let mut what = "running the test suite on the Vulkan device with validation (VKASYNC_VALIDATION=1 cargo test \
                    --all-targets)"
        .to_string();
    if let Some(version) = &racy {
        c.args(["--", "--test-threads=1"]);
        what += &format!(
            ", one test at a time: the validation layer {version} crashes now and then when one thread creates a \
             device while another uses its own (fixed in later layers)"
        );
    }
    run(&what, c)?;
    // One test at a time in this pass: with staging on, several devices recording at once in one
    // process crashed inside the validation layer (in vkCmdPushDescriptorSetKHR, about one
    // run in ten of tests/executor.rs; none in 30 runs one test at a time, none in 30 without
    // staging).
    let mut c = cargo();
    c.args(["test", "--tests", "--", "--test-threads=1"])
        .env("VKASYNC_VALIDATION", "1")
        .env("VKASYNC_TEST_ALWAYS_STAGE", "1");
    run(
        "again, driving the device as a discrete GPU (VKASYNC_TEST_ALWAYS_STAGE=1: staging copies everywhere), one test at a time",
        c,
    )?;
    // The device-loss tests lose lavapipe's device through the driver (an invalid host signal);
    // other drivers get a loss simulated by the runtime (see tests/common), tested here too.
    let mut c = cargo();
    c.args(["test", "--tests", "--", "loss"]).env("VKASYNC_VALIDATION", "1").env("VKASYNC_TEST_SIMULATED_LOSS", "1");
    run(
        "the device-loss tests again, with the loss simulated as on drivers other than lavapipe (VKASYNC_TEST_SIMULATED_LOSS=1)",
        c,
    )?;
    let mut c = cargo();
    c.args(["test", "--doc"]).env("VKASYNC_VALIDATION", "1");
    run("the documentation examples (cargo test --doc)", c)?;
    let mut c = cargo();
    c.args(["test", "-p", "vkasync-build", "-p", "vkasync-spirv"]);
    run(
        "the build helper (a probe crate built by cargo: includes, reflection, rebuilds, file:line errors) and \
         the SPIR-V crate (cargo test -p vkasync-build -p vkasync-spirv)",
        c,
    )?;
    let mut c = cargo();
    c.args(["test", "--lib", "--features", "loom-model", "loom_model"]);
    run(
        "the loom models of what woken waits read without the queue's lock and of the lanes' handshake (cargo test --lib --features loom-model loom_model)",
        c,
    )
}

/// The bare runtime: the library without its optional `crypto` and `trace` features builds,
/// and its tests pass on the device with validation (those that need a feature are skipped by
/// their `required-features`).
fn bare() -> Result<(), String> {
    deps()?;
    let racy = racy_validation_layer();
    let mut c = cargo();
    c.args(["test", "--no-default-features", "--features", "shaderc,spirv-validation", "--lib", "--tests"])
        .env("VKASYNC_VALIDATION", "1");
    if racy.is_some() {
        c.args(["--", "--test-threads=1"]);
    }
    run("the bare runtime without the crypto and trace features (cargo test --no-default-features --features shaderc,spirv-validation --lib --tests)", c)
}

/// The integration-test binaries whose tests start queues, executors or queue sets, and so
/// exercise closing them and the process's exit.
const QUEUE_BINARIES: &[&str] = &[
    "any_runtime",
    "backpressure",
    "binding_sizes",
    "busy_loop",
    "coalesced",
    "copies",
    "cross_thread_wake",
    "crypto",
    "executor",
    "executor_props",
    "foundation",
    "long_messages",
    "panics",
    "queue_set",
    "shutdown",
    "task_combinations",
    "trace",
    "trace_env",
    "tracing_spans",
    "wakers",
    "zero_init",
];

/// Builds the integration tests and returns each one's executable, by test name.
fn test_binaries() -> Result<Vec<(String, String)>, String> {
    let mut c = cargo();
    c.args(["test", "--tests", "--no-run", "--message-format=json"]).stderr(std::process::Stdio::inherit());
    println!("xtask: building the integration tests (cargo test --tests --no-run)");
    let out = c.output().map_err(|e| format!("could not start cargo: {e}"))?;
    if !out.status.success() {
        return Err("building the tests failed".into());
    }
    let field = |line: &str, key: &str| -> Option<String> {
        let at = line.find(&format!("\"{key}\":\""))? + key.len() + 4;
        Some(line[at..].split('"').next()?.to_string())
    };
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if !line.contains("\"kind\":[\"test\"]") {
            continue;
        }
        if let (Some(name), Some(exe)) = (field(line, "name"), field(line, "executable")) {
            found.push((name, exe));
        }
    }
    Ok(found)
}

/// Runs each chosen test binary `n` times in a row (validation on), as `cargo xtask test`'s
/// first pass does, and fails if any run fails: a crash at exit shows here.
fn repeat(args: &[String]) -> Result<(), String> {
    let n: usize = args.first().and_then(|a| a.parse().ok()).ok_or("usage: cargo xtask repeat N [NAME..]")?;
    let names: Vec<&str> =
        if args.len() > 1 { args[1..].iter().map(String::as_str).collect() } else { QUEUE_BINARIES.to_vec() };
    let binaries = test_binaries()?;
    let racy = racy_validation_layer();
    if let Some(version) = &racy {
        println!("xtask: one test at a time in each run (the validation layer {version}: see `racy_validation_layer`)");
    }
    let mut failed = Vec::new();
    for name in names {
        let exe = &binaries.iter().find(|(b, _)| b == name).ok_or(format!("no test binary {name}"))?.1;
        let started = std::time::Instant::now();
        let mut clean = 0;
        for run in 1..=n {
            let out = Command::new(exe)
                .args(if racy.is_some() { &["--test-threads=1"][..] } else { &[] })
                .current_dir(root())
                .env("VKASYNC_VALIDATION", "1")
                .output()
                .map_err(|e| format!("could not start {exe}: {e}"))?;
            if out.status.success() {
                clean += 1;
            } else {
                eprintln!("xtask: {name}, run {run}: {}\n{}", out.status, failure_excerpt(&out.stdout, &out.stderr));
            }
        }
        println!("xtask: {name}: {clean} of {n} runs clean ({:.0} s)", started.elapsed().as_secs_f64());
        if clean < n {
            failed.push(name);
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("runs failed in {}", failed.join(", ")))
    }
}

/// What to show of a failed run: a crash report's first 60 lines (the crashing thread and its
/// innermost frames, which tests/common/crash.rs writes to the standard error), any failed
/// test's report, and the last 20 lines.
fn failure_excerpt(stdout: &[u8], stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stdout) + String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().collect();
    let mut taken = vec![false; lines.len()];
    let mut mark = |from: usize, n: usize| {
        for t in taken.iter_mut().skip(from).take(n) {
            *t = true;
        }
    };
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("test process: signal") {
            mark(i, 60);
        } else if line.starts_with("---- ") || line.contains("panicked at") {
            mark(i, 15);
        }
    }
    mark(lines.len().saturating_sub(20), 20);
    let mut shown = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if taken[i] {
            shown.push(*line);
        } else if shown.last() != Some(&"[...]") {
            shown.push("[...]");
        }
    }
    shown.join("\n")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("example") => example(&args[1..]),
        Some("test") => test(),
        Some("deps") => deps(),
        Some("repeat") => repeat(&args[1..]),
        Some("imports") => imports::run(&root(), &args[1..]),
        Some("bare") => bare(),
        _ => {
            eprintln!(
                "usage: cargo xtask example [ARGS..] | cargo xtask test | cargo xtask deps | cargo xtask repeat N \
                 [NAME..] | cargo xtask imports [--max N] | cargo xtask bare"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
