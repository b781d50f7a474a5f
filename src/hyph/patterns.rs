//! Liang patterns: parsing and a compiled matcher.
//!
//! The patterns are compiled into an Aho–Corasick automaton whose failure links are folded
//! into a dense transition table, so matching is one table step per character of `.word.`:
//!
//! * Every state gets a 64-byte, cache-line-aligned row: its 27 transitions (the word-edge
//!   marker `.` and the 26 letters, as `u16` state ids, indexed by `byte & 31` so either
//!   case works) and its *merged output*: the scores of every pattern that ends at this
//!   point of the text (the state's own pattern and those of its whole failure chain),
//!   already max-combined, for the last ten gaps. A step is one load of the next id and one
//!   of its output, from the same line, with no branch on the kind of state. (Leaves of the
//!   trie, 4,178 of the 8,399 en-US states, once had 16-byte records instead of rows: half
//!   the table, but an unpredictable branch per character.) The table is 537 KB for en-US;
//!   the rows English words visit mostly stay in L1 (about 1.9 L1 misses per word under
//!   callgrind's cache model with a 32 KB L1).
//! * The scores of the last 16 gaps are kept in one SIMD register (SSE2 on x86_64, a `u128`
//!   elsewhere); a step shifts it by one byte and takes the byte-wise maximum with the new
//!   state's output: no loop over patterns and no branch on scores.
//! * States are numbered breadth-first, so the rare states with outputs 10 or more gaps back
//!   (none for en-US, whose longest pattern has 9 characters) come last and carry those
//!   outputs in a sparse side list, applied by a cold path.
//! * [`Patterns::breaks`] returns the odd gaps of a word of up to 48 letters as a bit mask
//!   (no gaps buffer); [`Patterns::score`] writes every gap's score to a buffer.

use crate::{Error, Result};

/// Symbol of the word-edge marker `.`.
const EDGE: u8 = 0;
/// Number of real symbols (edge + 26 letters).
const SYMBOLS: usize = 27;
/// Marks a byte that is not an ASCII letter in [`SYMBOL`].
const NOT_LETTER: u8 = 0xff;
/// Most states a table can have (state numbers are `u16`).
const MAX_STATES: usize = 1 << 16;
/// Gaps covered by a row's output vector: the gap after the state's last character and
/// the nine before it.
const ROW_GAPS: usize = 10;
/// Gaps held in the matcher's register window (a `u128`, one byte per gap).
const WINDOW: usize = 16;
/// Longest word [`Patterns::breaks`] scores: the 16 bits of the final window, shifted
/// left by the word's length, must fit in a `u64`.
pub(crate) const MASK_WORD: usize = 48;
/// Bytes the caller puts before the gaps, so the window always lies inside the buffer.
pub(crate) const GAP_PAD: usize = WINDOW;

/// One state's row: 64 bytes, aligned to a cache line, so one step touches one line.
///
/// `cells[0..27]` is the next state for each symbol, `cells[27]` the merged output for the
/// gaps 8 and 9 back and `cells[28..32]` the merged output for the gaps 0..8 back (see
/// [`pack_output`]). Keeping all 32 cells in one array lets a step index it with `byte & 31`
/// (a letter's symbol in either case) without a bounds check.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Row {
    cells: [u16; 32],
}

/// `Row::cells` index of the output for the gaps 8 and 9 back.
const OUT_HI: usize = SYMBOLS;
/// `Row::cells` index of the output for the gaps 0..8 back (four cells).
const OUT_LO: usize = SYMBOLS + 1;

impl Row {
    #[inline(always)]
    fn out_hi(&self) -> u16 {
        self.cells[OUT_HI]
    }

    #[inline(always)]
    fn out_lo(&self) -> u64 {
        let c = &self.cells;
        c[OUT_LO] as u64
            | (c[OUT_LO + 1] as u64) << 16
            | (c[OUT_LO + 2] as u64) << 32
            | (c[OUT_LO + 3] as u64) << 48
    }

    fn set_output(&mut self, lo: u64, hi: u16) {
        self.cells[OUT_HI] = hi;
        for k in 0..4 {
            self.cells[OUT_LO + k] = (lo >> (16 * k)) as u16;
        }
    }
}

const EMPTY_ROW: Row = Row { cells: [0; 32] };

