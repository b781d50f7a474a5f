//! Cuckoo filter with partial-key cuckoo hashing (thesis ch. 4, Algorithms 3–5; Fan et al.
//! 2014): B buckets of 4 slots, one f-bit fingerprint per slot, f = ⌈log2(2·4/ε)⌉.
//!
//! For a key hash h: primary bucket i₁ = fastrange(h, B); fingerprint
//! fp = ((h mod 2³²)·(2^f − 1)) >> 32) + 1, uniform over 1..2^f (0 marks an empty slot); alternate bucket alt(i, fp) = (H(fp) − i) mod B with
//! H(fp) = fastrange(fp · 0x9e3779b97f4a7c15 mod 2⁶⁴, B) (layout version 2; version 1, still
//! read, took H(fp) = fastrange(mix64(fp), B), whose two dependent multiplications delayed
//! the second bucket's load). `alt` is an involution for *any* B, so no power-of-two
//! rounding is needed: alt(alt(i)) = H − (H − i) = i.
//!
//! Body: the 4·B slots packed as a little-endian bit stream, f bits each (slot s of bucket i
//! starts at bit (4i + s)·f), then zero padding up to a multiple of 8 bytes plus 16 more
//! bytes, so a bucket can always be read with one unaligned 128-bit load.
//!
//! The builder never loses an item: when an insert runs out of kicks, the whole filter is
//! rebuilt with 1 % more buckets.
//!
//! A query has no data-dependent branch: both buckets are read with one unaligned 64-bit
//! load each (128-bit for f > 14; no shift when f is even, since a 4f-bit bucket then starts
//! on a byte), XORed with the fingerprint repeated in all four slots, and tested for a zero
//! slot with the carry trick `(v − lo) & !v & hi`, so the two cache misses overlap and no
//! misprediction throws the second load away.

use super::{FilterKind, Header, Run, View};
use crate::error::{Error, Result};
use crate::hash::{fastrange, mix64};

/// Slots per bucket.
pub const SLOTS: u32 = 4;
/// Most relocations an insert tries (thesis: MaxNumRealocações).
pub const MAX_KICKS: u32 = 500;
/// Smallest and largest fingerprint widths.
pub const MIN_FP_BITS: u32 = 4;
/// Largest fingerprint width (a bucket must fit a 128-bit load with 7 bits of shift).
pub const MAX_FP_BITS: u32 = 30;
/// Load factor the builder sizes for; it grows the table when inserts fail.
pub const TARGET_LOAD: f64 = 0.955;

/// Fingerprint bits for target `fpr`: ⌈log2(2·4/ε)⌉, clamped to 4..=30.
pub fn fingerprint_bits(fpr: f64) -> u32 {
    ((2.0 * SLOTS as f64 / fpr).log2().ceil() as u32).clamp(MIN_FP_BITS, MAX_FP_BITS)
}

/// 2·4·α / (2^f − 1) with α = n / (4B), n the stored fingerprints.
///
/// A stored fingerprint v sits in one of the two buckets {i, H(v) − i}; a query with
/// fingerprint v and primary bucket i₁ looks at exactly that pair, so it matches an item iff
/// the item has fingerprint v (chance 1/(2^f − 1)) and the same pair (chance 2/B). The builder
/// never stores a fingerprint twice in one pair, so at most one item can match and the rate is
/// exactly the expected number of matches, n·2/(B·(2^f − 1)).
pub fn theoretical_fpr(buckets: u64, fp_bits: u32, n: u64) -> f64 {
    if n == 0 || buckets == 0 {
        return 0.0;
    }
    let values = 2f64.powi(fp_bits.min(64) as i32) - 1.0;
    (2.0 * n as f64 / (buckets as f64 * values)).min(1.0)
}

fn body_len(buckets: u64, fp_bits: u32) -> Option<u64> {
    let bits = buckets
        .checked_mul(SLOTS as u64)?
        .checked_mul(fp_bits as u64)?;
    bits.div_ceil(64).checked_mul(8)?.checked_add(16)
}

