//! Per-keyspace figures ([`KeyspaceStats`]): what one tree holds and what its tables'
//! filters (or its global filter) did. The engine's counters (bytes written, flushes,
//! compactions, stalls) are the store's, in [`Stats`](super::Stats).

use super::{GlobalFilterStats, Inner, Store};

/// One keyspace's figures ([`Store::keyspace_stats`], [`Keyspace::stats`]).
///
/// [`Keyspace::stats`]: super::Keyspace::stats
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct KeyspaceStats {
    /// Its name ("" for the default keyspace).
    pub name: String,
    /// Its id (0 for the default keyspace).
    pub id: u32,
    /// Live tables.
    pub tables: u64,
    /// Bytes of their table files.
    pub file_bytes: u64,
    /// Bytes of their filters.
    pub filter_bytes: u64,
    /// Entries in its tables.
    pub table_keys: u64,
    /// Entries of its memtable and of the one being sealed.
    pub memtable_entries: u64,
    /// Bytes of its memtable.
    pub memtable_bytes: u64,
    /// Absent lookups its tables' filters, or its global filter, answered.
    pub filter_negatives: u64,
    /// Lookups its tables' filters, or its global filter, let through in vain.
    pub false_positives: u64,
    /// Its global filter, when its lookups go through one (a keyspace created with
    /// [`FilterKind::Global`](crate::FilterKind::Global), or refiltered to it); as [`Stats::global_filter`] is the
    /// default keyspace's.
    ///
    /// [`Stats::global_filter`]: super::Stats::global_filter
    pub global_filter: Option<GlobalFilterStats>,
}

impl Store {
    /// The figures of every keyspace: the default one first, then the others by creation
    /// order.
    pub fn keyspace_stats(&self) -> Vec<KeyspaceStats> {
        self.inner
            .all_trees()
            .iter()
            .map(|t| t.keyspace_stats())
            .collect()
    }
}

impl Inner {
    /// This tree's figures.
    pub(super) fn keyspace_stats(&self) -> KeyspaceStats {
        let s = self.stats();
        let g = crate::global_index::counts(&self.tree.global_counters);
        KeyspaceStats {
            name: self.tree.name.clone(),
            id: self.tree.id,
            tables: s.tables.len() as u64,
            file_bytes: s.tables.iter().map(|t| t.file_bytes).sum(),
            filter_bytes: s.tables.iter().map(|t| t.filter_bytes).sum(),
            table_keys: s.table_keys(),
            memtable_entries: s.memtable_entries,
            memtable_bytes: s.memtable_bytes,
            filter_negatives: s.tables.iter().map(|t| t.filter_negatives).sum::<u64>()
                + g.negatives,
            false_positives: s.tables.iter().map(|t| t.false_positives).sum::<u64>()
                + g.false_positives,
            global_filter: s.global_filter,
        }
    }
}
