//! The scheduling core, generic over the queue ([`Backend`]) so that it can be tested without a
//! GPU. See the module docs of [`crate::executor`] for the protocol this implements.

use super::backend::Backend;
use super::task::{JoinError, JoinHandle};
use super::waiters::{Key, Waiters};
use super::{FlushPolicy, Stats, WaitPolicy};
use crate::error::{Error, Result};
use async_task::Runnable;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// How long dropping an executor waits for its submitted work.
pub(crate) const SHUTDOWN_BOUND: Duration = Duration::from_secs(10);

/// The ready queue. Wakers may fire on any thread, so it is a mutex; the executor thread is
/// unparked when a task becomes ready while it sleeps.
pub(crate) struct ReadyQueue {
    queue: Mutex<VecDeque<Runnable>>,
    thread: std::thread::Thread,
}

impl ReadyQueue {
    fn push(&self, r: Runnable) {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).push_back(r);
        self.thread.unpark();
    }

    fn pop(&self) -> Option<Runnable> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front()
    }

    fn is_empty(&self) -> bool {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
    }
}

/// The state of the work a context recorded into one flush epoch.
#[derive(Debug, Clone)]
pub(crate) enum BatchStatus {
    /// Not yet submitted.
    Recording,
    /// Submitted; complete once the timeline reaches this value.
    Submitted(u64),
    /// The submit failed; the work did not run.
    Failed(Error),
}

/// Shared by the executor and every context that recorded into one epoch.
#[derive(Debug)]
pub(crate) struct Batch {
    pub status: RefCell<BatchStatus>,
}

/// Mutable scheduling state, borrowed only inside the core's own functions (never across user
/// code, never while waking).
pub(crate) struct Core<B> {
    pub backend: B,
    /// The epoch now recording.
    batch: Rc<Batch>,
    waiters: Waiters,
    /// Waiters on the epoch now recording.
    pending_waiters: Vec<Key>,
    /// Waiters on submitted work, by timeline value.
    by_value: BTreeMap<u64, Vec<Key>>,
    /// The last counter value read.
    completed: u64,
    /// Set on device loss: every later wait fails with it.
    fatal: Option<Error>,
    /// The GPU wait going on (its target value and when it began), if any.
    waiting: Option<(u64, std::time::Instant)>,
    /// How long recent GPU waits took, for the adaptive spin.
    estimate: SpinEstimate,
}

/// An estimate of how long a GPU wait takes, from the waits seen so far (an exponential moving
/// average, weight 1/4 for the newest), for the adaptive spin: spin for twice the estimate
/// when that is within the bound, not at all when waits are longer (a long kernel then costs
/// no CPU time).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpinEstimate {
    ns: u64,
}

impl SpinEstimate {
    fn record(&mut self, took: Duration) {
        let t = took.as_nanos().min(u64::MAX as u128 / 4) as u64;
        self.ns = (self.ns * 3 + t) / 4;
    }

    /// How long to spin before blocking, at most `bound`.
    fn budget(&self, bound: Duration) -> Duration {
        let est = Duration::from_nanos(self.ns);
        if est > bound {
            Duration::ZERO
        } else {
            (est * 2).min(bound)
        }
    }
}

/// What the loop does after an idle step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Something changed (a flush, a finished wait): look for ready tasks again.
    Progress,
    /// Nothing to do until the GPU wait ends or a waker fires.
    Sleep,
}

impl<B> Core<B> {
    /// Live waiter slots (0 once every `synchronize` future has finished or been dropped).
    #[allow(dead_code)] // used by the model tests
    pub fn waiter_count(&self) -> usize {
        self.waiters.len()
    }
}

