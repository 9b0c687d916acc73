//! Coalesced work on the real device: crypto calls of many tasks in one flush run as one
//! dispatch per kernel, results match RustCrypto, the record layer seals and opens like the
//! RustCrypto crates composed the same way, and a user's own batch kind joins the mechanism.

mod common;

use common::*;
use hmac::Mac;
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use std::sync::Arc;
use vkasync::batch::{BatchKind, Encoder};
use vkasync::crypto::{Crypto, RecordKeys};
use vkasync::{kernels, Arg, Buffer, CommandList, Error, Executor, Kernel, MemoryKind, Queue, Recorder};

fn cpu_hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

#[test]
fn a_thousand_tasks_with_their_own_keys_share_one_aes_dispatch() {
    let _w = Watchdog::new(std::time::Duration::from_secs(300));
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    // Submitting only when no task can run: every task records before the one flush (group
    // commit, the default, splits them over a timing-dependent number of flushes).
    let exec = Executor::builder(&device).flush_policy(vkasync::FlushPolicy::WhenIdle).build().unwrap();
    let n = 1000;
    let mut handles = Vec::new();
    for i in 0..n {
        let crypto = crypto.clone();
        handles.push(exec.spawn_with(move |ctx| async move {
            let key = bytes(if i % 2 == 0 { 16 } else { 32 }, i as u64);
            let iv: [u8; 16] = bytes(16, 7 + i as u64).try_into().unwrap();
            let data = bytes(1 + (i * 37) % 2000, 11 + i as u64);
            let ct = crypto.aes_ctr(&ctx, &key, &iv, &data).await?;
            Ok::<_, Error>(ct == cpu_ctr(&key, &iv, &data))
        }));
    }
    let ok = exec.block_on(async {
        let mut ok = 0;
        for h in handles {
            ok += h.await.unwrap().unwrap() as usize;
        }
        ok
    });
    assert_eq!(ok, n, "every task's ciphertext matches RustCrypto");
    let s = exec.stats();
    // One flush, and one AES dispatch for the 1,000 tasks' ranges.
    assert_eq!((s.flushes, s.dispatches), (1, 1), "{s}");
    drop((exec, crypto));
    finish(device);
}

#[test]
fn seal_and_open_match_rustcrypto_and_share_dispatches() {
    let _w = Watchdog::new(std::time::Duration::from_secs(300));
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    // Submitting only when no task can run keeps the sharing near one flush per round: under
    // group commit how often a round splits depends on the device's speed (460 flushes were
    // seen on Ubuntu 24.04's faster lavapipe, against about 300 here).
    let exec = Executor::builder(&device).flush_policy(vkasync::FlushPolicy::WhenIdle).build().unwrap();
    let n = 300u64;
    let mut handles = Vec::new();
    for c in 0..n {
        let crypto = crypto.clone();
        handles.push(exec.spawn_with(move |ctx| async move {
            let aes_key = bytes(if c % 3 == 0 { 16 } else { 32 }, c);
            let mac_key = bytes((c % 70) as usize, 1000 + c);
            let prefix = (c as u32).to_be_bytes();
            let keys = RecordKeys::new(&aes_key, &mac_key, prefix)?;
            let mut all_ok = true;
            // Three records per connection, awaited one after another (as a server would).
            for seq in 0..3u64 {
                let plain = bytes((c as usize * 131 + seq as usize * 17) % 3000, c * 10 + seq);
                let sealed = crypto.seal(&ctx, &keys, seq, &plain).await?;
                let (ct, tag) = cpu_seal(&aes_key, &mac_key, prefix, seq, &plain);
                all_ok &= sealed.ciphertext == ct && sealed.tag == tag;
                let mut buf = sealed.ciphertext.clone();
                crypto.open_in_place(&ctx, &keys, seq, &mut buf, &sealed.tag).await?;
                all_ok &= buf == plain;
            }
            Ok::<_, Error>(all_ok)
        }));
    }
    let ok = exec.block_on(async {
        let mut ok = 0;
        for h in handles {
            ok += h.await.unwrap().unwrap() as usize;
        }
        ok
    });
    assert_eq!(ok, n as usize);
    let s = exec.stats();
    // Seal: AES then HMAC; open: HMAC, then AES. At most three dispatches per flush, and the
    // 1,800 calls go out in about one flush per round of the tasks (six rounds: three records,
    // each sealed then opened; a round splits where a flush completes while the executor still
    // polls it, so 6 to 13 were seen): at least 30 calls per flush.
    assert!(s.dispatches <= 3 * s.flushes, "{s}");
    assert!(s.flushes * 30 <= 1800, "{s}");
    drop((exec, crypto));
    finish(device);
}

#[test]
fn open_rejects_a_wrong_tag_sequence_or_key_and_releases_no_plaintext() {
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    // On an executor's context (a record and its wait take the lock in two steps) and on a
    // queue's (one hold for both).
    let exec = Executor::new(&device).unwrap();
    let ctx = exec.context();
    let c = crypto.clone();
    exec.block_on(async move { reject_cases(&c, &ctx).await });
    drop(exec);
    let queue = Queue::new(&device).unwrap();
    let ctx = queue.context();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let c = crypto.clone();
    rt.block_on(async move { tokio::spawn(async move { reject_cases(&c, &ctx).await }).await.unwrap() });
    drop((rt, queue));
    assert!(matches!(RecordKeys::new(&[0; 24], b"k", [0; 4]), Err(Error::InvalidArgument(_))));
    assert!(matches!(RecordKeys::new(&[0; 0], b"k", [0; 4]), Err(Error::InvalidArgument(_))));
    drop(crypto);
    finish(device);
}

