//! Range tombstones in the table set: a table handle's tombstones and widened bounds, and a
//! version's [`Cover`] of them, ranked by the tables' places in the lookup order (see
//! `tombstone`).

use std::sync::Arc;

use super::{prefix8, TableHandle, Version};
use crate::tombstone::{Cover, RangeTombstone};

impl TableHandle {
    /// The same handle with range tombstones `tombstones` (sorted by start), its bounds
    /// widened to cover them: lookups, scans, planning and tombstone dropping all skip
    /// tables by their bounds.
    pub(crate) fn with_tombstones(
        mut self,
        tombstones: Option<Arc<[RangeTombstone]>>,
    ) -> TableHandle {
        let m = &self.table.meta;
        let wide = tombstones.as_deref().and_then(|ts| {
            let min = ts.iter().map(|t| &t.start).min()?.min(&m.min_key);
            let max = ts.iter().map(|t| &t.end).max()?.max(&m.max_key);
            (min != &m.min_key || max != &m.max_key).then(|| Box::new((min.clone(), max.clone())))
        });
        if let Some(w) = &wide {
            (self.lo, self.hi) = (prefix8(&w.0), prefix8(&w.1));
        }
        self.wide = wide;
        self.tombstones = tombstones.filter(|t| !t.is_empty());
        self
    }
}

impl Version {
    /// The cover of the tables of `levels` (L0 first).
    pub(super) fn cover_of(levels: &[Vec<Arc<TableHandle>>]) -> Arc<Cover> {
        let l0 = levels.first().map_or(0, Vec::len);
        let cover = levels
            .iter()
            .enumerate()
            .flat_map(|(l, ts)| ts.iter().enumerate().map(move |(i, t)| (l, i, t)))
            .filter_map(|(l, i, t)| Some((Version::rank_of(l0, l, i), t.tombstones.as_ref()?)))
            .flat_map(|(rank, ts)| ts.iter().map(move |t| (t, rank)));
        Arc::new(Cover::build(cover))
    }

    /// The rank of table `i` of level `l` in a version with `l0` L0 tables: its place in
    /// the lookup order (L0 newest first, then the levels), so that a range tombstone hides
    /// an entry found in a table of a higher rank.
    #[inline]
    fn rank_of(l0: usize, l: usize, i: usize) -> u32 {
        if l == 0 {
            i as u32
        } else {
            (l0 + l) as u32
        }
    }

    /// The tables that range tombstones of newer tables cover whole: every key from the
    /// table's smallest to its largest bound (widened to its own tombstones, so those are
    /// covered too) lies under a tombstone of a table before it in the lookup order. Nothing
    /// such a table holds can be read: it can leave the table set unread. Each with its file
    /// bytes.
    pub(crate) fn covered_tables(&self) -> Vec<(u64, u64)> {
        if self.cover.is_empty() {
            return Vec::new();
        }
        let l0 = self.l0_count();
        let mut out = Vec::new();
        for (l, level) in self.levels().iter().enumerate() {
            for (i, t) in level.tables().iter().enumerate() {
                let rank = Version::rank_of(l0, l, i);
                if self.cover.covers(t.min_key(), t.max_key(), rank) {
                    out.push((t.record.number, t.record.file_bytes));
                }
            }
        }
        out
    }

    /// The tables' range tombstones, ranked (see [`rank_of`](Self::rank_of)).
    pub(crate) fn cover(&self) -> &Cover {
        &self.cover
    }

    /// Whether the tables' range tombstones hide `key` found in table `i` of level `l`.
    #[inline]
    pub(super) fn hidden(&self, key: &[u8], l: usize, i: usize) -> bool {
        !self.cover.is_empty()
            && self
                .cover
                .hides(key, Version::rank_of(self.l0_count(), l, i))
    }
}
