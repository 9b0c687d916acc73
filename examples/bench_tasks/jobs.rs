//! The workload and its runs: the job every mode does (upload, one `mix`, read back, verify),
//! run one after another, on an executor, and on tokio through a queue or a queue set.

use std::time::Instant;
use vkasync::{
    Buffer, CommandList, Ctx, Device, Error, Executor, Kernel, MemoryKind, PerDevice, Queue, QueueSet, Recorder,
};

fn mix_cpu(mut x: u32, k: u32) -> u32 {
    for _ in 0..k {
        x = x.wrapping_mul(1664525).wrapping_add(1013904223);
        x ^= x >> 16;
    }
    x
}

pub fn input(t: usize, n: usize) -> Vec<u32> {
    let salt = (t as u32).wrapping_mul(2654435761);
    (0..n as u32).map(|i| i ^ salt).collect()
}

/// Expected results for every task, computed on all cores before timing.
pub fn expected(tasks: usize, n: usize, k: u32) -> Vec<Vec<u32>> {
    let threads = crate::support::args::cores();
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); tasks];
    let chunk = tasks.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (c, part) in out.chunks_mut(chunk).enumerate() {
            // Named, so that a profile of a run can leave these threads' samples out.
            let spawned = std::thread::Builder::new().name("expected".into()).spawn_scoped(s, move || {
                for (j, slot) in part.iter_mut().enumerate() {
                    *slot = input(c * chunk + j, n).into_iter().map(|x| mix_cpu(x, k)).collect();
                }
            });
            spawned.expect("a thread to compute expected results");
        }
    });
    out
}

pub fn verify(t: usize, got: &[u32], want: &[u32]) {
    if got != want {
        eprintln!("task {t}: result differs from the CPU");
        std::process::exit(1);
    }
}

pub fn groups(n: usize) -> [u32; 3] {
    [n.div_ceil(64) as u32, 1, 1]
}

/// A buffer cleared lazily (`Buffer::new`) or not (`Buffer::new_uninit`).
pub fn new_buffer(device: &Device, n: usize, kind: MemoryKind, zeroed: bool) -> Result<Buffer<u32>, Error> {
    if zeroed {
        Buffer::new(device, n, kind)
    } else {
        Buffer::new_uninit(device, n, kind)
    }
}

/// One job: upload, one `mix`, read back, verify. `want` is an `Rc` on the executor, an `Arc`
/// under tokio.
async fn task<W: std::ops::Deref<Target = Vec<Vec<u32>>>>(
    ctx: Ctx,
    mix: Kernel,
    t: usize,
    n: usize,
    k: u32,
    want: W,
    zeroed: bool,
) -> Result<(), Error> {
    let buf = new_buffer(ctx.device(), n, MemoryKind::Device, zeroed)?;
    ctx.upload(&buf, &input(t, n))?;
    ctx.dispatch(&mix, groups(n), &[(&buf).into()], bytemuck::bytes_of(&[n as u32, k]))?;
    let got = ctx.read(&buf).await?;
    verify(t, &got, &want[t]);
    Ok(())
}

pub fn run_sequential(
    device: &Device,
    mix: &Kernel,
    tasks: usize,
    n: usize,
    k: u32,
    want: &[Vec<u32>],
    zeroed: bool,
) -> Result<(), Error> {
    for (t, want) in want.iter().enumerate().take(tasks) {
        let buf = new_buffer(device, n, MemoryKind::Device, zeroed)?;
        let mut cmds = CommandList::new(device);
        cmds.upload(&buf, &input(t, n))?;
        cmds.dispatch(mix, groups(n), &[(&buf).into()], bytemuck::bytes_of(&[n as u32, k]))?;
        let rb = cmds.read_back(&buf)?;
        cmds.submit_and_wait()?;
        verify(t, &rb.into_vec()?, want);
    }
    Ok(())
}

/// Host-side breakdown of one run, in µs per task. Executor: spawning, running (recording,
/// flushing, waking, reading back), of which blocked in the GPU wait, and joining. Raw batch:
/// buffers, recording, submit + wait, read back + verify. Tokio modes: the spawn loop (tasks run
/// meanwhile), the whole run (spawns included), of which the driver blocked in GPU waits.
#[derive(Default, Clone, Copy, Debug)]
pub struct ExecBreakdown {
    pub spawn: f64,
    pub run: f64,
    pub wait: f64,
    pub join: f64,
}

