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

use std::cmp::Ordering;
use std::ops::{Bound, RangeBounds};

use rayon::prelude::*;

use crate::codec::{le_u32, le_u64, prefix8};
use crate::error::{Error, Result};
use crate::hash::fastrange;
use crate::MAX_KEY_LEN;

/// Magic at the start of every range filter block.
pub const RANGE_MAGIC: [u8; 4] = *b"FSRF";
/// The layout version builders write; readers accept only this one today.
pub const RANGE_VERSION: u8 = 1;
/// The kind tag of the design above (Grafite over key windows). Tags are never reused.
pub const KIND_GRAFITE: u8 = 1;
/// Size of the block header; the body starts here.
pub const HEADER_LEN: usize = 64;
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
    pub(super) const BODY_LEN: usize = 48;
    pub(super) const BODY_CRC: usize = 56;
    pub(super) const HEADER_CRC: usize = 60;
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
        let head = bytes.get(..HEADER_LEN).ok_or_else(|| {
            Error::corrupt(
                0,
                format!(
                    "range filter block of {} bytes is shorter than its 64-byte header",
                    bytes.len()
                ),
            )
        })?;
        if head[..off::VERSION] != RANGE_MAGIC {
            return Err(Error::corrupt(0, "bad range filter magic"));
        }
        let stored_crc = le_u32(head, off::HEADER_CRC);
        let crc = crc32fast::hash(&head[..off::HEADER_CRC]);
        if stored_crc != crc {
            return Err(Error::checksum(
                off::HEADER_CRC as u64,
                "range filter header",
                stored_crc,
                crc,
            ));
        }
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
        let avail = (bytes.len() - HEADER_LEN) as u64;
        if h.body_len != avail {
            return bad(
                off::BODY_LEN,
                format!(
                    "range filter body length {} but {avail} bytes follow the header",
                    h.body_len
                ),
            );
        }
        let body = &bytes[HEADER_LEN..];
        let body_crc = le_u32(head, off::BODY_CRC);
        let crc = crc32fast::hash(body);
        if body_crc != crc {
            return Err(Error::checksum(
                HEADER_LEN as u64,
                "range filter body",
                body_crc,
                crc,
            ));
        }
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
        if t >= self.r {
            t - self.r
        } else {
            t
        }
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

/// Keys per chunk of the first pass (a fixed size: the work split never depends on the
/// thread count, and neither do the bytes).
const CHUNK: usize = 1 << 16;
/// Values per partition the sort aims at: a partition's counters and values stay in cache.
const PARTITION: u64 = 2048;
/// Most partitions (log2): more write streams than this slow the scatter down.
const MAX_PARTITION_LOG2: u32 = 11;

/// How to turn the builder's per-key tails into windows (see [`RangeFilterBuilder::finish`]).
struct Windows<'a> {
    /// (first key, common prefix length when it came) each time that length shrank.
    runs: &'a [(usize, usize)],
    /// The final common prefix length.
    prefix: usize,
    /// The window width W.
    width: usize,
    /// The first key's 16 bytes after the final common prefix.
    first: u128,
}

impl Windows<'_> {
    /// Replaces the tails of keys `start ..` (`tails`) by `f` of their windows, in place: the
    /// value of key j goes to u64 word j of `tails`, a word of tail ⌊j/2⌋ ≤ j, which was read
    /// before.
    #[inline]
    fn map_in_place(&self, start: usize, tails: &mut [[u64; 2]], mut f: impl FnMut(u128) -> u64) {
        let end = start + tails.len();
        let shift = 8 * (MAX_WINDOW - self.width) as u32;
        for (i, &(from, d)) in self.runs.iter().enumerate() {
            let to = self.runs.get(i + 1).map_or(usize::MAX, |r| r.0);
            let (a, b) = (from.max(start), to.min(end));
            if a >= b {
                continue;
            }
            // The first key's bytes between the final common prefix and d, then the key's.
            let k = d - self.prefix;
            let top = match k {
                0 => 0,
                1..=15 => self.first & !(u128::MAX >> (8 * k)),
                _ => self.first,
            };
            for j in a - start..b - start {
                let [hi, lo] = tails[j];
                let t = (u128::from(hi) << 64) | u128::from(lo);
                let full = match k {
                    0 => t,
                    1..=15 => top | (t >> (8 * k)),
                    _ => top,
                };
                let v = f(if self.width == 0 { 0 } else { full >> shift });
                tails[j / 2][j % 2] = v;
            }
        }
    }
}

