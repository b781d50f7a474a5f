//! `repair`: salvages a store that refuses to open (LevelDB's `RepairDB`, RocksDB's
//! `ldb repair`), and leaves one that needs no repair untouched.
//!
//! ```text
//! MANIFEST decodes? ── yes: its tables, levels, filters, log_number, defaults
//!                  └── no:  every NNNNNN.sst at L0, newest (highest number) first,
//!                           filters rebuilt at the store's default kind
//! each table:  footer/index/meta check out?  no ─► lost/
//!              every block checks out?       no ─► good blocks rewritten into a new table,
//!                                                  the damaged file ─► lost/
//!              filter decodes?               no ─► rebuilt from the table's keys, old ─► lost/
//! logs (≥ log_number, in order): damage anywhere but a torn tail ─► every record that
//!              checks out, before and after it, copied into one new log; old logs ─► lost/
//! a new MANIFEST (the old one ─► lost/), the directory fsynced, then a full verify
//! ```
//! Nothing is deleted: whatever repair does not use is renamed into `lost/` (`format.md`,
//! "Store directory"). `docs/reliability.md` says what repair can lose.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::filename::{filter_path, numbered_files, table_path, wal_path, FileName, Numbered};
use crate::filter::{Filter, FilterKind};
use crate::io::{Fs, RealFs};
use crate::manifest::{Manifest, TableRecord};
use crate::store::{lock_dir, DEFAULT_FILTER, DEFAULT_FPR};
use crate::table::{write_filter_file, write_table, Table, TableCounters};
use crate::verify::{verify_dir, VerifyReport};
use crate::wal::{encode_record, salvage_bytes, WalWriter};

pub use crate::filename::LOST_DIR;

/// What [`repair`] did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct RepairReport {
    /// False when the store needed no repair (nothing was written or moved).
    pub needed: bool,
    /// What was kept or rebuilt, in the order it was done.
    pub kept: Vec<Kept>,
    /// What could not be used, with file and offset.
    pub dropped: Vec<Dropped>,
    /// Files renamed into `lost/`: (from, to).
    pub moved: Vec<(PathBuf, PathBuf)>,
    /// The full checksum pass over the repaired store (over the intact one when nothing was
    /// needed).
    pub verify: VerifyReport,
}

impl RepairReport {
    /// True when repair found damage and kept nothing: no table, no log record.
    pub fn saved_nothing(&self) -> bool {
        self.needed
            && !self.kept.iter().any(|k| match k {
                Kept::Table { entries, .. } => *entries > 0,
                Kept::Log { records, .. } => *records > 0,
                Kept::Filter { .. } => false,
            })
    }
}

/// Something [`repair`] kept.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kept {
    /// A table, as it was or (`from` set) rewritten from the blocks of a damaged one.
    Table {
        /// The table file now named by the manifest.
        file: PathBuf,
        /// Its level.
        level: u32,
        /// Its entries.
        entries: u64,
        /// The damaged table it was rewritten from, if it was.
        from: Option<PathBuf>,
    },
    /// A table's filter, as it was or (`rebuilt`) built anew from the table's keys.
    Filter {
        /// The filter file.
        file: PathBuf,
        /// Its kind.
        kind: FilterKind,
        /// True when it was built by repair.
        rebuilt: bool,
    },
    /// Log records: a log kept as it was, or (`from` non-empty) a new log holding every
    /// record that checked out in `from`, in order.
    Log {
        /// The log file.
        file: PathBuf,
        /// Records it holds.
        records: u64,
        /// The damaged logs salvaged into it, oldest first.
        from: Vec<PathBuf>,
    },
}

/// Something [`repair`] could not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// The file.
    pub file: PathBuf,
    /// Offset of the first byte not used.
    pub offset: u64,
    /// Bytes not used, when known (`None`: from `offset` on, or the whole file).
    pub len: Option<u64>,
    /// What was wrong (for a data block, also the keys it may have held).
    pub reason: String,
    /// For a dropped data block: the keys it may have held.
    pub keys_between: Option<KeyGap>,
}

/// The keys strictly between two bounds: the last good key before a dropped block and the
/// first good key after it (`None`: no bound on that side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyGap {
    /// The lower bound (exclusive).
    pub after: Option<Vec<u8>>,
    /// The upper bound (exclusive).
    pub before: Option<Vec<u8>>,
}

impl KeyGap {
    /// Whether `key` lies strictly between the bounds.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.after.as_deref().is_none_or(|a| a < key)
            && self.before.as_deref().is_none_or(|b| key < b)
    }
}

