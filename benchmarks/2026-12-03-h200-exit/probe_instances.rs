use vkasync::{kernels, Device, Kernel};
fn n() -> usize { std::env::var("PROBE_N").ok().and_then(|v| v.parse().ok()).unwrap_or(60) }
fn run(name: &str, validation: bool, kernel: bool) {
    for i in 0..n() {
        match Device::builder().validation(validation).build() {
            Ok(d) => {
                if kernel {
                    let _k = Kernel::new(&d, &kernels::MIX).unwrap();
                }
                drop(d);
            }
            Err(e) => {
                eprintln!("PROBE {name}: iteration {i} failed: {e:?}; adapters now: {:?}", vkasync::adapters().map(|a| a.len()));
                let fds = std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0);
                eprintln!("PROBE {name}: open fds {fds}");
                return;
            }
        }
    }
    let fds = std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0);
    eprintln!("PROBE {name}: all {} ok, open fds {fds}", n());
}
#[test]
fn a_validated_kernel() { run("validated_kernel", true, true) }
#[test]
fn b_plain_kernel() { run("plain_kernel", false, true) }
#[test]
fn c_validated_no_kernel() { run("validated_no_kernel", true, false) }
#[test]
fn d_adapters_only() {
    for i in 0..n() * 2 {
        if let Err(e) = vkasync::adapters() {
            eprintln!("PROBE adapters: iteration {i} failed: {e:?}");
            return;
        }
    }
    let fds = std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0);
    eprintln!("PROBE adapters: all {} ok, open fds {fds}", n() * 2);
}
