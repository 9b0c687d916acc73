//! The scheduling core against a simulated queue: no GPU, a timeline the test advances, and
//! faults (submit failure, device loss) injected at random points. Thousands of random task
//! programs check the protocol's promises; the lavapipe tests check the same on a real device.

use super::backend::{Backend, FlushInfo};
use super::core::{ContextState, Options, Shared, SyncFuture};
use super::{FlushPolicy, JoinHandle, WaitPolicy};
use crate::error::{Error, Result};
use proptest::prelude::*;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

/// A queue whose timeline advances by a seeded random amount at each wait or counter read.
struct SimBackend {
    pending: Vec<u64>,
    /// Last value handed out.
    submitted: u64,
    counter: u64,
    in_flight: VecDeque<(u64, Vec<u64>)>,
    /// The value each submitted op went out with.
    op_value: Rc<RefCell<HashMap<u64, u64>>>,
    counter_view: Rc<RefCell<u64>>,
    rng: u64,
    fail_submit_per_mille: u64,
    timeout_per_mille: u64,
    lose_at_call: Option<u64>,
    calls: u64,
    lost: bool,
    values: Vec<u64>,
    /// The outcome of the wait begun last and how many more looks it stays unfinished.
    waited: Option<(Result<bool>, u32)>,
}

impl SimBackend {
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
        if self.submitted > self.counter {
            let step = self.next() % (self.submitted - self.counter + 1);
            self.set_counter(self.counter + step);
        }
    }

    fn set_counter(&mut self, v: u64) {
        assert!(v <= self.submitted, "timeline passed the last submitted value");
        assert!(v >= self.counter, "timeline went backwards");
        self.counter = v;
        *self.counter_view.borrow_mut() = v;
        while self.in_flight.front().is_some_and(|(x, _)| *x <= v) {
            self.in_flight.pop_front();
        }
    }
}

impl Backend for SimBackend {
    fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }
    fn pending_len(&self) -> usize {
        self.pending.len()
    }
    fn recorded_count(&self) -> usize {
        self.pending.len()
    }
    fn flush(&mut self) -> Result<FlushInfo> {
        let ops = std::mem::take(&mut self.pending);
        self.call()?;
        if self.next() % 1000 < self.fail_submit_per_mille {
            return Err(Error::SubmitFailed("injected".into()));
        }
        self.submitted += 1;
        let v = self.submitted;
        self.values.push(v);
        for &op in &ops {
            self.op_value.borrow_mut().insert(op, v);
        }
        self.in_flight.push_back((v, ops));
        self.progress();
        Ok(FlushInfo { value: v, barriers: 0, command_buffers: 1 })
    }
    fn begin_wait(&mut self, value: u64, timeout: Option<Duration>) {
        assert!(self.waited.is_none(), "a second wait begun before the first one's result was taken");
        let outcome = self.wait(value, timeout);
        // The wait "goes on" for a random number of looks, as a real one does on its thread;
        // each look unparks the executor's thread as the real wait thread would at its end.
        let looks = (self.next() % 3) as u32;
        self.waited = Some((outcome, looks));
        std::thread::current().unpark();
    }
    fn wait_result(&mut self) -> Option<Result<bool>> {
        match &mut self.waited {
            Some((_, looks)) if *looks > 0 => {
                *looks -= 1;
                std::thread::current().unpark();
                None
            }
            Some(_) => self.waited.take().map(|(r, _)| r),
            None => None,
        }
    }
    fn completed(&mut self) -> Result<u64> {
        self.call()?;
        Ok(self.counter)
    }
    fn abandon(&mut self) {
        self.pending.clear();
        self.in_flight.clear();
    }
    fn shutdown(&mut self, _bound: Duration) {
        self.pending.clear();
        if !self.lost {
            let s = self.submitted;
            self.set_counter(s);
        }
        self.in_flight.clear();
    }
}

