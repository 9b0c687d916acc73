//! The logical device: one compute queue, its timeline semaphore, the memory allocator and the
//! device limits that vkasync checks before the driver sees a call.
//!
//! # The timeline
//! The device owns one timeline semaphore for its queue and the counter of values handed out.
//! [`Device::submit`] takes the queue lock, submits with a signal of `last + 1`, and only when
//! `vkQueueSubmit` succeeded records `last + 1` as handed out; a failed submit hands out nothing,
//! so the timeline stays consistent. Work with value `v` is complete once the semaphore's counter
//! is `>= v`. The last counter value read is cached, so a value observed complete is not asked
//! about again.

use crate::error::{map_alloc, map_oom, map_oom_and_lost, Error, Result};
use crate::vk::copy_queues::{CopyQueueInfo, CopyQueues, Parts, QueueOptions};
use crate::vk::instance::{self, AdapterInfo, DeviceSelector, InstanceShared};
use crate::vk::spirv_caps::EnabledFeatures;
use ash::vk;
use gpu_allocator::vulkan::{Allocator, AllocatorCreateDesc};
use smallvec::SmallVec;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The device limits vkasync checks itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// `maxComputeWorkGroupCount`.
    pub max_compute_work_group_count: [u32; 3],
    /// `maxPushConstantsSize`, in bytes.
    pub max_push_constants_size: u32,
    /// `maxStorageBufferRange`, in bytes: the largest buffer a dispatch can bind as a storage
    /// buffer.
    pub max_storage_buffer_range: u64,
    /// `maxUniformBufferRange`, in bytes: the largest buffer a dispatch can bind as a uniform
    /// buffer.
    pub max_uniform_buffer_range: u64,
    /// The largest single buffer: `maxMemoryAllocationSize`, capped by the largest heap.
    pub max_buffer_size: u64,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period_ns: f32,
    /// `minStorageBufferOffsetAlignment`, in bytes.
    pub min_storage_buffer_offset_alignment: u64,
    /// `maxComputeSharedMemorySize`, in bytes.
    pub max_compute_shared_memory_size: u32,
    /// `maxComputeWorkGroupSize`: the largest workgroup in each dimension.
    pub max_compute_work_group_size: [u32; 3],
    /// `maxComputeWorkGroupInvocations`: the most invocations in one workgroup.
    pub max_compute_work_group_invocations: u32,
    /// Whether GPU timestamps can be written and reset from the host on the queue in use.
    pub timestamps: bool,
}

/// How far a kernel's buffer accesses are checked on a device (see
/// [`DeviceBuilder::robust_buffer_access`] and [`Device::robust_access`]).
///
/// Buffers are ranges of shared pooled `VkBuffer`s, so the buffer right after yours may belong
/// to another task. Only [`RobustAccess::Robustness2`] keeps a kernel that indexes past its
/// buffer inside that buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RobustAccess {
    /// No checks: an access past a binding's range is undefined behaviour on the GPU; on most
    /// drivers it reads and writes the neighbouring buffers.
    Off,
    /// Core `robustBufferAccess` only (the device does not offer `VK_EXT_robustness2`): accesses
    /// past a binding's range cannot leave the `VkBuffer` (no crash, no other allocation
    /// touched), but the specification lets such writes land anywhere in that `VkBuffer` and
    /// such reads return any value from it, so **neighbouring buffers in the same pooled block
    /// are not protected**.
    Core,
    /// `robustBufferAccess2` of `VK_EXT_robustness2` (with core `robustBufferAccess`): accesses
    /// past a binding's range are discarded (writes) or read as zero, checked against the
    /// buffer's own range rounded up to a small alignment that never reaches past its pooled
    /// chunk. Neighbours are protected.
    Robustness2,
}

/// The split size of heavy flushes on copy queues by default, with several compute queues
/// ([`DeviceBuilder::split_flushes`]).
const DEFAULT_SPLIT_BYTES: u64 = 16 << 20;

/// Chooses and opens a device. [`Device::new`] is `DeviceBuilder::new().build()`.
///
/// ```no_run
/// let device = vkasync::DeviceBuilder::new().validation(true).select("llvmpipe").build()?;
/// println!("{}", device.info());
/// # Ok::<(), vkasync::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct DeviceBuilder {
    validation: Option<bool>,
    selector: Option<DeviceSelector>,
    loader: Option<std::path::PathBuf>,
    stage_always: bool,
    robust: Option<bool>,
    compute_copies: Option<bool>,
    copy_queues: Option<bool>,
    compute_queues: Option<u32>,
    split_bytes: Option<u64>,
}

impl DeviceBuilder {
    /// A builder with the defaults: the environment decides (`VKASYNC_VALIDATION`,
    /// `VKASYNC_DEVICE`), else no validation and the preferred device.
    pub fn new() -> Self {
        Self::default()
    }

    /// Turns the Khronos validation layer (with synchronization validation) on or off, whatever
    /// `VKASYNC_VALIDATION` says.
    pub fn validation(mut self, on: bool) -> Self {
        self.validation = Some(on);
        self
    }

    /// Chooses the device by index or by part of its name (the syntax of `VKASYNC_DEVICE`).
    pub fn select(mut self, selector: &str) -> Self {
        self.selector = Some(DeviceSelector::parse(selector));
        self
    }

    /// Chooses the device with this selector.
    pub fn selector(mut self, selector: DeviceSelector) -> Self {
        self.selector = Some(selector);
        self
    }

    /// Treats the device as a discrete GPU even where device memory is host-visible: uploads and
    /// read-backs always go through staging copies. Lets the discrete-GPU path be tested on
    /// lavapipe or an integrated GPU.
    pub fn always_stage(mut self, on: bool) -> Self {
        self.stage_always = on;
        self
    }

    /// Turns robust buffer access on (the default) or off, whatever `VKASYNC_ROBUST` says (`0`
    /// turns it off). On, the device enables core `robustBufferAccess` and, where offered,
    /// `robustBufferAccess2` of `VK_EXT_robustness2`, so that a kernel indexing past its buffer
    /// cannot read or write the neighbouring buffers (see [`RobustAccess`]). Off saves what the
    /// checks cost, for trusted kernels only.
    pub fn robust_buffer_access(mut self, on: bool) -> Self {
        self.robust = Some(on);
        self
    }

    /// Lets a flush copy many small regions with one dispatch of the library's copy kernel
    /// instead of `vkCmdCopyBuffer` (on by default where the device offers
    /// `bufferDeviceAddress`; `VKASYNC_COMPUTE_COPIES=0` turns it off, `1` on). The default is
    /// off with a validation layer older than 1.3.275, which crashed inside its own code when
    /// several such devices recorded at once in one process. See [`Device::compute_copies`].
    pub fn compute_copies(mut self, on: bool) -> Self {
        self.compute_copies = Some(on);
        self
    }

    /// Runs each flush's uploads and read-backs on queues of their own, so that the GPU copies
    /// one flush's data while it computes another's (off by default; `VKASYNC_COPY_QUEUES=1`
    /// turns it on, `0` off). The queues are the device's transfer-only family's where it has
    /// one; elsewhere (lavapipe) the same three parts go to the one queue. See
    /// [`Device::copy_queues`].
    ///
    /// Turn it on for throughput from many threads: 10,000 records of 16 KiB sealed from 16
    /// tokio workers at 13.2–14.0 GB/s with it against 9.2–11.0 without on an H200, 13.6–14.2
    /// against 9.9–10.6 on an H100 (2026-12-05, `BENCHMARKS.md`). Where the copy kernel is there
    /// ([`DeviceBuilder::compute_copies`]), only copies of large regions take the copy queues
    /// (scattered records' copies and small uploads stay with the kernels, which copy many
    /// regions at once). It stays off by default because every submission still ends
    /// with a batch on the output queue: one job alone took 44–68 µs with it against 36 without
    /// on that H100.
    pub fn copy_queues(mut self, on: bool) -> Self {
        self.copy_queues = Some(on);
        self
    }

