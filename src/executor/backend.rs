//! What the scheduling core needs from a queue, and the Vulkan queue that provides it.
//!
//! The core ([`super::core`]) never calls Vulkan itself: it asks a [`Backend`] to submit what was
//! recorded, to wait for a timeline value and to read the counter. [`VulkanBackend`] does that
//! with one command buffer per flush and the device's timeline semaphore; the tests also drive
//! the core with a simulated queue whose timeline they advance.

use crate::commands::{CommandPool, Recording};
use crate::device::Device;
use crate::error::Result;
use crate::trace::{GpuSpans, HostKind, QueueTrace, TaskClock};
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
    /// Whether anything was submitted: a flush whose batches all ran on the host (and that has
    /// nothing else) submits nothing, and its waiters are done at once.
    pub submitted: bool,
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
        self.shared.completed_value()
    }
    fn wait(&self, value: u64, timeout: Option<Duration>) -> Result<bool> {
        self.shared.wait(value, timeout)
    }
}

/// A queue with a timeline.
pub(crate) trait Backend: Send + 'static {
    /// Whether work was recorded since the last flush.
    fn has_pending(&self) -> bool;
    /// How many commands were recorded since the last flush.
    fn pending_len(&self) -> usize;
    /// A number that changes whenever something is recorded (commands and host reads).
    fn recorded_count(&self) -> usize;
    /// Submits everything recorded since the last flush in one submission and returns the
    /// value it signals. On error the recorded work is discarded and no value is handed out.
    fn flush(&mut self) -> Result<FlushInfo>;
    /// A handle that blocks on the timeline without the backend, so that the core's lock is
    /// not held while the driver waits.
    type Waiter: Waiter;
    /// Makes a [`Self::Waiter`].
    fn waiter(&self) -> Self::Waiter;
    /// Work retired (completed) since the last call, to be dropped without the core's lock.
    type Retired: Send + 'static;
    /// Takes what [`Backend::completed`] and [`Backend::flush`] retired.
    fn take_retired(&mut self) -> Self::Retired;
    /// Reads the counter once and releases what submissions at or below it held.
    fn completed(&mut self) -> Result<u64>;
    /// The device is lost: drop unsubmitted work, and give up on what is in flight. Drivers may
    /// still be executing it (lavapipe's queue thread runs to the end of the command buffer it
    /// is in), so its memory is leaked rather than freed under the driver.
    fn abandon(&mut self);
    /// Waits up to `bound` for everything submitted, then releases it. If the GPU did not
    /// finish, what it may still use is leaked rather than freed under it.
    fn shutdown(&mut self, bound: Duration);
    /// The queue's trace, if it is traced (see [`crate::trace`]).
    fn trace(&self) -> Option<&Arc<QueueTrace>> {
        None
    }
    /// Whether per-context GPU time is measured (then contexts call [`Backend::record_mark`]
    /// and [`Backend::attribute`] around what they record).
    fn timing(&self) -> bool {
        false
    }
    /// Before a context records: a mark for [`Backend::attribute`].
    fn record_mark(&mut self) -> usize {
        0
    }
    /// The commands recorded since `mark` belong to the context of `clock`.
    fn attribute(&mut self, _mark: usize, _clock: &Arc<TaskClock>) {}
}

