//! A memtable's range tombstones (`delete_range`): each with the arena position it was
//! written at, so that it hides exactly the versions written below it (see `tombstone`).

use super::Memtable;
use crate::tombstone::RangeTombstone;
use crate::wal::Op;

/// A range tombstone in a memtable: its range and the arena position of its write.
#[derive(Clone, Debug)]
pub(crate) struct MemRange {
    pub range: RangeTombstone,
    pub pos: u64,
}

impl Memtable {
    /// Applies one operation of a write batch.
    pub(crate) fn apply(&mut self, op: Op<'_>) {
        match op {
            Op::Put(k, v) => self.insert(k, Some(v)),
            Op::Delete(k) => self.insert(k, None),
            Op::PutExpiring(k, v, exp) => self.insert_op(k, Some(v), exp),
            Op::DeleteRange(s, e) => self.delete_range(s, e),
        }
    }

    /// Hides every key in `start..end` written before this call. The start key also gets
    /// a point tombstone (it lies in the range: the same answer), so that a memtable holding
    /// only ranges still seals into a table with an entry.
    pub(crate) fn delete_range(&mut self, start: &[u8], end: &[u8]) {
        if start >= end {
            return;
        }
        self.insert(start, None);
        // One byte of its own: its position is distinct from every version's.
        let pos = self.arena.append(&[&[0]]);
        self.ranges.push(MemRange {
            range: RangeTombstone {
                start: start.to_vec(),
                end: end.to_vec(),
            },
            pos,
        });
        self.range_bytes += start.len() + end.len() + std::mem::size_of::<MemRange>();
    }

    /// Whether a range tombstone written after position `at` and before `snap` covers
    /// `key`: the version of `key` at `at` is hidden from a reader at `snap`.
    #[inline]
    pub(crate) fn covered(&self, key: &[u8], at: u64, snap: u64) -> bool {
        !self.ranges.is_empty()
            && self
                .ranges
                .iter()
                .any(|r| r.pos > at && r.pos < snap && r.range.contains(key))
    }

    /// Whether a range tombstone written before `snap` covers `key` (so every older
    /// memtable's and table's version of it is hidden from a reader at `snap`).
    #[inline]
    pub(crate) fn range_covers(&self, key: &[u8], snap: u64) -> bool {
        self.ranges
            .iter()
            .any(|r| r.pos < snap && r.range.contains(key))
    }

    /// The range tombstones written before `snap`, oldest first.
    pub(crate) fn ranges_at(&self, snap: u64) -> impl Iterator<Item = &RangeTombstone> {
        self.ranges
            .iter()
            .filter(move |r| r.pos < snap)
            .map(|r| &r.range)
    }

    /// True when it holds a range tombstone.
    pub(crate) fn has_ranges(&self) -> bool {
        !self.ranges.is_empty()
    }
}
