//! Binary fuse filter (Graf & Lemire, "Binary Fuse Filters: Fast and Smaller Than Xor
//! Filters", 2022): a static filter for immutable tables. Every key owns three slots of an
//! array of f-bit fingerprints, and the XOR of its three slots is the key's fingerprint; a
//! query XORs three bytes (or 16/32-bit words) and compares. About 1.125·f bits per key for
//! large n and a false-positive rate of 2^-f: at f = 8, 9.0 bits per key for 0.39 %.
//!
//! Layout of one filter: the array is `segments + 2` segments of `L = 2^s` slots. For a key
//! hash h (the store's [`crate::hash::key_hash`]), with the filter's seed:
//!
//! ```text
//! x  = h if seed = 0, else mix64(h + seed)               // murmur3 finaliser, mod 2^64
//! h0 = ⌊x · (segments·L) / 2^64⌋                         // in segments 0 .. segments
//! h1 = (h0 + L)  XOR ((x >> 18) mod L)                   // in the next segment
//! h2 = (h0 + 2L) XOR (x mod L)                           // and the one after
//! fp = (x XOR (x >> 32)) mod 2^f
//! maybe present  ⇔  F[h0] XOR F[h1] XOR F[h2] = fp
//! ```
//!
//! Construction ("peeling") finds an order in which every key has a slot no later key uses:
//! keys are hashed with a seed and sorted by segment (so the slot counters are updated in
//! address order), every slot counts its keys and XORs their hashes, slots with one key are
//! peeled repeatedly, and the fingerprints are then assigned in reverse peeling order. The
//! first attempt uses seed 0 (the key hashes as they are); when peeling fails (a few % of
//! attempts) the build retries with the next seed of a fixed sequence; duplicate hashes are dropped (detected as they are counted, or by a sort after
//! a failed attempt). Everything depends only on the hashes, never on the thread count: the
//! only parallel step, hashing, writes each key's result to its own position.
//!
//! Header fields (see `format.md`): p1 = seed, p2 = bytes (f, arity = 3, s, 0), p3 = segments
//! (0 for an empty filter, whose array is empty and which answers "absent" to everything).

use rayon::prelude::*;

use super::{FilterKind, Header, Run, View};
use crate::error::{Error, Result};
use crate::hash::{fastrange, mix64};

/// Keys per slot group: every key touches this many slots.
pub const ARITY: u32 = 3;
/// Largest segment length the builder uses, as a power of two (2^18 slots, as the reference
/// implementation): longer segments do not help peeling and hurt cache locality.
pub const MAX_SEGMENT_LOG2: u32 = 18;
/// Largest segment length a reader accepts, as a power of two.
pub const MAX_READ_SEGMENT_LOG2: u32 = 30;
/// Keys hashed and sorted per parallel task (a fixed size, so the work split does not depend
/// on the thread count; the result never does anyway).
const HASH_CHUNK: usize = 1 << 16;
/// First state of the seed sequence (splitmix64); the file depends on it, so it never changes.
const SEED_START: u64 = 0x726b_2b9d_438b_9d4d;
/// Failed attempts on one array size before the array grows by one segment.
const ATTEMPTS_PER_SIZE: u32 = 16;

/// The fingerprint width for target `fpr`: the smallest of 8, 16 and 32 bits with
/// 2^-f ≤ ε (32 when even 2^-32 is above ε).
pub fn fingerprint_bits(fpr: f64) -> u32 {
    [8u32, 16]
        .into_iter()
        .find(|&f| 2f64.powi(-(f as i32)) <= fpr)
        .unwrap_or(32)
}

/// 2^-f: a key that is not in the filter matches when three slots XOR to its fingerprint,
/// which for a random key has probability 2^-f. 0 for an empty filter.
pub fn theoretical_fpr(fp_bits: u32, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        2f64.powi(-(fp_bits.min(64) as i32))
    }
}

/// Segment length (log2) and segment count of a filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// log2 of the segment length L.
    pub segment_log2: u32,
    /// Segments a key's first slot can fall in; the array has `segments + 2` (0: empty).
    pub segments: u32,
}

