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
//!
//! The jobs are spread over files: the driver here (what to keep, `lost/`, the new
//! manifest), the salvage of a table and its filter in `table.rs`, of the logs in
//! `logs.rs`, and what repair reports in `report.rs`.

mod logs;
mod report;
mod table;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::filename::{number_after, numbered_files, numbers_exhausted, FileName, Numbered};
use crate::io::{Fs, RealFs};
use crate::manifest::{Manifest, TableRecord};
use crate::store::{default_policy, lock_dir, DEFAULT_FILTER, DEFAULT_FPR};
use crate::verify::verify_dir;

pub use self::report::{Dropped, Kept, KeyGap, RepairReport};
pub use crate::filename::LOST_DIR;

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
        next_file: number_after(dir, &files)?,
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

impl Repair<'_> {
    fn alloc(&mut self) -> Result<u64> {
        let n = self.next_file;
        self.next_file = n
            .checked_add(1)
            .ok_or_else(|| numbers_exhausted(self.dir, n))?;
        Ok(n)
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
        // A manifest that fails its checks but whose bytes still decode keeps its
        // keyspaces and the keyspace of each table it names (nothing else of it is trusted).
        let mut salvaged: Option<Manifest> = None;
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
                salvaged = std::fs::read(&manifest_path)
                    .ok()
                    .and_then(|b| Manifest::decode_ignoring_crc(&b).ok());
                if salvaged.is_some() {
                    let why = "MANIFEST damaged but decodes: its keyspaces and the keyspace \
                               of each table it names kept, the rest rebuilt as without it";
                    self.drop_file(&manifest_path, 0, None, why.to_string());
                }
                None
            }
        };
        // The keyspaces, and each table's by number, of the readable manifest or of the
        // damaged one's bytes (nothing else of those is trusted: a damaged table number
        // would lose a table, so every table file is tried as with the manifest lost).
        let base = old.as_ref().or(salvaged.as_ref());
        let keyspaces = base.map(|m| m.keyspaces.clone()).unwrap_or_default();
        let keyspace_of: HashMap<u64, u32> = salvaged
            .iter()
            .flat_map(|m| m.tables.iter().map(|t| (t.number, t.keyspace)))
            .collect();
        if let Some(m) = base {
            self.next_file = self.next_file.max(m.next_file);
        }
        // The store's filter policy; with the manifest lost, a new store's. Filters rebuilt
        // for tables no manifest describes get their keyspace's kind at its uniform rate.
        let policy = base.map_or_else(|| default_policy(DEFAULT_FILTER, DEFAULT_FPR), |m| m.policy);
        let policy_of = |id: u32| {
            let k = keyspaces.live.iter().find(|k| k.id == id);
            k.map_or(policy, |k| k.policy)
        };
        // The tables to try: the manifest's (L0 newest first, then by level, each in its
        // keyspace), or every table file at L0 from the highest number down, in the keyspace
        // a damaged manifest gives it (else the default one).
        let candidates: Vec<TableRecord> = match &old {
            Some(m) => m.tables.clone(),
            None => files
                .iter()
                .rev()
                .filter(|(_, k)| *k == Some(Numbered::Table))
                .map(|&(number, _)| {
                    let keyspace = keyspace_of.get(&number).copied().unwrap_or(0);
                    let p = policy_of(keyspace);
                    TableRecord {
                        level: 0,
                        number,
                        filter_file: 0,
                        filter_kind: p.kind(),
                        fpr: p.fpr(),
                        entries: 0,
                        tombstones: 0,
                        file_bytes: 0,
                        min_key: Vec::new(),
                        max_key: Vec::new(),
                        range: None,
                        range_tombstones: None,
                        keyspace,
                        key_hashes: None,
                    }
                })
                .collect(),
        };
        let rebuild_all_filters = old.is_none();
        let mut named: HashSet<(u64, Numbered)> = HashSet::new();
        let mut tables = Vec::new();
        for mut c in candidates {
            named.insert((c.number, Numbered::Table));
            if let Some(n) = c.range_tombstones {
                // A damaged range tombstones file is moved to lost/ and the table kept
                // without it (reported: the keys it hid may be seen again).
                let p = crate::filename::tombstones_path(dir, n);
                if let Err(e) = crate::tombstone::file::read(&p) {
                    self.drop_err(&p, &e);
                    if p.exists() {
                        self.lose(&p)?;
                    }
                    c.range_tombstones = None;
                } else {
                    named.insert((n, Numbered::Tombstones));
                }
            }
            if c.filter_file != 0 {
                named.insert((c.filter_file, Numbered::Filter));
            }
            if let Some(r) = &c.range {
                named.insert((r.file, Numbered::Range));
            }
            if let Some(n) = c.key_hashes {
                named.insert((n, Numbered::KeyHashes));
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
                Numbered::Filter | Numbered::Range | Numbered::Tombstones | Numbered::KeyHashes => {
                    !named.contains(&(n, kind))
                }
                Numbered::Wal => false,
            };
            let p = kind.path(dir, n);
            if orphan && p.exists() {
                self.lose(&p)?;
            }
        }
        // The trees the logs feed: each at its flushed-log number; with no readable
        // manifest, every log from the first (a write replayed over the table that holds it
        // changes nothing: the logs on disk are replayed in order).
        let mut keyspaces = keyspaces;
        let number_of = |n: u64| if old.is_some() { n } else { 0 };
        let trees = logs::LogTrees {
            trees: std::iter::once((0, number_of(old.as_ref().map_or(0, |m| m.log_number))))
                .chain(
                    keyspaces
                        .live
                        .iter()
                        .map(|k| (k.id, number_of(k.log_number))),
                )
                .collect(),
            next_id: keyspaces.next_id,
            all_to_default: old.is_none() && salvaged.is_none(),
        };
        let (rewritten, last_seq) = self.logs(files, &trees, base.map_or(0, |m| m.last_seq))?;
        let log_number = rewritten.unwrap_or(trees.trees[0].1);
        for k in &mut keyspaces.live {
            k.log_number = rewritten.unwrap_or(number_of(k.log_number));
            if old.is_none() {
                k.cursors.clear();
            }
        }
        let counters = FileName::Counters.path(dir);
        if counters.exists() {
            if let Err(e) = crate::lifetime::load(dir) {
                self.drop_err(&counters, &e);
                self.lose(&counters)?;
            }
        }
        while let Some((ks, level, a, b)) = levels_overlap(&tables) {
            // The manifest's levels overlap (the tables' own key ranges are used): every
            // table of that keyspace goes to L0, in the manifest's order (L0 newest first,
            // then the deeper, older levels), where overlap is allowed.
            self.drop_file(
                &manifest_path,
                0,
                None,
                format!(
                    "tables {a} and {b} of level {level} overlap; all tables of keyspace {ks} \
                     placed in L0"
                ),
            );
            for t in tables.iter_mut().filter(|t| t.keyspace == ks) {
                t.level = 0;
            }
        }
        let cursors = old.as_ref().map_or_else(Vec::new, |m| m.cursors.clone());
        let manifest = Manifest {
            next_file: self.next_file,
            log_number,
            policy,
            tables,
            cursors,
            last_seq,
            keyspaces,
            choice: old.as_ref().and_then(|m| m.choice),
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
}

/// The first level (≥ 1) of a keyspace's tree where two of `tables` overlap: (keyspace,
/// level, table, table).
fn levels_overlap(tables: &[TableRecord]) -> Option<(u32, u32, u64, u64)> {
    let mut by_level: BTreeMap<(u32, u32), Vec<&TableRecord>> = BTreeMap::new();
    for t in tables.iter().filter(|t| t.level > 0) {
        by_level.entry((t.keyspace, t.level)).or_default().push(t);
    }
    for ((ks, level), mut ts) in by_level {
        ts.sort_by(|a, b| a.min_key.cmp(&b.min_key));
        for w in ts.windows(2) {
            if let [a, b] = w {
                if a.max_key >= b.min_key {
                    return Some((ks, level, a.number, b.number));
                }
            }
        }
    }
    None
}
