//! The blocking path: [`CommandList`] records like a task and submits with one
//! `vkQueueSubmit`, then blocks until the GPU is done (the naive pattern the executor improves
//! on).

use crate::error::Result;
use crate::record::batch::BatchKind;
use crate::record::recording::Recording;
use crate::vk::command_pool::CommandPool;
use crate::vk::device::Device;
use std::sync::Arc;

/// Records GPU work for the blocking path: commands are submitted together by
/// [`CommandList::submit_and_wait`], which blocks until the GPU is done.
///
/// This is the naive pattern (one submit and one wait per call) that the executor improves on;
/// it is also the simplest way to run a kernel once.
///
/// ```no_run
/// use vkasync::{kernels, Buffer, CommandList, Device, Kernel, MemoryKind, Recorder};
/// let device = Device::new()?;
/// let mix = Kernel::new(&device, &kernels::MIX)?;
/// let data: Vec<u32> = (0..1000).collect();
/// let buf = Buffer::<u32>::new(&device, data.len(), MemoryKind::Device)?;
/// let mut cmds = CommandList::new(&device);
/// cmds.upload(&buf, &data)?;
/// cmds.dispatch(&mix, [mix.groups_for(1000), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[1000u32, 1]))?;
/// let result = cmds.read_back(&buf)?;
/// cmds.submit_and_wait()?;
/// let out: Vec<u32> = result.into_vec()?;
/// # Ok::<(), vkasync::Error>(())
/// ```
pub struct CommandList {
    pub(super) rec: Recording,
}

impl std::fmt::Debug for CommandList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandList").field("ops", &self.rec.len()).finish()
    }
}

impl CommandList {
    /// An empty list for `device`.
    pub fn new(device: &Device) -> Self {
        CommandList { rec: Recording::new(device) }
    }

    /// The number of GPU commands (and batch items) recorded.
    pub fn len(&self) -> usize {
        self.rec.len()
    }

    /// Adds `item` to the coalesced work of `kind` (see [`crate::record::batch`]); it is encoded with
    /// the other items of its kind when the list is submitted.
    pub fn batch<K: BatchKind>(&mut self, kind: &Arc<K>, item: K::Item) -> Result<()> {
        self.rec.push_batch(kind, item)
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.rec.is_empty()
    }

    /// Submits everything in one `vkQueueSubmit` and blocks on the timeline semaphore until the
    /// GPU is done. Returns the submission's timeline value.
    ///
    /// The list keeps every buffer and kernel its commands use alive until the wait returns, so
    /// buffers the caller dropped after recording (a staging copy, a key or index buffer made by a
    /// helper) are not destroyed while the GPU still uses them.
    pub fn submit_and_wait(mut self) -> Result<u64> {
        let device = self.rec.device.clone();
        let value = self.submit_inner(&device)?;
        match device.wait(value, None) {
            Ok(_) => Ok(value),
            Err(e) => {
                // The GPU may still use the resources: leak them rather than destroy them in
                // use. That holds after device loss too: lavapipe's queue thread finishes the
                // command buffer it is running, and freeing under it corrupts memory.
                std::mem::forget(self);
                Err(e)
            }
        }
    }

    fn submit_inner(&mut self, device: &Device) -> Result<u64> {
        self.rec.encode_batches();
        if self.rec.is_empty() {
            // Nothing for the GPU (batches computed on the host, or nothing recorded).
            self.rec.mark_nothing_to_submit();
            return Ok(device.last_submitted());
        }
        let completed = device.completed_value()?;
        let mut guard = device.blocking_pool();
        if guard.is_none() {
            *guard = Some(CommandPool::new(device.raw(), device.queue_family())?);
        }
        let pool = guard.as_mut().expect("just created");
        let cb = pool.begin(device.raw(), completed)?;
        self.rec.encode(cb, None);
        pool.end(device.raw(), cb)?;
        match device.submit_ordered(&[cb], &mut self.rec) {
            Ok((value, _)) => {
                pool.release(cb, Some(value));
                Ok(value)
            }
            Err(e) => {
                pool.release(cb, None);
                Err(e)
            }
        }
    }
}
