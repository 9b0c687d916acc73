//! A memory bound on a queue: past it, `Ctx::buffer` awaits instead of failing, so many more
//! jobs than fit in memory complete; and a request that can never be met fails with a typed
//! error instead of waiting forever.

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

const KIB: usize = 1 << 10;

/// Lets the executor run its other tasks once.
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if std::mem::replace(&mut yielded, true) {
            std::task::Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}

fn is_bound_error(r: &Result<(), Error>, held: u64) -> bool {
    matches!(r, Err(Error::MemoryBound { held: h, limit, .. }) if *h == held && *limit == MIB as u64)
}

#[test]
fn a_job_that_holds_budget_and_asks_for_more_than_is_left_fails_at_once_on_both_fronts() {
    let _w = Watchdog::new(std::time::Duration::from_secs(120));
    let (device, mix) = setup();
    let exec = Executor::builder(&device).memory_bound(MIB as u64).build().unwrap();
    let ctx = exec.context();
    let r = exec.block_on(async move {
        let _held = ctx.buffer::<u8>(600 * KIB, MemoryKind::Device).await?;
        ctx.buffer::<u8>(600 * KIB, MemoryKind::Device).await.map(drop)
    });
    assert!(is_bound_error(&r, 600 * KIB as u64), "{r:?}");
    // A buffer dropped while its GPU work runs comes back: the same request then waits for it
    // and succeeds.
    let (ctx, m) = (exec.context(), mix.clone());
    exec.block_on(async move {
        let first = ctx.buffer::<u32>(150 * KIB, MemoryKind::Device).await?;
        dispatch_mix(&ctx, &m, &first, 2000)?;
        ctx.flush();
        drop(first);
        let second = ctx.buffer::<u32>(150 * KIB, MemoryKind::Device).await?;
        ctx.upload(&second, &[7; 64])?;
        assert_eq!(&ctx.read(&second).await?[..64], &[7; 64]);
        Ok::<_, Error>(())
    })
    .unwrap();
    drop(exec);

    let queue = Queue::builder(&device).memory_bound(MIB as u64).build().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let ctx = queue.context();
    let r = rt.block_on(async move {
        tokio::spawn(async move {
            let _held = ctx.buffer::<u8>(600 * KIB, MemoryKind::Device).await?;
            ctx.buffer::<u8>(600 * KIB, MemoryKind::Device).await.map(drop)
        })
        .await
        .unwrap()
    });
    assert!(is_bound_error(&r, 600 * KIB as u64), "{r:?}");
    drop((queue, rt, mix));
    finish(device);
}

#[test]
fn jobs_that_hold_the_whole_bound_and_all_wait_for_more_fail_instead_of_hanging() {
    let _w = Watchdog::new(std::time::Duration::from_secs(120));
    let device = device();
    // The native executor: two tasks take half the bound each, then both ask for more.
    let exec = Executor::builder(&device).memory_bound(MIB as u64).build().unwrap();
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let ctx = exec.context();
            exec.spawn(async move {
                let _held = ctx.buffer::<u8>(MIB / 2, MemoryKind::Device).await?;
                yield_now().await;
                ctx.buffer::<u8>(400 * KIB, MemoryKind::Device).await.map(drop)
            })
        })
        .collect();
    exec.run();
    for h in handles {
        let r = h.join().unwrap();
        assert!(is_bound_error(&r, MIB as u64 / 2), "{r:?}");
    }
    // One job waits for memory that another job, not itself waiting for memory, still holds:
    // that is a wait that ends, not an error.
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let ctx = exec.context();
    let holder = exec.spawn(async move {
        let held = ctx.buffer::<u8>(MIB / 2, MemoryKind::Device).await?;
        let _ = rx.await;
        drop(held);
        Ok::<_, Error>(())
    });
    let ctx = exec.context();
    let waiter = exec.spawn(async move {
        let _mine = ctx.buffer::<u8>(MIB / 2, MemoryKind::Device).await?;
        ctx.buffer::<u8>(400 * KIB, MemoryKind::Device).await.map(drop)
    });
    let release = exec.spawn(async move {
        let _ = tx.send(());
    });
    exec.run();
    release.join().unwrap();
    holder.join().unwrap().unwrap();
    waiter.join().unwrap().unwrap();
    drop(exec);

    // A queue under tokio: the same stall, from two workers.
    let queue = Queue::builder(&device).memory_bound(MIB as u64).build().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let results = rt.block_on(async {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (ctx, barrier) = (queue.context(), barrier.clone());
                tokio::spawn(async move {
                    let _held = ctx.buffer::<u8>(MIB / 2, MemoryKind::Device).await?;
                    barrier.wait().await;
                    ctx.buffer::<u8>(400 * KIB, MemoryKind::Device).await.map(drop)
                })
            })
            .collect();
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap());
        }
        out
    });
    for r in results {
        assert!(is_bound_error(&r, MIB as u64 / 2), "{r:?}");
    }
    drop((queue, rt));
    finish(device);
}