    /// With copy queues on ([`DeviceBuilder::copy_queues`]), the compute parts of consecutive
    /// flushes take up to `n` queues of the compute family in turn, so that one flush's kernels
    /// may run beside the one's before (default 1; `VKASYNC_COMPUTE_QUEUES=n`; at most 8).
    /// Without copy queues it has no effect; where the family has fewer queues, the turns share
    /// them (see [`crate::CopyQueueInfo`]).
    pub fn compute_queues(mut self, n: u32) -> Self {
        self.compute_queues = Some(n);
        self
    }

    /// With copy queues on ([`DeviceBuilder::copy_queues`]), a flush whose batch items carry
    /// at least `2 × bytes` between host and GPU memory (the records of a
    /// [`crate::crypto::Crypto`] flush, see [`crate::batch::BatchKind::bytes`]) goes to the GPU as
    /// several submissions of about `bytes` each, at most 8, each a run of consecutive items:
    /// the input queue uploads one while the compute queue runs the one before and the output
    /// queue reads back the one before that, where one submission would copy in, compute and
    /// copy out one after another. Its waiters wait for the last. 0 turns it off;
    /// `VKASYNC_SPLIT_FLUSHES=<MiB>` sets it from the environment. Without copy queues it has
    /// no effect. See [`crate::CopyQueueInfo::split_bytes`].
    ///
    /// The parts' kernels run beside one another only on several compute queues
    /// ([`DeviceBuilder::compute_queues`]), so the default is 16 MiB with two or more, else 0:
    /// 10,000 records of 16 KiB sealed from 16 tokio workers (`tls_pipeline`'s
    /// `staged-shares`) at 16.3–17.4 GB/s with parts of 16 MiB and 4 compute queues, against
    /// 13.8–15.9 with either alone or neither, ahead in 6 rounds of 6 on two H100 hosts
    /// (2026-12-06, `BENCHMARKS.md`). The native executor's front (one thread) lost there in 4
    /// of 6 rounds (4.3–6.0 against 4.4–6.2 GB/s) and held on a third host (8.1–8.9 against
    /// 8.6–8.8 in 4 rounds); the tokio front with a task per record was unchanged.
    pub fn split_flushes(mut self, bytes: u64) -> Self {
        self.split_bytes = Some(bytes);
        self
    }

    /// Loads the Vulkan loader from this path instead of the system's `libvulkan.so.1` /
    /// `vulkan-1.dll`.
    pub fn loader_path(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.loader = Some(path.into());
        self
    }

    /// Opens the device.
    pub fn build(self) -> Result<Device> {
        let validation = self
            .validation
            .unwrap_or_else(|| std::env::var("VKASYNC_VALIDATION").is_ok_and(|v| !v.is_empty() && v != "0"));
        let selector = match self.selector {
            Some(s) => s,
            None => match std::env::var("VKASYNC_DEVICE") {
                Ok(s) if !s.trim().is_empty() => DeviceSelector::parse(&s),
                _ => DeviceSelector::Default,
            },
        };
        let robust = self.robust.unwrap_or_else(|| std::env::var("VKASYNC_ROBUST").map_or(true, |v| v.trim() != "0"));
        let copies =
            self.compute_copies.or_else(|| std::env::var("VKASYNC_COMPUTE_COPIES").ok().map(|v| v.trim() != "0"));
        let copy_queues = self.copy_queues.unwrap_or_else(|| {
            std::env::var("VKASYNC_COPY_QUEUES").is_ok_and(|v| !v.trim().is_empty() && v.trim() != "0")
        });
        let compute_queues = self.compute_queues.unwrap_or_else(|| {
            std::env::var("VKASYNC_COMPUTE_QUEUES").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(1)
        });
        let split_bytes = self.split_bytes.unwrap_or_else(|| {
            std::env::var("VKASYNC_SPLIT_FLUSHES")
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map_or(if compute_queues > 1 { DEFAULT_SPLIT_BYTES } else { 0 }, |mib| mib.saturating_mul(1 << 20))
        });
        let queues = QueueOptions { copy: copy_queues, compute: compute_queues, split_bytes };
        Device::open(validation, &selector, self.loader.as_deref(), self.stage_always, robust, copies, queues)
    }
}

/// A Vulkan device with one compute queue and its timeline semaphore. Cheap to clone (shared).
///
/// ```no_run
/// let device = vkasync::Device::new()?;
/// println!("running on {}", device.info().name);
/// # Ok::<(), vkasync::Error>(())
/// ```
#[derive(Clone)]
pub struct Device {
    pub(super) shared: Arc<DeviceShared>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("info", &self.shared.info).finish_non_exhaustive()
    }
}

/// Vulkan objects a device owns for the layers above it (its copy kernel, see
/// [`Device::copy_kernel`]): they hold no handle of the device (a device holding what holds it
/// would never be dropped), and the device destroys them before itself. A trait, so that this
/// file need not name their types.
pub(crate) trait DeviceOwned: std::any::Any + Send + Sync {
    /// Destroys the objects.
    ///
    /// # Safety
    /// Called once, by the device's drop, when no submission runs; nothing uses them after.
    unsafe fn destroy(&self, device: &ash::Device);
    /// Itself, to be downcast.
    fn as_any(&self) -> &dyn std::any::Any;
    /// A pipeline of it, if any (for tests).
    fn pipeline(&self) -> Option<vk::Pipeline>;
}

/// Everything a device owns. Dropped when the last `Device`, buffer or kernel made from it goes.
pub(crate) struct DeviceShared {
    pub(super) info: AdapterInfo,
    pub(super) limits: Limits,
    /// True when every device-local memory type is also host-visible (lavapipe, most integrated
    /// GPUs): uploads and read-backs can then skip the staging copy.
    pub(super) unified_memory: bool,
    /// Which robust buffer access is enabled.
    pub(super) robust: RobustAccess,
    /// What a buffer's lazy clear is rounded up to: 4 bytes (`vkCmdFillBuffer`'s unit) and, with
    /// robustness2, the robust access alignments (the bytes past a buffer a kernel may reach).
    /// At most `pool::CHUNK_ALIGN`.
    pub(super) clear_align: u64,
    pub(super) device: ash::Device,
    pub(super) push_descriptor: ash::khr::push_descriptor::Device,
    #[cfg_attr(not(feature = "trace"), allow(dead_code))] // used by the trace
    /// `VK_EXT_calibrated_timestamps`, when enabled (device and CLOCK_MONOTONIC domains).
    pub(super) calibrated: Option<ash::ext::calibrated_timestamps::Device>,
    pub(super) queue_family: u32,
    /// The queue, and what its submissions share under its lock (see [`Submitting`]).
    queue: Mutex<Submitting>,
    /// With copy queues on, where they are (see [`crate::vk::copy_queues`]).
    copy_info: Option<CopyQueueInfo>,
    /// The queue families buffers are shared between (copy queues of another family).
    pub(super) concurrent_families: Option<[u32; 2]>,
    pub(super) timeline: vk::Semaphore,
    /// The last timeline value handed out (by a successful submit).
    submitted: AtomicU64,
    /// The last counter value read from the semaphore.
    completed: AtomicU64,
    lost: AtomicBool,
    /// The loss is simulated ([`Device::debug_simulate_loss`]): the GPU goes on, so what it runs
    /// can still be waited for and released ([`DeviceShared::wait_through_simulated_loss`]).
    simulated_loss: AtomicBool,
    pub(super) allocator: ManuallyDrop<Mutex<Allocator>>,
    /// Blocks that small buffers are carved from (lock order: pool, then allocator).
    pub(super) pool: Mutex<crate::vk::pool::Pool>,
    /// Per-thread caches of free chunks in front of `pool` (see [`crate::vk::pool::Stash`]).
    pub(super) stash: crate::vk::pool::Stash,
    /// The copy kernel every queue of the device shares (see [`Device::copy_kernel`]), made at
    /// its first use.
    copy_kernel: std::sync::OnceLock<Box<dyn DeviceOwned>>,
    /// Bytes of buffer memory allocated in the device-local heap and in the host heap, against
    /// the heaps' sizes (`budget`); a device without a separate host heap counts both in the
    /// first.
    pub(super) heap_used: [AtomicU64; 2],
    pub(super) heap_size: [u64; 2],
    /// Live `RawBuffer`s and their bytes, for the leak check.
    pub(super) live_buffers: AtomicU64,
    pub(super) live_bytes: AtomicU64,
    /// Command pool for the blocking path ([`crate::CommandList::submit_and_wait`]).
    pub(super) blocking_pool: Mutex<Option<crate::vk::command_pool::CommandPool>>,
    next_id: AtomicU64,
    pub(super) instance: ManuallyDrop<InstanceShared>,
    /// The features that gate SPIR-V capabilities of users' kernels, as enabled at creation
    /// (never buffer device addresses).
    pub(super) shader_features: EnabledFeatures,
    /// The same for the library's own kernels (with buffer device addresses, when enabled).
    pub(super) internal_features: EnabledFeatures,
    /// `bufferDeviceAddress` is enabled: every pooled block has a device address, and flushes
    /// may copy with the copy kernel (see [`crate::record::copies`]).
    pub(super) bda: bool,
}

