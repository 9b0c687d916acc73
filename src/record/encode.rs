//! Writes a planned recording into a Vulkan command buffer (see [`super`] for the protocol and
//! [`super::plan`] for the planning): the clear phase, each phase's dispatches, timestamps and
//! grouped copies (through the copy kernel where it pays, see [`super::copies`]), a barrier
//! between phases, and the closing barrier to host reads. (What orders a submission after
//! earlier ones goes first in a command buffer of its own: see [`crate::vk::device`].)
//!
//! The trace observes through one hook, [`GpuSpans`] (timestamps around commands), present
//! only when the queue is traced or times its contexts.

use crate::record::copies;
use crate::record::plan::{self, Access, CopyGroups, Fill, Part};
use crate::record::recording::{Op, Recording};
use crate::trace::{Command, GpuSpans, SpanSource, TaskClock};
use crate::vk::buffer::{Claim, RawBuffer};
use crate::vk::kernel::{Kernel, RawKernel};
use crate::vk::spirv::BindingKind;
use ash::vk;
use smallvec::SmallVec;
use std::sync::Arc;

/// Counts from encoding one recording.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EncodeStats {
    pub barriers: u64,
    pub phases: u64,
    pub dispatches: u64,
    /// Dispatches of the copy kernel (see [`crate::record::copies`]).
    pub copy_dispatches: u64,
}

const SHADER_OR_TRANSFER: vk::PipelineStageFlags = vk::PipelineStageFlags::from_raw(
    vk::PipelineStageFlags::COMPUTE_SHADER.as_raw() | vk::PipelineStageFlags::TRANSFER.as_raw(),
);

fn writes() -> vk::AccessFlags {
    vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE
}

fn reads_and_writes() -> vk::AccessFlags {
    vk::AccessFlags::SHADER_READ
        | vk::AccessFlags::UNIFORM_READ
        | vk::AccessFlags::SHADER_WRITE
        | vk::AccessFlags::TRANSFER_READ
        | vk::AccessFlags::TRANSFER_WRITE
}

impl Access for Op {
    type Buffer = Arc<RawBuffer>;
    fn is_fence(&self) -> bool {
        matches!(self, Op::Timestamp { .. })
    }
    fn for_each_access(&self, mut f: impl FnMut(&Arc<RawBuffer>, u64, bool)) {
        self.for_each_buffer(|b, write| f(b, b.id, write));
    }
}

/// Whether `op` overwrites all of `b` that a clear would cover (so `b` needs no clear when this
/// op is its first use).
fn overwrites_all(op: &Op, b: &RawBuffer) -> bool {
    match op {
        Op::Copy { dst, regions, .. } => {
            std::ptr::eq(&**dst, b) && regions.iter().any(|r| r.dst_offset == b.offset && r.size >= b.clear_len)
        }
        _ => false,
    }
}

/// The state of one command buffer being written.
struct Writer<'a> {
    d: &'a ash::Device,
    cmd: vk::CommandBuffer,
    stats: EncodeStats,
    spans: Option<GpuSpans>,
    /// With GPU spans and owners: each op's owner (index in the recording's owners, `u32::MAX`
    /// for none).
    by_op: Vec<u32>,
    bound: Option<vk::Pipeline>,
    /// Push constants stay set across dispatches with compatible layouts: repeats are skipped.
    pushed: Option<(vk::PipelineLayout, &'a [u8])>,
}

impl<'a> Writer<'a> {
    fn owner(&self, i: usize) -> Option<u32> {
        self.by_op.get(i).copied().filter(|&o| o != u32::MAX)
    }

    fn barrier(
        &mut self,
        src: (vk::PipelineStageFlags, vk::AccessFlags),
        dst: (vk::PipelineStageFlags, vk::AccessFlags),
    ) {
        let mb = [vk::MemoryBarrier::default().src_access_mask(src.1).dst_access_mask(dst.1)];
        // SAFETY: `cmd` is recording; the barrier has no handles.
        unsafe { self.d.cmd_pipeline_barrier(self.cmd, src.0, dst.0, vk::DependencyFlags::empty(), &mb, &[], &[]) };
        self.stats.barriers += 1;
    }

