//! The scheduling core against a simulated queue: no GPU, a timeline the test advances, and
//! faults (submit failure, device loss) injected at random points. Thousands of random task
//! programs check the protocol's promises; the lavapipe tests check the same on a real device.

use super::backend::{Backend, FlushInfo, Waiter};
use super::core::{lock, ContextState, Options, QueueCore, SyncFuture};
use super::local::{Drive, Local};
use super::{FlushPolicy, JoinHandle, WaitPolicy};
use crate::error::{Error, Result};
use proptest::prelude::*;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// The simulated GPU: a timeline that advances by a seeded random amount at each wait or
/// counter read. Shared by the backend (under the core's lock) and its waiter (without it).
struct SimGpu {
    /// Last value handed out.
    submitted: u64,
    counter: u64,
    in_flight: VecDeque<(u64, Vec<u64>)>,
    rng: u64,
    fail_submit_per_mille: u64,
    timeout_per_mille: u64,
    lose_at_call: Option<u64>,
    calls: u64,
    lost: bool,
    values: Vec<u64>,
    /// The GPU makes no progress until the test completes its work ([`SimGpu::complete_all`]).
    held: bool,
}

impl SimGpu {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn call(&mut self) -> Result<()> {
        self.calls += 1;
        assert!(self.calls < 1_000_000, "runaway schedule");
        if self.lose_at_call == Some(self.calls) {
            self.lost = true;
        }
        if self.lost {
            Err(Error::DeviceLost)
        } else {
            Ok(())
        }
    }

    /// The GPU makes some progress: the counter moves to a random value up to the last submit.
    fn progress(&mut self) {
        if self.submitted > self.counter && !self.held {
            let step = self.next() % (self.submitted - self.counter + 1);
            self.set_counter(self.counter + step);
        }
    }

    /// Completes everything submitted (a held GPU included).
    fn complete_all(&mut self) {
        let v = self.submitted;
        self.set_counter(v);
    }

    fn set_counter(&mut self, v: u64) {
        assert!(v <= self.submitted, "timeline passed the last submitted value");
        assert!(v >= self.counter, "timeline went backwards");
        self.counter = v;
        while self.in_flight.front().is_some_and(|(x, _)| *x <= v) {
            self.in_flight.pop_front();
        }
    }

    /// A blocking wait: the simulated GPU gets at least as far as `value` (or times out).
    fn wait(&mut self, value: u64, timeout: Option<Duration>) -> Result<bool> {
        self.call()?;
        assert!(value <= self.submitted, "waited for a value never submitted");
        self.progress();
        if self.counter >= value {
            return Ok(true);
        }
        if timeout.is_some() && self.next() % 1000 < self.timeout_per_mille {
            return Ok(false);
        }
        // Blocks until the value, and the GPU may have got further.
        let extra = self.next() % (self.submitted - value + 1);
        self.set_counter(value + extra);
        Ok(true)
    }
}

/// A queue over the simulated GPU.
struct SimBackend {
    pending: Vec<u64>,
    /// How many of `pending` came through the lanes: coalesced items, not commands.
    items: usize,
    gpu: Arc<Mutex<SimGpu>>,
    /// The value each submitted op went out with.
    op_value: Arc<Mutex<HashMap<u64, u64>>>,
}

/// One flush of the simulated queue.
struct SimJob {
    ops: Vec<u64>,
    gpu: Arc<Mutex<SimGpu>>,
    op_value: Arc<Mutex<HashMap<u64, u64>>>,
}

#[derive(Clone)]
struct SimWaiter(Arc<Mutex<SimGpu>>);

impl Waiter for SimWaiter {
    fn completed(&self) -> Result<u64> {
        let mut g = lock(&self.0);
        g.call()?;
        g.progress();
        Ok(g.counter)
    }
    fn wait(&self, value: u64, timeout: Option<Duration>) -> Result<bool> {
        lock(&self.0).wait(value, timeout)
    }
}