/// Packs a merged output (`m[back]` = score `back` gaps before the one after the state's
/// last character) into the window layout (byte `back`): backs 0..8 as a `u64`, backs 8
/// and 9 as a `u16`. Backs from 10 on are left out.
fn pack_output(m: &[u8]) -> (u64, u16) {
    let mut w = [0u8; WINDOW];
    for (back, &v) in m.iter().enumerate().take(ROW_GAPS) {
        w[back] = v;
    }
    let w = u128::from_le_bytes(w);
    (w as u64, (w >> 64) as u16)
}

/// The matcher's window over the last 16 gaps: SSE2 on x86_64 (part of its baseline).
///
/// Byte `back` is the score of the gap `back` before the current one; a step shifts the
/// window up by one byte (byte 15 leaves) and takes the byte-wise maximum with the new
/// state's output, which lies in bytes 0..10, so it is loaded with one `movq` and one
/// `pinsrw`.
#[cfg(target_arch = "x86_64")]
mod window {
    use std::arch::x86_64::{
        __m128i, _mm_cvtsi128_si64, _mm_cvtsi64_si128, _mm_extract_epi16, _mm_insert_epi16,
        _mm_max_epu8, _mm_movemask_epi8, _mm_set_epi64x, _mm_setzero_si128, _mm_slli_epi16,
        _mm_slli_si128, _mm_unpackhi_epi64,
    };

    #[derive(Clone, Copy)]
    pub(super) struct Window(__m128i);

    impl Window {
        #[inline]
        #[target_feature(enable = "sse2")]
        pub(super) fn zero() -> Window {
            Window(_mm_setzero_si128())
        }

        /// The byte about to leave (byte 15).
        #[inline]
        #[target_feature(enable = "sse2")]
        pub(super) fn leaving(self) -> u8 {
            (_mm_extract_epi16::<7>(self.0) >> 8) as u8
        }

        /// Shifts up one byte and takes the byte-wise maximum with the output whose bytes
        /// 0..8 are `lo` and bytes 8, 9 are `hi`.
        #[inline]
        #[target_feature(enable = "sse2")]
        pub(super) fn step(self, lo: u64, hi: u16) -> Window {
            let out = _mm_insert_epi16::<4>(_mm_cvtsi64_si128(lo as i64), hi as i32);
            Window(_mm_max_epu8(_mm_slli_si128::<1>(self.0), out))
        }

        /// Byte-wise maximum with a whole `u128`.
        #[inline]
        #[target_feature(enable = "sse2")]
        pub(super) fn max_with(self, v: u128) -> Window {
            let v = _mm_set_epi64x((v >> 64) as i64, v as i64);
            Window(_mm_max_epu8(self.0, v))
        }

        /// Bit j set when byte j is odd.
        #[inline]
        #[target_feature(enable = "sse2")]
        pub(super) fn odd_mask(self) -> u32 {
            // Shifting each 16-bit lane left by 7 moves bit 0 of both its bytes to bit 7.
            _mm_movemask_epi8(_mm_slli_epi16::<7>(self.0)) as u32
        }

        #[inline]
        #[target_feature(enable = "sse2")]
        pub(super) fn bytes(self) -> [u8; 16] {
            let lo = _mm_cvtsi128_si64(self.0) as u64;
            let hi = _mm_cvtsi128_si64(_mm_unpackhi_epi64(self.0, self.0)) as u64;
            ((hi as u128) << 64 | lo as u128).to_le_bytes()
        }
    }
}

/// The matcher's window over the last 16 gaps, portable SWAR version (same layout).
#[cfg(not(target_arch = "x86_64"))]
mod window {
    #[derive(Clone, Copy)]
    pub(super) struct Window(u128);

    /// Byte-wise maximum of two values whose bytes are all below 128 (scores are 0..=9).
    #[inline(always)]
    fn bytewise_max(a: u128, b: u128) -> u128 {
        const HIGH: u128 = u128::from_ne_bytes([0x80; 16]);
        // High bit of each byte: set where a >= b (no borrow crosses bytes: a | HIGH > b).
        let ge = ((a | HIGH) - b) & HIGH;
        let mask = (ge - (ge >> 7)) | ge;
        (a & mask) | (b & !mask)
    }

