//! Sorted sources merged newest-wins, for scans (compaction has its own merge over table
//! cursors, in `compaction::run`, that allocates nothing per entry).

use crate::error::Result;
use crate::table::block::Entry;

/// A sorted stream of entries (`None` value = tombstone).
pub(crate) type Source = Box<dyn Iterator<Item = Result<Entry>> + Send>;

/// Merges sources given newest first: for equal keys the earliest source wins.
pub(crate) struct MergeIter {
    sources: Vec<Source>,
    heads: Vec<Option<Entry>>,
    started: bool,
    failed: bool,
}

impl MergeIter {
    /// Merges `sources` (newest first).
    pub(crate) fn new(sources: Vec<Source>) -> Self {
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
