//! What the modes run on: per device, the `mix` kernel, an executor per executor mode, the
//! queues and runtimes of the tokio modes, and the hand-written batch.

use crate::jobs::{expected, run_executor, run_sequential, run_tokio, run_tokio_set, ExecBreakdown};
use crate::raw::RawBatch;
use crate::support::queues::{queue_builder, queue_set, set_devices};
use vkasync::{kernels, Device, Error, Executor, FlushPolicy, Kernel, PerDevice, Queue, QueueSet, WaitPolicy};

/// What the modes run on: a device with its kernel, executors and hand-written batch.
pub struct Rig {
    device: Device,
    mix: Kernel,
    pub exec_all: Executor,
    exec_oldest: Executor,
    exec_eager: Executor,
    exec_spin: Executor,
    exec_group: Executor,
    exec_nospin: Executor,
    exec_ungrouped: Executor,
    exec_traced: Option<Executor>,
    exec_timed: Option<Executor>,
    exec_traced_cmds: Option<Executor>,
    queue: Queue,
    queue_ungrouped: Queue,
    /// Tokio runtimes by mode name (16 workers for `tokio`, N for `tokio-wN`).
    runtimes: Vec<(&'static str, tokio::runtime::Runtime)>,
    /// For `tokio-set`: the set, its kernels and a 16-worker runtime.
    set: Option<(QueueSet, PerDevice<Kernel>, tokio::runtime::Runtime)>,
    raw: RawBatch,
}

/// Settings of the `executor`, `executor-traced`, `executor-traced-cmds` and `executor-timed`
/// modes' executors (`--max-pending-ops N`, `--max-group-ops N`, `--no-spin`), for measuring a
/// trace's cost at a chosen flush size, for example its added instructions per task under
/// callgrind on lavapipe, where flushes are otherwise far larger than on a fast GPU, and for
/// sweeping the group bound on a GPU.
#[derive(Clone, Copy)]
pub struct ExecKnobs {
    pub max_pending_ops: Option<usize>,
    pub max_group_ops: Option<usize>,
    pub no_spin: bool,
}

impl ExecKnobs {
    fn builder(self, device: &Device) -> vkasync::ExecutorBuilder {
        let mut b = Executor::builder(device);
        if let Some(n) = self.max_pending_ops {
            b = b.max_pending_ops(n);
        }
        if let Some(n) = self.max_group_ops {
            b = b.max_group_ops(n);
        }
        if self.no_spin {
            b = b.spin_before_wait(std::time::Duration::ZERO);
        }
        b
    }
}

impl Rig {
    pub fn new(
        device: Device,
        eager_ops: usize,
        modes: &[String],
        (gpus, lanes, set_workers, set_group_ops): (usize, usize, usize, Option<usize>),
        knobs: ExecKnobs,
    ) -> Result<Rig, Error> {
        let mix = Kernel::new(&device, &kernels::MIX)?;
        let runtimes = [
            ("tokio", 16),
            ("tokio-ungrouped", 16),
            ("tokio-w1", 1),
            ("tokio-w2", 2),
            ("tokio-w4", 4),
            ("tokio-w8", 8),
            ("tokio-w32", 32),
        ]
        .into_iter()
        .filter(|(m, _)| modes.iter().any(|x| x == m))
        .map(|(m, w)| (m, tokio::runtime::Builder::new_multi_thread().worker_threads(w).build().expect("tokio")))
        .collect();
        let set = match modes.iter().any(|m| m == "tokio-set") {
            true => {
                let devices = set_devices(&device, gpus, lanes)?;
                let set = queue_set(&devices, set_group_ops)?;
                let mixes = set.per_device(|d| Kernel::new(d, &kernels::MIX))?;
                let rt =
                    tokio::runtime::Builder::new_multi_thread().worker_threads(set_workers).build().expect("tokio");
                eprintln!("tokio-set over: {:?}", devices.iter().map(|d| d.info().name.clone()).collect::<Vec<_>>());
                Some((set, mixes, rt))
            }
            false => None,
        };
        let rig = Rig {
            set,
            exec_group: Executor::builder(&device).flush_policy(FlushPolicy::GroupCommit).build()?,
            exec_nospin: Executor::builder(&device).spin_before_wait(std::time::Duration::ZERO).build()?,
            exec_ungrouped: Executor::builder(&device).max_group_ops(usize::MAX).build()?,
            exec_traced: match modes.iter().any(|m| m == "executor-traced") {
                true => Some(
                    knobs
                        .builder(&device)
                        .trace(std::env::temp_dir().join(format!("bench_tasks-{}.json", std::process::id())))
                        .build()?,
                ),
                false => None,
            },
            exec_traced_cmds: match modes.iter().any(|m| m == "executor-traced-cmds") {
                true => Some(
                    knobs
                        .builder(&device)
                        .trace(std::env::temp_dir().join(format!("bench_tasks-cmds-{}.json", std::process::id())))
                        .trace_detail(vkasync::trace::TraceDetail::Commands)
                        .build()?,
                ),
                false => None,
            },
            exec_timed: match modes.iter().any(|m| m == "executor-timed") {
                true => Some(knobs.builder(&device).gpu_timing(true).build()?),
                false => None,
            },
            queue: queue_builder(&device).build()?,
            queue_ungrouped: queue_builder(&device).max_group_ops(usize::MAX).build()?,
            runtimes,
            exec_all: knobs.builder(&device).build()?,
            exec_oldest: Executor::builder(&device).wait_policy(WaitPolicy::Oldest).build()?,
            exec_eager: Executor::builder(&device).max_pending_ops(eager_ops).build()?,
            exec_spin: Executor::builder(&device).spin_before_wait(std::time::Duration::from_micros(50)).build()?,
            raw: RawBatch::new(&device),
            mix,
            device,
        };
        // Warm-up: compile the pipeline on the driver.
        run_sequential(&rig.device, &rig.mix, 1, 64, 1, &expected(1, 64, 1), true)?;
        Ok(rig)
    }

