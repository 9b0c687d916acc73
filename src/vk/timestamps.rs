//! GPU timestamps, for measuring kernel time on the device itself.

use crate::error::{map_oom, map_oom_and_lost, Error, Result};
use crate::vk::device::Device;
use ash::vk;
use std::sync::Arc;

pub(crate) struct RawQueryPool {
    pub device: Device,
    pub pool: vk::QueryPool,
    pub count: u32,
}

impl Drop for RawQueryPool {
    fn drop(&mut self) {
        // SAFETY: every recorded timestamp holds an Arc to this pool until its submission
        // completes, so no pending command buffer uses it.
        unsafe { self.device.raw().destroy_query_pool(self.pool, None) };
    }
}

/// A set of GPU timestamps. Record them with [`crate::Recorder::write_timestamp`]; read them once
/// the work completed.
///
/// A timestamp orders like a fence among the recorded commands: everything recorded before it
/// completes before it is written, and nothing recorded after it starts before.
///
/// ```no_run
/// use vkasync::{CommandList, Device, Recorder, Timestamps};
/// let device = Device::new()?;
/// let ts = Timestamps::new(&device, 2)?;
/// let mut cmds = CommandList::new(&device);
/// cmds.write_timestamp(&ts, 0)?;
/// // ... dispatches ...
/// cmds.write_timestamp(&ts, 1)?;
/// cmds.submit_and_wait()?;
/// println!("{:.1} µs on the GPU", ts.elapsed_ns(0, 1)? / 1e3);
/// # Ok::<(), vkasync::Error>(())
/// ```
#[derive(Clone)]
pub struct Timestamps {
    pub(crate) raw: Arc<RawQueryPool>,
}

impl std::fmt::Debug for Timestamps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timestamps").field("count", &self.raw.count).finish()
    }
}

impl Timestamps {
    /// Writes timestamp `index` (reset on the host before) in a submission of its own and
    /// waits for it: how the trace relates the GPU's clock to the host's.
    pub(crate) fn write_alone(&self, index: u32) -> Result<()> {
        let device = &self.raw.device;
        if index >= self.raw.count {
            return Err(Error::InvalidArgument(format!("timestamp {index} of a pool of {}", self.raw.count)));
        }
        let mut pool = crate::vk::command_pool::CommandPool::new(device.raw(), device.queue_family())?;
        let cb = pool.begin(device.raw(), 0)?;
        // SAFETY: `cb` is recording; the query pool is live (held by `self`) and `index` is in
        // range.
        unsafe { device.raw().cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, self.raw.pool, index) };
        pool.end(device.raw(), cb)?;
        let value = device.submit(&[cb])?;
        pool.release(cb, Some(value));
        match device.wait(value, None) {
            Ok(_) => {
                pool.destroy(device.raw());
                Ok(())
            }
            // The GPU may still run the command buffer: the pool is leaked, not destroyed.
            Err(e) => Err(e),
        }
    }

    /// A pool of `count` timestamps, all reset. [`Error::Unsupported`] if the queue cannot write
    /// timestamps or the device lacks `hostQueryReset`.
    pub fn new(device: &Device, count: u32) -> Result<Self> {
        if count == 0 {
            return Err(Error::ZeroSize("timestamp pool"));
        }
        if !device.limits().timestamps {
            return Err(Error::Unsupported {
                device: device.info().name.clone(),
                missing: "timestamps on the compute queue with hostQueryReset".into(),
            });
        }
        let info = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(count);
        // SAFETY: the device is live and supports timestamp queries (checked above).
        let pool = unsafe { device.raw().create_query_pool(&info, None) }.map_err(map_oom("vkCreateQueryPool"))?;
        let t = Timestamps { raw: Arc::new(RawQueryPool { device: device.clone(), pool, count }) };
        // SAFETY: the pool is new and unused; hostQueryReset is enabled (checked above).
        unsafe { device.raw().reset_query_pool(pool, 0, count) };
        Ok(t)
    }

    /// How many timestamps the pool holds.
    pub fn len(&self) -> u32 {
        self.raw.count
    }

    /// Always false: a pool holds at least one timestamp.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The raw tick values; [`Error::NotReady`] if any was not written yet.
    pub fn ticks(&self) -> Result<Vec<u64>> {
        self.range(0, self.raw.count)
    }

    fn range(&self, first: u32, count: u32) -> Result<Vec<u64>> {
        if first.checked_add(count).is_none_or(|end| end > self.raw.count) {
            return Err(Error::InvalidArgument(format!("timestamps {first}..{} of {}", first + count, self.raw.count)));
        }
        let mut out = vec![[0u64; 2]; count as usize];
        // SAFETY: the pool is live and the range is inside it; each entry has room for the value
        // and its availability.
        let r = unsafe {
            self.raw.device.raw().get_query_pool_results(
                self.raw.pool,
                first,
                &mut out,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
            )
        };
        match r {
            Ok(()) | Err(vk::Result::NOT_READY) => {}
            Err(e) => return Err(map_oom_and_lost("vkGetQueryPoolResults")(e)),
        }
        if out.iter().any(|v| v[1] == 0) {
            return Err(Error::NotReady);
        }
        Ok(out.into_iter().map(|v| v[0]).collect())
    }

    /// Nanoseconds between timestamps `a` and `b`.
    pub fn elapsed_ns(&self, a: u32, b: u32) -> Result<f64> {
        let (ta, tb) = (self.range(a, 1)?[0], self.range(b, 1)?[0]);
        Ok(tb.wrapping_sub(ta) as f64 * self.raw.device.limits().timestamp_period_ns as f64)
    }

    /// Resets every timestamp from the host, for reuse. The work that wrote them must be complete.
    pub fn reset(&self) {
        // SAFETY: hostQueryReset is enabled; the caller guarantees no pending work uses the pool
        // (a pending command buffer holds the pool's Arc, so at worst it is reset early and reads
        // give NotReady, which is still memory-safe).
        unsafe { self.raw.device.raw().reset_query_pool(self.raw.pool, 0, self.raw.count) };
    }
}
