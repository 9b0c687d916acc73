//! The thread-safe front: a [`Queue`] handle that any thread and any async runtime records
//! into, over the same scheduling core as the native executor.

use super::backend::VulkanBackend;
use super::core::{spawn_driver, DriverThread, Options, QueueCore, Recorded};
use super::{default_options, shared_setters, Ctx, FlushPolicy, Stats};
use crate::error::Result;
use crate::vk::device::Device;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A device queue that any thread can record into and await, under any async runtime.
///
/// `Queue` is `Send + Sync + Clone` (clones share the queue). Each job takes its own
/// [`Ctx`] from [`Queue::context`]; recording methods never block, and waits
/// ([`Ctx::synchronize`], [`Ctx::read`], the crypto functions) are `Send + 'static` futures
/// that work under tokio (multi-thread or current-thread), smol,
/// `futures::executor::block_on` or a plain thread.
///
/// One driver thread per queue waits for the GPU: it waits on one timeline value that covers
/// every awaited submission and wakes every waiter whose value is reached. Work is submitted by
/// group commit: a wait that finds the GPU idle submits what is recorded at once (from the
/// awaiting thread); while a submission runs, work gathers, and the driver submits it in one
/// `vkQueueSubmit` when the GPU is done. See the protocol in [`crate::executor`].
///
/// Dropping the last handle (and the last context) closes the queue: it submits what is
/// recorded, stops and joins the driver thread, and waits for everything in flight before it
/// releases it, at most [`QueueBuilder::shutdown_timeout`] (10 s by default; with the GPU idle
/// it does not wait). So no thread of the queue outlives its last handle. See "Shutdown" in
/// the [protocol](crate::executor).
///
/// ```
/// use vkasync::{kernels, Buffer, Device, Kernel, MemoryKind, Queue};
///
/// let device = Device::new()?;
/// let queue = Queue::new(&device)?;
/// let mix = Kernel::new(&device, &kernels::MIX)?;
/// let threads: Vec<_> = (0..4u32)
///     .map(|t| {
///         let (queue, mix, device) = (queue.clone(), mix.clone(), device.clone());
///         std::thread::spawn(move || {
///             futures::executor::block_on(async move {
///                 let ctx = queue.context();
///                 let buf = Buffer::<u32>::new(&device, 64, MemoryKind::Device)?;
///                 ctx.upload(&buf, &[t; 64])?;
///                 ctx.dispatch(&mix, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[64u32, 1]))?;
///                 ctx.read(&buf).await
///             })
///         })
///     })
///     .collect();
/// for t in threads {
///     assert_eq!(t.join().unwrap()?.len(), 64);
/// }
/// println!("{}", queue.stats());
/// # Ok::<(), vkasync::Error>(())
/// ```
#[derive(Clone)]
pub struct Queue {
    pub(super) inner: Arc<Inner>,
}

/// Closes the queue when the last handle or context goes.
pub(super) struct Inner {
    pub(super) core: Arc<QueueCore<VulkanBackend>>,
    device: Device,
    /// The queue's driver thread, joined when the queue closes.
    driver: Mutex<Option<DriverThread>>,
}

impl Inner {
    /// The first half of closing (see [`QueueCore::close_begin`]): submits what is recorded and
    /// stops the driver, without waiting. `Some` if [`Inner::close_finish`] has work to do.
    pub(super) fn close_begin(&mut self, deadline: Instant) -> Option<Option<DriverThread>> {
        let driver = self.driver.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        self.core.close_begin(driver, Recorded::Submit, deadline).ok()
    }

    /// The second half: joins the driver and waits for the GPU, by `deadline`.
    pub(super) fn close_finish(&self, driver: Option<DriverThread>, deadline: Instant) {
        let _ = self.core.close_finish(driver, deadline);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let deadline = Instant::now() + self.core.options.shutdown;
        if let Some(driver) = self.close_begin(deadline) {
            self.close_finish(driver, deadline);
        }
    }
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

impl Queue {
    /// A queue with the default options.
    pub fn new(device: &Device) -> Result<Self> {
        Self::builder(device).build()
    }

    /// A builder for the options.
    pub fn builder(device: &Device) -> QueueBuilder {
        QueueBuilder { device: device.clone(), options: default_options(), trace: Default::default() }
    }

    /// A new context for one job (each job should have its own; clones share its state).
    pub fn context(&self) -> Ctx {
        Ctx {
            shared: self.inner.core.clone(),
            state: Arc::default(),
            device: self.inner.device.clone(),
            keep: Some(self.inner.clone()),
        }
    }

    /// A context counted as a job in progress of a [`crate::QueueSet`] while it lives.
    pub(crate) fn context_with_load(&self, load: super::set::LoadGuard) -> Ctx {
        Ctx {
            shared: self.inner.core.clone(),
            state: Arc::new(super::core::ContextState { load: Some(load), ..Default::default() }),
            device: self.inner.device.clone(),
            keep: Some(self.inner.clone()),
        }
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// The counters (`tasks_*` stay zero: a queue has no tasks of its own).
    pub fn stats(&self) -> Stats {
        self.inner.core.stats()
    }

    /// Waiter slots held by `synchronize` futures that had to wait (for tests: cancelled
    /// futures free theirs).
    #[doc(hidden)]
    pub fn live_waiters(&self) -> usize {
        self.inner.core.lock().waiter_count()
    }

    /// Submits everything recorded so far now, without waiting.
    pub fn flush(&self) {
        self.inner.core.flush_now();
    }
}

/// Configures a [`Queue`]. A queue always submits by group commit.
#[derive(Debug, Clone)]
pub struct QueueBuilder {
    device: Device,
    options: Options,
    trace: crate::trace::TraceOptions,
}

impl QueueBuilder {
    shared_setters!();

    /// Creates the queue and starts its driver thread.
    pub fn build(self) -> Result<Queue> {
        let backend = VulkanBackend::with_trace(&self.device, &self.trace)?;
        let options = Options { flush: FlushPolicy::GroupCommit, lanes: true, ..self.options };
        let core = QueueCore::new(backend, options);
        let driver = Mutex::new(Some(spawn_driver(&core, "vkasync-queue")?));
        Ok(Queue { inner: Arc::new(Inner { core, device: self.device, driver }) })
    }
}
