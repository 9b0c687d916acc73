//! How fast the GPU moves bytes between host and device memory, by the queues that carry them:
//! the ceiling under the copies of the crypto fronts' staged records.
//!
//! Written by hand with ash, apart from the library (nothing of vkasync on the measured path):
//! one logical device with one queue of the first family that computes, one of the first
//! compute-only family, and up to four queues of every transfer-only family (on NVIDIA GPUs the
//! copy engines; a family that also decodes video counts as transfer-only). `--total` bytes
//! (default 160 MiB: about 10,000 records of 16 KiB) move in copies of `--chunk` bytes (default
//! 16 MiB, vkasync's split size), one command buffer per chunk. A case deals the chunks
//! round-robin over its queues, submits each queue's command
//! buffers at once (one `vkQueueSubmit` per queue), and times from the first submit to the last
//! fence on the host clock: the median of `--reps` after `--warmup` untimed repetitions.
//!
//! Cases, for each set of queues and each kind of host memory:
//! - `up`: host to device; `down`: device to host;
//! - `both`: at once, `--total` up on the set's even queues and `--total` down on its odd ones
//!   (sets of two queues or more); its GB/s counts the bytes of both directions.
//!
//! Host memory: `cached` (`HOST_VISIBLE | HOST_COHERENT | HOST_CACHED`, what vkasync stages
//! records through on a discrete GPU) and `uncached` (`HOST_VISIBLE | HOST_COHERENT` without
//! `HOST_CACHED` or `DEVICE_LOCAL`, write-combined on most drivers). Every case's bytes are
//! checked after its timed repetitions: an `up` case's source is read back through the compute
//! queue, a `down` case's destination against what the device buffer holds.
//!
//! `cargo run --release --example bench_pcie -- [--total MIB] [--chunk MIB] [--reps R]
//! [--warmup W] [--out DIR]` prints a table and writes `DIR/bench_pcie.csv`
//! (`device,memory,direction,queues,bytes,median_gbps,min_gbps,max_gbps`). `VKASYNC_DEVICE`
//! (a substring of the device's name) picks the device, as for the library.

#[path = "support"]
mod support {
    #[allow(dead_code)] // `cores`
    pub mod args;
}

use ash::vk;
use std::time::Instant;
use support::args::{arg, num};

const MIB: u64 = 1 << 20;

/// A queue of the benchmark's device, with the family it belongs to.
#[derive(Clone, Copy)]
struct Q {
    queue: vk::Queue,
    family: u32,
    /// Short name: family index, queue index (`f1.0`).
    index: u32,
}

/// A buffer bound to its own memory, mapped when host-visible.
struct Buf {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    map: Option<*mut u8>,
    size: u64,
}