    impl Window {
        #[inline(always)]
        pub(super) fn zero() -> Window {
            Window(0)
        }
        #[inline(always)]
        pub(super) fn leaving(self) -> u8 {
            (self.0 >> 120) as u8
        }
        #[inline(always)]
        pub(super) fn step(self, lo: u64, hi: u16) -> Window {
            let out = (hi as u128) << 64 | lo as u128;
            Window(bytewise_max(self.0 << 8, out))
        }
        #[inline(always)]
        pub(super) fn max_with(self, v: u128) -> Window {
            Window(bytewise_max(self.0, v))
        }
        /// Bit j set when byte j is odd.
        #[inline(always)]
        pub(super) fn odd_mask(self) -> u32 {
            let mut m = 0;
            for (j, b) in self.0.to_le_bytes().iter().enumerate() {
                m |= ((b & 1) as u32) << j;
            }
            m
        }
        #[inline(always)]
        pub(super) fn bytes(self) -> [u8; 16] {
            self.0.to_le_bytes()
        }
    }
}

use window::Window;

/// Maps a byte to its symbol: `A`–`Z` and `a`–`z` to 1–26, anything else to [`NOT_LETTER`].
pub(crate) static SYMBOL: [u8; 256] = {
    let mut t = [NOT_LETTER; 256];
    let mut i = 0;
    while i < 26 {
        t[b'a' as usize + i] = i as u8 + 1;
        t[b'A' as usize + i] = i as u8 + 1;
        i += 1;
    }
    t
};

/// True when `word` is non-empty and made of ASCII letters only.
#[inline]
pub(crate) fn is_letters(word: &[u8]) -> bool {
    !word.is_empty() && word.iter().all(|&b| SYMBOL[b as usize] != NOT_LETTER)
}

/// One parsed Liang pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// The lower-case letters, with `.` for a word edge (first and/or last only).
    pub letters: Vec<u8>,
    /// Inter-letter scores: `scores[j]` is the score of the gap before `letters[j]`
    /// (`scores[letters.len()]` is the gap after the last one); always `letters.len() + 1` long.
    pub scores: Vec<u8>,
}

impl Pattern {
    /// Parses one pattern such as `.ach4` or `4b1ly.`.
    pub fn parse(text: &str) -> Result<Pattern> {
        let bytes = text.as_bytes();
        let mut letters = Vec::with_capacity(bytes.len());
        let mut scores = vec![0u8];
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                b'0'..=b'9' => {
                    let last = scores.len() - 1;
                    if scores[last] != 0 || (i > 0 && bytes[i - 1].is_ascii_digit()) {
                        return Err(bad_pattern(text, "two digits in a row"));
                    }
                    scores[last] = b - b'0';
                }
                b'.' => {
                    if !(letters.is_empty() || i == bytes.len() - 1) {
                        return Err(bad_pattern(text, "'.' inside the pattern"));
                    }
                    letters.push(b'.');
                    scores.push(0);
                }
                _ if SYMBOL[b as usize] != NOT_LETTER => {
                    letters.push(b.to_ascii_lowercase());
                    scores.push(0);
                }
                _ => return Err(bad_pattern(text, "character other than a-z, '.', 0-9")),
            }
        }
        if letters.iter().all(|&c| c == b'.') {
            return Err(bad_pattern(text, "no letters"));
        }
        Ok(Pattern { letters, scores })
    }
}

fn bad_pattern(text: &str, why: &str) -> Error {
    let shown: String = text.chars().take(40).collect();
    Error::InvalidArgument(format!("bad hyphenation pattern {shown:?}: {why}"))
}

/// Parses a pattern list: whitespace-separated patterns, `%` starts a comment to the end of
/// the line. Duplicate patterns (same letters) are refused, as TeX refuses them.
pub fn parse_patterns(text: &str) -> Result<Vec<Pattern>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = match line.find('%') {
            Some(p) => &line[..p],
            None => line,
        };
        for tok in line.split_whitespace() {
            out.push(Pattern::parse(tok)?);
        }
    }
    Ok(out)
}

