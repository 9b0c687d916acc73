//! What the scheduling core needs from a queue, and the Vulkan queue that provides it.
//!
//! The core ([`super::core`]) never calls Vulkan itself: it asks a [`Backend`] to submit what was
//! recorded, to wait for a timeline value and to read the counter. [`VulkanBackend`] does that
//! with one command buffer per flush and the device's timeline semaphore; the tests also drive
//! the core with a simulated queue whose timeline they advance.

use crate::error::Result;
use crate::record::batch::Batches;
use crate::record::recording::{Op, Recording};
use crate::trace::{GpuSpans, HostKind, QueueTrace, TaskClock};
use crate::vk::command_pool::CommandPool;
use crate::vk::copy_queues::Parts;
use crate::vk::device::Device;
use ash::vk;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one flush produced.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FlushInfo {
    /// The timeline value the submission signals.
    pub value: u64,
    /// Pipeline barriers recorded.
    pub barriers: u64,
    /// Command buffers in the submission.
    pub command_buffers: u64,
    /// Dispatches recorded.
    pub dispatches: u64,
    /// Dispatches of the copy kernel (see [`crate::record::copies`]).
    pub copy_dispatches: u64,
    /// Whether anything was submitted: a flush whose batches all ran on the host (and that has
    /// nothing else) submits nothing, and its waiters are done at once.
    pub submitted: bool,
    /// Submissions made: 1, or the parts of a split flush (see
    /// [`crate::CopyQueueInfo::split_bytes`]); `value` is the last one's.
    pub submissions: u64,
}

/// Waits on a queue's timeline from any thread.
pub(crate) trait Waiter: Send + 'static {
    /// Reads the counter.
    fn completed(&self) -> Result<u64>;
    /// Blocks until the timeline reaches `value` (`Ok(true)`) or `timeout` passes (`Ok(false)`).
    fn wait(&self, value: u64, timeout: Option<Duration>) -> Result<bool>;
}

impl Waiter for Device {
    fn completed(&self) -> Result<u64> {
        self.completed_value()
    }
    fn wait(&self, value: u64, timeout: Option<Duration>) -> Result<bool> {
        Device::wait(self, value, timeout)
    }
}

