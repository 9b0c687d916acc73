//! The runtime: async jobs record GPU work; one submit per flush; one timeline-semaphore wait
//! wakes every finished job. Two fronts share one scheduling core:
//! - [`Executor`]: a native, single-thread executor of local (`!Send`) tasks;
//! - [`Queue`]: a `Send + Sync + Clone` handle that any thread and any async runtime (tokio,
//!   smol, `futures::executor::block_on`, plain threads) records into and awaits.
//!
//! Both hand out [`Ctx`]s (`Send + Sync`; their waits are `Send + 'static` futures).
//!
//! # The protocol
//!
//! **Threads.** Each queue (one per `Executor` or `Queue`) has one *driver thread*, which owns
//! waiting: it blocks in `vkWaitSemaphores` on one timeline value that covers every awaited
//! submission, then wakes every waiter whose value is reached. All scheduling state sits behind
//! one mutex (`QueueCore::state`); contexts on any thread record and register waiters under it,
//! and wakers are woken only after it is released. A thread that finds it held tries again a
//! few times (backing off) before it sleeps: with many recording threads, sleeping on every
//! contended lock turned each unlock into a futex wake. The one way around the lock is a
//! [`Queue`]'s *lanes* (below), for coalesced items added while the GPU has no room for another
//! submission. Apart from them the only atomics are statistics counters, two values written
//! under the lock and read without it (an epoch's submitted value and the last completed value,
//! see below), and the flags the lanes read (room for a submission, the driver idle, the queue
//! closed). An executor's tasks live on its thread: wakers, the
//! driver's included, push them onto a mutex-protected ready queue and unpark that thread,
//! which sleeps in `thread::park` whenever no task can run. It never blocks inside Vulkan, so a
//! waker fired on another thread during a long kernel runs its task at once, and the wait goes
//! on undisturbed. While an executor's loop runs tasks (it is not parked), submitting and the
//! first look at the counter (its spin) are its job and the driver stays asleep (its tasks'
//! awaits do not wake it); when it parks, the driver takes over: it submits what tasks wait
//! for and blocks for it.
//!
//! **Flushing without the lock.** A flush takes the recording epoch out under the lock (the next
//! epoch starts empty at once), encodes and submits it *without* the lock, and takes the lock
//! again to publish the value it signals. Other threads go on recording meanwhile; that is what
//! lets many threads record into one queue while its flushes (the `vkCmd*` encoding, a coalesced
//! kind's host work, `vkQueueSubmit`) run. One flush runs at a time per queue, so submissions
//! keep their epochs' order. A flush asked for while one runs (the flush bound, a queue
//! closing) is left to the running one, which flushes again when done; [`Ctx::flush`] and an
//! executor with no task to run wait for the running flush to end (it only encodes and submits,
//! never waits for the GPU), then flush what is left, so everything recorded before them is
//! submitted when they return. A task that awaits work of the epoch being flushed waits under
//! that epoch and moves with it to its value.
//!
//! **Who owns the timeline counter.** The [`Device`] owns the queue's timeline semaphore and the
//! counter of values handed out. A value is handed out only by a successful `vkQueueSubmit`
//! (inside `Device::submit`); a failed submit hands out nothing, so the timeline never has a gap
//! that no submission will signal.
//!
//! **Epochs.** Work recorded by all tasks since the last flush forms the *recording epoch*: one
//! `Recording` (a list of ops, see [`crate::CommandList`] for how ops become phases and
//! barriers) plus a shared `Epoch` cell whose status is `Recording`, then `Submitted(value)` or
//! `Failed(error)`. A context remembers the last epoch it recorded into. `ctx.synchronize()`
//! captures that epoch *when called*, so it covers exactly the work the task recorded before
//! the call.
//!
//! **When a task is woken.** A `synchronize` future that must wait registers one slot in the
//! waiter table (a generational slab), keyed either under the recording epoch or under the
//! epoch's timeline value once submitted. The driver (or a thread that finds the counter
//! advanced) fires slots and collects their wakers; it wakes them only after releasing the
//! lock. A success frees the slot as it fires: the woken future sees, without the lock, that
//! its epoch's value is at or below the last completed value, which is stored (under the lock)
//! before the slots it completes are fired, and a submitted value is never left waiting at or
//! below it. A failure (device loss, a timeout) stays in the slot until the future takes it,
//! under the lock; once any waiter got one, woken futures always look under the lock, since a
//! slot that holds a failure is not freed by its work's later success. A future dropped while
//! it waits frees its slot. [`Ctx::read`] records its read-back and registers its wait under
//! one hold of the lock, and so does a coalesced item's wait when it does not go through a
//! lane (below). So a job that uploads, dispatches and reads takes the lock three times.
//!
//! **Lanes.** A coalesced item ([`crate::batch`], the crypto calls) of a [`Queue`]'s context,
//! added while the GPU has no room for another submission (a flush runs, or the pipeline is
//! full), does not take the lock: it goes into the adding thread's lane (one per host core,
//! each with a lock of its own) with its task's waker and the epoch the lanes record into,
//! which is always the recording epoch. Whoever needs an exact view under the lock (a flush,
//! the driver deciding, [`Ctx::flush`], closing) takes the lanes in; a flush also points every
//! lane at the next epoch, under each lane's lock, before the recording epoch becomes it. A
//! lane's wakers go with their flush to its value and are woken with its waiters (or at once
//! if it ran on the host or failed); the woken future reads its epoch's value and the
//! completed value as above, and anything else sends it to a slot under the lock. After adding,
//! a context reads whether room came back, whether the driver sleeps with no flush running,
//! and whether the queue closed or lost its device; the driver sets each of these before it
//! takes the lanes in, so either side sees the other and no item is left behind. When a lane
//! holds its share of a group (2,048 items over all lanes) a flush is due even behind a full
//! pipeline, so that the GPU never waits for the encoding of everything that gathered while it
//! was busy. The lanes are off with a wait timeout (a lane's waker carries no outcome) and with
//! per-context GPU time. Measured on the H200 with 16 tokio workers sealing records through one
//! queue, they cut the host time per record from 17–20 µs to 10–12 µs (see `BENCHMARKS.md`).
//!
//! **When work is submitted** ([`FlushPolicy`]). A flush puts all recorded ops into one command
//! buffer and one `vkQueueSubmit` that signals the next timeline value; waiters on the epoch
//! move to that value. (With copy queues, [`crate::DeviceBuilder::copy_queues`], it is up to
//! three command buffers, one `vkQueueSubmit` per queue, and still one value.)
//! - *Group commit* ([`FlushPolicy::GroupCommit`], the default, and always for a [`Queue`]): when a job waits for
//!   recorded work and the GPU has nothing left to do, that thread submits at once. While a
//!   submission runs, work gathers; the driver waits for what is in flight and then submits
//!   everything that gathered, in one submit. The delay is zero on an idle GPU, and the GPU
//!   works while the host records. While no executor loop runs (always for a [`Queue`]),
//!   "nothing left to do" means fewer submissions in flight than the *pipeline depth*
//!   ([`QueueBuilder::pipeline_depth`], 2 by default): gathered work then goes out behind the
//!   one submission the GPU is running, so that its encoding (and a coalesced kind's host
//!   work) overlaps the GPU's, and the driver waits for the oldest submission in flight
//!   before it submits the next group. Groups are as large as before (what gathers while the
//!   GPU runs one submission); each waits for one more submission. A group of coalesced items
//!   goes behind a running submission only when it holds at least 256 of them (`BEHIND_MIN`):
//!   a coalesced kind's flush costs the GPU a fixed time whatever it holds, so a small group
//!   sent early makes the next one small too (flush storms of 27–53 records each, on an H100
//!   at 1 KiB records); a smaller one waits for an idle GPU. A group is also submitted
//!   once it holds [`ExecutorBuilder::max_group_ops`] commands (by default 96 on a queue,
//!   512 on an executor), in flight or not, so that the GPU gets work in steps and little is
//!   left for the end of a run.
//!
//!   An executor's loop judges by an idle GPU, and submits a group at an await only once the
//!   group holds a third of the group bound; a smaller group waits for the loop's next check
//!   (every 8 polls, below) or until the loop runs out of ready tasks. Where the GPU finishes each group faster
//!   than the loop records the next (on the H200 once small copies became one dispatch, see
//!   [`crate::DeviceBuilder::compute_copies`]), the loop would otherwise submit every few
//!   jobs and spend its time on submissions. The loop does not encode its groups itself
//!   while its driver thread is idle (not flushing, not in a GPU wait): it hands them to the
//!   driver thread, which encodes and submits them (with whatever was recorded by the time it
//!   starts) while the loop runs more tasks; only if a full group gathered while a handed
//!   group still waits for the driver to wake does an await submit on the loop's thread. Encoding is a quarter of the loop's host time per
//!   job on the H200, so the two threads share it (`Stats::handed_flushes` counts these
//!   flushes). A [`Queue`] has no loop: the recording thread submits its group itself.
//! - *When idle* ([`FlushPolicy::WhenIdle`]): an executor submits only when no task can run:
//!   the fewest submits (1,000 independent tasks: one). While no executor loop runs (a context
//!   awaited elsewhere), the driver submits by group commit, so such a wait never hangs.
//! - Always: when the recorded-but-unsubmitted ops pass the flush bound
//!   ([`ExecutorBuilder::max_pending_ops`]), on [`Ctx::flush`], and, for an executor, when no task
//!   can run and nothing else is in flight (recorded work is never left behind).
//!
//! **Waiting.** The driver waits for one value: the highest awaited one ([`WaitPolicy::All`],
//! the default: one wait covers all pending submissions) or the oldest awaited one
//! ([`WaitPolicy::Oldest`]: woken jobs run while the GPU works on later submissions); under
//! either, a heavy flush sent in parts has the tasks of its lane items woken part by part, so
//! that they read their results while the GPU runs the later parts (see "Lanes" above). Before
//! blocking it may spin on the counter (a fixed time, or adaptively: twice the moving average of
//! recent waits, up to a bound, and not at all while waits are longer). When the wait ends it
//! reads the counter once and wakes every waiter at or below it. A job that submits its own
//! work (group commit, the GPU idle) while no other job waits (a coalesced item waiting in a
//! queue's lanes counts) and no executor loop runs reads the counter itself for the same spin budget before it returns `Pending`: a lone
//! request on a tokio worker then needs neither the driver's wake-up nor its own (on the
//! H200 a lone job under tokio took about a fifth less time, on a noisy measure). Under load
//! other jobs wait too, and no job spins in its poll.
//!
//! **The executor's loop.** It runs ready tasks until none is ready; then (when idle) submits
//! as above; then sleeps until a waker fires. It never blocks while a task is ready. While
//! the loop runs, the driver sleeps, so every 8 task polls the loop itself reads the counter
//! (when tasks wait for submitted work) and wakes the tasks whose work completed, and, under
//! group commit, submits the recorded work that tasks wait for if the GPU ran out of work. An
//! await checks these only when it registers, so a loop kept busy by ready tasks (reading
//! their results back) would otherwise hold the last group back, with the GPU idle, until no
//! task is ready.
//!
//! **Resources.** Every op holds `Arc`s to its buffers and kernel. A flushed recording moves
//! to the in-flight list (oldest first) with its value; the completed prefix is retired each
//! time the counter is read and dropped right after the state's lock is released, which frees
//! buffers whose `Buffer` handle was already dropped (and releases their memory-bound leases,
//! waking allocations that wait for memory), and command buffers are reused once their value
//! is reached. No resource's drop blocks; only closing a queue waits, within one bound (see
//! "Shutdown" below).
//!
//! **Coalesced launches.** A task may add an item of a batch kind ([`Ctx::batch`], see
//! [`crate::record::batch`]) instead of recording commands; items count as recorded work of the epoch
//! (the task's `synchronize` covers them, and they count toward the flush bound). At the flush,
//! before the epoch's commands are written, each kind encodes all its items as ordinary ops.
//! If nothing is left for the GPU afterwards (every kind computed its items on the host), the
//! flush submits nothing, and its waiters are complete at once.
//!
//! **Backpressure.** With a memory bound, [`Ctx::buffer`] leases the buffer's bytes before it
//! allocates; past the bound it waits, and the driver submits what is recorded and waits for
//! what is in flight so that memory comes back.
//!
//! **Drop, abort, panic.** A task's panic, in its poll or in its drop, ends that task with a
//! [`JoinError`] and never unwinds into the loop; the loop's state is restored by guards on
//! every unwind path. A [`JoinHandle`] awaited where its executor does not run (another
//! runtime) resolves to a [`JoinError`] with `is_not_running()` instead of hanging. Dropping a
//! [`JoinHandle`] detaches the task. [`JoinHandle::abort`]
//! cancels the task at its next await: its future is dropped (freeing its waiter slots), work
//! it already recorded is still submitted and completes, and its resources are released after
//! that. A panicking task ends with a [`JoinError`] whose `is_panic()` is true; other tasks go
//! on.
//!
//! **Shutdown.** Who owns what: an [`Executor`], or the last handle of a [`Queue`] (with its
//! last context), owns the queue's driver thread; the queue's core owns the command pool and
//! the in-flight recordings (which hold the buffers and kernels they use); every queue,
//! buffer, kernel and recording holds a [`Device`], and the last `Device` handle destroys the
//! device, its allocator, its timeline semaphore and (as the last owner) the instance.
//! Closing a queue happens in the owner's drop (or [`Executor::shutdown`]), on the thread that
//! drops it, in this order:
//! 1. The queue is marked closed: an executor cancels its tasks and discards unsubmitted work;
//!    a queue submits what is recorded. Every waiter still waiting fails.
//! 2. The driver thread is stopped and **joined**. It never blocks in Vulkan for longer than
//!    one slice (25 ms; longer GPU waits are made of slices), and it leaves its loop at the end
//!    of the current slice or flush. It destroys nothing.
//! 3. The closing thread waits for what is in flight, then frees it (command buffers are
//!    reset, buffers go back to their pool). Steps 2 and 3 share one bound, the *shutdown
//!    timeout* ([`ExecutorBuilder::shutdown_timeout`], [`QueueBuilder::shutdown_timeout`],
//!    10 s by default): the drop returns within it plus one slice. With the GPU idle that is
//!    well under a millisecond of waiting. A wait longer than 100 ms is announced in the log
//!    (`warn`); if the GPU is still running the work at the bound, that work's memory, its
//!    command pool and the device are leaked (an `error` in the log) rather than freed under the
//!    GPU, and the operating system takes them back at exit (a discrete GPU's driver may then
//!    hold the process's exit until that work ends: about 3 s for work with that much left,
//!    seen on an NVIDIA H200; lavapipe does not). A [`QueueSet`] closes the queues it holds the
//!    last handles of together, under one bound.
//!
//! After a device loss what was in flight is leaked (below), except after a simulated one
//! ([`Device::debug_simulate_loss`], for tests), where the GPU goes on: closing then waits
//! for it, within the same bound, and frees it, so the device is destroyed.
//!
//! So every Vulkan object is destroyed on a thread of the program's, by a drop that the program
//! ran: no thread of vkasync's outlives the drop of its queue's owner, none is running when
//! `main` returns, and nothing is registered to run at process exit (exit handlers run in an
//! order vkasync cannot choose, the Vulkan layers' first). What is still alive at exit (a queue
//! kept in a `static`, say) is not destroyed: its driver sleeps outside Vulkan (or in one
//! slice) and the process ends around it. The one exception: if the last handle of a queue is
//! dropped on that queue's own driver thread (inside a waker that it fired, which dropped a
//! task holding the last context), that thread cannot join itself; it then finishes what is
//! in flight, by the same bound, and ends on its own.
//!
//! **Device loss and timeouts.** `VK_ERROR_DEVICE_LOST` from a submit or a wait is fatal: every
//! waiting task gets [`Error::DeviceLost`](crate::Error::DeviceLost), and every later await fails the same way. Nothing
//! hangs. What was in flight is leaked, not freed: after a loss nothing says when the driver
//! stops touching that memory, and the recordings hold the device, so a lost device with work
//! in flight is never destroyed. With
//! [`ExecutorBuilder::wait_timeout`], a GPU wait that passes the timeout wakes the tasks waiting
//! for values up to the awaited one with [`Error::Timeout`](crate::Error::Timeout); their work stays in flight and its
//! resources are held until it completes. There is no timeout by default.
//!
//! # Example: two independent tasks, one submit, one wait
//! ```
//! use vkasync::{kernels, Buffer, Device, Executor, Kernel, MemoryKind};
//!
//! let device = Device::new()?;
//! let mix = Kernel::new(&device, &kernels::MIX)?;
//! let exec = Executor::new(&device)?;
//! let mut handles = Vec::new();
//! for t in 0..2u32 {
//!     let (ctx, mix, device) = (exec.context(), mix.clone(), device.clone());
//!     handles.push(exec.spawn(async move {
//!         let data: Vec<u32> = (0..1024).map(|i| i ^ t).collect();
//!         let buf = Buffer::<u32>::new(&device, data.len(), MemoryKind::Device)?;
//!         ctx.upload(&buf, &data)?;
//!         ctx.dispatch(&mix, [16, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[1024u32, 1]))?;
//!         ctx.read(&buf).await
//!     }));
//! }
//! exec.run();
//! for h in handles {
//!     let out: Vec<u32> = h.join().unwrap()?;
//!     assert_eq!(out.len(), 1024);
//! }
//! let stats = exec.stats();
//! // Group commit (the default): the first wait found the GPU idle and submitted at once;
//! // the second task's work went with it or right after. `FlushPolicy::WhenIdle` would put
//! // both in one submit.
//! assert!(stats.await_points <= 2 && stats.submits <= 2 && stats.host_waits <= 2);
//! println!("{stats}");
//! # Ok::<(), vkasync::Error>(())
//! ```

