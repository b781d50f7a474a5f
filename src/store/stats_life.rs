//! What the store counts of its data's life ([`LifecycleStats`], `Stats::lifecycle`):
//! entries expiry removed, range tombstones live, tables dropped whole under them.

use std::sync::atomic::Ordering::Relaxed;

use super::Inner;
use crate::version::Version;

/// Expiry and range deletion, counted (docs/engine.md, "Expiry and compaction filters" and
/// "Range deletion"). The counts of work done are this process's, since the store was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LifecycleStats {
    /// Expired entries that compactions met and removed: written as tombstones, or dropped
    /// where tombstones are dropped (at the bottom). An expired version that a newer version
    /// of its key hid is dropped as any overwritten version, and not counted here.
    pub entries_expired: u64,
    /// Bytes those entries held that their compactions did not write again: the value's
    /// bytes, and the key's too where the tombstone it became was dropped.
    pub bytes_reclaimed_by_expiry: u64,
    /// Range tombstones live now, in the memtables and in the live tables' `.rdel` files:
    /// each `delete_range` or `delete_prefix` is one, in its memtable and then in the table
    /// it is sealed or compacted into, until a compaction drops it.
    pub range_tombstones_live: u64,
    /// Tables that left the table set unread because range tombstones of newer tables
    /// covered their whole key range (docs/engine.md, "Range deletion").
    pub tables_dropped_whole: u64,
}

impl Inner {
    /// The lifecycle counters, with `version`'s range tombstones and those of the memtables.
    pub(super) fn lifecycle_stats(&self, version: &Version) -> LifecycleStats {
        let in_mem = {
            let st = self.read_state();
            let st = st.tree(self.tree.slot);
            let imm = st
                .imm
                .as_ref()
                .map_or(0, |m| m.mem.ranges_at(u64::MAX).count());
            st.mem.ranges_at(u64::MAX).count() + imm
        };
        let in_tables: usize = version
            .tables()
            .filter_map(|t| t.tombstones.as_deref())
            .map(<[_]>::len)
            .sum();
        let c = &self.counters;
        LifecycleStats {
            entries_expired: c.expired_entries.load(Relaxed),
            bytes_reclaimed_by_expiry: c.expired_bytes.load(Relaxed),
            range_tombstones_live: (in_mem + in_tables) as u64,
            tables_dropped_whole: c.tables_dropped_whole.load(Relaxed),
        }
    }
}