/// Wrong tags, sequence numbers, keys and ciphertexts are each `AuthenticationFailed`, with
/// no plaintext released; the right ones open; in-place sealing matches the CPU.
async fn reject_cases(crypto: &Crypto, ctx: &vkasync::Ctx) {
    let keys = RecordKeys::new(&[3; 32], b"mac key", [1, 2, 3, 4]).unwrap();
    let other = RecordKeys::new(&[3; 32], b"another mac key", [1, 2, 3, 4]).unwrap();
    let plain = b"the plaintext that must not leak".to_vec();
    let sealed = crypto.seal(ctx, &keys, 5, &plain).await.unwrap();
    let mut bad_tag = sealed.tag;
    bad_tag[31] ^= 1;
    let mut flipped = sealed.ciphertext.clone();
    flipped[0] ^= 0x80;
    let cases: [(&RecordKeys, u64, &[u8], [u8; 32]); 4] = [
        (&keys, 5, &sealed.ciphertext, bad_tag),
        (&keys, 6, &sealed.ciphertext, sealed.tag),
        (&other, 5, &sealed.ciphertext, sealed.tag),
        (&keys, 5, &flipped, sealed.tag),
    ];
    for (k, seq, ct, tag) in cases {
        assert_eq!(crypto.open(ctx, k, seq, ct, &tag).await, Err(Error::AuthenticationFailed));
        let mut buf = ct.to_vec();
        assert_eq!(crypto.open_in_place(ctx, k, seq, &mut buf, &tag).await, Err(Error::AuthenticationFailed));
        assert_eq!(buf, ct, "the buffer still holds the ciphertext");
    }
    assert_eq!(crypto.open(ctx, &keys, 5, &sealed.ciphertext, &sealed.tag).await.unwrap(), plain);
    // In-place sealing: one buffer in, ciphertext out.
    let mut buf = plain.clone();
    let tag = crypto.seal_in_place(ctx, &keys, 9, &mut buf).await.unwrap();
    assert_eq!((buf, tag), cpu_seal(&[3; 32], b"mac key", [1, 2, 3, 4], 9, &plain));
}

#[test]
fn records_sealed_from_tokio_workers_are_coalesced() {
    let _w = Watchdog::new(std::time::Duration::from_secs(300));
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    let queue = Queue::new(&device).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().unwrap();
    let ok = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for c in 0..64u64 {
            let (crypto, ctx) = (crypto.clone(), queue.context());
            set.spawn(async move {
                let keys = RecordKeys::new(&bytes(16, c), &bytes(32, c + 99), [9; 4]).unwrap();
                let mut ok = true;
                for seq in 0..20 {
                    let plain = bytes(100 + (c as usize * 7 + seq as usize) % 900, c ^ seq);
                    let s = crypto.seal(&ctx, &keys, seq, &plain).await.unwrap();
                    ok &= (s.ciphertext, s.tag) == cpu_seal(&bytes(16, c), &bytes(32, c + 99), [9; 4], seq, &plain);
                }
                ok
            });
        }
        let mut ok = 0;
        while let Some(r) = set.join_next().await {
            ok += r.unwrap() as usize;
        }
        ok
    });
    assert_eq!(ok, 64);
    let s = queue.stats();
    assert!(s.dispatches <= 2 * s.flushes, "{s}");
    assert!(s.flushes < 64 * 20, "{s}");
    drop((rt, queue, crypto));
    finish(device);
}

#[test]
fn hashes_ciphers_and_records_of_one_flush_do_not_disturb_each_other() {
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    let mut cmds = CommandList::new(&device);
    let msgs: Vec<Vec<u8>> = (0..50).map(|i| bytes(i * 13, i as u64)).collect();
    let keys = RecordKeys::new(&[5; 16], b"k", [0; 4]).unwrap();
    let plain = bytes(777, 3);
    let sha = crypto.prepare_sha256_many(&mut cmds, &msgs).unwrap();
    let hmac = crypto.prepare_hmac_sha256_many(&mut cmds, &vkasync::crypto::HmacKey::new(b"hk"), &msgs).unwrap();
    let aes =
        crypto.prepare_aes_ctr(&mut cmds, &vkasync::crypto::AesKey::new(&[8; 32]).unwrap(), &[1; 16], &plain).unwrap();
    let seal = crypto.prepare_seal(&mut cmds, &keys, 1, &plain).unwrap();
    let (ct, tag) = cpu_seal(&[5; 16], b"k", [0; 4], 1, &plain);
    let open = crypto.prepare_open(&mut cmds, &keys, 1, &ct, &tag).unwrap();
    assert!(matches!(sha.finish(), Err(Error::NotReady)), "not submitted yet");
    let sha = crypto.prepare_sha256_many(&mut cmds, &msgs).unwrap();
    cmds.submit_and_wait().unwrap();
    let want_sha: Vec<[u8; 32]> = msgs.iter().map(|m| <sha2::Sha256 as sha2::Digest>::digest(m).into()).collect();
    assert_eq!(sha.finish().unwrap(), want_sha);
    let want_hmac: Vec<[u8; 32]> = msgs.iter().map(|m| cpu_hmac(b"hk", &[m])).collect();
    assert_eq!(hmac.finish().unwrap(), want_hmac);
    assert!(aes.finish().unwrap() == cpu_ctr(&[8; 32], &[1; 16], &plain));
    let sealed = seal.finish().unwrap();
    assert_eq!((sealed.ciphertext, sealed.tag), (ct, tag));
    assert_eq!(open.finish().unwrap(), plain);
    drop(crypto);
    finish(device);
}

/// Seals `n` records, each in a flush of its own, all in one poll: nothing reads the counter
/// between the flushes. Returns the barriers recorded.
fn seal_in_consecutive_flushes(device: &vkasync::Device, crypto: &Arc<Crypto>, n: u64) -> u64 {
    let exec = Executor::new(device).unwrap();
    let mut ctx = exec.context();
    let crypto = crypto.clone();
    let h = exec.spawn(async move {
        let keys = RecordKeys::new(&[5; 32], b"k", [0; 4])?;
        let mut pending = Vec::new();
        for seq in 0..n {
            pending.push(crypto.prepare_seal(&mut ctx, &keys, seq, &bytes(1000, seq))?);
            ctx.flush();
        }
        ctx.synchronize().await?;
        pending.into_iter().map(|p| p.finish()).collect::<Result<Vec<_>, Error>>()
    });
    exec.run();
    for (seq, sealed) in h.join().unwrap().unwrap().into_iter().enumerate() {
        let (ct, tag) = cpu_seal(&[5; 32], b"k", [0; 4], seq as u64, &bytes(1000, seq as u64));
        assert_eq!((sealed.ciphertext, sealed.tag), (ct, tag));
    }
    let s = exec.stats();
    assert_eq!(s.submits, n, "{s}");
    s.barriers
}