mod backend;
mod budget;
mod context;
pub(crate) mod core;
mod lanes;
mod local;
mod queue;
mod seen;
mod set;
mod task;
mod waiters;

#[cfg(test)]
mod sim;

pub use context::{Ctx, Synchronize};
pub use queue::{Queue, QueueBuilder};
pub use set::{PerDevice, QueueSet};
pub use task::{JoinError, JoinHandle, Spawner};

use self::backend::VulkanBackend;
use self::core::{spawn_driver, Options, QueueCore};
use self::local::{Drive, Local};
use crate::error::Result;
use crate::vk::device::Device;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// The default bound of the adaptive spin before blocking, for executors and queues (see
/// [`ExecutorBuilder::adaptive_spin`]): on the H200 it took one task's round trip from 180 µs
/// to 38 µs, and it spins not at all while waits take longer than this.
pub const DEFAULT_SPIN_BOUND: Duration = Duration::from_micros(200);

/// The default bound of closing an executor or a queue (see
/// [`ExecutorBuilder::shutdown_timeout`]).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// Which timeline value the executor waits for when no task can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WaitPolicy {
    /// Wait for the highest awaited value: one host wait covers every pending submission.
    #[default]
    All,
    /// Wait for the oldest awaited value, run the tasks it wakes while the GPU works on.
    Oldest,
}

