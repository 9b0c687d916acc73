//! 500 independent saxpy jobs as tasks on vkasync's executor: one submit and one host wait for
//! all of them, every result checked.
use vkasync::{Buffer, Error, Executor, Kernel, MemoryKind};

/// `kernels::SAXPY`, from `shaders/saxpy.comp` (see build.rs).
mod kernels {
    include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
}

fn main() -> Result<(), Error> {
    let device = vkasync::Device::new()?;
    // Compiled and validated at build time by vkasync-build.
    let saxpy = Kernel::new(&device, &kernels::SAXPY)?;
    assert_eq!(kernels::ALL.len(), 1);
    // Its reflection, read at build time.
    assert_eq!((kernels::saxpy::BINDINGS, kernels::saxpy::READ_ONLY), (&[0, 1][..], &[true, false][..]));
    assert_eq!(kernels::saxpy::PUSH_CONSTANT_BYTES, 8);
    let local = kernels::saxpy::LOCAL_SIZE[0];
    let exec = Executor::builder(&device).flush_policy(vkasync::FlushPolicy::WhenIdle).build()?;
    let n = 1000u32;
    let jobs: Vec<_> = (0..500u32)
        .map(|j| {
            let saxpy = saxpy.clone();
            exec.spawn_with(move |ctx| async move {
                let x: Vec<f32> = (0..n).map(|i| (i + j) as f32).collect();
                let y: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
                let bx = Buffer::<f32>::new(ctx.device(), n as usize, MemoryKind::Device)?;
                let by = Buffer::<f32>::new(ctx.device(), n as usize, MemoryKind::Device)?;
                ctx.upload(&bx, &x)?;
                ctx.upload(&by, &y)?;
                let push: Vec<u8> = [n.to_le_bytes(), 2.0f32.to_le_bytes()].concat();
                ctx.dispatch(&saxpy, [n.div_ceil(local), 1, 1], &[(&bx).into(), (&by).into()], &push)?;
                let out = ctx.read(&by).await?;
                Ok::<_, Error>(out.iter().zip(x.iter().zip(&y)).all(|(o, (x, y))| *o == 2.0 * x + y))
            })
        })
        .collect();
    let ok = exec.block_on(async {
        let mut ok = 0;
        for h in jobs {
            ok += h.await.expect("a job panicked")? as usize;
        }
        Ok::<_, Error>(ok)
    })?;
    let stats = exec.stats();
    println!("{ok} of 500 saxpy jobs verified; {stats}");
    assert_eq!(ok, 500, "every job's result is right");
    assert_eq!((stats.submits, stats.host_waits <= 1), (1, true), "one submit, at most one host wait");
    Ok(())
}