#[test]
fn flushes_of_records_do_not_wait_for_the_running_flushes_before_them() {
    let device = device();
    let crypto = Arc::new(Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu));
    // Their staging ranges are apart and their tables their own: no flush opens with a barrier
    // that would keep the GPU from running it beside the one before.
    let one = seal_in_consecutive_flushes(&device, &crypto, 1);
    assert_eq!(seal_in_consecutive_flushes(&device, &crypto, 4), 4 * one);
    drop(crypto);
    finish(device);
}

#[test]
fn staging_memory_is_reused_across_flushes() {
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    let exec = Executor::new(&device).unwrap();
    let keys = RecordKeys::new(&[1; 32], b"k", [0; 4]).unwrap();
    let mut peak = 0;
    // 40 rounds of 100 records of 16 KiB: 64 MiB staged in all, through the same few chunks.
    for round in 0..40u64 {
        let handles: Vec<_> = (0..100u64)
            .map(|i| {
                let (crypto, keys) = (crypto.clone(), keys.clone());
                exec.spawn_with(move |ctx| async move {
                    let mut buf = bytes(16384, round * 1000 + i);
                    crypto.seal_in_place(&ctx, &keys, round * 1000 + i, &mut buf).await.map(|_| ())
                })
            })
            .collect();
        exec.block_on(async {
            for h in handles {
                h.await.unwrap().unwrap();
            }
        });
        peak = peak.max(device.memory_report().live_bytes);
    }
    // A 32 MiB chunk (and its read-back twin on a discrete GPU), a spare or two, and tables.
    assert!(peak <= (6 * 33) << 20, "live bytes peaked at {peak}");
    drop((exec, crypto));
    finish(device);
}

/// A user's kind: one round of `mix` over each item's buffer (one dispatch per item here; a
/// real kind would gather the items into one table and one dispatch).
struct MixOnce {
    kernel: Kernel,
    /// What `submitted` was told: (items, value) per flush.
    submitted: std::sync::Mutex<Vec<(usize, u64)>>,
}

impl BatchKind for MixOnce {
    type Item = (Arc<Buffer<u32>>, Arc<std::sync::Mutex<Option<Error>>>);
    fn encode(&self, items: &mut Vec<Self::Item>, enc: &mut Encoder<'_>) -> vkasync::Result<()> {
        for (buf, _) in items.iter() {
            let n = buf.len() as u32;
            let push: Vec<u8> = [n, 1u32].iter().flat_map(|w| w.to_le_bytes()).collect();
            enc.dispatch(&self.kernel, [n.div_ceil(64), 1, 1], &[Arg::storage(&**buf)], &push)?;
        }
        Ok(())
    }
    fn fail(&self, items: Vec<Self::Item>, error: &Error) {
        for (_, slot) in items {
            *slot.lock().unwrap() = Some(error.clone());
        }
    }
    fn submitted(&self, items: &[Self::Item], value: u64) {
        self.submitted.lock().unwrap().push((items.len(), value));
    }
}

/// A kind whose encode always fails.
struct Broken;

impl BatchKind for Broken {
    type Item = Arc<std::sync::Mutex<Option<Error>>>;
    fn encode(&self, _items: &mut Vec<Self::Item>, enc: &mut Encoder<'_>) -> vkasync::Result<()> {
        // A nested batch is refused, and the error fails this kind's items only.
        enc.batch(&Arc::new(Broken), Arc::default())
    }
    fn fail(&self, items: Vec<Self::Item>, error: &Error) {
        for slot in items {
            *slot.lock().unwrap() = Some(error.clone());
        }
    }
}

#[test]
fn a_users_own_kind_joins_and_a_failing_kind_fails_only_its_items() {
    let device = device();
    let kind =
        Arc::new(MixOnce { kernel: Kernel::new(&device, &kernels::MIX).unwrap(), submitted: Default::default() });
    let broken = Arc::new(Broken);
    let exec = Executor::new(&device).unwrap();
    let mut handles = Vec::new();
    for t in 0..20u32 {
        let (kind, broken) = (kind.clone(), broken.clone());
        handles.push(exec.spawn_with(move |ctx| async move {
            let data: Vec<u32> = (0..300).map(|i| i * 7 + t).collect();
            let buf = Arc::new(Buffer::<u32>::new(ctx.device(), data.len(), MemoryKind::Device)?);
            ctx.upload(&buf, &data)?;
            ctx.synchronize().await?;
            let failed = Arc::new(std::sync::Mutex::new(None));
            ctx.batch(&kind, (buf.clone(), failed.clone()))?;
            let broken_slot = Arc::new(std::sync::Mutex::new(None));
            ctx.batch(&broken, broken_slot.clone())?;
            // An item's output is the task's only after its flush completed (a read-back
            // recorded in the same epoch would be ordered before the batch).
            ctx.synchronize().await?;
            let got = ctx.read(&buf).await?;
            assert!(failed.lock().unwrap().is_none());
            assert!(matches!(*broken_slot.lock().unwrap(), Some(Error::InvalidArgument(_))));
            Ok::<_, Error>(got == data.iter().map(|&x| mix_cpu(x, 1)).collect::<Vec<_>>())
        }));
    }
    let ok = exec.block_on(async {
        let mut ok = 0;
        for h in handles {
            ok += h.await.unwrap().unwrap() as usize;
        }
        ok
    });
    assert_eq!(ok, 20);
    // Each flush that carried the kind's items told it its timeline value, once, after the
    // submission: every item in exactly one of them.
    let told = kind.submitted.lock().unwrap().clone();
    assert_eq!(told.iter().map(|&(n, _)| n).sum::<usize>(), 20, "{told:?}");
    let last = device.last_submitted();
    assert!(told.iter().all(|&(n, v)| n > 0 && v > 0 && v <= last), "{told:?} (last submitted {last})");
    assert!(told.windows(2).all(|w| w[0].1 < w[1].1), "one call per flush, in order: {told:?}");
    drop(exec);
    finish(device);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
    ))]
    /// Any mix of record lengths, key sizes, MAC keys and sequence numbers, sealed in one flush,
    /// matches the RustCrypto composition, and opens back.
    #[test]
    fn sealed_records_match_the_rustcrypto_composition(
        records in proptest::collection::vec(
            (0usize..2500, prop::bool::ANY, 0usize..100, any::<u64>(), any::<[u8; 4]>(), any::<u64>()),
            1..12,
        )
    ) {
        let device = device();
        let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
        let mut cmds = CommandList::new(&device);
        let mut pending = Vec::new();
        for (len, big, mac_len, seq, prefix, seed) in &records {
            let aes_key = bytes(if *big { 32 } else { 16 }, *seed);
            let mac_key = bytes(*mac_len, seed ^ 1);
            let plain = bytes(*len, seed ^ 2);
            let keys = RecordKeys::new(&aes_key, &mac_key, *prefix).unwrap();
            let p = crypto.prepare_seal(&mut cmds, &keys, *seq, &plain).unwrap();
            pending.push((p, cpu_seal(&aes_key, &mac_key, *prefix, *seq, &plain)));
        }
        cmds.submit_and_wait().unwrap();
        for (p, (ct, tag)) in pending {
            let s = p.finish().unwrap();
            prop_assert!(s.ciphertext == ct, "ciphertext differs");
            prop_assert_eq!(s.tag, tag);
        }
        drop(crypto);
        assert_no_validation_messages(&device);
    }
}

