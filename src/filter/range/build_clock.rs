//! [`BuildClock`]: where range filter builders count their time (see `clock.rs`), and the
//! thread CPU clock they read.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Range filter build time (nanoseconds) and blocks built, summed over the builders that
/// count into it.
#[derive(Debug, Default)]
pub struct BuildClock {
    nanos: AtomicU64,
    built: AtomicU64,
}

impl BuildClock {
    /// Nanoseconds builders spent pushing keys and building blocks.
    pub fn nanos(&self) -> u64 {
        self.nanos.load(Relaxed)
    }

    /// Blocks built.
    pub fn built(&self) -> u64 {
        self.built.load(Relaxed)
    }

    /// Counts one block built in `nanos`.
    pub(super) fn record(&self, nanos: u64) {
        self.nanos.fetch_add(nanos, Relaxed);
        self.built.fetch_add(1, Relaxed);
    }
}

/// This thread's CPU time so far, in nanoseconds.
pub(super) fn thread_cpu() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

/// This thread's CPU time since `start` (a [`thread_cpu`] reading on this thread).
pub(super) fn cpu_since(start: u64) -> u64 {
    thread_cpu().saturating_sub(start)
}