/// One Vulkan queue of a [`Device`].
pub(crate) struct VulkanBackend {
    pub device: Device,
    pool: Option<CommandPool>,
    /// Work recorded since the last flush.
    pub pending: Recording,
    /// Submitted recordings, oldest first, holding their buffers and kernels alive.
    in_flight: VecDeque<(u64, Recording)>,
    /// Completed recordings not yet dropped: the core drops them after releasing its lock.
    retired: Vec<Recording>,
    /// The trace, when on.
    trace: Option<Arc<QueueTrace>>,
    /// Per-context GPU time (on with a trace, or on its own).
    timing: bool,
    /// Where the GPU spans' timestamps go.
    detail: crate::trace::TraceDetail,
    /// Query pools of completed submissions, for the next flushes.
    spare_pools: Vec<crate::timestamps::RawQueryPool>,
    /// With a trace: when the recording epoch got its first command (trace clock, ns), and when
    /// each in-flight submission was submitted (same order as `in_flight`).
    epoch_start: Option<i64>,
    submit_ns: VecDeque<i64>,
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
            pool: Some(CommandPool::new(device)?),
            pending: Recording::new(device),
            in_flight: VecDeque::new(),
            retired: Vec::new(),
            timing: opts.timing() || trace.is_some(),
            detail: opts.detail(),
            spare_pools: Vec::new(),
            trace,
            epoch_start: None,
            submit_ns: VecDeque::new(),
        })
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
        if !self.timing {
            return;
        }
        if let Some(sp) = rec.spans.take() {
            sp.finish(value, self.trace.as_deref());
            // A few pools are kept for the next flushes.
            if self.spare_pools.len() < 4 {
                self.spare_pools.push(sp.into_pool());
            }
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

    fn recorded_count(&self) -> usize {
        self.pending.len() + self.pending.host_reads.len()
    }

    fn flush(&mut self) -> Result<FlushInfo> {
        // The next epoch starts with room for as many commands as this one had.
        let next = Recording::with_capacity(&self.device, self.pending.len());
        let rec = std::mem::replace(&mut self.pending, next);
        let mut rec = rec;
        // One counter read (tens of nanoseconds) lets earlier flushes that already completed
        // give their buffers and command buffers back before this one takes more.
        let completed = self.device.shared.completed_value().unwrap_or_else(|_| self.device.shared.cached_completed());
        self.retire(completed);
        {
            let started = Instant::now();
            let _span = tracing::debug_span!("vkasync.encode_batches").entered();
            rec.encode_batches();
            if let Some(t) = &self.trace {
                t.span(HostKind::EncodeBatches, started, &[]);
            }
        }
        if let (Some(t), Some(start)) = (&self.trace, self.epoch_start.take()) {
            t.async_span(HostKind::Recording, start, &[rec.ops.len() as u64]);
        }
        if rec.is_empty() {
            // Everything ran on the host: no GPU work to submit or wait for.
            rec.mark_nothing_to_submit();
            return Ok(FlushInfo { value: 0, submitted: false, ..FlushInfo::default() });
        }
        if self.timing {
            // A timestamp at the start, after each command (at most one per op) and after the
            // clear.
            rec.spans =
                Some(GpuSpans::new(&self.device, rec.ops.len() as u32 + 2, self.detail, &mut self.spare_pools)?);
        }
        let pool = self.pool.as_mut().ok_or(crate::Error::DeviceLost)?;
        let cb = pool.begin(&self.device, completed)?;
        let started = Instant::now();
        let stats = {
            let _span = tracing::debug_span!("vkasync.encode", ops = rec.ops.len()).entered();
            rec.encode(cb)
        };
        pool.end(&self.device, cb)?;
        if let Some(t) = &self.trace {
            t.span(HostKind::Encode, started, &[rec.ops.len() as u64]);
        }
        let started = Instant::now();
        let submit_ns = self.trace.as_ref().map(|t| t.stamp());
        let submitted = {
            let _span = tracing::debug_span!("vkasync.submit").entered();
            self.device.submit(&[cb])
        };
        if let Some(t) = &self.trace {
            t.span(HostKind::Submit, started, &[]);
        }
        match submitted {
            Ok(value) => {
                pool.release(cb, Some(value));
                rec.mark_submitted(value);
                if let Some(ns) = submit_ns {
                    self.submit_ns.push_back(ns);
                }
                self.in_flight.push_back((value, rec));
                Ok(FlushInfo {
                    value,
                    barriers: stats.barriers,
                    command_buffers: 1,
                    dispatches: stats.dispatches,
                    submitted: true,
                })
            }
            Err(e) => {
                pool.release(cb, None);
                Err(e)
            }
        }
    }

    type Waiter = Device;
    fn waiter(&self) -> Device {
        self.device.clone()
    }

    type Retired = Vec<Recording>;
    fn take_retired(&mut self) -> Vec<Recording> {
        std::mem::take(&mut self.retired)
    }

    fn completed(&mut self) -> Result<u64> {
        let v = self.device.shared.completed_value()?;
        self.retire(v);
        Ok(v)
    }

    fn abandon(&mut self) {
        self.pending = Recording::new(&self.device);
        self.submit_ns.clear();
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
            self.pending.owners.push((mark as u32, end as u32, clock.clone()));
        }
    }

    fn shutdown(&mut self, bound: Duration) {
        self.pending = Recording::new(&self.device);
        let last = self.in_flight.back().map_or(0, |(v, _)| *v);
        match self.device.shared.wait(last, Some(bound)) {
            Ok(true) => {
                self.retire(last);
                self.retired.clear();
            }
            Err(_) => self.abandon(),
            Ok(false) => {
                log::error!(
                    "vkasync: executor dropped while the GPU still runs its work after {bound:?}; leaking that work's memory rather than freeing it under the GPU"
                );
                for (_, rec) in self.in_flight.drain(..) {
                    std::mem::forget(rec);
                }
                // The command pool's buffers may be pending too.
                std::mem::forget(self.pool.take());
            }
        }
    }
}

impl Drop for VulkanBackend {
    fn drop(&mut self) {
        if !self.in_flight.is_empty() {
            self.shutdown(Duration::from_secs(10));
        }
        if let Some(pool) = self.pool.take() {
            pool.destroy(self.device.raw());
        }
    }
}