/// Hashes the windows of the keys with `hasher` and sorts the values, in place in the tails'
/// memory, in two parallel passes.
///
/// The tails are seen as u64 words, two per key, in chunks of [`CHUNK`] keys. Pass 1, per
/// chunk: each key's value goes to the chunk's first half (value j over word j, whose tail
/// was read before), then the values are grouped by partition (the top `parts_log2` of
/// `bits` bits) into the second half. Pass 2, per partition: its values are gathered from
/// every chunk's second half, sorted in cache (a counting sort by their next bits, about two
/// slots per value, then an insertion sort of each slot's few values) and written, in value
/// order, to the first halves, which then hold all values sorted (chunk after chunk). Returns
/// the least and the greatest window.
fn hash_and_sort(
    tails: &mut [[u64; 2]],
    windows: &Windows<'_>,
    hasher: &Hasher,
    bits: u32,
    parts_log2: u32,
) -> (u128, u128) {
    let parts = 1usize << parts_log2;
    let shift = bits - parts_log2;
    let n = tails.len();
    // Per chunk: where each partition's values start in its second half, its least and
    // greatest window.
    let chunks: Vec<(Vec<u32>, u128, u128)> = tails
        .par_chunks_mut(CHUNK)
        .enumerate()
        .map(|(c, chunk)| {
            let h = *hasher;
            let mut start = vec![0u32; parts + 1];
            let (mut lo, mut hi) = (u128::MAX, 0);
            let len = chunk.len();
            // Keys of one block (dense keys) share its start: hash each block once in a row.
            let mut last: Option<(u128, u64)> = None;
            windows.map_in_place(c * CHUNK, chunk, |x| {
                lo = lo.min(x);
                hi = hi.max(x);
                let block = x >> h.s;
                let q = match last {
                    Some((b, q)) if b == block => q,
                    _ => {
                        let q = h.block_start(block);
                        last = Some((block, q));
                        q
                    }
                };
                let v = h.add(q, h.offset(x));
                start[(v >> shift) as usize + 1] += 1;
                v
            });
            for i in 1..start.len() {
                start[i] += start[i - 1];
            }
            let (first, second) = chunk.as_flattened_mut().split_at_mut(len);
            let mut at = start.clone();
            for &v in first.iter() {
                let p = (v >> shift) as usize;
                second[at[p] as usize] = v;
                at[p] += 1;
            }
            (start, lo, hi)
        })
        .collect();
    let x_min = chunks.iter().map(|c| c.1).min().unwrap_or(0);
    let x_max = chunks.iter().map(|c| c.2).max().unwrap_or(0);
    let starts: Vec<Vec<u32>> = chunks.into_iter().map(|c| c.0).collect();
    // Each chunk's halves: the first (to hold sorted values) and the second (grouped).
    let mut firsts: Vec<&mut [u64]> = Vec::with_capacity(starts.len());
    let mut seconds: Vec<&[u64]> = Vec::with_capacity(starts.len());
    for chunk in tails.chunks_mut(CHUNK) {
        let len = chunk.len();
        let (first, second) = chunk.as_flattened_mut().split_at_mut(len);
        firsts.push(first);
        seconds.push(second);
    }
    // Each partition's output: the next values' worth of first halves, in order.
    let mut outputs: Vec<Vec<&mut [u64]>> = Vec::with_capacity(parts);
    let mut firsts = firsts.into_iter();
    let mut current: &mut [u64] = &mut [];
    for p in 0..parts {
        let mut need: usize = starts.iter().map(|s| (s[p + 1] - s[p]) as usize).sum();
        let mut pieces = Vec::new();
        while need > 0 {
            if current.is_empty() {
                match firsts.next() {
                    Some(f) => current = f,
                    None => break,
                }
            }
            let take = need.min(current.len());
            let (piece, rest) = std::mem::take(&mut current).split_at_mut(take);
            pieces.push(piece);
            current = rest;
            need -= take;
        }
        outputs.push(pieces);
    }
    debug_assert_eq!(n, starts.iter().map(|s| s[parts] as usize).sum::<usize>());
    outputs.into_par_iter().enumerate().for_each_init(
        || (Vec::new(), Vec::new()),
        |(count, sorted): &mut (Vec<u32>, Vec<u64>), (p, pieces)| {
            let segments = starts
                .iter()
                .zip(&seconds)
                .map(|(s, second)| &second[s[p] as usize..s[p + 1] as usize]);
            sort_in_cache(segments, shift, count, sorted);
            let mut from = 0;
            for piece in pieces {
                piece.copy_from_slice(&sorted[from..from + piece.len()]);
                from += piece.len();
            }
        },
    );
    (x_min, x_max)
}

/// The sorted values [`hash_and_sort`] left in the first halves of the tails' chunks.
fn sorted_values(tails: &[[u64; 2]]) -> impl Iterator<Item = u64> + Clone + '_ {
    tails
        .chunks(CHUNK)
        .flat_map(|chunk| chunk.as_flattened()[..chunk.len()].iter().copied())
}

/// Sorts the values of `segments` (below 2^`width` once their partition bits are dropped)
/// into `out`: a counting sort by the top bits, about two slots per value, then an insertion
/// sort of each slot's values.
fn sort_in_cache<'a>(
    segments: impl Iterator<Item = &'a [u64]> + Clone,
    width: u32,
    count: &mut Vec<u32>,
    out: &mut Vec<u64>,
) {
    let len: usize = segments.clone().map(|s| s.len()).sum();
    out.clear();
    if len < 32 {
        segments.for_each(|s| out.extend_from_slice(s));
        out.sort_unstable();
        return;
    }
    out.resize(len, 0);
    let slots_log2 = (64 - (2 * len as u64).leading_zeros()).min(width);
    let shift = width - slots_log2;
    let mask = (1u64 << slots_log2) - 1;
    let slot = |v: u64| ((v >> shift) & mask) as usize;
    count.clear();
    count.resize((1usize << slots_log2) + 1, 0);
    for &v in segments.clone().flatten() {
        count[slot(v) + 1] += 1;
    }
    for i in 1..count.len() {
        count[i] += count[i - 1];
    }
    for &v in segments.flatten() {
        let b = slot(v);
        out[count[b] as usize] = v;
        count[b] += 1;
    }
    for i in 1..out.len() {
        let v = out[i];
        let mut j = i;
        while j > 0 && out[j - 1] > v {
            out[j] = out[j - 1];
            j -= 1;
        }
        out[j] = v;
    }
}