/// When the executor submits recorded work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlushPolicy {
    /// Submit only when no task can run (or at the flush bound): the fewest submits, and the
    /// GPU starts only when the host has recorded everything it could.
    WhenIdle,
    /// Group commit (as databases commit transactions and TCP corks small sends): when a task
    /// waits for recorded work and the GPU has nothing left to do, submit at once; while a
    /// submission runs, keep recording, and submit what gathered as soon as a waiting task
    /// finds the GPU idle again, or when no task can run (or at the flush bound). The GPU
    /// starts early and works while the host records. The default: on the H200 it took 1,000
    /// independent tasks from 10.6 to 7.9 µs per task (`BENCHMARKS.md`).
    #[default]
    GroupCommit,
}

/// Counters kept by an executor. `Display` prints the stats line used by the examples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Tasks spawned.
    pub tasks_spawned: u64,
    /// Tasks finished (completed, panicked or cancelled).
    pub tasks_completed: u64,
    /// GPU waits requested by tasks (`synchronize` calls that had to wait).
    pub await_points: u64,
    /// Flushes of recorded work.
    pub flushes: u64,
    /// Submissions: one per flush that had GPU work, each one `vkQueueSubmit` (with copy
    /// queues, one per queue it uses; see [`crate::DeviceBuilder::copy_queues`]), or one per
    /// part of a flush split over several ([`crate::DeviceBuilder::split_flushes`]).
    pub submits: u64,
    /// Command buffers submitted: one per submission, or with copy queues one per part that
    /// holds commands (input, compute, output).
    pub command_buffers: u64,
    /// GPU waits (`vkWaitSemaphores` calls, made on the executor's wait thread); a wait that an
    /// optional spin on the counter satisfied does not count.
    pub host_waits: u64,
    /// Pipeline barriers recorded. With copy queues, a submission's wait for the one before it
    /// (in place of the barrier that orders it) counts as one.
    pub barriers: u64,
    /// Dispatches recorded (a coalesced batch counts its dispatches, not its items).
    pub dispatches: u64,
    /// Dispatches of the library's copy kernel, each of which copied the small regions of one
    /// phase in place of `vkCmdCopyBuffer` (see [`crate::DeviceBuilder::compute_copies`]); not
    /// counted in `dispatches`.
    pub copy_dispatches: u64,
    /// The last timeline value this executor submitted.
    pub timeline_value: u64,
    /// Total time from the start of each GPU wait (spin included) to the executor taking its
    /// outcome, in nanoseconds.
    pub wait_ns: u64,
    /// Of which spent spinning on the counter before blocking (CPU time of the executor's
    /// thread), in nanoseconds.
    pub spin_ns: u64,
    /// The most bytes allocated at once through [`Ctx::buffer`] under the memory bound (0
    /// without a bound).
    pub memory_peak: u64,
    /// Time spent flushing (encoding the recorded work, batches included, and submitting it),
    /// in nanoseconds. Flushes run without the queue's lock, one at a time.
    pub flush_ns: u64,
    /// Of the flushes, those of full groups that a running executor handed to its driver
    /// thread, which encoded and submitted them while the executor ran tasks (see the
    /// [module docs](self)); always 0 for a [`Queue`].
    pub handed_flushes: u64,
    /// Coalesced items that a [`Queue`]'s contexts added through their thread's lane, without
    /// the queue's lock, while the GPU had no room for another submission (see "Lanes" in the
    /// [module docs](self)); always 0 for an [`Executor`].
    pub laned_items: u64,
    /// Of the lane items, those of a flush sent in parts (see
    /// [`DeviceBuilder::split_flushes`](crate::DeviceBuilder::split_flushes)) whose tasks were
    /// woken at their own part's value, before the flush's last part completed (or at once,
    /// where their part had completed by the time the flush was submitted).
    pub part_wakes: u64,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "stats: tasks={} await_points={} flushes={} submits={} command_buffers={} host_waits={} barriers={} dispatches={} flush_ms={:.2} laned={} part_wakes={}",
            self.tasks_spawned,
            self.await_points,
            self.flushes,
            self.submits,
            self.command_buffers,
            self.host_waits,
            self.barriers,
            self.dispatches,
            self.flush_ns as f64 / 1e6,
            self.laned_items,
            self.part_wakes
        )
    }
}

