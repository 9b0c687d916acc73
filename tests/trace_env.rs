//! `VKASYNC_TRACE=path` traces every executor and queue of a process into one file, with no
//! change to the program. (One test in its own binary: it sets the variable before any queue
//! exists.)

mod common;

use vkasync::{kernels, Buffer, Executor, Kernel, MemoryKind, Queue};

#[test]
fn the_environment_variable_traces_every_queue_into_one_file() {
    let path = std::env::temp_dir().join(format!("vkasync-trace-env-{}.json", std::process::id()));
    std::env::set_var("VKASYNC_TRACE", &path);
    let device = common::device();
    let mix = Kernel::new(&device, &kernels::MIX).unwrap();
    let job = |ctx: vkasync::Ctx, mix: Kernel| async move {
        let buf = Buffer::<u32>::new(ctx.device(), 128, MemoryKind::Device)?;
        ctx.dispatch(&mix, [2, 1, 1], &[(&buf).into()], bytemuck::bytes_of(&[128u32, 1]))?;
        ctx.read(&buf).await.map(|v| v.len())
    };
    {
        let exec = Executor::new(&device).unwrap();
        assert_eq!(exec.block_on(job(exec.context(), mix.clone())).unwrap(), 128);
    }
    let queue = Queue::new(&device).unwrap();
    assert_eq!(futures::executor::block_on(job(queue.context(), mix.clone())).unwrap(), 128);
    drop(queue);
    // The queue's driver writes the file as it ends (closing does not block).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            let events = v["traceEvents"].as_array().unwrap();
            let queues =
                events.iter().filter(|e| e["ph"] == "M" && e["pid"] == 2 && e["name"] == "thread_name").count();
            let mixes: std::collections::HashSet<u64> = events
                .iter()
                .filter(|e| e["pid"] == 2 && e["name"].as_str().is_some_and(|n| n.starts_with("mix")))
                .map(|e| e["tid"].as_u64().unwrap())
                .collect();
            if queues == 2 && mixes.len() == 2 {
                break;
            }
        }
        assert!(std::time::Instant::now() < deadline, "the trace does not hold both queues: {text}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(&path);
    common::finish(device);
}
