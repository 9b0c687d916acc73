//! Relating GPU timestamps to the host clock: calibrated timestamps where the device offers them, else a measured offset.

#[allow(unused_imports)]
use super::*;

/// `CLOCK_MONOTONIC` now, in nanoseconds (the clock `Instant` reads on Linux).
#[cfg(target_os = "linux")]
pub(super) fn monotonic_ns() -> Option<i128> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (r == 0).then(|| ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128)
}

#[cfg(not(target_os = "linux"))]
pub(super) fn monotonic_ns() -> Option<i128> {
    None
}

/// How GPU ticks map to the sink's host time: `host_ns = ticks * period - offset`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Calibration {
    pub(super) period_ns: f64,
    pub(super) offset_ns: f64,
    /// Bound on the mapping's error, in nanoseconds.
    pub error_ns: f64,
    pub calibrated: bool,
}

impl Calibration {
    pub(super) fn host_ns(&self, ticks: u64) -> i64 {
        (ticks as f64 * self.period_ns - self.offset_ns).round() as i64
    }
}

/// The calibration from `VK_EXT_calibrated_timestamps`, where offered with `CLOCK_MONOTONIC`.
pub(super) fn calibrated(sink: &Sink, device: &Device) -> Option<Calibration> {
    let ext = device.calibrated_timestamps()?;
    let base = sink.base_mono?;
    let infos = [
        vk::CalibratedTimestampInfoEXT::default().time_domain(vk::TimeDomainEXT::DEVICE),
        vk::CalibratedTimestampInfoEXT::default().time_domain(vk::TimeDomainEXT::CLOCK_MONOTONIC),
    ];
    let period = device.limits().timestamp_period_ns as f64;
    let mut best: Option<Calibration> = None;
    for _ in 0..8 {
        // SAFETY: the extension is enabled on this device and both domains were reported as
        // calibrateable when it was (see `Device`).
        let Ok((ts, dev)) = (unsafe { ext.get_calibrated_timestamps(&infos) }) else { return None };
        let host = (ts[1] as i128 - base) as f64;
        // Half a microsecond covers the pairing of `Instant` with CLOCK_MONOTONIC at the base.
        let c = Calibration {
            period_ns: period,
            offset_ns: ts[0] as f64 * period - host,
            error_ns: dev as f64 + 500.0,
            calibrated: true,
        };
        if best.is_none_or(|b| c.error_ns < b.error_ns) {
            best = Some(c);
        }
    }
    best
}

/// A measured offset: a submission that writes one timestamp, bracketed by two host clock
/// reads; the best of several rounds.
pub(super) fn measured(sink: &Sink, device: &Device) -> Result<Calibration> {
    let period = device.limits().timestamp_period_ns as f64;
    let ts = crate::Timestamps::new(device, 1)?;
    let mut best: Option<Calibration> = None;
    for _ in 0..8 {
        ts.reset();
        let t0 = sink.ns(Instant::now());
        ts.write_alone(0)?;
        let t1 = sink.ns(Instant::now());
        let tick = ts.ticks()?[0];
        let mid = (t0 + t1) as f64 / 2.0;
        let c = Calibration {
            period_ns: period,
            offset_ns: tick as f64 * period - mid,
            error_ns: (t1 - t0) as f64 / 2.0,
            calibrated: false,
        };
        if best.is_none_or(|b| c.error_ns < b.error_ns) {
            best = Some(c);
        }
    }
    Ok(best.expect("eight rounds"))
}
