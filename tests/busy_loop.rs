//! An executor whose loop never idles (a task is always ready): completions are still seen,
//! groups still reach the GPU, and full groups go to the driver thread.
//!
//! In a test binary of their own: with the validation layer's synchronization validation on,
//! these tests running next to `tests/executor.rs`'s one-flush thousand-task test crashed the
//! layer (Mesa 22.3 lavapipe, layer 1.3.239; in about 1 of 10 parallel runs, also with the
//! hand-over to the driver thread turned off; never with `--test-threads=1` or without the
//! layer), before such layers ran with their thread-safety checks off (see `src/vk/instance.rs`).

mod common;
use common::mix_expected as expected;
use common::*;
use std::rc::Rc;
use vkasync::{Buffer, Ctx, Error, Executor, Kernel, MemoryKind, Queue};

/// Yields once: wakes itself and returns `Pending`, so the executor always has a task ready.
struct YieldNow(bool);

impl std::future::Future for YieldNow {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            return std::task::Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

#[test]
fn group_commit_submits_when_the_gpu_goes_idle_while_the_loop_stays_busy() {
    let _w = Watchdog::new(std::time::Duration::from_secs(120));
    let (device, mix) = setup();
    let exec = Executor::new(&device).unwrap();
    // A: a long kernel, submitted at once (`flush`: the loop may otherwise leave a lone small
    // group to its next check, or hand it to the driver thread, and B's work would join it).
    let (ctx, m) = (exec.context(), mix.clone());
    let n = 1usize << 18;
    let a = exec.spawn(async move {
        let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
        ctx.dispatch(&m, [m.groups_for(n as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 300]))?;
        ctx.flush();
        ctx.synchronize().await
    });
    // B: a small job recorded while A runs, so it waits in the recording epoch.
    let b_done = Rc::new(std::cell::Cell::new(false));
    let flag = b_done.clone();
    let b = exec.spawn({
        let (ctx, m) = (exec.context(), mix.clone());
        async move {
            let out = mix_task(ctx, m, 7, 256, 3).await;
            flag.set(true);
            out
        }
    });
    // C: keeps a task ready at all times until B is done (or 30 s pass), so the loop never
    // finds itself idle. B must still be submitted once A completes.
    let c = exec.spawn(async move {
        let start = std::time::Instant::now();
        let mut yields = 0u64;
        while !b_done.get() && start.elapsed() < std::time::Duration::from_secs(30) {
            YieldNow(false).await;
            yields += 1;
        }
        (b_done.get(), yields)
    });
    exec.run();
    a.join().unwrap().unwrap();
    assert_eq!(b.join().unwrap().unwrap(), expected(7, 256, 3));
    let (seen, yields) = c.join().unwrap();
    assert!(seen, "B's work stayed unsubmitted while the loop was busy ({yields} yields)");
    let s = exec.stats();
    assert_eq!(s.flushes, 2, "one flush for A, one for B: {s}");
    drop(exec);
    drop(mix);
    finish(device);
}

/// Twenty jobs of four dispatches each, all recorded before any waits (the group bound then
/// decides the flushes).
async fn four_dispatch_job(ctx: Ctx, m: Kernel, t: u32) -> Result<Vec<u32>, Error> {
    let n = 256usize;
    let data: Vec<u32> = (0..n as u32).map(|i| i ^ t.wrapping_mul(2654435761)).collect();
    let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
    ctx.upload(&buf, &data)?;
    for _ in 0..4 {
        ctx.dispatch(&m, [m.groups_for(n as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 1]))?;
    }
    ctx.read(&buf).await
}

#[test]
fn a_running_executor_hands_full_groups_to_its_driver_thread() {
    let _w = Watchdog::new(std::time::Duration::from_secs(120));
    let (device, mix) = setup();
    let exec = Executor::builder(&device).max_group_ops(2).build().unwrap();
    // First a long kernel, submitted at once: while it runs, the loop cannot submit the full
    // groups itself (it does so only when the GPU is idle), so the driver thread must.
    let (ctx, m) = (exec.context(), mix.clone());
    let n = 1usize << 18;
    let long = exec.spawn(async move {
        let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
        ctx.dispatch(&m, [m.groups_for(n as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 300]))?;
        ctx.synchronize().await
    });
    let done = Rc::new(std::cell::Cell::new(0u32));
    let handles: Vec<_> = (0..20u32)
        .map(|t| {
            let job = four_dispatch_job(exec.context(), mix.clone(), t);
            let done = done.clone();
            exec.spawn(async move {
                let out = job.await;
                done.set(done.get() + 1);
                out
            })
        })
        .collect();
    // A task that keeps the loop running until every job is done (or 30 s pass): the loop never
    // idles, so only the driver thread can submit the full groups.
    let busy = exec.spawn({
        let done = done.clone();
        async move {
            let start = std::time::Instant::now();
            while done.get() < 20 && start.elapsed() < std::time::Duration::from_secs(30) {
                YieldNow(false).await;
            }
            done.get()
        }
    });
    exec.run();
    long.join().unwrap().unwrap();
    for (t, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap().unwrap(), expected(t as u32, 256, 4));
    }
    assert_eq!(busy.join().unwrap(), 20, "jobs left unsubmitted while the loop ran");
    let s = exec.stats();
    assert!(s.handed_flushes >= 1 && s.handed_flushes <= s.flushes, "{s:?}");
    assert_eq!(s.flushes, s.submits, "{s}");
    drop(exec);

    // A `Queue` has no loop: the thread that fills a group submits it itself (or leaves it to
    // the flush running at that moment, which flushes again), and never hands it over.
    let queue = Queue::builder(&device).max_group_ops(2).build().unwrap();
    let results = futures::executor::block_on(futures::future::join_all(
        (0..20u32).map(|t| four_dispatch_job(queue.context(), mix.clone(), t)),
    ));
    for (t, r) in results.into_iter().enumerate() {
        assert_eq!(r.unwrap(), expected(t as u32, 256, 4));
    }
    let s = queue.stats();
    assert!(s.flushes >= 2 && s.handed_flushes == 0, "{s:?}");
    drop(queue);
    drop(mix);
    finish(device);
}
