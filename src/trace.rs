//! A picture of a run: a trace in the Chrome trace-event JSON format, which Perfetto
//! (<https://ui.perfetto.dev>) and `chrome://tracing` open, with host and GPU tracks.
//!
//! # Turning it on
//! Set `VKASYNC_TRACE=path.json` for any program (every executor and queue of the process then
//! writes into that one file), or call [`crate::ExecutorBuilder::trace`] /
//! [`crate::QueueBuilder::trace`] for one executor or queue. The file is (re)written whenever a
//! traced executor or queue is dropped, with everything traced so far. Off, tracing costs one
//! branch per traced point.
//!
//! # What a trace holds
//! - **Host threads** (process "vkasync host", one track per thread, named after the thread):
//!   every poll of a native task (`poll`, with the task's id), each flush (`flush`, with
//!   `encode_batches`, `encode` and `submit` inside it), each host wait (`wait`: the spin and
//!   the block) and each spin of an executor before it parks (`spin`). A task's spawn is an
//!   instant event on the spawning thread.
//! - **Awaits and submissions** (async spans of the host process, one row each): `await` from
//!   the first time a wait finds its work unfinished to its completion (with the context's
//!   id, and the native task's); `recording` from an epoch's first command to its flush;
//!   `in flight` from just before `vkQueueSubmit` to when the host saw the timeline value.
//! - **The GPU** (process "vkasync GPU", one track per queue): each submission as a span, and
//!   inside it one span per command the GPU ran: every dispatch (named after its kernel), every
//!   copy (copies the flush merged into one `vkCmdCopyBuffer` are one span) and the clear of
//!   new buffers.
//!
//! # GPU time on the host's clock
//! The GPU writes a timestamp at the start of each submission (top of pipe) and after each
//! command (bottom of pipe: when everything before it has completed). A command's span runs
//! from the completion of the command before it to its own: the spans tile the submission, so
//! commands that overlap on the GPU share its time in submission order, and the spans of a
//! submission add up to its GPU time.
//!
//! Ticks become host time through a calibration made when the queue is created: with
//! `VK_EXT_calibrated_timestamps` (device and `CLOCK_MONOTONIC` domains, Linux), the driver's
//! paired reading and its maximum deviation; otherwise (or with [`TraceClock::Measured`]) a
//! measured offset, from a timestamp written by a submission that the host brackets between
//! two clock reads (the best of several rounds; the error is half the bracket). Every GPU span
//! carries the calibration's error bound in its arguments.
//!
//! # Per-task GPU time
//! The same timestamps give each context its GPU time ([`crate::Ctx::gpu_time`]): the spans of
//! the commands it recorded (a merged copy is shared by bytes). Coalesced work
//! ([`crate::batch`]) belongs to no context. It is on whenever tracing is, or on its own with
//! [`crate::ExecutorBuilder::gpu_timing`].

use crate::device::Device;
use crate::error::{map_oom, Result};
use crate::timestamps::RawQueryPool;
use ash::vk;
use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
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

/// What a builder asks for.
#[derive(Debug, Clone, Default)]
pub(crate) struct TraceOptions {
    pub path: Option<PathBuf>,
    pub gpu_timing: bool,
    pub clock: TraceClock,
}

impl TraceOptions {
    /// The queue's trace (from the builder, else from `VKASYNC_TRACE`), if any.
    pub fn open(&self, device: &Device) -> Result<Option<Arc<QueueTrace>>> {
        let sink = match &self.path {
            Some(p) => Some(Sink::new(p.clone())),
            None => env_sink(),
        };
        let Some(sink) = sink else { return Ok(None) };
        QueueTrace::new(sink, device, self.clock).map(|t| Some(Arc::new(t)))
    }

    /// Whether per-task GPU time is measured without a trace.
    pub fn timing(&self) -> bool {
        self.gpu_timing
    }
}

/// The file of `VKASYNC_TRACE`, shared by every queue of the process.
fn env_sink() -> Option<Arc<Sink>> {
    static SINK: OnceLock<Option<Arc<Sink>>> = OnceLock::new();
    SINK.get_or_init(|| {
        let path = std::env::var_os("VKASYNC_TRACE").filter(|p| !p.is_empty())?;
        Some(Sink::new(PathBuf::from(path)))
    })
    .clone()
}

/// Host process and GPU process ids in the trace.
const HOST_PID: u32 = 1;
const GPU_PID: u32 = 2;