/// Counters, in cells so that task bookkeeping never needs the core's borrow.
#[derive(Default)]
pub(crate) struct Counters {
    pub tasks_spawned: Cell<u64>,
    pub tasks_completed: Cell<u64>,
    pub await_points: Cell<u64>,
    pub flushes: Cell<u64>,
    pub submits: Cell<u64>,
    pub host_waits: Cell<u64>,
    pub barriers: Cell<u64>,
    pub timeline: Cell<u64>,
    pub wait_ns: Cell<u64>,
    pub spin_ns: Cell<u64>,
}

fn bump(c: &Cell<u64>, by: u64) {
    c.set(c.get() + by);
}

/// Options fixed at construction.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    pub policy: WaitPolicy,
    pub timeout: Option<Duration>,
    pub max_pending: usize,
    /// How long to read the counter before blocking (zero: block at once). With `adaptive`,
    /// the most it may spin.
    pub spin: Duration,
    /// Spin only as long as recent waits suggest the GPU will finish (see [`SpinEstimate`]).
    pub adaptive: bool,
    /// When recorded work is submitted.
    pub flush: FlushPolicy,
}

/// What the executor and its contexts share.
pub(crate) struct Shared<B> {
    pub ready: Arc<ReadyQueue>,
    pub core: RefCell<Core<B>>,
    pub counters: Counters,
    pub options: Options,
    tasks_alive: Cell<usize>,
    closed: Cell<bool>,
    /// Abort handles of the unfinished tasks, so that shutdown can cancel every one of them
    /// (a task whose only waker is stored inside itself would otherwise never be dropped).
    live: RefCell<Vec<Option<futures::future::AbortHandle>>>,
    /// Free slots of `live`.
    free_slots: RefCell<Vec<usize>>,
    /// How many `run_until` calls are on the stack: a GPU wait polled outside the executor's
    /// loop would never be woken, so it fails instead of hanging.
    running: Cell<u32>,
}

