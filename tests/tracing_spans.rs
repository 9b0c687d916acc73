//! vkasync's `tracing` spans: a flush, its encoding and its submit, and the driver's wait, each
//! a span, seen by a subscriber installed by the application.

mod common;

use common::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};
use vkasync::{kernels, Buffer, Kernel, MemoryKind, Queue};

/// Records the name of every span created, from any thread.
#[derive(Default)]
struct Names {
    names: Mutex<Vec<&'static str>>,
    next: AtomicU64,
}

/// The subscriber: a shared handle on [`Names`].
#[derive(Clone, Default)]
struct SpanNames(Arc<Names>);

impl Subscriber for SpanNames {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.0.names.lock().unwrap().push(span.metadata().name());
        Id::from_u64(self.0.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn flush_encode_submit_and_wait_are_spans() {
    let names = SpanNames::default();
    tracing::subscriber::set_global_default(names.clone()).expect("the only subscriber of this test binary");
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let queue = Queue::new(&device).unwrap();
    let ctx = queue.context();
    let out = futures::executor::block_on(async {
        let buf = Buffer::<u32>::new(ctx.device(), 256, MemoryKind::Device).unwrap();
        ctx.upload(&buf, &[5u32; 256]).unwrap();
        ctx.dispatch(&mix, [4, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[256u32, 1000])).unwrap();
        ctx.read(&buf).await.unwrap()
    });
    assert!(out.iter().all(|&x| x == mix_cpu(5, 1000)));
    drop((queue, ctx, mix));
    let seen = names.0.names.lock().unwrap().clone();
    for name in ["vkasync.flush", "vkasync.encode_batches", "vkasync.encode", "vkasync.submit", "vkasync.wait"] {
        assert!(seen.contains(&name), "no {name} span among {seen:?}");
    }
    finish(device);
}
