//! The scheduling core, shared by both fronts (the native [`crate::Executor`] and the
//! thread-safe [`crate::Queue`]) and generic over the queue ([`Backend`]) so that it can be
//! tested without a GPU. See the module docs of [`crate::executor`] for the protocol.
//!
//! Everything here is behind one mutex ([`QueueCore::state`]). Outside it there are only the
//! statistics counters, what a woken future reads to learn, without the lock, that its work
//! succeeded ([`super::seen`]: written under the lock, modelled with `loom`), and a
//! [`crate::Queue`]'s lanes ([`super::lanes`]), with the flags their users read. Wakers are
//! collected while the lock is held and woken after it is released.

use super::backend::{Backend, FlushInfo, PartWakes, Waiter};
use super::budget::MemoryBudget;
use super::lanes::Lanes;
use super::seen::{Seen, SubmittedValue};
use super::waiters::{Key, SlotState, Waiters};
use super::{FlushPolicy, Stats, WaitPolicy};
use crate::error::{Error, Result};
use crate::record::batch::{BatchKind, Batches};
use crate::trace::{HostKind, QueueTrace, TaskClock};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The longest a driver thread blocks in one `vkWaitSemaphores` call: a longer wait is made of
/// slices this long, between which the driver sees that its queue is closing (see
/// [`QueueCore::close`]), so that closing never waits for a wait it cannot interrupt.
pub(crate) const WAIT_SLICE: Duration = Duration::from_millis(25);

/// The fewest coalesced items that group commit submits behind a running submission; fewer wait
/// for the GPU to be idle (see [`QueueCore::submit_depth`]).
pub(crate) const BEHIND_MIN: usize = 256;

/// The state of the work recorded into one flush epoch.
#[derive(Debug, Clone)]
pub(crate) enum EpochStatus {
    /// Not yet submitted.
    Recording,
    /// Submitted; complete once the timeline reaches this value.
    Submitted(u64),
    /// The submit failed; the work did not run.
    Failed(Error),
}

/// Shared by the core and every context that recorded into one epoch. The status changes only
/// under the core's lock.
#[derive(Debug)]
pub(crate) struct Epoch {
    pub status: Mutex<EpochStatus>,
    /// The value of `Submitted`: written with the status (under the core's lock), read
    /// without any lock by [`SyncFuture`]'s fast path.
    value: SubmittedValue,
}

impl Epoch {
    fn recording() -> Arc<Self> {
        Arc::new(Epoch { status: Mutex::new(EpochStatus::Recording), value: SubmittedValue::new() })
    }

    fn status(&self) -> EpochStatus {
        lock(&self.status).clone()
    }

    fn set(&self, s: EpochStatus) {
        let v = match s {
            EpochStatus::Submitted(v) => Some(v),
            _ => None,
        };
        *lock(&self.status) = s;
        self.value.set(v);
    }
}

pub(crate) use crate::util::lock;

/// Tries a lock this many times, backing off, before blocking on it (see [`lock_hot`]).
const HOT_TRIES: u32 = 8;

/// Locks a mutex that many threads take for short holds (the queue's state): tries it a few
/// times with exponential backoff (about 200 spin-loop hints in all) before blocking. The
/// standard mutex stops spinning once any thread sleeps on it; from then on every locker
/// sleeps in the kernel and every unlock is a futex wake. With 16 tokio workers recording into
/// one queue that convoy cost more than the work under the lock (the futex hash bucket's
/// spinlock was a third of all CPU samples on the H200's host).
pub(crate) fn lock_hot<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    for i in 0..HOT_TRIES {
        match m.try_lock() {
            Ok(g) => return g,
            Err(std::sync::TryLockError::Poisoned(p)) => return p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                for _ in 0..(1u32 << i.min(6)) {
                    std::hint::spin_loop();
                }
            }
        }
    }
    lock(m)
}

/// The scheduling state, behind [`QueueCore::state`].
pub(crate) struct State<B> {
    pub backend: B,
    /// The epoch now recording.
    epoch: Arc<Epoch>,
    waiters: Waiters,
    /// Waiters on the epoch now recording.
    pending_waiters: Vec<Key>,
    /// Waiters on submitted work, by timeline value.
    by_value: BTreeMap<u64, Vec<Key>>,
    /// The tasks of lane items (see [`super::lanes`]) taken into the recording epoch.
    lane_wakers: Vec<Waker>,
    /// The tasks of lane items of submitted work, by timeline value (woken with `by_value`).
    by_value_wakers: BTreeMap<u64, Vec<Waker>>,
    /// Values in `by_value_wakers` of a split flush's parts before its last (see
    /// [`QueueCore::wait_target`]).
    early: std::collections::BTreeSet<u64>,
    /// The last counter value read.
    completed: u64,
    /// The last value this queue submitted.
    submitted: u64,
    /// The values this queue submitted above `completed`, oldest first.
    in_flight: VecDeque<u64>,
    /// Set on device loss: every later wait fails with it.
    fatal: Option<Error>,
    /// The driver is blocked in a GPU wait for this value.
    waiting: Option<u64>,
    /// How long recent GPU waits took, for the adaptive spin.
    estimate: SpinEstimate,
    /// The queue is shut down: the driver ends.
    stopped: bool,
    /// The queue was closed from its own driver thread (see [`QueueCore::close`]): the driver
    /// finishes what is in flight by this deadline, releases it, and stops.
    closing: Option<Instant>,
    /// A flush is being encoded and submitted without the lock (see [`QueueCore::flush`]):
    /// its epoch, and the waiters that came for that epoch meanwhile.
    flushing: Option<Arc<Epoch>>,
    flushing_waiters: Vec<Key>,
    /// A flush was asked for while another ran: its runner flushes again when done.
    flush_again: bool,
    /// Threads waiting for the running flush to end (see [`QueueCore::close_begin`]).
    flush_watchers: usize,
    /// A running executor's task filled a group (the group bound): the driver thread encodes
    /// and submits it while the executor goes on running tasks (see [`QueueCore::record`]).
    hand_off: bool,
}

impl<B> State<B> {
    /// Whether every submission is known complete (by the last counter read).
    #[allow(dead_code)] // used by the model tests
    pub fn known_idle(&self) -> bool {
        self.submitted <= self.completed
    }

    /// Live waiter slots (0 once every `synchronize` future has finished or been dropped).
    #[allow(dead_code)] // used by the model tests
    pub fn waiter_count(&self) -> usize {
        self.waiters.len()
    }
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

/// Counters, atomic so that any thread may bump them without the lock.
#[derive(Default)]
pub(crate) struct Counters {
    pub tasks_spawned: AtomicU64,
    pub tasks_completed: AtomicU64,
    pub await_points: AtomicU64,
    pub flushes: AtomicU64,
    pub submits: AtomicU64,
    pub command_buffers: AtomicU64,
    pub host_waits: AtomicU64,
    pub barriers: AtomicU64,
    pub dispatches: AtomicU64,
    pub copy_dispatches: AtomicU64,
    pub timeline: AtomicU64,
    pub wait_ns: AtomicU64,
    pub spin_ns: AtomicU64,
    pub flush_ns: AtomicU64,
    pub handed_flushes: AtomicU64,
    pub part_wakes: AtomicU64,
}

pub(crate) fn bump(c: &AtomicU64, by: u64) {
    c.fetch_add(by, Ordering::Relaxed);
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
    /// The memory bound of [`crate::Ctx::buffer`], in bytes.
    pub memory_bound: Option<u64>,
    /// Under group commit, recorded commands are submitted once this many gathered, even while
    /// a submission is in flight (see [`crate::ExecutorBuilder::max_group_ops`]).
    pub group_bound: usize,
    /// The bound of closing the queue: how long dropping an executor or a queue's last handle
    /// waits for work still on the GPU (see [`crate::ExecutorBuilder::shutdown_timeout`]).
    pub shutdown: Duration,
    /// Under group commit without a running executor loop, how many submissions may be in
    /// flight when gathered work that jobs wait for is submitted: 1 submits it only once the
    /// GPU is idle; 2 submits it behind the one submission the GPU is running, so that its
    /// encoding overlaps the GPU's work (see [`crate::QueueBuilder::pipeline_depth`]).
    pub depth: usize,
    /// Coalesced items may go through lanes (see [`super::lanes`]): a [`crate::Queue`]'s core.
    pub lanes: bool,
}

/// The lock on a queue's state; see [`QueueCore::lock`].
pub(crate) struct StateGuard<'a, B: Backend> {
    guard: Option<MutexGuard<'a, State<B>>>,
}

impl<'a, B: Backend> StateGuard<'a, B> {
    /// Sleeps on `cv`, releasing the lock meanwhile (retired work is dropped first).
    fn wait_on(mut self, cv: &Condvar) -> Self {
        let mut g = self.guard.take().expect("held");
        let retired = g.backend.take_retired();
        let g = {
            drop(retired);
            cv.wait(g).unwrap_or_else(|p| p.into_inner())
        };
        StateGuard { guard: Some(g) }
    }
}

impl<B: Backend> std::ops::Deref for StateGuard<'_, B> {
    type Target = State<B>;
    fn deref(&self) -> &State<B> {
        self.guard.as_ref().expect("held")
    }
}

