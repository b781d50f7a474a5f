//! [`Layout::Fixed16`](super::Layout::Fixed16): a bucket is one 64-bit word of four 16-bit
//! slots, slot j at bits 16j..16j+16.
//!
//! ```text
//! slot: | fingerprint (11 bits, 1..=2047) | run id (5 bits) |      0 = empty
//! ```
//!
//! The fingerprint is `((h mod 2³²) · 2047 >> 32) + 1`, never 0, so an empty slot is the
//! only zero slot; it is also the tag that picks the key's alternate bucket. A query compares
//! the fingerprint with all four slots of a bucket at once (XOR, then a zero-lane test over
//! the fingerprint bits), with no data-dependent branch before the rare match.

use super::slots::{Entry, Slots};
use super::{RunId, RunSet};

/// Fingerprint bits.
pub(super) const FP_BITS: u32 = 11;
/// Run id bits.
pub(super) const RUN_BITS: u32 = 5;
/// Distinct fingerprints (1..=2047).
pub(super) const FP_VALUES: u32 = (1 << FP_BITS) - 1;
const LO: u64 = 0x0001_0001_0001_0001;
const HI: u64 = 0x8000_8000_8000_8000;
/// The fingerprint bits of every slot.
const FP_MASK: u64 = 0xffe0_ffe0_ffe0_ffe0;
const RUN_MASK: u64 = (1 << RUN_BITS) - 1;

/// The key's fingerprint, 1..=2047.
#[inline(always)]
pub(super) fn fingerprint(hash: u64) -> u32 {
    (((hash & 0xffff_ffff) * FP_VALUES as u64) >> 32) as u32 + 1
}

#[inline(always)]
fn slot(e: Entry) -> u64 {
    (e.fp as u64) << RUN_BITS | e.run as u64
}

/// The bucket's entries, in slot order (empty slots skipped).
pub(super) fn decode(raw: u64) -> Slots {
    let mut s = Slots::default();
    for j in 0..4 {
        let v = raw >> (16 * j) & 0xffff;
        if v != 0 {
            s.e[s.n] = Entry {
                run: (v & RUN_MASK) as u8,
                fp: (v >> RUN_BITS) as u32,
            };
            s.n += 1;
        }
    }
    s
}

/// The bucket holding `s`'s entries, largest slot value first (one canonical form, so a
/// bucket's bits depend only on its entries).
pub(super) fn encode(s: &Slots) -> u64 {
    let mut v = [0u64; 4];
    for (j, &e) in s.entries().iter().enumerate() {
        v[j] = slot(e);
    }
    v.sort_unstable_by(|a, b| b.cmp(a));
    v.iter()
        .enumerate()
        .fold(0, |acc, (j, &x)| acc | x << (16 * j))
}

/// True when every non-empty slot holds a fingerprint in 1..=2047 (any run id is valid),
/// and the slots are in canonical order.
pub(super) fn valid(raw: u64) -> bool {
    (0..4).all(|j| {
        let v = raw >> (16 * j) & 0xffff;
        v == 0 || v >> RUN_BITS != 0
    }) && encode(&decode(raw)) == raw
}

/// The runs of `b1` and `b2` whose slot holds the fingerprint of `hash`.
#[inline(always)]
pub(super) fn matches(b1: u64, b2: u64, hash: u64) -> RunSet {
    let want = (fingerprint(hash) as u64) << RUN_BITS;
    let want = want.wrapping_mul(LO);
    // A lane of t is 0 exactly when its fingerprint equals the key's; its 5 low bits are
    // always 0, so a lane that is not 0 is at least 32 and never borrows out (the test is
    // exact: no lane above a matching one shows up).
    let zero = |b: u64| {
        let t = (b ^ want) & FP_MASK;
        t.wrapping_sub(LO) & !t & HI
    };
    let (z1, z2) = (zero(b1), zero(b2));
    if z1 | z2 == 0 {
        return RunSet::EMPTY;
    }
    runs_of(b1, z1) | runs_of(b2, z2)
}

#[cold]
fn runs_of(b: u64, mut z: u64) -> RunSet {
    let mut set = RunSet::EMPTY;
    while z != 0 {
        let lane = z.trailing_zeros() / 16;
        z &= z - 1;
        set = set.with(RunId((b >> (16 * lane) & RUN_MASK) as u8));
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::mix64;

    /// The packed comparison answers as a slot-by-slot one, for buckets holding the key's
    /// fingerprint in any lane and fingerprints differing from it in one bit.
    #[test]
    fn packed_match_equals_slot_by_slot() {
        let mut x = 1u64;
        for _ in 0..200_000 {
            x = mix64(x);
            let h = x;
            let fp = fingerprint(h);
            let mut s = Slots::default();
            for j in 0..(x >> 60) as usize % 5 {
                x = mix64(x);
                let f = match x % 4 {
                    0 => fp,
                    1 => fp ^ (1 << ((x >> 8) % 11)),
                    _ => fingerprint(x),
                };
                if f == 0 || f > FP_VALUES {
                    continue;
                }
                s.e[s.n] = Entry {
                    run: (x >> 20) as u8 & 31,
                    fp: f,
                };
                s.n += 1;
                let _ = j;
            }
            let b = encode(&s);
            assert!(valid(b));
            assert_eq!(decode(b).n, s.n);
            let want = s
                .entries()
                .iter()
                .filter(|e| e.fp == fp)
                .fold(RunSet::EMPTY, |m, e| m.with(RunId(e.run)));
            assert_eq!(matches(b, 0, h), want);
            assert_eq!(matches(0, b, h), want);
        }
    }

    #[test]
    fn fingerprint_is_never_zero() {
        for h in [0, 1, u64::MAX, 0xffff_ffff, 0x1_0000_0000] {
            let f = fingerprint(h);
            assert!((1..=FP_VALUES).contains(&f));
        }
    }
}
