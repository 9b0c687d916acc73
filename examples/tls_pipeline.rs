//! The seed's case as a server meets it: C connections, each a task sealing R records with its
//! own keys (AES-CTR, then HMAC-SHA256 over nonce and ciphertext), host memory to host memory,
//! every record verified against the RustCrypto crates composed the same way.
//!
//! Modes, each timed in the same run (interleaved, median of `--reps`):
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
//!   worker per host core), so that the host copies run on all cores;
//! - `auto`: as `coalesced`, with the runtime choosing per flush between the GPU and the host
//!   (`Offload::Auto`: small flushes run on the host with RustCrypto);
//! - `cpu-1`: RustCrypto on one host core; `cpu-all`: RustCrypto on every host core;
//! - `coalesced-tokio-set` (only with `--modes`): `coalesced-tokio` over a [`QueueSet`] of
//!   `--gpus N` devices (default 2: every GPU listed, or logical devices of the one GPU where
//!   fewer are listed), each connection on the least-loaded device; `--lanes L` (default 1)
//!   opens L logical devices, each with its own queue, on each of those GPUs.
//!
//! It prints a table (records/s, GB/s of plaintext, p50/p99 record latency, submits,
//! dispatches, host waits per run), the stats line of the last coalesced run, and with
//! `--csv FILE` writes the table as CSV.
//!
//! The other GPU modes force the GPU (`Offload::Gpu`). `--flush idle` makes the executor modes
//! submit only when no task can run (`FlushPolicy::WhenIdle`) instead of by group commit.
//!
//! `cargo run --release --example tls_pipeline -- [--connections C] [--records R]
//! [--record-size S] [--reps N] [--modes a,b,..] [--flush group|idle] [--workers W] [--gpus N]
//! [--lanes L] [--csv FILE]`

use aes::cipher::{KeyIvInit, StreamCipher};
use hmac::Mac;
use std::sync::Arc;
use std::time::{Duration, Instant};
use vkasync::crypto::{pack_le_words, unpack_le_words, AesKey, Crypto, HmacKey, MessageIndex, Offload, RecordKeys};
use vkasync::{Buffer, Device, Error, Executor, FlushPolicy, MemoryKind, PerDevice, Queue, QueueSet, Stats};

const MODES: [&str; 7] = ["blocking", "waits-only", "coalesced", "coalesced-tokio", "auto", "cpu-1", "cpu-all"];
/// Modes run only when named in `--modes`.
const EXTRA_MODES: [&str; 1] = ["coalesced-tokio-set"];

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn num(args: &[String], name: &str, default: usize) -> usize {
    flag(args, name).map_or(default, |v| {
        v.parse().unwrap_or_else(|_| {
            eprintln!("{name}: not a number: {v:?}");
            std::process::exit(2)
        })
    })
}

/// Deterministic pseudo-random bytes (xorshift64*).
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

/// One connection: its keys and its records' plaintexts.
struct Conn {
    aes_key: Vec<u8>,
    mac_key: Vec<u8>,
    prefix: [u8; 4],
    keys: RecordKeys,
    records: Vec<Vec<u8>>,
}

impl Conn {
    fn nonce(&self, seq: usize) -> [u8; 16] {
        self.keys.nonce(seq as u64)
    }
}

/// A sealed record: ciphertext and tag.
type Sealed = (Vec<u8>, [u8; 32]);

/// RustCrypto: AES-256-CTR from the nonce, then HMAC-SHA256 over nonce and ciphertext.
fn cpu_seal(c: &Conn, seq: usize, buf: &mut [u8]) -> [u8; 32] {
    let nonce = c.nonce(seq);
    ctr::Ctr128BE::<aes::Aes256>::new(c.aes_key[..].into(), &nonce.into()).apply_keystream(buf);
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(&c.mac_key).expect("any key length");
    m.update(&nonce);
    m.update(buf);
    m.finalize().into_bytes().into()
}

/// One run of a mode: every connection's sealed records, each record's latency, and the stats
/// (submits, dispatches, host waits) where a GPU front ran it.
struct Run {
    out: Vec<Vec<Sealed>>,
    latencies: Vec<Duration>,
    wall: Duration,
    submits: u64,
    dispatches: u64,
    host_waits: u64,
    stats: Option<Stats>,
}

/// One connection task's result: its sealed buffers, their tags, each record's latency.
type TaskResult = (Vec<Vec<u8>>, Vec<[u8; 32]>, Vec<Duration>);

