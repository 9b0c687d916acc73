//! The modes' runs: RustCrypto on host threads (one worker per thread over its contiguous share
//! of the connections, each connection's keys expanded once, every record sealed in place into
//! buffers made before the clock starts: no allocation per record), the blocking calls, the
//! executor (each record sealed on its own or coalesced), and tokio through a queue or a queue
//! set. Every run also measures the process's host CPU time over its timed interval (Linux).

use crate::conns::{Conn, SealKeys, Sealed};
use crate::support::profile;
use crate::support::queues::{pipeline_depth, queue_builder};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use vkasync::crypto::{
    pack_le_words, unpack_le_words, AesKey, Crypto, HmacKey, MessageIndex, RecordKeys, StagedRecord,
};
use vkasync::{Buffer, Ctx, Device, Error, Executor, FlushPolicy, MemoryKind, PerDevice, QueueSet, Stats};

/// One run of a mode: every connection's sealed records, each record's latency, and the stats
/// (submits, dispatches, host waits) where a GPU front ran it.
pub struct Run {
    pub out: Vec<Vec<Sealed>>,
    pub latencies: Vec<Duration>,
    pub wall: Duration,
    /// The process's host CPU time (user and system, every thread) over the same interval as
    /// `wall`; zero where it is not measured (off Linux, see [`CPU_TIME_MEASURED`]).
    pub cpu: Duration,
    pub submits: u64,
    pub dispatches: u64,
    pub host_waits: u64,
    pub stats: Option<Stats>,
}

/// One connection task's result: its sealed buffers, their tags, each record's latency.
type TaskResult = (Bufs, Vec<[u8; 32]>, Vec<Duration>);

/// A connection's record buffers, made before the clock starts and holding the plaintexts:
/// host memory, which `Crypto::seal_in_place` copies into staging and back, or records in
/// staging memory (`--staged`: `Crypto::seal_staged`, no host copy).
pub enum Bufs {
    Plain(Vec<Vec<u8>>),
    Staged(Vec<StagedRecord>),
}

impl Bufs {
    pub fn of(crypto: &Crypto, c: &Conn, staged: bool) -> Result<Bufs, Error> {
        if !staged {
            return Ok(Bufs::Plain(c.records.clone()));
        }
        let records = c.records.iter().map(|r| {
            let mut s = crypto.staged_record(r.len())?;
            s.bytes_mut()?.copy_from_slice(r);
            Ok(s)
        });
        Ok(Bufs::Staged(records.collect::<Result<_, Error>>()?))
    }

    /// The sealed records, read after the clock stops.
    fn into_plain(self) -> Result<Vec<Vec<u8>>, Error> {
        match self {
            Bufs::Plain(v) => Ok(v),
            Bufs::Staged(v) => v.into_iter().map(|mut s| Ok(s.bytes()?.to_vec())).collect(),
        }
    }
}

impl Run {
    /// A run of a GPU front from its tasks' results and its stats.
    fn of_tasks(results: Vec<TaskResult>, wall: Duration, cpu: Duration, s: Stats) -> Result<Run, Error> {
        let mut out = Vec::with_capacity(results.len());
        let mut latencies = Vec::new();
        for (bufs, tags, lat) in results {
            out.push(bufs.into_plain()?.into_iter().zip(tags).collect());
            latencies.extend(lat);
        }
        Ok(Run {
            out,
            latencies,
            wall,
            cpu,
            submits: s.submits,
            dispatches: s.dispatches,
            host_waits: s.host_waits,
            stats: Some(s),
        })
    }
}

/// Whether [`process_cpu_time`] measures anything on this platform.
pub const CPU_TIME_MEASURED: bool = cfg!(target_os = "linux");

