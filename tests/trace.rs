//! The Chrome trace (`ExecutorBuilder::trace`, `QueueBuilder::trace`) and per-context GPU time,
//! on the real device: the JSON's structure, the tracks, and that every GPU span lies inside
//! its submission's host span to within the calibration's error.

mod common;

use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use vkasync::trace::{TraceClock, TraceDetail};
use vkasync::{kernels, Buffer, Ctx, Error, Executor, Kernel, MemoryKind, Queue};

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("vkasync-trace-{}-{name}.json", std::process::id()))
}

async fn job(ctx: Ctx, mix: Kernel, seed: u32, n: usize) -> Result<(), Error> {
    let data: Vec<u32> = (0..n as u32).map(|i| i ^ seed).collect();
    let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
    ctx.upload(&buf, &data)?;
    ctx.dispatch(&mix, [n.div_ceil(64) as u32, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 2]))?;
    let copy = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
    ctx.copy(&buf, &copy)?;
    let out = ctx.read(&copy).await?;
    for (i, v) in out.iter().enumerate() {
        assert_eq!(*v, common::mix_cpu(data[i], 2));
    }
    Ok(())
}

struct Span {
    name: String,
    /// The track (`tid`): a host thread, or a GPU queue.
    track: u64,
    ts: f64,
    end: f64,
    args: Value,
}

/// Parses the file and checks what every event must have; returns the events.
fn load(path: &PathBuf) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("the trace file was written");
    let v: Value = serde_json::from_str(&text).expect("the trace is JSON");
    let events = v["traceEvents"].as_array().expect("a traceEvents array").clone();
    let mut open: HashMap<(String, String), f64> = HashMap::new();
    for e in &events {
        let ph = e["ph"].as_str().expect("ph");
        assert!(e["name"].is_string() && e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        match ph {
            "M" => assert!(e["args"]["name"].is_string(), "{e}"),
            "X" => {
                assert!(e["ts"].is_f64() || e["ts"].is_u64() || e["ts"].is_i64(), "{e}");
                assert!(e["dur"].as_f64().expect("dur") >= 0.0, "{e}");
            }
            "i" => assert!(e["ts"].is_number(), "{e}"),
            "b" => {
                let key = (e["cat"].as_str().unwrap().to_string(), e["id"].as_str().expect("id").to_string());
                assert!(open.insert(key, e["ts"].as_f64().unwrap()).is_none(), "id reused while open: {e}");
            }
            "e" => {
                let key = (e["cat"].as_str().unwrap().to_string(), e["id"].as_str().expect("id").to_string());
                let start = open.remove(&key).expect("an end without a begin");
                assert!(e["ts"].as_f64().unwrap() >= start, "{e}");
            }
            other => panic!("unexpected phase {other}"),
        }
    }
    assert!(open.is_empty(), "async spans left open: {open:?}");
    events
}

fn spans(events: &[Value], pid: u64, cat: &str) -> Vec<Span> {
    events
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == pid && e["cat"] == cat)
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap();
            Span {
                name: e["name"].as_str().unwrap().into(),
                track: e["tid"].as_u64().unwrap(),
                ts,
                end: ts + e["dur"].as_f64().unwrap(),
                args: e["args"].clone(),
            }
        })
        .collect()
}

/// Async spans of category `cat`: (start, end, args of the begin).
fn async_spans(events: &[Value], cat: &str) -> Vec<(f64, f64, Value)> {
    let mut begins: HashMap<String, (f64, Value)> = HashMap::new();
    let mut out = Vec::new();
    for e in events.iter().filter(|e| e["cat"] == cat) {
        let id = e["id"].as_str().unwrap().to_string();
        match e["ph"].as_str().unwrap() {
            "b" => {
                begins.insert(id, (e["ts"].as_f64().unwrap(), e["args"].clone()));
            }
            "e" => {
                let (s, a) = begins.remove(&id).unwrap();
                out.push((s, e["ts"].as_f64().unwrap(), a));
            }
            _ => {}
        }
    }
    out
}

