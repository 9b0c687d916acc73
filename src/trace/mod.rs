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
//!   the block) and each spin of an executor before it parks (`spin`). A task's spawn is an
//!   instant event on the spawning thread.
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

/// Host process and GPU process ids in the trace.
const HOST_PID: u8 = 1;
const GPU_PID: u8 = 2;

/// An event's numeric arguments.
pub(crate) type Args = smallvec::SmallVec<[(&'static str, u64); 3]>;

/// An event's name, formatted only when the file is written.
enum Name {
    Static(&'static str),
    Owned(Box<str>),
    /// A kernel's name, with ` ×N` where the span covers N > 1 dispatches of it.
    Kernel(Arc<RawKernel>, u32),
    /// `copy N B (R regions)`, with ` ×N` as above.
    Copy(u64, u32, u32),
    /// `submission V`.
    Submission(u64),
    /// `name ×N`.
    Many(&'static str, u32),
}

impl Name {
    fn write(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = match self {
            Name::Static(s) => write!(out, "{s}"),
            Name::Owned(s) => write!(out, "{s}"),
            Name::Kernel(k, n) => write!(out, "{}", k.name).and_then(|_| times(out, *n)),
            Name::Copy(b, 1, n) => write!(out, "copy {b} B").and_then(|_| times(out, *n)),
            Name::Copy(b, r, n) => write!(out, "copy {b} B ({r} regions)").and_then(|_| times(out, *n)),
            Name::Submission(v) => write!(out, "submission {v}"),
            Name::Many(s, n) => write!(out, "{s}").and_then(|_| times(out, *n)),
        };
        /// ` ×N` where N > 1.
        fn times(out: &mut String, n: u32) -> std::fmt::Result {
            match n {
                0 | 1 => Ok(()),
                n => write!(out, " ×{n}"),
            }
        }
    }
}

struct Event {
    ph: u8,
    pid: u8,
    tid: u32,
    name: Name,
    cat: &'static str,
    /// Nanoseconds since the sink's base.
    ts: i64,
    dur: i64,
    id: u64,
    args: Args,
}

/// What a host event is: its name, category, phase and argument names. Host events are
/// stored as 2 to 6 words of 8 bytes each (see [`ThreadLog`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum HostKind {
    /// A native task's poll: task, ready.
    Poll,
    /// A task's spawn (instant): task.
    Spawn,
    /// A flush: value, waiters, queue.
    Flush,
    /// Coalesced work encoded at flush start.
    EncodeBatches,
    /// The flush's commands encoded: ops.
    Encode,
    /// `vkQueueSubmit`.
    Submit,
    /// A host wait (spin, then block): value, queue.
    Wait,
    /// An executor's spin before it parks: value, reached, queue.
    Spin,
    /// An await that had to wait (async): ctx, ok, task (0: none).
    Await,
    /// An epoch's recording (async): ops, queue.
    Recording,
    /// A submission in flight (async): value, queue.
    InFlight,
}

impl HostKind {
    const ALL: [HostKind; 11] = [
        HostKind::Poll,
        HostKind::Spawn,
        HostKind::Flush,
        HostKind::EncodeBatches,
        HostKind::Encode,
        HostKind::Submit,
        HostKind::Wait,
        HostKind::Spin,
        HostKind::Await,
        HostKind::Recording,
        HostKind::InFlight,
    ];

    /// Name, category, phase (`X` span, `i` instant, `b` async span) and argument names.
    #[inline(always)]
    fn info(self) -> (&'static str, &'static str, u8, &'static [&'static str]) {
        match self {
            HostKind::Poll => ("poll", "task", b'X', &["task", "ready"]),
            HostKind::Spawn => ("spawn", "task", b'i', &["task"]),
            HostKind::Flush => ("flush", "flush", b'X', &["value", "waiters", "queue"]),
            HostKind::EncodeBatches => ("encode_batches", "flush", b'X', &[]),
            HostKind::Encode => ("encode", "flush", b'X', &["ops"]),
            HostKind::Submit => ("submit", "flush", b'X', &[]),
            HostKind::Wait => ("wait", "wait", b'X', &["value", "queue"]),
            HostKind::Spin => ("spin", "wait", b'X', &["value", "reached", "queue"]),
            HostKind::Await => ("await", "await", b'b', &["ctx", "ok", "task"]),
            HostKind::Recording => ("recording", "epoch", b'b', &["ops", "queue"]),
            HostKind::InFlight => ("in flight", "submission", b'b', &["value", "queue"]),
        }
    }
}

/// One decoded host event: kind, whether its times are in ticks, start, duration and
/// arguments.
type HostEvent = (HostKind, bool, i64, u64, [u64; 3]);

/// The clock of frequent host events: the time-stamp counter on x86_64 where it is invariant
/// (a few nanoseconds to read, against tens for `Instant::now`), else nanoseconds since the
/// first call. A sink turns ticks into nanoseconds by the rate it measures between its creation
/// and its write.
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if invariant_tsc() {
        // SAFETY: RDTSC is available on every x86_64 processor and has no memory effects.
        #[allow(unused_unsafe)]
        return unsafe { core::arch::x86_64::_rdtsc() };
    }
    ticks_from_instant()
}

/// [`ticks`] without an invariant time-stamp counter.
#[inline(never)]
fn ticks_from_instant() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Whether the time-stamp counter runs at a constant rate in every power state (CPUID
/// 0x8000_0007, EDX bit 8): 0 not known yet, 1 yes, 2 no.
#[cfg(target_arch = "x86_64")]
static INVARIANT_TSC: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn invariant_tsc() -> bool {
    match INVARIANT_TSC.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => invariant_tsc_init(),
    }
}

#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
fn invariant_tsc_init() -> bool {
    // SAFETY: CPUID is available on every x86_64 processor; the leaf is checked against the
    // highest extended leaf first.
    #[allow(unused_unsafe)]
    let yes = unsafe {
        core::arch::x86_64::__cpuid(0x8000_0000).eax >= 0x8000_0007
            && core::arch::x86_64::__cpuid(0x8000_0007).edx & (1 << 8) != 0
    };
    // Racing first calls compute the same answer.
    INVARIANT_TSC.store(if yes { 1 } else { 2 }, Ordering::Relaxed);
    yes
}

/// A block of [`ThreadLog::CHUNK`] 4-byte units for events. On Linux it is mapped with its pages
/// populated: one system call, where touching fresh memory would fault once per 4 KiB page as
/// the log grows (a few microseconds each in a virtual machine). Elsewhere it comes from the
/// allocator. Its words are not initialised: a log reads only words it wrote.
struct Chunk {
    ptr: std::ptr::NonNull<u32>,
    /// Whether `new` mapped it (else it came from the allocator). Only Linux maps chunks.
    #[cfg(target_os = "linux")]
    mapped: bool,
}

// SAFETY: a chunk is plain memory owned by its `ThreadLog`, which orders every access to it
// (see there).
unsafe impl Send for Chunk {}
// SAFETY: as above.
unsafe impl Sync for Chunk {}

impl Chunk {
    /// The size of a mapping (Linux only: elsewhere `layout` says what is allocated).
    #[cfg(target_os = "linux")]
    const BYTES: usize = ThreadLog::CHUNK * 4;

    fn new() -> Chunk {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: an anonymous private mapping with no address hint has no preconditions;
            // failure is checked.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    Self::BYTES,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                if let Some(ptr) = std::ptr::NonNull::new(p as *mut u32) {
                    return Chunk { ptr, mapped: true };
                }
            }
        }
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc(Self::layout()) } as *mut u32;
        match std::ptr::NonNull::new(p) {
            Some(ptr) => Chunk {
                ptr,
                #[cfg(target_os = "linux")]
                mapped: false,
            },
            None => std::alloc::handle_alloc_error(Self::layout()),
        }
    }

    fn layout() -> std::alloc::Layout {
        std::alloc::Layout::array::<u32>(ThreadLog::CHUNK).expect("a small array")
    }

    /// The first `len` units, written.
    ///
    /// # Safety
    /// `len <= CHUNK`, those units were written, and nobody writes them meanwhile.
    unsafe fn units(&self, len: usize) -> &[u32] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len) }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if self.mapped {
            // SAFETY: the chunk was mapped with this size by `new`, and is dropped once.
            unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, Self::BYTES) };
            return;
        }
        // SAFETY: not mapped: allocated by `new` with this layout, and dropped once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr() as *mut u8, Self::layout()) };
    }
}

