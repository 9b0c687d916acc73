//! Host events: their kinds and names, the clock they are stamped with, and the per-thread logs they are written to without a lock.

#[allow(unused_imports)]
use super::*;

/// Host process and GPU process ids in the trace.
pub(super) const HOST_PID: u8 = 1;
pub(super) const GPU_PID: u8 = 2;

/// An event's numeric arguments.
pub(crate) type Args = smallvec::SmallVec<[(&'static str, u64); 3]>;

/// An event's name, formatted only when the file is written.
pub(super) enum Name {
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
    pub(super) fn write(&self, out: &mut String) {
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

pub(super) struct Event {
    pub(super) ph: u8,
    pub(super) pid: u8,
    pub(super) tid: u32,
    pub(super) name: Name,
    pub(super) cat: &'static str,
    /// Nanoseconds since the sink's base.
    pub(super) ts: i64,
    pub(super) dur: i64,
    pub(super) id: u64,
    pub(super) args: Args,
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
    /// A spin on the counter: an executor's before it parks, or a lone job's for its own
    /// submission: value, reached, queue.
    Spin,
    /// An await that had to wait (async): ctx, ok, task (0: none).
    Await,
    /// An epoch's recording (async): ops, queue.
    Recording,
    /// A submission in flight (async): value, queue.
    InFlight,
    /// Waking the tasks whose work completed or failed (or that may go on), after a wait or a
    /// flush: wakers, queue.
    Wake,
    /// A driver thread asleep until it is notified (no GPU wait: nothing to submit or wait for
    /// when it went to sleep), from its decision to its waking: queue.
    Sleep,
}

impl HostKind {
    const ALL: [HostKind; 13] = [
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
        HostKind::Wake,
        HostKind::Sleep,
    ];

    /// Name, category, phase (`X` span, `i` instant, `b` async span) and argument names.
    #[inline(always)]
    pub(super) fn info(self) -> (&'static str, &'static str, u8, &'static [&'static str]) {
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
            HostKind::Wake => ("wake", "wait", b'X', &["wakers", "queue"]),
            HostKind::Sleep => ("sleep", "driver", b'X', &["queue"]),
        }
    }
}

/// One decoded host event: kind, whether its times are in ticks, start, duration and
/// arguments.
pub(super) type HostEvent = (HostKind, bool, i64, u64, [u64; 3]);

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
pub(super) fn ticks_from_instant() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Whether the time-stamp counter runs at a constant rate in every power state (CPUID
/// 0x8000_0007, EDX bit 8): 0 not known yet, 1 yes, 2 no.
#[cfg(target_arch = "x86_64")]
pub(super) static INVARIANT_TSC: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn invariant_tsc() -> bool {
    match INVARIANT_TSC.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => invariant_tsc_init(),
    }
}

#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
pub(super) fn invariant_tsc_init() -> bool {
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

/// A block of [`ThreadLog::CHUNK`] 4-byte units for events. On Linux it is mapped, and a thread's
/// later chunks with their pages populated: one system call, where touching fresh memory would
/// fault once per 4 KiB page as the log grows (a few microseconds each in a virtual machine). A
/// thread's first chunk is not populated: it is made at the thread's first event in the trace,
/// often inside the work being traced, where populating its 1 MiB took 420–503 µs on lavapipe's
/// host (a traced flush's first span showed that as a gap of 0.3–0.8 ms on H100 hosts,
/// `benchmarks/2026-12-06-h100-040c085-split/`); its pages fault in one at a time instead.
/// Elsewhere it comes from the allocator. Its words are not initialised: a log reads only words
/// it wrote.
pub(super) struct LogChunk {
    pub(super) ptr: std::ptr::NonNull<u32>,
    /// Whether `new` mapped it (else it came from the allocator). Only Linux maps chunks.
    #[cfg(target_os = "linux")]
    pub(super) mapped: bool,
}

// SAFETY: a chunk is plain memory owned by its `ThreadLog`, which orders every access to it
// (see there).
unsafe impl Send for LogChunk {}
// SAFETY: as above.
unsafe impl Sync for LogChunk {}

impl LogChunk {
    /// The size of a mapping (Linux only: elsewhere `layout` says what is allocated).
    #[cfg(target_os = "linux")]
    const BYTES: usize = ThreadLog::CHUNK * 4;

    /// A chunk; on Linux with its pages populated if `populate`.
    pub(super) fn new(populate: bool) -> LogChunk {
        #[cfg(not(target_os = "linux"))]
        let _ = populate;
        #[cfg(target_os = "linux")]
        {
            let populate = if populate { libc::MAP_POPULATE } else { 0 };
            // SAFETY: an anonymous private mapping with no address hint has no preconditions;
            // failure is checked.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    Self::BYTES,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | populate,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                if let Some(ptr) = std::ptr::NonNull::new(p as *mut u32) {
                    return LogChunk { ptr, mapped: true };
                }
            }
        }
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc(Self::layout()) } as *mut u32;
        match std::ptr::NonNull::new(p) {
            Some(ptr) => LogChunk {
                ptr,
                #[cfg(target_os = "linux")]
                mapped: false,
            },
            None => std::alloc::handle_alloc_error(Self::layout()),
        }
    }

    pub(super) fn layout() -> std::alloc::Layout {
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

impl Drop for LogChunk {
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
pub(super) struct ThreadLog {
    pub(super) tid: u32,
    pub(super) name: String,
    /// Every chunk with its written length, the current one last (its length is `len`). Its
    /// lock guards adding a chunk.
    pub(super) chunks: Mutex<Vec<(LogChunk, usize)>>,
    /// The current chunk's units (the last of `chunks`).
    pub(super) cur: AtomicPtr<u32>,
    /// How many units of the current chunk hold events.
    pub(super) len: AtomicUsize,
}

impl ThreadLog {
    /// Units per chunk (1 MiB).
    pub(super) const CHUNK: usize = 1 << 18;
    /// The most units an event takes: the head and 4 values of 8 bytes.
    const MAX: usize = 2 + 4 * 2;
    const WIDE: u64 = 0x40;
    const TICKED: u64 = 0x80;

    pub(super) fn new(tid: u32, name: String) -> Self {
        let first = LogChunk::new(false);
        let cur = AtomicPtr::new(first.ptr.as_ptr());
        ThreadLog { tid, name, chunks: Mutex::new(vec![(first, 0)]), cur, len: AtomicUsize::new(0) }
    }

    /// Stores an event; `ticked`: its times are in [`ticks`], else in nanoseconds. Only the
    /// log's own thread calls this. Inlined, so that the kind's layout folds at each call site.
    #[inline(always)]
    pub(super) fn put(&self, kind: HostKind, ticked: bool, ts: i64, dur: u64, args: &[u64]) {
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
    pub(super) fn next_chunk(&self, len: usize) {
        let new = LogChunk::new(true);
        let mut chunks = crate::util::lock(&self.chunks);
        if let Some(last) = chunks.last_mut() {
            last.1 = len;
        }
        self.cur.store(new.ptr.as_ptr(), Ordering::Relaxed);
        chunks.push((new, 0));
        self.len.store(0, Ordering::Release);
    }

    /// A copy of every event so far (the writer's side).
    pub(super) fn snapshot(&self) -> Vec<Vec<u32>> {
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
pub(super) fn host_events(chunks: &[Vec<u32>]) -> impl Iterator<Item = HostEvent> + '_ {
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