impl SimBackend {
    /// A wait, done at once: the simulated GPU gets at least as far as `value` (or times out).
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

/// The test's task context.
#[derive(Clone)]
struct SimCtx {
    shared: Rc<Shared<SimBackend>>,
    state: Rc<ContextState>,
    next_op: Rc<RefCell<u64>>,
}

impl SimCtx {
    fn record(&self) -> u64 {
        let op = {
            let mut n = self.next_op.borrow_mut();
            *n += 1;
            *n
        };
        self.shared
            .record(&self.state, |b| {
                b.pending.push(op);
                Ok(())
            })
            .unwrap();
        op
    }
    fn synchronize(&self) -> SyncFuture<SimBackend> {
        SyncFuture::new(self.shared.clone(), self.state.last.borrow().clone())
    }
    fn fork(&self) -> SimCtx {
        SimCtx { shared: self.shared.clone(), state: Rc::default(), next_op: self.next_op.clone() }
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
}

fn step() -> impl Strategy<Value = Step> {
    let leaf = prop_oneof![
        4 => (1u8..4).prop_map(Step::Record),
        3 => Just(Step::Sync),
        1 => Just(Step::Yield),
        1 => any::<u8>().prop_map(Step::AwaitEarlier),
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
                    let (idle, unsubmitted) = {
                        let core = ctx.shared.core.borrow();
                        let values = core.backend.op_value.borrow();
                        let b = &core.backend;
                        (b.counter == b.submitted, mine.iter().any(|op| !values.contains_key(op)))
                    };
                    let mut wait = std::pin::pin!(ctx.synchronize());
                    let first = std::future::poll_fn(|cx| Poll::Ready(wait.as_mut().poll(cx))).await;
                    if first.is_pending() && idle && unsubmitted && ctx.shared.options.flush == FlushPolicy::GroupCommit
                    {
                        // Group commit: the GPU had nothing to do, so the work this task waits
                        // for must have been submitted by the time its wait first returns.
                        let values = ctx.shared.core.borrow().backend.op_value.clone();
                        if let Some(op) = covered.iter().find(|op| !values.borrow().contains_key(op)) {
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
                    let counter = *ctx.shared.core.borrow().backend.counter_view.borrow();
                    let values = ctx.shared.core.borrow().backend.op_value.clone();
                    for op in covered {
                        match values.borrow().get(&op) {
                            Some(&v) if v <= counter => {}
                            other => world
                                .borrow_mut()
                                .violations
                                .push(format!("op {op} not complete at wake: {other:?} counter {counter}")),
                        }
                    }
                }
                Step::Yield => YieldNow(false).await,
                Step::Spawn(child) => {
                    let c = ctx.fork();
                    let index = world.borrow().handles.len();
                    let h = ctx.shared.spawn(run_task(c, child, world.clone(), index));
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

fn simulate(
    programs: Vec<Vec<Step>>,
    seed: u64,
    policy: WaitPolicy,
    faults: Faults,
    max_pending: usize,
) -> std::result::Result<(), TestCaseError> {
    let op_value = Rc::new(RefCell::new(HashMap::new()));
    let backend = SimBackend {
        pending: Vec::new(),
        submitted: 0,
        counter: 0,
        in_flight: VecDeque::new(),
        op_value: op_value.clone(),
        counter_view: Rc::new(RefCell::new(0)),
        rng: seed | 1,
        fail_submit_per_mille: faults.fail_submit_per_mille,
        timeout_per_mille: faults.timeout_per_mille,
        lose_at_call: faults.lose_at_call,
        calls: 0,
        lost: false,
        values: Vec::new(),
        waited: None,
    };
    let timeout = (faults.timeout_per_mille > 0).then(|| Duration::from_millis(1));
    let spin = if seed % 3 == 0 { Duration::from_micros(1) } else { Duration::ZERO };
    let flush = if (seed >> 8) % 2 == 0 { FlushPolicy::WhenIdle } else { FlushPolicy::GroupCommit };
    let adaptive = (seed >> 9) % 2 == 0;
    let shared = Shared::new(backend, Options { policy, timeout, max_pending, spin, adaptive, flush });
    let world = Rc::new(RefCell::new(World::default()));
    let next_op = Rc::new(RefCell::new(0));
    let no_faults = faults.fail_submit_per_mille == 0 && faults.timeout_per_mille == 0 && faults.lose_at_call.is_none();
    for p in programs {
        let ctx = SimCtx { shared: shared.clone(), state: Rc::default(), next_op: next_op.clone() };
        let index = world.borrow().handles.len();
        let h = shared.spawn(run_task(ctx, p, world.clone(), index));
        world.borrow_mut().handles.push(Some(h));
    }
    let s2 = shared.clone();
    shared.run_until(move || s2.tasks_alive() == 0);
    shared.flush_now();

    // Every task finished; with no faults, every one succeeded.
    prop_assert_eq!(shared.tasks_alive(), 0);
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
    let stats = shared.stats();
    let core = shared.core.borrow();
    // No waiter slot (and so no waker) outlives its future.
    prop_assert_eq!(core_waiters(&core), 0);
    // Values are handed out only by successful submits: 1, 2, 3, ... with no gaps.
    let values = &core.backend.values;
    prop_assert!(values.iter().enumerate().all(|(i, v)| *v == i as u64 + 1));
    prop_assert_eq!(stats.submits, values.len() as u64);
    prop_assert_eq!(stats.tasks_spawned, stats.tasks_completed);
    if no_faults && max_pending == usize::MAX {
        prop_assert!(stats.host_waits <= stats.flushes, "{}", stats);
        prop_assert!(stats.flushes <= stats.await_points, "{}", stats);
        prop_assert_eq!(stats.flushes, stats.submits);
    }
    Ok(())
}

fn core_waiters(core: &super::core::Core<SimBackend>) -> usize {
    core.waiter_count()
}

fn programs() -> impl Strategy<Value = Vec<Vec<Step>>> {
    prop::collection::vec(prop::collection::vec(step(), 0..8), 1..64)
}

fn policy() -> impl Strategy<Value = WaitPolicy> {
    prop_oneof![Just(WaitPolicy::All), Just(WaitPolicy::Oldest)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

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