impl<B: Backend> std::ops::DerefMut for StateGuard<'_, B> {
    fn deref_mut(&mut self) -> &mut State<B> {
        self.guard.as_mut().expect("held")
    }
}

impl<B: Backend> Drop for StateGuard<'_, B> {
    fn drop(&mut self) {
        if let Some(mut g) = self.guard.take() {
            let retired = g.backend.take_retired();
            drop(g);
            drop(retired);
        }
    }
}

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Submit what is recorded (see [`QueueCore::flush`]), then decide again.
    Flush,
    /// Wait for the GPU to reach this value (spin, then block, without the lock).
    Wait(u64),
    /// Nothing to do until notified.
    Sleep,
    /// The queue is shut down.
    Stop,
}

/// One queue's scheduling core. See the protocol in [`crate::executor`].
pub(crate) struct QueueCore<B> {
    pub state: Mutex<State<B>>,
    /// The driver sleeps on it; notified whenever there may be something for it to do.
    driver_cv: Condvar,
    /// Whether the driver sleeps on `driver_cv` and nobody has notified it yet. Set and
    /// cleared under the lock (the driver sets it in the hold of the lock in which it decided to
    /// sleep), so that a notifier, also under the lock, skips the system call of a notification
    /// when the driver is awake or already notified: under load from many threads every await
    /// would otherwise make one while holding the lock.
    driver_asleep: AtomicBool,
    /// The driver sleeps while no flush runs: nothing will notify it of lane items (a running
    /// flush notifies it when it ends). Set and cleared under the lock, read by lane users
    /// without it (see [`super::lanes`]).
    driver_idle: AtomicBool,
    /// Notified when a flush ends, for threads that wait for it (`State::flush_watchers`).
    flush_done: Condvar,
    pub counters: Counters,
    pub options: Options,
    /// The memory bound, when set (see [`super::budget`]).
    pub budget: Option<Arc<MemoryBudget>>,
    /// Native executor loops on the stack over this core (`run_until` frames).
    running: AtomicU32,
    /// The executor's thread sleeps in `park`. While an executor loop runs and is not parked,
    /// flushing and the first wait (a spin) are its job and the driver stays out of the way;
    /// when it parks or returns, the driver takes over (group commit, waits).
    parked: AtomicBool,
    /// A driver thread runs this core (the model tests drive it inline instead).
    threaded: AtomicBool,
    /// Set (before the lock is taken) by a thread that closes the queue: the driver leaves its
    /// GPU wait at the end of the current slice ([`WAIT_SLICE`]) and stops.
    closing_now: AtomicBool,
    /// The queue's trace, when on (see [`crate::trace`]).
    pub trace: Option<Arc<QueueTrace>>,
    /// `State::completed` and whether any failure was fired, for a woken [`SyncFuture`] to see
    /// its epoch done without the lock (shared with the waiter table).
    seen: Arc<Seen>,
    /// See [`QueueCore::model_as_queue`].
    #[cfg(test)]
    as_queue: AtomicBool,
    /// Per-context GPU time is measured.
    pub timing: bool,
    /// Coalesced items of a [`crate::Queue`]'s contexts gathered without the lock (see
    /// [`super::lanes`]), used while `room` is false.
    lanes: Lanes<Epoch>,
    /// Whether the lanes may be used at all: a [`crate::Queue`]'s core, group commit, no wait
    /// timeout (a lane's waker carries no outcome), no per-context timing.
    lanes_on: bool,
    /// No flush runs and fewer submissions than the pipeline depth are in flight: gathered
    /// work may be submitted now. Stored under the lock whenever it changes.
    room: AtomicBool,
    /// The queue stopped or lost its device: lane items are taken in (and failed) under the
    /// lock by whoever adds them.
    lanes_closed: AtomicBool,
}

impl<B: Backend> QueueCore<B> {
    pub fn new(backend: B, options: Options) -> Arc<Self> {
        let trace = backend.trace().cloned();
        let waiters = Waiters::default();
        let seen = waiters.seen();
        let timing = backend.timing();
        let epoch = Epoch::recording();
        let lanes = Lanes::new(&epoch);
        Arc::new(QueueCore {
            lanes,
            lanes_on: options.lanes
                && options.flush == FlushPolicy::GroupCommit
                && options.timeout.is_none()
                && !timing,
            room: AtomicBool::new(true),
            lanes_closed: AtomicBool::new(false),
            trace,
            timing,
            state: Mutex::new(State {
                backend,
                epoch,
                waiters,
                pending_waiters: Vec::new(),
                by_value: BTreeMap::new(),
                lane_wakers: Vec::new(),
                by_value_wakers: BTreeMap::new(),
                early: Default::default(),
                completed: 0,
                submitted: 0,
                in_flight: VecDeque::new(),
                fatal: None,
                waiting: None,
                estimate: SpinEstimate { ns: options.spin.as_nanos().min(u64::MAX as u128) as u64 / 2 },
                stopped: false,
                closing: None,
                flushing: None,
                flushing_waiters: Vec::new(),
                flush_again: false,
                flush_watchers: 0,
                hand_off: false,
            }),
            driver_cv: Condvar::new(),
            driver_asleep: AtomicBool::new(false),
            driver_idle: AtomicBool::new(false),
            flush_done: Condvar::new(),
            counters: Counters::default(),
            budget: options.memory_bound.map(MemoryBudget::new),
            options,
            running: AtomicU32::new(0),
            parked: AtomicBool::new(false),
            threaded: AtomicBool::new(false),
            closing_now: AtomicBool::new(false),
            seen,
            #[cfg(test)]
            as_queue: AtomicBool::new(false),
        })
    }

