//! Submissions spread over several queues of one device (`DeviceBuilder::queues`): each flush
//! runs on the next lane, ordered only after earlier flushes that wrote what it reads or used
//! what it writes, while the device's timeline still rises in order. lavapipe offers one queue,
//! so there the lanes share it: every lane submission (two batches, the lane's own timeline,
//! the waits) goes through the driver and the validation layer, but nothing runs side by side.

mod common;

use common::*;
use vkasync::crypto::{Crypto, Offload, RecordKeys};
use vkasync::{kernels, Buffer, CommandList, Error, Executor, FlushPolicy, Kernel, MemoryKind, Queue, Recorder};

fn lanes_device(n: u32) -> vkasync::Device {
    let _ = env_logger::builder().is_test(true).try_init();
    builder().queues(n).build().expect("a Vulkan device with the validation layer")
}

#[test]
fn queue_counts_outside_one_to_sixty_four_are_refused() {
    for n in [0, 65, u32::MAX] {
        match builder().queues(n).build() {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("queues"), "{m}"),
            other => panic!("queues({n}): {other:?}"),
        }
    }
    let device = lanes_device(64);
    let (lanes, queues) = device.queues();
    assert_eq!(lanes, 64);
    assert!((1..=64).contains(&queues), "{queues}");
    assert_eq!(device_default_lanes(), 1);
    finish(device);
}

fn device_default_lanes() -> usize {
    // The default is one lane (no `VKASYNC_QUEUES` in the test environment).
    assert!(std::env::var("VKASYNC_QUEUES").is_err(), "tests run without VKASYNC_QUEUES");
    device().queues().0
}

/// One task: `x` mixed once and flushed; then mixed twice more in the next flush, which reads
/// and writes `x` and so is ordered after the first. A second task on its own buffers is not.
#[test]
fn a_flush_waits_for_the_flush_that_wrote_its_buffer_and_no_other() {
    let _w = Watchdog::new(std::time::Duration::from_secs(120));
    let device = lanes_device(3);
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let exec = Executor::builder(&device).flush_policy(FlushPolicy::WhenIdle).build().unwrap();
    let data: Vec<u32> = (0..4096).collect();
    let chained = {
        let (mix, data) = (mix.clone(), data.clone());
        exec.spawn_with(move |ctx| async move {
            let x = Buffer::<u32>::new(ctx.device(), data.len(), MemoryKind::Device)?;
            ctx.upload(&x, &data)?;
            ctx.dispatch(&mix, [64, 1, 1], &[(&x).into()], bytemuck::bytes_of(&[4096u32, 1]))?;
            ctx.flush();
            ctx.dispatch(&mix, [64, 1, 1], &[(&x).into()], bytemuck::bytes_of(&[4096u32, 2]))?;
            ctx.read(&x).await
        })
    };
    let out = exec.block_on(chained).unwrap().unwrap();
    assert!(out.iter().zip(&data).all(|(&o, &d)| o == mix_cpu(d, 3)));
    let (ordered, waited) = device.debug_lane_orders();
    assert_eq!(ordered, 1, "only the second flush reads what an earlier one wrote");
    assert!(waited <= ordered);
    // Independent work: fresh buffers only, so no order at all.
    let alone = {
        let (mix, data) = (mix.clone(), data.clone());
        exec.spawn_with(move |ctx| async move {
            let y = Buffer::<u32>::new(ctx.device(), data.len(), MemoryKind::Device)?;
            ctx.upload(&y, &data)?;
            ctx.dispatch(&mix, [64, 1, 1], &[(&y).into()], bytemuck::bytes_of(&[4096u32, 5]))?;
            ctx.read(&y).await
        })
    };
    let out = exec.block_on(alone).unwrap().unwrap();
    assert!(out.iter().zip(&data).all(|(&o, &d)| o == mix_cpu(d, 5)));
    assert_eq!(device.debug_lane_orders().0, 1, "a flush of fresh buffers waits for nothing");
    drop((exec, mix));
    finish(device);
}

/// Many tasks, each a chain of steps over its own buffer and a shared read-only one, under
/// group commit (flushes split where the timing says): every result right on every lane, the
/// shared buffer never ordering the readers after each other.
#[test]
fn chains_of_many_tasks_are_right_on_every_lane() {
    let _w = Watchdog::new(std::time::Duration::from_secs(300));
    for lanes in [2, 4] {
        let device = lanes_device(lanes);
        let mix = Kernel::new(&device, &kernels::MIX).unwrap();
        let exec = Executor::new(&device).unwrap();
        let shared: Vec<u32> = (0..1024).map(|i| i * 7).collect();
        let table = std::sync::Arc::new(Buffer::<u32>::new(&device, shared.len(), MemoryKind::Device).unwrap());
        exec.block_on({
            let (ctx, table, shared) = (exec.context(), table.clone(), shared.clone());
            async move {
                ctx.upload(&*table, &shared)?;
                ctx.synchronize().await
            }
        })
        .unwrap();
        let mut handles = Vec::new();
        for t in 0..48u32 {
            let (mix, table) = (mix.clone(), table.clone());
            handles.push(exec.spawn_with(move |ctx| async move {
                let data: Vec<u32> = (0..1024).map(|i| i ^ (t << 16)).collect();
                let x = Buffer::<u32>::new(ctx.device(), data.len(), MemoryKind::Device)?;
                let copy = Buffer::<u32>::new(ctx.device(), data.len(), MemoryKind::Device)?;
                ctx.upload(&x, &data)?;
                let mut rounds = 0;
                for step in 0..3u32 {
                    let k = 1 + (t + step) % 3;
                    ctx.dispatch(&mix, [16, 1, 1], &[(&x).into()], bytemuck::bytes_of(&[1024u32, k]))?;
                    rounds += k;
                    if step == 1 {
                        ctx.flush(); // the next step's flush reads what this one wrote
                    }
                    // The shared table, only read (copied out): no order between the tasks.
                    ctx.copy(&*table, &copy)?;
                    let got = ctx.read(&x).await?;
                    let want: Vec<u32> = data.iter().map(|&d| mix_cpu(d, rounds)).collect();
                    if got != want {
                        return Ok::<_, Error>(false);
                    }
                }
                Ok(ctx.read(&copy).await? == (0..1024).map(|i| i * 7).collect::<Vec<u32>>())
            }));
        }
        let ok = exec.block_on(async {
            let mut ok = 0;
            for h in handles {
                ok += h.await.unwrap().unwrap() as usize;
            }
            ok
        });
        assert_eq!(ok, 48, "{lanes} lanes");
        let (ordered, waited) = device.debug_lane_orders();
        assert!(ordered > 0 && waited <= ordered, "{lanes} lanes: {ordered} {waited}");
        drop((exec, mix, table));
        finish(device);
    }
}