impl Device {
    /// Opens the preferred device, honouring `VKASYNC_DEVICE` and `VKASYNC_VALIDATION`.
    pub fn new() -> Result<Self> {
        DeviceBuilder::new().build()
    }

    /// A builder, to choose the device or turn validation on in code.
    pub fn builder() -> DeviceBuilder {
        DeviceBuilder::new()
    }

    /// Opens a device, step by step: choose and check it, create it, then its queue's objects.
    fn open(
        validation: bool,
        selector: &DeviceSelector,
        loader: Option<&std::path::Path>,
        stage_always: bool,
        robust: bool,
        compute_copies: Option<bool>,
        queues: QueueOptions,
    ) -> Result<Self> {
        let inst = instance::create_instance(validation, loader)?;
        let list = instance::enumerate(&inst.instance)?;
        let (physical, info) = selector.pick(&list)?.clone();
        let instance = &inst.instance;
        let plan = DevicePlan::choose(&inst, physical, &info, stage_always, robust, compute_copies)?;
        let copy_family = if queues.copy { crate::vk::copy_queues::choose_family(&info.queue_families) } else { None };
        // Several compute queues serve the copy queues' compute parts only. Where the family has
        // fewer queues than asked for, the turns share them (each turn keeps its semaphore).
        let turns = if queues.copy { queues.compute.clamp(1, 8) } else { 1 };
        let n_compute = turns.min(info.queue_families[plan.family as usize].queue_count).max(1);
        let device = create_logical_device(instance, physical, &info, &plan, n_compute, copy_family)?;
        // From here on, `guard` destroys the device if a later step fails.
        let guard = DestroyDevice(Some(device.clone()));
        // SAFETY: the family and indices 0..n_compute were requested at creation.
        let compute: SmallVec<[vk::Queue; 8]> =
            (0..turns).map(|i| unsafe { device.get_device_queue(plan.family, i % n_compute) }).collect();
        let queue = compute[0];
        let copy = match queues.copy {
            true => {
                Some(CopyQueues::new(&device, &compute, plan.family, copy_family, queues.split_bytes, create_timeline)?)
            }
            false => None,
        };
        let destroy_copy = |device: &ash::Device| {
            if let Some(c) = &copy {
                // SAFETY: nothing was submitted.
                unsafe { c.destroy(device) };
            }
        };
        let timeline = create_timeline(&device).inspect_err(|_| destroy_copy(&device))?;
        let allocator =
            create_allocator(instance, &device, physical, plan.bda, timeline).inspect_err(|_| destroy_copy(&device))?;
        let push_descriptor = ash::khr::push_descriptor::Device::new(instance, &device);
        let calibrated = plan.has_calibrated.then(|| ash::ext::calibrated_timestamps::Device::new(instance, &device));
        std::mem::forget(guard);
        let (family, unified_memory, robust) = (plan.family, plan.unified_memory, plan.robust);
        log::info!(
            "vkasync: opened {} (queue family {family}, unified memory: {unified_memory}, robust access: {robust:?}, copy queues: {:?})",
            info.name,
            copy.as_ref().map(|c| c.info)
        );
        let handles = DeviceHandles { device, push_descriptor, calibrated, queue, copy, timeline, allocator };
        Ok(Device { shared: Arc::new(DeviceShared::assemble(inst, info, plan, handles)) })
    }

