//! Robust buffer access: a kernel that indexes past its buffer cannot reach the buffer next to
//! it in the same pooled `VkBuffer`.
//!
//! lavapipe checks storage-buffer bounds itself, so these tests may pass without robustness;
//! `examples/robust_check.rs` runs the same check on a real GPU.

mod common;
use common::*;
use vkasync::{kernels, Buffer, CommandList, Device, Kernel, MemoryKind, Recorder, RobustAccess};

/// Two buffers of `n` u32 that lie back to back in one pooled `VkBuffer` (`first` ends where
/// `second` starts), plus the other buffers allocated while looking for them.
fn adjacent_pair(device: &Device, n: usize, kind: MemoryKind) -> (Buffer<u32>, Buffer<u32>, Vec<Buffer<u32>>) {
    let mut all: Vec<Buffer<u32>> = Vec::new();
    for _ in 0..64 {
        all.push(Buffer::new(device, n, kind).unwrap());
        let (nb, no, _) = all.last().unwrap().pool_location();
        if let Some(i) = all.iter().position(|b| {
            let (vb, vo, class) = b.pool_location();
            vb == nb && vo + class == no
        }) {
            let second = all.pop().unwrap();
            let first = all.remove(i);
            return (first, second, all);
        }
    }
    panic!("no two adjacent chunks among 64 buffers of {n} u32");
}

#[test]
fn robust_buffer_access_is_on_by_default_and_uses_robustness2_where_offered() {
    let device = device();
    assert!(device.robust_buffer_access());
    if is_lavapipe(&device) {
        // lavapipe offers VK_EXT_robustness2 (shared/GPU.md).
        assert_eq!(device.robust_access(), RobustAccess::Robustness2);
    }
    finish(device);
}

#[test]
fn a_kernel_indexing_past_its_buffer_leaves_the_neighbouring_buffer_intact() {
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    for kind in [MemoryKind::Device, MemoryKind::Upload] {
        for n in [64usize, 1000] {
            let (first, second, _others) = adjacent_pair(&device, n, kind);
            let mine: Vec<u32> = (0..n as u32).collect();
            let theirs: Vec<u32> = (0..n as u32).map(|i| 0xC0DE_0000 ^ i).collect();
            let mut cmds = CommandList::new(&device);
            cmds.upload(&first, &mine).unwrap();
            cmds.upload(&second, &theirs).unwrap();
            // `n` in the push constant is far larger than the buffer: nothing can check it.
            for count in [n + 1, 2 * n, 1000 * n] {
                let push = [count as u32, 1];
                cmds.dispatch(
                    &mix,
                    [mix.groups_for(count as u64), 1, 1],
                    &[(&first).into()],
                    bytemuck::bytes_of(&push),
                )
                .unwrap();
            }
            let rb_first = cmds.read_back(&first).unwrap();
            let rb_second = cmds.read_back(&second).unwrap();
            cmds.submit_and_wait().unwrap();
            let want: Vec<u32> = mine.iter().map(|&x| mix_cpu(x, 3)).collect();
            assert_eq!(rb_first.into_vec().unwrap(), want, "{kind:?} n={n}: the kernel's own buffer");
            assert_eq!(rb_second.into_vec().unwrap(), theirs, "{kind:?} n={n}: the neighbouring buffer changed");
        }
    }
    drop(mix);
    finish(device);
}

#[test]
fn robust_access_can_be_turned_off() {
    let device = builder()
        .always_stage(std::env::var("VKASYNC_TEST_ALWAYS_STAGE").is_ok_and(|v| v == "1"))
        .robust_buffer_access(false)
        .build()
        .unwrap();
    assert_eq!(device.robust_access(), RobustAccess::Off);
    assert!(!device.robust_buffer_access());
    // Kernels that stay in bounds run as before.
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let data: Vec<u32> = (0..500).collect();
    let buf = Buffer::<u32>::new(&device, data.len(), MemoryKind::Device).unwrap();
    let mut cmds = CommandList::new(&device);
    cmds.upload(&buf, &data).unwrap();
    cmds.dispatch(&mix, [mix.groups_for(500), 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[500u32, 2])).unwrap();
    let rb = cmds.read_back(&buf).unwrap();
    cmds.submit_and_wait().unwrap();
    assert_eq!(rb.into_vec().unwrap(), data.iter().map(|&x| mix_cpu(x, 2)).collect::<Vec<_>>());
    drop((buf, mix));
    finish(device);
}

#[test]
fn every_chunk_starts_and_ends_on_the_robust_access_alignment() {
    // robustness2 rounds a binding's range up to at most 256 bytes: a chunk that starts and
    // ends on 256 bytes keeps the rounded range inside itself.
    let device = device();
    let mut keep = Vec::new();
    for len in [1usize, 3, 13, 255, 256, 257, 4095, 70_001, (4 << 20) + 1] {
        for kind in [MemoryKind::Device, MemoryKind::Upload, MemoryKind::Readback] {
            let b = Buffer::<u8>::new(&device, len, kind).unwrap();
            let (_, offset, class) = b.pool_location();
            assert_eq!(offset % 256, 0, "{kind:?} {len} bytes at {offset}");
            assert_eq!(class % 256, 0, "{kind:?} {len} bytes in a chunk of {class}");
            assert!(class >= (len as u64).next_multiple_of(256), "{kind:?} {len} bytes in a chunk of {class}");
            keep.push(b);
        }
    }
    drop(keep);
    finish(device);
}