/// The host CPU time (user and system) the whole process has used so far: every thread, the
/// runtimes' workers and drivers included.
#[cfg(target_os = "linux")]
fn process_cpu_time() -> Duration {
    // SAFETY: `rusage` is a struct of integers, for which all-zero bytes are a valid value, and
    // `getrusage` only writes the `rusage` it is given through a valid, exclusive pointer.
    let (rc, u) = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        (libc::getrusage(libc::RUSAGE_SELF, &mut u), u)
    };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(u.ru_utime) + time(u.ru_stime)
}

/// Not measured off Linux (see [`CPU_TIME_MEASURED`]).
#[cfg(not(target_os = "linux"))]
fn process_cpu_time() -> Duration {
    Duration::ZERO
}

/// A timed interval: wall time and the process's host CPU time. A profiler run as
/// `support::profile` describes samples only inside such intervals.
struct Clock {
    start: Instant,
    cpu: Duration,
}

impl Clock {
    fn start() -> Clock {
        profile::timed();
        Clock { start: Instant::now(), cpu: process_cpu_time() }
    }

    /// The interval's wall and host CPU time.
    fn stop(self) -> (Duration, Duration) {
        let out = (self.start.elapsed(), process_cpu_time() - self.cpu);
        profile::untimed();
        out
    }
}

/// RustCrypto on `threads` host threads (`cpu-1`, `cpu-all`): one worker per thread over its
/// contiguous share of the connections, sealing each record in place. As in the GPU fronts, the
/// output buffers (copies of the plaintexts), the tags and the latencies are made before the
/// clock starts, so nothing is allocated per record. Each connection's keys are expanded once,
/// inside the timed region, when its worker reaches it (as a server does at the handshake), and
/// every record of the connection is sealed with them ([`SealKeys`]).
pub fn run_cpu(conns: &[Conn], threads: usize) -> Run {
    let mut bufs: Vec<Vec<Vec<u8>>> = conns.iter().map(|c| c.records.clone()).collect();
    let mut tags: Vec<Vec<[u8; 32]>> = conns.iter().map(|c| vec![[0; 32]; c.records.len()]).collect();
    let mut lats: Vec<Vec<Duration>> = conns.iter().map(|c| vec![Duration::ZERO; c.records.len()]).collect();
    let per = conns.len().div_ceil(threads.max(1)).max(1);
    let clock = Clock::start();
    std::thread::scope(|s| {
        let shares = conns.chunks(per).zip(bufs.chunks_mut(per)).zip(tags.chunks_mut(per)).zip(lats.chunks_mut(per));
        for (((conns, bufs), tags), lats) in shares {
            s.spawn(move || {
                for (((c, bufs), tags), lats) in conns.iter().zip(bufs).zip(tags).zip(lats) {
                    let keys = SealKeys::new(c);
                    for (seq, ((buf, tag), lat)) in
                        bufs.iter_mut().zip(tags.iter_mut()).zip(lats.iter_mut()).enumerate()
                    {
                        let t = Instant::now();
                        *tag = keys.seal(c.nonce(seq), buf);
                        *lat = t.elapsed();
                    }
                }
            });
        }
    });
    let (wall, cpu) = clock.stop();
    let out = bufs.into_iter().zip(tags).map(|(bufs, tags)| bufs.into_iter().zip(tags).collect()).collect();
    Run { out, latencies: lats.concat(), wall, cpu, submits: 0, dispatches: 0, host_waits: 0, stats: None }
}

pub fn run_blocking(device: &Device, crypto: &Crypto, conns: &[Conn]) -> Result<Run, Error> {
    let before = device.last_submitted();
    let clock = Clock::start();
    let mut out = Vec::new();
    let mut latencies = Vec::new();
    for c in conns {
        let mut sealed = Vec::new();
        for (seq, p) in c.records.iter().enumerate() {
            let t = Instant::now();
            let nonce = c.nonce(seq);
            let ct = crypto.aes_ctr_blocking(&c.aes_key, &nonce, p)?;
            let mut msg = nonce.to_vec();
            msg.extend_from_slice(&ct);
            let tag = crypto.hmac_sha256_many_blocking(&c.mac_key, &[msg])?[0];
            latencies.push(t.elapsed());
            sealed.push((ct, tag));
        }
        out.push(sealed);
    }
    let (wall, cpu) = clock.stop();
    let submits = device.last_submitted() - before;
    Ok(Run { out, latencies, wall, cpu, submits, dispatches: submits, host_waits: submits, stats: None })
}

