//! Copy queues on the real device, with validation: a flush's uploads, kernels and read-backs
//! go to the GPU as three parts joined by semaphores (on lavapipe, which has no transfer-only
//! queue family, all three on its one queue, the same batches and waits as on a GPU that has
//! one). Results match the CPU, every part is there, ordering after running work and after
//! submissions by hand still holds, and nothing is leaked.

mod common;

use common::*;
use std::rc::Rc;
use std::time::Duration;
use vkasync::crypto::{Crypto, Offload, RecordKeys};
use vkasync::{Buffer, CommandList, Device, Error, Executor, Kernel, MemoryKind, Queue, Recorder};

/// The test device driven as a discrete GPU (every upload and read-back a staging copy), with
/// copy queues on and `turns` compute queues taken in turn.
fn copy_device_with(turns: u32) -> Device {
    device_with(|b| b.always_stage(true).copy_queues(true).compute_queues(turns))
}

fn copy_device() -> Device {
    copy_device_with(1)
}

#[test]
fn the_device_reports_where_its_copy_queues_are() {
    let device = copy_device();
    let q = device.copy_queues().expect("asked for");
    let transfer_only = device.info().queue_families.iter().any(|f| f.transfer && !f.compute && !f.graphics);
    assert_eq!(q.separate_input, transfer_only, "{q:?} on {:?}", device.info().queue_families);
    if !transfer_only {
        assert_eq!(q.family, device.queue_family());
        assert!(!q.separate_output);
    }
    assert_eq!((q.compute_turns, q.compute_queues), (1, 1));
    let off = device_with(|b| b.copy_queues(false));
    assert_eq!(off.copy_queues(), None);
    drop(off);
    let turns = copy_device_with(3);
    let q = turns.copy_queues().unwrap();
    let family = &turns.info().queue_families[turns.queue_family() as usize];
    assert_eq!((q.compute_turns, q.compute_queues), (3, family.queue_count.min(3)), "{q:?}");
    drop(turns);
    finish(device);
}

#[test]
fn records_sealed_by_tokio_tasks_run_in_three_parts_and_match_rustcrypto() {
    for turns in [1, 3] {
        seal_by_tokio_tasks(copy_device_with(turns));
    }
}

