//! Every combination of abort point × handle-drop point × panic point × device-loss point on a
//! small program, on the real device. A victim task runs three checkpoints; at each it may lose
//! the device or panic, then tells a controller task, which may abort it or drop its handle,
//! then it awaits the GPU. A bystander task does ordinary work alongside.

mod common;
use common::*;
use futures::channel::oneshot;
use std::cell::RefCell;
use std::rc::Rc;
use vkasync::{kernels, Buffer, Device, Error, Executor, Kernel, MemoryKind};

const POINTS: usize = 3;

#[derive(Debug, Clone, PartialEq)]
enum Ended {
    Returned(Result<(), Error>),
    /// Dropped before returning: cancelled, or unwound by a panic.
    Dropped,
}

struct Recorder(Rc<RefCell<Option<Ended>>>);
impl Drop for Recorder {
    fn drop(&mut self) {
        self.0.borrow_mut().get_or_insert(Ended::Dropped);
    }
}

#[derive(Debug, Clone, Copy)]
struct Combo {
    abort: Option<usize>,
    drop_handle: Option<usize>,
    panic: Option<usize>,
    loss: Option<usize>,
}

/// What the victim's end must be, from the order of events at each checkpoint: loss, then
/// panic, then (in the controller) abort, then drop; the awaited GPU result comes last.
fn oracle(c: Combo) -> (&'static str, bool) {
    for i in 0..POINTS {
        if c.panic == Some(i) {
            return ("panic", false);
        }
        let handle_held = c.drop_handle.is_none_or(|d| d >= i);
        if c.abort == Some(i) && handle_held {
            return ("cancelled", false);
        }
        if c.loss.is_some_and(|l| l <= i) {
            return ("lost", false);
        }
    }
    ("ok", true)
}

fn run_combo(device: &Device, mix: &Kernel, c: Combo) {
    let exec = Executor::new(device).unwrap();
    let ended = Rc::new(RefCell::new(None));
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..POINTS).map(|_| oneshot::channel::<()>()).unzip();
    let (ctx, m, dev, e2) = (exec.context(), mix.clone(), device.clone(), ended.clone());
    let victim = exec.spawn(async move {
        let rec = Recorder(e2.clone());
        let r: Result<(), Error> = async {
            let n = 128;
            let buf = Buffer::<u32>::new(&dev, n, MemoryKind::Device)?;
            ctx.upload(&buf, &vec![5u32; n])?;
            for (i, tx) in senders.into_iter().enumerate() {
                ctx.dispatch(&m, [2, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[n as u32, 10]))?;
                if c.loss == Some(i) {
                    lose_device(&dev);
                }
                if c.panic == Some(i) {
                    panic!("victim panics at {i}");
                }
                let _ = tx.send(());
                ctx.synchronize().await?;
            }
            let out = ctx.read(&buf).await?;
            let want = (0..POINTS).fold(5u32, |x, _| mix_cpu(x, 10));
            assert!(out.iter().all(|&x| x == want));
            Ok(())
        }
        .await;
        *e2.borrow_mut() = Some(Ended::Returned(r.clone()));
        drop(rec);
        r
    });
    let victim = Rc::new(RefCell::new(Some(victim)));
    let v = victim.clone();
    let controller = exec.spawn(async move {
        for (i, rx) in receivers.into_iter().enumerate() {
            if rx.await.is_err() {
                return; // the victim ended before this checkpoint
            }
            if c.abort == Some(i) {
                if let Some(h) = v.borrow().as_ref() {
                    h.abort();
                }
            }
            if c.drop_handle == Some(i) {
                drop(v.borrow_mut().take());
            }
        }
    });
    let bystander = {
        let (ctx, m, dev) = (exec.context(), mix.clone(), device.clone());
        exec.spawn(async move {
            let buf = Buffer::<u32>::new(&dev, 64, MemoryKind::Device)?;
            ctx.upload(&buf, &[1u32; 64])?;
            ctx.dispatch(&m, [1, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[64u32, 3]))?;
            let out = ctx.read(&buf).await?;
            assert!(out.iter().all(|&x| x == mix_cpu(1, 3)));
            Ok::<_, Error>(())
        })
    };
    exec.run();
    assert_eq!(exec.tasks_alive(), 0, "{c:?}: run returned with tasks alive");
    controller.join().unwrap();
    let (want, _) = oracle(c);
    let got_end = ended.borrow().clone();
    let held = victim.borrow_mut().take();
    match want {
        "ok" => assert_eq!(got_end, Some(Ended::Returned(Ok(()))), "{c:?}"),
        "lost" => assert_eq!(got_end, Some(Ended::Returned(Err(Error::DeviceLost))), "{c:?}"),
        "panic" | "cancelled" => assert_eq!(got_end, Some(Ended::Dropped), "{c:?}"),
        _ => unreachable!(),
    }
    if let Some(h) = held {
        let r = h.join();
        match want {
            "panic" => assert!(r.as_ref().unwrap_err().is_panic(), "{c:?}: {r:?}"),
            "cancelled" => assert!(r.as_ref().unwrap_err().is_cancelled(), "{c:?}: {r:?}"),
            "lost" => assert_eq!(r, Ok(Err(Error::DeviceLost)), "{c:?}"),
            _ => assert_eq!(r, Ok(Ok(())), "{c:?}"),
        }
    }
    let b = bystander.join().expect("the bystander never panics");
    if c.loss.is_none() {
        assert_eq!(b, Ok(()), "{c:?}: the bystander must carry on");
    } else {
        assert!(b.is_ok() || b == Err(Error::DeviceLost), "{c:?}: {b:?}");
    }
    drop(exec);
}