/// Every GPU command lies in its GPU submission span, and every GPU submission lies inside
/// its host `in flight` span (submit call to completion seen) within the calibration error.
fn check_gpu_inside_host(events: &[Value]) -> usize {
    // Timeline values are per queue: a GPU span's queue is its track, an `in flight` span's
    // its `queue` argument.
    let gpu = spans(events, 2, "gpu");
    let flights: HashMap<(u64, u64), (f64, f64)> = async_spans(events, "submission")
        .into_iter()
        .map(|(s, e, a)| ((a["queue"].as_u64().unwrap(), a["value"].as_u64().unwrap()), (s, e)))
        .collect();
    let subs: HashMap<(u64, u64), &Span> = gpu
        .iter()
        .filter(|s| s.name.starts_with("submission"))
        .map(|s| ((s.track, s.args["value"].as_u64().unwrap()), s))
        .collect();
    assert!(!subs.is_empty(), "no GPU submission spans");
    for s in &gpu {
        let value = (s.track, s.args["value"].as_u64().unwrap());
        let err = s.args["calibration_error_ns"].as_f64().unwrap() / 1e3;
        assert!((0.0..50_000.0).contains(&err), "calibration error {err} µs");
        let (h0, h1) = flights[&value];
        // Timestamps are rounded to whole nanoseconds in the file.
        let slack = err + 0.002;
        assert!(
            s.ts >= h0 - slack && s.end <= h1 + slack,
            "{} [{}, {}] outside its host span [{h0}, {h1}] ± {err} µs",
            s.name,
            s.ts,
            s.end
        );
        let sub = subs[&value];
        assert!(s.ts >= sub.ts - 0.002 && s.end <= sub.end + 0.002, "{} outside its submission", s.name);
    }
    gpu.len()
}

/// Dispatches of `kernel` in the GPU spans: a span of one (`mix`) or of a phase's many
/// (`mix ×N`, with `commands` = N).
fn dispatches(gpu: &[Span], kernel: &str) -> usize {
    gpu.iter()
        .filter(|s| s.name == kernel || s.name.starts_with(&format!("{kernel} ×")))
        .map(|s| s.args["commands"].as_u64().unwrap_or(1) as usize)
        .sum()
}

