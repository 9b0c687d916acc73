//! Shared test setup: every test opens the real device (lavapipe in CI) with the validation layer
//! and synchronization validation on, and fails if the layer reported anything.
//!
//! The one exception is `VKASYNC_TEST_NO_VALIDATION=1`, honoured only by Windows builds (see
//! [`validation`]): the Windows test binaries run under Wine (`scripts/windows-wine.sh`), whose
//! `vulkan-1.dll` lists none of the host's layers to the application, so there the devices open
//! without the layer and the checks of validation messages are skipped. Everything else (results,
//! leaks, errors) is still checked.
#![allow(dead_code)]

use vkasync::{kernels, Buffer, Ctx, Device, DeviceBuilder, Error, Kernel, MemoryKind};

mod crash;

/// Whether tests turn the validation layer on: always, except in a Windows build run with
/// `VKASYNC_TEST_NO_VALIDATION=1` (for Wine, which offers the application no layer). Elsewhere
/// that variable is refused, so that it can never turn validation off for the Linux runs.
pub fn validation() -> bool {
    let off = std::env::var("VKASYNC_TEST_NO_VALIDATION").is_ok_and(|v| v == "1");
    assert!(
        !off || cfg!(windows),
        "VKASYNC_TEST_NO_VALIDATION=1 is for Windows builds run under Wine only (scripts/windows-wine.sh)"
    );
    !off
}

/// A device builder with validation on (see [`validation`] for the one exception).
pub fn builder() -> DeviceBuilder {
    Device::builder().validation(validation())
}

/// Opens the device with validation on. Honours `VKASYNC_DEVICE`. With
/// `VKASYNC_TEST_ALWAYS_STAGE=1` the device is driven as a discrete GPU (staging copies for every
/// upload and read-back, through the copy kernel), so that path is tested on lavapipe too.
pub fn device() -> Device {
    device_with(|b| b)
}

/// As [`device`], with `more` applied to the builder last.
pub fn device_with(more: impl FnOnce(DeviceBuilder) -> DeviceBuilder) -> Device {
    let _ = env_logger::builder().is_test(true).try_init();
    crash::install();
    let staged = std::env::var("VKASYNC_TEST_ALWAYS_STAGE").is_ok_and(|v| v == "1");
    let mut builder = builder().always_stage(staged);
    if staged {
        // That pass runs one test at a time, so the copy kernel goes under the validation layer
        // there even where the layer's age turns it off by default (see
        // `DeviceBuilder::compute_copies`): every staged upload and read-back uses it.
        builder = builder.compute_copies(true);
    }
    more(builder).build().expect("a Vulkan device with the validation layer (run the README's test command)")
}

/// Fails the test if the validation layer reported any error or warning. Without validation
/// (see [`validation`]) it checks that the device has none, and that it counted nothing.
pub fn assert_no_validation_messages(device: &Device) {
    assert_eq!(device.validation_enabled(), validation(), "validation must be on in tests");
    let n = device.validation_message_count();
    assert_eq!(n, 0, "validation messages: {:#?}", device.validation_messages());
}

/// Checks validation and that nothing is left allocated: no live buffer, and once the pool's
/// idle blocks are freed, gpu-allocator's own report holds no allocation either.
pub fn finish(device: Device) {
    assert_no_validation_messages(&device);
    // A dropped executor or queue released what its submissions held before its drop returned.
    let report = device.memory_report();
    assert_eq!(report.live_buffers, 0, "leaked buffers: {report:?}");
    device.trim();
    let report = device.memory_report();
    assert_eq!((report.allocations, report.pooled_bytes), (0, 0), "allocator not empty: {report:?}");
}

/// AES-CTR (128/192/256-bit key, 128-bit big-endian counter from `iv`) on the CPU, with the
/// RustCrypto crates.
pub fn cpu_ctr(key: &[u8], iv: &[u8; 16], data: &[u8]) -> Vec<u8> {
    use aes::cipher::{KeyIvInit, StreamCipher};
    let mut out = data.to_vec();
    match key.len() {
        16 => ctr::Ctr128BE::<aes::Aes128>::new(key.into(), iv.into()).apply_keystream(&mut out),
        24 => ctr::Ctr128BE::<aes::Aes192>::new(key.into(), iv.into()).apply_keystream(&mut out),
        32 => ctr::Ctr128BE::<aes::Aes256>::new(key.into(), iv.into()).apply_keystream(&mut out),
        n => panic!("bad AES key length {n}"),
    }
    out
}