impl Backend for SimBackend {
    fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }
    fn pending_len(&self) -> usize {
        self.pending.len()
    }
    fn pending_commands(&self) -> usize {
        self.pending.len() - self.items
    }
    fn recorded_count(&self) -> usize {
        self.pending.len()
    }
    fn absorb_batches(&mut self, mut batches: crate::record::batch::Batches, n: usize) {
        // The simulated items are ops, recorded like the others.
        let ops = batches.take_items::<SimKind>();
        assert_eq!(ops.len(), n, "every lane item is a simulated op");
        self.items += ops.len();
        self.pending.extend(ops);
    }
    type Job = SimJob;
    fn begin_flush(&mut self) -> SimJob {
        self.items = 0;
        SimJob { ops: std::mem::take(&mut self.pending), gpu: self.gpu.clone(), op_value: self.op_value.clone() }
    }
    fn run_flush(job: &mut SimJob) -> Result<FlushInfo> {
        let ops = std::mem::take(&mut job.ops);
        let mut g = lock(&job.gpu);
        g.call()?;
        if g.next() % 1000 < g.fail_submit_per_mille {
            return Err(Error::SubmitFailed("injected".into()));
        }
        g.submitted += 1;
        let v = g.submitted;
        g.values.push(v);
        for &op in &ops {
            lock(&job.op_value).insert(op, v);
        }
        g.in_flight.push_back((v, ops));
        g.progress();
        Ok(FlushInfo { value: v, command_buffers: 1, submitted: true, submissions: 1, ..FlushInfo::default() })
    }
    fn end_flush(&mut self, _job: SimJob) {}
    type Waiter = SimWaiter;
    fn waiter(&self) -> SimWaiter {
        SimWaiter(self.gpu.clone())
    }
    type Retired = ();
    fn take_retired(&mut self) {}
    fn completed(&mut self) -> Result<u64> {
        let mut g = lock(&self.gpu);
        g.call()?;
        Ok(g.counter)
    }
    fn abandon(&mut self) {
        self.pending.clear();
        self.items = 0;
        lock(&self.gpu).in_flight.clear();
    }
    fn shutdown(&mut self, _bound: Duration) -> bool {
        self.pending.clear();
        self.items = 0;
        let mut g = lock(&self.gpu);
        let lost = g.lost;
        if !lost {
            let s = g.submitted;
            g.set_counter(s);
        }
        g.in_flight.clear();
        !lost
    }
    fn leak(&mut self) {
        lock(&self.gpu).in_flight.clear();
    }
}

/// The simulated batch kind: an item is an op id, recorded like a command (the simulated
/// queue does not encode).
struct SimKind;

impl crate::record::batch::BatchKind for SimKind {
    type Item = u64;
    fn encode(&self, _items: &mut Vec<u64>, _enc: &mut crate::record::batch::Encoder<'_>) -> Result<()> {
        unreachable!("the simulated queue takes its items as ops")
    }
    fn fail(&self, _items: Vec<u64>, _error: &Error) {}
}

/// The test's task context.
#[derive(Clone)]
struct SimCtx {
    core: Arc<QueueCore<SimBackend>>,
    local: Rc<Local<SimBackend>>,
    state: Arc<ContextState>,
    next_op: Rc<RefCell<u64>>,
    kind: Arc<SimKind>,
}