/// One record sealed with the task's own device buffers and commands (no coalesced work).
async fn seal_waits_only(
    crypto: &Crypto,
    ctx: &vkasync::Ctx,
    key: &AesKey,
    mac: &HmacKey,
    nonce: [u8; 16],
    plain: &[u8],
) -> Result<Sealed, Error> {
    let mut rec = ctx.clone();
    let device = ctx.device();
    let key = key.upload(&mut rec)?;
    let words = pack_le_words(plain, 16);
    let data = Buffer::<u32>::new(device, words.len().max(4), MemoryKind::Device)?;
    rec.upload(&data, &words)?;
    crypto.record_aes_ctr(&mut rec, &key, &nonce, &data, plain.len())?;
    // nonce || ciphertext for the MAC: the nonce's 4 words, then the ciphertext copied on the GPU.
    let msg = Buffer::<u32>::new(device, 4 + data.len(), MemoryKind::Device)?;
    rec.upload(&msg, &pack_le_words(&nonce, 16))?;
    rec.copy_region(&data, 0, &msg, 4, data.len())?;
    let whole = 0..16 + plain.len();
    let index = MessageIndex::upload(&mut rec, std::slice::from_ref(&whole))?;
    let macs = Buffer::<[u32; 8]>::new(device, 1, MemoryKind::Device)?;
    crypto.record_hmac_sha256(&mut rec, mac, &msg, &index, &macs)?;
    let ct = rec.read_back(&data)?;
    let tag = rec.read_back(&macs)?;
    ctx.synchronize().await?;
    let ct = unpack_le_words(&ct.into_vec()?, plain.len());
    Ok((ct, vkasync::crypto::digest_bytes(&tag.into_vec()?[0])))
}

/// An executor on `device` with `flush`; `VKASYNC_PIPELINE_DEPTH`, when set, as for the tokio
/// front (A/B runs of one binary).
fn executor(device: &Device, flush: FlushPolicy) -> Result<Executor, Error> {
    let exec = Executor::builder(device).flush_policy(flush);
    match pipeline_depth() {
        Some(d) => exec.pipeline_depth(d),
        None => exec,
    }
    .build()
}

pub fn run_executor(
    crypto: &Crypto,
    conns: &Arc<Vec<Conn>>,
    coalesced: bool,
    flush: FlushPolicy,
    staged: bool,
) -> Result<Run, Error> {
    let exec = executor(crypto.device(), flush)?;
    // Outputs start as copies of the plaintexts (made before the clock starts): sealing in place
    // needs no allocation on the timed path.
    let bufs = conns.iter().map(|c| Bufs::of(crypto, c, staged)).collect::<Result<Vec<_>, Error>>()?;
    // One reference count per task, as on the tokio front; and each task holds only its own
    // mode's future: one async block matching on the mode would hold the larger of the two
    // (with rustc 1.95, 1,184 bytes a task in `staged` against 688 for the tokio front).
    let crypto = Arc::new(crypto.clone());
    let clock = Clock::start();
    let handles: Vec<_> = bufs
        .into_iter()
        .enumerate()
        .map(|(i, bufs)| {
            let (crypto, conns) = (crypto.clone(), conns.clone());
            match bufs {
                Bufs::Plain(bufs) if !coalesced => exec.spawn_with(move |ctx| async move {
                    seal_connection_waits_only(&crypto, &ctx, &conns[i], bufs).await
                }),
                bufs => {
                    exec.spawn_with(move |ctx| async move { seal_connection(&crypto, &ctx, &conns[i], bufs).await })
                }
            }
        })
        .collect();
    let results = exec.block_on(async {
        let mut v = Vec::with_capacity(handles.len());
        for h in handles {
            v.push(h.await);
        }
        v
    });
    let (wall, cpu) = clock.stop();
    let results: Result<Vec<_>, Error> =
        results.into_iter().map(|r| r.expect("a connection's task panicked")).collect();
    Run::of_tasks(results?, wall, cpu, exec.stats())
}

