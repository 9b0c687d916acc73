//! The `kernel` rows: the data already on the GPU, GPU timestamps around the dispatches.

use crate::{fail, Inputs, Messages, Row, IV, KEY128, KEY256};
use vkasync::crypto::{
    ctr_add, pack_le_words, unpack_le_words, AesKey, AesKeyBuffer, Crypto, DeviceMessages, MessageBatch,
};
use vkasync::{Buffer, CommandList, Device, Error, MemoryKind, Recorder, Timestamps};

/// What a kernel case runs.
enum Job {
    /// AES-CTR under key 0 (AES-128) or 1 (AES-256) over every data buffer.
    Aes(usize),
    /// SHA-256 of message set `i`.
    Sha(usize),
}

struct KernelCase {
    row: Row,
    crypto: Crypto,
    job: Job,
}

/// The device-side data of the kernel cases.
struct OnDevice {
    /// AES data split into buffers one dispatch can bind: (buffer, bytes, first block).
    aes: Vec<(Buffer<u32>, usize, u64)>,
    keys: [AesKeyBuffer; 2],
    /// Per message set: its batches (each within one binding) and their digest buffers.
    sha: Vec<Vec<(DeviceMessages, Buffer<[u32; 8]>)>>,
}

fn record(case: &KernelCase, dev: &OnDevice, cmds: &mut CommandList) -> Result<(), Error> {
    match case.job {
        Job::Aes(k) => {
            for (buf, len, first) in &dev.aes {
                case.crypto.record_aes_ctr(cmds, &dev.keys[k], &ctr_add(&IV, *first), buf, *len)?;
            }
        }
        Job::Sha(i) => {
            for (batch, digests) in &dev.sha[i] {
                case.crypto.record_sha256(cmds, &batch.bytes, &batch.index, digests)?;
            }
        }
    }
    Ok(())
}

/// Runs a case once on fresh inputs and checks its output.
fn verify(case: &KernelCase, dev: &OnDevice, plain: &[u8], cipher: &[Vec<u8>; 2], digests: &[Vec<[u8; 32]>]) {
    let run = || -> Result<bool, Error> {
        let mut cmds = CommandList::new(case.crypto.device());
        match case.job {
            Job::Aes(k) => {
                for (buf, len, first) in &dev.aes {
                    let start = (*first * 16) as usize;
                    cmds.upload(buf, &pack_le_words(&plain[start..start + len], 16))?;
                }
                record(case, dev, &mut cmds)?;
                let mut rbs = Vec::new();
                for (buf, len, first) in &dev.aes {
                    rbs.push((cmds.read_back(buf)?, (*first * 16) as usize, *len));
                }
                cmds.submit_and_wait()?;
                for (rb, start, len) in rbs {
                    if unpack_le_words(&rb.into_vec()?, len) != cipher[k][start..start + len] {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Job::Sha(i) => {
                for (_, d) in &dev.sha[i] {
                    cmds.upload(d, &vec![[0u32; 8]; d.len()])?;
                }
                record(case, dev, &mut cmds)?;
                let rbs: Result<Vec<_>, Error> = dev.sha[i].iter().map(|(_, d)| cmds.read_back(d)).collect();
                let rbs = rbs?;
                cmds.submit_and_wait()?;
                let mut got = Vec::new();
                for rb in rbs {
                    got.extend(rb.into_vec()?.iter().map(|d| vkasync::crypto::digest_bytes(d)));
                }
                Ok(got == digests[i])
            }
        }
    };
    match run() {
        Ok(true) => {}
        Ok(false) => fail(&format!("{}: the GPU result differs from RustCrypto", case.row.what)),
        Err(e) => fail(&format!("{}: {e}", case.row.what)),
    }
}

/// Splits `n` messages of `size` bytes into batches whose bytes and digests each fit in `limit`.
fn batch_ranges(n: usize, size: usize, limit: usize) -> Vec<std::ops::Range<usize>> {
    let per = (limit / size.max(32)).max(1);
    (0..n.div_ceil(per)).map(|k| k * per..((k + 1) * per).min(n)).collect()
}

/// The inputs on the device: the AES data in buffers of at most `limit` bytes, both AES keys,
/// and every message set in batches within `limit`.
fn upload(device: &Device, sets: &[Messages], aes_bytes: usize, limit: usize) -> Result<OnDevice, Error> {
    let mut cmds = CommandList::new(device);
    let mut aes = Vec::new();
    let mut start = 0;
    while start < aes_bytes {
        let len = limit.min(aes_bytes - start);
        aes.push((Buffer::<u32>::new(device, len.div_ceil(16) * 4, MemoryKind::Device)?, len, (start / 16) as u64));
        start += len;
    }
    let keys = [AesKey::new(&KEY128)?.upload(&mut cmds)?, AesKey::new(&KEY256)?.upload(&mut cmds)?];
    let mut sha = Vec::new();
    for set in sets {
        let list = set.list();
        let mut batches = Vec::new();
        for r in batch_ranges(list.len(), set.size, limit) {
            let on_device = MessageBatch::new(&list[r.clone()])?.upload(&mut cmds)?;
            batches.push((on_device, Buffer::<[u32; 8]>::new(device, r.len(), MemoryKind::Device)?));
        }
        sha.push(batches);
    }
    cmds.submit_and_wait()?;
    Ok(OnDevice { aes, keys, sha })
}

/// Every kernel case, checked once, then timed: `warmup` untimed and `reps` timed rounds, the
/// order rotating every round.
pub fn rows(
    device: &Device,
    crypto: &Crypto,
    inp: &Inputs,
    limit: usize,
    reps: usize,
    warmup: usize,
) -> Result<Vec<Row>, Error> {
    let (aes_bytes, sets) = (inp.plain.len(), &inp.sets);
    let dev = upload(device, sets, aes_bytes, limit)?;
    let mut cases = vec![
        KernelCase { row: Row::new("aes-128-ctr", "kernel", aes_bytes), crypto: crypto.clone(), job: Job::Aes(0) },
        KernelCase { row: Row::new("aes-256-ctr", "kernel", aes_bytes), crypto: crypto.clone(), job: Job::Aes(1) },
    ];
    for (i, set) in sets.iter().enumerate() {
        cases.push(KernelCase {
            row: Row::new(set.name, "kernel", set.bytes.len()),
            crypto: crypto.clone(),
            job: Job::Sha(i),
        });
    }
    for case in &cases {
        verify(case, &dev, &inp.plain, &inp.cipher, &inp.digests);
    }
    let ts = Timestamps::new(device, 2)?;
    for round in 0..warmup + reps {
        let n = cases.len();
        for j in 0..n {
            let case = &mut cases[(j + round) % n];
            let mut cmds = CommandList::new(device);
            cmds.write_timestamp(&ts, 0)?;
            record(case, &dev, &mut cmds)?;
            cmds.write_timestamp(&ts, 1)?;
            cmds.submit_and_wait()?;
            let ns = ts.elapsed_ns(0, 1)?;
            ts.reset();
            if round >= warmup {
                case.row.gbps.push(case.row.bytes as f64 / ns);
            }
        }
    }
    drop(dev);
    Ok(cases.into_iter().map(|c| c.row).collect())
}
