//! The seed's case as a server meets it: C connections, each a task sealing R records with its
//! own keys (AES-CTR, then HMAC-SHA256 over nonce and ciphertext), host memory to host memory,
//! every record verified against the RustCrypto crates composed the same way.
//!
//! Modes, each timed in the same run (interleaved, median of `--reps`, after `--warmup` untimed
//! runs of every mode, 1 by default):
//! - `blocking`: the naive GPU pattern, one call after another, each synchronising on its own
//!   (`Crypto::aes_ctr_blocking`, then `Crypto::hmac_sha256_many_blocking` of nonce and
//!   ciphertext): two submits and two host waits per record;
//! - `waits-only`: every connection a task on the [`Executor`], each recording its own uploads,
//!   key schedule, AES and HMAC dispatches and read-backs on device buffers
//!   (`Crypto::record_aes_ctr`, `Crypto::record_hmac_sha256`): the waits are coalesced, the
//!   work is not (about ten commands and two dispatches per record);
//! - `coalesced`: every connection a task calling `Crypto::seal_in_place`; each flush runs
//!   every task's records as one AES dispatch and one HMAC dispatch, through reused staging;
//! - `coalesced-tokio`: the same through a [`Queue`] from a tokio multi-thread runtime (one
//!   worker per host core; one task per worker spawns its share of the connections' tasks),
//!   so that the host copies run on all cores;
//! - `staged-tokio`: as `coalesced-tokio`, with each record in staging memory
//!   (`Crypto::staged_record`, filled with the plaintext before the clock starts, as every
//!   mode's buffers are) and sealed there (`Crypto::seal_staged`): no host copy of any record;
//!   `staged-shares`: the same records, written as the CPU modes are: one tokio task per worker
//!   over its share of the connections, each connection a future of that task (no task per
//!   connection); `staged` (only with `--modes`): the same on the [`Executor`];
//!   `staged-cores` (only with `--modes`): the same on one [`Executor`] per worker thread, each
//!   over its contiguous share of the connections, as a thread-per-core server runs a
//!   single-thread runtime; `staged-cores-queue` (only with `--modes`): those executors'
//!   tasks recording through one shared [`Queue`]'s contexts, as the tokio fronts' do;
//! - `auto`: as `coalesced`, with the runtime choosing between the GPU and the host
//!   (`Offload::Auto`, the default: records under about 4 KiB sealed at once on the host,
//!   flushes of few large records on the host, the others on the GPU); `auto-tokio`: as
//!   `coalesced-tokio` with that same default, which is what a tokio server gets without
//!   choosing;
//! - `cpu-1`: RustCrypto on one host core; `cpu-all`: RustCrypto on every host core. One worker
//!   thread per core over its contiguous share of the connections; each connection's keys are
//!   expanded once (the AES key schedule and the keyed HMAC state, as at a handshake), and every
//!   record is sealed in place into buffers made before the clock starts, with no allocation per
//!   record;
//! - `host` (only with `--modes`): as `coalesced`, every flush computed on the host
//!   (`Offload::Host`), to compare `auto` with both of its choices;
//! - `coalesced-tokio-set` (only with `--modes`): `coalesced-tokio` over a [`QueueSet`] of
//!   `--gpus N` devices (default 2: every GPU listed, or logical devices of the one GPU where
//!   fewer are listed), each connection on the least-loaded device; `--lanes L` (default 1)
//!   opens L logical devices, each with its own queue, on each of those GPUs;
//!   `staged-tokio-set` (only with `--modes`): `staged-tokio` over that set, connection `i`'s
//!   records staged on device `i mod N`.
//!
//! Without `--connections`, `--records` or `--record-size` it runs two cases: 10,000 connections
//! x 1 record of 16 KiB (400 connections on a CPU device such as lavapipe), where the coalesced
//! GPU fronts beat RustCrypto on all cores of an H100's or H200's host, and 10,000 x 1 KiB beside
//! it (4,000 on a CPU device), where the CPU is far ahead. For each case it prints
//! a table (records/s and GB/s of plaintext of the median run, the slowest and fastest runs'
//! GB/s, p50/p99 record latency, host CPU time per record, submits, dispatches, host waits per
//! run), the comparison of the best GPU front with RustCrypto on all cores, and the stats lines;
//! with `--csv FILE` it writes the tables as one CSV, and with `--runs-csv FILE` every timed run
//! with the host's clock before and after it (to match with the GPU's clocks, sampled apart: the
//! driver lowers them within about a second of light use, which a benchmark that spends most of
//! its time on the host gives it). The host CPU time is the whole process's (user and system,
//! every thread: a front's runtime workers and driver threads count, and on a CPU device so does
//! the device's emulation) over the run's timed interval, divided by its records; it is measured
//! on Linux only (elsewhere `n/a`).
//!
//! Every mode's output is compared with a reference computed apart (RustCrypto composed in the
//! plainest way, the keys expanded anew per record), the CPU modes' included, and then freed, so
//! that the next run reuses its memory as a server would (runs that each kept their outputs made
//! the next run's tasks fault fresh pages in inside its timed interval: on lavapipe's host the
//! executor's host path at 10,000 connections × 4 records of 16 KiB took 1.45–1.58× the plain
//! RustCrypto loop's time that way, 1.13–1.16× without).
//!
//! The other GPU modes force the GPU (`Offload::Gpu`). `--flush idle` makes the executor modes
//! submit only when no task can run (`FlushPolicy::WhenIdle`) instead of by group commit.
//!
//! The coalesced fronts run on the GPU opened with copy queues
//! (`DeviceBuilder::copy_queues`) and four compute queues, over which the parts of a heavy flush
//! run (`DeviceBuilder::split_flushes`), where it has a transfer-only queue family, as a server
//! that seals bulk records from many threads would open it; the naive modes (`blocking`,
//! `waits-only`) run on the same GPU opened with the defaults, what a program gets without
//! choosing. `--copy-queues off` runs every mode on the defaults.
//!
//! `cargo run --release --example tls_pipeline -- [--connections C] [--records R]
//! [--record-size S] [--reps N] [--warmup N] [--modes a,b,..] [--flush group|idle] [--workers W]
//! [--gpus N] [--lanes L] [--copy-queues on|off] [--csv FILE] [--runs-csv FILE]`