/// A compiled set of Liang patterns (see the module documentation).
#[derive(Clone)]
pub struct Patterns {
    /// One row per state (ids breadth-first, the root is 0).
    rows: Vec<Row>,
    /// First id of a state with outputs `ROW_GAPS` or more gaps back (`rows.len()` if none).
    first_deep: usize,
    /// True when a deep state has an output `WINDOW` gaps back or more.
    far_outputs: bool,
    /// `(id, start, end)` for every deep state, by id: its outputs beyond the row's window
    /// are `deep_outputs[start..end]`.
    deep_ranges: Vec<(usize, u32, u32)>,
    /// `(back, score)`: a state entered on the character before gap `e` sets gap `e - back`.
    deep_outputs: Vec<(u16, u8)>,
    /// The state the matcher is in after the leading `.`.
    after_edge: usize,
    /// Number of patterns compiled.
    count: usize,
    /// Longest pattern, in letters (edges counted).
    max_len: usize,
}

impl std::fmt::Debug for Patterns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Patterns")
            .field("patterns", &self.count)
            .field("states", &self.rows.len())
            .field("deep_states", &self.deep_ranges.len())
            .field("longest", &self.max_len)
            .finish()
    }
}

impl Patterns {
    /// The built-in US English patterns (hyph-utf8 `hyph-en-us`, 4,938 patterns).
    pub fn en_us() -> Result<Patterns> {
        Patterns::parse(super::EN_US_PATTERNS)
    }

    /// Parses and compiles a pattern list (see [`parse_patterns`]).
    pub fn parse(text: &str) -> Result<Patterns> {
        Patterns::compile(&parse_patterns(text)?)
    }

    /// Compiles parsed patterns.
    pub fn compile(patterns: &[Pattern]) -> Result<Patterns> {
        // 1. The trie. `children[s][c]` is 0 for "none" (the root is never a child).
        let mut children: Vec<[u32; SYMBOLS]> = vec![[0; SYMBOLS]];
        let mut depth: Vec<usize> = vec![0];
        let mut own: Vec<Option<Vec<u8>>> = vec![None];
        let mut max_len = 0;
        for p in patterns {
            if p.scores.len() != p.letters.len() + 1 || p.scores.iter().any(|&v| v > 9) {
                return Err(Error::InvalidArgument(
                    "malformed hyphenation pattern".to_string(),
                ));
            }
            let mut s = 0usize;
            for &ch in &p.letters {
                let c = symbol_of(ch).ok_or_else(|| {
                    Error::InvalidArgument(format!("bad pattern character {:?}", ch as char))
                })?;
                let next = children[s][c as usize];
                s = if next == 0 {
                    let n = children.len();
                    if n >= MAX_STATES {
                        return Err(Error::InvalidArgument(format!(
                            "patterns need more than {MAX_STATES} automaton states"
                        )));
                    }
                    children.push([0; SYMBOLS]);
                    depth.push(depth[s] + 1);
                    own.push(None);
                    children[s][c as usize] = n as u32;
                    n
                } else {
                    next as usize
                };
            }
            if own[s].is_some() {
                let text: String = p.letters.iter().map(|&b| b as char).collect();
                return Err(Error::InvalidArgument(format!(
                    "duplicate hyphenation pattern for {text:?}"
                )));
            }
            own[s] = Some(p.scores.clone());
            max_len = max_len.max(p.letters.len());
        }
        let states = children.len();

        // 2. Breadth-first: failure links folded into a dense table, merged outputs.
        let mut next = vec![[0u16; SYMBOLS]; states];
        let mut fail = vec![0usize; states];
        // merged[s][back] = max score `back` gaps before the one after the state's string.
        let mut merged: Vec<Vec<u8>> = vec![Vec::new(); states];
        let mut order = Vec::with_capacity(states);
        order.push(0usize);
        let mut head = 0;
        while head < order.len() {
            let s = order[head];
            head += 1;
            // Merged output of s: own pattern plus the (already computed) one of fail(s).
            let mut m = vec![0u8; depth[s] + 1];
            if s != 0 {
                for (back, &v) in merged[fail[s]].iter().enumerate() {
                    m[back] = m[back].max(v);
                }
            }
            if let Some(sc) = &own[s] {
                let l = sc.len() - 1;
                for (j, &v) in sc.iter().enumerate() {
                    m[l - j] = m[l - j].max(v);
                }
            }
            merged[s] = m;
            for c in 0..SYMBOLS {
                let child = children[s][c] as usize;
                if child != 0 {
                    fail[child] = if s == 0 { 0 } else { next[fail[s]][c] as usize };
                    next[s][c] = child as u16;
                    order.push(child);
                } else if s != 0 {
                    next[s][c] = next[fail[s]][c];
                }
                // The root's missing transitions stay 0 = the root.
            }
        }

        // 3. One row per state, numbered breadth-first (the root is 0), except that the
        //    states with outputs ROW_GAPS or more gaps back (deep) come last.
        let is_deep = |st: usize| merged[st].iter().skip(ROW_GAPS).any(|&v| v > 0);
        let count = states;
        let mut id = vec![0usize; states];
        let mut rep = Vec::with_capacity(states);
        for deep_pass in [false, true] {
            for &st in &order {
                if is_deep(st) == deep_pass {
                    id[st] = rep.len();
                    rep.push(st);
                }
            }
        }
        let state_id = |st: usize| id[st];
        let mut rows = vec![EMPTY_ROW; count];
        let mut first_deep = count;
        let mut deep_ranges = Vec::new();
        let mut deep_outputs = Vec::new();
        for (i, &st) in rep.iter().enumerate() {
            let (lo, hi) = pack_output(&merged[st]);
            let row = &mut rows[i];
            row.set_output(lo, hi);
            for (cell, &t) in row.cells.iter_mut().zip(&next[st]) {
                *cell = state_id(t as usize) as u16;
            }
            if is_deep(st) {
                first_deep = first_deep.min(i);
                let start = deep_outputs.len() as u32;
                for (back, &v) in merged[st].iter().enumerate().skip(ROW_GAPS) {
                    if v > 0 {
                        deep_outputs.push((back as u16, v));
                    }
                }
                deep_ranges.push((i, start, deep_outputs.len() as u32));
            }
        }
        let after_edge = state_id(next[0][EDGE as usize] as usize);
        let far_outputs = deep_outputs
            .iter()
            .any(|&(back, _)| back as usize >= WINDOW);
        Ok(Patterns {
            rows,
            first_deep,
            far_outputs,
            deep_ranges,
            deep_outputs,
            after_edge,
            count: patterns.len(),
            max_len,
        })
    }