    /// The clear phase: fresh buffers zeroed, neighbouring chunks of one block by one fill.
    fn clears(&mut self, fills: &mut [Arc<RawBuffer>]) {
        fills.sort_unstable_by_key(|b| (vk::Handle::as_raw(b.buffer), b.offset));
        let planned: SmallVec<[Fill<vk::Buffer>; 4]> = fills
            .iter()
            .map(|b| Fill {
                buffer: b.buffer,
                offset: b.offset,
                len: b.clear_len,
                to_chunk_end: b.clear_len == b.chunk_class(),
            })
            .collect();
        for (buffer, offset, len) in plan::clear_runs(&planned) {
            // SAFETY: the buffer is live (held by an op or a host read of this recording);
            // offset and length are multiples of 4 inside the chunks being cleared (`clear_len`
            // fits in its chunk; chunk offsets are multiples of 256), and the buffer was created
            // with TRANSFER_DST.
            unsafe { self.d.cmd_fill_buffer(self.cmd, buffer, offset, len, 0) };
        }
        if let Some(sp) = &mut self.spans {
            sp.command(self.cmd, Command::Clear, || 0.0, None);
            sp.end_group(self.cmd);
        }
    }

    fn dispatch(&mut self, device: &crate::Device, i: usize, kernel: &'a Arc<RawKernel>, groups: [u32; 3], op: &'a Op) {
        let Op::Dispatch { args, push, .. } = op else { return };
        let (d, cmd) = (self.d, self.cmd);
        if self.bound != Some(kernel.pipeline) {
            // SAFETY: the pipeline is live (held by the op).
            unsafe { d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, kernel.pipeline) };
            self.bound = Some(kernel.pipeline);
        }
        let infos: SmallVec<[vk::DescriptorBufferInfo; 4]> = args
            .iter()
            .map(|a| vk::DescriptorBufferInfo {
                buffer: a.buffer.buffer,
                offset: a.buffer.offset,
                range: a.buffer.size,
            })
            .collect();
        let writes: SmallVec<[vk::WriteDescriptorSet; 4]> = kernel
            .reflection
            .bindings
            .iter()
            .zip(&infos)
            .map(|(b, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_binding(b.binding)
                    .descriptor_type(match b.kind {
                        BindingKind::Storage => vk::DescriptorType::STORAGE_BUFFER,
                        BindingKind::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
                    })
                    .buffer_info(std::slice::from_ref(info))
            })
            .collect();
        // SAFETY: the layout matches the kernel's reflection; bindings, push size and group
        // counts were checked against the kernel and the device at record time; the buffers are
        // live (held by the op).
        unsafe {
            if !writes.is_empty() {
                device.ash_push_descriptor().cmd_push_descriptor_set(
                    cmd,
                    vk::PipelineBindPoint::COMPUTE,
                    kernel.layout,
                    0,
                    &writes,
                );
            }
            if !push.is_empty() && self.pushed != Some((kernel.layout, &push[..])) {
                d.cmd_push_constants(cmd, kernel.layout, vk::ShaderStageFlags::COMPUTE, 0, push);
                self.pushed = Some((kernel.layout, &push[..]));
            }
            d.cmd_dispatch(cmd, groups[0], groups[1], groups[2]);
        }
        self.stats.dispatches += 1;
        let owner = self.owner(i);
        if let Some(sp) = &mut self.spans {
            let what = Command::Dispatch(i as u32, Arc::as_ptr(kernel) as usize);
            sp.command(cmd, what, || crate::trace::dispatch_weight(kernel, groups), owner.map(|o| (o, 1)));
        }
    }

    /// The phase's copy groups that qualify go to dispatches of the copy kernel over one table
    /// of regions, when enough do (see [`crate::record::copies`]). Returns which groups it took
    /// (empty: none).
    fn kernel_copies(
        &mut self,
        rec_device: &crate::Device,
        ck: &Kernel,
        groups: &CopyGroups<vk::Buffer>,
        regions: &mut Vec<copies::Region>,
        held: &mut Vec<Arc<RawBuffer>>,
    ) -> SmallVec<[bool; 8]> {
        let Some(by_kernel) = groups.for_kernel(copies::MIN_REGIONS, copies::qualifies, regions) else {
            return SmallVec::new();
        };
        let Ok((table, address)) = copies::table(rec_device, regions) else { return SmallVec::new() };
        let (d, cmd, raw) = (self.d, self.cmd, &ck.raw);
        // SAFETY: the pipeline is live (the queue holds the kernel).
        unsafe { d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, raw.pipeline) };
        // One workgroup per region: more regions than the device's workgroup count allows go in
        // several dispatches over parts of the table.
        let per = rec_device.limits().max_compute_work_group_count[0].max(1) as usize;
        for first in (0..regions.len()).step_by(per) {
            let count = (regions.len() - first).min(per) as u32;
            let at = address + (first * copies::ENTRY) as u64;
            let push = copies::push_constants(at, count);
            // SAFETY: the layout is the kernel's; the table is live (held by this recording
            // until its submission completed) and lists only regions checked against their
            // buffers when recorded, which this phase writes disjointly and which the ops hold
            // alive (see `crate::record::copies`); `at` and `count` stay inside the table; the
            // push block is the kernel's 12 bytes; `count` is within the device's workgroup
            // count.
            unsafe {
                d.cmd_push_constants(cmd, raw.layout, vk::ShaderStageFlags::COMPUTE, 0, &push);
                d.cmd_dispatch(cmd, count, 1, 1);
            }
            self.stats.copy_dispatches += 1;
        }
        self.bound = Some(raw.pipeline);
        self.pushed = None;
        held.push(table);
        if self.spans.is_some() {
            let bytes: u64 = regions.iter().map(|r| r.2).sum();
            let owners: Vec<(u32, u64)> = groups
                .groups
                .iter()
                .zip(&by_kernel)
                .filter(|(_, &k)| k)
                .flat_map(|(g, _)| g.ops.iter())
                .filter_map(|&(i, b)| self.owner(i).map(|o| (o, b)))
                .collect();
            let what = Command::Copy(bytes, regions.len() as u32);
            if let Some(sp) = &mut self.spans {
                sp.command(cmd, what, || crate::trace::copy_weight(bytes), owners);
            }
        }
        by_kernel
    }

    /// Writes the ops of one phase (`run`): dispatches and timestamps in order, then the phase's
    /// copies grouped by buffer pair, through `copy_kernel` where given and where it pays.
    #[allow(clippy::too_many_arguments)] // the writer's scratch space, kept across phases
    fn phase(
        &mut self,
        device: &crate::Device,
        ops: &'a [Op],
        run: impl Iterator<Item = usize>,
        groups: &mut CopyGroups<vk::Buffer>,
        regions: &mut Vec<copies::Region>,
        held: &mut Vec<Arc<RawBuffer>>,
        copy_kernel: Option<&Kernel>,
    ) {
        groups.clear();
        for i in run {
            match &ops[i] {
                Op::Copy { src, dst, regions } => {
                    let bases = || (src.base_address(), dst.base_address());
                    groups.add(i, (src.buffer, dst.buffer), bases, regions, self.spans.is_some());
                }
                op @ Op::Dispatch { kernel, groups: g, .. } => self.dispatch(device, i, kernel, *g, op),
                Op::Timestamp { pool, index } => {
                    // SAFETY: the pool is live (held by the op), was reset on the host, and the
                    // index was checked when recorded.
                    unsafe {
                        self.d.cmd_write_timestamp(self.cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, pool.pool, *index)
                    };
                }
            }
        }
        let by_kernel = match copy_kernel {
            Some(ck) => self.kernel_copies(device, ck, groups, regions, held),
            None => SmallVec::new(),
        };
        self.buffer_copies(groups, &by_kernel);
        if let Some(sp) = &mut self.spans {
            sp.end_group(self.cmd);
        }
    }

    /// The phase's other copy groups, one `vkCmdCopyBuffer` each.
    fn buffer_copies(&mut self, groups: &CopyGroups<vk::Buffer>, by_kernel: &[bool]) {
        for (slot, g) in groups.groups.iter().enumerate() {
            if by_kernel.get(slot).copied().unwrap_or(false) {
                continue;
            }
            let (src, dst) = g.key;
            // Within one `VkBuffer` (two chunks of one pooled block), one region per command:
            // the copy is valid with any number of disjoint regions, but validation layers
            // before 1.3.239 (Ubuntu 22.04's 1.3.204) compare the regions' bounding ranges and
            // report an overlap that is not there.
            let per: &mut dyn Iterator<Item = &[vk::BufferCopy]> =
                if src == dst { &mut g.regions.chunks(1) } else { &mut std::iter::once(&g.regions[..]) };
            for part in per {
                // SAFETY: both buffers are live (the ops hold them); every region was checked
                // against its buffer's range when recorded, and regions within one phase touch
                // disjoint destination ranges (a conflict would have put them in later phases).
                unsafe { self.d.cmd_copy_buffer(self.cmd, src, dst, part) };
            }
            if self.spans.is_some() {
                let bytes: u64 = g.regions.iter().map(|r| r.size).sum();
                let owners: SmallVec<[(u32, u64); 4]> =
                    g.ops.iter().filter_map(|&(i, b)| self.owner(i).map(|o| (o, b))).collect();
                let what = Command::Copy(bytes, g.regions.len() as u32);
                if let Some(sp) = &mut self.spans {
                    sp.command(self.cmd, what, || crate::trace::copy_weight(bytes), owners);
                }
            }
        }
    }
}

