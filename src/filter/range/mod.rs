//! Range filter: "may the range [lo, hi) hold a key of this table?", answered in place from a
//! memory-mapped block, with no false negatives.
//!
//! The design is Grafite's (Costa, Ferragina, Vinciguerra, "Grafite: Taming Adversarial Queries
//! with Optimal Range Filters", SIGMOD 2024), with a fixed mapping of variable-length keys onto
//! integers in front of it (`docs/filters.md`, "Range filter"; the bytes: `format.md`, "Range
//! filter block"):
//!
//! ```text
//! key ──window──▶ x (≤ 128 bits) ──h──▶ h(x) ∈ [0, r) ──▶ Elias–Fano set of the distinct h(x)
//!
//! window(key) = the W bytes of key after the common prefix P of all keys, zero-padded,
//!               big-endian; W = min(16, longest key − |P|)     (a < b ⇒ window(a) ≤ window(b))
//! h(x)        = (q(x >> s) + (x mod 2^s)) mod r,   s = ⌊log2 r⌋
//!               q: a strongly universal hash of the block number x >> s onto [0, r)
//! ```
//!
//! Inside one block of 2^s ≤ r consecutive windows, `h` is a rotation: it keeps order (up to
//! one wrap) and never maps two windows to one value. A range of windows [X, Y] spans at most
//! two blocks when shorter than 2^s, so its image is at most four intervals of [0, r), each
//! checked with one successor query on the Elias–Fano set. A key in the same block as the
//! query can only be found when it is in the range (queries clustered next to keys cost
//! nothing); a key in another block lands in an image interval of ℓ values with probability
//! ℓ / r. With n distinct windows, an empty range of ℓ windows is a false positive with
//! probability at most 1 − (1 − ℓ/r)^n ≤ n·ℓ / r; the builder picks r ≈ n · 2^(B − 2.1) for B
//! bits per key (the Elias–Fano code costs 2 bits per key over log2(r/n), the select samples a
//! little more), so at 16 bits per key an empty range of 32 window values (for 16-byte keys:
//! [a, a + 32) read as numbers) is a false positive with probability ≤ 0.21 %.
//!
//! When the windows' universe 2^(8W) is no larger than r, one block holds it all and the
//! filter is exact (no false positives at all, up to the window: keys that agree on their
//! first W bytes after P are one value).
//!
//! Construction keeps 16 bytes per key (the key's bytes after the common prefix so far), then
//! hashes and sorts in place in that memory, in parallel: per chunk of keys, values are hashed
//! and grouped by their top bits; per group, values are gathered from every chunk and sorted
//! in cache. Neither the order of the keys nor the thread count changes a byte.

mod build;
mod build_clock;
mod clock;
mod read;
mod select;

pub use build::{build, RangeFilterBuilder};
pub use build_clock::BuildClock;
pub use read::RangeFilter;

use crate::codec::MAX_KEY_LEN;
use crate::codec::{le_u32, le_u64};
use crate::error::{Error, Result};
use crate::filter::header::{check_body, check_head, Frame};
use crate::hash::fastrange;

/// Magic at the start of every range filter block.
pub const RANGE_MAGIC: [u8; 4] = *b"FSRF";
/// The layout version builders write; readers accept only this one today.
pub const RANGE_VERSION: u8 = 1;
/// The kind tag of the design above (Grafite over key windows). Tags are never reused.
pub const KIND_GRAFITE: u8 = 1;
/// Size of the block header; the body starts here.
pub const HEADER_LEN: usize = crate::filter::header::HEADER_LEN;

