//! Range tombstones: `delete_range(start, end)` hides every key in `start..end` (half-open)
//! that is older than the tombstone, with one tombstone, never one per key.
//!
//! ```text
//! memtable:  | (start, end, arena position) | ...      hides the memtable's older versions
//! table:     NNNNNN.rdel beside NNNNNN.sst           hides older tables' entries, never its own
//! version:   Cover: disjoint fragments, each with the smallest rank (newest table) over it
//! ```
//! **Older by position.** Entries carry no sequence numbers, so a tombstone's age is where it
//! sits: in a memtable its arena position (a version written below it is hidden, one written
//! after it survives, and a snapshot's position sees neither the tombstone nor what came
//! after); in the table set its table's place in the lookup order (L0 newest first, then
//! level by level). Whenever a table is written (seal or compaction), the entries its
//! tombstones cover that are older are dropped, so a table's own entries are always newer
//! than its own tombstones and its tombstones hide entries of older tables only.
//!
//! **Ranks.** A [`Cover`] is built over tombstones tagged with the rank of their source (a
//! number that grows with age: a scan's source number, a version's table order). A key
//! found in a source of rank `r` is hidden exactly when [`Cover::rank_at`] gives a rank
//! below `r`. A point lookup asks only after it found the key, so an absent key costs
//! nothing, and a version without tombstones has an empty cover.

pub(crate) mod compact;
pub mod file;

use std::collections::BTreeMap;

/// One range tombstone: every key `k` with `start <= k < end`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RangeTombstone {
    /// First key covered.
    pub start: Vec<u8>,
    /// First key past the range (not covered).
    pub end: Vec<u8>,
}

impl RangeTombstone {
    /// Whether `key` lies in the range.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.start.as_slice() <= key && key < self.end.as_slice()
    }
}

/// `prefix ..` the first key past every key starting with `prefix` (`None`: no such key,
/// the prefix is all `0xff` bytes or empty, and the range runs to the end of the key space).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The largest key any store holds, plus one: the end of a range that runs to the end of
/// the key space (keys are at most [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes, so a key of
/// `MAX_KEY_LEN + 1` bytes `0xff` lies past all of them).
pub fn key_space_end() -> Vec<u8> {
    vec![0xff; crate::MAX_KEY_LEN + 1]
}

/// `tombstones` sorted by start (then end), as a table's file holds them.
pub(crate) fn sorted<'a>(
    tombstones: impl Iterator<Item = &'a RangeTombstone>,
) -> Vec<RangeTombstone> {
    let mut v: Vec<RangeTombstone> = tombstones.cloned().collect();
    v.sort();
    v.dedup();
    v
}

/// A piece of a [`Cover`]: keys in `start..end`, covered by tombstones of which the newest
/// has `rank`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fragment {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
    pub rank: u32,
}

/// Tombstones of several sources, cut into disjoint fragments in key order, each with the
/// smallest rank (newest source) among the tombstones over it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cover {
    frags: Vec<Fragment>,
}

impl Cover {
    /// The cover of `tombstones` (each with its source's rank).
    pub(crate) fn build<'a>(
        tombstones: impl IntoIterator<Item = (&'a RangeTombstone, u32)>,
    ) -> Cover {
        // A sweep over the range ends: +rank at a start, -rank at an end.
        let mut events: Vec<(&[u8], bool, u32)> = Vec::new();
        for (t, rank) in tombstones {
            if t.start < t.end {
                events.push((&t.start, true, rank));
                events.push((&t.end, false, rank));
            }
        }
        events.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut active: BTreeMap<u32, usize> = BTreeMap::new();
        let mut frags: Vec<Fragment> = Vec::new();
        let mut i = 0;
        while i < events.len() {
            let at = events[i].0;
            while i < events.len() && events[i].0 == at {
                let (_, open, rank) = events[i];
                if open {
                    *active.entry(rank).or_default() += 1;
                } else if let Some(n) = active.get_mut(&rank) {
                    *n -= 1;
                    if *n == 0 {
                        active.remove(&rank);
                    }
                }
                i += 1;
            }
            let (Some((&rank, _)), Some(next)) = (active.first_key_value(), events.get(i)) else {
                continue;
            };
            match frags.last_mut() {
                Some(f) if f.rank == rank && f.end.as_slice() == at => f.end = next.0.to_vec(),
                _ => frags.push(Fragment {
                    start: at.to_vec(),
                    end: next.0.to_vec(),
                    rank,
                }),
            }
        }
        Cover { frags }
    }

    /// True when no tombstone is in it.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.frags.is_empty()
    }

    /// The fragment holding `key`, if a tombstone covers it.
    #[inline]
    pub(crate) fn fragment_at(&self, key: &[u8]) -> Option<&Fragment> {
        let i = self.frags.partition_point(|f| f.end.as_slice() <= key);
        self.frags.get(i).filter(|f| f.start.as_slice() <= key)
    }

    /// The smallest rank among the tombstones covering `key` (`None`: none covers it).
    #[inline]
    pub(crate) fn rank_at(&self, key: &[u8]) -> Option<u32> {
        self.fragment_at(key).map(|f| f.rank)
    }

    /// Whether a tombstone of rank below `rank` covers `key`: an entry found in a source of
    /// rank `rank` is hidden.
    #[inline]
    pub(crate) fn hides(&self, key: &[u8], rank: u32) -> bool {
        !self.frags.is_empty() && self.rank_at(key).is_some_and(|r| r < rank)
    }

    /// Whether tombstones of ranks below `rank` cover every key from `lo` to `hi` (both
    /// included) without a gap: a table of rank `rank` whose bounds these are holds nothing
    /// a read can see (`Version::covered_tables`).
    pub(crate) fn covers(&self, lo: &[u8], hi: &[u8], rank: u32) -> bool {
        let mut i = self.frags.partition_point(|f| f.end.as_slice() <= lo);
        let mut at = lo;
        while let Some(f) = self.frags.get(i) {
            if f.start.as_slice() > at || f.rank >= rank {
                return false;
            }
            if f.end.as_slice() > hi {
                return true;
            }
            at = &f.end;
            i += 1;
        }
        false
    }

    /// The fragments, in key order.
    #[cfg(test)]
    pub(crate) fn fragments(&self) -> &[Fragment] {
        &self.frags
    }
}

#[cfg(test)]
mod tests;
