//! A `Queue` awaited from other async runtimes and plain threads (tokio multi-thread and
//! current-thread, smol, `futures::executor::block_on`), with cancellation and device loss.

mod common;

use common::*;
use std::sync::Arc;
use std::time::Duration;
use vkasync::{Buffer, Ctx, Error, Kernel, MemoryKind, Queue};

/// A job of `rounds` awaits: each round dispatches `mix` once and awaits it; the last reads the
/// buffer back. Returns the buffer, which must equal `expected(seed, rounds)`.
async fn job(ctx: Ctx, mix: Kernel, seed: u32, rounds: u32) -> Result<Vec<u32>, Error> {
    let n = 64usize;
    let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
    ctx.upload(&buf, &vec![seed; n])?;
    for _ in 1..rounds {
        ctx.dispatch(&mix, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 1]))?;
        ctx.synchronize().await?;
    }
    ctx.dispatch(&mix, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 1]))?;
    ctx.read(&buf).await
}

fn expected(seed: u32, rounds: u32) -> Vec<u32> {
    vec![mix_cpu(seed, rounds); 64]
}

#[test]
fn tokio_multi_thread_64_tasks_of_100_awaits_share_submits() {
    let _w = Watchdog::new(Duration::from_secs(300));
    let (device, mix) = setup();
    let queue = Queue::new(&device).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().unwrap();
    rt.block_on(async {
        let handles: Vec<_> = (0..64u32)
            .map(|t| {
                let (ctx, mix) = (queue.context(), mix.clone());
                tokio::spawn(job(ctx, mix, t, 100))
            })
            .collect();
        for (t, h) in handles.into_iter().enumerate() {
            assert_eq!(h.await.unwrap().unwrap(), expected(t as u32, 100), "task {t}");
        }
    });
    let s = queue.stats();
    println!("tokio, 64 x 100 awaits: {s}");
    // 6,400 awaits (an await whose work the GPU already finished need not wait, so the count
    // of awaits that waited may be a little lower), in far fewer submits.
    assert!(s.await_points <= 6400 && s.await_points > 6000, "{s}");
    assert!(s.submits * 4 <= 6400, "submits should be far below awaits: {s}");
    assert!(s.host_waits <= s.submits, "{s}");
    drop((queue, rt, mix));
    finish(device);
}

#[test]
fn tokio_current_thread_runs_jobs_through_a_queue() {
    let _w = Watchdog::new(Duration::from_secs(120));
    let (device, mix) = setup();
    let queue = Queue::new(&device).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let handles: Vec<_> = (0..16u32).map(|t| tokio::spawn(job(queue.context(), mix.clone(), t, 5))).collect();
        for (t, h) in handles.into_iter().enumerate() {
            assert_eq!(h.await.unwrap().unwrap(), expected(t as u32, 5));
        }
    });
    drop((queue, rt, mix));
    finish(device);
}

#[test]
fn block_on_from_8_plain_threads_at_once() {
    let _w = Watchdog::new(Duration::from_secs(120));
    let (device, mix) = setup();
    let queue = Queue::new(&device).unwrap();
    let barrier = Arc::new(std::sync::Barrier::new(8));
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let (ctx, mix, barrier) = (queue.context(), mix.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                futures::executor::block_on(job(ctx, mix, t, 10))
            })
        })
        .collect();
    for (t, th) in threads.into_iter().enumerate() {
        assert_eq!(th.join().unwrap().unwrap(), expected(t as u32, 10));
    }
    drop((queue, mix));
    finish(device);
}

#[test]
fn smol_runs_jobs_through_a_queue() {
    let _w = Watchdog::new(Duration::from_secs(120));
    let (device, mix) = setup();
    let queue = Queue::new(&device).unwrap();
    smol::block_on(async {
        let tasks: Vec<_> = (0..8u32).map(|t| smol::spawn(job(queue.context(), mix.clone(), t, 4))).collect();
        for (t, task) in tasks.into_iter().enumerate() {
            assert_eq!(task.await.unwrap(), expected(t as u32, 4));
        }
    });
    drop((queue, mix));
    finish(device);
}