/// One host thread's events for one sink, as 4-byte units in chunks of [`ThreadLog::CHUNK`].
///
/// Only its own thread writes it, and without a lock (this runs for every traced poll): the
/// event's units go past the published length `len`, which is then raised with release
/// ordering. The sink's writer reads the full chunks and the current one up to `len`
/// (acquire) under the lock of `chunks`, which the owner takes only to start a new chunk. So
/// the owner never writes a unit that a reader may read, and the current chunk changes only
/// while no reader looks at it.
///
/// An event is a head of 8 bytes, its start shifted left by 8 over a byte of flags (the kind
/// in bits 0–5; bit 6: its values take 8 bytes each; bit 7: its times are in [`ticks`], else
/// in nanoseconds), then its values: the duration (spans only), then the kind's arguments, 4
/// bytes each where all of them fit, else 8. A mix-workload job takes about 76 bytes: the
/// fewer fresh pages a traced run touches, the less it costs.
struct ThreadLog {
    tid: u32,
    name: String,
    /// Every chunk with its written length, the current one last (its length is `len`). Its
    /// lock guards adding a chunk.
    chunks: Mutex<Vec<(Chunk, usize)>>,
    /// The current chunk's units (the last of `chunks`).
    cur: AtomicPtr<u32>,
    /// How many units of the current chunk hold events.
    len: AtomicUsize,
}

impl ThreadLog {
    /// Units per chunk (1 MiB).
    const CHUNK: usize = 1 << 18;
    /// The most units an event takes: the head and 4 values of 8 bytes.
    const MAX: usize = 2 + 4 * 2;
    const WIDE: u64 = 0x40;
    const TICKED: u64 = 0x80;

    fn new(tid: u32, name: String) -> Self {
        let first = Chunk::new();
        let cur = AtomicPtr::new(first.ptr.as_ptr());
        ThreadLog { tid, name, chunks: Mutex::new(vec![(first, 0)]), cur, len: AtomicUsize::new(0) }
    }