/// Builds a range filter block from keys pushed one at a time (a table's keys as its writer
/// streams them out), in any order, repeats allowed: the filter describes the set. Keeps 16
/// bytes per key until [`finish`](Self::finish).
#[derive(Debug)]
pub struct RangeFilterBuilder {
    bits_per_key: f64,
    seed: u64,
    keys: u64,
    /// The first key, whole: the common prefix of all keys is a prefix of it.
    first: Vec<u8>,
    /// Common prefix length of the keys so far: the least lcp(first, key).
    depth: usize,
    min_len: usize,
    max_len: usize,
    /// Per key, its 16 bytes from the common prefix length at the time it was pushed, as two
    /// big-endian halves (later, in place, its hashed value: see [`hash_and_sort`]).
    tails: Vec<[u64; 2]>,
    /// (index of the first key, common prefix length) each time the common prefix shrank.
    runs: Vec<(usize, usize)>,
}

impl RangeFilterBuilder {
    /// A builder sized for `bits_per_key` bits per key (from [`MIN_BITS_PER_KEY`] to
    /// [`MAX_BITS_PER_KEY`]). An empty range ℓ key-widths long is then a false positive with
    /// probability about ℓ / 2^(bits − 2.1) (see the module documentation).
    pub fn new(bits_per_key: f64) -> Result<RangeFilterBuilder> {
        if !(MIN_BITS_PER_KEY..=MAX_BITS_PER_KEY).contains(&bits_per_key) {
            return Err(Error::InvalidArgument(format!(
                "range filter bits per key {bits_per_key} must be between {MIN_BITS_PER_KEY} and {MAX_BITS_PER_KEY}"
            )));
        }
        Ok(RangeFilterBuilder {
            bits_per_key,
            seed: DEFAULT_SEED,
            keys: 0,
            first: Vec::new(),
            depth: 0,
            min_len: usize::MAX,
            max_len: 0,
            tails: Vec::new(),
            runs: Vec::new(),
        })
    }

    /// Uses `seed` for the block hash instead of [`DEFAULT_SEED`] (the block records it).
    pub fn seed(mut self, seed: u64) -> RangeFilterBuilder {
        self.seed = seed;
        self
    }

    /// Adds a key (of at most [`MAX_KEY_LEN`] bytes; a longer one is
    /// refused).
    ///
    /// The common prefix of all keys is the least lcp(first key, key), and a key's bytes
    /// between the final common prefix and that length are the first key's: so the 16 bytes
    /// after the common prefix of the keys so far determine its window, in any order.
    #[inline]
    pub fn push(&mut self, key: &[u8]) -> Result<()> {
        if key.len() > MAX_KEY_LEN {
            return Err(Error::TooLarge {
                what: "key",
                len: key.len(),
                max: MAX_KEY_LEN,
            });
        }
        if self.keys == 0 {
            self.first = key.to_vec();
            self.depth = key.len();
            self.runs.push((0, key.len()));
        } else {
            let d = lcp(&self.first[..self.depth], key);
            if d < self.depth {
                self.depth = d;
                self.runs.push((self.tails.len(), d));
            }
        }
        let t = window16(key, self.depth);
        self.tails.push([(t >> 64) as u64, t as u64]);
        self.min_len = self.min_len.min(key.len());
        self.max_len = self.max_len.max(key.len());
        self.keys += 1;
        Ok(())
    }

    /// Makes room for `keys` more keys (it saves the copies of a growing buffer when the
    /// number of keys is known, as when a memtable is sealed).
    pub fn reserve(&mut self, keys: usize) {
        self.tails.reserve(keys);
    }

    /// Keys pushed so far.
    pub fn len(&self) -> u64 {
        self.keys
    }

    /// True when no key was pushed.
    pub fn is_empty(&self) -> bool {
        self.keys == 0
    }

    /// Builds the block. Runs on the current rayon pool; the bytes never depend on its size.
    pub fn finish(mut self) -> Result<Vec<u8>> {
        let p = self.depth;
        let window = (self.max_len - p).min(MAX_WINDOW);
        let first_window = window16(&self.first, p);
        let mut tails = std::mem::take(&mut self.tails);
        let windows = Windows {
            runs: &self.runs,
            prefix: p,
            width: window,
            first: first_window,
        };
        // The number of windows there are: 2^(8W). Sized for the keys (the distinct windows
        // are at most as many, and need no more bits than the keys were given).
        let universe = match window {
            MAX_WINDOW => u128::MAX,
            w => 1u128 << (8 * w),
        };
        let r = universe_for(
            self.keys,
            self.bits_per_key,
            universe,
            u32::from(SAMPLE_LOG2),
        );
        let hasher = Hasher::new(self.seed, r);
        let bits = 64 - r.saturating_sub(1).leading_zeros();
        let parts_log2 = (63 - (self.keys / PARTITION).max(1).leading_zeros())
            .min(MAX_PARTITION_LOG2)
            .min(bits);
        let (x_min, x_max) = hash_and_sort(&mut tails, &windows, &hasher, bits, parts_log2);
        encode(
            &RangeHeader {
                version: RANGE_VERSION,
                kind: KIND_GRAFITE,
                window: window as u8,
                low_bits: 0,
                sample_log2: SAMPLE_LOG2,
                flags: if self.keys == 0 {
                    0
                } else {
                    (u8::from(self.min_len - p >= window) * FILL)
                        | (u8::from(self.max_len - p <= window) * FIT)
                },
                prefix_len: p as u32,
                keys: self.keys,
                stored: 0,
                universe: r,
                seed: self.seed,
                body_len: 0,
            },
            &self.first[..p.min(self.first.len())],
            x_min,
            x_max,
            sorted_values(&tails),
        )
    }
}

