//! The task context: a cheap handle through which a task records GPU work and awaits it.

use super::backend::VulkanBackend;
use super::core::{lock, ContextState, QueueCore, SyncFuture};
use crate::error::Result;
use crate::record::recorder::Recorder;
use crate::record::recording::Readback;
use crate::vk::buffer::Buffer;
use crate::vk::device::Device;
use crate::vk::kernel::{Arg, Kernel};
use bytemuck::Pod;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

/// Records GPU work for one task and awaits it. Made by [`crate::Executor::context`] (handed to
/// the closure of [`crate::Executor::spawn_with`]) or by [`crate::Queue::context`]. Clones share
/// the task's state.
///
/// A `Ctx` is `Send + Sync` and its waits are `Send + 'static` futures: a context of a
/// [`crate::Queue`] works from any thread and under any async runtime (tokio, smol,
/// `futures::executor::block_on`).
///
/// Recording methods copy what they need at once (e.g. the upload's host data) and never block.
/// [`Ctx::synchronize`] resolves when all work this context recorded before the call is done.
#[derive(Clone)]
pub struct Ctx {
    pub(crate) shared: Arc<QueueCore<VulkanBackend>>,
    pub(crate) state: Arc<ContextState>,
    /// Keeps a [`crate::Queue`] open while its contexts live (none for an executor's).
    pub(crate) keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
    pub(crate) device: Device,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").finish_non_exhaustive()
    }
}

/// The future returned by [`Ctx::synchronize`].
#[must_use = "futures do nothing unless awaited"]
pub struct Synchronize {
    inner: SyncFuture<VulkanBackend>,
}

impl std::fmt::Debug for Synchronize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Synchronize").finish_non_exhaustive()
    }
}

impl Future for Synchronize {
    type Output = Result<()>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.inner).poll(cx)
    }
}

