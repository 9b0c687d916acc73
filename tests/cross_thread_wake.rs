//! A waker fired on another thread reaches its task while the executor waits for a long GPU
//! kernel, not when that wait ends.

mod common;

use common::{device, finish, mix_cpu, Watchdog};
use std::time::{Duration, Instant};
use vkasync::{kernels, Buffer, Executor, Kernel, MemoryKind};

#[test]
fn a_task_woken_from_another_thread_runs_while_a_long_kernel_is_waited_for() {
    let _w = Watchdog::new(Duration::from_secs(300));
    // lavapipe runs a kernel on as many threads as there are cores; with every core busy the
    // woken thread would wait for the OS scheduler, not for vkasync. Leave one core free (this
    // binary holds only this test, so the setting touches nothing else).
    if std::env::var_os("LP_NUM_THREADS").is_none() {
        std::env::set_var("LP_NUM_THREADS", "1");
    }
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let exec = Executor::new(&device).unwrap();

    // Task A: a kernel that runs for a second or more on lavapipe (n = 2^19, K = 4,000), and
    // at least 200 ms elsewhere.
    let (n, k, took) = common::heavy(&device, &mix, 1 << 19, 4000, Duration::from_millis(200));
    // The wake comes once the executor waits for A (a quarter of A's time after A recorded its
    // work), well before A is done.
    let delay = (took / 4).min(Duration::from_millis(300));
    let (ctx, m, dev) = (exec.context(), mix.clone(), device.clone());
    // Set once A's work is recorded (filling a large upload takes a while on the loop's thread).
    let recorded = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rec = recorded.clone();
    let long = exec.spawn(async move {
        let data: Vec<u32> = (0..n as u32).collect();
        let buf = Buffer::<u32>::new(&dev, n, MemoryKind::Device)?;
        ctx.upload(&buf, &data)?;
        common::dispatch_mix(&ctx, &m, &buf, k)?;
        rec.store(true, std::sync::atomic::Ordering::SeqCst);
        let out = ctx.read(&buf).await?;
        Ok::<_, vkasync::Error>((out, Instant::now()))
    });

    // Task B: waits for a message from a plain thread, sent once the executor is blocked on A.
    let (tx, rx) = futures::channel::oneshot::channel::<Instant>();
    let woken = exec.spawn(async move {
        let sent = rx.await.expect("sender kept");
        (sent, Instant::now())
    });
    let sender = std::thread::spawn(move || {
        // Bounded: if A fails before recording, the test fails on A's result, not in a hang.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !recorded.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(delay);
        let _ = tx.send(Instant::now());
    });

    exec.run();
    sender.join().unwrap();
    let (sent, resumed) = woken.join().unwrap();
    let (out, long_done) = long.join().unwrap().unwrap();
    let latency = resumed - sent;
    assert!(
        resumed < long_done,
        "the kernel finished before the woken task ran ({:?} after the wake): the test did not overlap them",
        long_done.saturating_duration_since(sent)
    );
    assert!(latency < Duration::from_millis(50), "the woken task ran {latency:?} after its wake");
    for (i, &x) in out.iter().enumerate().step_by(4099) {
        assert_eq!(x, mix_cpu(i as u32, k), "element {i}");
    }
    let s = exec.stats();
    // The cross-thread wake costs no extra submit and no extra host wait.
    assert_eq!((s.submits, s.host_waits), (1, 1), "{s}");
    drop((exec, mix));
    finish(device);
}
