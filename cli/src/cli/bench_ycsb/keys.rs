//! YCSB's key generators: the Zipfian and its scrambled form, "latest", and the counter of
//! acknowledged inserts.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

use filterstore::hash::mix64;

/// A splitmix-style stream: small, fast, one per thread.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(mix64(seed))
    }
    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }
    /// Uniform in [0, 1).
    pub(super) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

pub(super) const ZIPF_THETA: f64 = 0.99;

/// YCSB's `ZipfianGenerator` (Gray et al., "Quickly generating billion-record synthetic
/// databases", SIGMOD 1994): ranks in [0, items), rank 0 the most popular.
#[derive(Clone)]
pub(super) struct Zipf {
    items: u64,
    zetan: f64,
    eta: f64,
}

impl Zipf {
    pub(super) fn new(items: u64) -> Zipf {
        Zipf::with_zetan(items, zeta(0, items, 0.0))
    }

    pub(super) fn with_zetan(items: u64, zetan: f64) -> Zipf {
        let mut z = Zipf {
            items,
            zetan,
            eta: 0.0,
        };
        z.set_eta();
        z
    }

    pub(super) fn set_eta(&mut self) {
        let zeta2 = 1.0 + 0.5f64.powf(ZIPF_THETA);
        self.eta =
            (1.0 - (2.0 / self.items as f64).powf(1.0 - ZIPF_THETA)) / (1.0 - zeta2 / self.zetan);
    }

    /// Grows the item count to `items` (never shrinks it), adding the new terms of zeta.
    pub(super) fn grow(&mut self, items: u64) {
        if items > self.items {
            self.zetan = zeta(self.items, items, self.zetan);
            self.items = items;
            self.set_eta();
        }
    }

    pub(super) fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(ZIPF_THETA) {
            return 1;
        }
        let alpha = 1.0 / (1.0 - ZIPF_THETA);
        let r = self.items as f64 * (self.eta * u - self.eta + 1.0).powf(alpha);
        (r as u64).min(self.items - 1)
    }
}

/// zeta(to) = the sum of 1/i^θ for i in 1..=to, given `sum` = zeta(from).
pub(super) fn zeta(from: u64, to: u64, sum: f64) -> f64 {
    (from + 1..=to).fold(sum, |s, i| s + (i as f64).powf(-ZIPF_THETA))
}

/// YCSB's `ScrambledZipfianGenerator`: a Zipfian rank over 10^10 items (zeta precomputed, as
/// YCSB does) hashed with FNV-1a-64 onto [0, items), so the popular keys are spread out.
pub(super) struct Scrambled {
    z: Zipf,
    items: u64,
}

impl Scrambled {
    pub(super) fn new(items: u64) -> Scrambled {
        Scrambled {
            z: Zipf::with_zetan(10_000_000_000, 26.469_028_201_783_02),
            items,
        }
    }
    pub(super) fn next(&self, rng: &mut Rng) -> u64 {
        fnv64(self.z.next(rng)) % self.items
    }
}

/// YCSB's `Utils.fnvhash64` (over the 8 bytes of `v`, low byte first; `Math.abs` at the end).
pub(super) fn fnv64(mut v: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(1_099_511_628_211);
        v >>= 8;
    }
    (h as i64).unsigned_abs()
}

/// Keys inserted during a run, as YCSB's `AcknowledgedCounterGenerator`: key numbers
/// `records`, `records + 1`, … are handed out in order; reads choose only among key numbers
/// below `limit()`, all of which are written (so every read of them must find its key).
pub(super) struct Inserts {
    records: u64,
    next: AtomicU64,
    acked: AtomicU64,
    done: Vec<AtomicBool>,
}

impl Inserts {
    pub(super) fn new(records: u64, max: u64) -> Inserts {
        Inserts {
            records,
            next: AtomicU64::new(records),
            acked: AtomicU64::new(records),
            done: (0..max).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    pub(super) fn claim(&self) -> u64 {
        self.next.fetch_add(1, SeqCst)
    }

    /// Key number `k` is written: move the limit past every written key.
    pub(super) fn ack(&self, k: u64) {
        if let Some(d) = self.done.get((k - self.records) as usize) {
            d.store(true, SeqCst);
        }
        loop {
            let a = self.acked.load(SeqCst);
            match self.done.get((a - self.records) as usize) {
                Some(f) if f.load(SeqCst) => {
                    let _ = self.acked.compare_exchange(a, a + 1, SeqCst, SeqCst);
                }
                _ => break,
            }
        }
    }

    /// Every key number below this is in the store.
    pub(super) fn limit(&self) -> u64 {
        self.acked.load(SeqCst)
    }
}
