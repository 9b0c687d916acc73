//! The executor on the real device: batching, waiting, stats, lifetimes, cancellation, faults.

mod common;
use common::*;
use std::rc::Rc;
use vkasync::{kernels, Buffer, Ctx, Device, Error, Executor, Kernel, MemoryKind, WaitPolicy};

/// One task of the motivating case: upload, one `mix`, read back.
async fn mix_task(ctx: Ctx, mix: Kernel, t: u32, n: usize, k: u32) -> Result<Vec<u32>, Error> {
    let data: Vec<u32> = (0..n as u32).map(|i| i ^ t.wrapping_mul(2654435761)).collect();
    let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
    ctx.upload(&buf, &data)?;
    ctx.dispatch(&mix, [mix.groups_for(n as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, k]))?;
    ctx.read(&buf).await
}

fn expected(t: u32, n: usize, k: u32) -> Vec<u32> {
    (0..n as u32).map(|i| mix_cpu(i ^ t.wrapping_mul(2654435761), k)).collect()
}

fn setup() -> (Device, Kernel) {
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    (device, mix)
}

#[test]
fn two_tasks_share_one_submit_and_one_wait() {
    let (device, mix) = setup();
    let exec = Executor::new(&device).unwrap();
    let a = exec.spawn(mix_task(exec.context(), mix.clone(), 1, 1000, 5));
    let b = exec.spawn(mix_task(exec.context(), mix.clone(), 2, 333, 7));
    exec.run();
    assert_eq!(a.join().unwrap().unwrap(), expected(1, 1000, 5));
    assert_eq!(b.join().unwrap().unwrap(), expected(2, 333, 7));
    let s = exec.stats();
    assert_eq!((s.await_points, s.submits, s.host_waits, s.flushes), (2, 1, 1, 1), "{s}");
    assert_eq!((s.tasks_spawned, s.tasks_completed), (2, 2));
    drop((exec, mix));
    finish(device);
}

#[test]
fn a_thousand_tasks_share_one_submit_and_one_wait() {
    let (device, mix) = setup();
    for policy in [WaitPolicy::All, WaitPolicy::Oldest] {
        let exec = Executor::builder(&device).wait_policy(policy).build().unwrap();
        let handles: Vec<_> =
            (0..1000u32).map(|t| exec.spawn(mix_task(exec.context(), mix.clone(), t, 64, 3))).collect();
        exec.run();
        for (t, h) in handles.into_iter().enumerate() {
            assert_eq!(h.join().unwrap().unwrap(), expected(t as u32, 64, 3));
        }
        let s = exec.stats();
        assert_eq!((s.await_points, s.submits, s.host_waits), (1000, 1, 1), "{s}");
        // upload (direct on unified memory, or a copy) -> dispatch -> read-back: the barriers do
        // not grow with the number of tasks.
        assert!(s.barriers <= 4, "{s}");
    }
    drop(mix);
    finish(device);
}

#[test]
fn barriers_do_not_grow_with_tasks_when_each_does_copy_dispatch_copy() {
    let (device, mix) = setup();
    let mut counts = Vec::new();
    for tasks in [1u32, 10, 200] {
        let exec = Executor::new(&device).unwrap();
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let (ctx, mix) = (exec.context(), mix.clone());
                exec.spawn(async move {
                    let n = 100;
                    let data: Vec<u32> = (0..n as u32).map(|i| i + t).collect();
                    let src = Buffer::<u32>::from_slice(ctx.device(), &data)?;
                    let work = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
                    let out = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Readback)?;
                    ctx.copy(&src, &work)?;
                    ctx.dispatch(&mix, [2, 1, 1], &[(&work).into()], bytemuck::bytes_of(&[n as u32, 2]))?;
                    ctx.copy(&work, &out)?;
                    let got = ctx.read(&out).await?;
                    assert_eq!(got, data.iter().map(|&x| mix_cpu(x, 2)).collect::<Vec<_>>());
                    Ok::<_, Error>(())
                })
            })
            .collect();
        exec.run();
        for h in handles {
            h.join().unwrap().unwrap();
        }
        let s = exec.stats();
        assert_eq!(s.submits, 1, "{s}");
        counts.push(s.barriers);
    }
    // copy -> dispatch -> copy is three phases: two barriers between them, plus one to host reads.
    assert_eq!(counts, vec![3, 3, 3]);
    drop(mix);
    finish(device);
}