struct Rig {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    name: String,
    types: vk::PhysicalDeviceMemoryProperties,
    /// The queue that computes (used for the checks too), the compute-only family's first queue,
    /// and the transfer-only families' queues, family by family.
    compute: Q,
    compute_only: Option<Q>,
    transfer: Vec<Q>,
    pools: Vec<(u32, vk::CommandPool)>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let total = num::<u64>(&args, "--total", 160) * MIB;
    let chunk = num::<u64>(&args, "--chunk", 16) * MIB;
    let reps = num::<usize>(&args, "--reps", 9).max(1);
    let warmup = num::<usize>(&args, "--warmup", 2);
    let out = arg(&args, "--out");
    if chunk == 0 || total == 0 || total % chunk != 0 {
        eprintln!("--total must be a positive multiple of --chunk (MiB)");
        std::process::exit(2);
    }
    let rig = match Rig::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("no Vulkan device: {e}");
            std::process::exit(1);
        }
    };
    println!("device: {}", rig.name);
    println!("{} MiB in copies of {} MiB; median of {reps} after {warmup} untimed", total / MIB, chunk / MIB);
    let mut rows = Vec::new();
    let dev = [rig.buffer(total, None), rig.buffer(total, None)];
    let mut failed = false;
    let local = vk::MemoryPropertyFlags::DEVICE_LOCAL;
    let mut kinds = vec![
        ("cached", vk::MemoryPropertyFlags::HOST_CACHED, local),
        ("uncached", vk::MemoryPropertyFlags::empty(), vk::MemoryPropertyFlags::HOST_CACHED | local),
    ];
    let visible = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    if kinds.iter().all(|&(_, want, avoid)| rig.memory_type(visible | want, avoid).is_none()) {
        // Unified memory (lavapipe, integrated GPUs): every host-visible type is device-local.
        kinds = vec![("unified", vk::MemoryPropertyFlags::empty(), vk::MemoryPropertyFlags::empty())];
    }
    for (kind, want, avoid) in kinds {
        let Some(ty) = rig.memory_type(visible | want, avoid) else {
            println!("{kind}: no such memory type on this device, skipped");
            continue;
        };
        let mut host = [rig.buffer(total, Some(ty)), rig.buffer(total, Some(ty))];
        for (set, queues) in rig.sets() {
            for dir in ["up", "down", "both"] {
                if dir == "both" && queues.len() < 2 {
                    continue;
                }
                let seed = rows.len() as u32 + 1;
                let times = rig.time_case(dir, &queues, &mut host, &dev, chunk, warmup, reps, seed);
                if let Err(e) = rig.check(dir, &mut host, &dev, seed) {
                    eprintln!("{kind} {dir} {set}: {e}");
                    failed = true;
                }
                let bytes = if dir == "both" { 2 * total } else { total };
                let gbps: Vec<f64> = times.iter().map(|t| bytes as f64 / t / 1e9).collect();
                let (med, min, max) = stats(&gbps);
                println!("{kind:>8} {dir:>4} {set:<14} {med:7.2} GB/s  ({min:.2}-{max:.2})");
                rows.push(format!("\"{}\",{kind},{dir},{set},{bytes},{med:.3},{min:.3},{max:.3}", rig.name));
            }
        }
        for b in host {
            rig.free(b);
        }
    }
    for b in dev {
        rig.free(b);
    }
    if let Some(dir) = out {
        let _ = std::fs::create_dir_all(&dir);
        let csv = format!("device,memory,direction,queues,bytes,median_gbps,min_gbps,max_gbps\n{}\n", rows.join("\n"));
        if let Err(e) = std::fs::write(format!("{dir}/bench_pcie.csv"), csv) {
            eprintln!("could not write {dir}/bench_pcie.csv: {e}");
        }
    }
    if failed {
        std::process::exit(1);
    }
}

fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    (s[s.len() / 2], s[0], s[s.len() - 1])
}

/// The byte at `i` of the pattern `seed` (a multiplicative hash, so that no two cases' bytes
/// agree by accident).
fn pattern(seed: u32, i: usize) -> u8 {
    ((i as u32 ^ seed.wrapping_mul(0x9e37_79b9)).wrapping_mul(2_654_435_761) >> 24) as u8
}