/// The options both builders share, as setters on a builder holding `options: Options`
/// (one text for [`ExecutorBuilder`] and [`QueueBuilder`]).
macro_rules! shared_setters {
    () => {
        /// Bounds the bytes of buffers that jobs allocate through [`Ctx::buffer`](crate::Ctx::buffer) and that are
        /// not yet freed (freed means: dropped, and the GPU work using them completed). Past
        /// the bound, `Ctx::buffer` awaits until enough is freed. Default: no bound.
        pub fn memory_bound(mut self, bytes: u64) -> Self {
            self.options.memory_bound = Some(bytes);
            self
        }

        /// The bound of closing: dropping the executor, or the last handle of a queue (and its
        /// last context), waits at most this long for work still on the GPU (default
        /// [`DEFAULT_SHUTDOWN_TIMEOUT`](crate::DEFAULT_SHUTDOWN_TIMEOUT), 10 s). A wait past
        /// 100 ms says so in the log (`warn`); if the GPU is still running the work when the
        /// bound passes, its memory and the device are leaked rather than freed under the GPU
        /// (`error` in the log). With the GPU idle, closing takes well under a millisecond of
        /// waiting. See "Shutdown" in the [protocol](crate::executor).
        pub fn shutdown_timeout(mut self, bound: std::time::Duration) -> Self {
            self.options.shutdown = bound;
            self
        }

        /// The wait policy (default [`WaitPolicy::All`](crate::WaitPolicy::All)).
        pub fn wait_policy(mut self, policy: $crate::WaitPolicy) -> Self {
            self.options.policy = policy;
            self
        }

        /// A bound on each GPU wait; waiters then get [`Error::Timeout`](crate::Error::Timeout).
        /// Default: none, so long kernels are never cut short.
        pub fn wait_timeout(mut self, timeout: Option<std::time::Duration>) -> Self {
            self.options.timeout = timeout;
            self
        }

        /// Flush once this many commands are recorded but not submitted (default 4,096; at
        /// least 1).
        pub fn max_pending_ops(mut self, n: usize) -> Self {
            self.options.max_pending = n.max(1);
            self
        }

        /// Under [`FlushPolicy::GroupCommit`], submit the recorded commands once `n` have
        /// gathered, even while a submission is in flight (at least 1; `usize::MAX` for no
        /// bound; default 512 on an [`crate::Executor`], 96 on a [`Queue`]). Bounded groups keep
        /// the GPU fed in steps and leave little work for the end of a run: through a [`Queue`]
        /// from 16 tokio workers, 1,000 independent jobs (three commands each) went from
        /// 8.0–8.4 to 5.9–6.8 µs per job with 96 on the NVIDIA H200 (`BENCHMARKS.md`). An
        /// executor's loop also submits a group at an await once it holds a third of the bound
        /// (see the [module docs](crate::executor)), so there the bound sets how small its
        /// groups get: on two H100 hosts, 1,000 jobs took 3.25–3.69 µs each with 512 against
        /// 3.57–5.13 with 96 (with no bound 3.33–3.69 on one of them; alternating processes;
        /// 10,000 and 100,000 jobs alike, 100 inside the spread). Batch items ([`Ctx::batch`])
        /// do not count. On an [`crate::Executor`] whose loop runs, a full group is handed to
        /// the queue's driver thread, which submits it together with what was recorded by the
        /// time it starts (see the [module docs](crate::executor)).
        pub fn max_group_ops(mut self, n: usize) -> Self {
            self.options.group_bound = n.max(1);
            self
        }

        /// Under [`FlushPolicy::GroupCommit`] while no executor loop runs (always for a
        /// [`Queue`]): submit the work that jobs wait for once fewer than `depth` submissions
        /// are in flight (at least 1; default 2; a group of fewer than 256 coalesced items, as
        /// the crypto module makes, waits for an idle GPU whatever the depth, see the
        /// [module docs](crate::executor)). With 1 the next group goes out only once the
        /// GPU is idle, and is encoded while the GPU waits; with 2 it is encoded and submitted
        /// behind the submission the GPU is running. On the NVIDIA H200, sealing 10,000 × 16
        /// KiB records from 16 tokio workers (`tls_pipeline --modes coalesced-tokio`, whose
        /// flushes pack the records on the host) went from 4.2–5.1 to 5.3–6.0 GB/s with 2;
        /// the mix workload did not change (0.92–1.14×, `BENCHMARKS.md`). An executor's loop
        /// does not use it (see the [module docs](crate::executor)).
        pub fn pipeline_depth(mut self, depth: usize) -> Self {
            self.options.depth = depth.max(1);
            self
        }

        /// Before blocking in `vkWaitSemaphores`, read the timeline counter for exactly up to
        /// this long (zero: block at once), instead of the default adaptive spin. A wait
        /// satisfied by reading is not a host wait. See `BENCHMARKS.md` for what it gives.
        pub fn spin_before_wait(mut self, spin: std::time::Duration) -> Self {
            self.options.spin = spin;
            self.options.adaptive = false;
            self
        }

        /// Before blocking, read the timeline counter for as long as recent waits suggest the
        /// GPU needs (twice their moving average), but at most `bound`, and not at all while
        /// waits take longer than `bound`. Short round trips then skip the block and wake-up;
        /// long kernels cost no CPU time. [`Stats::spin_ns`](crate::Stats::spin_ns) reports the time spent spinning.
        /// This is the default, with [`DEFAULT_SPIN_BOUND`](crate::DEFAULT_SPIN_BOUND).
        ///
        /// The same budget lets a lone job (one that submits its own work while no other job,
        /// and no coalesced item in the queue's lanes, waits on the queue) read the counter inside its own poll before it returns
        /// `Pending`, so that it needs no thread wake-ups: on a runtime's thread that poll may
        /// then take up to the budget, during which that thread runs nothing else (on a
        /// current-thread runtime, no other task). `spin_before_wait(Duration::ZERO)` turns all
        /// spinning off.
        pub fn adaptive_spin(mut self, bound: std::time::Duration) -> Self {
            self.options.spin = bound;
            self.options.adaptive = true;
            self
        }

        /// Writes a trace of this queue's run to `path` (Chrome trace-event JSON, for Perfetto
        /// or `chrome://tracing`) when it is dropped: host threads, flushes, waits, awaits and
        /// the GPU's commands on its own tracks (see [`trace`](crate::trace)). Without it,
        /// `VKASYNC_TRACE=path` traces every queue of the process into one file. Building
        /// fails with [`Error::Unsupported`](crate::Error::Unsupported) where the queue cannot
        /// write timestamps.
        #[cfg(feature = "trace")]
        pub fn trace(mut self, path: impl Into<std::path::PathBuf>) -> Self {
            self.trace.path = Some(path.into());
            self
        }

        /// How a trace maps GPU time to host time (default
        /// [`TraceClock::Auto`](crate::trace::TraceClock::Auto)).
        #[cfg(feature = "trace")]
        pub fn trace_clock(mut self, clock: crate::trace::TraceClock) -> Self {
            self.trace.clock = clock;
            self
        }

        /// Where the GPU writes the timestamps of a trace's GPU spans and of per-task GPU
        /// time (default [`TraceDetail::Phases`](crate::trace::TraceDetail::Phases), or
        /// `VKASYNC_TRACE_DETAIL=commands` for
        /// [`TraceDetail::Commands`](crate::trace::TraceDetail::Commands)).
        #[cfg(feature = "trace")]
        pub fn trace_detail(mut self, detail: crate::trace::TraceDetail) -> Self {
            self.trace.detail = Some(detail);
            self
        }

        /// Measures each context's GPU time ([`Ctx::gpu_time`](crate::Ctx::gpu_time)) with
        /// timestamps around every command. A trace does not turn it on (charging every
        /// command to its context costs host time on every job); with both, the trace's GPU
        /// spans of single commands name their context. Default: off.
        #[cfg(feature = "trace")]
        pub fn gpu_timing(mut self, on: bool) -> Self {
            self.trace.gpu_timing = on;
            self
        }
    };
}
pub(crate) use shared_setters;

