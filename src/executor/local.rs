//! The native executor's task runner: local (`!Send`) tasks on one thread, a ready queue that
//! wakers on any thread push to, and the loop that runs tasks, submits when no task can run
//! (under [`FlushPolicy::WhenIdle`](super::FlushPolicy::WhenIdle)), and sleeps in
//! `thread::park` while the queue's driver waits for the GPU.

use super::backend::Backend;
use super::core::{bump, lock, QueueCore};
use super::task::{JoinError, JoinHandle};
use async_task::Runnable;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// The ready queue. Wakers may fire on any thread, so it is a mutex; the executor's thread is
/// unparked when a task becomes ready.
pub(crate) struct ReadyQueue {
    queue: Mutex<VecDeque<Runnable<Aborted>>>,
    thread: std::thread::Thread,
}

impl ReadyQueue {
    fn push(&self, r: Runnable<Aborted>) {
        lock(&self.queue).push_back(r);
        self.thread.unpark();
    }

    fn pop(&self) -> Option<Runnable<Aborted>> {
        lock(&self.queue).pop_front()
    }

    fn is_empty(&self) -> bool {
        lock(&self.queue).is_empty()
    }
}

/// The loop checks every this many task polls whether the GPU went idle while tasks wait for
/// recorded work ([`QueueCore::executor_check`]): a lock and at most one counter read per check.
const CHECK_EVERY: u32 = 8;

/// Futures larger than this many bytes are boxed when spawned (see [`Local::spawn`]).
const BOX_ABOVE: usize = 128;

/// How the loop gets the GPU waited for.
pub(crate) enum Drive<B: Backend> {
    /// The queue's driver thread waits and wakes tasks; the loop may spin on the counter
    /// (with this waiter), then parks.
    Thread(B::Waiter),
    /// The loop runs the driver's decisions itself when no task is ready (the model tests).
    #[allow(dead_code)] // used by the model tests
    Inline(B::Waiter),
}

/// The executor's local state.
pub(crate) struct Local<B: Backend> {
    pub ready: Arc<ReadyQueue>,
    pub core: Arc<QueueCore<B>>,
    drive: Drive<B>,
    tasks_alive: Cell<usize>,
    closed: Cell<bool>,
    /// The model of a [`crate::Queue`] (tests only): the loop never flushes when idle, so
    /// awaited work goes out only by group commit.
    queue_like: Cell<bool>,
    /// The unfinished tasks, so that [`JoinHandle::abort`] and shutdown can cancel them (a task
    /// whose only waker is stored inside itself would otherwise never be dropped).
    live: RefCell<Vec<Option<Live>>>,
    /// Free slots of `live`.
    free_slots: RefCell<Vec<usize>>,
    /// How many `run_until` calls are on the stack (a `JoinHandle` polled with none would
    /// never see its task run).
    running: Cell<u32>,
}

impl<B: Backend> Local<B> {
    pub fn new(core: Arc<QueueCore<B>>, drive: Drive<B>) -> Rc<Self> {
        Rc::new(Local {
            ready: Arc::new(ReadyQueue { queue: Mutex::new(VecDeque::new()), thread: std::thread::current() }),
            core,
            drive,
            tasks_alive: Cell::new(0),
            closed: Cell::new(false),
            queue_like: Cell::new(false),
            live: RefCell::default(),
            free_slots: RefCell::default(),
            running: Cell::new(0),
        })
    }

    /// Makes a model run behave as a [`crate::Queue`]: no flush by the loop when it idles.
    #[cfg(test)]
    pub fn model_queue(&self) {
        self.queue_like.set(true);
        self.core.model_as_queue();
    }

    pub fn tasks_alive(&self) -> usize {
        self.tasks_alive.get()
    }

    /// Spawns a task. It runs when the executor runs (`run`, `block_on`, `join`).
    ///
    /// A future larger than [`BOX_ABOVE`] bytes is boxed first: the task wraps it in several
    /// layers, each a move of the whole future, and a task's first poll moves its wrappers'
    /// fields once more; boxed, each of those moves is one pointer.
    pub fn spawn<F>(self: &Rc<Self>, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        if std::mem::size_of::<F>() > BOX_ABOVE {
            self.spawn_unboxed(Box::pin(future))
        } else {
            self.spawn_unboxed(future)
        }
    }

