//! A full checksum pass over a store directory: every file, every block, every record.
//! It does not open the store (so it also works when opening would fail) and reports every
//! problem it finds, each naming the file and offset. What is not damage but worth saying (a
//! torn log tail, which opening drops) is a [`Warning`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::filename::{
    filter_path, numbered_files, range_path, table_path, wal_path, FileName, Numbered,
};
use crate::filter::range::RangeFilter;
use crate::filter::Filter;
use crate::manifest::Manifest;
use crate::table::{Table, TableCounters};
use crate::wal::TornTail;

/// What `verify_dir` found.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct VerifyReport {
    /// Files read in full.
    pub files: u64,
    /// Data blocks whose CRC and entries were checked.
    pub blocks: u64,
    /// Entries decoded.
    pub entries: u64,
    /// WAL records checked.
    pub wal_records: u64,
    /// Tables the manifest records without a range filter (written without one, or whose
    /// deferred one is not built yet: `Options::deferred_range_filters`). Not damage: scans
    /// read such a table's blocks.
    pub tables_without_range_filter: u64,
    /// Every problem found ([`Error::Corruption`] values name file and offset).
    pub problems: Vec<Error>,
    /// Findings that are not damage: the store opens and loses nothing that was durable.
    pub warnings: Vec<Warning>,
}

impl VerifyReport {
    /// True when no problem was found (warnings do not count).
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Something [`verify_dir`] reports that is not damage.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// A log ends in a torn tail (no valid record after the damage), which opening the store
    /// drops: the write in flight at a crash, never acknowledged as durable.
    TornTail {
        /// The log file.
        file: PathBuf,
        /// Where the tail starts, its length and what was wrong there.
        tail: TornTail,
    },
}

impl Warning {
    /// The warning for `tail`, found in the log `file`.
    pub fn torn_tail(file: impl Into<PathBuf>, tail: TornTail) -> Warning {
        Warning::TornTail {
            file: file.into(),
            tail,
        }
    }
}

impl fmt::Display for Warning {
    /// `torn tail in DIR/000004.wal: offset 1234: 14 bytes dropped (record header CRC mismatch)`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::TornTail { file, tail } => write!(
                f,
                "torn tail in {}: offset {}: {} bytes dropped ({})",
                file.display(),
                tail.offset,
                tail.len,
                tail.reason
            ),
        }
    }
}