/// A queue with a timeline.
pub(crate) trait Backend: Send + 'static {
    /// Whether work was recorded since the last flush.
    fn has_pending(&self) -> bool;
    /// How many commands (and batch items) were recorded since the last flush.
    fn pending_len(&self) -> usize;
    /// How many commands were recorded since the last flush, batch items not counted.
    fn pending_commands(&self) -> usize;
    /// A number that changes whenever something is recorded (commands and host reads).
    fn recorded_count(&self) -> usize;
    /// Adds `n` batch items gathered in a queue's lanes (see [`super::lanes`]) to what is
    /// recorded.
    fn absorb_batches(&mut self, batches: Batches, n: usize);
    /// Everything recorded since the last flush, taken out of the backend to be encoded and
    /// submitted without the core's lock (see [`Backend::begin_flush`]).
    type Job: Send;
    /// Under the core's lock: takes everything recorded since the last flush (the next epoch
    /// records into a new, empty recording) with what encoding it needs. The core runs at most
    /// one job of a backend at a time, so a job may carry the backend's command pool.
    fn begin_flush(&mut self) -> Self::Job;
    /// Without the core's lock: encodes the job and submits it in one submission (a heavy
    /// flush on copy queues in several, see [`crate::CopyQueueInfo::split_bytes`]), returning
    /// the value the last one signals. On error the work not yet submitted is discarded and no
    /// value is handed out; parts already submitted stay in flight until their values are
    /// reached.
    fn run_flush(job: &mut Self::Job) -> Result<FlushInfo>;
    /// Under the core's lock again: the job's submission (if it made one) goes in flight, and
    /// what the job borrowed comes back.
    fn end_flush(&mut self, job: Self::Job);
    /// After a successful [`Backend::run_flush`] that went as several submissions: each one's
    /// value (`None`: it held nothing for the GPU) and how many of the flush's lane items it
    /// carried, in order, where the lanes' items can be told apart (see
    /// [`crate::record::batch::Batches::split`]). The core then wakes each part's lane waiters
    /// at its own value. Default: `None` (every waiter at the flush's value).
    fn part_wakes(job: &Self::Job) -> Option<PartWakes> {
        let _ = job;
        None
    }
    /// A handle that blocks on the timeline without the backend, so that the core's lock is
    /// not held while the driver waits.
    type Waiter: Waiter;
    /// Makes a [`Self::Waiter`].
    fn waiter(&self) -> Self::Waiter;
    /// Work retired (completed) since the last call, to be dropped without the core's lock.
    type Retired: Send + 'static;
    /// Takes what [`Backend::completed`] and [`Backend::run_flush`] retired.
    fn take_retired(&mut self) -> Self::Retired;
    /// Reads the counter once and releases what submissions at or below it held.
    fn completed(&mut self) -> Result<u64>;
    /// The device is lost: drop unsubmitted work, and give up on what is in flight. Drivers may
    /// still be executing it (lavapipe's queue thread runs to the end of the command buffer it
    /// is in), so its memory is leaked rather than freed under the driver.
    fn abandon(&mut self);
    /// Discards unsubmitted work, waits up to `bound` for everything submitted, then releases
    /// it and returns `true`. If the GPU did not finish (or the device is lost), what it may
    /// still use is leaked rather than freed under it, and it returns `false`.
    fn shutdown(&mut self, bound: Duration) -> bool;
    /// Leaks everything (and the device) from now on: nothing of this queue is ever destroyed
    /// (the queue could not make sure the GPU and its driver thread are done with it).
    fn leak(&mut self);
    /// The queue's trace, if it is traced (see [`crate::trace`]).
    fn trace(&self) -> Option<&Arc<QueueTrace>> {
        None
    }
    /// Whether per-context GPU time is measured (then contexts call [`Backend::record_mark`]
    /// and [`Backend::attribute`] around what they record).
    fn timing(&self) -> bool {
        false
    }
    /// Before a context records (with timing or a trace): a mark for [`Backend::attribute`];
    /// with a trace, the first in an epoch starts its `recording` span.
    fn record_mark(&mut self) -> usize {
        0
    }
    /// The commands recorded since `mark` belong to the context of `clock`.
    fn attribute(&mut self, _mark: usize, _clock: &Arc<TaskClock>) {}
}

/// Each part of a split flush, in order: the value it was submitted with (`None`: it held
/// nothing for the GPU) and how many of the flush's lane items it carried (see
/// [`Backend::part_wakes`]).
pub(crate) type PartWakes = Vec<(Option<u64>, usize)>;

/// A queue closed while the GPU still runs its work waits this long before it says so in the
/// log (see [`Backend::shutdown`]).
const ANNOUNCE_WAIT_AFTER: Duration = Duration::from_millis(100);

/// One Vulkan queue of a [`Device`].
pub(crate) struct VulkanBackend {
    pub device: Device,
    pool: Option<Pools>,
    /// Work recorded since the last flush.
    pub pending: Recording,
    /// Submitted recordings, oldest first, holding their buffers and kernels alive.
    in_flight: VecDeque<(u64, Recording)>,
    /// Completed recordings not yet dropped: the core drops them after releasing its lock.
    retired: Vec<Recording>,
    /// Their op vectors, for the next epochs.
    spare_ops: SpareOps,
    /// The trace, when on.
    trace: Option<Arc<QueueTrace>>,
    /// Per-context GPU time ([`crate::trace::TraceOptions::timing`]).
    timing: bool,
    /// GPU timestamps around the commands: on with a trace or with per-context time.
    spans: bool,
    /// Where the GPU spans' timestamps go.
    detail: crate::trace::TraceDetail,
    /// Query pools of completed submissions, for the next flushes.
    spare_pools: crate::trace::SparePools,
    /// With a trace: when the recording epoch got its first command (trace clock, ns), and when
    /// each in-flight submission was submitted (same order as `in_flight`).
    epoch_start: Option<i64>,
    submit_ns: VecDeque<i64>,
    /// The device was lost, or shutting down gave up on the GPU: what is in flight was leaked,
    /// and so is what a flush job running meanwhile submits.
    abandoned: bool,
}

