//! The cuckoo table: buckets as atomic 64-bit words (four 16-bit slots each, `fixed.rs`)
//! with seqlock regions, the alternate bucket, and the consistent two-bucket read of a
//! query.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use super::slots::{Entry, Slots};
use super::{fixed, RunId, RunSet, ALT_MULT, REGION_BYTES};
use crate::error::{Error, Result};
use crate::hash::fastrange;

/// `n` zeroed atomics, or `None` when the allocator has no room for them (a filter is sized
/// by the entry counts tables claim: a failed allocation is an error, not an abort).
fn zeroed<T: Default>(n: usize) -> Option<Box<[T]>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.extend((0..n).map(|_| T::default()));
    Some(v.into_boxed_slice())
}

/// The cuckoo table: bucket words (bucket i is word i) and seqlock regions.
#[derive(Debug)]
pub(super) struct Table {
    pub(super) words: Box<[AtomicU64]>,
    pub(super) seqs: Box<[AtomicU32]>,
    pub(super) buckets: u64,
}

impl Table {
    pub(super) fn new(buckets: u64) -> Result<Table> {
        let bytes = buckets.saturating_mul(8);
        let too_large = || Error::OutOfMemory {
            what: format!("a global filter of {buckets} buckets"),
            bytes,
        };
        let words = usize::try_from(buckets).map_err(|_| too_large())?;
        let regions = (words.saturating_mul(8)).div_ceil(REGION_BYTES).max(1);
        Ok(Table {
            words: zeroed(words).ok_or_else(too_large)?,
            seqs: zeroed(regions).ok_or_else(too_large)?,
            buckets,
        })
    }

    /// The seqlock region of bucket `i`.
    #[inline(always)]
    pub(super) fn region(&self, i: u64) -> usize {
        i as usize * 8 / REGION_BYTES
    }

    /// Bucket `i`'s bits (no consistency check: the writer, or inside a seqlock read).
    #[inline(always)]
    pub(super) fn raw(&self, i: u64) -> u64 {
        self.words[i as usize].load(Ordering::Relaxed)
    }

    /// Writes bucket `i` (the writer only), with its region's sequence odd meanwhile.
    pub(super) fn write(&self, i: u64, raw: u64) {
        let r = self.region(i);
        let s = self.seqs[r].load(Ordering::Relaxed);
        self.seqs[r].store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.words[i as usize].store(raw, Ordering::Relaxed);
        self.seqs[r].store(s.wrapping_add(2), Ordering::Release);
    }

    /// The bits of a bucket holding `s`'s entries.
    pub(super) fn encode(&self, s: &Slots) -> u64 {
        fixed::encode(s)
    }

    /// Asks the CPU to bring bucket `i`'s word into cache (a hint for a batch that will read
    /// it a few operations later).
    #[inline(always)]
    pub(super) fn prefetch(&self, i: u64) {
        if let Some(w) = self.words.get(i as usize) {
            crate::filter::simd::prefetch_ref(w);
        }
    }

    /// Bucket `i` decoded.
    pub(super) fn slots(&self, i: u64) -> Slots {
        fixed::decode(self.raw(i))
    }

    #[inline(always)]
    pub(super) fn i1(&self, hash: u64) -> u64 {
        fastrange(hash, self.buckets)
    }

    /// (H(fp) − i) mod B: an involution, so an entry moves between its two buckets knowing
    /// only its fingerprint.
    #[inline(always)]
    pub(super) fn alt(&self, i: u64, fp: u32) -> u64 {
        let h = fastrange((fp as u64).wrapping_mul(ALT_MULT), self.buckets);
        h.wrapping_sub(i)
            .wrapping_add(self.buckets & ((h < i) as u64).wrapping_neg())
    }

    pub(super) fn entry(&self, hash: u64, run: RunId) -> Entry {
        Entry {
            run: run.0,
            fp: fixed::fingerprint(hash),
        }
    }

    /// The key's two buckets.
    #[inline(always)]
    pub(super) fn pair(&self, hash: u64) -> (u64, u64) {
        let i1 = self.i1(hash);
        (i1, self.alt(i1, fixed::fingerprint(hash)))
    }

    /// The runs whose entry in the key's buckets matches its fingerprint, read consistently
    /// against a concurrent writer, and the distinct 64-byte lines the two buckets lie in.
    #[inline]
    pub(super) fn query(&self, hash: u64) -> (RunSet, u32) {
        let (i1, i2) = self.pair(hash);
        // Both buckets' lines are asked for before anything else is read (the sequence
        // words, then the buckets), so their two cache misses overlap.
        self.prefetch(i1);
        self.prefetch(i2);
        let lines = self.lines_of(i1, i2);
        let (a, b) = (i1 as usize, i2 as usize);
        let (b1, b2) = self.consistent(self.region(i1), self.region(i2), || {
            (
                self.words.get(a).map_or(0, |x| x.load(Ordering::Relaxed)),
                self.words.get(b).map_or(0, |x| x.load(Ordering::Relaxed)),
            )
        });
        (fixed::matches(b1, b2, hash), lines)
    }

    /// `read()` repeated until no write to regions `r1` and `r2` overlapped it (a seqlock
    /// read: even and unchanged sequence numbers before and after).
    #[inline(always)]
    pub(super) fn consistent(
        &self,
        r1: usize,
        r2: usize,
        read: impl Fn() -> (u64, u64),
    ) -> (u64, u64) {
        let (Some(q1), Some(q2)) = (self.seqs.get(r1), self.seqs.get(r2)) else {
            return read(); // never: every bucket has a region
        };
        loop {
            let s1 = q1.load(Ordering::Acquire);
            let s2 = q2.load(Ordering::Acquire);
            let v = read();
            fence(Ordering::Acquire);
            if (s1 | s2) & 1 == 0
                && q1.load(Ordering::Relaxed) == s1
                && q2.load(Ordering::Relaxed) == s2
            {
                return v;
            }
            std::hint::spin_loop();
        }
    }

    /// The distinct 64-byte lines buckets `i1` and `i2` lie in: 1 or 2 (a bucket is one
    /// aligned word, so it never straddles a line).
    #[inline(always)]
    pub(super) fn lines_of(&self, i1: u64, i2: u64) -> u32 {
        1 + u32::from(i1 / 8 != i2 / 8)
    }

    /// The distinct 64-byte lines the buckets of the key of `hash` lie in.
    pub(super) fn lines(&self, hash: u64) -> u32 {
        let (i1, i2) = self.pair(hash);
        self.lines_of(i1, i2)
    }

    pub(super) fn slot_count(&self) -> u64 {
        self.buckets * 4
    }

    pub(super) fn bytes(&self) -> u64 {
        self.words.len() as u64 * 8
    }
}
