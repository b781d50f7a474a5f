//! A keyspace's filter maintenance on its handle ([`Keyspace::refilter`],
//! [`Keyspace::rebalance`], [`Keyspace::check_global_filter`]): the store's, run on the
//! keyspace's tree (docs/engine.md, "Keyspaces"; a keyspace under the global filter:
//! docs/global-filter.md, "In named keyspaces").

use super::{FilterCheck, Keyspace, Rebalanced};
use crate::error::Result;
use crate::filter::alloc::FilterPolicy;
use crate::filter::FilterKind;

impl Keyspace {
    /// Rebuilds the filters of this keyspace's tables as `kind` at `fpr` and records that
    /// policy for it (see [`Store::refilter`](super::Store::refilter)): [`FilterKind::Global`] puts the keyspace
    /// under a global filter of its own, another kind takes it off one.
    pub fn refilter(&self, kind: FilterKind, fpr: f64) -> Result<()> {
        self.store.refilter(kind, fpr)
    }
    /// Rebuilds the filters that `policy` changes materially, for this keyspace's levels,
    /// and records it for the keyspace (see [`Store::rebalance`](super::Store::rebalance)).
    pub fn rebalance(&self, policy: FilterPolicy) -> Result<Rebalanced> {
        self.store.rebalance(policy)
    }
    /// This keyspace's recorded filter policy (see [`Store::recorded_policy`](super::Store::recorded_policy)).
    pub fn recorded_policy(&self) -> FilterPolicy {
        self.store.recorded_policy()
    }
    /// Checks that this keyspace's global filter agrees with its tables (see
    /// [`Store::check_global_filter`](super::Store::check_global_filter)): `Ok(None)` when it has none.
    pub fn check_global_filter(&self) -> Result<Option<u64>> {
        self.store.check_global_filter()
    }
    /// Checks every table's filters of this keyspace against its keys (see
    /// [`Store::check_filters`](super::Store::check_filters)).
    pub fn check_filters(&self) -> Result<FilterCheck> {
        self.store.check_filters()
    }
}
