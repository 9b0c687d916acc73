//! A `Queue`'s coalesced items added through the lanes (without the queue's lock, while the
//! GPU has no room for another submission), on the real device: results match RustCrypto,
//! every wait ends with its work done, no waiter is left behind, and tasks cancelled with items
//! in the lanes neither hang the queue's close nor free memory the GPU may still use.

mod common;

use common::*;
use std::time::Duration;
use vkasync::crypto::{Crypto, Offload, RecordKeys};
use vkasync::Queue;

/// Connection `c`'s keys.
fn keys(c: u64) -> (Vec<u8>, Vec<u8>, RecordKeys) {
    let (aes, mac) = (bytes(32, c), bytes(40, c + 7));
    let k = RecordKeys::new(&aes, &mac, [c as u8; 4]).unwrap();
    (aes, mac, k)
}

#[test]
fn records_sealed_by_many_tokio_tasks_go_through_the_lanes_and_match_rustcrypto() {
    let _w = Watchdog::new(Duration::from_secs(300));
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(Offload::Gpu);
    let queue = Queue::new(&device).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().unwrap();
    let tasks = 600u64;
    let wrong = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for c in 0..tasks {
            let (crypto, ctx) = (crypto.clone(), queue.context());
            set.spawn(async move {
                let (aes, mac, k) = keys(c);
                let mut wrong = 0;
                for seq in 0..3 {
                    let plain = bytes(1 + (c as usize * 131 + seq as usize * 17) % 3000, c ^ (seq << 20));
                    let want = cpu_seal(&aes, &mac, [c as u8; 4], seq, &plain);
                    // Staged (no host copy) and copied records, alternately.
                    let got = if (c + seq) % 2 == 0 {
                        let mut rec = crypto.staged_record(plain.len()).unwrap();
                        rec.bytes_mut().unwrap().copy_from_slice(&plain);
                        let tag = crypto.seal_staged(&ctx, &k, seq, &mut rec).await.unwrap();
                        (rec.bytes().unwrap().to_vec(), tag)
                    } else {
                        let s = crypto.seal(&ctx, &k, seq, &plain).await.unwrap();
                        (s.ciphertext, s.tag)
                    };
                    wrong += (got != want) as usize;
                }
                wrong
            });
        }
        let mut wrong = 0;
        while let Some(r) = set.join_next().await {
            wrong += r.unwrap();
        }
        wrong
    });
    assert_eq!(wrong, 0, "records that differ from RustCrypto's");
    let s = queue.stats();
    assert!(s.laned_items > 0, "no item went through a lane: {s:?}");
    assert!(s.laned_items <= tasks * 3, "{s:?}");
    assert!(s.flushes < tasks * 3, "items were coalesced: {s:?}");
    assert_eq!(queue.live_waiters(), 0, "every wait gave its slot back");
    drop((rt, queue, crypto));
    finish(device);
}

#[test]
fn tasks_cancelled_with_items_in_the_lanes_leave_them_to_run_and_the_queue_closes() {
    let _w = Watchdog::new(Duration::from_secs(300));
    let device = device();
    let crypto = Crypto::new(&device).unwrap().with_offload(Offload::Gpu);
    let mut laned = 0;
    for round in 0..3u64 {
        let queue = Queue::new(&device).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_time().build().unwrap();
        for c in 0..400u64 {
            let (crypto, ctx) = (crypto.clone(), queue.context());
            rt.spawn(async move {
                let (_, _, k) = keys(c + round);
                let mut rec = crypto.staged_record(2048).unwrap();
                for seq in 0.. {
                    rec.bytes_mut().unwrap().fill(seq as u8);
                    crypto.seal_staged(&ctx, &k, seq, &mut rec).await.unwrap();
                }
            });
        }
        // The tasks run a while, then are dropped wherever they are: some with an item in a
        // lane, some with one in a flush on its way to the GPU.
        std::thread::sleep(Duration::from_millis(50 + 100 * round));
        laned += queue.stats().laned_items;
        rt.shutdown_timeout(Duration::from_secs(10));
        // Their items still run (the staging memory they use lives until then), the queue
        // closes within its bound, and a new one works on the same device.
        drop(queue);
    }
    assert!(laned > 0, "no item went through a lane");
    let queue = Queue::new(&device).unwrap();
    let ctx = queue.context();
    let (aes, mac, k) = keys(1);
    let got = futures::executor::block_on(crypto.seal(&ctx, &k, 0, b"after the cancelled tasks")).unwrap();
    assert_eq!((got.ciphertext, got.tag), cpu_seal(&aes, &mac, [1; 4], 0, b"after the cancelled tasks"));
    drop((ctx, queue, crypto));
    finish(device);
}