/// Flushes of thousands of records, one after another through one `Crypto`: each flush writes
/// its key and row tables into the memory of the tables of flushes before it (see the crypto
/// batch's `Spare`), longer or shorter than its own; every record still matches RustCrypto,
/// whether its keys are shared with its neighbours or not.
#[test]
fn flushes_of_thousands_of_records_one_after_another_match_rustcrypto() {
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    for (round, n) in [5000u64, 300, 2000].into_iter().enumerate() {
        let mut cmds = CommandList::new(&device);
        let mut pending = Vec::new();
        for i in 0..n {
            // Runs of four records share their keys; every 700th uses one key of its own.
            let seed = if i % 700 == 0 { 1_000_000 + round as u64 } else { i / 4 + 10_000 * round as u64 };
            let aes_key = bytes(if seed % 2 == 0 { 16 } else { 32 }, seed);
            let mac_key = bytes(1 + (seed % 70) as usize, seed ^ 1);
            let plain = bytes((i % 13) as usize * 29, i ^ seed);
            let prefix = (seed as u32).to_le_bytes();
            let keys = RecordKeys::new(&aes_key, &mac_key, prefix).unwrap();
            let p = crypto.prepare_seal(&mut cmds, &keys, i, &plain).unwrap();
            pending.push((p, cpu_seal(&aes_key, &mac_key, prefix, i, &plain)));
        }
        cmds.submit_and_wait().unwrap();
        for (i, (p, (ct, tag))) in pending.into_iter().enumerate() {
            let s = p.finish().unwrap();
            assert!(s.ciphertext == ct, "round {round}, record {i}: ciphertext differs");
            assert_eq!(s.tag, tag, "round {round}, record {i}: tag differs");
        }
    }
    drop(crypto);
    assert_no_validation_messages(&device);
}

#[test]
fn small_flushes_run_on_the_host_and_agree_with_the_gpu() {
    let device = device();
    let gpu = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    let host = gpu.clone().with_offload(vkasync::crypto::Offload::Host);
    let split = gpu.clone().with_offload(vkasync::crypto::Offload::Below(10_000));
    assert_eq!((gpu.offload_threshold(), host.offload_threshold(), split.offload_threshold()), (0, u64::MAX, 10_000));
    // On a CPU device (lavapipe) the runtime's own choice is the host; on a GPU, the crossover
    // measured on the H200.
    let auto = if device.info().device_type == vkasync::DeviceType::Cpu {
        u64::MAX
    } else {
        vkasync::crypto::GPU_CROSSOVER_BASE_BYTES
    };
    assert_eq!(Crypto::new(&device).unwrap().offload_threshold(), auto);
    let keys = RecordKeys::new(&[4; 16], b"mac", [1; 4]).unwrap();
    let msgs: Vec<Vec<u8>> = (0..20).map(|i| bytes(i * 37, i as u64)).collect();
    for (crypto, name) in [(&gpu, "gpu"), (&host, "host"), (&split, "below 10,000 bytes")] {
        for n in [1usize, 40] {
            let exec = Executor::new(&device).unwrap();
            let handles: Vec<_> = (0..n as u64)
                .map(|i| {
                    let (crypto, keys, msgs) = (crypto.clone(), keys.clone(), msgs.clone());
                    exec.spawn_with(move |ctx| async move {
                        let plain = bytes(300 + i as usize, i);
                        let s = crypto.seal(&ctx, &keys, i, &plain).await?;
                        let opened = crypto.open(&ctx, &keys, i, &s.ciphertext, &s.tag).await?;
                        let bad = crypto.open(&ctx, &keys, i + 1, &s.ciphertext, &s.tag).await;
                        let digests = crypto.hmac_sha256_many(&ctx, b"hk", &msgs).await?;
                        let ct = crypto.aes_ctr(&ctx, &[9; 32], &[i as u8; 16], &plain).await?;
                        Ok::<_, Error>(
                            (s.ciphertext, s.tag) == cpu_seal(&[4; 16], b"mac", [1; 4], i, &plain)
                                && opened == plain
                                && bad == Err(Error::AuthenticationFailed)
                                && digests == msgs.iter().map(|m| cpu_hmac(b"hk", &[m])).collect::<Vec<_>>()
                                && ct == cpu_ctr(&[9; 32], &[i as u8; 16], &plain),
                        )
                    })
                })
                .collect();
            let ok = exec.block_on(async {
                let mut ok = 0;
                for h in handles {
                    ok += h.await.unwrap().unwrap() as usize;
                }
                ok
            });
            assert_eq!(ok, n, "{name}, {n} task(s)");
            let s = exec.stats();
            match name {
                "gpu" => assert!(s.dispatches > 0, "{name}: {s}"),
                "host" => assert_eq!(s.dispatches, 0, "{name}: {s}"),
                // One task's flushes are small (host); 40 tasks' first flushes carry more.
                _ if n == 1 => assert_eq!(s.dispatches, 0, "{name}: {s}"),
                _ => {}
            }
        }
    }
    drop((gpu, host, split));
    finish(device);
}