#[path = "tls_pipeline/conns.rs"]
mod conns;
#[path = "tls_pipeline/modes.rs"]
mod modes;
// The helpers shared with the other benchmark programs, in `examples/support/`.
#[path = "support"]
mod support {
    pub mod args;
    pub mod profile;
    pub mod queues;
}

use conns::{connections, reference, Conn, Sealed};
use modes::{
    run_blocking, run_cpu, run_executor, run_executor_cores, run_tokio, run_tokio_set, run_tokio_shares, Run,
    CPU_TIME_MEASURED,
};
use std::sync::Arc;
use std::time::Duration;
use support::args::{arg, cores, num};
use support::queues::{queue_set, set_devices};
use vkasync::crypto::{Crypto, Offload};
use vkasync::{Device, Error, FlushPolicy, PerDevice, QueueSet};

const MODES: [&str; 10] = [
    "blocking",
    "waits-only",
    "coalesced",
    "coalesced-tokio",
    "staged-tokio",
    "staged-shares",
    "auto",
    "auto-tokio",
    "cpu-1",
    "cpu-all",
];
/// Modes run only when named in `--modes`.
const EXTRA_MODES: [&str; 6] =
    ["coalesced-tokio-set", "staged-tokio-set", "host", "staged", "staged-cores", "staged-cores-queue"];

