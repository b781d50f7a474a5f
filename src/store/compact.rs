//! The compaction driver: plans a task on the live levels ([`crate::compaction::plan`]),
//! runs it (a trivial move, or the streaming merge of [`crate::compaction::run`] on the
//! background pool) and publishes the result ([`Inner::log_and_apply`]), one task at a time under
//! the compaction lock. The compaction thread (`worker.rs`) calls [`Inner::compact_once`]
//! until nothing is due; [`Store::compact`] runs a full compaction, the idle drain an
//! early L0 → L1 one.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::worker::{in_background, Drain};
use super::{Inner, Store};
use crate::compaction::expire::{plan_expired, plan_full_at};
use crate::compaction::plan::{plan, plan_l0_drain, tombstone_droppable, Task};
use crate::compaction::run::{merge, Output, Runs, Source};
use crate::error::Result;
use crate::filter::FilterKind;
use crate::table::files::TableSpec;
use crate::table::TableCounters;
use crate::tombstone::compact::{range_droppable, RangeInput};
use crate::tombstone::RangeTombstone;
use crate::version::{TableHandle, Version, VersionEdit};

impl Inner {
    /// Merges L0 into L1 whatever L0's size (the idle and scan drains); `false` when L0 was
    /// empty.
    pub(super) fn drain_l0(&self, why: Drain) -> Result<bool> {
        let _c = self.lock_compaction();
        let v = self.current();
        let Some(task) = plan_l0_drain(&v.level_slices(), &self.opts.shape()) else {
            return Ok(false);
        };
        in_background(|| self.run_task(&v, task))?;
        match why {
            Drain::Idle => &self.counters.idle_drains,
            Drain::Scans => &self.counters.scan_drains,
        }
        .fetch_add(1, Relaxed);
        Ok(true)
    }

    /// Whether scans have paid for an L0 → L1 drain ([`Options::scan_drain`]): the blocks
    /// they took from the L0 tables now in place reach twice the data blocks the drain
    /// would read (those tables and the L1 tables they overlap; it writes about as many).
    /// Reads the table set only.
    ///
    /// [`Options::scan_drain`]: super::Options::scan_drain
    pub(super) fn scan_drain_due(&self) -> bool {
        if !self.opts.scan_drain || self.opts.compaction_trigger.is_none() {
            return false;
        }
        let v = self.current();
        let levels = v.level_slices();
        let l0 = levels.first().copied().unwrap_or_default();
        let rent: u64 = l0.iter().map(|t| t.counters.scan_l0_blocks()).sum();
        if rent == 0 {
            return false;
        }
        let inputs = match plan_l0_drain(&levels, &self.opts.shape()) {
            Some(Task::Merge { inputs, .. }) => inputs,
            // One L0 table over empty levels below: a move would change no scan's reads.
            Some(Task::Move { .. }) if levels[1..].iter().all(|l| l.is_empty()) => return false,
            Some(Task::Move { table, .. }) => vec![table],
            None => return false,
        };
        let price: u64 = levels
            .iter()
            .take(2)
            .flat_map(|l| l.iter())
            .filter(|t| inputs.contains(&t.record.number))
            .map(|t| t.table.block_count() as u64)
            .sum();
        rent >= 2 * price
    }
}

