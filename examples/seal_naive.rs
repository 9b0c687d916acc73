//! The seed's case written naturally, one connection at a time: each connection is a task that
//! encrypts its record (`Crypto::aes_ctr(..).await`) and then MACs nonce and ciphertext
//! (`Crypto::hmac_sha256_many(..).await`). Used to count the host cost per record (callgrind),
//! before and after coalesced work; every record is verified.
//!
//! `cargo run --release --example seal_naive -- [connections] [record bytes] [gpu|auto|cpu]`
//! (`gpu` forces the GPU; `auto`, the default, lets the runtime run small flushes on the host;
//! `cpu` does only the tasks' own work, the inputs and the RustCrypto check, so that its count
//! can be subtracted from the others').

use aes::cipher::{KeyIvInit, StreamCipher};
use hmac::Mac;
use vkasync::crypto::Crypto;
use vkasync::{Device, Error, Executor};

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1).take(2).map(|a| a.parse::<usize>().expect("a number"));
    let n = args.next().unwrap_or(1000);
    let size = args.next().unwrap_or(1024);
    let device = Device::new()?;
    let crypto = Crypto::new(&device)?;
    let crypto = match std::env::args().nth(3).as_deref() {
        Some("gpu") => crypto.with_offload(vkasync::crypto::Offload::Gpu), // OFFLOAD
        _ => crypto,
    };
    let exec = Executor::new(&device)?;
    let cpu_only = std::env::args().nth(3).as_deref() == Some("cpu");
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let crypto = crypto.clone();
            exec.spawn_with(move |ctx| async move {
                let key = [(i % 251) as u8; 32];
                let mac_key = [(i % 241) as u8; 32];
                let mut nonce = [0u8; 16];
                nonce[..8].copy_from_slice(&(i as u64).to_be_bytes());
                let plain: Vec<u8> = (0..size).map(|j| (i * 31 + j) as u8).collect();
                let mut want = plain.clone();
                ctr::Ctr128BE::<aes::Aes256>::new(&key.into(), &nonce.into()).apply_keystream(&mut want);
                let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(&mac_key).expect("any key");
                m.update(&nonce);
                m.update(&want);
                let want_tag: [u8; 32] = m.finalize().into_bytes().into();
                if cpu_only {
                    return Ok::<_, Error>(want.len() == size);
                }
                let ct = crypto.aes_ctr(&ctx, &key, &nonce, &plain).await?;
                let msg = [&nonce[..], &ct].concat();
                let tag = crypto.hmac_sha256_many(&ctx, &mac_key, &[msg]).await?[0];
                Ok::<_, Error>(ct == want && tag == want_tag)
            })
        })
        .collect();
    let ok = exec.block_on(async {
        let mut ok = 0;
        for h in handles {
            ok += h.await.expect("task panicked")? as usize;
        }
        Ok::<_, Error>(ok)
    })?;
    assert_eq!(ok, n, "every record matches RustCrypto");
    println!("{n} records of {size} B verified; {}", exec.stats());
    Ok(())
}
