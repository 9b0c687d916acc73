//! The executor on the real device: batching, waiting, stats, lifetimes, cancellation, faults.

mod common;
use common::mix_expected as expected;
use common::*;
use std::rc::Rc;
use vkasync::{Buffer, Ctx, Error, Executor, FlushPolicy, Kernel, MemoryKind, WaitPolicy};

#[test]
fn two_tasks_share_one_submit_and_one_wait_when_submitting_only_when_idle() {
    let (device, mix) = setup();
    let exec = Executor::builder(&device).flush_policy(FlushPolicy::WhenIdle).build().unwrap();
    let a = exec.spawn(mix_task(exec.context(), mix.clone(), 1, 1000, 5));
    let b = exec.spawn(mix_task(exec.context(), mix.clone(), 2, 333, 7));
    exec.run();
    assert_eq!(a.join().unwrap().unwrap(), expected(1, 1000, 5));
    assert_eq!(b.join().unwrap().unwrap(), expected(2, 333, 7));
    let s = exec.stats();
    // One submit; at most one host wait (none when the adaptive spin saw the work finish).
    assert_eq!((s.await_points, s.submits, s.flushes), (2, 1, 1), "{s}");
    assert!(s.host_waits <= 1, "{s}");
    assert_eq!((s.tasks_spawned, s.tasks_completed), (2, 2));
    drop((exec, mix));
    finish(device);
}

#[test]
fn a_thousand_tasks_share_one_submit_and_one_wait_when_submitting_only_when_idle() {
    let (device, mix) = setup();
    for policy in [WaitPolicy::All, WaitPolicy::Oldest] {
        let exec = Executor::builder(&device).wait_policy(policy).flush_policy(FlushPolicy::WhenIdle).build().unwrap();
        let handles: Vec<_> =
            (0..1000u32).map(|t| exec.spawn(mix_task(exec.context(), mix.clone(), t, 64, 3))).collect();
        exec.run();
        for (t, h) in handles.into_iter().enumerate() {
            assert_eq!(h.join().unwrap().unwrap(), expected(t as u32, 64, 3));
        }
        let s = exec.stats();
        assert_eq!((s.await_points, s.submits), (1000, 1), "{s}");
        assert!(s.host_waits <= 1, "{s}");
        // upload (direct on unified memory, or a copy) -> dispatch -> read-back: the barriers do
        // not grow with the number of tasks.
        assert!(s.barriers <= 4, "{s}");
    }
    drop(mix);
    finish(device);
}

#[test]
fn group_commit_submits_at_once_when_the_gpu_is_idle_and_gathers_while_it_works() {
    let (device, mix) = setup();
    let exec = Executor::builder(&device).flush_policy(FlushPolicy::GroupCommit).build().unwrap();
    // One task alone: its wait finds the GPU idle, so its work goes at once, in one submit.
    let one = exec.spawn(mix_task(exec.context(), mix.clone(), 7, 64, 3));
    exec.run();
    assert_eq!(one.join().unwrap().unwrap(), expected(7, 64, 3));
    let s = exec.stats();
    assert_eq!((s.await_points, s.submits), (1, 1), "{s}");
    // A thousand: the first wait submits at once, the rest gather while the GPU works.
    let handles: Vec<_> = (0..1000u32).map(|t| exec.spawn(mix_task(exec.context(), mix.clone(), t, 64, 3))).collect();
    exec.run();
    for (t, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap().unwrap(), expected(t as u32, 64, 3));
    }
    let s = exec.stats();
    println!("group commit, 1,000 tasks: {s}");
    assert_eq!(s.await_points, 1001, "{s}");
    assert!(s.submits >= 3, "the first task's work should go alone, before the others gather: {s}");
    assert!(s.submits < 1001, "{s}");
    drop((exec, mix));
    finish(device);
}

/// A buffer for `load` (its contents do not matter: never cleared): enough `mix` work that its submission still runs while a test records,
/// flushes and submits a few more (about 0.3 s on lavapipe, milliseconds on a discrete GPU,
/// against microseconds for those steps). Every flush reads the timeline counter, so a
/// submission counts as running only while the GPU really runs it.
fn load_buffer(device: &vkasync::Device) -> Buffer<u32> {
    let groups = if device.info().device_type == vkasync::DeviceType::Cpu { 1024 } else { 65_535 };
    Buffer::<u32>::new_uninit(device, 64 * groups, MemoryKind::Device).unwrap()
}

