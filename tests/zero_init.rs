//! Every buffer reads as zeros until it is written, even when the pool hands it memory that an
//! earlier buffer filled (one task must never see another task's data).

mod common;
use common::*;
use vkasync::{kernels, Buffer, CommandList, Device, Executor, Kernel, MemoryKind, Recorder};

const KINDS: [MemoryKind; 3] = [MemoryKind::Device, MemoryKind::Upload, MemoryKind::Readback];

/// Element counts: small pooled classes, one past 70,000, and one above the pool's 4 MiB
/// carving limit (a block of its own, kept for the next buffer of its rounded size).
const SIZES: [usize; 5] = [16, 1000, 4096, 70_001, (4 << 20) / 4 + 1000];

fn pattern(n: usize, salt: u32) -> Vec<u32> {
    (0..n as u32).map(|i| (i ^ salt).wrapping_mul(2654435761) | 1).collect()
}

/// Fills `buf` with a non-zero pattern through an upload and a `mix` dispatch, and waits.
fn scribble(device: &Device, mix: &Kernel, buf: &Buffer<u32>) {
    let n = buf.len();
    let mut cmds = CommandList::new(device);
    cmds.upload(buf, &pattern(n, 7)).unwrap();
    cmds.dispatch(mix, [mix.groups_for(n as u64), 1, 1], &[buf.into()], bytemuck::bytes_of(&[n as u32, 1])).unwrap();
    let rb = cmds.read_back(buf).unwrap();
    cmds.submit_and_wait().unwrap();
    assert!(rb.into_vec().unwrap().iter().all(|&x| x != 0), "the pattern must be non-zero");
}

/// Reads `buf` through a GPU read-back (a staging copy on the staging path).
fn read_back(device: &Device, buf: &Buffer<u32>) -> Vec<u32> {
    let mut cmds = CommandList::new(device);
    let rb = cmds.read_back(buf).unwrap();
    cmds.submit_and_wait().unwrap();
    rb.into_vec().unwrap()
}

fn first_nonzero(v: &[u32]) -> Option<(usize, u32)> {
    v.iter().copied().enumerate().find(|&(_, x)| x != 0)
}

#[test]
fn a_buffer_reusing_an_earlier_buffers_memory_reads_as_zeros_on_the_blocking_path() {
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    for kind in KINDS {
        for n in SIZES {
            let old = Buffer::<u32>::new(&device, n, kind).unwrap();
            scribble(&device, &mix, &old);
            let handle = old.pool_location();
            drop(old);
            // The pool hands the same memory out again: the test really covers reuse.
            let fresh = Buffer::<u32>::new(&device, n, kind).unwrap();
            assert_eq!(fresh.pool_location(), handle, "{kind:?} n={n}: the pool did not reuse the chunk");
            let got = read_back(&device, &fresh);
            assert_eq!(first_nonzero(&got), None, "{kind:?} n={n}: GPU read-back of a new buffer");
            drop(fresh);

            // Read on the host, where the host can map it.
            let fresh = Buffer::<u32>::new(&device, n, kind).unwrap();
            assert_eq!(fresh.pool_location(), handle);
            if fresh.is_host_visible() {
                let got = fresh.read().unwrap();
                assert_eq!(first_nonzero(&got), None, "{kind:?} n={n}: host read of a new buffer");
            }
            drop(fresh);

            // A kernel that reads a new buffer sees zeros: mix(0) everywhere.
            let fresh = Buffer::<u32>::new(&device, n, kind).unwrap();
            assert_eq!(fresh.pool_location(), handle);
            let mut cmds = CommandList::new(&device);
            cmds.dispatch(
                &mix,
                [mix.groups_for(n as u64), 1, 1],
                &[(&fresh).into()],
                bytemuck::bytes_of(&[n as u32, 1]),
            )
            .unwrap();
            let rb = cmds.read_back(&fresh).unwrap();
            cmds.submit_and_wait().unwrap();
            let want = mix_cpu(0, 1);
            let got = rb.into_vec().unwrap();
            assert!(got.iter().all(|&x| x == want), "{kind:?} n={n}: a kernel read stale data from a new buffer");
        }
    }
    drop(mix);
    finish(device);
}