    /// Number of patterns compiled.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no pattern was compiled.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Number of automaton states (one row each).
    pub fn states(&self) -> usize {
        self.rows.len()
    }

    /// Longest pattern, in characters (edge markers counted).
    pub fn max_pattern_len(&self) -> usize {
        self.max_len
    }

    /// Scores the gaps of `word`, which must be made of ASCII letters only (any case; the
    /// caller checks: for another byte the scores are unspecified, but nothing panics).
    ///
    /// `gaps` must be at least `GAP_PAD + word.len() + 3` long; afterwards
    /// `gaps[GAP_PAD + i + 1]` is the score of the break after the first `i` letters (odd =
    /// allowed by the patterns). Every byte from 2 to `GAP_PAD + word.len() + 2` is
    /// overwritten. Returns false, leaving `gaps` unspecified, when `gaps` is too short.
    ///
    /// The scores of the last 16 gaps live in a register (byte `back` = the gap `back`
    /// before the current one); each step shifts it up by one byte, writing the byte that
    /// leaves it (no longer reachable by any row) to `gaps`, and takes the byte-wise maximum
    /// with the new state's merged output. So the buffer is only written, once per gap, and
    /// the last 16 gaps at the end.
    #[inline]
    #[must_use]
    pub(crate) fn score(&self, word: &[u8], gaps: &mut [u8]) -> bool {
        self.run(word, Some(gaps)).is_some()
    }

    /// For each `i` in `0..=word.len()`, bit `i` is set when the break after the first `i`
    /// letters of `word` scores odd (is allowed by the patterns). `word` must be made of
    /// ASCII letters only, as for [`Patterns::score`].
    ///
    /// This is [`Patterns::score`] without the gaps buffer: the window is flushed as a bit
    /// mask, and a gap that leaves the window early (words of 14 letters or more) as one bit.
    /// Returns `None` when the word has more than [`MASK_WORD`] letters or a pattern reaches
    /// `WINDOW` gaps back or more (never for en-US); use [`Patterns::score`] then.
    #[inline]
    #[must_use]
    pub(crate) fn breaks(&self, word: &[u8]) -> Option<u64> {
        if word.len() > MASK_WORD || self.far_outputs {
            return None;
        }
        self.run(word, None)
    }