impl Layout {
    /// The reference implementation's sizing for `n` distinct keys: L = 2^⌊ln n / ln 3.33 +
    /// 2.25⌋ (at most 2^18), array ≥ n · max(1.125, 0.875 + 0.25 · ln 10⁶ / ln n) slots,
    /// rounded up to whole segments, at least 3. These use f64 logarithms; the result is
    /// stored in the header, so readers never recompute it.
    pub fn for_keys(n: u64) -> Layout {
        if n == 0 {
            return Layout {
                segment_log2: 0,
                segments: 0,
            };
        }
        let nf = n as f64;
        let segment_log2 = ((nf.ln() / 3.33f64.ln() + 2.25).floor() as u32).min(MAX_SEGMENT_LOG2);
        let factor = (0.875 + 0.25 * 1e6f64.ln() / nf.max(2.0).ln()).max(1.125);
        let capacity = (nf * factor).round() as u64;
        let per = 1u64 << segment_log2;
        let total = capacity.div_ceil(per).max(ARITY as u64);
        Layout {
            segment_log2,
            segments: u32::try_from(total - (ARITY as u64 - 1)).unwrap_or(u32::MAX),
        }
    }

    /// Slots in the array: (segments + 2) · L, or 0 for an empty filter.
    pub fn array_len(&self) -> u64 {
        if self.segments == 0 {
            0
        } else {
            (self.segments as u64 + ARITY as u64 - 1) << self.segment_log2
        }
    }

    fn grown(self) -> Layout {
        Layout {
            segments: self.segments.saturating_add(1 + self.segments / 64),
            ..self
        }
    }
}

/// Where a mixed hash's three slots are (see the module documentation).
#[derive(Clone, Copy, Debug)]
struct Slots {
    /// segments · L: the range of the first slot.
    first_range: u64,
    len: u64,
    mask: u64,
}

impl Slots {
    fn new(l: Layout) -> Slots {
        Slots {
            first_range: (l.segments as u64) << l.segment_log2,
            len: 1 << l.segment_log2,
            mask: (1 << l.segment_log2) - 1,
        }
    }

    #[inline(always)]
    fn of(&self, x: u64) -> [u64; 3] {
        let h0 = fastrange(x, self.first_range);
        let h1 = (h0 + self.len) ^ ((x >> 18) & self.mask);
        let h2 = (h0 + 2 * self.len) ^ (x & self.mask);
        [h0, h1, h2]
    }
}

/// The seeded hash of a key hash: the key hash itself for seed 0 (it is xxh3 already, and
/// the first attempt, which almost always succeeds, then costs a query no mixing: the
/// mixer's two multiplications were about a third of a query's latency), else
/// mix64(hash + seed).
#[inline(always)]
fn mixed(hash: u64, seed: u64) -> u64 {
    if seed == 0 {
        hash
    } else {
        mix64(hash.wrapping_add(seed))
    }
}

/// splitmix64: the seed sequence of the retries.
pub(super) fn next_seed(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A fingerprint word: u8, u16 or u32.
pub(super) trait Fingerprint:
    Copy + Default + PartialEq + std::ops::BitXor<Output = Self>
{
    const BYTES: usize;
    /// The low bits of x XOR (x >> 32).
    fn of(x: u64) -> Self;
    /// The little-endian word at slot `i` of `body` (`None` past its end, which a checked
    /// view never asks).
    fn get(body: &[u8], i: u64) -> Option<Self>;
    /// Writes slot `i` (nothing past the end).
    fn put(self, body: &mut [u8], i: u64);
}

macro_rules! fingerprint {
    ($t:ty) => {
        impl Fingerprint for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn of(x: u64) -> Self {
                (x ^ (x >> 32)) as $t
            }
            #[inline(always)]
            fn get(body: &[u8], i: u64) -> Option<Self> {
                let at = (i as usize).wrapping_mul(Self::BYTES);
                Some(<$t>::from_le_bytes(*body.get(at..)?.first_chunk()?))
            }
            #[inline(always)]
            fn put(self, body: &mut [u8], i: u64) {
                let at = i as usize * Self::BYTES;
                if let Some(w) = body.get_mut(at..at + Self::BYTES) {
                    w.copy_from_slice(&self.to_le_bytes());
                }
            }
        }
    };
}
fingerprint!(u8);
fingerprint!(u16);
fingerprint!(u32);