    /// Stores an event; `ticked`: its times are in [`ticks`], else in nanoseconds. Only the
    /// log's own thread calls this. Inlined, so that the kind's layout folds at each call site.
    #[inline(always)]
    fn put(&self, kind: HostKind, ticked: bool, ts: i64, dur: u64, args: &[u64]) {
        let (_, _, ph, keys) = kind.info();
        let arg = |i: usize| args.get(i).copied().unwrap_or(0);
        // The values: the duration (not for instants), then the kind's arguments.
        let mut vals = [dur, arg(0), arg(1), arg(2)];
        let mut count = 1 + keys.len().min(3);
        if ph == b'i' {
            vals = [arg(0), arg(1), arg(2), 0];
            count -= 1;
        }
        let wide = (vals[0] | vals[1] | vals[2] | vals[3]) >> 32 != 0;
        let head = ((ts as u64) << 8)
            | kind as u64
            | if wide { Self::WIDE } else { 0 }
            | if ticked { Self::TICKED } else { 0 };
        // Only this thread changes `len` and `cur`.
        let mut len = self.len.load(Ordering::Relaxed);
        if len + Self::MAX > Self::CHUNK {
            self.next_chunk(len);
            len = 0;
        }
        let cur = self.cur.load(Ordering::Relaxed);
        // Units are stored one by one, straight into the chunk (a copy from a local array
        // would reload them before the stores complete). Four values are always stored (fixed
        // stores), of which `count` are kept.
        // SAFETY: `cur` is the current chunk of `CHUNK` units (changed only by this thread)
        // and `len + MAX <= CHUNK`, and at most `MAX` units are written; readers read only
        // below `len`, so nobody reads these units until the release store below publishes
        // them.
        let n = unsafe {
            let w = cur.add(len);
            w.write(head as u32);
            w.add(1).write((head >> 32) as u32);
            if wide {
                for (i, v) in vals.iter().enumerate() {
                    w.add(2 + 2 * i).write(*v as u32);
                    w.add(3 + 2 * i).write((*v >> 32) as u32);
                }
                2 + 2 * count
            } else {
                for (i, v) in vals.iter().enumerate() {
                    w.add(2 + i).write(*v as u32);
                }
                2 + count
            }
        };
        self.len.store(len + n, Ordering::Release);
    }

    /// Closes the current chunk at `len` units and starts a new one.
    #[cold]
    fn next_chunk(&self, len: usize) {
        let new = Chunk::new();
        let mut chunks = crate::util::lock(&self.chunks);
        if let Some(last) = chunks.last_mut() {
            last.1 = len;
        }
        self.cur.store(new.ptr.as_ptr(), Ordering::Relaxed);
        chunks.push((new, 0));
        self.len.store(0, Ordering::Release);
    }

    /// A copy of every event so far (the writer's side).
    fn snapshot(&self) -> Vec<Vec<u32>> {
        let chunks = crate::util::lock(&self.chunks);
        let len = self.len.load(Ordering::Acquire);
        let last = chunks.len().saturating_sub(1);
        chunks
            .iter()
            .enumerate()
            .map(|(i, (chunk, closed))| {
                let n = if i == last { len } else { *closed };
                // SAFETY: a closed chunk's units were all written before it was closed (under
                // this lock); the current one's first `len` were written before the release
                // store that published `len`, and its owner writes only past them.
                unsafe { chunk.units(n) }.to_vec()
            })
            .collect()
    }
}

/// The events stored in `chunks` (see [`ThreadLog`] for the layout).
fn host_events(chunks: &[Vec<u32>]) -> impl Iterator<Item = HostEvent> + '_ {
    chunks.iter().flat_map(|c| {
        let mut at = 0;
        std::iter::from_fn(move || {
            let unit = |i: usize| c.get(i).copied().unwrap_or(0) as u64;
            let head = unit(at) | unit(at + 1) << 32;
            c.get(at + 1)?;
            let kind = *HostKind::ALL.get((head & 0x3f) as usize)?;
            let wide = head & ThreadLog::WIDE != 0;
            let ticked = head & ThreadLog::TICKED != 0;
            at += 2;
            let mut value = || {
                let v = if wide { unit(at) | unit(at + 1) << 32 } else { unit(at) };
                at += if wide { 2 } else { 1 };
                v
            };
            let (_, _, ph, keys) = kind.info();
            let dur = if ph == b'i' { 0 } else { value() };
            let mut args = [0u64; 3];
            for a in args.iter_mut().take(keys.len()) {
                *a = value();
            }
            // An arithmetic shift keeps the sign of a start before the sink's base.
            Some((kind, ticked, (head as i64) >> 8, dur, args))
        })
    })
}

/// GPU events (and metadata) in fixed-size chunks.
#[derive(Default)]
struct Events {
    chunks: Vec<Vec<Event>>,
}

impl Events {
    const CHUNK: usize = 8192;