/// `staged-cores`: the native executor as a thread-per-core server runs it. The executor is a
/// single-thread runtime, so to use every core a server runs one per core: here one
/// [`Executor`] per worker thread, each over its contiguous share of the connections (as the
/// CPU modes split them), each connection a task sealing its staged records as in `staged`,
/// every executor on the same device (its own queue state, driver thread and submissions).
/// `staged-cores-queue` (with `shared`): the same executors, whose tasks record through the
/// contexts of one shared [`vkasync::Queue`], so that every thread's records join the same
/// flushes, as the tokio fronts' do. Each thread makes its executor, its records and its tasks
/// before the clock starts; the clock runs from the moment every thread is ready until the last
/// one is done.
pub fn run_executor_cores(
    crypto: &Crypto,
    conns: &Arc<Vec<Conn>>,
    workers: usize,
    flush: FlushPolicy,
    shared: bool,
) -> Result<Run, Error> {
    let queue = if shared { Some(queue_builder(crypto.device()).build()?) } else { None };
    let shares = shares(crypto, conns, workers, true)?;
    let (ready, go) = (Barrier::new(shares.len() + 1), Barrier::new(shares.len() + 1));
    let (per_share, wall, cpu) = std::thread::scope(|s| {
        let threads: Vec<_> = shares
            .into_iter()
            .map(|share| {
                let (ready, go, conns, queue) = (&ready, &go, conns.clone(), queue.clone());
                let crypto = Arc::new(crypto.clone());
                s.spawn(move || {
                    // Made before the clock starts; an error is returned only after both
                    // barriers, which every thread must reach.
                    let exec = executor(crypto.device(), flush);
                    let handles: Vec<_> = match &exec {
                        Ok(exec) => share
                            .into_iter()
                            .map(|(i, bufs)| {
                                let (crypto, conns) = (crypto.clone(), conns.clone());
                                let seal = move |ctx: Ctx| async move {
                                    seal_connection(&crypto, &ctx, &conns[i], bufs).await
                                };
                                let h = match &queue {
                                    Some(q) => exec.spawn(seal(q.context())),
                                    None => exec.spawn_with(seal),
                                };
                                (i, h)
                            })
                            .collect(),
                        Err(_) => Vec::new(),
                    };
                    ready.wait();
                    go.wait();
                    let exec = exec?;
                    let done = exec.block_on(async {
                        let mut v = Vec::with_capacity(handles.len());
                        for (i, h) in handles {
                            v.push((i, h.await.expect("a connection's task panicked")));
                        }
                        v
                    });
                    let done = done.into_iter().map(|(i, r)| Ok((i, r?))).collect::<Result<Vec<_>, Error>>()?;
                    Ok::<_, Error>((done, exec.stats()))
                })
            })
            .collect();
        ready.wait();
        let clock = Clock::start();
        go.wait();
        let per_share: Vec<_> = threads.into_iter().map(|t| t.join().expect("an executor's thread panicked")).collect();
        let (wall, cpu) = clock.stop();
        (per_share, wall, cpu)
    });
    let mut results = Vec::with_capacity(conns.len());
    let mut stats = Stats::default();
    for share in per_share {
        let (done, s) = share?;
        results.extend(done);
        stats = add_stats(stats, s);
    }
    if let Some(q) = queue {
        // The GPU work went through the queue; the executors counted only their tasks.
        stats = Stats { tasks_spawned: stats.tasks_spawned, tasks_completed: stats.tasks_completed, ..q.stats() };
    }
    results.sort_unstable_by_key(|(i, _)| *i);
    Run::of_tasks(results.into_iter().map(|(_, r)| r).collect(), wall, cpu, stats)
}

