//! Copy queues: a flush's uploads and read-backs on queues of their own, so that the GPU copies
//! one flush's data while it computes another's.
//!
//! On a discrete GPU most of a coalesced flush's GPU time is copies between the host's staging
//! memory and the GPU's, and the GPU runs the submissions of one queue one after another. With
//! copy queues on ([`crate::DeviceBuilder::copy_queues`]) a flush goes to the GPU in up to three
//! parts, each one `vkQueueSubmit` on its own queue (see `plan::parts` in the recording layer for
//! which op goes where):
//!
//! 1. **input**: the clears of fresh buffers and the copies of the first phase (the uploads), on
//!    the *input* queue; it signals `uploaded` with the flush's value;
//! 2. **compute**: every other op, on the compute queue, once `uploaded` reached the flush's
//!    value; it signals `computed` with it;
//! 3. **output**: the copies of the last phase (the read-backs) and the barrier to host reads, on
//!    the *output* queue, once the part before it is done.
//!
//! So while the compute queue runs flush `n`'s kernels, the input queue may upload flush
//! `n + 1`'s data and the output queue read back flush `n - 1`'s results.
//!
//! Only copies of large regions take the copy queues where the compute part has the copy kernel
//! (see [`crate::record::copies`]): a copy engine runs a command's regions one after another, at
//! a cost per region, so many scattered small regions (records of many connections that lie
//! apart in staging) and a lone job's small upload stay in the compute part, copied by the
//! kernel all at once. A submission whose copies all stay is its compute part alone, with the
//! empty batch on the output queue that signals the timeline.
//!
//! With several compute queues ([`crate::DeviceBuilder::compute_queues`]) the compute parts of
//! consecutive submissions take the queues in turn, so that the kernels of one flush may run
//! beside those of the flush before (a flush of long SHA-256 chains keeps few of the GPU's
//! threads busy for a long time). Each compute queue signals its own `computed` semaphore.
//!
//! # A heavy flush in parts
//! The three parts of one submission still run one after another: a flush of 10,000 records of
//! 16 KiB (164 MB) uploads for about 3 ms on an H100 before its first kernel runs, and reads
//! back for as long after its last. A flush whose batch items carry at least twice the device's
//! split size ([`CopyQueueInfo::split_bytes`], [`crate::DeviceBuilder::split_flushes`]) is
//! therefore submitted as several submissions, each with a run of consecutive items of every
//! batch kind (`Recording::split_batches`), one after another from the same flush job: the
//! input queue uploads part `k + 1` while the compute queue runs part `k` and the output queue
//! reads back part `k - 1`. Each part is a submission like any other, with its own value; the
//! flush's waiters wait for the last part's, which the output queue signals after every earlier
//! part's. The parts' staging ranges are apart, so none waits for another.
//!
//! # One value still covers a submission
//! Every submission of the device signals the device's timeline from the output queue, in the
//! order of its values: a submission whose last part is on another queue adds an empty batch on
//! the output queue that waits for that part. A queue signals a semaphore's values in submission
//! order, and only the output queue signals the timeline, so the timeline at `v` means that every
//! part of every submission up to `v` completed: what waits, retires and recycles by timeline
//! value needs nothing else. `uploaded` and each `computed` are signalled by one queue each,
//! with the value of the submission they belong to, and only that submission's later parts wait
//! on them.
//!
//! A submission that must be ordered after the ones that may still run (see [`crate::record`])
//! waits, in its first part, for the timeline to reach the value before its own: every earlier
//! part of every queue. (Without copy queues a barrier on the one queue does that.)
//!
//! # Queues
//! The input and output queues are the first two queues of the device's first transfer-only
//! family (NVIDIA: family 1, with two copy-engine queues). With one such queue the output part
//! goes to the compute queue. Without such a family (lavapipe) all three parts go to the compute
//! queue, still as three batches joined by the same semaphores: the path the tests run. Where
//! the families differ, buffers are shared between them (`VK_SHARING_MODE_CONCURRENT`), so no
//! ownership transfer is needed.
//!
//! # Failure
//! If a `vkQueueSubmit` fails after an earlier part of the same submission was submitted, that
//! part may run, but the timeline would never reach a value for it: the device is then treated
//! as lost ([`crate::Error::DeviceLost`]), so that its work is leaked rather than freed while the
//! GPU may still use it.