/// Builds a binary fuse block over `hashes` (duplicates allowed) with the fingerprint width
/// [`fingerprint_bits`]`(fpr)`. Hashing runs on the current rayon pool; the bytes do not
/// depend on its size. Refuses more keys than an array of 2^32 slots holds (about 3.8
/// billion; the construction numbers slots with 32 bits).
pub fn build(fpr: f64, hashes: &[u64]) -> Result<Vec<u8>> {
    if Layout::for_keys(hashes.len() as u64).array_len() > u32::MAX as u64 {
        return Err(Error::InvalidArgument(format!(
            "{} keys are too many for one binary fuse filter",
            hashes.len()
        )));
    }
    Ok(match fingerprint_bits(fpr) {
        8 => build_with::<u8>(fpr, hashes),
        16 => build_with::<u16>(fpr, hashes),
        _ => build_with::<u32>(fpr, hashes),
    })
}

/// Reusable buffers of the construction.
struct Scratch {
    /// Mixed hashes sorted by segment; after peeling, the peeled hashes in order.
    order: Vec<u64>,
    /// Which of its three slots each peeled key was peeled from.
    peeled_from: Vec<u8>,
    /// Per slot: 4 × keys + XOR of the slot numbers (0, 1, 2) the keys use it as.
    count: Vec<u8>,
    /// Per slot: XOR of the mixed hashes of its keys.
    xor: Vec<u64>,
    /// The queue of slots holding one key.
    queue: Vec<u32>,
}

/// Why an attempt failed.
enum Failure {
    /// Peeling stopped with keys left (unlucky seed, or undetected duplicates).
    Stuck,
    /// A slot counted 64 keys (its 6-bit counter overflowed): duplicates, almost surely.
    Crowded,
}

fn build_with<F: Fingerprint>(fpr: f64, hashes: &[u64]) -> Vec<u8> {
    let f = (F::BYTES * 8) as u32;
    let mut keys: std::borrow::Cow<'_, [u64]> = hashes.into();
    let mut layout = Layout::for_keys(keys.len() as u64);
    let mut seed_state = SEED_START;
    let mut first = true;
    let mut deduplicated = false;
    let mut failures = 0u32;
    let (seed, peeled) = loop {
        if keys.is_empty() {
            break (0, None);
        }
        let seed = if first { 0 } else { next_seed(&mut seed_state) };
        first = false;
        match attempt(&keys, seed, layout) {
            Ok(done) => break (seed, Some(done)),
            Err(_) if !deduplicated => {
                // Duplicates are the usual reason: drop them once, then retry.
                let mut unique = keys.into_owned();
                unique.par_sort_unstable();
                unique.dedup();
                layout = Layout::for_keys(unique.len() as u64);
                keys = unique.into();
                deduplicated = true;
            }
            Err(Failure::Stuck | Failure::Crowded) => {
                failures += 1;
                if failures.is_multiple_of(ATTEMPTS_PER_SIZE) {
                    layout = layout.grown();
                }
            }
        }
    };
    let len = layout.array_len() as usize;
    let mut body = vec![0u8; len * F::BYTES];
    let mut stored = 0u64;
    if let Some((scratch, stack)) = peeled {
        let slots = Slots::new(layout);
        stored = stack as u64;
        for i in (0..stack).rev() {
            let x = scratch.order[i];
            let p = slots.of(x);
            let k = scratch.peeled_from[i] as usize;
            let (o1, o2) = (p[(k + 1) % 3], p[(k + 2) % 3]);
            let other = |i| F::get(&body, i).unwrap_or_default();
            let v = F::of(x) ^ other(o1) ^ other(o2);
            v.put(&mut body, p[k]);
        }
    }
    Header {
        kind: FilterKind::BinaryFuse,
        version: FilterKind::BinaryFuse.version(),
        n: stored,
        target_fpr: fpr,
        p1: seed,
        p2: u32::from_le_bytes([f as u8, ARITY as u8, layout.segment_log2 as u8, 0]),
        p3: layout.segments,
        body_len: body.len() as u64,
    }
    .encode_block(&body)
}

