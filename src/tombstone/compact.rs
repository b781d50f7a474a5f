//! Range tombstones in a compaction's merge: which entries they drop, which tombstones the
//! output keeps, and which output table each goes to.
//!
//! An entry from source `s` (sources newest first) is dropped when a tombstone of a source
//! numbered below `s` covers it. Every input tombstone is kept unless no table below the
//! output level overlaps its range. Each kept tombstone goes to the output table being
//! written when the merge reaches its start (at the end, to the last table), and a table is
//! never cut before a key at or below the end of a tombstone it holds: so the output
//! tables' bounds, widened to their tombstones, stay disjoint.

use super::{Cover, RangeTombstone};

/// What a merge knows of its inputs' range tombstones.
#[derive(Debug, Default)]
pub(crate) struct RangeInput {
    /// The inputs' tombstones, ranked by source number.
    pub cover: Cover,
    /// The tombstones the output keeps, sorted by start.
    pub keep: Vec<RangeTombstone>,
}

impl RangeInput {
    /// The input of a merge of sources whose tombstones are `by_source` (newest first),
    /// keeping those for which `droppable` says no.
    pub(crate) fn new(
        by_source: &[Vec<&RangeTombstone>],
        droppable: impl Fn(&RangeTombstone) -> bool,
    ) -> RangeInput {
        let all = by_source
            .iter()
            .enumerate()
            .flat_map(|(i, ts)| ts.iter().map(move |t| (*t, i as u32)));
        let cover = Cover::build(all);
        let keep = super::sorted(
            by_source
                .iter()
                .flatten()
                .copied()
                .filter(|t| !droppable(t)),
        );
        RangeInput { cover, keep }
    }

    /// Whether the merge drops the value of `key` found in source `src`.
    #[inline]
    pub(crate) fn drops(&self, key: &[u8], src: u32) -> bool {
        self.cover.hides(key, src)
    }

    /// Whether `key` is the start of a kept tombstone (its point tombstone stays, so the
    /// output table that holds the range holds an entry).
    pub(crate) fn keeps_start(&self, key: &[u8]) -> bool {
        self.keep
            .binary_search_by(|t| t.start.as_slice().cmp(key))
            .is_ok()
    }
}

/// Where the merge stands in handing out the kept tombstones.
#[derive(Debug, Default)]
pub(crate) struct RangeOut {
    /// The next kept tombstone not yet given to a table.
    next: usize,
    /// The tombstones of the output table being filled, and the largest end among them.
    current: Vec<RangeTombstone>,
    open_end: Option<Vec<u8>>,
}

impl RangeOut {
    /// Whether the table being filled may end before `key`.
    #[inline]
    pub(crate) fn may_cut_before(&self, key: &[u8]) -> bool {
        self.open_end.as_deref().is_none_or(|e| key > e)
    }

    /// `key` goes into the table being filled: so do the tombstones starting at or before
    /// it.
    #[inline]
    pub(crate) fn reach(&mut self, input: &RangeInput, key: &[u8]) {
        while let Some(t) = input.keep.get(self.next) {
            if t.start.as_slice() > key {
                break;
            }
            if self.open_end.as_ref().is_none_or(|e| t.end > *e) {
                self.open_end = Some(t.end.clone());
            }
            self.current.push(t.clone());
            self.next += 1;
        }
    }

    /// The table being filled ends (`last`: the merge is done, and every tombstone left
    /// goes to it): its tombstones.
    pub(crate) fn end_table(&mut self, input: &RangeInput, last: bool) -> Vec<RangeTombstone> {
        if last {
            self.current.extend(
                input.keep[self.next.min(input.keep.len())..]
                    .iter()
                    .cloned(),
            );
            self.next = input.keep.len();
        }
        self.open_end = None;
        std::mem::take(&mut self.current)
    }
}

/// Whether a merge writing level `output` may drop range tombstone `t`: no table below
/// `output` overlaps its range (bounds inclusive, the tombstone's end exclusive).
pub(crate) fn range_droppable<T: crate::compaction::plan::TableInfo>(
    levels: &[&[T]],
    output: usize,
    t: &RangeTombstone,
) -> bool {
    levels.iter().skip(output + 1).all(|l| {
        !l.iter()
            .any(|x| x.min_key() < t.end.as_slice() && x.max_key() >= t.start.as_slice())
    })
}