/// Uniform over 1..2^f (0 marks an empty slot): fastrange of the hash's low 32 bits.
#[inline]
fn fingerprint(hash: u64, fp_bits: u32) -> u32 {
    (((hash & 0xffff_ffff) * ((1u64 << fp_bits) - 1)) >> 32) as u32 + 1
}

/// Version 2's multiplier for H(fp) (64-bit golden ratio: fp · M over consecutive fp spreads
/// evenly over 2⁶⁴, so its high bits, which fastrange keeps, are well mixed).
const ALT_MULT: u64 = 0x9e37_79b9_7f4a_7c15;

/// H(fp) of layout version `V` (1: fastrange of mix64(fp); 2: fastrange of fp · [`ALT_MULT`]).
#[inline(always)]
fn alt_hash<const V: u8>(fp: u32, buckets: u64) -> u64 {
    if V == 1 {
        fastrange(mix64(fp as u64), buckets)
    } else {
        fastrange((fp as u64).wrapping_mul(ALT_MULT), buckets)
    }
}

/// (H(fp) − i) mod B for layout version `V`, without a branch (the comparison is a coin flip
/// per key, and a mispredicted branch here would stall the second bucket's load).
#[inline(always)]
fn alt_bucket<const V: u8>(i: u64, fp: u32, buckets: u64) -> u64 {
    let h = alt_hash::<V>(fp, buckets);
    h.wrapping_sub(i)
        .wrapping_add(buckets & ((h < i) as u64).wrapping_neg())
}

/// A mutable cuckoo filter: insert, contains, delete; `finish` writes the block.
#[derive(Clone, Debug)]
pub struct CuckooBuilder {
    slots: Vec<u32>,
    buckets: u64,
    fp_bits: u32,
    /// Layout version, which fixes the alternate bucket: the current one for a new filter,
    /// the block's for one made by [`CuckooView::to_builder`].
    version: u8,
    fpr: f64,
    len: u64,
    rng: u64,
}

impl CuckooBuilder {
    /// An empty filter with room for about `capacity` keys at load [`TARGET_LOAD`].
    pub fn new(capacity: u64, fpr: f64) -> Self {
        let buckets = ((capacity as f64 / (SLOTS as f64 * TARGET_LOAD)).ceil() as u64).max(1);
        Self::with_buckets(buckets, fpr)
    }

    fn with_buckets(buckets: u64, fpr: f64) -> Self {
        CuckooBuilder {
            slots: vec![0; (buckets * SLOTS as u64) as usize],
            buckets,
            fp_bits: fingerprint_bits(fpr),
            version: FilterKind::Cuckoo.version(),
            fpr,
            len: 0,
            rng: 0x9e37_79b9_7f4a_7c15 ^ buckets,
        }
    }

    /// Number of fingerprints stored.
    #[cfg(test)]
    pub fn len(&self) -> u64 {
        self.len
    }

    fn bucket(&mut self, i: u64) -> &mut [u32] {
        let s = (i * SLOTS as u64) as usize;
        &mut self.slots[s..s + SLOTS as usize]
    }

    fn bucket_has(&self, i: u64, fp: u32) -> bool {
        let s = (i * SLOTS as u64) as usize;
        self.slots[s..s + SLOTS as usize].contains(&fp)
    }

    fn place(&mut self, i: u64, fp: u32) -> bool {
        match self.bucket(i).iter_mut().find(|s| **s == 0) {
            Some(slot) => {
                *slot = fp;
                true
            }
            None => false,
        }
    }

    /// The other bucket of `fp` in bucket `i`, by this filter's layout version.
    fn alt(&self, i: u64, fp: u32) -> u64 {
        if self.version == 1 {
            alt_bucket::<1>(i, fp, self.buckets)
        } else {
            alt_bucket::<2>(i, fp, self.buckets)
        }
    }