/// A range filter block's frame (`filter/header.rs`).
const FRAME: Frame = Frame {
    magic: RANGE_MAGIC,
    block: "range filter block",
    name: "range filter",
};
/// The widest window, in bytes: the part of a key after the common prefix that the filter sees.
pub const MAX_WINDOW: usize = 16;
/// log2 of the buckets between two select samples, as builders write it.
pub const SAMPLE_LOG2: u8 = 9;
/// Fewest bits per key a builder accepts.
pub const MIN_BITS_PER_KEY: f64 = 3.0;
/// Most bits per key a builder accepts.
pub const MAX_BITS_PER_KEY: f64 = 40.0;
/// Header flag: every key has at least W bytes after the common prefix (its window is its
/// own bytes, no padding).
pub const FILL: u8 = 1;
/// Header flag: no key has more than W bytes after the common prefix (its window is all of
/// it).
pub const FIT: u8 = 2;
/// The default seed of the block hash `q` ("rangeflt" in ASCII).
pub const DEFAULT_SEED: u64 = 0x7261_6e67_6566_6c74;

/// Most low bits per value a reader accepts (a low field is read with one 8-byte load).
const MAX_LOW_BITS: u32 = 56;
/// Largest reduced universe builders use; readers accept up to 2^63 (so q + offset < 2^64).
const MAX_BUILD_UNIVERSE: u64 = 1 << 62;
const MAX_READ_UNIVERSE: u64 = 1 << 63;
/// Most select-sample spacing (log2) a reader accepts.
const MAX_SAMPLE_LOG2: u32 = 30;
/// Bytes before the select samples: the smallest and largest window.
const MINMAX_LEN: usize = 32;

/// Byte offsets of the header's fields (format.md, "Range filter block").
mod off {
    pub(super) const VERSION: usize = 4;
    pub(super) const KIND: usize = 5;
    pub(super) const WINDOW: usize = 6;
    pub(super) const LOW_BITS: usize = 7;
    pub(super) const SAMPLE_LOG2: usize = 8;
    pub(super) const FLAGS: usize = 9;
    pub(super) const RESERVED: usize = 10;
    pub(super) const PREFIX_LEN: usize = 12;
    pub(super) const KEYS: usize = 16;
    pub(super) const STORED: usize = 24;
    pub(super) const UNIVERSE: usize = 32;
    pub(super) const SEED: usize = 40;
    pub(super) const BODY_LEN: usize = crate::filter::header::BODY_LEN;
    pub(super) const BODY_CRC: usize = crate::filter::header::BODY_CRC;
    pub(super) const HEADER_CRC: usize = crate::filter::header::HEADER_CRC;
}

/// The decoded, checked header of a range filter block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeHeader {
    /// Layout version ([`RANGE_VERSION`]).
    pub version: u8,
    /// Design tag ([`KIND_GRAFITE`]).
    pub kind: u8,
    /// Window width W in bytes (0..=16).
    pub window: u8,
    /// Elias–Fano low bits per stored value.
    pub low_bits: u8,
    /// log2 of the buckets between two select samples.
    pub sample_log2: u8,
    /// [`FILL`] and [`FIT`]: how the keys' lengths compare with the window.
    pub flags: u8,
    /// Length of the keys' common prefix P.
    pub prefix_len: u32,
    /// Keys the filter was built from (informational).
    pub keys: u64,
    /// Distinct hashed values stored (n).
    pub stored: u64,
    /// The reduced universe r: hashed values lie in [0, r).
    pub universe: u64,
    /// Seed of the block hash q.
    pub seed: u64,
    /// Length of the body in bytes.
    pub body_len: u64,
}

