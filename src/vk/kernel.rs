//! Compute kernels: a pipeline made from SPIR-V, with its bindings and push constants checked.
//!
//! Descriptors are pushed with `VK_KHR_push_descriptor` at each dispatch, so a kernel needs no
//! descriptor pool and a dispatch allocates nothing that must be recycled.

use crate::error::{map_oom, Error, Result};
use crate::vk::buffer::{Buffer, RawBuffer};
use crate::vk::device::{Device, DeviceOwned};
use crate::vk::spirv::{self, BindingKind, Reflection};
use ash::vk;
use bytemuck::Pod;
use std::sync::Arc;

/// SPIR-V compiled from `shaders/` at build time and checked there by the SPIR-V validator; see
/// [`crate::kernels`]. Only `build.rs` makes these (`#[non_exhaustive]` keeps other crates from
/// doing so), so [`Kernel::new`] trusts them.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct KernelSource {
    /// The shader's file stem, e.g. `"mix"`.
    pub name: &'static str,
    /// Its path in the repository, e.g. `"shaders/mix.comp"`.
    pub path: &'static str,
    /// The SPIR-V words.
    pub spirv: &'static [u32],
}

impl KernelSource {
    /// A kernel compiled and validated at build time, for the code `vkasync-build` generates in
    /// a crate that depends on vkasync (`vkasync_build::compile_shaders`). [`Kernel::new`] hands
    /// these words to the driver without validating them again (it still checks their
    /// capabilities against the device).
    ///
    /// # Safety
    /// `spirv` must be a module that SPIRV-Tools' validator accepted for Vulkan 1.2
    /// (vkasync-build runs it), or empty (a build without shaderc; [`Kernel::new`] refuses it).
    /// Invalid SPIR-V given to a driver is undefined behaviour.
    pub const unsafe fn prevalidated(name: &'static str, path: &'static str, spirv: &'static [u32]) -> Self {
        KernelSource { name, path, spirv }
    }
}

pub(crate) struct RawKernel {
    /// The device that made the kernel, held so that it outlives the kernel, which destroys its
    /// objects when dropped. `None` for a kernel its device owns ([`OwnedKernel`]): the
    /// device destroys that one's objects before itself, and the kernel, dropped, destroys
    /// nothing.
    owner: Option<Device>,
    /// Which device made it ([`Device::id`]), owned or not.
    device_id: usize,
    pub name: String,
    pub reflection: Reflection,
    pub set_layout: vk::DescriptorSetLayout,
    pub layout: vk::PipelineLayout,
    pub pipeline: vk::Pipeline,
}

impl RawKernel {
    /// Whether `device` made the kernel.
    pub(crate) fn made_by(&self, device: &Device) -> bool {
        self.device_id == device.id()
    }

