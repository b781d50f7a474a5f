//! Running a word through the table: one row step per character, the scores of the last 16
//! gaps in a register.

use super::row::{Row, Window};
use super::{Patterns, EDGE, GAP_PAD, MASK_WORD, WINDOW};

impl Patterns {
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
