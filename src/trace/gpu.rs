//! GPU spans: timestamps around a flush's commands, and charging their time to contexts.

#[allow(unused_imports)]
use super::*;

/// What a GPU command is.
#[derive(Clone, Copy)]
pub(crate) enum Command {
    Clear,
    /// A dispatch: its op's index in the recording (whose kernel names it), and the kernel's
    /// identity (its address: dispatches of one kernel are one kind of command).
    Dispatch(u32, usize),
    /// Bytes and regions of one `vkCmdCopyBuffer`.
    Copy(u64, u32),
}

/// The weight of a dispatch in a span it shares: its invocations.
pub(crate) fn dispatch_weight(kernel: &RawKernel, groups: [u32; 3]) -> f64 {
    let local = kernel.reflection.local_size.iter().map(|&l| l.max(1) as f64).product::<f64>();
    groups.iter().map(|&g| g as f64).product::<f64>() * local
}

/// The weight of a copy of `bytes` in a span it shares: its 4-byte words.
pub(crate) fn copy_weight(bytes: u64) -> f64 {
    (bytes as f64 / 4.0).max(1.0)
}

/// One command of a submission: what it is, its share of a span it shares with others (a
/// dispatch's invocations, a copy's 4-byte words, nothing for a clear), and the contexts it is
/// charged to (`GpuSpans::owners[owners.0..owners.1]`). Plain data: encoding a command touches
/// no reference count. Without charging (a trace alone), a run of commands of one kind in one
/// group is one entry, `count` commands named after the first.
pub(super) struct GpuCommand {
    pub(super) what: Command,
    pub(super) weight: f64,
    pub(super) owners: (u32, u32),
    pub(super) count: u32,
}

/// What [`GpuSpans::finish`] needs of the recording: its table of owners (first op, end op,
/// context clock), and the kernel of a dispatch op.
pub(crate) trait SpanSource {
    fn owners(&self) -> &[(u32, u32, Arc<TaskClock>)];
    fn kernel(&self, op: u32) -> Option<&Arc<RawKernel>>;
}

impl GpuCommand {
    /// The name of a span of `n` commands of this one's kind.
    pub(super) fn name(&self, src: &dyn SpanSource, n: u32) -> Name {
        match self.what {
            Command::Clear => Name::Many("clear", n),
            Command::Dispatch(op, _) => {
                src.kernel(op).map_or(Name::Many("dispatch", n), |k| Name::Kernel(k.clone(), n))
            }
            Command::Copy(b, r) => Name::Copy(b, r, n),
        }
    }
}

impl Command {
    /// Commands of one kind, for grouping a phase's spans.
    #[inline]
    pub(super) fn same_kind(&self, o: &Command) -> bool {
        match (*self, *o) {
            (Command::Clear, Command::Clear) | (Command::Copy(..), Command::Copy(..)) => true,
            (Command::Dispatch(_, a), Command::Dispatch(_, b)) => a == b,
            _ => false,
        }
    }
}

/// Query pools and the vectors of [`GpuSpans`] of completed submissions, reset, for a queue's
/// next flushes.
pub(crate) type SparePools = Arc<Mutex<Spare>>;

/// See [`SparePools`].
#[derive(Default)]
pub(crate) struct Spare {
    pub(super) pools: Vec<RawQueryPool>,
    pub(super) lists: Vec<Lists>,
}

/// A [`GpuSpans`]' commands, owners and groups.
pub(super) type Lists = (Vec<GpuCommand>, Vec<(u32, u64)>, Vec<[u32; 2]>);

/// How many spare pools (and span lists) a queue keeps (more than the submissions usually in
/// flight).
pub(super) const MAX_SPARE_POOLS: usize = 8;

/// The longest span lists kept for reuse (entries; a flush's default bound is 4,096 commands).
pub(super) const MAX_SPARE_LIST: usize = 8192;