impl Ctx {
    /// Records into the executor's recording epoch (see [`QueueCore::record`]).
    fn record<R>(&self, f: impl FnOnce(&mut crate::record::recording::Recording) -> Result<R>) -> Result<R> {
        self.shared.record(&self.state, |b| f(&mut b.pending))
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Uploads `data` into the start of `dst`.
    pub fn upload<T: Pod>(&self, dst: &Buffer<T>, data: &[T]) -> Result<()> {
        self.upload_at(dst, 0, data)
    }

    /// Uploads `data` into `dst` starting at element `offset`.
    pub fn upload_at<T: Pod>(&self, dst: &Buffer<T>, offset: usize, data: &[T]) -> Result<()> {
        // Staging (allocation and host copy) happens before the queue's lock is taken.
        if let Some(staged) = crate::record::recording::stage_upload(&self.device, dst, offset, data)? {
            return self.record(|r| {
                r.push_staged_upload(staged);
                Ok(())
            });
        }
        self.record(|r| r.upload(dst, offset, data))
    }

    /// Copies all of `src` to `dst` (same length).
    pub fn copy<T: Pod>(&self, src: &Buffer<T>, dst: &Buffer<T>) -> Result<()> {
        Recorder::copy(&mut self.clone(), src, dst)
    }

    /// Copies `len` elements from `src[src_offset..]` to `dst[dst_offset..]`.
    pub fn copy_region<T: Pod>(
        &self,
        src: &Buffer<T>,
        src_offset: usize,
        dst: &Buffer<T>,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.record(|r| r.copy_region(src, src_offset, dst, dst_offset, len))
    }

    /// Records a dispatch (checked like [`crate::CommandList`]'s).
    pub fn dispatch(&self, kernel: &Kernel, groups: [u32; 3], args: &[Arg], push: &[u8]) -> Result<()> {
        self.record(|r| r.dispatch(kernel, groups, args, push))
    }

    /// Arranges for `src` to be readable after the work recorded so far; await
    /// [`Ctx::synchronize`] before [`Readback::into_vec`], or use [`Ctx::read`].
    pub fn read_back<T: Pod>(&self, src: &Buffer<T>) -> Result<Readback<T>> {
        self.record(self.read_back_step(src)?)
    }

    /// The read-back of `src` as a recording step. Its staging buffer, if it needs one, is
    /// allocated now, before the queue's lock is taken.
    fn read_back_step<'s, T: Pod>(
        &self,
        src: &'s Buffer<T>,
    ) -> Result<impl FnOnce(&mut crate::record::recording::Recording) -> Result<Readback<T>> + 's> {
        let staging = crate::record::recording::stage_read_back(&self.device, src)?;
        Ok(move |r: &mut crate::record::recording::Recording| match staging {
            Some(staging) => Ok(r.push_read_back(src, staging)),
            None => r.read_back(src),
        })
    }

    /// Adds `item` to the coalesced work of `kind` in the recording epoch (see
    /// [`crate::record::batch`]): every task's items of one kind go out as one encoding in the next
    /// flush. Await [`Ctx::synchronize`] for its completion.
    pub fn batch<K: crate::record::batch::BatchKind>(&self, kind: &Arc<K>, item: K::Item) -> Result<()> {
        self.record(|r| r.push_batch(kind, item))
    }

    /// Records a GPU timestamp (see [`Recorder::write_timestamp`]).
    pub fn write_timestamp(&self, ts: &crate::Timestamps, index: u32) -> Result<()> {
        self.record(|r| r.write_timestamp(ts, index))
    }

    /// Resolves once every command this context recorded before the call has completed on the
    /// GPU. Resolves at once if it recorded nothing (or all of it is known complete).
    pub fn synchronize(&self) -> Synchronize {
        let batch = lock(&self.state.last).clone();
        let ctx = self.trace_id();
        Synchronize { inner: SyncFuture::new(self.shared.clone(), batch, ctx) }
    }

    #[cfg(feature = "trace")]
    /// The GPU time of the commands this context recorded, once their submissions completed
    /// (await [`Ctx::synchronize`] first). Each command's time runs from the completion of the
    /// command before it on the queue to its own (see [`crate::trace`]), so the times of all
    /// contexts add up to the GPU's busy time; a copy that the flush merged with other
    /// contexts' copies is shared by bytes; coalesced work ([`crate::record::batch`]) counts for no
    /// context. `None` unless GPU timing is on ([`crate::ExecutorBuilder::gpu_timing`],
    /// [`crate::QueueBuilder::gpu_timing`]; a trace alone does not turn it on).
    ///
    /// ```
    /// use vkasync::{kernels, Buffer, Device, Executor, Kernel, MemoryKind};
    /// let device = Device::new()?;
    /// let exec = Executor::builder(&device).gpu_timing(true).build()?;
    /// let mix = Kernel::new(&device, &kernels::MIX)?;
    /// let (ctx, d) = (exec.context(), device.clone());
    /// let t = exec.block_on(async move {
    ///     let buf = Buffer::<u32>::new(&d, 1024, MemoryKind::Device)?;
    ///     ctx.dispatch(&mix, [16, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[1024u32, 1]))?;
    ///     ctx.synchronize().await?;
    ///     Ok::<_, vkasync::Error>(ctx.gpu_time())
    /// })?;
    /// assert!(t.is_some());
    /// # Ok::<(), vkasync::Error>(())
    /// ```
    pub fn gpu_time(&self) -> Option<std::time::Duration> {
        if !self.shared.timing {
            return None;
        }
        Some(std::time::Duration::from_nanos(self.state.clock().gpu_ns.load(std::sync::atomic::Ordering::Relaxed)))
    }

    /// Allocates a buffer under the queue's memory bound
    /// ([`crate::ExecutorBuilder::memory_bound`], [`crate::QueueBuilder::memory_bound`]): past
    /// the bound it waits until enough memory is freed (buffers dropped whose GPU work has
    /// completed; recorded work is submitted meanwhile), instead of failing or growing without
    /// bound. Without a bound it is [`Buffer::new`]. A buffer larger than the bound is
    /// [`Error::TooLarge`](crate::Error::TooLarge).
    ///
    /// It never waits for memory that cannot come back: it fails with
    /// [`Error::MemoryBound`](crate::Error::MemoryBound) at once when this job's own live
    /// buffers (allocated through this context or its clones, not yet dropped) plus the request
    /// exceed the bound, and as soon as the whole bound is held by jobs that all wait for more
    /// while nothing in flight will free any (every such wait then fails). Dropped buffers whose
    /// GPU work is still running do come back, so a request waits for them. Bytes are charged
    /// to the job that allocated them, also after the buffer is handed to another job.
    ///
    /// ```
    /// use vkasync::{Device, Error, Executor, MemoryKind};
    /// let device = Device::new()?;
    /// let exec = Executor::builder(&device).memory_bound(1 << 20).build()?;
    /// let ctx = exec.context();
    /// let err = exec.block_on(async move {
    ///     let _held = ctx.buffer::<u8>(600 << 10, MemoryKind::Device).await?;
    ///     ctx.buffer::<u8>(600 << 10, MemoryKind::Device).await.map(drop)
    /// });
    /// assert!(matches!(err, Err(Error::MemoryBound { held, .. }) if held == 600 << 10));
    /// # Ok::<(), vkasync::Error>(())
    /// ```
    pub async fn buffer<T: Pod>(&self, len: usize, kind: crate::vk::buffer::MemoryKind) -> Result<Buffer<T>> {
        let Some(budget) = self.shared.budget.clone() else {
            return Buffer::new(&self.device, len, kind);
        };
        let bytes = (len as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        if bytes > budget.limit {
            return Err(crate::Error::TooLarge {
                what: "buffer under the queue's memory bound",
                requested: bytes,
                limit: budget.limit,
            });
        }
        let mut request = budget.request(self.state.id(), bytes);
        let granted = std::future::poll_fn(|cx| {
            let p = request.poll(cx);
            if p.is_pending() {
                // Memory comes back when in-flight work completes: let the driver submit and
                // wait for it.
                self.shared.nudge_driver();
            }
            p
        })
        .await?;
        let mut buf = Buffer::new(&self.device, len, kind)?;
        // The lease is released after the memory returns to the pool; the holding (this job's
        // live bytes) when the handle is dropped.
        let _ = buf.raw.attachment.set(Box::new(granted.lease));
        buf.hold = Some(Box::new(granted.holding));
        Ok(buf)
    }

    /// Reads `src` back after the work recorded so far: read-back, synchronize, copy out.
    ///
    /// Records the read-back and starts the wait under one hold of the queue's lock.
    pub async fn read<T: Pod>(&self, src: &Buffer<T>) -> Result<Vec<T>> {
        let mut step = Some(self.read_back_step(src)?);
        let ctx = self.trace_id();
        let mut rb = None;
        let mut wait: Option<SyncFuture<VulkanBackend>> = None;
        std::future::poll_fn(|cx| {
            if let Some(w) = &mut wait {
                return Pin::new(w).poll(cx);
            }
            let step = step.take().expect("the first poll records");
            let (r, w, poll) = self.shared.record_and_wait(&self.state, ctx, |b| step(&mut b.pending), cx)?;
            rb = Some(r);
            wait = Some(w);
            poll
        })
        .await?;
        rb.expect("recorded before the wait ended").into_vec()
    }

    #[cfg_attr(not(feature = "crypto"), allow(dead_code))] // used by the crypto module
    /// Adds `item` to the coalesced work of `kind` (as [`Ctx::batch`]) and waits for the flush
    /// that carries it. Resolves early, without the GPU, once `settled()` says the item needs
    /// no GPU wait (it ran on the host, or its batch failed).
    ///
    /// Both happen at the first poll. On a [`crate::Queue`]'s context, through the thread's lane
    /// (without the queue's lock) while the GPU has no room for another submission; otherwise,
    /// and always on an executor's context, under one hold of the lock (as in [`Ctx::read`]),
    /// which on a queue submits at once if the GPU is idle. For the executor's one thread that
    /// is one lock and one epoch lookup less per record; measured on H100 hosts it stays inside
    /// the spread (0.88–0.96× once; 0.84, 1.11 and 1.09× in three rounds of 2026-12-06, where two
    /// builds of the same executor code differ by 0.80–1.13×), and it leaves one path for both fronts.
    ///
    /// A hand-written future rather than an `async fn`: an `async fn` keeps its argument `item`
    /// and the local it is moved into side by side in its state, and a task's future holds
    /// this one inside the callers' (each caller's state is built by moving the one below it).
    pub(crate) fn batch_and_settle<'a, K: crate::record::batch::BatchKind, S: Fn() -> bool>(
        &'a self,
        kind: &'a Arc<K>,
        item: K::Item,
        settled: S,
    ) -> BatchAndSettle<'a, K, S> {
        BatchAndSettle { ctx: self, kind, step: Step::Item(item), settled }
    }

    /// The context's id in the queue's trace (0 when it is not traced), for its awaits.
    fn trace_id(&self) -> u64 {
        if self.shared.trace.is_some() {
            self.state.id()
        } else {
            0
        }
    }

    /// Submits everything recorded so far by all tasks now, without waiting.
    pub fn flush(&self) {
        self.shared.flush_now();
    }

    /// A new context with its own state (for a child task).
    pub fn fork(&self) -> Ctx {
        Ctx { shared: self.shared.clone(), state: Arc::default(), device: self.device.clone(), keep: self.keep.clone() }
    }
}

