//! Knuth–Liang hyphenation (TeX82 rules) with a pluggable exception dictionary.
//!
//! This is the hyphenation showcase of the store: the hyphenator first asks an
//! [`ExceptionLookup`] whether a word is an exception (in the showcase, an on-disk
//! dictionary fronted by a filter, so ordinary words never touch the disk) and otherwise
//! hyphenates it with Liang's patterns, compiled into a table-driven automaton
//! ([`Patterns`]).
//!
//! The rules are TeX82's:
//!
//! * only a word made of ASCII letters is hyphenated; any other word is copied unchanged;
//! * patterns and exceptions match case-insensitively; the output keeps the word's case;
//! * a hyphen needs at least `left_min` (2) letters before it and `right_min` (3) after it;
//!   a word shorter than `left_min + right_min` is not hyphenated and no exception is asked;
//! * an exception's hyphens obey the same minimums; an exception without a hyphen means
//!   "never hyphenate".
//!
//! Exceptions are stored as key = the lower-cased word, value = its lower-cased hyphenated
//! form as listed (`associate` → `as-so-ciate`; a value without `-` = never hyphenate). The
//! minimums are applied when the value is used, not when it is stored. A value that does not
//! spell its key is reported as [`Error::Corruption`].
//!
//! Plugging in the on-disk dictionary: implement [`ExceptionLookup`] for the store (or a
//! thin wrapper around it). `lookup` receives the lower-cased word and its
//! [`filterstore::hash::key_hash`], computed once per word, so each table's filter can be probed
//! with that hash and only tables whose filter answers "maybe" are read; most words then
//! never touch the disk. [`MemoryExceptions::sorted_entries`] gives the built-in list in key
//! order for bulk-loading the store.
//!
//! ```
//! use filterstore_cli::hyph::{Hyphenator, MemoryExceptions, NoExceptions};
//! let h = Hyphenator::en_us().unwrap();
//! let exceptions = MemoryExceptions::en_us().unwrap();
//! assert_eq!(h.hyphenate("Associate", &NoExceptions).unwrap(), "As-so-ci-ate");
//! assert_eq!(h.hyphenate("Associate", &exceptions).unwrap(), "As-so-ciate");
//! ```

mod dict;
mod exceptions;
pub mod experiment;
mod patterns;
mod words;

pub use dict::{
    load_sources, sources_digest, ExceptionDict, ExceptionSource, SyncReport, DIGEST_KEY,
};
pub use exceptions::{
    parse_exceptions, Exception, ExceptionLookup, MemoryExceptions, NoExceptions,
};
pub use patterns::{parse_patterns, Pattern, Patterns};
pub use words::WordList;

use filterstore::{Error, Result};
use patterns::{is_letters, GAP_PAD, MASK_WORD};

/// The built-in US English patterns (`cli/data/hyph/hyph-en-us.pat.txt`, hyph-utf8).
pub const EN_US_PATTERNS: &str = include_str!("../../data/hyph/hyph-en-us.pat.txt");
/// Knuth's 14 exceptions from `hyphen.tex` (`cli/data/hyph/hyph-en-us.hyp.txt`).
pub const EN_US_KNUTH_EXCEPTIONS: &str = include_str!("../../data/hyph/hyph-en-us.hyp.txt");
/// The TUGboat exception list (`cli/data/hyph/ushyphex.tex`, 1,753 entries).
pub const EN_US_TUGBOAT_EXCEPTIONS: &str = include_str!("../../data/hyph/ushyphex.tex");

/// TeX's `\lefthyphenmin` for US English.
pub const LEFT_HYPHEN_MIN: usize = 2;
/// TeX's `\righthyphenmin` for US English.
pub const RIGHT_HYPHEN_MIN: usize = 3;

/// What one call of [`Hyphenator::hyphenate_into`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WordOutcome {
    /// Exception lookups asked (0 or 1).
    pub lookups: u32,
    /// True when the word's hyphens came from an exception.
    pub exception: bool,
    /// Hyphens inserted.
    pub hyphens: u32,
}