impl Recording {
    /// The first uses of fresh buffers: which need a fill (those not overwritten whole by their
    /// first op), and which this recording took the clear of (see "Clearing new buffers").
    fn plan(&mut self, fills: &mut SmallVec<[Arc<RawBuffer>; 4]>) -> plan::Phases {
        let cleared = &mut self.cleared;
        let mut phases = plan::assign(&self.ops, |op, b| {
            let claim = b.claim_clear();
            if claim != Claim::None && !overwrites_all(op, b) {
                fills.push(b.clone());
            }
            if claim == Claim::Took {
                cleared.push(b.clone());
            }
        });
        for b in &self.host_reads {
            if !phases.first_use(b.id) {
                continue; // an op, or an earlier host read, of this recording used it first
            }
            match b.claim_clear() {
                Claim::None => {}
                Claim::Took => {
                    fills.push(b.clone());
                    cleared.push(b.clone());
                }
                Claim::AlsoClear => fills.push(b.clone()),
            }
        }
        phases
    }

    /// Writes the ops into `cmd` (in the recording state) phase by phase (see the module docs
    /// of [`super`]). Within a phase, copies between the same two `VkBuffer`s (e.g. many jobs'
    /// uploads from one pooled staging block into one pooled device block) become one command
    /// with many regions, or one dispatch of `copy_kernel` for all qualifying groups.
    pub fn encode(&mut self, cmd: vk::CommandBuffer, copy_kernel: Option<&Kernel>) -> EncodeStats {
        let none = vk::CommandBuffer::null();
        self.encode_into([none, cmd, none], false, copy_kernel).0
    }

