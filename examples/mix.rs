//! Runs the `mix` benchmark kernel once on the blocking path and verifies it on the CPU.
//!
//! `cargo run --example mix -- [n] [K]`

use vkasync::{kernels, Buffer, CommandList, Device, Kernel, MemoryKind, Recorder};

fn mix_cpu(mut x: u32, k: u32) -> u32 {
    for _ in 0..k {
        x = x.wrapping_mul(1664525).wrapping_add(1013904223);
        x ^= x >> 16;
    }
    x
}

fn main() -> Result<(), vkasync::Error> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1 << 20);
    let k: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let device = Device::new()?;
    let info = device.info();
    println!(
        "device: {} ({:?}, Vulkan {}.{}.{})",
        info.name, info.device_type, info.api_version.0, info.api_version.1, info.api_version.2
    );

    let mix = Kernel::new(&device, &kernels::MIX)?;
    let data: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2654435761)).collect();
    let buf = Buffer::<u32>::new(&device, n, MemoryKind::Device)?;
    let start = std::time::Instant::now();
    let mut cmds = CommandList::new(&device);
    cmds.upload(&buf, &data)?;
    cmds.dispatch(&mix, [mix.groups_for(n as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, k]))?;
    let result = cmds.read_back(&buf)?;
    cmds.submit_and_wait()?;
    let out = result.into_vec()?;
    let elapsed = start.elapsed();
    let bad = data.iter().zip(&out).filter(|(&x, &y)| mix_cpu(x, k) != y).count();
    if bad > 0 {
        eprintln!("mix: {bad} of {n} elements differ from the CPU");
        std::process::exit(1);
    }
    println!("mix: n={n} K={k} verified against the CPU in {elapsed:.2?} (upload + dispatch + read-back)");
    Ok(())
}