    /// Whether `other` is a handle to this same `VkDevice` (clones are; two devices opened on
    /// one GPU are not).
    pub fn same_device(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// An identity of the device, the same for all its handles (the address of what they
    /// share: unique while any handle lives).
    pub(crate) fn id(&self) -> usize {
        Arc::as_ptr(&self.shared) as usize
    }

    /// The chosen device's description.
    pub fn info(&self) -> &AdapterInfo {
        &self.shared.info
    }

    /// The limits vkasync checks.
    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    /// Whether device-local memory is host-visible, so staging copies are skipped.
    pub fn unified_memory(&self) -> bool {
        self.shared.unified_memory
    }

    /// Which robust buffer access the device enabled: [`RobustAccess::Robustness2`] where the
    /// driver offers `VK_EXT_robustness2` (lavapipe and NVIDIA do), [`RobustAccess::Core`] where
    /// it offers only core `robustBufferAccess`, [`RobustAccess::Off`] when turned off with
    /// [`DeviceBuilder::robust_buffer_access`] or `VKASYNC_ROBUST=0`.
    pub fn robust_access(&self) -> RobustAccess {
        self.shared.robust
    }

    /// Whether any robust buffer access is on (see [`Device::robust_access`] for which).
    pub fn robust_buffer_access(&self) -> bool {
        self.shared.robust != RobustAccess::Off
    }

    /// Whether flushes may copy many small regions with one dispatch of the library's copy
    /// kernel (buffer device addresses enabled; see [`DeviceBuilder::compute_copies`]).
    pub fn compute_copies(&self) -> bool {
        self.shared.bda
    }

    /// The queue family in use.
    pub fn queue_family(&self) -> u32 {
        self.shared.queue_family
    }

    /// Where each flush's uploads and read-backs run when copy queues are on
    /// ([`DeviceBuilder::copy_queues`]); `None` when they are off.
    ///
    /// ```no_run
    /// let device = vkasync::Device::builder().copy_queues(true).build()?;
    /// match device.copy_queues() {
    ///     Some(q) if q.separate_input => println!("uploads on queue family {}", q.family),
    ///     Some(_) => println!("the copy parts share the compute queue"),
    ///     None => unreachable!("asked for"),
    /// }
    /// # Ok::<(), vkasync::Error>(())
    /// ```
    pub fn copy_queues(&self) -> Option<CopyQueueInfo> {
        self.shared.copy_info
    }

    /// Errors and warnings the validation layer has reported so far (0 without validation).
    pub fn validation_message_count(&self) -> u64 {
        self.shared.instance.log.count.load(Ordering::SeqCst)
    }

    /// The texts of the first validation messages (errors and warnings).
    pub fn validation_messages(&self) -> Vec<String> {
        self.shared.instance.log.messages.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Whether validation is on for this device.
    pub fn validation_enabled(&self) -> bool {
        self.shared.instance.debug.is_some()
    }

    /// Live buffers and their bytes, and what the allocator reserves. After every buffer is
    /// dropped and all work that used them completed, `live_buffers` and `live_bytes` are 0.
    pub fn memory_report(&self) -> MemoryReport {
        let pooled = crate::util::lock(&self.shared.pool).reserved();
        let alloc = crate::util::lock(&self.shared.allocator);
        let report = alloc.generate_report();
        MemoryReport {
            live_buffers: self.shared.live_buffers.load(Ordering::Relaxed) as usize,
            live_bytes: self.shared.live_bytes.load(Ordering::Relaxed),
            pooled_bytes: pooled,
            allocations: report.allocations.len(),
            reserved_bytes: report.total_capacity_bytes,
        }
    }

    /// Frees the pooled blocks that no live buffer uses; returns the bytes released.
    pub fn trim(&self) -> u64 {
        let mut pool = crate::util::lock(&self.shared.pool);
        let mut alloc = crate::util::lock(&self.shared.allocator);
        pool.trim(&self.shared, &mut alloc)
    }

    /// The last timeline value handed out by a successful submit.
    pub fn last_submitted(&self) -> u64 {
        self.shared.submitted.load(Ordering::SeqCst)
    }

    /// Whether the device has been lost.
    pub fn is_lost(&self) -> bool {
        self.shared.lost.load(Ordering::SeqCst)
    }

    /// Reads the timeline counter: every submission with a value at or below it has completed.
    pub fn completed_value(&self) -> Result<u64> {
        self.shared.completed_value()
    }

    /// Blocks until the timeline reaches `value`, or `timeout` passes (`Ok(false)`).
    /// `None` waits without a bound.
    pub fn wait(&self, value: u64, timeout: Option<Duration>) -> Result<bool> {
        self.shared.wait(value, timeout)
    }

    /// How many handles keep this device alive: this one, its clones, and every buffer, kernel,
    /// timestamp pool, executor and queue made from it. For leak checks: once everything else
    /// made from a device is dropped, its last handle counts 1.
    pub fn debug_handle_count(&self) -> usize {
        Arc::strong_count(&self.shared)
    }

    /// The pipeline of the device's copy kernel, once a flush made it (see
    /// [`DeviceBuilder::compute_copies`]): one for every queue of the device. For tests.
    #[doc(hidden)]
    pub fn debug_copy_kernel(&self) -> Option<vk::Pipeline> {
        self.shared.copy_kernel.get().and_then(|k| k.pipeline())
    }

    /// Interop: the raw `ash` device, for work written by hand beside vkasync's (benchmarks,
    /// existing Vulkan code). Objects vkasync owns must not be destroyed through it.
    pub fn ash_device(&self) -> &ash::Device {
        &self.shared.device
    }

    /// Interop: the `VK_KHR_push_descriptor` functions (enabled on every vkasync device).
    pub fn ash_push_descriptor(&self) -> &ash::khr::push_descriptor::Device {
        &self.shared.push_descriptor
    }

    /// Interop: submits command buffers recorded by hand in one `vkQueueSubmit` that signals the
    /// next value of the device's timeline, and returns that value (wait for it with
    /// [`Device::wait`]). vkasync does not know what they use: its next submission is ordered
    /// after them (one global barrier, or with copy queues a wait for their value) while they
    /// may still run. Ordering them after vkasync's earlier work is theirs to record. With copy
    /// queues they run on a queue of the compute family (with several compute queues, the next
    /// in turn).
    ///
    /// # Safety
    /// The command buffers must be fully recorded from a pool of this device's queue family,
    /// valid to submit, and everything they use must stay alive and untouched by the host until
    /// the returned value is reached.
    pub unsafe fn submit_raw(&self, command_buffers: &[vk::CommandBuffer]) -> Result<u64> {
        self.shared.submit(command_buffers)
    }

    /// The last counter value read (no call into the driver).
    pub(crate) fn cached_completed(&self) -> u64 {
        self.shared.cached_completed()
    }

    /// [`Error::DeviceLost`] once the device was lost.
    pub(crate) fn check_lost(&self) -> Result<()> {
        self.shared.check_lost()
    }

    /// The loss was simulated ([`Device::debug_simulate_loss`]): the GPU goes on.
    pub(crate) fn loss_is_simulated(&self) -> bool {
        self.shared.loss_is_simulated()
    }

    /// Waits for `value` even after a simulated loss (for releasing what the GPU still runs).
    pub(crate) fn wait_through_simulated_loss(&self, value: u64, timeout: Option<Duration>) -> Result<bool> {
        self.shared.wait_through_simulated_loss(value, timeout)
    }

    /// The device's copy kernel, made by `make` at the first call (see `record::copies`): one
    /// pipeline for every queue, so that a new queue's first flush does not create it again (on
    /// lavapipe that flush took 0.77–1.13 ms with the creation, 0.27–0.41 without). The device
    /// owns it and destroys it before itself ([`DeviceOwned`]); `None` if the slot holds
    /// another type.
    pub(crate) fn copy_kernel<T: DeviceOwned>(&self, make: impl FnOnce() -> T) -> Option<&T> {
        self.shared.copy_kernel.get_or_init(|| Box::new(make())).as_any().downcast_ref::<T>()
    }

    /// The command pool of the blocking path ([`crate::CommandList`]), made at its first use.
    pub(crate) fn blocking_pool(&self) -> std::sync::MutexGuard<'_, Option<crate::vk::command_pool::CommandPool>> {
        crate::util::lock(&self.shared.blocking_pool)
    }

    /// `VK_EXT_calibrated_timestamps`, when enabled.
    #[cfg_attr(not(feature = "trace"), allow(dead_code))] // used by the trace
    pub(crate) fn calibrated_timestamps(&self) -> Option<&ash::ext::calibrated_timestamps::Device> {
        self.shared.calibrated.as_ref()
    }

    /// The features that gate SPIR-V capabilities: of users' kernels, or (`internal`) of the
    /// library's own.
    pub(crate) fn shader_features(&self, internal: bool) -> &EnabledFeatures {
        if internal {
            &self.shared.internal_features
        } else {
            &self.shared.shader_features
        }
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.shared.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn raw(&self) -> &ash::Device {
        &self.shared.device
    }

    /// Submits command buffers whose buffer uses are not tracked, in one `vkQueueSubmit` that
    /// signals the next timeline value, and returns that value. The value is handed out only if
    /// the submit succeeded.
    pub(crate) fn submit(&self, command_buffers: &[vk::CommandBuffer]) -> Result<u64> {
        self.shared.submit(command_buffers)
    }

    /// Submits recorded work's command buffers, ordered after the submissions that may still
    /// run where its buffers need it (see [`DeviceShared::submit_ordered`]): its value, and
    /// whether an ordering barrier went first.
    pub(crate) fn submit_ordered(
        &self,
        command_buffers: &[vk::CommandBuffer],
        work: &mut dyn Ordered,
    ) -> Result<(u64, bool)> {
        self.shared.submit_ordered(command_buffers, Some(work))
    }

    /// As [`Device::submit_ordered`], in parts for the copy queues (see
    /// [`DeviceShared::submit_parts`]). An error comes with whether part of the submission may
    /// have gone in (the device then counts as lost, and what the submission uses must be leaked).
    pub(crate) fn submit_parts(
        &self,
        parts: Parts<'_>,
        work: &mut dyn Ordered,
    ) -> std::result::Result<(u64, bool), (Error, bool)> {
        self.shared.submit_parts(parts, Some(work))
    }

    /// Makes the device behave as lost from now on, as if the driver had answered the next
    /// call with `VK_ERROR_DEVICE_LOST`: every later submit, counter read and wait fails with
    /// [`Error::DeviceLost`], a wait already blocked fails when it returns, and the runtime
    /// takes its device-loss path (waiters fail, in-flight memory is leaked). The GPU itself
    /// goes on: this exists only so that tests can take that path on drivers where no valid
    /// call loses the device (see [`Device::debug_host_signal`] for lavapipe's).
    #[doc(hidden)]
    pub fn debug_simulate_loss(&self) {
        self.shared.simulated_loss.store(true, Ordering::SeqCst);
        self.shared.lost.store(true, Ordering::SeqCst);
    }

    /// Host-signals the timeline. Signalling a value at or below the current one is invalid
    /// usage; it exists only so that tests can drive a driver into device loss (lavapipe
    /// answers it so; elsewhere it is undefined: use [`Device::debug_simulate_loss`]).
    #[doc(hidden)]
    pub fn debug_host_signal(&self, value: u64) -> Result<()> {
        let info = vk::SemaphoreSignalInfo::default().semaphore(self.shared.timeline).value(value);
        // SAFETY: the semaphore is live. A value below the current one is invalid usage that the
        // caller asks for on purpose (see the doc); drivers answer it with device loss.
        unsafe { self.shared.device.signal_semaphore(&info) }
            .map_err(|e| self.shared.note(map_oom_and_lost("vkSignalSemaphore")(e)))
    }
}

/// What [`Device::memory_report`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryReport {
    /// Buffers not yet freed (by their last user: a handle or an in-flight submission).
    pub live_buffers: usize,
    /// Their total size in bytes.
    pub live_bytes: u64,
    /// Bytes of the blocks small buffers are carved from (kept for reuse; see [`Device::trim`]).
    pub pooled_bytes: u64,
    /// gpu-allocator allocations (pooled blocks and dedicated buffers).
    pub allocations: usize,
    /// Device memory gpu-allocator holds.
    pub reserved_bytes: u64,
}

impl DeviceShared {
    /// Records device loss so that later calls fail fast.
    pub(crate) fn note(&self, e: Error) -> Error {
        if e == Error::DeviceLost {
            self.lost.store(true, Ordering::SeqCst);
        }
        e
    }