#[test]
fn an_upload_of_a_sub_range_leaves_the_rest_of_a_new_buffer_zero() {
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    for kind in KINDS {
        for n in [16usize, 70_001] {
            let old = Buffer::<u32>::new(&device, n, kind).unwrap();
            scribble(&device, &mix, &old);
            drop(old);
            let fresh = Buffer::<u32>::new(&device, n, kind).unwrap();
            let (at, len) = (n / 4, n / 2);
            let part = pattern(len, 99);
            let mut cmds = CommandList::new(&device);
            cmds.upload_at(&fresh, at, &part).unwrap();
            let rb = cmds.read_back(&fresh).unwrap();
            cmds.submit_and_wait().unwrap();
            let got = rb.into_vec().unwrap();
            assert_eq!(first_nonzero(&got[..at]), None, "{kind:?} n={n}: before the uploaded range");
            assert_eq!(&got[at..at + len], &part[..], "{kind:?} n={n}: the uploaded range");
            assert_eq!(first_nonzero(&got[at + len..]), None, "{kind:?} n={n}: after the uploaded range");
        }
    }
    drop(mix);
    finish(device);
}

#[test]
fn a_buffer_of_bytes_whose_size_is_not_a_multiple_of_four_reads_as_zeros() {
    let device = device();
    for kind in KINDS {
        let old = Buffer::<u8>::new(&device, 13, kind).unwrap();
        let mut cmds = CommandList::new(&device);
        cmds.upload(&old, &[0xAB; 13]).unwrap();
        cmds.submit_and_wait().unwrap();
        drop(old);
        let fresh = Buffer::<u8>::new(&device, 13, kind).unwrap();
        let mut cmds = CommandList::new(&device);
        let rb = cmds.read_back(&fresh).unwrap();
        cmds.submit_and_wait().unwrap();
        assert_eq!(rb.into_vec().unwrap(), vec![0u8; 13], "{kind:?}");
    }
    finish(device);
}

#[test]
fn a_buffer_reusing_an_earlier_tasks_memory_reads_as_zeros_inside_executor_tasks() {
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let exec = Executor::builder(&device).flush_policy(vkasync::FlushPolicy::WhenIdle).build().unwrap();
    for kind in KINDS {
        for n in SIZES {
            // Task 1 leaves its data in the pool.
            let (ctx, m, d) = (exec.context(), mix.clone(), device.clone());
            let h = exec.spawn(async move {
                let buf = Buffer::<u32>::new(&d, n, kind)?;
                ctx.upload(&buf, &pattern(n, 3))?;
                ctx.dispatch(&m, [m.groups_for(n as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 1]))?;
                let got = ctx.read(&buf).await?;
                assert!(got.iter().all(|&x| x != 0));
                Ok::<_, vkasync::Error>(buf.pool_location())
            });
            exec.run();
            let handle = h.join().unwrap().unwrap();
            // Task 2 reads a new buffer of the same size; task 3 runs a kernel on one.
            let (ctx, d) = (exec.context(), device.clone());
            let read = exec.spawn(async move {
                let buf = Buffer::<u32>::new(&d, n, kind)?;
                let reused = buf.pool_location() == handle;
                Ok::<_, vkasync::Error>((reused, ctx.read(&buf).await?))
            });
            exec.run();
            let (reused, got) = read.join().unwrap().unwrap();
            assert!(reused, "{kind:?} n={n}: the pool did not reuse the chunk");
            assert_eq!(first_nonzero(&got), None, "{kind:?} n={n}: a task read another task's data");
            let (ctx, m, d) = (exec.context(), mix.clone(), device.clone());
            let kernel = exec.spawn(async move {
                let buf = Buffer::<u32>::new(&d, n, kind)?;
                ctx.dispatch(&m, [m.groups_for(n as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 1]))?;
                ctx.read(&buf).await
            });
            exec.run();
            let got = kernel.join().unwrap().unwrap();
            let want = mix_cpu(0, 1);
            assert!(got.iter().all(|&x| x == want), "{kind:?} n={n}: a kernel in a task read stale data");
        }
    }
    drop((exec, mix));
    finish(device);
}

#[test]
fn many_new_buffers_in_one_flush_all_read_as_zeros() {
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let exec = Executor::builder(&device).flush_policy(vkasync::FlushPolicy::WhenIdle).build().unwrap();
    let n = 300;
    // Fill many chunks of one class with data, then free them all.
    let olds: Vec<Buffer<u32>> = (0..64).map(|_| Buffer::new(&device, n, MemoryKind::Device).unwrap()).collect();
    for b in &olds {
        scribble(&device, &mix, b);
    }
    drop(olds);
    // 64 tasks in one flush: half read a new buffer, half upload a part of one then read it.
    let handles: Vec<_> = (0..64usize)
        .map(|t| {
            let (ctx, d) = (exec.context(), device.clone());
            exec.spawn(async move {
                let buf = Buffer::<u32>::new(&d, n, MemoryKind::Device)?;
                if t % 2 == 1 {
                    ctx.upload_at(&buf, 10, &[t as u32 + 1; 5])?;
                }
                ctx.read(&buf).await
            })
        })
        .collect();
    exec.run();
    for (t, h) in handles.into_iter().enumerate() {
        let got = h.join().unwrap().unwrap();
        let mut want = vec![0u32; n];
        if t % 2 == 1 {
            want[10..15].fill(t as u32 + 1);
        }
        assert_eq!(got, want, "task {t}");
    }
    assert_eq!(exec.stats().submits, 1);
    drop((exec, mix));
    finish(device);
}

