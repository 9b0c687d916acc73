//! The executor against the naive pattern and a hand-written batch, side by side in one run.
//!
//! Workload (kept exactly so, for comparison with other libraries): T independent tasks; task t
//! owns a buffer of n u32 initialised on the host as `data[i] = i ^ (t * 2654435761)` (wrapping),
//! uploads it, runs one `mix` dispatch with ceil(n/64) groups, reads it back and verifies every
//! element (against CPU results computed before timing). Timing includes creating each task's
//! buffers and excludes device, pipeline and executor creation.
//!
//! Modes, interleaved within one run (the order rotates every repetition):
//! - `sequential`: each task submits and waits before the next starts (vkasync's blocking path);
//! - `executor`: T tasks on the executor, each awaiting its read-back, default wait policy;
//! - `executor-oldest`: the same with `WaitPolicy::Oldest`;
//! - `raw-batch`: written by hand with ash: all tasks' work in one command buffer, a barrier only
//!   between phases, one submit, one wait.
//!
//! Costs of the safety guarantees, measured in the same run:
//! - `--no-zero-init` makes every buffer with `Buffer::new_uninit` (no lazy clear);
//!   `--no-robust` (or `VKASYNC_ROBUST=0`) opens the device without robust buffer access;
//! - `--ab zero-init` runs every selected mode twice, interleaved: as is and with
//!   `Buffer::new_uninit` (rows `MODE+uninit`); `--ab robust` does the same on a second device
//!   opened without robust buffer access (rows `MODE+norobust`).
//!
//! `cargo run --release --example bench_tasks -- [--sweep full|small] [--reps R] [--modes M,..]
//! [--tasks T,..] [--no-zero-init] [--no-robust] [--ab zero-init|robust] [--max-pending-ops N]
//! [--no-spin] [--out DIR]`
//! writes `DIR/bench_tasks.csv` and `DIR/bench_tasks.svg`.

use ash::vk;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use vkasync::{
    kernels, Buffer, CommandList, Ctx, Device, Error, Executor, FlushPolicy, Kernel, MemoryKind, PerDevice, Queue,
    QueueSet, Recorder, WaitPolicy,
};

/// Counts live heap bytes and their peak, for the host memory per in-flight task.
struct Counting;
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed through.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The four modes of the comparison, then extras reported apart from the targets:
/// `executor-eager`, the executor with a flush bound of 256 recorded commands, so the GPU starts
/// while the host still records; `executor-spin`, the executor reading the counter for up to
/// 50 µs before it blocks (instead of the default adaptive spin); `executor-group`, the
/// executor with group commit (`FlushPolicy::GroupCommit`); `executor-nospin`, the executor
/// without any spin (the default before the adaptive spin); `tokio`, T tasks `tokio::spawn`ed on a 16-worker runtime, each doing the same job
/// through a `Queue`; `tokio-wN`, the same on N workers (only with `--modes`);
/// `executor-traced`, the default executor writing a Chrome trace (to the temporary folder;
/// timestamps per phase), `executor-traced-cmds`, the same with a timestamp per command, and
/// `executor-timed`, with per-task GPU time only (these three only with `--modes`);
/// `tokio-set`, the `tokio` mode over a `QueueSet` of `--gpus N` devices (all GPUs listed, or
/// N logical devices of the one GPU where fewer are listed; `--lanes L`, default 1, opens L
/// logical devices with a queue each on every one of them) on `--set-workers W` workers
/// (default 16; `--set-group-ops N` builds its queues with `max_group_ops(N)`), and `tokio-w32` (only with `--modes`); `tokio-ungrouped`, the `tokio` mode
/// through a `Queue` without a group bound (`max_group_ops(usize::MAX)`, the default before
/// `5482a2c`, only with `--modes`); `executor-ungrouped`, the executor
/// without its group bound (`max_group_ops(usize::MAX)`, the default before `41b27ae`; only
/// with `--modes`).
const MODES: [&str; 20] = [
    "sequential",
    "executor",
    "executor-oldest",
    "raw-batch",
    "executor-eager",
    "executor-spin",
    "executor-group",
    "executor-nospin",
    "tokio",
    "tokio-w1",
    "tokio-w2",
    "tokio-w4",
    "tokio-w8",
    "executor-traced",
    "executor-timed",
    "executor-traced-cmds",
    "tokio-set",
    "tokio-w32",
    "executor-ungrouped",
    "tokio-ungrouped",
];