/// A value of an event's `args`.
#[derive(Debug, Clone)]
pub(crate) enum ArgVal {
    U(u64),
    F(f64),
    S(Cow<'static, str>),
}

type Args = smallvec::SmallVec<[(&'static str, ArgVal); 3]>;

struct Event {
    ph: u8,
    name: Cow<'static, str>,
    cat: &'static str,
    /// Nanoseconds since the sink's base.
    ts: i64,
    dur: i64,
    pid: u32,
    tid: u32,
    id: u64,
    args: Args,
}

/// Where events gather until written.
pub(crate) struct Sink {
    path: PathBuf,
    base: Instant,
    /// `CLOCK_MONOTONIC` at `base`, in nanoseconds (Linux), for calibrated timestamps.
    base_mono: Option<i128>,
    state: Mutex<SinkState>,
    next_id: AtomicU64,
    next_queue: AtomicU32,
}

#[derive(Default)]
struct SinkState {
    events: Vec<Event>,
    /// Host threads already named in `events`.
    named: HashSet<u32>,
}

/// A small number per host thread, its track id.
fn thread_tid() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    thread_local!(static TID: Cell<u32> = const { Cell::new(0) });
    TID.with(|t| {
        if t.get() == 0 {
            t.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    })
}

thread_local!(static CURRENT_TASK: Cell<u64> = const { Cell::new(0) });

/// The native task being polled on this thread (0: none).
pub(crate) fn current_task() -> u64 {
    CURRENT_TASK.with(|c| c.get())
}

/// Ids for tasks, contexts and async spans (process-wide, so that they never collide).
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Sink {
    fn new(path: PathBuf) -> Arc<Self> {
        let base = Instant::now();
        let base_mono = monotonic_ns();
        // The pair is read back to back; the bracket error is tens of nanoseconds.
        Arc::new(Sink {
            path,
            base,
            base_mono,
            state: Mutex::default(),
            next_id: AtomicU64::new(1),
            next_queue: AtomicU32::new(1),
        })
    }

    fn ns(&self, t: Instant) -> i64 {
        match t.checked_duration_since(self.base) {
            Some(d) => d.as_nanos() as i64,
            None => -(self.base.duration_since(t).as_nanos() as i64),
        }
    }

    fn push(&self, e: Event) {
        let mut st = crate::executor::core::lock(&self.state);
        if e.pid == HOST_PID && e.ph != b'b' && e.ph != b'e' && st.named.insert(e.tid) {
            let name = std::thread::current().name().map_or_else(|| format!("thread {}", e.tid), str::to_string);
            st.events.push(meta("thread_name", HOST_PID, e.tid, name));
        }
        st.events.push(e);
    }

    fn push_meta(&self, e: Event) {
        crate::executor::core::lock(&self.state).events.push(e);
    }

    /// Writes every event so far to the file (replacing it).
    pub fn write(&self) -> std::io::Result<()> {
        let st = crate::executor::core::lock(&self.state);
        let mut out = std::io::BufWriter::new(std::fs::File::create(&self.path)?);
        out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
        let mut first = true;
        for m in [
            meta("process_name", HOST_PID, 0, "vkasync host".into()),
            meta("process_name", GPU_PID, 0, "vkasync GPU".into()),
        ]
        .iter()
        .chain(&st.events)
        {
            if !first {
                out.write_all(b",\n")?;
            }
            first = false;
            write_event(&mut out, m)?;
        }
        out.write_all(b"\n]}\n")?;
        out.flush()
    }
}

fn meta(what: &'static str, pid: u32, tid: u32, name: String) -> Event {
    Event {
        ph: b'M',
        name: Cow::Borrowed(what),
        cat: "",
        ts: 0,
        dur: 0,
        pid,
        tid,
        id: 0,
        args: smallvec::smallvec![("name", ArgVal::S(name.into()))],
    }
}

fn write_str(out: &mut impl Write, s: &str) -> std::io::Result<()> {
    out.write_all(b"\"")?;
    for c in s.chars() {
        match c {
            '"' => out.write_all(b"\\\"")?,
            '\\' => out.write_all(b"\\\\")?,
            c if (c as u32) < 0x20 => write!(out, "\\u{:04x}", c as u32)?,
            c => write!(out, "{c}")?,
        }
    }
    out.write_all(b"\"")
}

fn micros(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

fn write_event(out: &mut impl Write, e: &Event) -> std::io::Result<()> {
    out.write_all(b"{\"name\":")?;
    write_str(out, &e.name)?;
    write!(out, ",\"ph\":\"{}\",\"pid\":{},\"tid\":{}", e.ph as char, e.pid, e.tid)?;
    if e.ph != b'M' {
        write!(out, ",\"ts\":{}", micros(e.ts))?;
        out.write_all(b",\"cat\":")?;
        write_str(out, e.cat)?;
    }
    if e.ph == b'X' {
        write!(out, ",\"dur\":{}", micros(e.dur.max(0)))?;
    }
    if e.ph == b'b' || e.ph == b'e' {
        write!(out, ",\"id\":\"0x{:x}\"", e.id)?;
    }
    if e.ph == b'i' {
        out.write_all(b",\"s\":\"t\"")?;
    }
    if !e.args.is_empty() {
        out.write_all(b",\"args\":{")?;
        for (i, (k, v)) in e.args.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write_str(out, k)?;
            out.write_all(b":")?;
            match v {
                ArgVal::U(u) => write!(out, "{u}")?,
                ArgVal::F(f) if f.is_finite() => write!(out, "{f}")?,
                ArgVal::F(_) => out.write_all(b"null")?,
                ArgVal::S(s) => write_str(out, s)?,
            }
        }
        out.write_all(b"}")?;
    }
    out.write_all(b"}")
}

/// `CLOCK_MONOTONIC` now, in nanoseconds (the clock `Instant` reads on Linux).
#[cfg(target_os = "linux")]
fn monotonic_ns() -> Option<i128> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (r == 0).then(|| ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128)
}

#[cfg(not(target_os = "linux"))]
fn monotonic_ns() -> Option<i128> {
    None
}

/// How GPU ticks map to the sink's host time: `host_ns = ticks * period - offset`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Calibration {
    period_ns: f64,
    offset_ns: f64,
    /// Bound on the mapping's error, in nanoseconds.
    pub error_ns: f64,
    pub calibrated: bool,
}

impl Calibration {
    fn host_ns(&self, ticks: u64) -> i64 {
        (ticks as f64 * self.period_ns - self.offset_ns).round() as i64
    }
}

/// A per-context GPU clock: what its commands took on the GPU.
#[derive(Debug)]
pub(crate) struct TaskClock {
    pub id: u64,
    pub gpu_ns: AtomicU64,
}

impl TaskClock {
    pub fn new() -> Arc<Self> {
        Arc::new(TaskClock { id: next_id(), gpu_ns: AtomicU64::new(0) })
    }
}

/// One queue's view of a sink.
pub(crate) struct QueueTrace {
    pub sink: Arc<Sink>,
    /// The queue's GPU track (and its submissions' async rows).
    pub queue: u32,
    pub cal: Calibration,
}

impl std::fmt::Debug for QueueTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueTrace").field("path", &self.sink.path).field("queue", &self.queue).finish()
    }
}

