//! The global filter at open and close: its checkpoint (`GLOBALFILTER` for the default
//! keyspace, `GLOBALFILTER-ID` for named keyspace ID; written at close and used at open when
//! it answers for exactly the tables of the keyspace's manifest entries, else the filter is
//! built from the tables' keys), and the check that it agrees with the tables.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::global::{build_global, headroom_capacity};
use super::Inner;
use crate::error::Result;
use crate::filename::FileName;
use crate::filter::global::GlobalFilter;
use crate::global_index::{GlobalIndex, NO_RUN};
use crate::io::replace_file;
use crate::version::{Edit, TableHandle, Version};

/// The global filter keyspace `id` opens with, over the tables of `v`: its checkpoint
/// ([`FileName::global_filter`]) when that was written for exactly these tables, else one
/// built from the tables' keys ([`built_global`]). Returns `v` with it, its L0 handles
/// replaced by ones that carry their run ids.
pub(super) fn open_global(
    dir: &Path,
    id: u32,
    v: Version,
    counters: Arc<crate::counters::Sharded<8>>,
) -> Result<Version> {
    match load_checkpoint(dir, id, &v, counters.clone()) {
        Some(opened) => Ok(opened),
        None => built_global(dir, v, counters),
    }
}

/// `v` with a global filter built from its tables' keys ([`Inner::build_global`]), its L0
/// handles replaced by ones that carry their run ids.
pub(super) fn built_global(
    dir: &Path,
    v: Version,
    counters: Arc<crate::counters::Sharded<8>>,
) -> Result<Version> {
    let (g, fresh) = build_global(
        dir,
        &v,
        &|keys| headroom_capacity(keys, 0),
        counters,
        &AtomicBool::new(false),
        true,
    )?;
    Ok(v.apply(&Edit {
        replace: fresh,
        ..Edit::default()
    })
    .with_global(Some(g)))
}

/// A digest of the table set a global filter answers for: every table's level, number and
/// run id, in lookup order. Table numbers are never reused, so equal digests mean the same
/// tables, and so the same entries.
pub(super) fn table_set_tag(v: &Version) -> u64 {
    let mut b = Vec::new();
    for (l, level) in v.levels().iter().enumerate() {
        for t in level.tables() {
            b.extend_from_slice(&(l as u64).to_le_bytes());
            b.extend_from_slice(&t.record.number.to_le_bytes());
            b.push(t.run().map_or(NO_RUN, |r| r.index() as u8));
        }
    }
    xxhash_rust::xxh3::xxh3_64(&b)
}

/// Keyspace `id`'s checkpoint in `dir`, if there is one that decodes and was written for
/// the tables of `v` (a missing, damaged or stale one is not an error: the filter is built
/// instead).
pub(crate) fn load_checkpoint(
    dir: &Path,
    id: u32,
    v: &Version,
    counters: Arc<crate::counters::Sharded<8>>,
) -> Option<Version> {
    let bytes = std::fs::read(FileName::global_filter(id).0.path(dir)).ok()?;
    let (filter, tag) = GlobalFilter::decode(&bytes).ok()?;
    drop(bytes);
    let g = GlobalIndex::from_filter(filter, counters);
    if g.wants_shrink() {
        // Saved after a peak: built again from the tables' key hashes, at its size.
        return None;
    }
    // L0 ids newest first, as the tables (those in the filter: not the ones with filters
    // of their own).
    let runs = g.filter.writer().l0_runs().to_vec();
    let l0: Vec<&Arc<TableHandle>> = v.levels()[0]
        .tables()
        .iter()
        .filter(|t| !t.own_filter())
        .collect();
    if runs.len() != l0.len() {
        return None;
    }
    let fresh: Vec<Arc<TableHandle>> = l0
        .iter()
        .zip(&runs)
        .map(|(t, &run)| Arc::new(t.with_run(run)))
        .collect();
    let next = v.apply(&Edit {
        replace: fresh,
        ..Edit::default()
    });
    if table_set_tag(&next) != tag {
        return None;
    }
    Some(next.with_global(Some(Arc::new(g))))
}

/// A filter saved at close holding less than this share of its capacity is saved at its
/// size instead ([`fit_for_rest`]).
const FIT_BELOW: f64 = 0.75;
/// The capacity of a filter fitted for rest, times its entries: a little room, so that the
/// build stays below the design load's stash.
const FIT_ROOM: f64 = 1.05;

/// For a checkpoint: `g` built again at its size ([`FIT_ROOM`] times its entries) when it
/// holds less than [`FIT_BELOW`] of its capacity, else `None` (save `g` as it is). A filter
/// grows ahead of the flushes (to twice its capacity past 80 % of it) and compactions empty
/// it again as they carry the upper runs down, so at close it is often half empty; the
/// store at rest, and every reader that opens it, keeps the fitted one, and its first flush
/// after the next open grows it again (from the key hashes files, no data read). A build
/// that fails leaves `g` to be saved.
fn fit_for_rest(
    dir: &Path,
    v: &Version,
    g: &Arc<GlobalIndex>,
    counters: &Arc<crate::counters::Sharded<8>>,
) -> Option<Arc<GlobalIndex>> {
    let entries = g.filter.writer().len();
    if entries as f64 >= g.capacity as f64 * FIT_BELOW {
        return None;
    }
    let size = |keys: u64| (keys as f64 * FIT_ROOM) as u64;
    let (fitted, _) = build_global(
        dir,
        v,
        &size,
        counters.clone(),
        &AtomicBool::new(false),
        true,
    )
    .ok()?;
    // Not smaller (a floor of the capacity, or a stash): keep the one there is.
    (fitted.filter.memory_bytes() < g.filter.memory_bytes()).then_some(fitted)
}

impl Inner {
    /// Writes this tree's global filter checkpoint (`GLOBALFILTER`, or `GLOBALFILTER-ID`
    /// for a named keyspace; replaced atomically), tagged with the table set it answers
    /// for. Called at close, when no flush or compaction runs.
    pub(super) fn save_global(&self) -> Result<()> {
        let v = self.current();
        let Some(g) = v.global() else {
            return Ok(());
        };
        if self.tree.dropped.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        let fitted = fit_for_rest(&self.dir, &v, g, &self.tree.global_counters);
        let g = fitted.as_ref().unwrap_or(g);
        let bytes = g.filter.encode(table_set_tag(&v));
        let (file, tmp) = FileName::global_filter(self.tree.id);
        replace_file(&*self.fs, &self.dir, tmp, file, &bytes)
    }
}

impl super::Store {
    /// Checks that the global filter agrees with the tables: every key of every table is
    /// found under its run (the table's L0 id, or its level's), or by the table's own filter
    /// (and by its range filter: [`Store::check_filters`](super::Store::check_filters)).
    /// `Ok(None)` when lookups do not go through a global filter, else `Ok(Some(keys
    /// checked))`; an error names the first table with a key a filter does not find. Reads
    /// every table.
    pub fn check_global_filter(&self) -> Result<Option<u64>> {
        if self.inner.current().global().is_none() {
            return Ok(None);
        }
        Ok(Some(self.check_filters()?.keys))
    }
}