/// The crypto batch on lanes: tokio workers seal records of their own connections, staged and
/// not, and the blocking path seals beside them; every record matches RustCrypto, and the
/// staging blocks (shared by the records of many flushes) order no flush after another.
#[test]
fn records_sealed_on_lanes_match_rustcrypto() {
    let _w = Watchdog::new(std::time::Duration::from_secs(300));
    let device = lanes_device(2);
    let crypto = Crypto::new(&device).unwrap().with_offload(Offload::Gpu);
    let queue = Queue::new(&device).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let ok = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for c in 0..32u64 {
            let (crypto, ctx) = (crypto.clone(), queue.context());
            set.spawn(async move {
                let (aes, mac) = ([c as u8; 32], [c as u8 ^ 0x5a; 32]);
                let keys = RecordKeys::new(&aes, &mac, [1, 2, 3, 4]).unwrap();
                let mut ok = true;
                let mut staged = crypto.staged_record(2000).unwrap();
                for seq in 0..6u64 {
                    let plain: Vec<u8> = (0..1000 + (c as usize * 31 + seq as usize * 7) % 1000)
                        .map(|i| (i as u64 ^ c ^ seq) as u8)
                        .collect();
                    let s = crypto.seal(&ctx, &keys, seq, &plain).await.unwrap();
                    ok &= (s.ciphertext.clone(), s.tag) == cpu_seal(&aes, &mac, [1, 2, 3, 4], seq, &plain);
                    let full: Vec<u8> = (0..2000).map(|i| (i as u64 * 3 ^ c ^ seq) as u8).collect();
                    staged.bytes_mut().unwrap().copy_from_slice(&full);
                    let tag = crypto.seal_staged(&ctx, &keys, seq, &mut staged).await.unwrap();
                    let (ct, want) = cpu_seal(&aes, &mac, [1, 2, 3, 4], seq, &full);
                    ok &= tag == want && staged.bytes_mut().unwrap() == &ct[..];
                }
                ok
            });
        }
        // The blocking path beside them, through its own command lists.
        let mut cmds = CommandList::new(&device);
        let keys = RecordKeys::new(&[9; 16], b"mac", [0; 4]).unwrap();
        let plain = vec![7u8; 3000];
        let seal = crypto.prepare_seal(&mut cmds, &keys, 1, &plain).unwrap();
        cmds.submit_and_wait().unwrap();
        let sealed = seal.finish().unwrap();
        let mut ok = usize::from((sealed.ciphertext, sealed.tag) == cpu_seal(&[9; 16], b"mac", [0; 4], 1, &plain));
        while let Some(r) = set.join_next().await {
            ok += r.unwrap() as usize;
        }
        ok
    });
    assert_eq!(ok, 33);
    let s = queue.stats();
    assert!(s.flushes > 2, "{s}");
    drop((rt, queue, crypto));
    finish(device);
}

fn cpu_seal(aes_key: &[u8], mac_key: &[u8], prefix: [u8; 4], seq: u64, plaintext: &[u8]) -> (Vec<u8>, [u8; 32]) {
    use hmac::Mac;
    let mut nonce = [0u8; 16];
    nonce[..4].copy_from_slice(&prefix);
    nonce[4..12].copy_from_slice(&seq.to_be_bytes());
    let ct = cpu_ctr(aes_key, &nonce, plaintext);
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(mac_key).unwrap();
    m.update(&nonce);
    m.update(&ct);
    (ct, m.finalize().into_bytes().into())
}

/// The blocking path on lanes: command lists submitted and waited one after another over one
/// buffer, then read through an executor.
#[test]
fn blocking_command_lists_on_lanes_keep_their_order() {
    let device = lanes_device(3);
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let x = std::sync::Arc::new(Buffer::<u32>::new(&device, 256, MemoryKind::Device).unwrap());
    let data: Vec<u32> = (0..256).collect();
    let mut cmds = CommandList::new(&device);
    cmds.upload(&*x, &data).unwrap();
    cmds.submit_and_wait().unwrap();
    for k in 1..=4u32 {
        let mut cmds = CommandList::new(&device);
        cmds.dispatch(&mix, [4, 1, 1], &[(&*x).into()], bytemuck::bytes_of(&[256u32, k])).unwrap();
        cmds.submit_and_wait().unwrap();
    }
    let exec = Executor::new(&device).unwrap();
    let out = exec
        .block_on({
            let (ctx, x) = (exec.context(), x.clone());
            async move { ctx.read(&*x).await }
        })
        .unwrap();
    assert!(out.iter().zip(&data).all(|(&o, &d)| o == mix_cpu(d, 10)));
    drop((exec, mix, x));
    finish(device);
}