    fn next_rand(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// Algorithm 3. Inserts the key with hash `hash`, storing one more copy of its fingerprint
    /// even if the same fingerprint is already in one of its buckets (multiset semantics, as in
    /// Fan et al.), so that [`delete`](Self::delete) of one key can never remove the only copy
    /// that another key, colliding on fingerprint and bucket pair, relies on. A bucket pair holds
    /// at most 8 copies of one fingerprint. Returns false when the table is too full: the filter
    /// is then unchanged.
    #[cfg(test)]
    pub fn insert(&mut self, hash: u64) -> bool {
        self.insert_inner(hash, false)
    }

    /// Like [`insert`](Self::insert), but a key whose fingerprint is already in one of its
    /// buckets is not stored again (set semantics, so duplicate keys never fill a bucket).
    /// Used by [`build`], whose blocks are immutable; do not mix with [`delete`](Self::delete).
    pub fn insert_unique(&mut self, hash: u64) -> bool {
        self.insert_inner(hash, true)
    }

    fn insert_inner(&mut self, hash: u64, unique: bool) -> bool {
        let fp = fingerprint(hash, self.fp_bits);
        let i1 = fastrange(hash, self.buckets);
        let i2 = self.alt(i1, fp);
        if unique && (self.bucket_has(i1, fp) || self.bucket_has(i2, fp)) {
            return true;
        }
        if self.place(i1, fp) || self.place(i2, fp) {
            self.len += 1;
            return true;
        }
        // Relocate, remembering every swap so a failure can be undone exactly.
        let mut undo: Vec<(usize, u32)> = Vec::new();
        let mut i = if self.next_rand() & 1 == 0 { i1 } else { i2 };
        let mut fp = fp;
        for _ in 0..MAX_KICKS {
            let s = (self.next_rand() % SLOTS as u64) as usize;
            let idx = (i * SLOTS as u64) as usize + s;
            undo.push((idx, self.slots[idx]));
            std::mem::swap(&mut fp, &mut self.slots[idx]);
            i = self.alt(i, fp);
            if self.place(i, fp) {
                self.len += 1;
                return true;
            }
        }
        for (idx, old) in undo.into_iter().rev() {
            self.slots[idx] = old;
        }
        false
    }

    /// Algorithm 4.
    #[cfg(test)]
    pub fn contains(&self, hash: u64) -> bool {
        let fp = fingerprint(hash, self.fp_bits);
        let i1 = fastrange(hash, self.buckets);
        self.bucket_has(i1, fp) || self.bucket_has(self.alt(i1, fp), fp)
    }

    /// Algorithm 5. Removes one copy of the key's fingerprint; only call it for keys inserted
    /// with [`insert`](Self::insert) (a filter filled by [`insert_unique`](Self::insert_unique)
    /// or [`build`] may share one copy between colliding keys).
    #[cfg(test)]
    pub fn delete(&mut self, hash: u64) -> bool {
        let fp = fingerprint(hash, self.fp_bits);
        let i1 = fastrange(hash, self.buckets);
        let i2 = self.alt(i1, fp);
        for i in [i1, i2] {
            if let Some(slot) = self.bucket(i).iter_mut().find(|s| **s == fp) {
                *slot = 0;
                self.len -= 1;
                return true;
            }
        }
        false
    }

    /// Writes the filter block.
    pub fn finish(&self) -> Vec<u8> {
        let len = body_len(self.buckets, self.fp_bits).unwrap_or(16) as usize;
        let mut body = vec![0u8; len];
        let f = self.fp_bits as usize;
        for (s, &fp) in self.slots.iter().enumerate() {
            if fp == 0 {
                continue;
            }
            let bit = s * f;
            let byte = bit / 8;
            let mut w = u128::from_le_bytes(body[byte..byte + 16].try_into().unwrap_or([0; 16]));
            w |= (fp as u128) << (bit % 8);
            body[byte..byte + 16].copy_from_slice(&w.to_le_bytes());
        }
        Header {
            kind: FilterKind::Cuckoo,
            version: self.version,
            n: self.len,
            target_fpr: self.fpr,
            p1: self.buckets,
            p2: self.fp_bits,
            p3: SLOTS,
            body_len: body.len() as u64,
        }
        .encode_block(&body)
    }
}

/// Builds a cuckoo filter block over `hashes` (duplicates allowed). Insertion is sequential;
/// when an insert fails the table is rebuilt 1 % larger, so no key is ever lost.
pub fn build(fpr: f64, hashes: &[u64]) -> Vec<u8> {
    let mut b = CuckooBuilder::new(hashes.len() as u64, fpr);
    'attempt: loop {
        for &h in hashes {
            if !b.insert_unique(h) {
                let grown = b.buckets + (b.buckets / 100).max(1);
                b = CuckooBuilder::with_buckets(grown, fpr);
                continue 'attempt;
            }
        }
        return b.finish();
    }
}