impl Rig {
    fn new() -> Result<Rig, String> {
        // SAFETY: loads the system's Vulkan loader; nothing else of it is used before it returns.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| e.to_string())?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
        // SAFETY: a plain instance with no layers or extensions.
        let instance =
            unsafe { entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None) }
                .map_err(|e| e.to_string())?;
        // SAFETY: the instance is live; the handles it returns are valid while it is.
        let physicals = unsafe { instance.enumerate_physical_devices() }.map_err(|e| e.to_string())?;
        let name_of = |p: vk::PhysicalDevice| {
            // SAFETY: `p` came from this instance.
            let props = unsafe { instance.get_physical_device_properties(p) };
            let name = props.device_name_as_c_str().unwrap_or(c"?").to_string_lossy().into_owned();
            (name, props.device_type)
        };
        let wanted = std::env::var("VKASYNC_DEVICE").ok();
        let physical = physicals
            .iter()
            .copied()
            .filter(|&p| wanted.as_deref().is_none_or(|w| name_of(p).0.contains(w)))
            .max_by_key(|&p| name_of(p).1 == vk::PhysicalDeviceType::DISCRETE_GPU)
            .ok_or("no Vulkan device")?;
        let name = name_of(physical).0;
        // SAFETY: as above.
        let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
        let has = |f: &vk::QueueFamilyProperties, b: vk::QueueFlags| f.queue_flags.contains(b);
        let compute = families.iter().position(|f| has(f, vk::QueueFlags::COMPUTE)).ok_or("no compute queue")?;
        let compute_only = families
            .iter()
            .position(|f| has(f, vk::QueueFlags::COMPUTE) && !has(f, vk::QueueFlags::GRAPHICS))
            .filter(|&i| i != compute);
        let transfer: Vec<(usize, u32)> = families
            .iter()
            .enumerate()
            .filter(|(_, f)| has(f, vk::QueueFlags::TRANSFER) && !has(f, vk::QueueFlags::COMPUTE))
            .map(|(i, f)| (i, f.queue_count.min(4)))
            .collect();
        let prio = [1.0f32; 4];
        let mut infos =
            vec![vk::DeviceQueueCreateInfo::default().queue_family_index(compute as u32).queue_priorities(&prio[..1])];
        if let Some(c) = compute_only {
            infos.push(vk::DeviceQueueCreateInfo::default().queue_family_index(c as u32).queue_priorities(&prio[..1]));
        }
        for &(f, n) in &transfer {
            infos.push(
                vk::DeviceQueueCreateInfo::default().queue_family_index(f as u32).queue_priorities(&prio[..n as usize]),
            );
        }
        // SAFETY: the queue families and counts come from this physical device's properties.
        let device = unsafe {
            instance.create_device(physical, &vk::DeviceCreateInfo::default().queue_create_infos(&infos), None)
        }
        .map_err(|e| e.to_string())?;
        // SAFETY: every (family, index) asked for was created with the device.
        let q = |family: usize, index: u32| Q {
            queue: unsafe { device.get_device_queue(family as u32, index) },
            family: family as u32,
            index,
        };
        let compute_q = q(compute, 0);
        let compute_only = compute_only.map(|c| q(c, 0));
        let transfer_q =
            transfer.iter().flat_map(|&(f, n)| (0..n).map(move |i| (f, i))).map(|(f, i)| q(f, i)).collect();
        let mut pools = Vec::new();
        for f in infos.iter().map(|i| i.queue_family_index) {
            // SAFETY: plain object creation on a live device.
            let pool = unsafe {
                device.create_command_pool(&vk::CommandPoolCreateInfo::default().queue_family_index(f), None)
            }
            .map_err(|e| e.to_string())?;
            pools.push((f, pool));
        }
        // SAFETY: as above.
        let types = unsafe { instance.get_physical_device_memory_properties(physical) };
        Ok(Rig {
            _entry: entry,
            instance,
            device,
            name,
            types,
            compute: compute_q,
            compute_only,
            transfer: transfer_q,
            pools,
        })
    }

    /// The sets of queues the cases use, with their names.
    fn sets(&self) -> Vec<(String, Vec<Q>)> {
        let tag = |q: &Q| format!("f{}.{}", q.family, q.index);
        let mut sets = vec![(format!("compute:{}", tag(&self.compute)), vec![self.compute])];
        if let Some(c) = self.compute_only {
            sets.push((format!("compute:{}", tag(&c)), vec![c]));
        }
        let mut families: Vec<u32> = self.transfer.iter().map(|q| q.family).collect();
        families.dedup();
        let of = |f: u32, n: usize| self.transfer.iter().filter(|q| q.family == f).take(n).copied().collect::<Vec<_>>();
        for &f in &families {
            for n in [1, 2, 4] {
                let qs = of(f, n);
                if qs.len() == n {
                    sets.push((format!("f{f}x{n}"), qs));
                }
            }
        }
        if families.len() >= 2 {
            let (a, b) = (families[0], families[1]);
            for n in [1, 2] {
                // Alternate the families, so that `both` goes up on one and down on the other.
                let qs: Vec<Q> = of(a, n).into_iter().zip(of(b, n)).flat_map(|(x, y)| [x, y]).collect();
                if qs.len() == 2 * n {
                    sets.push((format!("f{a}x{n}+f{b}x{n}"), qs));
                }
            }
        }
        sets
    }

    fn memory_type(&self, want: vk::MemoryPropertyFlags, avoid: vk::MemoryPropertyFlags) -> Option<u32> {
        let types = &self.types.memory_types[..self.types.memory_type_count as usize];
        types
            .iter()
            .position(|t| t.property_flags.contains(want) && !t.property_flags.intersects(avoid))
            .map(|i| i as u32)
    }

    /// A buffer of `size` bytes in memory type `ty` (mapped), or in device-local memory.
    fn buffer(&self, size: u64, ty: Option<u32>) -> Buf {
        let d = &self.device;
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: plain object creation on a live device.
        let buffer = unsafe { d.create_buffer(&info, None) }.expect("buffer");
        // SAFETY: the buffer is live.
        let req = unsafe { d.get_buffer_memory_requirements(buffer) };
        let ty = ty.filter(|t| req.memory_type_bits & (1 << t) != 0).unwrap_or_else(|| {
            self.memory_type(vk::MemoryPropertyFlags::DEVICE_LOCAL, vk::MemoryPropertyFlags::HOST_VISIBLE)
                .or_else(|| self.memory_type(vk::MemoryPropertyFlags::DEVICE_LOCAL, vk::MemoryPropertyFlags::empty()))
                .expect("device-local memory")
        });
        let alloc = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(ty);
        // SAFETY: the size and type come from the buffer's requirements and the device's types.
        let memory = unsafe { d.allocate_memory(&alloc, None) }.expect("memory");
        // SAFETY: fresh memory of a type the buffer accepts, bound once at offset 0.
        unsafe { d.bind_buffer_memory(buffer, memory, 0) }.expect("bind");
        let host = self.types.memory_types[ty as usize].property_flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE);
        // SAFETY: host-visible memory, mapped once, whole, until it is freed.
        let map = host.then(|| {
            unsafe { d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }.expect("map") as *mut u8
        });
        Buf { buffer, memory, map, size }
    }

    fn free(&self, b: Buf) {
        // SAFETY: every submission that used the buffer was waited for (`run` waits on its
        // fences before it returns).
        unsafe {
            self.device.destroy_buffer(b.buffer, None);
            self.device.free_memory(b.memory, None);
        }
    }

    fn bytes(b: &mut Buf) -> &mut [u8] {
        // SAFETY: the mapping covers the whole buffer and lives until `free`; no GPU work runs on
        // the buffer while the host holds this slice (every caller uses it between runs).
        unsafe { std::slice::from_raw_parts_mut(b.map.expect("host buffer"), b.size as usize) }
    }

    /// Records one command buffer per `(queue, src, dst, range)` copy and runs them: one submit
    /// per queue, all at once; returns the seconds from the first submit to the last fence.
    fn run(&self, copies: &[(Q, vk::Buffer, vk::Buffer, u64, u64)], reps: usize) -> Vec<f64> {
        let d = &self.device;
        let mut cmds = Vec::with_capacity(copies.len());
        for &(q, src, dst, offset, size) in copies {
            let pool = self.pools.iter().find(|(f, _)| *f == q.family).expect("pool").1;
            let info = vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(1);
            // SAFETY: the pool is live and used by this thread only.
            let cmd = unsafe { d.allocate_command_buffers(&info) }.expect("command buffer")[0];
            let region = vk::BufferCopy { src_offset: offset, dst_offset: offset, size };
            // SAFETY: both buffers are live and at least `offset + size` long; the command
            // buffer is fresh.
            unsafe {
                d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default()).expect("begin");
                d.cmd_copy_buffer(cmd, src, dst, &[region]);
                d.end_command_buffer(cmd).expect("end");
            }
            cmds.push((q, cmd));
        }
        let mut queues: Vec<Q> = Vec::new();
        for (q, _) in &cmds {
            if !queues.iter().any(|x| x.queue == q.queue) {
                queues.push(*q);
            }
        }
        // SAFETY: plain object creation on a live device.
        let fences: Vec<vk::Fence> = queues
            .iter()
            .map(|_| unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) }.expect("fence"))
            .collect();
        // Each queue's command buffers, gathered once for every repetition.
        let per: Vec<Vec<vk::CommandBuffer>> =
            queues.iter().map(|q| cmds.iter().filter(|(x, _)| x.queue == q.queue).map(|(_, c)| *c).collect()).collect();
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            for ((q, f), c) in queues.iter().zip(&fences).zip(&per) {
                // SAFETY: the command buffers are recorded and not pending (the previous
                // repetition's fences were waited for); the fence is unsignalled.
                unsafe { d.queue_submit(q.queue, &[vk::SubmitInfo::default().command_buffers(c)], *f) }
                    .expect("submit");
            }
            // SAFETY: the fences are live and were submitted just above.
            unsafe { d.wait_for_fences(&fences, true, u64::MAX) }.expect("wait");
            times.push(t.elapsed().as_secs_f64());
            // SAFETY: the fences are signalled and no longer in use.
            unsafe { d.reset_fences(&fences) }.expect("reset");
        }
        // SAFETY: every submission of these objects completed (waited for above).
        unsafe {
            for f in fences {
                d.destroy_fence(f, None);
            }
            for (q, c) in cmds {
                let pool = self.pools.iter().find(|(f, _)| *f == q.family).expect("pool").1;
                d.free_command_buffers(pool, &[c]);
            }
        }
        times
    }

    /// Times one case; `host[0]`/`dev[0]` carry the upward copies, `dev[1]`/`host[1]` the
    /// downward ones. Before it, the sources hold pattern `seed`.
    #[allow(clippy::too_many_arguments)]
    fn time_case(
        &self,
        dir: &str,
        queues: &[Q],
        host: &mut [Buf; 2],
        dev: &[Buf; 2],
        chunk: u64,
        warmup: usize,
        reps: usize,
        seed: u32,
    ) -> Vec<f64> {
        for (i, b) in Self::bytes(&mut host[0]).iter_mut().enumerate() {
            *b = pattern(seed, i);
        }
        if dir != "up" {
            // The device source of the downward copies: the pattern, through the compute queue.
            self.run(&[(self.compute, host[0].buffer, dev[1].buffer, 0, dev[1].size)], 1);
            Self::bytes(&mut host[1]).fill(0);
        }
        let n = host[0].size / chunk;
        let mut copies = Vec::new();
        for i in 0..n {
            let range = (i * chunk, chunk);
            match dir {
                "up" => {
                    copies.push((queues[i as usize % queues.len()], host[0].buffer, dev[0].buffer, range.0, range.1))
                }
                "down" => {
                    copies.push((queues[i as usize % queues.len()], dev[1].buffer, host[1].buffer, range.0, range.1))
                }
                _ => {
                    let ups: Vec<Q> = queues.iter().step_by(2).copied().collect();
                    let downs: Vec<Q> = queues.iter().skip(1).step_by(2).copied().collect();
                    copies.push((ups[i as usize % ups.len()], host[0].buffer, dev[0].buffer, range.0, range.1));
                    copies.push((downs[i as usize % downs.len()], dev[1].buffer, host[1].buffer, range.0, range.1));
                }
            }
        }
        self.run(&copies, warmup);
        self.run(&copies, reps)
    }

    /// Checks what the case moved: a downward destination, then the device's copy of an
    /// upward source (read back through the compute queue).
    fn check(&self, dir: &str, host: &mut [Buf; 2], dev: &[Buf; 2], seed: u32) -> Result<(), String> {
        let first_bad = |b: &[u8]| b.iter().enumerate().position(|(i, &x)| x != pattern(seed, i));
        if dir != "up" {
            if let Some(i) = first_bad(Self::bytes(&mut host[1])) {
                return Err(format!("downward copy wrong at byte {i}"));
            }
        }
        if dir != "down" {
            Self::bytes(&mut host[1]).fill(0);
            self.run(&[(self.compute, dev[0].buffer, host[1].buffer, 0, dev[0].size)], 1);
            if let Some(i) = first_bad(Self::bytes(&mut host[1])) {
                return Err(format!("upward copy wrong at byte {i}"));
            }
        }
        Ok(())
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // SAFETY: every submission was waited for; nothing of the device is used after this.
        unsafe {
            let _ = self.device.device_wait_idle();
            for (_, p) in self.pools.drain(..) {
                self.device.destroy_command_pool(p, None);
            }
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}