    pub(crate) fn check_lost(&self) -> Result<()> {
        if self.lost.load(Ordering::SeqCst) {
            Err(Error::DeviceLost)
        } else {
            Ok(())
        }
    }

    pub(crate) fn submitted(&self) -> u64 {
        self.submitted.load(Ordering::SeqCst)
    }

    /// The last counter value read (no Vulkan call).
    pub(crate) fn cached_completed(&self) -> u64 {
        self.completed.load(Ordering::SeqCst)
    }

    pub(crate) fn completed_value(&self) -> Result<u64> {
        self.check_lost()?;
        // SAFETY: the semaphore is a live timeline semaphore of this device.
        let v = unsafe { self.device.get_semaphore_counter_value(self.timeline) }
            .map_err(|e| self.note(map_oom_and_lost("vkGetSemaphoreCounterValue")(e)))?;
        self.completed.fetch_max(v, Ordering::SeqCst);
        Ok(v)
    }

    /// Whether the device's loss is simulated (see [`Device::debug_simulate_loss`]).
    pub(crate) fn loss_is_simulated(&self) -> bool {
        self.simulated_loss.load(Ordering::SeqCst)
    }

    /// As [`DeviceShared::wait`], and after a simulated loss a real wait for the GPU, which goes
    /// on (so that closing a queue releases what it ran instead of leaking it with the device).
    pub(crate) fn wait_through_simulated_loss(&self, value: u64, timeout: Option<Duration>) -> Result<bool> {
        if !self.loss_is_simulated() {
            return self.wait(value, timeout);
        }
        self.wait_unchecked(value, timeout, false)
    }

    pub(crate) fn wait(&self, value: u64, timeout: Option<Duration>) -> Result<bool> {
        if value <= self.cached_completed() {
            return Ok(true);
        }
        self.check_lost()?;
        self.wait_unchecked(value, timeout, true)
    }

    /// Waits on the timeline; with `fail_if_lost`, a wait that returns after the device was
    /// found lost (reported to another call, or simulated) fails, since the value says nothing.
    fn wait_unchecked(&self, value: u64, timeout: Option<Duration>, fail_if_lost: bool) -> Result<bool> {
        if value <= self.cached_completed() {
            return Ok(true);
        }
        let sems = [self.timeline];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&sems).values(&values);
        let ns = timeout.map_or(u64::MAX, |t| t.as_nanos().min(u64::MAX as u128) as u64);
        // SAFETY: the semaphore is live; the arrays outlive the call.
        match unsafe { self.device.wait_semaphores(&info, ns) } {
            // Lost while this wait was blocked (a loss that the driver reported to another
            // call, or a simulated one): the value says nothing.
            Ok(()) if fail_if_lost && self.lost.load(Ordering::SeqCst) => Err(Error::DeviceLost),
            Ok(()) => {
                self.completed.fetch_max(value, Ordering::SeqCst);
                Ok(true)
            }
            Err(vk::Result::TIMEOUT) => Ok(false),
            Err(e) => Err(self.note(map_oom_and_lost("vkWaitSemaphores")(e))),
        }
    }

    /// Submits command buffers whose buffer uses are not tracked (written by hand, or using no
    /// buffer): the next tracked submission is ordered after them (see [`DeviceShared::submit_ordered`]).
    pub(crate) fn submit(&self, command_buffers: &[vk::CommandBuffer]) -> Result<u64> {
        self.submit_ordered(command_buffers, None).map(|(value, _)| value)
    }

    /// Submits command buffers in one `vkQueueSubmit` that signals the next timeline value, and
    /// returns that value with whether an ordering barrier went first. The value is handed out
    /// only if the submit succeeded.
    ///
    /// With `work` (recorded work whose buffer uses are tracked), under the queue's lock: a
    /// command buffer holding one global barrier goes first if `work` follows a submission
    /// that may still run (above the last counter value read), or if an untracked submission
    /// may still run; after the submit, `work` marks its buffers, still under the lock. So
    /// every submission earlier in the queue's order has marked its buffers when one decides,
    /// and the decision is exact, whichever threads and queues submit to this device.
    pub(crate) fn submit_ordered(
        &self,
        command_buffers: &[vk::CommandBuffer],
        work: Option<&mut dyn Ordered>,
    ) -> Result<(u64, bool)> {
        // A submission of one part is never submitted in part.
        self.submit_parts(Parts { compute: command_buffers, ..Parts::default() }, work).map_err(|(e, _)| e)
    }

    /// As [`DeviceShared::submit_ordered`], for a submission in parts (see
    /// [`crate::vk::copy_queues`]): with copy queues on, each part goes to its queue, and a
    /// submission that must be ordered waits for the value before its own instead of opening
    /// with a barrier. Without copy queues, only `parts.compute` may hold command buffers. An
    /// error comes with whether part of the submission may have gone in (see
    /// [`crate::vk::copy_queues`]).
    pub(crate) fn submit_parts(
        &self,
        parts: Parts<'_>,
        work: Option<&mut dyn Ordered>,
    ) -> std::result::Result<(u64, bool), (Error, bool)> {
        let whole = |e: Error| (e, false);
        self.check_lost().map_err(whole)?;
        let mut q = crate::util::lock(&self.queue);
        let value = self.submitted.load(Ordering::SeqCst) + 1;
        let completed = self.cached_completed();
        let ordered = match &work {
            Some(w) => value - 1 > completed && (q.untracked > completed || w.follows_running(completed)),
            None => false,
        };
        let q = &mut *q;
        if let Some(copy) = &mut q.copy {
            // SAFETY: the queues are externally synchronised by the lock held; the command
            // buffers are fully recorded for their parts' families and not pending elsewhere
            // (their owners recycle them only after their value is reached); `value` is greater
            // than every value signalled before, on the timeline and on the stage semaphores
            // (which are signalled with the values of their own submissions only).
            let submitted =
                unsafe { copy.submit(&self.device, self.timeline, parts, value, ordered.then_some(value - 1)) };
            if let Err((e, partial)) = submitted {
                // An earlier part may run, and no value will ever cover it: the device counts as
                // lost (see `copy_queues`), so that nothing it uses is freed.
                let e = if partial { Error::DeviceLost } else { e };
                return Err((self.note(e), partial));
            }
        } else {
            debug_assert!(parts.input.is_empty() && parts.output.is_empty(), "parts without copy queues");
            let mut list: SmallVec<[vk::CommandBuffer; 2]> = SmallVec::new();
            if ordered {
                list.push(q.order_cb(&self.device, self.queue_family).map_err(whole)?);
            }
            list.extend_from_slice(parts.compute);
            let signal_values = [value];
            let signals = [self.timeline];
            let mut timeline_info = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&signal_values);
            let submit = [vk::SubmitInfo::default()
                .command_buffers(&list)
                .signal_semaphores(&signals)
                .push_next(&mut timeline_info)];
            // SAFETY: the queue is externally synchronised by the lock held; the command buffers
            // are fully recorded and not pending elsewhere (their owners recycle them only after
            // their value is reached; the ordering buffer may be pending many times); `value` is
            // greater than every value signalled before.
            unsafe { self.device.queue_submit(q.queue, &submit, vk::Fence::null()) }
                .map_err(|e| whole(self.note(map_oom_and_lost("vkQueueSubmit")(e))))?;
        }
        match work {
            Some(w) => w.submitted(value),
            None => q.untracked = value,
        }
        self.submitted.store(value, Ordering::SeqCst);
        Ok((value, ordered))
    }
}

