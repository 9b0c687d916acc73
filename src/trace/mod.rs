//! A picture of a run: a trace in the Chrome trace-event JSON format, which Perfetto
//! (<https://ui.perfetto.dev>) and `chrome://tracing` open, with host and GPU tracks.
//!
//! # Turning it on
//! Set `VKASYNC_TRACE=path.json` for any program (every executor and queue of the process then
//! writes into that one file), or call [`crate::ExecutorBuilder::trace`] /
//! [`crate::QueueBuilder::trace`] for one executor or queue. Executors and queues traced to the
//! same path (the queues of a [`crate::QueueSet`], say) share that file, each queue with its
//! own GPU track. The file is (re)written whenever a traced executor or queue is dropped, with
//! everything traced so far. Off, tracing costs one
//! branch per traced point. On, each host thread stores its events in its own log, without a
//! lock, in chunks of 1 MiB (about 76 bytes per job of the mix workload). On an H200's host a
//! trace costs 1.07× the untraced executor's time on that workload at T = 1,000 (median over 20
//! processes, 2026-12-01; 1.12× before the changes of `695b87f`; `BENCHMARKS.md`).
//!
//! ```no_run
//! use vkasync::{Device, Executor};
//! let device = Device::new()?;
//! let exec = Executor::builder(&device).trace("run.json").build()?;
//! // ... spawn and run tasks ...
//! drop(exec); // writes run.json: open it in ui.perfetto.dev
//! # Ok::<(), vkasync::Error>(())
//! ```
//!
//! # What a trace holds
//! - **Host threads** (process "vkasync host", one track per thread, named after the thread):
//!   every poll of a native task (`poll`, with the task's id; the executor's consecutive polls
//!   share a clock read, so a poll that follows another starts where that one ended, and its
//!   span includes the loop's few tens of nanoseconds between the two), each flush (`flush`, with
//!   `encode_batches`, `encode` and `submit` inside it), each host wait (`wait`: the spin and
//!   the block), each spin on the counter (`spin`: an executor's before it parks, a lone job's
//!   for its own submission), each wake of the tasks whose work completed (`wake`, with how
//!   many it woke: the driver wakes a flush's tasks one after another), and each sleep of a
//!   driver thread until it is notified (`sleep`, category `driver`: from its decision that
//!   there is nothing to do to its waking, so that a trace shows how late it woke). A task's
//!   spawn is an instant event on the spawning thread.
//! - **Awaits and submissions** (async spans of the host process, one row each): `await` from
//!   the first time a wait finds its work unfinished to its completion (with the context's
//!   id, and the native task's; in a native task it ends where the poll that saw the work
//!   done started); `recording` from an epoch's first command to its flush;
//!   `in flight` from just before `vkQueueSubmit` to when the host saw the timeline value.
//!   Flushes, waits, epochs and submissions carry their queue's number (`queue`, the GPU
//!   track's), since every queue has its own timeline values.
//! - **The GPU** (process "vkasync GPU", one track per queue): each submission as a span, and
//!   inside it the commands the GPU ran: every dispatch (named after its kernel), every copy
//!   (copies that the flush merged into one `vkCmdCopyBuffer` are one command) and the clear
//!   of new buffers.
//!
//! # GPU spans, and what they cost
//! The GPU writes a timestamp at the start of each submission (top of pipe) and timestamps at
//! bottom of pipe, written when everything recorded before them has completed. Where they go
//! is the [`TraceDetail`]:
//! - [`TraceDetail::Phases`] (the default): one after each phase. The commands of a phase
//!   (see [`crate::executor`]) have no barrier between them and run concurrently; the
//!   barrier after a phase waits for all of them anyway, so these timestamps add no wait.
//!   A phase with one command is that command's span; a phase with more is a `phase` span,
//!   with one span per kernel (or copy) inside it, named `mix ×350` and the like.
//! - [`TraceDetail::Commands`]: one after every command. A command's span then runs from the
//!   completion of the command before it to its own, so every dispatch and copy has a span of
//!   its own, and the spans tile the submission. The price: each timestamp waits for the
//!   commands before it, so the commands of a phase no longer overlap on the GPU.
//!
//! `BENCHMARKS.md` gives both costs on the mix workload.
//!
//! # GPU time on the host's clock
//! Ticks become host time through a calibration made when the queue is created: with
//! `VK_EXT_calibrated_timestamps` (device and `CLOCK_MONOTONIC` domains, Linux), the driver's
//! paired reading and its maximum deviation; otherwise (or with [`TraceClock::Measured`]) a
//! measured offset, from a timestamp written by a submission that the host brackets between
//! two clock reads (the best of several rounds; the error is half the bracket). Every GPU span
//! carries the calibration's error bound (`calibration_error_ns`) in its arguments.
//!
//! # Per-task GPU time
//! The same timestamps give each context its GPU time ([`crate::Ctx::gpu_time`]): each span
//! between two timestamps is shared by the commands in it, by size (a dispatch's invocations,
//! a copy's 4-byte words; a merged copy's share is split by bytes among the contexts whose
//! copies it carries), and each context adds up the shares of the commands it recorded. With
//! [`TraceDetail::Commands`] each command is alone in its span and the time is measured, not
//! shared out. The times of all contexts (and of the clears and coalesced work, which belong to
//! none) add up to the submissions' GPU time. On with [`crate::ExecutorBuilder::gpu_timing`]
//! (or [`crate::QueueBuilder::gpu_timing`]); a trace alone does not turn it on, because
//! charging every command to its context costs host time on every job (`BENCHMARKS.md`).
//! With both, the GPU spans of single commands also name their context (`ctx`).