impl fmt::Display for Kept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kept::Table {
                file,
                level,
                entries,
                from,
            } => {
                write!(f, "kept {}: L{level}, {entries} entries", file.display())?;
                if let Some(from) = from {
                    write!(f, " (the good blocks of {})", from.display())?;
                }
                Ok(())
            }
            Kept::Filter {
                file,
                kind,
                rebuilt,
            } => {
                let how = if *rebuilt { "rebuilt" } else { "kept" };
                write!(f, "{how} {}: {} filter", file.display(), kind.name())
            }
            Kept::Log {
                file,
                records,
                from,
            } => {
                write!(f, "kept {}: {records} log records", file.display())?;
                if !from.is_empty() {
                    let names: Vec<String> = from.iter().map(|p| p.display().to_string()).collect();
                    write!(f, " (salvaged from {})", names.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Dropped {
    /// `dropped DIR/000004.sst: offset 4096: 4000 bytes: REASON`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dropped {}: offset {}", self.file.display(), self.offset)?;
        if let Some(len) = self.len {
            write!(f, ": {len} bytes")?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// Repairs the store in `dir` (see the module documentation) and reports what it did. A
/// store that [`verify_dir`] finds intact is left byte for byte as it is (torn log tails
/// included: opening drops them). Takes the store's lock, so the store must not be open.
///
/// `Err` only for what stops the repair itself: no store in `dir`, the lock held, an I/O
/// error. Damage is never an `Err`: it is what the report's `dropped` lists.
pub fn repair(dir: impl AsRef<Path>) -> Result<RepairReport> {
    repair_with(dir.as_ref(), &RealFs)
}

/// [`repair`] writing through `fs` (a fault-injecting one in tests).
pub fn repair_with(dir: &Path, fs: &dyn Fs) -> Result<RepairReport> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Error::InvalidArgument(format!(
                "{} is not a directory",
                dir.display()
            )))
        }
        Err(e) => return Err(Error::io(dir, e)),
    }
    let files = numbered_files(dir)?;
    let has_data = files
        .iter()
        .any(|(_, k)| matches!(k, Some(Numbered::Table | Numbered::Wal)));
    let manifest = FileName::Manifest.path(dir);
    if !manifest.exists() && !has_data {
        return Err(Error::InvalidArgument(format!(
            "no store at {} (no MANIFEST and no table or log files)",
            dir.display()
        )));
    }
    let _lock = lock_dir(dir)?;
    if manifest.exists() {
        let v = verify_dir(dir)?;
        if v.is_intact() {
            return Ok(RepairReport {
                needed: false,
                verify: v,
                ..RepairReport::default()
            });
        }
    }
    let mut r = Repair {
        dir,
        fs,
        report: RepairReport {
            needed: true,
            ..RepairReport::default()
        },
        next_file: files.iter().map(|(n, _)| n + 1).max().unwrap_or(1),
        unlink_later: Vec::new(),
    };
    r.run(&files)?;
    r.report.verify = verify_dir(dir)?;
    Ok(r.report)
}

struct Repair<'a> {
    dir: &'a Path,
    fs: &'a dyn Fs,
    report: RepairReport,
    next_file: u64,
    /// Files linked into `lost/`, to unlink once the new manifest is durable.
    unlink_later: Vec<PathBuf>,
}

/// The entries of a table's good blocks, and whether anything was wrong with it.
struct Salvaged {
    entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    damaged: bool,
}

