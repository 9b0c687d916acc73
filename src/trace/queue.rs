//! One queue's view of a sink, and the per-context clocks that GPU time is charged to.

#[allow(unused_imports)]
use super::*;

/// A per-context GPU clock: what its commands took on the GPU.
#[derive(Debug)]
pub(crate) struct TaskClock {
    pub id: u64,
    pub gpu_ns: AtomicU64,
}

impl TaskClock {
    pub fn new(id: u64) -> Arc<Self> {
        Arc::new(TaskClock { id, gpu_ns: AtomicU64::new(0) })
    }
}

/// One queue's view of a sink.
pub(crate) struct QueueTrace {
    pub(super) sink: Arc<Sink>,
    /// The queue's GPU track.
    pub(super) queue: u32,
    pub(super) cal: Calibration,
}

impl std::fmt::Debug for QueueTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueTrace").field("path", &self.sink.path).field("queue", &self.queue).finish()
    }
}

impl QueueTrace {
    pub(super) fn new(sink: Arc<Sink>, device: &Device, clock: TraceClock) -> Result<Self> {
        if !device.limits().timestamps {
            return Err(crate::Error::Unsupported {
                device: device.info().name.clone(),
                missing: "timestamps on the compute queue with hostQueryReset (for the GPU tracks of a trace)".into(),
            });
        }
        let cal = match clock {
            TraceClock::Auto => calibrated(&sink, device).map_or_else(|| measured(&sink, device), Ok)?,
            TraceClock::Measured => measured(&sink, device)?,
        };
        let queue = sink.next_queue.fetch_add(1, Ordering::Relaxed);
        let how = if cal.calibrated { "calibrated" } else { "measured" };
        let name = format!("queue {queue}: {} ({how} clock, ±{:.1} µs)", device.info().name, cal.error_ns / 1e3);
        sink.push(meta(GPU_PID, queue, name));
        Ok(QueueTrace { sink, queue, cal })
    }

    /// Now, in [`ticks`] since the sink's base (for [`QueueTrace::async_span`] and the `poll`
    /// spans).
    #[inline]
    pub fn stamp(&self) -> i64 {
        ticks().wrapping_sub(self.sink.base_ticks) as i64
    }

    /// A complete span on the calling thread, from `start` to now (for events that time
    /// themselves with an `Instant` anyway).
    pub fn span(&self, kind: HostKind, start: Instant, args: &[u64]) {
        let now = Instant::now();
        let ts = self.sink.ns(start);
        self.sink.push_host(kind, false, ts, (self.sink.ns(now) - ts).max(0) as u64, &self.queued(kind, args));
    }

    /// `args`, with this queue's number as the last argument where the kind has one (several
    /// queues can write one file, and their timeline values overlap).
    #[inline(always)]
    pub(super) fn queued(&self, kind: HostKind, args: &[u64]) -> [u64; 3] {
        let mut out = [0u64; 3];
        for (o, a) in out.iter_mut().zip(args) {
            *o = *a;
        }
        let keys = kind.info().3;
        if keys.last() == Some(&"queue") {
            out[keys.len() - 1] = self.queue as u64;
        }
        out
    }

    /// An instant event on the calling thread.
    #[inline]
    pub fn instant(&self, kind: HostKind, args: &[u64]) {
        self.sink.push_host(kind, true, self.stamp(), 0, args);
    }

    /// An async span (its own row of the host process) from `start` ([`QueueTrace::stamp`])
    /// to now.
    pub fn async_span(&self, kind: HostKind, start: i64, args: &[u64]) {
        self.async_span_to(kind, start, self.stamp(), args);
    }

    /// An async span from `start` to `end` (both [`QueueTrace::stamp`]s).
    #[inline]
    pub fn async_span_to(&self, kind: HostKind, start: i64, end: i64, args: &[u64]) {
        self.sink.push_host(kind, true, start, (end - start).max(0) as u64, &self.queued(kind, args));
    }

    /// A span of this queue's GPU track.
    pub(super) fn gpu_span(&self, name: Name, ts: i64, end: i64, args: Args) -> Event {
        Event { ph: b'X', pid: GPU_PID, tid: self.queue, name, cat: "gpu", ts, dur: end - ts, id: 0, args }
    }
}

impl Drop for QueueTrace {
    fn drop(&mut self) {
        if let Err(e) = self.sink.write() {
            log::error!("vkasync: could not write the trace to {}: {e}", self.sink.path.display());
        }
    }
}
