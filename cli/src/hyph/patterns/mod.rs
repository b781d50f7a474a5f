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
//!
//! The files by job: `parse` reads pattern text, `compile` builds the automaton, `row` is
//! the table's row layout and the score window, `matcher` runs a word through the table.

mod compile;
mod matcher;
mod parse;
mod row;

pub(crate) use parse::is_letters;
pub use parse::{parse_patterns, Pattern};
use row::Row;

use filterstore::Result;

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
}

#[cfg(test)]
mod tests;
