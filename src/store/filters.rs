//! Which filter each table gets, and new filters for the same data.
//!
//! A new table's filter ([`Inner::filter_for`]) follows the handle's [`FilterPolicy`]: one
//! kind and rate for every table, or under a budget the rate of its run in Monkey's
//! allocation (`filter::alloc`). [`Store::refilter`], [`Store::rebalance`] and
//! [`Store::refilter_to`] rebuild the filters of existing tables from their keys, publish
//! them in one manifest swap and never touch a table file.

use std::sync::Arc;

use super::options::check_policy;
use super::worker::in_background;
use super::{Inner, Store};
use crate::error::Result;
use crate::filename::FileName;
use crate::filter::alloc::{self, FilterPolicy, SizeModel, MAX_FPR};
use crate::filter::choice::AllocationChoice;
use crate::filter::{check_fpr, FilterKind};
use crate::table::files::{new_filter_file, TableFiles};
use crate::table::MappedFilter;
use crate::version::{Edit, TableHandle, Version, VersionEdit};

impl Store {
    /// Rebuilds the filter of every table as `kind` at `fpr` without rewriting any data:
    /// new filter files are written, the manifest is swapped atomically, old filters removed.
    /// The store records `FilterPolicy::Uniform { kind, fpr }` as its policy in the same
    /// manifest, and this handle's new tables follow it.
    ///
    /// ```
    /// use filterstore::{FilterKind, Store};
    /// # let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), Default::default())?;
    /// store.put(b"k", b"v")?;
    /// store.flush()?;
    /// store.refilter(FilterKind::BinaryFuse, 0.001)?;
    /// let t = &store.stats().tables[0];
    /// assert_eq!((t.filter_kind, t.target_fpr), (FilterKind::BinaryFuse, 0.001));
    /// assert_eq!(store.get(b"k")?.unwrap(), b"v");
    /// # Ok::<(), filterstore::Error>(())
    /// ```
    pub fn refilter(&self, kind: FilterKind, fpr: f64) -> Result<()> {
        check_fpr(fpr)?;
        let inner = &self.inner;
        inner.check_writable()?;
        let _c = inner.lock_compaction();
        // No flush publishes a table until the new filters are in place.
        let _g = inner.lock_global();
        let v = inner.current();
        let jobs = v.tables().map(|t| (t.clone(), kind, fpr)).collect();
        inner.replace_filters(jobs, FilterPolicy::Uniform { kind, fpr }, None)
    }

    /// Recomputes what every table's filter should be under `policy` for the levels as they
    /// are now, and rebuilds only the filters that changed materially (another kind, or a
    /// size that differs by more than 5 % (`alloc::MATERIAL`) from the one the table's
    /// recorded rate gives), without rewriting any data. A budget's allocation moves as the
    /// levels grow; this is how a store follows it. Table files are never touched. The store
    /// records `policy` (in the same manifest swap), and this handle's new tables follow it.
    pub fn rebalance(&self, policy: FilterPolicy) -> Result<Rebalanced> {
        self.refilter_with(policy, true, None)
    }

    /// Chooses the allocation for the levels as they are now and rebalances to it (as
    /// [`Store::rebalance`] does): Monkey's where the coverage-weighted model
    /// ([`Stats::allocation_model`](super::Stats::allocation_model), each run weighted by
    /// the fraction of this process's lookups that reached it, or by 1 before any) says it
    /// saves at least 20 % of uniform's wasted reads, uniform elsewhere, at the memory of
    /// the store's policy. The store records the policy and the choice with what it saw and
    /// predicted ([`Store::allocation_choice`]). A store created without
    /// [`Options::policy`](super::Options::policy) chooses this way from the start (uniform
    /// while it is empty). Without per-table filters there is nothing to choose: nothing
    /// changes.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = filterstore::Store::open(dir.path(), Default::default())?;
    /// assert_eq!(store.allocation_choice().unwrap().allocation(), "uniform"); // empty
    /// for i in 0..1000u32 {
    ///     store.put(&i.to_be_bytes(), b"v")?;
    /// }
    /// store.flush()?;
    /// store.rebalance_auto()?; // one table: Monkey would save nothing
    /// assert_eq!(store.stats().allocation_model.unwrap().policy.allocation(), "uniform");
    /// # Ok::<(), filterstore::Error>(())
    /// ```
    pub fn rebalance_auto(&self) -> Result<Rebalanced> {
        let recorded = self.inner.lock_versions().recorded;
        let Some(model) = self.stats().allocation_model else {
            return Ok(Rebalanced::default());
        };
        let c = model.choice;
        self.refilter_with(c.policy(&recorded), true, Some(c))
    }

    /// The store's last allocation choice, when it chooses by itself (see
    /// [`Store::rebalance_auto`]); `None` when its policy was given.
    pub fn allocation_choice(&self) -> Option<AllocationChoice> {
        self.inner.lock_versions().choice
    }