/// The counters of two executors together (the highest of a peak or a timeline value).
fn add_stats(a: Stats, b: Stats) -> Stats {
    Stats {
        tasks_spawned: a.tasks_spawned + b.tasks_spawned,
        tasks_completed: a.tasks_completed + b.tasks_completed,
        await_points: a.await_points + b.await_points,
        flushes: a.flushes + b.flushes,
        submits: a.submits + b.submits,
        command_buffers: a.command_buffers + b.command_buffers,
        host_waits: a.host_waits + b.host_waits,
        barriers: a.barriers + b.barriers,
        dispatches: a.dispatches + b.dispatches,
        copy_dispatches: a.copy_dispatches + b.copy_dispatches,
        timeline_value: a.timeline_value.max(b.timeline_value),
        wait_ns: a.wait_ns + b.wait_ns,
        spin_ns: a.spin_ns + b.spin_ns,
        memory_peak: a.memory_peak.max(b.memory_peak),
        flush_ns: a.flush_ns + b.flush_ns,
        handed_flushes: a.handed_flushes + b.handed_flushes,
        laned_items: a.laned_items + b.laned_items,
        part_wakes: a.part_wakes + b.part_wakes,
    }
}

/// One connection's task in the `waits-only` mode: its key objects (expanded inside the timed run,
/// as in every mode), and each record's own uploads, dispatches and read-backs.
async fn seal_connection_waits_only(
    crypto: &Crypto,
    ctx: &Ctx,
    c: &Conn,
    mut bufs: Vec<Vec<u8>>,
) -> Result<TaskResult, Error> {
    let (key, mac) = (AesKey::new(&c.aes_key)?, HmacKey::new(&c.mac_key));
    let mut out = Vec::with_capacity(bufs.len());
    let mut lat = Vec::with_capacity(bufs.len());
    for (seq, buf) in bufs.iter_mut().enumerate() {
        let t = Instant::now();
        let (ct, tag) = seal_waits_only(crypto, ctx, &key, &mac, c.nonce(seq), buf).await?;
        buf.copy_from_slice(&ct);
        lat.push(t.elapsed());
        out.push(tag);
    }
    Ok((Bufs::Plain(bufs), out, lat))
}

pub fn run_tokio(crypto: &Crypto, conns: &Arc<Vec<Conn>>, workers: usize, staged: bool) -> Result<Run, Error> {
    let queue = queue_builder(crypto.device()).build()?;
    let crypto = Arc::new(crypto.clone());
    let shares = shares(&crypto, conns, workers, staged)?;
    let (conns, q) = (conns.clone(), queue.clone());
    let (results, wall, cpu) = timed_on_tokio(workers, |rt| {
        spawn_from_shares(rt, shares, move |(i, bufs): (usize, Bufs)| {
            // One reference count per task, not one per pipeline of a clone.
            let (crypto, conns, ctx) = (crypto.clone(), conns.clone(), q.context());
            async move { seal_connection(&crypto, &ctx, &conns[i], bufs).await }
        })
    });
    Run::of_tasks(results.into_iter().collect::<Result<Vec<_>, Error>>()?, wall, cpu, queue.stats())
}

