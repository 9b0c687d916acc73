//! The spans of task polls, from one thread-local read when a poll starts and when it ends.

#[allow(unused_imports)]
use super::*;

/// What this thread's executor loop is doing, for its tasks' `poll` spans and their awaits'
/// task ids: one thread-local, read once when a poll starts and once when it ends.
///
/// Consecutive polls share a clock read: the loop runs its ready tasks one after the other, and
/// the end of one poll is the start of the next, until the loop does something else
/// ([`break_polls`]). A poll's span thus includes the few tens of nanoseconds the loop spends
/// between two polls (taking the next task, and storing the output of the last one).
#[derive(Clone, Copy)]
pub(super) struct Polling {
    /// The trace of the executor loop running on this thread (null: none; see [`RunScope`]).
    pub(super) running: *const QueueTrace,
    /// The native task being polled (0: none), and when its poll started ([`QueueTrace::stamp`]).
    pub(super) task: u64,
    pub(super) started: i64,
    /// When the loop's last poll ended, if it has done nothing else since ([`NO_POLL`]
    /// otherwise).
    pub(super) last_end: i64,
}

/// No poll just ended (see [`Polling`]).
pub(super) const NO_POLL: i64 = i64::MIN;

thread_local! {
    pub(super) static POLLING: Cell<Polling> = const {
        Cell::new(Polling { running: std::ptr::null(), task: 0, started: 0, last_end: NO_POLL })
    };
}

/// Marks the trace of the executor whose loop runs on this thread (null: none), for its
/// tasks' `poll` spans: a task reads it instead of holding a reference of its own.
pub(crate) struct RunScope {
    pub(super) prev: Polling,
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
    pub(super) prev: Polling,
    pub(super) task: u64,
    pub(super) started: i64,
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
