// Throwaway probe (not committed): do many validated devices alone crash the process at exit?
use vkasync::{kernels, Device, Executor, Kernel};
fn n() -> usize { std::env::var("PROBE_N").ok().and_then(|v| v.parse().ok()).unwrap_or(49) }
#[test]
fn devices_only() {
    for _ in 0..n() {
        let d = Device::builder().validation(true).build().unwrap();
        let _k = Kernel::new(&d, &kernels::MIX).unwrap();
    }
}
#[test]
fn devices_with_an_executor_job() {
    for _ in 0..n() {
        let d = Device::builder().validation(true).build().unwrap();
        let k = Kernel::new(&d, &kernels::MIX).unwrap();
        let e = Executor::new(&d).unwrap();
        let (ctx, dev) = (e.context(), d.clone());
        e.block_on(async move {
            let b = vkasync::Buffer::<u32>::new(&dev, 64, vkasync::MemoryKind::Device).unwrap();
            ctx.dispatch(&k, [1, 1, 1], &[(&b).into()], bytemuck::bytes_of(&[64u32, 1])).unwrap();
            ctx.read(&b).await.unwrap();
        });
    }
}