/// Emptied `ops` vectors of completed recordings, for later epochs. A flush of a thousand
/// tasks holds a few hundred KiB of ops; allocating and freeing that for every flush, on
/// whichever thread flushes, makes the allocator grow and trim its heap (an `mprotect`, which
/// takes the process's memory-map lock) again and again.
type SpareOps = Arc<std::sync::Mutex<Vec<Vec<Op>>>>;

/// Completed recordings, dropped after the core's lock is released (which frees their buffers);
/// their op vectors go back to the backend's spares.
pub(crate) struct Retired {
    recs: Vec<Recording>,
    spare: Option<SpareOps>,
}

impl Drop for Retired {
    fn drop(&mut self) {
        for mut rec in self.recs.drain(..) {
            let ops = rec.take_ops();
            drop(rec);
            if let (Some(mut ops), Some(spare)) = (ops, &self.spare) {
                ops.clear();
                let mut spare = crate::util::lock(spare);
                if spare.len() < 2 {
                    spare.push(ops);
                }
            }
        }
    }
}

/// One flush of a [`VulkanBackend`], encoded and submitted without the core's lock.
pub(crate) struct FlushJob {
    device: Device,
    rec: Recording,
    /// The backend's command pools, lent for the job (`None` once the device was lost).
    pool: Option<Pools>,
    /// The counter as read when the job was taken: command buffers at or below it are reused.
    completed: u64,
    spare_pools: crate::trace::SparePools,
    spans: bool,
    detail: crate::trace::TraceDetail,
    trace: Option<Arc<QueueTrace>>,
    epoch_start: Option<i64>,
    submit_ns: Option<i64>,
    /// The value the submission signals, once made.
    submitted: Option<u64>,
    /// A submission failed after part of it may have been submitted (the device counts as
    /// lost): the recording is leaked.
    leak: bool,
    /// The parts of a split flush before the one in `rec` (see
    /// [`crate::CopyQueueInfo::split_bytes`]), in order: each with the value it was submitted
    /// with (`None`: not submitted) and, with a trace, when.
    parts_before: Vec<(Option<u64>, Recording, Option<i64>)>,
    /// Of a split flush: how many lane items each part holds (see [`Backend::part_wakes`]).
    laned: Option<Vec<usize>>,
}

/// A backend's command pools: the compute queue's and, with copy queues of another family, one
/// of that family for the input and output parts.
pub(crate) struct Pools {
    compute: CommandPool,
    copy: Option<CommandPool>,
}

impl Pools {
    fn new(device: &Device) -> Result<Self> {
        let compute = CommandPool::new(device.raw(), device.queue_family())?;
        let copy = match device.copy_queues() {
            Some(q) if q.family != device.queue_family() => match CommandPool::new(device.raw(), q.family) {
                Ok(p) => Some(p),
                Err(e) => {
                    compute.destroy(device.raw());
                    return Err(e);
                }
            },
            _ => None,
        };
        Ok(Pools { compute, copy })
    }

    /// The pool of part `k` (input, compute, output) of a split submission, or of the one
    /// command buffer of a whole one.
    fn for_part(&mut self, split: bool, k: usize) -> &mut CommandPool {
        match (&mut self.copy, split && k != 1) {
            (Some(copy), true) => copy,
            _ => &mut self.compute,
        }
    }

    /// Hands back the command buffers of parts `0..cbs.len()`, as [`CommandPool::release`].
    fn release(&mut self, split: bool, cbs: &[vk::CommandBuffer], value: Option<u64>) {
        for (k, &cb) in cbs.iter().enumerate() {
            self.for_part(split, k).release(cb, value);
        }
    }