#[test]
fn every_drop_abort_panic_and_loss_point() {
    let _w = Watchdog::new(std::time::Duration::from_secs(300));
    // Panics in the victim are expected; keep the output readable.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.to_string().contains("victim panics") {
            default_hook(info);
        }
    }));
    let points = || std::iter::once(None).chain((0..POINTS).map(Some));
    let shared = device();
    // A device lost through the driver is never destroyed once work was in flight (its memory
    // is leaked by design), and drivers cap the devices a process holds (NVIDIA's at about 84).
    // After a simulated loss the GPU goes on, and closing the executor waits for it and frees
    // everything. On lavapipe every combination gets its own lost device; elsewhere (where the
    // loss is simulated) only the combinations with a loss and no handle drop run: 48 lost
    // devices, not 192.
    let every_loss = is_lavapipe(&shared);
    let shared_mix = Kernel::new(&shared, &kernels::MIX).unwrap();
    let mut tried = 0;
    for loss in points() {
        for panic in points() {
            for abort in points() {
                for drop_handle in points() {
                    let c = Combo { abort, drop_handle, panic, loss };
                    if loss.is_some() && drop_handle.is_some() && !every_loss {
                        continue;
                    }
                    // Shown with a failing test's output.
                    eprintln!("combination {tried}: {c:?}");
                    if loss.is_some() {
                        // A lost device stays lost: each such combination gets its own.
                        let dev = device();
                        let mix = Kernel::new(&dev, &kernels::MIX).unwrap();
                        run_combo(&dev, &mix, c);
                        assert_only_intended_validation_messages(&dev);
                        if loss_is_simulated(&dev) {
                            assert_eq!(dev.memory_report().live_buffers, 0, "{c:?}: leaked after a simulated loss");
                        }
                    } else {
                        run_combo(&shared, &shared_mix, c);
                        assert_no_validation_messages(&shared);
                        assert_eq!(shared.memory_report().live_buffers, 0, "{c:?}: leaked");
                    }
                    tried += 1;
                }
            }
        }
    }
    assert_eq!(tried, if every_loss { 4 * 4 * 4 * 4 } else { 4 * 4 * 4 + 3 * 4 * 4 });
    drop(shared_mix);
    finish(shared);
}