/// The record layer composed from the RustCrypto crates: AES-CTR from the nonce (prefix, `seq`
/// big-endian, zeros), then HMAC-SHA256 over nonce and ciphertext.
pub fn cpu_seal(aes_key: &[u8], mac_key: &[u8], prefix: [u8; 4], seq: u64, plaintext: &[u8]) -> (Vec<u8>, [u8; 32]) {
    use hmac::Mac;
    let mut nonce = [0u8; 16];
    nonce[..4].copy_from_slice(&prefix);
    nonce[4..12].copy_from_slice(&seq.to_be_bytes());
    let ct = cpu_ctr(aes_key, &nonce, plaintext);
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(mac_key).expect("any key length");
    m.update(&nonce);
    m.update(&ct);
    (ct, m.finalize().into_bytes().into())
}

/// `len` pseudo-random bytes from `seed` (xorshift).
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The `mix` kernel on the CPU.
pub fn mix_cpu(x: u32, k: u32) -> u32 {
    let mut x = x;
    for _ in 0..k {
        x = x.wrapping_mul(1664525).wrapping_add(1013904223);
        x ^= x >> 16;
    }
    x
}

/// Fails the test if the validation layer reported anything other than the invalid host signal
/// that device-loss tests use on purpose to lose the device.
pub fn assert_only_intended_validation_messages(device: &Device) {
    for m in device.validation_messages() {
        assert!(
            m.contains("VkSemaphoreSignalInfo")
                || m.contains("vkSignalSemaphore")
                || m.contains("Tried to signal a timeline"),
            "unexpected validation message: {m}"
        );
    }
}

/// Aborts the process if the test has not finished in time: a deadlock fails loudly instead of
/// hanging CI. Before it aborts it writes, straight to the standard error (not through the
/// test harness's output capture, which a thread of the hung test may hold, and which an
/// aborted process never prints), what every thread of the process is waiting in (Linux).
pub struct Watchdog(Option<std::sync::mpsc::Sender<()>>);

impl Watchdog {
    pub fn new(limit: std::time::Duration) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                let msg = format!(
                    "\nwatchdog: test did not finish within {limit:?} (deadlock?); threads:\n{}",
                    thread_listing()
                );
                let _ = std::io::Write::write_all(&mut std::io::stderr(), msg.as_bytes());
                std::process::abort();
            }
        });
        Watchdog(Some(tx))
    }
}

/// Each thread of the process: its name, the kernel function it waits in, and its system call
/// (number and first arguments), from `/proc/self/task` (empty where there is none).
fn thread_listing() -> String {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return String::new() };
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).unwrap_or_default().trim().to_string();
    let mut out = String::new();
    for t in tasks.flatten() {
        let dir = t.path();
        let syscall: Vec<String> = read(dir.join("syscall")).split(' ').take(3).map(str::to_string).collect();
        out += &format!(
            "  {} '{}' waits in {} (syscall {})\n",
            t.file_name().to_string_lossy(),
            read(dir.join("comm")),
            read(dir.join("wchan")),
            syscall.join(" ")
        );
    }
    out
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// A device with validation and the `mix` kernel.
pub fn setup() -> (Device, Kernel) {
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    (device, mix)
}

/// One task of the motivating case: upload, one `mix`, read back.
pub async fn mix_task(ctx: Ctx, mix: Kernel, t: u32, n: usize, k: u32) -> Result<Vec<u32>, Error> {
    let data: Vec<u32> = (0..n as u32).map(|i| i ^ t.wrapping_mul(2654435761)).collect();
    let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
    ctx.upload(&buf, &data)?;
    ctx.dispatch(&mix, [mix.groups_for(n as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, k]))?;
    ctx.read(&buf).await
}

/// What [`mix_task`] returns for task `t`, computed on the CPU.
pub fn mix_expected(t: u32, n: usize, k: u32) -> Vec<u32> {
    (0..n as u32).map(|i| mix_cpu(i ^ t.wrapping_mul(2654435761), k)).collect()
}

/// Whether `device` is lavapipe (Mesa's CPU Vulkan driver, the device of CI).
pub fn is_lavapipe(device: &Device) -> bool {
    device.info().name.contains("llvmpipe")
}

/// Records one `mix` with `k` rounds over all of `buf`.
pub fn dispatch_mix(ctx: &Ctx, mix: &Kernel, buf: &Buffer<u32>, k: u32) -> Result<(), Error> {
    let n = buf.len();
    ctx.dispatch(mix, [mix.groups_for(n as u64), 1, 1], &[buf.into()], bytemuck::bytes_of(&[n as u32, k]))
}

/// Whether [`lose_device`] simulates the loss on `device` (the GPU then goes on, and what it ran
/// is released once it is done) rather than losing it through the driver (lavapipe: what was in
/// flight is leaked).
pub fn loss_is_simulated(device: &Device) -> bool {
    !is_lavapipe(device) || std::env::var("VKASYNC_TEST_SIMULATED_LOSS").is_ok_and(|v| v == "1")
}

