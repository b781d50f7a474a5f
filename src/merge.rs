//! Sorted sources merged newest-wins: used by scans and by compaction.

use std::ops::Bound;
use std::sync::Arc;

use crate::error::Result;
use crate::store::TableHandle;
use crate::table::block::Entry;
use crate::table::TableCounters;

/// A sorted stream of entries (`None` value = tombstone).
pub type Source = Box<dyn Iterator<Item = Result<Entry>> + Send>;

/// Streams one table's entries from the block that may hold `start`, one block at a time.
pub struct TableIter {
    table: Arc<TableHandle>,
    next_block: usize,
    buf: std::vec::IntoIter<Entry>,
    start: Bound<Vec<u8>>,
    counters: Option<Arc<TableCounters>>,
    done: bool,
}

impl TableIter {
    /// Entries of `table` from `start`; block reads are counted in `counters`, or in the
    /// table's own counters when `None`.
    pub fn new(
        table: Arc<TableHandle>,
        start: Bound<Vec<u8>>,
        counters: Option<Arc<TableCounters>>,
    ) -> Self {
        let next_block = match &start {
            Bound::Included(k) | Bound::Excluded(k) => {
                table.table.block_for(k).unwrap_or(usize::MAX)
            }
            Bound::Unbounded => 0,
        };
        TableIter {
            table,
            next_block,
            buf: Vec::new().into_iter(),
            start,
            counters,
            done: false,
        }
    }
}

impl Iterator for TableIter {
    type Item = Result<Entry>;
    fn next(&mut self) -> Option<Result<Entry>> {
        loop {
            if self.done {
                return None;
            }
            for e in self.buf.by_ref() {
                let before = match &self.start {
                    Bound::Included(s) => e.0 < *s,
                    Bound::Excluded(s) => e.0 <= *s,
                    Bound::Unbounded => false,
                };
                if !before {
                    self.start = Bound::Unbounded;
                    return Some(Ok(e));
                }
            }
            if self.next_block >= self.table.table.block_count() {
                self.done = true;
                return None;
            }
            let counters = self.counters.as_deref().unwrap_or(&self.table.counters);
            match self.table.table.block_entries(self.next_block, counters) {
                Ok(v) => self.buf = v.into_iter(),
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
            self.next_block += 1;
        }
    }
}

/// Merges sources given newest first: for equal keys the earliest source wins.
pub struct MergeIter {
    sources: Vec<Source>,
    heads: Vec<Option<Entry>>,
    started: bool,
    failed: bool,
}

impl MergeIter {
    /// Merges `sources` (newest first).
    pub fn new(sources: Vec<Source>) -> Self {
        let n = sources.len();
        MergeIter {
            sources,
            heads: (0..n).map(|_| None).collect(),
            started: false,
            failed: false,
        }
    }

    fn fill(&mut self, i: usize) -> Result<()> {
        self.heads[i] = self.sources[i].next().transpose()?;
        Ok(())
    }
}

impl Iterator for MergeIter {
    type Item = Result<Entry>;
    fn next(&mut self) -> Option<Result<Entry>> {
        if self.failed {
            return None;
        }
        if !self.started {
            self.started = true;
            for i in 0..self.sources.len() {
                if let Err(e) = self.fill(i) {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        let mut best: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            if let Some((k, _)) = h {
                if best.is_none_or(|b| self.heads[b].as_ref().is_some_and(|(bk, _)| k < bk)) {
                    best = Some(i);
                }
            }
        }
        let b = best?;
        let winner = self.heads[b].take()?;
        for i in 0..self.heads.len() {
            let same = i == b || self.heads[i].as_ref().is_some_and(|(k, _)| *k == winner.0);
            if same {
                if i != b {
                    self.heads[i] = None;
                }
                if let Err(e) = self.fill(i) {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        Some(Ok(winner))
    }
}
