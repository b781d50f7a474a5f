//! Liang patterns: parsing and a compiled matcher.
//!
//! The patterns are compiled into an Aho–Corasick automaton whose failure links are folded
//! into a dense transition table over 32 columns (the word-edge marker `.`, the 26 letters,
//! and five spare columns). Each row therefore holds every transition of its state, and two
//! of the spare columns hold the range of the state's *merged output*: the scores of every
//! pattern that ends at this point of the text (the state's own pattern and those of its
//! whole failure chain), already max-combined. Matching a word costs one table step per
//! letter plus the application of a few `(offset, score)` pairs.

use crate::{Error, Result};

/// Columns per table row (a power of two, so a state's row starts at `state << 5`).
const STRIDE: usize = 32;
/// Symbol of the word-edge marker `.`.
const EDGE: u8 = 0;
/// Number of real symbols (edge + 26 letters).
const SYMBOLS: usize = 27;
/// Column holding the start of the state's output range.
const OUT_START: usize = 28;
/// Column holding the end of the state's output range.
const OUT_END: usize = 29;
/// Marks a byte that is not an ASCII letter in [`SYMBOL`].
const NOT_LETTER: u8 = 0xff;

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
    /// `states * STRIDE` entries: columns 0..27 are next-state row offsets
    /// (`state * STRIDE`), columns `OUT_START`/`OUT_END` the output range.
    table: Vec<u32>,
    /// Merged outputs: `(back, score)`; a state entered on text character `t` sets the gap
    /// `t + 1 - back` to at least `score`.
    outputs: Vec<(u8, u8)>,
    /// Row offset of the state reached from the root by the leading `.`.
    after_edge: u32,
    /// Number of patterns compiled.
    count: usize,
    /// Longest pattern, in letters (edges counted).
    max_len: usize,
}

impl std::fmt::Debug for Patterns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Patterns")
            .field("patterns", &self.count)
            .field("states", &self.states())
            .field("outputs", &self.outputs.len())
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
                    if n >= (u32::MAX as usize) / STRIDE {
                        return Err(Error::InvalidArgument("too many patterns".to_string()));
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

        // 2. Breadth-first: failure links folded into the dense table, merged outputs.
        let mut table = vec![0u32; states * STRIDE];
        let mut fail = vec![0usize; states];
        // merged[s][back] = max score at `back` gaps before the end of the state's string.
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
                    fail[child] = if s == 0 {
                        0
                    } else {
                        table[fail[s] * STRIDE + c] as usize / STRIDE
                    };
                    table[s * STRIDE + c] = (child * STRIDE) as u32;
                    order.push(child);
                } else if s != 0 {
                    table[s * STRIDE + c] = table[fail[s] * STRIDE + c];
                }
                // The root's missing transitions stay 0 = the root.
            }
        }

        // 3. Sparse outputs.
        let mut outputs = Vec::new();
        for (s, m) in merged.iter().enumerate() {
            let start = outputs.len();
            for (back, &v) in m.iter().enumerate() {
                if v > 0 {
                    outputs.push((back as u8, v));
                }
            }
            table[s * STRIDE + OUT_START] = start as u32;
            table[s * STRIDE + OUT_END] = outputs.len() as u32;
        }
        let after_edge = table[EDGE as usize];
        Ok(Patterns {
            table,
            outputs,
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

    /// Number of automaton states.
    pub fn states(&self) -> usize {
        self.table.len() / STRIDE
    }

    /// Longest pattern, in characters (edge markers counted).
    pub fn max_pattern_len(&self) -> usize {
        self.max_len
    }

    /// Scores the gaps of `word` (ASCII letters only, any case; checked by the caller).
    ///
    /// `gaps` must be `word.len() + 3` long and zeroed; afterwards `gaps[i + 1]` is the score
    /// of the break after the first `i` letters (odd = allowed by the patterns).
    #[inline]
    pub(crate) fn score(&self, word: &[u8], gaps: &mut [u8]) {
        debug_assert_eq!(gaps.len(), word.len() + 3);
        let table = &self.table[..];
        let outputs = &self.outputs[..];
        let mut row = self.after_edge as usize;
        // Text: '.' word '.'; letter i is text character i + 1.
        for (i, &b) in word.iter().enumerate() {
            let sym = SYMBOL[b as usize] as usize & (STRIDE - 1);
            row = table[row + sym] as usize;
            apply(table, outputs, row, i + 2, gaps);
        }
        row = table[row + EDGE as usize] as usize;
        apply(table, outputs, row, word.len() + 2, gaps);
    }
}

/// Applies the merged output of the state at `row`, entered on the character before gap `end`.
#[inline(always)]
fn apply(table: &[u32], outputs: &[(u8, u8)], row: usize, end: usize, gaps: &mut [u8]) {
    let (start, stop) = (
        table[row + OUT_START] as usize,
        table[row + OUT_END] as usize,
    );
    for &(back, v) in &outputs[start..stop] {
        // back <= depth(state) <= end, so this never underflows.
        let g = &mut gaps[end - back as usize];
        if v > *g {
            *g = v;
        }
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

    #[test]
    fn scores_by_hand() {
        // "hy3ph" and ".hy2" on "hyphen": gap after "hy" gets max(3, 2) = 3.
        let p = Patterns::parse(".hy2 hy3ph he2n % comment\n").unwrap();
        assert_eq!(p.len(), 3);
        let word = b"hyphen";
        let mut gaps = vec![0u8; word.len() + 3];
        p.score(word, &mut gaps);
        assert_eq!(gaps[2 + 1], 3);
        // "he2n": gap after "hyphe" (5 letters).
        assert_eq!(gaps[5 + 1], 2);
        assert_eq!(gaps.iter().filter(|&&v| v > 0).count(), 2);
    }
}