/// Records the `load` on `buf` (65,000 `mix` rounds per element, the kernel's most).
fn load(ctx: &Ctx, mix: &Kernel, buf: &Buffer<u32>) -> Result<(), Error> {
    ctx.dispatch(mix, [(buf.len() / 64) as u32, 1, 1], &[buf.into()], bytemuck::bytes_of(&[buf.len() as u32, 65_000]))
}

#[test]
fn a_submission_waits_for_earlier_running_ones_only_when_it_uses_what_they_use() {
    let (device, mix) = setup();
    let exec = Executor::new(&device).unwrap();
    let ctx = exec.context();
    let x = Rc::new(Buffer::<u32>::from_slice(&device, &[7; 64]).unwrap());
    let z = Rc::new(Buffer::<u32>::from_slice(&device, &[9; 64]).unwrap());
    let w = Rc::new(Buffer::<u32>::from_slice(&device, &[5; 64]).unwrap());
    let y: Rc<Vec<_>> = Rc::new((0..2).map(|_| Buffer::<u32>::from_slice(&device, &[0; 64]).unwrap()).collect());
    let (x2, z2, w2, y2, mix2) = (x.clone(), z.clone(), w.clone(), y.clone(), mix.clone());
    let l = Rc::new(load_buffer(&device));
    let l2 = l.clone();
    // Five submissions, the first long (see `load_buffer`): every later one is decided while
    // the first runs.
    let h = exec.spawn(async move {
        let push = bytemuck::bytes_of(&[64u32, 1]);
        load(&ctx, &mix2, &l2)?;
        ctx.dispatch(&mix2, [1, 1, 1], &[(&*x2).into()], push)?;
        ctx.flush(); // writes the load's buffer and x: nothing earlier, no barrier
        ctx.dispatch(&mix2, [1, 1, 1], &[(&*x2).into()], push)?;
        ctx.flush(); // writes x again: one barrier, after the running write
        ctx.dispatch(&mix2, [1, 1, 1], &[(&*z2).into()], push)?;
        ctx.flush(); // writes only z: no barrier, it may run beside the two before
        ctx.copy(&*w2, &y2[0])?;
        ctx.flush(); // reads w, which no submission wrote: no barrier
        ctx.copy(&*w2, &y2[1])?;
        ctx.flush(); // reads w again (running reads of it need no order): no barrier
        ctx.synchronize().await
    });
    exec.run();
    h.join().unwrap().unwrap();
    let s = exec.stats();
    assert_eq!((s.submits, s.barriers), (5, 1), "{s}");
    // The ordered pair ran in order; the other buffer saw its one pass.
    let ctx = exec.context();
    let (x2, z2, y2) = (x.clone(), z.clone(), y.clone());
    let h = exec.spawn(async move {
        Ok::<_, Error>([ctx.read(&*x2).await?, ctx.read(&*z2).await?, ctx.read(&y2[0]).await?, ctx.read(&y2[1]).await?])
    });
    exec.run();
    let [gx, gz, gy0, gy1] = h.join().unwrap().unwrap();
    assert_eq!(gx, vec![mix_cpu(mix_cpu(7, 1), 1); 64]);
    assert_eq!(gz, vec![mix_cpu(9, 1); 64]);
    assert_eq!((gy0, gy1), (vec![5; 64], vec![5; 64]));
    drop((exec, x, z, w, y, l, mix));
    finish(device);
}