/// Loses the device on purpose, for the device-loss tests. Lavapipe answers an invalid host
/// signal of the timeline with `VK_ERROR_DEVICE_LOST`, so there the loss comes from the driver
/// (and the validation layer reports the invalid signal: see
/// [`assert_only_intended_validation_messages`]). Elsewhere that invalid usage is undefined
/// behaviour, so the runtime simulates the loss instead ([`Device::debug_simulate_loss`]): the
/// same path from the failed call on, while the GPU finishes its work.
/// `VKASYNC_TEST_SIMULATED_LOSS=1` takes the simulated path on lavapipe too.
pub fn lose_device(device: &Device) {
    if !loss_is_simulated(device) {
        let _ = device.debug_host_signal(0);
    } else {
        device.debug_simulate_loss();
    }
}

/// The size of `mix` work (elements, rounds) that keeps this device busy for at least `target`
/// in one dispatch, for tests that act while work is in flight, with the time one such
/// dispatch took: starting from `n` elements and `k` rounds (what the test used on lavapipe,
/// where it takes milliseconds or more), the rounds grow up to 65,000 (the kernel's bound per
/// dispatch), then the elements double (up to 2^26), until a dispatch measured on the device
/// takes that long on the GPU's clock ([`vkasync::Ctx::gpu_time`]; the host's where the device
/// has no timestamps). On a discrete GPU a fixed
/// size would finish in microseconds. A size is accepted at once when it took twice the target,
/// else on the shortest of three runs, all after a small unmeasured dispatch. Measured once per
/// size and target in a process.
pub fn heavy(
    device: &Device,
    mix: &Kernel,
    n: usize,
    k: u32,
    target: std::time::Duration,
) -> (usize, u32, std::time::Duration) {
    use std::time::Duration;
    type Size = (usize, u32, Duration);
    static SIZES: std::sync::Mutex<Vec<(Size, Size)>> = std::sync::Mutex::new(Vec::new());
    let key = (n, k, target);
    if let Some(&(_, size)) = SIZES.lock().unwrap().iter().find(|(k, _)| *k == key) {
        return size;
    }
    // Timed on the GPU's clock: other tests' devices share the GPU, and a wall-clock time would
    // include the wait for their work (hundreds of milliseconds on an H200 under the suite).
    // A device without timestamps on its compute queue is timed by the host's clock.
    #[cfg(feature = "trace")]
    let exec = vkasync::Executor::builder(device).gpu_timing(device.limits().timestamps).build().unwrap();
    #[cfg(not(feature = "trace"))]
    let exec = vkasync::Executor::new(device).unwrap();
    let run = |n: usize, k: u32| {
        let (ctx, m, dev) = (exec.context(), mix.clone(), device.clone());
        exec.block_on(async move {
            let buf = Buffer::<u32>::new(&dev, n, MemoryKind::Device)?;
            dispatch_mix(&ctx, &m, &buf, k)?;
            let start = std::time::Instant::now();
            ctx.synchronize().await?;
            #[cfg(feature = "trace")]
            let took = ctx.gpu_time().unwrap_or_else(|| start.elapsed());
            #[cfg(not(feature = "trace"))]
            let took = start.elapsed();
            Ok::<_, Error>(took)
        })
        .unwrap()
    };
    // The device's first dispatches also pay for first use (memory, pipelines, the layer): a
    // small one first, unmeasured.
    run(64, 1);
    let (mut n, mut k) = (n, k);
    let took = loop {
        let mut took = run(n, k);
        if took < 2 * target {
            took = took.min(run(n, k)).min(run(n, k));
        }
        // Shown with a failing test's output.
        eprintln!("heavy: mix over {n} elements, {k} rounds: {took:?} (target {target:?})");
        if took >= target || n >= 1 << 26 {
            break took;
        }
        if k < 65_000 {
            let grow = (target.as_secs_f64() / took.as_secs_f64().max(1e-6)).ceil().max(2.0);
            k = (k as f64 * grow).min(65_000.0) as u32;
        } else {
            n *= 2;
        }
    };
    drop(exec);
    SIZES.lock().unwrap().push((key, (n, k, took)));
    (n, k, took)
}

/// Checks `out`, the result of `mix` with `k` rounds over `input`, at 16 places spread over it
/// (the first and the last included): with heavy work a full check on the CPU would take
/// minutes.
pub fn check_mix_sample(out: &[u32], input: impl Fn(u32) -> u32, k: u32) {
    let n = out.len();
    assert!(n > 0);
    for j in 0..16 {
        let i = if j == 15 { n - 1 } else { j * (n / 15) + j % 7 }.min(n - 1);
        assert_eq!(out[i], mix_cpu(input(i as u32), k), "element {i} of {n}");
    }
}
