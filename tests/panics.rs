//! Panics from any part of a task end that task with a `JoinError`, never the executor's loop,
//! and leave the executor's state as it was.

mod common;

use common::{device, finish, Watchdog};
use vkasync::{kernels, Buffer, Executor, Kernel, MemoryKind};

/// A local whose destructor panics.
struct PanicOnDrop(&'static str);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("{}", self.0);
    }
}

#[test]
fn a_panic_while_dropping_an_aborted_task_is_that_tasks_join_error() {
    let _w = Watchdog::new(std::time::Duration::from_secs(120));
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let exec = Executor::new(&device).unwrap();
    let (ctx, m, dev) = (exec.context(), mix.clone(), device.clone());
    let victim = exec.spawn(async move {
        let _bomb = PanicOnDrop("boom while dropping");
        let buf = Buffer::<u32>::new(&dev, 64, MemoryKind::Device).unwrap();
        ctx.dispatch(&m, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[64u32, 1])).unwrap();
        ctx.synchronize().await.unwrap();
        // Parked forever unless aborted.
        std::future::pending::<()>().await;
    });
    let (ctx2, m2, dev2) = (exec.context(), mix.clone(), device.clone());
    let other = exec.spawn(async move {
        let buf = Buffer::<u32>::new(&dev2, 64, MemoryKind::Device).unwrap();
        ctx2.upload(&buf, &[7u32; 64]).unwrap();
        ctx2.dispatch(&m2, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[64u32, 1])).unwrap();
        ctx2.read(&buf).await
    });
    // Run until the victim waits in `pending`, then abort it while it waits.
    assert!(exec.block_on({
        let ctx = exec.context();
        async move { ctx.synchronize().await.is_ok() }
    }));
    victim.abort();
    // Must not panic: the panic belongs to the aborted task.
    exec.run();
    let err = victim.join().unwrap_err();
    assert!(err.is_panic(), "{err}");
    assert_eq!(err.panic_message(), Some("boom while dropping"));
    assert_eq!(other.join().unwrap().unwrap(), vec![common::mix_cpu(7, 1); 64]);
    assert_eq!(exec.tasks_alive(), 0);
    drop((exec, mix));
    finish(device);
}

#[test]
fn a_panic_while_dropping_a_finished_tasks_locals_is_a_join_error() {
    let device = device();
    let exec = Executor::new(&device).unwrap();
    let h = exec.spawn(async move {
        let _bomb = PanicOnDrop("boom at the end");
        5u32
    });
    exec.run();
    let err = h.join().unwrap_err();
    assert!(err.is_panic(), "{err}");
    assert_eq!(err.panic_message(), Some("boom at the end"));
    drop(exec);
    finish(device);
}

#[test]
fn a_task_panicking_while_dropped_at_shutdown_does_not_unwind_out_of_the_drop() {
    let device = device();
    let exec = Executor::new(&device).unwrap();
    let h = exec.spawn(async move {
        let _bomb = PanicOnDrop("boom at shutdown");
        std::future::pending::<()>().await;
    });
    // One turn so that the task is parked with its local alive.
    exec.block_on(async {});
    drop(exec);
    assert!(h.join().unwrap_err().is_cancelled());
    finish(device);
}

#[test]
fn after_a_panicking_abort_an_await_outside_the_executor_still_completes() {
    let _w = Watchdog::new(std::time::Duration::from_secs(120));
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let exec = Executor::new(&device).unwrap();
    let victim = exec.spawn(async move {
        let _bomb = PanicOnDrop("boom");
        std::future::pending::<()>().await;
    });
    exec.block_on(async {});
    victim.abort();
    exec.run();
    assert!(victim.join().unwrap_err().is_panic());
    // The executor is not running (its running count was restored on the unwind): a GPU wait
    // polled elsewhere is submitted and waited for by the queue's driver, not left hanging.
    let ctx = exec.context();
    let buf = Buffer::<u32>::new(&device, 64, MemoryKind::Device).unwrap();
    ctx.dispatch(&mix, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[64u32, 1])).unwrap();
    futures::executor::block_on(ctx.synchronize()).unwrap();
    let c = ctx.clone();
    exec.block_on(async move { c.synchronize().await }).unwrap();
    drop((exec, ctx, buf, mix));
    finish(device);
}

#[test]
fn a_panic_resumed_by_block_on_leaves_the_executor_usable() {
    let _w = Watchdog::new(std::time::Duration::from_secs(120));
    let device = device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let exec = Executor::new(&device).unwrap();
    // `join` runs the loop; a task that panics is reported, and the loop's state is restored
    // even when a panic unwinds through `block_on`.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        exec.block_on(async { panic!("boom in block_on") });
    }));
    assert!(r.is_err());
    let ctx = exec.context();
    let buf = Buffer::<u32>::new(&device, 64, MemoryKind::Device).unwrap();
    ctx.dispatch(&mix, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[64u32, 1])).unwrap();
    futures::executor::block_on(ctx.synchronize()).unwrap();
    let c = ctx.clone();
    exec.block_on(async move { c.synchronize().await }).unwrap();
    drop((exec, ctx, buf, mix));
    finish(device);
}