    fn spawn_unboxed<F>(self: &Rc<Self>, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let id = self.free_slots.borrow_mut().pop().unwrap_or_else(|| {
            let mut live = self.live.borrow_mut();
            live.push(None);
            live.len() - 1
        });
        let guard = TaskGuard { local: Rc::downgrade(self), id };
        let trace = self.core.trace.as_ref().map(|t| {
            let task = crate::trace::next_id();
            t.instant(crate::trace::HostKind::Spawn, &[task]);
            task
        });
        bump(&self.core.counters.tasks_spawned, 1);
        self.tasks_alive.set(self.tasks_alive.get() + 1);
        let ready = self.ready.clone();
        // The abort flag lives in the task's header (its metadata), beside the future: no
        // allocation of its own, and the future reads it through a pointer that stays valid for
        // as long as the future exists.
        let (runnable, task) = async_task::Builder::new().metadata(Aborted::default()).spawn_local(
            move |aborted: &Aborted| {
                let aborted = aborted as *const Aborted;
                async move {
                    let _guard = guard;
                    Traced { inner: CatchTask::new(future, aborted), trace }.await
                }
            },
            move |r| ready.push(r),
        );
        let entry = Live { waker: runnable.waker(), aborted: task.metadata() as *const Aborted };
        if let Some(slot) = self.live.borrow_mut().get_mut(id) {
            *slot = Some(entry);
        }
        if self.closed.get() {
            // The executor is gone: the task is cancelled without running.
            drop(runnable);
        } else {
            runnable.schedule();
        }
        JoinHandle::new(task.fallible(), id, self.clone() as Rc<dyn Runner>)
    }

    /// Runs tasks until `done()` says so. See the protocol in the module docs.
    pub fn run_until(&self, done: impl FnMut() -> bool) {
        // Restored on every exit, unwinding included (a panic in `done` or in the backend).
        struct Running<'a, B: Backend>(&'a Local<B>);
        impl<B: Backend> Drop for Running<'_, B> {
            fn drop(&mut self) {
                self.0.running.set(self.0.running.get() - 1);
                self.0.core.set_running(false);
            }
        }
        self.running.set(self.running.get() + 1);
        self.core.set_running(true);
        let _running = Running(self);
        // The tasks' `poll` spans go to this executor's trace; `self.core` holds it for the
        // scope's life.
        let _trace = crate::trace::RunScope::enter(self.core.trace.as_ref());
        self.run_loop(done);
    }

    fn run_loop(&self, mut done: impl FnMut() -> bool) {
        loop {
            let mut ran = 0u32;
            while let Some(r) = self.ready.pop() {
                r.run();
                ran = ran.wrapping_add(1);
                if ran % CHECK_EVERY == 0 {
                    // Tasks keep the loop busy: submit what others wait for if the GPU is idle.
                    crate::trace::break_polls();
                    self.core.executor_check();
                }
            }
            crate::trace::break_polls();
            if done() || self.closed.get() {
                return;
            }
            // No task can run: submit what they wait for (or what nobody waits for, when
            // nothing else is in flight).
            if !self.queue_like.get() && self.core.executor_idle() {
                continue;
            }
            if let Drive::Inline(waiter) = &self.drive {
                // The model's stand-in for parking: the driver's decisions run here.
                self.core.set_parked(true);
                let progressed = self.core.drive_inline(waiter, 64);
                self.core.set_parked(false);
                if progressed {
                    continue;
                }
            }
            if self.ready.is_empty() {
                // The driver waits for the GPU, or the tasks wait for something outside.
                // Sleep until a waker fires (from any thread, the driver's included).
                if self.tasks_alive.get() == 0 && done() {
                    return;
                }
                match &self.drive {
                    // Nothing can wake a model run from outside: the tasks are stuck.
                    Drive::Inline(_) => return,
                    Drive::Thread(waiter) => {
                        if self.core.executor_spin(waiter, || !self.ready.is_empty()) {
                            continue;
                        }
                    }
                }
                // While parked, the driver submits and waits for what tasks wait for.
                self.core.set_parked(true);
                std::thread::park();
                self.core.set_parked(false);
            }
        }
    }

    /// Stops the executor: cancels every task, then closes the queue (see
    /// [`QueueCore::close`]), joining `driver`.
    pub fn shutdown(&self, driver: Option<super::core::DriverThread>) -> super::core::Closed {
        if self.closed.replace(true) {
            return super::core::Closed::Released;
        }
        // Cancel every unfinished task: aborting schedules it, and dropping its runnable drops
        // its future. Drop them outside any borrow: their destructors may touch the core.
        let live: Vec<_> = self.live.borrow_mut().drain(..).flatten().collect();
        self.free_slots.borrow_mut().clear();
        for t in live {
            t.abort();
        }
        loop {
            let wakers = self.core.take_all_wakers();
            let mut any = !wakers.is_empty();
            drop(wakers);
            while let Some(r) = self.ready.pop() {
                any = true;
                drop(r);
            }
            if !any {
                break;
            }
        }
        self.core.close(driver, super::core::Recorded::Discard)
    }
}

/// Runs an executor's loop without naming its backend (for [`JoinHandle`]).
pub(crate) trait Runner {
    fn run_until_dyn(&self, done: &mut dyn FnMut() -> bool);
    /// Whether a loop of this executor is running (on this thread).
    fn is_running(&self) -> bool;
    /// Cancels the unfinished task in slot `id` at its next poll (see [`JoinHandle::abort`]).
    fn abort(&self, id: usize);
}

