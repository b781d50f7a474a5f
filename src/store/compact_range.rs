//! [`Store::compact_range`]: the tables that hold keys of a range merged down, level by
//! level, so that what a `delete_range` hid is reclaimed from disk on demand.

use super::worker::in_background;
use super::Store;
use crate::compaction::plan::{TableInfo, Task};
use crate::error::Result;
use crate::manifest::MAX_LEVELS;

impl Store {
    /// Reclaims the keys from `start` up to `end` (not included): flushes the memtable,
    /// then merges every table whose key range overlaps `start..end`, from L0 down, into
    /// the level below it (with the tables there it overlaps), level after level, so that
    /// the values and tombstones the range holds reach the bottom, where covered entries
    /// and tombstones with nothing older under them are dropped. After it, the bytes of a
    /// range removed by [`delete_range`](Self::delete_range) are gone from disk (unless a
    /// snapshot or scan still holds the old tables). Tables outside the range are left
    /// alone, except those of the level below that a merged table overlaps.
    pub fn compact_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let (start, end) = (start.as_ref(), end.as_ref());
        let inner = &self.inner;
        inner.check_writable()?;
        if start >= end {
            return Ok(());
        }
        self.flush()?;
        let _c = inner.lock_compaction();
        for level in 0..MAX_LEVELS - 1 {
            // Tables wholly under a newer tombstone leave unread (per-table filters only).
            inner.poison_on_err(inner.drop_covered(&inner.current()))?;
            let v = inner.current();
            let levels = v.level_slices();
            let overlaps = |t: &&std::sync::Arc<crate::version::TableHandle>| {
                t.min_key() < end && t.max_key() >= start
            };
            // L0's tables overlap each other: all of them go down together (as a compaction
            // from L0 takes them), else the newest version would not win.
            let picked: Vec<_> = if level == 0 {
                if levels[0].iter().any(|t| overlaps(&t)) {
                    levels[0].iter().collect()
                } else {
                    Vec::new()
                }
            } else {
                levels[level].iter().filter(overlaps).collect()
            };
            if picked.is_empty() {
                continue;
            }
            let lo = picked.iter().map(|t| t.min_key()).min().unwrap_or(start);
            let hi = picked.iter().map(|t| t.max_key()).max().unwrap_or(end);
            // Nothing below to reach and nothing to drop: merging further down would only
            // rewrite the same entries again.
            let clean = picked
                .iter()
                .all(|t| t.record.tombstones == 0 && t.tombstones.is_none());
            let deeper = levels[level + 1..]
                .iter()
                .flat_map(|l| l.iter())
                .any(|t| t.min_key() <= hi && t.max_key() >= lo);
            if level > 0 && clean && !deeper {
                break;
            }
            let below = levels[level + 1]
                .iter()
                .filter(|t| t.min_key() <= hi && t.max_key() >= lo);
            let inputs = picked
                .iter()
                .copied()
                .chain(below)
                .map(|t| t.number())
                .collect();
            let task = Task::Merge {
                from: level,
                inputs,
                output: level + 1,
                cursor: None,
            };
            let r = in_background(|| inner.run_task(&v, task));
            inner.poison_on_err(r)?;
        }
        drop(_c);
        inner.want_compaction();
        Ok(())
    }
}