/// Zero-copy reader over a cuckoo body.
#[derive(Clone, Copy)]
pub struct CuckooView {
    buckets: u64,
    fp_bits: u32,
    /// Layout version (1 or 2): which H(fp) the alternate bucket takes.
    version: u8,
    /// 1 at the lowest bit of each of the 4 slots of a bucket.
    lo: u128,
    /// 1 at the highest bit of each slot.
    hi: u128,
    /// Bits per bucket, 4f.
    bucket_bits: u64,
    /// 2^f − 1 (see [`fingerprint`]).
    fp_scale: u64,
}

impl std::fmt::Debug for CuckooView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CuckooView")
            .field("buckets", &self.buckets)
            .field("fp_bits", &self.fp_bits)
            .field("version", &self.version)
            .finish()
    }
}

/// The word a bucket is read into: `u64` when 4f + 7 ≤ 64 bits, else `u128`.
trait Word:
    Copy
    + PartialEq
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitXor<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::Not<Output = Self>
    + std::ops::Shr<u32, Output = Self>
{
    const ZERO: Self;
    /// The `size_of::<Self>()` bytes of `body` at `at`, little-endian; at the last such
    /// position when `at` lies beyond it (never in a checked view, whose body ends with 16
    /// bytes of padding), zero when `body` is shorter than a word. Clamping is a conditional
    /// move, not a branch, and lets the compiler drop the bounds check.
    fn load(body: &[u8], at: usize) -> Self;
    /// The low bits of `x`.
    fn truncate(x: u128) -> Self;
    fn wrapping_sub(self, o: Self) -> Self;
    fn wrapping_mul(self, o: Self) -> Self;
}

macro_rules! word {
    ($t:ty) => {
        impl Word for $t {
            const ZERO: Self = 0;
            #[inline(always)]
            fn load(body: &[u8], at: usize) -> Self {
                const W: usize = std::mem::size_of::<$t>();
                let Some(last) = body.len().checked_sub(W) else {
                    return 0;
                };
                let at = at.min(last);
                body.get(at..at + W)
                    .and_then(|w| w.try_into().ok())
                    .map_or(0, <$t>::from_le_bytes)
            }
            #[inline(always)]
            fn truncate(x: u128) -> Self {
                x as $t
            }
            #[inline(always)]
            fn wrapping_sub(self, o: Self) -> Self {
                <$t>::wrapping_sub(self, o)
            }
            #[inline(always)]
            fn wrapping_mul(self, o: Self) -> Self {
                <$t>::wrapping_mul(self, o)
            }
        }
    };
}
word!(u64);
word!(u128);

