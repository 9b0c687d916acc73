//! Messages long enough that one shader invocation would loop past 65,535 iterations: lavapipe
//! (llvmpipe) silently ends an invocation's loops there, so the kernels must never loop over a
//! whole long message in one dispatch. Every result is compared with the
//! RustCrypto crates.

mod common;

use aes::cipher::{KeyIvInit, StreamCipher};
use common::*;
use hmac::Mac;
use sha2::Digest;
use vkasync::crypto::Crypto;
use vkasync::Executor;

/// A deterministic, non-repeating byte pattern.
fn message(len: usize, salt: u32) -> Vec<u8> {
    let mut x = 0x9e37_79b9u32 ^ salt;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn cpu_sha256(m: &[u8]) -> [u8; 32] {
    sha2::Sha256::digest(m).into()
}

fn cpu_hmac(key: &[u8], m: &[u8]) -> [u8; 32] {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    mac.update(m);
    mac.finalize().into_bytes().into()
}

/// 4,194,231 bytes: 65,535 compressions with the padding; 4,194,232: 65,536; 16 MiB: 262,145.
/// A short message in the same batch is finished in the first window and left alone after.
fn lengths() -> [usize; 4] {
    [4_194_231, 4_194_232, 16 << 20, 3]
}

#[test]
fn sha256_and_hmac_of_messages_past_65535_blocks_match_rustcrypto() {
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    let msgs: Vec<Vec<u8>> = lengths().iter().enumerate().map(|(i, &n)| message(n, i as u32)).collect();
    let want: Vec<[u8; 32]> = msgs.iter().map(|m| cpu_sha256(m)).collect();
    assert_eq!(crypto.sha256_many_blocking(&msgs).unwrap(), want);
    let key = b"a key for long messages";
    let want: Vec<[u8; 32]> = msgs.iter().map(|m| cpu_hmac(key, m)).collect();
    assert_eq!(crypto.hmac_sha256_many_blocking(key, &msgs).unwrap(), want);
    // Each length alone too (one message per batch: the windows end with it).
    for m in &msgs[..2] {
        assert_eq!(crypto.sha256_many_blocking(&[m]).unwrap(), vec![cpu_sha256(m)]);
        assert_eq!(crypto.hmac_sha256_many_blocking(key, &[m]).unwrap(), vec![cpu_hmac(key, m)]);
    }
    // And through an executor task.
    let exec = Executor::new(&device).unwrap();
    let (ctx, c, m) = (exec.context(), crypto.clone(), msgs[2].clone());
    let got = exec.block_on(async move { c.hmac_sha256_many(&ctx, key, &[&m]).await }).unwrap();
    assert_eq!(got, vec![cpu_hmac(key, &msgs[2])]);
    drop((exec, crypto));
    finish(device);
}

#[test]
fn aes_ctr_of_64_mib_matches_rustcrypto() {
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    let data = message(64 << 20, 7);
    let key = [0x42u8; 32];
    let iv = [0xffu8; 16]; // the counter wraps within the first block
    let got = crypto.aes_ctr_blocking(&key, &iv, &data).unwrap();
    let mut want = data.clone();
    ctr::Ctr128BE::<aes::Aes256>::new(&key.into(), &iv.into()).apply_keystream(&mut want);
    assert!(got == want, "AES-256-CTR of 64 MiB differs from RustCrypto");
    drop(crypto);
    finish(device);
}