#[test]
fn cancelling_a_wait_from_tokio_frees_its_slot_and_the_gpu_work_still_completes() {
    let _w = Watchdog::new(Duration::from_secs(120));
    let (device, mix) = setup();
    let queue = Queue::new(&device).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    // Kernels that outlast the 5 ms timeouts ten times over.
    let (n, k, _) = heavy(&device, &mix, 1 << 18, 4000, Duration::from_millis(50));
    rt.block_on(async {
        // A long kernel on a buffer that the cancelled job owns (and drops when cancelled).
        let (ctx, m) = (queue.context(), mix.clone());
        let long = async move {
            let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
            dispatch_mix(&ctx, &m, &buf, k)?;
            ctx.synchronize().await
        };
        let r = tokio::time::timeout(Duration::from_millis(5), long).await;
        assert!(r.is_err(), "the long kernel should outlast the timeout");
        // select! cancels the other way round too.
        let (ctx, m) = (queue.context(), mix.clone());
        tokio::select! {
            r = async move {
                let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
                dispatch_mix(&ctx, &m, &buf, k)?;
                ctx.synchronize().await
            } => panic!("the long kernel finished first: {r:?}"),
            _ = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
        // New buffers of the same size, written at once, must not be the cancelled jobs'
        // memory (still used by the GPU): their contents survive the long kernels.
        let ctx = queue.context();
        let fresh = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device).unwrap();
        ctx.upload(&fresh, &vec![42u32; n]).unwrap();
        let out = ctx.read(&fresh).await.unwrap();
        assert!(out.iter().all(|&x| x == 42), "a cancelled job's buffer was reused while the GPU used it");
    });
    // The cancelled waits left no slot behind, and once the GPU is done every buffer is freed.
    assert_eq!(queue.live_waiters(), 0);
    let ctx = queue.context();
    futures::executor::block_on(async {
        ctx.flush();
        let b = Buffer::<u32>::new(ctx.device(), 1, MemoryKind::Device).unwrap();
        ctx.upload(&b, &[1]).unwrap();
        ctx.read(&b).await.unwrap();
    });
    drop((ctx, queue, rt, mix));
    finish(device);
}

#[test]
fn device_loss_reaches_every_tokio_waiter() {
    let _w = Watchdog::new(Duration::from_secs(120));
    let (device, mix) = setup();
    let queue = Queue::new(&device).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    // Work that is still running well after the 20 ms the jobs get to submit it.
    let (n, k, _) = heavy(&device, &mix, 1 << 16, 2000, Duration::from_millis(100));
    let errors = rt.block_on(async {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (ctx, m) = (queue.context(), mix.clone());
                tokio::spawn(async move {
                    let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
                    for _ in 0..4 {
                        ctx.dispatch(
                            &m,
                            [m.groups_for(n as u64), 1, 1],
                            &[(&buf).into()],
                            bytemuck::bytes_of(&[n as u32, k]),
                        )?;
                    }
                    ctx.flush();
                    ctx.synchronize().await
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        lose_device(queue.device());
        let mut errors = Vec::new();
        for h in handles {
            errors.push(h.await.unwrap());
        }
        errors
    });
    for e in errors {
        assert_eq!(e, Err(Error::DeviceLost));
    }
    // Later awaits fail the same way at once.
    let ctx = queue.context();
    let b = Buffer::<u32>::new(&device, 1, MemoryKind::Device);
    if let Ok(b) = b {
        let r = ctx.upload(&b, &[1]).and_then(|_| futures::executor::block_on(ctx.read(&b)).map(|_| ()));
        assert_eq!(r, Err(Error::DeviceLost));
    }
    assert_only_intended_validation_messages(&device);
}

/// A batch kind whose encode (part of a flush) tells the test it started, then holds the flush
/// until the test lets it go.
struct Gate {
    started: std::sync::Mutex<Option<std::sync::mpsc::Sender<()>>>,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl vkasync::batch::BatchKind for Gate {
    type Item = ();
    fn encode(&self, _items: &mut Vec<()>, _enc: &mut vkasync::batch::Encoder<'_>) -> vkasync::Result<()> {
        if let Some(tx) = self.started.lock().unwrap().take() {
            tx.send(()).unwrap();
            self.release.lock().unwrap().recv_timeout(Duration::from_secs(60)).expect("released");
        }
        Ok(())
    }
    fn fail(&self, _items: Vec<()>, _error: &Error) {}
}

/// A flush is encoded and submitted without the queue's lock: while one is held in its
/// encoding, other threads record, await work of the epoch being flushed, and await new work;
/// everything completes once it goes out, with the right results.
#[test]
fn recording_and_waiting_go_on_while_a_flush_is_encoded() {
    let _w = Watchdog::new(Duration::from_secs(120));
    let (device, mix) = setup();
    let queue = Queue::new(&device).unwrap();
    let (started_tx, started) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel();
    let gate =
        Arc::new(Gate { started: std::sync::Mutex::new(Some(started_tx)), release: std::sync::Mutex::new(release_rx) });
    let n = 64usize;
    let round = |ctx: &Ctx, buf: &Buffer<u32>| {
        ctx.dispatch(&mix, [1, 1, 1], &[buf.into()], bytemuck::bytes_of(&[n as u32, 1])).unwrap();
    };

    // `early` records into the epoch that the gated flush will take, before it is taken.
    let early = queue.context();
    let early_buf = Buffer::<u32>::new(&device, n, MemoryKind::Device).unwrap();
    early.upload(&early_buf, &vec![5; n]).unwrap();
    round(&early, &early_buf);
    let early_rb = early.read_back(&early_buf).unwrap();

    // A thread adds a gated item and awaits it: the GPU is idle, so it flushes at once, and
    // the flush stops in the gate's encode.
    let gated = {
        let (ctx, gate) = (queue.context(), gate.clone());
        std::thread::spawn(move || {
            ctx.batch(&gate, ()).unwrap();
            futures::executor::block_on(ctx.synchronize())
        })
    };
    started.recv_timeout(Duration::from_secs(60)).expect("the gated flush started");

    // Meanwhile, on other threads: await the epoch being flushed, and record and await new work.
    let (done_tx, done) = std::sync::mpsc::channel();
    let waiter = {
        let done_tx = done_tx.clone();
        std::thread::spawn(move || {
            let r = futures::executor::block_on(early.synchronize());
            done_tx.send("early").unwrap();
            r.map(|()| early_rb.into_vec().unwrap())
        })
    };
    let recorder = {
        let (ctx, mix) = (queue.context(), mix.clone());
        std::thread::spawn(move || {
            let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device).unwrap();
            ctx.upload(&buf, &vec![9; n]).unwrap();
            for _ in 0..3 {
                ctx.dispatch(&mix, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 1])).unwrap();
            }
            done_tx.send("recorded").unwrap();
            futures::executor::block_on(ctx.read(&buf))
        })
    };
    // Recording is not held up by the flush (it used to wait for the queue's lock).
    assert_eq!(done.recv_timeout(Duration::from_secs(30)).unwrap(), "recorded");
    // Nothing of the gated epoch can have completed: it is not submitted yet.
    assert!(done.recv_timeout(Duration::from_millis(200)).is_err());
    release.send(()).unwrap();

    assert!(gated.join().unwrap().is_ok());
    assert_eq!(waiter.join().unwrap().unwrap(), vec![mix_cpu(5, 1); n]);
    assert_eq!(done.recv_timeout(Duration::from_secs(30)).unwrap(), "early");
    assert_eq!(recorder.join().unwrap().unwrap(), vec![mix_cpu(9, 3); n]);
    let s = queue.stats();
    assert!(s.flushes >= 2 && s.submits >= 2, "{s}");
    drop((queue, mix, gate, early_buf));
    finish(device);
}