fn run_traced(clock: TraceClock, detail: TraceDetail, name: &str) -> Vec<Value> {
    let device = common::device();
    let path = tmp(name);
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    const TASKS: usize = 24;
    let stats = {
        let exec = Executor::builder(&device).trace(&path).trace_clock(clock).trace_detail(detail).build().unwrap();
        let handles: Vec<_> =
            (0..TASKS).map(|i| exec.spawn(job(exec.context(), mix.clone(), i as u32, 256 + 64 * i))).collect();
        exec.run();
        for h in handles {
            h.join().unwrap().unwrap();
        }
        exec.stats()
    };
    let events = load(&path);
    let _ = std::fs::remove_file(&path);
    // Host tracks: spawns, polls with task ids, flushes with their parts, waits or spins.
    let host = |cat| spans(&events, 1, cat);
    let spawns = events.iter().filter(|e| e["ph"] == "i" && e["name"] == "spawn").count();
    assert_eq!(spawns, TASKS);
    let polls = host("task");
    assert!(polls.len() >= TASKS * 2, "{} polls", polls.len());
    let task_ids: std::collections::HashSet<u64> = polls.iter().map(|p| p.args["task"].as_u64().unwrap()).collect();
    assert_eq!(task_ids.len(), TASKS);
    // Polls on one thread never overlap, and the loop's consecutive polls share a clock read:
    // one poll's end is the next one's start.
    let mut chained = 0;
    for track in polls.iter().map(|p| p.track).collect::<std::collections::HashSet<_>>() {
        let mut mine: Vec<&Span> = polls.iter().filter(|p| p.track == track).collect();
        mine.sort_by(|a, b| a.ts.total_cmp(&b.ts));
        for w in mine.windows(2) {
            assert!(
                w[1].ts >= w[0].end - 0.002,
                "polls overlap: [{}, {}] and [{}, {}]",
                w[0].ts,
                w[0].end,
                w[1].ts,
                w[1].end
            );
            chained += usize::from(w[1].ts - w[0].end <= 0.002);
        }
    }
    assert!(chained >= TASKS / 2, "only {chained} polls started where the one before ended");
    let flush = host("flush");
    for part in ["flush", "encode", "submit", "encode_batches"] {
        assert!(flush.iter().any(|s| s.name == part), "no {part} span");
    }
    // Every blocking GPU wait is a span (with its spin). A run whose loop saw every completion
    // by reading the counter between polls (it happens on a loaded host) made none.
    let waits = host("wait");
    let blocking = waits.iter().filter(|s| s.name != "wake").count();
    assert!(blocking as u64 >= stats.host_waits, "{blocking} wait spans for {} waits", stats.host_waits);
    // Awaits, one per task that had to wait, each with its task.
    let awaits = async_spans(&events, "await");
    assert!(!awaits.is_empty() && awaits.len() <= TASKS);
    // The wakes, each span with how many tasks it woke: a native task polls again only when
    // woken, so every await that had to wait was woken in one of them.
    let woken: Vec<u64> =
        waits.iter().filter(|s| s.name == "wake").map(|s| s.args["wakers"].as_u64().unwrap()).collect();
    assert!(woken.iter().all(|&n| n >= 1), "a wake span that woke nobody: {woken:?}");
    assert!(woken.iter().sum::<u64>() >= awaits.len() as u64, "woken {woken:?} for {} awaits", awaits.len());
    assert!(awaits.iter().all(|(_, _, a)| task_ids.contains(&a["task"].as_u64().unwrap())));
    // A native task's await ends where the poll that saw its work done starts: a later poll
    // of the same task.
    for (start, end, a) in &awaits {
        let task = a["task"].as_u64().unwrap();
        assert!(
            polls.iter().any(|p| p.args["task"].as_u64() == Some(task) && (p.ts - end).abs() <= 0.01 && p.ts > *start),
            "the await [{start}, {end}] of task {task} does not end at one of its polls"
        );
    }
    assert!(!async_spans(&events, "epoch").is_empty());
    // Threads and the queue are named.
    let named =
        |pid: u64| events.iter().filter(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == pid).count();
    assert!(named(1) >= 1 && named(2) == 1);
    // GPU: every dispatch and the copies.
    let gpu = spans(&events, 2, "gpu");
    assert_eq!(dispatches(&gpu, "mix"), TASKS);
    if detail == TraceDetail::Commands {
        assert_eq!(gpu.iter().filter(|s| s.name == "mix").count(), TASKS, "one span per dispatch");
    }
    assert!(gpu.iter().any(|s| s.name.starts_with("copy")));
    check_gpu_inside_host(&events);
    common::finish(device);
    events
}

#[test]
fn executor_trace_calibrated_or_measured() {
    run_traced(TraceClock::Auto, TraceDetail::Phases, "auto");
}

#[test]
fn executor_trace_with_a_measured_offset() {
    let events = run_traced(TraceClock::Measured, TraceDetail::Phases, "measured");
    let queue = events.iter().find(|e| e["ph"] == "M" && e["pid"] == 2 && e["name"] == "thread_name").unwrap();
    assert!(queue["args"]["name"].as_str().unwrap().contains("measured clock"), "{queue}");
}

#[test]
fn executor_trace_with_a_span_per_command() {
    run_traced(TraceClock::Auto, TraceDetail::Commands, "commands");
}