#[test]
fn a_submission_waits_for_running_work_of_another_queue_or_written_by_hand() {
    let (device, mix) = setup();
    let push = bytemuck::bytes_of(&[64u32, 1]).to_vec();
    let x = Rc::new(Buffer::<u32>::from_slice(&device, &[7; 64]).unwrap());
    // Records one dispatch on `buf` in `exec` and submits it, without waiting; returns the
    // barriers that `exec` recorded.
    let dispatch = |exec: &Executor, buf: &Rc<Buffer<u32>>| {
        let (ctx, mix, buf, push) = (exec.context(), mix.clone(), buf.clone(), push.clone());
        let h = exec.spawn(async move {
            ctx.dispatch(&mix, [1, 1, 1], &[(&*buf).into()], &push)?;
            ctx.flush();
            Ok::<_, Error>(())
        });
        exec.run();
        h.join().unwrap().unwrap();
        exec.stats().barriers
    };
    let (a, b) = (Executor::new(&device).unwrap(), Executor::new(&device).unwrap());
    // The first submission is long (see `load_buffer`): every later one is decided while it runs.
    let l = load_buffer(&device);
    let (ctx, mix2) = (a.context(), mix.clone());
    let lr = Rc::new(l);
    let l2 = lr.clone();
    let h = a.spawn(async move {
        load(&ctx, &mix2, &l2)?;
        ctx.flush();
        Ok::<_, Error>(())
    });
    a.run();
    h.join().unwrap().unwrap();
    assert_eq!(dispatch(&a, &x), 0, "nothing ran before");
    // Another queue of the device writes `x` while the first write may still run.
    assert_eq!(dispatch(&b, &x), 1, "ordered after the other queue's write");
    let fresh = Rc::new(Buffer::<u32>::from_slice(&device, &[1; 64]).unwrap());
    assert_eq!(dispatch(&a, &fresh), 0, "a buffer no running submission uses");
    // A submission by hand may use anything: the next one is ordered after it.
    // SAFETY: no command buffer.
    let by_hand = unsafe { device.submit_raw(&[]) }.unwrap();
    let other = Rc::new(Buffer::<u32>::from_slice(&device, &[2; 64]).unwrap());
    assert_eq!(dispatch(&a, &other), 1, "ordered after the submission by hand");
    device.wait(by_hand + 1, None).unwrap();
    // Each write ran once, the two of `x` one after the other.
    let ctx = a.context();
    let (x2, f2, o2) = (x.clone(), fresh.clone(), other.clone());
    let h =
        a.spawn(async move { Ok::<_, Error>([ctx.read(&*x2).await?, ctx.read(&*f2).await?, ctx.read(&*o2).await?]) });
    a.run();
    let [gx, gf, go] = h.join().unwrap().unwrap();
    assert_eq!(gx, vec![mix_cpu(mix_cpu(7, 1), 1); 64]);
    assert_eq!((gf, go), (vec![mix_cpu(1, 1); 64], vec![mix_cpu(2, 1); 64]));
    drop((a, b, x, fresh, other, lr, mix));
    finish(device);
}

#[test]
fn barriers_do_not_grow_with_tasks_when_each_does_copy_dispatch_copy() {
    let (device, mix) = setup();
    // One earlier submission, completed (its wait read the counter): no run below needs a
    // barrier that orders it after earlier work on the queue.
    let warm = Buffer::<u32>::new(&device, 4, MemoryKind::Device).unwrap();
    let mut cmds = vkasync::CommandList::new(&device);
    vkasync::Recorder::upload(&mut cmds, &warm, &[1, 2, 3, 4]).unwrap();
    vkasync::Recorder::copy(&mut cmds, &warm, &Buffer::<u32>::new(&device, 4, MemoryKind::Device).unwrap()).unwrap();
    cmds.submit_and_wait().unwrap();
    drop(warm);
    let mut counts = Vec::new();
    for tasks in [1u32, 10, 200] {
        let exec = Executor::builder(&device).flush_policy(FlushPolicy::WhenIdle).build().unwrap();
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let (ctx, mix) = (exec.context(), mix.clone());
                exec.spawn(async move {
                    let n = 100;
                    let data: Vec<u32> = (0..n as u32).map(|i| i + t).collect();
                    let src = Buffer::<u32>::from_slice(ctx.device(), &data)?;
                    let work = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
                    let out = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Readback)?;
                    ctx.copy(&src, &work)?;
                    ctx.dispatch(&mix, [2, 1, 1], &[(&work).into()], bytemuck::bytes_of(&[n as u32, 2]))?;
                    ctx.copy(&work, &out)?;
                    let got = ctx.read(&out).await?;
                    assert_eq!(got, data.iter().map(|&x| mix_cpu(x, 2)).collect::<Vec<_>>());
                    Ok::<_, Error>(())
                })
            })
            .collect();
        exec.run();
        for h in handles {
            h.join().unwrap().unwrap();
        }
        let s = exec.stats();
        assert_eq!(s.submits, 1, "{s}");
        counts.push(s.barriers);
    }
    // Copy -> dispatch -> copy is three phases with two barriers between them, and one barrier
    // to host reads: 3, whatever the number of tasks.
    assert_eq!(counts, vec![3, 3, 3]);
    drop(mix);
    finish(device);
}

