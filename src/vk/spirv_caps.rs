//! What a module asks of the device: its `OpCapability`s and `OpExtension`s against the features
//! vkasync enabled (`VUID-VkShaderModuleCreateInfo-pCode-08737` and `-08739`), and its workgroup
//! size against `maxComputeWorkGroupSize` / `maxComputeWorkGroupInvocations`
//! (`VUID-RuntimeSpirv-x-06429`, `-06430`). The SPIR-V validator cannot check these: it does not
//! know the device.
//!
//! Runs for every kernel, build-time ones included (they are compiled before the device is known),
//! after [`crate::vk::spirv_val`] for run-time modules. It assumes a structurally sound instruction
//! stream but still bounds-checks every read.
//!
//! The capability table follows the Vulkan 1.2 specification, appendix "SPIR-V Environment",
//! table "List of SPIR-V Capabilities and corresponding Vulkan features": capabilities that need
//! no feature are always allowed, feature-gated ones only when [`EnabledFeatures`] says the
//! feature was enabled at device creation, subgroup ones only when the device supports the
//! operation class in compute shaders, and every other capability is refused.

use crate::error::{Error, Result};
use ash::vk;
use std::collections::HashMap;

/// The device features that gate SPIR-V capabilities, as enabled at `vkCreateDevice`, and the
/// subgroup operations the device supports in compute shaders.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct EnabledFeatures {
    pub shader_float64: bool,
    pub shader_int64: bool,
    pub shader_int16: bool,
    pub shader_image_gather_extended: bool,
    pub shader_storage_image_multisample: bool,
    pub shader_storage_image_read_without_format: bool,
    pub shader_storage_image_write_without_format: bool,
    pub image_cube_array: bool,
    pub storage_buffer_16bit_access: bool,
    pub uniform_and_storage_buffer_16bit_access: bool,
    pub storage_push_constant16: bool,
    pub variable_pointers_storage_buffer: bool,
    pub variable_pointers: bool,
    pub shader_draw_parameters: bool,
    pub multiview: bool,
    pub storage_buffer_8bit_access: bool,
    pub uniform_and_storage_buffer_8bit_access: bool,
    pub storage_push_constant8: bool,
    pub shader_float16: bool,
    pub shader_int8: bool,
    pub shader_buffer_int64_atomics: bool,
    pub shader_shared_int64_atomics: bool,
    pub vulkan_memory_model: bool,
    pub vulkan_memory_model_device_scope: bool,
    pub buffer_device_address: bool,
    /// Subgroup operation classes usable in compute shaders (empty if compute is not among
    /// `supportedStages`).
    pub subgroup_operations: vk::SubgroupFeatureFlags,
}

impl EnabledFeatures {
    /// Reads the feature structures that were passed to `vkCreateDevice`.
    pub fn new(
        core: &vk::PhysicalDeviceFeatures,
        f11: &vk::PhysicalDeviceVulkan11Features<'_>,
        f12: &vk::PhysicalDeviceVulkan12Features<'_>,
        subgroup: &vk::PhysicalDeviceSubgroupProperties<'_>,
    ) -> Self {
        let on = |b: vk::Bool32| b == vk::TRUE;
        let subgroup_operations = if subgroup.supported_stages.contains(vk::ShaderStageFlags::COMPUTE) {
            subgroup.supported_operations
        } else {
            vk::SubgroupFeatureFlags::empty()
        };
        EnabledFeatures {
            shader_float64: on(core.shader_float64),
            shader_int64: on(core.shader_int64),
            shader_int16: on(core.shader_int16),
            shader_image_gather_extended: on(core.shader_image_gather_extended),
            shader_storage_image_multisample: on(core.shader_storage_image_multisample),
            shader_storage_image_read_without_format: on(core.shader_storage_image_read_without_format),
            shader_storage_image_write_without_format: on(core.shader_storage_image_write_without_format),
            image_cube_array: on(core.image_cube_array),
            storage_buffer_16bit_access: on(f11.storage_buffer16_bit_access),
            uniform_and_storage_buffer_16bit_access: on(f11.uniform_and_storage_buffer16_bit_access),
            storage_push_constant16: on(f11.storage_push_constant16),
            variable_pointers_storage_buffer: on(f11.variable_pointers_storage_buffer),
            variable_pointers: on(f11.variable_pointers),
            shader_draw_parameters: on(f11.shader_draw_parameters),
            multiview: on(f11.multiview),
            storage_buffer_8bit_access: on(f12.storage_buffer8_bit_access),
            uniform_and_storage_buffer_8bit_access: on(f12.uniform_and_storage_buffer8_bit_access),
            storage_push_constant8: on(f12.storage_push_constant8),
            shader_float16: on(f12.shader_float16),
            shader_int8: on(f12.shader_int8),
            shader_buffer_int64_atomics: on(f12.shader_buffer_int64_atomics),
            shader_shared_int64_atomics: on(f12.shader_shared_int64_atomics),
            vulkan_memory_model: on(f12.vulkan_memory_model),
            vulkan_memory_model_device_scope: on(f12.vulkan_memory_model_device_scope),
            buffer_device_address: on(f12.buffer_device_address),
            subgroup_operations,
        }
    }
}

