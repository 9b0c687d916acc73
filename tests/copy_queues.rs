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
    let from_env = std::env::var_os("VKASYNC_SPLIT_FLUSHES").is_some();
    if !from_env {
        assert_eq!(q.split_bytes, 0, "one compute queue: flushes are not split by default");
    }
    let off = device_with(|b| b.copy_queues(false));
    assert_eq!(off.copy_queues(), None);
    drop(off);
    let turns = copy_device_with(3);
    let q = turns.copy_queues().unwrap();
    let family = &turns.info().queue_families[turns.queue_family() as usize];
    assert_eq!((q.compute_turns, q.compute_queues), (3, family.queue_count.min(3)), "{q:?}");
    if !from_env {
        assert_eq!(q.split_bytes, 16 << 20, "several compute turns: parts of 16 MiB by default");
    }
    drop(turns);
    finish(device);
}

#[test]
fn records_sealed_by_tokio_tasks_run_in_three_parts_and_match_rustcrypto() {
    for turns in [1, 3] {
        seal_by_tokio_tasks(copy_device_with(turns));
    }
}

/// A flush whose records carry more than twice the split size goes as several submissions of
/// consecutive records, each in its three parts; every record still matches RustCrypto. The
/// tasks whose records went through their thread's lane are woken at their own part's value,
/// not all at the last part's.
#[test]
fn a_heavy_flush_split_into_submissions_seals_every_record_right() {
    let device = device_with(|b| b.always_stage(true).copy_queues(true).split_flushes(16 << 10));
    assert_eq!(device.copy_queues().unwrap().split_bytes, 16 << 10);
    let s = seal_by_tokio_tasks(device);
    assert!(s.submits > s.flushes, "some flush split into several submissions: {s:?}");
    assert!(s.part_wakes > 0 && s.part_wakes < s.laned_items, "lane tasks woken at their parts' values: {s:?}");
    // Off: one submission per flush.
    let device = device_with(|b| b.always_stage(true).copy_queues(true).split_flushes(0));
    let s = seal_by_tokio_tasks(device);
    assert!(s.submits <= s.flushes, "{s:?}");
}

/// On the native executor, one flush of 200 records split into 8 submissions (the most): every
/// task's result is right once the last part completed.
#[test]
fn an_executors_heavy_flush_goes_as_eight_submissions() {
    let device = device_with(|b| b.always_stage(true).copy_queues(true).split_flushes(4 << 10));
    let crypto = Crypto::new(&device).unwrap().with_offload(Offload::Gpu);
    let exec = Executor::builder(&device).flush_policy(vkasync::FlushPolicy::WhenIdle).build().unwrap();
    let handles: Vec<_> = (0..200u64)
        .map(|c| {
            let (crypto, ctx) = (crypto.clone(), exec.context());
            exec.spawn(async move {
                let (aes, mac) = (bytes(32, c), bytes(40, c + 3));
                let k = RecordKeys::new(&aes, &mac, [c as u8; 4]).unwrap();
                let plain = bytes(1 + (c as usize * 97) % 3000, c);
                let s = crypto.seal(&ctx, &k, 0, &plain).await.unwrap();
                (s.ciphertext, s.tag) == cpu_seal(&aes, &mac, [c as u8; 4], 0, &plain)
            })
        })
        .collect();
    exec.run();
    let right = handles.into_iter().filter_map(|h| h.join().unwrap().then_some(())).count();
    assert_eq!(right, 200, "records that match RustCrypto's");
    let s = exec.stats();
    assert_eq!((s.flushes, s.submits), (1, 8), "{s}");
    drop((exec, crypto));
    finish(device);
}

fn seal_by_tokio_tasks(device: Device) -> vkasync::Stats {
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
    // Each flush: the items' staging ranges up (input), the kernels, the results back (output);
    // with the copy kernel, ranges of small regions stay with the kernels (see
    // `a_small_job_stays_with_the_kernels_and_a_large_one_takes_the_copy_queues`).
    assert!(s.submits > 0, "{s:?}");
    if device.compute_copies() {
        assert!((s.submits..=3 * s.submits).contains(&s.command_buffers), "{s:?}");
    } else {
        assert_eq!(s.command_buffers, 3 * s.submits, "{s:?}");
    }
    drop((rt, queue, crypto));
    finish(device);
    s
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
    // Every copy is of one small region: with the copy kernel it stays in the compute part.
    let parts = if device.compute_copies() { 1 } else { 3 };
    assert_eq!(s.command_buffers, parts * s.submits, "{s}");
    drop((exec, mix));
    finish(device);
}

