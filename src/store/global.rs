//! The global filter in the engine (`FilterKind::Global`): building it from the tables'
//! keys, and keeping it in step with flushes, compactions and trivial moves.
//!
//! **Why a lookup never misses a key.** A flush inserts the new table's keys under its L0
//! run id before the table is published (until then the keys are in the immutable memtable,
//! which lookups search first). A compaction or trivial move relabels the entries of the
//! keys it moves to the output level's id in place (and removes the entries of versions it
//! consumed) before its tables are published, under a [`Move`] announcement: meanwhile a
//! lookup whose runs include the output also reads the sources, so a lookup through the
//! tables as they were finds every key (`GlobalIndex::begin_move`). After the publish the
//! removal count `Inner::global_removals` is bumped before the announcement is withdrawn, and
//! a lookup that sees the count change takes the table set again (`read.rs`): rare, only
//! lookups that straddle a publish. A change that fails to publish puts its entries back.
//! Growing the filter or switching to it builds a new one from the tables with flushes and
//! compactions held off, and publishes it with the table set.

use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use super::worker::Install;
use super::Inner;
use crate::compaction::run::Runs;
use crate::error::{Error, Result};
use crate::filename::FileName;
use crate::filter::global::{GlobalFilter, MergeKey, RunId, RunSet, Writer};
use crate::global_index::{level_run, table_hashes, GlobalIndex, Move, GROWTH, HEADROOM, NO_RUN};
use crate::io::replace_file;
use crate::version::{Edit, TableHandle, Version};

/// Tables whose keys are read at a time while a filter is built (in parallel).
const BUILD_BATCH: usize = 8;

/// Operations a compaction or trivial move applies to the global filter per hold of its
/// writer's lock (a flush waiting to insert waits for one such chunk at most).
const MOVE_CHUNK: usize = 1 << 16;

impl Inner {
    /// A global filter over the tables of `v`, sized for `room` times their keys and
    /// `extra` more, with fresh L0 handles carrying their run ids (for an edit's
    /// `replace`; the handles of `v` are left alone, as lookups may be using them).
    pub(super) fn build_global(
        &self,
        v: &Version,
        extra: u64,
        room: f64,
    ) -> Result<(Arc<GlobalIndex>, Vec<Arc<TableHandle>>)> {
        build_global(v, extra, room, self.global_counters.clone())
    }

    /// Inserts a flushed table's key hashes under a new L0 run id, which `t` takes (before
    /// `t` is published).
    pub(super) fn global_flush(&self, g: &GlobalIndex, t: &TableHandle, hashes: &[u64]) {
        let mut w = g.filter.writer();
        // Past 26 L0 tables two tables share an id: a lookup naming it reads both.
        let run = l0_id(&mut w);
        t.set_run(run);
        w.insert_batch(&mut hashes.to_vec(), run);
    }

    /// Grows the global filter (a new, larger one built from the tables) when a flush's
    /// `more` entries would overfill it. Call it without the global lock. It waits for a
    /// compaction's change window (`global_change`), not for the compaction: a compaction
    /// that merges meanwhile applies its changes to the filter in use when its window
    /// opens, which holds its inputs' entries under the same run ids (L0 tables keep
    /// theirs). (Compactions and trivial moves relabel entries and remove others, so they
    /// never need room.)
    pub(super) fn grow_global(&self, more: u64) -> Result<()> {
        if !self.current().global().is_some_and(|g| g.full_after(more)) {
            return Ok(());
        }
        let _m = self.lock_global_change();
        let _g = self.lock_global();
        let v = self.current();
        if !v.global().is_some_and(|g| g.full_after(more)) {
            return Ok(());
        }
        let (g, fresh) = self.build_global(&v, more, GROWTH)?;
        self.install(Install {
            edit: Edit {
                replace: fresh,
                ..Edit::default()
            },
            global: Some(Some(g)),
            ..Install::default()
        })?;
        Ok(())
    }

