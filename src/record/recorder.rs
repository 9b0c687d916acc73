//! [`Recorder`]: the recording vocabulary shared by the blocking [`CommandList`], a batch
//! kind's [`Encoder`] and the executor's task context.

use crate::error::{Error, Result};
use crate::record::batch::{BatchKind, Encoder};
use crate::record::command_list::CommandList;
use crate::record::recording::Readback;
use crate::vk::buffer::Buffer;
use crate::vk::device::Device;
use crate::vk::kernel::{Arg, Kernel};
use bytemuck::Pod;
use std::sync::Arc;

/// What records GPU work: the blocking [`CommandList`] and the executor's task context. Code
/// written against this trait (e.g. the crypto kernels' recording functions) works with both.
pub trait Recorder {
    /// The device the work is for.
    fn device(&self) -> &Device;
    /// Uploads `data` into `dst` starting at element `offset`. The data is copied out of `data`
    /// now; on unified-memory devices an idle `dst` is written directly.
    fn upload_at<T: Pod>(&mut self, dst: &Buffer<T>, offset: usize, data: &[T]) -> Result<()>;
    /// Copies `len` elements from `src[src_offset..]` to `dst[dst_offset..]`.
    fn copy_region<T: Pod>(
        &mut self,
        src: &Buffer<T>,
        src_offset: usize,
        dst: &Buffer<T>,
        dst_offset: usize,
        len: usize,
    ) -> Result<()>;
    /// Records a dispatch of `kernel` with `groups` workgroups, its buffers in binding order,
    /// and its push constants as bytes (e.g. `bytemuck::bytes_of(&push)`).
    fn dispatch(&mut self, kernel: &Kernel, groups: [u32; 3], args: &[Arg], push: &[u8]) -> Result<()>;
    /// Arranges for `src`'s contents, as the recorded work leaves them, to be readable on the
    /// host once that work completes.
    fn read_back<T: Pod>(&mut self, src: &Buffer<T>) -> Result<Readback<T>>;
    /// Records a GPU timestamp at `index` of `ts`: written once everything recorded before it
    /// completes; nothing recorded after it starts earlier.
    fn write_timestamp(&mut self, ts: &crate::Timestamps, index: u32) -> Result<()>;

    /// Adds `item` to the coalesced work of `kind` in this recording (see [`crate::record::batch`]).
    fn batch<K: BatchKind>(&mut self, kind: &Arc<K>, item: K::Item) -> Result<()>;

    /// Uploads `data` into the start of `dst`.
    fn upload<T: Pod>(&mut self, dst: &Buffer<T>, data: &[T]) -> Result<()> {
        self.upload_at(dst, 0, data)
    }
    /// Copies all of `src` to `dst`; both must have the same length.
    fn copy<T: Pod>(&mut self, src: &Buffer<T>, dst: &Buffer<T>) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::SizeMismatch { what: "copy", expected: dst.len() as u64, got: src.len() as u64 });
        }
        self.copy_region(src, 0, dst, 0, src.len())
    }
}

/// The methods of [`Recorder`] that record into the implementor's `rec` (a [`Recording`]) as
/// they are: the same for the blocking list and a batch's encoder.
///
/// [`Recording`]: crate::record::recording::Recording
macro_rules! to_recording {
    () => {
        fn device(&self) -> &Device {
            &self.rec.device
        }
        fn upload_at<T: Pod>(&mut self, dst: &Buffer<T>, offset: usize, data: &[T]) -> Result<()> {
            self.rec.upload(dst, offset, data)
        }
        fn copy_region<T: Pod>(
            &mut self,
            src: &Buffer<T>,
            src_offset: usize,
            dst: &Buffer<T>,
            dst_offset: usize,
            len: usize,
        ) -> Result<()> {
            self.rec.copy_region(src, src_offset, dst, dst_offset, len)
        }
        fn dispatch(&mut self, kernel: &Kernel, groups: [u32; 3], args: &[Arg], push: &[u8]) -> Result<()> {
            self.rec.dispatch(kernel, groups, args, push)
        }
        fn read_back<T: Pod>(&mut self, src: &Buffer<T>) -> Result<Readback<T>> {
            self.rec.read_back(src)
        }
        fn write_timestamp(&mut self, ts: &crate::Timestamps, index: u32) -> Result<()> {
            self.rec.write_timestamp(ts, index)
        }
    };
}

impl Recorder for CommandList {
    to_recording!();
    fn batch<K: BatchKind>(&mut self, kind: &Arc<K>, item: K::Item) -> Result<()> {
        CommandList::batch(self, kind, item)
    }
}

impl Recorder for Encoder<'_> {
    to_recording!();
    /// Always [`Error::InvalidArgument`]: a batch cannot add items to the flush it is encoded in.
    fn batch<K: BatchKind>(&mut self, _kind: &Arc<K>, _item: K::Item) -> Result<()> {
        Err(Error::InvalidArgument("a batch kind's encode cannot add batch items to its own flush".into()))
    }
}
