//! [`BuildClock`]: where range filter builders count their time (see `clock.rs`).

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