#[test]
fn large_inputs_go_through_in_pieces_that_overlap() {
    let _w = Watchdog::new(std::time::Duration::from_secs(600));
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    let exec = Executor::new(&device).unwrap();
    let ctx = exec.context();
    // 40 MiB and a few bytes: three pieces of at most 16 MiB, the last one partial.
    let data = bytes((40 << 20) + 5, 1);
    let key = vkasync::crypto::AesKey::new(&[6; 32]).unwrap();
    let iv = [0xff; 16]; // the counter wraps inside the first piece
    let want = cpu_ctr(&[6; 32], &iv, &data);
    let msgs: Vec<Vec<u8>> = (0..1100).map(|i| bytes(16384 - i % 3, i as u64)).collect();
    let c = crypto.clone();
    let (ct, in_place, macs) = exec.block_on(async move {
        let ct = c.aes_ctr(&ctx, &[6; 32], &iv, &data).await.unwrap();
        let mut buf = data.clone();
        c.aes_ctr_in_place(&ctx, &key, &iv, &mut buf).await.unwrap();
        let macs = c.hmac_sha256_many(&ctx, b"key", &msgs).await.unwrap();
        (ct, buf, macs)
    });
    assert!(ct == want, "aes_ctr in pieces");
    assert!(in_place == want, "aes_ctr_in_place in pieces");
    let msgs: Vec<Vec<u8>> = (0..1100).map(|i| bytes(16384 - i % 3, i as u64)).collect();
    assert!(macs == msgs.iter().map(|m| cpu_hmac(b"key", &[m])).collect::<Vec<_>>(), "HMAC of 17 MiB");
    // Each piece is submitted on its own, so that staging the next overlaps the GPU's work.
    assert!(exec.stats().submits >= 3 + 3, "{}", exec.stats());
    drop((exec, crypto));
    finish(device);
}

#[test]
fn records_of_200_mib_seal_and_open_like_rustcrypto_on_every_offload_side() {
    use vkasync::crypto::Offload;
    let _w = Watchdog::new(std::time::Duration::from_secs(600));
    let device = device();
    let len = 200 << 20;
    let (aes_key, mac_key, prefix, seq) = ([9u8; 32], b"a mac key for long records", [4, 3, 2, 1], 77);
    let t = std::time::Instant::now();
    let plaintext = bytes(len, 5);
    let (want_ct, want_tag) = cpu_seal(&aes_key, mac_key, prefix, seq, &plaintext);
    eprintln!("reference: {:?}", t.elapsed());
    let queue = Queue::new(&device).unwrap();
    let keys = RecordKeys::new(&aes_key, mac_key, prefix).unwrap();
    let ctx = queue.context();
    for offload in [Offload::Gpu, Offload::Host, Offload::Auto] {
        let t = std::time::Instant::now();
        let crypto = Crypto::new(&device).unwrap().with_offload(offload);
        futures::executor::block_on(async {
            if offload == Offload::Host {
                // In place, both ways.
                let mut buf = plaintext.clone();
                let tag = crypto.seal_in_place(&ctx, &keys, seq, &mut buf).await?;
                assert!(tag == want_tag && buf == want_ct, "{offload:?}: sealed in place");
                crypto.open_in_place(&ctx, &keys, seq, &mut buf, &tag).await?;
                assert!(buf == plaintext, "{offload:?}: opened in place");
            } else {
                let sealed = crypto.seal(&ctx, &keys, seq, &plaintext).await?;
                assert!(sealed.ciphertext == want_ct, "{offload:?}: ciphertext differs from RustCrypto's");
                assert_eq!(sealed.tag, want_tag, "{offload:?}: tag");
                let opened = crypto.open(&ctx, &keys, seq, &sealed.ciphertext, &sealed.tag).await?;
                assert!(opened == plaintext, "{offload:?}: opened record");
            }
            // A forged record, or the wrong sequence number, releases nothing: the buffer keeps
            // the ciphertext.
            let mut forged = want_ct.clone();
            forged[len / 2] ^= 1;
            let r = crypto.open_in_place(&ctx, &keys, seq, &mut forged, &want_tag).await;
            assert!(matches!(r, Err(Error::AuthenticationFailed)), "{offload:?}: {r:?}");
            assert!(forged[..len / 2] == want_ct[..len / 2], "{offload:?}: nothing decrypted");
            let r = crypto.open(&ctx, &keys, seq + 1, &want_ct, &want_tag).await;
            assert!(matches!(r, Err(Error::AuthenticationFailed)), "{offload:?}: wrong sequence number");
            Ok::<_, Error>(())
        })
        .unwrap();
        eprintln!("{offload:?}: {:?}", t.elapsed());
    }
    drop((ctx, queue));
    finish(device);
}

#[test]
fn records_the_host_takes_at_once_match_the_flushed_ones() {
    let device = device();
    let gpu = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    let host = gpu.clone().with_offload(vkasync::crypto::Offload::Host);
    let auto = Crypto::new(&device).unwrap();
    let exec = Executor::new(&device).unwrap();
    let ctx = exec.context();
    let keys = RecordKeys::new(&[9; 32], b"a mac key", [0, 1, 2, 3]).unwrap();
    let (g, h, a, c) = (gpu.clone(), host.clone(), auto.clone(), ctx.clone());
    let submits = exec.block_on(async move {
        let mut host_submits = 0;
        for len in [0usize, 1, 47, 48, 1000, 4095, 16384, 65536, 65537] {
            let plain = bytes(len, len as u64 + 11);
            let want = g.seal(&c, &keys, 3, &plain).await.unwrap();
            for crypto in [&h, &a] {
                let before = c.device().last_submitted();
                assert_eq!(crypto.seal(&c, &keys, 3, &plain).await.unwrap(), want, "{len} B");
                let mut buf = plain.clone();
                assert_eq!(crypto.seal_in_place(&c, &keys, 3, &mut buf).await.unwrap(), want.tag, "{len} B");
                assert_eq!(buf, want.ciphertext, "{len} B");
                assert_eq!(crypto.open(&c, &keys, 3, &want.ciphertext, &want.tag).await.unwrap(), plain);
                crypto.open_in_place(&c, &keys, 3, &mut buf, &want.tag).await.unwrap();
                assert_eq!(buf, plain, "{len} B");
                if std::ptr::eq(crypto, &h) {
                    host_submits += c.device().last_submitted() - before;
                }
            }
        }
        reject_cases(&h, &c).await;
        host_submits
    });
    // Always on the host: nothing of it was submitted to the device.
    assert_eq!(submits, 0);
    drop((exec, ctx, gpu, host, auto));
    finish(device);
}

