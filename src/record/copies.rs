//! Copies of many small regions in one dispatch.
//!
//! A flush merges the copies of one phase by their two `VkBuffer`s into `vkCmdCopyBuffer`
//! commands with many regions (uploads and read-backs of many jobs, from and to pooled
//! blocks). Drivers run the regions of one copy command one after another: on the NVIDIA H200
//! a 4 KiB region takes about 1.6 µs of GPU time (`BENCHMARKS.md`, 2026-12-01), so a job's
//! upload and read-back were most of its GPU time. Where the device offers
//! `bufferDeviceAddress`, a phase's small regions are instead copied by one dispatch of the
//! library's kernel `shaders/internal/copy_regions.comp`, one workgroup per region, all in
//! parallel.
//!
//! # How
//! The encoder writes a table of the regions (source and destination device addresses, size)
//! into a small host-visible buffer, which the recording holds until its submission completes,
//! and dispatches the kernel with the table's address as its push constant (in several
//! dispatches where a phase has more regions than the device's workgroup count allows). A region qualifies
//! when both buffers have device addresses, its offsets and size are multiples of 4 bytes, and
//! it is at most [`MAX_REGION`] bytes (larger ones keep `vkCmdCopyBuffer`, which moves them at
//! full bandwidth); a phase uses the kernel when at least [`MIN_REGIONS`] regions qualify. If the
//! kernel or its table cannot be made (out of memory), the copies go through `vkCmdCopyBuffer`
//! as before.
//!
//! # What it gives (NVIDIA H200, 2026-12-01, `BENCHMARKS.md`)
//! On the mix workload (1,000 to 100,000 jobs, each a 4 KiB upload, a dispatch and a 4 KiB
//! read-back), the executor's GPU went from 86–94 % busy to about 17 %: the host now bounds
//! it, and it ran 0.94–1.06× the time per job of the build before (faster at T = 10). Two
//! queues over the one GPU (`QueueSet` of two logical devices, tokio) went from 6.0–6.5 to
//! 3.6–4.7 µs per job. One queue from tokio did not change: its recording bounds it first.
//!
//! # Ordering and safety
//! The kernel's accesses are ordinary shader reads and writes in the phase they replace, so the
//! barriers between phases (shader and transfer stages, see [`crate::CommandList`]) order them
//! as they ordered the copies. Every region was checked against its buffers' ranges when it was
//! recorded, and regions of one phase write disjoint ranges; the table holds exactly those
//! regions, so the kernel touches nothing else. Accesses through device addresses are not
//! bounds-checked by robust buffer access and are not seen by the validation layer's
//! synchronization checks; that is why only this kernel may use them: users' kernels that
//! declare the capability are refused ([`crate::Error::UnsupportedCapability`]), as before.
//! [`crate::DeviceBuilder::compute_copies`] (or `VKASYNC_COMPUTE_COPIES=0`) turns the path off;
//! it is off by default under validation layers older than 1.3.275, which crashed inside
//! their own code when several devices with device-address buffers recorded at once.

use crate::error::Result;
use crate::vk::buffer::{MemoryKind, RawBuffer};
use crate::vk::device::Device;
use crate::vk::kernel::{Kernel, OwnedKernel};
use ash::vk;
use std::sync::Arc;

#[allow(dead_code)] // `ALL`
mod internal {
    include!(concat!(env!("OUT_DIR"), "/internal_kernels.rs"));
}

/// The largest region copied by the kernel, in bytes.
pub(crate) const MAX_REGION: u64 = 64 << 10;
/// The fewest qualifying regions for which a phase uses the kernel.
pub(crate) const MIN_REGIONS: usize = 2;
/// Bytes per table entry (see the kernel).
pub(crate) const ENTRY: usize = 32;

/// The device's copy kernel (see [`Device::copy_kernel`]); `None` where buffer device
/// addresses are off or it could not be made.
pub(crate) fn kernel(device: &Device) -> Option<&Kernel> {
    if !device.compute_copies() {
        return None;
    }
    device.copy_kernel(|| OwnedKernel::make(device, &internal::COPY_REGIONS)).and_then(OwnedKernel::get)
}

/// Whether the kernel may copy region `r` between buffers whose device addresses (at offset 0)
/// are `src_base` and `dst_base`.
pub(crate) fn qualifies(src_base: u64, dst_base: u64, r: &vk::BufferCopy) -> bool {
    src_base != 0 && dst_base != 0 && r.size <= MAX_REGION && (r.src_offset | r.dst_offset | r.size) % 4 == 0
}

/// One region: source and destination device addresses, and bytes.
pub(crate) type Region = (u64, u64, u64);

/// A table of `regions` for the kernel, in a new host-visible buffer, and its device address.
pub(crate) fn table(device: &Device, regions: &[Region]) -> Result<(Arc<RawBuffer>, u64)> {
    let mut bytes = Vec::with_capacity(regions.len() * ENTRY);
    for &(src, dst, size) in regions {
        let words = (size / 4) as u32;
        for v in [src as u32, (src >> 32) as u32, dst as u32, (dst >> 32) as u32, words, 0, 0, 0] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
    let buf = RawBuffer::new(device, bytes.len() as u64, MemoryKind::Upload, false)?;
    // A new buffer: the GPU has never used it.
    buf.write_bytes(0, &bytes)?;
    let address = buf.base_address() + buf.offset;
    Ok((buf, address))
}

/// The push constants of a dispatch over `count` regions of the table at `address`.
pub(crate) fn push_constants(address: u64, count: u32) -> [u8; 12] {
    let mut p = [0u8; 12];
    p[..8].copy_from_slice(&address.to_le_bytes());
    p[8..].copy_from_slice(&count.to_le_bytes());
    p
}