/// Runs `mix_task` for task `t` over `n` words alone in a flush; returns the command buffers
/// its submission took.
fn lone_job_parts(device: &Device, mix: &Kernel, t: u32, n: usize) -> u64 {
    let exec = Executor::new(device).unwrap();
    let h = exec.spawn(mix_task(exec.context(), mix.clone(), t, n, 2));
    exec.run();
    assert_eq!(h.join().unwrap().unwrap(), mix_expected(t, n, 2), "{n} words");
    let s = exec.stats();
    assert_eq!(s.submits, 1, "{s}");
    s.command_buffers
}

#[test]
fn a_small_job_stays_with_the_kernels_and_a_large_one_takes_the_copy_queues() {
    let _w = Watchdog::new(Duration::from_secs(300));
    let device = copy_device();
    let mix = Kernel::new(&device, &vkasync::kernels::MIX).unwrap();
    // A 256-byte upload and read-back: with the copy kernel (on in the staged pass of the
    // test command) they are copied by it in the compute part, one batch to submit; without
    // it they take the copy queues.
    let small = lone_job_parts(&device, &mix, 1, 64);
    assert_eq!(small, if device.compute_copies() { 1 } else { 3 }, "compute copies: {}", device.compute_copies());
    // 256 KiB each way: one region of more than `QUEUE_REGION` goes to the copy queues always.
    assert_eq!(lone_job_parts(&device, &mix, 2, 64 << 10), 3);
    drop(mix);
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

#[test]
fn a_traced_flush_shows_its_uploads_before_its_kernels_and_its_read_backs_after() {
    let _w = Watchdog::new(Duration::from_secs(300));
    let device = copy_device_with(2);
    let path = std::env::temp_dir().join(format!("vkasync-copy-queues-{}.json", std::process::id()));
    let mix = Kernel::new(&device, &vkasync::kernels::MIX).unwrap();
    let tasks = 40u32;
    // 64 KiB and more per task: uploads and read-backs large enough for the copy queues even
    // where the copy kernel could take them.
    const WORDS: usize = 16 << 10;
    {
        let exec = Executor::builder(&device).trace(&path).build().unwrap();
        let handles: Vec<_> = (0..tasks)
            .map(|t| exec.spawn(mix_task(exec.context(), mix.clone(), t, WORDS + 64 * t as usize, 2)))
            .collect();
        exec.run();
        for (t, h) in handles.into_iter().enumerate() {
            assert_eq!(h.join().unwrap().unwrap(), mix_expected(t as u32, WORDS + 64 * t, 2));
        }
        let s = exec.stats();
        assert_eq!(s.command_buffers, 3 * s.submits, "traced flushes are split too: {s}");
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let trace: serde_json::Value = serde_json::from_str(&text).unwrap();
    // GPU spans of commands: (value, name, start, end, calibration error), in µs.
    let gpu: Vec<(u64, String, f64, f64, f64)> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "gpu" && e["name"] != "phase")
        .filter(|e| !e["name"].as_str().unwrap().starts_with("submission"))
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap();
            let err = e["args"]["calibration_error_ns"].as_f64().unwrap_or(0.0) / 1e3;
            let value = e["args"]["value"].as_u64().unwrap();
            (value, e["name"].as_str().unwrap().to_string(), ts, ts + e["dur"].as_f64().unwrap(), err)
        })
        .collect();
    let values: std::collections::BTreeSet<u64> = gpu.iter().map(|g| g.0).collect();
    assert!(!values.is_empty(), "no GPU spans");
    let mut mixes = 0;
    for v in values {
        let of = |kernel: bool| gpu.iter().filter(move |g| g.0 == v && g.1.starts_with("mix") == kernel);
        let (first, last) = of(true).fold((f64::MAX, f64::MIN), |(a, b), g| (a.min(g.2), b.max(g.3)));
        // A run of n dispatches of one kind is one span named "mix ×n".
        mixes += of(true).map(|g| g.1.strip_prefix("mix ×").map_or(1, |n| n.parse::<usize>().unwrap())).sum::<usize>();
        let (mut before, mut after) = (0, 0);
        for &(_, ref name, start, end, err) in of(false) {
            assert!(name.starts_with("copy") || name.starts_with("clear"), "{name}");
            // Each copy runs wholly before the submission's kernels (an upload) or wholly
            // after them (a read-back), within the calibration's error.
            if end <= first + err + 1.0 {
                before += 1;
            } else {
                assert!(
                    start + err + 1.0 >= last,
                    "submission {v}: {name} [{start}, {end}] beside kernels [{first}, {last}]"
                );
                after += 1;
            }
        }
        assert!(before > 0 && after > 0, "submission {v}: {before} uploads, {after} read-backs");
    }
    assert_eq!(mixes as u32, tasks, "every task's kernel in the trace");
    drop(mix);
    finish(device);
}
