//! Several GPUs behind one handle: [`QueueSet`].

use super::{Ctx, Queue, Stats};
use crate::error::{Error, Result};
use crate::vk::device::Device;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// One [`Queue`] per device behind one `Send + Sync + Clone` handle, placing each job on one
/// of them.
///
/// # Placement: the least-loaded queue
/// [`QueueSet::context`] gives the job a context of the queue with the fewest jobs in progress
/// (contexts alive), starting the scan at the next queue in turn so that ties go round-robin.
/// Round-robin alone would hand a slower or busier device as many jobs as a fast idle one;
/// counting live contexts adapts to that at the cost of one atomic add per job and one per
/// context dropped, and needs no timing. A job stays on its queue: its buffers and kernels
/// belong to that device ([`Ctx::device`]), and [`PerDevice`] finds a per-device object (a
/// kernel, a [`crate::crypto::Crypto`]) for it.
///
/// # Several queues on one GPU
/// A set over several logical devices of one GPU (`Device::new()` called more than once) gives
/// each its own queue, lock and driver thread. One [`Queue`] that many threads record into is
/// bound by its lock before the GPU is busy: on an H200 with 16 tokio workers, three queues ran
/// small upload, dispatch and read-back jobs about 1.7× faster than one (`BENCHMARKS.md`,
/// `b62c01b`). Each device has its own memory, so a job's buffers come from its context's
/// device.
///
/// # Waiting
/// Each device keeps its own queue, timeline semaphore and driver thread (Vulkan has no wait
/// across two devices): every flush still ends in one wait on its own device, and a job waits
/// only for its own device's work.
///
/// ```
/// use vkasync::{kernels, Buffer, Device, Kernel, MemoryKind, QueueSet};
///
/// // Two devices (on a one-GPU machine, two logical devices of the same GPU).
/// let devices = [Device::new()?, Device::new()?];
/// let set = QueueSet::new(&devices)?;
/// let mix = set.per_device(|d| Kernel::new(d, &kernels::MIX))?;
/// let results: Vec<_> = (0..8u32)
///     .map(|i| {
///         let ctx = set.context();
///         let mix = mix.get(ctx.device()).unwrap().clone();
///         futures::executor::block_on(async move {
///             let buf = Buffer::<u32>::new(ctx.device(), 64, MemoryKind::Device)?;
///             ctx.upload(&buf, &[i; 64])?;
///             ctx.dispatch(&mix, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[64u32, 1]))?;
///             ctx.read(&buf).await
///         })
///     })
///     .collect::<Result<_, _>>()?;
/// assert_eq!(results.len(), 8);
/// # Ok::<(), vkasync::Error>(())
/// ```
#[derive(Clone)]
pub struct QueueSet {
    inner: Arc<SetInner>,
}

struct SetInner {
    queues: Vec<Queue>,
    /// Jobs in progress (live contexts) per queue.
    load: Vec<Arc<AtomicUsize>>,
    /// Where the next scan starts.
    next: AtomicUsize,
}

impl Drop for SetInner {
    /// Closes the queues of which this set holds the last handle all together, within one
    /// shutdown timeout (the longest of theirs) instead of one after another.
    fn drop(&mut self) {
        let mut closing = Vec::new();
        let mut deadline = std::time::Instant::now();
        for q in self.queues.drain(..) {
            if let Some(mut inner) = Arc::into_inner(q.inner) {
                let d = std::time::Instant::now() + inner.core.options.shutdown;
                deadline = deadline.max(d);
                let driver = inner.close_begin(d);
                closing.push((inner, driver));
            }
        }
        for (inner, driver) in &mut closing {
            if let Some(driver) = driver.take() {
                inner.close_finish(driver, deadline);
            }
        }
    }
}

impl std::fmt::Debug for QueueSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSet").field("queues", &self.inner.queues.len()).field("load", &self.load()).finish()
    }
}

/// Counts a context as a job in progress on its queue until its last clone is dropped.
pub(crate) struct LoadGuard(Arc<AtomicUsize>);

impl Drop for LoadGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl QueueSet {
    /// A queue with the default options on each device. [`Error::InvalidArgument`] if
    /// `devices` is empty or names one device twice.
    pub fn new(devices: &[Device]) -> Result<Self> {
        Self::from_queues(devices.iter().map(Queue::new).collect::<Result<_>>()?)
    }

    /// A set over queues built with their own options ([`Queue::builder`]), one per device.
    pub fn from_queues(queues: Vec<Queue>) -> Result<Self> {
        if queues.is_empty() {
            return Err(Error::InvalidArgument("a queue set needs at least one queue".into()));
        }
        for (i, q) in queues.iter().enumerate() {
            if queues[..i].iter().any(|p| p.device().same_device(q.device())) {
                return Err(Error::InvalidArgument("a queue set holds one queue per device".into()));
            }
        }
        let load = queues.iter().map(|_| Arc::new(AtomicUsize::new(0))).collect();
        Ok(QueueSet { inner: Arc::new(SetInner { queues, load, next: AtomicUsize::new(0) }) })
    }

    /// A context for one job, on the queue with the fewest jobs in progress.
    pub fn context(&self) -> Ctx {
        let n = self.inner.queues.len();
        let start = self.inner.next.fetch_add(1, Ordering::Relaxed) % n;
        let pick = (0..n)
            .map(|k| (start + k) % n)
            .min_by_key(|&i| self.inner.load[i].load(Ordering::Relaxed))
            .unwrap_or(start);
        self.context_on(pick).expect("an index of the set")
    }

    /// A context on queue `index` (`None` past the end).
    pub fn context_on(&self, index: usize) -> Option<Ctx> {
        let queue = self.inner.queues.get(index)?;
        let load = &self.inner.load[index];
        load.fetch_add(1, Ordering::Relaxed);
        Some(queue.context_with_load(LoadGuard(load.clone())))
    }

    /// The queues, in the order of the devices given.
    pub fn queues(&self) -> &[Queue] {
        &self.inner.queues
    }

    /// Jobs in progress (live contexts) per queue.
    pub fn load(&self) -> Vec<usize> {
        self.inner.load.iter().map(|l| l.load(Ordering::Relaxed)).collect()
    }

    /// Each queue's counters.
    pub fn stats(&self) -> Vec<Stats> {
        self.inner.queues.iter().map(Queue::stats).collect()
    }

    /// Makes one `T` per device (a kernel, a [`crate::crypto::Crypto`]), to look up by a
    /// context's device.
    pub fn per_device<T>(&self, mut make: impl FnMut(&Device) -> Result<T>) -> Result<PerDevice<T>> {
        let items =
            self.inner.queues.iter().map(|q| Ok((q.device().clone(), make(q.device())?))).collect::<Result<_>>()?;
        Ok(PerDevice { items })
    }
}

/// One `T` per device of a [`QueueSet`] (see [`QueueSet::per_device`]).
#[derive(Debug, Clone)]
pub struct PerDevice<T> {
    items: Vec<(Device, T)>,
}

impl<T> PerDevice<T> {
    /// The `T` of `device`; [`Error::InvalidArgument`] for a device outside the set.
    pub fn get(&self, device: &Device) -> Result<&T> {
        self.items
            .iter()
            .find(|(d, _)| d.same_device(device))
            .map(|(_, t)| t)
            .ok_or_else(|| Error::InvalidArgument("the device is not one of this set's".into()))
    }

    /// Every device's `T`.
    pub fn iter(&self) -> impl Iterator<Item = (&Device, &T)> {
        self.items.iter().map(|(d, t)| (d, t))
    }
}