    /// Locks the state. Work the backend retires under the lock (and the buffers it frees,
    /// with their memory-bound leases, whose release wakes waiting allocations) is dropped
    /// after the lock is released.
    pub fn lock(&self) -> StateGuard<'_, B> {
        StateGuard { guard: Some(lock_hot(&self.state)) }
    }

    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let laned = self.lanes.added();
        Stats {
            tasks_spawned: g(&c.tasks_spawned),
            tasks_completed: g(&c.tasks_completed),
            // A lane item's wait is an await point, counted by its lane.
            await_points: g(&c.await_points) + laned,
            flushes: g(&c.flushes),
            submits: g(&c.submits),
            command_buffers: g(&c.command_buffers),
            host_waits: g(&c.host_waits),
            barriers: g(&c.barriers),
            dispatches: g(&c.dispatches),
            copy_dispatches: g(&c.copy_dispatches),
            timeline_value: g(&c.timeline),
            wait_ns: g(&c.wait_ns),
            spin_ns: g(&c.spin_ns),
            flush_ns: g(&c.flush_ns),
            handed_flushes: g(&c.handed_flushes),
            laned_items: laned,
            part_wakes: g(&c.part_wakes),
            memory_peak: self.budget.as_ref().map_or(0, |b| b.peak()),
        }
    }

    /// A native executor's loop starts (`true`) or ends (`false`).
    pub fn set_running(&self, on: bool) {
        // Under the lock, so that the driver's decision sees it before it sleeps.
        let _st = self.lock();
        if on {
            self.running.fetch_add(1, Ordering::SeqCst);
        } else if self.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            // No loop left to submit idle work: the driver takes over.
            self.notify_driver();
        }
    }

    /// An executor's thread is running tasks (in its loop and not parked).
    pub(super) fn executor_running(&self) -> bool {
        #[cfg(test)]
        if self.as_queue.load(Ordering::Relaxed) {
            return false;
        }
        self.running.load(Ordering::SeqCst) > 0 && !self.parked.load(Ordering::SeqCst)
    }

    /// The model of a [`crate::Queue`] (tests only): the core acts as if no executor loop ran.
    #[cfg(test)]
    pub fn model_as_queue(&self) {
        self.as_queue.store(true, Ordering::Relaxed);
    }

    /// The executor's thread is about to park (`true`) or has woken (`false`). Parking hands
    /// the driver what the executor would have done: submitting what tasks wait for, waiting.
    pub fn set_parked(&self, parked: bool) {
        let _st = self.lock();
        self.parked.store(parked, Ordering::SeqCst);
        if parked {
            self.notify_driver();
        }
    }

    /// Wakes the driver to decide again (call with the state locked, so that the driver,
    /// which decides and sleeps under one hold of the lock, cannot miss it).
    pub fn notify_driver(&self) {
        if self.driver_asleep.swap(false, Ordering::SeqCst) {
            self.driver_idle.store(false, Ordering::SeqCst);
            self.driver_cv.notify_one();
        }
    }

    /// Wakes the driver from outside the lock (takes the lock for the notification).
    pub fn nudge_driver(&self) {
        let _st = self.lock();
        self.notify_driver();
    }

    /// Records through `f` into the backend; if it recorded anything, the context now has work
    /// in the recording epoch. Then flushes if the recorded work passed the bound.
    pub fn record<R>(&self, state: &ContextState, f: impl FnOnce(&mut B) -> Result<R>) -> Result<R> {
        let mut wakers = Vec::new();
        let (st, r) = self.record_locked(self.lock(), state, f, &mut wakers);
        drop(st);
        self.wake(wakers);
        r
    }

    /// [`QueueCore::record`] under a hold of the lock that the caller goes on using (see
    /// [`QueueCore::record_and_wait`]).
    fn record_locked<'a, R>(
        &'a self,
        mut st: StateGuard<'a, B>,
        state: &ContextState,
        f: impl FnOnce(&mut B) -> Result<R>,
        wakers: &mut Vec<Waker>,
    ) -> (StateGuard<'a, B>, Result<R>) {
        let before = st.backend.recorded_count();
        // With per-context time or a trace, the backend notes where this context's commands
        // start (one `r` either way: a result moved out of two branches is copied twice).
        let mark = (self.timing || self.trace.is_some()).then(|| st.backend.record_mark());
        let r = f(&mut st.backend);
        if let Some(mark) = mark.filter(|_| self.timing && r.is_ok()) {
            st.backend.attribute(mark, state.clock());
        }
        if r.is_err() {
            return (st, r);
        }
        if st.backend.recorded_count() != before {
            state.recorded_into(&st.epoch);
        }
        let group =
            self.options.flush == FlushPolicy::GroupCommit && st.backend.pending_commands() >= self.options.group_bound;
        if group && self.try_hand_off(&mut st) {
            // A running executor's group is full: its driver thread encodes and submits it
            // while the executor runs more tasks.
        } else if group || st.backend.pending_len() >= self.options.max_pending {
            st = self.flush(st, wakers);
        }
        (st, r)
    }

    /// A running executor's loop wants its recorded group submitted: hands it to the queue's
    /// driver thread, which encodes and submits it (with whatever was recorded by the time it
    /// starts) while the loop runs more tasks. Possible when the driver is idle (not flushing,
    /// not in a GPU wait, which a notification would not cut short). Returns whether it did.
    fn try_hand_off(&self, st: &mut State<B>) -> bool {
        let hand = st.flushing.is_none()
            && st.waiting.is_none()
            && self.executor_running()
            && self.threaded.load(Ordering::Relaxed);
        if hand && !st.hand_off {
            st.hand_off = true;
            self.notify_driver();
        }
        hand
    }

    /// Records through `f` (as [`QueueCore::record`]) and starts waiting for all the work the
    /// context recorded so far, under one hold of the lock (the first poll of
    /// [`crate::Ctx::read`]). Returns what `f` returned, the wait, and the wait's first poll.
    pub fn record_and_wait<R>(
        self: &Arc<Self>,
        state: &ContextState,
        ctx: u64,
        f: impl FnOnce(&mut B) -> Result<R>,
        cx: &mut Context<'_>,
    ) -> Result<(R, SyncFuture<B>, Poll<Result<()>>)> {
        let mut wakers = Vec::new();
        // The core's handle for the wait is taken before the lock: its reference count is
        // shared by every thread, and moving its cache line costs less outside the lock.
        let core = self.clone();
        let (st, r) = self.record_locked(self.lock(), state, f, &mut wakers);
        let out = match r {
            Ok(r) => {
                let mut wait = SyncFuture::new(core, lock(&state.last).clone(), ctx);
                let poll = wait.poll_locked(self, st, cx, &mut wakers);
                Ok((r, wait, poll))
            }
            Err(e) => {
                drop(st);
                Err(e)
            }
        };
        self.wake(wakers);
        out
    }

    /// A [`crate::Queue`]'s context adds a coalesced item and starts waiting for it (the first
    /// poll of its wait) without the queue's lock, through the calling thread's lane (see
    /// [`super::lanes`]). Gives the item back where the lanes do not apply: they are off, or
    /// the GPU has room for a submission now (the caller then records under the lock, which
    /// submits at once), or the lane is full.
    pub fn batch_in_lane<K: BatchKind>(
        self: &Arc<Self>,
        state: &ContextState,
        ctx: u64,
        kind: &Arc<K>,
        item: K::Item,
        cx: &mut Context<'_>,
    ) -> std::result::Result<Laned<B>, K::Item> {
        if !self.lanes_on || self.room.load(Ordering::SeqCst) || self.executor_running() {
            return Err(item);
        }
        let (epoch, due) = self.lanes.push(kind, item, cx.waker())?;
        state.recorded_into(&epoch);
        // Step 4 of the lanes' protocol: what the driver set before it took the lanes in.
        std::sync::atomic::fence(Ordering::SeqCst);
        if due
            || self.room.load(Ordering::SeqCst)
            || self.driver_idle.load(Ordering::SeqCst)
            || self.lanes_closed.load(Ordering::SeqCst)
        {
            let mut wakers = Vec::new();
            let mut st = self.lock();
            self.absorb_lanes(&mut st, &mut wakers);
            if st.fatal.is_none() && !st.stopped && st.backend.has_pending() {
                let room = st.in_flight.len() < self.submit_depth(&mut st, &mut wakers);
                if st.flushing.is_none() && (room || due) {
                    // A group gathered: submitted now, from this thread, even behind a full
                    // pipeline (as a group of commands is, see `record_locked`).
                    st = self.flush(st, &mut wakers);
                } else if st.flushing.is_some() && due {
                    // The running flush submits it when done.
                    st.flush_again = true;
                } else if st.waiting.is_none() {
                    self.notify_driver();
                }
            }
            drop(st);
            self.wake(wakers);
        }
        let mut wait = SyncFuture::new(self.clone(), Some(epoch), ctx);
        wait.lane = true;
        wait.counted = true;
        if let Some(t) = &self.trace {
            wait.since = Some(t.stamp());
        }
        // A flush on this thread may have finished the item already (on the host).
        let poll = match wait.epoch.as_ref().and_then(|e| e.value.get()) {
            Some(v) if self.seen.succeeded(v) => {
                wait.lane = false;
                wait.traced(Ok(()))
            }
            _ => Poll::Pending,
        };
        Ok((wait, poll))
    }

    /// Under the lock: takes every lane's items into the recording epoch and their wakers
    /// beside its waiters (see [`super::lanes`]); once the queue stopped or lost its device,
    /// the items are dropped and their tasks woken to find that out.
    fn absorb_lanes(&self, st: &mut State<B>, wakers: &mut Vec<Waker>) {
        self.take_lanes(st, wakers, None);
    }

    /// [`QueueCore::absorb_lanes`]; with `next`, each lane records into `next` from then on (a
    /// flush, which makes `next` the recording epoch in the same hold of the lock).
    fn take_lanes(&self, st: &mut State<B>, wakers: &mut Vec<Waker>, next: Option<&Arc<Epoch>>) {
        if !self.lanes_on {
            return;
        }
        let (mut batches, mut woken) = (Batches::default(), Vec::new());
        let n = self.lanes.drain(&mut batches, &mut woken, next);
        if st.fatal.is_some() || st.stopped {
            wakers.append(&mut woken);
            return;
        }
        if n > 0 {
            st.backend.absorb_batches(batches, n);
        }
        st.lane_wakers.append(&mut woken);
    }

    /// Under the lock, after a flush started or ended or a submission completed: whether
    /// gathered work may be submitted now (what a lane's user reads, see [`super::lanes`]).
    fn update_room(&self, st: &State<B>) {
        // A small group does not go behind a running submission (see `submit_depth`), and a
        // lane's due group goes out even behind a full pipeline: so lanes are used whenever
        // anything is in flight.
        let room = st.flushing.is_none() && st.in_flight.is_empty();
        if self.room.load(Ordering::Relaxed) != room {
            self.room.store(room, Ordering::SeqCst);
        }
    }

    /// Submits the recording epoch now (even if nobody waits for it).
    pub fn flush_now(&self) {
        let mut wakers = Vec::new();
        {
            // A flush running on another thread is waited for (it only encodes and submits),
            // so that everything recorded before this call is submitted when it returns.
            let mut st = self.after_flush(self.lock());
            self.absorb_lanes(&mut st, &mut wakers);
            if st.backend.has_pending() {
                drop(self.flush(st, &mut wakers));
            }
        }
        self.wake(wakers);
    }

    /// Waits (releasing the lock meanwhile) until no flush runs on another thread.
    fn after_flush<'a>(&'a self, mut st: StateGuard<'a, B>) -> StateGuard<'a, B> {
        while st.flushing.is_some() {
            st.flush_watchers += 1;
            st = st.wait_on(&self.flush_done);
            st.flush_watchers -= 1;
        }
        st
    }

    /// A native executor found no task ready. Under [`FlushPolicy::WhenIdle`] (or whenever
    /// someone waits for it) it submits the recording epoch: when a task waits for it, or when
    /// nothing else could be waited for (so recorded work is never left behind). Returns
    /// whether it flushed.
    pub fn executor_idle(&self) -> bool {
        let mut wakers = Vec::new();
        let flushed = {
            // A flush running on another thread (a `Queue`'s, or the driver's) is waited for
            // (it only encodes and submits), so that a loop that ends has submitted
            // everything its tasks recorded.
            let st = self.after_flush(self.lock());
            let flush = st.backend.has_pending() && (!st.pending_waiters.is_empty() || st.by_value.is_empty());
            if flush {
                drop(self.flush(st, &mut wakers));
            }
            flush
        };
        self.wake(wakers);
        flushed
    }

    /// A running executor checks, every few tasks it runs, what its awaits check only when
    /// they register: whether submitted work that tasks wait for has completed (then they are
    /// woken), and, under group commit, whether the GPU ran out of work while tasks wait for
    /// what is recorded (then that is submitted, whatever its size: by the driver thread if it
    /// is idle, else at once). Without this, a loop
    /// kept busy by ready tasks (reading results back, or never awaiting the GPU) would neither
    /// see completions nor submit the last group, and the GPU would idle until no task is
    /// ready. Returns whether it flushed or handed a flush over.
    pub fn executor_check(&self) -> bool {
        let mut wakers = Vec::new();
        let flushed = {
            let mut st = self.lock();
            let may_flush = self.options.flush == FlushPolicy::GroupCommit
                && st.flushing.is_none()
                && !st.pending_waiters.is_empty()
                && st.backend.has_pending()
                && st.fatal.is_none();
            // One counter read at most: `gpu_idle` reads it (and fires the waiters it shows
            // done) when a flush is in question; otherwise it is read for the waiters alone.
            let due = if may_flush {
                self.gpu_idle(&mut st, &mut wakers)
            } else {
                if st.submitted > st.completed && !st.by_value.is_empty() {
                    self.read_counter(&mut st, &mut wakers);
                }
                false
            };
            if due && !self.try_hand_off(&mut st) {
                drop(self.flush(st, &mut wakers));
            }
            due
        };
        self.wake(wakers);
        flushed
    }

    /// Submits everything recorded, moving the epoch's waiters to the value it signals. The
    /// driver is notified so that it waits for them.
    ///
    /// The work is taken under the lock, encoded and submitted without it (other threads go on
    /// recording into the next epoch meanwhile), and published under it again; the guard
    /// returned is that last hold. One flush runs at a time: asked for while one runs, it is
    /// left to that one, which flushes again when done (`flush_again`), so submissions keep
    /// their epochs' order.
    fn flush<'a>(&'a self, mut st: StateGuard<'a, B>, wakers: &mut Vec<Waker>) -> StateGuard<'a, B> {
        if st.flushing.is_some() {
            st.flush_again = true;
            return st;
        }
        // Whatever was handed to the driver goes with this flush.
        st.hand_off = false;
        loop {
            // The lanes' items go with this epoch, and the lanes record into the next one
            // (see [`super::lanes`]).
            let next = Epoch::recording();
            self.take_lanes(&mut st, wakers, Some(&next));
            let mut lane_wakers = std::mem::take(&mut st.lane_wakers);
            let epoch = std::mem::replace(&mut st.epoch, next);
            let keys = std::mem::take(&mut st.pending_waiters);
            if let Some(e) = st.fatal.clone() {
                st.backend.abandon();
                epoch.set(EpochStatus::Failed(e.clone()));
                for k in keys {
                    wakers.extend(st.waiters.fire(k, Err(e.clone())));
                }
                wakers.append(&mut lane_wakers);
                st.flush_again = false;
                return st;
            }
            bump(&self.counters.flushes, 1);
            let recorded = st.backend.pending_len();
            let mut job = st.backend.begin_flush();
            st.flushing = Some(epoch.clone());
            self.update_room(&st);
            let waiting = (keys.len() + lane_wakers.len()) as u64;
            st.flushing_waiters = keys;
            drop(st);

            let started = Instant::now();
            let flushed = {
                let _span = tracing::debug_span!("vkasync.flush", recorded).entered();
                B::run_flush(&mut job)
            };
            bump(&self.counters.flush_ns, started.elapsed().as_nanos() as u64);
            let parts = if flushed.is_ok() { B::part_wakes(&job) } else { None };
            if let Some(t) = &self.trace {
                let value = flushed.as_ref().map_or(0, |i| i.value);
                t.span(HostKind::Flush, started, &[value, waiting]);
            }

            st = self.lock();
            st.backend.end_flush(job);
            st.flushing = None;
            let keys = std::mem::take(&mut st.flushing_waiters);
            if st.flush_watchers > 0 {
                self.flush_done.notify_all();
            }
            // The device may have been lost while the job ran (its wait failed meanwhile).
            let flushed = match (&st.fatal, flushed) {
                (Some(e), Ok(_)) => Err(e.clone()),
                (_, f) => f,
            };
            self.publish(&mut st, epoch, (keys, lane_wakers), (flushed, parts), wakers);
            self.update_room(&st);
            let again = std::mem::take(&mut st.flush_again) && st.backend.has_pending() && !st.stopped;
            if !again {
                // The driver waits for the waiters just published, and may have gone to sleep
                // while this flush ran (see `decide`). A running executor spins on the counter
                // first, and notifies the driver if its spin does not see the value (see
                // `executor_spin`).
                if !self.executor_running() {
                    self.notify_driver();
                }
                return st;
            }
        }
    }

    /// A flush of `epoch` ended with `flushed`: its waiters move to the value it signals, or
    /// get their outcome. A split flush's lane waiters move to their parts' values where
    /// `parts` tells them apart (see [`Backend::part_wakes`]).
    fn publish(
        &self,
        st: &mut State<B>,
        epoch: Arc<Epoch>,
        (keys, mut lane_wakers): (Vec<Key>, Vec<Waker>),
        (flushed, parts): (Result<FlushInfo>, Option<PartWakes>),
        wakers: &mut Vec<Waker>,
    ) {
        match flushed {
            Ok(info) if !info.submitted => {
                // Nothing for the GPU (batches done on the host): the epoch is complete.
                epoch.set(EpochStatus::Submitted(st.completed));
                for k in keys {
                    wakers.extend(st.waiters.fire(k, Ok(())));
                }
                wakers.append(&mut lane_wakers);
            }
            Ok(info) => {
                bump(&self.counters.submits, info.submissions);
                bump(&self.counters.command_buffers, info.command_buffers);
                bump(&self.counters.barriers, info.barriers);
                bump(&self.counters.dispatches, info.dispatches);
                bump(&self.counters.copy_dispatches, info.copy_dispatches);
                self.counters.timeline.store(info.value, Ordering::Relaxed);
                st.submitted = st.submitted.max(info.value);
                epoch.set(EpochStatus::Submitted(info.value));
                if let Some(parts) = parts.filter(|p| p.iter().map(|(_, n)| n).sum::<usize>() == lane_wakers.len()) {
                    self.part_wakers(st, parts, &mut lane_wakers, info.value, wakers);
                }
                if info.value <= st.completed {
                    // A counter read between the submit and now saw it complete: its waiters
                    // are done (a value under the completed one is never left to the driver,
                    // see `SyncFuture::poll`). Its recording went in flight after that read:
                    // it is retired first, so that what it held is released (after the lock,
                    // before the wakes) before its waiters run, as on every other path.
                    self.read_counter(st, wakers);
                    for k in keys {
                        wakers.extend(st.waiters.fire(k, Ok(())));
                    }
                    wakers.append(&mut lane_wakers);
                } else {
                    st.in_flight.push_back(info.value);
                    if !keys.is_empty() {
                        st.by_value.entry(info.value).or_default().extend(keys);
                    }
                    if !lane_wakers.is_empty() {
                        st.by_value_wakers.entry(info.value).or_default().append(&mut lane_wakers);
                    }
                }
            }
            Err(e) => {
                epoch.set(EpochStatus::Failed(e.clone()));
                for k in keys {
                    wakers.extend(st.waiters.fire(k, Err(e.clone())));
                }
                wakers.append(&mut lane_wakers);
                if e.is_device_lost() {
                    self.fail_all(st, e, wakers);
                }
            }
        }
    }

    /// The lane waiters of a split flush's parts before its last, in order (`parts`: each
    /// part's value and how many of `lane_wakers` are its): each part's go to its own value, or
    /// are woken now where it is reached or held nothing for the GPU. A woken task finds its
    /// item done through the item itself (a crypto item's value, see
    /// [`crate::crypto`]); its wait on the flush's value, which it does not poll then, would
    /// send it to the waiter table until the last part completes. The last part's waiters are
    /// left in `lane_wakers`, for the flush's value.
    fn part_wakers(
        &self,
        st: &mut State<B>,
        parts: PartWakes,
        lane_wakers: &mut Vec<Waker>,
        last: u64,
        wakers: &mut Vec<Waker>,
    ) {
        let before: usize = parts.iter().rev().skip(1).map(|(_, n)| n).sum();
        bump(&self.counters.part_wakes, before as u64);
        let mut early = lane_wakers.drain(..before);
        for (value, n) in parts.iter().take(parts.len().saturating_sub(1)) {
            let part = early.by_ref().take(*n);
            match value {
                Some(v) if *v > st.completed && *v < last => {
                    st.by_value_wakers.entry(*v).or_default().extend(part);
                    st.early.insert(*v);
                }
                _ => wakers.extend(part),
            }
        }
    }

    /// Device loss (or another fatal wait error): every waiter gets the error.
    fn fail_all(&self, st: &mut State<B>, e: Error, wakers: &mut Vec<Waker>) {
        if e.is_device_lost() {
            st.fatal = Some(e.clone());
            // Lane items added from now on are taken in (and failed) by whoever adds them.
            self.lanes_closed.store(true, Ordering::SeqCst);
            st.backend.abandon();
            st.epoch.set(EpochStatus::Failed(e.clone()));
        }
        let keys: Vec<Key> = std::mem::take(&mut st.by_value).into_values().flatten().collect();
        for k in keys.into_iter().chain(std::mem::take(&mut st.pending_waiters)) {
            wakers.extend(st.waiters.fire(k, Err(e.clone())));
        }
        // Woken, lane tasks find the failure under the lock (or wait again after an error that
        // did not end the queue).
        wakers.extend(std::mem::take(&mut st.by_value_wakers).into_values().flatten());
        st.early.clear();
        wakers.append(&mut st.lane_wakers);
        self.absorb_lanes(st, wakers);
    }

    /// Whether every submission of this queue has completed, reading the counter if the last
    /// value read does not tell. Waiters whose values the read shows reached are fired.
    fn gpu_idle(&self, st: &mut State<B>, wakers: &mut Vec<Waker>) -> bool {
        self.room(st, 1, wakers)
    }

    /// Whether gathered work may be submitted now under group commit, while no executor loop
    /// runs: fewer submissions in flight than [`QueueCore::submit_depth`].
    fn gpu_room(&self, st: &mut State<B>, wakers: &mut Vec<Waker>) -> bool {
        let depth = self.submit_depth(st, wakers);
        self.room(st, depth, wakers)
    }

    /// How many submissions may be in flight when the recorded group goes out (group commit,
    /// no executor loop): the pipeline depth (see [`crate::QueueBuilder::pipeline_depth`]),
    /// but 1 for a group that holds coalesced items ([`crate::record::batch`]), fewer than
    /// [`BEHIND_MIN`]. A coalesced kind's flush costs the GPU a fixed time whatever it holds
    /// (the crypto batch: one HMAC chain, at least 42 µs on an H100 or H200), so a small group
    /// sent behind a running submission makes the next group small too: on an H100 at 10,000
    /// records of 1 KiB, flushes of 27–53 records each, 190–388 per 10,000 records, took
    /// 21–53 ms against 5–7 for 11–19 larger ones. Commands cost the GPU what they do, and go
    /// behind at any size. While a submission runs, new items go to the lanes: where the depth
    /// then decides, they are taken in first, so that they count.
    fn submit_depth(&self, st: &mut State<B>, wakers: &mut Vec<Waker>) -> usize {
        if st.in_flight.is_empty() || st.in_flight.len() >= self.options.depth {
            // Room or none, whatever the group holds.
            return self.options.depth;
        }
        self.absorb_lanes(st, wakers);
        let items = st.backend.pending_len().saturating_sub(st.backend.pending_commands());
        if items > 0 && items < BEHIND_MIN {
            1
        } else {
            self.options.depth
        }
    }

    /// Whether no flush runs and fewer than `depth` submissions are in flight, reading the
    /// counter (and firing what it shows done) if the last value read does not tell.
    fn room(&self, st: &mut State<B>, depth: usize, wakers: &mut Vec<Waker>) -> bool {
        if st.flushing.is_some() {
            // A submission is on its way.
            return false;
        }
        if st.in_flight.len() < depth {
            return true;
        }
        // An error reaches the waiters at the next wait.
        self.read_counter(st, wakers) && st.in_flight.len() < depth
    }

    /// Reads the counter through the backend (which retires what it shows complete) and fires
    /// every waiter at or below it. Returns whether the read succeeded.
    fn read_counter(&self, st: &mut State<B>, wakers: &mut Vec<Waker>) -> bool {
        match st.backend.completed() {
            Ok(c) => {
                self.complete_upto(st, c, wakers);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether an await on a running executor's loop submits the recorded group when the GPU
    /// is idle: once it holds a third of the group bound. A smaller group waits for more work:
    /// it goes out at the loop's next check (every few polls, [`QueueCore::executor_check`])
    /// or when the loop runs out of ready tasks, whichever comes first. Where the GPU finishes
    /// each group faster than the loop records the next, every await would otherwise find it
    /// idle, and the loop would submit every few commands.
    pub(super) fn loop_group_ready(&self, st: &State<B>) -> bool {
        st.backend.pending_commands() >= (self.options.group_bound / 3).max(1)
    }

    /// The counter was read as `c`: fire every waiter at or below it.
    fn complete_upto(&self, st: &mut State<B>, c: u64, wakers: &mut Vec<Waker>) {
        st.completed = st.completed.max(c);
        let upto = st.completed;
        while st.in_flight.front().is_some_and(|&v| v <= upto) {
            st.in_flight.pop_front();
        }
        self.update_room(st);
        self.seen.completed(upto);
        if st.early.first().is_some_and(|&v| v <= upto) {
            st.early = st.early.split_off(&(upto + 1));
        }
        fire_upto(st, upto, Ok(()), wakers);
    }

    /// The driver's decision, under the lock. See the protocol in [`crate::executor`].
    pub fn decide(&self, st: &mut State<B>, wakers: &mut Vec<Waker>) -> Action {
        if st.stopped {
            return Action::Stop;
        }
        if self.closing_now.load(Ordering::SeqCst) {
            // Another thread is closing the queue: it stops the driver once it has submitted
            // what it keeps, and takes over the wait for what is in flight.
            return Action::Sleep;
        }
        self.absorb_lanes(st, wakers);
        if self.executor_running() {
            // The executor submits and waits itself, but for the groups it handed over.
            if std::mem::take(&mut st.hand_off) && st.flushing.is_none() && st.backend.has_pending() {
                bump(&self.counters.handed_flushes, 1);
                return Action::Flush;
            }
            return Action::Sleep;
        }
        if st.flushing.is_some() {
            // Another thread is submitting; it notifies the driver when done. Meanwhile only
            // what is already in flight can be waited for.
            return self.wait_target(st).map_or(Action::Sleep, Action::Wait);
        }
        let group = self.options.flush == FlushPolicy::GroupCommit || !self.executor_running();
        let waited_for = !st.pending_waiters.is_empty() || !st.lane_wakers.is_empty();
        if group && st.backend.has_pending() && waited_for && st.fatal.is_none() {
            // Work that tasks wait for: submit it once the GPU has nothing else to do; until
            // then, wait for what is in flight (and keep gathering).
            if self.gpu_room(st, wakers) {
                return Action::Flush;
            }
            if self.options.depth > 1 && st.flushing.is_none() {
                // Wait until there is room behind the GPU's work for another submission.
                let at = st.in_flight.len().saturating_sub(self.options.depth);
                if let Some(&v) = st.in_flight.get(at) {
                    return Action::Wait(v);
                }
            }
            let target = st.submitted;
            return Action::Wait(self.wait_target(st).map_or(target, |t| t.max(target)));
        }
        if self.budget.as_ref().is_some_and(|b| b.has_waiters()) && st.fatal.is_none() {
            // Allocations wait for memory: submit what is recorded (its buffers are freed only
            // after it runs) and wait for what is in flight.
            if st.backend.has_pending() {
                return Action::Flush;
            }
            if !self.gpu_idle(st, wakers) {
                return Action::Wait(self.wait_target(st).map_or(st.submitted, |t| t.max(st.submitted)));
            }
        }
        match self.wait_target(st) {
            Some(t) => Action::Wait(t),
            None if st.closing.is_some() => {
                let past = st.closing.is_some_and(|d| Instant::now() >= d);
                if self.gpu_idle(st, wakers) || st.fatal.is_some() || past {
                    // Everything completed (or the bound passed: then what is still on the GPU
                    // is leaked): release it and end.
                    st.stopped = true;
                    st.backend.shutdown(Duration::ZERO);
                    Action::Stop
                } else {
                    Action::Wait(st.submitted)
                }
            }
            None => Action::Sleep,
        }
    }

    /// The value the driver waits for next: the highest awaited ([`WaitPolicy::All`]) or the
    /// oldest ([`WaitPolicy::Oldest`]), but no later than the first early part of a split flush.
    fn wait_target(&self, st: &State<B>) -> Option<u64> {
        let (mut keys, mut lanes) = (st.by_value.keys(), st.by_value_wakers.keys());
        let target = match self.options.policy {
            WaitPolicy::All => keys.next_back().into_iter().chain(lanes.next_back()).max().copied(),
            WaitPolicy::Oldest => keys.next().into_iter().chain(lanes.next()).min().copied(),
        };
        // A split flush's part whose lane tasks can go on while the GPU runs the later parts
        // (see `part_wakers`) is waited for first, under either policy.
        match st.early.first() {
            Some(&early) => target.map(|t| t.min(early)),
            None => target,
        }
    }

    /// An executor with nothing to run spins on the counter (for the spin budget, while
    /// `stop()` is false) before it parks, and fires the waiters it sees done: a round trip
    /// that ends within the spin skips the driver's wake-up and the executor's. Returns whether
    /// it fired anything.
    pub fn executor_spin(&self, waiter: &B::Waiter, stop: impl Fn() -> bool) -> bool {
        let (target, budget) = {
            let st = self.lock();
            let Some(t) = self.wait_target(&st) else { return false };
            (t, self.spin_budget(&st))
        };
        if budget.is_zero() {
            return false;
        }
        let (reached, took) = self.traced_spin(waiter, target, budget, stop);
        let reached = reached.ok().flatten();
        let mut wakers = Vec::new();
        let Some(c) = reached else {
            // Not done within the spin: the executor parks and the driver blocks for it.
            return false;
        };
        self.spun_to(&mut self.lock(), c, took, &mut wakers);
        let fired = !wakers.is_empty();
        self.wake(wakers);
        fired
    }

    /// [`QueueCore::spin_on`] as a spin of its own (an executor's before it parks, a lone job's
    /// for its own submission): one `spin` span in the trace.
    fn traced_spin(
        &self,
        waiter: &B::Waiter,
        target: u64,
        budget: Duration,
        stop: impl Fn() -> bool,
    ) -> (Result<Option<u64>>, Duration) {
        let (reached, took) = self.spin_on(waiter, target, budget, stop);
        if let Some(t) = &self.trace {
            let done = matches!(reached, Ok(Some(_)));
            t.span(HostKind::Spin, Instant::now() - took, &[target, done as u64]);
        }
        (reached, took)
    }

    /// Reads the counter until it reaches `target`, for at most `budget` or until `stop()`,
    /// counting the time as spin time. Returns the value reached (`None`: not within the spin)
    /// and how long it took.
    fn spin_on(
        &self,
        waiter: &B::Waiter,
        target: u64,
        budget: Duration,
        stop: impl Fn() -> bool,
    ) -> (Result<Option<u64>>, Duration) {
        let started = Instant::now();
        let reached = loop {
            match waiter.completed() {
                Ok(c) if c >= target => break Ok(Some(c)),
                Ok(_) if started.elapsed() < budget && !stop() => std::hint::spin_loop(),
                Ok(_) => break Ok(None),
                Err(e) => break Err(e),
            }
        };
        let took = started.elapsed();
        bump(&self.counters.spin_ns, took.as_nanos() as u64);
        (reached, took)
    }

    /// A spin of `took` saw the counter at `c`: the estimate learns from it, and what completed
    /// is retired (read through the backend, as after a blocking wait) and its waiters fired.
    fn spun_to(&self, st: &mut State<B>, c: u64, took: Duration, wakers: &mut Vec<Waker>) {
        st.estimate.record(took);
        let c = st.backend.completed().map_or(c, |b| b.max(c));
        self.complete_upto(st, c, wakers);
    }

    /// Whether the one waiter in the slot table is the only wait on the queue: no wait of a
    /// lane's item, taken in or not (see [`super::lanes`]), waits beside it. A job that spins
    /// for its own submission while other jobs wait holds its thread, which may be the one
    /// that records theirs (one task driving many connections' futures).
    fn alone_waiting(&self, st: &State<B>) -> bool {
        st.waiters.len() == 1
            && st.lane_wakers.is_empty()
            && st.by_value_wakers.is_empty()
            && !(self.lanes_on && self.lanes.any())
    }

    /// How long the driver may spin on the counter before blocking for a wait.
    pub fn spin_budget(&self, st: &State<B>) -> Duration {
        if self.options.adaptive {
            st.estimate.budget(self.options.spin)
        } else {
            self.options.spin
        }
    }

    /// A wait for `target` that began at `started` ended with `outcome` (`Ok(true)`: reached;
    /// `Ok(false)`: timed out). Fires every waiter the counter shows done.
    pub fn finish_wait(
        &self,
        st: &mut State<B>,
        target: u64,
        started: Instant,
        outcome: Result<bool>,
        wakers: &mut Vec<Waker>,
    ) {
        st.waiting = None;
        let took = started.elapsed();
        st.estimate.record(took);
        bump(&self.counters.wait_ns, took.as_nanos() as u64);
        let outcome = outcome.and_then(|reached| Ok((reached, st.backend.completed()?)));
        match outcome {
            Ok((reached, completed)) => {
                self.complete_upto(st, completed, wakers);
                if !reached {
                    let t = self.options.timeout.unwrap_or_default();
                    fire_upto(st, target, Err(Error::Timeout(t)), wakers);
                }
            }
            Err(e) => self.fail_all(st, e, wakers),
        }
    }

    /// The driver's loop: decide, flush or wait (without the lock), wake, repeat; sleep when
    /// there is nothing to do. Runs on the queue's driver thread until the queue stops.
    pub fn drive(&self, waiter: &B::Waiter) {
        let mut st = self.lock();
        loop {
            let mut wakers = Vec::new();
            match self.decide(&mut st, &mut wakers) {
                Action::Stop => return,
                Action::Flush => {
                    st = self.flush(st, &mut wakers);
                    drop(st);
                    self.wake(wakers);
                    st = self.lock();
                }
                Action::Sleep if wakers.is_empty() => {
                    // The decision and the sleep happen under one hold of the lock, so a
                    // notification cannot fall between them.
                    self.driver_asleep.store(true, Ordering::SeqCst);
                    // With no flush running (whose end notifies the driver), lane items added
                    // before the flag could be seen are taken in here and the driver decides
                    // again (step 4 of the lanes' protocol, see [`super::lanes`]).
                    let idle = self.lanes_on && st.flushing.is_none();
                    if idle {
                        self.driver_idle.store(true, Ordering::SeqCst);
                        std::sync::atomic::fence(Ordering::SeqCst);
                        if self.lanes.any() {
                            let mut woken = Vec::new();
                            self.absorb_lanes(&mut st, &mut woken);
                            self.driver_asleep.store(false, Ordering::SeqCst);
                            self.driver_idle.store(false, Ordering::SeqCst);
                            drop(st);
                            self.wake(woken);
                            st = self.lock();
                            continue;
                        }
                    }
                    let started = Instant::now();
                    st = st.wait_on(&self.driver_cv);
                    self.driver_asleep.store(false, Ordering::SeqCst);
                    self.driver_idle.store(false, Ordering::SeqCst);
                    if let Some(t) = &self.trace {
                        t.span(HostKind::Sleep, started, &[]);
                    }
                }
                Action::Sleep => {
                    drop(st);
                    self.wake(wakers);
                    st = self.lock();
                }
                Action::Wait(target) => {
                    st.waiting = Some(target);
                    // An executor spins itself before it parks (see `executor_spin`); the
                    // driver then blocks at once rather than spin a second time.
                    let budget =
                        if self.running.load(Ordering::SeqCst) > 0 { Duration::ZERO } else { self.spin_budget(&st) };
                    let closing = st.closing;
                    drop(st);
                    self.wake(wakers);
                    let started = Instant::now();
                    let outcome = self.wait_unlocked(waiter, target, budget, started, closing);
                    st = self.lock();
                    if matches!(outcome, Ok(false)) && self.closing_now.load(Ordering::SeqCst) {
                        // Another thread closes the queue: it takes over what is in flight.
                        st.waiting = None;
                        continue;
                    }
                    let mut wakers = Vec::new();
                    self.finish_wait(&mut st, target, started, outcome, &mut wakers);
                    drop(st);
                    self.wake(wakers);
                    st = self.lock();
                }
            }
        }
    }

    /// Spins on the counter for up to `budget`, then blocks until `target`, the timeout, the
    /// deadline of a queue closing from its own driver thread (`closing`), or until another
    /// thread closes the queue (`Ok(false)` for the last three).
    fn wait_unlocked(
        &self,
        waiter: &B::Waiter,
        target: u64,
        budget: Duration,
        started: Instant,
        closing: Option<Instant>,
    ) -> Result<bool> {
        let r = self.wait_unlocked_inner(waiter, target, budget, started, closing);
        if let Some(t) = &self.trace {
            t.span(HostKind::Wait, started, &[target]);
        }
        r
    }

    fn wait_unlocked_inner(
        &self,
        waiter: &B::Waiter,
        target: u64,
        budget: Duration,
        started: Instant,
        closing: Option<Instant>,
    ) -> Result<bool> {
        let _span = tracing::debug_span!("vkasync.wait", value = target, spin_us = budget.as_micros() as u64).entered();
        if !budget.is_zero()
            && self.spin_on(waiter, target, budget.saturating_sub(started.elapsed()), || false).0?.is_some()
        {
            return Ok(true);
        }
        bump(&self.counters.host_waits, 1);
        // In slices, so that a thread closing the queue never waits for a wait it cannot cut
        // short: between slices the driver sees `closing_now` and stops. The last slice ends at
        // the bound (the wait timeout, or the deadline of a queue closing itself); its outcome
        // is the wait's.
        let until = self.options.timeout.map(|t| started + t).into_iter().chain(closing).min();
        loop {
            let slice = match until {
                Some(u) => {
                    let left = u.saturating_duration_since(Instant::now());
                    if left <= WAIT_SLICE {
                        return waiter.wait(target, Some(left));
                    }
                    WAIT_SLICE
                }
                None => WAIT_SLICE,
            };
            if waiter.wait(target, Some(slice))? {
                return Ok(true);
            }
            if self.closing_now.load(Ordering::SeqCst) {
                return Ok(false);
            }
        }
    }

    /// Runs the driver's decisions on the calling thread until it would sleep (the model tests
    /// drive the core this way, deterministically). Returns whether anything happened.
    #[allow(dead_code)] // used by the model tests
    pub fn drive_inline(&self, waiter: &B::Waiter, max_steps: usize) -> bool {
        let mut any = false;
        for _ in 0..max_steps {
            let mut wakers = Vec::new();
            let mut st = self.lock();
            match self.decide(&mut st, &mut wakers) {
                Action::Stop | Action::Sleep => {
                    drop(st);
                    any |= !wakers.is_empty();
                    self.wake(wakers);
                    return any;
                }
                Action::Flush => st = self.flush(st, &mut wakers),
                Action::Wait(target) => {
                    let budget = self.spin_budget(&st);
                    drop(st);
                    let started = Instant::now();
                    let outcome = self.wait_unlocked(waiter, target, budget, started, None);
                    st = self.lock();
                    self.finish_wait(&mut st, target, started, outcome, &mut wakers);
                }
            }
            drop(st);
            self.wake(wakers);
            any = true;
        }
        any
    }

    /// Closes the queue, within one bound ([`Options::shutdown`]); see "Shutdown" in the
    /// protocol ([`crate::executor`]). `recorded` says what becomes of work recorded but not
    /// submitted. Every waiter still waiting fails; the driver thread is stopped (it leaves a
    /// GPU wait within one [`WAIT_SLICE`]) and joined; then this thread waits for what is in
    /// flight until the bound and releases it, or leaks it (and the device) if the GPU is still
    /// running it then. Called on the queue's own driver thread (a waker that dropped the last
    /// handle), it cannot join itself: the driver then finishes and releases what is in flight
    /// by the same bound and ends on its own.
    pub fn close(&self, driver: Option<DriverThread>, recorded: Recorded) -> Closed {
        let deadline = Instant::now() + self.options.shutdown;
        match self.close_begin(driver, recorded, deadline) {
            Ok(driver) => self.close_finish(driver, deadline),
            Err(closed) => closed,
        }
    }

    /// The first half of [`QueueCore::close`], which does not wait: submits or discards what is
    /// recorded, fails the waiters and tells the driver to stop. `Ok` with the driver thread
    /// (to be joined by [`QueueCore::close_finish`]) or `Err` with the outcome if there is
    /// nothing more to do here. Several queues closed together (a [`crate::QueueSet`]) begin
    /// all, then finish all by one deadline.
    pub fn close_begin(
        &self,
        driver: Option<DriverThread>,
        recorded: Recorded,
        deadline: Instant,
    ) -> std::result::Result<Option<DriverThread>, Closed> {
        let mut wakers = Vec::new();
        let keep = |st: &State<B>| recorded == Recorded::Submit && st.backend.has_pending() && st.fatal.is_none();
        if driver.as_ref().is_some_and(|d| d.thread.thread().id() == std::thread::current().id()) {
            let mut st = self.lock();
            self.absorb_lanes(&mut st, &mut wakers);
            if keep(&st) {
                st = self.flush(st, &mut wakers);
            }
            st.closing = Some(deadline);
            drop(st);
            self.wake(wakers);
            return Err(Closed::OnDriver);
        }
        self.closing_now.store(true, Ordering::SeqCst);
        {
            let mut st = self.lock();
            if st.stopped {
                return Err(Closed::Released);
            }
            self.absorb_lanes(&mut st, &mut wakers);
            if keep(&st) {
                st = self.flush(st, &mut wakers);
            }
            st.stopped = true;
            // Lane items added from now on are failed by whoever adds them.
            self.lanes_closed.store(true, Ordering::SeqCst);
            // A flush running on another thread holds the backend's command pool: let it end
            // (it only encodes and submits; it never waits for the GPU).
            st = self.after_flush(st);
            self.fail_all(&mut st, Error::InvalidArgument("the queue was shut down".into()), &mut wakers);
            st.epoch.set(EpochStatus::Failed(Error::InvalidArgument("the queue was shut down".into())));
        }
        // Outside the lock: notified whatever the flag says.
        self.driver_cv.notify_one();
        self.wake(wakers);
        Ok(driver)
    }

    /// The second half of [`QueueCore::close`]: joins the driver thread and waits for what is
    /// in flight, both by `deadline`, then releases it (or leaks it).
    pub fn close_finish(&self, driver: Option<DriverThread>, deadline: Instant) -> Closed {
        // The driver is asleep, flushing (bounded: it never waits for the GPU there) or in a
        // slice of a GPU wait: it stops within a slice.
        let joined = match driver {
            None => true,
            Some(d) => {
                let left = deadline.saturating_duration_since(Instant::now()) + WAIT_SLICE;
                match d.done.recv_timeout(left) {
                    Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                        // It has let go of the core and the device and only returns now.
                        let _ = d.thread.join();
                        true
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => false,
                }
            }
        };
        let mut st = self.lock();
        if !joined {
            log::error!(
                "vkasync: the queue's driver thread did not stop within {:?}; leaking the queue's work and device rather than freeing them under it",
                self.options.shutdown
            );
            st.backend.leak();
            return Closed::Leaked;
        }
        if st.backend.shutdown(deadline.saturating_duration_since(Instant::now())) {
            Closed::Released
        } else {
            Closed::Leaked
        }
    }

    /// Takes every waker (at shutdown, to break task ↔ executor reference cycles).
    pub fn take_all_wakers(&self) -> Vec<Waker> {
        self.lock().waiters.take_all_wakers()
    }

    /// Wakes `wakers` (without the lock), as one `wake` span of the queue's trace when it has
    /// one: on a multi-threaded runtime a wake from outside its workers goes through its
    /// injection queue, and the driver wakes every task of a flush one after another.
    fn wake(&self, wakers: Vec<Waker>) {
        match &self.trace {
            Some(t) if !wakers.is_empty() => {
                let (started, n) = (Instant::now(), wakers.len() as u64);
                wake_all(wakers);
                t.span(HostKind::Wake, started, &[n]);
            }
            _ => wake_all(wakers),
        }
    }
}

fn wake_all(wakers: Vec<Waker>) {
    for w in wakers {
        w.wake();
    }
}

fn fire_upto<B>(st: &mut State<B>, upto: u64, outcome: Result<(), Error>, wakers: &mut Vec<Waker>) {
    let later = st.by_value.split_off(&(upto + 1));
    let done = std::mem::replace(&mut st.by_value, later);
    for k in done.into_values().flatten() {
        wakers.extend(st.waiters.fire(k, outcome.clone()));
    }
    // Lane tasks read their outcome when they run: success without the lock, anything else
    // (a timeout) under it.
    let later = st.by_value_wakers.split_off(&(upto + 1));
    wakers.extend(std::mem::replace(&mut st.by_value_wakers, later).into_values().flatten());
}

/// Per-context state: the last epoch this context recorded into, its id in traces (given when
/// first needed) and its GPU clock (made when first needed: with timing on).
#[derive(Default)]
pub(crate) struct ContextState {
    pub last: Mutex<Option<Arc<Epoch>>>,
    pub id: std::sync::atomic::AtomicU64,
    pub clock: std::sync::OnceLock<Arc<TaskClock>>,
    /// Counts the context as a job in progress of a [`crate::QueueSet`] while it lives (held
    /// for its `Drop`).
    #[allow(dead_code)]
    pub load: Option<super::set::LoadGuard>,
}

impl ContextState {
    /// The context's id in traces (without allocating: a trace names the context of every
    /// await).
    pub fn id(&self) -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        match self.id.load(Relaxed) {
            0 => {
                let new = crate::trace::next_id();
                match self.id.compare_exchange(0, new, Relaxed, Relaxed) {
                    Ok(_) => new,
                    // Another thread gave it first.
                    Err(won) => won,
                }
            }
            id => id,
        }
    }

    pub fn clock(&self) -> &Arc<TaskClock> {
        self.clock.get_or_init(|| TaskClock::new(self.id()))
    }

    /// Notes that the context recorded into `epoch`. A context that records many times into
    /// one epoch keeps its reference: every context's reference shares the epoch's count, so
    /// each clone and drop is a write that the recording threads contend for.
    pub fn recorded_into(&self, epoch: &Arc<Epoch>) {
        let mut last = lock(&self.last);
        if !last.as_ref().is_some_and(|e| Arc::ptr_eq(e, epoch)) {
            *last = Some(epoch.clone());
        }
    }
}

/// A lane item's wait and its first poll (see [`QueueCore::batch_in_lane`]).
pub(crate) type Laned<B> = (SyncFuture<B>, Poll<Result<()>>);

/// Resolves when the work of one epoch (as captured at creation) has completed.
pub(crate) struct SyncFuture<B: Backend> {
    core: Arc<QueueCore<B>>,
    epoch: Option<Arc<Epoch>>,
    key: Option<Key>,
    /// Its task's waker went with a lane item (see [`super::lanes`]), not into a slot.
    lane: bool,
    counted: bool,
    /// With a trace: the context's id, and when the wait found its work unfinished.
    ctx: u64,
    since: Option<i64>,
}

impl<B: Backend> SyncFuture<B> {
    pub fn new(core: Arc<QueueCore<B>>, epoch: Option<Arc<Epoch>>, ctx: u64) -> Self {
        SyncFuture { core, epoch, key: None, lane: false, counted: false, ctx, since: None }
    }

    /// Ends a wait whose work is known done another way (see
    /// [`crate::executor::context`]'s `BatchAndSettle`), without the lock: its `await` span ends
    /// here; a slot it holds is removed when it is dropped.
    pub(crate) fn settled_early(&mut self) -> Poll<Result<()>> {
        self.lane = false;
        self.traced(Ok(()))
    }

    /// The `await` span of a wait that had to wait, once it is over.
    fn traced(&mut self, out: Result<()>) -> Poll<Result<()>> {
        if let (Some(t), Some(since)) = (&self.core.trace, self.since.take()) {
            // In a native task, the wait ends where the poll that saw it done started (one
            // clock read less per await); elsewhere, now.
            let (task, started) = crate::trace::current_poll();
            let end = started.filter(|&s| s >= since).unwrap_or_else(|| t.stamp());
            t.async_span_to(HostKind::Await, since, end, &[self.ctx, out.is_ok() as u64, task]);
        }
        Poll::Ready(out)
    }

    /// A poll under a hold of the lock (the caller wakes `wakers` once it is released).
    pub(crate) fn poll_locked<'a>(
        &mut self,
        core: &'a QueueCore<B>,
        mut st: StateGuard<'a, B>,
        cx: &mut Context<'_>,
        wakers: &mut Vec<Waker>,
    ) -> Poll<Result<()>> {
        if let Some(key) = self.key {
            match st.waiters.state(key) {
                SlotState::Waiting => {
                    st.waiters.update_waker(key, cx.waker());
                    return Poll::Pending;
                }
                SlotState::Freed => {
                    // Only a success frees a slot that its future holds.
                    self.key = None;
                    drop(st);
                    return self.traced(Ok(()));
                }
                SlotState::Fired(outcome) => {
                    st.waiters.remove(key);
                    self.key = None;
                    if let Err(e) = outcome {
                        drop(st);
                        return self.traced(Err(e));
                    }
                }
            }
        }
        let Some(epoch) = &self.epoch else {
            drop(st);
            return self.traced(Ok(()));
        };
        let value = match epoch.status() {
            EpochStatus::Failed(e) => {
                drop(st);
                return self.traced(Err(e));
            }
            EpochStatus::Submitted(v) if v <= st.completed => {
                drop(st);
                return self.traced(Ok(()));
            }
            EpochStatus::Submitted(v) => Some(v),
            EpochStatus::Recording => None,
        };
        if let Some(e) = st.fatal.clone() {
            return Poll::Ready(Err(e));
        }
        if st.stopped {
            return Poll::Ready(Err(Error::InvalidArgument("the queue was shut down".into())));
        }
        // Must wait: one slot, under the recording epoch or under the submitted value.
        if !self.counted {
            self.counted = true;
            bump(&core.counters.await_points, 1);
            if let Some(t) = &core.trace {
                self.since = Some(t.stamp());
            }
        }
        let key = st.waiters.insert(cx.waker().clone());
        self.key = Some(key);
        match value {
            Some(v) => {
                st.by_value.entry(v).or_default().push(key);
                // A running executor spins or hands its wait to the driver when it parks.
                if st.waiting.is_none() && !core.executor_running() {
                    core.notify_driver();
                }
            }
            None if st.flushing.as_ref().is_some_and(|f| Arc::ptr_eq(f, epoch)) => {
                // Its epoch is being submitted by another thread, which moves this waiter to
                // the value it signals.
                st.flushing_waiters.push(key);
            }
            None => {
                st.pending_waiters.push(key);
                let group = core.options.flush == FlushPolicy::GroupCommit || !core.executor_running();
                if group {
                    // Group commit: if the GPU has nothing left to do, submit what is recorded
                    // now, from this thread. Otherwise keep gathering: the driver submits it
                    // when what is in flight completes. "Nothing left" is judged by the last
                    // completion the driver saw, not by a fresh read of the counter: under
                    // load from many threads a fresh read finds each tiny submission done at
                    // once and turns every await into a submit.
                    //
                    // A running executor's thread is the only one recording, so there it does
                    // read the counter: finding the previous epoch done, it submits what
                    // gathered at once and keeps the GPU busy while it records more.
                    let idle = if core.executor_running() {
                        core.loop_group_ready(&st) && core.gpu_idle(&mut st, wakers)
                    } else {
                        st.flushing.is_none() && st.in_flight.len() < core.submit_depth(&mut st, wakers)
                    };
                    // The loop's group goes to the driver thread (see `try_hand_off`), unless a
                    // group handed over earlier is still waiting for it and a full group
                    // gathered since: a driver slow to wake must not hold the GPU idle.
                    let handed_and_full = st.hand_off && st.backend.pending_commands() >= core.options.group_bound;
                    if idle && core.executor_running() && !handed_and_full && core.try_hand_off(&mut st) {
                    } else if idle {
                        st = match self.lone_spin(core, core.flush(st, wakers)) {
                            Ok(done) => return done,
                            Err(st) => st,
                        };
                    } else if st.waiting.is_none() && !core.executor_running() {
                        core.notify_driver();
                    }
                }
            }
        }
        drop(st);
        Poll::Pending
    }

    /// A job that just submitted its own work and is the only one waiting on the queue (no
    /// executor loop runs, no other job waits) reads the counter for the spin budget before it
    /// returns `Pending`: a wait that ends within it costs no thread wake-ups (the driver's,
    /// then the job's thread's), which on a tokio worker are most of a lone job's latency. Under
    /// load other jobs wait too and nobody spins here. Returns the outcome if the work completed
    /// within the spin, else the lock (released meanwhile if it spun, and taken again).
    fn lone_spin<'a>(
        &mut self,
        core: &'a QueueCore<B>,
        st: StateGuard<'a, B>,
    ) -> std::result::Result<Poll<Result<()>>, StateGuard<'a, B>> {
        let value = self.epoch.as_ref().and_then(|b| b.value.get());
        let budget = core.spin_budget(&st);
        let Some(value) = value
            .filter(|_| !core.executor_running() && st.fatal.is_none() && !budget.is_zero() && core.alone_waiting(&st))
        else {
            return Err(st);
        };
        let waiter = st.backend.waiter();
        drop(st);
        let (reached, took) = core.traced_spin(&waiter, value, budget, || false);
        let mut st = core.lock();
        let Ok(Some(c)) = reached else {
            return Err(st);
        };
        // This job's slot goes first, so that completing the counter does not wake the job
        // that is running this poll.
        if let Some(key) = self.key.take() {
            st.waiters.remove(key);
        }
        let mut wakers = Vec::new();
        core.spun_to(&mut st, c, took, &mut wakers);
        drop(st);
        core.wake(wakers);
        Ok(self.traced(Ok(())))
    }
}

