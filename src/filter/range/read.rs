//! The range filter's reader: a checked, zero-copy view of a block that answers ranges and
//! prefixes (see the parent module for the design).

use std::cmp::Ordering;
use std::ops::{Bound, RangeBounds};

use super::select::select_in_word;
use super::{off, window16, Hasher, Layout, RangeHeader, FILL, FIT, HEADER_LEN, MAX_WINDOW};
use crate::codec::{le_u32, le_u64, prefix8};
use crate::error::{Error, Result};

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

    /// The same checked filter over `block`, which must hold the very bytes it was decoded
    /// from (as a map of the file that was read and checked): nothing is checked again, and
    /// other bytes give wrong answers, never a panic. Lets the owner of a map keep a
    /// `RangeFilter<'static>` over `&[]` beside it and query through the map.
    pub fn rebind<'b>(&self, block: &'b [u8]) -> RangeFilter<'b> {
        RangeFilter { block, ..*self }
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
