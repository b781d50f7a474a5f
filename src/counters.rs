//! Statistics counters that lookups bump without a locked instruction.
//!
//! A `fetch_add` on x86 is a locked instruction and a full memory barrier: every lookup used
//! to pay one per table probed, and the barrier kept the CPU from overlapping the filter
//! cache misses of consecutive tables. Here each thread owns a *slot* (one cache line of
//! counters) in every [`Sharded`] set while it lives; only the owner writes its slot, so an
//! increment is a plain load and store, and a reader sums the slots. Slots are claimed from
//! a process-wide pool of [`PRIVATE_SLOTS`] on a thread's first increment and given back when
//! the thread exits; threads beyond the pool share one more slot, updated with `fetch_add`.
//! Counts are exact either way: a slot has one writer at a time, and handing it over goes
//! through the pool's acquire/release operations.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Slots a thread can own; further threads share slot `PRIVATE_SLOTS`.
pub const PRIVATE_SLOTS: usize = 16;
const SHARED: usize = PRIVATE_SLOTS;
const UNCLAIMED: usize = usize::MAX;

/// Bit `i` set: private slot `i` is owned by a live thread.
static CLAIMED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's slot (`UNCLAIMED` until its first increment).
    static SLOT: Cell<usize> = const { Cell::new(UNCLAIMED) };
    /// Gives the slot back when the thread exits.
    static RELEASE: SlotRelease = const { SlotRelease };
}

struct SlotRelease;

impl Drop for SlotRelease {
    fn drop(&mut self) {
        let s = SLOT.with(|c| c.replace(SHARED));
        if s < PRIVATE_SLOTS {
            CLAIMED.fetch_and(!(1 << s), Ordering::Release);
        }
    }
}

#[cold]
fn claim() -> usize {
    let mut cur = CLAIMED.load(Ordering::Relaxed);
    let mine = loop {
        let free = !cur & ((1u64 << PRIVATE_SLOTS) - 1);
        if free == 0 {
            break SHARED;
        }
        let bit = free.trailing_zeros() as usize;
        match CLAIMED.compare_exchange_weak(
            cur,
            cur | 1 << bit,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => break bit,
            Err(now) => cur = now,
        }
    };
    // Register the release; during thread teardown this fails and the thread stays shared.
    if mine < PRIVATE_SLOTS && RELEASE.try_with(|_| ()).is_err() {
        CLAIMED.fetch_and(!(1 << mine), Ordering::Release);
        SLOT.with(|c| c.set(SHARED));
        return SHARED;
    }
    SLOT.with(|c| c.set(mine));
    mine
}

/// The calling thread's slot.
#[inline]
fn slot() -> usize {
    let s = SLOT.with(|c| c.get());
    if s == UNCLAIMED {
        claim()
    } else {
        s
    }
}

#[repr(align(64))]
struct Slot<const N: usize>([AtomicU64; N]);

/// `N` counters, one slot per thread (see the module documentation).
///
/// The slots are inline (no pointer to follow on a lookup): `(PRIVATE_SLOTS + 1) × 64` bytes.
pub struct Sharded<const N: usize> {
    slots: [Slot<N>; PRIVATE_SLOTS + 1],
}

impl<const N: usize> Default for Sharded<N> {
    fn default() -> Self {
        Sharded {
            slots: std::array::from_fn(|_| Slot(std::array::from_fn(|_| AtomicU64::new(0)))),
        }
    }
}

impl<const N: usize> Sharded<N> {
    /// Adds `n` to counter `i`.
    #[inline]
    pub fn add(&self, i: usize, n: u64) {
        let s = slot();
        let Some(c) = self.slots.get(s).and_then(|slot| slot.0.get(i)) else {
            return;
        };
        if s == SHARED {
            c.fetch_add(n, Ordering::Relaxed);
        } else {
            // Only this thread writes this slot: no read-modify-write needed.
            c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        }
    }

    /// Adds each `(i, n)` of `adds`: `n` to counter `i` (the thread's slot found once).
    #[inline]
    pub fn add_all<const K: usize>(&self, adds: [(usize, u64); K]) {
        let s = slot();
        let Some(slot) = self.slots.get(s) else {
            return;
        };
        for (i, n) in adds {
            let Some(c) = slot.0.get(i) else {
                continue;
            };
            if s == SHARED {
                c.fetch_add(n, Ordering::Relaxed);
            } else {
                c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
            }
        }
    }

    /// The sum of counter `i` over all slots.
    pub fn get(&self, i: usize) -> u64 {
        self.slots
            .iter()
            .map(|s| s.0.get(i).map_or(0, |c| c.load(Ordering::Relaxed)))
            .fold(0, u64::wrapping_add)
    }
}

impl<const N: usize> std::fmt::Debug for Sharded<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries((0..N).map(|i| self.get(i))).finish()
    }
}

/// Counters of one table (and its current filter): one cache line per thread slot.
#[derive(Debug, Default)]
pub struct TableCounters(Sharded<9>);

macro_rules! table_counters {
    ($($(#[$doc:meta])* $name:ident $add:ident = $i:expr;)*) => {
        impl TableCounters {
            $(
                $(#[$doc])*
                pub fn $name(&self) -> u64 {
                    self.0.get($i)
                }
                #[doc = concat!("Adds `n` to [`", stringify!($name), "`](Self::", stringify!($name), ").")]
                #[inline]
                pub fn $add(&self, n: u64) {
                    self.0.add($i, n)
                }
            )*
        }
    };
}

table_counters! {
    /// Filter said "absent": data-block reads avoided.
    negatives add_negatives = 0;
    /// Filter said "maybe".
    positives add_positives = 1;
    /// Filter said "maybe" but the table did not hold the key.
    false_positives add_false_positives = 2;
    /// Lookups inside the key range of a table without a filter that missed.
    unfiltered_misses add_unfiltered_misses = 3;
    /// Data blocks read from the table file (block cache misses and reads that bypass it).
    block_reads add_block_reads = 4;
    /// Bytes read from the table file.
    bytes_read add_bytes_read = 5;
    /// Data blocks found in the block cache (no read).
    cache_hits add_cache_hits = 6;
    /// Data blocks looked for in the block cache and not found (then read from the file).
    cache_misses add_cache_misses = 7;
    /// Data blocks scans took from an L0 table (cached or read): what L0's extra sorted runs
    /// cost scans, the rent of [`Options::scan_drain`](crate::Options::scan_drain).
    scan_l0_blocks add_scan_l0_blocks = 8;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// More threads than private slots, each bumping every counter: nothing is lost, and
    /// the slots are given back when the threads exit.
    #[test]
    fn counts_are_exact_across_many_threads() {
        let c = Arc::new(TableCounters::default());
        let threads = PRIVATE_SLOTS * 2 + 3;
        let per = 20_000u64;
        std::thread::scope(|s| {
            for _ in 0..threads {
                let c = &c;
                s.spawn(move || {
                    for _ in 0..per {
                        c.add_negatives(1);
                        c.add_bytes_read(3);
                    }
                });
            }
        });
        assert_eq!(c.negatives(), threads as u64 * per);
        assert_eq!(c.bytes_read(), 3 * threads as u64 * per);
        assert_eq!(c.positives(), 0);
        // Later threads find private slots again (all earlier ones exited).
        let got = std::thread::spawn(|| {
            slot();
            SLOT.with(|s| s.get())
        })
        .join()
        .unwrap();
        assert!(got < PRIVATE_SLOTS, "slot {got} after every thread exited");
    }
}