impl<B: Backend> Future for SyncFuture<B> {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        if this.key.is_some() || this.lane {
            // A woken wait: a success freed its slot when it fired, and the epoch's value and
            // the queue's completed value (both stored under the lock before that) tell it
            // without the lock. A value is published to waiters only above the completed value
            // (see `publish`), so the slot is freed by the same hold of the lock that made the
            // completed value reach it. Once any waiter got a failure (a timeout, device loss)
            // its slot keeps it even after its work completes, so then the slot is read under
            // the lock (the flag is set under the lock before the completed value that the
            // load below sees is stored).
            if let Some(v) = this.epoch.as_ref().and_then(|b| b.value.get()) {
                if this.core.seen.succeeded(v) {
                    this.key = None;
                    this.lane = false;
                    return this.traced(Ok(()));
                }
            }
            // Not known done: a lane's wait goes on in a slot like any other (its waker, if
            // still held, wakes it once more for nothing).
            this.lane = false;
        }
        let core = this.core.clone();
        let mut wakers = Vec::new();
        let out = this.poll_locked(&core, core.lock(), cx, &mut wakers);
        core.wake(wakers);
        out
    }
}

impl<B: Backend> Drop for SyncFuture<B> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let _ = self.core.lock().waiters.remove(key);
        }
    }
}