/// The GPU timing of one recording: a query pool with a timestamp at the start and one after
/// each group of commands (a phase, or a command; see [`TraceDetail`]).
pub(crate) struct GpuSpans {
    pub(super) device: Device,
    /// Taken when encoding starts (`None` before, or if the driver could not make one).
    pub(super) pool: Option<RawQueryPool>,
    /// Pools of completed submissions, shared by the queue's flushes.
    pub(super) spare: SparePools,
    pub(super) used: u32,
    pub(super) per_command: bool,
    /// Whether commands are charged to contexts (else runs of one kind are merged).
    pub(super) charge: bool,
    /// Commands recorded, merged or not.
    pub(super) total: u32,
    pub(super) commands: Vec<GpuCommand>,
    /// The owners of all commands: (index in the recording's table, weight: bytes for a
    /// merged copy, else 1).
    pub(super) owners: Vec<(u32, u64)>,
    /// Each group's first command and the timestamp that ends it; it starts at the timestamp
    /// before (the end of the group before, or the start of its command buffer).
    pub(super) groups: Vec<[u32; 2]>,
    /// Commands not yet in a group.
    pub(super) open: u32,
}

impl GpuSpans {
    /// Spans for a recording of `ops` ops; the query pool is taken when encoding starts
    /// ([`GpuSpans::start`]), from `spare` where one is large enough.
    pub fn new(device: &Device, ops: u32, detail: TraceDetail, spare: SparePools) -> Self {
        let capacity = ops as usize + 2;
        let lists = crate::util::lock(&spare).lists.pop();
        let (commands, owners, groups) = lists.unwrap_or_else(|| {
            (Vec::with_capacity(capacity), Vec::with_capacity(capacity), Vec::with_capacity(capacity))
        });
        GpuSpans {
            device: device.clone(),
            pool: None,
            spare,
            used: 0,
            per_command: detail == TraceDetail::Commands,
            charge: true,
            total: 0,
            commands,
            owners,
            groups,
            open: 0,
        }
    }

    /// The submission's first timestamp (top of pipe), once the encoder knows its `phases`.
    /// The pool holds a timestamp for the start, the clear and each phase (with
    /// [`TraceDetail::Commands`], for the start, the clear and each of the `ops`), and `more`
    /// (the starts of further command buffers, [`GpuSpans::restart`]). `charge`: whether
    /// commands are charged to contexts (per-context time).
    pub fn start(&mut self, cmd: vk::CommandBuffer, phases: u32, ops: u32, more: u32, charge: bool) {
        self.charge = charge;
        let needed = if self.per_command { ops + 2 } else { phases + 2 } + more;
        self.pool = self.take_pool(needed);
        self.stamp(cmd, vk::PipelineStageFlags::TOP_OF_PIPE);
    }

    /// The smallest spare pool of at least `needed` queries (spares were reset by
    /// [`GpuSpans::into_pool`]), else a new one, sized to a power of two (at least 64, so that
    /// pools of phase timestamps are all alike and every one can be reused) and reset from the
    /// host. `None` if the driver cannot make one: this submission then has no GPU spans.
    pub(super) fn take_pool(&self, needed: u32) -> Option<RawQueryPool> {
        {
            let mut spare = crate::util::lock(&self.spare);
            let best = spare.pools.iter().enumerate().filter(|(_, p)| p.count >= needed).min_by_key(|(_, p)| p.count);
            if let Some(i) = best.map(|(i, _)| i) {
                return Some(spare.pools.swap_remove(i));
            }
        }
        let count = needed.max(64).next_power_of_two();
        let info = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(count);
        // SAFETY: the device is live and supports timestamp queries (checked when the trace or
        // the timing was turned on).
        match unsafe { self.device.raw().create_query_pool(&info, None) } {
            Ok(pool) => {
                let pool = RawQueryPool { device: self.device.clone(), pool, count };
                // SAFETY: the pool is new: no work uses it; hostQueryReset is enabled (as
                // above).
                unsafe { self.device.raw().reset_query_pool(pool.pool, 0, pool.count) };
                Some(pool)
            }
            Err(e) => {
                log::warn!("vkasync: no query pool for a submission's GPU spans ({e}); it is traced without them");
                None
            }
        }
    }

    /// The first timestamp of another command buffer of the submission (a part on another
    /// queue, see [`crate::vk::copy_queues`]): its first group starts there.
    pub fn restart(&mut self, cmd: vk::CommandBuffer) {
        debug_assert_eq!(self.open, 0, "a part ends with its last group");
        self.stamp(cmd, vk::PipelineStageFlags::TOP_OF_PIPE);
    }