    /// Destroys both pools (see [`CommandPool::destroy`]).
    fn destroy(self, device: &ash::Device) {
        self.compute.destroy(device);
        if let Some(p) = self.copy {
            p.destroy(device);
        }
    }
}

impl VulkanBackend {
    /// A backend that traces (see [`crate::trace`]) or times contexts as `opts` (and
    /// `VKASYNC_TRACE`) ask.
    pub fn with_trace(device: &Device, opts: &crate::trace::TraceOptions) -> Result<Self> {
        let trace = opts.open(device)?;
        if opts.timing() && !device.limits().timestamps {
            return Err(crate::Error::Unsupported {
                device: device.info().name.clone(),
                missing: "timestamps on the compute queue with hostQueryReset (for per-task GPU time)".into(),
            });
        }
        Ok(VulkanBackend {
            device: device.clone(),
            pool: Some(Pools::new(device)?),
            pending: Recording::new(device),
            in_flight: VecDeque::new(),
            retired: Vec::new(),
            spare_ops: SpareOps::default(),
            timing: opts.timing(),
            spans: opts.timing() || trace.is_some(),
            detail: opts.detail(),
            spare_pools: crate::trace::SparePools::default(),
            trace,
            epoch_start: None,
            submit_ns: VecDeque::new(),
            abandoned: false,
        })
    }

    /// Encodes the job's recording and submits it in one submission (one part of a split
    /// flush, or the whole flush).
    fn run_part(job: &mut FlushJob) -> Result<FlushInfo> {
        let rec = &mut job.rec;
        {
            let started = Instant::now();
            let _span = tracing::debug_span!("vkasync.encode_batches").entered();
            rec.encode_batches();
            if let Some(t) = &job.trace {
                t.span(HostKind::EncodeBatches, started, &[]);
            }
        }
        if let (Some(t), Some(start)) = (&job.trace, job.epoch_start.take()) {
            t.async_span(HostKind::Recording, start, &[rec.ops.len() as u64]);
        }
        if rec.is_empty() {
            // Everything ran on the host: no GPU work to submit or wait for.
            rec.mark_nothing_to_submit();
            return Ok(FlushInfo { value: 0, submitted: false, ..FlushInfo::default() });
        }
        if job.spans {
            // Its query pool is taken when encoding starts, sized to the phases.
            rec.spans = Some(GpuSpans::new(&job.device, rec.ops.len() as u32, job.detail, job.spare_pools.clone()));
        }
        // No pool: the device was lost, and the pool was leaked with what it ran.
        let pools = job.pool.as_mut().ok_or(crate::Error::DeviceLost)?;
        let d = job.device.raw();
        // With GPU spans, the copy queues' family must write timestamps too.
        let split = job.device.copy_queues().is_some_and(|q| {
            rec.spans.is_none() || job.device.info().queue_families[q.family as usize].timestamp_valid_bits > 0
        });
        let n = if split { 3 } else { 1 };
        let mut cbs = [vk::CommandBuffer::null(); 3];
        for k in 0..n {
            match pools.for_part(split, k).begin(d, job.completed) {
                Ok(cb) => cbs[k] = cb,
                Err(e) => {
                    pools.release(split, &cbs[..k], None);
                    return Err(e);
                }
            }
        }
        let started = Instant::now();
        let (stats, used) = {
            let _span = tracing::debug_span!("vkasync.encode", ops = rec.ops.len()).entered();
            let copy_kernel = crate::record::copies::kernel(&job.device);
            if split {
                rec.encode_parts(cbs, copy_kernel)
            } else {
                (rec.encode(cbs[0], copy_kernel), [true, false, false])
            }
        };
        for k in 0..n {
            if let Err(e) = pools.for_part(split, k).end(d, cbs[k]) {
                // `end` took back the one that failed; the others go back too.
                for m in (0..n).filter(|&m| m != k) {
                    pools.for_part(split, m).release(cbs[m], None);
                }
                return Err(e);
            }
        }
        if let Some(t) = &job.trace {
            t.span(HostKind::Encode, started, &[rec.ops.len() as u64]);
        }
        let started = Instant::now();
        job.submit_ns = job.trace.as_ref().map(|t| t.stamp());
        let submitted = {
            let _span = tracing::debug_span!("vkasync.submit").entered();
            if split {
                let part = |k: usize| if used[k] { std::slice::from_ref(&cbs[k]) } else { &[][..] };
                let parts = Parts { input: part(0), compute: part(1), output: part(2) };
                job.device.submit_parts(parts, rec)
            } else {
                job.device.submit_ordered(&cbs[..1], rec).map_err(|e| (e, false))
            }
        };
        if let Some(t) = &job.trace {
            t.span(HostKind::Submit, started, &[]);
        }
        match submitted {
            Ok((value, ordered)) => {
                // The buffers of parts left empty (never submitted) go back for reuse at once.
                for k in 0..n {
                    pools.for_part(split, k).release(cbs[k], used[k].then_some(value));
                }
                job.submitted = Some(value);
                Ok(FlushInfo {
                    value,
                    barriers: stats.barriers + u64::from(ordered),
                    command_buffers: used.iter().filter(|&&u| u).count() as u64,
                    dispatches: stats.dispatches,
                    copy_dispatches: stats.copy_dispatches,
                    submitted: true,
                    submissions: 1,
                })
            }
            Err((e, partial)) => {
                if partial {
                    // Part of the submission went in (see `copy_queues`): its command buffers
                    // may be pending, so they stay out of the pool, and the recording is leaked.
                    job.leak = true;
                } else {
                    pools.release(split, &cbs[..n], None);
                }
                Err(e)
            }
        }
    }

