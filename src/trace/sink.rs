//! A trace file's sink: the events of every queue traced to it, the threads' logs, and writing them out.

#[allow(unused_imports)]
use super::*;

/// GPU events (and metadata) in fixed-size chunks.
#[derive(Default)]
pub(super) struct Events {
    pub(super) chunks: Vec<Vec<Event>>,
}

impl Events {
    const CHUNK: usize = 8192;

    pub(super) fn push(&mut self, e: Event) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < Self::CHUNK => c.push(e),
            _ => {
                let mut c = Vec::with_capacity(Self::CHUNK);
                c.push(e);
                self.chunks.push(c);
            }
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Event> {
        self.chunks.iter().flatten()
    }
}

/// Where events gather until written: one log per host thread (its owner writes it without
/// a lock; see [`ThreadLog`]), and one buffer for the GPU tracks.
pub(crate) struct Sink {
    pub(super) id: u64,
    pub(super) path: PathBuf,
    pub(super) base: Instant,
    /// `CLOCK_MONOTONIC` at `base`, in nanoseconds (Linux), for calibrated timestamps.
    pub(super) base_mono: Option<i128>,
    /// [`ticks`] at `base`.
    pub(super) base_ticks: u64,
    pub(super) threads: Mutex<Vec<Arc<ThreadLog>>>,
    pub(super) events: Mutex<Events>,
    pub(super) next_queue: AtomicU32,
}

thread_local! {
    /// This thread's track id (0 until first used).
    pub(super) static TID: Cell<u32> = const { Cell::new(0) };
    /// This thread's log in each sink it wrote to.
    pub(super) static LOGS: Logs = const { Logs { all: RefCell::new(Vec::new()) } };
    /// The sink this thread wrote to last and its log there (which `LOGS` holds), or `(0,
    /// null)`. Apart from `LOGS` because it needs no destructor: reading it costs no check of
    /// whether the thread is exiting. A sink id is never 0, and never reused.
    pub(super) static LAST: Cell<(u64, *const ThreadLog)> = const { Cell::new((0, std::ptr::null())) };
}

/// A small number per host thread, its track id.
pub(super) fn thread_tid() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    TID.with(|t| {
        if t.get() == 0 {
            t.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    })
}

/// A thread's logs, by sink id.
pub(super) struct Logs {
    pub(super) all: RefCell<Vec<(u64, Arc<ThreadLog>)>>,
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
    pub(super) fn for_path(path: PathBuf) -> Arc<Self> {
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

    pub(super) fn new(path: PathBuf) -> Arc<Self> {
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

    pub(super) fn ns(&self, t: Instant) -> i64 {
        match t.checked_duration_since(self.base) {
            Some(d) => d.as_nanos() as i64,
            None => -(self.base.duration_since(t).as_nanos() as i64),
        }
    }

    /// Adds an event of the calling host thread, to its own log (made, with the thread's name,
    /// on its first event). Events of a thread whose thread-locals are being destroyed are
    /// dropped.
    #[inline(always)]
    pub(super) fn push_host(&self, kind: HostKind, ticked: bool, ts: i64, dur: u64, args: &[u64]) {
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
    pub(super) fn push_host_first(&self, kind: HostKind, ticked: bool, ts: i64, dur: u64, args: &[u64]) {
        let _ = LOGS.try_with(|logs| self.log_for(logs).put(kind, ticked, ts, dur, args));
    }

    /// This thread's log in this sink, made on first use; it becomes `LAST`.
    #[cold]
    pub(super) fn log_for<'a>(&self, logs: &'a Logs) -> &'a ThreadLog {
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

    pub(super) fn push(&self, e: Event) {
        crate::util::lock(&self.events).push(e);
    }

    pub(super) fn push_all(&self, events: impl IntoIterator<Item = Event>) {
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