impl SimCtx {
    fn next_op(&self) -> u64 {
        let mut n = self.next_op.borrow_mut();
        *n += 1;
        *n
    }
    /// Adds op `op` as a coalesced item and waits for it, as a `Queue`'s context does: through
    /// the thread's lane where the lanes apply, else under the lock.
    async fn batch(&self, op: u64) -> Result<()> {
        let mut item = Some(op);
        let mut wait: Option<SyncFuture<SimBackend>> = None;
        std::future::poll_fn(|cx| {
            if let Some(w) = &mut wait {
                return Pin::new(w).poll(cx);
            }
            let op = item.take().expect("the first poll adds");
            let (w, poll) = match self.core.batch_in_lane(&self.state, 0, &self.kind, op, cx) {
                Ok(laned) => laned,
                Err(op) => {
                    let ((), w, poll) = self.core.record_and_wait(
                        &self.state,
                        0,
                        |b| {
                            b.pending.push(op);
                            Ok(())
                        },
                        cx,
                    )?;
                    (w, poll)
                }
            };
            wait = Some(w);
            poll
        })
        .await
    }
    fn record(&self) -> u64 {
        let op = self.next_op();
        self.core
            .record(&self.state, |b| {
                b.pending.push(op);
                Ok(())
            })
            .unwrap();
        op
    }
    fn synchronize(&self) -> SyncFuture<SimBackend> {
        SyncFuture::new(self.core.clone(), lock(&self.state.last).clone(), 0)
    }
    fn fork(&self) -> SimCtx {
        SimCtx {
            core: self.core.clone(),
            local: self.local.clone(),
            state: Arc::default(),
            next_op: self.next_op.clone(),
            kind: self.kind.clone(),
        }
    }
    /// Whether the core knows the GPU has nothing left to do (every submission seen complete).
    /// Whether an await now must submit what is recorded at once (group commit): the GPU is
    /// idle as far as the core knows, and, while the executor's loop runs, the group holds a
    /// third of the group bound (a smaller one waits for the loop to run out of tasks).
    fn gpu_idle(&self) -> bool {
        let st = self.core.lock();
        st.known_idle() && (!self.core.executor_running() || self.core.loop_group_ready(&st))
    }
    fn counter(&self) -> u64 {
        lock(&self.core.lock().backend.gpu).counter
    }
    fn op_values(&self) -> Arc<Mutex<HashMap<u64, u64>>> {
        self.core.lock().backend.op_value.clone()
    }
}

struct YieldNow(bool);
impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

#[derive(Debug, Clone)]
enum Step {
    Record(u8),
    Sync,
    Yield,
    Spawn(Vec<Step>),
    AwaitEarlier(u8),
    /// A coalesced item, awaited at once (a crypto call on a `Queue`'s context).
    Batch,
}

fn step() -> impl Strategy<Value = Step> {
    let leaf = prop_oneof![
        4 => (1u8..4).prop_map(Step::Record),
        3 => Just(Step::Sync),
        1 => Just(Step::Yield),
        1 => any::<u8>().prop_map(Step::AwaitEarlier),
        3 => Just(Step::Batch),
    ];
    leaf.prop_recursive(2, 16, 6, |inner| prop::collection::vec(inner, 0..6).prop_map(Step::Spawn))
}

#[derive(Default)]
struct World {
    handles: Vec<Option<JoinHandle<Result<()>>>>,
    violations: Vec<String>,
}

fn run_task(
    ctx: SimCtx,
    steps: Vec<Step>,
    world: Rc<RefCell<World>>,
    my_index: usize,
) -> Pin<Box<dyn Future<Output = Result<()>>>> {
    Box::pin(async move {
        let mut mine: Vec<u64> = Vec::new();
        for s in steps {
            match s {
                Step::Record(n) => {
                    for _ in 0..n {
                        mine.push(ctx.record());
                    }
                }
                Step::Sync => {
                    let covered = mine.clone();
                    let idle = ctx.gpu_idle();
                    let unsubmitted = {
                        let values = ctx.op_values();
                        let values = lock(&values);
                        mine.iter().any(|op| !values.contains_key(op))
                    };
                    let mut wait = std::pin::pin!(ctx.synchronize());
                    let first = std::future::poll_fn(|cx| Poll::Ready(wait.as_mut().poll(cx))).await;
                    if first.is_pending() && idle && unsubmitted && ctx.core.options.flush == FlushPolicy::GroupCommit {
                        // Group commit: the GPU had nothing to do (as far as the core knew), so
                        // the work this task waits for must have been submitted by the time its
                        // wait first returns.
                        let values = ctx.op_values();
                        if let Some(op) = covered.iter().find(|op| !lock(&values).contains_key(op)) {
                            world
                                .borrow_mut()
                                .violations
                                .push(format!("op {op} not submitted although the GPU was idle when awaited"));
                        }
                    }
                    if let std::task::Poll::Ready(r) = first {
                        r?;
                    } else {
                        wait.await?;
                    }
                    // Every op recorded before the call has completed on the simulated GPU.
                    let counter = ctx.counter();
                    let values = ctx.op_values();
                    for op in covered {
                        let v = lock(&values).get(&op).copied();
                        match v.as_ref() {
                            Some(&v) if v <= counter => {}
                            other => world
                                .borrow_mut()
                                .violations
                                .push(format!("op {op} not complete at wake: {other:?} counter {counter}")),
                        }
                    }
                }
                Step::Batch => {
                    let op = ctx.next_op();
                    ctx.batch(op).await?;
                    // The item's op ran on the simulated GPU before its wait ended.
                    let counter = ctx.counter();
                    let v = lock(&ctx.op_values()).get(&op).copied();
                    if v.is_none_or(|v| v > counter) {
                        world
                            .borrow_mut()
                            .violations
                            .push(format!("item {op} not complete at wake: {v:?} counter {counter}"));
                    }
                    mine.push(op);
                }
                Step::Yield => YieldNow(false).await,
                Step::Spawn(child) => {
                    let c = ctx.fork();
                    let index = world.borrow().handles.len();
                    let h = ctx.local.spawn(run_task(c, child, world.clone(), index));
                    world.borrow_mut().handles.push(Some(h));
                }
                Step::AwaitEarlier(k) => {
                    if my_index == 0 {
                        continue;
                    }
                    let target = k as usize % my_index;
                    let h = world.borrow_mut().handles[target].take();
                    if let Some(h) = h {
                        match h.await {
                            Ok(_) => {}
                            Err(e) => world.borrow_mut().violations.push(format!("joined task failed: {e}")),
                        }
                    }
                }
            }
        }
        // Final await so that every recorded op is awaited.
        ctx.synchronize().await
    })
}