/// A Knuth–Liang hyphenator: compiled patterns plus the two hyphen minimums.
#[derive(Debug, Clone)]
pub struct Hyphenator {
    patterns: Patterns,
    left_min: usize,
    right_min: usize,
}

impl Hyphenator {
    /// US English: the built-in patterns, minimums 2 and 3.
    pub fn en_us() -> Result<Hyphenator> {
        Ok(Hyphenator::new(Patterns::en_us()?))
    }

    /// A hyphenator over `patterns` with the US English minimums (2, 3).
    pub fn new(patterns: Patterns) -> Hyphenator {
        Hyphenator {
            patterns,
            left_min: LEFT_HYPHEN_MIN,
            right_min: RIGHT_HYPHEN_MIN,
        }
    }

    /// Sets the minimums (TeX's `\lefthyphenmin`, `\righthyphenmin`; each at least 1).
    pub fn with_minimums(mut self, left: usize, right: usize) -> Result<Hyphenator> {
        if left == 0 || right == 0 || left > 1024 || right > 1024 {
            return Err(Error::InvalidArgument(format!(
                "hyphen minimums must be 1..=1024, got {left} and {right}"
            )));
        }
        self.left_min = left;
        self.right_min = right;
        Ok(self)
    }

    /// The compiled patterns.
    pub fn patterns(&self) -> &Patterns {
        &self.patterns
    }

    /// The minimums `(left, right)`.
    pub fn minimums(&self) -> (usize, usize) {
        (self.left_min, self.right_min)
    }

    /// Hyphenates one word (see the module documentation for the rules).
    pub fn hyphenate<L: ExceptionLookup + ?Sized>(
        &self,
        word: &str,
        exceptions: &L,
    ) -> Result<String> {
        let mut out = String::with_capacity(word.len() + word.len() / 2);
        self.hyphenate_into(word, exceptions, &mut out)?;
        Ok(out)
    }

    /// Hyphenates one word, *appending* the result to `out` (which is not cleared).
    ///
    /// On error (the exception source failed, or returned a value that does not spell the
    /// word) nothing is appended.
    pub fn hyphenate_into<L: ExceptionLookup + ?Sized>(
        &self,
        word: &str,
        exceptions: &L,
        out: &mut String,
    ) -> Result<WordOutcome> {
        let bytes = word.as_bytes();
        let n = bytes.len();
        let mut outcome = WordOutcome::default();
        if n < self.left_min + self.right_min {
            out.push_str(word);
            return Ok(outcome);
        }
        if n > MASK_WORD {
            return self.hyphenate_long(word, exceptions, out);
        }
        // The fast path: stack buffers only, the hyphens as a bit mask.
        let mut lower_buf = [0u8; MASK_WORD];
        let Some(lower) = lower_letters(bytes, &mut lower_buf) else {
            out.push_str(word);
            return Ok(outcome);
        };
        let mut exception = None;
        if !exceptions.is_always_empty() {
            let hash = filterstore::hash::key_hash(lower);
            outcome.lookups = 1;
            if let Some(value) = exceptions.lookup(lower, hash)? {
                let mut breaks = 0u64;
                exception_hyphens(lower, &value, |k| breaks |= 1 << k)?;
                exception = Some(breaks);
            }
        }
        outcome.exception = exception.is_some();
        // Bit i: a hyphen after the first i letters (scored by the patterns, or listed).
        let breaks = match exception {
            Some(b) => b,
            None => match self.patterns.breaks(bytes) {
                Some(b) => b,
                None => self.breaks_from_gaps(bytes),
            },
        };
        // A break after i letters is allowed for left_min <= i <= n - right_min.
        let allowed = (u64::MAX >> (63 - (n - self.right_min))) & (u64::MAX << self.left_min);
        let breaks = breaks & allowed;
        outcome.hyphens = breaks.count_ones();
        let mut breaks = breaks;
        let mut last = 0;
        out.reserve(n + outcome.hyphens as usize);
        while breaks != 0 {
            let i = breaks.trailing_zeros() as usize;
            breaks &= breaks - 1;
            if let Some(piece) = word.get(last..i) {
                out.push_str(piece);
            }
            out.push('-');
            last = i;
        }
        if let Some(piece) = word.get(last..) {
            out.push_str(piece);
        }
        Ok(outcome)
    }

