//! The Vulkan layer: instance and device, memory (the pool of blocks buffers are carved from),
//! buffers, kernels with their SPIR-V checks, and timestamp queries. It imports nothing above it:
//! no recording, no executor, no trace.

pub(crate) mod buffer;
pub(crate) mod command_pool;
pub(crate) mod copy_queues;
pub(crate) mod device;
pub(crate) mod instance;
pub(crate) mod kernel;
pub(crate) mod pool;
pub(crate) mod spirv;
pub(crate) mod spirv_caps;
pub(crate) mod spirv_val;
pub(crate) mod timestamps;