/// A phase with dispatches of two kernels (two `Kernel`s of one shader, so two kinds of
/// command with one name), interleaved: each kind's span counts its own dispatches, and the
/// kinds of a phase add up to the phase's `commands`.
#[test]
fn a_phase_of_two_kernels_counts_each_kind() {
    let device = common::device();
    let path = tmp("two-kernels");
    let a = Kernel::new(&device, &kernels::MIX).unwrap();
    let b = Kernel::new(&device, &kernels::MIX).unwrap();
    const TASKS: usize = 30;
    {
        let exec = Executor::builder(&device).trace(&path).build().unwrap();
        let handles: Vec<_> = (0..TASKS)
            .map(|i| {
                let k = if i % 3 == 0 { a.clone() } else { b.clone() };
                exec.spawn(job(exec.context(), k, i as u32, 256))
            })
            .collect();
        exec.run();
        for h in handles {
            h.join().unwrap().unwrap();
        }
    }
    let events = load(&path);
    let _ = std::fs::remove_file(&path);
    let gpu = spans(&events, 2, "gpu");
    assert_eq!(dispatches(&gpu, "mix"), TASKS);
    let count = |s: &Span| s.args["commands"].as_u64().unwrap_or(1);
    let mut two_kinds = 0;
    for phase in gpu.iter().filter(|s| s.name == "phase") {
        let kinds: Vec<&Span> = gpu
            .iter()
            .filter(|s| s.name != "phase" && s.args["value"] == phase.args["value"])
            .filter(|s| s.ts == phase.ts && s.end == phase.end)
            .collect();
        assert_eq!(kinds.iter().map(|s| count(s)).sum::<u64>(), count(phase), "phase at {}", phase.ts);
        two_kinds += usize::from(kinds.iter().filter(|s| s.name.starts_with("mix")).count() == 2);
    }
    // The mix dispatches of the first flush share one phase: two kinds there.
    assert!(two_kinds >= 1, "no phase with dispatches of both kernels");
    check_gpu_inside_host(&events);
    common::finish(device);
}

/// Tasks that panic in a traced executor: each still has its polls (the panicking one
/// included, caught inside the poll and reported as its join error), the polls that follow
/// name their own tasks, and every await names a task that ran it.
#[test]
fn a_traced_executor_with_panicking_tasks() {
    let device = common::device();
    let path = tmp("panics");
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    const TASKS: usize = 12;
    {
        let exec = Executor::builder(&device).trace(&path).build().unwrap();
        let handles: Vec<_> = (0..TASKS)
            .map(|i| {
                let (ctx, mix) = (exec.context(), mix.clone());
                exec.spawn(async move {
                    job(ctx, mix, i as u32, 256).await?;
                    if i % 3 == 0 {
                        panic!("task {i} fails after its work");
                    }
                    Ok::<_, Error>(i)
                })
            })
            .collect();
        exec.run();
        for (i, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok(r) => assert_eq!(r.unwrap(), i),
                Err(e) => assert!(i % 3 == 0 && e.is_panic(), "task {i}: {e}"),
            }
        }
    }
    let events = load(&path);
    let _ = std::fs::remove_file(&path);
    let polls = spans(&events, 1, "task");
    let ids: std::collections::HashSet<u64> = polls.iter().map(|p| p.args["task"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), TASKS, "every task, the panicking ones too, has its polls");
    // Each task's last poll is the one that finished it (ready), panicking or not.
    for id in &ids {
        let last = polls.iter().filter(|p| p.args["task"].as_u64() == Some(*id)).max_by(|a, b| a.ts.total_cmp(&b.ts));
        assert_eq!(last.unwrap().args["ready"], 1, "task {id}");
    }
    let mut mine: Vec<&Span> = polls.iter().collect();
    mine.sort_by(|a, b| a.ts.total_cmp(&b.ts));
    for w in mine.windows(2) {
        assert!(w[1].ts >= w[0].end - 0.002, "polls overlap");
    }
    for (_, _, a) in async_spans(&events, "await") {
        assert!(ids.contains(&a["task"].as_u64().unwrap()), "an await names no task of the run: {a}");
    }
    assert_eq!(dispatches(&spans(&events, 2, "gpu"), "mix"), TASKS);
    common::finish(device);
}