impl Run {
    /// A run of a GPU front from its tasks' results and its stats.
    fn of_tasks(results: Vec<TaskResult>, wall: Duration, s: Stats) -> Result<Run, Error> {
        let mut out = Vec::with_capacity(results.len());
        let mut latencies = Vec::new();
        for (bufs, tags, lat) in results {
            out.push(bufs.into_iter().zip(tags).collect());
            latencies.extend(lat);
        }
        Ok(Run {
            out,
            latencies,
            wall,
            submits: s.submits,
            dispatches: s.dispatches,
            host_waits: s.host_waits,
            stats: Some(s),
        })
    }
}

fn run_cpu(conns: &[Conn], threads: usize) -> Run {
    let start = Instant::now();
    let per = conns.len().div_ceil(threads.max(1)).max(1);
    let parts: Vec<(Vec<Vec<Sealed>>, Vec<Duration>)> = std::thread::scope(|s| {
        let hs: Vec<_> = conns
            .chunks(per)
            .map(|chunk| {
                s.spawn(move || {
                    let mut lat = Vec::new();
                    let out = chunk
                        .iter()
                        .map(|c| {
                            c.records
                                .iter()
                                .enumerate()
                                .map(|(seq, p)| {
                                    let t = Instant::now();
                                    let mut buf = p.clone();
                                    let tag = cpu_seal(c, seq, &mut buf);
                                    lat.push(t.elapsed());
                                    (buf, tag)
                                })
                                .collect()
                        })
                        .collect();
                    (out, lat)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("a CPU thread panicked")).collect()
    });
    let wall = start.elapsed();
    let mut out = Vec::new();
    let mut latencies = Vec::new();
    for (o, l) in parts {
        out.extend(o);
        latencies.extend(l);
    }
    Run { out, latencies, wall, submits: 0, dispatches: 0, host_waits: 0, stats: None }
}

fn run_blocking(device: &Device, crypto: &Crypto, conns: &[Conn]) -> Result<Run, Error> {
    let before = device.last_submitted();
    let start = Instant::now();
    let mut out = Vec::new();
    let mut latencies = Vec::new();
    for c in conns {
        let mut sealed = Vec::new();
        for (seq, p) in c.records.iter().enumerate() {
            let t = Instant::now();
            let nonce = c.nonce(seq);
            let ct = crypto.aes_ctr_blocking(&c.aes_key, &nonce, p)?;
            let mut msg = nonce.to_vec();
            msg.extend_from_slice(&ct);
            let tag = crypto.hmac_sha256_many_blocking(&c.mac_key, &[msg])?[0];
            latencies.push(t.elapsed());
            sealed.push((ct, tag));
        }
        out.push(sealed);
    }
    let wall = start.elapsed();
    let submits = device.last_submitted() - before;
    Ok(Run { out, latencies, wall, submits, dispatches: submits, host_waits: submits, stats: None })
}

/// One record sealed with the task's own device buffers and commands (no coalesced work).
async fn seal_waits_only(
    crypto: &Crypto,
    ctx: &vkasync::Ctx,
    key: &AesKey,
    mac: &HmacKey,
    nonce: [u8; 16],
    plain: &[u8],
) -> Result<Sealed, Error> {
    let mut rec = ctx.clone();
    let device = ctx.device();
    let key = key.upload(&mut rec)?;
    let words = pack_le_words(plain, 16);
    let data = Buffer::<u32>::new(device, words.len().max(4), MemoryKind::Device)?;
    rec.upload(&data, &words)?;
    crypto.record_aes_ctr(&mut rec, &key, &nonce, &data, plain.len())?;
    // nonce || ciphertext for the MAC: the nonce's 4 words, then the ciphertext copied on the GPU.
    let msg = Buffer::<u32>::new(device, 4 + data.len(), MemoryKind::Device)?;
    rec.upload(&msg, &pack_le_words(&nonce, 16))?;
    rec.copy_region(&data, 0, &msg, 4, data.len())?;
    let whole = 0..16 + plain.len();
    let index = MessageIndex::upload(&mut rec, std::slice::from_ref(&whole))?;
    let macs = Buffer::<[u32; 8]>::new(device, 1, MemoryKind::Device)?;
    crypto.record_hmac_sha256(&mut rec, mac, &msg, &index, &macs)?;
    let ct = rec.read_back(&data)?;
    let tag = rec.read_back(&macs)?;
    ctx.synchronize().await?;
    let ct = unpack_le_words(&ct.into_vec()?, plain.len());
    Ok((ct, vkasync::crypto::digest_bytes(&tag.into_vec()?[0])))
}

fn run_executor(crypto: &Crypto, conns: &Arc<Vec<Conn>>, coalesced: bool, flush: FlushPolicy) -> Result<Run, Error> {
    let exec = Executor::builder(crypto.device()).flush_policy(flush).build()?;
    // Outputs start as copies of the plaintexts (made before the clock starts): sealing in place
    // needs no allocation on the timed path.
    let bufs: Vec<Vec<Vec<u8>>> = conns.iter().map(|c| c.records.clone()).collect();
    let start = Instant::now();
    let handles: Vec<_> = bufs
        .into_iter()
        .enumerate()
        .map(|(i, mut bufs)| {
            let (crypto, conns) = (crypto.clone(), conns.clone());
            exec.spawn_with(move |ctx| async move {
                let c = &conns[i];
                let (key, mac) = (AesKey::new(&c.aes_key)?, HmacKey::new(&c.mac_key));
                let mut out = Vec::with_capacity(bufs.len());
                let mut lat = Vec::with_capacity(bufs.len());
                for (seq, buf) in bufs.iter_mut().enumerate() {
                    let t = Instant::now();
                    let tag = if coalesced {
                        crypto.seal_in_place(&ctx, &c.keys, seq as u64, buf).await?
                    } else {
                        let (ct, tag) = seal_waits_only(&crypto, &ctx, &key, &mac, c.nonce(seq), buf).await?;
                        buf.copy_from_slice(&ct);
                        tag
                    };
                    lat.push(t.elapsed());
                    out.push(tag);
                }
                Ok::<_, Error>((bufs, out, lat))
            })
        })
        .collect();
    let results = exec.block_on(async {
        let mut v = Vec::with_capacity(handles.len());
        for h in handles {
            v.push(h.await);
        }
        v
    });
    let wall = start.elapsed();
    let results: Result<Vec<_>, Error> =
        results.into_iter().map(|r| r.expect("a connection's task panicked")).collect();
    Run::of_tasks(results?, wall, exec.stats())
}

fn run_tokio(crypto: &Crypto, conns: &Arc<Vec<Conn>>, workers: usize) -> Result<Run, Error> {
    let queue = queue_builder(crypto.device()).build()?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).build().expect("a tokio runtime");
    let bufs: Vec<Vec<Vec<u8>>> = conns.iter().map(|c| c.records.clone()).collect();
    let start = Instant::now();
    let results = rt.block_on(async {
        let handles: Vec<_> = bufs
            .into_iter()
            .enumerate()
            .map(|(i, mut bufs)| {
                let (crypto, conns, ctx) = (crypto.clone(), conns.clone(), queue.context());
                tokio::spawn(async move {
                    let c = &conns[i];
                    let mut out = Vec::with_capacity(bufs.len());
                    let mut lat = Vec::with_capacity(bufs.len());
                    for (seq, buf) in bufs.iter_mut().enumerate() {
                        let t = Instant::now();
                        out.push(crypto.seal_in_place(&ctx, &c.keys, seq as u64, buf).await?);
                        lat.push(t.elapsed());
                    }
                    Ok::<_, Error>((bufs, out, lat))
                })
            })
            .collect();
        let mut v = Vec::with_capacity(handles.len());
        for h in handles {
            v.push(h.await.expect("a connection's task panicked"));
        }
        v
    });
    let wall = start.elapsed();
    drop(rt);
    Run::of_tasks(results.into_iter().collect::<Result<Vec<_>, Error>>()?, wall, queue.stats())
}

/// `run_tokio` over a [`QueueSet`]: each connection's context on the least-loaded device, with
/// that device's `Crypto`.
fn run_tokio_set(
    set: &QueueSet,
    cryptos: &PerDevice<Crypto>,
    conns: &Arc<Vec<Conn>>,
    workers: usize,
) -> Result<Run, Error> {
    let before = set.stats();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).build().expect("a tokio runtime");
    let bufs: Vec<Vec<Vec<u8>>> = conns.iter().map(|c| c.records.clone()).collect();
    let start = Instant::now();
    let results = rt.block_on(async {
        let handles: Vec<_> = bufs
            .into_iter()
            .enumerate()
            .map(|(i, mut bufs)| {
                let ctx = set.context();
                let crypto = cryptos.get(ctx.device()).expect("a device of the set").clone();
                let conns = conns.clone();
                tokio::spawn(async move {
                    let c = &conns[i];
                    let mut out = Vec::with_capacity(bufs.len());
                    let mut lat = Vec::with_capacity(bufs.len());
                    for (seq, buf) in bufs.iter_mut().enumerate() {
                        let t = Instant::now();
                        out.push(crypto.seal_in_place(&ctx, &c.keys, seq as u64, buf).await?);
                        lat.push(t.elapsed());
                    }
                    Ok::<_, Error>((bufs, out, lat))
                })
            })
            .collect();
        let mut v = Vec::with_capacity(handles.len());
        for h in handles {
            v.push(h.await.expect("a connection's task panicked"));
        }
        v
    });
    let wall = start.elapsed();
    drop(rt);
    // This run's counters, summed over the devices.
    let mut s = Stats::default();
    for (now, was) in set.stats().iter().zip(&before) {
        s.submits += now.submits - was.submits;
        s.dispatches += now.dispatches - was.dispatches;
        s.host_waits += now.host_waits - was.host_waits;
    }
    Run::of_tasks(results.into_iter().collect::<Result<Vec<_>, Error>>()?, wall, s)
}

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

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let n_conns = num(&args, "--connections", 1000).max(1);
    let n_records = num(&args, "--records", 4).max(1);
    let size = num(&args, "--record-size", 1024);
    let reps = num(&args, "--reps", 3).max(1);
    let modes: Vec<String> = flag(&args, "--modes")
        .map_or_else(|| MODES.iter().map(|m| m.to_string()).collect(), |m| m.split(',').map(String::from).collect());
    if let Some(bad) = modes.iter().find(|m| !MODES.contains(&m.as_str()) && !EXTRA_MODES.contains(&m.as_str())) {
        eprintln!("unknown mode {bad:?}; modes: {},{}", MODES.join(","), EXTRA_MODES.join(","));
        std::process::exit(2);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = num(&args, "--workers", cores).max(1);

    let flush = match flag(&args, "--flush").as_deref() {
        None | Some("group") => FlushPolicy::GroupCommit,
        Some("idle") => FlushPolicy::WhenIdle,
        Some(other) => {
            eprintln!("--flush: group or idle, not {other:?}");
            std::process::exit(2)
        }
    };
    let device = Device::new()?;
    let auto = Crypto::new(&device)?;
    let crypto = auto.clone().with_offload(Offload::Gpu);
    let name = device.info().name.replace(',', ";");
    let kind = device.info().device_type;
    let on_cpu = kind == vkasync::DeviceType::Cpu;
    let auto_rule = match auto.offload_threshold() {
        0 => "every flush on the GPU".to_string(),
        u64::MAX => "every flush on the host (the device is the host's own CPU)".to_string(),
        n => format!("flushes under about {n} bytes on the host, larger ones on the GPU"),
    };
    println!("device: {} ({})", device.info().name, describe(kind));
    println!("host cores: {cores}; flush policy {flush:?}; `auto` runs {auto_rule}");
    if on_cpu {
        println!(
            "note: this device is the host CPU emulating a GPU (lavapipe), so the GPU modes compete with \
             RustCrypto for the same cores and cannot show a GPU's gain. Compare the GPU modes with each \
             other instead: `coalesced` against `blocking` and `waits-only` (fewer submits and host waits \
             for the same records). Against the CPU, run this on a real GPU (VKASYNC_DEVICE picks one)."
        );
    }
    println!(
        "{n_conns} connections x {n_records} records of {size} B, AES-256-CTR then HMAC-SHA256 (own keys per \
         connection); median of {reps} runs per mode, every record verified against RustCrypto"
    );
    let conns: Arc<Vec<Conn>> = Arc::new(
        (0..n_conns as u64)
            .map(|i| {
                let aes_key = bytes(32, 3 * i);
                let mac_key = bytes(32, 3 * i + 1);
                let prefix = (i as u32).to_be_bytes();
                let keys = RecordKeys::new(&aes_key, &mac_key, prefix).expect("a 32-byte key");
                let records = (0..n_records).map(|r| bytes(size, (i << 20) + r as u64 + 7)).collect();
                Conn { aes_key, mac_key, prefix, keys, records }
            })
            .collect(),
    );
    let want = run_cpu(&conns, cores).out;
    let _ = conns[0].prefix;

    // Warm-up: pipelines compile at their first dispatch on some drivers.
    let warm = Arc::new(conns.iter().take(4).map(|c| Conn { records: vec![vec![1; 64]], ..c.clone_keys() }).collect());
    run_executor(&crypto, &warm, true, flush)?;
    run_executor(&crypto, &warm, false, flush)?;
    run_blocking(&device, &crypto, &warm)?;

    let set = match modes.iter().any(|m| m == "coalesced-tokio-set") {
        true => {
            let gpus = num(&args, "--gpus", 2).max(1);
            let lanes = num(&args, "--lanes", 1).max(1);
            let listed = vkasync::adapters()?.len();
            // `lanes` logical devices (one queue each) per GPU, GPU by GPU.
            let mut devices = Vec::new();
            for i in 0..gpus * lanes {
                devices.push(match (i, listed >= gpus) {
                    (0, _) => device.clone(),
                    (_, true) => Device::builder().selector(vkasync::DeviceSelector::Index(i / lanes)).build()?,
                    (_, false) => Device::new()?,
                });
            }
            println!(
                "coalesced-tokio-set over: {:?}",
                devices.iter().map(|d| d.info().name.clone()).collect::<Vec<_>>()
            );
            let set =
                QueueSet::from_queues(devices.iter().map(|d| queue_builder(d).build()).collect::<Result<_, _>>()?)?;
            let cryptos = set.per_device(|d| Ok(Crypto::new(d)?.with_offload(Offload::Gpu)))?;
            // Warm-up of each device's pipelines.
            run_tokio_set(&set, &cryptos, &warm, workers)?;
            Some((set, cryptos))
        }
        false => None,
    };

    let mut runs: Vec<Vec<Run>> = modes.iter().map(|_| Vec::new()).collect();
    for rep in 0..reps {
        for k in 0..modes.len() {
            let m = (k + rep) % modes.len();
            let run = match modes[m].as_str() {
                "blocking" => run_blocking(&device, &crypto, &conns)?,
                "waits-only" => run_executor(&crypto, &conns, false, flush)?,
                "coalesced" => run_executor(&crypto, &conns, true, flush)?,
                "auto" => run_executor(&auto, &conns, true, flush)?,
                "coalesced-tokio" => run_tokio(&crypto, &conns, workers)?,
                "coalesced-tokio-set" => {
                    let (set, cryptos) = set.as_ref().expect("made for the mode");
                    run_tokio_set(set, cryptos, &conns, workers)?
                }
                "cpu-1" => run_cpu(&conns, 1),
                _ => run_cpu(&conns, cores),
            };
            if run.out != want {
                eprintln!("{}: a sealed record differs from RustCrypto's", modes[m]);
                std::process::exit(1);
            }
            runs[m].push(run);
        }
    }

    let total = (n_conns * n_records) as f64;
    let bytes_total = total * size as f64;
    let mut csv = String::from(
        "device,mode,connections,records,record_bytes,wall_ms,records_per_s,gb_per_s,p50_us,p99_us,submits,dispatches,host_waits\n",
    );
    println!(
        "{:<16} {:>12} {:>8} {:>10} {:>10} {:>8} {:>10} {:>10}",
        "mode", "records/s", "GB/s", "p50", "p99", "submits", "dispatches", "host waits"
    );
    let mut last_stats = None;
    let mut speed = std::collections::HashMap::new();
    for (m, mode) in modes.iter().enumerate() {
        let rs = &mut runs[m];
        rs.sort_by_key(|r| r.wall);
        let mid = rs.len() / 2;
        let r = &mut rs[mid];
        let secs = r.wall.as_secs_f64();
        let (p50, p99) = (percentile(&mut r.latencies, 0.5), percentile(&mut r.latencies, 0.99));
        println!(
            "{mode:<16} {:>12.0} {:>8.3} {:>10.1?} {:>10.1?} {:>8} {:>10} {:>10}",
            total / secs,
            bytes_total / secs / 1e9,
            p50,
            p99,
            r.submits,
            r.dispatches,
            r.host_waits
        );
        csv += &format!(
            "{name},{mode},{n_conns},{n_records},{size},{:.3},{:.0},{:.4},{:.1},{:.1},{},{},{}\n",
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
    // `auto` runs on the host where the device is the host's CPU, so it counts only on a GPU).
    let best = ["coalesced", "coalesced-tokio", "coalesced-tokio-set", "auto"]
        .into_iter()
        .filter(|m| !(on_cpu && *m == "auto"))
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
    if let Some(s) = last_stats {
        println!("{s}");
    }
    for (m, mode) in modes.iter().enumerate() {
        if let Some(s) = runs[m].first().and_then(|r| r.stats) {
            println!("{mode}: {s}");
        }
    }
    if let Some(path) = flag(&args, "--csv") {
        std::fs::write(&path, csv).map_err(|e| Error::InvalidArgument(format!("cannot write {path}: {e}")))?;
        println!("wrote {path}");
    }
    Ok(())
}

impl Conn {
    /// The same keys with no records (for the warm-up).
    fn clone_keys(&self) -> Conn {
        Conn {
            aes_key: self.aes_key.clone(),
            mac_key: self.mac_key.clone(),
            prefix: self.prefix,
            keys: self.keys.clone(),
            records: Vec::new(),
        }
    }
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