/// A long-running `mix` so that work is still in flight when the test acts.
fn record_heavy(ctx: &Ctx, mix: &Kernel, buf: &Buffer<u32>, k: u32) {
    dispatch_mix(ctx, mix, buf, k).unwrap();
}

#[test]
fn a_buffer_dropped_in_flight_is_freed_after_its_work() {
    let _w = Watchdog::new(std::time::Duration::from_secs(60));
    let (device, mix) = setup();
    let exec = Executor::new(&device).unwrap();
    let ctx = exec.context();
    let (dev, m) = (device.clone(), mix.clone());
    let h = exec.spawn(async move {
        let buf = Buffer::<u32>::new(&dev, 1 << 16, MemoryKind::Device).unwrap();
        record_heavy(&ctx, &m, &buf, 2000);
        drop(buf);
        // The recorded dispatch keeps the memory alive.
        assert_eq!(dev.memory_report().live_buffers, 1);
        ctx.flush();
        assert_eq!(dev.memory_report().live_buffers, 1, "freed while the GPU may use it");
        ctx.synchronize().await
    });
    h.join().unwrap().unwrap();
    // The completed submission was retired when the counter was read.
    assert_eq!(device.memory_report().live_buffers, 0);
    drop((exec, mix));
    finish(device);
}

#[test]
fn dropping_a_join_handle_detaches_the_task() {
    let (device, mix) = setup();
    let exec = Executor::new(&device).unwrap();
    let done = Rc::new(std::cell::Cell::new(false));
    let (ctx, m, d) = (exec.context(), mix.clone(), done.clone());
    drop(exec.spawn(async move {
        let out = mix_task(ctx, m, 9, 100, 2).await.unwrap();
        assert_eq!(out, expected(9, 100, 2));
        d.set(true);
    }));
    exec.run();
    assert!(done.get());
    drop((exec, mix));
    finish(device);
}