    fn push(&mut self, e: Event) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < Self::CHUNK => c.push(e),
            _ => {
                let mut c = Vec::with_capacity(Self::CHUNK);
                c.push(e);
                self.chunks.push(c);
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Event> {
        self.chunks.iter().flatten()
    }
}

/// Where events gather until written: one log per host thread (its owner writes it without
/// a lock; see [`ThreadLog`]), and one buffer for the GPU tracks.
pub(crate) struct Sink {
    id: u64,
    path: PathBuf,
    base: Instant,
    /// `CLOCK_MONOTONIC` at `base`, in nanoseconds (Linux), for calibrated timestamps.
    base_mono: Option<i128>,
    /// [`ticks`] at `base`.
    base_ticks: u64,
    threads: Mutex<Vec<Arc<ThreadLog>>>,
    events: Mutex<Events>,
    next_queue: AtomicU32,
}

thread_local! {
    /// This thread's track id (0 until first used).
    static TID: Cell<u32> = const { Cell::new(0) };
    /// This thread's log in each sink it wrote to.
    static LOGS: Logs = const { Logs { all: RefCell::new(Vec::new()) } };
    /// The sink this thread wrote to last and its log there (which `LOGS` holds), or `(0,
    /// null)`. Apart from `LOGS` because it needs no destructor: reading it costs no check of
    /// whether the thread is exiting. A sink id is never 0, and never reused.
    static LAST: Cell<(u64, *const ThreadLog)> = const { Cell::new((0, std::ptr::null())) };
}

/// A small number per host thread, its track id.
fn thread_tid() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    TID.with(|t| {
        if t.get() == 0 {
            t.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    })
}

/// A thread's logs, by sink id.
struct Logs {
    all: RefCell<Vec<(u64, Arc<ThreadLog>)>>,
}

impl Drop for Logs {
    fn drop(&mut self) {
        // `LAST` may point into `all`, which is dropped after this: forget it first.
        LAST.with(|l| l.set((0, std::ptr::null())));
    }
}

/// The native task being polled on this thread (0: none) and, if there is one, when its poll
/// started.
#[inline]
pub(crate) fn current_poll() -> (u64, Option<i64>) {
    match POLLING.with(|c| c.get()) {
        Polling { task: 0, .. } => (0, None),
        Polling { task, started, .. } => (task, Some(started)),
    }
}

/// Ids for tasks, contexts, sinks and async spans (process-wide, so that they never collide).
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Sink {
    /// The sink of `path` (as given): one per file in the process, shared by every executor
    /// and queue traced there (`VKASYNC_TRACE`'s included), so that the file holds all their
    /// tracks rather than the last writer's alone.
    fn for_path(path: PathBuf) -> Arc<Self> {
        static SINKS: Mutex<Vec<(PathBuf, std::sync::Weak<Sink>)>> = Mutex::new(Vec::new());
        let mut sinks = crate::util::lock(&SINKS);
        sinks.retain(|(_, sink)| sink.strong_count() > 0);
        if let Some(sink) = sinks.iter().filter(|(p, _)| *p == path).find_map(|(_, sink)| sink.upgrade()) {
            return sink;
        }
        let sink = Sink::new(path.clone());
        sinks.push((path, Arc::downgrade(&sink)));
        sink
    }

    fn new(path: PathBuf) -> Arc<Self> {
        // Read back to back: the pairing error is tens of nanoseconds.
        let base = Instant::now();
        let base_mono = monotonic_ns();
        Arc::new(Sink {
            id: next_id(),
            path,
            base,
            base_mono,
            base_ticks: ticks(),
            threads: Mutex::default(),
            events: Mutex::default(),
            next_queue: AtomicU32::new(1),
        })
    }

    fn ns(&self, t: Instant) -> i64 {
        match t.checked_duration_since(self.base) {
            Some(d) => d.as_nanos() as i64,
            None => -(self.base.duration_since(t).as_nanos() as i64),
        }
    }

    /// Adds an event of the calling host thread, to its own log (made, with the thread's name,
    /// on its first event). Events of a thread whose thread-locals are being destroyed are
    /// dropped.
    #[inline(always)]
    fn push_host(&self, kind: HostKind, ticked: bool, ts: i64, dur: u64, args: &[u64]) {
        let (sink, log) = LAST.with(|l| l.get());
        if sink == self.id {
            // SAFETY: `LAST` points to a log that `LOGS` holds an `Arc` of: `LOGS` lets go of
            // logs only in `log_for`, which sets `LAST` again, and when the thread exits, after
            // its `Drop` cleared `LAST`.
            return unsafe { &*log }.put(kind, ticked, ts, dur, args);
        }
        self.push_host_first(kind, ticked, ts, dur, args);
    }

    /// [`Sink::push_host`] when this thread wrote last to another sink, or never.
    #[cold]
    #[inline(never)]
    fn push_host_first(&self, kind: HostKind, ticked: bool, ts: i64, dur: u64, args: &[u64]) {
        let _ = LOGS.try_with(|logs| self.log_for(logs).put(kind, ticked, ts, dur, args));
    }

    /// This thread's log in this sink, made on first use; it becomes `LAST`.
    #[cold]
    fn log_for<'a>(&self, logs: &'a Logs) -> &'a ThreadLog {
        let mut all = logs.all.borrow_mut();
        let at = match all.iter().position(|(sink, _)| *sink == self.id) {
            Some(at) => at,
            None => {
                // Logs of sinks that are gone are dropped here.
                all.retain(|(_, log)| Arc::strong_count(log) > 1);
                let tid = thread_tid();
                let name = std::thread::current().name().map_or_else(|| format!("thread {tid}"), str::to_string);
                let log = Arc::new(ThreadLog::new(tid, name));
                crate::util::lock(&self.threads).push(log.clone());
                all.push((self.id, log));
                all.len() - 1
            }
        };
        let log: *const ThreadLog = Arc::as_ptr(&all[at].1);
        LAST.with(|l| l.set((self.id, log)));
        // SAFETY: `all` holds the log's `Arc` until a later `log_for` drops it, which first
        // replaces `last`; the reference does not outlive this thread's `Logs`.
        unsafe { &*log }
    }

    fn push(&self, e: Event) {
        crate::util::lock(&self.events).push(e);
    }

    fn push_all(&self, events: impl IntoIterator<Item = Event>) {
        let mut all = crate::util::lock(&self.events);
        for e in events {
            all.push(e);
        }
    }

    /// Writes every event so far to the file (replacing it).
    pub fn write(&self) -> std::io::Result<()> {
        let threads: Vec<_> = crate::util::lock(&self.threads).clone();
        // Nanoseconds per tick, over the sink's life so far.
        let (now, t) = (Instant::now(), ticks());
        let rate = match t.saturating_sub(self.base_ticks) {
            0 => 1.0,
            n => self.ns(now) as f64 / n as f64,
        };
        let mut out = std::io::BufWriter::new(std::fs::File::create(&self.path)?);
        out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
        write!(out, "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{HOST_PID},\"tid\":0,\"args\":{{\"name\":\"vkasync host\"}}}}")?;
        write!(out, ",\n{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{GPU_PID},\"tid\":0,\"args\":{{\"name\":\"vkasync GPU\"}}}}")?;
        let mut name = String::new();
        let mut write_all = |events: &Events| -> std::io::Result<()> {
            for e in events.iter() {
                out.write_all(b",\n")?;
                name.clear();
                e.name.write(&mut name);
                write_event(&mut out, e, &name)?;
            }
            Ok(())
        };
        write_all(&crate::util::lock(&self.events))?;
        let mut async_ids = 0u64;
        for log in &threads {
            let chunks = log.snapshot();
            out.write_all(b",\n")?;
            write_event(&mut out, &meta(HOST_PID, log.tid, String::new()), &log.name)?;
            for (kind, ticked, ts, dur, vals) in host_events(&chunks) {
                let (ts, dur) =
                    if ticked { ((ts as f64 * rate) as i64, (dur as f64 * rate) as u64) } else { (ts, dur) };
                let (name, cat, ph, keys) = kind.info();
                let mut args = Args::new();
                args.extend(keys.iter().copied().zip(vals));
                // An async span's begin and end pair by an id given here.
                let id = if ph == b'b' {
                    async_ids += 1;
                    async_ids
                } else {
                    0
                };
                let mut e = Event {
                    ph,
                    pid: HOST_PID,
                    tid: log.tid,
                    name: Name::Static(name),
                    cat,
                    ts,
                    dur: dur as i64,
                    id,
                    args,
                };
                out.write_all(b",\n")?;
                write_event(&mut out, &e, name)?;
                if ph == b'b' {
                    (e.ph, e.ts, e.args) = (b'e', ts + dur as i64, Args::new());
                    out.write_all(b",\n")?;
                    write_event(&mut out, &e, name)?;
                }
            }
        }
        out.write_all(b"\n]}\n")?;
        out.flush()
    }
}

