//! Command buffers recycled by timeline value: a submitted buffer is reused once the device's
//! timeline has reached the value its submission signals, never before.

use crate::error::{map_oom, Result};
use ash::vk;
use std::collections::VecDeque;

/// A command pool with command buffers recycled by timeline value.
pub(crate) struct CommandPool {
    pool: vk::CommandPool,
    free: Vec<vk::CommandBuffer>,
    /// Submitted command buffers, oldest first, with their timeline values.
    in_flight: VecDeque<(u64, vk::CommandBuffer)>,
}

impl CommandPool {
    /// A pool for queue family `family` of `device`.
    pub fn new(device: &ash::Device, family: u32) -> Result<Self> {
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER | vk::CommandPoolCreateFlags::TRANSIENT);
        // SAFETY: the device is live.
        let pool = unsafe { device.create_command_pool(&info, None) }.map_err(map_oom("vkCreateCommandPool"))?;
        Ok(CommandPool { pool, free: Vec::new(), in_flight: VecDeque::new() })
    }

    /// A command buffer in the recording state. Buffers whose value is `<= completed` are reused.
    pub fn begin(&mut self, device: &ash::Device, completed: u64) -> Result<vk::CommandBuffer> {
        while self.in_flight.front().is_some_and(|(v, _)| *v <= completed) {
            let (_, cb) = self.in_flight.pop_front().expect("checked non-empty");
            self.free.push(cb);
        }
        let d = device;
        let cb = match self.free.pop() {
            Some(cb) => cb,
            None => {
                let info = vk::CommandBufferAllocateInfo::default()
                    .command_pool(self.pool)
                    .level(vk::CommandBufferLevel::PRIMARY)
                    .command_buffer_count(1);
                // SAFETY: the pool is live and externally synchronised by `&mut self`.
                unsafe { d.allocate_command_buffers(&info) }.map_err(map_oom("vkAllocateCommandBuffers"))?[0]
            }
        };
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: `cb` is not pending: it is new, or its submission's value was reached. Resetting
        // (implicit in begin, allowed by RESET_COMMAND_BUFFER) is therefore valid.
        if let Err(e) = unsafe { d.begin_command_buffer(cb, &begin) } {
            self.free.push(cb);
            return Err(map_oom("vkBeginCommandBuffer")(e));
        }
        Ok(cb)
    }

    /// Ends recording of `cb`.
    pub fn end(&mut self, device: &ash::Device, cb: vk::CommandBuffer) -> Result<()> {
        // SAFETY: `cb` is in the recording state (from `begin`).
        unsafe { device.end_command_buffer(cb) }.map_err(|e| {
            self.free.push(cb);
            map_oom("vkEndCommandBuffer")(e)
        })
    }

    /// Hands `cb` back: it was submitted with `value`, or (`None`) never submitted.
    pub fn release(&mut self, cb: vk::CommandBuffer, value: Option<u64>) {
        match value {
            Some(v) => self.in_flight.push_back((v, cb)),
            None => self.free.push(cb),
        }
    }

    /// Destroys the pool and its command buffers. The caller ensures none is pending (their
    /// values were reached, or the device was lost).
    pub fn destroy(self, device: &ash::Device) {
        // SAFETY: see above.
        unsafe { device.destroy_command_pool(self.pool, None) };
    }
}