    /// The matcher's one entry: with `gaps`, [`Patterns::score`] (`Some(0)` = done);
    /// without, [`Patterns::breaks`].
    #[inline]
    fn run(&self, word: &[u8], gaps: Option<&mut [u8]>) -> Option<u64> {
        // SAFETY: `run_window` only needs SSE2, which every x86_64 processor has (it is part
        // of the x86_64 baseline). One of the crate's `unsafe` sites (all listed in
        // `lib.rs`); it makes hyphenation 1.5x faster than the portable u128 window
        // (112 vs 173 ns/word, same core, same run, when it was introduced).
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        unsafe {
            self.run_window(word, gaps)
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.run_window(word, gaps)
    }

    #[inline]
    #[cfg_attr(target_arch = "x86_64", target_feature(enable = "sse2"))]
    fn run_window(&self, word: &[u8], gaps: Option<&mut [u8]>) -> Option<u64> {
        match gaps {
            Some(gaps) => self.score_window(word, gaps).then_some(0),
            None => self.breaks_window(word),
        }
    }

    #[cfg_attr(target_arch = "x86_64", target_feature(enable = "sse2"))]
    fn breaks_window(&self, word: &[u8]) -> Option<u64> {
        let n = word.len();
        let mut row = self.rows.get(self.after_edge)?;
        let shallow = self.rows.get(..self.first_deep)?;
        let mut window = Window::zero();
        // Reading letter i (text character i + 1 of '.' word '.') pushes gap i - 14 out of
        // the window. Bit 63 - g of `odd` is set when gap g scores odd (the window's order:
        // later gaps in lower bits). Gaps below 0 do not exist, so the first 14 letters push
        // nothing worth keeping.
        let mut odd = 0u64;
        let (head, tail) = word.split_at(n.min(WINDOW - 2));
        // `end` only matters for outputs that leave the window (none here: no far outputs).
        for &b in head {
            (row, window) = self.advance(shallow, row, b, window, 0, &mut [])?;
        }
        for (i, &b) in (WINDOW - 2..).zip(tail) {
            odd |= ((window.leaving() & 1) as u64) << (77 - i);
            (row, window) = self.advance(shallow, row, b, window, 0, &mut [])?;
        }
        if n >= WINDOW - 2 {
            odd |= ((window.leaving() & 1) as u64) << (77 - n);
        }
        (_, window) = self.advance(shallow, row, EDGE, window, 0, &mut [])?;
        // Byte j of the window is gap n + 2 - j: bit 61 - n + j (gaps below 0 drop out).
        odd |= (window.odd_mask() as u64) << (61 - n);
        // Bit g: gap g; bit i of the result: gap i + 1, the break after i letters.
        Some(odd.reverse_bits() >> 1)
    }

    #[cfg_attr(target_arch = "x86_64", target_feature(enable = "sse2"))]
    fn score_window(&self, word: &[u8], gaps: &mut [u8]) -> bool {
        let n = word.len();
        if gaps.len() < GAP_PAD + n + 3 {
            return false;
        }
        let (Some(mut row), Some(shallow)) = (
            self.rows.get(self.after_edge),
            self.rows.get(..self.first_deep),
        ) else {
            return false;
        };
        let mut window = Window::zero();
        // Text: '.' word '.'; letter i is text character i + 1, and the gap after text
        // character t is t + 1, at index GAP_PAD + t + 1 in `gaps`. Reading letter i
        // pushes gap i + 2 - WINDOW out of the window, at index i + 2 (GAP_PAD = WINDOW).
        for (i, &b) in word.iter().enumerate() {
            if let Some(g) = gaps.get_mut(i + 2) {
                *g = window.leaving();
            }
            let Some(next) = self.advance(shallow, row, b, window, GAP_PAD + i + 2, gaps) else {
                return false;
            };
            (row, window) = next;
        }
        if let Some(g) = gaps.get_mut(n + 2) {
            *g = window.leaving();
        }
        let Some((_, last)) = self.advance(shallow, row, EDGE, window, GAP_PAD + n + 2, gaps)
        else {
            return false;
        };
        // Flush the window: byte j is the gap n + 2 - j, at index GAP_PAD + n + 2 - j.
        if let Some(g) = gaps.get_mut(n + 3..GAP_PAD + n + 3) {
            for (g, &v) in g.iter_mut().rev().zip(&last.bytes()) {
                *g = v;
            }
        }
        true
    }

    /// One step from `row` on the symbol `byte & 31` (a letter's symbol in either case, or
    /// [`EDGE`]): the new row and window. `shallow` is `rows[..first_deep]`, so one
    /// comparison both checks the id and sends deep states to the cold path. `end` is the
    /// index in `gaps` of the gap after the character read, for the outputs of a deep state
    /// that have left the window. `None` only if the table were inconsistent.
    #[inline]
    #[cfg_attr(target_arch = "x86_64", target_feature(enable = "sse2"))]
    fn advance<'a>(
        &'a self,
        shallow: &'a [Row],
        row: &Row,
        byte: u8,
        window: Window,
        end: usize,
        gaps: &mut [u8],
    ) -> Option<(&'a Row, Window)> {
        let t = row.cells[(byte & 31) as usize] as usize;
        match shallow.get(t) {
            Some(r) => Some((r, window.step(r.out_lo(), r.out_hi()))),
            None => self.advance_deep(t, window, end, gaps),
        }
    }