/// `staged-shares`: as the CPU modes are written, one tokio task per worker over its contiguous
/// share of the connections, and no task per connection: each connection's sealing is a future
/// of its share's task, all of them awaited at once (`FuturesUnordered`). Every record of a share
/// joins a flush as in `staged-tokio`, but the runtime spawns, schedules and joins no task per
/// connection, and a flush's completion wakes one task per share.
pub fn run_tokio_shares(crypto: &Crypto, conns: &Arc<Vec<Conn>>, workers: usize) -> Result<Run, Error> {
    use futures::stream::{FuturesUnordered, StreamExt};
    let queue = queue_builder(crypto.device()).build()?;
    let crypto = Arc::new(crypto.clone());
    let shares = shares(&crypto, conns, workers, true)?;
    let (per_share, wall, cpu) = timed_on_tokio(workers, |rt| {
        rt.block_on(async {
            let handles: Vec<_> = shares
                .into_iter()
                .map(|share| {
                    let (crypto, conns, ctx) = (crypto.clone(), conns.clone(), queue.context());
                    tokio::spawn(async move {
                        let (crypto, conns, ctx) = (&crypto, &conns, &ctx);
                        let mut pending: FuturesUnordered<_> = share
                            .into_iter()
                            .map(|(i, bufs)| async move { (i, seal_connection(crypto, ctx, &conns[i], bufs).await) })
                            .collect();
                        let mut done = Vec::with_capacity(pending.len());
                        while let Some((i, r)) = pending.next().await {
                            done.push((i, r?));
                        }
                        Ok::<_, Error>(done)
                    })
                })
                .collect();
            let mut v = Vec::new();
            for h in handles {
                v.push(h.await.expect("a share's task panicked"));
            }
            v
        })
    });
    let mut results = Vec::with_capacity(conns.len());
    for share in per_share {
        results.extend(share?);
    }
    results.sort_unstable_by_key(|(i, _)| *i);
    Run::of_tasks(results.into_iter().map(|(_, r)| r).collect(), wall, cpu, queue.stats())
}

/// Runs `body` on a tokio runtime of `workers` threads made for it, and returns what it returned
/// with the wall and process CPU time it took (the runtime is made before the clock starts and
/// shut down after it stops).
fn timed_on_tokio<R>(workers: usize, body: impl FnOnce(&tokio::runtime::Runtime) -> R) -> (R, Duration, Duration) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).build().expect("a tokio runtime");
    let clock = Clock::start();
    let r = body(&rt);
    let (wall, cpu) = clock.stop();
    drop(rt);
    (r, wall, cpu)
}

/// Runs `task(item)` for every item of `shares` as its own task on `rt`, spawned by one task per
/// share (one share per worker) as a server's accept loops would: spawned from outside the
/// runtime (this thread), each task would first wake a parked worker, about 2 µs per task on
/// this one thread, which then bounds the whole front. Returns the tasks' results in order.
///
/// With `VKASYNC_BENCH_JOIN=shares` each share's spawning task also awaits its own tasks (the
/// joins, and freeing the tasks, spread over the workers); otherwise this thread awaits every
/// task (for A/B runs of one binary).
fn spawn_from_shares<T, F, Fut>(
    rt: &tokio::runtime::Runtime,
    shares: Vec<Vec<T>>,
    task: F,
) -> Vec<Result<TaskResult, Error>>
where
    T: Send + 'static,
    F: Fn(T) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<TaskResult, Error>> + Send + 'static,
{
    let join_in_shares = std::env::var("VKASYNC_BENCH_JOIN").is_ok_and(|v| v.trim() == "shares");
    rt.block_on(async {
        let spawners: Vec<_> = shares
            .into_iter()
            .map(|share| {
                let task = task.clone();
                tokio::spawn(async move {
                    let handles = share.into_iter().map(|item| tokio::spawn(task(item))).collect::<Vec<_>>();
                    if !join_in_shares {
                        return (handles, Vec::new());
                    }
                    let mut done = Vec::with_capacity(handles.len());
                    for h in handles {
                        done.push(h.await.expect("a connection's task panicked"));
                    }
                    (Vec::new(), done)
                })
            })
            .collect();
        let mut v = Vec::new();
        for s in spawners {
            let (handles, done) = s.await.expect("a spawning task panicked");
            v.extend(done);
            for h in handles {
                v.push(h.await.expect("a connection's task panicked"));
            }
        }
        v
    })
}