impl<B: Backend> Runner for Local<B> {
    fn run_until_dyn(&self, done: &mut dyn FnMut() -> bool) {
        self.run_until(done)
    }
    fn is_running(&self) -> bool {
        self.running.get() > 0
    }
    fn abort(&self, id: usize) {
        if let Some(Some(t)) = self.live.borrow().get(id) {
            t.abort();
        }
    }
}

/// A task's abort flag, in its header ([`async_task::Builder::metadata`]).
#[derive(Default)]
pub(crate) struct Aborted(AtomicBool);

/// An unfinished task: a waker to schedule it, and its abort flag.
struct Live {
    waker: Waker,
    /// Points into the task's header, which lives as long as any waker of the task: `waker`
    /// keeps it alive while this entry exists.
    aborted: *const Aborted,
}

impl Live {
    fn aborted(&self) -> &Aborted {
        // SAFETY: `aborted` points into the header of the task `waker` refers to, and a task's
        // header is freed only once its last waker, runnable and handle are gone.
        unsafe { &*self.aborted }
    }

    /// Cancels the task at its next poll, and schedules it.
    fn abort(&self) {
        self.aborted().0.store(true, Ordering::Relaxed);
        self.waker.wake_by_ref();
    }
}

/// Counts a task as completed when its future finishes or is dropped.
struct TaskGuard<B: Backend> {
    local: std::rc::Weak<Local<B>>,
    /// The task's slot in `Local::live`.
    id: usize,
}

impl<B: Backend> Drop for TaskGuard<B> {
    fn drop(&mut self) {
        if let Some(s) = self.local.upgrade() {
            bump(&s.core.counters.tasks_completed, 1);
            s.tasks_alive.set(s.tasks_alive.get() - 1);
            if let (Ok(mut live), Ok(mut free)) = (s.live.try_borrow_mut(), s.free_slots.try_borrow_mut()) {
                if let Some(slot) = live.get_mut(self.id) {
                    *slot = None;
                    free.push(self.id);
                }
            }
        }
    }
}

/// With a trace, each poll of a task is a `poll` span, and awaits inside it know the task's id.
/// The trace is the running loop's ([`crate::trace::RunScope`]): a task holds no reference.
struct Traced<F> {
    inner: F,
    /// The task's id in the trace, if its executor traces.
    trace: Option<u64>,
}

impl<F: Future> Future for Traced<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned: never moved out of `self`; `trace` is not
        // pinned (only read).
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let inner = unsafe { Pin::new_unchecked(&mut this.inner) };
        let Some(task) = this.trace else { return inner.poll(cx) };
        let Some(scope) = crate::trace::PollScope::enter(task) else { return inner.poll(cx) };
        let out = inner.poll(cx);
        scope.end(out.is_ready());
        out
    }
}

/// Runs a task's future and turns every panic it raises into a [`JoinError`]: a panic while it
/// is polled, and a panic while it is dropped, which happens after it finished, after it was
/// aborted, or when the executor shuts down. Nothing a task does can unwind into the executor's
/// loop. A poll after the task's abort flag was set drops the future instead of polling it.
struct CatchTask<F> {
    /// Structurally pinned: never moved out, only dropped in place (by `Pin::set` or `Drop`).
    inner: Option<F>,
    /// The task's abort flag, in its header.
    aborted: *const Aborted,
}

impl<F> CatchTask<F> {
    fn new(inner: F, aborted: *const Aborted) -> Self {
        CatchTask { inner: Some(inner), aborted }
    }
}

impl<F: Future> Future for CatchTask<F> {
    type Output = std::result::Result<F::Output, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `aborted` points into the header of the task that holds this future, which
        // outlives the future.
        let aborted = unsafe { &*self.aborted }.0.load(Ordering::Relaxed);
        // SAFETY: `inner` is structurally pinned: this type never moves it out of `self`; it is
        // only dropped in place, through `Pin::set` below or by `Drop`.
        let mut inner = unsafe { self.map_unchecked_mut(|s| &mut s.inner) };
        let Some(fut) = inner.as_mut().as_pin_mut() else {
            return Poll::Ready(Err(JoinError::cancelled()));
        };
        let out = if aborted {
            Err(JoinError::cancelled())
        } else {
            match catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
                Ok(Poll::Pending) => return Poll::Pending,
                Ok(Poll::Ready(v)) => Ok(v),
                Err(payload) => Err(JoinError::panicked(payload)),
            }
        };
        // An aborted future still holds the task's locals: drop them here, where a panic in
        // their destructors can still be caught and reported as the task's outcome.
        match catch_unwind(AssertUnwindSafe(|| inner.set(None))) {
            Ok(()) => Poll::Ready(out),
            Err(payload) => Poll::Ready(Err(JoinError::panicked(payload))),
        }
    }
}

impl<F> Drop for CatchTask<F> {
    fn drop(&mut self) {
        // Dropped unfinished (the executor shut down): the task is cancelled either way, so a
        // panic from its destructors is contained and logged.
        if self.inner.is_some() && catch_unwind(AssertUnwindSafe(|| self.inner = None)).is_err() {
            log::error!("vkasync: a cancelled task panicked while being dropped");
        }
    }
}