pub fn run_executor(
    exec: &Executor,
    mix: &Kernel,
    tasks: usize,
    n: usize,
    k: u32,
    want: &std::rc::Rc<Vec<Vec<u32>>>,
    zeroed: bool,
) -> Result<ExecBreakdown, Error> {
    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / tasks as f64;
    let wait0 = exec.stats().wait_ns;
    let t0 = Instant::now();
    let handles: Vec<_> =
        (0..tasks).map(|t| exec.spawn(task(exec.context(), mix.clone(), t, n, k, want.clone(), zeroed))).collect();
    let t1 = Instant::now();
    exec.run();
    let t2 = Instant::now();
    for h in handles {
        h.join().expect("task panicked")?;
    }
    let t3 = Instant::now();
    let wait = (exec.stats().wait_ns - wait0) as f64 / 1e3 / tasks as f64;
    Ok(ExecBreakdown { spawn: per(t1 - t0), run: per(t2 - t1), wait, join: per(t3 - t2) })
}

/// T tasks spawned on a tokio runtime, each doing the job through the queue; awaits them all.
#[allow(clippy::too_many_arguments)]
pub fn run_tokio(
    rt: &tokio::runtime::Runtime,
    queue: &Queue,
    mix: &Kernel,
    tasks: usize,
    n: usize,
    k: u32,
    want: &std::sync::Arc<Vec<Vec<u32>>>,
    zeroed: bool,
) -> Result<ExecBreakdown, Error> {
    let wait0 = queue.stats().wait_ns;
    let t0 = Instant::now();
    let mut t1 = t0;
    rt.block_on(async {
        if tasks == 1 {
            // A lone job is awaited where it is, as a request handler awaits its work: spawning
            // it only to join it at once would add two hand-offs between threads (tokio's, not
            // the GPU's) to its latency.
            t1 = Instant::now();
            return task(queue.context(), mix.clone(), 0, n, k, want.clone(), zeroed).await;
        }
        let handles: Vec<_> = (0..tasks)
            .map(|t| tokio::spawn(task(queue.context(), mix.clone(), t, n, k, want.clone(), zeroed)))
            .collect();
        t1 = Instant::now();
        for h in handles {
            h.await.expect("task panicked")?;
        }
        Ok::<(), Error>(())
    })?;
    let run = t0.elapsed().as_secs_f64() * 1e6 / tasks as f64;
    let spawn = (t1 - t0).as_secs_f64() * 1e6 / tasks as f64;
    let wait = (queue.stats().wait_ns - wait0) as f64 / 1e3 / tasks as f64;
    Ok(ExecBreakdown { spawn, run, wait, join: 0.0 })
}

/// `run_tokio` over a [`QueueSet`]: each task's context goes to the least-loaded device.
#[allow(clippy::too_many_arguments)]
pub fn run_tokio_set(
    rt: &tokio::runtime::Runtime,
    set: &QueueSet,
    mixes: &PerDevice<Kernel>,
    tasks: usize,
    n: usize,
    k: u32,
    want: &std::sync::Arc<Vec<Vec<u32>>>,
    zeroed: bool,
) -> Result<ExecBreakdown, Error> {
    let wait0: u64 = set.stats().iter().map(|s| s.wait_ns).sum();
    let t0 = Instant::now();
    let mut t1 = t0;
    rt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let ctx = set.context();
                let mix = mixes.get(ctx.device()).expect("a device of the set").clone();
                tokio::spawn(task(ctx, mix, t, n, k, want.clone(), zeroed))
            })
            .collect();
        t1 = Instant::now();
        for h in handles {
            h.await.expect("task panicked")?;
        }
        Ok::<(), Error>(())
    })?;
    let run = t0.elapsed().as_secs_f64() * 1e6 / tasks as f64;
    let spawn = (t1 - t0).as_secs_f64() * 1e6 / tasks as f64;
    let wait = (set.stats().iter().map(|s| s.wait_ns).sum::<u64>() - wait0) as f64 / 1e3 / tasks as f64;
    Ok(ExecBreakdown { spawn, run, wait, join: 0.0 })
}
