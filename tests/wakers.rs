//! Poll- and drop-counting futures around executor tasks: each wake leads to exactly one poll,
//! no waker outlives the run, and every task future is dropped.

mod common;
use common::*;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};
use vkasync::{kernels, Buffer, Executor, Kernel, MemoryKind};

struct CountingWaker {
    inner: Waker,
    wakes: Arc<AtomicU32>,
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.inner.wake_by_ref();
    }
}

#[derive(Default)]
struct Counts {
    polls: Cell<u32>,
    wakes: Arc<AtomicU32>,
    drops: Cell<u32>,
    wakers: RefCell<Vec<Weak<CountingWaker>>>,
}

struct Counted<F> {
    inner: Pin<Box<F>>,
    counts: Rc<Counts>,
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let counts = self.counts.clone();
        counts.polls.set(counts.polls.get() + 1);
        let w = Arc::new(CountingWaker { inner: cx.waker().clone(), wakes: counts.wakes.clone() });
        counts.wakers.borrow_mut().push(Arc::downgrade(&w));
        let waker = Waker::from(w);
        self.inner.as_mut().poll(&mut Context::from_waker(&waker))
    }
}

impl<F> Drop for Counted<F> {
    fn drop(&mut self) {
        self.counts.drops.set(self.counts.drops.get() + 1);
    }
}

#[test]
fn each_wake_leads_to_one_poll_and_no_waker_leaks() {
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let exec = Executor::new(&device).unwrap();
    let counts: Vec<Rc<Counts>> = (0..8).map(|_| Rc::default()).collect();
    let mut handles = Vec::new();
    for (t, c) in counts.iter().enumerate() {
        let (ctx, mix, dev) = (exec.context(), mix.clone(), device.clone());
        let fut = async move {
            let n = 256;
            let buf = Buffer::<u32>::new(&dev, n, MemoryKind::Device).unwrap();
            ctx.upload(&buf, &vec![t as u32; n]).unwrap();
            // Three GPU round trips, each with one await.
            for k in 1..=3u32 {
                ctx.dispatch(&mix, [4, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, k])).unwrap();
                ctx.synchronize().await.unwrap();
            }
            let out = ctx.read(&buf).await.unwrap();
            assert_eq!(out[0], mix_cpu(mix_cpu(mix_cpu(t as u32, 1), 2), 3));
        };
        handles.push(exec.spawn(Counted { inner: Box::pin(fut), counts: c.clone() }));
    }
    exec.run();
    for h in handles {
        h.join().unwrap();
    }
    for c in &counts {
        let wakes = c.wakes.load(Ordering::SeqCst);
        // Four awaits that had to wait: four wakes; the first poll needs none.
        assert_eq!(wakes, 4);
        assert_eq!(c.polls.get(), wakes + 1, "a poll without a wake, or a wake without a poll");
        assert_eq!(c.drops.get(), 1, "the task's future was dropped once");
        // The queue's driver thread wakes tasks: it may still be returning from the last
        // `wake` (which drops its waker) when the task has already finished on this thread.
        let leaked = || c.wakers.borrow().iter().filter(|w| w.strong_count() > 0).count();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while leaked() > 0 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert_eq!(leaked(), 0, "the executor still holds a waker of a finished task");
    }
    drop((exec, mix));
    finish(device);
}

#[test]
fn an_aborted_waiting_task_releases_its_waker() {
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let exec = Executor::new(&device).unwrap();
    let c: Rc<Counts> = Rc::default();
    let (ctx, m, dev) = (exec.context(), mix.clone(), device.clone());
    let victim = exec.spawn(Counted {
        inner: Box::pin(async move {
            let buf = Buffer::<u32>::new(&dev, 64, MemoryKind::Device).unwrap();
            ctx.dispatch(&m, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[64u32, 1])).unwrap();
            ctx.synchronize().await.unwrap();
            unreachable!("aborted before the GPU finished");
        }),
        counts: c.clone(),
    });
    let victim = Rc::new(victim);
    let v = victim.clone();
    let killer = exec.spawn(async move { v.abort() });
    killer.join().unwrap();
    exec.run();
    assert!(Rc::try_unwrap(victim).unwrap().join().unwrap_err().is_cancelled());
    assert_eq!(c.drops.get(), 1);
    let leaked = || c.wakers.borrow().iter().filter(|w| w.strong_count() > 0).count();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while leaked() > 0 && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert_eq!(leaked(), 0);
    drop((exec, mix));
    finish(device);
}