/// The top bit of each f-bit field of `v` that may be zero (`lo`: the lowest bit of each
/// field, `hi`: the highest): nonzero exactly when one of the fields is zero. Subtracting 1
/// from every field borrows out of a field's top bit only where the field was zero or a
/// borrow came in from a zero field below: the lowest zero field always shows, fields above
/// it may too, which changes "which" but never "whether". Borrows only move up, so bits of
/// `v` above the fields (the next bucket's, read by the same load) change nothing below them,
/// and `hi` leaves them out: no mask is needed.
#[inline(always)]
fn zero_fields<T: Word>(v: T, lo: T, hi: T) -> T {
    v.wrapping_sub(lo) & !v & hi
}

impl CuckooView {
    pub(super) fn new(h: &Header, body: &[u8]) -> Result<Self> {
        if h.p1 == 0 {
            return Err(Error::corrupt(32, "cuckoo filter with zero buckets"));
        }
        if !(MIN_FP_BITS..=MAX_FP_BITS).contains(&h.p2) {
            return Err(Error::corrupt(
                40,
                format!(
                    "fingerprint width {} outside {MIN_FP_BITS}..={MAX_FP_BITS}",
                    h.p2
                ),
            ));
        }
        if h.p3 != SLOTS {
            return Err(Error::corrupt(
                44,
                format!("cuckoo slots per bucket {} (only {SLOTS} supported)", h.p3),
            ));
        }
        if body_len(h.p1, h.p2) != Some(body.len() as u64) {
            return Err(Error::corrupt(
                32,
                format!(
                    "cuckoo body of {} bytes does not match {} buckets of {}-bit slots",
                    body.len(),
                    h.p1,
                    h.p2
                ),
            ));
        }
        let f = h.p2;
        let lo = (0..SLOTS).fold(0u128, |acc, s| acc | 1 << (s * f));
        Ok(CuckooView {
            buckets: h.p1,
            fp_bits: f,
            version: h.version,
            lo,
            hi: lo << (f - 1),
            bucket_bits: (SLOTS * f) as u64,
            fp_scale: (1 << f) - 1,
        })
    }

    /// Bucket `i` read into a `T`, shifted down to bit 0 (slot s at bits s·f .. (s+1)·f);
    /// the bits above the bucket are the next bucket's (see [`zero_fields`]).
    #[inline(always)]
    fn bucket<T: Word, const SHIFT: bool>(&self, body: &[u8], i: u64) -> T {
        let bit = i * self.bucket_bits;
        let raw = T::load(body, (bit / 8) as usize);
        // With f even a bucket (4f bits) starts on a byte: no shift.
        if SHIFT {
            raw >> (bit % 8) as u32
        } else {
            raw
        }
    }

    /// Algorithm 4 over the packed body, with no data-dependent branch: both buckets are
    /// loaded (their cache misses overlap), then each is compared with the fingerprint in all
    /// four slots at once (XOR with the fingerprint in every slot, then one zero-field test
    /// over both). Few instructions wait on the loads, so more queries' loads are in flight.
    #[inline(always)]
    fn query_with<T: Word, const SHIFT: bool, const V: u8>(&self, body: &[u8], hash: u64) -> bool {
        let fp = (((hash & 0xffff_ffff) * self.fp_scale) >> 32) as u32 + 1;
        let i1 = fastrange(hash, self.buckets);
        let i2 = alt_bucket::<V>(i1, fp, self.buckets);
        let b1: T = self.bucket::<T, SHIFT>(body, i1);
        let b2: T = self.bucket::<T, SHIFT>(body, i2);
        let (lo, hi) = (T::truncate(self.lo), T::truncate(self.hi));
        let want = lo.wrapping_mul(T::truncate(fp as u128));
        zero_fields(b1 ^ want, lo, hi) | zero_fields(b2 ^ want, lo, hi) != T::ZERO
    }

