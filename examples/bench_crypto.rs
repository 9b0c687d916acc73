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

#[path = "bench_crypto/host.rs"]
mod host;
#[path = "bench_crypto/kernel.rs"]
mod kernel;
// The helpers shared with the other benchmark programs, in `examples/support/`.
#[path = "support"]
mod support {
    pub mod args;
}

use std::time::Instant;
use support::args::{arg, flag, num};
use vkasync::crypto::{AesKey, Crypto};
use vkasync::{Device, Error};

const MIB: usize = 1024 * 1024;
const IV: [u8; 16] = [0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xff, 0xff, 0xf0, 0x00];
const KEY128: [u8; 16] = *b"vkasync bench k1";
const KEY256: [u8; 32] = *b"vkasync benchmark key, 256 bits!";

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

/// The inputs and their RustCrypto results, made before any GPU timing.
pub struct Inputs {
    /// The AES plaintext.
    plain: Vec<u8>,
    /// The SHA-256 message sets.
    sets: [Messages; 2],
    /// `plain` under AES-128-CTR and AES-256-CTR.
    cipher: [Vec<u8>; 2],
    /// Every message set's digests.
    digests: Vec<Vec<[u8; 32]>>,
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
    if flag(&args, "--no-robust") {
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

    let plain = random_bytes(aes_bytes, 1);
    let sets = [
        Messages { name: "sha256/64B", bytes: random_bytes(n_small * 64, 2), size: 64 },
        Messages { name: "sha256/16KiB", bytes: random_bytes(n_big * 16384, 3), size: 16384 },
    ];
    // The rows in this order: one host core (making the reference results), kernel only, end to
    // end, async (coalesced path), every host core.
    let (mut rows, inp) = host::reference(plain, sets, cpu_reps);
    let limit = limits.max_storage_buffer_range.min(limits.max_buffer_size) as usize / 16 * 16;
    rows.extend(kernel::rows(&device, &crypto, &inp, limit, reps, warmup)?);
    let lists: Vec<Vec<&[u8]>> = inp.sets.iter().map(Messages::list).collect();
    rows.extend(end_to_end(&crypto, &inp, &lists, e2e_reps)?);
    let (asy, mut buf) = async_rows(&device, &crypto, &inp, &lists, e2e_reps)?;
    rows.extend(asy);
    rows.extend(host::all_cores(&inp, &lists, &mut buf, cpu_reps));
    report(&rows, &name, out_dir);
    Ok(())
}

/// The `end-to-end` rows: the blocking helpers, host memory to host memory; one untimed round,
/// then `e2e_reps` timed, the order rotating; every result checked.
fn end_to_end(crypto: &Crypto, inp: &Inputs, lists: &[Vec<&[u8]>], e2e_reps: usize) -> Result<Vec<Row>, Error> {
    let (plain, sets, cipher, digests) = (&inp.plain, &inp.sets, &inp.cipher, &inp.digests);
    let aes_bytes = plain.len();
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
                    let out = crypto.aes_ctr_blocking(key, &IV, plain)?;
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
    Ok(e2e)
}

/// The `async` and `copy-ceiling` rows: the async calls on an executor (the coalesced path); one
/// untimed round, then `e2e_reps` timed, the order rotating; every result checked. Returns the
/// rows and the AES buffer.
fn async_rows(
    device: &Device,
    crypto: &Crypto,
    inp: &Inputs,
    lists: &[Vec<&[u8]>],
    e2e_reps: usize,
) -> Result<(Vec<Row>, Vec<u8>), Error> {
    let (plain, sets, cipher, digests) = (&inp.plain, &inp.sets, &inp.cipher, &inp.digests);
    let aes_bytes = plain.len();
    let exec = vkasync::Executor::new(device)?;
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
            buf.copy_from_slice(plain);
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
                    (buf == *plain, dt)
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
    println!("{}", exec.stats());
    drop(exec);
    Ok((asy, buf))
}

/// Prints the CSV and, with `--out DIR`, writes it to `DIR/bench_crypto.csv`.
fn report(rows: &[Row], name: &str, out_dir: Option<std::path::PathBuf>) {
    let mut csv = String::from("device,what,mode,bytes,reps,median_gbps,min_gbps,max_gbps\n");
    for row in rows {
        csv.push_str(&row.csv(name));
        csv.push('\n');
    }
    print!("{csv}");
    if let Some(dir) = out_dir {
        std::fs::create_dir_all(&dir).ok();
        let path = dir.join("bench_crypto.csv");
        std::fs::write(&path, &csv).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
        println!("wrote {}", path.display());
    }
}