    /// Runs one mode once; the breakdown for the executor and raw modes.
    pub fn run(
        &self,
        mode: &str,
        tasks: usize,
        n: usize,
        k: u32,
        want: &std::rc::Rc<Vec<Vec<u32>>>,
        zeroed: bool,
    ) -> Result<Option<ExecBreakdown>, Error> {
        let mix = &self.mix;
        Ok(match mode {
            "sequential" => run_sequential(&self.device, mix, tasks, n, k, want, zeroed).map(|_| None)?,
            "executor" => Some(run_executor(&self.exec_all, mix, tasks, n, k, want, zeroed)?),
            "executor-oldest" => Some(run_executor(&self.exec_oldest, mix, tasks, n, k, want, zeroed)?),
            "executor-eager" => Some(run_executor(&self.exec_eager, mix, tasks, n, k, want, zeroed)?),
            "executor-spin" => Some(run_executor(&self.exec_spin, mix, tasks, n, k, want, zeroed)?),
            "executor-group" => Some(run_executor(&self.exec_group, mix, tasks, n, k, want, zeroed)?),
            "executor-nospin" => Some(run_executor(&self.exec_nospin, mix, tasks, n, k, want, zeroed)?),
            "executor-ungrouped" => Some(run_executor(&self.exec_ungrouped, mix, tasks, n, k, want, zeroed)?),
            "executor-traced" => Some(run_executor(
                self.exec_traced.as_ref().expect("made for the mode"),
                mix,
                tasks,
                n,
                k,
                want,
                zeroed,
            )?),
            "executor-traced-cmds" => Some(run_executor(
                self.exec_traced_cmds.as_ref().expect("made for the mode"),
                mix,
                tasks,
                n,
                k,
                want,
                zeroed,
            )?),
            "executor-timed" => Some(run_executor(
                self.exec_timed.as_ref().expect("made for the mode"),
                mix,
                tasks,
                n,
                k,
                want,
                zeroed,
            )?),
            "tokio-set" => {
                let (set, mixes, rt) = self.set.as_ref().expect("made for the mode");
                let want = std::sync::Arc::new((**want).clone());
                Some(run_tokio_set(rt, set, mixes, tasks, n, k, &want, zeroed)?)
            }
            t if t.starts_with("tokio") => {
                let rt = &self.runtimes.iter().find(|(m, _)| *m == t).expect("runtime").1;
                let want = std::sync::Arc::new((**want).clone());
                let queue = if t == "tokio-ungrouped" { &self.queue_ungrouped } else { &self.queue };
                Some(run_tokio(rt, queue, mix, tasks, n, k, &want, zeroed)?)
            }
            _ => Some(self.raw.run(mix, tasks, n, k, want, zeroed)?),
        })
    }

    /// Prints the counters of every executor and of the tokio modes' queue; `tag` names the rig's
    /// device.
    pub fn print_stats(&self, tag: &str) {
        eprintln!("executor{tag} {}", self.exec_all.stats());
        eprintln!("executor-oldest{tag} {}", self.exec_oldest.stats());
        eprintln!("executor-eager{tag} {}", self.exec_eager.stats());
        eprintln!("executor-spin{tag} {}", self.exec_spin.stats());
        eprintln!("executor-group{tag} {}", self.exec_group.stats());
        let e = self.exec_all.stats();
        eprintln!("executor (spin){tag} spin_ms={:.1}", e.spin_ns as f64 / 1e6);
        eprintln!("executor-nospin{tag} {}", self.exec_nospin.stats());
        eprintln!("executor-ungrouped{tag} {}", self.exec_ungrouped.stats());
        let q = self.queue.stats();
        eprintln!("queue (tokio modes){tag} {q} spin_ms={:.1}", q.spin_ns as f64 / 1e6);
        let detail = |s: vkasync::Stats| {
            format!(
                "{s} spin_ms={:.1} wait_ms={:.1} handed={}",
                s.spin_ns as f64 / 1e6,
                s.wait_ns as f64 / 1e6,
                s.handed_flushes
            )
        };
        for (mode, exec) in [("executor-timed", &self.exec_timed), ("executor-traced", &self.exec_traced)] {
            if let Some(e) = exec {
                eprintln!("{mode}{tag} {}", detail(e.stats()));
            }
        }
        eprintln!("executor (detail){tag} {}", detail(self.exec_all.stats()));
    }
}