    /// [`Patterns::advance`] into a deep state (or a bad id).
    #[cold]
    #[cfg_attr(target_arch = "x86_64", target_feature(enable = "sse2"))]
    fn advance_deep(
        &self,
        t: usize,
        window: Window,
        end: usize,
        gaps: &mut [u8],
    ) -> Option<(&Row, Window)> {
        let r = self.rows.get(t)?;
        let window = window.step(r.out_lo(), r.out_hi());
        Some((r, self.apply_deep(t, end, gaps, window)))
    }

    /// The outputs of a deep state beyond its row's ten gaps.
    #[cold]
    #[cfg_attr(target_arch = "x86_64", target_feature(enable = "sse2"))]
    fn apply_deep(&self, state: usize, end: usize, gaps: &mut [u8], window: Window) -> Window {
        let mut window = window;
        let Ok(k) = self
            .deep_ranges
            .binary_search_by_key(&state, |&(id, _, _)| id)
        else {
            return window;
        };
        let Some(&(_, start, stop)) = self.deep_ranges.get(k) else {
            return window;
        };
        for &(back, v) in self
            .deep_outputs
            .get(start as usize..stop as usize)
            .unwrap_or(&[])
        {
            let back = back as usize;
            if back < WINDOW {
                window = window.max_with((v as u128) << (8 * back));
            } else if let Some(g) = gaps.get_mut(end.wrapping_sub(back)) {
                // back <= depth(state) <= end - GAP_PAD: that gap left the window already.
                *g = (*g).max(v);
            }
        }
        window
    }
}

