//! The `raw-batch` mode: written by hand with ash, all tasks' work in one command buffer, a
//! barrier only between phases, one submit, one wait.

use crate::jobs::{groups, input, new_buffer, verify, ExecBreakdown};
use ash::vk;
use std::time::Instant;
use vkasync::{Buffer, Device, Error, Kernel, MemoryKind};

/// The hand-written batch: one command pool and command buffer reused across runs.
pub struct RawBatch {
    device: Device,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
}

/// One run's buffers: the tasks' device buffers, and without unified memory their upload and
/// read-back buffers (dropped in this order: read-back, upload, device).
struct Buffers {
    readback: Vec<Buffer<u32>>,
    staging: Vec<Buffer<u32>>,
    bufs: Vec<Buffer<u32>>,
}

impl RawBatch {
    pub fn new(device: &Device) -> Self {
        let d = device.ash_device();
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(device.queue_family())
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: plain object creation on a live device.
        let pool = unsafe { d.create_command_pool(&info, None) }.expect("command pool");
        let alloc = vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(1);
        // SAFETY: as above.
        let cmd = unsafe { d.allocate_command_buffers(&alloc) }.expect("command buffer")[0];
        RawBatch { device: device.clone(), pool, cmd }
    }

    /// Returns a breakdown in µs per task: buffers (create + fill), record, submit + wait,
    /// read back + verify (reported in the same four slots as the executor's).
    pub fn run(
        &self,
        mix: &Kernel,
        tasks: usize,
        n: usize,
        k: u32,
        want: &[Vec<u32>],
        zeroed: bool,
    ) -> Result<ExecBreakdown, Error> {
        let t0 = Instant::now();
        let device = &self.device;
        let unified = device.unified_memory();
        let b = self.buffers(tasks, n, zeroed)?;
        let t1 = Instant::now();
        self.record(mix, n, k, &b);
        let t2 = Instant::now();
        // SAFETY: the command buffer is fully recorded; every buffer it uses lives in this
        // function until after the wait.
        let value = unsafe { device.submit_raw(&[self.cmd])? };
        device.wait(value, None)?;
        let t3 = Instant::now();
        let sources = if unified { &b.bufs } else { &b.readback };
        for (t, b) in sources.iter().enumerate() {
            verify(t, &b.read()?, &want[t]);
        }
        let t4 = Instant::now();
        let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / tasks as f64;
        Ok(ExecBreakdown { spawn: per(t1 - t0), run: per(t2 - t1), wait: per(t3 - t2), join: per(t4 - t3) })
    }

    /// Every task's buffers, filled with its input.
    fn buffers(&self, tasks: usize, n: usize, zeroed: bool) -> Result<Buffers, Error> {
        let device = &self.device;
        let unified = device.unified_memory();
        let mut bufs = Vec::with_capacity(tasks);
        let mut staging = Vec::with_capacity(tasks);
        let mut readback = Vec::with_capacity(tasks);
        for t in 0..tasks {
            let data = input(t, n);
            if unified {
                let b = new_buffer(device, n, MemoryKind::Device, zeroed)?;
                b.write(&data)?;
                bufs.push(b);
            } else {
                bufs.push(new_buffer(device, n, MemoryKind::Device, zeroed)?);
                let s = new_buffer(device, n, MemoryKind::Upload, zeroed)?;
                s.write(&data)?;
                staging.push(s);
                readback.push(new_buffer(device, n, MemoryKind::Readback, zeroed)?);
            }
        }
        Ok(Buffers { readback, staging, bufs })
    }

    /// Records the whole batch into the command buffer: uploads, one `mix` per task, read-backs,
    /// with a barrier between phases.
    fn record(&self, mix: &Kernel, n: usize, k: u32, b: &Buffers) {
        let device = &self.device;
        let d = device.ash_device();
        let unified = device.unified_memory();
        let bytes = (n * 4) as u64;
        let (pipeline, layout) = mix.raw_handles();
        let barrier = |src, dst, sa, da| {
            let mb = [vk::MemoryBarrier::default().src_access_mask(sa).dst_access_mask(da)];
            // SAFETY: the command buffer is recording.
            unsafe { d.cmd_pipeline_barrier(self.cmd, src, dst, vk::DependencyFlags::empty(), &mb, &[], &[]) };
        };
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the command buffer is not pending (the previous run waited for it); every
        // handle recorded below belongs to a buffer or kernel that `run` keeps alive until its
        // wait.
        unsafe {
            d.begin_command_buffer(self.cmd, &begin).expect("begin");
            // Earlier runs' work on recycled memory: order after it.
            barrier(
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::TRANSFER | vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::AccessFlags::MEMORY_WRITE,
                vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
            );
            if !unified {
                for (s, b) in b.staging.iter().zip(&b.bufs) {
                    let ((sb, so), (db, doff)) = (s.raw_handle(), b.raw_handle());
                    let region = vk::BufferCopy { src_offset: so, dst_offset: doff, size: bytes };
                    d.cmd_copy_buffer(self.cmd, sb, db, &[region]);
                }
                barrier(
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::AccessFlags::TRANSFER_WRITE,
                    vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
                );
            }
            d.cmd_bind_pipeline(self.cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
            let push = [n as u32, k];
            d.cmd_push_constants(self.cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, bytemuck::bytes_of(&push));
            for b in &b.bufs {
                let (buffer, offset) = b.raw_handle();
                let info = [vk::DescriptorBufferInfo { buffer, offset, range: bytes }];
                let write = [vk::WriteDescriptorSet::default()
                    .dst_binding(0)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(&info)];
                device.ash_push_descriptor().cmd_push_descriptor_set(
                    self.cmd,
                    vk::PipelineBindPoint::COMPUTE,
                    layout,
                    0,
                    &write,
                );
                let g = groups(n);
                d.cmd_dispatch(self.cmd, g[0], g[1], g[2]);
            }
            if !unified {
                barrier(
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::AccessFlags::SHADER_WRITE,
                    vk::AccessFlags::TRANSFER_READ,
                );
                for (b, r) in b.bufs.iter().zip(&b.readback) {
                    let ((sb, so), (db, doff)) = (b.raw_handle(), r.raw_handle());
                    let region = vk::BufferCopy { src_offset: so, dst_offset: doff, size: bytes };
                    d.cmd_copy_buffer(self.cmd, sb, db, &[region]);
                }
            }
            barrier(
                vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::HOST,
                vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE,
                vk::AccessFlags::HOST_READ,
            );
            d.end_command_buffer(self.cmd).expect("end");
        }
    }
}

impl Drop for RawBatch {
    fn drop(&mut self) {
        // SAFETY: every run waited for its submission, so the pool's buffer is not pending.
        unsafe { self.device.ash_device().destroy_command_pool(self.pool, None) };
    }
}