#[test]
fn queue_trace_from_threads() {
    let device = common::device();
    let path = tmp("queue");
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    {
        let queue = Queue::builder(&device).trace(&path).build().unwrap();
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let (queue, mix) = (queue.clone(), mix.clone());
                std::thread::spawn(move || {
                    for r in 0..5 {
                        futures::executor::block_on(job(queue.context(), mix.clone(), t * 10 + r, 512)).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
    // The queue closes without blocking: its driver writes the trace as it ends.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let events = loop {
        if let Ok(text) = std::fs::read_to_string(&path) {
            if serde_json::from_str::<Value>(&text).is_ok() {
                break load(&path);
            }
        }
        assert!(std::time::Instant::now() < deadline, "no trace written");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let _ = std::fs::remove_file(&path);
    assert_eq!(dispatches(&spans(&events, 2, "gpu"), "mix"), 20);
    assert!(async_spans(&events, "await").iter().all(|(_, _, a)| a["ctx"].as_u64().unwrap() > 0));
    // The driver's sleeps (it starts with nothing to do, and is woken at the latest to close):
    // all on its thread, none of them inside one of its GPU waits.
    let sleeps = spans(&events, 1, "driver");
    assert!(sleeps.iter().any(|s| s.name == "sleep"), "no sleep span");
    assert!(sleeps.iter().all(|s| s.track == sleeps[0].track && s.end >= s.ts));
    let waits: Vec<_> = spans(&events, 1, "wait").into_iter().filter(|w| w.track == sleeps[0].track).collect();
    for s in &sleeps {
        assert!(waits.iter().all(|w| w.end <= s.ts + 0.01 || w.ts >= s.end - 0.01), "a sleep inside a wait");
    }
    check_gpu_inside_host(&events);
    common::finish(device);
}

#[test]
fn per_context_gpu_time() {
    let device = common::device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    // Off: no time.
    let plain = Executor::new(&device).unwrap();
    assert_eq!(plain.context().gpu_time(), None);
    drop(plain);

    for detail in [TraceDetail::Phases, TraceDetail::Commands] {
        timed_contexts(&device, &mix, detail);
    }
    common::finish(device);
}

/// A context that recorded nothing has no GPU time; a big dispatch has more than a small one
/// (in one phase, where they share a span, and alone).
fn timed_contexts(device: &vkasync::Device, mix: &Kernel, detail: TraceDetail) {
    let exec = Executor::builder(device).gpu_timing(true).trace_detail(detail).build().unwrap();
    let idle = exec.context();
    let small = exec.context();
    let big = exec.context();
    let (s, b, m) = (small.clone(), big.clone(), mix.clone());
    exec.block_on(async move {
        let sbuf = Buffer::<u32>::new(s.device(), 64, MemoryKind::Device)?;
        let bbuf = Buffer::<u32>::new(b.device(), 1 << 20, MemoryKind::Device)?;
        s.dispatch(&m, [1, 1, 1], &[(&sbuf).into()], bytemuck::bytes_of(&[64u32, 1]))?;
        // Many rounds of mix over 4 MiB: far more GPU work than the small job.
        b.dispatch(&m, [(1 << 20) / 64, 1, 1], &[(&bbuf).into()], bytemuck::bytes_of(&[1u32 << 20, 64]))?;
        s.synchronize().await?;
        b.synchronize().await
    })
    .unwrap();
    assert_eq!(idle.gpu_time(), Some(std::time::Duration::ZERO));
    let (ts, tb) = (small.gpu_time().unwrap(), big.gpu_time().unwrap());
    assert!(tb > std::time::Duration::ZERO, "{tb:?}");
    assert!(tb > ts, "{detail:?}: the big job's GPU time {tb:?} is not above the small one's {ts:?}");
}

/// A trace alone measures no per-context time (its GPU spans name no context); with
/// `gpu_timing` as well, contexts have their time and single-command GPU spans name theirs.
#[test]
fn trace_with_and_without_per_context_time() {
    let device = common::device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    for timing in [false, true] {
        let path = tmp(if timing { "timed" } else { "untimed" });
        let ctx = {
            let exec = Executor::builder(&device)
                .trace(&path)
                .gpu_timing(timing)
                .trace_detail(TraceDetail::Commands)
                .build()
                .unwrap();
            let ctx = exec.context();
            exec.block_on(job(ctx.clone(), mix.clone(), 3, 512)).unwrap();
            assert_eq!(ctx.gpu_time().is_some(), timing, "timing {timing}");
            if timing {
                assert!(ctx.gpu_time().unwrap() > std::time::Duration::ZERO);
            }
            ctx
        };
        drop(ctx);
        let events = load(&path);
        let _ = std::fs::remove_file(&path);
        let gpu = spans(&events, 2, "gpu");
        let named = gpu.iter().filter(|s| s.name == "mix" && s.args["ctx"].as_u64().is_some_and(|c| c > 0)).count();
        assert_eq!(dispatches(&gpu, "mix"), 1);
        assert_eq!(named, usize::from(timing), "timing {timing}: {named} mix spans name a context");
        check_gpu_inside_host(&events);
    }
    common::finish(device);
}

/// Two queues of a `QueueSet` (two logical devices) traced to the same path write one file
/// with both queues' GPU tracks, not the last writer's alone.
#[test]
fn a_set_of_two_devices_traced_into_one_file() {
    let devices = [common::device(), common::device()];
    let path = tmp("set");
    {
        let queues = devices.iter().map(|d| Queue::builder(d).trace(&path).build().unwrap()).collect();
        let set = vkasync::QueueSet::from_queues(queues).unwrap();
        let mix = set.per_device(|d| Kernel::new(d, &kernels::MIX)).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
        rt.block_on(async {
            let handles: Vec<_> = (0..40u32)
                .map(|i| {
                    let ctx = set.context();
                    let mix = mix.get(ctx.device()).unwrap().clone();
                    tokio::spawn(job(ctx, mix, i, 256))
                })
                .collect();
            for h in handles {
                h.await.unwrap().unwrap();
            }
        });
        let dispatches: Vec<u64> = set.stats().iter().map(|s| s.dispatches).collect();
        assert!(dispatches.iter().all(|&d| d > 0), "both devices ran jobs: {dispatches:?}");
    }
    // The queues close without blocking: their drivers write the trace as they end.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let events = loop {
        if let Ok(text) = std::fs::read_to_string(&path) {
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                let tracks = v["traceEvents"].as_array().map_or(0, |e| {
                    e.iter().filter(|e| e["ph"] == "M" && e["pid"] == 2 && e["name"] == "thread_name").count()
                });
                if tracks == 2 && dispatches(&spans(&load(&path), 2, "gpu"), "mix") == 40 {
                    break load(&path);
                }
            }
        }
        assert!(std::time::Instant::now() < deadline, "no trace with both queues' 40 dispatches");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let _ = std::fs::remove_file(&path);
    // One GPU track per queue, each with its own dispatches.
    let gpu = spans(&events, 2, "gpu");
    let per_track: std::collections::BTreeMap<u64, usize> = events
        .iter()
        .filter(|e| {
            e["ph"] == "X" && e["pid"] == 2 && e["cat"] == "gpu" && e["name"].as_str().unwrap().starts_with("mix")
        })
        .fold(Default::default(), |mut m, e| {
            *m.entry(e["tid"].as_u64().unwrap()).or_default() += e["args"]["commands"].as_u64().unwrap_or(1) as usize;
            m
        });
    assert_eq!(per_track.len(), 2, "{per_track:?}");
    assert_eq!(dispatches(&gpu, "mix"), 40);
    check_gpu_inside_host(&events);
    for d in devices {
        common::finish(d);
    }
}
