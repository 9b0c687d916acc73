//! The trace's hook without the `trace` feature: the same crate-internal names as the trace,
//! empty. No queue has a trace ([`TraceOptions::open`] gives none) and no flush has GPU spans,
//! so every traced branch of the executor and of encoding is dead and compiled out.

use crate::error::Result;
use crate::vk::device::Device;
use crate::vk::kernel::RawKernel;
use ash::vk;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Nothing to ask for without the feature.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TraceOptions;

impl TraceOptions {
    pub fn open(&self, _device: &Device) -> Result<Option<Arc<QueueTrace>>> {
        Ok(None)
    }
    pub fn timing(&self) -> bool {
        false
    }
    pub fn detail(&self) -> TraceDetail {
        TraceDetail
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TraceDetail;

/// A queue's trace: none can exist.
pub(crate) enum QueueTrace {}

impl QueueTrace {
    pub fn stamp(&self) -> i64 {
        match *self {}
    }
    pub fn span(&self, _kind: HostKind, _start: Instant, _args: &[u64]) {
        match *self {}
    }
    pub fn instant(&self, _kind: HostKind, _args: &[u64]) {
        match *self {}
    }
    pub fn async_span(&self, _kind: HostKind, _start: i64, _args: &[u64]) {
        match *self {}
    }
    pub fn async_span_to(&self, _kind: HostKind, _start: i64, _end: i64, _args: &[u64]) {
        match *self {}
    }
}

/// What the executor reports (never, here).
#[derive(Debug, Clone, Copy)]
pub(crate) enum HostKind {
    Spawn,
    Flush,
    Spin,
    Wait,
    Await,
    InFlight,
    EncodeBatches,
    Recording,
    Encode,
    Submit,
    Wake,
    Sleep,
}

/// A context's GPU time: never measured here.
#[derive(Debug, Default)]
pub(crate) struct TaskClock;

impl TaskClock {
    pub fn new(_id: u64) -> Arc<Self> {
        Arc::new(TaskClock)
    }
}

#[allow(dead_code)] // the fields are the trace's
/// The commands encoding reports to GPU spans.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Command {
    Clear,
    Dispatch(u32, usize),
    Copy(u64, u32),
}

pub(crate) fn dispatch_weight(_kernel: &RawKernel, _groups: [u32; 3]) -> f64 {
    0.0
}

pub(crate) fn copy_weight(_bytes: u64) -> f64 {
    0.0
}

pub(crate) trait SpanSource {
    #[allow(dead_code)]
    fn owners(&self) -> &[(u32, u32, Arc<TaskClock>)];
    #[allow(dead_code)]
    fn kernel(&self, op: u32) -> Option<&Arc<RawKernel>>;
}

/// Spare query pools: none without the trace.
#[derive(Debug, Default, Clone)]
pub(crate) struct SparePools(());

/// GPU spans: never made (a queue has them only with a trace or GPU timing).
#[derive(Debug)]
pub(crate) struct GpuSpans;

impl GpuSpans {
    pub fn new(_device: &Device, _ops: u32, _detail: TraceDetail, _spare: SparePools) -> Self {
        GpuSpans
    }
    pub fn start(&mut self, _cmd: vk::CommandBuffer, _phases: u32, _ops: u32, _more: u32, _charge: bool) {}
    pub fn restart(&mut self, _cmd: vk::CommandBuffer) {}
    pub fn command(
        &mut self,
        _cmd: vk::CommandBuffer,
        _what: Command,
        _weight: impl FnOnce() -> f64,
        _owners: impl IntoIterator<Item = (u32, u64)>,
    ) {
    }
    pub fn end_group(&mut self, _cmd: vk::CommandBuffer) {}
    pub fn into_pool(self) {}
    pub fn finish(&self, _value: u64, _trace: Option<&QueueTrace>, _src: &dyn SpanSource) {}
}

/// Ids of contexts (and, with the feature, of traced tasks), unique in the process.
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

pub(crate) fn current_poll() -> (u64, Option<i64>) {
    (0, None)
}

pub(crate) fn break_polls() {}

pub(crate) struct RunScope;

impl RunScope {
    pub fn enter(_trace: Option<&Arc<QueueTrace>>) -> Self {
        RunScope
    }
}

pub(crate) enum PollScope {}

impl PollScope {
    pub fn enter(_task: u64) -> Option<Self> {
        None
    }
    pub fn end(self, _ready: bool) {
        match self {}
    }
}