/// Counts its drops.
struct DropCount(Rc<std::cell::Cell<u32>>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[test]
fn large_and_small_task_futures_give_their_output_and_are_dropped_when_cancelled() {
    let _w = Watchdog::new(std::time::Duration::from_secs(60));
    let (device, mix) = setup();
    let exec = Executor::new(&device).unwrap();
    let drops = Rc::new(std::cell::Cell::new(0));
    // Each future holds a guard from its creation on (dropped with it, polled or not).
    // 8 KiB live across the await: the executor boxes a future this large when it spawns it.
    let (ctx, m, g) = (exec.context(), mix.clone(), DropCount(drops.clone()));
    let large = exec.spawn(async move {
        let _g = g;
        let mut state = std::hint::black_box([7u8; 8192]);
        let out = mix_task(ctx, m, 5, 100, 2).await.unwrap();
        state[8191] = out[0] as u8;
        (state.iter().map(|&b| u64::from(b)).sum::<u64>(), out)
    });
    let (ctx, m, g) = (exec.context(), mix.clone(), DropCount(drops.clone()));
    let small = exec.spawn(async move {
        let _g = g;
        mix_task(ctx, m, 6, 100, 2).await.unwrap()
    });
    // Two that never finish: one aborted through its handle, one cancelled by the shutdown.
    let never = |fill: u8| {
        let g = DropCount(drops.clone());
        exec.spawn(async move {
            let _g = g;
            let state = std::hint::black_box([fill; 8192]);
            std::future::pending::<()>().await;
            state[0]
        })
    };
    let (aborted, _left) = (never(1), never(2));
    aborted.abort();
    let (sum, out) = exec.block_on(large).unwrap();
    let want = expected(5, 100, 2);
    assert_eq!(out, want);
    assert_eq!(sum, 7 * 8191 + u64::from(want[0] as u8));
    assert_eq!(exec.block_on(small).unwrap(), expected(6, 100, 2));
    assert!(aborted.join().unwrap_err().is_cancelled());
    assert_eq!(drops.get(), 3, "the finished tasks' and the aborted task's futures were dropped");
    drop(exec);
    assert_eq!(drops.get(), 4, "the shutdown dropped the unfinished task's future");
    drop(mix);
    finish(device);
}

#[test]
fn abort_cancels_at_the_next_await_and_submitted_work_completes() {
    let _w = Watchdog::new(std::time::Duration::from_secs(60));
    let (device, mix) = setup();
    let exec = Executor::new(&device).unwrap();
    let reached = Rc::new(std::cell::Cell::new(false));
    let (ctx, m, r, dev) = (exec.context(), mix.clone(), reached.clone(), device.clone());
    let victim = Rc::new(exec.spawn(async move {
        let buf = Buffer::<u32>::new(&dev, 1 << 16, MemoryKind::Device).unwrap();
        record_heavy(&ctx, &m, &buf, 500);
        ctx.synchronize().await.unwrap();
        r.set(true);
    }));
    let v = victim.clone();
    let killer = exec.spawn(async move {
        v.abort();
    });
    exec.run();
    killer.join().unwrap();
    let victim = Rc::try_unwrap(victim).unwrap();
    let err = victim.join().unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert!(!reached.get());
    let s = exec.stats();
    // The aborted task's recorded work was still submitted, and waited for before release.
    assert_eq!(s.submits, 1, "{s}");
    assert_eq!((s.tasks_spawned, s.tasks_completed), (2, 2));
    drop(exec);
    drop(mix);
    finish(device);
}

#[test]
fn a_panicking_task_gives_a_join_error_and_others_carry_on() {
    let (device, mix) = setup();
    let exec = Executor::new(&device).unwrap();
    let ok = exec.spawn(mix_task(exec.context(), mix.clone(), 3, 200, 4));
    let (ctx, m, dev) = (exec.context(), mix.clone(), device.clone());
    let bad = exec.spawn(async move {
        let buf = Buffer::<u32>::new(&dev, 64, MemoryKind::Device).unwrap();
        record_heavy(&ctx, &m, &buf, 1);
        ctx.synchronize().await.unwrap();
        panic!("boom in task");
    });
    exec.run();
    let err = bad.join().unwrap_err();
    assert!(err.is_panic());
    assert_eq!(err.panic_message(), Some("boom in task"));
    assert_eq!(ok.join().unwrap().unwrap(), expected(3, 200, 4));
    drop((exec, mix));
    finish(device);
}

#[test]
fn dropping_the_executor_with_work_in_flight_waits_then_frees() {
    let (device, mix) = setup();
    let (n, k, _) = heavy(&device, &mix, 1 << 16, 2000, std::time::Duration::from_millis(50));
    {
        let exec = Executor::new(&device).unwrap();
        let (ctx, m, dev) = (exec.context(), mix.clone(), device.clone());
        // Records heavy work, flushes it, then waits for something that never comes.
        let _h = exec.spawn(async move {
            let buf = Buffer::<u32>::new(&dev, n, MemoryKind::Device).unwrap();
            record_heavy(&ctx, &m, &buf, k);
            ctx.flush();
            futures::future::pending::<()>().await;
        });
        let probe = exec.spawn(async {});
        probe.join().unwrap();
        assert_eq!(exec.tasks_alive(), 1);
        assert!(device.completed_value().unwrap() < device.last_submitted(), "work should still be in flight");
    }
    // The executor waited for the GPU before freeing the buffer (validation would report a
    // buffer destroyed while in use).
    drop(mix);
    finish(device);
}

#[test]
fn an_optional_timeout_reaches_the_waiting_task_and_work_still_completes() {
    let _w = Watchdog::new(std::time::Duration::from_secs(120));
    let (device, mix) = setup();
    // Work that outlasts the 1 ms timeout several times over.
    let (n, k, _) = heavy(&device, &mix, 1 << 16, 3000, std::time::Duration::from_millis(20));
    let exec = Executor::builder(&device).wait_timeout(Some(std::time::Duration::from_millis(1))).build().unwrap();
    let (ctx, m, dev) = (exec.context(), mix.clone(), device.clone());
    let h = exec.spawn(async move {
        let data: Vec<u32> = (0..n as u32).collect();
        let buf = Buffer::<u32>::new(&dev, n, MemoryKind::Device).unwrap();
        ctx.upload(&buf, &data).unwrap();
        record_heavy(&ctx, &m, &buf, k);
        let rb = ctx.read_back(&buf).unwrap();
        let mut timeouts = 0;
        loop {
            match ctx.synchronize().await {
                Ok(()) => break,
                Err(Error::Timeout(t)) => {
                    assert_eq!(t, std::time::Duration::from_millis(1));
                    timeouts += 1
                }
                Err(e) => panic!("{e}"),
            }
        }
        let out = rb.into_vec().unwrap();
        check_mix_sample(&out, |i| data[i as usize], k);
        timeouts
    });
    let timeouts = h.join().unwrap();
    assert!(timeouts >= 1, "the 1 ms timeout never fired");
    drop((exec, mix));
    finish(device);
}

#[test]
fn device_loss_at_submit_reaches_every_waiting_task() {
    let _w = Watchdog::new(std::time::Duration::from_secs(60));
    let (device, mix) = setup();
    // Submitting only when idle, so that the loss comes between recording and the submit.
    let exec = Executor::builder(&device).flush_policy(FlushPolicy::WhenIdle).build().unwrap();
    let waiters: Vec<_> = (0..3).map(|t| exec.spawn(mix_task(exec.context(), mix.clone(), t, 64, 1))).collect();
    let dev = device.clone();
    // Runs after the waiters recorded and suspended, before the idle flush.
    let loser = exec.spawn(async move {
        lose_device(&dev);
    });
    exec.run();
    loser.join().unwrap();
    for w in waiters {
        assert_eq!(w.join().unwrap(), Err(Error::DeviceLost));
    }
    // Later work fails fast and nothing hangs.
    let late = exec.spawn(mix_task(exec.context(), mix.clone(), 7, 64, 1));
    exec.run();
    assert!(late.join().unwrap().unwrap_err().is_device_lost());
    assert_only_intended_validation_messages(&device);
    drop((exec, mix));
    assert_eq!(device.memory_report().live_buffers, 0);
}

#[test]
fn device_loss_during_a_wait_reaches_every_waiting_task() {
    let _w = Watchdog::new(std::time::Duration::from_secs(60));
    let (device, mix) = setup();
    let (n, k, _) = heavy(&device, &mix, 1 << 16, 2000, std::time::Duration::from_millis(50));
    // Every command is flushed as soon as it is recorded, so the work is submitted before the
    // device is lost and the executor's wait is what meets the loss.
    let exec = Executor::builder(&device).max_pending_ops(1).build().unwrap();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let (ctx, m, dev) = (exec.context(), mix.clone(), device.clone());
            exec.spawn(async move {
                let buf = Buffer::<u32>::new(&dev, n, MemoryKind::Device)?;
                record_heavy(&ctx, &m, &buf, k);
                ctx.synchronize().await
            })
        })
        .collect();
    let dev = device.clone();
    let loser = exec.spawn(async move {
        lose_device(&dev);
    });
    exec.run();
    loser.join().unwrap();
    let s = exec.stats();
    assert_eq!(s.submits, 3, "{s}");
    for w in waiters {
        assert_eq!(w.join().unwrap(), Err(Error::DeviceLost));
    }
    assert_only_intended_validation_messages(&device);
    drop((exec, mix));
    // The three buffers whose work was in flight when the device was lost are deliberately
    // leaked: after a loss nothing says when the driver stops touching them. After a simulated
    // loss the GPU went on, and closing the executor waited for it and freed them.
    let leaked = if loss_is_simulated(&device) { 0 } else { 3 };
    assert_eq!(device.memory_report().live_buffers, leaked);
}