    pub(super) fn stamp(&mut self, cmd: vk::CommandBuffer, stage: vk::PipelineStageFlags) -> bool {
        let Some(pool) = self.pool.as_ref().filter(|p| self.used < p.count) else { return false };
        // SAFETY: `cmd` is recording; the pool is live (held by the recording until its
        // submission completes) and was reset; the index is inside it.
        unsafe { self.device.raw().cmd_write_timestamp(cmd, stage, pool.pool, self.used) };
        self.used += 1;
        true
    }

    /// A command was recorded (with [`TraceDetail::Commands`], its completion is stamped);
    /// `weight` gives its share of a span (called only when commands are charged).
    #[inline]
    pub fn command(
        &mut self,
        cmd: vk::CommandBuffer,
        what: Command,
        weight: impl FnOnce() -> f64,
        owners: impl IntoIterator<Item = (u32, u64)>,
    ) {
        self.total += 1;
        if !self.charge && !self.per_command && self.open > 0 {
            if let Some(last) = self.commands.last_mut().filter(|c| c.what.same_kind(&what)) {
                last.count += 1;
                return;
            }
        }
        let first = self.owners.len() as u32;
        let weight = if self.charge {
            self.owners.extend(owners);
            weight()
        } else {
            0.0
        };
        self.commands.push(GpuCommand { what, weight, owners: (first, self.owners.len() as u32), count: 1 });
        self.open += 1;
        if self.per_command {
            self.end_group(cmd);
        }
    }

    /// A phase ended (before its barrier): stamp the completion of its commands.
    pub fn end_group(&mut self, cmd: vk::CommandBuffer) {
        if self.open > 0 && self.stamp(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE) {
            self.groups.push([self.commands.len() as u32 - self.open, self.used - 1]);
            self.open = 0;
        }
    }

    /// The query pool, for reuse, once the submission completed: the queries it wrote are
    /// reset here (only those, not the whole pool).
    pub fn into_pool(self) {
        let GpuSpans { device, pool, spare, used, mut commands, mut owners, mut groups, .. } = self;
        if let Some(pool) = &pool {
            if used > 0 {
                // SAFETY: the submission that wrote these queries completed (the caller's
                // contract), so no pending work uses the pool; hostQueryReset is enabled
                // (checked when the trace or the timing was turned on).
                unsafe { device.raw().reset_query_pool(pool.pool, 0, used) };
            }
        }
        commands.clear();
        owners.clear();
        groups.clear();
        let mut spare = crate::util::lock(&spare);
        if let Some(pool) = pool.filter(|_| spare.pools.len() < MAX_SPARE_POOLS) {
            spare.pools.push(pool);
        }
        // Lists grown by an unusually large flush are let go rather than kept.
        if spare.lists.len() < MAX_SPARE_POOLS && commands.capacity().max(owners.capacity()) <= MAX_SPARE_LIST {
            spare.lists.push((commands, owners, groups));
        }
    }

    /// Once the submission completed: the ticks (`None` if not all are available).
    pub(super) fn ticks(&self) -> Option<Vec<u64>> {
        let pool = self.pool.as_ref().filter(|_| self.used > 0)?;
        let mut out = vec![[0u64; 2]; self.used as usize];
        // SAFETY: the pool is live and `0..used` is inside it; each entry has room for the value
        // and its availability.
        let r = unsafe {
            self.device.raw().get_query_pool_results(
                pool.pool,
                0,
                &mut out,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
            )
        };
        if !matches!(r, Ok(()) | Err(vk::Result::NOT_READY)) || out.iter().any(|v| v[1] == 0) {
            return None;
        }
        Some(out.into_iter().map(|v| v[0]).collect())
    }