/// The default group bound of a [`Queue`] (see [`ExecutorBuilder::max_group_ops`]).
const DEFAULT_GROUP_OPS: usize = 96;

/// The default group bound of an [`Executor`], whose loop submits a group at an await once it
/// holds a third of the bound (see [`ExecutorBuilder::max_group_ops`]).
const DEFAULT_EXECUTOR_GROUP_OPS: usize = 512;

/// The default pipeline depth of group commit (see [`ExecutorBuilder::pipeline_depth`]).
const DEFAULT_PIPELINE_DEPTH: usize = 2;

/// The default options of both fronts.
pub(crate) fn default_options() -> Options {
    Options {
        policy: WaitPolicy::All,
        timeout: None,
        max_pending: 4096,
        group_bound: DEFAULT_GROUP_OPS,
        depth: DEFAULT_PIPELINE_DEPTH,
        spin: DEFAULT_SPIN_BOUND,
        adaptive: true,
        flush: FlushPolicy::GroupCommit,
        memory_bound: None,
        shutdown: DEFAULT_SHUTDOWN_TIMEOUT,
        // A `Queue` turns them on (an executor's contexts never add items from other threads).
        lanes: false,
    }
}

/// Configures an [`Executor`].
#[derive(Debug, Clone)]
pub struct ExecutorBuilder {
    device: Device,
    options: Options,
    trace: crate::trace::TraceOptions,
}