/// Recorded work that a submission orders by its buffers' uses (see
/// [`DeviceShared::submit_ordered`]).
pub(crate) trait Ordered {
    /// Whether the work uses a buffer that a submission which may still run (above
    /// `completed`) used in a way that needs ordering (a write after any use, a read after a
    /// write).
    fn follows_running(&self, completed: u64) -> bool;
    /// The work was submitted with `value`: its buffers' uses are marked with it.
    fn submitted(&mut self, value: u64);
}

/// The queue and, under its lock, what orders submissions (see [`DeviceShared::submit_ordered`]).
struct Submitting {
    queue: vk::Queue,
    /// With copy queues on: they, and their semaphores.
    copy: Option<CopyQueues>,
    /// A command buffer of one global barrier, recorded once (simultaneous use) in its own pool.
    order: Option<(vk::CommandPool, vk::CommandBuffer)>,
    /// The last value of a submission whose buffer uses are not tracked.
    untracked: u64,
}

impl Submitting {
    /// The ordering command buffer, recorded at its first use.
    fn order_cb(&mut self, device: &ash::Device, family: u32) -> Result<vk::CommandBuffer> {
        if let Some((_, cb)) = self.order {
            return Ok(cb);
        }
        let info = vk::CommandPoolCreateInfo::default().queue_family_index(family);
        // SAFETY: the device is live.
        let pool = unsafe { device.create_command_pool(&info, None) }.map_err(map_oom("vkCreateCommandPool"))?;
        let recorded = (|| {
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            // SAFETY: the pool is live and used by this thread only (under the queue's lock).
            let cb =
                unsafe { device.allocate_command_buffers(&alloc) }.map_err(map_oom("vkAllocateCommandBuffers"))?[0];
            let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE);
            let stages = vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER;
            let barrier = [vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(
                    vk::AccessFlags::SHADER_READ
                        | vk::AccessFlags::SHADER_WRITE
                        | vk::AccessFlags::TRANSFER_READ
                        | vk::AccessFlags::TRANSFER_WRITE
                        | vk::AccessFlags::UNIFORM_READ,
                )];
            // SAFETY: `cb` is new, from a live pool; it is recorded once and never reset.
            unsafe {
                device.begin_command_buffer(cb, &begin).map_err(map_oom("vkBeginCommandBuffer"))?;
                device.cmd_pipeline_barrier(cb, stages, stages, vk::DependencyFlags::empty(), &barrier, &[], &[]);
                device.end_command_buffer(cb).map_err(map_oom("vkEndCommandBuffer"))?;
            }
            Ok(cb)
        })();
        match recorded {
            Ok(cb) => {
                self.order = Some((pool, cb));
                Ok(cb)
            }
            Err(e) => {
                // SAFETY: nothing from the pool was submitted.
                unsafe { device.destroy_command_pool(pool, None) };
                Err(e)
            }
        }
    }
}

impl Drop for DeviceShared {
    fn drop(&mut self) {
        // Every buffer, kernel, executor and queue holds a Device, and a closed queue either
        // waited for its work or leaked it together with a Device: so nothing of ours is in
        // flight here. Work submitted by hand ([`Device::submit_raw`]) that has not completed is
        // never waited for in a drop: the device is then leaked rather than destroyed under it.
        let last = self.submitted();
        let done = if self.loss_is_simulated() {
            // The GPU goes on after a simulated loss: destroy only once it is done.
            matches!(self.wait_through_simulated_loss(last, Some(Duration::ZERO)), Ok(true))
        } else {
            self.lost.load(Ordering::SeqCst) || matches!(self.wait(last, Some(Duration::ZERO)), Ok(true) | Err(_))
        };
        if !done {
            log::error!("vkasync: the last handle of a device was dropped while the GPU still ran work submitted to it; leaking the device rather than freeing memory it may still use");
            // The copy kernel, device-owned, destroys nothing when dropped: it is leaked too.
            return;
        }
        // SAFETY: after the wait the queue is idle (or lost, when destroying is allowed);
        // nothing else uses these objects since this is the last reference.
        unsafe {
            let _ = self.device.device_wait_idle();
            if let Some(k) = self.copy_kernel.take() {
                // Every submission that used it completed.
                k.destroy(&self.device);
            }
            if let Some(pool) = self.blocking_pool.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
                pool.destroy(&self.device);
            }
            let q = self.queue.get_mut().unwrap_or_else(|p| p.into_inner());
            if let Some((pool, _)) = q.order.take() {
                self.device.destroy_command_pool(pool, None);
            }
            if let Some(c) = q.copy.take() {
                c.destroy(&self.device);
            }
            {
                let mut pool = crate::util::lock(&self.pool);
                let mut alloc = crate::util::lock(&self.allocator);
                pool.destroy_all(self, &mut alloc);
            }
            ManuallyDrop::drop(&mut self.allocator);
            self.device.destroy_semaphore(self.timeline, None);
            {
                let _serial = crate::vk::instance::lifecycle();
                self.device.destroy_device(None);
            }
            ManuallyDrop::drop(&mut self.instance);
        }
    }
}

// Opening a device, step by step (see `Device::open`).

/// The error for a device that lacks `missing`.
fn unsupported(info: &AdapterInfo, missing: &str) -> Error {
    Error::Unsupported { device: info.name.clone(), missing: missing.into() }
}

/// What `Device::open` decides about a physical device before creating the logical device on it.
struct DevicePlan {
    /// The queue family to use.
    family: u32,
    /// `VK_EXT_calibrated_timestamps` is to be enabled.
    has_calibrated: bool,
    limits: Limits,
    unified_memory: bool,
    /// The device-local heap's size and the host heap's (0 without a separate one).
    heap_size: [u64; 2],
    robust: RobustAccess,
    clear_align: u64,
    bda: bool,
    /// The Vulkan 1.0 features to enable.
    enabled: vk::PhysicalDeviceFeatures,
    /// The Vulkan 1.2 features to enable (chained into `VkDeviceCreateInfo`).
    f12: vk::PhysicalDeviceVulkan12Features<'static>,
    internal_features: EnabledFeatures,
    shader_features: EnabledFeatures,
}

impl DevicePlan {
    /// Checks the physical device, reads its properties and features, and decides what to enable.
    fn choose(
        inst: &InstanceShared,
        physical: vk::PhysicalDevice,
        info: &AdapterInfo,
        stage_always: bool,
        robust: bool,
        compute_copies: Option<bool>,
    ) -> Result<Self> {
        let instance = &inst.instance;
        let family = compute_family(info)?;
        let exts = DeviceExtensions::check(inst, physical, info)?;
        let props = PhysicalProperties::read(instance, physical, exts.robustness2);
        let memory = MemoryLayout::read(instance, physical, stage_always);
        let supported = SupportedFeatures::read(instance, physical, exts.robustness2);
        let robust = choose_robust(robust, &supported, exts.robustness2, props.robust2_align);
        let clear_align = if robust == RobustAccess::Robustness2 { props.robust2_align.max(4) } else { 4 };
        let host_query_reset = supported.host_query_reset;
        let timestamps = host_query_reset
            && props.props.limits.timestamp_compute_and_graphics == vk::TRUE
            && info.queue_families[family as usize].timestamp_valid_bits > 0;
        // Buffer device addresses serve the library's own copy kernel only: the SPIR-V
        // capability check keeps them from users' kernels, which could otherwise reach any
        // memory of the device (see `copies`).
        // Off by default under validation layers older than 1.3.275: such a layer (1.3.239 on
        // Debian 12) crashed inside its own `vkCmdPipelineBarrier` when several devices with
        // device-address buffers recorded at once in one process (`tests/zero_init.rs` with
        // its tests in parallel: 3 crashes in 30 runs; none in 30 with copies off, none in 30
        // with one test at a time). Asked for explicitly, it is on.
        let compute_copies = compute_copies.unwrap_or(!inst.old_layer);
        let bda = compute_copies && supported.buffer_device_address;
        let (enabled, f12) = features_to_enable(robust, host_query_reset, bda);
        // No 1.1 feature is enabled.
        let f11 = vk::PhysicalDeviceVulkan11Features::default();
        let internal_features = EnabledFeatures::new(&enabled, &f11, &f12, &props.subgroup);
        let shader_features = EnabledFeatures { buffer_device_address: false, ..internal_features };
        Ok(DevicePlan {
            family,
            has_calibrated: exts.calibrated,
            limits: Limits { timestamps, ..device_limits(&props, memory.largest_heap) },
            unified_memory: memory.unified,
            heap_size: [memory.device_local_heap, memory.host_heap.unwrap_or(0)],
            robust,
            clear_align,
            bda,
            enabled,
            f12,
            internal_features,
            shader_features,
        })
    }
}