    /// [`Patterns::breaks`] through the gaps buffer, for patterns that reach further back
    /// than its window (`word` has at most [`MASK_WORD`] letters).
    #[cold]
    fn breaks_from_gaps(&self, word: &[u8]) -> u64 {
        let mut gaps = [0u8; GAP_PAD + MASK_WORD + 3];
        let gaps = &mut gaps[..GAP_PAD + word.len() + 3];
        let mut breaks = 0;
        if self.patterns.score(word, gaps) {
            for (i, &g) in gaps[GAP_PAD + 1..].iter().enumerate() {
                breaks |= ((g & 1) as u64) << i;
            }
        }
        breaks
    }

    /// [`Hyphenator::hyphenate_into`] for words longer than [`MASK_WORD`] bytes: heap
    /// buffers, the scores of all gaps.
    #[cold]
    fn hyphenate_long<L: ExceptionLookup + ?Sized>(
        &self,
        word: &str,
        exceptions: &L,
        out: &mut String,
    ) -> Result<WordOutcome> {
        let bytes = word.as_bytes();
        let n = bytes.len();
        let mut outcome = WordOutcome::default();
        if !is_letters(bytes) {
            out.push_str(word);
            return Ok(outcome);
        }
        // gaps[GAP_PAD + i + 1]: score of the break after i letters (odd = hyphen).
        let mut gaps = vec![0u8; GAP_PAD + n + 3];
        let mut from_exception = false;
        if !exceptions.is_always_empty() {
            let lower = bytes.to_ascii_lowercase();
            let hash = filterstore::hash::key_hash(&lower);
            outcome.lookups = 1;
            if let Some(value) = exceptions.lookup(&lower, hash)? {
                let gaps = &mut gaps[GAP_PAD + 1..];
                exception_hyphens(&lower, &value, |k| gaps[k] = 1)?;
                from_exception = true;
            }
        }
        if !from_exception && !self.patterns.score(bytes, &mut gaps) {
            out.push_str(word);
            return Ok(outcome);
        }
        outcome.exception = from_exception;

        // A break after i letters (gap i + 1) is allowed for left_min <= i <= n - right_min.
        let (lo, hi) = (self.left_min, n - self.right_min);
        out.reserve(n + n / 2);
        let mut last = 0;
        if let Some(allowed) = gaps.get(GAP_PAD + lo + 1..GAP_PAD + hi + 2) {
            for (k, &g) in allowed.iter().enumerate() {
                if g & 1 != 0 {
                    let i = lo + k;
                    out.push_str(&word[last..i]);
                    out.push('-');
                    last = i;
                    outcome.hyphens += 1;
                }
            }
        }
        out.push_str(&word[last..]);
        Ok(outcome)
    }
}

/// Eight bytes at once: `(x | 0x20 in every byte, a mask with bit 7 of every byte that is not
/// an ASCII letter set)`. `| 0x20` lower-cases a letter.
#[inline(always)]
fn lower_swar(x: u64) -> (u64, u64) {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const EACH: u64 = 0x0101_0101_0101_0101;
    let c = x | (0x20 * EACH);
    // Per byte t <= 0x7f, so t + 0x1f and t + 5 never carry into the next byte.
    let t = c & LOW7;
    let at_least_a = (t + (0x80 - b'a' as u64) * EACH) & HIGH;
    let above_z = (t + (0x7f - b'z' as u64) * EACH) & HIGH;
    (c, (x & HIGH) | (at_least_a ^ HIGH) | above_z)
}

