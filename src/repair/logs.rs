//! Salvaging the logs: kept as they are when they open as they are (a torn tail at most),
//! else every record that checks out copied, in order, into one new log.

use std::path::PathBuf;

use super::{Kept, Repair};
use crate::error::{Error, Result};
use crate::filename::{wal_path, Numbered};
use crate::wal::{encode_record, salvage_bytes, WalWriter};

impl Repair<'_> {
    /// Salvages the logs numbered `log_number` and up; the manifest's new `log_number`, and
    /// its last commit sequence number: `last_seq` (the old manifest's) raised by the records
    /// kept (a version-2 record, which has none, counts as the next number).
    pub(super) fn logs(
        &mut self,
        files: &[(u64, Option<Numbered>)],
        log_number: u64,
        last_seq: u64,
    ) -> Result<(u64, u64)> {
        let dir = self.dir;
        let logs: Vec<PathBuf> = files
            .iter()
            .filter(|&&(n, k)| k == Some(Numbered::Wal) && n >= log_number)
            .map(|(n, _)| wal_path(dir, *n))
            .collect();
        let mut batches = Vec::new();
        let mut salvages = Vec::new();
        for p in &logs {
            let bytes = std::fs::read(p).map_err(|e| Error::io(p, e))?;
            let s = salvage_bytes(&bytes, |seq, b| batches.push((seq, b)));
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
        if salvages.iter().all(|s| s.opens_as_is()) {
            for (p, s) in logs.iter().zip(&salvages) {
                self.report.kept.push(Kept::Log {
                    file: p.clone(),
                    records: s.records,
                    from: Vec::new(),
                });
            }
            return Ok((log_number, seq));
        }
        for (p, s) in logs.iter().zip(&salvages) {
            for d in &s.dropped {
                self.drop_file(p, d.offset, Some(d.len), d.reason.clone());
            }
        }
        let number = self.alloc()?;
        let path = wal_path(dir, number);
        let mut wal = WalWriter::create(self.fs, &path)?;
        let mut record = Vec::new();
        for (s, b) in &batches {
            encode_record(&mut record, *s, b.len(), b.iter().map(|op| op.as_op()))?;
            wal.append(&record, false)?;
        }
        wal.sync()?;
        drop(wal);
        for p in &logs {
            self.lose(p)?;
        }
        self.report.kept.push(Kept::Log {
            file: path,
            records: batches.len() as u64,
            from: logs,
        });
        Ok((number, seq))
    }
}