impl ExecutorBuilder {
    shared_setters!();

    /// When recorded work is submitted (default [`FlushPolicy::GroupCommit`]).
    pub fn flush_policy(mut self, flush: FlushPolicy) -> Self {
        self.options.flush = flush;
        self
    }

    /// Creates the executor.
    pub fn build(self) -> Result<Executor> {
        let backend = VulkanBackend::with_trace(&self.device, &self.trace)?;
        let core = QueueCore::new(backend, self.options);
        let driver = spawn_driver(&core, "vkasync-driver")?;
        Ok(Executor {
            local: Local::new(core, Drive::Thread(self.device.clone())),
            device: self.device,
            driver: Some(driver),
        })
    }
}

/// Runs async tasks that record GPU work on one device queue. See the [module docs](self).
///
/// The executor is `!Send`: it and its tasks stay on the thread that made it.
///
/// # Every core
///
/// The executor runs its tasks on one thread. A program that wants every core runs one
/// executor per thread, each over its share of the work, all on one [`Device`]. Each executor
/// flushes only its own tasks' work; for the tasks of every thread to join one stream of
/// flushes, give them the contexts of one shared [`Queue`] ([`Queue::context`]) instead of
/// their executor's. Sealing 10,000 records of 16 KiB on an H100 host of 16 cores (2026-12-07,
/// `0403161`, `BENCHMARKS.md`), sixteen executors over one shared queue ran 1.35–1.64× as fast as
/// sixteen with their own (which flushed five to seven times as many, smaller groups), and as
/// fast as tokio over one queue; at 1 KiB their own queues were 1.1–1.2× faster.
///
/// ```
/// use vkasync::{kernels, Buffer, Device, Error, Executor, Kernel, MemoryKind, Queue};
///
/// let device = Device::new()?;
/// let mix = Kernel::new(&device, &kernels::MIX)?;
/// let queue = Queue::new(&device)?; // shared by every thread's executor
/// let per_thread = std::thread::scope(|s| {
///     let threads: Vec<_> = (0..2u32)
///         .map(|t| {
///             let (device, mix, queue) = (&device, &mix, &queue);
///             s.spawn(move || -> Result<u32, Error> {
///                 let exec = Executor::new(device)?;
///                 let jobs: Vec<_> = (0..4u32)
///                     .map(|j| {
///                         let (ctx, mix, device) = (queue.context(), mix.clone(), device.clone());
///                         exec.spawn(async move {
///                             let buf = Buffer::<u32>::new(&device, 64, MemoryKind::Device)?;
///                             ctx.upload(&buf, &[t * 4 + j; 64])?;
///                             // `mix` with no rounds leaves each word as it is.
///                             let args = bytemuck::bytes_of(&[64u32, 0]);
///                             ctx.dispatch(&mix, [1, 1, 1], &[(&buf).into()], args)?;
///                             Ok::<_, Error>(ctx.read(&buf).await?[0])
///                         })
///                     })
///                     .collect();
///                 exec.run();
///                 jobs.into_iter().map(|h| h.join().expect("no job panics")).sum()
///             })
///         })
///         .collect();
///     threads.into_iter().map(|t| t.join().expect("no thread panics")).collect::<Result<Vec<u32>, Error>>()
/// })?;
/// assert_eq!(per_thread.iter().sum::<u32>(), (0..8).sum());
/// # Ok::<(), vkasync::Error>(())
/// ```
///
/// ```compile_fail
/// fn must_be_send<T: Send>(_: T) {}
/// let device = vkasync::Device::new().unwrap();
/// must_be_send(vkasync::Executor::new(&device).unwrap());
/// ```
pub struct Executor {
    local: Rc<Local<VulkanBackend>>,
    device: Device,
    /// The queue's driver thread, joined when the executor closes.
    driver: Option<self::core::DriverThread>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

impl Executor {
    /// An executor with the default options.
    pub fn new(device: &Device) -> Result<Self> {
        Self::builder(device).build()
    }