#[test]
fn a_long_recording_phase_is_flushed_at_the_bound() {
    let (device, mix) = setup();
    let exec = Executor::builder(&device).max_pending_ops(4).build().unwrap();
    let (ctx, m, dev) = (exec.context(), mix.clone(), device.clone());
    let h = exec.spawn(async move {
        let n = 256;
        let buf = Buffer::<u32>::new(&dev, n, MemoryKind::Device)?;
        ctx.upload(&buf, &vec![3u32; n])?;
        let before = dev.last_submitted();
        // Ten dependent dispatches recorded without yielding: the GPU gets them in batches of
        // four while the task is still recording.
        for _ in 0..10 {
            ctx.dispatch(&m, [4, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 1]))?;
        }
        let during = dev.last_submitted() - before;
        let out = ctx.read(&buf).await?;
        assert!(out.iter().all(|&x| x == (0..10).fold(3, |x, _| mix_cpu(x, 1))));
        Ok::<_, Error>(during)
    });
    let during = h.join().unwrap().unwrap();
    assert!(during >= 2, "only {during} submits while recording");
    let s = exec.stats();
    // One wait at most (none when the executor's spin saw the GPU finish first).
    assert!(s.host_waits <= 1, "{s}");
    assert!(s.submits >= 3, "{s}");
    drop((exec, mix));
    finish(device);
}

