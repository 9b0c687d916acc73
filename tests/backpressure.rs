//! A memory bound on a queue: past it, `Ctx::buffer` awaits instead of failing, so many more
//! jobs than fit in memory complete (issue 9, item 5).

mod common;

use common::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use vkasync::{kernels, Buffer, Error, Executor, Kernel, MemoryKind, Queue};

const MIB: usize = 1 << 20;

#[test]
fn ten_thousand_1_mib_tasks_under_a_256_mib_bound_complete_without_running_out_of_memory() {
    let _w = Watchdog::new(std::time::Duration::from_secs(600));
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let bound = 256 * MIB as u64;
    let exec = Executor::builder(&device).memory_bound(bound).build().unwrap();
    // The most buffer memory alive at once, sampled by every task after it allocates.
    let peak_live = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..10_000u32)
        .map(|t| {
            let (ctx, mix, peak_live) = (exec.context(), mix.clone(), peak_live.clone());
            exec.spawn(async move {
                let big = ctx.buffer::<u32>(MIB / 4, MemoryKind::Device).await?;
                peak_live.fetch_max(ctx.device().memory_report().live_bytes, Ordering::Relaxed);
                ctx.upload(&big, &[t; 64])?;
                ctx.dispatch(&mix, [1, 1, 1], &[(&big).into()], bytemuck::bytes_of(&[64u32, 1]))?;
                let small = Buffer::<u32>::new(ctx.device(), 64, MemoryKind::Device)?;
                ctx.copy_region(&big, 0, &small, 0, 64)?;
                let out = ctx.read(&small).await?;
                assert_eq!(out, vec![mix_cpu(t, 1); 64], "task {t}");
                Ok::<_, Error>(())
            })
        })
        .collect();
    exec.run();
    for h in handles {
        h.join().unwrap().unwrap();
    }
    let s = exec.stats();
    println!(
        "{s}; bounded peak {} MiB; live peak {} MiB",
        s.memory_peak >> 20,
        peak_live.load(Ordering::Relaxed) >> 20
    );
    assert!(s.memory_peak <= bound, "{}", s.memory_peak);
    assert!(s.memory_peak >= bound / 2, "the bound was never approached: {}", s.memory_peak);
    // Everything alive at once (bounded buffers, the small ones, staging) stays under the bound
    // plus one flush's worth of the small buffers.
    assert!(peak_live.load(Ordering::Relaxed) <= bound + 16 * MIB as u64, "{}", peak_live.load(Ordering::Relaxed));
    drop((exec, mix));
    finish(device);
}

#[test]
fn a_queue_bound_holds_under_tokio_and_too_large_a_buffer_is_a_typed_error() {
    let _w = Watchdog::new(std::time::Duration::from_secs(300));
    let device = device();
    let bound = 8 * MIB as u64;
    let queue = Queue::builder(&device).memory_bound(bound).build().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().unwrap();
    rt.block_on(async {
        let handles: Vec<_> = (0..200u32)
            .map(|t| {
                let ctx = queue.context();
                tokio::spawn(async move {
                    let b = ctx.buffer::<u32>(MIB / 4, MemoryKind::Device).await?;
                    ctx.upload(&b, &vec![t; MIB / 4])?;
                    let out = ctx.read(&b).await?;
                    assert!(out.iter().all(|&x| x == t));
                    Ok::<_, Error>(())
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap().unwrap();
        }
        let err = queue.context().buffer::<u8>(9 * MIB, MemoryKind::Device).await.unwrap_err();
        assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    });
    assert!(queue.stats().memory_peak <= bound);
    drop((queue, rt));
    finish(device);
}