/// The queue family to use: a compute-only family (no graphics) if any, else any with compute.
fn compute_family(info: &AdapterInfo) -> Result<u32> {
    // Prefer a compute-only family (no graphics), else any family with compute.
    let family = info
        .queue_families
        .iter()
        .filter(|q| q.compute && q.queue_count > 0)
        .min_by_key(|q| (q.graphics, q.index))
        .ok_or_else(|| unsupported(info, "a queue family with compute"))?
        .index;
    Ok(family)
}

/// The optional device extensions that `Device::open` enables where offered.
struct DeviceExtensions {
    /// `VK_EXT_robustness2` is offered.
    robustness2: bool,
    /// `VK_EXT_calibrated_timestamps` is offered with the device and CLOCK_MONOTONIC domains.
    calibrated: bool,
}

impl DeviceExtensions {
    /// Reads the device's extensions: refuses a device without `VK_KHR_push_descriptor`.
    fn check(inst: &InstanceShared, physical: vk::PhysicalDevice, info: &AdapterInfo) -> Result<Self> {
        let instance = &inst.instance;
        // SAFETY: `physical` was enumerated from the live instance.
        let exts = unsafe { instance.enumerate_device_extension_properties(physical) }
            .map_err(map_oom("vkEnumerateDeviceExtensionProperties"))?;
        let has = |name: &std::ffi::CStr| exts.iter().any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name));
        if !has(ash::khr::push_descriptor::NAME) {
            return Err(unsupported(info, "the VK_KHR_push_descriptor extension"));
        }

        let robustness2 = has(ash::ext::robustness2::NAME);
        // Calibrated timestamps (for traces) where the device can pair its clock with
        // CLOCK_MONOTONIC, the clock `Instant` reads on Linux.
        let calibrated = cfg!(target_os = "linux") && has(ash::ext::calibrated_timestamps::NAME) && {
            let ext = ash::ext::calibrated_timestamps::Instance::new(&inst.entry, instance);
            // SAFETY: `physical` was enumerated from the live instance, which offers the
            // extension's instance-level command (the device extension is present).
            let domains = unsafe { ext.get_physical_device_calibrateable_time_domains(physical) }.unwrap_or_default();
            domains.contains(&vk::TimeDomainEXT::DEVICE) && domains.contains(&vk::TimeDomainEXT::CLOCK_MONOTONIC)
        };
        Ok(DeviceExtensions { robustness2, calibrated })
    }
}

/// The physical device's properties that `Device::open` uses.
struct PhysicalProperties {
    props: vk::PhysicalDeviceProperties,
    /// `maxMemoryAllocationSize` (`VkPhysicalDeviceMaintenance3Properties`).
    max_memory_allocation_size: u64,
    /// The larger of robustness2's storage and uniform access size alignments, at least 1 (1
    /// without the extension).
    robust2_align: u64,
    subgroup: vk::PhysicalDeviceSubgroupProperties<'static>,
}

impl PhysicalProperties {
    /// Reads the core, maintenance 3, subgroup and (where offered) robustness2 properties.
    fn read(instance: &ash::Instance, physical: vk::PhysicalDevice, has_robustness2: bool) -> Self {
        let mut maint3 = vk::PhysicalDeviceMaintenance3Properties::default();
        let mut robust2_props = vk::PhysicalDeviceRobustness2PropertiesEXT::default();
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut maint3).push_next(&mut subgroup);
        if has_robustness2 {
            props2 = props2.push_next(&mut robust2_props);
        }
        // SAFETY: `physical` was enumerated from the live instance; the device is 1.2+ (checked
        // by the selector), so the chain is valid; the robustness2 struct is chained only when
        // the extension is offered.
        unsafe { instance.get_physical_device_properties2(physical, &mut props2) };
        let props = props2.properties;
        let robust2_align = robust2_props
            .robust_storage_buffer_access_size_alignment
            .max(robust2_props.robust_uniform_buffer_access_size_alignment)
            .max(1);
        PhysicalProperties {
            props,
            max_memory_allocation_size: maint3.max_memory_allocation_size,
            robust2_align,
            subgroup,
        }
    }
}

/// The physical device's memory heaps and types, as `Device::open` uses them.
struct MemoryLayout {
    largest_heap: u64,
    /// The largest device-local heap (the largest heap if none is device-local).
    device_local_heap: u64,
    /// The largest heap that is not device-local, if any.
    host_heap: Option<u64>,
    /// Every device-local memory type is host-visible (and staging is not forced).
    unified: bool,
}

impl MemoryLayout {
    /// Reads the memory properties; `stage_always` makes the memory count as not unified.
    fn read(instance: &ash::Instance, physical: vk::PhysicalDevice, stage_always: bool) -> Self {
        // SAFETY: `physical` was enumerated from the live instance.
        let mem = unsafe { instance.get_physical_device_memory_properties(physical) };
        let heaps = &mem.memory_heaps[..mem.memory_heap_count as usize];
        let types = &mem.memory_types[..mem.memory_type_count as usize];
        let largest_heap = heaps.iter().map(|h| h.size).max().unwrap_or(0);
        let device_local_heap = heaps
            .iter()
            .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
            .map(|h| h.size)
            .max()
            .unwrap_or(largest_heap);
        let host_heap =
            heaps.iter().filter(|h| !h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL)).map(|h| h.size).max();
        let unified = !stage_always
            && types
                .iter()
                .filter(|t| t.property_flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL))
                .all(|t| t.property_flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE));
        MemoryLayout { largest_heap, device_local_heap, host_heap, unified }
    }
}

/// The limits vkasync checks, from the properties (`timestamps` is set by the caller, from the features).
fn device_limits(props: &PhysicalProperties, largest_heap: u64) -> Limits {
    let limits = &props.props.limits;
    Limits {
        max_compute_work_group_count: limits.max_compute_work_group_count,
        max_push_constants_size: limits.max_push_constants_size,
        max_storage_buffer_range: limits.max_storage_buffer_range as u64,
        max_uniform_buffer_range: limits.max_uniform_buffer_range as u64,
        max_buffer_size: props.max_memory_allocation_size.min(largest_heap),
        timestamp_period_ns: limits.timestamp_period,
        min_storage_buffer_offset_alignment: limits.min_storage_buffer_offset_alignment,
        max_compute_shared_memory_size: limits.max_compute_shared_memory_size,
        max_compute_work_group_size: limits.max_compute_work_group_size,
        max_compute_work_group_invocations: limits.max_compute_work_group_invocations,
        timestamps: false,
    }
}

/// The features the physical device offers that `Device::open` may enable.
struct SupportedFeatures {
    robust_buffer_access: bool,
    /// `robustBufferAccess2` (false without `VK_EXT_robustness2`).
    robust_buffer_access2: bool,
    host_query_reset: bool,
    buffer_device_address: bool,
}