impl RangeHeader {
    fn encode(&self, body: &[u8]) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[..4].copy_from_slice(&RANGE_MAGIC);
        h[off::VERSION] = self.version;
        h[off::KIND] = self.kind;
        h[off::WINDOW] = self.window;
        h[off::LOW_BITS] = self.low_bits;
        h[off::SAMPLE_LOG2] = self.sample_log2;
        h[off::FLAGS] = self.flags;
        h[off::PREFIX_LEN..off::KEYS].copy_from_slice(&self.prefix_len.to_le_bytes());
        h[off::KEYS..off::STORED].copy_from_slice(&self.keys.to_le_bytes());
        h[off::STORED..off::UNIVERSE].copy_from_slice(&self.stored.to_le_bytes());
        h[off::UNIVERSE..off::SEED].copy_from_slice(&self.universe.to_le_bytes());
        h[off::SEED..off::BODY_LEN].copy_from_slice(&self.seed.to_le_bytes());
        h[off::BODY_LEN..off::BODY_CRC].copy_from_slice(&self.body_len.to_le_bytes());
        h[off::BODY_CRC..off::HEADER_CRC].copy_from_slice(&crc32fast::hash(body).to_le_bytes());
        let crc = crc32fast::hash(&h[..off::HEADER_CRC]);
        h[off::HEADER_CRC..].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Decodes and checks a header against the block it starts (magic, CRCs, fields, the
    /// body's length). Offsets in errors are relative to the start of `bytes`.
    fn decode(bytes: &[u8]) -> Result<RangeHeader> {
        let head = check_head(bytes, &FRAME)?;
        let bad = |at: usize, why: String| Err(Error::corrupt(at as u64, why));
        let h = RangeHeader {
            version: head[off::VERSION],
            kind: head[off::KIND],
            window: head[off::WINDOW],
            low_bits: head[off::LOW_BITS],
            sample_log2: head[off::SAMPLE_LOG2],
            flags: head[off::FLAGS],
            prefix_len: le_u32(head, off::PREFIX_LEN),
            keys: le_u64(head, off::KEYS),
            stored: le_u64(head, off::STORED),
            universe: le_u64(head, off::UNIVERSE),
            seed: le_u64(head, off::SEED),
            body_len: le_u64(head, off::BODY_LEN),
        };
        if h.version != RANGE_VERSION {
            return bad(
                off::VERSION,
                format!("unsupported range filter version {}", h.version),
            );
        }
        if h.kind != KIND_GRAFITE {
            return bad(off::KIND, format!("unknown range filter kind {}", h.kind));
        }
        if h.window as usize > MAX_WINDOW {
            return bad(off::WINDOW, format!("window of {} bytes", h.window));
        }
        if u32::from(h.low_bits) > MAX_LOW_BITS {
            return bad(off::LOW_BITS, format!("{} low bits", h.low_bits));
        }
        if h.sample_log2 == 0 || u32::from(h.sample_log2) > MAX_SAMPLE_LOG2 {
            return bad(
                off::SAMPLE_LOG2,
                format!("select sample spacing 2^{}", h.sample_log2),
            );
        }
        if h.flags & !(FILL | FIT) != 0 {
            return bad(off::FLAGS, format!("unknown flags {:#04x}", h.flags));
        }
        if head[off::RESERVED..off::PREFIX_LEN] != [0, 0] {
            return bad(off::RESERVED, "reserved bytes are not zero".into());
        }
        if h.prefix_len as usize > MAX_KEY_LEN {
            return bad(
                off::PREFIX_LEN,
                format!("common prefix of {} bytes", h.prefix_len),
            );
        }
        if h.universe == 0 || h.universe > MAX_READ_UNIVERSE {
            return bad(off::UNIVERSE, format!("reduced universe {}", h.universe));
        }
        if h.stored > h.universe || h.stored > h.keys {
            return bad(
                off::STORED,
                format!(
                    "{} stored values for {} keys in a universe of {}",
                    h.stored, h.keys, h.universe
                ),
            );
        }
        check_body(bytes, &FRAME)?;
        Ok(h)
    }
}

/// Where the parts of a body lie, all derived from the header's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    /// Buckets of the Elias–Fano upper part: ⌊(r − 1) / 2^L⌋ + 1.
    buckets: u64,
    /// Bits of the upper part: one per stored value and one per bucket.
    upper_bits: u64,
    /// Select samples: one per 2^S buckets.
    samples: u64,
    /// Byte offsets inside the block (header included).
    samples_at: usize,
    upper_at: usize,
    upper_words: usize,
    lows_at: usize,
    prefix_at: usize,
    /// Length of the body.
    body_len: u64,
}