    /// Rebuilds every table's filter to what `policy` gives it for the levels as they are
    /// now, material change or not (to compare allocations exactly; [`Store::rebalance`]
    /// is the economical one). No data is rewritten. Records `policy` like
    /// [`Store::rebalance`].
    pub fn refilter_to(&self, policy: FilterPolicy) -> Result<Rebalanced> {
        self.refilter_with(policy, false, None)
    }

    /// Rebuilds to `policy` (see [`Store::rebalance`]) and records `choice` (`None`: the
    /// policy was given; the store stops choosing by itself).
    fn refilter_with(
        &self,
        policy: FilterPolicy,
        only_material: bool,
        choice: Option<AllocationChoice>,
    ) -> Result<Rebalanced> {
        check_policy(&policy)?;
        let inner = &self.inner;
        inner.check_writable()?;
        let _c = inner.lock_compaction();
        let _g = inner.lock_global();
        let v = inner.current();
        let targets = filter_targets(&v, &policy);
        let mut jobs = Vec::new();
        let mut kept = 0;
        for (t, (kind, fpr)) in v.tables().zip(targets) {
            let r = &t.record;
            let changed = if !only_material || kind != r.filter_kind {
                true
            } else if kind == FilterKind::None {
                false
            } else {
                t.filter.is_none() || alloc::material(SizeModel::of(kind), r.fpr, fpr)
            };
            if changed {
                jobs.push((t.clone(), kind, fpr));
            } else {
                kept += 1;
            }
        }
        let rebuilt = jobs.iter().map(|(t, _, _)| t.record.number).collect();
        let switch = (policy.kind() == FilterKind::Global) != v.global().is_some();
        let recorded = {
            let st = inner.lock_versions();
            (st.recorded, st.choice)
        };
        if !jobs.is_empty() || switch {
            inner.replace_filters(jobs, policy, choice)?;
        } else if recorded != (policy, choice) {
            // No filter changes, but the store records the policy all the same.
            let edit = VersionEdit {
                policy: Some(policy),
                choice: Some(choice),
                ..VersionEdit::default()
            };
            inner.log_and_apply(edit)?;
        } else {
            inner.lock_versions().adopt(policy);
        }
        Ok(Rebalanced { rebuilt, kept })
    }
}

/// What [`Store::rebalance`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rebalanced {
    /// Numbers of the tables whose filter was rebuilt.
    pub rebuilt: Vec<u64>,
    /// Tables whose filter was kept.
    pub kept: usize,
}

/// Keys of the runs an absent lookup probes in `v`, without the tables numbered in `gone`:
/// each L0 table (newest first), and each level 1.. as one run (0 when empty).
fn run_keys(v: &Version, gone: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let keys = |ts: &[Arc<TableHandle>]| -> Vec<u64> {
        ts.iter()
            .filter(|t| !gone.contains(&t.record.number))
            .map(|t| t.record.entries)
            .collect()
    };
    let levels = v.levels();
    let l0 = levels.first().map_or_else(Vec::new, |l| keys(l.tables()));
    let deeper = levels
        .iter()
        .skip(1)
        .map(|l| keys(l.tables()).iter().sum())
        .collect();
    (l0, deeper)
}

/// The filter a new table at `level` of a store under the global filter gets: one of its
/// own in the two deepest levels that hold tables in `v` (never L0, unless no level below
/// holds tables), whose keys then stay out of the global filter; none above them. The two
/// deepest levels hold most keys whatever the tree's size: levels have fixed targets, so a
/// new deepest level starts empty below a full one (see `docs/global-filter.md`, "The
/// deepest levels"). Its own filter is the policy's per-table kind, blocked Bloom under the
/// global policy, at the policy's rate.
pub(super) fn deepest_filter(v: &Version, level: usize, policy: FilterPolicy) -> (FilterKind, f64) {
    let deepest = v
        .levels()
        .iter()
        .rposition(|l| !l.tables().is_empty())
        .unwrap_or(0);
    let own_from = if deepest == 0 {
        0
    } else {
        (deepest - 1).max(1)
    };
    if level < own_from {
        return (FilterKind::None, 1.0);
    }
    match policy.kind() {
        FilterKind::Global | FilterKind::None => (FilterKind::BlockedBloom, policy.fpr()),
        k => (k, policy.fpr()),
    }
}

/// A budget's rate as a filter: none at all when the allocation gives it no memory.
fn as_filter(kind: FilterKind, eps: f64) -> (FilterKind, f64) {
    if kind == FilterKind::None || eps >= MAX_FPR {
        (FilterKind::None, 1.0)
    } else {
        (kind, eps)
    }
}

