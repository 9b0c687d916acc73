//! vkasync under tokio: independent jobs, each a plain `async fn` that records GPU work and
//! awaits it through a [`Queue`], spawned on tokio's multi-thread runtime. The queue submits by
//! group commit and one driver thread waits for the GPU, so the jobs share submits and waits.
//!
//! `cargo run --release --example tokio_jobs -- [jobs]`

use vkasync::{kernels, Buffer, Ctx, Device, Error, Kernel, MemoryKind, Queue};

async fn job(ctx: Ctx, mix: Kernel, seed: u32) -> Result<Vec<u32>, Error> {
    let data: Vec<u32> = (0..1024).map(|i| i ^ seed).collect();
    let buf = Buffer::<u32>::new(ctx.device(), data.len(), MemoryKind::Device)?;
    ctx.upload(&buf, &data)?;
    ctx.dispatch(&mix, [16, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[1024u32, 1]))?;
    ctx.read(&buf).await // a Send future: tokio may resume it on any worker
}

fn mix_cpu(mut x: u32) -> u32 {
    x = x.wrapping_mul(1664525).wrapping_add(1013904223);
    x ^ (x >> 16)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let jobs: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let device = Device::new()?;
    println!("device: {}", device.info().name);
    let mix = Kernel::new(&device, &kernels::MIX)?; // compiled from shaders/mix.comp at build time
    let queue = Queue::new(&device)?; // Send + Sync + Clone
    let start = std::time::Instant::now();
    let handles: Vec<_> = (0..jobs).map(|t| tokio::spawn(job(queue.context(), mix.clone(), t))).collect();
    for (t, h) in handles.into_iter().enumerate() {
        let out = h.await.expect("job panicked")?;
        assert!(out.iter().enumerate().all(|(i, &x)| x == mix_cpu(i as u32 ^ t as u32)), "job {t} is wrong");
    }
    println!("{jobs} jobs verified in {:.2?}", start.elapsed());
    println!("{}", queue.stats());
    Ok(())
}