    /// One part of a flush job, back under the core's lock: in flight if it was submitted, else
    /// retired; leaked where the GPU may still use it.
    fn end_part(&mut self, rec: Recording, leak: bool, submitted: Option<u64>, submit_ns: Option<i64>) {
        if leak {
            // Part of a failed submission may run: nothing it uses is freed (see `run_flush`).
            std::mem::forget(rec);
            return;
        }
        if self.abandoned && !self.device.loss_is_simulated() {
            // The device was lost while the job ran: what it submitted may still be running
            // in a driver that no longer answers, so it is leaked, as in `abandon`.
            match submitted {
                Some(_) => std::mem::forget(rec),
                None => self.retired.push(rec),
            }
            return;
        }
        match submitted {
            Some(value) => {
                if let Some(ns) = submit_ns {
                    self.submit_ns.push_back(ns);
                }
                self.in_flight.push_back((value, rec));
            }
            // Not submitted (done on the host, or failed): dropped after the lock is released.
            None => self.retired.push(rec),
        }
    }

    /// Drops the recordings whose value was reached, oldest first.
    fn retire(&mut self, completed: u64) {
        while self.in_flight.front().is_some_and(|(v, _)| *v <= completed) {
            if let Some((value, mut rec)) = self.in_flight.pop_front() {
                self.finished(value, &mut rec);
                self.retired.push(rec);
            }
        }
    }

    /// A submission completed: its GPU spans and per-context times, and its `in flight` span.
    fn finished(&mut self, value: u64, rec: &mut Recording) {
        if !self.spans {
            return;
        }
        if let Some(sp) = rec.spans.take() {
            sp.finish(value, self.trace.as_deref(), &*rec);
            // Reset, and kept for the next flushes.
            sp.into_pool();
        }
        if let (Some(t), Some(start)) = (&self.trace, self.submit_ns.pop_front()) {
            t.async_span(HostKind::InFlight, start, &[value]);
        }
    }
}

impl Backend for VulkanBackend {
    fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    fn pending_len(&self) -> usize {
        self.pending.len()
    }

    fn pending_commands(&self) -> usize {
        self.pending.ops.len()
    }

    fn recorded_count(&self) -> usize {
        self.pending.len() + self.pending.host_reads.len()
    }