impl Layout {
    /// The layout of a body for `n` values of `low` bits in [0, r), with one select sample
    /// per 2^`sample_log2` buckets and a prefix of `prefix_len` bytes; `None` when a size
    /// overflows or the upper part has 2^32 bits or more (samples are 32-bit positions).
    fn new(n: u64, r: u64, low: u32, sample_log2: u32, prefix_len: u64) -> Option<Layout> {
        let buckets = ((r.checked_sub(1)?) >> low) + 1;
        let upper_bits = n.checked_add(buckets)?;
        if upper_bits > u64::from(u32::MAX) {
            return None;
        }
        let samples = ((buckets - 1) >> sample_log2) + 1;
        let upper_words = upper_bits.div_ceil(64);
        // One extra word, so that every low field is one 8-byte load from its first byte.
        let low_words = n.checked_mul(u64::from(low))?.div_ceil(64) + 1;
        let samples_at = (HEADER_LEN + MINMAX_LEN) as u64;
        let upper_at = samples_at + (samples * 4).div_ceil(8) * 8;
        let lows_at = upper_at + upper_words * 8;
        let prefix_at = lows_at.checked_add(low_words.checked_mul(8)?)?;
        let end = prefix_at.checked_add(prefix_len)?;
        Some(Layout {
            buckets,
            upper_bits,
            samples,
            samples_at: usize::try_from(samples_at).ok()?,
            upper_at: usize::try_from(upper_at).ok()?,
            upper_words: usize::try_from(upper_words).ok()?,
            lows_at: usize::try_from(lows_at).ok()?,
            prefix_at: usize::try_from(prefix_at).ok()?,
            body_len: end - HEADER_LEN as u64,
        })
    }
}

/// The hash h of the module documentation: windows → [0, r).
#[derive(Clone, Copy, Debug)]
struct Hasher {
    r: u64,
    /// s = ⌊log2 r⌋: windows are grouped in blocks of 2^s.
    s: u32,
    /// 2^s − 1.
    mask: u64,
    /// The vector multiply-shift hash of a block number (Thorup, "High Speed Hashing for
    /// Integers and Strings", 2015): ((a1·b_lo + a2·b_hi + c) mod 2^128) >> 64 is strongly
    /// universal onto 64 bits for 64-bit halves b_lo, b_hi and random 128-bit a1, a2, c;
    /// `fastrange` then maps it onto [0, r).
    a1: u128,
    a2: u128,
    c: u128,
}

impl Hasher {
    fn new(seed: u64, r: u64) -> Hasher {
        let mut state = seed;
        let mut wide = || {
            let hi = super::fuse::next_seed(&mut state);
            let lo = super::fuse::next_seed(&mut state);
            (u128::from(hi) << 64) | u128::from(lo)
        };
        let (a1, a2, c) = (wide(), wide(), wide());
        let s = 63 - r.max(1).leading_zeros();
        Hasher {
            r,
            s,
            mask: (1u64 << s) - 1,
            a1,
            a2,
            c,
        }
    }

    /// q: where block `block` starts in [0, r).
    #[inline]
    fn block_start(&self, block: u128) -> u64 {
        let lo = block as u64 as u128;
        let hi = (block >> 64) as u64 as u128;
        let m = self
            .a1
            .wrapping_mul(lo)
            .wrapping_add(self.a2.wrapping_mul(hi))
            .wrapping_add(self.c);
        fastrange((m >> 64) as u64, self.r)
    }

    /// The offset of window `x` inside its block.
    #[inline]
    fn offset(&self, x: u128) -> u64 {
        (x as u64) & self.mask
    }

    /// h(x) = (q(x >> s) + (x mod 2^s)) mod r.
    #[inline]
    fn image(&self, x: u128) -> u64 {
        self.add(self.block_start(x >> self.s), self.offset(x))
    }

    /// (a + b) mod r for a < r and b ≤ r (no overflow: r ≤ 2^63).
    #[inline]
    fn add(&self, a: u64, b: u64) -> u64 {
        let t = a + b;
        // Branch-free (t − r wraps above t when t < r): the builder's values are random, and
        // a branch here was mispredicted half the time.
        t.min(t.wrapping_sub(self.r))
    }
}