impl SupportedFeatures {
    /// Reads the core, Vulkan 1.2 and (where offered) robustness2 features.
    fn read(instance: &ash::Instance, physical: vk::PhysicalDevice, has_robustness2: bool) -> Self {
        let mut supported12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut supported_robust2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default();
        let mut features2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut supported12);
        if has_robustness2 {
            features2 = features2.push_next(&mut supported_robust2);
        }
        // SAFETY: `physical` was enumerated from the live instance (a 1.2 device, so the
        // Vulkan12Features chain is valid; robustness2's struct only when the extension is
        // offered).
        unsafe { instance.get_physical_device_features2(physical, &mut features2) };
        let robust_buffer_access = features2.features.robust_buffer_access == vk::TRUE;
        SupportedFeatures {
            robust_buffer_access,
            robust_buffer_access2: supported_robust2.robust_buffer_access2 == vk::TRUE,
            host_query_reset: supported12.host_query_reset == vk::TRUE,
            buffer_device_address: supported12.buffer_device_address == vk::TRUE,
        }
    }
}

/// Which robust buffer access to enable, from what was asked (`asked`) and what is offered.
fn choose_robust(
    asked: bool,
    supported: &SupportedFeatures,
    has_robustness2: bool,
    robust2_align: u64,
) -> RobustAccess {
    // The pool keeps chunks aligned to `CHUNK_ALIGN`, so robustness2's rounding of a
    // binding's range stays inside the buffer's chunk (see `pool`). The specification caps
    // these alignments at 4 and 256; a driver reporting more is not trusted with it.
    match (asked, supported.robust_buffer_access) {
        (false, _) | (true, false) => RobustAccess::Off,
        (true, true)
            if has_robustness2 && supported.robust_buffer_access2 && robust2_align <= crate::vk::pool::CHUNK_ALIGN =>
        {
            RobustAccess::Robustness2
        }
        (true, true) => RobustAccess::Core,
    }
}

/// The Vulkan 1.0 and 1.2 features to enable at `vkCreateDevice`.
fn features_to_enable(
    robust: RobustAccess,
    host_query_reset: bool,
    bda: bool,
) -> (vk::PhysicalDeviceFeatures, vk::PhysicalDeviceVulkan12Features<'static>) {
    let f12 = vk::PhysicalDeviceVulkan12Features::default()
        .timeline_semaphore(true)
        .host_query_reset(host_query_reset)
        .buffer_device_address(bda);
    // Of the Vulkan 1.0 features only robust buffer access is enabled, and no 1.1 feature;
    // these feed the SPIR-V capability check.
    let enabled = vk::PhysicalDeviceFeatures::default().robust_buffer_access(robust != RobustAccess::Off);
    (enabled, f12)
}

/// Creates the logical device: one queue of the plan's family, its features and extensions.
fn create_logical_device(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    info: &AdapterInfo,
    plan: &DevicePlan,
    compute_queues: u32,
    copy_family: Option<(u32, u32)>,
) -> Result<ash::Device> {
    let priorities = [1.0f32; 8];
    let mut queue_info: SmallVec<[vk::DeviceQueueCreateInfo<'_>; 2]> =
        smallvec::smallvec![vk::DeviceQueueCreateInfo::default()
            .queue_family_index(plan.family)
            .queue_priorities(&priorities[..compute_queues as usize])];
    if let Some((family, count)) = copy_family {
        let info = vk::DeviceQueueCreateInfo::default().queue_family_index(family);
        queue_info.push(info.queue_priorities(&priorities[..count as usize]));
    }
    let mut ext_names = vec![ash::khr::push_descriptor::NAME.as_ptr()];
    let mut f12 = plan.f12;
    let mut robust2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default().robust_buffer_access2(true);
    let mut device_info = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queue_info)
        .enabled_features(&plan.enabled)
        .push_next(&mut f12);
    if plan.has_calibrated {
        ext_names.push(ash::ext::calibrated_timestamps::NAME.as_ptr());
    }
    if plan.robust == RobustAccess::Robustness2 {
        ext_names.push(ash::ext::robustness2::NAME.as_ptr());
        device_info = device_info.push_next(&mut robust2);
    }
    let device_info = device_info.enabled_extension_names(&ext_names);
    {
        let _serial = crate::vk::instance::lifecycle();
        // SAFETY: `device_info` and all it points to live across the call; the features
        // asked for were checked (timeline semaphores by the selector).
        unsafe { instance.create_device(physical, &device_info, None) }
    }
    .map_err(|e| match e {
        vk::Result::ERROR_FEATURE_NOT_PRESENT | vk::Result::ERROR_EXTENSION_NOT_PRESENT => {
            unsupported(info, "a feature or extension vkasync needs")
        }
        vk::Result::ERROR_DEVICE_LOST => Error::DeviceLost,
        e => map_oom("vkCreateDevice")(e),
    })
}

/// Creates the queue's timeline semaphore, at 0.
fn create_timeline(device: &ash::Device) -> Result<vk::Semaphore> {
    let mut type_info =
        vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(0);
    let sem_info = vk::SemaphoreCreateInfo::default().push_next(&mut type_info);
    // SAFETY: the device is live; the chain asks for a timeline semaphore, which is enabled.
    unsafe { device.create_semaphore(&sem_info, None) }.map_err(map_oom("vkCreateSemaphore"))
}

/// Creates the memory allocator; if that fails, destroys `timeline` (never used) too.
fn create_allocator(
    instance: &ash::Instance,
    device: &ash::Device,
    physical: vk::PhysicalDevice,
    bda: bool,
    timeline: vk::Semaphore,
) -> Result<Allocator> {
    Allocator::new(&AllocatorCreateDesc {
        instance: instance.clone(),
        device: device.clone(),
        physical_device: physical,
        debug_settings: {
            let mut settings = gpu_allocator::AllocatorDebugSettings::default();
            settings.log_leaks_on_shutdown = true;
            settings
        },
        buffer_device_address: bda,
        allocation_sizes: Default::default(),
    })
    .map_err(|e| {
        // SAFETY: the semaphore was never used.
        unsafe { device.destroy_semaphore(timeline, None) };
        map_alloc(e)
    })
}

/// The objects `Device::open` created, for [`DeviceShared::assemble`].
struct DeviceHandles {
    device: ash::Device,
    push_descriptor: ash::khr::push_descriptor::Device,
    calibrated: Option<ash::ext::calibrated_timestamps::Device>,
    queue: vk::Queue,
    copy: Option<CopyQueues>,
    timeline: vk::Semaphore,
    allocator: Allocator,
}

impl DeviceShared {
    /// A freshly opened device's state: nothing submitted, allocated or pooled yet.
    fn assemble(inst: InstanceShared, info: AdapterInfo, plan: DevicePlan, handles: DeviceHandles) -> Self {
        DeviceShared {
            info,
            limits: plan.limits,
            unified_memory: plan.unified_memory,
            robust: plan.robust,
            clear_align: plan.clear_align,
            device: handles.device,
            push_descriptor: handles.push_descriptor,
            calibrated: handles.calibrated,
            queue_family: plan.family,
            copy_info: handles.copy.as_ref().map(|c| c.info),
            concurrent_families: handles.copy.as_ref().and_then(|c| c.concurrent_families(plan.family)),
            queue: Mutex::new(Submitting { queue: handles.queue, copy: handles.copy, order: None, untracked: 0 }),
            timeline: handles.timeline,
            submitted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            lost: AtomicBool::new(false),
            simulated_loss: AtomicBool::new(false),
            allocator: ManuallyDrop::new(Mutex::new(handles.allocator)),
            pool: Mutex::default(),
            stash: crate::vk::pool::Stash::default(),
            heap_used: [AtomicU64::new(0), AtomicU64::new(0)],
            heap_size: plan.heap_size,
            live_buffers: AtomicU64::new(0),
            live_bytes: AtomicU64::new(0),
            blocking_pool: Mutex::new(None),
            copy_kernel: std::sync::OnceLock::new(),
            next_id: AtomicU64::new(1),
            instance: ManuallyDrop::new(inst),
            shader_features: plan.shader_features,
            internal_features: plan.internal_features,
            bda: plan.bda,
        }
    }
}

/// Destroys a device on early return during [`Device::open`].
struct DestroyDevice(Option<ash::Device>);

impl Drop for DestroyDevice {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            let _serial = crate::vk::instance::lifecycle();
            // SAFETY: only reached when opening failed before any object of `d` escaped.
            unsafe { d.destroy_device(None) };
        }
    }
}
