//! Copies of many small regions by one dispatch of the library's copy kernel (buffer device
//! addresses), on a device driven as a discrete GPU so that uploads and read-backs are copies.

mod common;

use common::*;
use std::time::Duration;
use vkasync::{Buffer, Device, Executor, Kernel, MemoryKind};

/// The tests of this file run one at a time: validation layers older than 1.3.275 crashed
/// inside their own code when several devices with device-address buffers recorded at once
/// (see `DeviceBuilder::compute_copies`).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn staged(compute_copies: bool) -> (Device, Kernel) {
    let device = builder()
        .always_stage(true)
        .compute_copies(compute_copies)
        .build()
        .expect("a Vulkan device with the validation layer (run the README's test command)");
    let mix = Kernel::new(&device, &vkasync::kernels::MIX).unwrap();
    (device, mix)
}

/// 64 jobs of upload, `mix`, read back: with compute copies on, each flush's uploads and
/// read-backs go through the copy kernel; off, through `vkCmdCopyBuffer`; the results are the
/// same and right.
#[test]
fn the_small_copies_of_many_jobs_go_through_one_dispatch_per_phase() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let _w = Watchdog::new(Duration::from_secs(300));
    for on in [true, false] {
        let (device, mix) = staged(on);
        assert_eq!(device.compute_copies(), on, "lavapipe offers buffer device addresses");
        let exec = Executor::builder(&device).flush_policy(vkasync::FlushPolicy::WhenIdle).build().unwrap();
        let n = 1024;
        let handles: Vec<_> = (0..64u32).map(|t| exec.spawn(mix_task(exec.context(), mix.clone(), t, n, 3))).collect();
        exec.run();
        for (t, h) in handles.into_iter().enumerate() {
            assert_eq!(h.join().unwrap().unwrap(), mix_expected(t as u32, n, 3), "task {t}");
        }
        let s = exec.stats();
        if on {
            // One submit: the uploads' phase and the read-backs' phase, one dispatch each.
            assert_eq!(s.submits, 1, "{s:?}");
            assert_eq!(s.copy_dispatches, 2, "{s:?}");
        } else {
            assert_eq!(s.copy_dispatches, 0, "{s:?}");
        }
        assert_eq!(s.dispatches, 64, "the copy kernel's dispatches are not counted as the jobs': {s:?}");
        drop((exec, mix));
        // Nothing else holds the device: its copy kernel does not hold it (a kernel holding the
        // device that holds it would keep both forever).
        assert_eq!(device.debug_handle_count(), 1, "compute copies {on}");
        assert_eq!(device.debug_copy_kernel().is_some(), on, "the copy kernel is made where it is used");
        finish(device);
    }
}

/// Every queue of a device uses the device's one copy kernel: a queue made after another was
/// dropped finds it made, and its first flush does not create the pipeline again.
#[test]
fn queues_made_one_after_another_share_the_devices_copy_kernel() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let _w = Watchdog::new(Duration::from_secs(300));
    let (device, mix) = staged(true);
    assert_eq!(device.debug_copy_kernel(), None, "made at its first use, not with the device");
    let mut pipelines = Vec::new();
    for round in 0..3u32 {
        let exec = Executor::builder(&device).flush_policy(vkasync::FlushPolicy::WhenIdle).build().unwrap();
        let handles: Vec<_> =
            (0..8u32).map(|t| exec.spawn(mix_task(exec.context(), mix.clone(), round * 8 + t, 256, 2))).collect();
        exec.run();
        for (t, h) in handles.into_iter().enumerate() {
            assert_eq!(
                h.join().unwrap().unwrap(),
                mix_expected(round * 8 + t as u32, 256, 2),
                "round {round} task {t}"
            );
        }
        assert_eq!(exec.stats().copy_dispatches, 2, "round {round}: {:?}", exec.stats());
        drop(exec);
        pipelines.push(device.debug_copy_kernel().expect("made by the first flush"));
    }
    assert!(pipelines.iter().all(|p| *p == pipelines[0]), "one pipeline: {pipelines:?}");
    drop(mix);
    assert_eq!(device.debug_handle_count(), 1);
    finish(device);
}