/// The 16 bytes of `key` from `at` on, zero-padded, as a big-endian number.
#[inline]
fn window16(key: &[u8], at: usize) -> u128 {
    let tail = key.get(at..).unwrap_or_default();
    if let Some(w) = tail.first_chunk::<16>() {
        return u128::from_be_bytes(*w);
    }
    let mut w = [0u8; 16];
    w[..tail.len()].copy_from_slice(tail);
    u128::from_be_bytes(w)
}

/// Length of the longest common prefix of `a` and `b`.
#[inline]
fn lcp(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().unwrap_or_default());
        let y = u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        if x != y {
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// The reduced universe r for `n` keys at `bits` bits per key: the largest r whose
/// Elias–Fano code of n values (n·(L + 1) bits of lows and ones, one zero per bucket, a
/// 32-bit sample per 2^S buckets, L = ⌊log2(r/n)⌋) fits n·bits; at most 2^62, and at most the
/// windows' whole universe `universe` (then the filter is exact). 1 for no key.
fn universe_for(n: u64, bits: f64, universe: u128, sample_log2: u32) -> u64 {
    if n == 0 {
        return 1;
    }
    let per_bucket = 1.0 + 32.0 / (1u64 << sample_log2) as f64;
    let mut best = 1u64;
    for low in 0..=MAX_LOW_BITS {
        // Buckets per value this L can afford; r/n in [2^L, 2^(L+1)) keeps L = ⌊log2(r/n)⌋.
        let per_value = (bits - f64::from(low) - 1.0) / per_bucket;
        if per_value < 1.0 {
            break;
        }
        let ratio = per_value.min(2.0 - 1e-9) * (1u64 << low) as f64;
        let r = (ratio * n as f64).floor().min(MAX_BUILD_UNIVERSE as f64) as u64;
        best = best.max(r);
    }
    if universe <= u128::from(best) {
        universe as u64
    } else {
        best
    }
}

/// The Elias–Fano low bits for `n` values below r: ⌊log2(r/n)⌋ (0 for no value), at most
/// [`MAX_LOW_BITS`].
fn low_bits_for(n: u64, r: u64) -> u32 {
    match r / n.max(1) {
        0 => 0,
        q => (63 - q.leading_zeros()).min(MAX_LOW_BITS),
    }
}

/// Grafite's bound on the false-positive rate of an empty range of `len` values at
/// `bits_per_key` bits per key: len / 2^(bits − 2) (Costa et al., SIGMOD 2024).
pub fn grafite_bound(len: u64, bits_per_key: f64) -> f64 {
    (len as f64 / 2f64.powf(bits_per_key - 2.0)).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcp_counts_common_bytes() {
        assert_eq!(lcp(b"", b"abc"), 0);
        assert_eq!(lcp(b"abcdefghij", b"abcdefghiX"), 9);
        assert_eq!(lcp(b"abcdefgh", b"abcdefgh"), 8);
        assert_eq!(lcp(b"abcdefghijklmnopq", b"abcdefghijklmnop"), 16);
        assert_eq!(lcp(b"Xbcdefghijk", b"abcdefghijk"), 0);
    }

    #[test]
    fn sizing_fits_the_budget() {
        for n in [1u64, 10, 1000, 1 << 20] {
            for bits in [3.0, 8.0, 10.0, 12.0, 16.0, 20.0, 40.0] {
                let r = universe_for(n, bits, u128::MAX, 9);
                let low = low_bits_for(n, r);
                let lay = Layout::new(n, r, low, 9, 0).unwrap();
                let used = n * (u64::from(low) + 1) + lay.buckets + 32 * lay.samples;
                assert!(
                    used as f64 <= bits * n as f64 + 32.0 + 64.0,
                    "n {n} bits {bits}: r {r} L {low} uses {used}"
                );
                assert!(r >= n, "n {n} bits {bits}: r {r}");
            }
        }
    }
}