/// A waker that counts its wakes.
struct CountWakes(std::sync::atomic::AtomicUsize);

impl futures::task::ArcWake for CountWakes {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        arc_self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Polls `fut` once with a counting waker: its output, if ready, and the waker.
fn poll_once<F: std::future::Future>(fut: std::pin::Pin<&mut F>) -> (Option<F::Output>, Arc<CountWakes>) {
    let count = Arc::new(CountWakes(Default::default()));
    let waker = futures::task::waker(count.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    match fut.poll(&mut cx) {
        std::task::Poll::Ready(v) => (Some(v), count),
        std::task::Poll::Pending => (None, count),
    }
}

#[test]
fn a_lone_job_spins_for_its_own_submission_and_needs_no_wake() {
    let (device, mix) = setup();
    let data: Vec<u32> = (0..64).collect();
    let run = |queue: &Queue| {
        let ctx = queue.context();
        let buf = Buffer::<u32>::new(&device, 64, MemoryKind::Device).unwrap();
        ctx.upload(&buf, &data).unwrap();
        ctx.dispatch(&mix, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[64u32, 1])).unwrap();
        let mut read = std::pin::pin!(ctx.read(&buf));
        let (first, wakes) = poll_once(read.as_mut());
        let ready = first.is_some();
        let out = match first {
            Some(out) => out,
            // Not done in its first poll: the driver wakes it.
            None => futures::executor::block_on(read),
        };
        assert_eq!(out.unwrap(), data.iter().map(|&x| mix_cpu(x, 1)).collect::<Vec<_>>());
        (ready, wakes.0.load(std::sync::atomic::Ordering::SeqCst))
    };
    // With a spin long enough for any round trip here, the job's first poll submits its work,
    // reads the counter until it is done and returns the result: it needs no wake. (The
    // driver, told of the submission, may see the completion first and fire the job's slot:
    // at most one wake, of a future already done.)
    let spinning = Queue::builder(&device).spin_before_wait(Duration::from_secs(5)).build().unwrap();
    let (ready, wakes) = run(&spinning);
    assert!(ready, "a lone job with a long spin finishes in its first poll");
    assert!(wakes <= 1);
    assert!(spinning.stats().spin_ns > 0);
    assert_eq!(spinning.live_waiters(), 0);
    // Without a spin it waits (and the driver wakes it once its work is done).
    let blocking = Queue::builder(&device).spin_before_wait(Duration::ZERO).build().unwrap();
    let (ready, _) = run(&blocking);
    assert!(!ready, "without a spin the first poll returns Pending");
    assert_eq!(blocking.stats().spin_ns, 0);
    assert_eq!(blocking.live_waiters(), 0);
}

/// Group commit with a pipeline depth of 2 (the default) submits the work a job waits for
/// behind the one submission the GPU is running; with a depth of 1 it waits until the GPU is
/// idle. Both give the right results.
#[test]
fn a_waited_group_goes_out_behind_one_submission_in_flight_at_depth_2() {
    let _w = Watchdog::new(Duration::from_secs(300));
    let (device, mix) = setup();
    // Eight of these dispatches in a row make a long submission.
    let (n, _, _) = heavy(&device, &mix, 64 * 64, 65_000, Duration::from_millis(25));
    let groups = [mix.groups_for(n as u64), 1, 1];
    for depth in [2, 1] {
        let queue = Queue::builder(&device).pipeline_depth(depth).spin_before_wait(Duration::ZERO).build().unwrap();
        // A long submission: several maximal `mix` dispatches over n elements, flushed and not
        // awaited (nobody waits for it, so the driver does not either).
        let long = queue.context();
        let long_buf = Buffer::<u32>::new(&device, n, MemoryKind::Device).unwrap();
        long.upload(&long_buf, &vec![3; n]).unwrap();
        let rounds = 8;
        for _ in 0..rounds {
            long.dispatch(&mix, groups, &[(&long_buf).into()], bytemuck::bytes_of(&[n as u32, 65_000])).unwrap();
        }
        let long_rb = long.read_back(&long_buf).unwrap();
        long.flush();
        assert_eq!(queue.stats().submits, 1);
        // A short job waits for its work.
        let ctx = queue.context();
        let buf = Buffer::<u32>::new(&device, 64, MemoryKind::Device).unwrap();
        ctx.upload(&buf, &[7; 64]).unwrap();
        ctx.dispatch(&mix, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[64u32, 1])).unwrap();
        let mut read = std::pin::pin!(ctx.read(&buf));
        let (first, _) = poll_once(read.as_mut());
        assert!(first.is_none(), "the short job waits");
        let submits = queue.stats().submits;
        // The long submission must still be running for the comparison to say anything.
        assert!(!long_rb.is_ready().unwrap(), "the long submission finished too soon for this test");
        if depth == 2 {
            assert_eq!(submits, 2, "depth 2: the job's work goes out behind the running submission");
        } else {
            assert_eq!(submits, 1, "depth 1: the job's work waits for an idle GPU");
        }
        assert_eq!(futures::executor::block_on(read).unwrap(), vec![mix_cpu(7, 1); 64]);
        let mut want = 3;
        for _ in 0..rounds {
            want = mix_cpu(want, 65_000);
        }
        assert_eq!(long_rb.into_vec().unwrap(), vec![want; n]);
        assert_eq!(queue.stats().submits, 2);
        assert_eq!(queue.live_waiters(), 0);
    }

