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
//! removal count `Tree::global_removals` is bumped before the announcement is withdrawn, and
//! a lookup that sees the count change takes the table set again (`read.rs`): rare, only
//! lookups that straddle a publish. A change that fails to publish puts its entries back.
//! Switching to the filter builds it from the tables with flushes and compactions held off,
//! and publishes it with the table set. Growing it does not hold them off: the growth
//! thread builds a larger one from a table set while the filter in use logs the changes
//! made to it, replays them, and swaps it in ([`Inner::finish_growth`]).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use super::Inner;
use crate::compaction::run::Runs;
use crate::counters::Sharded;
use crate::error::{Error, Result};
use crate::filter::global::{MergeKey, RunId, RunSet, Writer};
use crate::global_index::{level_run, Change, GlobalIndex, Move, GROWTH, HEADROOM};
use crate::version::{TableHandle, Version, VersionEdit};

mod drop;
mod runs;

/// Tables whose keys are read at a time while a filter is built (in parallel).
const BUILD_BATCH: usize = 8;

/// Operations a compaction or trivial move applies to the global filter per hold of its
/// writer's lock (a flush waiting to insert waits for one such chunk at most).
const MOVE_CHUNK: usize = 1 << 16;

/// A growth replays the changes made meanwhile in at most this many rounds off the locks
/// before the last one under them ...
const CATCH_UP_ROUNDS: usize = 4;
/// ... and stops early once a round had fewer keys than this (the last round, under the
/// locks, then holds flushes and compactions for about as many bucket writes).
const CATCH_UP_KEYS: usize = 1 << 16;

impl Inner {
    /// A global filter over the tables of `v`, sized for [`HEADROOM`] times their keys and
    /// `extra` more, with fresh L0 handles carrying their run ids (for an edit's `replace`;
    /// the handles of `v` are left alone, as lookups may be using them).
    pub(super) fn build_global(
        &self,
        v: &Version,
        extra: u64,
    ) -> Result<(Arc<GlobalIndex>, Vec<Arc<TableHandle>>)> {
        build_global(
            &self.dir,
            v,
            &|keys| headroom_capacity(keys, extra),
            self.tree.global_counters.clone(),
            &AtomicBool::new(false),
            true,
        )
    }

    /// Inserts a flushed table's key hashes under a new L0 run id, which the table takes
    /// (before it is published).
    pub(super) fn global_insert(&self, g: &GlobalIndex, hashes: &[u64]) -> RunId {
        let mut w = g.filter.writer();
        // Past 26 L0 tables two tables share an id: a lookup naming it reads both.
        let run = l0_id(&mut w);
        let mut hashes = hashes.to_vec();
        w.insert_batch(&mut hashes, run);
        g.record(|| Change::Insert(hashes, run));
        run
    }

    /// Takes back [`global_insert`](Self::global_insert)'s entries when the table could
    /// not be written.
    pub(super) fn global_uninsert(&self, g: &GlobalIndex, run: RunId, hashes: &[u64]) {
        let mut w = g.filter.writer();
        let mut hashes = hashes.to_vec();
        w.remove_batch(&mut hashes, run);
        // Refused while entries remain (an id shared with a live table).
        let _ = w.drop_l0_run(run);
        g.record(|| Change::Remove(hashes, run));
    }

    /// Makes room in the global filter for a flush's `more` entries. Past
    /// [`GROW_AT`](crate::global_index::GROW_AT) of its capacity it asks the growth thread
    /// for a larger one ([`Inner::grow`], built off the locks while the store goes on); a
    /// flush that would overfill it waits for that growth, and builds one itself only if
    /// none could run. Call it without the global locks.
    pub(super) fn grow_global(&self, more: u64) -> Result<()> {
        let Some(g) = self.current().global().cloned() else {
            return Ok(());
        };
        if g.wants_growth(more) {
            self.want_growth(more);
        }
        if !g.full_after(more) {
            return Ok(());
        }
        self.wait_for_growth();
        let _m = self.lock_global_change();
        let _g = self.lock_global();
        let v = self.current();
        let Some(g) = v.global().filter(|g| g.full_after(more)) else {
            return Ok(());
        };
        let stop = AtomicBool::new(false);
        let (g, fresh) = build_global(
            &self.dir,
            &v,
            &|keys| grown_capacity(g, keys, more),
            self.tree.global_counters.clone(),
            &stop,
            true,
        )?;
        self.log_and_apply(VersionEdit::replacing(fresh).with_global(Some(g)))?;
        Ok(())
    }