/// One construction attempt with `seed`: on success the scratch buffers (peeling order in
/// `order`) and the number of keys peeled.
fn attempt(
    keys: &[u64],
    seed: u64,
    layout: Layout,
) -> std::result::Result<(Scratch, usize), Failure> {
    let n = keys.len();
    let cap = layout.array_len() as usize;
    let slots = Slots::new(layout);
    let mut s = Scratch {
        order: vec![0; n],
        peeled_from: vec![0; n],
        count: vec![0; cap],
        xor: vec![0; cap],
        queue: vec![0; cap],
    };

    // 1. Hash and sort by segment, so that the counters below are updated in address order.
    //    In parallel and deterministically: every fixed-size chunk of keys is hashed and
    //    counting-sorted by block into its own buffer; then each block's run of the output
    //    is filled from every chunk's part for that block, in chunk order. The result is the
    //    one a sequential counting sort gives, whatever the thread count.
    let bits = (u64::from(layout.segments)
        .next_power_of_two()
        .trailing_zeros())
    .max(1);
    let blocks = 1usize << bits;
    let block = |x: u64| (x >> (64 - bits)) as usize;
    let parts: Vec<(Vec<u64>, Vec<usize>)> = keys
        .par_chunks(HASH_CHUNK)
        .map(|chunk| {
            let mut start = vec![0usize; blocks + 1];
            for &k in chunk {
                start[block(mixed(k, seed)) + 1] += 1;
            }
            for b in 1..start.len() {
                start[b] += start[b - 1];
            }
            let mut sorted = vec![0u64; chunk.len()];
            let mut next = start.clone();
            for &k in chunk {
                let x = mixed(k, seed);
                let b = block(x);
                sorted[next[b]] = x;
                next[b] += 1;
            }
            (sorted, start)
        })
        .collect();
    let mut runs: Vec<&mut [u64]> = Vec::with_capacity(blocks);
    let mut rest: &mut [u64] = &mut s.order;
    for b in 0..blocks {
        let len: usize = parts.iter().map(|(_, st)| st[b + 1] - st[b]).sum();
        let (run, tail) = rest.split_at_mut(len);
        runs.push(run);
        rest = tail;
    }
    runs.into_par_iter().enumerate().for_each(|(b, run)| {
        let mut at = 0;
        for (sorted, st) in &parts {
            let part = &sorted[st[b]..st[b + 1]];
            run[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
    });
    drop(parts);

    // 2. Count. A hash equal to one already counted cancels in every slot's XOR; when one
    //    of its slots is left holding exactly that pair (count 2, XOR 0) the copy is
    //    removed again and counted as a duplicate. Other duplicates make peeling fail, and
    //    the caller deduplicates.
    let mut duplicates = 0usize;
    let mut crowded = false;
    for &x in &s.order {
        let p = slots.of(x).map(|i| i as usize);
        for (j, &i) in p.iter().enumerate() {
            s.count[i] = s.count[i].wrapping_add(4) ^ j as u8;
            s.xor[i] ^= x;
        }
        if s.xor[p[0]] & s.xor[p[1]] & s.xor[p[2]] == 0
            && p.iter().any(|&i| s.xor[i] == 0 && s.count[i] == 8)
        {
            duplicates += 1;
            for (j, &i) in p.iter().enumerate() {
                s.count[i] = s.count[i].wrapping_sub(4) ^ j as u8;
                s.xor[i] ^= x;
            }
        }
        // 64 keys wrap a slot's 6-bit counter to 0.
        crowded |= p.iter().any(|&i| s.count[i] < 4);
    }
    if crowded {
        return Err(Failure::Crowded);
    }

    // 3. Peel: a slot with one key gives that key's position; removing the key from its
    //    other two slots may leave them with one key each.
    let mut queued = 0usize;
    for i in 0..cap {
        s.queue[queued] = i as u32;
        queued += (s.count[i] >> 2 == 1) as usize;
    }
    let mut stack = 0usize;
    while queued > 0 {
        queued -= 1;
        let i = s.queue[queued] as usize;
        if s.count[i] >> 2 != 1 {
            continue;
        }
        let x = s.xor[i];
        let k = (s.count[i] & 3) as usize;
        s.order[stack] = x;
        s.peeled_from[stack] = k as u8;
        stack += 1;
        let p = slots.of(x);
        for j in [(k + 1) % 3, (k + 2) % 3] {
            let o = p[j] as usize;
            s.queue[queued] = o as u32;
            queued += (s.count[o] >> 2 == 2) as usize;
            s.count[o] = s.count[o].wrapping_sub(4) ^ j as u8;
            s.xor[o] ^= x;
        }
    }
    if stack + duplicates == n {
        Ok((s, stack))
    } else {
        Err(Failure::Stuck)
    }
}

/// Zero-copy reader over a binary fuse body.
#[derive(Clone, Copy)]
pub struct FuseView {
    seed: u64,
    slots: Slots,
    fp_bits: u32,
    /// Non-empty with 8-bit fingerprints (see [`FuseView::is_inline`]).
    inline: bool,
}

impl std::fmt::Debug for FuseView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FuseView")
            .field("seed", &self.seed)
            .field("fp_bits", &self.fp_bits)
            .finish()
    }
}