use crate::error::{map_oom_and_lost, Error, Result};
use ash::vk;
use smallvec::SmallVec;

/// A submission's command buffers by part (an empty slice: no such part).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Parts<'a> {
    pub input: &'a [vk::CommandBuffer],
    pub compute: &'a [vk::CommandBuffer],
    pub output: &'a [vk::CommandBuffer],
}

/// What a device is opened with: copy queues on, how many compute queues their compute parts
/// may take in turn, and the split size of heavy flushes (see [`CopyQueueInfo::split_bytes`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueOptions {
    pub copy: bool,
    pub compute: u32,
    pub split_bytes: u64,
}

/// Where a device's copy queues are, when they are on ([`crate::Device::copy_queues`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyQueueInfo {
    /// The family of the input and output queues (the compute family where the device has no
    /// transfer-only family).
    pub family: u32,
    /// Uploads run on a queue of their own (not the compute queue).
    pub separate_input: bool,
    /// Read-backs run on a queue of their own (neither the compute nor the input queue).
    pub separate_output: bool,
    /// The turns that submissions' compute parts take, each with its own semaphore, on the
    /// compute family's queues in order (the device's queue first); where the family has fewer
    /// queues, turns share them.
    pub compute_turns: u32,
    /// The distinct compute queues the turns use.
    pub compute_queues: u32,
    /// A flush whose batch items carry at least twice this many bytes goes to the GPU as
    /// several submissions of about this many bytes each (at most 8), so that
    /// the input queue uploads one while the compute queue runs the one before and the output
    /// queue reads back the one before that; 0: never split
    /// ([`crate::DeviceBuilder::split_flushes`]).
    pub split_bytes: u64,
}

/// The most submissions one flush is split into ([`CopyQueueInfo::split_bytes`]).
pub(crate) const MAX_SPLIT_PARTS: usize = 8;

/// The queues and semaphores of a device with copy queues on.
pub(crate) struct CopyQueues {
    pub info: CopyQueueInfo,
    input: vk::Queue,
    output: vk::Queue,
    /// Signalled by input parts with their submission's value.
    uploaded: vk::Semaphore,
    /// The compute queues, the device's queue first, each with the semaphore its compute parts
    /// signal with their submission's value.
    compute: SmallVec<[(vk::Queue, vk::Semaphore); 8]>,
    /// The compute queue the next compute part takes.
    next: usize,
}

/// One batch of a submission: its queue, command buffers, what it waits for and what it signals.
struct Batch<'a> {
    queue: vk::Queue,
    cbs: &'a [vk::CommandBuffer],
    wait: Option<(vk::Semaphore, u64)>,
    signal: vk::Semaphore,
}

/// The transfer-only family to copy on, with how many of its queues to use (at most 2).
pub(crate) fn choose_family(families: &[crate::QueueFamilyInfo]) -> Option<(u32, u32)> {
    families
        .iter()
        .filter(|f| f.transfer && !f.compute && !f.graphics && f.queue_count > 0)
        .min_by_key(|f| f.index)
        .map(|f| (f.index, f.queue_count.min(2)))
}

/// A semaphore of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sem {
    /// The device's timeline (waited for at the value before the submission's own).
    Timeline,
    Uploaded,
    Computed,
}

/// One batch of a submission, planned: the part whose command buffers it carries (0 input,
/// 1 compute, 2 output; `None`: an empty batch), the queue it goes to (the same numbering),
/// what it waits for and what it signals (at the submission's value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Planned {
    part: Option<usize>,
    queue: usize,
    wait: Option<Sem>,
    signal: Sem,
}