fn seal_by_tokio_tasks(device: Device) {
    let _w = Watchdog::new(Duration::from_secs(300));
    let crypto = Crypto::new(&device).unwrap().with_offload(Offload::Gpu);
    let queue = Queue::new(&device).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().unwrap();
    let wrong = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for c in 0..300u64 {
            let (crypto, ctx) = (crypto.clone(), queue.context());
            set.spawn(async move {
                let (aes, mac) = (bytes(32, c), bytes(40, c + 7));
                let k = RecordKeys::new(&aes, &mac, [c as u8; 4]).unwrap();
                let mut wrong = 0;
                for seq in 0..3 {
                    let plain = bytes(1 + (c as usize * 131 + seq as usize * 17) % 3000, c ^ (seq << 20));
                    let s = crypto.seal(&ctx, &k, seq, &plain).await.unwrap();
                    wrong += ((s.ciphertext, s.tag) != cpu_seal(&aes, &mac, [c as u8; 4], seq, &plain)) as usize;
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
    // Each flush: the items' staging ranges up (input), the kernels, the results back (output).
    assert!(s.submits > 0, "{s:?}");
    assert_eq!(s.command_buffers, 3 * s.submits, "{s:?}");
    drop((rt, queue, crypto));
    finish(device);
}

#[test]
fn tasks_that_upload_dispatch_and_read_back_get_their_results() {
    let _w = Watchdog::new(Duration::from_secs(300));
    let device = copy_device();
    let mix = Kernel::new(&device, &vkasync::kernels::MIX).unwrap();
    let exec = Executor::new(&device).unwrap();
    let n = 200u32;
    let handles: Vec<_> = (0..n)
        .map(|t| {
            let (ctx, mix) = (exec.context(), mix.clone());
            exec.spawn(async move {
                let first = mix_task(ctx.clone(), mix.clone(), t, 64 + t as usize, 3).await?;
                // A second round on the same data, through a buffer the task keeps.
                let buf = Buffer::<u32>::new(ctx.device(), first.len(), MemoryKind::Device)?;
                ctx.upload(&buf, &first)?;
                dispatch_mix(&ctx, &mix, &buf, 2)?;
                Ok::<_, Error>((first, ctx.read(&buf).await?))
            })
        })
        .collect();
    exec.run();
    for (t, h) in handles.into_iter().enumerate() {
        let (first, second) = h.join().unwrap().unwrap();
        let want = mix_expected(t as u32, 64 + t, 3);
        assert_eq!(first, want, "task {t}");
        assert_eq!(second, want.iter().map(|&x| mix_cpu(x, 2)).collect::<Vec<_>>(), "task {t}");
    }
    let s = exec.stats();
    assert_eq!(s.command_buffers, 3 * s.submits, "{s}");
    drop((exec, mix));
    finish(device);
}

/// Records one `mix` round on `buf` in `exec` and submits it without waiting; returns how many
/// submissions `exec` has ordered after running work so far.
fn dispatch_and_submit(exec: &Executor, mix: &Kernel, buf: &Rc<Buffer<u32>>) -> u64 {
    let (ctx, mix, buf) = (exec.context(), mix.clone(), buf.clone());
    let h = exec.spawn(async move {
        dispatch_mix(&ctx, &mix, &buf, 1)?;
        ctx.flush();
        Ok::<_, Error>(())
    });
    exec.run();
    h.join().unwrap().unwrap();
    exec.stats().barriers
}

#[test]
fn work_after_running_writes_and_submissions_by_hand_waits_for_them() {
    // With one compute queue, and with compute parts taking three in turn (each submission
    // below then runs on another turn than the one it must follow).
    for turns in [1, 3] {
        ordered_after_running_work(copy_device_with(turns));
    }
}

fn ordered_after_running_work(device: Device) {
    let _w = Watchdog::new(Duration::from_secs(300));
    let mix = Kernel::new(&device, &vkasync::kernels::MIX).unwrap();
    let (a, b) = (Executor::new(&device).unwrap(), Executor::new(&device).unwrap());
    let x = Rc::new(Buffer::<u32>::from_slice(&device, &[7; 64]).unwrap());
    // A long first submission, so that the next ones are decided while it runs.
    let long = Rc::new(Buffer::<u32>::new_uninit(&device, 64 * 1024, MemoryKind::Device).unwrap());
    let (ctx, mix2, long2) = (a.context(), mix.clone(), long.clone());
    let h = a.spawn(async move {
        ctx.dispatch(&mix2, [1024, 1, 1], &[(&*long2).into()], bytemuck::bytes_of(&[64u32 * 1024, 65_000]))?;
        ctx.flush();
        Ok::<_, Error>(())
    });
    a.run();
    h.join().unwrap().unwrap();
    assert_eq!(dispatch_and_submit(&a, &mix, &x), 0, "nothing it uses ran before");
    assert_eq!(dispatch_and_submit(&b, &mix, &x), 1, "ordered after the other executor's write");
    // A submission by hand goes through the same parts, and the next one is ordered after it
    // (while the long one still runs, so that neither has completed when that is decided).
    // SAFETY: no command buffer.
    let by_hand = unsafe { device.submit_raw(&[]) }.unwrap();
    let other = Rc::new(Buffer::<u32>::from_slice(&device, &[2; 64]).unwrap());
    assert_eq!(dispatch_and_submit(&a, &mix, &other), 1, "ordered after the submission by hand");
    assert!(device.wait(by_hand + 1, Some(Duration::from_secs(120))).unwrap());
    let ctx = a.context();
    let (x2, o2) = (x.clone(), other.clone());
    let h = a.spawn(async move { Ok::<_, Error>([ctx.read(&*x2).await?, ctx.read(&*o2).await?]) });
    a.run();
    let [gx, go] = h.join().unwrap().unwrap();
    assert_eq!(gx, vec![mix_cpu(mix_cpu(7, 1), 1); 64], "the two writes of x ran one after the other");
    assert_eq!(go, vec![mix_cpu(2, 1); 64]);
    // So does a blocking list.
    let y = Buffer::<u32>::from_slice(&device, &[3; 64]).unwrap();
    let mut list = CommandList::new(&device);
    dispatch_list(&mut list, &mix, &y);
    list.submit_and_wait().unwrap();
    assert_eq!(y.read().unwrap(), vec![mix_cpu(3, 1); 64]);
    drop((a, b, x, long, other, y, mix));
    finish(device);
}

/// Records one `mix` round on `buf` into a blocking list.
fn dispatch_list(list: &mut CommandList, mix: &Kernel, buf: &Buffer<u32>) {
    let push = [buf.len() as u32, 1];
    list.dispatch(mix, [mix.groups_for(buf.len() as u64), 1, 1], &[buf.into()], bytemuck::bytes_of(&push)).unwrap();
}