    /// The query kernel for this fingerprint width and layout version (see
    /// `Filter::may_contain`): a bucket (4f bits) starts anywhere in its first byte, so it
    /// fits a 64-bit load at that byte when 4f + 7 ≤ 64, and a 128-bit load always (f ≤ 30);
    /// with f even it starts on a byte.
    pub(super) fn run(&self) -> Run {
        macro_rules! kernel {
            ($t:ty, $shift:literal, $v:literal) => {
                |v, hash, body| match v {
                    View::Cuckoo(c) => c.query_with::<$t, $shift, $v>(body, hash),
                    _ => true,
                }
            };
        }
        let f = self.fp_bits;
        match (SLOTS * f + 7 > 64, f % 2 == 1, self.version) {
            (true, _, 1) => kernel!(u128, true, 1),
            (true, _, _) => kernel!(u128, true, 2),
            (false, true, 1) => kernel!(u64, true, 1),
            (false, true, _) => kernel!(u64, true, 2),
            (false, false, 1) => kernel!(u64, false, 1),
            (false, false, _) => kernel!(u64, false, 2),
        }
    }

    /// The other bucket of `fp` in bucket `i`, by this block's layout version.
    #[inline]
    fn alt(&self, i: u64, fp: u32) -> u64 {
        if self.version == 1 {
            alt_bucket::<1>(i, fp, self.buckets)
        } else {
            alt_bucket::<2>(i, fp, self.buckets)
        }
    }

    /// Reads the key's two buckets (see [`crate::Filter::touch`]).
    #[inline]
    pub fn touch(&self, body: &[u8], hash: u64) -> u8 {
        let fp = fingerprint(hash, self.fp_bits);
        let i1 = fastrange(hash, self.buckets);
        let i2 = self.alt(i1, fp);
        let first = |i: u64| {
            let byte = i * (SLOTS * self.fp_bits) as u64 / 8;
            body.get(byte as usize).copied().unwrap_or(0)
        };
        first(i1) ^ first(i2)
    }

    /// Prefetches the key's two buckets (see [`crate::Filter::prefetch_in`]).
    #[inline]
    pub fn prefetch(&self, body: &[u8], hash: u64) {
        let fp = fingerprint(hash, self.fp_bits);
        let i1 = fastrange(hash, self.buckets);
        let i2 = self.alt(i1, fp);
        for i in [i1, i2] {
            let byte = i * (SLOTS * self.fp_bits) as u64 / 8;
            super::simd::prefetch(body, byte as usize);
        }
    }