impl QueueTrace {
    fn new(sink: Arc<Sink>, device: &Device, clock: TraceClock) -> Result<Self> {
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
        sink.push_meta(meta(
            "thread_name",
            GPU_PID,
            queue,
            format!(
                "queue {queue}: {} ({} clock, ±{:.1} µs)",
                device.info().name,
                if cal.calibrated { "calibrated" } else { "measured" },
                cal.error_ns / 1e3
            ),
        ));
        Ok(QueueTrace { sink, queue, cal })
    }

    pub fn now(&self) -> i64 {
        self.sink.ns(Instant::now())
    }

    /// A complete span on the calling thread.
    pub fn span(&self, name: impl Into<Cow<'static, str>>, cat: &'static str, start: Instant, args: Args) {
        let ts = self.sink.ns(start);
        let end = self.now();
        self.sink.push(Event {
            ph: b'X',
            name: name.into(),
            cat,
            ts,
            dur: end - ts,
            pid: HOST_PID,
            tid: thread_tid(),
            id: 0,
            args,
        });
    }

    /// An instant event on the calling thread.
    pub fn instant(&self, name: &'static str, args: Args) {
        let ts = self.now();
        self.sink.push(Event {
            ph: b'i',
            name: name.into(),
            cat: "task",
            ts,
            dur: 0,
            pid: HOST_PID,
            tid: thread_tid(),
            id: 0,
            args,
        });
    }

