//! Each buffer bound to a dispatch is checked against the range limit of its descriptor type
//! and against the static size of the kernel's block.

mod common;

use common::{device, finish};
use vkasync::{kernels, Arg, BindingKind, Buffer, CommandList, Error, Executor, Kernel, MemoryKind, Recorder};

/// The error must be `BindingSize` naming `binding`.
fn assert_binding_size(err: Error, binding: u32, needle: &str) {
    match &err {
        Error::BindingSize { binding: b, reason, .. } => {
            assert_eq!(*b, binding, "{err}");
            assert!(reason.contains(needle), "{err}");
        }
        other => panic!("expected Error::BindingSize for binding {binding}, got {other:?}"),
    }
}

#[test]
fn reflection_gives_each_block_its_static_size() {
    let device = device();
    let aes = Kernel::new(&device, &kernels::AES_CTR).unwrap();
    let b = &aes.reflection().bindings;
    assert_eq!((b[0].binding, b[0].kind, b[0].min_size), (0, BindingKind::Uniform, 1264));
    // `uvec4 data[]` only: a runtime array has no static size.
    assert_eq!((b[1].binding, b[1].kind, b[1].min_size), (1, BindingKind::Storage, 0));
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    assert_eq!(mix.reflection().bindings[0].min_size, 0);
    drop((aes, mix));
    finish(device);
}

#[test]
fn a_uniform_binding_past_max_uniform_buffer_range_is_a_typed_error() {
    let device = device();
    let aes = Kernel::new(&device, &kernels::AES_CTR).unwrap();
    let limit = device.limits().max_uniform_buffer_range;
    let push = vec![0u8; aes.push_constant_size() as usize];
    let data = Buffer::<u32>::new(&device, 64, MemoryKind::Device).unwrap();
    let mut cmds = CommandList::new(&device);
    // Just past the limit (65,552 bytes where the limit is 65,536), and 1 MiB.
    for bytes in [limit + 16, (1u64 << 20).max(limit + 4)] {
        let keys = Buffer::<u32>::new(&device, (bytes / 4) as usize, MemoryKind::Device).unwrap();
        let err = cmds.dispatch(&aes, [1, 1, 1], &[Arg::uniform(&keys), (&data).into()], &push).unwrap_err();
        assert_binding_size(err, 0, "maxUniformBufferRange");
    }
    // The same through an executor task's context.
    let exec = Executor::new(&device).unwrap();
    let ctx = exec.context();
    let keys = Buffer::<u32>::new(&device, ((limit + 16) / 4) as usize, MemoryKind::Device).unwrap();
    let err = ctx.dispatch(&aes, [1, 1, 1], &[Arg::uniform(&keys), (&data).into()], &push).unwrap_err();
    assert_binding_size(err, 0, "maxUniformBufferRange");
    // At the limit it is accepted, and the validation layer agrees.
    let at_limit = Buffer::<u32>::new(&device, (limit.min(1 << 20) / 4) as usize, MemoryKind::Device).unwrap();
    cmds.dispatch(&aes, [1, 1, 1], &[Arg::uniform(&at_limit), (&data).into()], &push).unwrap();
    cmds.submit_and_wait().unwrap();
    drop((exec, ctx, keys, at_limit, data, aes));
    finish(device);
}

#[test]
fn a_buffer_smaller_than_the_kernels_block_is_a_typed_error() {
    let device = device();
    let aes = Kernel::new(&device, &kernels::AES_CTR).unwrap();
    let push = vec![0u8; aes.push_constant_size() as usize];
    let data = Buffer::<u32>::new(&device, 64, MemoryKind::Device).unwrap();
    let mut cmds = CommandList::new(&device);
    // 16 bytes where the block is 1,264, and one word short of it.
    for words in [4usize, 1264 / 4 - 1] {
        let keys = Buffer::<u32>::new(&device, words, MemoryKind::Device).unwrap();
        let err = cmds.dispatch(&aes, [1, 1, 1], &[Arg::uniform(&keys), (&data).into()], &push).unwrap_err();
        assert_binding_size(err, 0, "1264");
    }
    let exact = Buffer::<u32>::new(&device, 1264 / 4, MemoryKind::Device).unwrap();
    cmds.dispatch(&aes, [1, 1, 1], &[Arg::uniform(&exact), (&data).into()], &push).unwrap();
    cmds.submit_and_wait().unwrap();
    drop((exact, data, aes));
    finish(device);
}

#[test]
fn a_storage_binding_past_max_storage_buffer_range_is_a_typed_error() {
    let device = device();
    let limits = device.limits();
    let bytes = limits.max_storage_buffer_range + 4;
    if bytes > limits.max_buffer_size || bytes > 512 << 20 {
        // Such a buffer cannot exist on this device (or is too large to allocate for a test):
        // the limit cannot be passed.
        eprintln!("maxStorageBufferRange {} cannot be passed here", limits.max_storage_buffer_range);
        finish(device);
        return;
    }
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let big = Buffer::<u32>::new(&device, (bytes / 4) as usize, MemoryKind::Device).unwrap();
    let mut cmds = CommandList::new(&device);
    let err = cmds.dispatch(&mix, [1, 1, 1], &[(&big).into()], bytemuck::bytes_of(&[16u32, 1])).unwrap_err();
    assert_binding_size(err, 0, "maxStorageBufferRange");
    drop((cmds, big, mix));
    finish(device);
}