#[test]
fn a_spin_before_waiting_can_replace_the_blocking_wait() {
    let (device, mix) = setup();
    let exec = Executor::builder(&device)
        .spin_before_wait(std::time::Duration::from_secs(5))
        .flush_policy(FlushPolicy::WhenIdle)
        .build()
        .unwrap();
    let a = exec.spawn(mix_task(exec.context(), mix.clone(), 1, 100, 2));
    let b = exec.spawn(mix_task(exec.context(), mix.clone(), 2, 100, 2));
    exec.run();
    assert_eq!(a.join().unwrap().unwrap(), expected(1, 100, 2));
    assert_eq!(b.join().unwrap().unwrap(), expected(2, 100, 2));
    let s = exec.stats();
    // Tiny work finishes within the spin: no blocking wait at all.
    assert_eq!((s.submits, s.host_waits), (1, 0), "{s}");
    drop((exec, mix));
    finish(device);
}

#[test]
fn the_adaptive_spin_catches_short_waits_and_stops_spinning_for_long_kernels() {
    use std::time::Duration;
    let (device, mix) = setup();
    // Short jobs: a generous bound lets the spin see them finish.
    let exec = Executor::builder(&device).adaptive_spin(Duration::from_millis(200)).build().unwrap();
    for round in 0..10u32 {
        let h = exec.spawn(mix_task(exec.context(), mix.clone(), round, 64, 1));
        exec.run();
        assert_eq!(h.join().unwrap().unwrap(), expected(round, 64, 1));
    }
    let s = exec.stats();
    assert_eq!(s.submits, 10, "{s}");
    assert!(s.host_waits < 5, "short waits should end within the spin: {s}");
    drop(exec);
    // Long kernels (milliseconds) against a 200 µs bound: the first wait spins (for twice the
    // initial estimate of half the bound), then the estimate passes the bound and the executor
    // blocks without spinning at all.
    let (n, k, _) = heavy(&device, &mix, 1 << 16, 3000, Duration::from_millis(5));
    let exec = Executor::builder(&device).adaptive_spin(Duration::from_micros(200)).build().unwrap();
    let mut spun_after_first = 0;
    for round in 0..4u32 {
        let h = exec.spawn(mix_task(exec.context(), mix.clone(), round, n, k));
        exec.run();
        let out = h.join().unwrap().unwrap();
        check_mix_sample(&out, |i| i ^ round.wrapping_mul(2654435761), k);
        if round == 0 {
            spun_after_first = exec.stats().spin_ns;
            assert!(spun_after_first > 0, "the first wait should spin");
        }
    }
    let s = exec.stats();
    assert_eq!((s.submits, s.host_waits), (4, 4), "{s}");
    assert_eq!(s.spin_ns, spun_after_first, "spun again on long kernels: {s}");
    drop((exec, mix));
    finish(device);
}