impl<B: Backend + 'static> Shared<B> {
    pub fn new(backend: B, options: Options) -> Rc<Self> {
        Rc::new(Shared {
            ready: Arc::new(ReadyQueue { queue: Mutex::new(VecDeque::new()), thread: std::thread::current() }),
            core: RefCell::new(Core {
                backend,
                batch: Rc::new(Batch { status: RefCell::new(BatchStatus::Recording) }),
                waiters: Waiters::default(),
                pending_waiters: Vec::new(),
                by_value: BTreeMap::new(),
                completed: 0,
                fatal: None,
                waiting: None,
                estimate: SpinEstimate { ns: options.spin.as_nanos().min(u64::MAX as u128) as u64 / 2 },
            }),
            counters: Counters::default(),
            options,
            tasks_alive: Cell::new(0),
            closed: Cell::new(false),
            live: RefCell::default(),
            free_slots: RefCell::default(),
            running: Cell::new(0),
        })
    }

    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        Stats {
            tasks_spawned: c.tasks_spawned.get(),
            tasks_completed: c.tasks_completed.get(),
            await_points: c.await_points.get(),
            flushes: c.flushes.get(),
            submits: c.submits.get(),
            host_waits: c.host_waits.get(),
            barriers: c.barriers.get(),
            timeline_value: c.timeline.get(),
            wait_ns: c.wait_ns.get(),
            spin_ns: c.spin_ns.get(),
        }
    }

    pub fn tasks_alive(&self) -> usize {
        self.tasks_alive.get()
    }

    /// Spawns a task. It runs when the executor runs (`run`, `block_on`, `join`).
    pub fn spawn<F>(self: &Rc<Self>, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let (abortable, abort) = futures::future::abortable(future);
        let id = {
            let mut live = self.live.borrow_mut();
            match self.free_slots.borrow_mut().pop() {
                Some(i) => {
                    live[i] = Some(abort.clone());
                    i
                }
                None => {
                    live.push(Some(abort.clone()));
                    live.len() - 1
                }
            }
        };
        let guard = TaskGuard { shared: Rc::downgrade(self), id };
        let wrapped = async move {
            let _guard = guard;
            CatchTask::new(abortable).await
        };
        bump(&self.counters.tasks_spawned, 1);
        self.tasks_alive.set(self.tasks_alive.get() + 1);
        let ready = self.ready.clone();
        let (runnable, task) = async_task::spawn_local(wrapped, move |r| ready.push(r));
        if self.closed.get() {
            // The executor is gone: the task is cancelled without running.
            drop(runnable);
        } else {
            runnable.schedule();
        }
        JoinHandle::new(task.fallible(), abort, self.clone() as Rc<dyn Runner>)
    }

    /// Runs tasks until `done()` says so. See the protocol in the module docs.
    pub fn run_until(&self, done: impl FnMut() -> bool) {
        // Restored on every exit, unwinding included (a panic in `done` or in the backend).
        struct Running<'a>(&'a Cell<u32>);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                self.0.set(self.0.get() - 1);
            }
        }
        self.running.set(self.running.get() + 1);
        let _running = Running(&self.running);
        self.run_loop(done);
    }

    fn run_loop(&self, mut done: impl FnMut() -> bool) {
        loop {
            while let Some(r) = self.ready.pop() {
                r.run();
            }
            if done() || self.closed.get() {
                return;
            }
            let (wakers, step) = self.idle_step();
            let woke = !wakers.is_empty();
            for w in wakers {
                w.wake();
            }
            if step == Step::Sleep && !woke && self.ready.is_empty() {
                // Waiting for the GPU (on the wait thread), or for something outside. Sleep
                // until the wait ends or a waker fires, from any thread: both unpark us.
                if self.tasks_alive.get() == 0 && done() {
                    return;
                }
                std::thread::park();
            }
        }
    }

    /// One decision when no task is ready: flush, begin a GPU wait, or take the outcome of the
    /// one going on. Returns the wakers to wake (after the core's borrow is released) and what
    /// the loop should do next.
    fn idle_step(&self) -> (Vec<Waker>, Step) {
        let mut core = self.core.borrow_mut();
        let mut wakers = Vec::new();
        // Flush when someone waits for the recording epoch, or when nothing else could be
        // waited for (so recorded work is never left behind). A wait going on does not stop
        // a flush: the submit goes to the queue while the wait thread blocks.
        if core.backend.has_pending() && (!core.pending_waiters.is_empty() || core.by_value.is_empty()) {
            self.flush_locked(&mut core, &mut wakers);
            return (wakers, Step::Progress);
        }
        let (target, waited) = if let Some((target, started)) = core.waiting {
            match core.backend.wait_result() {
                // Still blocked on the GPU: sleep until the wait thread or a waker unparks us.
                None => return (wakers, Step::Sleep),
                Some(r) => {
                    core.waiting = None;
                    let took = started.elapsed();
                    core.estimate.record(took);
                    bump(&self.counters.wait_ns, took.as_nanos() as u64);
                    (target, r)
                }
            }
        } else {
            if core.by_value.is_empty() {
                return (wakers, Step::Sleep);
            }
            let target = match self.options.policy {
                WaitPolicy::All => *core.by_value.keys().next_back().expect("non-empty"),
                WaitPolicy::Oldest => *core.by_value.keys().next().expect("non-empty"),
            };
            let started = std::time::Instant::now();
            // Optionally read the counter for a short while before blocking: a block and a
            // wake-up cost the host several microseconds when the GPU is about to finish anyway.
            // A target already seen reached (a group-commit check read the counter) needs none.
            let mut spun = Ok(target <= core.completed);
            let budget =
                if self.options.adaptive { core.estimate.budget(self.options.spin) } else { self.options.spin };
            if !budget.is_zero() && spun == Ok(false) {
                loop {
                    match core.backend.completed() {
                        Ok(c) if c >= target => {
                            spun = Ok(true);
                            core.estimate.record(started.elapsed());
                            break;
                        }
                        Ok(_) if started.elapsed() < budget => std::hint::spin_loop(),
                        Ok(_) => break,
                        Err(e) => {
                            spun = Err(e);
                            break;
                        }
                    }
                }
            }
            if !budget.is_zero() {
                bump(&self.counters.spin_ns, started.elapsed().as_nanos() as u64);
            }
            if let Ok(false) = spun {
                // Block: the wait thread waits for the GPU; this thread sleeps in `park`.
                bump(&self.counters.host_waits, 1);
                core.backend.begin_wait(target, self.options.timeout);
                core.waiting = Some((target, started));
                return (wakers, Step::Sleep);
            }
            bump(&self.counters.wait_ns, started.elapsed().as_nanos() as u64);
            (target, spun.map(|_| true))
        };
        let outcome = waited.and_then(|reached| {
            let c = core.backend.completed()?;
            Ok((reached, c))
        });
        match outcome {
            Ok((reached, completed)) => {
                core.completed = core.completed.max(completed);
                let done_upto = core.completed;
                fire_upto(&mut core, done_upto, Ok(()), &mut wakers);
                if !reached {
                    let t = self.options.timeout.unwrap_or_default();
                    fire_upto(&mut core, target, Err(Error::Timeout(t)), &mut wakers);
                }
            }
            Err(e) => self.fail_all(&mut core, e, &mut wakers),
        }
        (wakers, Step::Progress)
    }

    /// Whether every submission of this executor has completed, reading the counter if the
    /// last value read does not tell. Waiters whose values the read shows reached are fired.
    fn gpu_idle(&self, core: &mut Core<B>, wakers: &mut Vec<Waker>) -> bool {
        let last = self.counters.timeline.get();
        if last <= core.completed {
            return true;
        }
        match core.backend.completed() {
            Ok(c) => {
                core.completed = core.completed.max(c);
                let done_upto = core.completed;
                fire_upto(core, done_upto, Ok(()), wakers);
                last <= core.completed
            }
            // The error reaches the waiters at the next wait.
            Err(_) => false,
        }
    }

    /// Submits the recording epoch (even if nobody waits for it).
    pub fn flush_now(&self) {
        let mut wakers = Vec::new();
        {
            let mut core = self.core.borrow_mut();
            if core.backend.has_pending() {
                self.flush_locked(&mut core, &mut wakers);
            }
        }
        for w in wakers {
            w.wake();
        }
    }

    /// Flushes if the recorded work passed the bound.
    pub fn flush_if_over_bound(&self) {
        let over = self.core.borrow().backend.pending_len() >= self.options.max_pending;
        if over {
            self.flush_now();
        }
    }

    fn flush_locked(&self, core: &mut Core<B>, wakers: &mut Vec<Waker>) {
        let batch = std::mem::replace(&mut core.batch, Rc::new(Batch { status: RefCell::new(BatchStatus::Recording) }));
        let keys = std::mem::take(&mut core.pending_waiters);
        if let Some(e) = core.fatal.clone() {
            core.backend.abandon();
            *batch.status.borrow_mut() = BatchStatus::Failed(e.clone());
            for k in keys {
                wakers.extend(core.waiters.fire(k, Err(e.clone())));
            }
            return;
        }
        bump(&self.counters.flushes, 1);
        match core.backend.flush() {
            Ok(info) => {
                bump(&self.counters.submits, 1);
                bump(&self.counters.barriers, info.barriers);
                self.counters.timeline.set(info.value);
                *batch.status.borrow_mut() = BatchStatus::Submitted(info.value);
                if !keys.is_empty() {
                    core.by_value.entry(info.value).or_default().extend(keys);
                }
            }
            Err(e) => {
                *batch.status.borrow_mut() = BatchStatus::Failed(e.clone());
                for k in keys {
                    wakers.extend(core.waiters.fire(k, Err(e.clone())));
                }
                if e.is_device_lost() {
                    self.fail_all(core, e, wakers);
                }
            }
        }
    }

    /// Device loss (or another fatal wait error): every waiter gets the error.
    fn fail_all(&self, core: &mut Core<B>, e: Error, wakers: &mut Vec<Waker>) {
        if e.is_device_lost() {
            core.fatal = Some(e.clone());
            core.backend.abandon();
            *core.batch.status.borrow_mut() = BatchStatus::Failed(e.clone());
        }
        let keys: Vec<Key> = std::mem::take(&mut core.by_value).into_values().flatten().collect();
        for k in keys.into_iter().chain(std::mem::take(&mut core.pending_waiters)) {
            wakers.extend(core.waiters.fire(k, Err(e.clone())));
        }
    }

    /// Records through `f` into the backend; if it recorded anything, the context now has work
    /// in the recording epoch. Then flushes if the recorded work passed the bound.
    pub fn record<R>(&self, state: &ContextState, f: impl FnOnce(&mut B) -> Result<R>) -> Result<R> {
        let r = {
            let mut core = self.core.borrow_mut();
            let before = core.backend.recorded_count();
            let r = f(&mut core.backend)?;
            if core.backend.recorded_count() != before {
                *state.last.borrow_mut() = Some(core.batch.clone());
            }
            r
        };
        self.flush_if_over_bound();
        Ok(r)
    }

    /// Stops the executor: cancels every task, discards unsubmitted work, waits (bounded) for
    /// submitted work and releases it.
    pub fn shutdown(&self) {
        if self.closed.replace(true) {
            return;
        }
        // Cancel every unfinished task: aborting schedules it, and dropping its runnable drops
        // its future. Drop them outside any borrow: their destructors may touch the core.
        let live: Vec<_> = self.live.borrow_mut().drain(..).flatten().collect();
        for h in live {
            h.abort();
        }
        loop {
            let wakers = self.core.borrow_mut().waiters.take_all_wakers();
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
        self.core.borrow_mut().backend.shutdown(SHUTDOWN_BOUND);
    }
}