/// A task that seals a record holds the seal's future in its own state while it waits, so that
/// future's size is memory per waiting connection (10,000 connections: 10,000 of them). The
/// item a seal hands to the batch is not kept in it as well, the item and the wait that follows
/// it share their bytes, and the path of records too long for one slot is boxed: with rustc
/// 1.95, `seal_staged` 328 bytes (576 when a local held the 192-byte item across the await, 384
/// with the item and the wait side by side) and `seal_in_place` 368 (600 with the long path
/// inline).
#[test]
fn a_seal_waits_in_a_future_that_holds_neither_its_item_nor_the_long_path() {
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    let exec = Executor::new(&device).unwrap();
    let keys = RecordKeys::new(&[1; 32], b"k", [0; 4]).unwrap();
    let mut rec = crypto.staged_record(16384).unwrap();
    let (c, k, ctx) = (crypto.clone(), keys.clone(), exec.context());
    let (staged, in_place) = exec.block_on(async move {
        let seal = c.seal_staged(&ctx, &k, 0, &mut rec);
        let staged = std::mem::size_of_val(&seal);
        let tag = seal.await.unwrap();
        let (ct, want) = cpu_seal(&[1; 32], b"k", [0; 4], 0, &[0; 16384]);
        assert_eq!((rec.bytes().unwrap(), tag), (&ct[..], want), "a new record holds zeros");
        let plain = bytes(16384, 3);
        let mut buf = plain.clone();
        let seal = c.seal_in_place(&ctx, &k, 1, &mut buf);
        let in_place = std::mem::size_of_val(&seal);
        let tag = seal.await.unwrap();
        assert_eq!((buf, tag), cpu_seal(&[1; 32], b"k", [0; 4], 1, &plain));
        (staged, in_place)
    });
    assert!(staged <= 352, "the staged seal's future is {staged} bytes");
    assert!(in_place <= 392, "the in-place seal's future is {in_place} bytes");
    drop((exec, crypto));
    finish(device);
}

/// Records in staging memory seal and open in place like RustCrypto's composition on every
/// offload side, on the native executor and from tokio workers through a `Queue`; a wrong tag
/// zeroes the record; a seal whose future is dropped before it finishes never shows a partial
/// result; a record too long for one slot is refused.
#[test]
fn staged_records_seal_and_open_in_place_like_rustcrypto() {
    let _w = Watchdog::new(std::time::Duration::from_secs(300));
    let device = device();
    let gpu = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    let sides = [gpu.clone(), gpu.clone().with_offload(vkasync::crypto::Offload::Host), Crypto::new(&device).unwrap()];
    let exec = Executor::new(&device).unwrap();
    let ctx = exec.context();
    let (aes_key, mac_key) = (bytes(32, 1), bytes(20, 2));
    let keys = RecordKeys::new(&aes_key, &mac_key, [4, 3, 2, 1]).unwrap();
    let dispatches_before = exec.stats().dispatches;
    let (s, c, k, a, m) = (sides.clone(), ctx.clone(), keys.clone(), aes_key.clone(), mac_key.clone());
    exec.block_on(async move {
        let (ctx, keys, aes_key, mac_key) = (c, k, a, m);
        for crypto in &s {
            for len in [0usize, 1, 47, 48, 1000, 4095, 16384, 65537] {
                let plain = bytes(len, len as u64 + 5);
                let mut rec = crypto.staged_record(len).unwrap();
                assert_eq!(rec.len(), len);
                assert!(rec.bytes().unwrap().iter().all(|&b| b == 0), "a new record is zeroed");
                rec.bytes_mut().unwrap().copy_from_slice(&plain);
                let tag = crypto.seal_staged(&ctx, &keys, 7, &mut rec).await.unwrap();
                let (ct, want_tag) = cpu_seal(&aes_key, &mac_key, [4, 3, 2, 1], 7, &plain);
                assert_eq!((rec.bytes().unwrap(), tag), (&ct[..], want_tag), "{len} B");
                crypto.open_staged(&ctx, &keys, 7, &mut rec, &tag).await.unwrap();
                assert_eq!(rec.bytes().unwrap(), &plain[..], "{len} B opened");
                // A forged tag: refused, and nothing of the decryption is left.
                crypto.seal_staged(&ctx, &keys, 8, &mut rec).await.unwrap();
                let mut forged = tag;
                forged[0] ^= 1;
                let e = crypto.open_staged(&ctx, &keys, 8, &mut rec, &forged).await.unwrap_err();
                assert!(matches!(e, Error::AuthenticationFailed), "{len} B: {e:?}");
                assert!(rec.bytes().unwrap().iter().all(|&b| b == 0), "{len} B: zeroed after a forged tag");
            }
        }
    });
    assert!(exec.stats().dispatches > dispatches_before, "the GPU side dispatched");
    let limit = device.limits().max_storage_buffer_range.min(device.limits().max_buffer_size);
    assert!(matches!(gpu.staged_record(limit as usize).unwrap_err(), Error::TooLarge { .. }));
    // A record made for another device is refused, not bound there.
    {
        let other = common::device();
        let other_crypto = Crypto::new(&other).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
        let other_exec = Executor::new(&other).unwrap();
        let other_ctx = other_exec.context();
        let mut rec = gpu.staged_record(4096).unwrap();
        let (c, k) = (other_crypto.clone(), keys.clone());
        let (g, oc) = (gpu.clone(), other_ctx.clone());
        let errors = other_exec.block_on(async move {
            let mut buf = vec![1u8; 4096];
            [
                c.seal_staged(&oc, &k, 0, &mut rec).await.unwrap_err(),
                g.seal_staged(&oc, &k, 0, &mut rec).await.unwrap_err(),
                // Any crypto call through a context of another device.
                g.seal_in_place(&oc, &k, 0, &mut buf).await.unwrap_err(),
            ]
        });
        for e in errors {
            assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        }
        drop(other_ctx);
        drop((other_exec, other_crypto));
        finish(other);
    }

    // From tokio workers: 64 connections, each its own record, coalesced into few dispatches.
    let queue = Queue::new(&device).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().unwrap();
    let ok = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for c in 0..64u64 {
            let (crypto, ctx) = (gpu.clone(), queue.context());
            set.spawn(async move {
                let (aes_key, mac_key) = (bytes(16, c), bytes(32, c + 99));
                let keys = RecordKeys::new(&aes_key, &mac_key, [9; 4]).unwrap();
                let mut rec = crypto.staged_record(2000).unwrap();
                let mut ok = true;
                for seq in 0..5 {
                    let plain = bytes(2000, c ^ seq);
                    rec.bytes_mut().unwrap().copy_from_slice(&plain);
                    let tag = crypto.seal_staged(&ctx, &keys, seq, &mut rec).await.unwrap();
                    let (ct, want) = cpu_seal(&aes_key, &mac_key, [9; 4], seq, &plain);
                    ok &= rec.bytes().unwrap() == &ct[..] && tag == want;
                }
                ok
            });
        }
        let mut ok = 0;
        while let Some(r) = set.join_next().await {
            ok += r.unwrap() as usize;
        }
        ok
    });
    assert_eq!(ok, 64);
    let s = queue.stats();
    assert!(s.dispatches <= 2 * s.flushes && s.flushes < 64 * 5, "{s}");

    // A seal dropped after its first poll: the record is refused until its work is done, and
    // then holds the whole ciphertext.
    let plain = bytes(1 << 20, 77);
    let mut rec = gpu.staged_record(plain.len()).unwrap();
    rec.bytes_mut().unwrap().copy_from_slice(&plain);
    let qctx = queue.context();
    rt.block_on(async {
        let mut seal = Box::pin(gpu.seal_staged(&qctx, &keys, 1, &mut rec));
        // One poll records the seal (a GPU that finished it at once would make the rest moot).
        let first =
            std::future::poll_fn(|cx| std::task::Poll::Ready(std::future::Future::poll(seal.as_mut(), cx))).await;
        if let std::task::Poll::Ready(r) = first {
            r.unwrap();
        }
    });
    let (ct, _) = cpu_seal(&aes_key, &mac_key, [4, 3, 2, 1], 1, &plain);
    match rec.bytes() {
        Err(Error::NotReady) => {}
        Ok(b) => assert_eq!(b, &ct[..], "a finished seal shows its whole result"),
        Err(e) => panic!("{e:?}"),
    }
    futures::executor::block_on(qctx.synchronize()).unwrap();
    assert_eq!(rec.bytes().unwrap(), &ct[..]);
    // And the record takes the next seal.
    rec.bytes_mut().unwrap().copy_from_slice(&plain);
    let tag = futures::executor::block_on(gpu.seal_staged(&qctx, &keys, 2, &mut rec)).unwrap();
    assert_eq!((rec.bytes().unwrap(), tag), {
        let (c, t) = cpu_seal(&aes_key, &mac_key, [4, 3, 2, 1], 2, &plain);
        (&c.clone()[..], t)
    });
    drop((rt, queue, qctx, exec, ctx, sides, gpu, rec));
    finish(device);
}

