//! Checks on the real GPU that a kernel indexing past its buffer cannot change the buffer next
//! to it in the same pooled `VkBuffer`, with robust buffer access on (the
//! default) and, for comparison, off.
//!
//! `cargo run --release --example robust_check` prints one line per case:
//! - `PASS`/`FAIL` with robust access on: the neighbour must stay intact, and the kernel's own
//!   buffer must hold the right results;
//! - `INFO` with robust access off: what the GPU does unprotected (overwriting the neighbour
//!   there shows that the check would notice). The exit status is 1 if any line is `FAIL`.

use vkasync::{kernels, Buffer, CommandList, Device, Error, Kernel, MemoryKind, Recorder};

fn mix_cpu(mut x: u32, k: u32) -> u32 {
    for _ in 0..k {
        x = x.wrapping_mul(1664525).wrapping_add(1013904223);
        x ^= x >> 16;
    }
    x
}

/// Two buffers of `n` u32 back to back in one pooled `VkBuffer`, and the others allocated
/// while looking for them.
fn adjacent_pair(device: &Device, n: usize, kind: MemoryKind) -> Result<(Buffer<u32>, Buffer<u32>), Error> {
    let mut all: Vec<Buffer<u32>> = Vec::new();
    for _ in 0..256 {
        all.push(Buffer::new(device, n, kind)?);
        let (nb, no, _) = all.last().expect("just pushed").pool_location();
        if let Some(i) = all.iter().position(|b| {
            let (vb, vo, class) = b.pool_location();
            vb == nb && vo + class == no
        }) {
            let second = all.pop().expect("just pushed");
            return Ok((all.swap_remove(i), second));
        }
    }
    Err(Error::InvalidArgument(format!("no two adjacent chunks among 256 buffers of {n} u32")))
}

/// Runs `mix` over `count` elements of a buffer of `n`, then reports (own buffer right,
/// neighbour words changed).
fn check(device: &Device, mix: &Kernel, kind: MemoryKind, n: usize, count: usize) -> Result<(bool, usize), Error> {
    let (first, second) = adjacent_pair(device, n, kind)?;
    let mine: Vec<u32> = (0..n as u32).collect();
    let theirs: Vec<u32> = (0..n as u32).map(|i| 0xC0DE_0000 ^ i).collect();
    let mut cmds = CommandList::new(device);
    cmds.upload(&first, &mine)?;
    cmds.upload(&second, &theirs)?;
    let push = [count as u32, 1];
    cmds.dispatch(mix, [mix.groups_for(count as u64), 1, 1], &[(&first).into()], bytemuck::bytes_of(&push))?;
    let rb_first = cmds.read_back(&first)?;
    let rb_second = cmds.read_back(&second)?;
    cmds.submit_and_wait()?;
    let own = rb_first.into_vec()?.iter().zip(&mine).all(|(&got, &x)| got == mix_cpu(x, 1));
    let changed = rb_second.into_vec()?.iter().zip(&theirs).filter(|(a, b)| a != b).count();
    Ok((own, changed))
}

fn main() -> Result<(), Error> {
    let mut failed = false;
    for robust in [true, false] {
        let device = Device::builder().robust_buffer_access(robust).build()?;
        let mix = Kernel::new(&device, &kernels::MIX)?;
        println!("device: {} robust access: {:?}", device.info().name, device.robust_access());
        for kind in [MemoryKind::Device, MemoryKind::Upload] {
            // 64 u32 fill a 256-byte chunk exactly; 1000 u32 leave a gap before the neighbour.
            for n in [64usize, 1000, 70_000] {
                // Unprotected, stay inside the pooled 16 MiB block: past it lies other memory.
                let counts = if robust { vec![n + 1, 2 * n, (100 * n).min(64 * 65535)] } else { vec![n + 1, 2 * n] };
                for count in counts {
                    let (own, changed) = match check(&device, &mix, kind, n, count) {
                        Ok(r) => r,
                        Err(e) => {
                            failed |= robust;
                            println!(
                                "{} robust={:?} kind={kind:?} len={n} n_pushed={count}: error {e}",
                                if robust { "FAIL" } else { "INFO" },
                                device.robust_access()
                            );
                            continue;
                        }
                    };
                    let ok = own && changed == 0;
                    let verdict = match (robust, ok) {
                        (true, true) => "PASS",
                        (true, false) => {
                            failed = true;
                            "FAIL"
                        }
                        (false, _) => "INFO",
                    };
                    println!(
                        "{verdict} robust={:?} kind={kind:?} len={n} n_pushed={count}: own buffer {}, neighbour {}",
                        device.robust_access(),
                        if own { "right" } else { "WRONG" },
                        if changed == 0 { "intact".to_string() } else { format!("{changed} of {n} words changed") }
                    );
                }
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
    Ok(())
}