    // With two long submissions in flight, the job's work waits; once the first completes, the
    // driver submits it behind the second, before that one completes.
    let queue = Queue::builder(&device).pipeline_depth(2).spin_before_wait(Duration::ZERO).build().unwrap();
    let long = |seed: u32| {
        let ctx = queue.context();
        let buf = Buffer::<u32>::new(&device, n, MemoryKind::Device).unwrap();
        ctx.upload(&buf, &vec![seed; n]).unwrap();
        for _ in 0..8 {
            ctx.dispatch(&mix, groups, &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 65_000])).unwrap();
        }
        let rb = ctx.read_back(&buf).unwrap();
        ctx.flush();
        (rb, buf)
    };
    let (first, b1) = long(1);
    let (second, b2) = long(2);
    let ctx = queue.context();
    let buf = Buffer::<u32>::new(&device, 64, MemoryKind::Device).unwrap();
    ctx.upload(&buf, &[7; 64]).unwrap();
    let mut read = Box::pin(ctx.read(&buf));
    assert!(poll_once(read.as_mut()).0.is_none());
    assert_eq!(queue.stats().submits, 2, "two in flight: the job's work waits");
    while !first.is_ready().unwrap() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while queue.stats().submits < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(
        !second.is_ready().unwrap(),
        "the job's work went out only once the second long submission completed (or that one is too short here)"
    );
    assert_eq!(queue.stats().submits, 3, "the driver submits the job's work behind the second submission");
    assert_eq!(futures::executor::block_on(read).unwrap(), vec![7; 64]);
    drop((first, second, b1, b2, buf, queue));
    drop(mix);
    finish(device);
}
