//! Throughput of the crypto kernels, three ways, in one run:
//! - `kernel`: the data is already on the GPU; GPU timestamps around the dispatches (one submit
//!   per measurement);
//! - `end-to-end`: host memory to host memory through the blocking helpers
//!   (`Crypto::aes_ctr_blocking`, `Crypto::sha256_many_blocking`), wall clock: packing, upload,
//!   kernel, read-back and unpacking;
//! - `async`: host memory to host memory through the async calls on an [`Executor`]
//!   (`Crypto::aes_ctr_in_place`, `Crypto::sha256_many`): the coalesced path, large inputs in
//!   pieces that overlap host copies with the GPU; `copy-ceiling` is the same staging path with
//!   no kernel (`Crypto::copy_round_trip`), so `async / copy-ceiling` says how close the
//!   crypto comes to the cost of moving its bytes;
//! - `cpu-1-core`, `cpu-all-cores`: the RustCrypto crates (`aes` + `ctr`, `sha2`) on one host
//!   core and on every host core, as reference.
//!
//! Workloads at `--scale 1`: AES-128-CTR and AES-256-CTR over 256 MiB; SHA-256 of 1,000,000
//! messages of 64 bytes and of 10,000 messages of 16 KiB. `--scale F` multiplies the AES bytes and
//! the message counts (not the message sizes). GB/s is 10^9 input bytes per second.
//!
//! Every kernel's output is checked against RustCrypto before it is timed, and every end-to-end
//! result after each repetition. (The kernel variants that lost, `aes_ctr_v1` and fixed blocks
//! per invocation, are gone from the crate; their numbers stay in `BENCHMARKS.md`'s history.)
//!
//! Each measurement is repeated (`--warmup` untimed, then `--reps` timed, `--e2e-reps` and
//! `--cpu-reps` for the slower modes); the kernel and end-to-end cases are interleaved, their order
//! rotating every round. The CSV (`device,what,mode,bytes,reps,median_gbps,min_gbps,max_gbps`) is
//! printed and written to `DIR/bench_crypto.csv`.
//!
//! `--no-robust` (or `VKASYNC_ROBUST=0`) opens the device without robust buffer access, to
//! measure what the bounds checks cost; the device column of the CSV then ends in
//! `[robust=Off]`. Run the binary both ways, alternating, to compare.
//!
//! `cargo run --release --example bench_crypto -- [--scale F] [--reps R] [--e2e-reps R]
//! [--cpu-reps R] [--warmup W] [--no-robust] [--out DIR]`

use aes::cipher::{KeyIvInit, StreamCipher};
use sha2::Digest;
use std::time::Instant;
use vkasync::crypto::{
    ctr_add, pack_le_words, unpack_le_words, AesKey, AesKeyBuffer, Crypto, DeviceMessages, MessageBatch,
};
use vkasync::{Buffer, CommandList, Device, Error, MemoryKind, Recorder, Timestamps};

const MIB: usize = 1024 * 1024;
const IV: [u8; 16] = [0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xff, 0xff, 0xf0, 0x00];
const KEY128: [u8; 16] = *b"vkasync bench k1";
const KEY256: [u8; 32] = *b"vkasync benchmark key, 256 bits!";

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn num<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    match arg(args, name) {
        None => default,
        Some(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("{name}: cannot parse {v:?}");
            std::process::exit(2)
        }),
    }
}

/// Deterministic pseudo-random bytes (splitmix64).
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn cpu_ctr(key: &[u8], data: &mut [u8]) {
    match key.len() {
        16 => ctr::Ctr128BE::<aes::Aes128>::new(key.into(), &IV.into()).apply_keystream(data),
        32 => ctr::Ctr128BE::<aes::Aes256>::new(key.into(), &IV.into()).apply_keystream(data),
        n => panic!("no AES-{} here", n * 8),
    }
}

fn fail(what: &str) -> ! {
    eprintln!("error: {what}");
    std::process::exit(1)
}

/// One measured series: GB/s per timed repetition.
struct Row {
    what: String,
    mode: &'static str,
    bytes: u64,
    gbps: Vec<f64>,
}

impl Row {
    fn new(what: impl Into<String>, mode: &'static str, bytes: usize) -> Self {
        Row { what: what.into(), mode, bytes: bytes as u64, gbps: Vec::new() }
    }

