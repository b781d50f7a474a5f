//! Salvaging one table: its good blocks kept (rewritten into a new table when any block is
//! damaged), its filter kept when it decodes and the table is kept as it was, else rebuilt
//! from the table's keys.

use std::path::Path;
use std::sync::Arc;

use super::{Kept, KeyGap, Repair};
use crate::error::{Error, Result};
use crate::filename::{filter_path, key_hashes_path, range_path, table_path};
use crate::filter::range::RangeFilter;
use crate::filter::{Filter, FilterKind};
use crate::manifest::TableRecord;
use crate::table::{key_hashes, write_filter_file, write_table, Table, TableCounters};

/// The entries of a table's good blocks, and whether anything was wrong with it.
struct Salvaged {
    entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Each entry's `expires_at` (0: never).
    exps: Vec<u64>,
    damaged: bool,
}

impl crate::table::SortedEntries for Salvaged {
    fn len(&self) -> usize {
        self.entries.len()
    }
    fn entry(&self, i: usize) -> (&[u8], Option<&[u8]>) {
        let (k, v) = &self.entries[i];
        (k, v.as_deref())
    }
    fn payload_bytes(&self) -> usize {
        self.entries
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
            .sum()
    }
    fn expires(&self, i: usize) -> u64 {
        self.exps[i]
    }
    fn tagged(&self) -> bool {
        self.exps.iter().any(|&e| e != 0)
    }
}

