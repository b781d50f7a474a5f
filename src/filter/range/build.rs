//! The range filter's builder: keys in, block out (see the parent module for the design).

use rayon::prelude::*;

use super::build_clock::{cpu_since, thread_cpu};
use super::{
    lcp, low_bits_for, universe_for, window16, Hasher, Layout, RangeHeader, DEFAULT_SEED, FILL,
    FIT, HEADER_LEN, KIND_GRAFITE, MAX_BITS_PER_KEY, MAX_WINDOW, MIN_BITS_PER_KEY, RANGE_VERSION,
    SAMPLE_LOG2,
};
use crate::codec::MAX_KEY_LEN;
use crate::error::{Error, Result};

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
            if k == 0 && shift == 0 {
                // The common case (the key's own 16 bytes after the final common prefix): no
                // shifts.
                for j in a - start..b - start {
                    let [hi, lo] = tails[j];
                    let v = f((u128::from(hi) << 64) | u128::from(lo));
                    tails[j / 2][j % 2] = v;
                }
                continue;
            }
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
/// The tails are seen as u64 words, two per key, in chunks of [`CHUNK`] keys (every chunk
/// but the last holds exactly that many). Pass 1, per
/// chunk: each key's value goes to the chunk's first half (value j over word j, whose tail
/// was read before), then the values are grouped by partition (the top `parts_log2` of
/// `bits` bits) into the second half. Pass 2, per partition: its values are gathered from
/// every chunk's second half, sorted in cache (a counting sort by their next bits, about two
/// slots per value, then an insertion sort of each slot's few values) and written, in value
/// order, to the first halves, which then hold all values sorted (chunk after chunk). Returns
/// the least and the greatest window, the number of distinct values, and (when `timed`) the
/// CPU time of the passes' pieces, each timed on the thread that ran it.
fn hash_and_sort(
    tails: &mut [Vec<[u64; 2]>],
    windows: &Windows<'_>,
    hasher: &Hasher,
    (bits, parts_log2): (u32, u32),
    timed: bool,
) -> (u128, u128, u64, u64) {
    let parts = 1usize << parts_log2;
    let shift = bits - parts_log2;
    let n: usize = tails.iter().map(Vec::len).sum();
    // Per chunk: where each partition's values start in its second half, its least and
    // greatest window.
    let chunks: Vec<(Vec<u32>, u128, u128, u64)> = tails
        .par_iter_mut()
        .enumerate()
        .map(|(c, chunk)| {
            let t = timed.then(thread_cpu);
            let chunk = chunk.as_mut_slice();
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
            prefix_sums(&mut start);
            let (first, second) = chunk.as_flattened_mut().split_at_mut(len);
            let mut at = start.clone();
            for &v in first.iter() {
                let p = (v >> shift) as usize;
                second[at[p] as usize] = v;
                at[p] += 1;
            }
            (start, lo, hi, t.map_or(0, cpu_since))
        })
        .collect();
    let x_min = chunks.iter().map(|c| c.1).min().unwrap_or(0);
    let x_max = chunks.iter().map(|c| c.2).max().unwrap_or(0);
    let first_pass: u64 = chunks.iter().map(|c| c.3).sum();
    let starts: Vec<Vec<u32>> = chunks.into_iter().map(|c| c.0).collect();
    // Each chunk's halves: the first (to hold sorted values) and the second (grouped).
    let mut firsts: Vec<&mut [u64]> = Vec::with_capacity(starts.len());
    let mut seconds: Vec<&[u64]> = Vec::with_capacity(starts.len());
    for chunk in tails.iter_mut() {
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
    // Pass 2 in sequential pieces (a fold's), each timed on its thread (not per partition).
    let (stored, second_pass) = outputs
        .into_par_iter()
        .enumerate()
        .fold(
            || (timed.then(thread_cpu), Vec::new(), Vec::new(), 0u64),
            |(t, mut count, mut sorted, stored): (_, Vec<u32>, Vec<u64>, u64), (p, pieces)| {
                let segments = starts
                    .iter()
                    .zip(&seconds)
                    .map(|(s, second)| &second[s[p] as usize..s[p + 1] as usize]);
                sort_in_cache(segments, shift, &mut count, &mut sorted);
                let mut from = 0;
                for piece in pieces {
                    piece.copy_from_slice(&sorted[from..from + piece.len()]);
                    from += piece.len();
                }
                // Partitions hold disjoint ranges of values: repeats lie in one.
                let repeats = sorted.windows(2).filter(|w| w[0] == w[1]).count();
                let distinct = (sorted.len() - repeats) as u64;
                (t, count, sorted, stored + distinct)
            },
        )
        .map(|(t, _, _, stored)| (stored, t.map_or(0, cpu_since)))
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    (x_min, x_max, stored, first_pass + second_pass)
}

/// Replaces each count by the sum of it and those before it. The running sum stays in a
/// register: `c[i] += c[i - 1]` waits for the store of c[i − 1] to be forwarded, and at two
/// slots per value that wait was a third of the sort's time.
fn prefix_sums(c: &mut [u32]) {
    let mut sum = 0u32;
    for x in c {
        sum += *x;
        *x = sum;
    }
}

/// The sorted values [`hash_and_sort`] left in the first halves of the tails' chunks.
fn sorted_values(tails: &[Vec<[u64; 2]>]) -> Vec<&[u64]> {
    tails
        .iter()
        .map(|chunk| &chunk.as_flattened()[..chunk.len()])
        .collect()
}

/// Sorts the values of `segments` (below 2^`width` once their partition bits are dropped)
/// into `out`: a counting sort by the top bits, one or two slots per value, then an insertion
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
    let slots_log2 = (64 - (len as u64 - 1).leading_zeros()).min(width);
    let shift = width - slots_log2;
    let mask = (1u64 << slots_log2) - 1;
    let slot = |v: u64| ((v >> shift) & mask) as usize;
    count.clear();
    count.resize((1usize << slots_log2) + 1, 0);
    for &v in segments.clone().flatten() {
        count[slot(v) + 1] += 1;
    }
    prefix_sums(count);
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
/// bytes per key until [`finish`](Self::finish), in chunks of 65,536 keys (1 MiB): the
/// buffer grows without copies and without a doubling's slack (a 500,000-key table of a
/// compaction, whose size is not known in advance, holds 8 MB, where one growing vector
/// would reach 16 MB, and 24 MB while it moved).
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
    /// big-endian halves (later, in place, its hashed value: see [`hash_and_sort`]); in
    /// chunks of [`CHUNK`] keys: the full ones, then `cur`, the one being filled.
    full: Vec<Vec<[u64; 2]>>,
    cur: Vec<[u64; 2]>,
    /// The keys pushed and announced by [`reserve`](Self::reserve): a new chunk is sized for
    /// those not pushed yet (up to [`CHUNK`]).
    announced: u64,
    /// (index of the first key, common prefix length) each time the common prefix shrank.
    runs: Vec<(usize, usize)>,
    /// Where the build's time is counted, and the time spent so far (`clock.rs`).
    pub(super) clock: Option<std::sync::Arc<super::BuildClock>>,
    pub(super) nanos: u64,
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
            full: Vec::new(),
            cur: Vec::new(),
            announced: 0,
            runs: Vec::new(),
            clock: None,
            nanos: 0,
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
                self.runs.push((self.keys as usize, d));
            }
        }
        let t = window16(key, self.depth);
        if self.cur.len() == self.cur.capacity() {
            self.grow();
        }
        self.cur.push([(t >> 64) as u64, t as u64]);
        self.min_len = self.min_len.min(key.len());
        self.max_len = self.max_len.max(key.len());
        self.keys += 1;
        Ok(())
    }

    /// Makes room for `keys` more keys (it saves the copies of a growing chunk when the
    /// number of keys is known, as when a memtable is sealed).
    pub fn reserve(&mut self, keys: usize) {
        self.announced = self.announced.max(self.keys).saturating_add(keys as u64);
        self.full.reserve(keys.div_ceil(CHUNK));
    }

    /// Makes room in `cur` for one more tail: a full chunk is put aside and a new one sized
    /// for the keys announced and not pushed yet; a chunk that fills before [`CHUNK`] grows
    /// by doubling, up to [`CHUNK`].
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        if self.cur.len() == CHUNK {
            self.full.push(std::mem::take(&mut self.cur));
        }
        match self.cur.capacity() {
            0 => {
                let want = self.announced.saturating_sub(self.keys);
                self.cur = Vec::with_capacity(want.clamp(64, CHUNK as u64) as usize);
            }
            cap => self.cur.reserve_exact(cap.max(64).min(CHUNK - cap)),
        }
    }

    /// Keys pushed so far.
    pub fn len(&self) -> u64 {
        self.keys
    }

    /// True when no key was pushed.
    pub fn is_empty(&self) -> bool {
        self.keys == 0
    }

    /// Builds the block (see [`finish`](Self::finish)) and, when `timed`, its CPU time.
    pub(super) fn build_block(mut self, timed: bool) -> Result<(Vec<u8>, u64)> {
        let start = timed.then(thread_cpu);
        let p = self.depth;
        let window = (self.max_len - p).min(MAX_WINDOW);
        let first_window = window16(&self.first, p);
        let mut tails = std::mem::take(&mut self.full);
        if !self.cur.is_empty() {
            tails.push(std::mem::take(&mut self.cur));
        }
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
        let setup = start.map_or(0, cpu_since);
        let (x_min, x_max, stored, passes) =
            hash_and_sort(&mut tails, &windows, &hasher, (bits, parts_log2), timed);
        let start = timed.then(thread_cpu);
        let block = encode(
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
            &sorted_values(&tails),
            stored,
        )?;
        Ok((block, setup + passes + start.map_or(0, cpu_since)))
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

/// Writes the block: header, then the body of format.md ("Range filter block"). `sorted`
/// holds the hashed values in ascending order, slice after slice, repeats allowed (they are
/// stored once); `stored` is the number of distinct values, from which the low bits follow.
///
/// One pass, without a branch that depends on the values but the (rare) repeat: each value
/// sets its bit in a register holding the current upper word and appends its low bits to a
/// register holding the current low word, and both registers are stored at every value (a
/// later store of the same word carries the earlier bits).
fn encode(
    h: &RangeHeader,
    prefix: &[u8],
    x_min: u128,
    x_max: u128,
    sorted: &[&[u64]],
    stored: u64,
) -> Result<Vec<u8>> {
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
    let (head, rest) = block.split_at_mut(lay.upper_at);
    let (upper, rest) = rest.split_at_mut(lay.lows_at - lay.upper_at);
    let lows = &mut rest[..lay.prefix_at - lay.lows_at];
    let i = encode_values(sorted, low, s, upper, lows, &mut samples);
    while (samples.len() as u64) < lay.samples {
        samples.push((((samples.len() as u64) << s) + i) as u32);
    }
    let at = lay.samples_at;
    let dst = head.get_mut(at..at + 4 * samples.len()).unwrap_or_default();
    for (d, &pos) in dst.chunks_exact_mut(4).zip(&samples) {
        d.copy_from_slice(&pos.to_le_bytes());
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

/// Stores `word` as the `w`-th little-endian u64 of `bytes` (nothing past the end).
#[inline(always)]
fn put(bytes: &mut [u8], w: usize, word: u64) {
    if let Some(d) = bytes.get_mut(8 * w..8 * w + 8) {
        d.copy_from_slice(&word.to_le_bytes());
    }
}

/// The loop of [`encode`]: writes the distinct values of `sorted` into the Elias–Fano upper
/// part `upper` and low part `lows` (zeroed), and the select samples reached; returns the
/// number of values written.
#[inline(never)]
fn encode_values(
    sorted: &[&[u64]],
    low: u32,
    s: u32,
    upper: &mut [u8],
    lows: &mut [u8],
    samples: &mut Vec<u32>,
) -> u64 {
    let lmask = (1u64 << low) - 1;
    let (mut uw, mut uacc) = (0usize, 0u64); // the upper word being filled
    let (mut lw, mut lacc, mut used) = (0usize, 0u64, 0u32); // the low word being filled
    let mut next_sample = 0u64; // the bucket of the next select sample
    let mut i = 0u64; // values written
    let mut prev = u64::MAX; // no value: values are below r ≤ 2^63
    for slice in sorted {
        for &v in *slice {
            if v == prev {
                continue;
            }
            prev = v;
            let high = v >> low;
            while next_sample <= high {
                samples.push((next_sample + i) as u32);
                next_sample += 1 << s;
            }
            let pos = high + i;
            let w = (pos / 64) as usize;
            uacc = if w == uw { uacc } else { 0 };
            uacc |= 1 << (pos % 64);
            uw = w;
            put(upper, w, uacc);
            // used < 64: the bits of this value that do not fit the word go to the next.
            let bits = v & lmask;
            lacc |= bits << used;
            let spill = (bits >> 1) >> (63 - used);
            used += low;
            put(lows, lw, lacc);
            let full = used >= 64;
            lw += usize::from(full);
            lacc = if full { spill } else { lacc };
            used = if full { used - 64 } else { used };
            i += 1;
        }
    }
    put(lows, lw, lacc);
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{any, prop, prop_oneof, Just, Strategy};

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
    fn reference_encode(
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
        let lay =
            Layout::new(h.stored, h.universe, low, s, prefix.len() as u64).ok_or_else(|| {
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

    /// Keys pushed without a size hint (a compaction's output table) are kept in chunks with
    /// no doubling's slack: at most one partly filled chunk. A single vector grown by
    /// doubling would hold 2^18 entries for these 140,000 keys.
    #[test]
    fn tails_grow_in_chunks_without_slack() {
        let n = 140_000usize;
        let mut b = RangeFilterBuilder::new(16.0).unwrap();
        for i in 0..n as u64 {
            b.push(&crate::hash::mix64(i).to_be_bytes()).unwrap();
        }
        let held: usize = b.full.iter().chain([&b.cur]).map(Vec::capacity).sum();
        assert!(held <= n + CHUNK / 4, "{held} entries held for {n} keys");
        assert!(b.full.iter().all(|c| c.len() == CHUNK));
        // A size hint makes every chunk exact.
        let mut b = RangeFilterBuilder::new(16.0).unwrap();
        b.reserve(n);
        for i in 0..n as u64 {
            b.push(&i.to_be_bytes()).unwrap();
        }
        assert_eq!(
            b.full
                .iter()
                .chain([&b.cur])
                .map(Vec::capacity)
                .sum::<usize>(),
            n
        );
    }

    /// The block of format.md computed the plain way: every key's window at the final common
    /// prefix, hashed with [`Hasher::image`], sorted, encoded by the straightforward encoder
    /// above. The builder must write exactly these bytes.
    fn reference_build(keys: &[Vec<u8>], bits: f64, seed: u64) -> Vec<u8> {
        let n = keys.len() as u64;
        let p = keys.iter().map(|k| lcp(&keys[0], k)).min().unwrap_or(0);
        let max_len = keys.iter().map(Vec::len).max().unwrap_or(0);
        let min_len = keys.iter().map(Vec::len).min().unwrap_or(0);
        let window = (max_len - p.min(max_len)).min(MAX_WINDOW);
        let x = |k: &Vec<u8>| match window {
            0 => 0,
            w => window16(k, p) >> (8 * (MAX_WINDOW - w)),
        };
        let universe = match window {
            MAX_WINDOW => u128::MAX,
            w => 1u128 << (8 * w),
        };
        let r = universe_for(n, bits, universe, u32::from(SAMPLE_LOG2));
        let hasher = Hasher::new(seed, r);
        let mut values: Vec<u64> = keys.iter().map(|k| hasher.image(x(k))).collect();
        values.sort_unstable();
        let flags = if n == 0 {
            0
        } else {
            (u8::from(min_len - p >= window) * FILL) | (u8::from(max_len - p <= window) * FIT)
        };
        reference_encode(
            &RangeHeader {
                version: RANGE_VERSION,
                kind: KIND_GRAFITE,
                window: window as u8,
                low_bits: 0,
                sample_log2: SAMPLE_LOG2,
                flags,
                prefix_len: p as u32,
                keys: n,
                stored: 0,
                universe: r,
                seed,
                body_len: 0,
            },
            keys.first().map_or(&[][..], |k| &k[..p]),
            keys.iter().map(x).min().unwrap_or(0),
            keys.iter().map(x).max().unwrap_or(0),
            values.into_iter(),
        )
        .unwrap()
    }

    /// Key sets of every shape the mapping distinguishes: a shared prefix of 0 to 40 bytes,
    /// then suffixes of 0 to 24 bytes (short keys, the empty key, keys longer than the
    /// window past the prefix, repeats), sorted or not.
    fn key_sets() -> impl Strategy<Value = (Vec<Vec<u8>>, bool)> {
        let suffix = prop::collection::vec(
            prop_oneof![Just(0u8), Just(0xff), any::<u8>(), 0u8..4],
            0..24,
        );
        (
            prop::collection::vec(any::<u8>(), 0..40),
            prop::collection::vec((0usize..40, suffix), 0..300),
            any::<bool>(),
        )
            .prop_map(|(prefix, tails, sorted)| {
                let mut keys: Vec<Vec<u8>> = tails
                    .into_iter()
                    .map(|(cut, t)| [&prefix[..cut.min(prefix.len())], &t[..]].concat())
                    .collect();
                if sorted {
                    keys.sort();
                }
                (keys, sorted)
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// The builder writes the reference bytes for small sets of every shape.
        #[test]
        fn bytes_match_the_reference(
            (keys, _sorted) in key_sets(),
            bits in 3.0f64..40.0,
            seed in proptest::prelude::any::<u64>(),
        ) {
            let mut b = RangeFilterBuilder::new(bits).unwrap().seed(seed);
            for k in &keys {
                b.push(k).unwrap();
            }
            proptest::prop_assert_eq!(b.finish().unwrap(), reference_build(&keys, bits, seed));
        }
    }

    /// Large sets (several chunks, many partitions, repeats, a prefix that shrinks late) give
    /// the reference bytes too.
    #[test]
    fn large_sets_match_the_reference() {
        let random = |i: u64| crate::hash::mix64(i).to_be_bytes().to_vec();
        let sets: Vec<Vec<Vec<u8>>> = vec![
            vec![],
            vec![vec![]],
            vec![b"only".to_vec()],
            // 16 random bytes: the common case.
            (0..200_000u64)
                .map(|i| [random(i), random(i ^ (1 << 40))].concat())
                .collect(),
            // A long shared prefix that shrinks at the last key, keys past the window.
            (0..150_000u64)
                .map(|i| {
                    let head = if i == 149_999 {
                        b"user:9".to_vec()
                    } else {
                        b"user:0000:".to_vec()
                    };
                    [head, random(i / 3), random(i)].concat()
                })
                .collect(),
            // Dense 3-byte keys (a small exact universe), with repeats.
            (0..100_000u64)
                .map(|i| (i / 2).to_be_bytes()[5..].to_vec())
                .collect(),
        ];
        for mut keys in sets {
            for sorted in [true, false] {
                if sorted {
                    keys.sort();
                }
                for bits in [4.0, 16.0, 33.0] {
                    let got = build(keys.iter(), bits).unwrap();
                    assert!(
                        got == reference_build(&keys, bits, DEFAULT_SEED),
                        "{} keys, sorted {sorted}, {bits} bits",
                        keys.len()
                    );
                }
            }
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
            let flat: Vec<[u64; 2]> = xs.iter().map(|&x| [(x >> 64) as u64, x as u64]).collect();
            let mut tails: Vec<Vec<[u64; 2]>> = flat.chunks(CHUNK).map(<[_]>::to_vec).collect();
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
            let timed = n % 2 == 0;
            let (lo, hi, stored, spent) = hash_and_sort(
                &mut tails,
                &windows,
                &hasher,
                (bits, parts.min(bits)),
                timed,
            );
            // Untimed passes count nothing.
            assert!(timed || spent == 0);
            let got: Vec<u64> = sorted_values(&tails).concat();
            let mut distinct = want.clone();
            distinct.dedup();
            assert_eq!(stored, distinct.len() as u64);
            assert_eq!(got, want, "n {n} r {r}");
            assert_eq!(
                (lo, hi),
                (xs.first().map_or(0, |&x| x), xs.last().map_or(0, |&x| x))
            );
        }
    }
}
