//! Shared test setup: every test opens the real device (lavapipe in CI) with the validation layer
//! and synchronization validation on, and fails if the layer reported anything.
#![allow(dead_code)]

use vkasync::{kernels, Buffer, Ctx, Device, Error, Kernel, MemoryKind};

mod crash;

/// Opens the device with validation on. Honours `VKASYNC_DEVICE`. With
/// `VKASYNC_TEST_ALWAYS_STAGE=1` the device is driven as a discrete GPU (staging copies for every
/// upload and read-back, through the copy kernel), so that path is tested on lavapipe too.
pub fn device() -> Device {
    let _ = env_logger::builder().is_test(true).try_init();
    crash::install();
    let staged = std::env::var("VKASYNC_TEST_ALWAYS_STAGE").is_ok_and(|v| v == "1");
    let mut builder = Device::builder().validation(true).always_stage(staged);
    if staged {
        // That pass runs one test at a time, so the copy kernel goes under the validation layer
        // there even where the layer's age turns it off by default (see
        // `DeviceBuilder::compute_copies`): every staged upload and read-back uses it.
        builder = builder.compute_copies(true);
    }
    builder.build().expect("a Vulkan device with the validation layer (run the README's test command)")
}

/// Fails the test if the validation layer reported any error or warning.
pub fn assert_no_validation_messages(device: &Device) {
    assert!(device.validation_enabled(), "validation must be on in tests");
    let n = device.validation_message_count();
    assert_eq!(n, 0, "validation messages: {:#?}", device.validation_messages());
}

/// Checks validation and that nothing is left allocated: no live buffer, and once the pool's
/// idle blocks are freed, gpu-allocator's own report holds no allocation either.
pub fn finish(device: Device) {
    assert_no_validation_messages(&device);
    // A dropped `Queue` is closed by its driver thread, which releases what its last
    // submissions held on its own time (nothing blocks in `Drop`): give it a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while device.memory_report().live_buffers > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
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
/// hanging CI.
pub struct Watchdog(Option<std::sync::mpsc::Sender<()>>);

impl Watchdog {
    pub fn new(limit: std::time::Duration) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                eprintln!("watchdog: test did not finish within {limit:?} (deadlock?)");
                std::process::abort();
            }
        });
        Watchdog(Some(tx))
    }
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