    /// An async span (its own row of the host process) from `start` to now.
    pub fn async_span(&self, name: &'static str, cat: &'static str, start: i64, args: Args) {
        let id = self.sink.next_id.fetch_add(1, Ordering::Relaxed);
        let end = self.now();
        let tid = thread_tid();
        self.sink.push(Event { ph: b'b', name: name.into(), cat, ts: start, dur: 0, pid: HOST_PID, tid, id, args });
        self.sink.push(Event {
            ph: b'e',
            name: name.into(),
            cat,
            ts: end,
            dur: 0,
            pid: HOST_PID,
            tid,
            id,
            args: Args::new(),
        });
    }

    /// The GPU spans of one completed submission. `ticks[0]` is its start; `ticks[i + 1]` the
    /// completion of `commands[i]`.
    pub fn gpu(&self, value: u64, ticks: &[u64], commands: &[GpuCommand]) {
        let (Some(&first), Some(&last)) = (ticks.first(), ticks.last()) else { return };
        let err = ArgVal::F((self.cal.error_ns / 1e3 * 1000.0).round() / 1000.0);
        let (t0, t1) = (self.cal.host_ns(first), self.cal.host_ns(last));
        self.sink.push(Event {
            ph: b'X',
            name: Cow::Owned(format!("submission {value}")),
            cat: "gpu",
            ts: t0,
            dur: t1 - t0,
            pid: GPU_PID,
            tid: self.queue,
            id: 0,
            args: smallvec::smallvec![
                ("value", ArgVal::U(value)),
                ("commands", ArgVal::U(commands.len() as u64)),
                ("calibration_error_us", err.clone())
            ],
        });
        for (c, w) in commands.iter().zip(ticks.windows(2)) {
            let (a, b) = (self.cal.host_ns(w[0]), self.cal.host_ns(w[1].max(w[0])));
            let mut args: Args =
                smallvec::smallvec![("value", ArgVal::U(value)), ("calibration_error_us", err.clone())];
            if let Some(t) = c.owners.first() {
                args.push(("ctx", ArgVal::U(t.0.id)));
            }
            self.sink.push(Event {
                ph: b'X',
                name: c.name.clone(),
                cat: "gpu",
                ts: a,
                dur: b - a,
                pid: GPU_PID,
                tid: self.queue,
                id: 0,
                args,
            });
        }
    }
}

impl Drop for QueueTrace {
    fn drop(&mut self) {
        if let Err(e) = self.sink.write() {
            log::error!("vkasync: could not write the trace to {}: {e}", self.sink.path.display());
        }
    }
}

/// One command of a submission, for its GPU span: its name and the contexts it is charged
/// to, with their weights (bytes for copies, 1 for a dispatch).
pub(crate) struct GpuCommand {
    pub name: Cow<'static, str>,
    pub owners: smallvec::SmallVec<[(Arc<TaskClock>, u64); 1]>,
}

/// The GPU timing of one recording: a query pool with a timestamp at the start and one after
/// each command.
pub(crate) struct GpuSpans {
    pub pool: RawQueryPool,
    pub used: u32,
    pub commands: Vec<GpuCommand>,
}

impl GpuSpans {
    /// A pool for `capacity` timestamps, reset from the host.
    pub fn new(device: &Device, capacity: u32) -> Result<Self> {
        let info = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(capacity.max(1));
        // SAFETY: the device is live and supports timestamp queries (checked when the trace
        // or the timing was turned on).
        let pool = unsafe { device.raw().create_query_pool(&info, None) }.map_err(map_oom("vkCreateQueryPool"))?;
        // SAFETY: the pool is new and unused; hostQueryReset is enabled (as above).
        unsafe { device.raw().reset_query_pool(pool, 0, capacity.max(1)) };
        Ok(GpuSpans {
            pool: RawQueryPool { device: device.clone(), pool, count: capacity.max(1) },
            used: 0,
            commands: Vec::new(),
        })
    }

    /// Records the next timestamp into `cmd` at `stage`.
    pub fn stamp(&mut self, cmd: vk::CommandBuffer, stage: vk::PipelineStageFlags) {
        if self.used >= self.pool.count {
            return;
        }
        // SAFETY: `cmd` is recording; the pool is live (held by the recording until its
        // submission completes) and was reset; the index is inside it.
        unsafe { self.pool.device.raw().cmd_write_timestamp(cmd, stage, self.pool.pool, self.used) };
        self.used += 1;
    }

