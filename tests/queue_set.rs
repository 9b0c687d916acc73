//! Several devices behind one handle (`QueueSet`), on lavapipe as two logical devices of the
//! same GPU: every job's result, both devices used, placement by load, one wait per flush on
//! each device, and the errors.

mod common;

use vkasync::{kernels, Buffer, Ctx, Error, Kernel, MemoryKind, PerDevice, Queue, QueueSet};

async fn job(ctx: Ctx, mix: &PerDevice<Kernel>, seed: u32) -> Result<(), Error> {
    let mix = mix.get(ctx.device())?.clone();
    let data: Vec<u32> = (0..512u32).map(|i| i ^ seed).collect();
    let buf = Buffer::<u32>::new(ctx.device(), data.len(), MemoryKind::Device)?;
    ctx.upload(&buf, &data)?;
    ctx.dispatch(&mix, [8, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[512u32, 3]))?;
    let out = ctx.read(&buf).await?;
    for (o, d) in out.iter().zip(&data) {
        assert_eq!(*o, common::mix_cpu(*d, 3));
    }
    Ok(())
}

#[test]
fn jobs_spread_over_two_devices_from_tokio() {
    let devices = [common::device(), common::device()];
    let set = QueueSet::new(&devices).unwrap();
    let mix = set.per_device(|d| Kernel::new(d, &kernels::MIX)).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().unwrap();
    rt.block_on(async {
        let handles: Vec<_> = (0..400u32)
            .map(|i| {
                let (ctx, mix) = (set.context(), mix.clone());
                tokio::spawn(async move { job(ctx, &mix, i).await })
            })
            .collect();
        for h in handles {
            h.await.unwrap().unwrap();
        }
    });
    drop(rt);
    let stats = set.stats();
    // Both devices ran jobs, about evenly (ties go round-robin; contexts were all made before
    // any finished).
    let dispatches: Vec<u64> = stats.iter().map(|s| s.dispatches).collect();
    assert_eq!(dispatches.iter().sum::<u64>(), 400);
    assert!(dispatches.iter().all(|&d| (150..=250).contains(&d)), "{dispatches:?}");
    for s in &stats {
        // Each device: coalesced submits, and no more host waits than flushes.
        assert!(s.submits > 0 && s.submits < 200, "{s}");
        assert!(s.host_waits <= s.flushes, "{s}");
    }
    assert_eq!(set.load(), vec![0, 0], "every job's context was dropped");
    drop((set, mix));
    for d in devices {
        common::finish(d);
    }
}

#[test]
fn placement_follows_the_jobs_in_progress() {
    let devices = [common::device(), common::device()];
    let set = QueueSet::new(&devices).unwrap();
    // Ten long jobs hold the first device.
    let held: Vec<Ctx> = (0..10).map(|_| set.context_on(0).unwrap()).collect();
    assert_eq!(set.load(), vec![10, 0]);
    // The next ten go to the idle one, whatever the turn.
    let next: Vec<Ctx> = (0..10).map(|_| set.context()).collect();
    assert!(next.iter().all(|c| c.device().same_device(&devices[1])));
    assert_eq!(set.load(), vec![10, 10]);
    // Clones share the job; dropping all of them ends it.
    let c = next[0].clone();
    drop(next);
    assert_eq!(set.load(), vec![10, 1]);
    drop(c);
    drop(held);
    assert_eq!(set.load(), vec![0, 0]);
    // With equal load, placement alternates.
    let a = set.context();
    let b = set.context();
    assert!(!a.device().same_device(b.device()));
    assert!(set.context_on(2).is_none());
    drop((a, b, set));
    for d in devices {
        common::finish(d);
    }
}

#[test]
fn bad_sets_are_typed_errors() {
    let device = common::device();
    let other = common::device();
    assert!(matches!(QueueSet::new(&[]), Err(Error::InvalidArgument(_))));
    let twice = QueueSet::from_queues(vec![Queue::new(&device).unwrap(), Queue::new(&device).unwrap()]);
    assert!(matches!(twice, Err(Error::InvalidArgument(_))));
    let set = QueueSet::new(std::slice::from_ref(&device)).unwrap();
    let mix = set.per_device(|d| Kernel::new(d, &kernels::MIX)).unwrap();
    assert!(matches!(mix.get(&other), Err(Error::InvalidArgument(_))));
    assert!(mix.get(&device).is_ok());
    drop((set, mix));
    common::finish(device);
    common::finish(other);
}