/// Builds a range filter block over `keys` (any order, repeats allowed; a table gives them
/// sorted) at `bits_per_key` bits per key (see [`RangeFilterBuilder`]).
pub fn build<K: AsRef<[u8]>>(
    keys: impl IntoIterator<Item = K>,
    bits_per_key: f64,
) -> Result<Vec<u8>> {
    let mut b = RangeFilterBuilder::new(bits_per_key)?;
    let keys = keys.into_iter();
    b.reserve(keys.size_hint().0);
    for k in keys {
        b.push(k.as_ref())?;
    }
    b.finish()
}

/// Writes little-endian u64 words into a byte buffer, one after another from `at`.
struct Words<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Words<'_> {
    /// Stores `w` as word `i` (nothing past the end of the buffer).
    fn put(&mut self, i: usize, w: u64) {
        let at = self.at + 8 * i;
        if let Some(dst) = self.buf.get_mut(at..at + 8) {
            dst.copy_from_slice(&w.to_le_bytes());
        }
    }
}

/// Writes the block: header, then the body of format.md ("Range filter block"). `sorted`
/// holds the hashed values in ascending order, repeats allowed (they are stored once); the
/// low bits follow from their number.
fn encode(
    h: &RangeHeader,
    prefix: &[u8],
    x_min: u128,
    x_max: u128,
    sorted: impl Iterator<Item = u64> + Clone,
) -> Result<Vec<u8>> {
    let mut stored = 0;
    let mut prev = None;
    for v in sorted.clone() {
        stored += u64::from(prev != Some(v));
        prev = Some(v);
    }
    let low = low_bits_for(stored, h.universe);
    let h = RangeHeader {
        stored,
        low_bits: low as u8,
        ..*h
    };
    let s = u32::from(h.sample_log2);
    let lay = Layout::new(h.stored, h.universe, low, s, prefix.len() as u64).ok_or_else(|| {
        Error::InvalidArgument(format!("{} keys are too many for one range filter", h.keys))
    })?;
    let mut block = vec![0u8; HEADER_LEN + lay.body_len as usize];
    block[HEADER_LEN..HEADER_LEN + 16].copy_from_slice(&x_min.to_le_bytes());
    block[HEADER_LEN + 16..HEADER_LEN + 32].copy_from_slice(&x_max.to_le_bytes());
    let mut samples = Vec::with_capacity(lay.samples as usize);
    {
        let (head, tail) = block.split_at_mut(lay.upper_at);
        let mut upper = Words { buf: tail, at: 0 };
        let (mut word, mut acc) = (0usize, 0u64); // the upper word being filled
        let (mut low_word, mut low_acc, mut used) = (0usize, 0u64, 0u32);
        let lows_at = lay.lows_at - lay.upper_at;
        let lmask = (1u64 << low) - 1;
        let mut i = 0u64; // values written
        let mut prev = None;
        for v in sorted {
            if prev == Some(v) {
                continue;
            }
            prev = Some(v);
            let high = v >> low;
            while (samples.len() as u64) < lay.samples && (samples.len() as u64) << s <= high {
                samples.push(((samples.len() as u64) << s) + i);
            }
            let pos = high + i;
            if (pos / 64) as usize != word {
                upper.put(word, acc);
                (word, acc) = ((pos / 64) as usize, 0);
            }
            acc |= 1 << (pos % 64);
            if low > 0 {
                low_acc |= (v & lmask) << used;
                used += low;
                if used >= 64 {
                    Words {
                        buf: &mut *upper.buf,
                        at: lows_at,
                    }
                    .put(low_word, low_acc);
                    low_word += 1;
                    used -= 64;
                    low_acc = if used == 0 {
                        0
                    } else {
                        (v & lmask) >> (low - used)
                    };
                }
            }
            i += 1;
        }
        upper.put(word, acc);
        if used > 0 {
            Words {
                buf: &mut *upper.buf,
                at: lows_at,
            }
            .put(low_word, low_acc);
        }
        while (samples.len() as u64) < lay.samples {
            samples.push(((samples.len() as u64) << s) + i);
        }
        for (j, &pos) in samples.iter().enumerate() {
            let at = lay.samples_at + 4 * j;
            if let Some(dst) = head.get_mut(at..at + 4) {
                dst.copy_from_slice(&(pos as u32).to_le_bytes());
            }
        }
    }
    block[lay.prefix_at..].copy_from_slice(prefix);
    let header = RangeHeader {
        body_len: lay.body_len,
        ..h
    };
    let head = header.encode(&block[HEADER_LEN..]);
    block[..HEADER_LEN].copy_from_slice(&head);
    Ok(block)
}

/// `SELECT_IN_BYTE[k * 256 + b]`: the position (0..8) of the `k`-th set bit (from 0) of the
/// byte `b` (8 when it has no such bit).
static SELECT_IN_BYTE: [u8; 8 * 256] = {
    let mut t = [8u8; 8 * 256];
    let mut b = 0;
    while b < 256 {
        let (mut k, mut bit) = (0, 0);
        while bit < 8 {
            if b >> bit & 1 == 1 {
                t[k * 256 + b] = bit as u8;
                k += 1;
            }
            bit += 1;
        }
        b += 1;
    }
    t
};