/// The batches of a submission with the parts `has` (input, compute, output), over `queues`
/// (input, compute, output; equal where one queue serves two), waiting first for the value
/// before its own with `after`: each part waits for the one before it, and the last batch is
/// on the output queue and signals the timeline (see the module docs).
fn plan<Q: PartialEq>(has: [bool; 3], queues: &[Q; 3], after: bool) -> SmallVec<[Planned; 4]> {
    let mut out: SmallVec<[Planned; 4]> = SmallVec::new();
    let mut wait = after.then_some(Sem::Timeline);
    for (k, signal) in [(0, Sem::Uploaded), (1, Sem::Computed), (2, Sem::Timeline)] {
        if has[k] {
            out.push(Planned { part: Some(k), queue: k, wait, signal });
            wait = Some(signal);
        }
    }
    match out.last_mut() {
        Some(b) if queues[b.queue] == queues[2] => b.signal = Sem::Timeline,
        _ => out.push(Planned { part: None, queue: 2, wait, signal: Sem::Timeline }),
    }
    out
}

impl CopyQueues {
    /// The copy queues of a device created with `family` (`None`: none, so the compute queue's
    /// family and queue serve), `count` of its queues (1 or 2), and `compute` queues of the
    /// compute family (its queue 0 first).
    pub fn new(
        device: &ash::Device,
        compute: &[vk::Queue],
        compute_family: u32,
        family: Option<(u32, u32)>,
        split_bytes: u64,
        timeline: impl Fn(&ash::Device) -> Result<vk::Semaphore>,
    ) -> Result<Self> {
        let turns = compute.len() as u32;
        let n = compute.iter().enumerate().filter(|&(i, q)| !compute[..i].contains(q)).count() as u32;
        let (info, input, output) = match family {
            Some((f, count)) => {
                // SAFETY: queues 0 and (with two) 1 of `f` were requested at device creation.
                let input = unsafe { device.get_device_queue(f, 0) };
                let output = if count >= 2 {
                    // SAFETY: as above.
                    unsafe { device.get_device_queue(f, 1) }
                } else {
                    compute[0]
                };
                let info = CopyQueueInfo {
                    family: f,
                    separate_input: true,
                    separate_output: count >= 2,
                    compute_turns: turns,
                    compute_queues: n,
                    split_bytes,
                };
                (info, input, output)
            }
            None => {
                let info = CopyQueueInfo {
                    family: compute_family,
                    separate_input: false,
                    separate_output: false,
                    compute_turns: turns,
                    compute_queues: n,
                    split_bytes,
                };
                (info, compute[0], compute[0])
            }
        };
        let mut made: SmallVec<[vk::Semaphore; 9]> = SmallVec::new();
        for _ in 0..=compute.len() {
            match timeline(device) {
                Ok(s) => made.push(s),
                Err(e) => {
                    for s in made {
                        // SAFETY: never used.
                        unsafe { device.destroy_semaphore(s, None) };
                    }
                    return Err(e);
                }
            }
        }
        let uploaded = made[0];
        let compute = compute.iter().copied().zip(made[1..].iter().copied()).collect();
        Ok(CopyQueues { info, input, output, uploaded, compute, next: 0 })
    }

    /// The families buffers are shared between, where they differ.
    pub fn concurrent_families(&self, compute_family: u32) -> Option<[u32; 2]> {
        (self.info.family != compute_family).then_some([compute_family, self.info.family])
    }

    /// Submits `parts` as one submission with `value` (see the module docs), first waiting for
    /// the timeline to reach `after` when given. `Err((e, false))`: nothing was submitted;
    /// `Err((e, true))`: an earlier part was (the caller treats the device as lost).
    ///
    /// # Safety
    /// The caller holds the device's submission lock (the queues are externally synchronised),
    /// the command buffers are recorded for their parts' queue families and not pending
    /// elsewhere, and `value` is greater than every value signalled before on the timeline and
    /// the stage semaphores.
    pub unsafe fn submit(
        &mut self,
        device: &ash::Device,
        timeline: vk::Semaphore,
        parts: Parts<'_>,
        value: u64,
        after: Option<u64>,
    ) -> std::result::Result<(), (Error, bool)> {
        self.submit_with(timeline, parts, value, after, |queue, infos| {
            // SAFETY: see the function's contract; every array the infos point to lives until
            // the call returns; each batch waits only for values signalled by batches submitted
            // before it (earlier in this call or before it).
            unsafe { device.queue_submit(queue, infos, vk::Fence::null()) }
        })
    }