impl Repair<'_> {
    fn alloc(&mut self) -> u64 {
        let n = self.next_file;
        self.next_file += 1;
        n
    }

    fn drop_file(&mut self, file: &Path, offset: u64, len: Option<u64>, reason: String) {
        self.report.dropped.push(Dropped {
            file: file.to_path_buf(),
            offset,
            len,
            reason,
            keys_between: None,
        });
    }

    fn drop_err(&mut self, file: &Path, e: &Error) {
        match e {
            Error::Corruption {
                file: f,
                offset,
                reason,
                ..
            } => {
                let f = if f.as_os_str().is_empty() { file } else { f };
                self.drop_file(f, *offset, None, reason.clone());
            }
            other => self.drop_file(file, 0, None, other.to_string()),
        }
    }

    /// Puts `path` into `lost/` (under a free name) and records it. The file is linked there
    /// now and unlinked from the store's directory only once the new manifest is durable
    /// ([`Repair::finish_moves`]): a crash before that leaves the store as it was (a rerun
    /// starts again), a crash after leaves the old file in `lost/` whatever a later open
    /// removes. Where links are refused, it is renamed at once.
    fn lose(&mut self, path: &Path) -> Result<()> {
        if self.report.moved.iter().any(|(from, _)| from == path) {
            return Ok(());
        }
        let lost = FileName::Lost.path(self.dir);
        std::fs::create_dir_all(&lost).map_err(|e| Error::io(&lost, e))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut to = lost.join(&name);
        let mut i = 1;
        while to.exists() {
            to = lost.join(format!("{name}.{i}"));
            i += 1;
        }
        if std::fs::hard_link(path, &to).is_ok() {
            self.unlink_later.push(path.to_path_buf());
        } else {
            self.fs.rename(path, &to).map_err(|e| Error::io(path, e))?;
        }
        self.report.moved.push((path.to_path_buf(), to));
        Ok(())
    }

    /// Unlinks what [`Repair::lose`] linked into `lost/` (the manifest excepted: the new one
    /// replaced it).
    fn finish_moves(&mut self) -> Result<()> {
        let manifest = FileName::Manifest.path(self.dir);
        for p in std::mem::take(&mut self.unlink_later) {
            if p != manifest {
                self.fs.remove(&p).map_err(|e| Error::io(&p, e))?;
            }
        }
        self.fs
            .sync_dir(self.dir)
            .map_err(|e| Error::io(self.dir, e))
    }

    fn run(&mut self, files: &[(u64, Option<Numbered>)]) -> Result<()> {
        let dir = self.dir;
        let manifest_path = FileName::Manifest.path(dir);
        let old = match Manifest::load(dir) {
            Ok(Some(m)) => Some(m),
            Ok(None) => {
                self.drop_file(
                    &manifest_path,
                    0,
                    None,
                    "MANIFEST missing; rebuilt from the table files".to_string(),
                );
                None
            }
            Err(e) => {
                self.drop_err(&manifest_path, &e);
                None
            }
        };
        if let Some(m) = &old {
            self.next_file = self.next_file.max(m.next_file);
        }
        let (default_kind, default_fpr) = old.as_ref().map_or((DEFAULT_FILTER, DEFAULT_FPR), |m| {
            (m.default_kind, m.default_fpr)
        });
        // The tables to try: the manifest's (L0 newest first, then by level), or every table
        // file at L0 from the highest number down.
        let candidates: Vec<TableRecord> = match &old {
            Some(m) => m.tables.clone(),
            None => files
                .iter()
                .rev()
                .filter(|(_, k)| *k == Some(Numbered::Table))
                .map(|&(number, _)| TableRecord {
                    level: 0,
                    number,
                    filter_file: 0,
                    filter_kind: default_kind,
                    fpr: default_fpr,
                    entries: 0,
                    tombstones: 0,
                    file_bytes: 0,
                    min_key: Vec::new(),
                    max_key: Vec::new(),
                })
                .collect(),
        };
        let rebuild_all_filters = old.is_none();
        let mut named: HashSet<(u64, Numbered)> = HashSet::new();
        let mut tables = Vec::new();
        for c in candidates {
            named.insert((c.number, Numbered::Table));
            if c.filter_file != 0 {
                named.insert((c.filter_file, Numbered::Filter));
            }
            if let Some(t) = self.table(c, rebuild_all_filters)? {
                tables.push(t);
            }
        }
        // Files no usable manifest names: unfinished outputs (or, with the manifest lost,
        // filters that cannot be matched to their tables): kept in lost/, not deleted.
        for &(n, kind) in files {
            let Some(kind) = kind else { continue };
            let orphan = match kind {
                Numbered::Table => old.is_some() && !named.contains(&(n, kind)),
                Numbered::Filter => !named.contains(&(n, kind)),
                Numbered::Wal => false,
            };
            let p = kind.path(dir, n);
            if orphan && p.exists() {
                self.lose(&p)?;
            }
        }
        let log_number = self.logs(files, old.as_ref().map_or(0, |m| m.log_number))?;
        let counters = FileName::Counters.path(dir);
        if counters.exists() {
            if let Err(e) = crate::lifetime::load(dir) {
                self.drop_err(&counters, &e);
                self.lose(&counters)?;
            }
        }
        if let Some((level, a, b)) = levels_overlap(&tables) {
            // The manifest's levels overlap (the tables' own key ranges are used): every
            // table goes to L0, in the manifest's order (L0 newest first, then the deeper,
            // older levels), where overlap is allowed.
            self.drop_file(
                &manifest_path,
                0,
                None,
                format!("tables {a} and {b} of level {level} overlap; all tables placed in L0"),
            );
            for t in &mut tables {
                t.level = 0;
            }
        }
        let cursors = old.as_ref().map_or_else(Vec::new, |m| m.cursors.clone());
        let manifest = Manifest {
            next_file: self.next_file,
            log_number,
            default_kind,
            default_fpr,
            tables,
            cursors,
        };
        if manifest_path.exists() {
            self.lose(&manifest_path)?;
        }
        // New files and the links in lost/ are durable before the manifest names the new set;
        // the old files leave the directory only after it is.
        let lost = FileName::Lost.path(dir);
        if lost.exists() {
            self.fs.sync_dir(&lost).map_err(|e| Error::io(&lost, e))?;
        }
        self.fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
        manifest.store(self.fs, dir)?;
        self.finish_moves()
    }

    /// Reads every block of the table at `path`: the entries of the good ones.
    fn read_table(&mut self, path: &Path) -> Option<Salvaged> {
        let table = match Table::open(path, false) {
            Ok(t) => Arc::new(t),
            Err(e) => {
                self.drop_err(path, &e);
                return None;
            }
        };
        let counters = TableCounters::default();
        let mut out = Salvaged {
            entries: Vec::new(),
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
            match table.block_entries(i, &counters) {
                Ok(block) => {
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
                }
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
        Some(out)
    }

    /// Keeps, rewrites or loses one table; the record for the new manifest, if any.
    fn table(&mut self, c: TableRecord, rebuild_filter: bool) -> Result<Option<TableRecord>> {
        let dir = self.dir;
        let path = table_path(dir, c.number);
        if !path.exists() {
            self.drop_file(&path, 0, None, "table file missing".to_string());
            if c.filter_file != 0 && filter_path(dir, c.filter_file).exists() {
                self.lose(&filter_path(dir, c.filter_file))?;
            }
            return Ok(None);
        }
        let Some(s) = self.read_table(&path) else {
            self.lose(&path)?;
            if c.filter_file != 0 && filter_path(dir, c.filter_file).exists() {
                self.lose(&filter_path(dir, c.filter_file))?;
            }
            return Ok(None);
        };
        let hashes = || -> Vec<u64> {
            s.entries
                .iter()
                .map(|(k, _)| crate::hash::key_hash(k))
                .collect()
        };
        let mut record = c.clone();
        let old_filter = (c.filter_file != 0).then(|| filter_path(dir, c.filter_file));
        if s.damaged {
            if s.entries.is_empty() {
                self.lose(&path)?;
                if let Some(f) = old_filter.filter(|f| f.exists()) {
                    self.lose(&f)?;
                }
                return Ok(None);
            }
            let number = self.alloc();
            let new_path = table_path(dir, number);
            let view: Vec<(&[u8], Option<&[u8]>)> = s
                .entries
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_deref()))
                .collect();
            let meta = write_table(self.fs, &new_path, view.as_slice())?;
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
            let number = self.alloc();
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

    /// Salvages the logs numbered `log_number` and up; the manifest's new `log_number`.
    fn logs(&mut self, files: &[(u64, Option<Numbered>)], log_number: u64) -> Result<u64> {
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
            let s = salvage_bytes(&bytes, |b| batches.push(b));
            salvages.push(s);
        }
        if salvages.iter().all(|s| s.opens_as_is()) {
            for (p, s) in logs.iter().zip(&salvages) {
                self.report.kept.push(Kept::Log {
                    file: p.clone(),
                    records: s.records,
                    from: Vec::new(),
                });
            }
            return Ok(log_number);
        }
        for (p, s) in logs.iter().zip(&salvages) {
            for d in &s.dropped {
                self.drop_file(p, d.offset, Some(d.len), d.reason.clone());
            }
        }
        let number = self.alloc();
        let path = wal_path(dir, number);
        let mut wal = WalWriter::create(self.fs, &path)?;
        let mut record = Vec::new();
        for b in &batches {
            encode_record(
                &mut record,
                b.len(),
                b.iter().map(|(k, v)| (k.as_slice(), v.as_deref())),
            )?;
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
        Ok(number)
    }
}

/// The first level (≥ 1) where two of `tables` overlap: (level, table, table).
fn levels_overlap(tables: &[TableRecord]) -> Option<(u32, u64, u64)> {
    let mut by_level: BTreeMap<u32, Vec<&TableRecord>> = BTreeMap::new();
    for t in tables.iter().filter(|t| t.level > 0) {
        by_level.entry(t.level).or_default().push(t);
    }
    for (level, mut ts) in by_level {
        ts.sort_by(|a, b| a.min_key.cmp(&b.min_key));
        for w in ts.windows(2) {
            if let [a, b] = w {
                if a.max_key >= b.min_key {
                    return Some((level, a.number, b.number));
                }
            }
        }
    }
    None
}