/// Position (0..64) of the `k`-th set bit (from 0) of `w`; `k` < `w.count_ones()`.
/// Broadword (Vigna, "Broadword Implementation of Rank/Select Queries", 2008): the bytes'
/// running counts by one multiplication, the byte holding the bit by one byte-wise compare,
/// the bit by a table.
#[inline]
fn select_in_word(w: u64, k: u32) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut c = w - ((w >> 1) & 0x5555_5555_5555_5555);
    c = (c & 0x3333_3333_3333_3333) + ((c >> 2) & 0x3333_3333_3333_3333);
    c = (c + (c >> 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    let running = c.wrapping_mul(ONES); // byte i: set bits in bytes 0..=i
                                        // Bit 7 of byte i is set while the running count of byte i is ≤ k (counts are ≤ 64).
    let below = (((u64::from(k) * ONES) | HIGH) - running) & HIGH;
    // (At most 7: a k past the word's bits, which callers never pass, cannot shift by 64.)
    let byte = u64::from((!below & HIGH).trailing_zeros() / 8).min(7);
    let before = (running << 8) >> (8 * byte) & 0xff; // set bits in the bytes below
    let in_byte = (w >> (8 * byte)) & 0xff;
    let at = (u64::from(k) - before) * 256 + in_byte;
    8 * byte + u64::from(*SELECT_IN_BYTE.get(at as usize).unwrap_or(&0))
}

/// One end of a range, in the window space.
enum End {
    /// Every key is on this side of the bound: the end is open.
    Open,
    /// No key is on the inner side: the range holds no key.
    Empty,
    /// The window bound (inclusive).
    At(u128),
}

/// A checked, zero-copy view of a range filter block.
#[derive(Clone, Copy, Debug)]
pub struct RangeFilter<'a> {
    header: RangeHeader,
    lay: Layout,
    /// Values per bucket, times 2^32 (to guess where a bucket's low bits are).
    density: u64,
    hasher: Hasher,
    x_min: u128,
    x_max: u128,
    /// The whole block, queried in place.
    block: &'a [u8],
}

