//! # vkasync: GPU compute as ordinary async Rust
//!
//! Each GPU job is a plain `async fn` that records Vulkan work (uploads, dispatches,
//! read-backs) and `.await`s its completion. The runtime decides when to really synchronise:
//! when no task can make progress, it submits everything recorded since the last flush in one
//! `vkQueueSubmit`, waits on one timeline-semaphore value, and wakes every task whose work is
//! done.
//!
//! - [`Device`]: instance, one compute queue, its timeline semaphore, the allocator.
//! - [`Buffer`], [`Kernel`] (kernels compiled from `shaders/` at build time are in [`kernels`]).
//! - [`CommandList`]: the blocking path (submit and wait per call), the naive baseline.
//! - [`Executor`] and [`Ctx`]: the async runtime; see [`executor`] for the protocol.
//! - [`crypto`]: AES-CTR, SHA-256 and HMAC-SHA256 over many inputs at once on the GPU.
//!
//! ```
//! use vkasync::{kernels, Buffer, Ctx, Device, Error, Executor, Kernel, MemoryKind};
//!
//! async fn job(ctx: Ctx, mix: Kernel, seed: u32) -> Result<Vec<u32>, Error> {
//!     let data: Vec<u32> = (0..1024).map(|i| i ^ seed).collect();
//!     let buf = Buffer::<u32>::new(ctx.device(), data.len(), MemoryKind::Device)?;
//!     ctx.upload(&buf, &data)?;
//!     ctx.dispatch(&mix, [16, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[1024u32, 1]))?;
//!     ctx.read(&buf).await
//! }
//!
//! let device = Device::new()?;
//! let mix = Kernel::new(&device, &kernels::MIX)?;
//! let exec = Executor::new(&device)?;
//! let a = exec.spawn(job(exec.context(), mix.clone(), 1));
//! let b = exec.spawn(job(exec.context(), mix.clone(), 2));
//! exec.run();
//! let (a, b) = (a.join().unwrap()?, b.join().unwrap()?);
//! let stats = exec.stats();
//! // Group commit (the default) submits the first waited-for work at once, so two tasks take
//! // one or two submits; `FlushPolicy::WhenIdle` puts both in one.
//! assert!(stats.submits <= 2 && stats.host_waits <= 2);
//! # Ok::<(), vkasync::Error>(())
//! ```
#![warn(missing_docs, missing_debug_implementations, clippy::undocumented_unsafe_blocks)]

mod error;
mod util;
// Layers, lowest first: each imports only itself and those before it here (ARCHITECTURE.md; `cargo xtask imports`
// fails on an upward import). Blank lines keep rustfmt from sorting them.
mod vk;

#[cfg(feature = "trace")]
pub mod trace;
#[cfg(not(feature = "trace"))]
#[path = "trace/off.rs"]
mod trace;

mod record;

pub mod executor;

#[cfg(feature = "crypto")]
pub mod crypto;

pub use error::{Error, Result};
pub use executor::{
    Ctx, Executor, ExecutorBuilder, FlushPolicy, JoinError, JoinHandle, PerDevice, Queue, QueueBuilder, QueueSet,
    Spawner, Stats, WaitPolicy, DEFAULT_SHUTDOWN_TIMEOUT, DEFAULT_SPIN_BOUND,
};
pub use record::batch;
pub use record::command_list::CommandList;
pub use record::recorder::Recorder;
pub use record::recording::Readback;
pub use vk::buffer::{Buffer, MemoryKind};
pub use vk::copy_queues::CopyQueueInfo;
pub use vk::device::{Device, DeviceBuilder, Limits, MemoryReport, RobustAccess};
pub use vk::instance::{adapters, AdapterInfo, DeviceSelector, DeviceType, QueueFamilyInfo};
pub use vk::kernel::{Arg, Kernel, KernelSource};
pub use vk::spirv::{BindingInfo, BindingKind, Reflection};
pub use vk::timestamps::Timestamps;

/// Kernels compiled from `shaders/*.comp` at build time, one constant per shader
/// (e.g. [`kernels::MIX`] from `shaders/mix.comp`).
pub mod kernels {
    include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
}
