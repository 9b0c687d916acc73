//! RustCrypto on the host: the `cpu-1-core` rows, which also make the reference results, and
//! the `cpu-all-cores` rows.

use crate::support::args::cores;
use crate::{fail, Inputs, Messages, Row, IV, KEY128, KEY256};
use aes::cipher::{KeyIvInit, StreamCipher};
use sha2::Digest;
use std::time::Instant;
use vkasync::crypto::ctr_add;

fn cpu_ctr(key: &[u8], data: &mut [u8]) {
    match key.len() {
        16 => ctr::Ctr128BE::<aes::Aes128>::new(key.into(), &IV.into()).apply_keystream(data),
        32 => ctr::Ctr128BE::<aes::Aes256>::new(key.into(), &IV.into()).apply_keystream(data),
        n => panic!("no AES-{} here", n * 8),
    }
}

/// The `cpu-1-core` rows (`cpu_reps` runs each, at least one), and the inputs with their
/// results: `plain` under both AES keys and every message set's digests.
pub fn reference(plain: Vec<u8>, sets: [Messages; 2], cpu_reps: usize) -> (Vec<Row>, Inputs) {
    let aes_bytes = plain.len();
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
    (rows, Inputs { plain, sets, cipher, digests })
}

/// The `cpu-all-cores` rows: the work split over every host core, each result checked; `buf`
/// is the AES output buffer.
pub fn all_cores(inp: &Inputs, lists: &[Vec<&[u8]>], buf: &mut [u8], cpu_reps: usize) -> Vec<Row> {
    let (plain, sets, cipher, digests) = (&inp.plain, &inp.sets, &inp.cipher, &inp.digests);
    let aes_bytes = plain.len();
    let mut rows = Vec::new();
    let cores = cores();
    for (k, key) in [&KEY128[..], &KEY256[..]].into_iter().enumerate() {
        let mut row = Row::new(format!("aes-{}-ctr", key.len() * 8), "cpu-all-cores", aes_bytes);
        for _ in 0..cpu_reps.max(1) {
            buf.copy_from_slice(plain);
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
            if *buf != cipher[k] {
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
    rows
}