    fn absorb_batches(&mut self, batches: Batches, n: usize) {
        self.pending.absorb_batches(batches, n);
    }

    type Job = FlushJob;

    fn begin_flush(&mut self) -> FlushJob {
        // The next epoch starts with room for as many commands as this one had.
        let spare = crate::util::lock(&self.spare_ops).pop();
        let mut next = match spare {
            Some(ops) => Recording::with_ops(&self.device, ops),
            None => Recording::with_capacity(&self.device, self.pending.len()),
        };
        // And with room for as many batch items.
        next.expect_batch_items(self.pending.batch_items());
        let rec = std::mem::replace(&mut self.pending, next);
        // One counter read (tens of nanoseconds) lets earlier flushes that already completed
        // give their buffers and command buffers back before this one takes more.
        let completed = self.device.completed_value().unwrap_or_else(|_| self.device.cached_completed());
        self.retire(completed);
        FlushJob {
            device: self.device.clone(),
            rec,
            pool: self.pool.take(),
            completed,
            spare_pools: self.spare_pools.clone(),
            spans: self.spans,
            detail: self.detail,
            trace: self.trace.clone(),
            epoch_start: self.epoch_start.take(),
            submit_ns: None,
            submitted: None,
            leak: false,
            parts_before: Vec::new(),
            laned: None,
        }
    }

    fn run_flush(job: &mut FlushJob) -> Result<FlushInfo> {
        // A heavy flush on copy queues goes as several submissions, one after another.
        let split = job.device.copy_queues().map_or(0, |q| q.split_bytes);
        let (rest, laned) = job.rec.split_batches(split, crate::vk::copy_queues::MAX_SPLIT_PARTS);
        job.laned = laned;
        let mut info = Self::run_part(job)?;
        for mut part in rest {
            // The part submitted goes before the next; on an error the ones left are dropped
            // unsubmitted, and their items fail with the flush.
            std::mem::swap(&mut job.rec, &mut part);
            job.parts_before.push((job.submitted.take(), part, job.submit_ns.take()));
            let next = Self::run_part(job)?;
            info = FlushInfo {
                value: if next.submitted { next.value } else { info.value },
                barriers: info.barriers + next.barriers,
                command_buffers: info.command_buffers + next.command_buffers,
                dispatches: info.dispatches + next.dispatches,
                copy_dispatches: info.copy_dispatches + next.copy_dispatches,
                submitted: info.submitted || next.submitted,
                submissions: info.submissions + next.submissions,
            };
        }
        Ok(info)
    }

    fn part_wakes(job: &FlushJob) -> Option<PartWakes> {
        let laned = job.laned.as_ref()?;
        let values = job.parts_before.iter().map(|(v, _, _)| *v).chain(std::iter::once(job.submitted));
        (laned.len() == job.parts_before.len() + 1).then(|| values.zip(laned.iter().copied()).collect())
    }

    fn end_flush(&mut self, mut job: FlushJob) {
        // The parts of a split flush before the last, in the order of their values.
        for (submitted, rec, submit_ns) in std::mem::take(&mut job.parts_before) {
            self.end_part(rec, false, submitted, submit_ns);
        }
        let FlushJob { rec, pool, submit_ns, submitted, leak, .. } = job;
        if leak || (self.abandoned && !self.device.loss_is_simulated()) {
            // Part of a failed submission may run, or the device was lost while the job ran:
            // the pool is leaked with what it ran, as in `abandon`.
            std::mem::forget(pool);
        } else {
            self.pool = pool;
        }
        self.end_part(rec, leak, submitted, submit_ns);
    }

    type Waiter = Device;
    fn waiter(&self) -> Device {
        self.device.clone()
    }

    type Retired = Retired;
    fn take_retired(&mut self) -> Retired {
        if self.retired.is_empty() {
            return Retired { recs: Vec::new(), spare: None };
        }
        Retired { recs: std::mem::take(&mut self.retired), spare: Some(self.spare_ops.clone()) }
    }

