//! One error type for the whole crate, and the small mappers that turn a `vk::Result` into it.
//!
//! Every raw Vulkan call goes through one of the `map_*` functions below, named for the error codes
//! the call can return (see each call's "Return Codes" in the Vulkan specification). `VK_TIMEOUT`
//! is a result, not an error, where a call may time out.

use ash::vk;
use std::time::Duration;

/// Everything that can go wrong in vkasync.
///
/// Messages say what happened and, where the user can do something, what to do.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The Vulkan loader (`libvulkan.so.1` / `vulkan-1.dll`) could not be opened.
    #[error("no Vulkan loader found ({0}); install one, e.g. `apt-get install libvulkan1 mesa-vulkan-drivers` on Debian/Ubuntu")]
    NoLoader(String),
    /// The loader works, but it lists no physical device.
    #[error("no Vulkan device found; install a driver (e.g. `apt-get install mesa-vulkan-drivers` for lavapipe, the CPU device)")]
    NoDevice,
    /// `VKASYNC_DEVICE` (or the builder's selector) matched none of the listed devices.
    #[error("no Vulkan device matches {selector:?}; available: {available}. Set VKASYNC_DEVICE to an index or part of a name")]
    NoMatchingDevice {
        /// The selector that matched nothing.
        selector: String,
        /// The devices that exist, as `index: name`.
        available: String,
    },
    /// The chosen device lacks something vkasync needs (API version, feature, extension, queue).
    #[error("device {device:?} cannot be used: {missing}; choose another with VKASYNC_DEVICE or update its driver")]
    Unsupported {
        /// The device's name.
        device: String,
        /// What it lacks, e.g. "the timelineSemaphore feature".
        missing: String,
    },
    /// The validation layer was asked for but is not installed.
    #[error("validation requested but VK_LAYER_KHRONOS_validation is not installed (`apt-get install vulkan-validationlayers`)")]
    NoValidationLayer,
    /// Host memory ran out inside the driver.
    #[error("out of host memory")]
    OutOfHostMemory,
    /// Device memory ran out (the heap is exhausted).
    #[error("out of device memory: {0}")]
    OutOfDeviceMemory(String),
    /// The device was lost (driver reset, hang, or a fault). Every later GPU call fails with this.
    #[error("the Vulkan device was lost; the device and everything made from it must be recreated")]
    DeviceLost,
    /// A wait passed its timeout before the GPU reached the awaited value.
    #[error("GPU wait timed out after {0:?}")]
    Timeout(Duration),
    /// A size of zero was given where at least one element is needed.
    #[error("zero-sized {0} requested; sizes must be at least one element")]
    ZeroSize(&'static str),
    /// A size beyond what the device allows.
    #[error("{what} of {requested} bytes exceeds the device limit of {limit} bytes")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// The size asked for, in bytes.
        requested: u64,
        /// The device's limit, in bytes.
        limit: u64,
    },
    /// A request under a queue's memory bound that can never be met, so it fails instead of
    /// waiting forever (see [`crate::Ctx::buffer`]).
    #[error("cannot allocate {requested} bytes under the queue's memory bound of {limit} bytes ({held} bytes held by this job): {reason}; drop buffers before allocating more, or allocate what a job needs at once")]
    MemoryBound {
        /// The bytes asked for.
        requested: u64,
        /// The bytes of live buffers that the asking job holds under the bound.
        held: u64,
        /// The bound, in bytes.
        limit: u64,
        /// Why it can never be met.
        reason: &'static str,
    },
    /// Two sizes that must agree do not.
    #[error("size mismatch for {what}: expected {expected}, got {got}")]
    SizeMismatch {
        /// What was compared.
        what: &'static str,
        /// The size needed.
        expected: u64,
        /// The size given.
        got: u64,
    },
    /// A record's authentication tag did not match (a forged, corrupted or misnumbered record):
    /// no plaintext is released.
    #[error("record authentication failed: the tag does not match (forged, corrupted, or the wrong sequence number or keys)")]
    AuthenticationFailed,
    /// A dispatch asked for more workgroups than `maxComputeWorkGroupCount` allows.
    #[error("dispatch of {requested:?} workgroups exceeds maxComputeWorkGroupCount {limit:?}")]
    GroupCountTooLarge {
        /// The group counts asked for.
        requested: [u32; 3],
        /// The device's limits.
        limit: [u32; 3],
    },
    /// The push constants given do not fit the kernel or the device.
    #[error("push constants for kernel {kernel:?}: {reason}")]
    PushConstants {
        /// The kernel's name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// The buffers given to a dispatch do not match the kernel's bindings.
    #[error("bindings for kernel {kernel:?}: {reason}")]
    BindingMismatch {
        /// The kernel's name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// A buffer bound to a dispatch has a size its binding cannot take: past the device's limit
    /// for its descriptor type (`maxStorageBufferRange`, `maxUniformBufferRange`), or smaller
    /// than the static size of the kernel's block.
    #[error("binding {binding} of kernel {kernel:?}: {reason}")]
    BindingSize {
        /// The kernel's name.
        kernel: String,
        /// The binding number in set 0.
        binding: u32,
        /// The size of the buffer given, in bytes.
        size: u64,
        /// What is wrong.
        reason: String,
    },
    /// SPIR-V that could not be used: bad magic, truncated, no compute entry point, ...
    #[error("invalid SPIR-V: {0}")]
    InvalidSpirv(String),
    /// SPIR-V supplied at run time cannot be validated: this build of vkasync has no SPIR-V
    /// validator (cargo feature `spirv-validation` off), so the safe constructors refuse it.
    /// `Kernel::from_words_unchecked` takes words whose validity the caller vouches for.
    #[error(
        "run-time SPIR-V validation is not built in (vkasync's cargo feature `spirv-validation` is off); \
         validate the module elsewhere and use `Kernel::from_words_unchecked`"
    )]
    ValidationUnavailable,
    /// The kernel declares a SPIR-V capability (or extension) that the device does not support or
    /// that vkasync did not enable when it created the device.
    #[error("kernel {kernel:?} declares {capability}, which needs {requires}")]
    UnsupportedCapability {
        /// The kernel's name.
        kernel: String,
        /// The capability's SPIR-V name (e.g. `"Int64"`), or `"extension NAME"`.
        capability: String,
        /// What it would need.
        requires: String,
    },
    /// The kernel's workgroup size is zero somewhere or exceeds `maxComputeWorkGroupSize` or
    /// `maxComputeWorkGroupInvocations`.
    #[error("kernel {kernel:?} has workgroup size {size:?}; the device allows at most {max_size:?} and {max_invocations} invocations")]
    WorkgroupSize {
        /// The kernel's name.
        kernel: String,
        /// Its workgroup size.
        size: [u32; 3],
        /// `maxComputeWorkGroupSize`.
        max_size: [u32; 3],
        /// `maxComputeWorkGroupInvocations`.
        max_invocations: u32,
    },
    /// The buffer was used in a way its kind does not allow (e.g. mapping device-only memory).
    #[error("buffer misuse: {0}")]
    BufferUsage(String),
    /// A submission failed; the work it carried did not run.
    #[error("vkQueueSubmit failed: {0}")]
    SubmitFailed(String),
    /// A result was asked for before the GPU finished the work that produces it.
    #[error("the GPU work producing this result has not completed")]
    NotReady,
    /// Invalid input to a function (wrong key length, malformed batch, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Memory allocation failed in gpu-allocator for a reason other than an exhausted heap.
    #[error("allocation failed: {0}")]
    Allocation(String),
    /// Any other Vulkan error, with the call that returned it.
    #[error("{call} failed: {result}")]
    Vulkan {
        /// The Vulkan function.
        call: &'static str,
        /// The result it returned.
        result: vk::Result,
    },
}