impl Recorder for Ctx {
    fn device(&self) -> &Device {
        &self.device
    }
    fn upload_at<T: Pod>(&mut self, dst: &Buffer<T>, offset: usize, data: &[T]) -> Result<()> {
        Ctx::upload_at(self, dst, offset, data)
    }
    fn copy_region<T: Pod>(
        &mut self,
        src: &Buffer<T>,
        src_offset: usize,
        dst: &Buffer<T>,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        Ctx::copy_region(self, src, src_offset, dst, dst_offset, len)
    }
    fn dispatch(&mut self, kernel: &Kernel, groups: [u32; 3], args: &[Arg], push: &[u8]) -> Result<()> {
        Ctx::dispatch(self, kernel, groups, args, push)
    }
    fn read_back<T: Pod>(&mut self, src: &Buffer<T>) -> Result<Readback<T>> {
        Ctx::read_back(self, src)
    }
    fn write_timestamp(&mut self, ts: &crate::Timestamps, index: u32) -> Result<()> {
        Ctx::write_timestamp(self, ts, index)
    }
    fn batch<K: crate::record::batch::BatchKind>(&mut self, kind: &Arc<K>, item: K::Item) -> Result<()> {
        Ctx::batch(self, kind, item)
    }
}

/// The future of [`Ctx::batch_and_settle`]: the item until its first poll records it, then the
/// wait for the flush that carries it.
pub(crate) struct BatchAndSettle<'a, K: crate::record::batch::BatchKind, S> {
    ctx: &'a Ctx,
    kind: &'a Arc<K>,
    step: Step<K::Item>,
    settled: S,
}