    fn completed(&mut self) -> Result<u64> {
        let v = self.device.completed_value()?;
        self.retire(v);
        Ok(v)
    }

    fn abandon(&mut self) {
        self.abandoned = true;
        self.pending = Recording::new(&self.device);
        self.submit_ns.clear();
        if self.device.loss_is_simulated() {
            // The GPU goes on: what it runs is released when the queue closes, once the GPU is
            // done with it (see `shutdown`).
            return;
        }
        if !self.in_flight.is_empty() {
            log::error!(
                "vkasync: device lost with {} submission(s) in flight; leaking their memory rather than freeing it under the driver",
                self.in_flight.len()
            );
            for (_, rec) in self.in_flight.drain(..) {
                std::mem::forget(rec);
            }
            // Their command buffers may still be executing too.
            std::mem::forget(self.pool.take());
        }
    }

    fn trace(&self) -> Option<&Arc<QueueTrace>> {
        self.trace.as_ref()
    }

    fn timing(&self) -> bool {
        self.timing
    }

    fn record_mark(&mut self) -> usize {
        if self.epoch_start.is_none() {
            if let Some(t) = &self.trace {
                self.epoch_start = Some(t.stamp());
            }
        }
        self.pending.ops.len()
    }

    fn attribute(&mut self, mark: usize, clock: &Arc<TaskClock>) {
        let end = self.pending.ops.len();
        if end > mark {
            // A context that records several commands in a row owns one range.
            if let Some(last) = self.pending.owners.last_mut() {
                if last.1 as usize == mark && Arc::ptr_eq(&last.2, clock) {
                    last.1 = end as u32;
                    return;
                }
            }
            self.pending.owners.push((mark as u32, end as u32, clock.clone()));
        }
    }

    fn shutdown(&mut self, bound: Duration) -> bool {
        self.pending = Recording::new(&self.device);
        let shared = &self.device;
        if self.abandoned && !shared.loss_is_simulated() {
            return false;
        }
        let last = self.in_flight.back().map_or(0, |(v, _)| *v);
        // Wait quietly for a moment; a longer wait is announced, since it holds up a drop (and,
        // at the end of `main`, the process's exit).
        let quiet = bound.min(ANNOUNCE_WAIT_AFTER);
        let mut outcome = shared.wait_through_simulated_loss(last, Some(quiet));
        if matches!(outcome, Ok(false)) && bound > quiet {
            log::warn!(
                "vkasync: a queue was closed while the GPU still runs its work; waiting up to {:?} more for it (the queue's shutdown_timeout)",
                bound - quiet
            );
            outcome = shared.wait_through_simulated_loss(last, Some(bound - quiet));
        }
        match outcome {
            Ok(true) if self.abandoned => {
                // After a simulated loss: the GPU finished what it ran; release it.
                self.in_flight.clear();
                true
            }
            Ok(true) => {
                self.retire(last);
                self.retired.clear();
                true
            }
            Err(_) => {
                self.abandon();
                false
            }
            Ok(false) => {
                log::error!(
                    "vkasync: a queue was closed while the GPU still ran its work after {bound:?} (its shutdown_timeout); leaking that work's memory and the device rather than freeing them under the GPU"
                );
                self.leak();
                false
            }
        }
    }

    fn leak(&mut self) {
        self.abandoned = true;
        for (_, rec) in self.in_flight.drain(..) {
            std::mem::forget(rec);
        }
        // The command pool's buffers may be pending too, and the device must outlive them all.
        std::mem::forget(self.pool.take());
        std::mem::forget(self.device.clone());
    }
}

impl Drop for VulkanBackend {
    fn drop(&mut self) {
        // A closed queue has nothing in flight; otherwise (a queue that was never closed) what
        // the GPU still runs is leaked, never waited for here.
        if !self.in_flight.is_empty() {
            let _ = self.shutdown(Duration::ZERO);
        }
        if let Some(pool) = self.pool.take() {
            pool.destroy(self.device.raw());
        }
    }
}