impl<'a> RangeFilter<'a> {
    /// Checks `bytes` (magic, version, kind, parameters, lengths, CRCs, and the structure of
    /// the Elias–Fano code: its number of values, its select samples) and returns a view that
    /// answers queries in place. Never panics and allocates nothing, whatever the bytes.
    pub fn decode(bytes: &'a [u8]) -> Result<RangeFilter<'a>> {
        let h = RangeHeader::decode(bytes)?;
        let low = u32::from(h.low_bits);
        let s = u32::from(h.sample_log2);
        let lay = Layout::new(h.stored, h.universe, low, s, u64::from(h.prefix_len))
            .filter(|l| l.body_len == h.body_len)
            .ok_or_else(|| {
                Error::corrupt(
                    off::BODY_LEN as u64,
                    format!(
                        "range filter body of {} bytes does not match its parameters",
                        h.body_len
                    ),
                )
            })?;
        let u128_at =
            |at: usize| u128::from(le_u64(bytes, at)) | (u128::from(le_u64(bytes, at + 8)) << 64);
        let (x_min, x_max) = (u128_at(HEADER_LEN), u128_at(HEADER_LEN + 16));
        let top = if h.window as usize == MAX_WINDOW {
            u128::MAX
        } else {
            (1u128 << (8 * u32::from(h.window))) - 1
        };
        if x_min > x_max || x_max > top || (h.stored == 0 && x_max != 0) {
            return Err(Error::corrupt(
                HEADER_LEN as u64,
                "range filter window bounds out of order or too wide",
            ));
        }
        let f = RangeFilter {
            header: h,
            lay,
            density: ((u128::from(h.stored) << 32) / u128::from(lay.buckets.max(1))) as u64,
            hasher: Hasher::new(h.seed, h.universe),
            x_min,
            x_max,
            block: bytes,
        };
        f.check_structure()?;
        Ok(f)
    }

    /// Checks the padding, that the upper part holds exactly n ones and ends with a bucket's
    /// zero, and every select sample.
    fn check_structure(&self) -> Result<()> {
        let lay = &self.lay;
        let pad = self
            .block
            .get(lay.samples_at + lay.samples as usize * 4..lay.upper_at);
        if pad.is_none_or(|p| p.iter().any(|&b| b != 0)) {
            return Err(Error::corrupt(
                (lay.samples_at + lay.samples as usize * 4) as u64,
                "range filter padding is not zero",
            ));
        }
        let bits = lay.upper_bits;
        let last = lay.upper_words - 1;
        let tail = bits % 64;
        let (mut ones, mut zeros_before) = (0u64, 0u64);
        let mut next = 0u64; // the next sample to check
        let step = 1u64 << self.header.sample_log2;
        for word in 0..lay.upper_words {
            let w = self.upper_word(word);
            let valid = if word == last && tail != 0 {
                (1u64 << tail) - 1
            } else {
                u64::MAX
            };
            if w & !valid != 0 {
                return Err(self.structure_error(word, "bits past the end of the upper part"));
            }
            ones += u64::from(w.count_ones());
            let zeros = !w & valid;
            let z = u64::from(zeros.count_ones());
            // Sample j is where bucket j·2^S starts: just after zero number j·2^S − 1.
            while next < lay.samples {
                let pos = if next == 0 {
                    0
                } else {
                    let target = (next * step) - 1;
                    if target >= zeros_before + z {
                        break;
                    }
                    word as u64 * 64 + select_in_word(zeros, (target - zeros_before) as u32) + 1
                };
                if u64::from(self.sample(next)) != pos {
                    return Err(Error::corrupt(
                        (lay.samples_at as u64) + next * 4,
                        format!("range filter select sample {next} is wrong"),
                    ));
                }
                next += 1;
            }
            zeros_before += z;
        }
        if ones != self.header.stored || next != lay.samples {
            return Err(self.structure_error(0, "wrong number of values in the upper part"));
        }
        if self.upper_bit(bits - 1) {
            return Err(self.structure_error(last, "the upper part does not end a bucket"));
        }
        Ok(())
    }

    fn structure_error(&self, word: usize, why: &str) -> Error {
        Error::corrupt(
            (self.lay.upper_at + word * 8) as u64,
            format!("range filter: {why}"),
        )
    }

    #[inline]
    fn upper_word(&self, i: usize) -> u64 {
        le_u64(
            self.block,
            self.lay.upper_at.wrapping_add(i.wrapping_mul(8)),
        )
    }

    #[inline]
    fn upper_bit(&self, at: u64) -> bool {
        self.upper_word((at / 64) as usize) >> (at % 64) & 1 == 1
    }

    #[inline]
    fn sample(&self, j: u64) -> u32 {
        le_u32(
            self.block,
            self.lay
                .samples_at
                .wrapping_add((j as usize).wrapping_mul(4)),
        )
    }

    /// The low bits of value `i`.
    #[inline]
    fn low(&self, i: u64) -> u64 {
        let l = u32::from(self.header.low_bits);
        if l == 0 {
            return 0;
        }
        let bit = i.wrapping_mul(u64::from(l));
        let w = le_u64(
            self.block,
            self.lay.lows_at.wrapping_add((bit / 8) as usize),
        );
        (w >> (bit % 8)) & ((1u64 << l) - 1)
    }

    /// Where bucket `b` starts in the upper part: after b zeros. Counted from the nearer of
    /// the two select samples around it, forwards or backwards.
    #[inline]
    fn bucket_start(&self, b: u64) -> u64 {
        let s = u32::from(self.header.sample_log2);
        let j = b >> s;
        let m = b & ((1u64 << s) - 1);
        if m == 0 {
            return u64::from(self.sample(j));
        }
        if m <= 1 << (s - 1) || j + 1 >= self.lay.samples {
            return self.after_zeros(u64::from(self.sample(j)), m);
        }
        // Backwards from where bucket (j + 1)·2^S starts: the zero that ends bucket b − 1 is
        // the (2^S − m + 1)-th zero before it.
        let next = u64::from(self.sample(j + 1));
        self.zero_before(next, (1u64 << s) - m + 1) + 1
    }

    /// The position just after the `m`-th zero (m ≥ 1) at or after `from`.
    #[inline]
    fn after_zeros(&self, from: u64, m: u64) -> u64 {
        let mut word = (from / 64) as usize;
        let mut zeros = !self.upper_word(word) & (u64::MAX << (from % 64));
        let mut m = m;
        loop {
            let z = u64::from(zeros.count_ones());
            if m <= z {
                return word as u64 * 64 + select_in_word(zeros, (m - 1) as u32) + 1;
            }
            m -= z;
            word += 1;
            if word >= self.lay.upper_words {
                return self.lay.upper_bits; // not on a checked block
            }
            zeros = !self.upper_word(word);
        }
    }

    /// The position of the `t`-th zero (t ≥ 1) before `end`, counting backwards.
    #[inline]
    fn zero_before(&self, end: u64, t: u64) -> u64 {
        let Some(last) = end.checked_sub(1) else {
            return 0; // not on a checked block
        };
        let mut word = (last / 64) as usize;
        let mut zeros = !self.upper_word(word) & (u64::MAX >> (63 - last % 64));
        let mut t = t;
        loop {
            let z = u64::from(zeros.count_ones());
            if t <= z {
                return word as u64 * 64 + select_in_word(zeros, (z - t) as u32);
            }
            t -= z;
            if word == 0 {
                return 0; // not on a checked block
            }
            word -= 1;
            zeros = !self.upper_word(word);
        }
    }

    /// How many ones follow position `at` without a zero between.
    #[inline]
    fn ones_from(&self, at: u64) -> u64 {
        let mut word = (at / 64) as usize;
        let shift = at % 64;
        let mut run = u64::from((!(self.upper_word(word) >> shift)).trailing_zeros());
        if run < 64 - shift {
            return run;
        }
        run = 64 - shift;
        loop {
            word += 1;
            if word >= self.lay.upper_words {
                return run;
            }
            let t = u64::from((!self.upper_word(word)).trailing_zeros());
            run += t;
            if t < 64 {
                return run;
            }
        }
    }

    /// The position of the first one at or after `at`.
    #[inline]
    fn next_one(&self, at: u64) -> Option<u64> {
        let mut word = (at / 64) as usize;
        let mut w = self.upper_word(word) & (u64::MAX << (at % 64));
        loop {
            if w != 0 {
                return Some(word as u64 * 64 + u64::from(w.trailing_zeros()));
            }
            word += 1;
            if word >= self.lay.upper_words {
                return None;
            }
            w = self.upper_word(word);
        }
    }

    /// The smallest stored value ≥ `x` (x < r), if any.
    fn successor(&self, x: u64) -> Option<u64> {
        let l = u32::from(self.header.low_bits);
        let b = x >> l;
        let xl = x & ((1u64 << l) - 1);
        // The sample before bucket b tells the rank of its bucket exactly, and the values
        // between it and b are about m·n/buckets (± a few): touch the low bits there now, so
        // their cache miss overlaps the upper part's. Changes nothing but timing.
        let s = u32::from(self.header.sample_log2);
        let j = b >> s;
        let rank = u64::from(self.sample(j)).saturating_sub(j << s);
        let ahead = ((b & ((1u64 << s) - 1)) * self.density) >> 32;
        std::hint::black_box(self.low(rank + ahead));
        let start = self.bucket_start(b);
        let first = start.checked_sub(b)?;
        let run = self.ones_from(start);
        let end = first + run;
        // The first value of bucket b whose low bits are ≥ xl.
        let (mut lo, mut hi) = (first, end);
        if run > 8 {
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if self.low(mid) < xl {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
        } else {
            while lo < end && self.low(lo) < xl {
                lo += 1;
            }
        }
        if lo < end {
            return Some((b << l) | self.low(lo));
        }
        if end >= self.header.stored {
            return None;
        }
        // The next value lies in a later bucket: the next one after this bucket's zero.
        let at = self.next_one(start + run + 1)?;
        Some((at.checked_sub(end)? << l) | self.low(end))
    }

    /// True when some stored value lies in [x, y] (x ≤ y < r).
    #[inline]
    fn any_in(&self, x: u64, y: u64) -> bool {
        self.successor(x).is_some_and(|v| v <= y)
    }

    /// True when some stored value lies in the `len` values from `start` on, wrapping at r.
    fn any_in_piece(&self, start: u64, len: u64) -> bool {
        let r = self.header.universe;
        if len >= r {
            return true;
        }
        let end = start + (len - 1); // < 2r ≤ 2^64
        if end < r {
            self.any_in(start, end)
        } else {
            self.any_in(start, r - 1) || self.any_in(0, end - r)
        }
    }

    /// May a key's window lie in [x, y]? (x ≤ y, both within [x_min, x_max]).
    fn may_hold_windows(&self, x: u128, y: u128) -> bool {
        let h = &self.hasher;
        let (bx, by) = (x >> h.s, y >> h.s);
        if by - bx >= 2 {
            return true; // a whole block: at least half of [0, r)
        }
        let span = 1u64 << h.s;
        if bx == by {
            return self.any_in_piece(h.image(x), (y - x) as u64 + 1);
        }
        let (ox, oy) = (h.offset(x), h.offset(y));
        self.any_in_piece(h.image(x), span - ox) || self.any_in_piece(h.block_start(by), oy + 1)
    }

    /// The window of `key` if it starts with the common prefix, else how it compares with
    /// the prefix (`Less`: below every key; `Greater`: above every key).
    #[inline]
    fn window_of(&self, key: &[u8]) -> std::result::Result<u128, Ordering> {
        let p = self.prefix();
        match key.get(..p.len()) {
            Some(head) if head == p => Ok(self.window_value(&key[p.len()..])),
            _ => Err(key.cmp(p)),
        }
    }

    /// The window of a key whose bytes after the common prefix are `rest`.
    #[inline]
    fn window_value(&self, rest: &[u8]) -> u128 {
        let w = usize::from(self.header.window);
        if w == 0 {
            0
        } else {
            window16(rest, 0) >> (8 * (MAX_WINDOW - w))
        }
    }

    /// The smallest window a key in the range can have. A key k ≥ lo has window(k) ≥
    /// window(lo); when no key is longer than the window (`FIT`) and lo's bytes after the
    /// prefix are longer than the window (or as long, for an open end), a key with lo's
    /// window is a prefix of lo's window, so below lo: the range starts one window higher.
    fn lower(&self, lo: Bound<&[u8]>) -> End {
        let (k, inclusive) = match lo {
            Bound::Unbounded => return End::Open,
            Bound::Included(k) => (k, true),
            Bound::Excluded(k) => (k, false),
        };
        match self.window_of(k) {
            Err(Ordering::Greater) => End::Empty,
            Err(_) => End::Open,
            Ok(x) => {
                let rest = k.len() - self.prefix().len();
                let w = usize::from(self.header.window);
                let past = self.header.flags & FIT != 0 && (rest > w || (rest == w && !inclusive));
                match (past, x.checked_add(1)) {
                    (false, _) => End::At(x),
                    (true, Some(x)) => End::At(x),
                    (true, None) => End::Empty,
                }
            }
        }
    }

    /// The largest window a key in the range can have. A key k ≤ hi has window(k) ≤
    /// window(hi); for an open end k < hi, strictly below when hi's bytes after the prefix fit
    /// the window and a key with hi's window would have to start with them: when hi's last
    /// byte is not zero, or every key fills the window (`FILL`).
    fn upper(&self, hi: Bound<&[u8]>) -> End {
        let (k, inclusive) = match hi {
            Bound::Unbounded => return End::Open,
            Bound::Included(k) => (k, true),
            Bound::Excluded(k) => (k, false),
        };
        match self.window_of(k) {
            Err(Ordering::Greater) => End::Open,
            Err(_) => End::Empty,
            Ok(y) if inclusive => End::At(y),
            Ok(y) => {
                let rest = &k[self.prefix().len()..];
                let exact = rest.len() <= usize::from(self.header.window)
                    && (self.header.flags & FILL != 0 || rest.last().is_none_or(|&b| b != 0));
                match (exact, y.checked_sub(1)) {
                    (false, _) => End::At(y),
                    (true, Some(y)) => End::At(y),
                    (true, None) => End::Empty,
                }
            }
        }
    }

    /// May the table hold a key in the range? `false` is certain: no key of the set the
    /// filter was built from lies in it. Inverted and empty ranges answer `false`.
    pub fn may_intersect<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> bool {
        fn as_bytes<K: AsRef<[u8]>>(b: Bound<&K>) -> Bound<&[u8]> {
            match b {
                Bound::Included(k) => Bound::Included(k.as_ref()),
                Bound::Excluded(k) => Bound::Excluded(k.as_ref()),
                Bound::Unbounded => Bound::Unbounded,
            }
        }
        self.may_intersect_bounds(as_bytes(range.start_bound()), as_bytes(range.end_bound()))
    }

    /// [`may_intersect`](Self::may_intersect) for a pair of byte bounds.
    pub fn may_intersect_bounds(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
        if self.header.stored == 0 || bounds_empty(lo, hi) {
            return false;
        }
        let x = match self.lower(lo) {
            End::Empty => return false,
            End::Open => self.x_min,
            End::At(x) => x.max(self.x_min),
        };
        let y = match self.upper(hi) {
            End::Empty => return false,
            End::Open => self.x_max,
            End::At(y) => y.min(self.x_max),
        };
        x <= y && self.may_hold_windows(x, y)
    }

    /// May the table hold a key that starts with `prefix` (the keys of `scan_prefix`)?
    pub fn may_contain_prefix(&self, prefix: &[u8]) -> bool {
        if self.header.stored == 0 {
            return false;
        }
        let p = self.prefix();
        if p.starts_with(prefix) {
            return true; // every key starts with it
        }
        let Some(rest) = prefix.strip_prefix(p) else {
            return false; // no key does
        };
        let w = usize::from(self.header.window);
        let x = self.window_value(rest);
        // The windows of keys starting with `prefix`: those of `rest` followed by anything.
        let y = if rest.len() >= w {
            x
        } else {
            x | ((1u128 << (8 * (w - rest.len()))) - 1)
        };
        let (x, y) = (x.max(self.x_min), y.min(self.x_max));
        x <= y && self.may_hold_windows(x, y)
    }

    /// The block's header.
    pub fn header(&self) -> &RangeHeader {
        &self.header
    }

    /// The common prefix P of the keys the filter was built from.
    pub fn prefix(&self) -> &'a [u8] {
        self.block.get(self.lay.prefix_at..).unwrap_or_default()
    }

    /// Size of the whole block in bytes.
    pub fn block_len(&self) -> u64 {
        self.block.len() as u64
    }

    /// Bits of the block per key it was built from (header and prefix included).
    pub fn bits_per_key(&self) -> f64 {
        self.block.len() as f64 * 8.0 / self.header.keys.max(1) as f64
    }

    /// True when one block of the hash holds every window: the filter then has no false
    /// positives at all, except between keys that share their first W bytes after the
    /// common prefix.
    pub fn is_exact(&self) -> bool {
        let w = u32::from(self.header.window);
        self.hasher.s >= 8 * w
    }

    /// The false-positive rate the design bounds for an empty range whose windows span `len`
    /// values (for keys that fit the window, a range [a, a + len) of their integers):
    /// 1 − (1 − len/r)^n ≤ n·len/r, 0 for an exact filter; 1 for ranges of two blocks or
    /// more (len > 2^s), which the filter does not try to rule out.
    pub fn expected_fpr(&self, len: u64) -> f64 {
        if self.header.stored == 0 || self.is_exact() || len == 0 {
            return 0.0;
        }
        if len > 1u64 << self.hasher.s {
            return 1.0;
        }
        let r = self.header.universe as f64;
        1.0 - (1.0 - len as f64 / r).powf(self.header.stored as f64)
    }
}

/// True when (lo, hi) holds no byte string at all: lo above hi, or equal with an end open.
#[inline]
fn bounds_empty(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    let (a, a_in) = match lo {
        Bound::Unbounded => return false,
        Bound::Included(a) => (a, true),
        Bound::Excluded(a) => (a, false),
    };
    let (b, b_in) = match hi {
        Bound::Unbounded => return false,
        Bound::Included(b) => (b, true),
        Bound::Excluded(b) => (b, false),
    };
    // The first 8 bytes decide most comparisons without a byte loop.
    let order = match prefix8(a).cmp(&prefix8(b)) {
        Ordering::Equal => a.cmp(b),
        o => o,
    };
    match order {
        Ordering::Greater => true,
        Ordering::Equal => !(a_in && b_in),
        Ordering::Less => false,
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
    fn select_in_word_finds_every_bit() {
        for w in [
            1u64,
            0x8000_0000_0000_0000,
            u64::MAX,
            0xf0f0_0000_0000_0f0f,
            0x5555_5555_5555_5555,
        ] {
            let mut seen = 0;
            for k in 0..w.count_ones() {
                let pos = select_in_word(w, k);
                assert_eq!(w >> pos & 1, 1);
                assert_eq!((w & ((1u64 << pos) - 1)).count_ones(), k);
                seen += 1;
            }
            assert_eq!(seen, w.count_ones());
        }
    }

    #[test]
    fn hash_and_sort_sorts() {
        for (n, r, parts) in [
            (0usize, 1u64, 0u32),
            (300, 1 << 9, 1),
            (5000, 1 << 40, 2),
            (5000, (1 << 62) - 5, 3),
            (70_000, 15_420_235 * 70, 5),
            (200_000, 15_420_235 * 200, 11),
        ] {
            let hasher = Hasher::new(n as u64, r);
            let xs: Vec<u128> = (0..n as u128).map(|i| i * 0x1_0000_0001).collect();
            let mut tails: Vec<[u64; 2]> =
                xs.iter().map(|&x| [(x >> 64) as u64, x as u64]).collect();
            let bits = 64 - r.saturating_sub(1).leading_zeros();
            let mut want: Vec<u64> = xs.iter().map(|&x| hasher.image(x)).collect();
            want.sort_unstable();
            let runs = [(0, 0)];
            let windows = Windows {
                runs: &runs,
                prefix: 0,
                width: 16,
                first: 0,
            };
            let (lo, hi) = hash_and_sort(&mut tails, &windows, &hasher, bits, parts.min(bits));
            let got: Vec<u64> = sorted_values(&tails).collect();
            assert_eq!(got, want, "n {n} r {r}");
            assert_eq!(
                (lo, hi),
                (xs.first().map_or(0, |&x| x), xs.last().map_or(0, |&x| x))
            );
        }
    }

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
