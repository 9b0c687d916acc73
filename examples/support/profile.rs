//! Profiling only the timed intervals of a benchmark program: with `VKASYNC_PERF_CTL` set to the
//! control FIFO of `perf record -D -1 --control fifo:CTL[,ACK]`, [`timed`] switches sampling on
//! and [`untimed`] off, so set-up, warm-up checks and verification stay out of the profile. With
//! `VKASYNC_PERF_ACK` naming the acknowledgement FIFO as well, each switch waits for `perf` to
//! confirm it, so the profile's edges are the interval's.

use std::io::{BufRead, Write};

/// Switches the profiler's sampling on (at the start of a timed interval).
pub fn timed() {
    control("enable");
}

/// Switches the profiler's sampling off (at the end of a timed interval).
pub fn untimed() {
    control("disable");
}

fn control(command: &str) {
    let Some(ctl) = std::env::var_os("VKASYNC_PERF_CTL") else { return };
    let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(ctl) else { return };
    if writeln!(f, "{command}").is_err() {
        return;
    }
    drop(f);
    if let Some(ack) = std::env::var_os("VKASYNC_PERF_ACK") {
        if let Ok(f) = std::fs::File::open(ack) {
            let _ = std::io::BufReader::new(f).read_line(&mut String::new());
        }
    }
}