/// Modes run when `--modes` is not given: all but the tokio worker sweep.
const DEFAULT_MODES: &[&str] = MODES.split_at(9).0;

fn mix_cpu(mut x: u32, k: u32) -> u32 {
    for _ in 0..k {
        x = x.wrapping_mul(1664525).wrapping_add(1013904223);
        x ^= x >> 16;
    }
    x
}

fn input(t: usize, n: usize) -> Vec<u32> {
    let salt = (t as u32).wrapping_mul(2654435761);
    (0..n as u32).map(|i| i ^ salt).collect()
}

/// Expected results for every task, computed on all cores before timing.
fn expected(tasks: usize, n: usize, k: u32) -> Vec<Vec<u32>> {
    let threads = std::thread::available_parallelism().map_or(1, |p| p.get());
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

fn verify(t: usize, got: &[u32], want: &[u32]) {
    if got != want {
        eprintln!("task {t}: result differs from the CPU");
        std::process::exit(1);
    }
}

fn groups(n: usize) -> [u32; 3] {
    [n.div_ceil(64) as u32, 1, 1]
}

/// A buffer cleared lazily (`Buffer::new`) or not (`Buffer::new_uninit`).
fn new_buffer(device: &Device, n: usize, kind: MemoryKind, zeroed: bool) -> Result<Buffer<u32>, Error> {
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

fn run_sequential(
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
struct ExecBreakdown {
    spawn: f64,
    run: f64,
    wait: f64,
    join: f64,
}

fn run_executor(
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
fn run_tokio(
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
fn run_tokio_set(
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

/// The hand-written batch: one command pool and command buffer reused across runs.
struct RawBatch {
    device: Device,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
}

impl RawBatch {
    fn new(device: &Device) -> Self {
        let d = device.ash_device();
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(device.queue_family())
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: plain object creation on a live device.
        let pool = unsafe { d.create_command_pool(&info, None) }.expect("command pool");
        let alloc = vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(1);
        // SAFETY: as above.
        let cmd = unsafe { d.allocate_command_buffers(&alloc) }.expect("command buffer")[0];
        RawBatch { device: device.clone(), pool, cmd }
    }

    /// Returns a breakdown in µs per task: buffers (create + fill), record, submit + wait,
    /// read back + verify (reported in the same four slots as the executor's).
    fn run(
        &self,
        mix: &Kernel,
        tasks: usize,
        n: usize,
        k: u32,
        want: &[Vec<u32>],
        zeroed: bool,
    ) -> Result<ExecBreakdown, Error> {
        let t0 = Instant::now();
        let device = &self.device;
        let d = device.ash_device();
        let unified = device.unified_memory();
        let bytes = (n * 4) as u64;
        let mut bufs = Vec::with_capacity(tasks);
        let mut staging = Vec::with_capacity(tasks);
        let mut readback = Vec::with_capacity(tasks);
        for t in 0..tasks {
            let data = input(t, n);
            if unified {
                let b = new_buffer(device, n, MemoryKind::Device, zeroed)?;
                b.write(&data)?;
                bufs.push(b);
            } else {
                bufs.push(new_buffer(device, n, MemoryKind::Device, zeroed)?);
                let s = new_buffer(device, n, MemoryKind::Upload, zeroed)?;
                s.write(&data)?;
                staging.push(s);
                readback.push(new_buffer(device, n, MemoryKind::Readback, zeroed)?);
            }
        }
        let t1 = Instant::now();
        let (pipeline, layout) = mix.raw_handles();
        let barrier = |src, dst, sa, da| {
            let mb = [vk::MemoryBarrier::default().src_access_mask(sa).dst_access_mask(da)];
            // SAFETY: the command buffer is recording.
            unsafe { d.cmd_pipeline_barrier(self.cmd, src, dst, vk::DependencyFlags::empty(), &mb, &[], &[]) };
        };
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the command buffer is not pending (the previous run waited for it); every
        // handle recorded below belongs to a buffer or kernel alive until the wait below.
        unsafe {
            d.begin_command_buffer(self.cmd, &begin).expect("begin");
            // Earlier runs' work on recycled memory: order after it.
            barrier(
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::TRANSFER | vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::AccessFlags::MEMORY_WRITE,
                vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
            );
            if !unified {
                for (s, b) in staging.iter().zip(&bufs) {
                    let ((sb, so), (db, doff)) = (s.raw_handle(), b.raw_handle());
                    let region = vk::BufferCopy { src_offset: so, dst_offset: doff, size: bytes };
                    d.cmd_copy_buffer(self.cmd, sb, db, &[region]);
                }
                barrier(
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::AccessFlags::TRANSFER_WRITE,
                    vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
                );
            }
            d.cmd_bind_pipeline(self.cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
            let push = [n as u32, k];
            d.cmd_push_constants(self.cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, bytemuck::bytes_of(&push));
            for b in &bufs {
                let (buffer, offset) = b.raw_handle();
                let info = [vk::DescriptorBufferInfo { buffer, offset, range: bytes }];
                let write = [vk::WriteDescriptorSet::default()
                    .dst_binding(0)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(&info)];
                device.ash_push_descriptor().cmd_push_descriptor_set(
                    self.cmd,
                    vk::PipelineBindPoint::COMPUTE,
                    layout,
                    0,
                    &write,
                );
                let g = groups(n);
                d.cmd_dispatch(self.cmd, g[0], g[1], g[2]);
            }
            if !unified {
                barrier(
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::AccessFlags::SHADER_WRITE,
                    vk::AccessFlags::TRANSFER_READ,
                );
                for (b, r) in bufs.iter().zip(&readback) {
                    let ((sb, so), (db, doff)) = (b.raw_handle(), r.raw_handle());
                    let region = vk::BufferCopy { src_offset: so, dst_offset: doff, size: bytes };
                    d.cmd_copy_buffer(self.cmd, sb, db, &[region]);
                }
            }
            barrier(
                vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::HOST,
                vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE,
                vk::AccessFlags::HOST_READ,
            );
            d.end_command_buffer(self.cmd).expect("end");
        }
        let t2 = Instant::now();
        // SAFETY: the command buffer is fully recorded; every buffer it uses lives in this
        // function until after the wait.
        let value = unsafe { device.submit_raw(&[self.cmd])? };
        device.wait(value, None)?;
        let t3 = Instant::now();
        let sources = if unified { &bufs } else { &readback };
        for (t, b) in sources.iter().enumerate() {
            verify(t, &b.read()?, &want[t]);
        }
        let t4 = Instant::now();
        let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / tasks as f64;
        Ok(ExecBreakdown { spawn: per(t1 - t0), run: per(t2 - t1), wait: per(t3 - t2), join: per(t4 - t3) })
    }
}

impl Drop for RawBatch {
    fn drop(&mut self) {
        // SAFETY: every run waited for its submission, so the pool's buffer is not pending.
        unsafe { self.device.ash_device().destroy_command_pool(self.pool, None) };
    }
}

struct Row {
    mode: String,
    tasks: usize,
    n: usize,
    k: u32,
    reps: usize,
    us: Vec<f64>,
    heap_per_task: f64,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// What the modes run on: a device with its kernel, executors and hand-written batch.
struct Rig {
    device: Device,
    mix: Kernel,
    exec_all: Executor,
    exec_oldest: Executor,
    exec_eager: Executor,
    exec_spin: Executor,
    exec_group: Executor,
    exec_nospin: Executor,
    exec_ungrouped: Executor,
    exec_traced: Option<Executor>,
    exec_timed: Option<Executor>,
    exec_traced_cmds: Option<Executor>,
    queue: Queue,
    queue_ungrouped: Queue,
    /// Tokio runtimes by mode name (16 workers for `tokio`, N for `tokio-wN`).
    runtimes: Vec<(&'static str, tokio::runtime::Runtime)>,
    /// For `tokio-set`: the set, its kernels and a 16-worker runtime.
    set: Option<(QueueSet, PerDevice<Kernel>, tokio::runtime::Runtime)>,
    raw: RawBatch,
}

/// Settings of the `executor`, `executor-traced`, `executor-traced-cmds` and `executor-timed`
/// modes' executors (`--max-pending-ops N`, `--no-spin`), for measuring a trace's cost at a
/// chosen flush size, for example its added instructions per task under callgrind on lavapipe,
/// where flushes are otherwise far larger than on a fast GPU.
#[derive(Clone, Copy)]
struct ExecKnobs {
    max_pending_ops: Option<usize>,
    no_spin: bool,
}

impl ExecKnobs {
    fn builder(self, device: &Device) -> vkasync::ExecutorBuilder {
        let mut b = Executor::builder(device);
        if let Some(n) = self.max_pending_ops {
            b = b.max_pending_ops(n);
        }
        if self.no_spin {
            b = b.spin_before_wait(std::time::Duration::ZERO);
        }
        b
    }
}

impl Rig {
    fn new(
        device: Device,
        eager_ops: usize,
        modes: &[String],
        (gpus, lanes, set_workers, set_group_ops): (usize, usize, usize, Option<usize>),
        knobs: ExecKnobs,
    ) -> Result<Rig, Error> {
        let mix = Kernel::new(&device, &kernels::MIX)?;
        let runtimes = [
            ("tokio", 16),
            ("tokio-ungrouped", 16),
            ("tokio-w1", 1),
            ("tokio-w2", 2),
            ("tokio-w4", 4),
            ("tokio-w8", 8),
            ("tokio-w32", 32),
        ]
        .into_iter()
        .filter(|(m, _)| modes.iter().any(|x| x == m))
        .map(|(m, w)| (m, tokio::runtime::Builder::new_multi_thread().worker_threads(w).build().expect("tokio")))
        .collect();
        let set = match modes.iter().any(|m| m == "tokio-set") {
            true => {
                let listed = vkasync::adapters()?.len();
                // `lanes` logical devices (one queue each) per GPU, GPU by GPU.
                let mut devices = Vec::new();
                for i in 0..gpus.max(1) * lanes.max(1) {
                    devices.push(match (i, listed >= gpus) {
                        (0, _) => device.clone(),
                        (_, true) => {
                            Device::builder().selector(vkasync::DeviceSelector::Index(i / lanes.max(1))).build()?
                        }
                        (_, false) => Device::new()?,
                    });
                }
                let set = match set_group_ops {
                    None => QueueSet::from_queues(
                        devices.iter().map(|d| queue_builder(d).build()).collect::<Result<_, _>>()?,
                    )?,
                    Some(n) => QueueSet::from_queues(
                        devices.iter().map(|d| queue_builder(d).max_group_ops(n).build()).collect::<Result<_, _>>()?,
                    )?,
                };
                let mixes = set.per_device(|d| Kernel::new(d, &kernels::MIX))?;
                let rt =
                    tokio::runtime::Builder::new_multi_thread().worker_threads(set_workers).build().expect("tokio");
                eprintln!("tokio-set over: {:?}", devices.iter().map(|d| d.info().name.clone()).collect::<Vec<_>>());
                Some((set, mixes, rt))
            }
            false => None,
        };
        let rig = Rig {
            set,
            exec_group: Executor::builder(&device).flush_policy(FlushPolicy::GroupCommit).build()?,
            exec_nospin: Executor::builder(&device).spin_before_wait(std::time::Duration::ZERO).build()?,
            exec_ungrouped: Executor::builder(&device).max_group_ops(usize::MAX).build()?,
            exec_traced: match modes.iter().any(|m| m == "executor-traced") {
                true => Some(
                    knobs
                        .builder(&device)
                        .trace(std::env::temp_dir().join(format!("bench_tasks-{}.json", std::process::id())))
                        .build()?,
                ),
                false => None,
            },
            exec_traced_cmds: match modes.iter().any(|m| m == "executor-traced-cmds") {
                true => Some(
                    knobs
                        .builder(&device)
                        .trace(std::env::temp_dir().join(format!("bench_tasks-cmds-{}.json", std::process::id())))
                        .trace_detail(vkasync::trace::TraceDetail::Commands)
                        .build()?,
                ),
                false => None,
            },
            exec_timed: match modes.iter().any(|m| m == "executor-timed") {
                true => Some(knobs.builder(&device).gpu_timing(true).build()?),
                false => None,
            },
            queue: queue_builder(&device).build()?,
            queue_ungrouped: queue_builder(&device).max_group_ops(usize::MAX).build()?,
            runtimes,
            exec_all: knobs.builder(&device).build()?,
            exec_oldest: Executor::builder(&device).wait_policy(WaitPolicy::Oldest).build()?,
            exec_eager: Executor::builder(&device).max_pending_ops(eager_ops).build()?,
            exec_spin: Executor::builder(&device).spin_before_wait(std::time::Duration::from_micros(50)).build()?,
            raw: RawBatch::new(&device),
            mix,
            device,
        };
        // Warm-up: compile the pipeline on the driver.
        run_sequential(&rig.device, &rig.mix, 1, 64, 1, &expected(1, 64, 1), true)?;
        Ok(rig)
    }

    /// Runs one mode once; the breakdown for the executor and raw modes.
    fn run(
        &self,
        mode: &str,
        tasks: usize,
        n: usize,
        k: u32,
        want: &std::rc::Rc<Vec<Vec<u32>>>,
        zeroed: bool,
    ) -> Result<Option<ExecBreakdown>, Error> {
        let mix = &self.mix;
        Ok(match mode {
            "sequential" => run_sequential(&self.device, mix, tasks, n, k, want, zeroed).map(|_| None)?,
            "executor" => Some(run_executor(&self.exec_all, mix, tasks, n, k, want, zeroed)?),
            "executor-oldest" => Some(run_executor(&self.exec_oldest, mix, tasks, n, k, want, zeroed)?),
            "executor-eager" => Some(run_executor(&self.exec_eager, mix, tasks, n, k, want, zeroed)?),
            "executor-spin" => Some(run_executor(&self.exec_spin, mix, tasks, n, k, want, zeroed)?),
            "executor-group" => Some(run_executor(&self.exec_group, mix, tasks, n, k, want, zeroed)?),
            "executor-nospin" => Some(run_executor(&self.exec_nospin, mix, tasks, n, k, want, zeroed)?),
            "executor-ungrouped" => Some(run_executor(&self.exec_ungrouped, mix, tasks, n, k, want, zeroed)?),
            "executor-traced" => Some(run_executor(
                self.exec_traced.as_ref().expect("made for the mode"),
                mix,
                tasks,
                n,
                k,
                want,
                zeroed,
            )?),
            "executor-traced-cmds" => Some(run_executor(
                self.exec_traced_cmds.as_ref().expect("made for the mode"),
                mix,
                tasks,
                n,
                k,
                want,
                zeroed,
            )?),
            "executor-timed" => Some(run_executor(
                self.exec_timed.as_ref().expect("made for the mode"),
                mix,
                tasks,
                n,
                k,
                want,
                zeroed,
            )?),
            "tokio-set" => {
                let (set, mixes, rt) = self.set.as_ref().expect("made for the mode");
                let want = std::sync::Arc::new((**want).clone());
                Some(run_tokio_set(rt, set, mixes, tasks, n, k, &want, zeroed)?)
            }
            t if t.starts_with("tokio") => {
                let rt = &self.runtimes.iter().find(|(m, _)| *m == t).expect("runtime").1;
                let want = std::sync::Arc::new((**want).clone());
                let queue = if t == "tokio-ungrouped" { &self.queue_ungrouped } else { &self.queue };
                Some(run_tokio(rt, queue, mix, tasks, n, k, &want, zeroed)?)
            }
            _ => Some(self.raw.run(mix, tasks, n, k, want, zeroed)?),
        })
    }
}

/// One of the setups measured side by side (`--ab`): a suffix for its rows, which rig, and
/// whether buffers are cleared.
struct Variant {
    suffix: &'static str,
    rig: usize,
    zeroed: bool,
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().any(|a| a == name);
    let sweep = arg(&args, "--sweep").unwrap_or_else(|| "full".into());
    let out_dir = std::path::PathBuf::from(arg(&args, "--out").unwrap_or_else(|| ".".into()));
    let reps_arg: Option<usize> = arg(&args, "--reps").and_then(|s| s.parse().ok());
    let open = |robust: Option<bool>| {
        let builder = Device::builder().always_stage(flag("--always-stage"));
        match robust {
            Some(on) => builder.robust_buffer_access(on),
            None => builder,
        }
        .build()
    };
    let device = open(if flag("--no-robust") { Some(false) } else { None })?;
    let name = device.info().name.clone();
    let modes: Vec<String> = arg(&args, "--modes").map_or_else(
        || DEFAULT_MODES.iter().map(|m| m.to_string()).collect(),
        |m| m.split(',').map(str::to_string).collect(),
    );
    let mut configs: Vec<(usize, usize, u32)> = Vec::new();
    let ts: &[usize] = if sweep == "small" { &[1, 10, 100, 1000] } else { &[1, 10, 100, 1000, 10000] };
    for &k in &[1u32, 1000] {
        for &t in ts {
            configs.push((t, 1024, k));
        }
    }
    configs.push((16, 1 << 20, 1));
    if sweep != "small" {
        configs.push((100_000, 1024, 1));
    }
    if let Some(ts) = arg(&args, "--tasks") {
        configs = ts.split(',').filter_map(|t| t.parse().ok()).map(|t| (t, 1024, 1)).collect();
    }
    let lp = std::env::var("LP_NUM_THREADS").unwrap_or_default();
    let eager_ops: usize = arg(&args, "--eager-ops").and_then(|s| s.parse().ok()).unwrap_or(256);
    let zeroed = !flag("--no-zero-init");
    eprintln!(
        "device: {name} (LP_NUM_THREADS={lp:?}, robust access: {:?}, zero-init: {zeroed})",
        device.robust_access()
    );
    let gpus: usize = arg(&args, "--gpus").and_then(|s| s.parse().ok()).unwrap_or(2);
    let lanes: usize = arg(&args, "--lanes").and_then(|s| s.parse().ok()).unwrap_or(1);
    let set_workers: usize = arg(&args, "--set-workers").and_then(|s| s.parse().ok()).unwrap_or(16);
    let set_group_ops: Option<usize> = arg(&args, "--set-group-ops").and_then(|s| s.parse().ok());
    let knobs = ExecKnobs {
        max_pending_ops: arg(&args, "--max-pending-ops").and_then(|s| s.parse().ok()),
        no_spin: flag("--no-spin"),
    };
    let mut rigs = vec![Rig::new(device, eager_ops, &modes, (gpus, lanes, set_workers, set_group_ops), knobs)?];
    let mut variants = vec![Variant { suffix: "", rig: 0, zeroed }];
    match arg(&args, "--ab").as_deref() {
        None => {}
        Some("zero-init") => variants.push(Variant { suffix: "+uninit", rig: 0, zeroed: false }),
        Some("robust") => {
            let off = open(Some(false))?;
            eprintln!("second device: robust access {:?}", off.robust_access());
            rigs.push(Rig::new(off, eager_ops, &modes, (gpus, lanes, set_workers, set_group_ops), knobs)?);
            variants.push(Variant { suffix: "+norobust", rig: 1, zeroed });
        }
        Some(other) => {
            eprintln!("--ab: expected zero-init or robust, got {other:?}");
            std::process::exit(2);
        }
    }
    // Every (mode, variant) pair measured, in the order they rotate through.
    let cells: Vec<(usize, usize)> = (0..MODES.len())
        .filter(|&m| modes.iter().any(|x| x == MODES[m]))
        .flat_map(|m| (0..variants.len()).map(move |v| (m, v)))
        .collect();

    let mut rows = Vec::new();
    for &(tasks, n, k) in &configs {
        let reps = reps_arg.unwrap_or(if tasks >= 10_000 { 3 } else { 7 });
        let want = std::rc::Rc::new(expected(tasks, n, k));
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); cells.len()];
        let mut heap = vec![0f64; cells.len()];
        let mut breakdown = vec![ExecBreakdown::default(); cells.len()];
        // One untimed round of every cell, then `reps` timed rounds with the order rotating.
        for rep in 0..=reps {
            for j in 0..cells.len() {
                let c = (j + rep) % cells.len();
                let (m, v) = cells[c];
                let variant = &variants[v];
                let base = CURRENT.load(Ordering::Relaxed);
                PEAK.store(base, Ordering::Relaxed);
                let start = Instant::now();
                let b = rigs[variant.rig].run(MODES[m], tasks, n, k, &want, variant.zeroed)?;
                if let (Some(b), true) = (b, rep > 0) {
                    breakdown[c] = b;
                }
                let us = start.elapsed().as_secs_f64() * 1e6 / tasks as f64;
                // Sequential has one task in flight at a time; the others have all T.
                let in_flight = if MODES[m] == "sequential" { 1 } else { tasks };
                let peak = (PEAK.load(Ordering::Relaxed) - base) as f64 / in_flight as f64;
                if rep > 0 {
                    times[c].push(us);
                    heap[c] = heap[c].max(peak);
                }
            }
        }
        for (c, &(m, v)) in cells.iter().enumerate() {
            let mode = format!("{}{}", MODES[m], variants[v].suffix);
            let row = Row { mode, tasks, n, k, reps, us: times[c].clone(), heap_per_task: heap[c] };
            let mut v = row.us.clone();
            let med = median(&mut v);
            let b = breakdown[c];
            eprintln!(
                "T={tasks:>6} n={n:>7} K={k:>4} {:<26} median {med:>9.2} us/task  min {:>9.2}  max {:>9.2}  heap/task {:>8.0} B  [last rep: {:.2}/{:.2} (wait {:.2})/{:.2}]",
                row.mode,
                v[0],
                v[v.len() - 1],
                row.heap_per_task,
                b.spawn,
                b.run,
                b.wait,
                b.join
            );
            rows.push(row);
        }
    }
    for (i, rig) in rigs.iter().enumerate() {
        let tag = if i == 0 { "" } else { " (second device)" };
        eprintln!("executor{tag} {}", rig.exec_all.stats());
        eprintln!("executor-oldest{tag} {}", rig.exec_oldest.stats());
        eprintln!("executor-eager{tag} {}", rig.exec_eager.stats());
        eprintln!("executor-spin{tag} {}", rig.exec_spin.stats());
        eprintln!("executor-group{tag} {}", rig.exec_group.stats());
        let e = rig.exec_all.stats();
        eprintln!("executor (spin){tag} spin_ms={:.1}", e.spin_ns as f64 / 1e6);
        eprintln!("executor-nospin{tag} {}", rig.exec_nospin.stats());
        eprintln!("executor-ungrouped{tag} {}", rig.exec_ungrouped.stats());
        let q = rig.queue.stats();
        eprintln!("queue (tokio modes){tag} {q} spin_ms={:.1}", q.spin_ns as f64 / 1e6);
        let detail = |s: vkasync::Stats| {
            format!(
                "{s} spin_ms={:.1} wait_ms={:.1} handed={}",
                s.spin_ns as f64 / 1e6,
                s.wait_ns as f64 / 1e6,
                s.handed_flushes
            )
        };
        for (mode, exec) in [("executor-timed", &rig.exec_timed), ("executor-traced", &rig.exec_traced)] {
            if let Some(e) = exec {
                eprintln!("{mode}{tag} {}", detail(e.stats()));
            }
        }
        eprintln!("executor (detail){tag} {}", detail(rig.exec_all.stats()));
    }

    std::fs::create_dir_all(&out_dir).ok();
    let mut csv = String::from("device,lp_num_threads,mode,T,n,K,reps,median_us_per_task,min_us_per_task,max_us_per_task,peak_heap_bytes_per_in_flight_task\n");
    for r in &rows {
        let mut v = r.us.clone();
        let med = median(&mut v);
        csv += &format!(
            "\"{}\",{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.0}\n",
            name,
            lp,
            r.mode,
            r.tasks,
            r.n,
            r.k,
            r.reps,
            med,
            v[0],
            v[v.len() - 1],
            r.heap_per_task
        );
    }
    print!("{csv}");
    std::fs::write(out_dir.join("bench_tasks.csv"), &csv).expect("write csv");
    plot(&rows, &name, &out_dir.join("bench_tasks.svg"));
    // The default executor's counters over the whole run, as the last line.
    println!("{}", rigs[0].exec_all.stats());
    Ok(())
}

fn plot(rows: &[Row], device: &str, path: &std::path::Path) {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let panels = root.split_evenly((1, 2));
    let colors = [
        RED,
        BLUE,
        GREEN,
        BLACK,
        MAGENTA,
        CYAN,
        RGBColor(255, 140, 0),
        RGBColor(128, 0, 128),
        RGBColor(0, 128, 128),
        RGBColor(128, 128, 0),
        RGBColor(100, 100, 100),
        RGBColor(0, 0, 128),
        RGBColor(128, 0, 0),
    ];
    for (panel, k) in panels.iter().zip([1u32, 1000]) {
        let pts = |mode: &str| -> Vec<(f64, f64)> {
            rows.iter()
                .filter(|r| r.mode == mode && r.k == k && r.n == 1024)
                .map(|r| {
                    let mut v = r.us.clone();
                    (r.tasks as f64, median(&mut v))
                })
                .collect()
        };
        let all: Vec<(f64, f64)> = MODES.iter().flat_map(|m| pts(m)).collect();
        if all.is_empty() {
            continue;
        }
        let ymax = all.iter().map(|p| p.1).fold(1.0, f64::max) * 2.0;
        let ymin = all.iter().map(|p| p.1).fold(f64::MAX, f64::min) / 2.0;
        let xmax = all.iter().map(|p| p.0).fold(1.0, f64::max) * 2.0;
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{device}: mix, n=1024, K={k}"), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d((0.5f64..xmax).log_scale(), (ymin.max(0.01)..ymax).log_scale())
            .unwrap();
        chart.configure_mesh().x_desc("tasks T").y_desc("µs per task (median)").draw().unwrap();
        for (mode, color) in MODES.iter().zip(colors) {
            let p = pts(mode);
            chart
                .draw_series(LineSeries::new(p.clone(), color.stroke_width(2)))
                .unwrap()
                .label(*mode)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            chart.draw_series(p.into_iter().map(|(x, y)| Circle::new((x, y), 3, color.filled()))).unwrap();
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().unwrap();
    }
    root.present().unwrap();
}

/// A queue on `device`, with `VKASYNC_PIPELINE_DEPTH` (when set) as its pipeline depth (for A/B
/// runs of one binary).
fn queue_builder(device: &Device) -> vkasync::QueueBuilder {
    let b = Queue::builder(device);
    match std::env::var("VKASYNC_PIPELINE_DEPTH").ok().and_then(|d| d.parse().ok()) {
        Some(d) => b.pipeline_depth(d),
        None => b,
    }
}