    fn csv(&self, device: &str) -> String {
        let mut v = self.gbps.clone();
        v.sort_by(f64::total_cmp);
        let median = if v.is_empty() {
            f64::NAN
        } else if v.len() % 2 == 1 {
            v[v.len() / 2]
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
        };
        let (min, max) = (v.first().copied().unwrap_or(f64::NAN), v.last().copied().unwrap_or(f64::NAN));
        format!("{device},{},{},{},{},{median:.3},{min:.3},{max:.3}", self.what, self.mode, self.bytes, v.len())
    }
}

/// A message set: one contiguous byte vector cut into equal messages.
struct Messages {
    name: &'static str,
    bytes: Vec<u8>,
    size: usize,
}

impl Messages {
    fn list(&self) -> Vec<&[u8]> {
        self.bytes.chunks(self.size).collect()
    }
}

/// What a kernel case runs.
enum Job {
    /// AES-CTR under key 0 (AES-128) or 1 (AES-256) over every data buffer.
    Aes(usize),
    /// SHA-256 of message set `i`.
    Sha(usize),
}

struct KernelCase {
    row: Row,
    crypto: Crypto,
    job: Job,
}

/// The device-side data of the kernel cases.
struct OnDevice {
    /// AES data split into buffers one dispatch can bind: (buffer, bytes, first block).
    aes: Vec<(Buffer<u32>, usize, u64)>,
    keys: [AesKeyBuffer; 2],
    /// Per message set: its batches (each within one binding) and their digest buffers.
    sha: Vec<Vec<(DeviceMessages, Buffer<[u32; 8]>)>>,
}

fn record(case: &KernelCase, dev: &OnDevice, cmds: &mut CommandList) -> Result<(), Error> {
    match case.job {
        Job::Aes(k) => {
            for (buf, len, first) in &dev.aes {
                case.crypto.record_aes_ctr(cmds, &dev.keys[k], &ctr_add(&IV, *first), buf, *len)?;
            }
        }
        Job::Sha(i) => {
            for (batch, digests) in &dev.sha[i] {
                case.crypto.record_sha256(cmds, &batch.bytes, &batch.index, digests)?;
            }
        }
    }
    Ok(())
}