impl Repair<'_> {
    /// Reads every block of the table at `path`: the entries of the good ones (`None`: the
    /// table does not open). A block this build cannot read (compressed with a codec it
    /// does not include) stops the repair with that error: its bytes may be sound, and
    /// salvaging around it would drop them.
    fn read_table(&mut self, path: &Path) -> Result<Option<Salvaged>> {
        let table = match Table::open(path, false) {
            Ok(t) => Arc::new(t),
            Err(e) => {
                self.drop_err(path, &e);
                return Ok(None);
            }
        };
        let counters = TableCounters::default();
        let mut out = Salvaged {
            entries: Vec::new(),
            exps: Vec::new(),
            damaged: false,
        };
        // Blocks whose damage is reported once the next good key is known.
        let mut pending: Vec<(u64, Option<u64>, String)> = Vec::new();
        let report_pending = |me: &mut Self,
                              pending: &mut Vec<(u64, Option<u64>, String)>,
                              after: Option<&[u8]>,
                              before: Option<&[u8]>| {
            for (off, len, why) in pending.drain(..) {
                let show = |k: Option<&[u8]>, none: &str| {
                    k.map_or(none.to_string(), |k| {
                        format!("{:?}", k.escape_ascii().to_string())
                    })
                };
                me.drop_file(
                    path,
                    off,
                    len,
                    format!(
                        "data block dropped ({why}); it held keys after {} and before {}",
                        show(after, "the start"),
                        show(before, "the end")
                    ),
                );
                if let Some(d) = me.report.dropped.last_mut() {
                    d.keys_between = Some(KeyGap {
                        after: after.map(<[u8]>::to_vec),
                        before: before.map(<[u8]>::to_vec),
                    });
                }
            }
        };
        for i in 0..table.block_count() {
            let span = table.block_span(i);
            let (off, len) = span.map_or((0, None), |(o, l)| (o, Some(u64::from(l) + 4)));
            match table.block_entries_exp(i, &counters) {
                Ok(block) => {
                    let (block, exps): (Vec<_>, Vec<u64>) = block.into_iter().unzip();
                    let last = out.entries.last().map(|(k, _)| k.clone());
                    let mut prev = last.clone();
                    let sorted = block.iter().all(|(k, _)| {
                        let ok = prev.as_ref().is_none_or(|p| p < k);
                        prev = Some(k.clone());
                        ok
                    });
                    if !sorted {
                        out.damaged = true;
                        pending.push((off, len, "keys out of order".to_string()));
                        continue;
                    }
                    if let Some((first, _)) = block.first() {
                        report_pending(self, &mut pending, last.as_deref(), Some(first));
                    }
                    out.entries.extend(block);
                    out.exps.extend(exps);
                }
                Err(e @ Error::Unsupported { .. }) => return Err(e),
                Err(e) => {
                    out.damaged = true;
                    let why = match &e {
                        Error::Corruption { reason, .. } => reason.clone(),
                        other => other.to_string(),
                    };
                    pending.push((off, len, why));
                }
            }
        }
        let last = out.entries.last().map(|(k, _)| k.clone());
        report_pending(self, &mut pending, last.as_deref(), None);
        if let Err(e) = table.check_padding() {
            // The data is whole; the file is rewritten so that verify passes.
            self.drop_err(path, &e);
            out.damaged = true;
        }
        let m = &table.meta;
        if !out.damaged
            && (out.entries.len() as u64 != m.entries
                || out.entries.first().map(|e| &e.0) != Some(&m.min_key)
                || out.entries.last().map(|e| &e.0) != Some(&m.max_key))
        {
            self.drop_file(
                path,
                0,
                None,
                "table meta disagrees with its blocks; the blocks are kept".to_string(),
            );
            out.damaged = true;
        }
        Ok(Some(out))
    }

    /// Keeps, rewrites or loses one table; the record for the new manifest, if any.
    pub(super) fn table(
        &mut self,
        c: TableRecord,
        rebuild_filter: bool,
    ) -> Result<Option<TableRecord>> {
        let dir = self.dir;
        let path = table_path(dir, c.number);
        let range_file = c.range.map(|r| range_path(dir, r.file));
        let hashes_file = c.key_hashes.map(|n| key_hashes_path(dir, n));
        if !path.exists() {
            self.drop_file(&path, 0, None, "table file missing".to_string());
            if c.filter_file != 0 && filter_path(dir, c.filter_file).exists() {
                self.lose(&filter_path(dir, c.filter_file))?;
            }
            self.keep_range(range_file.as_deref(), false)?;
            self.keep_hashes(hashes_file.as_deref(), None)?;
            return Ok(None);
        }
        let Some(s) = self.read_table(&path)? else {
            self.lose(&path)?;
            if c.filter_file != 0 && filter_path(dir, c.filter_file).exists() {
                self.lose(&filter_path(dir, c.filter_file))?;
            }
            self.keep_range(range_file.as_deref(), false)?;
            self.keep_hashes(hashes_file.as_deref(), None)?;
            return Ok(None);
        };
        let hashes = || -> Vec<u64> {
            s.entries
                .iter()
                .map(|(k, _)| crate::hash::key_hash(k))
                .collect()
        };
        let mut record = c.clone();
        // The range filter: kept when it decodes and the table is kept as it was; else the
        // table is read without one (`store refilter --range-bits` builds a new one).
        if !self.keep_range(range_file.as_deref(), !s.damaged)? {
            record.range = None;
        }
        // The key hashes: kept when they decode and are the kept table's, one per entry in
        // key order; else the table goes without (the global filter then reads its keys).
        let keep = (!s.damaged).then(hashes);
        if !self.keep_hashes(hashes_file.as_deref(), keep.as_deref())? {
            record.key_hashes = None;
        }
        let old_filter = (c.filter_file != 0).then(|| filter_path(dir, c.filter_file));
        if s.damaged {
            if s.entries.is_empty() {
                self.lose(&path)?;
                if let Some(f) = old_filter.filter(|f| f.exists()) {
                    self.lose(&f)?;
                }
                return Ok(None);
            }
            let number = self.alloc()?;
            let new_path = table_path(dir, number);
            // The store's options are not known here: the library's default compression.
            let meta = write_table(self.fs, &new_path, &s, crate::Compression::default())?;
            record.number = number;
            record.entries = meta.entries;
            record.tombstones = meta.tombstones;
            record.file_bytes = meta.file_bytes;
            record.min_key = meta.min_key;
            record.max_key = meta.max_key;
            self.lose(&path)?;
            self.report.kept.push(Kept::Table {
                file: new_path,
                level: record.level,
                entries: record.entries,
                from: Some(path.clone()),
            });
        } else {
            let t = Table::open(&path, false)?;
            record.entries = t.meta.entries;
            record.tombstones = t.meta.tombstones;
            record.file_bytes = t.meta.file_bytes;
            record.min_key = t.meta.min_key.clone();
            record.max_key = t.meta.max_key.clone();
            self.report.kept.push(Kept::Table {
                file: path.clone(),
                level: record.level,
                entries: record.entries,
                from: None,
            });
        }
        // The filter: kept when it decodes and the table was kept as it was; else rebuilt.
        let filter_ok = !s.damaged
            && !rebuild_filter
            && old_filter
                .as_ref()
                .is_some_and(|f| std::fs::read(f).is_ok_and(|b| Filter::decode(&b).is_ok()));
        if filter_ok {
            if let Some(f) = old_filter {
                self.report.kept.push(Kept::Filter {
                    file: f,
                    kind: record.filter_kind,
                    rebuilt: false,
                });
            }
            return Ok(Some(record));
        }
        if let Some(f) = old_filter {
            if f.exists() {
                if !s.damaged && !rebuild_filter {
                    let e = match std::fs::read(&f) {
                        Ok(b) => Filter::decode(&b).err().map(|e| e.in_file(&f, 0)),
                        Err(e) => Some(Error::io(&f, e)),
                    };
                    if let Some(e) = e {
                        self.drop_err(&f, &e);
                    }
                }
                self.lose(&f)?;
            } else {
                self.drop_file(&f, 0, None, "filter file missing".to_string());
            }
        }
        let kind = if c.filter_file == 0 && !rebuild_filter {
            FilterKind::None
        } else {
            record.filter_kind
        };
        record.filter_file = 0;
        record.filter_kind = FilterKind::None;
        if kind != FilterKind::None {
            let number = self.alloc()?;
            let fpath = filter_path(dir, number);
            if write_filter_file(self.fs, &fpath, kind, record.fpr, &hashes())?.is_some() {
                record.filter_file = number;
                record.filter_kind = kind;
                self.report.kept.push(Kept::Filter {
                    file: fpath,
                    kind,
                    rebuilt: true,
                });
            }
        }
        Ok(Some(record))
    }

    /// Keeps the key hashes file `file` (true) when it decodes to exactly `want` (the kept
    /// table's key hashes; `None`: the table is not kept as it was); else reports why (if
    /// the table was kept) and moves it to `lost/`.
    fn keep_hashes(&mut self, file: Option<&Path>, want: Option<&[u64]>) -> Result<bool> {
        let Some(f) = file else {
            return Ok(false);
        };
        if !f.exists() {
            if want.is_some() {
                self.drop_file(f, 0, None, "key hashes file missing".to_string());
            }
            return Ok(false);
        }
        if let Some(want) = want {
            let problem = match key_hashes::read(f) {
                Ok(h) if h == want => return Ok(true),
                Ok(h) => Error::corrupt(
                    0,
                    format!(
                        "{} key hashes that are not the table's {} keys'",
                        h.len(),
                        want.len()
                    ),
                )
                .in_file(f, 0),
                Err(e) => e,
            };
            self.drop_err(f, &problem);
        }
        self.lose(f)?;
        Ok(false)
    }

    /// Keeps the range filter file `file` (true) when `keep` and it decodes; else reports
    /// why it does not decode (if so) and moves it to `lost/`.
    fn keep_range(&mut self, file: Option<&Path>, keep: bool) -> Result<bool> {
        let Some(f) = file else {
            return Ok(false);
        };
        if !f.exists() {
            if keep {
                self.drop_file(f, 0, None, "range filter file missing".to_string());
            }
            return Ok(false);
        }
        if keep {
            let e = match std::fs::read(f) {
                Ok(b) => RangeFilter::decode(&b).err().map(|e| e.in_file(f, 0)),
                Err(e) => Some(Error::io(f, e)),
            };
            match e {
                None => return Ok(true),
                Some(e) => self.drop_err(f, &e),
            }
        }
        self.lose(f)?;
        Ok(false)
    }
}