    /// [`CopyQueues::submit`], with `queue_submit` making each `vkQueueSubmit` call.
    fn submit_with(
        &mut self,
        timeline: vk::Semaphore,
        parts: Parts<'_>,
        value: u64,
        after: Option<u64>,
        mut queue_submit: impl FnMut(vk::Queue, &[vk::SubmitInfo<'_>]) -> std::result::Result<(), vk::Result>,
    ) -> std::result::Result<(), (Error, bool)> {
        let cbs = [parts.input, parts.compute, parts.output];
        let has = cbs.map(|c| !c.is_empty());
        // The compute part takes the next compute queue in turn.
        let (compute, computed) = self.compute[if has[1] { self.next } else { 0 }];
        let queues = [self.input, compute, self.output];
        let sem = |s: Sem| match s {
            Sem::Timeline => timeline,
            Sem::Uploaded => self.uploaded,
            Sem::Computed => computed,
        };
        let wait_value = |s: Sem| match (s, after) {
            (Sem::Timeline, Some(v)) => v,
            _ => value,
        };
        let batches: SmallVec<[Batch<'_>; 4]> = plan(has, &queues, after.is_some())
            .into_iter()
            .map(|b| Batch {
                queue: queues[b.queue],
                cbs: b.part.map_or(&[][..], |k| cbs[k]),
                wait: b.wait.map(|w| (sem(w), wait_value(w))),
                signal: sem(b.signal),
            })
            .collect();
        let mut submitted_any = false;
        for run in batches.chunk_by(|a, b| a.queue == b.queue) {
            let waits: SmallVec<[([vk::Semaphore; 1], [u64; 1]); 4]> =
                run.iter().map(|b| b.wait.map_or(([vk::Semaphore::null()], [0]), |(s, v)| ([s], [v]))).collect();
            let signals: SmallVec<[([vk::Semaphore; 1], [u64; 1]); 4]> =
                run.iter().map(|b| ([b.signal], [value])).collect();
            let stages = [vk::PipelineStageFlags::ALL_COMMANDS];
            let mut timeline_infos: SmallVec<[vk::TimelineSemaphoreSubmitInfo<'_>; 4]> = run
                .iter()
                .zip(&waits)
                .zip(&signals)
                .map(|((b, w), s)| {
                    let info = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&s.1);
                    if b.wait.is_some() {
                        info.wait_semaphore_values(&w.1)
                    } else {
                        info
                    }
                })
                .collect();
            let infos: SmallVec<[vk::SubmitInfo<'_>; 4]> = run
                .iter()
                .zip(&waits)
                .zip(&signals)
                .zip(timeline_infos.iter_mut())
                .map(|(((b, w), s), t)| {
                    let info = vk::SubmitInfo::default().command_buffers(b.cbs).signal_semaphores(&s.0).push_next(t);
                    if b.wait.is_some() {
                        info.wait_semaphores(&w.0).wait_dst_stage_mask(&stages)
                    } else {
                        info
                    }
                })
                .collect();
            if let Err(e) = queue_submit(run[0].queue, &infos) {
                return Err((map_oom_and_lost("vkQueueSubmit")(e), submitted_any));
            }
            submitted_any = true;
        }
        if has[1] {
            self.next = (self.next + 1) % self.compute.len();
        }
        Ok(())
    }

    /// Destroys the stage semaphores.
    ///
    /// # Safety
    /// No submission that uses them may still be pending.
    pub unsafe fn destroy(&self, device: &ash::Device) {
        // SAFETY: the caller's contract.
        unsafe {
            device.destroy_semaphore(self.uploaded, None);
            for &(_, s) in &self.compute {
                device.destroy_semaphore(s, None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ash::vk::Handle;

    /// Copy queues over made-up handles (never given to Vulkan): input 1, output 3, compute
    /// turns on queues 2 and 4.
    fn queues() -> CopyQueues {
        let q = vk::Queue::from_raw;
        let s = vk::Semaphore::from_raw;
        CopyQueues {
            info: CopyQueueInfo {
                family: 1,
                separate_input: true,
                separate_output: true,
                compute_turns: 2,
                compute_queues: 2,
                split_bytes: 0,
            },
            input: q(1),
            output: q(3),
            uploaded: s(10),
            compute: smallvec::smallvec![(q(2), s(20)), (q(4), s(40))],
            next: 0,
        }
    }

    /// A failed `vkQueueSubmit` says whether an earlier part of its submission went in, and the
    /// compute parts take the turns in order (a failed submission takes none).
    #[test]
    fn a_failed_part_says_whether_an_earlier_one_went_in_and_turns_rotate() {
        let cb = [vk::CommandBuffer::from_raw(7)];
        let all = Parts { input: &cb, compute: &cb, output: &cb };
        let mut cq = queues();
        let timeline = vk::Semaphore::from_raw(99);
        let mut seen: Vec<u64> = Vec::new();
        let ok = cq.submit_with(timeline, all, 5, None, |q, infos| {
            assert_eq!(infos.len(), 1);
            seen.push(q.as_raw());
            Ok(())
        });
        assert!(ok.is_ok());
        assert_eq!(seen, [1, 2, 3], "input, the first turn's compute queue, output");
        for (fail_at, partial) in [(0, false), (1, true), (2, true)] {
            let mut calls = 0;
            let r = cq.submit_with(timeline, all, 6, None, |_, _| {
                calls += 1;
                if calls > fail_at {
                    Err(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY)
                } else {
                    Ok(())
                }
            });
            let (e, went_in) = r.unwrap_err();
            assert_eq!(went_in, partial, "failing call {fail_at}");
            assert!(matches!(e, Error::OutOfDeviceMemory(_)), "failing call {fail_at}: {e:?}");
        }
        // A failed submission leaves the turns as they were: the next compute part takes the
        // second turn's queue.
        seen.clear();
        cq.submit_with(timeline, Parts { compute: &cb, ..Parts::default() }, 9, Some(8), |q, _| {
            seen.push(q.as_raw());
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [4, 3], "the compute part, then the empty batch that signals the timeline");
    }

    /// Every shape of submission over every arrangement of queues keeps the protocol: parts in
    /// order, each waiting for the one before (the first for the timeline when ordered), stage
    /// semaphores signalled only from their own part's queue, and exactly one signal of the
    /// timeline, last, from the output queue.
    #[test]
    fn every_submission_chains_its_parts_and_signals_the_timeline_last_from_the_output_queue() {
        // Input, compute, output: all on one queue (lavapipe), each its own, output on the
        // compute queue, and the same two with the compute part on another turn's queue.
        for queues in [[0, 0, 0], [1, 0, 2], [1, 0, 0], [1, 3, 2], [1, 3, 0], [0, 3, 0]] {
            for mask in 0..8u8 {
                for after in [false, true] {
                    let has = [mask & 1 != 0, mask & 2 != 0, mask & 4 != 0];
                    let p = plan(has, &queues, after);
                    let what = format!("{queues:?} {has:?} after={after}: {p:?}");
                    let parts: Vec<usize> = p.iter().filter_map(|b| b.part).collect();
                    let want: Vec<usize> = (0..3).filter(|&k| has[k]).collect();
                    assert_eq!(parts, want, "{what}");
                    assert_eq!(p[0].wait, after.then_some(Sem::Timeline), "{what}");
                    for w in p.windows(2) {
                        assert_eq!(w[1].wait, Some(w[0].signal), "{what}");
                    }
                    let last = p.last().unwrap();
                    assert_eq!(queues[last.queue], queues[2], "{what}");
                    assert_eq!(last.signal, Sem::Timeline, "{what}");
                    assert_eq!(p.iter().filter(|b| b.signal == Sem::Timeline).count(), 1, "{what}");
                    for b in &p {
                        match b.signal {
                            Sem::Uploaded => assert_eq!(b.queue, 0, "{what}"),
                            Sem::Computed => assert_eq!(b.queue, 1, "{what}"),
                            Sem::Timeline => {}
                        }
                        if let Some(k) = b.part {
                            assert_eq!(b.queue, k, "{what}");
                        }
                    }
                    assert!(p.len() <= 4 && p.iter().filter(|b| b.part.is_none()).count() <= 1, "{what}");
                }
            }
        }
    }
}
