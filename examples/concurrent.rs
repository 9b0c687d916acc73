//! T independent jobs (upload, one `mix` dispatch, read back), written once as an `async fn`,
//! run two ways on the same device:
//! - blocking: each job submits and waits before the next starts (the naive pattern);
//! - executor: all jobs are tasks; the executor submits once and waits once.
//!
//! `cargo run --release --example concurrent -- [--tasks T] [--n N] [--k K]`

use std::time::Instant;
use vkasync::{kernels, Buffer, CommandList, Ctx, Device, Error, Executor, Kernel, MemoryKind, Recorder};

fn mix_cpu(mut x: u32, k: u32) -> u32 {
    for _ in 0..k {
        x = x.wrapping_mul(1664525).wrapping_add(1013904223);
        x ^= x >> 16;
    }
    x
}

fn input(t: usize, n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| i ^ (t as u32).wrapping_mul(2654435761)).collect()
}

fn check(t: usize, k: u32, out: &[u32]) {
    let n = out.len();
    if input(t, n).iter().zip(out).any(|(&x, &y)| mix_cpu(x, k) != y) {
        eprintln!("job {t}: result differs from the CPU");
        std::process::exit(1);
    }
}

/// One job as a task: record, then await the read-back.
async fn job(ctx: Ctx, mix: Kernel, t: usize, n: usize, k: u32) -> Result<Vec<u32>, Error> {
    let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
    ctx.upload(&buf, &input(t, n))?;
    ctx.dispatch(&mix, [mix.groups_for(n as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, k]))?;
    ctx.read(&buf).await
}

/// The same job on the blocking path.
fn job_blocking(device: &Device, mix: &Kernel, t: usize, n: usize, k: u32) -> Result<Vec<u32>, Error> {
    let buf = Buffer::<u32>::new(device, n, MemoryKind::Device)?;
    let mut cmds = CommandList::new(device);
    cmds.upload(&buf, &input(t, n))?;
    cmds.dispatch(mix, [mix.groups_for(n as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, k]))?;
    let rb = cmds.read_back(&buf)?;
    cmds.submit_and_wait()?;
    rb.into_vec()
}

fn flag(args: &[String], name: &str, default: usize) -> usize {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let tasks = flag(&args, "--tasks", 1000);
    let n = flag(&args, "--n", 1024);
    let k = flag(&args, "--k", 1) as u32;
    let device = Device::new()?;
    println!("device: {}", device.info().name);
    let mix = Kernel::new(&device, &kernels::MIX)?;
    // Warm up (the first dispatch compiles the shader on some drivers).
    check(0, k, &job_blocking(&device, &mix, 0, n, k)?);

    let start = Instant::now();
    let before = device.last_submitted();
    for t in 0..tasks {
        check(t, k, &job_blocking(&device, &mix, t, n, k)?);
    }
    let blocking = start.elapsed();
    let blocking_submits = device.last_submitted() - before;

    let exec = Executor::new(&device)?;
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks).map(|t| exec.spawn(job(exec.context(), mix.clone(), t, n, k))).collect();
    exec.run();
    for (t, h) in handles.into_iter().enumerate() {
        check(t, k, &h.join().expect("task panicked")?);
    }
    let concurrent = start.elapsed();
    let stats = exec.stats();

    println!("{tasks} jobs of n={n} K={k}, every result verified against the CPU");
    println!("{:<10} {:>12} {:>10} {:>11}", "mode", "wall", "submits", "host_waits");
    println!("{:<10} {:>12.2?} {:>10} {:>11}", "blocking", blocking, blocking_submits, blocking_submits);
    println!("{:<10} {:>12.2?} {:>10} {:>11}", "executor", concurrent, stats.submits, stats.host_waits);
    println!("speed-up: {:.1}x", blocking.as_secs_f64() / concurrent.as_secs_f64());
    println!("{stats}");
    Ok(())
}