/// A record staged into a command list that is dropped unsubmitted reports that its work was
/// discarded (`SubmitFailed`), rather than `NotReady` for ever.
#[test]
fn records_whose_recording_is_dropped_unsubmitted_report_it() {
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    let keys = RecordKeys::new(&[2; 32], b"k", [0; 4]).unwrap();
    let mut cmds = CommandList::new(&device);
    let pending = crypto.prepare_seal(&mut cmds, &keys, 0, &[1; 100]).unwrap();
    drop(cmds);
    let e = pending.finish().unwrap_err();
    assert!(matches!(e, Error::SubmitFailed(_)), "{e:?}");
    drop(crypto);
    finish(device);
}

/// `Offload::Auto`'s GPU rule (forced here on lavapipe) seals a lone 16 KiB record at once in
/// the calling task, up to two host-sized flushes of work; the next record joins a flush, which
/// the rule runs on the host, and that re-opens the credit. Many records ready at once: those
/// past the credit coalesce into a flush that goes to the GPU, which closes the credit; heavier
/// host flushes leave it closed, and so does one light host flush of a few records, while a
/// second light one in a row re-opens it. Every record matches RustCrypto.
#[test]
fn auto_seals_large_records_at_once_while_the_host_takes_the_load() {
    use vkasync::crypto::{GPU_CROSSOVER_BASE_BYTES, GPU_CROSSOVER_BYTES_PER_BLOCK};
    let _w = Watchdog::new(std::time::Duration::from_secs(300));
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_gpu_auto_rule();
    // Flushes only when no task is ready, so that the ready records past the credit share one.
    let exec = Executor::builder(&device).flush_policy(vkasync::FlushPolicy::WhenIdle).build().unwrap();
    let (aes_key, mac_key, prefix) = (bytes(32, 3), bytes(32, 4), [1, 2, 3, 4]);
    let keys = RecordKeys::new(&aes_key, &mac_key, prefix).unwrap();
    let len = 16384u64;
    // The work of one sealed record (AES and HMAC bytes) and the crossover for a flush of them:
    // its HMAC covers the 16-byte nonce and the data, with padding and the outer hash. The
    // credit holds two such flushes (`Offload::Auto`'s docs).
    let work = 2 * (16 + len);
    let limit = GPU_CROSSOVER_BASE_BYTES + GPU_CROSSOVER_BYTES_PER_BLOCK * ((16 + len + 9).div_ceil(64) + 1);
    let at_once = (2 * limit / work) as usize;
    assert!(at_once >= 2, "the crossover holds a few 16 KiB records");
    let ctx = exec.context();
    let (c, k) = (crypto.clone(), keys.clone());
    let (a, m) = (aes_key.clone(), mac_key.clone());
    let seal_one = move |seq: u64| {
        let (c, k, ctx, a, m) = (c.clone(), k.clone(), ctx.clone(), a.clone(), m.clone());
        async move {
            let mut buf = bytes(len as usize, seq);
            let (want_ct, want_tag) = cpu_seal(&a, &m, prefix, seq, &buf);
            let tag = c.seal_in_place(&ctx, &k, seq, &mut buf).await.unwrap();
            assert!(buf == want_ct && tag == want_tag, "record {seq}: differs from RustCrypto");
        }
    };
    let flushes = |exec: &Executor| exec.stats().flushes;
    // `n` records ready at once, sealed by their own tasks.
    let run_together = |n: u64, from: u64| {
        let handles: Vec<_> = (0..n).map(|i| exec.spawn(seal_one(from + i))).collect();
        exec.block_on(async move {
            for h in handles {
                h.await.expect("a sealing task panicked");
            }
        });
    };
    // A lone connection: `at_once` records at once (no flush), the next through a flush that
    // stays on the host (nothing submitted), then at once again.
    let mut seq = 0;
    for _ in 0..at_once {
        exec.block_on(seal_one(seq));
        seq += 1;
    }
    assert_eq!(flushes(&exec), 0, "the first {at_once} records were sealed at once");
    exec.block_on(seal_one(seq));
    seq += 1;
    let s = exec.stats();
    assert_eq!((s.flushes, s.submits), (1, 0), "the next one joined a flush, run on the host: {s}");
    exec.block_on(seal_one(seq));
    seq += 1;
    assert_eq!(flushes(&exec), 1, "the host flush re-opened the credit");
    // Many records ready at once: the first ones within the credit go at once, the others in
    // one flush, which goes to the GPU.
    let many = 4 * at_once;
    run_together(many as u64, seq);
    seq += many as u64;
    let s = exec.stats();
    assert_eq!((s.flushes, s.submits), (2, 1), "the {many} ready records past the credit went to the GPU: {s}");
    assert_eq!(s.await_points as usize, 1 + many - (at_once - 1), "all but the credit's records waited: {s}");
    // The GPU flush closed the credit: a lone record joins a flush (then run on the host).
    let before = exec.stats();
    exec.block_on(seal_one(seq));
    seq += 1;
    let s = exec.stats();
    assert_eq!(
        (s.flushes - before.flushes, s.submits - before.submits),
        (1, 0),
        "after a GPU flush, a lone record joins a flush, run on the host: {s}"
    );
    exec.block_on(seal_one(seq));
    seq += 1;
    assert_eq!(flushes(&exec), s.flushes, "and that host flush re-opened the credit");
    // Close it again, then records a few at a time: two host flushes of more than half of the
    // crossover leave it closed (such a load may be one the GPU or the driver thread takes), one
    // light host flush of three leaves it closed, the second in a row re-opens it.
    run_together(many as u64, seq);
    seq += many as u64;
    let closed = exec.stats();
    assert_eq!(closed.submits, s.submits + 1, "closed by a flush on the GPU: {closed}");
    let heavy = (limit / work / 2 + 1) as usize;
    assert!(heavy > 3 && heavy <= at_once / 4 + 1, "half of the crossover is a few records");
    for _ in 0..2 {
        run_together(heavy as u64, seq);
        seq += heavy as u64;
    }
    let before = exec.stats();
    assert_eq!(
        (before.flushes - closed.flushes, before.submits - closed.submits),
        (2, 0),
        "{heavy} records twice: two host flushes, still closed: {before}"
    );
    run_together(3, seq);
    seq += 3;
    let s = exec.stats();
    assert_eq!((s.flushes - before.flushes, s.submits - before.submits), (1, 0), "three records, one host flush: {s}");
    run_together(3, seq);
    seq += 3;
    let s = exec.stats();
    assert_eq!((s.flushes - before.flushes, s.submits - before.submits), (2, 0), "again, a second host flush: {s}");
    exec.block_on(seal_one(seq));
    assert_eq!(flushes(&exec), s.flushes, "the second host flush in a row re-opened the credit");
    drop((seal_one, exec, crypto));
    finish(device);
}