    /// Destroys the kernel's objects.
    ///
    /// # Safety
    /// `d` is the device that made them, no submission that uses them may still run, and they
    /// are never used again.
    pub(crate) unsafe fn destroy(&self, d: &ash::Device) {
        // SAFETY: as the caller promises.
        unsafe {
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

impl Drop for RawKernel {
    fn drop(&mut self) {
        if let Some(device) = &self.owner {
            // SAFETY: every recorded dispatch holds an Arc<RawKernel> until its submission's
            // timeline value is reached, so no pending command buffer uses these objects.
            unsafe { self.destroy(device.raw()) };
        }
    }
}

/// One of the library's own kernels, owned by its device (see [`DeviceOwned`]); `None` inside
/// where it could not be made.
pub(crate) struct OwnedKernel(Option<Kernel>);

impl OwnedKernel {
    /// Makes the kernel of `source` for `device` to own (a failure is logged, and `None` kept).
    pub(crate) fn make(device: &Device, source: &KernelSource) -> Self {
        OwnedKernel(match Kernel::internal(device, source) {
            Ok(k) => Some(k),
            Err(e) => {
                log::warn!("vkasync: the {} kernel could not be made ({e}); its work falls back", source.name);
                None
            }
        })
    }

    pub(crate) fn get(&self) -> Option<&Kernel> {
        self.0.as_ref()
    }
}

impl DeviceOwned for OwnedKernel {
    unsafe fn destroy(&self, device: &ash::Device) {
        if let Some(k) = &self.0 {
            // SAFETY: the caller's contract; a handle of the kernel still held elsewhere (a
            // trace's event names it) is never dispatched again.
            unsafe { k.raw.destroy(device) };
        }
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn pipeline(&self) -> Option<vk::Pipeline> {
        self.0.as_ref().map(|k| k.raw.pipeline)
    }
}

/// A compute pipeline. Cheap to clone.
///
/// ```no_run
/// use vkasync::{kernels, Device, Kernel};
/// let device = Device::new()?;
/// let mix = Kernel::new(&device, &kernels::MIX)?;
/// assert_eq!(mix.push_constant_size(), 8);
/// # Ok::<(), vkasync::Error>(())
/// ```
#[derive(Clone)]
pub struct Kernel {
    pub(crate) raw: Arc<RawKernel>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("name", &self.raw.name).field("reflection", &self.raw.reflection).finish()
    }
}

impl Kernel {
    /// Creates the pipeline for a kernel compiled at build time. `build.rs` already ran the SPIR-V
    /// validator on it, so only the device checks of [`Kernel::from_words`] run here.
    pub fn new(device: &Device, source: &KernelSource) -> Result<Self> {
        if source.spirv.is_empty() {
            return Err(Error::InvalidSpirv(format!(
                "{} has no SPIR-V: this build compiled no shaders (vkasync-build without its `shaderc` feature)",
                source.path
            )));
        }
        // SAFETY: a `KernelSource` is only made by the code `build.rs` generates, after the SPIR-V
        // validator accepted its words (`#[non_exhaustive]` keeps other crates from making one).
        unsafe { Self::from_words_unchecked(device, source.name, source.spirv) }
    }

    /// Creates a pipeline from SPIR-V bytes supplied at run time (e.g. read from a `.spv` file),
    /// little- or big-endian. Validated like [`Kernel::from_words`].
    pub fn from_spirv(device: &Device, name: &str, bytes: &[u8]) -> Result<Self> {
        let words = spirv::words_from_bytes(bytes)?;
        Self::from_words(device, name, &words)
    }

    /// Creates a pipeline from SPIR-V words supplied at run time.
    ///
    /// Before any driver call, the whole module goes through the SPIR-V validator of SPIRV-Tools
    /// (Vulkan 1.2 rules); then its capabilities, extensions and workgroup size are checked
    /// against the device. Errors:
    /// - [`Error::InvalidSpirv`]: not a valid module (the validator's message says why), or not a
    ///   compute kernel vkasync can bind (e.g. images, descriptor sets other than 0);
    /// - [`Error::UnsupportedCapability`]: an `OpCapability` (or `OpExtension`) that needs a feature
    ///   vkasync did not enable (e.g. `Int64`);
    /// - [`Error::WorkgroupSize`]: a workgroup larger than the device allows;
    /// - [`Error::PushConstants`]: a push-constant block larger than the device allows.
    ///
    /// Validation costs tens of microseconds for a small kernel (see README); for trusted words
    /// that were validated before, [`Kernel::from_words_unchecked`] skips it.
    pub fn from_words(device: &Device, name: &str, words: &[u32]) -> Result<Self> {
        crate::vk::spirv_val::validate(words)?;
        // SAFETY: the validator accepted the module just above.
        unsafe { Self::from_words_unchecked(device, name, words) }
    }

    /// Creates a pipeline from SPIR-V words without running the SPIR-V validator. The device
    /// checks of [`Kernel::from_words`] (capabilities, workgroup size, push constants, bindings)
    /// still run.
    ///
    /// # Safety
    /// `words` must be a module that the SPIR-V validator of SPIRV-Tools accepts for Vulkan 1.2
    /// (`spirv-val --target-env vulkan1.2`). Drivers and the validation layer assume valid SPIR-V:
    /// an invalid module can crash the process inside `vkCreateShaderModule` or
    /// `vkCreateComputePipelines`.
    pub unsafe fn from_words_unchecked(device: &Device, name: &str, words: &[u32]) -> Result<Self> {
        // SAFETY: the caller's contract.
        unsafe { Self::create(device, name, words, device.shader_features(false), true) }
    }

    /// One of the library's own kernels (`shaders/internal/`), whose capabilities are checked
    /// against the features the library enabled for itself (buffer device addresses). The
    /// device owns it ([`OwnedKernel`]): the kernel does not hold the device, which destroys its
    /// objects before itself.
    fn internal(device: &Device, source: &KernelSource) -> Result<Self> {
        if source.spirv.is_empty() {
            return Err(Error::InvalidSpirv(format!("{} has no SPIR-V (built without shaderc)", source.path)));
        }
        // SAFETY: as in `Kernel::new`: `build.rs` validated the words.
        unsafe { Self::create(device, source.name, source.spirv, device.shader_features(true), false) }
    }

    /// `held`: the kernel holds its device (every kernel but the device's own).
    ///
    /// # Safety
    /// As [`Kernel::from_words_unchecked`].
    unsafe fn create(
        device: &Device,
        name: &str,
        words: &[u32],
        features: &crate::vk::spirv_caps::EnabledFeatures,
        held: bool,
    ) -> Result<Self> {
        let mut reflection = spirv::reflect(words)?;
        let limits = device.limits();
        reflection.local_size = crate::vk::spirv_caps::check(
            name,
            words,
            features,
            limits.max_compute_work_group_size,
            limits.max_compute_work_group_invocations,
        )?;
        let limits = device.limits();
        if reflection.push_constant_size > limits.max_push_constants_size {
            return Err(Error::PushConstants {
                kernel: name.into(),
                reason: format!(
                    "the block is {} bytes but the device allows {}",
                    reflection.push_constant_size, limits.max_push_constants_size
                ),
            });
        }
        // Push descriptors allow at least 32 descriptors per set (`maxPushDescriptors`); binding
        // numbers below 32 keep within that, and keep drivers from sizing tables by a huge number.
        if let Some(b) = reflection.bindings.iter().find(|b| b.binding >= 32) {
            return Err(Error::BindingMismatch {
                kernel: name.into(),
                reason: format!("binding {} is too large; vkasync supports bindings 0 to 31", b.binding),
            });
        }
        device.check_lost()?;
        let d = device.raw();
        let layout_bindings: Vec<vk::DescriptorSetLayoutBinding> = reflection
            .bindings
            .iter()
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b.binding)
                    .descriptor_type(descriptor_type(b.kind))
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let set_info = vk::DescriptorSetLayoutCreateInfo::default()
            .flags(vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR)
            .bindings(&layout_bindings);
        // SAFETY: the device is live; push descriptors are enabled at device creation.
        let set_layout = unsafe { d.create_descriptor_set_layout(&set_info, None) }
            .map_err(map_oom("vkCreateDescriptorSetLayout"))?;
        // Owned pieces are wrapped right away, so an early return destroys them.
        let mut guard = Partial {
            device: device.clone(),
            set_layout,
            layout: vk::PipelineLayout::null(),
            module: vk::ShaderModule::null(),
        };
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .offset(0)
            .size(reflection.push_constant_size)];
        let set_layouts = [set_layout];
        let mut layout_info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
        if reflection.push_constant_size > 0 {
            layout_info = layout_info.push_constant_ranges(&ranges);
        }
        // SAFETY: as above.
        guard.layout =
            unsafe { d.create_pipeline_layout(&layout_info, None) }.map_err(map_oom("vkCreatePipelineLayout"))?;
        let module_info = vk::ShaderModuleCreateInfo::default().code(words);
        // SAFETY: `words` is a valid SPIR-V module (the caller's contract) whose capabilities,
        // extensions and workgroup size fit the device (checked above).
        guard.module = unsafe { d.create_shader_module(&module_info, None) }.map_err(|e| match e {
            vk::Result::ERROR_INVALID_SHADER_NV => Error::InvalidSpirv("rejected by the driver".into()),
            e => map_oom("vkCreateShaderModule")(e),
        })?;
        let entry = std::ffi::CString::new(reflection.entry_point.clone())
            .map_err(|_| Error::InvalidSpirv("entry point name contains NUL".into()))?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(guard.module)
            .name(&entry);
        let info = [vk::ComputePipelineCreateInfo::default().stage(stage).layout(guard.layout)];
        // SAFETY: module and layout are live and match (bindings and push constants come from
        // the module's own reflection).
        let pipeline = unsafe { d.create_compute_pipelines(vk::PipelineCache::null(), &info, None) }.map_err(
            |(_, e)| match e {
                vk::Result::ERROR_INVALID_SHADER_NV => Error::InvalidSpirv("rejected by the driver".into()),
                e => map_oom("vkCreateComputePipelines")(e),
            },
        )?[0];
        // SAFETY: the module is no longer needed once the pipeline exists.
        unsafe { d.destroy_shader_module(guard.module, None) };
        let layout = guard.layout;
        // The pieces now belong to the kernel: the guard destroys nothing (null handles) and
        // lets its device handle go. (Forgetting the guard leaked that handle, and with it the
        // whole device, for every kernel made.)
        guard.set_layout = vk::DescriptorSetLayout::null();
        guard.layout = vk::PipelineLayout::null();
        guard.module = vk::ShaderModule::null();
        drop(guard);
        Ok(Kernel {
            raw: Arc::new(RawKernel {
                owner: held.then(|| device.clone()),
                device_id: device.id(),
                name: name.into(),
                reflection,
                set_layout,
                layout,
                pipeline,
            }),
        })
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.raw.name
    }

    /// What reflection found in its SPIR-V.
    pub fn reflection(&self) -> &Reflection {
        &self.raw.reflection
    }

    /// The size of its push-constant block in bytes.
    pub fn push_constant_size(&self) -> u32 {
        self.raw.reflection.push_constant_size
    }

    /// Its workgroup size.
    pub fn local_size(&self) -> [u32; 3] {
        self.raw.reflection.local_size
    }

    /// Interop: the raw pipeline and its layout (set 0 uses push descriptors).
    pub fn raw_handles(&self) -> (vk::Pipeline, vk::PipelineLayout) {
        (self.raw.pipeline, self.raw.layout)
    }

    /// The number of workgroups a 1-D dispatch over `n` items needs.
    pub fn groups_for(&self, n: u64) -> u32 {
        let per = self.raw.reflection.local_size[0].max(1) as u64;
        n.div_ceil(per).min(u32::MAX as u64) as u32
    }
}

fn descriptor_type(kind: BindingKind) -> vk::DescriptorType {
    match kind {
        BindingKind::Storage => vk::DescriptorType::STORAGE_BUFFER,
        BindingKind::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
    }
}

/// Destroys what [`Kernel::from_words`] created before it fails.
struct Partial {
    device: Device,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    module: vk::ShaderModule,
}

impl Drop for Partial {
    fn drop(&mut self) {
        let d = self.device.raw();
        // SAFETY: only reached on an early return: these objects were never used by the GPU.
        // Destroying null handles is allowed.
        unsafe {
            d.destroy_shader_module(self.module, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

/// One buffer argument of a dispatch: binds a buffer as a storage buffer (the default, through
/// `From<&Buffer<T>>`) or as a uniform buffer.
#[derive(Clone)]
pub struct Arg {
    pub(crate) buffer: Arc<RawBuffer>,
    pub(crate) kind: BindingKind,
}

impl std::fmt::Debug for Arg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arg").field("buffer", &self.buffer.id).field("kind", &self.kind).finish()
    }
}

impl Arg {
    /// Binds `buffer` as a storage buffer.
    pub fn storage<T: Pod>(buffer: &Buffer<T>) -> Self {
        Arg { buffer: buffer.raw.clone(), kind: BindingKind::Storage }
    }

    /// Binds `buffer` as a uniform buffer.
    pub fn uniform<T: Pod>(buffer: &Buffer<T>) -> Self {
        Arg { buffer: buffer.raw.clone(), kind: BindingKind::Uniform }
    }
}

impl<T: Pod> From<&Buffer<T>> for Arg {
    fn from(b: &Buffer<T>) -> Self {
        Arg::storage(b)
    }
}
