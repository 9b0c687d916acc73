//! # vkasync: GPU compute as ordinary async Rust
//!
//! Each GPU job is a plain `async fn` that records Vulkan work (uploads, dispatches,
//! read-backs) and `.await`s its completion. The runtime decides when to really synchronise:
//! when no task can make progress, it submits everything recorded since the last flush in one
//! `vkQueueSubmit`, waits on one timeline-semaphore value, and wakes every task whose work is
//! done.
//!
//! This crate level holds the foundation: [`Device`] (instance, queue, timeline semaphore,
//! allocator), [`Buffer`], [`Kernel`] (with kernels compiled from `shaders/` at build time in
//! [`kernels`]) and the blocking path [`CommandList`].
//!
//! [`crypto`] runs AES-CTR, SHA-256 and HMAC-SHA256 over many inputs at once on the GPU.
#![warn(missing_docs, missing_debug_implementations, clippy::undocumented_unsafe_blocks)]

mod buffer;
mod commands;
pub mod crypto;
mod device;
mod error;
mod instance;
mod kernel;
mod spirv;

pub use buffer::{Buffer, MemoryKind};
pub use commands::{CommandList, Readback, Recorder};
pub use device::{Device, DeviceBuilder, Limits, MemoryReport};
pub use error::{Error, Result};
pub use instance::{adapters, AdapterInfo, DeviceSelector, DeviceType, QueueFamilyInfo};
pub use kernel::{Arg, Kernel, KernelSource};
pub use spirv::{BindingInfo, BindingKind, Reflection};

/// Kernels compiled from `shaders/*.comp` at build time, one constant per shader
/// (e.g. [`kernels::MIX`] from `shaders/mix.comp`).
pub mod kernels {
    include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
}