impl FuseView {
    pub(super) fn new(h: &Header, body: &[u8]) -> Result<Self> {
        let [f, arity, segment_log2, zero] = h.p2.to_le_bytes();
        let f = f as u32;
        if ![8, 16, 32].contains(&f) {
            return Err(Error::corrupt(
                40,
                format!("binary fuse fingerprint width {f} (8, 16 or 32)"),
            ));
        }
        if arity as u32 != ARITY {
            return Err(Error::corrupt(
                41,
                format!("binary fuse arity {arity} (only {ARITY} supported)"),
            ));
        }
        if segment_log2 as u32 > MAX_READ_SEGMENT_LOG2 {
            return Err(Error::corrupt(
                42,
                format!(
                    "binary fuse segment length 2^{segment_log2} above 2^{MAX_READ_SEGMENT_LOG2}"
                ),
            ));
        }
        if zero != 0 {
            return Err(Error::corrupt(43, "binary fuse reserved byte not zero"));
        }
        let layout = Layout {
            segment_log2: segment_log2 as u32,
            segments: h.p3,
        };
        let want = layout.array_len().checked_mul(f as u64 / 8);
        if want != Some(body.len() as u64) {
            return Err(Error::corrupt(
                44,
                format!(
                    "binary fuse body of {} bytes does not match {} segments of 2^{segment_log2} {f}-bit slots",
                    body.len(),
                    h.p3
                ),
            ));
        }
        Ok(FuseView {
            seed: h.p1,
            slots: Slots::new(layout),
            fp_bits: f,
            inline: f == 8 && layout.segments > 0,
        })
    }

    /// The query for `F`-wide fingerprints of a non-empty filter. The slots' bounds checks
    /// are branches that are never taken (a conditional move in their place, clamping the
    /// index, measured 5-10 % slower: the loads then wait for the compare).
    #[inline(always)]
    pub(super) fn query_with<F: Fingerprint>(&self, b: &[u8], hash: u64) -> bool {
        let x = mixed(hash, self.seed);
        let [h0, h1, h2] = self.slots.of(x);
        let (Some(f0), Some(f1), Some(f2)) = (F::get(b, h0), F::get(b, h1), F::get(b, h2)) else {
            return true;
        };
        F::of(x) ^ f0 ^ f1 ^ f2 == F::default()
    }

    /// True for a non-empty filter of 8-bit fingerprints, which `Filter::may_contain` answers
    /// inline.
    #[inline]
    pub(super) fn is_inline(&self) -> bool {
        self.inline
    }

    /// The query kernel for this fingerprint width (see `Filter::may_contain`); an empty
    /// filter answers "absent" to everything.
    pub(super) fn run(&self) -> Run {
        match (self.slots.first_range, self.fp_bits) {
            (0, _) => |_, _, _| false,
            (_, 8) => |v, hash, body| match v {
                View::Fuse(f) => f.query_with::<u8>(body, hash),
                _ => true,
            },
            (_, 16) => |v, hash, body| match v {
                View::Fuse(f) => f.query_with::<u16>(body, hash),
                _ => true,
            },
            _ => |v, hash, body| match v {
                View::Fuse(f) => f.query_with::<u32>(body, hash),
                _ => true,
            },
        }
    }

    /// Reads the byte of the key's first slot (see [`crate::Filter::touch`]).
    #[inline]
    pub fn touch(&self, body: &[u8], hash: u64) -> u8 {
        let [h0, ..] = self.slots.of(mixed(hash, self.seed));
        let at = h0.saturating_mul(self.fp_bits as u64 / 8);
        body.get(at as usize).copied().unwrap_or(0)
    }