/// Each connection's output buffers ([`Bufs`], made before the clock starts), with its index,
/// in `workers` contiguous shares.
fn shares(crypto: &Crypto, conns: &[Conn], workers: usize, staged: bool) -> Result<Vec<Vec<(usize, Bufs)>>, Error> {
    let per = conns.len().div_ceil(workers.max(1)).max(1);
    let mut out: Vec<Vec<(usize, Bufs)>> = Vec::new();
    for (i, c) in conns.iter().enumerate() {
        if i % per == 0 {
            out.push(Vec::with_capacity(per));
        }
        out.last_mut().expect("pushed").push((i, Bufs::of(crypto, c, staged)?));
    }
    Ok(out)
}

/// One connection's task on a tokio front: seals its records in order, timing each.
async fn seal_connection(crypto: &Crypto, ctx: &Ctx, c: &Conn, mut bufs: Bufs) -> Result<TaskResult, Error> {
    // The connection's keys, expanded once inside the timed run, as the CPU modes expand theirs
    // (a server does it at the handshake).
    let keys = RecordKeys::new(&c.aes_key, &c.mac_key, c.prefix)?;
    let n = c.records.len();
    let mut out = Vec::with_capacity(n);
    let mut lat = Vec::with_capacity(n);
    for seq in 0..n {
        let t = Instant::now();
        out.push(match &mut bufs {
            Bufs::Plain(v) => crypto.seal_in_place(ctx, &keys, seq as u64, &mut v[seq]).await?,
            Bufs::Staged(v) => crypto.seal_staged(ctx, &keys, seq as u64, &mut v[seq]).await?,
        });
        lat.push(t.elapsed());
    }
    Ok((bufs, out, lat))
}

/// `run_tokio` over a [`QueueSet`], the connections spawned the same way. Each connection's
/// context is on the least-loaded device, with that device's `Crypto`; with `staged`, its
/// records are staged records of device `i mod N` (a staged record belongs to one device), made
/// with its context before the clock starts.
pub fn run_tokio_set(
    set: &QueueSet,
    cryptos: &PerDevice<Crypto>,
    conns: &Arc<Vec<Conn>>,
    workers: usize,
    staged: bool,
) -> Result<Run, Error> {
    let before = set.stats();
    let n = set.queues().len();
    let per = conns.len().div_ceil(workers.max(1)).max(1);
    let mut shares: Vec<Vec<(usize, Option<Ctx>, Bufs)>> = Vec::new();
    for (i, c) in conns.iter().enumerate() {
        if i % per == 0 {
            shares.push(Vec::with_capacity(per));
        }
        let item = if staged {
            let ctx = set.context_on(i % n).expect("an index below the set's size");
            let bufs = Bufs::of(cryptos.get(ctx.device())?, c, true)?;
            (i, Some(ctx), bufs)
        } else {
            (i, None, Bufs::Plain(c.records.clone()))
        };
        shares.last_mut().expect("pushed").push(item);
    }
    let (set2, cryptos, conns) = (set.clone(), cryptos.clone(), conns.clone());
    let (results, wall, cpu) = timed_on_tokio(workers, |rt| {
        spawn_from_shares(rt, shares, move |(i, ctx, bufs): (usize, Option<Ctx>, Bufs)| {
            let ctx = ctx.unwrap_or_else(|| set2.context());
            let crypto = cryptos.get(ctx.device()).expect("a device of the set").clone();
            let conns = conns.clone();
            async move { seal_connection(&crypto, &ctx, &conns[i], bufs).await }
        })
    });
    // This run's counters, summed over the devices.
    let mut s = Stats::default();
    for (now, was) in set.stats().iter().zip(&before) {
        s.submits += now.submits - was.submits;
        s.dispatches += now.dispatches - was.dispatches;
        s.host_waits += now.host_waits - was.host_waits;
    }
    Run::of_tasks(results.into_iter().collect::<Result<Vec<_>, Error>>()?, wall, cpu, s)
}
