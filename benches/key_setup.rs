//! The cost of one connection's keys: `RecordKeys::new` (the AES-256 schedule the kernels read
//! and the HMAC-SHA256 midstates) against what the CPU baseline builds per connection
//! (RustCrypto's `Aes256` and `Hmac<Sha256>`), on this host. Host only, no device.
//!
//!     cargo bench --bench key_setup
//!
//! Prints nanoseconds per connection: the median and the range of 15 rounds of 100,000 keys,
//! the two alternating round by round. Each key is dropped before the next is made, as a server
//! would reuse the memory of connections that closed.

use hmac::Mac;
use std::hint::black_box;
use std::time::Instant;
use vkasync::crypto::RecordKeys;

const KEYS: u64 = 100_000;
const ROUNDS: usize = 15;

/// A different 32-byte key for each `i`.
fn key(i: u64) -> [u8; 32] {
    let mut k = [0u8; 32];
    for (j, c) in k.chunks_mut(8).enumerate() {
        c.copy_from_slice(&(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ j as u64).to_le_bytes());
    }
    k
}

fn ns_per_key(mut make: impl FnMut(&[u8; 32])) -> f64 {
    let t = Instant::now();
    for i in 0..KEYS {
        make(&key(i));
    }
    t.elapsed().as_nanos() as f64 / KEYS as f64
}

fn summary(mut v: Vec<f64>) -> String {
    v.sort_by(f64::total_cmp);
    format!("median {:.0} ns ({:.0}-{:.0})", v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let (mut ours, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        ours.push(ns_per_key(|k| {
            black_box(RecordKeys::new(k, &k[..], [0; 4]).unwrap());
        }));
        cpu.push(ns_per_key(|k| {
            black_box(<aes::Aes256 as aes::cipher::KeyInit>::new(k.into()));
            black_box(<hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(&k[..]).unwrap());
        }));
    }
    println!("per connection, {KEYS} keys x {ROUNDS} rounds, alternating:");
    println!("  vkasync RecordKeys::new (AES-256 schedule + HMAC midstates): {}", summary(ours));
    println!("  RustCrypto Aes256::new + Hmac<Sha256>::new_from_slice:       {}", summary(cpu));
}