/// Lower-cases `word` into `buf` (at least `word.len()` long, rounded up to 8) and returns
/// the lower-cased word, or `None` when a byte is not an ASCII letter.
#[inline]
fn lower_letters<'a>(word: &[u8], buf: &'a mut [u8]) -> Option<&'a [u8]> {
    let n = word.len();
    let mut bad = 0u64;
    if n >= 8 {
        // Chunks of eight; the last one ends at the word's end (overlapping the previous).
        let mut at = 0;
        loop {
            let at_end = at.min(n - 8);
            let x = u64::from_le_bytes(word.get(at_end..at_end + 8)?.try_into().ok()?);
            let (c, b) = lower_swar(x);
            bad |= b;
            buf.get_mut(at_end..at_end + 8)?
                .copy_from_slice(&c.to_le_bytes());
            at += 8;
            if at >= n {
                break;
            }
        }
    } else {
        for (l, &b) in buf.iter_mut().zip(word) {
            let (c, m) = lower_swar(b as u64);
            bad |= m & 0x80;
            *l = c as u8;
        }
    }
    if bad != 0 {
        return None;
    }
    buf.get(..n)
}

/// Calls `mark(k)` for each hyphen of an exception's stored form (a hyphen after `k`
/// letters), checking that the form spells `lower` (letters and single hyphens only, no
/// hyphen at an end).
#[inline]
fn exception_hyphens(lower: &[u8], value: &[u8], mut mark: impl FnMut(usize)) -> Result<()> {
    let mut k = 0; // letters seen
    let mut prev_hyphen = true; // refuse a leading hyphen
    for &b in value {
        if b == b'-' {
            if prev_hyphen {
                return Err(bad_exception_value(lower, value));
            }
            mark(k);
            prev_hyphen = true;
        } else {
            if lower.get(k) != Some(&b.to_ascii_lowercase()) {
                return Err(bad_exception_value(lower, value));
            }
            k += 1;
            prev_hyphen = false;
        }
    }
    if k != lower.len() || prev_hyphen {
        return Err(bad_exception_value(lower, value));
    }
    Ok(())
}

fn bad_exception_value(lower: &[u8], value: &[u8]) -> Error {
    let show = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(80)]).into_owned();
    Error::corrupt(
        0,
        format!(
            "exception value {:?} does not spell the word {:?}",
            show(value),
            show(lower)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_agrees_with_the_general_one_on_the_whole_list() {
        let h = Hyphenator::en_us().unwrap();
        let exceptions = MemoryExceptions::en_us().unwrap();
        let words = WordList::builtin().unwrap();
        let (mut fast, mut general) = (String::new(), String::new());
        for w in words.iter() {
            for lookup in [&exceptions as &dyn ExceptionLookup, &NoExceptions] {
                fast.clear();
                general.clear();
                let a = h.hyphenate_into(w, lookup, &mut fast).unwrap();
                let b = h.hyphenate_long(w, lookup, &mut general).unwrap();
                if w.len() >= LEFT_HYPHEN_MIN + RIGHT_HYPHEN_MIN {
                    assert_eq!((&fast, a), (&general, b), "{w}");
                }
            }
        }
    }

    #[test]
    fn long_words_and_far_reaching_patterns() {
        let h = Hyphenator::new(Patterns::parse("a1bcdefghijklmnopq 2ab").unwrap())
            .with_minimums(1, 1)
            .unwrap();
        assert_eq!(
            h.hyphenate("xAbcdefghijklmnopq", &NoExceptions).unwrap(),
            "xA-bcdefghijklmnopq"
        );
        let long = "ab".repeat(30);
        let mut exceptions = MemoryExceptions::new();
        exceptions
            .add_text(&format!("{}-{}", &long[..7], &long[7..]))
            .unwrap();
        let h = Hyphenator::en_us().unwrap();
        let got = h.hyphenate(&long.to_uppercase(), &exceptions).unwrap();
        assert_eq!(got, format!("{}-{}", &long[..7], &long[7..]).to_uppercase());
        let odd = format!("{long}1");
        assert_eq!(h.hyphenate(&odd, &exceptions).unwrap(), odd);
        assert_eq!(h.hyphenate(&odd, &NoExceptions).unwrap(), odd);
    }
}