    /// Writes the ops split over the copy queues (see [`crate::vk::copy_queues`]) into `cmds`
    /// (input, compute, output; each in the recording state): the input part holds the clears
    /// and the first phase's copies, the output part the last phase's copies, the compute part
    /// the rest phase by phase (through `copy_kernel` where it pays). The input and output
    /// parts use transfer commands only. Returns which parts hold commands. GPU spans, when on,
    /// start again at the top of each part.
    pub fn encode_parts(
        &mut self,
        cmds: [vk::CommandBuffer; 3],
        copy_kernel: Option<&Kernel>,
    ) -> (EncodeStats, [bool; 3]) {
        self.encode_into(cmds, true, copy_kernel)
    }

    /// [`Recording::encode_parts`], or with `split` off everything in the compute part
    /// (`cmds[1]`, always used) as [`Recording::encode`] writes it.
    fn encode_into(
        &mut self,
        cmds: [vk::CommandBuffer; 3],
        split: bool,
        copy_kernel: Option<&Kernel>,
    ) -> (EncodeStats, [bool; 3]) {
        self.encode_batches();
        let mut fills = SmallVec::new();
        let phases = self.plan(&mut fills);
        // Unsplit, every op is in the compute part (no list is made). Split, a copy goes to a
        // copy queue only where that queue moves it faster than the compute part would (see
        // `plan::for_copy_queue`).
        let part = if split {
            let kernel = copy_kernel.is_some();
            let to_queue = |i: usize| match &self.ops[i] {
                Op::Copy { regions, .. } => plan::for_copy_queue(regions, kernel),
                _ => false,
            };
            plan::parts(&phases, to_queue)
        } else {
            Vec::new()
        };
        let has = |p: Part| match split {
            true => part.contains(&p),
            false => p == Part::Compute && !self.ops.is_empty(),
        };
        // The clears go first: in the input part where one is split off (or nothing else is).
        let clears_in_input = split && !fills.is_empty() && (has(Part::Input) || !has(Part::Compute));
        let mut used = [
            has(Part::Input) || clears_in_input,
            !split || has(Part::Compute) || !fills.is_empty() && !clears_in_input,
            has(Part::Output),
        ];
        let device = self.device.clone();
        let mut parts = PartSpans::new(self, phases.count, split);
        let mut stats = EncodeStats { phases: u64::from(phases.count), ..EncodeStats::default() };
        let mut groups = CopyGroups::<vk::Buffer>::default();
        let mut regions: Vec<copies::Region> = Vec::new();
        let transfer_write = (vk::PipelineStageFlags::TRANSFER, vk::AccessFlags::TRANSFER_WRITE);
        let any_phase = (SHADER_OR_TRANSFER, writes());
        let any_access = (SHADER_OR_TRANSFER, reads_and_writes());
        let to_host = (vk::PipelineStageFlags::HOST, vk::AccessFlags::HOST_READ);
        let part = &part;
        let in_part = |p: Part| move |&i: &usize| !split || part[i] == p;
        // Input: the clears, then the first phase's copies.
        if used[0] {
            let mut w = parts.writer(device.raw(), cmds[0]);
            if !fills.is_empty() {
                w.clears(&mut fills);
                let next = (
                    vk::PipelineStageFlags::TRANSFER,
                    vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE,
                );
                w.barrier(transfer_write, next);
            }
            let run = phases.order.iter().copied().filter(in_part(Part::Input));
            w.phase(&device, &self.ops, run, &mut groups, &mut regions, &mut self.held, None);
            if self.host_read && !used[1] && !used[2] {
                // The last part: the host reads what it copied.
                w.barrier(transfer_write, to_host);
            }
            stats.add(&parts.give_back(w));
        }
        // Compute: the clears when there is no input part, then each phase's other ops.
        if used[1] {
            let mut w = parts.writer(device.raw(), cmds[1]);
            if !used[0] && !fills.is_empty() {
                w.clears(&mut fills);
                if !self.ops.is_empty() {
                    w.barrier(transfer_write, any_access);
                }
            }
            let mut first = true;
            for run in phases.runs() {
                if !run.iter().any(in_part(Part::Compute)) {
                    continue;
                }
                if !first {
                    w.barrier(any_phase, any_access);
                }
                first = false;
                let run = run.iter().copied().filter(in_part(Part::Compute));
                w.phase(&device, &self.ops, run, &mut groups, &mut regions, &mut self.held, copy_kernel);
            }
            if self.host_read {
                w.barrier(any_phase, to_host);
            }
            stats.add(&parts.give_back(w));
        }
        // Output: the last phase's copies, then the barrier to host reads.
        if used[2] {
            let mut w = parts.writer(device.raw(), cmds[2]);
            let run = phases.order.iter().copied().filter(in_part(Part::Output));
            w.phase(&device, &self.ops, run, &mut groups, &mut regions, &mut self.held, None);
            if self.host_read {
                w.barrier(transfer_write, to_host);
            }
            stats.add(&parts.give_back(w));
        }
        if !used.iter().any(|&u| u) && self.host_read {
            // Nothing but host reads of earlier results: the compute part holds the barrier to
            // host reads.
            let mut w = parts.writer(device.raw(), cmds[1]);
            w.barrier(any_phase, to_host);
            stats.add(&parts.give_back(w));
            used[1] = true;
        }
        self.spans = parts.spans;
        (stats, used)
    }
}