/// The device's kind, in words.
fn describe(kind: vkasync::DeviceType) -> &'static str {
    match kind {
        vkasync::DeviceType::Discrete => "a discrete GPU",
        vkasync::DeviceType::Integrated => "a GPU integrated with the host processor",
        vkasync::DeviceType::Virtual => "a virtual GPU",
        vkasync::DeviceType::Cpu => "a CPU device: Vulkan emulated on the host's cores",
        _ => "a device of another kind",
    }
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v.get(((v.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or_default()
}

/// The command line (see the header); `--gpus` and `--lanes` are read where the set is made.
/// `n_conns`, `n_records` and `size` are the case being run (see [`cases`]).
#[derive(Clone)]
struct Options {
    n_conns: usize,
    n_records: usize,
    size: usize,
    reps: usize,
    /// Untimed runs of every mode before the timed ones (see [`measure`]).
    warmup: usize,
    modes: Vec<String>,
    cores: usize,
    workers: usize,
    flush: FlushPolicy,
    csv: Option<String>,
    /// `--runs-csv FILE`: every timed run, with the host's clock before and after it.
    runs_csv: Option<String>,
    /// No workload was given: run the default cases.
    default_cases: bool,
    /// `--copy-queues on|off` (default on): the coalesced fronts' device runs uploads and
    /// read-backs on copy queues where the GPU has a transfer-only queue family.
    copy_queues: bool,
}

/// Records of the default run's first case: the size at which the coalesced GPU fronts beat
/// RustCrypto on all of the host's cores (`BENCHMARKS.md`; at 64 KiB and 256 KiB each flush
/// carries fewer records and the HMAC's one-thread-per-message chain is longer).
const LARGE_RECORD: usize = 16 * 1024;

/// The workloads to run, as (connections, records per connection, record bytes): the one given
/// on the command line, or by default 10,000 connections x 1 record of 16 KiB, where the GPU
/// wins, and the small-record case beside it (10,000 x 1 KiB), where the CPU does. One record
/// per connection: a flush then carries records that lie together in staging memory, which the
/// copy queues move as a few large copies; with several records per connection each flush's
/// records are scattered, and the GPU fronts ran at 0.55–0.78x RustCrypto on all cores of an
/// H100 host (2,000 x 4 x 16 KiB, `BENCHMARKS.md`). On a CPU device (lavapipe) the cases have
/// 400 and 4,000 connections, to stay short.
fn cases(o: &Options, on_cpu: bool) -> Vec<(usize, usize, usize)> {
    if !o.default_cases {
        return vec![(o.n_conns, o.n_records, o.size)];
    }
    match on_cpu {
        true => vec![(400, 1, LARGE_RECORD), (4000, 1, 1024)],
        false => vec![(10_000, 1, LARGE_RECORD), (10_000, 1, 1024)],
    }
}

impl Options {
    fn parse(args: &[String]) -> Options {
        let default_cases = ["--connections", "--records", "--record-size"].iter().all(|a| arg(args, a).is_none());
        let n_conns = num(args, "--connections", 1000usize).max(1);
        let n_records = num(args, "--records", 4usize).max(1);
        let size = num(args, "--record-size", 1024);
        let reps = num(args, "--reps", 3usize).max(1);
        let warmup = num(args, "--warmup", 1usize);
        let modes: Vec<String> = arg(args, "--modes").map_or_else(
            || MODES.iter().map(|m| m.to_string()).collect(),
            |m| m.split(',').map(String::from).collect(),
        );
        if let Some(bad) = modes.iter().find(|m| !MODES.contains(&m.as_str()) && !EXTRA_MODES.contains(&m.as_str())) {
            eprintln!("unknown mode {bad:?}; modes: {},{}", MODES.join(","), EXTRA_MODES.join(","));
            std::process::exit(2);
        }
        let cores = cores();
        let workers = num(args, "--workers", cores).max(1);
        let flush = match arg(args, "--flush").as_deref() {
            None | Some("group") => FlushPolicy::GroupCommit,
            Some("idle") => FlushPolicy::WhenIdle,
            Some(other) => {
                eprintln!("--flush: group or idle, not {other:?}");
                std::process::exit(2)
            }
        };
        let csv = arg(args, "--csv");
        let runs_csv = arg(args, "--runs-csv");
        let copy_queues = match arg(args, "--copy-queues").as_deref() {
            None | Some("on") => true,
            Some("off") => false,
            Some(other) => {
                eprintln!("--copy-queues: on or off, not {other:?}");
                std::process::exit(2)
            }
        };
        Options {
            n_conns,
            n_records,
            size,
            reps,
            warmup,
            modes,
            cores,
            workers,
            flush,
            csv,
            runs_csv,
            default_cases,
            copy_queues,
        }
    }
}

/// glibc's allocator gives memory back to the system when much is free at the top of a heap,
/// and every thread's heap then grows again with `mprotect` and page faults, which take the
/// process's memory-map lock: on the H200's host, allocating 10,000 tasks again in every
/// repetition stalled all threads for milliseconds at a time. A long-running server reaches a
/// steady state instead; keeping freed memory for reuse gives every repetition that state.
fn steady_state_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only changes the allocator's tuning parameters; it is called before any
    // other thread of this program starts.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}

fn main() -> Result<(), Error> {
    steady_state_allocator();
    let args: Vec<String> = std::env::args().collect();
    let o = Options::parse(&args);
    let devices = Devices::open(o.copy_queues)?;
    let device = &devices.coalesced;
    let auto = Crypto::new(device)?;
    let crypto = auto.clone().with_offload(Offload::Gpu);
    let naive = match devices.naive.same_device(device) {
        true => crypto.clone(),
        false => Crypto::new(&devices.naive)?.with_offload(Offload::Gpu),
    };
    let name = device.info().name.replace(',', ";");
    let on_cpu = device.info().device_type == vkasync::DeviceType::Cpu;
    introduce(&o, &devices, &auto);
    let mut csv = String::from(CSV_HEADER);
    let mut runs_csv = String::from(RUNS_CSV_HEADER);
    let mut set = None;
    for (n_conns, n_records, size) in cases(&o, on_cpu) {
        let o = Options { n_conns, n_records, size, ..o.clone() };
        println!(
            "\n{} connections x {} records of {} B, AES-256-CTR then HMAC-SHA256 (own keys per \
             connection); median of {} runs per mode after {} untimed, every record verified against \
             RustCrypto",
            o.n_conns, o.n_records, o.size, o.reps, o.warmup
        );
        let conns: Arc<Vec<Conn>> = Arc::new(connections(o.n_conns, o.n_records, o.size));
        let want = reference(&conns, o.cores);
        // Warm-up: pipelines compile at their first dispatch on some drivers.
        let warm =
            Arc::new(conns.iter().take(4).map(|c| Conn { records: vec![vec![1; 64]], ..c.clone_keys() }).collect());
        run_executor(&crypto, &warm, true, o.flush, false)?;
        run_executor(&naive, &warm, false, o.flush, false)?;
        run_blocking(&devices.naive, &naive, &warm)?;
        if set.is_none() && o.modes.iter().any(|m| m.ends_with("-tokio-set")) {
            set = Some(open_set(&args, device, &warm, o.workers)?);
        }
        let fronts = Fronts { naive: &naive, crypto: &crypto, auto: &auto };
        let (mut runs, rows) = measure(&o, &devices.naive, fronts, set.as_ref(), &conns, &want)?;
        runs_csv += &rows;
        csv += &report(&o, &name, on_cpu, &mut runs);
    }
    for (path, text) in [(&o.csv, csv), (&o.runs_csv, runs_csv)] {
        if let Some(path) = path {
            std::fs::write(path, text).map_err(|e| Error::InvalidArgument(format!("cannot write {path}: {e}")))?;
            println!("wrote {path}");
        }
    }
    Ok(())
}

/// The devices the modes run on: the naive patterns (`blocking`, `waits-only`) on the device as
/// opened by default, what a program that does not choose gets; the coalesced fronts on the
/// same GPU opened with copy queues (`DeviceBuilder::copy_queues`) and four compute queues
/// (`DeviceBuilder::compute_queues`, for the parts of heavy flushes) where it has a
/// transfer-only queue family and `--copy-queues` is on (the default), which is how a server
/// that seals bulk records from many threads would open it (one device otherwise).
struct Devices {
    naive: Device,
    coalesced: Device,
}

impl Devices {
    fn open(copy_queues: bool) -> Result<Devices, Error> {
        let naive = Device::builder().copy_queues(false).build()?;
        // Kept where the device puts uploads on a queue of their own (a transfer-only family).
        // Four compute queues let the parts of a heavy flush (`DeviceBuilder::split_flushes`)
        // run their kernels beside one another; where `VKASYNC_COMPUTE_QUEUES` is set (A/B runs
        // of one binary), the builder takes the count from it instead.
        let builder = Device::builder().copy_queues(true);
        let builder =
            if std::env::var_os("VKASYNC_COMPUTE_QUEUES").is_some() { builder } else { builder.compute_queues(4) };
        let with_copy_queues = match copy_queues {
            true => Some(builder.build()?),
            false => None,
        };
        let coalesced = with_copy_queues
            .filter(|d| d.copy_queues().is_some_and(|q| q.separate_input))
            .unwrap_or_else(|| naive.clone());
        Ok(Devices { naive, coalesced })
    }
}

/// The `Crypto` each kind of mode uses: `naive` for the naive patterns (see [`Devices`]),
/// `crypto` (the GPU forced) and `auto` (the default offload) for the coalesced fronts.
#[derive(Clone, Copy)]
struct Fronts<'a> {
    naive: &'a Crypto,
    crypto: &'a Crypto,
    auto: &'a Crypto,
}

/// Prints the device and the settings.
fn introduce(o: &Options, devices: &Devices, auto: &Crypto) {
    let device = &devices.coalesced;
    let kind = device.info().device_type;
    let auto_rule = match auto.offload_threshold() {
        0 => "every flush on the GPU".to_string(),
        u64::MAX => "every flush on the host (the device is the host's own CPU)".to_string(),
        _ => "records under about 4 KiB at once on the host, flushes of few large records on the host, the \
              others on the GPU"
            .to_string(),
    };
    println!("device: {} ({})", device.info().name, describe(kind));
    println!("host cores: {}; flush policy {:?}; `auto` runs {auto_rule}", o.cores, o.flush);
    match device.copy_queues() {
        Some(q) => println!(
            "copy queues: on for the coalesced fronts ({q:?}); blocking and waits-only run on the device's \
             defaults (--copy-queues off: every mode there)"
        ),
        None => println!("copy queues: off"),
    }
    if kind == vkasync::DeviceType::Cpu {
        println!(
            "note: this device is the host CPU emulating a GPU (lavapipe), so the GPU modes compete with \
             RustCrypto for the same cores and cannot show a GPU's gain. Compare the GPU modes with each \
             other instead: `coalesced` against `blocking` and `waits-only` (fewer submits and host waits \
             for the same records). Against the CPU, run this on a real GPU (VKASYNC_DEVICE picks one)."
        );
    }
}

/// The `*-tokio-set` modes' queue set (`--gpus`, `--lanes`) and each device's `Crypto`,
/// warmed up on `warm`.
fn open_set(
    args: &[String],
    device: &Device,
    warm: &Arc<Vec<Conn>>,
    workers: usize,
) -> Result<(QueueSet, PerDevice<Crypto>), Error> {
    let gpus = num(args, "--gpus", 2usize).max(1);
    let lanes = num(args, "--lanes", 1usize).max(1);
    let devices = set_devices(device, gpus, lanes)?;
    println!("tokio-set modes over: {:?}", devices.iter().map(|d| d.info().name.clone()).collect::<Vec<_>>());
    let set = queue_set(&devices, None)?;
    let cryptos = set.per_device(|d| Ok(Crypto::new(d)?.with_offload(Offload::Gpu)))?;
    // Warm-up of each device's pipelines.
    run_tokio_set(&set, &cryptos, warm, workers, false)?;
    Ok((set, cryptos))
}

/// `warmup` untimed runs of every mode, then `reps` timed ones, the order rotating every
/// repetition, each checked against `want`. The naive modes run on `naive_device` (see
/// [`Fronts`]). A mode's first run in the process pays what a server pays once: the pages of
/// its staging memory and of its threads' heaps faulted in, its runtime's memory grown (on an
/// H100's host, the first of nine runs of `staged-shares` at 10,000 records of 1 KiB was the
/// slowest in every process, at 0.5–0.95 GB/s against 1.4–2.0 for the last ones).
fn measure(
    o: &Options,
    naive_device: &Device,
    fronts: Fronts<'_>,
    set: Option<&(QueueSet, PerDevice<Crypto>)>,
    conns: &Arc<Vec<Conn>>,
    want: &[Vec<Sealed>],
) -> Result<(Vec<Vec<Run>>, String), Error> {
    let mut runs_csv = String::new();
    let bytes = conns.iter().map(|c| c.records.iter().map(Vec::len).sum::<usize>()).sum::<usize>();
    let (modes, flush, workers) = (&o.modes, o.flush, o.workers);
    let Fronts { naive, crypto, auto } = fronts;
    let mut runs: Vec<Vec<Run>> = modes.iter().map(|_| Vec::new()).collect();
    for rep in 0..o.warmup + o.reps {
        for k in 0..modes.len() {
            let m = (k + rep) % modes.len();
            let before = unix_ns();
            let run = match modes[m].as_str() {
                "blocking" => run_blocking(naive_device, naive, conns)?,
                "waits-only" => run_executor(naive, conns, false, flush, false)?,
                "coalesced" => run_executor(crypto, conns, true, flush, false)?,
                "staged" => run_executor(crypto, conns, true, flush, true)?,
                "staged-cores" => run_executor_cores(crypto, conns, workers, flush, false)?,
                "staged-cores-queue" => run_executor_cores(crypto, conns, workers, flush, true)?,
                "auto" => run_executor(auto, conns, true, flush, false)?,
                "host" => run_executor(&auto.clone().with_offload(Offload::Host), conns, true, flush, false)?,
                "coalesced-tokio" => run_tokio(crypto, conns, workers, false)?,
                "staged-tokio" => run_tokio(crypto, conns, workers, true)?,
                "staged-shares" => run_tokio_shares(crypto, conns, workers)?,
                "auto-tokio" => run_tokio(auto, conns, workers, false)?,
                "coalesced-tokio-set" => {
                    let (set, cryptos) = set.expect("made for the mode");
                    run_tokio_set(set, cryptos, conns, workers, false)?
                }
                "staged-tokio-set" => {
                    let (set, cryptos) = set.expect("made for the mode");
                    run_tokio_set(set, cryptos, conns, workers, true)?
                }
                "cpu-1" => run_cpu(conns, 1),
                _ => run_cpu(conns, o.cores),
            };
            if run.out != want {
                eprintln!("{}: a sealed record differs from RustCrypto's", modes[m]);
                std::process::exit(1);
            }
            if rep < o.warmup {
                continue;
            }
            let after = unix_ns();
            let rep = rep - o.warmup;
            runs_csv += &format!(
                "{},{},{},{},{rep},{before},{after},{:.3},{:.4}\n",
                modes[m],
                o.n_conns,
                o.n_records,
                o.size,
                run.wall.as_secs_f64() * 1e3,
                bytes as f64 / run.wall.as_secs_f64() / 1e9
            );
            // Checked: its buffers go back to the allocator, for the next run to reuse (a server
            // reuses its memory; fresh pages would fault in inside the next timed run).
            let run = Run { out: Vec::new(), ..run };
            runs[m].push(run);
        }
    }
    Ok((runs, runs_csv))
}

/// The host's clock, in nanoseconds since the Unix epoch (to match each run with the GPU's clocks
/// sampled apart, e.g. by `nvidia-smi --query-gpu=timestamp,clocks.sm --format=csv -lms 50`).
fn unix_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

/// The header of `--runs-csv`: one row per timed run, with the host's clock before and after the
/// call that ran it (its setup and read-back included).
const RUNS_CSV_HEADER: &str =
    "mode,connections,records,record_bytes,rep,before_unix_ns,after_unix_ns,wall_ms,gb_per_s\n";

/// The CSV's header (`report` returns its rows).
const CSV_HEADER: &str = "device,mode,connections,records,record_bytes,wall_ms,records_per_s,gb_per_s,p50_us,p99_us,\
                          submits,dispatches,host_waits,cpu_us_per_record,gb_per_s_min,gb_per_s_max\n";

/// Prints the table (the median run of every mode), the comparisons and the stats lines, and
/// returns the table's CSV rows.
fn report(o: &Options, name: &str, on_cpu: bool, runs: &mut [Vec<Run>]) -> String {
    let (modes, n_conns, n_records, size, cores) = (&o.modes, o.n_conns, o.n_records, o.size, o.cores);
    let total = (n_conns * n_records) as f64;
    let bytes_total = total * size as f64;
    let mut csv = String::new();
    println!(
        "{:<16} {:>12} {:>8} {:>13} {:>10} {:>10} {:>10} {:>8} {:>10} {:>10}",
        "mode", "records/s", "GB/s", "runs' GB/s", "p50", "p99", "cpu/rec", "submits", "dispatches", "host waits"
    );
    let mut last_stats = None;
    let mut speed = std::collections::HashMap::new();
    // The modes whose median run dispatched work: `auto` and `auto-tokio` count as GPU fronts
    // only where the runtime chose the GPU.
    let mut on_gpu = std::collections::HashSet::new();
    for (m, mode) in modes.iter().enumerate() {
        let rs = &mut runs[m];
        rs.sort_by_key(|r| r.wall);
        let mid = rs.len() / 2;
        // The spread over the runs: the slowest and the fastest.
        let (lo, hi) =
            (bytes_total / rs[rs.len() - 1].wall.as_secs_f64() / 1e9, bytes_total / rs[0].wall.as_secs_f64() / 1e9);
        let r = &mut rs[mid];
        let secs = r.wall.as_secs_f64();
        let (p50, p99) = (percentile(&mut r.latencies, 0.5), percentile(&mut r.latencies, 0.99));
        // Host CPU time per record, in µs (`n/a` where it is not measured).
        let cpu_us = r.cpu.as_secs_f64() * 1e6 / total;
        let (cpu_cell, cpu_csv) = match CPU_TIME_MEASURED {
            true => (format!("{cpu_us:.1}µs"), format!("{cpu_us:.3}")),
            false => ("n/a".to_string(), "n/a".to_string()),
        };
        println!(
            "{mode:<16} {:>12.0} {:>8.3} {:>13} {:>10.1?} {:>10.1?} {cpu_cell:>10} {:>8} {:>10} {:>10}",
            total / secs,
            bytes_total / secs / 1e9,
            format!("{lo:.2}-{hi:.2}"),
            p50,
            p99,
            r.submits,
            r.dispatches,
            r.host_waits
        );
        csv += &format!(
            "{name},{mode},{n_conns},{n_records},{size},{:.3},{:.0},{:.4},{:.1},{:.1},{},{},{},{cpu_csv},{lo:.4},{hi:.4}\n",
            secs * 1e3,
            total / secs,
            bytes_total / secs / 1e9,
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6,
            r.submits,
            r.dispatches,
            r.host_waits
        );
        speed.insert(mode.as_str(), secs);
        if r.dispatches > 0 {
            on_gpu.insert(mode.as_str());
        }
        if mode == "coalesced" {
            last_stats = r.stats;
        }
    }
    if let (Some(b), Some(c)) = (speed.get("blocking"), speed.get("coalesced")) {
        println!("coalesced is {:.1}x faster than blocking", b / c);
    }
    if let (Some(w), Some(c)) = (speed.get("waits-only"), speed.get("coalesced")) {
        println!("coalesced is {:.1}x faster than waits-only", w / c);
    }
    // Against the CPU, the best of the coalesced GPU fronts (each is a way to use the runtime;
    // `auto` and `auto-tokio` count only where they ran on the GPU, and never on a CPU device).
    let best = [
        "coalesced",
        "coalesced-tokio",
        "coalesced-tokio-set",
        "staged",
        "staged-cores",
        "staged-cores-queue",
        "staged-tokio",
        "staged-shares",
        "staged-tokio-set",
        "auto",
        "auto-tokio",
    ]
    .into_iter()
    .filter(|m| !m.starts_with("auto") || (!on_cpu && on_gpu.contains(m)))
    .filter_map(|m| speed.get(m).map(|&secs| (m, secs)))
    .min_by(|a, b| a.1.total_cmp(&b.1));
    if let (Some(cpu), Some((front, secs))) = (speed.get("cpu-all"), best) {
        let ratio = cpu / secs;
        if on_cpu {
            println!(
                "the best GPU front ({front}) runs at {ratio:.2}x the speed of RustCrypto on all {cores} cores \
                 (expected below 1 on a CPU device: see the note above)"
            );
        } else {
            let verdict = if ratio >= 1.0 { "the GPU wins" } else { "the CPU wins at this record size" };
            println!(
                "the best GPU front ({front}) runs at {ratio:.2}x the speed of RustCrypto on all {cores} cores: {verdict}"
            );
        }
    }
    if let (Some(cpu), Some(secs)) = (speed.get("cpu-all"), speed.get("auto-tokio")) {
        let side = if on_gpu.contains("auto-tokio") { "the GPU, for some flushes or all" } else { "the host" };
        println!(
            "with the default offload under tokio (auto-tokio: the runtime chose {side}): {:.2}x the speed of \
             RustCrypto on all {cores} cores",
            cpu / secs
        );
    }
    if let Some(s) = last_stats {
        println!("{s}");
    }
    for (m, mode) in modes.iter().enumerate() {
        if let Some(s) = runs[m].first().and_then(|r| r.stats) {
            println!("{mode}: {s}");
        }
    }
    csv
}