    /// Asks the growth thread for a larger filter for this tree (`more`: the entries a
    /// flush is about to add), unless it is building one.
    fn want_growth(&self, more: u64) {
        let slot = self.tree.slot;
        let mut bg = self.lock_bg();
        if bg.growing != Some(slot) {
            let wanted = bg.grow_wanted.entry(slot).or_insert(0);
            *wanted = (*wanted).max(more);
            self.bg_cv.notify_all();
        }
    }

    /// Waits until the growth thread has no growth of this tree's filter asked for or under
    /// way (or the store shuts down or failed).
    fn wait_for_growth(&self) {
        let slot = self.tree.slot;
        let mut bg = self.lock_bg();
        while (bg.grow_wanted.contains_key(&slot) || bg.growing == Some(slot))
            && bg.error.is_none()
            && !self.shutdown.load(SeqCst)
        {
            bg = self.bg_cv.wait(bg).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Grows the global filter without stopping the store (the growth thread runs it when a
    /// flush asked, with `more` the entries that flush was about to add): see
    /// [`begin_growth`](Self::begin_growth) and [`finish_growth`](Self::finish_growth).
    pub(super) fn grow(&self, more: u64) -> Result<()> {
        match self.begin_growth(more) {
            Some(growth) => self.finish_growth(growth),
            None => Ok(()),
        }
    }

    /// Starts a growth if the filter in use wants one: under the global locks (no flush is
    /// between its insert and its publish, no compaction in its change window, so the filter
    /// holds exactly the entries of the table set), takes that table set and starts the
    /// filter's change log. `None` when no growth is due (or an L0 table has no run id: the
    /// flush then grows the filter itself).
    pub(super) fn begin_growth(&self, more: u64) -> Option<Growth> {
        let _m = self.lock_global_change();
        let _g = self.lock_global();
        let v = self.current();
        let g = v
            .global()
            .filter(|g| g.wants_growth(more) || g.wants_shrink())?
            .clone();
        if g.logging() {
            // Another growth is under way (one started by hand, in tests).
            return None;
        }
        if v.levels()[0]
            .tables()
            .iter()
            .any(|t| !t.own_filter() && t.run().is_none())
        {
            return None;
        }
        g.start_log();
        Some(Growth {
            old: g,
            tables: v,
            more,
        })
    }

    /// Builds the larger filter of `growth` from its tables' keys off the locks (tables in
    /// parallel, on the background pool), replays the changes the filter in use took
    /// meanwhile (in rounds while they keep coming, the last one under the global locks),
    /// and swaps it in with the L0 ids of the filter it replaces. The filter in use keeps
    /// every entry until the swap, and the new one has them all from it on: a lookup never
    /// misses a key, and a crash meanwhile leaves the tables, which are the truth, as
    /// they were. Abandoned (no error) when the store shuts down or the filter in use was
    /// replaced meanwhile (a refilter).
    pub(super) fn finish_growth(&self, growth: Growth) -> Result<()> {
        let Growth { old, tables, more } = growth;
        // The log stops however this ends.
        struct StopLog<'a>(&'a GlobalIndex);
        impl Drop for StopLog<'_> {
            fn drop(&mut self) {
                self.0.stop_log();
            }
        }
        let _stop = StopLog(&old);
        let counters = self.tree.global_counters.clone();
        // On this thread, at its lowered priority, one table at a time: the background
        // pool's threads stay free for compactions, and flushes keep the global pool.
        let (new, _) = build_global(
            &self.dir,
            &tables,
            &|keys| grown_capacity(&old, keys, more),
            counters,
            &self.shutdown,
            false,
        )?;
        drop(tables);
        if self.shutdown.load(SeqCst) {
            return Ok(());
        }
        for _ in 0..CATCH_UP_ROUNDS {
            let changes = old.take_log();
            let keys: usize = changes.iter().map(Change::len).sum();
            replay(&new, changes);
            if keys < CATCH_UP_KEYS {
                break;
            }
        }
        let _m = self.lock_global_change();
        let _g = self.lock_global();
        if !self
            .current()
            .global()
            .is_some_and(|g| Arc::ptr_eq(g, &old))
        {
            return Ok(());
        }
        replay(&new, old.take_log());
        new.filter
            .writer()
            .set_l0_runs(old.filter.writer().l0_runs())?;
        crate::global_index::count_growth(&self.tree.global_counters);
        self.log_and_apply(VersionEdit::default().with_global(Some(new)))?;
        Ok(())
    }

    /// A compaction's changes to the global filter `g`, around `publish` (which publishes
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
            .flatten()
            .fold(RunSet::EMPTY, |s, &r| s.with(r));
        let sources = match runs.output {
            Some(o) => sources.without(o),
            None => sources,
        };
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
            |chunk, undo| {
                if undo {
                    Change::Unmerge(chunk.to_vec())
                } else {
                    Change::Merge(chunk.to_vec())
                }
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
        if t.own_filter() {
            // Its keys are not in the global filter: its own filter moves with it.
            return publish();
        }
        let from_run = if from == 0 { t.run() } else { level_run(from) };
        let (Some(from_run), Some(to_run)) = (from_run, level_run(to)) else {
            return Err(Error::InvalidArgument(format!(
                "table {} moves from level {from} to {to} without run ids",
                t.record.number
            )));
        };
        let mut hashes = handle_hashes(t, &self.tree.global_counters)?;
        let l0: &[RunId] = if from == 0 { &[from_run] } else { &[] };
        self.global_change(
            Move {
                sources: RunSet::of(from_run),
                output: Some(to_run),
            },
            |w, chunk| {
                w.relabel_batch(chunk, from_run, to_run);
            },
            |w, chunk| {
                w.relabel_batch(chunk, to_run, from_run);
            },
            |chunk, undo| {
                let (from, to) = if undo {
                    (to_run, from_run)
                } else {
                    (from_run, to_run)
                };
                Change::Relabel(chunk.to_vec(), from, to)
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
    /// bumped before it is withdrawn. No filter is swapped meanwhile (`global_change`); a
    /// filter being grown gets each chunk's change from `record` (with `true` for an undo).
    #[allow(clippy::too_many_arguments)]
    fn global_change<T>(
        &self,
        m: Move,
        apply: impl Fn(&mut Writer<'_>, &mut [T]),
        undo: impl Fn(&mut Writer<'_>, &mut [T]),
        record: impl Fn(&[T], bool) -> Change,
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
            let mut w = g.filter.writer();
            apply(&mut w, chunk);
            g.record(|| record(chunk, false));
        }
        let published = publish();
        if published.is_err() {
            for chunk in items.chunks_mut(MOVE_CHUNK) {
                let mut w = g.filter.writer();
                undo(&mut w, chunk);
                g.record(|| record(chunk, true));
            }
        }
        // A lookup that read a relabelled entry and then no announcement looks again.
        self.tree.global_removals.fetch_add(1, SeqCst);
        g.end_move();
        published?;
        self.release_l0(&g, l0);
        if g.wants_shrink() {
            // Its keys went down into levels with filters of their own: a smaller one.
            self.want_growth(0);
        }
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

/// The key hashes of table `t`, from its key hashes file when it has one
/// ([`crate::global_index::handle_hashes`]).
fn handle_hashes(t: &TableHandle, counters: &Sharded<8>) -> Result<Vec<u64>> {
    let file = t.files.hashes.as_deref().map(|f| f.path());
    crate::global_index::handle_hashes(&t.table, file, counters)
}

/// The key hashes table `t` holds, counted ([`crate::global_index::handle_count`]).
fn handle_count(t: &TableHandle, counters: &Sharded<8>) -> Result<u64> {
    let file = t.files.hashes.as_deref().map(|f| f.path());
    crate::global_index::handle_count(&t.table, file, counters)
}

/// A free L0 id, or (all 26 in use) the newest one in use: two tables then share it.
fn l0_id(w: &mut Writer<'_>) -> RunId {
    w.new_l0_run()
        .or_else(|| w.l0_runs().first().copied())
        .or_else(|| RunId::from_index(crate::filter::global::LEVELS as usize))
        .expect("id 6 is an L0 id")
}

/// A global filter over the tables of `v`, sized for `size(keys)` entries where `keys` are
/// the key hashes the tables hold, counted, with fresh L0 handles carrying their run ids
/// (for an edit's `replace`; the handles of `v` are left alone, as lookups may be using
/// them). Each table's hashes come from its key hashes file (its data blocks are not read),
/// or, for a table without one, from its keys ([`handle_hashes`]). Tables are read
/// [`BUILD_BATCH`] at a time in parallel on the rayon pool the caller runs in, or one by one
/// on the calling thread when not `parallel`. Stops early, with the filter unfinished, when
/// `stop` is set.
///
/// Nothing is sized by a count a table claims: the hashes are counted first (a key hashes
/// file's length, checked against its header; a table without one, by reading its keys),
/// and a count that disagrees with the table's meta is an error naming the file, found
/// before the filter is made. A filter the allocator cannot give is an error naming the
/// store (`dir`).
pub(super) fn build_global(
    dir: &Path,
    v: &Version,
    size: &dyn Fn(u64) -> u64,
    counters: Arc<crate::counters::Sharded<8>>,
    stop: &AtomicBool,
    parallel: bool,
) -> Result<(Arc<GlobalIndex>, Vec<Arc<TableHandle>>)> {
    use rayon::prelude::*;
    // L0 oldest first, so the newest table takes the newest id; then the levels. Tables
    // with filters of their own (the deepest level's) are not in the filter.
    let l0: Vec<&Arc<TableHandle>> = v.levels()[0]
        .tables()
        .iter()
        .rev()
        .filter(|t| !t.own_filter())
        .collect();
    let deeper: Vec<(&Arc<TableHandle>, Option<RunId>)> = v
        .levels()
        .iter()
        .enumerate()
        .skip(1)
        .flat_map(|(l, level)| level.tables().iter().map(move |t| (t, level_run(l))))
        .filter(|(t, _)| !t.own_filter())
        .collect();
    let count = |t: &&Arc<TableHandle>| handle_count(t, &counters);
    let all: Vec<&Arc<TableHandle>> = l0
        .iter()
        .copied()
        .chain(deeper.iter().map(|j| j.0))
        .collect();
    let counts: Vec<Result<u64>> = if parallel {
        all.par_iter().map(count).collect()
    } else {
        all.iter().map(count).collect()
    };
    let mut keys = 0u64;
    for c in counts {
        keys = keys.saturating_add(c?);
    }
    let capacity = size(keys);
    let g = GlobalIndex::new(capacity, counters.clone()).map_err(|e| match e {
        Error::OutOfMemory { bytes, .. } => Error::OutOfMemory {
            what: format!(
                "the global filter of the store at {} (sized for {capacity} entries, \
                 {keys} of them counted in its tables)",
                dir.display()
            ),
            bytes,
        },
        e => e,
    })?;
    let mut fresh = Vec::new();
    let mut jobs: Vec<(Arc<TableHandle>, Option<RunId>)> = Vec::new();
    {
        let mut w = g.filter.writer();
        for t in l0 {
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
    jobs.extend(deeper.into_iter().map(|(t, r)| (t.clone(), r)));
    for batch in jobs.chunks(BUILD_BATCH) {
        if stop.load(SeqCst) {
            break;
        }
        let read = |(t, _): &(Arc<TableHandle>, Option<RunId>)| handle_hashes(t, &counters);
        let hashes: Vec<Result<Vec<u64>>> = if parallel {
            batch.par_iter().map(read).collect()
        } else {
            batch.iter().map(read).collect()
        };
        let mut w = g.filter.writer();
        for ((_, run), h) in batch.iter().zip(hashes) {
            let Some(run) = run else { continue };
            w.insert_batch(&mut h?, *run);
        }
    }
    Ok((Arc::new(g), fresh))
}

/// The capacity a filter is built for over tables holding `keys` key hashes (plus `extra`
/// entries) at open, a refilter or a switch: [`HEADROOM`] times their entries.
pub(super) fn headroom_capacity(keys: u64, extra: u64) -> u64 {
    (keys.saturating_add(extra) as f64 * HEADROOM) as u64
}

/// The capacity the successor of `g` (over tables holding `keys` key hashes, with `more`
/// entries about to be added) is built for: [`GROWTH`] times `g`'s, or times the entries if
/// more.
fn grown_capacity(g: &GlobalIndex, keys: u64, more: u64) -> u64 {
    let by_keys = (keys.saturating_add(more) as f64 * GROWTH) as u64;
    if g.wants_shrink() {
        // Grown for a peak the compactions have carried down: built for its entries.
        return by_keys;
    }
    by_keys.max((g.capacity as f64 * GROWTH) as u64)
}

/// Applies `changes`, in order, to `g` (a filter being built to replace the one that took
/// them).
fn replay(g: &GlobalIndex, changes: Vec<Change>) {
    for c in changes {
        c.replay(&mut g.filter.writer());
    }
}

/// A growth under way (see [`Inner::begin_growth`]).
pub(super) struct Growth {
    /// The filter in use, whose changes are logged meanwhile.
    old: Arc<GlobalIndex>,
    /// The table set whose entries `old` held when its log started.
    tables: Arc<Version>,
    /// Entries the flush that asked for the growth was about to add.
    more: u64,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use crate::filter::FilterKind;
    use crate::{Options, Store};

    fn key(i: u64) -> Vec<u8> {
        format!("k{:08}", i.wrapping_mul(0x9e37_79b9) % 100_000_000).into_bytes()
    }

    /// A growth started on one table set and finished after flushes, compactions and
    /// deletes changed it: the changes logged meanwhile are replayed into the new filter
    /// before the swap, so it holds every entry of the tables as they are (without the
    /// replay `check_global_filter` finds the new tables' keys missing).
    #[test]
    fn a_growth_replays_the_changes_made_while_it_was_built() {
        let dir = tempfile::tempdir().unwrap();
        let o = Options {
            filter: Some(FilterKind::Global),
            memtable_bytes: 64 << 10,
            compaction_trigger: Some(2),
            table_bytes: 32 << 10,
            l1_bytes: 128 << 10,
            level_ratio: 3,
            fs: Arc::new(crate::io::NoSyncFs),
            ..Options::default()
        };
        let store = Store::open(dir.path(), o).unwrap();
        let mut model = BTreeMap::new();
        for i in 0..20_000u64 {
            store.put(key(i), i.to_le_bytes()).unwrap();
            model.insert(key(i), i.to_le_bytes().to_vec());
        }
        store.flush().unwrap();
        store.wait_for_compaction().unwrap();
        let inner = &store.inner;
        // A large filter first, so that no growth of the store's own comes in between.
        let big = inner.begin_growth(1 << 20).expect("a growth starts");
        inner.finish_growth(big).unwrap();
        let first = store.stats().global_filter.unwrap().capacity;
        let growths = store.stats().global_filter.unwrap().growths;
        // Far below its capacity: only this test's growth happens.
        let growth = inner.begin_growth(first).expect("a growth starts");
        for i in 10_000..40_000u64 {
            if i % 5 == 0 {
                store.delete(key(i)).unwrap();
                model.remove(&key(i));
            } else {
                store.put(key(i), (i + 1).to_le_bytes()).unwrap();
                model.insert(key(i), (i + 1).to_le_bytes().to_vec());
            }
        }
        store.flush().unwrap();
        store.wait_for_compaction().unwrap();
        let logged = inner.current().global().unwrap().logged();
        assert!(logged > 10_000, "{logged} keys' changes logged");
        inner.finish_growth(growth).unwrap();
        let g = store.stats().global_filter.unwrap();
        assert_eq!(g.growths, growths + 1, "{g:?}");
        // Built from the tables' key hashes files: no data block read.
        assert_eq!((g.key_tables_read, g.key_blocks_read), (0, 0), "{g:?}");
        assert!(g.capacity > first, "{g:?}");
        assert!(store.check_global_filter().unwrap().is_some());
        for i in 0..40_000u64 {
            assert_eq!(
                store.get(key(i)).unwrap().map(Vec::from),
                model.get(&key(i)).cloned(),
                "{i}"
            );
        }
        // Writes go on into the new filter.
        for i in 40_000..45_000u64 {
            store.put(key(i), i.to_le_bytes()).unwrap();
        }
        store.flush().unwrap();
        store.wait_for_compaction().unwrap();
        assert!(store.check_global_filter().unwrap().is_some());
    }

    /// Tables written under another filter have no key hashes files: switching to the
    /// global filter and growing it read their data blocks (the counter the growth test
    /// above finds at 0 counts them), and the tables written after the switch have files.
    #[test]
    fn tables_without_key_hashes_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let o = Options {
            filter: Some(FilterKind::BlockedBloom),
            compaction_trigger: None,
            fs: Arc::new(crate::io::NoSyncFs),
            ..Options::default()
        };
        let store = Store::open(dir.path(), o).unwrap();
        for i in 0..5_000u64 {
            store.put(key(i), i.to_le_bytes()).unwrap();
        }
        store.flush().unwrap();
        store.refilter(FilterKind::Global, 0.01).unwrap();
        let g = store.stats().global_filter.unwrap();
        // Twice: counted, then inserted.
        assert_eq!(g.key_tables_read, 2, "{g:?}");
        assert!(g.key_blocks_read > 0, "{g:?}");
        for i in 5_000..6_000u64 {
            store.put(key(i), i.to_le_bytes()).unwrap();
        }
        store.flush().unwrap();
        let v = store.inner.current();
        let with_files = v.tables().filter(|t| t.files.hashes.is_some()).count();
        assert_eq!(with_files, 1);
        let before = store.stats().global_filter.unwrap().key_blocks_read;
        let growth = store.inner.begin_growth(1 << 30).expect("a growth starts");
        store.inner.finish_growth(growth).unwrap();
        let g = store.stats().global_filter.unwrap();
        assert_eq!(g.key_tables_read, 4, "only the old table read again: {g:?}");
        assert!(g.key_blocks_read > before, "{g:?}");
        assert!(store.check_global_filter().unwrap().is_some());
    }
}
