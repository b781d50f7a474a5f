//! Per-keyspace figures ([`KeyspaceStats`]): what one tree holds and what its tables'
//! filters (or its global filter) did. The engine's counters (bytes written, flushes,
//! compactions, stalls) are the store's, in [`Stats`](super::Stats). And a keyspace's
//! filter maintenance on its handle: refilter, rebalance, the global filter's check.

use super::{GlobalFilterStats, Inner, Keyspace, Rebalanced, Store};
use crate::error::Result;
use crate::filter::alloc::FilterPolicy;
use crate::filter::FilterKind;

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
    /// [`FilterKind::Global`], or refiltered to it); as [`Stats::global_filter`] is the
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

impl Keyspace {
    /// Rebuilds the filters of this keyspace's tables as `kind` at `fpr` and records that
    /// policy for it (see [`Store::refilter`]): [`FilterKind::Global`] puts the keyspace
    /// under a global filter of its own, another kind takes it off one.
    pub fn refilter(&self, kind: FilterKind, fpr: f64) -> Result<()> {
        self.store.refilter(kind, fpr)
    }
    /// Rebuilds the filters that `policy` changes materially, for this keyspace's levels,
    /// and records it for the keyspace (see [`Store::rebalance`]).
    pub fn rebalance(&self, policy: FilterPolicy) -> Result<Rebalanced> {
        self.store.rebalance(policy)
    }
    /// This keyspace's recorded filter policy (see [`Store::recorded_policy`]).
    pub fn recorded_policy(&self) -> FilterPolicy {
        self.store.recorded_policy()
    }
    /// Checks that this keyspace's global filter agrees with its tables (see
    /// [`Store::check_global_filter`]): `Ok(None)` when it has none.
    pub fn check_global_filter(&self) -> Result<Option<u64>> {
        self.store.check_global_filter()
    }
}