/// A thread-per-core server runs one executor per thread, all on one device: each executor's
/// tasks seal their own staged records, each executor submits and waits for its own flushes
/// (one timeline), and every record matches RustCrypto with no validation message.
#[test]
fn executors_on_several_threads_seal_on_one_device() {
    let _w = Watchdog::new(std::time::Duration::from_secs(300));
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(vkasync::crypto::Offload::Gpu);
    let (threads, conns, records) = (4u64, 16u64, 3u64);
    let stats: Vec<vkasync::Stats> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let crypto = crypto.clone();
                s.spawn(move || {
                    let exec = Executor::new(crypto.device()).unwrap();
                    let tasks: Vec<_> = (0..conns)
                        .map(|c| {
                            let (crypto, id) = (crypto.clone(), t * conns + c);
                            exec.spawn_with(move |ctx| async move {
                                let (aes_key, mac_key) = (bytes(32, id), bytes(32, id + 1000));
                                let keys = RecordKeys::new(&aes_key, &mac_key, [3; 4])?;
                                let len = 100 + 37 * id as usize;
                                let mut rec = crypto.staged_record(len)?;
                                let mut ok = 0;
                                for seq in 0..records {
                                    let plain = bytes(len, id ^ (seq << 20));
                                    rec.bytes_mut()?.copy_from_slice(&plain);
                                    let tag = crypto.seal_staged(&ctx, &keys, seq, &mut rec).await?;
                                    let (ct, want) = cpu_seal(&aes_key, &mac_key, [3; 4], seq, &plain);
                                    ok += usize::from(rec.bytes()? == &ct[..] && tag == want);
                                }
                                Ok::<_, Error>(ok)
                            })
                        })
                        .collect();
                    let ok: usize = exec.block_on(async {
                        let mut ok = 0;
                        for h in tasks {
                            ok += h.await.unwrap().unwrap();
                        }
                        ok
                    });
                    assert_eq!(ok, (conns * records) as usize, "thread {t}");
                    exec.stats()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Each executor coalesced its own tasks' records: fewer dispatches than records.
    for s in &stats {
        assert!(s.submits >= 1 && s.dispatches < 2 * conns * records, "{s}");
    }
    drop(crypto);
    finish(device);
}