impl Inner {
    /// Runs the L0 merge if it is the compaction due (at most `Shape::l0_merge_bytes` of
    /// input; see `plan_l0_merge`), and nothing else: what a closing store does after its
    /// background threads stopped, so that the next open starts with one L0 table instead
    /// of half the trigger's. `Ok(false)`: none was due.
    pub(super) fn merge_l0_at_close(&self) -> Result<bool> {
        let _c = self.lock_compaction();
        let v = self.current();
        let cursors = self.lock_versions().cursors.clone();
        match plan(&v.level_slices(), &cursors, &self.opts.shape()) {
            Some(task @ Task::Merge { output: 0, .. }) => {
                in_background(|| self.run_task(&v, task))?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

impl Store {
    /// Merges every table into one sorted run (dropping overwritten values and
    /// tombstones) through the same streaming merge as background compaction, waiting for a
    /// background compaction in progress first. Readers are never blocked. The memtable is
    /// not flushed (call [`Store::flush`] first for that).
    pub fn compact(&self) -> Result<()> {
        let inner = &self.inner;
        inner.check_writable()?;
        let _c = inner.lock_compaction();
        inner.poison_on_err(inner.drop_covered(&inner.current()))?;
        let v = inner.current();
        let now = inner.opts.clock.now_millis();
        let force = inner.opts.compaction_filter.is_some();
        let Some(task) = plan_full_at(&v.level_slices(), &inner.opts.shape(), now, force) else {
            return Ok(());
        };
        let r = in_background(|| inner.run_task(&v, task));
        inner.poison_on_err(r)?;
        drop(_c);
        inner.want_compaction();
        Ok(())
    }

    /// Runs compactions in this thread until the planner finds none due (with automatic
    /// compaction off, none ever is): the levels are then in shape. For a bulk load that
    /// wants its store settled before it returns.
    pub fn wait_for_compaction(&self) -> Result<()> {
        let inner = &self.inner;
        loop {
            inner.check_writable()?;
            match inner.compact_once() {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(e) => {
                    inner.poison(&e);
                    return Err(e);
                }
            }
        }
    }
}

impl Inner {
    /// Removes the tables of `v` that range tombstones of newer tables cover whole
    /// ([`Version::covered_tables`]) through one edit, without reading them; the caller
    /// holds the compaction lock. Under the global filter the tables' keys leave the
    /// filter too, by their key hashes ([`Inner::global_drop`]). `Ok(false)`: none.
    pub(super) fn drop_covered(&self, v: &Version) -> Result<bool> {
        let covered = v.covered_tables();
        if covered.is_empty() {
            return Ok(false);
        }
        let numbers: Vec<u64> = covered.iter().map(|t| t.0).collect();
        let edit = VersionEdit {
            tables: crate::compaction::plan::Edit {
                remove: numbers.clone(),
                ..Default::default()
            },
            ..VersionEdit::default()
        };
        self.global_drop(v, &numbers, || self.log_and_apply(edit).map(drop))?;
        let n = covered.len() as u64;
        self.counters.tables_dropped_whole.fetch_add(n, Relaxed);
        Ok(true)
    }

    /// Plans and runs one compaction if one is due. `Ok(false)`: none is.
    pub(super) fn compact_once(&self) -> Result<bool> {
        let _c = self.lock_compaction();
        if self.opts.compaction_trigger.is_some() && self.drop_covered(&self.current())? {
            return Ok(true);
        }
        let v = self.current();
        let cursors = self.lock_versions().cursors.clone();
        let levels = v.level_slices();
        let task = plan(&levels, &cursors, &self.opts.shape()).or_else(|| {
            // Only with automatic compaction on, as every other compaction.
            self.opts.compaction_trigger?;
            plan_expired(&levels, self.opts.clock.now_millis())
        });
        let Some(task) = task else {
            return Ok(false);
        };
        drop(levels);
        in_background(|| self.run_task(&v, task))?;
        Ok(true)
    }

    /// Runs `task`, planned on `v` (which the caller keeps live by holding the compaction
    /// lock: only flushes, which add L0 tables in front, change the set meanwhile), and
    /// installs its result ([`Task::edit`]).
    pub(super) fn run_task(&self, v: &Version, task: Task) -> Result<()> {
        match &task {
            Task::Move { table, from, .. } => {
                let Some(t) = v.levels()[*from]
                    .tables()
                    .iter()
                    .find(|t| t.record.number == *table)
                else {
                    // Not possible under the compaction lock; if it were, replanning is right.
                    return Ok(());
                };
                let moved = Arc::new(t.at_level(task.output_level() as u32));
                let edit = VersionEdit {
                    tables: task.edit(vec![moved]),
                    cursor: task.cursor(),
                    ..VersionEdit::default()
                };
                let publish = || self.log_and_apply(edit).map(drop);
                match v.global() {
                    Some(_) => self.global_move(t, *from, task.output_level(), publish)?,
                    None => publish()?,
                }
                self.counters.trivial_moves.fetch_add(1, Relaxed);
                Ok(())
            }
            Task::Merge { inputs, output, .. } => self.run_merge(v, &task, inputs, *output),
        }
    }

    /// Merges the tables `inputs` of `v` into new tables at level `output` and publishes
    /// them in their place (`task`'s edit); the inputs' files are removed once the manifest
    /// that no longer names them is durable and no version holds them (`version/set.rs`).
    fn run_merge(&self, v: &Version, task: &Task, inputs: &[u64], output: usize) -> Result<()> {
        let scratch = Arc::new(TableCounters::default());
        let levels = v.level_slices();
        let mut sources = Vec::new();
        // Each source's level and first table (for the global filter's run ids).
        let mut source_runs: Vec<(usize, &Arc<TableHandle>)> = Vec::new();
        // Each source's range tombstones.
        let mut source_tombs: Vec<Vec<&RangeTombstone>> = Vec::new();
        fn tombs<'a>(ts: &[&'a Arc<TableHandle>]) -> Vec<&'a RangeTombstone> {
            ts.iter()
                .filter_map(|t| t.tombstones.as_deref())
                .flatten()
                .collect()
        }
        let mut input_bytes = 0;
        let mut tagged = false;
        for (l, level) in levels.iter().enumerate() {
            let picked: Vec<&Arc<TableHandle>> = level
                .iter()
                .filter(|t| inputs.contains(&t.record.number))
                .collect();
            for t in &picked {
                input_bytes += t.record.file_bytes;
                tagged |= t.table.meta.expiring > 0;
            }
            let tables: Vec<_> = picked.iter().map(|t| t.table.clone()).collect();
            if l == 0 {
                // Each L0 table is a source of its own, newest first.
                for (t, h) in tables.into_iter().zip(&picked) {
                    sources.push(Source::new(vec![t], scratch.clone())?);
                    source_runs.push((0, h));
                    source_tombs.push(tombs(&[*h]));
                }
            } else if v.global().is_some() {
                // Under the global filter a level's tables with filters of their own (not in
                // the global filter) and those without are sources apart, so that each
                // source's keys are where its run says (the tables are disjoint: splitting
                // the level changes no answer).
                for group in picked.chunk_by(|a, b| a.own_filter() == b.own_filter()) {
                    let tables = group.iter().map(|t| t.table.clone()).collect();
                    sources.push(Source::new(tables, scratch.clone())?);
                    source_runs.push((l, group[0]));
                    source_tombs.push(tombs(group));
                }
            } else if !tables.is_empty() {
                sources.push(Source::new(tables, scratch.clone())?);
                source_runs.push((l, picked[0]));
                source_tombs.push(tombs(&picked));
            }
        }
        let input_keys = levels
            .iter()
            .flat_map(|l| l.iter())
            .filter(|t| inputs.contains(&t.record.number))
            .map(|t| t.record.entries)
            .sum();
        let filter = self.filter_for(v, inputs, output, input_keys);
        let drop_tombstone = |k: &[u8]| tombstone_droppable(&levels, output, k);
        let alloc = || self.alloc_file();
        let out = Output {
            spec: TableSpec {
                fs: &self.fs,
                dir: &self.dir,
                level: output as u32,
                filter,
                compression: self.opts.compression,
                range_bits: self.range_bits_at(v, output),
                range_clock: Some(&self.tree.range_counters.1),
                alloc: &alloc,
                key_hashes: v.global().is_some(),
            },
            // An L0 merge writes one table (at most `Shape::l0_merge_bytes` of input): cut
            // into several it could leave L0 as many tables as before.
            table_bytes: if output == 0 {
                u64::MAX
            } else {
                self.opts.table_bytes
            },
            expiry: crate::compaction::expire::Rewrite {
                now: self.opts.clock.now_millis(),
                filter: self.opts.compaction_filter.as_deref(),
                level: output,
                tagged,
            },
            ranges: RangeInput::new(&source_tombs, |t| range_droppable(&levels, output, t)),
        };
        // Under the global filter, an output with a filter of its own (the deepest
        // level's: `filter_for`) is not in the global filter.
        let own = v.global().is_some() && filter.0 != FilterKind::None;
        let runs = self.global_runs(v, &source_runs, output, own)?;
        let mut result = merge(sources, &drop_tombstone, &out, runs.as_ref())?;
        let mut add = Vec::with_capacity(result.tables.len());
        // A table that does not open, or an edit that is not published, takes the outputs'
        // files with it when dropped (`table/files.rs`).
        let opened: Result<()> = (|| {
            for w in result.tables.drain(..) {
                let t = TableHandle::open(
                    &self.dir,
                    w.record,
                    w.files,
                    self.opts.mmap_reads,
                    self.block_cache.as_ref(),
                )?;
                if let (
                    0,
                    Some(Runs {
                        output: Some(r), ..
                    }),
                ) = (output, &runs)
                {
                    // An L0 merge's output keeps its oldest input's id (`global_runs`).
                    t.set_run(*r);
                }
                add.push(Arc::new(t));
            }
            // A sorted level's tables stay disjoint under their bounds widened to their range
            // tombstones (`tombstone::compact` never cuts a table inside one).
            if output > 0 {
                if let Some(w) = add.windows(2).find(|w| w[0].max_key() >= w[1].min_key()) {
                    return Err(crate::Error::Internal(format!(
                        "compaction outputs {} and {} overlap",
                        w[0].record.number, w[1].record.number
                    )));
                }
            }
            Ok(())
        })();
        let edit = VersionEdit {
            tables: task.edit(add),
            cursor: task.cursor(),
            ..VersionEdit::default()
        };
        let publish = || self.log_and_apply(edit).map(drop);
        let installed = opened.and_then(|()| match &runs {
            Some(runs) => {
                let l0: Vec<_> = runs
                    .sources
                    .iter()
                    .zip(&source_runs)
                    .filter(|(_, (l, _))| *l == 0)
                    .filter_map(|(r, _)| *r)
                    .collect();
                // Keys of own-filtered sources that join a level in the global filter are
                // inserted: room for them first.
                let inserts = result
                    .moves
                    .keys
                    .iter()
                    .filter(|k| k.from.is_empty())
                    .count();
                if inserts > 0 {
                    self.grow_global(inserts as u64)?;
                }
                self.global_merge(runs, &mut result.moves.keys, &l0, publish)
            }
            _ => publish(),
        });
        installed?;
        let c = &self.counters;
        c.compactions.fetch_add(1, Relaxed);
        if output == 0 {
            c.l0_merges.fetch_add(1, Relaxed);
        }
        c.compaction_bytes.fetch_add(result.bytes_written, Relaxed);
        c.compaction_read_bytes.fetch_add(input_bytes, Relaxed);
        c.expired_entries.fetch_add(result.expired.entries, Relaxed);
        c.expired_bytes.fetch_add(result.expired.bytes, Relaxed);
        Ok(())
    }
}
