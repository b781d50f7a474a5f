//! Reading Liang pattern text: `.ach4`, `4b1ly.`, whitespace-separated lists with `%`
//! comments.

use super::{EDGE, NOT_LETTER};
use filterstore::{Error, Result};

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

/// The symbol of a pattern character (`.`: the word edge), `None` for anything else.
pub(super) fn symbol_of(ch: u8) -> Option<u8> {
    if ch == b'.' {
        Some(EDGE)
    } else {
        match SYMBOL[ch as usize] {
            NOT_LETTER => None,
            s => Some(s),
        }
    }
}