    /// The run ids of a merge's sources (`tables[i]` the tables of source i, from level
    /// `levels[i]`) and of its output level, when `v` has a global filter.
    pub(super) fn global_runs(
        &self,
        v: &Version,
        sources: &[(usize, &Arc<TableHandle>)],
        output: usize,
    ) -> Result<Option<Runs>> {
        if v.global().is_none() {
            return Ok(None);
        }
        let run_of = |l: usize, t: &TableHandle| -> Result<RunId> {
            let r = if l == 0 { t.run() } else { level_run(l) };
            r.ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "table {} of level {l} has no run in the global filter",
                    t.record.number
                ))
            })
        };
        let output = level_run(output)
            .ok_or_else(|| Error::InvalidArgument(format!("no run id for level {output}")))?;
        let mut runs = Vec::with_capacity(sources.len());
        for &(l, t) in sources {
            runs.push(run_of(l, t)?);
        }
        Ok(Some(Runs {
            sources: runs,
            output,
        }))
    }

    /// A compaction's changes to the global filter `g`, around `publish` (which installs
    /// its tables): its `keys` are applied ([`Writer::merge_batch`]: relabelled to the
    /// output, or removed) under a [`Move`] announcement, the tables published, and the L0
    /// ids `l0` of the consumed tables given back. If `publish` fails, the entries are put
    /// back as they were. See [`GlobalIndex::begin_move`] for why no lookup misses a key
    /// meanwhile.
    pub(super) fn global_merge(
        &self,
        runs: &Runs,
        keys: &mut [MergeKey],
        l0: &[RunId],
        publish: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let sources = runs
            .sources
            .iter()
            .fold(RunSet::EMPTY, |s, &r| s.with(r))
            .without(runs.output);
        self.global_change(
            Move {
                sources,
                output: runs.output,
            },
            |w, chunk| {
                w.merge_batch(chunk);
            },
            |w, chunk| {
                w.unmerge_batch(chunk);
            },
            keys,
            l0,
            publish,
        )
    }

    /// A trivial move of `t` from level `from` to `to` in the global filter, around
    /// `publish`: its keys are read and their entries relabelled from `from`'s run to
    /// `to`'s (as [`global_merge`](Self::global_merge) does).
    pub(super) fn global_move(
        &self,
        t: &TableHandle,
        from: usize,
        to: usize,
        publish: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let from_run = if from == 0 { t.run() } else { level_run(from) };
        let (Some(from_run), Some(to_run)) = (from_run, level_run(to)) else {
            return Err(Error::InvalidArgument(format!(
                "table {} moves from level {from} to {to} without run ids",
                t.record.number
            )));
        };
        let mut hashes = table_hashes(&t.table)?;
        let l0: &[RunId] = if from == 0 { &[from_run] } else { &[] };
        self.global_change(
            Move {
                sources: RunSet::of(from_run),
                output: to_run,
            },
            |w, chunk| {
                w.relabel_batch(chunk, from_run, to_run);
            },
            |w, chunk| {
                w.relabel_batch(chunk, to_run, from_run);
            },
            &mut hashes,
            l0,
            publish,
        )
    }

    /// Applies `apply` to `items` in the global filter in use, in chunks of [`MOVE_CHUNK`]
    /// (the writer's lock is let go between chunks, so a flush's insert waits for one chunk
    /// at most), publishes, and gives back the L0 ids `l0`; on failure it applies `undo`
    /// the same way instead. The [`Move`] is announced throughout, and the removal count
    /// bumped before it is withdrawn. No filter is grown meanwhile (`global_change`).
    fn global_change<T>(
        &self,
        m: Move,
        apply: impl Fn(&mut Writer<'_>, &mut [T]),
        undo: impl Fn(&mut Writer<'_>, &mut [T]),
        items: &mut [T],
        l0: &[RunId],
        publish: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let _m = self.lock_global_change();
        let Some(g) = self.current().global().cloned() else {
            return publish();
        };
        g.begin_move(m);
        for chunk in items.chunks_mut(MOVE_CHUNK) {
            apply(&mut g.filter.writer(), chunk);
        }
        let published = publish();
        if published.is_err() {
            for chunk in items.chunks_mut(MOVE_CHUNK) {
                undo(&mut g.filter.writer(), chunk);
            }
        }
        // A lookup that read a relabelled entry and then no announcement looks again.
        self.global_removals.fetch_add(1, SeqCst);
        g.end_move();
        published?;
        self.release_l0(&g, l0);
        Ok(())
    }

    /// Gives back the L0 run ids `l0` that no live table uses any more.
    fn release_l0(&self, g: &GlobalIndex, l0: &[RunId]) {
        let v = self.current();
        let live: Vec<RunId> = v.levels()[0]
            .tables()
            .iter()
            .filter_map(|t| t.run())
            .collect();
        let mut w = g.filter.writer();
        for &r in l0 {
            if !live.contains(&r) {
                // Refused while entries remain (an id shared with a table still live).
                let _ = w.drop_l0_run(r);
            }
        }
    }
}

/// A free L0 id, or (all 26 in use) the newest one in use: two tables then share it.
fn l0_id(w: &mut Writer<'_>) -> RunId {
    w.new_l0_run()
        .or_else(|| w.l0_runs().first().copied())
        .or_else(|| RunId::from_index(crate::filter::global::LEVELS as usize))
        .expect("id 6 is an L0 id")
}

/// See [`Inner::build_global`].
fn build_global(
    v: &Version,
    extra: u64,
    room: f64,
    counters: Arc<crate::counters::Sharded<8>>,
) -> Result<(Arc<GlobalIndex>, Vec<Arc<TableHandle>>)> {
    use rayon::prelude::*;
    let keys: u64 = v.tables().map(|t| t.table.meta.entries).sum();
    let g = GlobalIndex::new(((keys + extra) as f64 * room) as u64, counters)?;
    let mut fresh = Vec::new();
    // L0 oldest first, so the newest table takes the newest id.
    let mut jobs: Vec<(Arc<TableHandle>, Option<RunId>)> = Vec::new();
    {
        let mut w = g.filter.writer();
        for t in v.levels()[0].tables().iter().rev() {
            // A table keeps its id (a compaction under way knows the tables by it).
            let run = match t.run() {
                Some(r) => {
                    w.adopt_l0_run(r)?;
                    r
                }
                None => l0_id(&mut w),
            };
            let h = Arc::new(t.with_run(run));
            fresh.push(h.clone());
            jobs.push((h, Some(run)));
        }
    }
    for (l, level) in v.levels().iter().enumerate().skip(1) {
        for t in level.tables() {
            jobs.push((t.clone(), level_run(l)));
        }
    }
    for batch in jobs.chunks(BUILD_BATCH) {
        let hashes: Vec<Result<Vec<u64>>> = batch
            .par_iter()
            .map(|(t, _)| table_hashes(&t.table))
            .collect();
        let mut w = g.filter.writer();
        for ((_, run), h) in batch.iter().zip(hashes) {
            let Some(run) = run else { continue };
            w.insert_batch(&mut h?, *run);
        }
    }
    Ok((Arc::new(g), fresh))
}

/// The global filter a store opens with, over the tables of `v`: its checkpoint
/// (`GLOBALFILTER`) when that was written for exactly these tables, else one built from
/// the tables' keys ([`Inner::build_global`]). Returns `v` with it, its L0 handles replaced
/// by ones that carry their run ids.
pub(super) fn open_global(
    dir: &Path,
    v: Version,
    counters: Arc<crate::counters::Sharded<8>>,
) -> Result<Version> {
    if let Some(opened) = load_checkpoint(dir, &v, counters.clone()) {
        return Ok(opened);
    }
    let (g, fresh) = build_global(&v, 0, HEADROOM, counters)?;
    Ok(v.apply(&Edit {
        replace: fresh,
        ..Edit::default()
    })
    .with_global(Some(g)))
}

/// A digest of the table set a global filter answers for: every table's level, number and
/// run id, in lookup order. Table numbers are never reused, so equal digests mean the same
/// tables, and so the same entries.
fn table_set_tag(v: &Version) -> u64 {
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

/// The checkpoint in `dir`, if there is one that decodes and was written for the tables of
/// `v` (a missing, damaged or stale one is not an error: the filter is built instead).
fn load_checkpoint(
    dir: &Path,
    v: &Version,
    counters: Arc<crate::counters::Sharded<8>>,
) -> Option<Version> {
    let bytes = std::fs::read(FileName::GlobalFilter.path(dir)).ok()?;
    let (filter, tag) = GlobalFilter::decode(&bytes).ok()?;
    drop(bytes);
    // L0 ids newest first, as the tables.
    let runs = filter.writer().l0_runs().to_vec();
    let l0 = v.levels()[0].tables();
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
    let g = GlobalIndex::from_filter(filter, counters);
    Some(next.with_global(Some(Arc::new(g))))
}

impl Inner {
    /// Writes the global filter's checkpoint (`GLOBALFILTER`, replaced atomically), tagged
    /// with the table set it answers for. Called at close, when no flush or compaction runs.
    pub(super) fn save_global(&self) -> Result<()> {
        let v = self.current();
        let Some(g) = v.global() else {
            return Ok(());
        };
        let bytes = g.filter.encode(table_set_tag(&v));
        replace_file(
            &*self.fs,
            &self.dir,
            FileName::GlobalFilterTmp,
            FileName::GlobalFilter,
            &bytes,
        )
    }
}

impl super::Store {
    /// Checks that the global filter agrees with the tables: every key of every table is
    /// found under its run (the table's L0 id, or its level's). `Ok(None)` when lookups do
    /// not go through a global filter, else `Ok(Some(keys checked))`; an error names the
    /// first table with a key the filter does not find. Reads every table.
    pub fn check_global_filter(&self) -> Result<Option<u64>> {
        let v = self.inner.current();
        let Some(g) = v.global() else {
            return Ok(None);
        };
        let mut checked = 0;
        for (l, level) in v.levels().iter().enumerate() {
            for t in level.tables() {
                let run = if l == 0 { t.run() } else { level_run(l) };
                let missing = match run {
                    Some(run) => table_hashes(&t.table)?
                        .into_iter()
                        .filter(|&h| !g.filter.query(h).contains(run))
                        .count(),
                    None => t.record.entries as usize,
                };
                if missing > 0 {
                    return Err(Error::corrupt(
                        0,
                        format!(
                            "the global filter lacks {missing} keys of table {} (level {l})",
                            t.record.number
                        ),
                    ));
                }
                checked += t.record.entries;
            }
        }
        Ok(Some(checked))
    }
}