/// Runs `tasks` tasks of `n` elements on a new executor; each makes a buffer (cleared or not),
/// optionally uploads all of it, runs `mix` and reads it back. Returns the barriers recorded.
fn barriers_for(device: &Device, mix: &Kernel, tasks: usize, n: usize, zeroed: bool, upload: bool) -> u64 {
    let exec = Executor::builder(device).flush_policy(vkasync::FlushPolicy::WhenIdle).build().unwrap();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let (ctx, m, d) = (exec.context(), mix.clone(), device.clone());
            exec.spawn(async move {
                let buf = if zeroed {
                    Buffer::<u32>::new(&d, n, MemoryKind::Device)?
                } else {
                    Buffer::<u32>::new_uninit(&d, n, MemoryKind::Device)?
                };
                if upload {
                    ctx.upload(&buf, &pattern(n, t as u32))?;
                }
                ctx.dispatch(&m, [m.groups_for(n as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 1]))?;
                ctx.read(&buf).await
            })
        })
        .collect();
    exec.run();
    for h in handles {
        h.join().unwrap().unwrap();
    }
    let s = exec.stats();
    assert_eq!(s.submits, 1, "{s}");
    s.barriers
}

#[test]
fn a_new_buffer_whose_first_use_is_a_full_upload_costs_no_clear() {
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    // Every submission compared below follows an earlier one (and so opens with a barrier).
    barriers_for(&device, &mix, 1, 16, false, true);
    // A full upload defines the whole buffer: no fill, no extra barrier.
    let cleared = barriers_for(&device, &mix, 100, 1000, true, true);
    let uncleared = barriers_for(&device, &mix, 100, 1000, false, true);
    assert_eq!(cleared, uncleared);
    // A kernel that reads a new buffer first needs the clear: one clear phase for all 100
    // buffers, so one more barrier, not one per buffer.
    let cleared = barriers_for(&device, &mix, 100, 1000, true, false);
    let uncleared = barriers_for(&device, &mix, 100, 1000, false, false);
    assert_eq!(cleared, uncleared + 1);
    drop(mix);
    finish(device);
}

#[test]
fn a_buffer_made_with_new_uninit_is_not_cleared() {
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let n = 1000;
    let old = Buffer::<u32>::new(&device, n, MemoryKind::Device).unwrap();
    scribble(&device, &mix, &old);
    let before = read_back(&device, &old);
    let location = old.pool_location();
    drop(old);
    // The documented opt-out: the memory is handed out as it is.
    let raw = Buffer::<u32>::new_uninit(&device, n, MemoryKind::Device).unwrap();
    assert_eq!(raw.pool_location(), location);
    assert_eq!(read_back(&device, &raw), before);
    drop((raw, mix));
    finish(device);
}

#[test]
fn the_clear_goes_with_whichever_submission_uses_a_new_buffer_first() {
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let n = 2000;
    let old = Buffer::<u32>::new(&device, n, MemoryKind::Device).unwrap();
    scribble(&device, &mix, &old);
    drop(old);
    let fresh = Buffer::<u32>::new(&device, n, MemoryKind::Device).unwrap();
    // Recorded first, submitted second: a kernel that reads and writes the buffer.
    let mut later = CommandList::new(&device);
    later
        .dispatch(&mix, [mix.groups_for(n as u64), 1, 1], &[(&fresh).into()], bytemuck::bytes_of(&[n as u32, 1]))
        .unwrap();
    // Recorded second, submitted first: a copy out of it, which must copy zeros. (A copy,
    // because a read-back in place waits for every recording that uses the buffer.)
    let copy = Buffer::<u32>::new(&device, n, MemoryKind::Device).unwrap();
    let mut first = CommandList::new(&device);
    first.copy(&fresh, &copy).unwrap();
    first.submit_and_wait().unwrap();
    assert_eq!(first_nonzero(&read_back(&device, &copy)), None);
    later.submit_and_wait().unwrap();
    // The kernel ran on zeros, and nothing cleared its result afterwards.
    let want = mix_cpu(0, 1);
    assert!(read_back(&device, &fresh).iter().all(|&x| x == want));
    drop((fresh, copy, mix));
    finish(device);
}