fn symbol_of(ch: u8) -> Option<u8> {
    if ch == b'.' {
        Some(EDGE)
    } else {
        match SYMBOL[ch as usize] {
            NOT_LETTER => None,
            s => Some(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_liang_patterns() {
        let p = Pattern::parse(".ach4").unwrap();
        assert_eq!(p.letters, b".ach");
        assert_eq!(p.scores, vec![0, 0, 0, 0, 4]);
        let p = Pattern::parse("4b1ly.").unwrap();
        assert_eq!(p.letters, b"bly.");
        assert_eq!(p.scores, vec![4, 1, 0, 0, 0]);
        for bad in ["a.b", "a12b", "a-b", ".", "", "é1"] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
        assert!(Patterns::parse("ab1c\nab2c").is_err());
    }

    /// Liang's definition, directly: every pattern at every position of ".word.".
    fn naive(patterns: &[Pattern], word: &[u8]) -> Vec<u8> {
        let mut text = vec![b'.'];
        text.extend(word.iter().map(|b| b.to_ascii_lowercase()));
        text.push(b'.');
        let mut gaps = vec![0u8; text.len() + 1];
        for p in patterns {
            for start in 0..text.len() {
                if text[start..].starts_with(&p.letters) {
                    for (j, &v) in p.scores.iter().enumerate() {
                        gaps[start + j] = gaps[start + j].max(v);
                    }
                }
            }
        }
        gaps
    }

    #[test]
    fn automaton_agrees_with_the_definition_including_deep_states() {
        // A deterministic pseudo-random mix of short and long (deep) patterns over "abc".
        let mut x: u64 = 0x1234_5678;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut text = String::new();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..300 {
            let len = 2 + rnd(13) as usize;
            let mut letters = String::new();
            if rnd(4) == 0 {
                letters.push('.');
            }
            while letters.len() < len {
                letters.push((b'a' + rnd(3) as u8) as char);
            }
            if !seen.insert(letters.clone()) {
                continue;
            }
            for (k, c) in letters.chars().enumerate() {
                if k > 0 && rnd(3) == 0 {
                    text.push((b'0' + rnd(10) as u8) as char);
                }
                text.push(c);
            }
            text.push('\n');
        }
        let parsed = parse_patterns(&text).unwrap();
        let p = Patterns::compile(&parsed).unwrap();
        assert!(p.max_pattern_len() > ROW_GAPS);
        assert!(!p.deep_ranges.is_empty());
        for _ in 0..2000 {
            let n = 1 + rnd(30) as usize;
            let word: Vec<u8> = (0..n).map(|_| b"abcABC"[rnd(6) as usize]).collect();
            let mut gaps = vec![0u8; GAP_PAD + n + 3];
            assert!(p.score(&word, &mut gaps));
            let want = naive(&parsed, &word);
            assert_eq!(
                &gaps[GAP_PAD..],
                &want[..],
                "{:?}",
                String::from_utf8_lossy(&word)
            );
            assert_eq!(p.breaks(&word), Some(odd_bits(&want)));
        }
    }

    /// Bit i: the break after i letters (gap i + 1 of the naive scores) is odd.
    fn odd_bits(naive_gaps: &[u8]) -> u64 {
        let mut bits = 0;
        for (i, &g) in naive_gaps.iter().skip(1).enumerate().take(64) {
            bits |= ((g & 1) as u64) << i;
        }
        bits
    }

    #[test]
    fn breaks_match_scores_up_to_the_longest_word_and_refuse_far_outputs() {
        let p = Patterns::en_us().unwrap();
        assert!(!p.far_outputs);
        let parsed = parse_patterns(super::super::EN_US_PATTERNS).unwrap();
        let mut x: u64 = 0x9e37_79b9;
        for n in 1..=MASK_WORD + 1 {
            for _ in 0..20 {
                let word: Vec<u8> = (0..n)
                    .map(|_| {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        b"etaoinshrdlucmfwypvbgkqjxzETAOIN"[(x >> 59) as usize]
                    })
                    .collect();
                let want = naive(&parsed, &word);
                let mut gaps = vec![0u8; GAP_PAD + n + 3];
                assert!(p.score(&word, &mut gaps));
                assert_eq!(&gaps[GAP_PAD..], &want[..]);
                if n <= MASK_WORD {
                    assert_eq!(p.breaks(&word), Some(odd_bits(&want)), "{n}");
                } else {
                    assert_eq!(p.breaks(&word), None);
                }
            }
        }
        // A pattern 17 characters long reaches 16 gaps back: no bit mask.
        let long = Patterns::parse("a1bcdefghijklmnopq 2ab").unwrap();
        assert!(long.far_outputs);
        assert_eq!(long.breaks(b"abcdefghijklmnopq"), None);
        let mut gaps = vec![0u8; GAP_PAD + 17 + 3];
        assert!(long.score(b"abcdefghijklmnopq", &mut gaps));
        assert_eq!(gaps[GAP_PAD + 2], 1);
    }

    #[test]
    fn scores_by_hand() {
        // "hy3ph" and ".hy2" on "hyphen": gap after "hy" gets max(3, 2) = 3.
        let p = Patterns::parse(".hy2 hy3ph he2n % comment\n").unwrap();
        assert_eq!(p.len(), 3);
        let word = b"hyphen";
        let mut gaps = vec![0u8; GAP_PAD + word.len() + 3];
        assert!(p.score(word, &mut gaps));
        let gaps = &gaps[GAP_PAD..];
        assert_eq!(gaps[2 + 1], 3);
        // "he2n": gap after "hyphe" (5 letters).
        assert_eq!(gaps[5 + 1], 2);
        assert_eq!(gaps.iter().filter(|&&v| v > 0).count(), 2);
    }
}
