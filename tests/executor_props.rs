//! Property tests of the executor on the real device: random task programs, checked against a
//! CPU model, with validation on. `PROPTEST_CASES` raises the case count (default 32).

mod common;
use common::*;
use proptest::prelude::*;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use vkasync::{kernels, Buffer, Ctx, Device, Error, Executor, JoinHandle, Kernel, MemoryKind, Spawner, WaitPolicy};

#[derive(Debug, Clone)]
enum Step {
    Mix(u32),
    Sync,
    Yield,
    Spawn(Vec<Step>),
    AwaitEarlier(u8),
    DropInFlight(u32),
    ReadCompare,
}

fn step() -> impl Strategy<Value = Step> {
    let leaf = prop_oneof![
        4 => (0u32..200).prop_map(Step::Mix),
        2 => Just(Step::Sync),
        1 => Just(Step::Yield),
        1 => any::<u8>().prop_map(Step::AwaitEarlier),
        1 => (1u32..500).prop_map(Step::DropInFlight),
        2 => Just(Step::ReadCompare),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| prop::collection::vec(inner, 0..5).prop_map(Step::Spawn))
}

struct YieldNow(bool);
impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

type Handles = Rc<RefCell<Vec<Option<JoinHandle<Result<(), Error>>>>>>;

fn task(
    ctx: Ctx,
    sp: Spawner,
    mix: Kernel,
    steps: Vec<Step>,
    handles: Handles,
    index: usize,
    n: usize,
) -> Pin<Box<dyn Future<Output = Result<(), Error>>>> {
    Box::pin(async move {
        let mut model: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2654435761) ^ index as u32).collect();
        let buf = Buffer::<u32>::new(ctx.device(), n, MemoryKind::Device)?;
        ctx.upload(&buf, &model)?;
        let push = |k: u32| [n as u32, k];
        let groups = [mix.groups_for(n as u64), 1, 1];
        for s in steps {
            match s {
                Step::Mix(k) => {
                    ctx.dispatch(&mix, groups, &[(&buf).into()], bytemuck::bytes_of(&push(k)))?;
                    model.iter_mut().for_each(|x| *x = mix_cpu(*x, k));
                }
                Step::Sync => ctx.synchronize().await?,
                Step::Yield => YieldNow(false).await,
                Step::Spawn(child) => {
                    let i = handles.borrow().len();
                    let h = sp.spawn(task(ctx.fork(), sp.clone(), mix.clone(), child, handles.clone(), i, n / 2 + 1));
                    handles.borrow_mut().push(Some(h));
                }
                Step::AwaitEarlier(k) => {
                    if index > 0 {
                        let h = handles.borrow_mut()[k as usize % index].take();
                        if let Some(h) = h {
                            h.await.expect("joined task panicked")?;
                        }
                    }
                }
                Step::DropInFlight(k) => {
                    let tmp = Buffer::<u32>::new(ctx.device(), 4096, MemoryKind::Device)?;
                    ctx.upload(&tmp, &vec![7u32; 4096])?;
                    ctx.dispatch(&mix, [64, 1, 1], &[(&tmp).into()], bytemuck::bytes_of(&[4096u32, k]))?;
                    drop(tmp);
                }
                Step::ReadCompare => {
                    let got = ctx.read(&buf).await?;
                    assert_eq!(got, model, "task {index}: buffer differs from the CPU model");
                }
            }
        }
        let got = ctx.read(&buf).await?;
        assert_eq!(got, model, "task {index}: final buffer differs from the CPU model");
        Ok(())
    })
}

fn shared() -> &'static (Device, Kernel) {
    static SHARED: OnceLock<(Device, Kernel)> = OnceLock::new();
    SHARED.get_or_init(|| {
        let d = device();
        let k = Kernel::new(&d, &kernels::MIX).unwrap();
        (d, k)
    })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn random_task_programs_match_the_cpu_model(
        programs in prop::collection::vec(prop::collection::vec(step(), 0..8), 1..64),
        n in 1usize..300,
        oldest in any::<bool>(),
    ) {
        let _w = Watchdog::new(std::time::Duration::from_secs(120));
        let (device, mix) = shared();
        let policy = if oldest { WaitPolicy::Oldest } else { WaitPolicy::All };
        let exec = Executor::builder(device).wait_policy(policy).build().unwrap();
        let handles: Handles = Rc::default();
        for p in programs {
            let i = handles.borrow().len();
            let h = exec.spawn(task(exec.context(), exec.spawner(), mix.clone(), p, handles.clone(), i, n));
            handles.borrow_mut().push(Some(h));
        }
        exec.run();
        // Every task completed, with a buffer equal to the model (asserted inside).
        prop_assert_eq!(exec.tasks_alive(), 0);
        let all: Vec<_> = handles.borrow_mut().drain(..).flatten().collect();
        for h in all {
            h.join().expect("task panicked").expect("task failed");
        }
        let s = exec.stats();
        prop_assert_eq!(s.tasks_spawned, s.tasks_completed);
        prop_assert!(s.host_waits <= s.flushes, "{}", s);
        prop_assert!(s.flushes <= s.await_points, "{}", s);
        drop(exec);
        prop_assert_eq!(device.validation_message_count(), 0, "{:?}", device.validation_messages());
        prop_assert_eq!(device.memory_report().live_buffers, 0);
    }
}