#[derive(Debug, Clone)]
struct Faults {
    fail_submit_per_mille: u64,
    timeout_per_mille: u64,
    lose_at_call: Option<u64>,
}

/// A simulated GPU with `seed`'s random progress and `faults`, and a backend over it.
fn sim_gpu(seed: u64, faults: &Faults) -> (Arc<Mutex<SimGpu>>, SimBackend) {
    let gpu = Arc::new(Mutex::new(SimGpu {
        submitted: 0,
        counter: 0,
        in_flight: VecDeque::new(),
        rng: seed | 1,
        fail_submit_per_mille: faults.fail_submit_per_mille,
        timeout_per_mille: faults.timeout_per_mille,
        lose_at_call: faults.lose_at_call,
        calls: 0,
        lost: false,
        values: Vec::new(),
        held: false,
    }));
    let backend = SimBackend { pending: Vec::new(), items: 0, gpu: gpu.clone(), op_value: Arc::default() };
    (gpu, backend)
}

fn simulate(
    programs: Vec<Vec<Step>>,
    seed: u64,
    policy: WaitPolicy,
    faults: Faults,
    max_pending: usize,
) -> std::result::Result<super::Stats, TestCaseError> {
    let (gpu, backend) = sim_gpu(seed, &faults);
    let timeout = (faults.timeout_per_mille > 0).then(|| Duration::from_millis(1));
    let spin = if seed % 3 == 0 { Duration::from_micros(1) } else { Duration::ZERO };
    let flush = if (seed >> 8) % 2 == 0 { FlushPolicy::WhenIdle } else { FlushPolicy::GroupCommit };
    let adaptive = (seed >> 9) % 2 == 0;
    // Half the schedules bound group commit's groups (1 to 8 commands), as an executor does.
    let group_bound = if (seed >> 10) % 2 == 0 { usize::MAX } else { 1 + (seed >> 11) as usize % 8 };
    // Half the schedules submit gathered work behind one submission in flight.
    let depth = 1 + (seed >> 14) as usize % 2;
    let core = QueueCore::new(
        backend,
        Options {
            policy,
            timeout,
            max_pending,
            spin,
            adaptive,
            flush,
            memory_bound: None,
            group_bound,
            depth,
            shutdown: Duration::from_secs(10),
            lanes: true,
        },
    );
    let local = Local::new(core.clone(), Drive::Inline(SimWaiter(gpu.clone())));
    // A quarter of the schedules model a `Queue`: awaited work goes out by group commit alone.
    if (seed >> 15) % 4 == 0 {
        local.model_queue();
    }
    let world = Rc::new(RefCell::new(World::default()));
    let next_op = Rc::new(RefCell::new(0));
    let kind = Arc::new(SimKind);
    let no_faults = faults.fail_submit_per_mille == 0 && faults.timeout_per_mille == 0 && faults.lose_at_call.is_none();
    for p in programs {
        let ctx = SimCtx {
            core: core.clone(),
            local: local.clone(),
            state: Arc::default(),
            next_op: next_op.clone(),
            kind: kind.clone(),
        };
        let index = world.borrow().handles.len();
        let h = local.spawn(run_task(ctx, p, world.clone(), index));
        world.borrow_mut().handles.push(Some(h));
    }
    let l2 = local.clone();
    local.run_until(move || l2.tasks_alive() == 0);
    core.flush_now();

    // Every task finished; with no faults, every one succeeded.
    prop_assert_eq!(local.tasks_alive(), 0);
    let handles: Vec<_> = world.borrow_mut().handles.drain(..).flatten().collect();
    for h in handles {
        prop_assert!(h.is_finished());
        let out = h.join();
        match out {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                prop_assert!(!no_faults, "task failed without faults: {}", e);
                prop_assert!(
                    matches!(e, Error::DeviceLost | Error::SubmitFailed(_) | Error::Timeout(_)),
                    "unexpected {}",
                    e
                );
            }
            Err(e) => prop_assert!(false, "join error {}", e),
        }
    }
    let violations = std::mem::take(&mut world.borrow_mut().violations);
    prop_assert!(violations.is_empty() || !no_faults, "{:?}", violations);
    let stats = core.stats();
    // No waiter slot (and so no waker) outlives its future.
    prop_assert_eq!(core.lock().waiter_count(), 0);
    // Values are handed out only by successful submits: 1, 2, 3, ... with no gaps.
    let values = lock(&gpu).values.clone();
    prop_assert!(values.iter().enumerate().all(|(i, v)| *v == i as u64 + 1));
    prop_assert_eq!(stats.submits, values.len() as u64);
    prop_assert_eq!(stats.tasks_spawned, stats.tasks_completed);
    if no_faults && max_pending == usize::MAX && (group_bound == usize::MAX || flush == FlushPolicy::WhenIdle) {
        prop_assert!(stats.host_waits <= stats.flushes, "{}", stats);
        prop_assert!(stats.flushes <= stats.await_points, "{}", stats);
        prop_assert_eq!(stats.flushes, stats.submits);
    }
    Ok(stats)
}