    /// A builder for the options.
    pub fn builder(device: &Device) -> ExecutorBuilder {
        let options = Options { group_bound: DEFAULT_EXECUTOR_GROUP_OPS, ..default_options() };
        ExecutorBuilder { device: device.clone(), options, trace: Default::default() }
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// A new task context (each task should have its own; clones share state).
    pub fn context(&self) -> Ctx {
        Ctx { shared: self.local.core.clone(), state: Arc::default(), device: self.device.clone(), keep: None }
    }

    /// Spawns a task. It starts running on the next `run`, `block_on` or `join`.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.local.spawn(future)
    }

    /// A handle that spawns tasks on this executor, for tasks that spawn others.
    pub fn spawner(&self) -> Spawner {
        Spawner::new(self.local.clone())
    }

    /// Spawns `f(ctx)` with a fresh context.
    pub fn spawn_with<F, Fut>(&self, f: F) -> JoinHandle<Fut::Output>
    where
        F: FnOnce(Ctx) -> Fut,
        Fut: Future + 'static,
        Fut::Output: 'static,
    {
        self.spawn(f(self.context()))
    }

    /// Runs until every spawned task has finished.
    pub fn run(&self) {
        let local = self.local.clone();
        self.local.run_until(move || local.tasks_alive() == 0);
        // Work recorded by tasks that finished without awaiting it still goes to the GPU.
        self.local.core.flush_now();
    }