/// The filter every table of `v` should have under `policy`, in `v.tables()` order.
pub(super) fn filter_targets(v: &Version, policy: &FilterPolicy) -> Vec<(FilterKind, f64)> {
    match *policy {
        // Under the global filter the deepest level's tables get filters of their own.
        FilterPolicy::Uniform {
            kind: FilterKind::Global,
            fpr,
        } => v
            .levels()
            .iter()
            .enumerate()
            .flat_map(|(l, level)| {
                let own = deepest_filter(v, l, *policy);
                let target = if own.0 == FilterKind::None {
                    (FilterKind::Global, fpr)
                } else {
                    own
                };
                level.tables().iter().map(move |_| target)
            })
            .collect(),
        FilterPolicy::Uniform { kind, fpr } => v.tables().map(|_| (kind, fpr)).collect(),
        FilterPolicy::Budget { kind, bits_per_key } => {
            let (l0, deeper) = run_keys(v, &[]);
            let n0 = l0.len();
            let runs: Vec<u64> = l0.into_iter().chain(deeper).collect();
            let eps = alloc::monkey(&runs, bits_per_key, SizeModel::of(kind));
            let mut out = Vec::new();
            for (l, level) in v.levels().iter().enumerate() {
                for (i, _) in level.tables().iter().enumerate() {
                    let run = if l == 0 { i } else { n0 + l - 1 };
                    out.push(as_filter(kind, eps.get(run).copied().unwrap_or(1.0)));
                }
            }
            out
        }
    }
}

impl Inner {
    /// The filter a new table of `keys` keys at `level` gets: under a budget, the rate of its
    /// run in Monkey's allocation for `v` without the tables `gone` (a compaction's inputs),
    /// with the new keys added (a new L0 table is a run of its own; deeper, the keys join
    /// the level's run).
    pub(super) fn filter_for(
        &self,
        v: &Version,
        gone: &[u64],
        level: usize,
        keys: u64,
    ) -> (FilterKind, f64) {
        let policy = self.lock_versions().policy;
        if v.global().is_some() {
            return deepest_filter(v, level, policy);
        }
        let FilterPolicy::Budget { kind, bits_per_key } = policy else {
            return (policy.kind().per_table(), policy.fpr());
        };
        let (mut l0, mut deeper) = run_keys(v, gone);
        let run = if level == 0 {
            l0.insert(0, keys);
            0
        } else {
            if let Some(n) = deeper.get_mut(level - 1) {
                *n += keys;
            }
            l0.len() + level - 1
        };
        let runs: Vec<u64> = l0.into_iter().chain(deeper).collect();
        let eps = alloc::monkey(&runs, bits_per_key, SizeModel::of(kind));
        as_filter(kind, eps.get(run).copied().unwrap_or(1.0))
    }

    /// Gives each table of `jobs` a new filter of its kind at its rate, then publishes them
    /// with `policy` as the store's in one manifest swap; the old filter files go when no
    /// version holds them (`version/set.rs`), the new ones if the swap is not made. The
    /// caller holds the compaction lock.
    fn replace_filters(
        &self,
        jobs: Vec<(Arc<TableHandle>, FilterKind, f64)>,
        policy: FilterPolicy,
        choice: Option<AllocationChoice>,
    ) -> Result<()> {
        let mut fresh: Vec<Arc<TableHandle>> = Vec::new();
        for (t, kind, fpr) in &jobs {
            fresh.push(in_background(|| self.rebuild_filter(t, *kind, *fpr))?);
        }
        let mut replace = fresh.clone();
        let global = if policy.kind() == FilterKind::Global {
            // One filter over every table, built from their keys; the L0 handles that
            // carry their run ids replace those just made.
            let next = self.current().apply(&Edit {
                replace: fresh.clone(),
                ..Edit::default()
            });
            let (g, l0) = in_background(|| self.build_global(&next, 0))?;
            for h in l0 {
                match replace
                    .iter_mut()
                    .find(|t| t.record.number == h.record.number)
                {
                    Some(slot) => *slot = h,
                    None => replace.push(h),
                }
            }
            Some(g)
        } else {
            None
        };
        let switched_away = global.is_none() && self.current().global().is_some();
        let edit = VersionEdit {
            policy: Some(policy),
            choice: Some(choice),
            ..VersionEdit::replacing(replace).with_global(global)
        };
        self.log_and_apply(edit)?;
        if switched_away {
            // Its checkpoint answers for nothing now (one left by a crash here is removed
            // at the next open).
            let (file, _) = FileName::global_filter(self.tree.id);
            let _ = self.fs.remove(&file.path(&self.dir));
        }
        Ok(())
    }

    /// A handle for table `t` with a new filter of `kind` at `fpr` (built from its keys).
    fn rebuild_filter(
        &self,
        t: &Arc<TableHandle>,
        kind: FilterKind,
        fpr: f64,
    ) -> Result<Arc<TableHandle>> {
        let kind = kind.per_table();
        let hashes = crate::global_index::table_hashes(&t.table)?;
        let alloc = || self.alloc_file();
        let (filter_no, file) = new_filter_file(&self.fs, &self.dir, &alloc, (kind, fpr), &hashes)?;
        let mut record = t.record.clone();
        record.filter_file = filter_no;
        record.filter_kind = kind;
        record.fpr = fpr;
        let filter = match &file {
            Some(f) => Some(Arc::new(MappedFilter::open(f.path())?)),
            None => None,
        };
        let files = TableFiles {
            filter: file,
            ..t.files.clone()
        };
        Ok(Arc::new(
            TableHandle::new(t.table.clone(), filter, record, None, files)
                .with_range(t.range.clone(), t.range_problem.clone())
                .with_tombstones(t.tombstones.clone()),
        ))
    }
}