/// A recording's GPU spans and the owners of its ops (with per-context time; without it, a
/// trace alone, there are none), handed from part to part as the parts are written.
struct PartSpans {
    spans: Option<GpuSpans>,
    by_op: Vec<u32>,
    started: bool,
    /// Room for what split parts add: a phase split between two parts ends twice (two such),
    /// and each later part starts again.
    more: u32,
    phases: u32,
    ops: u32,
}

impl PartSpans {
    fn new(rec: &mut Recording, phases: u32, split: bool) -> Self {
        let spans = rec.spans.take();
        let by_op = if spans.is_some() && !rec.owners.is_empty() { rec.op_owners() } else { Vec::new() };
        let more = if split { 4 } else { 0 };
        PartSpans { spans, by_op, started: false, more, phases, ops: rec.ops.len() as u32 }
    }

    /// The writer of the next part, into `cmd`: its spans start at its own first timestamp.
    fn writer<'a>(&mut self, d: &'a ash::Device, cmd: vk::CommandBuffer) -> Writer<'a> {
        let mut spans = self.spans.take();
        let by_op = std::mem::take(&mut self.by_op);
        if let Some(sp) = &mut spans {
            match std::mem::replace(&mut self.started, true) {
                false => sp.start(cmd, self.phases, self.ops, self.more, !by_op.is_empty()),
                true => sp.restart(cmd),
            }
        }
        Writer { d, cmd, stats: EncodeStats::default(), spans, by_op, bound: None, pushed: None }
    }

    /// A part is written: its spans and owners come back for the next; returns its counts.
    fn give_back(&mut self, mut w: Writer<'_>) -> EncodeStats {
        self.spans = w.spans.take();
        self.by_op = std::mem::take(&mut w.by_op);
        w.stats
    }
}

impl EncodeStats {
    fn add(&mut self, o: &EncodeStats) {
        self.barriers += o.barriers;
        self.dispatches += o.dispatches;
        self.copy_dispatches += o.copy_dispatches;
    }
}

impl SpanSource for Recording {
    fn owners(&self) -> &[(u32, u32, Arc<TaskClock>)] {
        &self.owners
    }

    fn kernel(&self, op: u32) -> Option<&Arc<RawKernel>> {
        match self.ops.get(op as usize) {
            Some(Op::Dispatch { kernel, .. }) => Some(kernel),
            _ => None,
        }
    }
}