/// Runs an executor's loop without naming its backend (for [`JoinHandle::join`]).
pub(crate) trait Runner {
    fn run_until_dyn(&self, done: &mut dyn FnMut() -> bool);
}

impl<B: Backend + 'static> Runner for Shared<B> {
    fn run_until_dyn(&self, done: &mut dyn FnMut() -> bool) {
        self.run_until(done)
    }
}

fn fire_upto<B>(core: &mut Core<B>, upto: u64, outcome: Result<(), Error>, wakers: &mut Vec<Waker>) {
    let later = core.by_value.split_off(&(upto + 1));
    let done = std::mem::replace(&mut core.by_value, later);
    for k in done.into_values().flatten() {
        wakers.extend(core.waiters.fire(k, outcome.clone()));
    }
}

/// Counts a task as completed when its future finishes or is dropped.
struct TaskGuard<B: Backend + 'static> {
    shared: std::rc::Weak<Shared<B>>,
    /// The task's slot in `Shared::live`.
    id: usize,
}

impl<B: Backend + 'static> Drop for TaskGuard<B> {
    fn drop(&mut self) {
        if let Some(s) = self.shared.upgrade() {
            bump(&s.counters.tasks_completed, 1);
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

/// Per-context state: the last epoch this context recorded into.
#[derive(Default)]
pub(crate) struct ContextState {
    pub last: RefCell<Option<Rc<Batch>>>,
}

/// Resolves when the work of one epoch (as captured at creation) has completed.
pub(crate) struct SyncFuture<B: Backend + 'static> {
    shared: Rc<Shared<B>>,
    batch: Option<Rc<Batch>>,
    key: Option<Key>,
    counted: bool,
}

impl<B: Backend + 'static> SyncFuture<B> {
    pub fn new(shared: Rc<Shared<B>>, batch: Option<Rc<Batch>>) -> Self {
        SyncFuture { shared, batch, key: None, counted: false }
    }

    fn count(&mut self) {
        if !self.counted {
            self.counted = true;
            bump(&self.shared.counters.await_points, 1);
        }
    }
}

