//! What the scheduling core needs from a queue, and the Vulkan queue that provides it.
//!
//! The core ([`super::core`]) never calls Vulkan itself: it asks a [`Backend`] to submit what was
//! recorded, to wait for a timeline value and to read the counter. [`VulkanBackend`] does that
//! with one command buffer per flush and the device's timeline semaphore; the tests also drive
//! the core with a simulated queue whose timeline they advance.

use crate::commands::{CommandPool, Recording};
use crate::device::Device;
use crate::error::Result;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::Thread;
use std::time::Duration;

/// What one flush produced.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FlushInfo {
    /// The timeline value the submission signals.
    pub value: u64,
    /// Pipeline barriers recorded.
    pub barriers: u64,
    /// Command buffers in the submission.
    pub command_buffers: u64,
}

/// A queue with a timeline.
pub(crate) trait Backend {
    /// Whether work was recorded since the last flush.
    fn has_pending(&self) -> bool;
    /// How many commands were recorded since the last flush.
    fn pending_len(&self) -> usize;
    /// A number that changes whenever something is recorded (commands and host reads).
    fn recorded_count(&self) -> usize;
    /// Submits everything recorded since the last flush in one submission and returns the
    /// value it signals. On error the recorded work is discarded and no value is handed out.
    fn flush(&mut self) -> Result<FlushInfo>;
    /// Starts a wait until the timeline reaches `value` or `timeout` passes, without blocking
    /// the caller. The thread that created the backend is unparked when the wait ends; at most
    /// one wait is outstanding at a time.
    fn begin_wait(&mut self, value: u64, timeout: Option<Duration>);
    /// The outcome of the wait begun last, once it has ended (`None` while it goes on):
    /// `Ok(true)` when the value was reached, `Ok(false)` when the timeout passed.
    fn wait_result(&mut self) -> Option<Result<bool>>;
    /// Reads the counter once and releases what submissions at or below it held.
    fn completed(&mut self) -> Result<u64>;
    /// The device is lost: drop unsubmitted work, and give up on what is in flight. Drivers may
    /// still be executing it (lavapipe's queue thread runs to the end of the command buffer it
    /// is in), so its memory is leaked rather than freed under the driver.
    fn abandon(&mut self);
    /// Waits up to `bound` for everything submitted, then releases it. If the GPU did not
    /// finish, what it may still use is leaked rather than freed under it.
    fn shutdown(&mut self, bound: Duration);
}

/// The outstanding wait, shared by the executor and its wait thread.
#[derive(Default)]
struct WaitState {
    /// A wait asked for and not yet taken by the thread.
    request: Option<(u64, Option<Duration>)>,
    /// The outcome of the last wait, until the executor takes it.
    result: Option<Result<bool>>,
    /// The executor is gone: the thread ends.
    stop: bool,
}

/// A thread that blocks in `vkWaitSemaphores` on the executor's behalf, so that the executor's
/// own thread sleeps in `thread::park`, where both the end of the wait and a waker fired on any
/// other thread reach it at once. Started at the first host wait; ends when the executor is
/// dropped (after the wait it may be in returns; it is never joined, so nothing blocks in drop).
struct WaitThread {
    state: Arc<(Mutex<WaitState>, Condvar)>,
}

impl WaitThread {
    fn start(device: &Device, executor: Thread) -> Result<Self> {
        let state: Arc<(Mutex<WaitState>, Condvar)> = Arc::default();
        let (theirs, device) = (state.clone(), device.clone());
        std::thread::Builder::new()
            .name("vkasync-wait".into())
            .spawn(move || {
                let (lock, cv) = &*theirs;
                loop {
                    let (value, timeout) = {
                        let mut s = lock.lock().unwrap_or_else(|p| p.into_inner());
                        loop {
                            if s.stop {
                                return;
                            }
                            if let Some(r) = s.request.take() {
                                break r;
                            }
                            s = cv.wait(s).unwrap_or_else(|p| p.into_inner());
                        }
                    };
                    let outcome = device.wait(value, timeout);
                    lock.lock().unwrap_or_else(|p| p.into_inner()).result = Some(outcome);
                    // After the lock is released: the executor may run as soon as it wakes.
                    executor.unpark();
                }
            })
            .map_err(|e| crate::Error::SubmitFailed(format!("could not start the wait thread: {e}")))?;
        Ok(WaitThread { state })
    }

