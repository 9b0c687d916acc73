//! A TLS-like pipeline on the GPU: encrypt one buffer with AES-256-CTR and hash a batch of records
//! with SHA-256, two independent jobs, run two ways on the same device:
//! - `executor`: the two jobs are concurrent tasks (`Crypto::aes_ctr`, `Crypto::sha256_many`);
//!   the executor records both, submits once and waits once;
//! - `blocking`: the same work one function after the other, each synchronising on its own
//!   (`Crypto::aes_ctr_blocking`, then `Crypto::sha256_many_blocking`): the naive pattern.
//!
//! The modes alternate, `--reps` runs each (3 by default), and every run's results are verified
//! against the RustCrypto crates. The table gives the median wall time of a run (uploads,
//! kernels and read-backs; not the verification), and one run's `vkQueueSubmit` calls and host
//! waits; the last line is the stats of the executor of the last executor run.
//!
//! `cargo run --release --example tls_pipeline -- [--bytes N] [--records R] [--record-size S]
//! [--reps R]`

use aes::cipher::{KeyIvInit, StreamCipher};
use sha2::Digest;
use std::time::{Duration, Instant};
use vkasync::crypto::Crypto;
use vkasync::{Device, Error, Executor};

const KEY: [u8; 32] = *b"an AES-256 key for tls_pipeline!";
const IV: [u8; 16] = *b"nonce+counter=16";

fn flag(args: &[String], name: &str, default: usize) -> usize {
    match args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)) {
        None => default,
        Some(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("{name}: not a number: {v:?}");
            std::process::exit(2)
        }),
    }
}

/// Deterministic pseudo-random bytes (xorshift64*).
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn verify(mode: &str, ciphertext: &[u8], digests: &[[u8; 32]], want_ct: &[u8], want_digests: &[[u8; 32]]) {
    if ciphertext != want_ct {
        eprintln!("{mode}: the AES-256-CTR ciphertext differs from RustCrypto's");
        std::process::exit(1);
    }
    if digests != want_digests {
        eprintln!("{mode}: the SHA-256 digests differ from RustCrypto's");
        std::process::exit(1);
    }
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let len = flag(&args, "--bytes", 16 << 20);
    let n_records = flag(&args, "--records", 10_000);
    let record_size = flag(&args, "--record-size", 2048);
    let reps = flag(&args, "--reps", 3).max(1);

    let device = Device::builder().always_stage(args.iter().any(|a| a == "--always-stage")).build()?;
    let crypto = Crypto::new(&device)?;
    println!("device: {}", device.info().name);
    // Shared with the tasks by reference count, so that both modes see the same host memory
    // (a copy per run would time the allocator, not the GPU).
    let plaintext = std::rc::Rc::new(bytes(len, 1));
    let records: std::rc::Rc<Vec<Vec<u8>>> =
        std::rc::Rc::new((0..n_records).map(|i| bytes(record_size, 2 + i as u64)).collect());

    // The expected results, on the CPU.
    let mut want_ct = plaintext.to_vec();
    ctr::Ctr128BE::<aes::Aes256>::new(&KEY.into(), &IV.into()).apply_keystream(&mut want_ct);
    let want_digests: Vec<[u8; 32]> = records.iter().map(|r| sha2::Sha256::digest(r).into()).collect();

    // Warm up both kernels (some drivers compile a shader at its first dispatch).
    crypto.aes_ctr_blocking(&KEY, &IV, &plaintext[..len.min(4096)])?;
    crypto.sha256_many_blocking(&records[..n_records.min(4)])?;

    // The two modes, alternating which goes first, `reps` times each; the median wall time is
    // reported. Every run's results are verified.
    let mut executor_walls = Vec::new();
    let mut blocking_walls = Vec::new();
    let mut blocking_submits = 0;
    let mut exec = Executor::new(&device)?;
    for rep in 0..reps {
        for mode in [rep % 2, 1 - rep % 2] {
            if mode == 0 {
                // Executor: two concurrent tasks, one submit, one wait (a fresh executor per run,
                // so that the stats line below is one run's).
                exec = Executor::new(&device)?;
                let (c1, ctx1, data) = (crypto.clone(), exec.context(), std::rc::Rc::clone(&plaintext));
                let (c2, ctx2, recs) = (crypto.clone(), exec.context(), std::rc::Rc::clone(&records));
                let start = Instant::now();
                let enc = exec.spawn(async move { c1.aes_ctr(&ctx1, &KEY, &IV, &data).await });
                let hash = exec.spawn(async move { c2.sha256_many(&ctx2, &recs).await });
                exec.run();
                let ciphertext = enc.join().expect("the AES task panicked")?;
                let digests = hash.join().expect("the SHA-256 task panicked")?;
                executor_walls.push(start.elapsed());
                verify("executor", &ciphertext, &digests, &want_ct, &want_digests);
            } else {
                // Blocking: each helper submits and waits on its own.
                let before = device.last_submitted();
                let start = Instant::now();
                let ciphertext = crypto.aes_ctr_blocking(&KEY, &IV, &plaintext)?;
                let digests = crypto.sha256_many_blocking(&records)?;
                blocking_walls.push(start.elapsed());
                blocking_submits = device.last_submitted() - before;
                verify("blocking", &ciphertext, &digests, &want_ct, &want_digests);
            }
        }
    }
    let stats = exec.stats();
    // Each blocking helper waits once, for its own submission.
    let blocking_waits = 2;
    let (executor_wall, blocking_wall) = (median(&mut executor_walls), median(&mut blocking_walls));

    println!(
        "AES-256-CTR over {:.1} MiB and SHA-256 of {n_records} records of {record_size} B; \
         median of {reps} runs per mode, every run verified against RustCrypto",
        len as f64 / (1 << 20) as f64
    );
    let row = |mode: &str, wall: Duration, submits: u64, waits: u64| {
        println!("{mode:<10} {:>12.2?} {submits:>8} {waits:>11}", wall);
    };
    println!("{:<10} {:>12} {:>8} {:>11}", "mode", "wall time", "submits", "host waits");
    // Submits and waits of one run: the executor's from its stats, the blocking path's from the
    // device's submission counter.
    row("executor", executor_wall, stats.submits, stats.host_waits);
    row("blocking", blocking_wall, blocking_submits, blocking_waits);
    println!("speed-up: {:.2}x", blocking_wall.as_secs_f64() / executor_wall.as_secs_f64());
    println!("{}", exec.stats());
    Ok(())
}
