//! Salvaging the logs: kept as they are when they open as they are (a torn tail at most),
//! else every record that checks out copied, in order, into one new log, each op kept for
//! the tree that still needs it.

use std::path::PathBuf;

use super::{Kept, Repair};
use crate::error::{Error, Result};
use crate::filename::{wal_path, Numbered};
use crate::wal::{encode_record_in, salvage_bytes_by, KeyspaceIds, OwnedOp, WalWriter};

/// A salvaged record's operations, each with the keyspace id it is kept under.
type Batch = Vec<(u32, OwnedOp)>;

/// The trees the logs feed in the new manifest.
pub(super) struct LogTrees {
    /// Each live tree's keyspace id and flushed-log number, the default keyspace's first.
    pub trees: Vec<(u32, u64)>,
    /// The manifest's next keyspace id: ids below it and not live belong to dropped
    /// keyspaces (their ops are skipped, as replay skips them).
    pub next_id: u32,
    /// No manifest could be read: every op goes to the default keyspace (its keyspace is
    /// not known).
    pub all_to_default: bool,
}

impl LogTrees {
    /// What becomes of an op of keyspace `id` read from log `n`: the id it is kept under,
    /// `Ok(None)` when no tree needs it, `Err(())` for an id never allocated.
    fn place(&self, id: u32, n: u64) -> std::result::Result<Option<u32>, ()> {
        if self.all_to_default {
            return Ok(Some(0));
        }
        match self.trees.iter().find(|t| t.0 == id) {
            Some(&(_, log_number)) => Ok((n >= log_number).then_some(id)),
            None if id < self.next_id => Ok(None),
            None => Err(()),
        }
    }
}

impl Repair<'_> {
    /// Salvages the logs some tree of `trees` still needs; returns the number of the new
    /// log when they were rewritten into one (every tree's log number moves to it), and the
    /// last commit sequence number: `last_seq` (the old manifest's) raised by the records
    /// kept (a version-2 record, which has none, counts as the next number).
    pub(super) fn logs(
        &mut self,
        files: &[(u64, Option<Numbered>)],
        trees: &LogTrees,
        last_seq: u64,
    ) -> Result<(Option<u64>, u64)> {
        let dir = self.dir;
        let min = trees.trees.iter().map(|t| t.1).min().unwrap_or(0);
        let logs: Vec<(u64, PathBuf)> = files
            .iter()
            .filter(|&&(n, k)| k == Some(Numbered::Wal) && n >= min)
            .map(|(n, _)| (*n, wal_path(dir, *n)))
            .collect();
        let mut batches: Vec<(Option<u64>, Batch)> = Vec::new();
        let mut salvages = Vec::new();
        // Whether the logs must be rewritten although they open as they are (ops to move to
        // the default keyspace, or of ids never allocated).
        let mut rewrite = false;
        for (n, p) in &logs {
            let bytes = std::fs::read(p).map_err(|e| Error::io(p, e))?;
            let mut strays = 0u64;
            let s = salvage_bytes_by(&bytes, KeyspaceIds::Any, |seq, ops| {
                let mut kept = Vec::with_capacity(ops.len());
                for (id, op) in ops {
                    match trees.place(id, *n) {
                        Ok(Some(to)) => {
                            rewrite |= to != id;
                            kept.push((to, op));
                        }
                        Ok(None) => {}
                        Err(()) => strays += 1,
                    }
                }
                batches.push((seq, kept));
            });
            if strays > 0 {
                rewrite = true;
                let why = format!("{strays} operations of keyspace ids never allocated dropped");
                self.drop_file(p, 0, None, why);
            }
            salvages.push(s);
        }
        let mut seq = last_seq;
        let batches: Vec<_> = batches
            .into_iter()
            .map(|(s, b)| {
                seq = s.map_or(seq.saturating_add(1), |s| seq.max(s));
                (s.unwrap_or(seq), b)
            })
            .collect();
        if !rewrite && salvages.iter().all(|s| s.opens_as_is()) {
            for ((_, p), s) in logs.iter().zip(&salvages) {
                self.report.kept.push(Kept::Log {
                    file: p.clone(),
                    records: s.records,
                    from: Vec::new(),
                });
            }
            return Ok((None, seq));
        }
        for ((_, p), s) in logs.iter().zip(&salvages) {
            for d in &s.dropped {
                self.drop_file(p, d.offset, Some(d.len), d.reason.clone());
            }
        }
        let number = self.alloc()?;
        let path = wal_path(dir, number);
        let mut wal = WalWriter::create(self.fs, &path)?;
        let mut record = Vec::new();
        let mut records = 0u64;
        for (s, b) in batches.iter().filter(|(_, b)| !b.is_empty()) {
            let ops = b.iter().map(|(id, op)| (*id, op.as_op()));
            encode_record_in(&mut record, *s, b.len(), ops)?;
            wal.append(&record, false)?;
            records += 1;
        }
        wal.sync()?;
        drop(wal);
        for (_, p) in &logs {
            self.lose(p)?;
        }
        self.report.kept.push(Kept::Log {
            file: path,
            records,
            from: logs.into_iter().map(|(_, p)| p).collect(),
        });
        Ok((Some(number), seq))
    }
}