    /// Prefetches the key's three slots (see [`crate::Filter::prefetch_in`]).
    #[inline]
    pub fn prefetch(&self, body: &[u8], hash: u64) {
        let w = self.fp_bits as u64 / 8;
        for h in self.slots.of(mixed(hash, self.seed)) {
            super::simd::prefetch(body, h.saturating_mul(w) as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_width_is_the_smallest_that_meets_epsilon() {
        assert_eq!(fingerprint_bits(0.5), 8);
        assert_eq!(fingerprint_bits(0.01), 8);
        assert_eq!(fingerprint_bits(1.0 / 256.0), 8);
        assert_eq!(fingerprint_bits(0.0039), 16);
        assert_eq!(fingerprint_bits(0.001), 16);
        assert_eq!(fingerprint_bits(1.0 / 65536.0), 16);
        assert_eq!(fingerprint_bits(1e-5), 32);
        assert_eq!(fingerprint_bits(1e-12), 32);
    }

    #[test]
    fn layout_matches_the_reference_sizing() {
        // (n, L, segments): the reference implementation's figures.
        for (n, log2, segments) in [
            (1u64, 2, 1),
            (20, 4, 1),
            (1000, 7, 9),
            (1_000_000, 13, 136),
            (10_000_000, 15, 342),
        ] {
            let l = Layout::for_keys(n);
            assert_eq!((l.segment_log2, l.segments), (log2, segments), "n={n}");
        }
        assert_eq!(Layout::for_keys(0).array_len(), 0);
        assert_eq!(Layout::for_keys(10_000_000).array_len(), 11_272_192);
    }

    /// Every slot index stays inside the array for any hash, segment length and count.
    #[test]
    fn slots_stay_inside_the_array() {
        for log2 in [0u32, 1, 4, 18, 30] {
            for segments in [1u32, 2, 7, 1000, u32::MAX] {
                let l = Layout {
                    segment_log2: log2,
                    segments,
                };
                let s = Slots::new(l);
                for t in 0..2000u64 {
                    let x = if t < 2 { t * u64::MAX } else { mix64(t) };
                    for i in s.of(x) {
                        assert!(
                            i < l.array_len(),
                            "log2={log2} segments={segments} x={x:#x}"
                        );
                    }
                }
            }
        }
    }

    /// The file does not depend on the thread count (hashing is the parallel step).
    #[test]
    fn bytes_do_not_depend_on_the_thread_count() {
        let hashes: Vec<u64> = (0..300_000u64).map(|i| mix64(i ^ 0xf00d)).collect();
        let pool = |t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
        };
        for fpr in [0.01, 0.0001] {
            let one = pool(1).install(|| build(fpr, &hashes)).unwrap();
            for t in [2, 3] {
                let other = pool(t).install(|| build(fpr, &hashes)).unwrap();
                assert!(other == one, "{t} threads");
            }
        }
    }

    /// Retries: over many small sets some first attempts fail; the filters built with a later
    /// seed (and so the mixing query) lose no key either.
    #[test]
    fn retried_seeds_lose_no_key() {
        let (mut retried, mut x) = (0, 1u64);
        for set in 0..3000u64 {
            let n = 20 + set % 200;
            let hashes: Vec<u64> = (0..n)
                .map(|_| {
                    x = mix64(x);
                    x
                })
                .collect();
            let block = build(0.01, &hashes).unwrap();
            let f = crate::filter::Filter::decode(&block).expect("decode");
            retried += (f.header().p1 != 0) as u32;
            assert!(hashes.iter().all(|&h| f.may_contain(h)), "set {set}");
        }
        assert!(retried > 0, "no set needed a second seed");
    }

    /// Heavy duplication: every copy after the first is dropped, none is lost.
    #[test]
    fn duplicates_are_stored_once() {
        let mut hashes: Vec<u64> = (0..5000u64).map(mix64).collect();
        for i in 0..5000u64 {
            hashes.extend(std::iter::repeat_n(mix64(i % 50), 1 + (i % 7) as usize));
        }
        hashes.extend(std::iter::repeat_n(42, 300));
        let block = build(0.01, &hashes).unwrap();
        let f = crate::filter::Filter::decode(&block).expect("decode");
        assert_eq!(f.header().n, 5001);
        assert!(hashes.iter().all(|&h| f.may_contain(h)));
    }
}
