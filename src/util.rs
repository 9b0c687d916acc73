//! Small helpers every layer uses: poison-tolerant locking and a fast hasher.
//!
//! The hasher: a fast hasher for small integer-like keys (buffer ids, Vulkan handles) in per-flush maps,
//! where the standard SipHash would cost more than the work being tracked. Not for keys an
//! attacker chooses.

use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, going on with the data if another thread panicked while holding it (every
/// structure locked here stays consistent across a panic: none is left half-updated by code that
/// can unwind).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Multiply-rotate hashing of whole words (the FxHash scheme).
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// `HashMap` with [`IdHasher`].
pub(crate) type IdMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<IdHasher>>;