fn programs() -> impl Strategy<Value = Vec<Vec<Step>>> {
    prop::collection::vec(prop::collection::vec(step(), 0..8), 1..64)
}

fn policy() -> impl Strategy<Value = WaitPolicy> {
    prop_oneof![Just(WaitPolicy::All), Just(WaitPolicy::Oldest)]
}

/// Schedules per property: 3,400 by default, so that the three properties below run over
/// 10,000 simulated schedules in every test run (`VKASYNC_SIM_CASES` overrides).
fn sim_cases() -> u32 {
    std::env::var("VKASYNC_SIM_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(3400)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: sim_cases(), ..ProptestConfig::default() })]

    #[test]
    fn random_schedules_keep_the_protocol(programs in programs(), seed in any::<u64>(), policy in policy()) {
        simulate(programs, seed, policy, Faults { fail_submit_per_mille: 0, timeout_per_mille: 0, lose_at_call: None }, usize::MAX)?;
    }

    #[test]
    fn bounded_flushes_keep_the_protocol(programs in programs(), seed in any::<u64>(), policy in policy(), bound in 1usize..8) {
        simulate(programs, seed, policy, Faults { fail_submit_per_mille: 0, timeout_per_mille: 0, lose_at_call: None }, bound)?;
    }

    #[test]
    fn injected_faults_reach_tasks_and_nothing_hangs(
        programs in programs(),
        seed in any::<u64>(),
        policy in policy(),
        fail in 0u64..300,
        timeout in 0u64..300,
        lose in prop::option::of(1u64..40),
    ) {
        simulate(programs, seed, policy, Faults { fail_submit_per_mille: fail, timeout_per_mille: timeout, lose_at_call: lose }, usize::MAX)?;
    }
}

#[test]
fn two_tasks_one_flush_one_wait() {
    let programs = vec![vec![Step::Record(1), Step::Sync], vec![Step::Record(1), Step::Sync]];
    simulate(
        programs,
        7,
        WaitPolicy::All,
        Faults { fail_submit_per_mille: 0, timeout_per_mille: 0, lose_at_call: None },
        usize::MAX,
    )
    .unwrap();
}

/// A `Queue`'s tasks (the model of one), group commit, one submission in flight at most: items
/// awaited while a submission runs go through the lanes, and each wait ends only once its item
/// ran on the simulated GPU (checked by the program's steps).
#[test]
fn items_added_while_the_gpu_is_busy_go_through_the_lanes() {
    let programs = (0..8).map(|_| vec![Step::Batch, Step::Batch, Step::Record(1), Step::Batch, Step::Sync]).collect();
    // Seed bits: 8 set (group commit), 10 clear (no group bound), 14 clear (depth 1), 15 and
    // 16 clear (a `Queue`'s model).
    let stats = simulate(
        programs,
        (1 << 8) | 1,
        WaitPolicy::All,
        Faults { fail_submit_per_mille: 0, timeout_per_mille: 0, lose_at_call: None },
        usize::MAX,
    )
    .unwrap();
    assert!(stats.laned_items > 0, "{stats:?}");
}

/// The model of a `Queue` (group commit, lanes, no executor loop) at pipeline depth `depth`
/// over a simulated GPU without faults, with a fixed spin of 50 ms.
fn lanes_queue(depth: usize) -> (Arc<Mutex<SimGpu>>, Arc<QueueCore<SimBackend>>) {
    let no_faults = Faults { fail_submit_per_mille: 0, timeout_per_mille: 0, lose_at_call: None };
    let (gpu, backend) = sim_gpu(0x9e37_79b9_7f4a_7c15, &no_faults);
    let options = Options {
        policy: WaitPolicy::All,
        timeout: None,
        max_pending: usize::MAX,
        spin: Duration::from_millis(50),
        adaptive: false,
        flush: FlushPolicy::GroupCommit,
        memory_bound: None,
        group_bound: usize::MAX,
        depth,
        shutdown: Duration::from_secs(10),
        lanes: true,
    };
    (gpu, QueueCore::new(backend, options))
}

/// Records the simulated command `op` for a job of `state`.
fn push_op(core: &QueueCore<SimBackend>, state: &ContextState, op: u64) {
    core.record(state, |b| {
        b.pending.push(op);
        Ok(())
    })
    .unwrap()
}

/// A job that records the simulated command `op`, and its wait (not yet polled).
fn job_wait(core: &Arc<QueueCore<SimBackend>>, op: u64) -> SyncFuture<SimBackend> {
    let state = ContextState::default();
    push_op(core, &state, op);
    let epoch = lock(&state.last).clone();
    SyncFuture::new(core.clone(), epoch, 0)
}

/// A `Queue`'s wait that submits its own work spins for it only while nothing else waits: here
/// a lane's item, added while a submission ran and taken in by this wait's flush, waits beside
/// it, so the wait returns `Pending` at once instead of spinning (a thread that spins while
/// others wait may be the one that would record theirs).
#[test]
fn a_wait_beside_a_lanes_item_does_not_spin() {
    let (gpu, core) = lanes_queue(1);
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let push = |state: &ContextState, op: u64| push_op(&core, state, op);
    // A submission in flight: with a depth of 1 the GPU has no room, so an item goes to a lane.
    let first = Arc::new(ContextState::default());
    push(&first, 1);
    core.flush_now();
    let laned = core.batch_in_lane(&Arc::default(), 0, &Arc::new(SimKind), 2, &mut cx);
    let Ok((_lane_wait, Poll::Pending)) = laned else { panic!("the item went through a lane") };
    // The first submission completes (seen by a spin on its wait), and the GPU has room again;
    // the lane's item is not taken in yet.
    let mut first_wait = SyncFuture::new(core.clone(), lock(&first.last).clone(), 0);
    assert!(Pin::new(&mut first_wait).poll(&mut cx).is_pending());
    assert!(core.executor_spin(&SimWaiter(gpu.clone()), || false), "the first submission completed");
    assert!(Pin::new(&mut first_wait).poll(&mut cx).is_ready());
    drop(first_wait);
    // A third job records and waits: its wait finds the GPU idle and submits its work with
    // the lane's item; the lane's wait then waits beside it, so it does not spin.
    let spun_before = core.stats().spin_ns;
    let third = Arc::new(ContextState::default());
    push(&third, 3);
    let mut third_wait = SyncFuture::new(core.clone(), lock(&third.last).clone(), 0);
    assert!(Pin::new(&mut third_wait).poll(&mut cx).is_pending(), "no spin beside another wait");
    assert_eq!(core.stats().spin_ns, spun_before);
    assert_eq!(core.stats().submits, 2, "the third job's work went out with the lane's item");
    // Alone, a wait spins for its own submission and finds it done.
    assert!(core.executor_spin(&SimWaiter(gpu.clone()), || false));
    assert!(Pin::new(&mut third_wait).poll(&mut cx).is_ready());
    let fourth = Arc::new(ContextState::default());
    push(&fourth, 4);
    let mut fourth_wait = SyncFuture::new(core.clone(), lock(&fourth.last).clone(), 0);
    assert!(Pin::new(&mut fourth_wait).poll(&mut cx).is_ready(), "a lone wait spins to its completion");
    assert!(core.stats().spin_ns > spun_before);
}

/// Group commit at the default depth of 2 (no executor loop): a group that holds coalesced
/// items (the lanes' simulated items), fewer than `BEHIND_MIN`, waits for an idle GPU instead of
/// going out behind the running submission; a group of commands alone goes behind it.
#[test]
fn a_small_group_of_items_waits_for_an_idle_gpu() {
    let (gpu, core) = lanes_queue(2);
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let push = |state: &ContextState, op: u64| push_op(&core, state, op);
    let running = |gpu: &Arc<Mutex<SimGpu>>| lock(gpu).in_flight.len();
    // The GPU completes only what the test completes.
    lock(&gpu).held = true;
    // One submission in flight; an item added now goes to a lane.
    let first = Arc::new(ContextState::default());
    push(&first, 1);
    core.flush_now();
    assert_eq!(running(&gpu), 1);
    let laned = core.batch_in_lane(&Arc::default(), 0, &Arc::new(SimKind), 2, &mut cx);
    let Ok((mut item_wait, Poll::Pending)) = laned else { panic!("the item went through a lane") };
    let mut first_wait = SyncFuture::new(core.clone(), lock(&first.last).clone(), 0);
    assert!(Pin::new(&mut first_wait).poll(&mut cx).is_pending());
    // A job records a command and waits: its group holds the lane's item, so it does not go
    // out behind the running submission.
    let mut second_wait = job_wait(&core, 3);
    assert!(Pin::new(&mut second_wait).poll(&mut cx).is_pending());
    assert_eq!(core.stats().submits, 1, "a group of one item waited for the running submission");
    // Once the GPU is idle (seen by a read of the counter, as the driver's), the next wait
    // submits the group, and every wait ends when it completes.
    lock(&gpu).complete_all();
    assert!(core.executor_spin(&SimWaiter(gpu.clone()), || false), "the first submission completed");
    assert!(Pin::new(&mut first_wait).poll(&mut cx).is_ready());
    let mut next_wait = job_wait(&core, 6);
    assert!(Pin::new(&mut next_wait).poll(&mut cx).is_pending());
    assert_eq!(core.stats().submits, 2);
    assert_eq!(running(&gpu), 1);
    lock(&gpu).complete_all();
    assert!(core.executor_spin(&SimWaiter(gpu.clone()), || false));
    for w in [&mut second_wait, &mut next_wait] {
        assert!(Pin::new(w).poll(&mut cx).is_ready());
    }
    assert!(Pin::new(&mut item_wait).poll(&mut cx).is_ready());
    // Commands alone go out behind a running submission.
    let mut third_wait = job_wait(&core, 4);
    core.flush_now();
    assert_eq!(running(&gpu), 1);
    // (The wait on it, so that the next wait does not spin alone on the held GPU.)
    assert!(Pin::new(&mut third_wait).poll(&mut cx).is_pending());
    let mut fourth_wait = job_wait(&core, 5);
    assert!(Pin::new(&mut fourth_wait).poll(&mut cx).is_pending());
    assert_eq!(core.stats().submits, 4, "a group of commands went out behind the running one");
    assert_eq!(running(&gpu), 2);
}