/// A `thread_name` metadata event (the name travels in `name`, see `write_event`).
fn meta(pid: u8, tid: u32, name: String) -> Event {
    Event { ph: b'M', pid, tid, name: Name::Owned(name.into()), cat: "", ts: 0, dur: 0, id: 0, args: Args::new() }
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

/// Nanoseconds as the format's microseconds, exactly.
fn micros(out: &mut impl Write, ns: i64) -> std::io::Result<()> {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    write!(out, "{sign}{}.{:03}", a / 1000, a % 1000)
}

fn write_event(out: &mut impl Write, e: &Event, name: &str) -> std::io::Result<()> {
    if e.ph == b'M' {
        write!(
            out,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":",
            e.pid, e.tid
        )?;
        write_str(out, name)?;
        return out.write_all(b"}}");
    }
    out.write_all(b"{\"name\":")?;
    write_str(out, name)?;
    write!(out, ",\"ph\":\"{}\",\"pid\":{},\"tid\":{},\"cat\":\"{}\",\"ts\":", e.ph as char, e.pid, e.tid, e.cat)?;
    micros(out, e.ts)?;
    match e.ph {
        b'X' => {
            out.write_all(b",\"dur\":")?;
            micros(out, e.dur.max(0))?;
        }
        b'b' | b'e' => write!(out, ",\"id\":\"0x{:x}\"", e.id)?,
        b'i' => out.write_all(b",\"s\":\"t\"")?,
        _ => {}
    }
    if !e.args.is_empty() {
        out.write_all(b",\"args\":{")?;
        for (i, (k, v)) in e.args.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write!(out, "\"{k}\":{v}")?;
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
    pub fn new(id: u64) -> Arc<Self> {
        Arc::new(TaskClock { id, gpu_ns: AtomicU64::new(0) })
    }
}

/// One queue's view of a sink.
pub(crate) struct QueueTrace {
    sink: Arc<Sink>,
    /// The queue's GPU track.
    queue: u32,
    cal: Calibration,
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
    fn queued(&self, kind: HostKind, args: &[u64]) -> [u64; 3] {
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
    fn gpu_span(&self, name: Name, ts: i64, end: i64, args: Args) -> Event {
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

/// What a GPU command is.
#[derive(Clone, Copy)]
pub(crate) enum Command {
    Clear,
    /// A dispatch: its op's index in the recording (whose kernel names it), and the kernel's
    /// identity (its address: dispatches of one kernel are one kind of command).
    Dispatch(u32, usize),
    /// Bytes and regions of one `vkCmdCopyBuffer`.
    Copy(u64, u32),
}

/// The weight of a dispatch in a span it shares: its invocations.
pub(crate) fn dispatch_weight(kernel: &RawKernel, groups: [u32; 3]) -> f64 {
    let local = kernel.reflection.local_size.iter().map(|&l| l.max(1) as f64).product::<f64>();
    groups.iter().map(|&g| g as f64).product::<f64>() * local
}

/// The weight of a copy of `bytes` in a span it shares: its 4-byte words.
pub(crate) fn copy_weight(bytes: u64) -> f64 {
    (bytes as f64 / 4.0).max(1.0)
}

/// One command of a submission: what it is, its share of a span it shares with others (a
/// dispatch's invocations, a copy's 4-byte words, nothing for a clear), and the contexts it is
/// charged to (`GpuSpans::owners[owners.0..owners.1]`). Plain data: encoding a command touches
/// no reference count. Without charging (a trace alone), a run of commands of one kind in one
/// group is one entry, `count` commands named after the first.
struct GpuCommand {
    what: Command,
    weight: f64,
    owners: (u32, u32),
    count: u32,
}

/// What [`GpuSpans::finish`] needs of the recording: its table of owners (first op, end op,
/// context clock), and the kernel of a dispatch op.
pub(crate) trait SpanSource {
    fn owners(&self) -> &[(u32, u32, Arc<TaskClock>)];
    fn kernel(&self, op: u32) -> Option<&Arc<RawKernel>>;
}

impl GpuCommand {
    /// The name of a span of `n` commands of this one's kind.
    fn name(&self, src: &dyn SpanSource, n: u32) -> Name {
        match self.what {
            Command::Clear => Name::Many("clear", n),
            Command::Dispatch(op, _) => {
                src.kernel(op).map_or(Name::Many("dispatch", n), |k| Name::Kernel(k.clone(), n))
            }
            Command::Copy(b, r) => Name::Copy(b, r, n),
        }
    }
}

impl Command {
    /// Commands of one kind, for grouping a phase's spans.
    #[inline]
    fn same_kind(&self, o: &Command) -> bool {
        match (*self, *o) {
            (Command::Clear, Command::Clear) | (Command::Copy(..), Command::Copy(..)) => true,
            (Command::Dispatch(_, a), Command::Dispatch(_, b)) => a == b,
            _ => false,
        }
    }
}

/// Query pools and the vectors of [`GpuSpans`] of completed submissions, reset, for a queue's
/// next flushes.
pub(crate) type SparePools = Arc<Mutex<Spare>>;

/// See [`SparePools`].
#[derive(Default)]
pub(crate) struct Spare {
    pools: Vec<RawQueryPool>,
    lists: Vec<Lists>,
}

/// A [`GpuSpans`]' commands, owners and groups.
type Lists = (Vec<GpuCommand>, Vec<(u32, u64)>, Vec<u32>);

/// How many spare pools (and span lists) a queue keeps (more than the submissions usually in
/// flight).
const MAX_SPARE_POOLS: usize = 8;

/// The longest span lists kept for reuse (entries; a flush's default bound is 4,096 commands).
const MAX_SPARE_LIST: usize = 8192;

/// The GPU timing of one recording: a query pool with a timestamp at the start and one after
/// each group of commands (a phase, or a command; see [`TraceDetail`]).
pub(crate) struct GpuSpans {
    device: Device,
    /// Taken when encoding starts (`None` before, or if the driver could not make one).
    pool: Option<RawQueryPool>,
    /// Pools of completed submissions, shared by the queue's flushes.
    spare: SparePools,
    used: u32,
    per_command: bool,
    /// Whether commands are charged to contexts (else runs of one kind are merged).
    charge: bool,
    /// Commands recorded, merged or not.
    total: u32,
    commands: Vec<GpuCommand>,
    /// The owners of all commands: (index in the recording's table, weight: bytes for a
    /// merged copy, else 1).
    owners: Vec<(u32, u64)>,
    /// The first command of each group; group `g` ends at timestamp `g + 1`.
    groups: Vec<u32>,
    /// Commands not yet in a group.
    open: u32,
}

impl GpuSpans {
    /// Spans for a recording of `ops` ops; the query pool is taken when encoding starts
    /// ([`GpuSpans::start`]), from `spare` where one is large enough.
    pub fn new(device: &Device, ops: u32, detail: TraceDetail, spare: SparePools) -> Self {
        let capacity = ops as usize + 2;
        let lists = crate::util::lock(&spare).lists.pop();
        let (commands, owners, groups) = lists.unwrap_or_else(|| {
            (Vec::with_capacity(capacity), Vec::with_capacity(capacity), Vec::with_capacity(capacity))
        });
        GpuSpans {
            device: device.clone(),
            pool: None,
            spare,
            used: 0,
            per_command: detail == TraceDetail::Commands,
            charge: true,
            total: 0,
            commands,
            owners,
            groups,
            open: 0,
        }
    }

    /// The submission's first timestamp (top of pipe), once the encoder knows its `phases`.
    /// The pool holds a timestamp for the start, the clear and each phase (with
    /// [`TraceDetail::Commands`], for the start, the clear and each of the `ops`). `charge`:
    /// whether commands are charged to contexts (per-context time).
    pub fn start(&mut self, cmd: vk::CommandBuffer, phases: u32, ops: u32, charge: bool) {
        self.charge = charge;
        let needed = if self.per_command { ops + 2 } else { phases + 2 };
        self.pool = self.take_pool(needed);
        self.stamp(cmd, vk::PipelineStageFlags::TOP_OF_PIPE);
    }

    /// The smallest spare pool of at least `needed` queries (spares were reset by
    /// [`GpuSpans::into_pool`]), else a new one, sized to a power of two (at least 64, so that
    /// pools of phase timestamps are all alike and every one can be reused) and reset from the
    /// host. `None` if the driver cannot make one: this submission then has no GPU spans.
    fn take_pool(&self, needed: u32) -> Option<RawQueryPool> {
        {
            let mut spare = crate::util::lock(&self.spare);
            let best = spare.pools.iter().enumerate().filter(|(_, p)| p.count >= needed).min_by_key(|(_, p)| p.count);
            if let Some(i) = best.map(|(i, _)| i) {
                return Some(spare.pools.swap_remove(i));
            }
        }
        let count = needed.max(64).next_power_of_two();
        let info = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(count);
        // SAFETY: the device is live and supports timestamp queries (checked when the trace or
        // the timing was turned on).
        match unsafe { self.device.raw().create_query_pool(&info, None) } {
            Ok(pool) => {
                let pool = RawQueryPool { device: self.device.clone(), pool, count };
                // SAFETY: the pool is new: no work uses it; hostQueryReset is enabled (as
                // above).
                unsafe { self.device.raw().reset_query_pool(pool.pool, 0, pool.count) };
                Some(pool)
            }
            Err(e) => {
                log::warn!("vkasync: no query pool for a submission's GPU spans ({e}); it is traced without them");
                None
            }
        }
    }

    fn stamp(&mut self, cmd: vk::CommandBuffer, stage: vk::PipelineStageFlags) -> bool {
        let Some(pool) = self.pool.as_ref().filter(|p| self.used < p.count) else { return false };
        // SAFETY: `cmd` is recording; the pool is live (held by the recording until its
        // submission completes) and was reset; the index is inside it.
        unsafe { self.device.raw().cmd_write_timestamp(cmd, stage, pool.pool, self.used) };
        self.used += 1;
        true
    }

    /// A command was recorded (with [`TraceDetail::Commands`], its completion is stamped);
    /// `weight` gives its share of a span (called only when commands are charged).
    #[inline]
    pub fn command(
        &mut self,
        cmd: vk::CommandBuffer,
        what: Command,
        weight: impl FnOnce() -> f64,
        owners: impl IntoIterator<Item = (u32, u64)>,
    ) {
        self.total += 1;
        if !self.charge && !self.per_command && self.open > 0 {
            if let Some(last) = self.commands.last_mut().filter(|c| c.what.same_kind(&what)) {
                last.count += 1;
                return;
            }
        }
        let first = self.owners.len() as u32;
        let weight = if self.charge {
            self.owners.extend(owners);
            weight()
        } else {
            0.0
        };
        self.commands.push(GpuCommand { what, weight, owners: (first, self.owners.len() as u32), count: 1 });
        self.open += 1;
        if self.per_command {
            self.end_group(cmd);
        }
    }

    /// A phase ended (before its barrier): stamp the completion of its commands.
    pub fn end_group(&mut self, cmd: vk::CommandBuffer) {
        if self.open > 0 && self.stamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE) {
            self.groups.push(self.commands.len() as u32 - self.open);
            self.open = 0;
        }
    }

    /// The query pool, for reuse, once the submission completed: the queries it wrote are
    /// reset here (only those, not the whole pool).
    pub fn into_pool(self) {
        let GpuSpans { device, pool, spare, used, mut commands, mut owners, mut groups, .. } = self;
        if let Some(pool) = &pool {
            if used > 0 {
                // SAFETY: the submission that wrote these queries completed (the caller's
                // contract), so no pending work uses the pool; hostQueryReset is enabled
                // (checked when the trace or the timing was turned on).
                unsafe { device.raw().reset_query_pool(pool.pool, 0, used) };
            }
        }
        commands.clear();
        owners.clear();
        groups.clear();
        let mut spare = crate::util::lock(&spare);
        if let Some(pool) = pool.filter(|_| spare.pools.len() < MAX_SPARE_POOLS) {
            spare.pools.push(pool);
        }
        // Lists grown by an unusually large flush are let go rather than kept.
        if spare.lists.len() < MAX_SPARE_POOLS && commands.capacity().max(owners.capacity()) <= MAX_SPARE_LIST {
            spare.lists.push((commands, owners, groups));
        }
    }

    /// Once the submission completed: the ticks (`None` if not all are available).
    fn ticks(&self) -> Option<Vec<u64>> {
        let pool = self.pool.as_ref().filter(|_| self.used > 0)?;
        let mut out = vec![[0u64; 2]; self.used as usize];
        // SAFETY: the pool is live and `0..used` is inside it; each entry has room for the value
        // and its availability.
        let r = unsafe {
            self.device.raw().get_query_pool_results(
                pool.pool,
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

    /// Charges each group's time to its commands' contexts (`src`: the recording) and, with a
    /// trace, emits the GPU spans.
    pub fn finish(&self, value: u64, trace: Option<&QueueTrace>, src: &dyn SpanSource) {
        let Some(ticks) = self.ticks() else { return };
        let period = self.device.limits().timestamp_period_ns as f64;
        let bounds = |g: usize| {
            let first = self.groups[g] as usize;
            let end = self.groups.get(g + 1).map_or(self.commands.len() - self.open as usize, |&n| n as usize);
            first..end
        };
        let owners_of = |c: &GpuCommand| &self.owners[c.owners.0 as usize..c.owners.1 as usize];
        // Each context's time is summed here, then added to its clock once.
        let table = src.owners();
        let mut per_owner = vec![0f64; table.len()];
        // Without per-context time (a trace alone) there is nobody to charge.
        let charged = if table.is_empty() { 0 } else { self.groups.len() };
        for (g, w) in ticks.windows(2).enumerate().take(charged) {
            let cmds = &self.commands[bounds(g)];
            let span = w[1].saturating_sub(w[0]) as f64 * period;
            let whole: f64 = cmds.iter().map(|c| c.weight).sum();
            for c in cmds {
                // A command alone in its span has all of it; else its share by size.
                let mine = if cmds.len() == 1 { span } else { span * c.weight / whole.max(1.0) };
                let owners = owners_of(c);
                let total: u64 = owners.iter().map(|o| o.1).sum();
                for &(owner, weight) in owners {
                    if let Some(ns) = per_owner.get_mut(owner as usize) {
                        *ns += mine * weight as f64 / total.max(1) as f64;
                    }
                }
            }
        }
        for (ns, (_, _, clock)) in per_owner.iter().zip(table) {
            if *ns > 0.0 {
                clock.gpu_ns.fetch_add(*ns as u64, Ordering::Relaxed);
            }
        }
        let Some(t) = trace else { return };
        let err = t.cal.error_ns.round() as u64;
        let host = |tick: u64| t.cal.host_ns(tick);
        let (t0, t1) = (host(ticks[0]), host(*ticks.last().expect("at least one")));
        let args: Args =
            smallvec::smallvec![("value", value), ("commands", self.total as u64), ("calibration_error_ns", err)];
        // Stored under one hold of the sink's lock.
        let mut spans: smallvec::SmallVec<[Event; 8]> = smallvec::SmallVec::new();
        spans.push(t.gpu_span(Name::Submission(value), t0, t1, args));
        for (g, w) in ticks.windows(2).enumerate().take(self.groups.len()) {
            let (a, b) = (host(w[0]), host(w[1].max(w[0])));
            let cmds = &self.commands[bounds(g)];
            let ctx = |c: &GpuCommand| owners_of(c).first().and_then(|o| table.get(o.0 as usize)).map(|o| o.2.id);
            if let [c @ GpuCommand { count: 1, .. }] = cmds {
                let mut args: Args = smallvec::smallvec![("value", value), ("calibration_error_ns", err)];
                // The context is known with per-context time on.
                if let Some(id) = ctx(c) {
                    args.push(("ctx", id));
                }
                spans.push(t.gpu_span(c.name(src, 1), a, b, args));
                continue;
            }
            let count = cmds.iter().map(|c| c.count as u64).sum::<u64>();
            let args: Args = smallvec::smallvec![("value", value), ("calibration_error_ns", err), ("commands", count)];
            spans.push(t.gpu_span(Name::Static("phase"), a, b, args));
            // One span per kind of command in the phase, each over the whole phase.
            let mut kinds: smallvec::SmallVec<[(&GpuCommand, u32); 4]> = smallvec::SmallVec::new();
            for c in cmds {
                match kinds.iter_mut().find(|(k, _)| k.what.same_kind(&c.what)) {
                    Some((_, n)) => *n += c.count,
                    None => kinds.push((c, c.count)),
                }
            }
            for (c, n) in kinds {
                let args: Args =
                    smallvec::smallvec![("value", value), ("calibration_error_ns", err), ("commands", n as u64)];
                spans.push(t.gpu_span(c.name(src, n), a, b, args));
            }
        }
        t.sink.push_all(spans);
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
        let t0 = sink.ns(Instant::now());
        ts.write_alone(0)?;
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

/// What this thread's executor loop is doing, for its tasks' `poll` spans and their awaits'
/// task ids: one thread-local, read once when a poll starts and once when it ends.
///
/// Consecutive polls share a clock read: the loop runs its ready tasks one after the other, and
/// the end of one poll is the start of the next, until the loop does something else
/// ([`break_polls`]). A poll's span thus includes the few tens of nanoseconds the loop spends
/// between two polls (taking the next task, and storing the output of the last one).
#[derive(Clone, Copy)]
struct Polling {
    /// The trace of the executor loop running on this thread (null: none; see [`RunScope`]).
    running: *const QueueTrace,
    /// The native task being polled (0: none), and when its poll started ([`QueueTrace::stamp`]).
    task: u64,
    started: i64,
    /// When the loop's last poll ended, if it has done nothing else since ([`NO_POLL`]
    /// otherwise).
    last_end: i64,
}

/// No poll just ended (see [`Polling`]).
const NO_POLL: i64 = i64::MIN;

thread_local! {
    static POLLING: Cell<Polling> = const {
        Cell::new(Polling { running: std::ptr::null(), task: 0, started: 0, last_end: NO_POLL })
    };
}

/// Marks the trace of the executor whose loop runs on this thread (null: none), for its
/// tasks' `poll` spans: a task reads it instead of holding a reference of its own.
pub(crate) struct RunScope {
    prev: Polling,
}

impl RunScope {
    /// Marks `trace` until the scope is dropped (loops nest: the previous mark comes back).
    /// The caller keeps the trace alive meanwhile.
    pub fn enter(trace: Option<&Arc<QueueTrace>>) -> Self {
        let running = trace.map_or(std::ptr::null(), Arc::as_ptr);
        RunScope { prev: POLLING.with(|c| c.replace(Polling { running, task: 0, started: 0, last_end: NO_POLL })) }
    }
}

impl Drop for RunScope {
    fn drop(&mut self) {
        POLLING.with(|c| c.set(self.prev));
    }
}

/// One poll of a native task under the running loop's trace: its `poll` span, and the task's
/// id for the awaits inside it ([`current_poll`]). Made by [`PollScope::enter`], ended by
/// [`PollScope::end`]; dropped without `end` (the poll panicked), it only restores the
/// previous state (with no poll just ended).
pub(crate) struct PollScope {
    /// The state before the poll (its `running` is the trace this poll writes to).
    prev: Polling,
    task: u64,
    started: i64,
}

impl PollScope {
    /// Starts a poll of `task`, if a traced loop runs on this thread.
    #[inline(always)]
    pub fn enter(task: u64) -> Option<Self> {
        POLLING.with(|c| {
            let prev = c.get();
            if prev.running.is_null() {
                return None;
            }
            let started = match prev.last_end {
                // SAFETY: a non-null `running` was set by a `RunScope` that is still alive
                // (dropping it restores the previous one), whose caller keeps the trace alive
                // for its life.
                NO_POLL => unsafe { &*prev.running }.stamp(),
                end => end,
            };
            c.set(Polling { running: prev.running, task, started, last_end: NO_POLL });
            let prev = Polling { last_end: NO_POLL, ..prev };
            Some(PollScope { prev, task, started })
        })
    }

    /// The poll returned (`ready`: with its output): its span; its end is the next poll's
    /// start unless the loop does something else first.
    #[inline(always)]
    pub fn end(self, ready: bool) {
        // SAFETY: as in `enter`: the `RunScope` that set this pointer outlives the poll.
        let t = unsafe { &*self.prev.running };
        let end = t.stamp();
        t.sink.push_host(
            HostKind::Poll,
            true,
            self.started,
            (end - self.started).max(0) as u64,
            &[self.task, ready as u64],
        );
        let prev = Polling { last_end: end, ..self.prev };
        std::mem::forget(self);
        POLLING.with(|c| c.set(prev));
    }
}

/// The running loop is about to do something other than its next poll: that poll reads the
/// clock afresh.
#[inline]
pub(crate) fn break_polls() {
    POLLING.with(|c| {
        let p = c.get();
        if p.last_end != NO_POLL {
            c.set(Polling { last_end: NO_POLL, ..p });
        }
    })
}

impl Drop for PollScope {
    #[inline(always)]
    fn drop(&mut self) {
        POLLING.with(|c| c.set(self.prev));
    }
}

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