/// What [`QueueCore::close`] does with work recorded but not submitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// Submit it (a [`crate::Queue`]: its last handle is gone, and what was recorded runs).
    Submit,
    /// Discard it (an [`crate::Executor`]: its tasks were cancelled).
    Discard,
}

/// How [`QueueCore::close`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum Closed {
    /// Everything the GPU ran completed and was released; the driver thread was joined.
    Released,
    /// The GPU was still running work at the bound (or the device was lost): that work's
    /// memory, and the device, are leaked rather than freed under it.
    Leaked,
    /// Closed from the driver thread itself, which finishes and ends on its own.
    OnDriver,
}

/// A queue's driver thread, owned by the front that closes the queue (an [`crate::Executor`],
/// or the last handle of a [`crate::Queue`]), which joins it (see [`QueueCore::close`]).
pub(crate) struct DriverThread {
    /// Gets a message when the thread has let go of the core and the device.
    done: std::sync::mpsc::Receiver<()>,
    thread: std::thread::JoinHandle<()>,
}

/// Starts the driver thread of a core (see [`QueueCore::drive`]).
pub(crate) fn spawn_driver<B: Backend>(core: &Arc<QueueCore<B>>, name: &str) -> Result<DriverThread> {
    let waiter = core.lock().backend.waiter();
    core.threaded.store(true, Ordering::Relaxed);
    let core = core.clone();
    let (done, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            core.drive(&waiter);
            drop(waiter);
            drop(core);
            let _ = done.send(());
        })
        .map(|thread| DriverThread { done: rx, thread })
        .map_err(|e| Error::InvalidArgument(format!("could not start the queue's driver thread: {e}")))
}