#[test]
fn awaiting_gpu_work_outside_the_executor_works_and_does_not_hang() {
    let _w = Watchdog::new(std::time::Duration::from_secs(60));
    let (device, mix) = setup();
    let exec = Executor::new(&device).unwrap();
    let ctx = exec.context();
    let buf = Buffer::<u32>::new(&device, 64, MemoryKind::Device).unwrap();
    ctx.upload(&buf, &[5u32; 64]).unwrap();
    ctx.dispatch(&mix, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[64u32, 1])).unwrap();
    // Polled by another executor while this one is not running: the queue's driver submits
    // and waits, so the wait completes.
    let out = futures::executor::block_on(ctx.read(&buf)).unwrap();
    assert_eq!(out, vec![mix_cpu(5, 1); 64]);
    // From another thread too (a context is Send).
    let buf = std::sync::Arc::new(buf);
    let (c, b, m) = (ctx.clone(), buf.clone(), mix.clone());
    let out = std::thread::spawn(move || {
        c.dispatch(&m, [1, 1, 1], &[(&*b).into()], bytemuck::bytes_of(&[64u32, 1])).unwrap();
        futures::executor::block_on(c.read(&*b))
    })
    .join()
    .unwrap()
    .unwrap();
    assert_eq!(out, vec![mix_cpu(5, 2); 64]);
    drop((exec, ctx, buf, mix));
    finish(device);
}

#[test]
fn a_join_handle_awaited_where_its_executor_does_not_run_is_a_typed_error() {
    let _w = Watchdog::new(std::time::Duration::from_secs(60));
    let (device, mix) = setup();
    let exec = Executor::new(&device).unwrap();
    let h = exec.spawn(mix_task(exec.context(), mix.clone(), 1, 64, 1));
    let err = futures::executor::block_on(h).unwrap_err();
    assert!(err.is_not_running(), "{err}");
    // The task itself goes on: the executor runs it.
    exec.run();
    assert_eq!(exec.tasks_alive(), 0);
    drop((exec, mix));
    finish(device);
}

/// Under group commit an executor submits a group once it holds `max_group_ops` commands; when
/// submitting only when idle, the bound does not apply. Every result is checked either way.
#[test]
fn group_commit_submits_bounded_groups_and_when_idle_does_not() {
    let (device, mix) = setup();
    for (policy, bound) in [(FlushPolicy::GroupCommit, 2), (FlushPolicy::WhenIdle, 2), (FlushPolicy::GroupCommit, 96)] {
        let exec = Executor::builder(&device).flush_policy(policy).max_group_ops(bound).build().unwrap();
        let handles: Vec<_> = (0..20u32)
            .map(|t| {
                let (ctx, m) = (exec.context(), mix.clone());
                // Four dispatches per task (uploads and read-backs may need no command on a
                // device whose memory the host sees).
                exec.spawn(async move {
                    let n = 256usize;
                    let data: Vec<u32> = (0..n as u32).map(|i| i ^ t.wrapping_mul(2654435761)).collect();
                    let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
                    ctx.upload(&buf, &data)?;
                    for _ in 0..4 {
                        ctx.dispatch(
                            &m,
                            [m.groups_for(n as u64), 1, 1],
                            &[(&buf).into()],
                            bytemuck::bytes_of(&[n as u32, 1]),
                        )?;
                    }
                    ctx.read(&buf).await
                })
            })
            .collect();
        exec.run();
        for (t, h) in handles.into_iter().enumerate() {
            assert_eq!(h.join().unwrap().unwrap(), expected(t as u32, 256, 4));
        }
        let s = exec.stats();
        match (policy, bound) {
            // Full groups are handed to the driver thread, which submits what was recorded
            // by the time it runs: more than one group, however the threads interleave (the
            // exact bound is checked through a `Queue` in
            // `a_running_executor_hands_full_groups_to_its_driver_thread`).
            (FlushPolicy::GroupCommit, 2) => assert!(s.flushes >= 2, "{s}"),
            // At most one flush per await, and with all tasks recording before any waits, far
            // fewer.
            _ => assert!(s.flushes <= 20, "{policy:?} {bound}: {s}"),
        }
        assert_eq!(s.flushes, s.submits, "{s}");
        drop(exec);
    }
    drop(mix);
    finish(device);
}