/// Runs a case once on fresh inputs and checks its output.
fn verify(case: &KernelCase, dev: &OnDevice, plain: &[u8], cipher: &[Vec<u8>; 2], digests: &[Vec<[u8; 32]>]) {
    let run = || -> Result<bool, Error> {
        let mut cmds = CommandList::new(case.crypto.device());
        match case.job {
            Job::Aes(k) => {
                for (buf, len, first) in &dev.aes {
                    let start = (*first * 16) as usize;
                    cmds.upload(buf, &pack_le_words(&plain[start..start + len], 16))?;
                }
                record(case, dev, &mut cmds)?;
                let mut rbs = Vec::new();
                for (buf, len, first) in &dev.aes {
                    rbs.push((cmds.read_back(buf)?, (*first * 16) as usize, *len));
                }
                cmds.submit_and_wait()?;
                for (rb, start, len) in rbs {
                    if unpack_le_words(&rb.into_vec()?, len) != cipher[k][start..start + len] {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Job::Sha(i) => {
                for (_, d) in &dev.sha[i] {
                    cmds.upload(d, &vec![[0u32; 8]; d.len()])?;
                }
                record(case, dev, &mut cmds)?;
                let rbs: Result<Vec<_>, Error> = dev.sha[i].iter().map(|(_, d)| cmds.read_back(d)).collect();
                let rbs = rbs?;
                cmds.submit_and_wait()?;
                let mut got = Vec::new();
                for rb in rbs {
                    got.extend(rb.into_vec()?.iter().map(|d| vkasync::crypto::digest_bytes(d)));
                }
                Ok(got == digests[i])
            }
        }
    };
    match run() {
        Ok(true) => {}
        Ok(false) => fail(&format!("{}: the GPU result differs from RustCrypto", case.row.what)),
        Err(e) => fail(&format!("{}: {e}", case.row.what)),
    }
}

/// Splits `n` messages of `size` bytes into batches whose bytes and digests each fit in `limit`.
fn batch_ranges(n: usize, size: usize, limit: usize) -> Vec<std::ops::Range<usize>> {
    let per = (limit / size.max(32)).max(1);
    (0..n.div_ceil(per)).map(|k| k * per..((k + 1) * per).min(n)).collect()
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let scale: f64 = num(&args, "--scale", 1.0);
    let reps: usize = num(&args, "--reps", 10);
    let warmup: usize = num(&args, "--warmup", 3);
    let e2e_reps: usize = num(&args, "--e2e-reps", 5);
    let cpu_reps: usize = num(&args, "--cpu-reps", 3);
    let out_dir = arg(&args, "--out").map(std::path::PathBuf::from);

    let aes_bytes = (((256 * MIB) as f64 * scale) as usize / 16 * 16).max(16);
    let n_small = ((1_000_000.0 * scale) as usize).max(1);
    let n_big = ((10_000.0 * scale) as usize).max(1);

    let mut builder = Device::builder();
    if args.iter().any(|a| a == "--no-robust") {
        builder = builder.robust_buffer_access(false);
    }
    let device = builder.build()?;
    let mut name = device.info().name.replace(',', ";");
    if !device.robust_buffer_access() {
        name += " [robust=Off]";
    }
    println!("robust buffer access: {:?}", device.robust_access());
    let limits = *device.limits();
    let crypto = Crypto::new(&device)?.with_offload(vkasync::crypto::Offload::Gpu);
    println!("device: {name}");
    println!(
        "limits: maxComputeSharedMemorySize {} KiB, maxStorageBufferRange {} MiB",
        limits.max_compute_shared_memory_size / 1024,
        limits.max_storage_buffer_range / MIB as u64
    );
    println!(
        "scale {scale}: AES {:.1} MiB, SHA-256 {n_small} x 64 B and {n_big} x 16 KiB",
        aes_bytes as f64 / MIB as f64
    );
    println!("reps: kernel {reps} (after {warmup} warm-up), end-to-end {e2e_reps} (after 1), cpu {cpu_reps}");

    // ------------------------------------------------------------------ inputs, CPU reference
    let plain = random_bytes(aes_bytes, 1);
    let sets = [
        Messages { name: "sha256/64B", bytes: random_bytes(n_small * 64, 2), size: 64 },
        Messages { name: "sha256/16KiB", bytes: random_bytes(n_big * 16384, 3), size: 16384 },
    ];
    let mut rows = Vec::new();
    let mut cipher: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    for (k, key) in [&KEY128[..], &KEY256[..]].into_iter().enumerate() {
        let mut row = Row::new(format!("aes-{}-ctr", key.len() * 8), "cpu-1-core", aes_bytes);
        for _ in 0..cpu_reps.max(1) {
            let mut data = plain.clone();
            let t = Instant::now();
            cpu_ctr(key, &mut data);
            row.gbps.push(aes_bytes as f64 / t.elapsed().as_nanos() as f64);
            cipher[k] = data;
        }
        rows.push(row);
    }
    let mut digests: Vec<Vec<[u8; 32]>> = Vec::new();
    for set in &sets {
        let mut row = Row::new(set.name, "cpu-1-core", set.bytes.len());
        let list = set.list();
        let mut out = Vec::new();
        for _ in 0..cpu_reps.max(1) {
            let t = Instant::now();
            out = list.iter().map(|m| <[u8; 32]>::from(sha2::Sha256::digest(m))).collect();
            row.gbps.push(set.bytes.len() as f64 / t.elapsed().as_nanos() as f64);
        }
        digests.push(out);
        rows.push(row);
    }

    // ------------------------------------------------------------------ kernel only
    let limit = limits.max_storage_buffer_range.min(limits.max_buffer_size) as usize / 16 * 16;
    let mut cmds = CommandList::new(&device);
    let mut aes = Vec::new();
    let mut start = 0;
    while start < aes_bytes {
        let len = limit.min(aes_bytes - start);
        aes.push((Buffer::<u32>::new(&device, len.div_ceil(16) * 4, MemoryKind::Device)?, len, (start / 16) as u64));
        start += len;
    }
    let keys = [AesKey::new(&KEY128)?.upload(&mut cmds)?, AesKey::new(&KEY256)?.upload(&mut cmds)?];
    let mut sha = Vec::new();
    for set in &sets {
        let list = set.list();
        let mut batches = Vec::new();
        for r in batch_ranges(list.len(), set.size, limit) {
            let on_device = MessageBatch::new(&list[r.clone()])?.upload(&mut cmds)?;
            batches.push((on_device, Buffer::<[u32; 8]>::new(&device, r.len(), MemoryKind::Device)?));
        }
        sha.push(batches);
    }
    cmds.submit_and_wait()?;
    let dev = OnDevice { aes, keys, sha };

    let mut cases = vec![
        KernelCase { row: Row::new("aes-128-ctr", "kernel", aes_bytes), crypto: crypto.clone(), job: Job::Aes(0) },
        KernelCase { row: Row::new("aes-256-ctr", "kernel", aes_bytes), crypto: crypto.clone(), job: Job::Aes(1) },
    ];
    for (i, set) in sets.iter().enumerate() {
        cases.push(KernelCase {
            row: Row::new(set.name, "kernel", set.bytes.len()),
            crypto: crypto.clone(),
            job: Job::Sha(i),
        });
    }
    for case in &cases {
        verify(case, &dev, &plain, &cipher, &digests);
    }
    let ts = Timestamps::new(&device, 2)?;
    for round in 0..warmup + reps {
        let n = cases.len();
        for j in 0..n {
            let case = &mut cases[(j + round) % n];
            let mut cmds = CommandList::new(&device);
            cmds.write_timestamp(&ts, 0)?;
            record(case, &dev, &mut cmds)?;
            cmds.write_timestamp(&ts, 1)?;
            cmds.submit_and_wait()?;
            let ns = ts.elapsed_ns(0, 1)?;
            ts.reset();
            if round >= warmup {
                case.row.gbps.push(case.row.bytes as f64 / ns);
            }
        }
    }
    drop(dev);
    rows.extend(cases.into_iter().map(|c| c.row));

    // ------------------------------------------------------------------ end to end
    let lists: Vec<Vec<&[u8]>> = sets.iter().map(Messages::list).collect();
    let mut e2e = vec![
        Row::new("aes-128-ctr", "end-to-end", aes_bytes),
        Row::new("aes-256-ctr", "end-to-end", aes_bytes),
        Row::new(sets[0].name, "end-to-end", sets[0].bytes.len()),
        Row::new(sets[1].name, "end-to-end", sets[1].bytes.len()),
    ];
    for round in 0..1 + e2e_reps {
        for j in 0..e2e.len() {
            let i = (j + round) % e2e.len();
            let t = Instant::now();
            let (ok, dt) = match i {
                0 | 1 => {
                    let key = if i == 0 { &KEY128[..] } else { &KEY256[..] };
                    let out = crypto.aes_ctr_blocking(key, &IV, &plain)?;
                    let dt = t.elapsed();
                    (out == cipher[i], dt)
                }
                _ => {
                    let out = crypto.sha256_many_blocking(&lists[i - 2])?;
                    let dt = t.elapsed();
                    (out == digests[i - 2], dt)
                }
            };
            let row = &mut e2e[i];
            if !ok {
                fail(&format!("{} end-to-end: the result differs from RustCrypto", row.what));
            }
            if round >= 1 {
                row.gbps.push(row.bytes as f64 / dt.as_nanos() as f64);
            }
        }
    }
    rows.extend(e2e);

    // ------------------------------------------------------------------ async (coalesced path)
    let exec = vkasync::Executor::new(&device)?;
    let mut asy = vec![
        Row::new("aes-128-ctr", "async", aes_bytes),
        Row::new("aes-256-ctr", "async", aes_bytes),
        Row::new(sets[0].name, "async", sets[0].bytes.len()),
        Row::new(sets[1].name, "async", sets[1].bytes.len()),
        Row::new("staging round trip", "copy-ceiling", aes_bytes),
    ];
    let mut buf = plain.clone();
    let aes_keys = [AesKey::new(&KEY128)?, AesKey::new(&KEY256)?];
    // The tasks own what they touch: the lists are copied once, before any timing.
    let owned: Vec<std::sync::Arc<Vec<Vec<u8>>>> =
        lists.iter().map(|l| std::sync::Arc::new(l.iter().map(|m| m.to_vec()).collect())).collect();
    for round in 0..1 + e2e_reps {
        for j in 0..asy.len() {
            let i = (j + round) % asy.len();
            buf.copy_from_slice(&plain);
            let ctx = exec.context();
            let t = Instant::now();
            let (ok, dt) = match i {
                0 | 1 => {
                    let (c, key, mut b) = (crypto.clone(), aes_keys[i].clone(), std::mem::take(&mut buf));
                    let (r, b) = exec.block_on(async move { (c.aes_ctr_in_place(&ctx, &key, &IV, &mut b).await, b) });
                    let dt = t.elapsed();
                    r?;
                    buf = b;
                    (buf == cipher[i], dt)
                }
                2 | 3 => {
                    let (c, list) = (crypto.clone(), owned[i - 2].clone());
                    let out = exec.block_on(async move { c.sha256_many(&ctx, &list).await })?;
                    let dt = t.elapsed();
                    (out == digests[i - 2], dt)
                }
                _ => {
                    let (c, mut b) = (crypto.clone(), std::mem::take(&mut buf));
                    let (r, b) = exec.block_on(async move { (c.copy_round_trip(&ctx, &mut b).await, b) });
                    let dt = t.elapsed();
                    r?;
                    buf = b;
                    (buf == plain, dt)
                }
            };
            let row = &mut asy[i];
            if !ok {
                fail(&format!("{} async: the result differs", row.what));
            }
            if round >= 1 {
                row.gbps.push(row.bytes as f64 / dt.as_nanos() as f64);
            }
        }
    }
    rows.extend(asy);
    println!("{}", exec.stats());
    drop(exec);

    // ------------------------------------------------------------------ every host core
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (k, key) in [&KEY128[..], &KEY256[..]].into_iter().enumerate() {
        let mut row = Row::new(format!("aes-{}-ctr", key.len() * 8), "cpu-all-cores", aes_bytes);
        for _ in 0..cpu_reps.max(1) {
            buf.copy_from_slice(&plain);
            let per = aes_bytes.div_ceil(cores).next_multiple_of(16);
            let t = Instant::now();
            std::thread::scope(|s| {
                for (c, part) in buf.chunks_mut(per).enumerate() {
                    s.spawn(move || {
                        let iv = ctr_add(&IV, (c * per / 16) as u64);
                        match key.len() {
                            16 => ctr::Ctr128BE::<aes::Aes128>::new(key.into(), &iv.into()).apply_keystream(part),
                            _ => ctr::Ctr128BE::<aes::Aes256>::new(key.into(), &iv.into()).apply_keystream(part),
                        }
                    });
                }
            });
            row.gbps.push(aes_bytes as f64 / t.elapsed().as_nanos() as f64);
            if buf != cipher[k] {
                fail("cpu-all-cores AES differs");
            }
        }
        rows.push(row);
    }
    for (i, set) in sets.iter().enumerate() {
        let mut row = Row::new(set.name, "cpu-all-cores", set.bytes.len());
        let list = &lists[i];
        for _ in 0..cpu_reps.max(1) {
            let per = list.len().div_ceil(cores);
            let t = Instant::now();
            let out: Vec<[u8; 32]> = std::thread::scope(|s| {
                let hs: Vec<_> = list
                    .chunks(per)
                    .map(|part| {
                        s.spawn(move || {
                            part.iter().map(|m| <[u8; 32]>::from(sha2::Sha256::digest(m))).collect::<Vec<_>>()
                        })
                    })
                    .collect();
                hs.into_iter().flat_map(|h| h.join().expect("a CPU thread panicked")).collect()
            });
            row.gbps.push(set.bytes.len() as f64 / t.elapsed().as_nanos() as f64);
            if out != digests[i] {
                fail("cpu-all-cores SHA-256 differs");
            }
        }
        rows.push(row);
    }

    // ------------------------------------------------------------------ report
    let mut csv = String::from("device,what,mode,bytes,reps,median_gbps,min_gbps,max_gbps\n");
    for row in &rows {
        csv.push_str(&row.csv(&name));
        csv.push('\n');
    }
    print!("{csv}");
    if let Some(dir) = out_dir {
        std::fs::create_dir_all(&dir).ok();
        let path = dir.join("bench_crypto.csv");
        std::fs::write(&path, &csv).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
        println!("wrote {}", path.display());
    }
    Ok(())
}