impl<B: Backend + 'static> Future for SyncFuture<B> {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        let shared = this.shared.clone();
        let mut core = shared.core.borrow_mut();
        if let Some(key) = this.key {
            match core.waiters.outcome(key) {
                None => {
                    core.waiters.update_waker(key, cx.waker());
                    return Poll::Pending;
                }
                Some(outcome) => {
                    core.waiters.remove(key);
                    this.key = None;
                    outcome?;
                }
            }
        }
        let Some(batch) = &this.batch else {
            return Poll::Ready(Ok(()));
        };
        if shared.running.get() == 0 {
            return Poll::Ready(Err(Error::InvalidArgument(
                "a GPU wait was awaited outside its executor; await it inside a task (spawn, block_on)".into(),
            )));
        }
        let status = batch.status.borrow().clone();
        let value = match status {
            BatchStatus::Failed(e) => return Poll::Ready(Err(e)),
            BatchStatus::Submitted(v) if v <= core.completed => return Poll::Ready(Ok(())),
            BatchStatus::Submitted(v) => Some(v),
            BatchStatus::Recording => None,
        };
        if let Some(e) = core.fatal.clone() {
            return Poll::Ready(Err(e));
        }
        // Must wait: one slot, under the recording epoch or under the submitted value.
        this.count();
        let key = core.waiters.insert(cx.waker().clone());
        this.key = Some(key);
        match value {
            Some(v) => core.by_value.entry(v).or_default().push(key),
            None => {
                core.pending_waiters.push(key);
                if shared.options.flush == FlushPolicy::GroupCommit {
                    // Group commit: if the GPU has nothing left to do, submit what is recorded
                    // now, rather than when no task can run. Otherwise keep gathering: the
                    // executor submits it when the GPU is idle again or when no task can run.
                    let mut wakers = Vec::new();
                    if shared.gpu_idle(&mut core, &mut wakers) {
                        shared.flush_locked(&mut core, &mut wakers);
                    }
                    drop(core);
                    for w in wakers {
                        w.wake();
                    }
                }
            }
        }
        Poll::Pending
    }
}

