//! A whole-table drop under the global filter: the dropped tables' keys leave the filter by
//! their key hashes files (`Inner::global_drop`).

use super::{handle_hashes, MOVE_CHUNK};
use crate::error::{Error, Result};
use crate::filter::global::{RunId, RunSet};
use crate::global_index::{level_run, Change, Move};
use crate::store::Inner;
use crate::version::Version;
use std::sync::atomic::Ordering::SeqCst;

impl Inner {
    /// Drops the tables `numbers` of `v` (which range tombstones of newer tables cover
    /// whole) from the global filter around `publish`, which publishes the table set
    /// without them: their key hashes are read first (their key hashes files; a table
    /// without one, its keys), the set published, and then each table's entries removed
    /// from its run and its L0 id given back. Until the removal a dropped table's entries
    /// only cost a lookup a false positive (their run no longer holds the keys, which no
    /// read can see anyway); the removal is announced as a change, and the removal count
    /// bumped, as for a compaction, so that a snapshot that still holds the tables reads
    /// them without the filter (`store/snapshot.rs`).
    pub(in crate::store) fn global_drop(
        &self,
        v: &Version,
        numbers: &[u64],
        publish: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let _m = self.lock_global_change();
        let Some(g) = self.current().global().cloned() else {
            return publish();
        };
        let mut drops: Vec<(Vec<u64>, RunId)> = Vec::new();
        let mut l0 = Vec::new();
        for (l, level) in v.levels().iter().enumerate() {
            for t in level.tables() {
                if !numbers.contains(&t.record.number) || t.own_filter() {
                    // A table with a filter of its own has no entries in the global filter.
                    continue;
                }
                let run = if l == 0 { t.run() } else { level_run(l) };
                let Some(run) = run else {
                    return Err(Error::InvalidArgument(format!(
                        "table {} of level {l} has no run in the global filter",
                        t.record.number
                    )));
                };
                if l == 0 {
                    l0.push(run);
                }
                drops.push((handle_hashes(t, &self.tree.global_counters)?, run));
            }
        }
        publish()?;
        let Some(first) = drops.first().map(|d| d.1) else {
            return Ok(());
        };
        g.begin_move(Move {
            sources: RunSet::EMPTY,
            output: Some(first),
        });
        for (mut hashes, run) in drops {
            for chunk in hashes.chunks_mut(MOVE_CHUNK) {
                let mut w = g.filter.writer();
                w.remove_batch(chunk, run);
                g.record(|| Change::Remove(chunk.to_vec(), run));
            }
        }
        self.tree.global_removals.fetch_add(1, SeqCst);
        g.end_move();
        self.release_l0(&g, &l0);
        Ok(())
    }
}