/// Why a capability may or may not be used.
enum Need {
    /// Core Vulkan 1.2, no feature needed.
    Always,
    /// The named feature, and whether it is enabled.
    Feature(&'static str, bool),
    /// A subgroup operation class.
    Subgroup(vk::SubgroupFeatureFlags, &'static str),
    /// Not usable by a vkasync kernel.
    Never,
}

/// The capability's name and what it needs.
fn capability(cap: u32, f: &EnabledFeatures) -> (std::borrow::Cow<'static, str>, Need) {
    use vk::SubgroupFeatureFlags as S;
    use Need::*;
    let (name, need) = match cap {
        0 => ("Matrix", Always),
        1 => ("Shader", Always),
        9 => ("Float16", Feature("shaderFloat16", f.shader_float16)),
        10 => ("Float64", Feature("shaderFloat64", f.shader_float64)),
        11 => ("Int64", Feature("shaderInt64", f.shader_int64)),
        12 => (
            "Int64Atomics",
            Feature(
                "shaderBufferInt64Atomics or shaderSharedInt64Atomics",
                f.shader_buffer_int64_atomics || f.shader_shared_int64_atomics,
            ),
        ),
        22 => ("Int16", Feature("shaderInt16", f.shader_int16)),
        25 => ("ImageGatherExtended", Feature("shaderImageGatherExtended", f.shader_image_gather_extended)),
        27 => ("StorageImageMultisample", Feature("shaderStorageImageMultisample", f.shader_storage_image_multisample)),
        34 => ("ImageCubeArray", Feature("imageCubeArray", f.image_cube_array)),
        39 => ("Int8", Feature("shaderInt8", f.shader_int8)),
        40 => ("InputAttachment", Always),
        43 => ("Sampled1D", Always),
        44 => ("Image1D", Always),
        45 => ("SampledCubeArray", Feature("imageCubeArray", f.image_cube_array)),
        46 => ("SampledBuffer", Always),
        47 => ("ImageBuffer", Always),
        48 => ("ImageMSArray", Feature("shaderStorageImageMultisample", f.shader_storage_image_multisample)),
        49 => ("StorageImageExtendedFormats", Always),
        50 => ("ImageQuery", Always),
        51 => ("DerivativeControl", Always),
        55 => (
            "StorageImageReadWithoutFormat",
            Feature("shaderStorageImageReadWithoutFormat", f.shader_storage_image_read_without_format),
        ),
        56 => (
            "StorageImageWriteWithoutFormat",
            Feature("shaderStorageImageWriteWithoutFormat", f.shader_storage_image_write_without_format),
        ),
        61 => ("GroupNonUniform", Subgroup(S::BASIC, "BASIC")),
        62 => ("GroupNonUniformVote", Subgroup(S::VOTE, "VOTE")),
        63 => ("GroupNonUniformArithmetic", Subgroup(S::ARITHMETIC, "ARITHMETIC")),
        64 => ("GroupNonUniformBallot", Subgroup(S::BALLOT, "BALLOT")),
        65 => ("GroupNonUniformShuffle", Subgroup(S::SHUFFLE, "SHUFFLE")),
        66 => ("GroupNonUniformShuffleRelative", Subgroup(S::SHUFFLE_RELATIVE, "SHUFFLE_RELATIVE")),
        67 => ("GroupNonUniformClustered", Subgroup(S::CLUSTERED, "CLUSTERED")),
        68 => ("GroupNonUniformQuad", Subgroup(S::QUAD, "QUAD")),
        4427 => ("DrawParameters", Feature("shaderDrawParameters", f.shader_draw_parameters)),
        4433 => ("StorageBuffer16BitAccess", Feature("storageBuffer16BitAccess", f.storage_buffer_16bit_access)),
        4434 => (
            "UniformAndStorageBuffer16BitAccess",
            Feature("uniformAndStorageBuffer16BitAccess", f.uniform_and_storage_buffer_16bit_access),
        ),
        4435 => ("StoragePushConstant16", Feature("storagePushConstant16", f.storage_push_constant16)),
        4437 => ("DeviceGroup", Always),
        4439 => ("MultiView", Feature("multiview", f.multiview)),
        4441 => (
            "VariablePointersStorageBuffer",
            Feature("variablePointersStorageBuffer", f.variable_pointers_storage_buffer),
        ),
        4442 => ("VariablePointers", Feature("variablePointers", f.variable_pointers)),
        4448 => ("StorageBuffer8BitAccess", Feature("storageBuffer8BitAccess", f.storage_buffer_8bit_access)),
        4449 => (
            "UniformAndStorageBuffer8BitAccess",
            Feature("uniformAndStorageBuffer8BitAccess", f.uniform_and_storage_buffer_8bit_access),
        ),
        4450 => ("StoragePushConstant8", Feature("storagePushConstant8", f.storage_push_constant8)),
        5301 => ("ShaderNonUniform", Always),
        5345 => ("VulkanMemoryModel", Feature("vulkanMemoryModel", f.vulkan_memory_model)),
        5346 => (
            "VulkanMemoryModelDeviceScope",
            Feature("vulkanMemoryModelDeviceScope", f.vulkan_memory_model_device_scope),
        ),
        5347 => ("PhysicalStorageBufferAddresses", Feature("bufferDeviceAddress", f.buffer_device_address)),
        other => return (format!("capability {other}").into(), Never),
    };
    (name.into(), need)
}

/// SPIR-V extensions whose functionality is core in Vulkan 1.2 (their capabilities, if any, are
/// checked on their own). Any other `OpExtension` would need a device extension vkasync does not
/// enable.
const CORE_EXTENSIONS: &[&str] = &[
    "SPV_KHR_storage_buffer_storage_class",
    "SPV_KHR_variable_pointers",
    "SPV_KHR_16bit_storage",
    "SPV_KHR_8bit_storage",
    "SPV_KHR_shader_draw_parameters",
    "SPV_KHR_device_group",
    "SPV_KHR_multiview",
    "SPV_KHR_float_controls",
    "SPV_KHR_vulkan_memory_model",
    "SPV_KHR_physical_storage_buffer",
    "SPV_EXT_descriptor_indexing",
    "SPV_EXT_shader_viewport_index_layer",
    "SPV_KHR_no_integer_wrap_decoration",
];

const OP_EXTENSION: u32 = 10;
const OP_CAPABILITY: u32 = 17;
const OP_ENTRY_POINT: u32 = 15;
const OP_EXECUTION_MODE: u32 = 16;
const OP_EXECUTION_MODE_ID: u32 = 331;
const OP_CONSTANT: u32 = 43;
const OP_CONSTANT_COMPOSITE: u32 = 44;
const OP_SPEC_CONSTANT: u32 = 50;
const OP_SPEC_CONSTANT_COMPOSITE: u32 = 51;
const OP_DECORATE: u32 = 71;
const DEC_BUILT_IN: u32 = 11;
const BUILT_IN_WORKGROUP_SIZE: u32 = 25;
const MODE_LOCAL_SIZE: u32 = 17;
const MODE_LOCAL_SIZE_ID: u32 = 38;
const MODEL_GLCOMPUTE: u32 = 5;

/// Decodes a SPIR-V literal string (NUL-terminated, little-endian words).
fn literal_string(words: &[u32]) -> String {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Checks a module's capabilities, extensions and workgroup size against the device. Returns the
/// effective workgroup size (the `WorkgroupSize` built-in wins over `LocalSize`/`LocalSizeId`,
/// as the specification says).
pub(crate) fn check(
    kernel: &str,
    words: &[u32],
    features: &EnabledFeatures,
    max_size: [u32; 3],
    max_invocations: u32,
) -> Result<[u32; 3]> {
    let scan = scan(kernel, words, features)?;
    let entry = scan.entry.ok_or_else(|| Error::InvalidSpirv("no GLCompute entry point".into()))?;
    let size = scan.workgroup_size(entry)?;
    if !fits(size, max_size, max_invocations) {
        return Err(Error::WorkgroupSize { kernel: kernel.into(), size, max_size, max_invocations });
    }
    // A LocalSize literal that the WorkgroupSize built-in overrides must fit too. The
    // specification lets the built-in win, but older validation layers (1.3.204, Ubuntu
    // 22.04's) still check the literal against the device, and such a module is suspect anyway.
    if let Some(literal) = scan.literal_size(entry) {
        if !fits(literal, max_size, max_invocations) {
            return Err(Error::WorkgroupSize { kernel: kernel.into(), size: literal, max_size, max_invocations });
        }
    }
    Ok(size)
}

/// Whether a workgroup of `size` is not empty and within `max_size` and `max_invocations`.
fn fits(size: [u32; 3], max_size: [u32; 3], max_invocations: u32) -> bool {
    let invocations = size.iter().map(|&s| s as u128).product::<u128>();
    !(size.contains(&0) || size.iter().zip(max_size).any(|(&s, m)| s > m) || invocations > max_invocations as u128)
}

/// What [`scan`] collects from a module to find its workgroup size.
#[derive(Default)]
struct Scan {
    /// The first GLCompute entry point's id.
    entry: Option<u32>,
    /// `LocalSizeId` execution modes: (entry point, constant ids).
    local_size_ids: Vec<(u32, [u32; 3])>,
    /// `LocalSize` execution modes: (entry point, size).
    literal_sizes: Vec<(u32, [u32; 3])>,
    /// Ids decorated with the `WorkgroupSize` built-in.
    builtin_ids: Vec<u32>,
    /// Scalar constants and spec constants: id to value.
    scalars: HashMap<u32, u32>,
    /// Composite constants and spec constants: id to constituent ids.
    composites: HashMap<u32, Vec<u32>>,
}

/// Walks the instructions: refuses what the device lacks, and collects what the workgroup size is made of.
fn scan(kernel: &str, words: &[u32], features: &EnabledFeatures) -> Result<Scan> {
    let mut s = Scan::default();
    let mut i = 5;
    while i < words.len() {
        let count = (words[i] >> 16) as usize;
        let op = words[i] & 0xffff;
        if count == 0 || i + count > words.len() {
            return Err(Error::InvalidSpirv("truncated instruction".into()));
        }
        let ops = &words[i + 1..i + count];
        match op {
            OP_CAPABILITY if !ops.is_empty() => check_capability(kernel, ops[0], features)?,
            OP_EXTENSION => check_extension(kernel, ops)?,
            OP_ENTRY_POINT if ops.len() >= 2 && ops[0] == MODEL_GLCOMPUTE && s.entry.is_none() => {
                check_entry_point_name(&ops[2..])?;
                s.entry = Some(ops[1]);
            }
            OP_EXECUTION_MODE if ops.len() >= 5 && ops[1] == MODE_LOCAL_SIZE => {
                s.literal_sizes.push((ops[0], [ops[2], ops[3], ops[4]]));
            }
            OP_EXECUTION_MODE_ID if ops.len() >= 5 && ops[1] == MODE_LOCAL_SIZE_ID => {
                s.local_size_ids.push((ops[0], [ops[2], ops[3], ops[4]]));
            }
            OP_DECORATE if ops.len() >= 3 && ops[1] == DEC_BUILT_IN && ops[2] == BUILT_IN_WORKGROUP_SIZE => {
                s.builtin_ids.push(ops[0]);
            }
            OP_CONSTANT | OP_SPEC_CONSTANT if ops.len() >= 3 => {
                s.scalars.insert(ops[1], ops[2]);
            }
            OP_CONSTANT_COMPOSITE | OP_SPEC_CONSTANT_COMPOSITE if ops.len() >= 2 => {
                s.composites.insert(ops[1], ops[2..].to_vec());
            }
            _ => {}
        }
        i += count;
    }
    Ok(s)
}

/// Refuses an `OpCapability` whose feature or subgroup operations the device does not offer.
fn check_capability(kernel: &str, cap: u32, features: &EnabledFeatures) -> Result<()> {
    let (name, need) = capability(cap, features);
    let requires = match need {
        Need::Always => None,
        Need::Feature(_, true) => None,
        Need::Feature(feature, false) => Some(format!("the {feature} feature, which vkasync did not enable")),
        Need::Subgroup(flag, _) if features.subgroup_operations.contains(flag) => None,
        Need::Subgroup(_, class) => {
            Some(format!("subgroup operations of class {class} in compute shaders, which the device lacks"))
        }
        Need::Never => Some("a feature or extension that vkasync does not support".to_string()),
    };
    match requires {
        Some(requires) => {
            Err(Error::UnsupportedCapability { kernel: kernel.into(), capability: name.into_owned(), requires })
        }
        None => Ok(()),
    }
}

/// Refuses an `OpExtension` (`ops`: its name) that is not core in Vulkan 1.2.
fn check_extension(kernel: &str, ops: &[u32]) -> Result<()> {
    let name = literal_string(ops);
    if !CORE_EXTENSIONS.contains(&name.as_str()) {
        return Err(Error::UnsupportedCapability {
            kernel: kernel.into(),
            capability: format!("extension {name}"),
            requires: "a device extension that vkasync does not enable".into(),
        });
    }
    Ok(())
}

/// Refuses a compute entry point's name (`name`: its words) that cannot be passed as `pName`.
fn check_entry_point_name(name: &[u32]) -> Result<()> {
    // The name becomes `pName`, which must be UTF-8 (the validation layer also refuses
    // control characters); reflection would otherwise pass a lossy copy.
    let bytes: Vec<u8> = name.iter().flat_map(|w| w.to_le_bytes()).collect();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    match std::str::from_utf8(&bytes[..end]) {
        Ok(name) if !name.is_empty() && !name.chars().any(char::is_control) => Ok(()),
        _ => Err(Error::InvalidSpirv(format!("the entry point's name {:?} is not usable", &bytes[..end]))),
    }
}

impl Scan {
    /// `entry`'s workgroup size: the `WorkgroupSize` built-in, else its `LocalSizeId`, else its `LocalSize`.
    fn workgroup_size(&self, entry: u32) -> Result<[u32; 3]> {
        let bad = |m: &str| Error::InvalidSpirv(m.into());
        if let Some(id) = self.builtin_ids.iter().find(|id| self.composites.contains_key(id)) {
            return self
                .resolve(&self.composites[id])
                .ok_or_else(|| bad("the WorkgroupSize built-in is not made of 3 integer constants"));
        }
        if let Some((_, ids)) = self.local_size_ids.iter().find(|(e, _)| *e == entry) {
            return self.resolve(ids).ok_or_else(|| bad("LocalSizeId does not name 3 integer constants"));
        }
        self.literal_size(entry).ok_or_else(|| bad("the compute entry point declares no workgroup size"))
    }

    /// The `LocalSize` literal of `entry`, if it has one.
    fn literal_size(&self, entry: u32) -> Option<[u32; 3]> {
        self.literal_sizes.iter().find(|(e, _)| *e == entry).map(|(_, s)| *s)
    }

    /// The values of three scalar constants, if `ids` names exactly three.
    fn resolve(&self, ids: &[u32]) -> Option<[u32; 3]> {
        match ids {
            [x, y, z] => Some([*self.scalars.get(x)?, *self.scalars.get(y)?, *self.scalars.get(z)?]),
            _ => None,
        }
    }
}
