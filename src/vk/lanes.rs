//! Queue lanes: a device's submissions spread over several queues of its one queue family, so
//! that one flush's kernels can run beside the next flush's copies, while the runtime still
//! waits on one timeline value.
//!
//! # Protocol
//! A device has `n` lanes ([`crate::DeviceBuilder::queues`], 1 by default). Lane `i` submits
//! to queue `i mod q` of the family (`q`: how many queues it was created with, at most what the
//! family offers) and owns a timeline semaphore of its own. Every submission gets the next value
//! `v` of the device's timeline, as with one queue.
//!
//! - **One lane**: one batch runs the command buffers and signals `v`. Submission order and
//!   the opening barrier of each command buffer order it after earlier work (see
//!   [`crate::record`]).
//! - **Several lanes**: submission `v` goes to lane `v mod n` as one `vkQueueSubmit` of two
//!   batches:
//!   1. waits until the device's timeline reaches `after` (skipped when it has), runs the
//!      command buffers, and signals the lane's next value `l`;
//!   2. waits for the lane's `l` and for the device's `v − 1`, and signals `v`.
//!
//!   `after` is the last submission that wrote a buffer this one reads, or used a buffer this
//!   one writes ([`Ordered::after`]); work that shares nothing overlaps. Batch 2 keeps the
//!   device's timeline rising in order, so reaching `v` still means that every submission up
//!   to `v` completed, on whichever lane: the executor's single wait, the memory pool's reuse
//!   by timeline value and [`crate::Buffer`]'s idleness keep their meaning, and a lane's
//!   writes reach the host through the semaphores' memory dependencies.
//!
//! Values are handed out and both batches submitted under one lock, so no batch waits for a
//! value whose signal is not yet submitted. `after` is read, and the submission's buffers are
//! marked with `v` ([`Ordered::submitted`]), under that lock too: two executors that share
//! buffers on one device always see each other's submissions.

use ash::vk;

/// What a submission tells the lock that orders it (see the module docs).
pub(crate) trait Ordered {
    /// The device timeline value this submission's work must wait for: the last submission that
    /// wrote a buffer it reads or used a buffer it writes. Called under the submit lock, and only
    /// with several lanes.
    fn after(&self, submitted: u64) -> u64;
    /// The submission was made with value `value`: mark its buffers. Called under the lock.
    fn submitted(&mut self, value: u64);
}

/// A submission whose buffers the device does not know (work recorded by hand, timestamp
/// calibration): it waits for everything submitted before it.
pub(crate) struct AfterAll;

impl Ordered for AfterAll {
    fn after(&self, submitted: u64) -> u64 {
        submitted
    }
    fn submitted(&mut self, _value: u64) {}
}

/// One lane: its queue (an index into [`Lanes::queues`]), its timeline and that timeline's last
/// value handed out.
struct Lane {
    queue: usize,
    timeline: vk::Semaphore,
    value: u64,
}

/// The queues and lanes of a device, behind the device's submit lock.
pub(crate) struct Lanes {
    queues: Vec<vk::Queue>,
    /// Empty with one lane (no semaphore of its own: it signals the device's timeline only).
    lanes: Vec<Lane>,
    /// Lane submissions ordered after an earlier one (`after > 0`), and of those the ones whose
    /// batch waited (`after` not known reached): for tests and statistics.
    pub(crate) ordered: u64,
    pub(crate) waited: u64,
}

/// A batch of a lane submission: what it waits for, and what it signals.
struct Batch<'a> {
    waits: [vk::Semaphore; 2],
    wait_values: [u64; 2],
    waiting: usize,
    signal: [vk::Semaphore; 1],
    signal_value: [u64; 1],
    command_buffers: &'a [vk::CommandBuffer],
}

const ALL_COMMANDS: [vk::PipelineStageFlags; 2] =
    [vk::PipelineStageFlags::ALL_COMMANDS, vk::PipelineStageFlags::ALL_COMMANDS];

impl Lanes {
    /// Gets the `queues` created queues of `family` and makes a timeline for each of `lanes`
    /// lanes (none with one lane). On failure destroys what it made.
    pub(crate) fn new(device: &ash::Device, family: u32, queues: u32, lanes: u32) -> crate::Result<Self> {
        let queues = (0..queues)
            // SAFETY: the device was created with `queues` queues of `family`.
            .map(|i| unsafe { device.get_device_queue(family, i) })
            .collect::<Vec<_>>();
        let mut made = Lanes { queues, lanes: Vec::new(), ordered: 0, waited: 0 };
        if lanes > 1 {
            for i in 0..lanes as usize {
                match super::device::create_timeline(device) {
                    Ok(timeline) => made.lanes.push(Lane { queue: i % made.queues.len(), timeline, value: 0 }),
                    Err(e) => {
                        made.destroy(device);
                        return Err(e);
                    }
                }
            }
        }
        Ok(made)
    }