    /// Charges each group's time to its commands' contexts (`src`: the recording) and, with a
    /// trace, emits the GPU spans.
    pub fn finish(&self, value: u64, trace: Option<&QueueTrace>, src: &dyn SpanSource) {
        let Some(ticks) = self.ticks() else { return };
        let period = self.device.limits().timestamp_period_ns as f64;
        let bounds = |g: usize| {
            let first = self.groups[g][0] as usize;
            let end = self.groups.get(g + 1).map_or(self.commands.len() - self.open as usize, |n| n[0] as usize);
            first..end
        };
        // Each group's start and end ticks.
        let window = |g: usize| {
            let end = self.groups[g][1] as usize;
            (ticks[end - 1], ticks[end])
        };
        let owners_of = |c: &GpuCommand| &self.owners[c.owners.0 as usize..c.owners.1 as usize];
        // Each context's time is summed here, then added to its clock once.
        let table = src.owners();
        let mut per_owner = vec![0f64; table.len()];
        // Without per-context time (a trace alone) there is nobody to charge.
        let charged = if table.is_empty() { 0 } else { self.groups.len() };
        for g in 0..charged {
            let cmds = &self.commands[bounds(g)];
            let (a, b) = window(g);
            let span = b.saturating_sub(a) as f64 * period;
            let whole: f64 = cmds.iter().map(|c| c.weight).sum();
            for c in cmds {
                // A command alone in its span has all of it; else its share by size.
                let mine = if cmds.len() == 1 { span } else { span * c.weight / whole.max(1.0) };
                let owners = owners_of(c);
                let total: u64 = owners.iter().map(|o| o.1).sum();
                for &(owner, weight) in owners {
                    if let Some(ns) = per_owner.get_mut(owner as usize) {
                        *ns += mine * weight as f64 / total.max(1) as f64;
                    }
                }
            }
        }
        for (ns, (_, _, clock)) in per_owner.iter().zip(table) {
            if *ns > 0.0 {
                clock.gpu_ns.fetch_add(*ns as u64, Ordering::Relaxed);
            }
        }
        let Some(t) = trace else { return };
        let err = t.cal.error_ns.round() as u64;
        let host = |tick: u64| t.cal.host_ns(tick);
        // The parts of a submission run on several queues: it spans from the earliest to the
        // latest of its timestamps.
        let (t0, t1) = (host(*ticks.iter().min().expect("one")), host(*ticks.iter().max().expect("one")));
        let args: Args =
            smallvec::smallvec![("value", value), ("commands", self.total as u64), ("calibration_error_ns", err)];
        // Stored under one hold of the sink's lock.
        let mut spans: smallvec::SmallVec<[Event; 8]> = smallvec::SmallVec::new();
        spans.push(t.gpu_span(Name::Submission(value), t0, t1, args));
        for g in 0..self.groups.len() {
            let (a, b) = window(g);
            let (a, b) = (host(a), host(b.max(a)));
            let cmds = &self.commands[bounds(g)];
            let ctx = |c: &GpuCommand| owners_of(c).first().and_then(|o| table.get(o.0 as usize)).map(|o| o.2.id);
            if let [c @ GpuCommand { count: 1, .. }] = cmds {
                let mut args: Args = smallvec::smallvec![("value", value), ("calibration_error_ns", err)];
                // The context is known with per-context time on.
                if let Some(id) = ctx(c) {
                    args.push(("ctx", id));
                }
                spans.push(t.gpu_span(c.name(src, 1), a, b, args));
                continue;
            }
            let count = cmds.iter().map(|c| c.count as u64).sum::<u64>();
            let args: Args = smallvec::smallvec![("value", value), ("calibration_error_ns", err), ("commands", count)];
            spans.push(t.gpu_span(Name::Static("phase"), a, b, args));
            // One span per kind of command in the phase, each over the whole phase.
            let mut kinds: smallvec::SmallVec<[(&GpuCommand, u32); 4]> = smallvec::SmallVec::new();
            for c in cmds {
                match kinds.iter_mut().find(|(k, _)| k.what.same_kind(&c.what)) {
                    Some((_, n)) => *n += c.count,
                    None => kinds.push((c, c.count)),
                }
            }
            for (c, n) in kinds {
                let args: Args =
                    smallvec::smallvec![("value", value), ("calibration_error_ns", err), ("commands", n as u64)];
                spans.push(t.gpu_span(c.name(src, n), a, b, args));
            }
        }
        t.sink.push_all(spans);
    }
}
