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
//! [`crate::hash::key_hash`], computed once per word, so each table's filter can be probed
//! with that hash and only tables whose filter answers "maybe" are read; most words then
//! never touch the disk. [`MemoryExceptions::sorted_entries`] gives the built-in list in key
//! order for bulk-loading the store.
//!
//! ```
//! use filterstore::hyph::{Hyphenator, MemoryExceptions, NoExceptions};
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

use crate::{Error, Result};
use patterns::GAP_PAD;

/// The built-in US English patterns (`data/hyph/hyph-en-us.pat.txt`, hyph-utf8).
pub const EN_US_PATTERNS: &str = include_str!("../../data/hyph/hyph-en-us.pat.txt");
/// Knuth's 14 exceptions from `hyphen.tex` (`data/hyph/hyph-en-us.hyp.txt`).
pub const EN_US_KNUTH_EXCEPTIONS: &str = include_str!("../../data/hyph/hyph-en-us.hyp.txt");
/// The TUGboat exception list (`data/hyph/ushyphex.tex`, 1,753 entries).
pub const EN_US_TUGBOAT_EXCEPTIONS: &str = include_str!("../../data/hyph/ushyphex.tex");

/// TeX's `\lefthyphenmin` for US English.
pub const LEFT_HYPHEN_MIN: usize = 2;
/// TeX's `\righthyphenmin` for US English.
pub const RIGHT_HYPHEN_MIN: usize = 3;

/// Words up to this length are scored in stack buffers; longer ones use the heap.
const STACK_WORD: usize = 96;

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
        // Words with a non-letter are caught by the exception path's lower-casing or by
        // the pattern matcher, whichever runs first.
        if n < self.left_min + self.right_min {
            out.push_str(word);
            return Ok(outcome);
        }
        // gaps[GAP_PAD + i + 1]: score of the break after i letters (odd = hyphen).
        let mut gaps_stack = [0u8; GAP_PAD + STACK_WORD + 3];
        let mut gaps_heap = Vec::new();
        let gaps: &mut [u8] = if n <= STACK_WORD {
            &mut gaps_stack[..GAP_PAD + n + 3]
        } else {
            gaps_heap.resize(GAP_PAD + n + 3, 0);
            &mut gaps_heap
        };

        let mut from_exception = false;
        if !exceptions.is_always_empty() {
            let mut lower_stack = [0u8; STACK_WORD];
            let mut lower_heap = Vec::new();
            let lower: &mut [u8] = if n <= STACK_WORD {
                &mut lower_stack[..n]
            } else {
                lower_heap.resize(n, 0);
                &mut lower_heap
            };
            let mut letters = true;
            for (l, b) in lower.iter_mut().zip(bytes) {
                letters &= b.is_ascii_alphabetic();
                *l = b.to_ascii_lowercase();
            }
            if !letters {
                out.push_str(word);
                return Ok(outcome);
            }
            let hash = crate::hash::key_hash(lower);
            outcome.lookups = 1;
            if let Some(value) = exceptions.lookup(lower, hash)? {
                exception_gaps(lower, &value, &mut gaps[GAP_PAD..])?;
                from_exception = true;
            }
        }
        if !from_exception && !self.patterns.score(bytes, gaps) {
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

/// Marks the hyphens of an exception's stored form in `gaps` (1 = hyphen), checking that
/// the form spells `lower` (letters and single hyphens only, no hyphen at an end).
fn exception_gaps(lower: &[u8], value: &[u8], gaps: &mut [u8]) -> Result<()> {
    let mut k = 0; // letters seen
    let mut prev_hyphen = true; // refuse a leading hyphen
    for &b in value {
        if b == b'-' {
            if prev_hyphen {
                return Err(bad_exception_value(lower, value));
            }
            gaps[k + 1] = 1;
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