    /// Runs `future` (and the other tasks while it waits) to completion on this thread.
    ///
    /// # Panics
    /// If `future` panics (the panic is resumed here with its message), or if the executor is
    /// shut down before it completes.
    pub fn block_on<F>(&self, future: F) -> F::Output
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        match self.spawn(future).join() {
            Ok(v) => v,
            Err(e) if e.is_panic() => panic!("{e}"),
            Err(e) => panic!("block_on: {e}"),
        }
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        self.local.core.stats()
    }

    /// Number of tasks not yet finished.
    pub fn tasks_alive(&self) -> usize {
        self.local.tasks_alive()
    }

    /// Closes the executor as its drop does (see [`Drop`](#impl-Drop-for-Executor)), and says
    /// how it went: [`Error::Timeout`](crate::Error::Timeout) if the GPU still ran submitted
    /// work when the shutdown timeout passed (that work's memory and the device are then
    /// leaked, not freed under the GPU), [`Error::DeviceLost`](crate::Error::DeviceLost) if
    /// the device was lost.
    ///
    /// ```
    /// let device = vkasync::Device::new()?;
    /// let exec = vkasync::Executor::builder(&device).shutdown_timeout(std::time::Duration::from_secs(1)).build()?;
    /// exec.run();
    /// exec.shutdown()?;
    /// # Ok::<(), vkasync::Error>(())
    /// ```
    pub fn shutdown(mut self) -> Result<()> {
        match self.local.shutdown(self.driver.take()) {
            self::core::Closed::Leaked if self.device.check_lost().is_err() => Err(crate::Error::DeviceLost),
            self::core::Closed::Leaked => Err(crate::Error::Timeout(self.local.core.options.shutdown)),
            _ => Ok(()),
        }
    }
}

impl Drop for Executor {
    /// Cancels the unfinished tasks, discards unsubmitted work, stops and joins the driver
    /// thread, and waits for submitted work to complete, all within the shutdown timeout
    /// ([`ExecutorBuilder::shutdown_timeout`], 10 s by default); see "Shutdown" in the
    /// [module docs](self).
    fn drop(&mut self) {
        let _ = self.local.shutdown(self.driver.take());
    }
}