    /// Reconstructs a mutable filter from this view's body (to insert or delete without the
    /// keys).
    #[cfg(test)]
    #[allow(clippy::wrong_self_convention)]
    pub fn to_builder(&self, body: &[u8], fpr: f64) -> CuckooBuilder {
        let mut b = CuckooBuilder::with_buckets(self.buckets, fpr);
        b.fp_bits = self.fp_bits;
        b.version = self.version;
        let f = self.fp_bits as usize;
        let mask = (1u128 << f) - 1;
        for s in 0..b.slots.len() {
            let bit = s * f;
            let byte = bit / 8;
            if let Some(raw) = body.get(byte..byte + 16) {
                let w = u128::from_le_bytes(raw.try_into().unwrap_or([0; 16]));
                let fp = ((w >> (bit % 8)) & mask) as u32;
                b.slots[s] = fp;
                if fp != 0 {
                    b.len += 1;
                }
            }
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alt_bucket_is_an_involution_for_any_bucket_count() {
        let counts = [
            1u64, 2, 3, 5, 7, 10, 100, 101, 1000, 4093, 65_537, 1_000_003,
        ];
        for &b in counts
            .iter()
            .chain([(1u64 << 33) + 17, u64::MAX / 3].iter())
        {
            for t in 0..2000u64 {
                let h = mix64(t.wrapping_mul(0x9e37_79b9) ^ b);
                let fp = fingerprint(h, 13);
                let i = fastrange(h, b);
                for (j, back) in [
                    (
                        alt_bucket::<1>(i, fp, b),
                        alt_bucket::<1> as fn(u64, u32, u64) -> u64,
                    ),
                    (alt_bucket::<2>(i, fp, b), alt_bucket::<2>),
                ] {
                    assert!(j < b, "alt {j} outside 0..{b}");
                    assert_eq!(back(j, fp, b), i, "b={b} i={i} fp={fp}");
                }
            }
        }
    }

    #[test]
    fn fingerprint_is_never_zero_and_fits() {
        for f in MIN_FP_BITS..=MAX_FP_BITS {
            for h in [
                0u64,
                1,
                u64::MAX,
                0xffff_ffff,
                0x1_0000_0000,
                mix64(f as u64),
            ] {
                let fp = fingerprint(h, f);
                assert!(
                    fp >= 1 && (fp as u64) < (1u64 << f),
                    "f={f} h={h:#x} fp={fp}"
                );
            }
        }
    }

    #[test]
    fn delete_removes_only_one_copy() {
        let mut b = CuckooBuilder::new(1000, 0.01);
        let keys: Vec<u64> = (0..900u64).map(mix64).collect();
        for &k in &keys {
            assert!(b.insert(k));
        }
        assert_eq!(b.len(), 900);
        for &k in &keys[..450] {
            assert!(b.delete(k));
        }
        assert_eq!(b.len(), 450);
        for &k in &keys[450..] {
            assert!(b.contains(k), "kept key lost after deletes");
        }
        let still = keys[..450].iter().filter(|&&k| b.contains(k)).count();
        assert!(still < 20, "{still} deleted keys still reported present");
        // The same key twice: two copies, so one delete leaves it present.
        let k = mix64(123_456_789);
        assert!(b.insert(k) && b.insert(k));
        assert!(b.delete(k));
        assert!(b.contains(k));
        assert!(b.delete(k));
    }

    /// Two different keys sharing fingerprint and bucket: deleting one must not make the
    /// other a false negative.
    #[test]
    fn delete_of_colliding_key_keeps_the_other() {
        let mut b = CuckooBuilder::new(100, 0.01);
        let a = 0x0000_0001_0000_0042u64;
        let c = 0x0000_0002_0000_0042u64; // same low 32 bits, same top bits: same fp and bucket
        assert_eq!(fingerprint(a, b.fp_bits), fingerprint(c, b.fp_bits));
        assert_eq!(fastrange(a, b.buckets), fastrange(c, b.buckets));
        assert!(b.insert(a) && b.insert(c));
        assert!(b.delete(a));
        assert!(b.contains(c));
    }

    /// Fill a table with pathological keys (many sharing one bucket or one fingerprint) until
    /// inserts fail; a failed insert must leave the table unchanged, so every key whose insert
    /// succeeded is still present.
    #[test]
    fn full_table_never_loses_an_item() {
        for variant in 0..3u64 {
            let mut b = CuckooBuilder::new(64, 0.01);
            let mut ok = Vec::new();
            let mut failures = 0;
            for t in 0..400u64 {
                let h = match variant {
                    // same top bits (same primary bucket), different fingerprints
                    0 => (0x42u64 << 56) | (mix64(t) >> 8),
                    // same low 32 bits (same fingerprint), spread buckets
                    1 => (mix64(t) & !0xffff_ffff) | 0x0bad_cafe,
                    // random
                    _ => mix64(t + 1000),
                };
                if b.insert(h) {
                    ok.push(h);
                } else {
                    failures += 1;
                }
                let before = b.slots.clone();
                if !b.insert(h) {
                    assert_eq!(before, b.slots, "failed insert changed the table");
                } else {
                    ok.push(h);
                }
            }
            assert!(failures > 0, "variant {variant}: table never filled");
            for &h in &ok {
                assert!(b.contains(h), "variant {variant}: lost {h:#x}");
            }
            assert_eq!(b.len() as usize, ok.len());
            let block = b.finish();
            let f = crate::filter::Filter::decode(&block).expect("decode");
            for &h in &ok {
                assert!(f.may_contain(h));
            }
        }
    }

    /// `build` with the same pathological inputs never loses a key (it grows the table).
    #[test]
    fn build_pathological_inputs() {
        let mut hashes: Vec<u64> = (0..2000u64)
            .map(|t| (0x42u64 << 56) | (mix64(t) >> 8))
            .collect();
        hashes.extend((0..2000u64).map(|t| (mix64(t) & !0xffff_ffff) | 7));
        hashes.extend(std::iter::repeat_n(99u64, 500));
        let block = build(0.01, &hashes);
        let f = crate::filter::Filter::decode(&block).expect("decode");
        for &h in &hashes {
            assert!(f.may_contain(h));
        }
    }

    /// The packed, branch-free query (64-bit words for f ≤ 14, 128-bit above) answers exactly
    /// as the builder's slot-by-slot `contains`, for every fingerprint width and both layout
    /// versions, on tables from nearly empty to full, for inserted keys and random ones.
    #[test]
    fn packed_query_equals_slot_by_slot_lookup() {
        let mut x = 7u64;
        for (f, version) in (MIN_FP_BITS..=MAX_FP_BITS).flat_map(|f| [(f, 1), (f, 2)]) {
            // ε giving exactly f bits: ⌈log2(8/ε)⌉ = f.
            let fpr = 8.0 / 2f64.powf(f as f64 - 0.5);
            for fill in [3u64, 200, 1000] {
                let mut b = CuckooBuilder::new(1000, fpr);
                b.version = version;
                assert_eq!(b.fp_bits, f);
                let mut keys = Vec::new();
                for _ in 0..fill {
                    x = mix64(x);
                    if b.insert(x) {
                        keys.push(x);
                    }
                }
                let block = b.finish();
                let view = crate::filter::Filter::decode(&block).expect("decode");
                assert_eq!(view.header().version, version);
                for &k in &keys {
                    assert!(view.may_contain(k), "f={f}: lost a key");
                }
                let mut positives = 0;
                for _ in 0..20_000 {
                    x = mix64(x);
                    // Random keys, and keys sharing a stored key's fingerprint bits.
                    let h = if x.is_multiple_of(3) {
                        (x & !0xffff_ffff) | (keys[(x % keys.len() as u64) as usize] & 0xffff_ffff)
                    } else {
                        x
                    };
                    assert_eq!(
                        view.may_contain(h),
                        b.contains(h),
                        "f={f} fill={fill} h={h:#x}"
                    );
                    positives += b.contains(h) as u32;
                }
                assert!(positives > 0 || fill < 1000, "f={f}: no positive compared");
            }
        }
    }

    /// A view's builder keeps the block's layout version: inserting into a version 1 filter
    /// keeps every key it held, and finishing without changes gives the same bytes.
    #[test]
    fn to_builder_round_trips() {
        let hashes: Vec<u64> = (0..5000u64).map(mix64).collect();
        for version in [1, 2] {
            let mut b = CuckooBuilder::new(hashes.len() as u64, 0.001);
            b.version = version;
            assert!(hashes[..4000].iter().all(|&h| b.insert_unique(h)));
            let block = b.finish();
            let (h, body) = Header::decode(&block).expect("decode");
            assert_eq!(h.version, version);
            let v = CuckooView::new(&h, body).expect("view");
            let mut b = v.to_builder(body, 0.001);
            assert_eq!(b.len(), h.n);
            assert_eq!(b.finish(), block);
            assert!(hashes[4000..].iter().all(|&h| b.insert_unique(h)));
            let grown = b.finish();
            let f = crate::filter::Filter::decode(&grown).expect("decode");
            assert_eq!(f.header().version, version);
            assert!(
                hashes.iter().all(|&h| f.may_contain(h)),
                "version {version}"
            );
        }
    }
}