/// Where a [`BatchAndSettle`] is. The item and the wait never live at once, so they share
/// their bytes: the wait's bytes are saved in every task that awaits a coalesced item.
enum Step<I> {
    Item(I),
    Wait(SyncFuture<VulkanBackend>),
    Done,
}

// No field is pinned: the wait is `Unpin`, and the item is moved out by value.
impl<K: crate::record::batch::BatchKind, S> Unpin for BatchAndSettle<'_, K, S> {}

impl<K: crate::record::batch::BatchKind, S: Fn() -> bool> BatchAndSettle<'_, K, S> {
    /// Records the item and starts its wait: on a queue's context through the thread's lane
    /// while the GPU is busy; otherwise (always on an executor's) under one hold of the lock,
    /// which refuses a kind of another device (and, on a queue, submits at once).
    fn record(&mut self, item: K::Item, cx: &mut TaskContext<'_>) -> Result<Poll<Result<()>>> {
        let ctx = self.ctx;
        let id = ctx.trace_id();
        let same_device = self.kind.device().is_none_or(|d| d.same_device(&ctx.device));
        let laned = if same_device && ctx.keep.is_some() {
            ctx.shared.batch_in_lane(&ctx.state, id, self.kind, item, cx)
        } else {
            Err(item)
        };
        let (wait, poll) = match laned {
            Ok(laned) => laned,
            Err(item) => {
                let kind = self.kind;
                let ((), w, poll) =
                    ctx.shared.record_and_wait(&ctx.state, id, |b| b.pending.push_batch(kind, item), cx)?;
                (w, poll)
            }
        };
        self.step = Step::Wait(wait);
        Ok(poll)
    }
}

impl<K: crate::record::batch::BatchKind, S: Fn() -> bool> Future for BatchAndSettle<'_, K, S> {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        // A waiting future is polled in place; only the first poll moves the item out. An item
        // already settled (its part of a split flush completed before the flush's last part,
        // see `QueueCore::part_wakers`) ends without polling the wait, which would take the
        // queue's lock to wait on for the flush's last part.
        let poll = if let Step::Wait(w) = &mut this.step {
            if (this.settled)() {
                return w.settled_early();
            }
            Pin::new(w).poll(cx)
        } else {
            match std::mem::replace(&mut this.step, Step::Done) {
                Step::Item(item) => match this.record(item, cx) {
                    Ok(poll) => poll,
                    Err(e) => return Poll::Ready(Err(e)),
                },
                _ => return Poll::Ready(Ok(())),
            }
        };
        match poll {
            Poll::Pending if (this.settled)() => Poll::Ready(Ok(())),
            other => other,
        }
    }
}
