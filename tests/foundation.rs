//! The foundation on the real device: bring-up, buffers, the `mix` kernel, error cases, leaks.

mod common;
use common::*;
use vkasync::{kernels, Arg, Buffer, CommandList, Device, DeviceSelector, Error, Kernel, MemoryKind, Recorder};

fn run_mix(device: &Device, kernel: &Kernel, data: &[u32], k: u32) -> Vec<u32> {
    let buf = Buffer::<u32>::new(device, data.len(), MemoryKind::Device).unwrap();
    let mut cmds = CommandList::new(device);
    cmds.upload(&buf, data).unwrap();
    let push = [data.len() as u32, k];
    cmds.dispatch(kernel, [kernel.groups_for(data.len() as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&push))
        .unwrap();
    let rb = cmds.read_back(&buf).unwrap();
    cmds.submit_and_wait().unwrap();
    rb.into_vec().unwrap()
}

#[test]
fn device_bring_up_and_listing() {
    let list = vkasync::adapters().unwrap();
    assert!(!list.is_empty());
    for (i, a) in list.iter().enumerate() {
        assert_eq!(a.index, i);
        assert!(!a.name.is_empty());
        assert!(!a.queue_families.is_empty());
    }
    let device = device();
    let info = device.info();
    assert!(info.timeline_semaphores);
    assert!(info.api_version >= (1, 2, 0));
    assert!(info.queue_families[device.queue_family() as usize].compute);
    assert!(list.iter().any(|a| a.name == info.name));
    // Selecting by index and by part of the name finds the same device.
    let by_index = builder().selector(DeviceSelector::Index(info.index)).build().unwrap();
    assert_eq!(by_index.info().name, info.name);
    let part = &info.name[..info.name.len().min(4)];
    let by_name = builder().select(&part.to_uppercase()).build().unwrap();
    assert!(by_name.info().name.to_lowercase().contains(&part.to_lowercase()));
    finish(by_index);
    finish(by_name);
    finish(device);
}

#[test]
fn selector_matching_nothing_is_a_typed_error() {
    let err = Device::builder().select("no-such-gpu-xyz").build().unwrap_err();
    assert!(matches!(err, Error::NoMatchingDevice { ref selector, .. } if selector == "no-such-gpu-xyz"), "{err}");
    assert!(err.to_string().contains("VKASYNC_DEVICE"));
    let err = Device::builder().selector(DeviceSelector::Index(999)).build().unwrap_err();
    assert!(matches!(err, Error::NoMatchingDevice { .. }), "{err}");
}

#[test]
fn buffer_round_trips() {
    let device = device();
    for len in [1usize, 1024, 4 << 20] {
        // 1 element, 4 KiB and 16 MiB of u32.
        let data: Vec<u32> = (0..len as u32).map(|i| i.wrapping_mul(2654435761)).collect();
        for kind in [MemoryKind::Device, MemoryKind::Readback] {
            let buf = Buffer::<u32>::new(&device, len, kind).unwrap();
            let mut cmds = CommandList::new(&device);
            cmds.upload(&buf, &data).unwrap();
            let rb = cmds.read_back(&buf).unwrap();
            cmds.submit_and_wait().unwrap();
            assert_eq!(rb.into_vec().unwrap(), data, "len {len} kind {kind:?}");
        }
        // Through a device-side copy between two buffers.
        let a = Buffer::<u32>::from_slice(&device, &data).unwrap();
        let b = Buffer::<u32>::new(&device, len, MemoryKind::Device).unwrap();
        let mut cmds = CommandList::new(&device);
        cmds.copy(&a, &b).unwrap();
        let rb = cmds.read_back(&b).unwrap();
        cmds.submit_and_wait().unwrap();
        assert_eq!(rb.into_vec().unwrap(), data);
    }
    finish(device);
}

#[test]
fn mix_matches_cpu() {
    let device = device();
    let kernel = Kernel::new(&device, &kernels::MIX).unwrap();
    assert_eq!(kernel.push_constant_size(), 8);
    assert_eq!(kernel.local_size(), [64, 1, 1]);
    for n in [1usize, 63, 64, 65, 1000, 4097] {
        for k in [0u32, 1, 7, 100] {
            let data: Vec<u32> = (0..n as u32).map(|i| i ^ 0xdead_beef).collect();
            let out = run_mix(&device, &kernel, &data, k);
            for (i, (&x, &y)) in data.iter().zip(&out).enumerate() {
                assert_eq!(y, mix_cpu(x, k), "n={n} K={k} element {i}");
            }
        }
    }
    drop(kernel);
    finish(device);
}

#[test]
fn dependent_commands_are_ordered() {
    // upload -> mix -> copy -> mix -> read: every step depends on the previous one.
    let device = device();
    let kernel = Kernel::new(&device, &kernels::MIX).unwrap();
    let n = 777usize;
    let data: Vec<u32> = (0..n as u32).collect();
    let a = Buffer::<u32>::new(&device, n, MemoryKind::Device).unwrap();
    let b = Buffer::<u32>::new(&device, n, MemoryKind::Device).unwrap();
    let push = [n as u32, 3];
    let groups = [kernel.groups_for(n as u64), 1, 1];
    let mut cmds = CommandList::new(&device);
    cmds.upload(&a, &data).unwrap();
    cmds.dispatch(&kernel, groups, &[(&a).into()], bytemuck::bytes_of(&push)).unwrap();
    cmds.dispatch(&kernel, groups, &[(&a).into()], bytemuck::bytes_of(&push)).unwrap();
    cmds.copy(&a, &b).unwrap();
    cmds.dispatch(&kernel, groups, &[(&b).into()], bytemuck::bytes_of(&push)).unwrap();
    let ra = cmds.read_back(&a).unwrap();
    let rb = cmds.read_back(&b).unwrap();
    cmds.submit_and_wait().unwrap();
    let ra = ra.into_vec().unwrap();
    let rb = rb.into_vec().unwrap();
    for i in 0..n {
        assert_eq!(ra[i], mix_cpu(data[i], 6));
        assert_eq!(rb[i], mix_cpu(data[i], 9));
    }
    drop((kernel, a, b));
    finish(device);
}

#[test]
fn error_cases_are_typed() {
    let device = device();
    let kernel = Kernel::new(&device, &kernels::MIX).unwrap();
    // Size 0.
    assert_eq!(Buffer::<u32>::new(&device, 0, MemoryKind::Device).unwrap_err(), Error::ZeroSize("buffer"));
    // Beyond the device's limit for one buffer.
    let limit = device.limits().max_buffer_size;
    let too_many = (limit / 4 + 1) as usize;
    assert!(matches!(Buffer::<u32>::new(&device, too_many, MemoryKind::Device).unwrap_err(), Error::TooLarge { .. }));
    // Overflowing byte size.
    assert!(matches!(Buffer::<u64>::new(&device, usize::MAX, MemoryKind::Device).unwrap_err(), Error::TooLarge { .. }));
    let buf = Buffer::<u32>::new(&device, 64, MemoryKind::Device).unwrap();
    let other = Buffer::<u32>::new(&device, 64, MemoryKind::Device).unwrap();
    let push = bytemuck::bytes_of(&[64u32, 1]).to_vec();
    let mut cmds = CommandList::new(&device);
    // Group counts above maxComputeWorkGroupCount.
    let max = device.limits().max_compute_work_group_count;
    let e = cmds.dispatch(&kernel, [max[0] + 1, 1, 1], &[(&buf).into()], &push).unwrap_err();
    assert!(matches!(e, Error::GroupCountTooLarge { .. }), "{e}");
    let e = cmds.dispatch(&kernel, [1, max[1] + 1, 1], &[(&buf).into()], &push).unwrap_err();
    assert!(matches!(e, Error::GroupCountTooLarge { .. }), "{e}");
    let e = cmds.dispatch(&kernel, [0, 1, 1], &[(&buf).into()], &push).unwrap_err();
    assert_eq!(e, Error::ZeroSize("dispatch group count"));
    // Push constants of the wrong size, or above the device limit.
    let e = cmds.dispatch(&kernel, [1, 1, 1], &[(&buf).into()], &push[..4]).unwrap_err();
    assert!(matches!(e, Error::PushConstants { .. }), "{e}");
    let big = vec![0u8; device.limits().max_push_constants_size as usize + 4];
    let e = cmds.dispatch(&kernel, [1, 1, 1], &[(&buf).into()], &big).unwrap_err();
    assert!(matches!(e, Error::PushConstants { .. }), "{e}");
    // Binding count and type.
    let e = cmds.dispatch(&kernel, [1, 1, 1], &[], &push).unwrap_err();
    assert!(matches!(e, Error::BindingMismatch { .. }), "{e}");
    let e = cmds.dispatch(&kernel, [1, 1, 1], &[(&buf).into(), (&other).into()], &push).unwrap_err();
    assert!(matches!(e, Error::BindingMismatch { .. }), "{e}");
    let e = cmds.dispatch(&kernel, [1, 1, 1], &[Arg::uniform(&buf)], &push).unwrap_err();
    assert!(matches!(e, Error::BindingMismatch { .. }), "{e}");
    // Copies and uploads out of range, or empty.
    let small = Buffer::<u32>::new(&device, 8, MemoryKind::Device).unwrap();
    assert!(matches!(cmds.copy(&buf, &small).unwrap_err(), Error::SizeMismatch { .. }));
    assert!(matches!(cmds.upload(&small, &[0u32; 9]).unwrap_err(), Error::SizeMismatch { .. }));
    assert_eq!(cmds.upload::<u32>(&small, &[]).unwrap_err(), Error::ZeroSize("upload"));
    assert!(matches!(cmds.copy_region(&buf, 0, &buf, 4, 8).unwrap_err(), Error::InvalidArgument(_)));
    // Nothing was recorded by the failed calls; the list is still usable.
    assert!(cmds.is_empty());
    cmds.dispatch(&kernel, [1, 1, 1], &[(&buf).into()], &push).unwrap();
    cmds.submit_and_wait().unwrap();
    // A read before the work ran.
    let mut cmds = CommandList::new(&device);
    let rb = cmds.read_back(&other).unwrap();
    assert!(!rb.is_ready().unwrap());
    drop(cmds);
    // Bad SPIR-V. Bytes that are no words at all are refused before any validator; the rest is
    // refused by the validator, or, in a build without one, refused as unvalidated.
    assert!(matches!(Kernel::from_spirv(&device, "bad", &[1, 2, 3]).unwrap_err(), Error::InvalidSpirv(_)));
    let mut truncated: Vec<u8> = kernels::MIX.spirv.iter().flat_map(|w| w.to_le_bytes()).collect();
    truncated.truncate(truncated.len() / 2 / 4 * 4);
    for bad in [&[0u8; 64][..], &truncated] {
        let err = Kernel::from_spirv(&device, "bad", bad).unwrap_err();
        #[cfg(feature = "spirv-validation")]
        assert!(matches!(err, Error::InvalidSpirv(_)), "{err:?}");
        #[cfg(not(feature = "spirv-validation"))]
        assert_eq!(err, Error::ValidationUnavailable);
    }
    drop((kernel, buf, other, small, rb));
    finish(device);
}

#[test]
fn user_spirv_loads_at_run_time() {
    let device = device();
    let bytes: Vec<u8> = kernels::MIX.spirv.iter().flat_map(|w| w.to_le_bytes()).collect();
    // A build without the SPIR-V validator refuses even a valid module: it cannot check it.
    #[cfg(not(feature = "spirv-validation"))]
    let kernel = {
        assert_eq!(Kernel::from_spirv(&device, "my-mix", &bytes).unwrap_err(), Error::ValidationUnavailable);
        // SAFETY: MIX was validated by build.rs.
        unsafe { Kernel::from_words_unchecked(&device, "my-mix", kernels::MIX.spirv) }.unwrap()
    };
    #[cfg(feature = "spirv-validation")]
    let kernel = Kernel::from_spirv(&device, "my-mix", &bytes).unwrap();
    assert_eq!(kernel.name(), "my-mix");
    let data: Vec<u32> = (0..100).collect();
    let out = run_mix(&device, &kernel, &data, 5);
    assert!(data.iter().zip(&out).all(|(&x, &y)| y == mix_cpu(x, 5)));
    drop(kernel);
    finish(device);
}

/// Devices and listings made and dropped one after another, more than the 29 instances after
/// which NVIDIA's driver, unloaded and loaded again with each, found no device (the loader and
/// one instance of its own now stay for the life of the process).
#[test]
fn devices_and_listings_come_and_go_many_times() {
    for i in 0..40 {
        assert!(!vkasync::adapters().unwrap().is_empty(), "listing {i}");
    }
    for i in 0..32 {
        let device = device();
        assert_eq!(device.debug_handle_count(), 1, "device {i}");
        finish(device);
    }
}

#[test]
fn nothing_leaks() {
    let device = device();
    let kernel = Kernel::new(&device, &kernels::MIX).unwrap();
    {
        let data: Vec<u32> = (0..5000).collect();
        let _ = run_mix(&device, &kernel, &data, 2);
        let _ = Buffer::<u8>::new(&device, 12345, MemoryKind::Upload).unwrap();
        assert!(device.memory_report().live_buffers == 0);
        let kept = Buffer::<u8>::new(&device, 100, MemoryKind::Readback).unwrap();
        assert_eq!(device.memory_report().live_buffers, 1);
        drop(kept);
    }
    // Freed buffers' memory is kept for reuse until trimmed.
    assert!(device.memory_report().pooled_bytes > 0);
    let big = Buffer::<u8>::new(&device, 9 << 20, MemoryKind::Device).unwrap();
    let pooled = device.memory_report().pooled_bytes;
    drop(big);
    let again = Buffer::<u8>::new(&device, 9 << 20, MemoryKind::Device).unwrap();
    assert_eq!(device.memory_report().pooled_bytes, pooled, "the large block was reused");
    drop(again);
    assert!(device.trim() > 0);
    assert_eq!(device.memory_report().pooled_bytes, 0);
    // Kernels, timestamps, a blocking list and an executor that ran a job: once all are gone,
    // nothing else holds the device, so its last handle destroys it.
    let ts = vkasync::Timestamps::new(&device, 2);
    let exec = vkasync::Executor::new(&device).unwrap();
    let h = exec.spawn(mix_task(exec.context(), kernel.clone(), 1, 256, 1));
    exec.run();
    assert_eq!(h.join().unwrap().unwrap(), mix_expected(1, 256, 1));
    assert!(device.debug_handle_count() > 1);
    drop((kernel, ts, exec));
    assert_eq!(device.debug_handle_count(), 1, "something made from the device still holds it");
    finish(device);
}

#[test]
fn validation_layer_messages_are_counted() {
    // Host-signalling a timeline value that is not greater than the current one is invalid
    // usage: the layer reports it (and lavapipe then loses the device).
    let device = device();
    assert_eq!(device.validation_message_count(), 0);
    let _ = device.debug_host_signal(0);
    if validation() {
        assert!(device.validation_message_count() >= 1);
        assert!(device.validation_messages().iter().any(|m| m.contains("VUID")), "{:?}", device.validation_messages());
    } else {
        // Without the layer (Windows under Wine, see `common::validation`) the device counts
        // nothing: there is no messenger to report to it.
        assert!(!device.validation_enabled());
        assert_eq!(device.validation_message_count(), 0);
        assert!(device.validation_messages().is_empty());
    }
}

/// A simulated loss (what the device-loss tests use where the driver has no way to lose the
/// device) fails every later call, and a wait that was already blocked when it came fails when
/// it returns, though the GPU finished the work.
#[test]
fn a_simulated_loss_fails_later_calls_and_a_blocked_wait() {
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let (n, k, _) = heavy(&device, &mix, 1 << 16, 2000, std::time::Duration::from_millis(200));
    let exec = vkasync::Executor::new(&device).unwrap();
    let ctx = exec.context();
    let buf = Buffer::<u32>::new(&device, n, MemoryKind::Device).unwrap();
    dispatch_mix(&ctx, &mix, &buf, k).unwrap();
    ctx.flush();
    let value = device.last_submitted();
    assert!(value > 0 && device.completed_value().unwrap() < value, "the work should still run");
    let waiter = {
        let device = device.clone();
        std::thread::spawn(move || device.wait(value, None))
    };
    // Well inside the work's 200 ms or more: the wait is blocked by now.
    std::thread::sleep(std::time::Duration::from_millis(20));
    device.debug_simulate_loss();
    assert_eq!(waiter.join().unwrap(), Err(Error::DeviceLost));
    assert!(device.is_lost());
    assert_eq!(device.completed_value(), Err(Error::DeviceLost));
    assert_eq!(device.wait(value, None), Err(Error::DeviceLost));
    let late = exec.block_on({
        let (ctx, dev) = (exec.context(), device.clone());
        async move {
            let small = Buffer::<u32>::new(&dev, 1, MemoryKind::Device)?;
            ctx.upload(&small, &[1])?;
            ctx.synchronize().await
        }
    });
    assert_eq!(late, Err(Error::DeviceLost));
    assert_no_validation_messages(&device);
    drop((buf, exec));
}

/// Regression: the blocking path dropped its recording right after the submit, before the wait,
/// so a buffer or kernel that only the command list still held was destroyed while the GPU used
/// it (`VUID-vkDestroyBuffer-buffer-00922`, and a crash inside lavapipe).
#[test]
fn resources_only_the_list_holds_live_until_the_wait_returns() {
    let device = device();
    let kernel = Kernel::new(&device, &kernels::MIX).unwrap();
    let data: Vec<u32> = (0..100_000).collect();
    let k = 200;
    let out = Buffer::<u32>::new(&device, data.len(), MemoryKind::Device).unwrap();
    let mut cmds = CommandList::new(&device);
    {
        let tmp = Buffer::<u32>::new(&device, data.len(), MemoryKind::Device).unwrap();
        cmds.upload(&tmp, &data).unwrap();
        let push = [data.len() as u32, k];
        cmds.dispatch(
            &kernel,
            [kernel.groups_for(data.len() as u64), 1, 1],
            &[(&tmp).into()],
            bytemuck::bytes_of(&push),
        )
        .unwrap();
        cmds.copy(&tmp, &out).unwrap();
    }
    drop(kernel);
    let rb = cmds.read_back(&out).unwrap();
    cmds.submit_and_wait().unwrap();
    let expected: Vec<u32> = data.iter().map(|&x| mix_cpu(x, k)).collect();
    assert_eq!(rb.into_vec().unwrap(), expected);
    drop(out);
    finish(device);
}

#[test]
fn timestamps_measure_gpu_time() {
    let device = device();
    let kernel = Kernel::new(&device, &kernels::MIX).unwrap();
    let ts = vkasync::Timestamps::new(&device, 4).unwrap();
    let n = 1 << 16;
    let buf = Buffer::<u32>::new(&device, n, MemoryKind::Device).unwrap();
    let mut cmds = CommandList::new(&device);
    cmds.write_timestamp(&ts, 0).unwrap();
    cmds.dispatch(&kernel, [kernel.groups_for(n as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 1]))
        .unwrap();
    cmds.write_timestamp(&ts, 1).unwrap();
    cmds.dispatch(&kernel, [kernel.groups_for(n as u64), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 500]))
        .unwrap();
    cmds.write_timestamp(&ts, 2).unwrap();
    assert!(matches!(cmds.write_timestamp(&ts, 4).unwrap_err(), Error::InvalidArgument(_)));
    assert_eq!(ts.ticks().unwrap_err(), Error::NotReady);
    cmds.submit_and_wait().unwrap();
    assert_eq!(ts.ticks().unwrap_err(), Error::NotReady, "index 3 was never written");
    let short = ts.elapsed_ns(0, 1).unwrap();
    let long = ts.elapsed_ns(1, 2).unwrap();
    assert!(short > 0.0 && long > short, "K=500 should take longer than K=1: {short} ns vs {long} ns");
    ts.reset();
    drop((kernel, buf, ts));
    finish(device);
}