    /// A command was recorded: stamp its completion.
    pub fn command(&mut self, cmd: vk::CommandBuffer, c: GpuCommand) {
        if self.used < self.pool.count {
            self.stamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE);
            self.commands.push(c);
        }
    }

    /// Once the submission completed: the ticks (`None` if not all are available).
    pub fn ticks(&self) -> Option<Vec<u64>> {
        if self.used == 0 {
            return None;
        }
        let mut out = vec![[0u64; 2]; self.used as usize];
        // SAFETY: the pool is live and `0..used` is inside it; each entry has room for the value
        // and its availability.
        let r = unsafe {
            self.pool.device.raw().get_query_pool_results(
                self.pool.pool,
                0,
                &mut out,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
            )
        };
        if !matches!(r, Ok(()) | Err(vk::Result::NOT_READY)) || out.iter().any(|v| v[1] == 0) {
            return None;
        }
        Some(out.into_iter().map(|v| v[0]).collect())
    }

    /// Charges each command's span to its contexts and, with a trace, emits the GPU spans.
    pub fn finish(&self, value: u64, trace: Option<&QueueTrace>) {
        let Some(ticks) = self.ticks() else { return };
        let period = self.pool.device.limits().timestamp_period_ns as f64;
        for (c, w) in self.commands.iter().zip(ticks.windows(2)) {
            let ns = (w[1].saturating_sub(w[0]) as f64 * period) as u64;
            let total: u64 = c.owners.iter().map(|o| o.1).sum();
            if total == 0 {
                continue;
            }
            for (clock, weight) in &c.owners {
                clock.gpu_ns.fetch_add((ns as u128 * *weight as u128 / total as u128) as u64, Ordering::Relaxed);
            }
        }
        if let Some(t) = trace {
            t.gpu(value, &ticks, &self.commands);
        }
    }
}

/// The calibration from `VK_EXT_calibrated_timestamps`, where offered with `CLOCK_MONOTONIC`.
fn calibrated(sink: &Sink, device: &Device) -> Option<Calibration> {
    let ext = device.shared.calibrated.as_ref()?;
    let base = sink.base_mono?;
    let infos = [
        vk::CalibratedTimestampInfoEXT::default().time_domain(vk::TimeDomainEXT::DEVICE),
        vk::CalibratedTimestampInfoEXT::default().time_domain(vk::TimeDomainEXT::CLOCK_MONOTONIC),
    ];
    let period = device.limits().timestamp_period_ns as f64;
    let mut best: Option<Calibration> = None;
    for _ in 0..8 {
        // SAFETY: the extension is enabled on this device and both domains were reported as
        // calibrateable when it was (see `Device`).
        let Ok((ts, dev)) = (unsafe { ext.get_calibrated_timestamps(&infos) }) else { return None };
        let host = (ts[1] as i128 - base) as f64;
        // Half a microsecond covers the pairing of `Instant` with CLOCK_MONOTONIC at the base.
        let c = Calibration {
            period_ns: period,
            offset_ns: ts[0] as f64 * period - host,
            error_ns: dev as f64 + 500.0,
            calibrated: true,
        };
        if best.is_none_or(|b| c.error_ns < b.error_ns) {
            best = Some(c);
        }
    }
    best
}

/// A measured offset: a submission that writes one timestamp, bracketed by two host clock
/// reads; the best of several rounds.
fn measured(sink: &Sink, device: &Device) -> Result<Calibration> {
    let period = device.limits().timestamp_period_ns as f64;
    let ts = crate::Timestamps::new(device, 1)?;
    let mut best: Option<Calibration> = None;
    for _ in 0..8 {
        ts.reset();
        let mut cmds = crate::CommandList::new(device);
        crate::Recorder::write_timestamp(&mut cmds, &ts, 0)?;
        let t0 = sink.ns(Instant::now());
        cmds.submit_and_wait()?;
        let t1 = sink.ns(Instant::now());
        let tick = ts.ticks()?[0];
        let mid = (t0 + t1) as f64 / 2.0;
        let c = Calibration {
            period_ns: period,
            offset_ns: tick as f64 * period - mid,
            error_ns: (t1 - t0) as f64 / 2.0,
            calibrated: false,
        };
        if best.is_none_or(|b| c.error_ns < b.error_ns) {
            best = Some(c);
        }
    }
    Ok(best.expect("eight rounds"))
}

/// Runs a native task's polls under its id (for the `poll` spans and the `await` spans'
/// task ids).
pub(crate) struct TaskScope {
    prev: u64,
}

impl TaskScope {
    pub fn enter(id: u64) -> Self {
        TaskScope { prev: CURRENT_TASK.with(|c| c.replace(id)) }
    }
}

impl Drop for TaskScope {
    fn drop(&mut self) {
        CURRENT_TASK.with(|c| c.set(self.prev));
    }
}