impl<B: Backend + 'static> Drop for SyncFuture<B> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            if let Ok(mut core) = self.shared.core.try_borrow_mut() {
                let _ = core.waiters.remove(key);
            }
        }
    }
}

/// Runs a task's (abortable) future and turns every panic it raises into a [`JoinError`]: a
/// panic while it is polled, and a panic while it is dropped, which happens after it finished,
/// after it was aborted, or when the executor shuts down. Nothing a task does can unwind into the
/// executor's loop.
struct CatchTask<F> {
    /// Structurally pinned: never moved out, only dropped in place (by `Pin::set` or `Drop`).
    inner: Option<F>,
}

impl<F> CatchTask<F> {
    fn new(inner: F) -> Self {
        CatchTask { inner: Some(inner) }
    }
}

impl<F, T> Future for CatchTask<F>
where
    F: Future<Output = std::result::Result<T, futures::future::Aborted>>,
{
    type Output = std::result::Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `inner` is structurally pinned: this type never moves it out of `self`; it is
        // only dropped in place, through `Pin::set` below or by `Drop`.
        let mut inner = unsafe { self.map_unchecked_mut(|s| &mut s.inner) };
        let Some(fut) = inner.as_mut().as_pin_mut() else {
            return Poll::Ready(Err(JoinError::cancelled()));
        };
        let polled = catch_unwind(AssertUnwindSafe(|| fut.poll(cx)));
        let out = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(Ok(v))) => Ok(v),
            Ok(Poll::Ready(Err(futures::future::Aborted))) => Err(JoinError::cancelled()),
            Err(payload) => Err(JoinError::panicked(payload)),
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
