//! Queues and queue sets as the benchmark programs open them.

use vkasync::{Device, Error, Queue, QueueSet};

/// A queue on `device`, with `VKASYNC_PIPELINE_DEPTH` (when set) as its pipeline depth (for A/B
/// runs of one binary).
pub fn queue_builder(device: &Device) -> vkasync::QueueBuilder {
    let b = Queue::builder(device);
    match pipeline_depth() {
        Some(d) => b.pipeline_depth(d),
        None => b,
    }
}

/// `VKASYNC_PIPELINE_DEPTH`, when set (for A/B runs of one binary).
pub fn pipeline_depth() -> Option<usize> {
    std::env::var("VKASYNC_PIPELINE_DEPTH").ok().and_then(|d| d.parse().ok())
}

/// The devices of a [`QueueSet`] over `gpus` GPUs: `lanes` logical devices (one queue each) per
/// GPU, GPU by GPU, `first` the first of them. Where fewer than `gpus` GPUs are listed, the
/// others are further logical devices of the default GPU.
pub fn set_devices(first: &Device, gpus: usize, lanes: usize) -> Result<Vec<Device>, Error> {
    let listed = vkasync::adapters()?.len();
    let lanes = lanes.max(1);
    let mut devices = Vec::new();
    for i in 0..gpus.max(1) * lanes {
        devices.push(match (i, listed >= gpus) {
            (0, _) => first.clone(),
            (_, true) => Device::builder().selector(vkasync::DeviceSelector::Index(i / lanes)).build()?,
            (_, false) => Device::new()?,
        });
    }
    Ok(devices)
}

/// A [`QueueSet`] with one queue (from [`queue_builder`]) on each of `devices`, each built with
/// `max_group_ops(n)` where `max_group_ops` is `Some(n)`.
pub fn queue_set(devices: &[Device], max_group_ops: Option<usize>) -> Result<QueueSet, Error> {
    let queues = devices
        .iter()
        .map(|d| match max_group_ops {
            Some(n) => queue_builder(d).max_group_ops(n).build(),
            None => queue_builder(d).build(),
        })
        .collect::<Result<_, _>>()?;
    QueueSet::from_queues(queues)
}
