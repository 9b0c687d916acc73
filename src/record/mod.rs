//! The recording layer: what a flush is made of and how it becomes Vulkan commands. Operations
//! recorded by tasks or by the blocking [`CommandList`](crate::CommandList), batch kinds that merge
//! the same operation from many tasks, the copy planner and staging. It imports only the Vulkan
//! layer (and the trace's hook).
//!
//! - [`recording`]: the ops of one flush, checked as they are recorded;
//! - [`plan`]: phases, clears and copy groups, pure and property-tested;
//! - [`encode`]: the plan written into a command buffer;
//! - [`batch`]: batch kinds, whose items from many tasks one flush encodes together;
//! - [`copies`]: the copy kernel; [`staging`]: staging memory for uploads and read-backs;
//! - [`command_list`] and [`recorder`]: the blocking path and the shared recording vocabulary.
//!
//! # Recording and barriers
//! Commands are not written into a Vulkan command buffer when they are recorded. They are kept
//! as a list of [`Op`]s (with a reference to every buffer and kernel they use) and encoded when
//! the list is submitted. Encoding assigns each op a *phase*:
//!
//! - an op that reads a buffer goes one phase after the last op that wrote it;
//! - an op that writes a buffer goes one phase after the last op that read or wrote it;
//! - otherwise it goes in phase 0.
//!
//! Ops are then recorded phase by phase with one global memory barrier between consecutive
//! phases. Ops that touch different buffers share a phase, so the work of many independent tasks
//! (each upload → dispatch → read-back) needs as many barriers as the longest chain, not one per
//! task. A read-only binding (GLSL `readonly`, or a uniform buffer) counts as a read only, so
//! tasks that share a key or a table do not serialise each other.
//!
//! A submission is ordered after the ones before it (one global barrier, in a command buffer
//! of its own that goes first in the same `vkQueueSubmit`) when it writes a buffer that an
//! earlier submission which may still run used, or reads one that such a submission wrote ("may
//! still run": its value is above the last counter value read), or when a submission made by
//! hand ([`crate::Device::submit_raw`]) may still run. That is decided when it is submitted,
//! under the queue's lock, and each submission marks its buffers' uses there too: so the
//! decision sees every submission before it, from any queue or thread of the device. Otherwise
//! the GPU may run it beside the submissions before it. That is the case of consecutive flushes
//! of coalesced items: their staging ranges are apart while in flight ([`staging`]) and their
//! tables are their own, so a flush need not wait for the long SHA-256 chains of the one before,
//! which keep few of the GPU's threads busy. A buffer made on pooled memory starts with no
//! earlier use: memory goes back to its pool only after the host saw every submission that used
//! it complete. A submission ends with one barrier to host reads when the host will read a
//! result.
//!
//! With copy queues ([`crate::vk::copy_queues`]) a submission is encoded in three parts: the
//! clears and the first phase's copies, the other ops, the last phase's copies
//! (`plan::parts`; with the copy kernel only copies of large regions leave the compute part,
//! `plan::for_copy_queue`). The parts run one after another on their queues, joined by semaphores, so
//! the phases' order holds; a submission that must be ordered after running ones waits for the
//! timeline value before its own instead of opening with a barrier.
//!
//! # Clearing new buffers
//! A buffer reads as zeros until written (see [`crate::Buffer::new`]). While the phases are
//! assigned, the first op of a submission that uses a buffer still *fresh* (never written) takes
//! its clear: if that op is a copy that overwrites the whole buffer (an upload through staging)
//! nothing more is needed; otherwise the buffer's range is zeroed with `vkCmdFillBuffer` in a
//! *clear phase* before phase 0. The fills are transfer writes (a fresh buffer's memory has no
//! user that may still run), followed by one barrier to every later transfer or shader access, so a submission with no fresh buffer to
//! clear records exactly what it did before. A buffer only read back by the host (no op) is
//! cleared the same way. The buffer counts as cleared once the submission is made; a recording
//! dropped unsubmitted gives its clears back.

pub mod batch;
pub(crate) mod command_list;
pub(crate) mod copies;
pub(crate) mod encode;
pub(crate) mod plan;
pub(crate) mod recorder;
pub(crate) mod recording;
pub(crate) mod staging;