/// Checks every file of the store in `dir`. I/O errors that stop the pass (an unreadable
/// directory) are returned as `Err`; damage is collected in the report.
pub fn verify_dir(dir: &Path) -> Result<VerifyReport> {
    let mut r = VerifyReport::default();
    if !FileName::Manifest.path(dir).exists() {
        return Err(Error::InvalidArgument(format!(
            "no store at {} (no MANIFEST)",
            dir.display()
        )));
    }
    let manifest = match Manifest::load(dir) {
        Ok(Some(m)) => m,
        Ok(None) => {
            return Err(Error::InvalidArgument(format!(
                "no store at {}",
                dir.display()
            )))
        }
        Err(e) => {
            r.problems.push(e);
            return Ok(r);
        }
    };
    r.files += 1;
    check_levels(dir, &manifest, &mut r);
    for t in &manifest.tables {
        let path = table_path(dir, t.number);
        if let Err(e) = check_table(&path, &t.min_key, &t.max_key, t.entries, &mut r) {
            r.problems.push(e);
        }
        if t.filter_file != 0 {
            let fpath = filter_path(dir, t.filter_file);
            r.files += 1;
            match std::fs::read(&fpath) {
                Ok(b) => {
                    if let Err(e) = Filter::decode(&b) {
                        r.problems.push(e.in_file(&fpath, 0));
                    }
                }
                Err(e) => r.problems.push(Error::io(&fpath, e)),
            }
        }
        if let Some(n) = t.key_hashes {
            r.files += 1;
            let hpath = crate::filename::key_hashes_path(dir, n);
            match crate::table::key_hashes::read(&hpath) {
                Ok(h) if h.len() as u64 == t.entries => {}
                Ok(h) => r.problems.push(
                    Error::corrupt(
                        0,
                        format!(
                            "{} key hashes for a table of {} entries",
                            h.len(),
                            t.entries
                        ),
                    )
                    .in_file(&hpath, 0),
                ),
                Err(e) => r.problems.push(e),
            }
        }
        if let Some(n) = t.range_tombstones {
            r.files += 1;
            let tpath = crate::filename::tombstones_path(dir, n);
            if let Err(e) = crate::tombstone::file::read(&tpath) {
                r.problems.push(e);
            }
        }
        r.tables_without_range_filter += u64::from(t.range.is_none());
        if let Some(rr) = t.range {
            let rpath = range_path(dir, rr.file);
            r.files += 1;
            match std::fs::read(&rpath) {
                Ok(b) => {
                    if let Err(e) = RangeFilter::decode(&b) {
                        r.problems.push(e.in_file(&rpath, 0));
                    }
                }
                Err(e) => r.problems.push(Error::io(&rpath, e)),
            }
        }
    }
    // The lifetime counters: advisory (a damaged file never stops the store), but damage.
    if FileName::Counters.path(dir).exists() {
        r.files += 1;
        if let Err(e) = crate::lifetime::load(dir) {
            r.problems.push(e);
        }
    }
    // The logs a reopen replays: from the oldest any keyspace has not flushed, their
    // keyspace ids judged by the manifest as a reopen judges them.
    let min_log = manifest.log_numbers().min().unwrap_or(0);
    let live: Vec<u32> = manifest.keyspaces.live.iter().map(|k| k.id).collect();
    let ids = crate::wal::KeyspaceIds::Store {
        next_id: u64::from(manifest.keyspaces.next_id),
        live: &live,
    };
    let wals = numbered_files(dir)?
        .into_iter()
        .filter(|&(n, k)| k == Some(Numbered::Wal) && n >= min_log)
        .map(|(n, _)| wal_path(dir, n));
    for p in wals {
        r.files += 1;
        match crate::wal::replay_file_ops_by(&p, ids, |_, _| {}) {
            Ok(end) => {
                r.wal_records += end.records;
                if let Some(tail) = end.torn_tail {
                    r.warnings.push(Warning::torn_tail(p, tail));
                }
            }
            Err(e) => r.problems.push(e),
        }
    }
    Ok(r)
}

/// Each level from L1 down of each keyspace is one sorted run: its tables' key ranges must
/// not overlap.
fn check_levels(dir: &Path, m: &Manifest, r: &mut VerifyReport) {
    type Run<'a> = Vec<&'a crate::manifest::TableRecord>;
    let mut by_level: std::collections::BTreeMap<(u32, u32), Run> =
        std::collections::BTreeMap::new();
    for t in m.tables.iter().filter(|t| t.level > 0) {
        by_level.entry((t.keyspace, t.level)).or_default().push(t);
    }
    for ((keyspace, level), mut tables) in by_level {
        let of = match keyspace {
            0 => String::new(),
            k => format!(" of keyspace {k}"),
        };
        tables.sort_by(|a, b| a.min_key.cmp(&b.min_key));
        for w in tables.windows(2) {
            if w[0].max_key >= w[1].min_key {
                r.problems.push(
                    Error::corrupt(
                        0,
                        format!(
                            "tables {} and {} of level {level}{of} overlap",
                            w[0].number, w[1].number
                        ),
                    )
                    .in_file(FileName::Manifest.path(dir), 0),
                );
            }
        }
    }
}

fn check_table(
    path: &Path,
    min: &[u8],
    max: &[u8],
    entries: u64,
    r: &mut VerifyReport,
) -> Result<()> {
    r.files += 1;
    let table = Arc::new(Table::open(path, false)?);
    let counters = TableCounters::default();
    let mut prev: Option<Vec<u8>> = None;
    let mut count = 0u64;
    for i in 0..table.block_count() {
        let entries = table.block_entries(i, &counters)?;
        r.blocks += 1;
        for (k, _) in entries {
            if prev.as_ref().is_some_and(|p| *p >= k) {
                return Err(
                    Error::corrupt(0, format!("keys out of order in block {i}")).in_file(path, 0)
                );
            }
            prev = Some(k);
            count += 1;
        }
    }
    table.check_padding()?;
    r.entries += count;
    let m = &table.meta;
    if m.min_key != min || m.max_key != max || m.entries != entries || count != entries {
        return Err(Error::corrupt(
            0,
            "table contents disagree with the manifest (key range or count)",
        )
        .in_file(path, 0));
    }
    Ok(())
}