/// Shorthand for `Result<T, vkasync::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// True for [`Error::DeviceLost`].
    pub fn is_device_lost(&self) -> bool {
        matches!(self, Error::DeviceLost)
    }
}

/// Maps the errors of calls that can return `VK_ERROR_OUT_OF_HOST_MEMORY`,
/// `VK_ERROR_OUT_OF_DEVICE_MEMORY` and `VK_ERROR_DEVICE_LOST` (e.g. `vkQueueSubmit`,
/// `vkWaitSemaphores`, `vkGetSemaphoreCounterValue`). Anything else becomes [`Error::Vulkan`].
pub(crate) fn map_oom_and_lost(call: &'static str) -> impl Fn(vk::Result) -> Error {
    move |result| match result {
        vk::Result::ERROR_OUT_OF_HOST_MEMORY => Error::OutOfHostMemory,
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY => Error::OutOfDeviceMemory(call.to_string()),
        vk::Result::ERROR_DEVICE_LOST => Error::DeviceLost,
        result => Error::Vulkan { call, result },
    }
}

/// Maps the errors of object-creation calls that can only return `VK_ERROR_OUT_OF_HOST_MEMORY`
/// and `VK_ERROR_OUT_OF_DEVICE_MEMORY` (buffers, pipelines, pools, ...).
pub(crate) fn map_oom(call: &'static str) -> impl Fn(vk::Result) -> Error {
    move |result| match result {
        vk::Result::ERROR_OUT_OF_HOST_MEMORY => Error::OutOfHostMemory,
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY => Error::OutOfDeviceMemory(call.to_string()),
        result => Error::Vulkan { call, result },
    }
}

/// Maps a gpu-allocator error: an exhausted heap is [`Error::OutOfDeviceMemory`].
pub(crate) fn map_alloc(e: gpu_allocator::AllocationError) -> Error {
    use gpu_allocator::AllocationError as A;
    match e {
        A::OutOfMemory => Error::OutOfDeviceMemory("gpu-allocator: heap exhausted".into()),
        other => Error::Allocation(other.to_string()),
    }
}