    /// How many lanes submissions rotate over.
    pub(crate) fn count(&self) -> usize {
        self.lanes.len().max(1)
    }

    /// How many distinct queues they use.
    pub(crate) fn queue_count(&self) -> usize {
        self.queues.len()
    }

    /// Destroys the lanes' semaphores.
    ///
    /// # Safety (by contract, not marked)
    /// Only once no submission of a lane is pending (the device is idle or lost).
    pub(crate) fn destroy(&mut self, device: &ash::Device) {
        for lane in self.lanes.drain(..) {
            // SAFETY: the caller guarantees nothing pending waits on or signals it.
            unsafe { device.destroy_semaphore(lane.timeline, None) };
        }
    }

    /// Submits `command_buffers` as the device timeline's value `value` (see the module docs);
    /// `completed` is the device timeline's last value known reached. The caller holds the
    /// submit lock (this takes `&mut self` through it) and hands `value` out only if this
    /// succeeds.
    pub(crate) fn submit(
        &mut self,
        device: &ash::Device,
        timeline: vk::Semaphore,
        value: u64,
        completed: u64,
        command_buffers: &[vk::CommandBuffer],
        order: &dyn Ordered,
    ) -> Result<(), vk::Result> {
        let n = self.lanes.len();
        if n == 0 {
            let batch = Batch {
                waits: [vk::Semaphore::null(); 2],
                wait_values: [0; 2],
                waiting: 0,
                signal: [timeline],
                signal_value: [value],
                command_buffers,
            };
            return self.queue_submit(device, 0, &[batch]);
        }
        let after = order.after(value - 1).min(value - 1);
        let lane = &mut self.lanes[(value % n as u64) as usize];
        let lane_value = lane.value + 1;
        let (lane_timeline, queue) = (lane.timeline, lane.queue);
        let work = Batch {
            waits: [timeline, vk::Semaphore::null()],
            wait_values: [after, 0],
            waiting: usize::from(after > completed),
            signal: [lane_timeline],
            signal_value: [lane_value],
            command_buffers,
        };
        let (waits, wait_values, waiting) = if value > 1 {
            ([lane_timeline, timeline], [lane_value, value - 1], 2)
        } else {
            ([lane_timeline, vk::Semaphore::null()], [lane_value, 0], 1)
        };
        let order_batch =
            Batch { waits, wait_values, waiting, signal: [timeline], signal_value: [value], command_buffers: &[] };
        let waited = work.waiting == 1;
        self.queue_submit(device, queue, &[work, order_batch])?;
        self.lanes[(value % n as u64) as usize].value = lane_value;
        self.ordered += u64::from(after > 0);
        self.waited += u64::from(waited);
        Ok(())
    }

    fn queue_submit(&self, device: &ash::Device, queue: usize, batches: &[Batch<'_>]) -> Result<(), vk::Result> {
        let mut timeline_infos: smallvec::SmallVec<[vk::TimelineSemaphoreSubmitInfo<'_>; 2]> = batches
            .iter()
            .map(|b| {
                vk::TimelineSemaphoreSubmitInfo::default()
                    .wait_semaphore_values(&b.wait_values[..b.waiting])
                    .signal_semaphore_values(&b.signal_value)
            })
            .collect();
        let submits: smallvec::SmallVec<[vk::SubmitInfo<'_>; 2]> = batches
            .iter()
            .zip(timeline_infos.iter_mut())
            .map(|(b, t)| {
                vk::SubmitInfo::default()
                    .wait_semaphores(&b.waits[..b.waiting])
                    .wait_dst_stage_mask(&ALL_COMMANDS[..b.waiting])
                    .command_buffers(b.command_buffers)
                    .signal_semaphores(&b.signal)
                    .push_next(t)
            })
            .collect();
        // SAFETY: the queue is externally synchronised by the submit lock the caller holds; the
        // command buffers are fully recorded and not pending elsewhere (their owners recycle them
        // only after their value is reached); each signalled value is greater than every value
        // signalled before on its semaphore (values are handed out in order under the lock), and
        // every waited value's signal was submitted before (see the module docs).
        unsafe { device.queue_submit(self.queues[queue], &submits, vk::Fence::null()) }
    }
}
