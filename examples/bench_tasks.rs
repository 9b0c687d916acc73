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
//! [--max-group-ops N] [--no-spin] [--out DIR]`
//! writes `DIR/bench_tasks.csv` and `DIR/bench_tasks.svg`.

#[path = "bench_tasks/jobs.rs"]
mod jobs;
#[path = "bench_tasks/plot.rs"]
mod plot;
#[path = "bench_tasks/raw.rs"]
mod raw;
#[path = "bench_tasks/rig.rs"]
mod rig;
// The helpers shared with the other benchmark programs, in `examples/support/`.
#[path = "support"]
mod support {
    pub mod args;
    pub mod profile;
    pub mod queues;
}

use jobs::{expected, ExecBreakdown};
use rig::{ExecKnobs, Rig};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use support::args::{arg, flag};
use vkasync::{Device, Error};

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
/// through a `Queue` (at T = 1 the lone job is awaited in `block_on` itself, not spawned); `tokio-wN`, the same on N workers (only with `--modes`);
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

/// One measured series: a mode (with its variant's suffix) at one configuration.
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

/// One of the setups measured side by side (`--ab`): a suffix for its rows, which rig, and
/// whether buffers are cleared.
struct Variant {
    suffix: &'static str,
    rig: usize,
    zeroed: bool,
}

/// The command line (see the header).
struct Options {
    out_dir: std::path::PathBuf,
    reps: Option<usize>,
    modes: Vec<String>,
    /// (T, n, K) of every configuration measured.
    configs: Vec<(usize, usize, u32)>,
    eager_ops: usize,
    zeroed: bool,
    /// `tokio-set`: GPUs, logical devices per GPU, workers, and the queues' group bound.
    set: (usize, usize, usize, Option<usize>),
    knobs: ExecKnobs,
    ab: Option<String>,
    always_stage: bool,
    no_robust: bool,
}

impl Options {
    fn parse(args: &[String]) -> Options {
        // Numbers that do not parse count as absent.
        let opt = |name: &str| -> Option<usize> { arg(args, name).and_then(|s| s.parse().ok()) };
        let sweep = arg(args, "--sweep").unwrap_or_else(|| "full".into());
        let modes: Vec<String> = arg(args, "--modes").map_or_else(
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
        if let Some(ts) = arg(args, "--tasks") {
            configs = ts.split(',').filter_map(|t| t.parse().ok()).map(|t| (t, 1024, 1)).collect();
        }
        Options {
            out_dir: std::path::PathBuf::from(arg(args, "--out").unwrap_or_else(|| ".".into())),
            reps: opt("--reps"),
            modes,
            configs,
            eager_ops: opt("--eager-ops").unwrap_or(256),
            zeroed: !flag(args, "--no-zero-init"),
            set: (
                opt("--gpus").unwrap_or(2),
                opt("--lanes").unwrap_or(1),
                opt("--set-workers").unwrap_or(16),
                opt("--set-group-ops"),
            ),
            knobs: ExecKnobs {
                max_pending_ops: opt("--max-pending-ops"),
                max_group_ops: opt("--max-group-ops"),
                no_spin: flag(args, "--no-spin"),
            },
            ab: arg(args, "--ab"),
            always_stage: flag(args, "--always-stage"),
            no_robust: flag(args, "--no-robust"),
        }
    }
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let o = Options::parse(&args);
    let open = |robust: Option<bool>| {
        let builder = Device::builder().always_stage(o.always_stage);
        match robust {
            Some(on) => builder.robust_buffer_access(on),
            None => builder,
        }
        .build()
    };
    let device = open(if o.no_robust { Some(false) } else { None })?;
    let name = device.info().name.clone();
    let lp = std::env::var("LP_NUM_THREADS").unwrap_or_default();
    let zeroed = o.zeroed;
    eprintln!(
        "device: {name} (LP_NUM_THREADS={lp:?}, robust access: {:?}, zero-init: {zeroed})",
        device.robust_access()
    );
    let mut rigs = vec![Rig::new(device, o.eager_ops, &o.modes, o.set, o.knobs)?];
    let mut variants = vec![Variant { suffix: "", rig: 0, zeroed }];
    match o.ab.as_deref() {
        None => {}
        Some("zero-init") => variants.push(Variant { suffix: "+uninit", rig: 0, zeroed: false }),
        Some("robust") => {
            let off = open(Some(false))?;
            eprintln!("second device: robust access {:?}", off.robust_access());
            rigs.push(Rig::new(off, o.eager_ops, &o.modes, o.set, o.knobs)?);
            variants.push(Variant { suffix: "+norobust", rig: 1, zeroed });
        }
        Some(other) => {
            eprintln!("--ab: expected zero-init or robust, got {other:?}");
            std::process::exit(2);
        }
    }
    // Every (mode, variant) pair measured, in the order they rotate through.
    let cells: Vec<(usize, usize)> = (0..MODES.len())
        .filter(|&m| o.modes.iter().any(|x| x == MODES[m]))
        .flat_map(|m| (0..variants.len()).map(move |v| (m, v)))
        .collect();

    let rows = measure(&o.configs, o.reps, &rigs, &variants, &cells)?;
    for (i, rig) in rigs.iter().enumerate() {
        rig.print_stats(if i == 0 { "" } else { " (second device)" });
    }

    std::fs::create_dir_all(&o.out_dir).ok();
    let csv = csv(&rows, &name, &lp);
    print!("{csv}");
    std::fs::write(o.out_dir.join("bench_tasks.csv"), &csv).expect("write csv");
    plot::plot(&rows, &name, &o.out_dir.join("bench_tasks.svg"));
    // The default executor's counters over the whole run, as the last line.
    println!("{}", rigs[0].exec_all.stats());
    Ok(())
}

/// Measures every cell (mode and variant) at every configuration: one untimed round of every
/// cell, then `reps` timed rounds (by default 7, 3 from 10,000 tasks) with the order rotating.
/// Prints a line per cell and configuration, and returns them as rows.
fn measure(
    configs: &[(usize, usize, u32)],
    reps_arg: Option<usize>,
    rigs: &[Rig],
    variants: &[Variant],
    cells: &[(usize, usize)],
) -> Result<Vec<Row>, Error> {
    let mut rows = Vec::new();
    for &(tasks, n, k) in configs {
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
                if rep > 0 {
                    support::profile::timed();
                }
                let start = Instant::now();
                let b = rigs[variant.rig].run(MODES[m], tasks, n, k, &want, variant.zeroed)?;
                let us = start.elapsed().as_secs_f64() * 1e6 / tasks as f64;
                if rep > 0 {
                    support::profile::untimed();
                }
                if let (Some(b), true) = (b, rep > 0) {
                    breakdown[c] = b;
                }
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
    Ok(rows)
}

/// The rows as CSV, with a header line.
fn csv(rows: &[Row], name: &str, lp: &str) -> String {
    let mut csv = String::from("device,lp_num_threads,mode,T,n,K,reps,median_us_per_task,min_us_per_task,max_us_per_task,peak_heap_bytes_per_in_flight_task\n");
    for r in rows {
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
    csv
}