/// Regions the kernel does not take (sizes and offsets that are not multiples of 4 bytes,
/// regions above its bound) keep `vkCmdCopyBuffer`, beside the ones it takes in the same phase.
#[test]
fn odd_and_large_regions_beside_small_ones_all_arrive() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let _w = Watchdog::new(Duration::from_secs(300));
    let (device, _mix) = staged(true);
    let exec = Executor::builder(&device).flush_policy(vkasync::FlushPolicy::WhenIdle).build().unwrap();
    let sizes: Vec<usize> = vec![4, 13, 64, 1023, 4096, 4097, 65_536, 65_537, 300_000, 8, 12, 3];
    let mut handles = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let ctx = exec.context();
        let device = device.clone();
        handles.push(exec.spawn(async move {
            let data: Vec<u8> = (0..len).map(|j| (j * 31 + i * 7) as u8).collect();
            let buf = Buffer::<u8>::new(&device, len, MemoryKind::Device)?;
            ctx.upload(&buf, &data)?;
            // A copy into the middle of a second buffer, at an odd offset.
            let other = Buffer::<u8>::new(&device, len + 5, MemoryKind::Device)?;
            ctx.copy_region(&buf, 0, &other, 3, len)?;
            let (a, b) = (ctx.read(&buf).await?, ctx.read(&other).await?);
            Ok::<_, vkasync::Error>((data, a, b))
        }));
    }
    exec.run();
    for (i, h) in handles.into_iter().enumerate() {
        let (data, a, b) = h.join().unwrap().unwrap();
        assert_eq!(a, data, "buffer {i}");
        assert_eq!(&b[3..3 + data.len()], &data[..], "copy {i}");
        assert!(b[..3].iter().chain(&b[3 + data.len()..]).all(|&x| x == 0), "copy {i}: the rest reads as zeros");
    }
    let s = exec.stats();
    assert!(s.copy_dispatches >= 1, "the small aligned regions went through the kernel: {s:?}");
    drop(exec);
    finish(device);
}

/// More regions in one phase than the device's workgroup count allows go in several
/// dispatches over parts of the table, and all arrive.
#[test]
fn more_regions_than_one_dispatch_can_take_go_in_several() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let _w = Watchdog::new(Duration::from_secs(600));
    let (device, _mix) = staged(true);
    let per = device.limits().max_compute_work_group_count[0] as usize;
    let n = per + 2;
    if n as u64 * 4 > device.limits().max_storage_buffer_range {
        // One dispatch takes more regions than a buffer can hold words (2^31 - 1 groups on
        // NVIDIA): nothing to split on this device.
        eprintln!("not applicable here: {n} one-word regions need more than one buffer's range");
        return;
    }
    let exec = Executor::builder(&device)
        .flush_policy(vkasync::FlushPolicy::WhenIdle)
        .max_pending_ops(usize::MAX)
        .build()
        .unwrap();
    let data: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2654435761)).collect();
    let task = exec.spawn({
        let (ctx, device, data) = (exec.context(), device.clone(), data.clone());
        async move {
            let src = Buffer::<u32>::new(&device, n, MemoryKind::Device)?;
            ctx.upload(&src, &data)?;
            ctx.synchronize().await?;
            let dsts =
                (0..n).map(|_| Buffer::<u32>::new(&device, 1, MemoryKind::Device)).collect::<Result<Vec<_>, _>>()?;
            // One phase of n one-word copies into n buffers.
            for (i, d) in dsts.iter().enumerate() {
                ctx.copy_region(&src, i, d, 0, 1)?;
            }
            ctx.synchronize().await?;
            let mut got = Vec::new();
            for i in [0, 1, per - 1, per, per + 1] {
                got.push((i, ctx.read(&dsts[i]).await?));
            }
            Ok::<_, vkasync::Error>(got)
        }
    });
    exec.run();
    let got = task.join().unwrap().unwrap();
    for (i, v) in got {
        assert_eq!(v, vec![data[i]], "buffer {i}");
    }
    let s = exec.stats();
    // The upload and each read-back are flushes of one region (no kernel); the n copies need
    // ceil(n / per) dispatches.
    assert_eq!(s.copy_dispatches, n.div_ceil(per) as u64, "{s:?}");
    drop(exec);
    finish(device);
}