#[test]
fn an_exhausted_heap_is_a_typed_error() {
    let device = device();
    let limit = device.limits().max_buffer_size;
    let mut held = Vec::new();
    let mut err = None;
    // The device's memory is finite: keep allocating the largest buffer until it says so.
    for _ in 0..64 {
        match Buffer::<u8>::new(&device, limit as usize, MemoryKind::Device) {
            Ok(b) => held.push(b),
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    let err = err.expect("64 buffers of the largest size fit on the device");
    assert!(matches!(err, Error::OutOfDeviceMemory(_)), "{err}");
    drop(held);
    // Everything is usable again afterwards.
    Buffer::<u8>::new(&device, 1 << 20, MemoryKind::Device).unwrap();
    finish(device);
}

#[test]
fn buffers_made_and_dropped_on_many_threads_reuse_the_pool_and_trim_to_nothing() {
    let device = device();
    let round = |device: &Device| {
        std::thread::scope(|s| {
            for t in 0..8u32 {
                let d = device.clone();
                s.spawn(move || {
                    for i in 0..40u32 {
                        let kind = [MemoryKind::Device, MemoryKind::Upload, MemoryKind::Readback][(i % 3) as usize];
                        let b = Buffer::<u32>::new(&d, 1024, kind).unwrap();
                        assert_eq!(b.len(), 1024, "thread {t}");
                    }
                });
            }
        });
    };
    round(&device);
    let reserved = device.memory_report().pooled_bytes;
    assert!(reserved > 0);
    // Chunks freed on each thread are reused (through its stash or the pool): more rounds of
    // the same work reserve no more blocks.
    for _ in 0..4 {
        round(&device);
    }
    assert_eq!(device.memory_report().pooled_bytes, reserved);
    assert_eq!(device.memory_report().live_buffers, 0);
    // A trim gives back the chunks stashed by every thread, so every block is freed.
    finish(device);
}

#[test]
fn handles_can_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Device>();
    send_sync::<Buffer<u32>>();
    send_sync::<Kernel>();
    send_sync::<CommandList>();
    send_sync::<vkasync::Timestamps>();
    send_sync::<Error>();
    // A device opened on one thread is used from another.
    let device = device();
    let d = device.clone();
    let out = std::thread::spawn(move || {
        let kernel = Kernel::new(&d, &kernels::MIX).unwrap();
        run_mix(&d, &kernel, &[1, 2, 3], 4)
    })
    .join()
    .unwrap();
    assert_eq!(out, vec![mix_cpu(1, 4), mix_cpu(2, 4), mix_cpu(3, 4)]);
    finish(device);
}

#[test]
fn compiled_kernels_carry_no_path_of_the_build_machine() {
    // Built without debug information (the default), the SPIR-V has no source names at all;
    // and none of it may hold the checkout's absolute path.
    let root = env!("CARGO_MANIFEST_DIR").as_bytes();
    assert!(!vkasync::kernels::ALL.is_empty());
    for k in vkasync::kernels::ALL {
        let bytes: Vec<u8> = k.spirv.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert!(!bytes.windows(root.len()).any(|w| w == root), "{} holds {}", k.name, env!("CARGO_MANIFEST_DIR"));
        assert!(
            !bytes.windows(b"shaders/".len()).any(|w| w == b"shaders/"),
            "{} carries source names (debug information)",
            k.name
        );
    }
}

#[test]
fn the_build_time_reflection_matches_the_run_time_one() {
    use vkasync::kernels;
    let device = device();
    // (kernel, bindings, read-only flags, push-constant bytes, workgroup size), built at build time.
    type Case<'a> = (&'a vkasync::KernelSource, &'a [u32], &'a [bool], u32, [u32; 3]);
    let cases: [Case; 3] = [
        (
            &kernels::MIX,
            kernels::mix::BINDINGS,
            kernels::mix::READ_ONLY,
            kernels::mix::PUSH_CONSTANT_BYTES,
            kernels::mix::LOCAL_SIZE,
        ),
        (
            &kernels::SHA256_MULTI,
            kernels::sha256_multi::BINDINGS,
            kernels::sha256_multi::READ_ONLY,
            kernels::sha256_multi::PUSH_CONSTANT_BYTES,
            kernels::sha256_multi::LOCAL_SIZE,
        ),
        (
            &kernels::AES_CTR_MULTI,
            kernels::aes_ctr_multi::BINDINGS,
            kernels::aes_ctr_multi::READ_ONLY,
            kernels::aes_ctr_multi::PUSH_CONSTANT_BYTES,
            kernels::aes_ctr_multi::LOCAL_SIZE,
        ),
    ];
    for (source, bindings, read_only, push, local) in cases {
        let k = vkasync::Kernel::new(&device, source).unwrap();
        let r = k.reflection();
        assert_eq!(r.bindings.iter().map(|b| b.binding).collect::<Vec<_>>(), bindings, "{}", source.name);
        assert_eq!(r.bindings.iter().map(|b| b.read_only).collect::<Vec<_>>(), read_only, "{}", source.name);
        assert_eq!((k.push_constant_size(), k.local_size()), (push, local), "{}", source.name);
    }
    assert_eq!(
        (kernels::sha256_multi::BINDINGS.len(), kernels::sha256_multi::READ_ONLY),
        (4, &[true, true, true, false][..])
    );
    finish(device);
}
