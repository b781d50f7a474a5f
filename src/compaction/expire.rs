//! What a compaction does to each entry it writes besides merging: an expired entry becomes
//! a tombstone (which the merge then drops where tombstones may be dropped: at the bottom),
//! and the store's [`CompactionFilter`] keeps, removes or changes every value.

use crate::expiry::{expired_at, CompactionFilter, Decision};

/// The rewrite rules of one compaction.
#[derive(Clone, Copy, Default)]
pub(crate) struct Rewrite<'a> {
    /// The time expiry is judged at (Unix milliseconds; 0: nothing is expired).
    pub now: u64,
    /// The store's compaction filter, if any.
    pub filter: Option<&'a dyn CompactionFilter>,
    /// The level the output is written to (handed to the filter).
    pub level: usize,
    /// The output stores values tagged with their expiries (table version 5): true when an
    /// input table holds an expiring entry.
    pub tagged: bool,
}

/// What becomes of an entry.
pub(crate) enum Out {
    /// Written as it came.
    Same,
    /// Written as a tombstone (or dropped, where the merge drops tombstones).
    Tombstone,
    /// Written with this value (and its expiry).
    Value(Vec<u8>),
}

impl Rewrite<'_> {
    /// Decides about the entry `key` = `value` expiring at `exp`.
    #[inline]
    pub(crate) fn apply(&self, key: &[u8], value: Option<&[u8]>, exp: u64) -> Out {
        let Some(v) = value else {
            return Out::Same;
        };
        if expired_at(exp, self.now) {
            return Out::Tombstone;
        }
        match self.filter.map(|f| f.filter(self.level, key, v)) {
            None | Some(Decision::Keep) => Out::Same,
            Some(Decision::Remove) => Out::Tombstone,
            Some(Decision::Change(nv)) => Out::Value(nv),
        }
    }
}