    fn begin(&self, value: u64, timeout: Option<Duration>) {
        let (lock, cv) = &*self.state;
        let mut s = lock.lock().unwrap_or_else(|p| p.into_inner());
        s.result = None;
        s.request = Some((value, timeout));
        drop(s);
        cv.notify_one();
    }

    fn result(&self) -> Option<Result<bool>> {
        self.state.0.lock().unwrap_or_else(|p| p.into_inner()).result.take()
    }
}

impl Drop for WaitThread {
    fn drop(&mut self) {
        let (lock, cv) = &*self.state;
        lock.lock().unwrap_or_else(|p| p.into_inner()).stop = true;
        cv.notify_one();
    }
}

/// One Vulkan queue of a [`Device`].
pub(crate) struct VulkanBackend {
    pub device: Device,
    pool: Option<CommandPool>,
    /// Work recorded since the last flush.
    pub pending: Recording,
    /// Submitted recordings, oldest first, holding their buffers and kernels alive.
    in_flight: VecDeque<(u64, Recording)>,
    /// The thread that creates the backend runs the executor; the wait thread unparks it.
    executor: Thread,
    waiter: Option<WaitThread>,
    /// The outcome of a wait that could not be handed to a thread (it failed to start).
    failed_wait: Option<Result<bool>>,
}

impl VulkanBackend {
    pub fn new(device: &Device) -> Result<Self> {
        Ok(VulkanBackend {
            device: device.clone(),
            pool: Some(CommandPool::new(device)?),
            pending: Recording::new(device),
            in_flight: VecDeque::new(),
            executor: std::thread::current(),
            waiter: None,
            failed_wait: None,
        })
    }

    /// Drops the recordings whose value was reached, oldest first.
    fn retire(&mut self, completed: u64) {
        while self.in_flight.front().is_some_and(|(v, _)| *v <= completed) {
            self.in_flight.pop_front();
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
        let pool = self.pool.as_mut().ok_or(crate::Error::DeviceLost)?;
        let cb = pool.begin(&self.device, completed)?;
        let stats = rec.encode(cb);
        pool.end(&self.device, cb)?;
        match self.device.submit(&[cb]) {
            Ok(value) => {
                pool.release(cb, Some(value));
                rec.mark_submitted(value);
                self.in_flight.push_back((value, rec));
                Ok(FlushInfo { value, barriers: stats.barriers, command_buffers: 1 })
            }
            Err(e) => {
                pool.release(cb, None);
                Err(e)
            }
        }
    }

    fn begin_wait(&mut self, value: u64, timeout: Option<Duration>) {
        if self.waiter.is_none() {
            match WaitThread::start(&self.device, self.executor.clone()) {
                Ok(w) => self.waiter = Some(w),
                Err(e) => {
                    self.failed_wait = Some(Err(e));
                    self.executor.unpark();
                    return;
                }
            }
        }
        self.waiter.as_ref().expect("started above").begin(value, timeout);
    }

    fn wait_result(&mut self) -> Option<Result<bool>> {
        if let Some(r) = self.failed_wait.take() {
            return Some(r);
        }
        self.waiter.as_ref().and_then(WaitThread::result)
    }

    fn completed(&mut self) -> Result<u64> {
        let v = self.device.shared.completed_value()?;
        self.retire(v);
        Ok(v)
    }

    fn abandon(&mut self) {
        self.pending = Recording::new(&self.device);
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

    fn shutdown(&mut self, bound: Duration) {
        self.pending = Recording::new(&self.device);
        let last = self.in_flight.back().map_or(0, |(v, _)| *v);
        match self.device.shared.wait(last, Some(bound)) {
            Ok(true) => self.in_flight.clear(),
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