use crate::error::Result;
use crate::vk::device::Device;
use crate::vk::kernel::RawKernel;
use crate::vk::timestamps::RawQueryPool;
use ash::vk;
use std::cell::{Cell, RefCell};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// How a trace maps GPU timestamps to host time (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TraceClock {
    /// `VK_EXT_calibrated_timestamps` where the device offers it (Linux), else a measured offset.
    #[default]
    Auto,
    /// Always a measured offset.
    Measured,
}

/// Where the GPU writes timestamps for GPU spans and per-task GPU time (see the
/// [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TraceDetail {
    /// After each phase: no added wait on the GPU; commands of one phase share its span.
    #[default]
    Phases,
    /// After every command: a span per dispatch and copy, at the price of serialising the
    /// commands of each phase on the GPU.
    Commands,
}

/// What a builder asks for.
#[derive(Debug, Clone, Default)]
pub(crate) struct TraceOptions {
    pub path: Option<PathBuf>,
    pub gpu_timing: bool,
    pub clock: TraceClock,
    pub detail: Option<TraceDetail>,
}

impl TraceOptions {
    /// The queue's trace (from the builder, else from `VKASYNC_TRACE`), if any.
    pub fn open(&self, device: &Device) -> Result<Option<Arc<QueueTrace>>> {
        let sink = match &self.path {
            Some(p) => Some(Sink::for_path(p.clone())),
            None => env_sink(),
        };
        let Some(sink) = sink else { return Ok(None) };
        QueueTrace::new(sink, device, self.clock).map(|t| Some(Arc::new(t)))
    }

    /// Whether per-task GPU time is measured without a trace.
    pub fn timing(&self) -> bool {
        self.gpu_timing
    }

    /// The builder's detail, else `VKASYNC_TRACE_DETAIL` (`commands` or `phases`).
    pub fn detail(&self) -> TraceDetail {
        self.detail.unwrap_or_else(|| match std::env::var("VKASYNC_TRACE_DETAIL").as_deref() {
            Ok("commands") => TraceDetail::Commands,
            _ => TraceDetail::Phases,
        })
    }
}

/// The file of `VKASYNC_TRACE`, shared by every queue of the process.
fn env_sink() -> Option<Arc<Sink>> {
    static SINK: OnceLock<Option<Arc<Sink>>> = OnceLock::new();
    SINK.get_or_init(|| {
        let path = std::env::var_os("VKASYNC_TRACE").filter(|p| !p.is_empty())?;
        Some(Sink::for_path(PathBuf::from(path)))
    })
    .clone()
}

mod calibration;
mod events;
mod gpu;
mod json;
mod polls;
mod queue;
mod sink;
use calibration::*;
pub(crate) use events::HostKind;
use events::*;
pub(crate) use gpu::{copy_weight, dispatch_weight, Command, GpuSpans, SpanSource, SparePools};
use json::*;
pub(crate) use polls::{break_polls, PollScope, RunScope};
pub(crate) use queue::{QueueTrace, TaskClock};
use sink::*;
pub(crate) use sink::{current_poll, next_id};
#[allow(unused_imports)]
use {gpu::*, polls::*, queue::*};

#[cfg(test)]
mod tests {
    use super::*;

    /// The events `put` stores, in the order stored.
    fn sample(i: u64) -> (HostKind, bool, i64, u64, [u64; 3]) {
        let kinds = [HostKind::Poll, HostKind::Spawn, HostKind::Await, HostKind::Flush, HostKind::Recording];
        let kind = kinds[(i % 5) as usize];
        // Every fourth event has a value past 32 bits; starts go negative too.
        let big = if i % 4 == 0 { 1 << 40 } else { 0 };
        let ts = (i as i64 - 50) * 1_000_003;
        let (_, _, ph, keys) = kind.info();
        let dur = if ph == b'i' { 0 } else { i * 7 + big };
        let mut args = [0u64; 3];
        for (k, a) in args.iter_mut().enumerate().take(keys.len()) {
            *a = i + k as u64 + big;
        }
        (kind, i % 3 == 0, ts, dur, args)
    }

    fn put(log: &ThreadLog, i: u64) {
        let (kind, ticked, ts, dur, args) = sample(i);
        log.put(kind, ticked, ts, dur, &args[..kind.info().3.len()]);
    }

    #[test]
    fn thread_log_round_trip_across_chunks() {
        let log = ThreadLog::new(1, "t".into());
        // Enough events for several chunks (at most 10 units each).
        let n = (3 * ThreadLog::CHUNK / 4) as u64;
        for i in 0..n {
            put(&log, i);
        }
        let chunks = log.snapshot();
        assert!(chunks.len() >= 2, "{} chunks", chunks.len());
        let got: Vec<_> = host_events(&chunks).collect();
        assert_eq!(got.len() as u64, n);
        for (i, e) in got.into_iter().enumerate() {
            assert_eq!(e, sample(i as u64), "event {i}");
        }
    }

    #[test]
    fn thread_log_read_while_written() {
        let log = Arc::new(ThreadLog::new(1, "t".into()));
        let n = ThreadLog::CHUNK as u64;
        let writer = {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..n {
                    put(&log, i);
                }
            })
        };
        // Every snapshot is a prefix of what the writer stores.
        let mut seen = 0;
        while seen < n {
            let got: Vec<_> = host_events(&log.snapshot()).collect();
            assert!(got.len() as u64 >= seen);
            for (i, e) in got.iter().enumerate() {
                assert_eq!(*e, sample(i as u64), "event {i}");
            }
            seen = got.len() as u64;
            if writer.is_finished() && seen < n {
                seen = host_events(&log.snapshot()).count() as u64;
                assert_eq!(seen, n);
            }
        }
        writer.join().unwrap();
    }
}
