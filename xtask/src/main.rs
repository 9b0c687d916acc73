//! The repository's two commands, as cargo commands (the `cargo xtask` convention), so that a
//! machine with only Rust needs nothing else to start:
//!
//! ```text
//! cargo xtask example [ARGS..]   installs what is missing, then runs the main example (tls_pipeline)
//! cargo xtask test               installs what is missing, then runs the whole suite with validation
//! cargo xtask deps               only installs what is missing
//! ```
//!
//! On Debian and Ubuntu, "installs what is missing" runs `scripts/install-deps.sh` (apt-get,
//! through sudo when not root; it names every package and says what it is for). Elsewhere it says
//! what to install by hand and goes on.

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
             Vulkan SDK (https://vulkan.lunarg.com), which brings shaderc, SPIRV-Tools and the validation layer; \
             then open a new terminal so that VULKAN_SDK is set."
        );
    } else {
        println!(
            "xtask: not a Debian/Ubuntu system: install by hand a Vulkan loader and driver (or lavapipe), the \
             Khronos validation layer, and the shader tools glslc and spirv-val (shaderc, SPIRV-Tools)."
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

fn test() -> Result<(), String> {
    deps()?;
    let mut c = cargo();
    c.args(["test", "--all-targets"]).env("VKASYNC_VALIDATION", "1");
    run(
        "running the test suite on the Vulkan device with validation (VKASYNC_VALIDATION=1 cargo test --all-targets)",
        c,
    )?;
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
    c.args(["test", "--lib", "--features", "loom-model", "seen"]);
    run(
        "the loom model of what woken waits read without the queue's lock (cargo test --lib --features loom-model seen)",
        c,
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("example") => example(&args[1..]),
        Some("test") => test(),
        Some("deps") => deps(),
        _ => {
            eprintln!("usage: cargo xtask example [ARGS..] | cargo xtask test | cargo xtask deps");
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
