//! The store: WAL + memtable in front of sorted tables guarded by memory-mapped filters.
//!
//! Lookups check the memtable, the sealing memtable, then tables newest to oldest; a table
//! is skipped when its key range excludes the key or its filter says "absent", so only a
//! "maybe" costs an index search and one data-block read.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockWriteGuard};

use crate::counters::Sharded;
use crate::error::{Error, Result};
use crate::filter::{check_fpr, FilterKind};
use crate::hash::key_hash;
use crate::io::{Fs, RealFs};
use crate::manifest::{Manifest, TableRecord};
use crate::merge::{MergeIter, Source, TableIter};
use crate::table::block::Entry;
use crate::table::{write_filter_file, MappedFilter, SortedEntries, Table, TableCounters};
use crate::wal::{replay_file, WalWriter, WriteBatch};

/// When WAL appends are fsynced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Every write is fsynced before it returns (the command line's choice).
    EveryWrite,
    /// Writes reach the operating system before they return (they survive a process crash)
    /// and are fsynced at `flush`, `sync` and drop (the library default).
    OnFlush,
    /// Writes collect in a 1 MiB buffer that reaches the operating system when full and at
    /// `flush`, `sync` and drop: fastest for bulk loads, but a process crash can lose the
    /// unwritten buffer (up to 1 MiB of acknowledged writes). fsynced like `OnFlush`.
    Buffered,
}

/// How a store is opened.
#[derive(Clone, Debug)]
pub struct Options {
    /// Filter for tables sealed from now on; `None` uses the store's default (the choice made
    /// when it was created, `blocked-bloom` if none was made).
    pub filter: Option<FilterKind>,
    /// Target false-positive rate for new filters; `None` uses the store's default (1 %).
    pub fpr: Option<f64>,
    /// The memtable is sealed into a table once it holds about this many bytes.
    pub memtable_bytes: usize,
    /// When WAL appends are fsynced.
    pub sync: SyncPolicy,
    /// Merge all tables after a flush that leaves more than this many; `None` turns the
    /// automatic policy off (`compact()` still works).
    pub compaction_trigger: Option<usize>,
    /// Create the directory and an empty store when missing.
    pub create_if_missing: bool,
    /// Read data blocks in place from a read-only map of each table file instead of with
    /// `pread` (off by default). Faster on a warm cache: no system call and no copy (about
    /// 20–30 % of a present-key `get`). Every read is still counted and its CRC checked.
    /// The price is the usual one of mapped files: an I/O error while reading a block (a
    /// failing disk, or a table file truncated behind the store's back) arrives as a `SIGBUS`
    /// that ends the process, where `pread` returns an error. The maps are advised for random
    /// access (a point lookup on a cold table reads only its block's page), so a scan of a
    /// table that is not in the page cache also reads one page at a time, without readahead.
    pub mmap_reads: bool,
    /// The file system writes go through (a fault-injecting one in tests).
    pub fs: Arc<dyn Fs>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            filter: None,
            fpr: None,
            memtable_bytes: 64 << 20,
            sync: SyncPolicy::OnFlush,
            compaction_trigger: Some(8),
            create_if_missing: true,
            mmap_reads: false,
            fs: Arc::new(RealFs),
        }
    }
}

/// Default filter of a new store.
pub const DEFAULT_FILTER: FilterKind = FilterKind::BlockedBloom;
/// Default target false-positive rate of a new store.
pub const DEFAULT_FPR: f64 = 0.01;

type Mem = crate::memtable::Memtable;

/// A live table with its current filter and counters.
#[derive(Debug)]
pub struct TableHandle {
    /// The table file.
    pub table: Arc<Table>,
    /// Its filter, if it has one that opened and checked out.
    pub filter: Option<MappedFilter>,
    /// The manifest's record of this table.
    pub record: TableRecord,
    /// Counters since this filter was attached.
    pub counters: TableCounters,
    /// Why a recorded filter is not in use (damaged or missing), if so.
    pub filter_problem: Option<String>,
    /// [`prefix8`] of the table's smallest and largest key.
    lo: u64,
    hi: u64,
}

/// The first 8 bytes of `key`, zero-padded, as a big-endian number. `prefix8(a) <
/// prefix8(b)` implies `a < b` (the first differing byte decides, and a zero pad stands for
/// a key that ended first), so a range check needs a byte comparison only on equal prefixes.
#[inline]
fn prefix8(key: &[u8]) -> u64 {
    if let Some(b) = key.first_chunk::<8>() {
        return u64::from_be_bytes(*b);
    }
    // Shorter keys: two or three overlapping loads, no loop (short keys are common, e.g.
    // the hyphenation dictionary's words). Byte j belongs at bits 56 - 8j.
    let n = key.len();
    if n >= 4 {
        let word = |i: usize| {
            u64::from(u32::from_be_bytes([
                key[i],
                key[i + 1],
                key[i + 2],
                key[i + 3],
            ]))
        };
        (word(0) << 32) | (word(n - 4) << (64 - 8 * n))
    } else if n > 0 {
        let byte = |j: usize| u64::from(key[j]) << (56 - 8 * j);
        byte(0) | byte(n / 2) | byte(n - 1)
    } else {
        0
    }
}

/// `min <= key <= max`, given `lo = prefix8(min)`, `hi = prefix8(max)`, `p = prefix8(key)`.
#[inline]
fn range_contains(min: &[u8], max: &[u8], lo: u64, hi: u64, key: &[u8], p: u64) -> bool {
    if p < lo || p > hi {
        return false;
    }
    if p > lo && p < hi {
        return true;
    }
    key >= min && key <= max
}

enum Probe {
    Skip,
    Found(Option<Vec<u8>>),
}

impl TableHandle {
    fn new(
        table: Arc<Table>,
        filter: Option<MappedFilter>,
        record: TableRecord,
        filter_problem: Option<String>,
    ) -> TableHandle {
        let (lo, hi) = (prefix8(&table.meta.min_key), prefix8(&table.meta.max_key));
        TableHandle {
            table,
            filter,
            record,
            counters: TableCounters::default(),
            filter_problem,
            lo,
            hi,
        }
    }

    /// Whether `key` (with `p = prefix8(key)`) lies inside the table's key range.
    #[inline]
    fn in_range(&self, key: &[u8], p: u64) -> bool {
        let m = &self.table.meta;
        range_contains(&m.min_key, &m.max_key, self.lo, self.hi, key, p)
    }

    fn open(dir: &Path, record: TableRecord, mmap_reads: bool) -> Result<TableHandle> {
        let path = table_path(dir, record.number);
        let table = Arc::new(Table::open(&path, record.number, mmap_reads)?);
        let (filter, filter_problem) = if record.filter_file == 0 {
            (None, None)
        } else {
            match MappedFilter::open(&filter_path(dir, record.filter_file), record.filter_file) {
                Ok(f) => (Some(f), None),
                // A damaged filter must never hide a key: the table is read without it.
                Err(e) => (None, Some(e.to_string())),
            }
        };
        Ok(TableHandle::new(table, filter, record, filter_problem))
    }

    fn probe(&self, key: &[u8], p: u64, hash: u64) -> Result<Probe> {
        if !self.in_range(key, p) {
            return Ok(Probe::Skip);
        }
        let c = &self.counters;
        if let Some(f) = &self.filter {
            if !f.may_contain(hash) {
                c.add_negatives(1);
                return Ok(Probe::Skip);
            }
            c.add_positives(1);
        }
        match self.table.get(key, c)? {
            Some(v) => Ok(Probe::Found(v)),
            None => {
                if self.filter.is_some() {
                    c.add_false_positives(1);
                } else {
                    c.add_unfiltered_misses(1);
                }
                Ok(Probe::Skip)
            }
        }
    }
}

/// Looks `key` up in `tables`, newest first (`None`: in none of them).
fn find_in_tables(tables: &[Arc<TableHandle>], key: &[u8], hash: u64) -> Result<Option<Vec<u8>>> {
    let p = prefix8(key);
    // Pass 1: touch every candidate filter's cache line(s). These loads do not depend on
    // each other, so their cache misses overlap; pass 2 then finds its lines in cache
    // instead of taking one miss after another.
    if tables.len() > 1 {
        let mut acc = 0u8;
        for t in tables {
            if let Some(f) = &t.filter {
                if t.in_range(key, p) {
                    acc ^= f.touch(hash);
                }
            }
        }
        std::hint::black_box(acc);
    }
    for t in tables {
        if let Probe::Found(v) = t.probe(key, p, hash)? {
            return Ok(v);
        }
    }
    Ok(None)
}

/// See [`Store::state_mut`].
struct StateMut<'a> {
    guard: RwLockWriteGuard<'a, State>,
    version: &'a AtomicU64,
}

impl std::ops::Deref for StateMut<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.guard
    }
}

impl std::ops::DerefMut for StateMut<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

impl Drop for StateMut<'_> {
    fn drop(&mut self) {
        // Still under the write lock: a reader that refreshes under the read lock sees the
        // state and its version together.
        self.version.fetch_add(1, SeqCst);
    }
}

/// Many lookups from one thread without the store's lock (see [`Store::reader`]).
pub struct Reader<'s> {
    store: &'s Store,
    snap: RefCell<Option<ReadSnapshot>>,
}

struct ReadSnapshot {
    version: u64,
    tables: Arc<Vec<Arc<TableHandle>>>,
    /// No memtable entries: lookups go straight to the tables.
    tables_only: bool,
}

impl std::fmt::Debug for Reader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("dir", &self.store.dir)
            .finish_non_exhaustive()
    }
}

impl Reader<'_> {
    /// Looks `key` up (see [`Store::get`]).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with_hash(key, key_hash(key))
    }

    /// Looks `key` up with its precomputed [`key_hash`] (which `hash` must be; see
    /// [`Store::get_with_hash`]).
    pub fn get_with_hash(&self, key: &[u8], hash: u64) -> Result<Option<Vec<u8>>> {
        let store = self.store;
        let version = store.version.load(SeqCst);
        let mut snap = self.snap.borrow_mut();
        let fresh = match &*snap {
            Some(s) => s.version == version,
            None => false,
        };
        if !fresh {
            let st = store.state.read().unwrap_or_else(|p| p.into_inner());
            *snap = Some(ReadSnapshot {
                version: store.version.load(SeqCst),
                tables: st.tables.clone(),
                tables_only: st.mem.is_empty() && st.imm.is_none(),
            });
        }
        match &*snap {
            Some(s) if s.tables_only => {
                store.lookups.add(0, 1);
                find_in_tables(&s.tables, key, hash)
            }
            _ => store.get_with_hash(key, hash),
        }
    }
}

struct State {
    mem: Mem,
    mem_bytes: usize,
    imm: Option<Arc<Mem>>,
    tables: Arc<Vec<Arc<TableHandle>>>,
}

struct Writer {
    wal: WalWriter,
    manifest: Manifest,
    record: Vec<u8>,
}

#[derive(Default)]
struct Retired {
    negatives: AtomicU64,
    positives: AtomicU64,
    false_positives: AtomicU64,
    unfiltered_misses: AtomicU64,
    block_reads: AtomicU64,
    bytes_read: AtomicU64,
}

/// A key-value store in one directory. `Send + Sync`: share it with `Arc` across threads.
pub struct Store {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    opts: Options,
    kind: FilterKind,
    fpr: f64,
    _lock: File,
    state: RwLock<State>,
    writer: Mutex<Writer>,
    maintenance: Mutex<()>,
    poisoned: AtomicBool,
    lookups: Sharded<1>,
    retired: Retired,
    /// Bumped (with the state write lock held) by every change to `state`; see [`Reader`].
    version: AtomicU64,
}

fn table_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.sst"))
}
fn filter_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.filter"))
}
fn wal_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.wal"))
}

/// The numbered files of a directory: (number, extension).
fn numbered_files(dir: &Path) -> Result<Vec<(u64, String)>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some((num, ext)) = name.split_once('.') {
            if let Ok(n) = num.parse::<u64>() {
                out.push((n, ext.to_string()));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn lock_dir(dir: &Path) -> Result<File> {
    let path = dir.join("LOCK");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    // The lock belongs to the open file description, so a second open of the same directory
    // in this process is refused just like one from another process.
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked(dir.to_path_buf())),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io(path, e)),
    }
}

impl Store {
    /// Opens (or creates) the store in `dir`, replaying its WAL.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Store> {
        let dir = dir.as_ref().to_path_buf();
        if let Some(f) = opts.fpr {
            check_fpr(f)?;
        }
        match fs::metadata(&dir) {
            Ok(m) if !m.is_dir() => {
                return Err(Error::InvalidArgument(format!(
                    "{} exists and is not a directory",
                    dir.display()
                )))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && opts.create_if_missing => {
                fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::io(&dir, e));
            }
            Err(e) => return Err(Error::io(&dir, e)),
        }
        let lock = lock_dir(&dir)?;
        let fs = opts.fs.clone();
        let files = numbered_files(&dir)?;
        let mut manifest = match Manifest::load(&dir)? {
            Some(m) => m,
            None => {
                if files.iter().any(|(_, ext)| ext == "sst" || ext == "wal") {
                    return Err(Error::corrupt(0, "data files present but no MANIFEST")
                        .in_file(dir.join("MANIFEST"), 0));
                }
                if !opts.create_if_missing {
                    return Err(Error::InvalidArgument(format!(
                        "no store at {}",
                        dir.display()
                    )));
                }
                let m = Manifest {
                    next_file: 1,
                    log_number: 0,
                    default_kind: opts.filter.unwrap_or(DEFAULT_FILTER),
                    default_fpr: opts.fpr.unwrap_or(DEFAULT_FPR),
                    tables: Vec::new(),
                };
                m.store(&*fs, &dir)?;
                m
            }
        };
        let kind = opts.filter.unwrap_or(manifest.default_kind);
        let fpr = opts.fpr.unwrap_or(manifest.default_fpr);
        check_fpr(fpr)?;
        // Never reuse a number that a file (even an orphan) already has.
        let max_seen = files.iter().map(|(n, _)| *n).max().unwrap_or(0);
        manifest.next_file = manifest.next_file.max(max_seen + 1);

        let mut tables = Vec::with_capacity(manifest.tables.len());
        for r in &manifest.tables {
            tables.push(Arc::new(TableHandle::open(
                &dir,
                r.clone(),
                opts.mmap_reads,
            )?));
        }
        let mut mem = Mem::new();
        let mut mem_bytes = 0;
        // Logs that hold no record (every open starts a new log) are removed below, so
        // short-lived handles, such as the command line's, do not pile up empty files.
        let mut empty_wals = HashSet::new();
        for (n, ext) in &files {
            if ext == "wal" && *n >= manifest.log_number {
                let end = replay_file(&wal_path(&dir, *n), |k, v| {
                    mem_bytes += entry_bytes(&k, v.as_deref());
                    mem.insert(&k, v.as_deref());
                })?;
                if end.records == 0 {
                    empty_wals.insert(*n);
                }
            }
        }
        // Remove what no manifest names: unfinished outputs and obsolete logs.
        let live: HashSet<u64> = manifest
            .tables
            .iter()
            .flat_map(|t| [t.number, t.filter_file])
            .collect();
        for (n, ext) in &files {
            let dead = match ext.as_str() {
                "sst" | "filter" => !live.contains(n),
                "wal" => *n < manifest.log_number || empty_wals.contains(n),
                _ => false,
            };
            if dead {
                let _ = fs.remove(&dir.join(format!("{n:06}.{ext}")));
            }
        }
        let _ = fs.remove(&dir.join("MANIFEST.tmp"));

        let wal_no = manifest.next_file;
        manifest.next_file += 1;
        let mut wal = WalWriter::create(&*fs, &wal_path(&dir, wal_no))?;
        wal.set_buffered(opts.sync == SyncPolicy::Buffered);
        fs.sync_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        let store = Store {
            dir,
            fs,
            opts,
            kind,
            fpr,
            _lock: lock,
            state: RwLock::new(State {
                mem,
                mem_bytes,
                imm: None,
                tables: Arc::new(tables),
            }),
            writer: Mutex::new(Writer {
                wal,
                manifest,
                record: Vec::new(),
            }),
            maintenance: Mutex::new(()),
            poisoned: AtomicBool::new(false),
            lookups: Sharded::default(),
            version: AtomicU64::new(0),
            retired: Retired::default(),
        };
        Ok(store)
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The filter kind and target rate used for tables sealed by this handle.
    pub fn filter(&self) -> (FilterKind, f64) {
        (self.kind, self.fpr)
    }

    /// The filter kind and rate recorded when the store was created.
    pub fn default_filter(&self) -> (FilterKind, f64) {
        let w = self.lock_writer();
        (w.manifest.default_kind, w.manifest.default_fpr)
    }

    /// Write access to the state; the version is bumped when the guard is dropped.
    fn state_mut(&self) -> StateMut<'_> {
        StateMut {
            guard: self.state.write().unwrap_or_else(|p| p.into_inner()),
            version: &self.version,
        }
    }

    /// A reader for many lookups from one thread: it keeps the list of tables it last saw
    /// and checks with one atomic load per lookup that nothing changed, instead of taking
    /// the store's lock for each [`get`](Self::get). Lookups see every write that completed
    /// before them, as with `get`. While the memtable holds unflushed entries, a reader's
    /// lookups take the same path as `get`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = filterstore::Store::open(dir.path(), Default::default())?;
    /// store.put(b"apple", b"red")?;
    /// store.flush()?;
    /// let reader = store.reader();
    /// assert_eq!(reader.get(b"apple")?, Some(b"red".to_vec()));
    /// assert_eq!(reader.get(b"pear")?, None);
    /// store.delete(b"apple")?; // seen by the same reader
    /// assert_eq!(reader.get(b"apple")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reader(&self) -> Reader<'_> {
        Reader {
            store: self,
            snap: RefCell::new(None),
        }
    }

    fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check_writable(&self) -> Result<()> {
        if self.poisoned.load(Relaxed) {
            Err(Error::Poisoned)
        } else {
            Ok(())
        }
    }

    fn poison<T>(&self, r: Result<T>) -> Result<T> {
        if r.is_err() {
            self.poisoned.store(true, Relaxed);
        }
        r
    }

    /// Stores `value` under `key`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.apply(&[(key, Some(value))])
    }

    /// Removes `key` (a no-op for an absent key, but still logged).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.apply(&[(key, None)])
    }

    /// Applies a batch atomically: after a crash either all of it or none of it is there.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        let ops: Vec<(&[u8], Option<&[u8]>)> = batch
            .ops
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        self.apply(&ops)
    }

    fn apply(&self, ops: &[(&[u8], Option<&[u8]>)]) -> Result<()> {
        self.check_writable()?;
        for (k, v) in ops {
            if k.len() > crate::MAX_KEY_LEN {
                return Err(Error::TooLarge {
                    what: "key",
                    len: k.len(),
                    max: crate::MAX_KEY_LEN,
                });
            }
            if let Some(v) = v {
                if v.len() > crate::MAX_VALUE_LEN {
                    return Err(Error::TooLarge {
                        what: "value",
                        len: v.len(),
                        max: crate::MAX_VALUE_LEN,
                    });
                }
            }
        }
        if ops.is_empty() {
            return Ok(());
        }
        let mut guard = self.lock_writer();
        let w = &mut *guard;
        self.check_writable()?;
        crate::wal::encode_record(&mut w.record, ops.len(), ops.iter().copied())?;
        let sync = self.opts.sync == SyncPolicy::EveryWrite;
        let r = w.wal.append(&w.record, sync);
        self.poison(r)?;
        let full = {
            let mut st = self.state_mut();
            for (k, v) in ops {
                st.mem_bytes += entry_bytes(k, *v);
                st.mem.insert(k, *v);
            }
            st.mem_bytes >= self.opts.memtable_bytes
        };
        if full {
            self.flush_locked(w)?;
            drop(guard);
            self.maybe_compact()?;
        }
        Ok(())
    }

    /// fsyncs the WAL: every write so far becomes durable.
    pub fn sync(&self) -> Result<()> {
        self.check_writable()?;
        let mut w = self.lock_writer();
        let r = w.wal.sync();
        self.poison(r)
    }

    /// Seals the memtable into a table (filter built in parallel) and makes it durable.
    pub fn flush(&self) -> Result<()> {
        self.check_writable()?;
        let mut w = self.lock_writer();
        self.flush_locked(&mut w)?;
        drop(w);
        self.maybe_compact()
    }

    fn flush_locked(&self, w: &mut Writer) -> Result<()> {
        let imm = {
            let mut st = self.state_mut();
            if st.mem.is_empty() {
                return Ok(());
            }
            let imm = Arc::new(std::mem::take(&mut st.mem));
            st.mem_bytes = 0;
            st.imm = Some(imm.clone());
            imm
        };
        let r = self.seal(w, imm);
        self.poison(r)
    }

    fn seal(&self, w: &mut Writer, imm: Arc<Mem>) -> Result<()> {
        // New writes go to a fresh log; the old one stays live until the table is durable.
        let wal_no = w.manifest.next_file;
        let table_no = wal_no + 1;
        let filter_no = if self.kind == FilterKind::None {
            0
        } else {
            wal_no + 2
        };
        w.manifest.next_file += 3;
        // The old log must hold every write before the memtable it backs is sealed.
        w.wal.write_out()?;
        w.wal = WalWriter::create(&*self.fs, &wal_path(&self.dir, wal_no))?;
        w.wal.set_buffered(self.opts.sync == SyncPolicy::Buffered);
        let (entries, hashes) = (imm.sorted(), imm.hashes());
        let Some(record) = self.write_table(table_no, filter_no, &entries, Some(&hashes))? else {
            return Ok(());
        };
        let handle = Arc::new(TableHandle::open(
            &self.dir,
            record.clone(),
            self.opts.mmap_reads,
        )?);
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| Error::io(&self.dir, e))?;
        let mut next = w.manifest.clone();
        next.tables.insert(0, record);
        next.log_number = wal_no;
        next.store(&*self.fs, &self.dir)?;
        w.manifest = next;
        {
            let mut st = self.state_mut();
            let mut tables = Vec::with_capacity(st.tables.len() + 1);
            tables.push(handle);
            tables.extend(st.tables.iter().cloned());
            st.tables = Arc::new(tables);
            st.imm = None;
        }
        for (n, ext) in numbered_files(&self.dir)? {
            if ext == "wal" && n < wal_no {
                let _ = self.fs.remove(&wal_path(&self.dir, n));
            }
        }
        Ok(())
    }

    /// Writes a table (and its filter, built in parallel) from sorted entries and returns
    /// its manifest record; `None` when there were no entries (no file is left behind).
    /// `hashes`, when given, are the entries' [`key_hash`]es, in any order.
    fn write_table<E: SortedEntries + ?Sized>(
        &self,
        table_no: u64,
        filter_no: u64,
        entries: &E,
        hashes: Option<&[u64]>,
    ) -> Result<Option<TableRecord>> {
        if entries.is_empty() {
            return Ok(None);
        }
        let tpath = table_path(&self.dir, table_no);
        let fpath = filter_path(&self.dir, filter_no);
        let (t, f) = rayon::join(
            || crate::table::write_table(&*self.fs, &tpath, entries),
            || -> Result<_> {
                let computed;
                let hashes = match hashes {
                    Some(h) => h,
                    None => {
                        use rayon::prelude::*;
                        computed = (0..entries.len())
                            .into_par_iter()
                            .map(|i| key_hash(entries.entry(i).0))
                            .collect::<Vec<u64>>();
                        &computed
                    }
                };
                write_filter_file(&*self.fs, &fpath, self.kind, self.fpr, hashes)
            },
        );
        let (meta, filter_bytes) = (t?, f?);
        Ok(Some(TableRecord {
            number: table_no,
            filter_file: if filter_bytes.is_some() { filter_no } else { 0 },
            filter_kind: if filter_bytes.is_some() {
                self.kind
            } else {
                FilterKind::None
            },
            fpr: self.fpr,
            entries: meta.entries,
            tombstones: meta.tombstones,
            file_bytes: meta.file_bytes,
            min_key: meta.min_key,
            max_key: meta.max_key,
        }))
    }

    /// Looks `key` up.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with_hash(key, key_hash(key))
    }

    /// Looks `key` up with its precomputed [`key_hash`] (hash once, probe every table).
    ///
    /// `hash` must be `key_hash(key)`: the memtable's index and the filters are searched
    /// with it, so any other value can miss a key that is there.
    pub fn get_with_hash(&self, key: &[u8], hash: u64) -> Result<Option<Vec<u8>>> {
        self.lookups.add(0, 1);
        let tables = {
            let st = self.state.read().unwrap_or_else(|p| p.into_inner());
            if let Some(v) = st.mem.get_hashed(key, hash) {
                return Ok(v.map(<[u8]>::to_vec));
            }
            if let Some(v) = st.imm.as_ref().and_then(|m| m.get_hashed(key, hash)) {
                return Ok(v.map(<[u8]>::to_vec));
            }
            st.tables.clone()
        };
        find_in_tables(&tables, key, hash)
    }

    /// Iterates over the keys in `range`, in order, newest values only, tombstones hidden.
    pub fn scan<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> Scan {
        let own = |b: Bound<&K>| match b {
            Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        self.scan_bounds(own(range.start_bound()), own(range.end_bound()), None)
    }

    /// Iterates over the keys that start with `prefix`.
    pub fn scan_prefix(&self, prefix: &[u8]) -> Scan {
        let end = prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        self.scan_bounds(Bound::Included(prefix.to_vec()), end, None)
    }

    fn scan_bounds(
        &self,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        counters: Option<Arc<TableCounters>>,
    ) -> Scan {
        let range = (start.clone(), end.clone());
        if range_is_empty(&start, &end) {
            // BTreeMap::range panics on an inverted range; there is nothing to return.
            return Scan {
                merge: MergeIter::new(Vec::new()),
                end,
                done: true,
            };
        }
        let st = self.state.read().unwrap_or_else(|p| p.into_inner());
        let mut sources: Vec<Source> = Vec::new();
        let snap = |m: &Mem| -> Source {
            let v: Vec<Entry> = m
                .range((
                    range.0.as_ref().map(Vec::as_slice),
                    range.1.as_ref().map(Vec::as_slice),
                ))
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect();
            Box::new(v.into_iter().map(Ok))
        };
        sources.push(snap(&st.mem));
        if let Some(imm) = &st.imm {
            sources.push(snap(imm));
        }
        for t in st.tables.iter() {
            sources.push(Box::new(TableIter::new(
                t.clone(),
                start.clone(),
                counters.clone(),
            )));
        }
        Scan {
            merge: MergeIter::new(sources),
            end,
            done: false,
        }
    }

    /// Merges all tables into one, dropping overwritten values and tombstones, then swaps
    /// the manifest atomically and removes the old files. Readers are never blocked.
    pub fn compact(&self) -> Result<()> {
        self.check_writable()?;
        let _m = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        let inputs = self
            .state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .tables
            .clone();
        let has_tombstones = inputs.iter().any(|t| t.record.tombstones > 0);
        if inputs.len() < 2 && !has_tombstones {
            return Ok(());
        }
        let (table_no, filter_no) = {
            let mut w = self.lock_writer();
            let n = w.manifest.next_file;
            w.manifest.next_file += 2;
            (
                n,
                if self.kind == FilterKind::None {
                    0
                } else {
                    n + 1
                },
            )
        };
        // The inputs are all tables, so the output is the oldest level: tombstones can go.
        let scratch = Arc::new(TableCounters::default());
        let sources: Vec<Source> = inputs
            .iter()
            .map(|t| {
                Box::new(TableIter::new(
                    t.clone(),
                    Bound::Unbounded,
                    Some(scratch.clone()),
                )) as Source
            })
            .collect();
        let mut live = Vec::new();
        for e in MergeIter::new(sources) {
            let (k, v) = e?;
            if let Some(v) = v {
                live.push((k, v));
            }
        }
        let entries: Vec<(&[u8], Option<&[u8]>)> = live
            .iter()
            .map(|(k, v)| (k.as_slice(), Some(v.as_slice())))
            .collect();
        let built = self.write_table(table_no, filter_no, entries.as_slice(), None);
        drop(entries);
        let record = match built {
            Ok(x) => x,
            Err(e) => {
                let _ = self.fs.remove(&table_path(&self.dir, table_no));
                let _ = self.fs.remove(&filter_path(&self.dir, filter_no));
                return Err(e);
            }
        };
        drop(live);
        let input_numbers: HashSet<u64> = inputs.iter().map(|t| t.record.number).collect();
        let new_handle = match record {
            Some(record) => Some(Arc::new(TableHandle::open(
                &self.dir,
                record,
                self.opts.mmap_reads,
            )?)),
            None => None,
        };
        self.install(&input_numbers, new_handle.as_ref(), |_| None)?;
        for t in inputs.iter() {
            self.retire(t, true);
        }
        Ok(())
    }

    /// Replaces tables in the manifest and in memory under the writer lock: the tables in
    /// `remove` are dropped and `add` goes where the oldest of them was (it holds their data);
    /// `replace` may swap a remaining handle for another (refilter).
    fn install(
        &self,
        remove: &HashSet<u64>,
        add: Option<&Arc<TableHandle>>,
        replace: impl Fn(&Arc<TableHandle>) -> Option<Arc<TableHandle>>,
    ) -> Result<()> {
        let mut w = self.lock_writer();
        let st_tables = self
            .state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .tables
            .clone();
        let mut tables: Vec<Arc<TableHandle>> = Vec::with_capacity(st_tables.len() + 1);
        for t in st_tables.iter() {
            if remove.contains(&t.record.number) {
                continue;
            }
            tables.push(replace(t).unwrap_or_else(|| t.clone()));
        }
        if let Some(a) = add {
            tables.push(a.clone());
        }
        let mut next = w.manifest.clone();
        next.tables = tables.iter().map(|t| t.record.clone()).collect();
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| Error::io(&self.dir, e))?;
        let r = next.store(&*self.fs, &self.dir);
        self.poison(r)?;
        w.manifest = next;
        self.state_mut().tables = Arc::new(tables);
        Ok(())
    }

    /// A handle leaves the live set (after a durable manifest no longer names its files):
    /// its counters go into the store-wide totals and its filter file (and, with
    /// `table_file`, its table file) is removed.
    fn retire(&self, t: &TableHandle, table_file: bool) {
        if table_file {
            let _ = self.fs.remove(&table_path(&self.dir, t.record.number));
        }
        if t.record.filter_file != 0 {
            let _ = self
                .fs
                .remove(&filter_path(&self.dir, t.record.filter_file));
        }
        let (c, r) = (&t.counters, &self.retired);
        r.negatives.fetch_add(c.negatives(), Relaxed);
        r.positives.fetch_add(c.positives(), Relaxed);
        r.false_positives.fetch_add(c.false_positives(), Relaxed);
        r.unfiltered_misses
            .fetch_add(c.unfiltered_misses(), Relaxed);
        r.block_reads.fetch_add(c.block_reads(), Relaxed);
        r.bytes_read.fetch_add(c.bytes_read(), Relaxed);
    }

    fn maybe_compact(&self) -> Result<()> {
        let n = self
            .state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .tables
            .len();
        match self.opts.compaction_trigger {
            Some(t) if n > t => self.compact(),
            _ => Ok(()),
        }
    }

    /// Rebuilds the filter of every table as `kind` at `fpr` without rewriting any data:
    /// new filter files are written, the manifest is swapped atomically, old filters removed.
    pub fn refilter(&self, kind: FilterKind, fpr: f64) -> Result<()> {
        check_fpr(fpr)?;
        self.check_writable()?;
        let _m = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        let tables = self
            .state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .tables
            .clone();
        let mut fresh: Vec<(u64, Arc<TableHandle>)> = Vec::new();
        let cleanup = |fresh: &[(u64, Arc<TableHandle>)]| {
            for (_, h) in fresh {
                if h.record.filter_file != 0 {
                    let _ = self
                        .fs
                        .remove(&filter_path(&self.dir, h.record.filter_file));
                }
            }
        };
        for t in tables.iter() {
            let r = self.rebuild_filter(t, kind, fpr);
            match r {
                Ok(h) => fresh.push((t.record.number, h)),
                Err(e) => {
                    cleanup(&fresh);
                    return Err(e);
                }
            }
        }
        let replace = |t: &Arc<TableHandle>| {
            fresh
                .iter()
                .find(|(n, _)| *n == t.record.number)
                .map(|(_, h)| h.clone())
        };
        if let Err(e) = self.install(&HashSet::new(), None, replace) {
            // A failed manifest replacement (the store is poisoned then) may have renamed the
            // new manifest into place: the filter files it names must stay.
            if !self.poisoned.load(Relaxed) {
                cleanup(&fresh);
            }
            return Err(e);
        }
        for t in tables.iter() {
            self.retire(t, false);
        }
        Ok(())
    }

    fn rebuild_filter(
        &self,
        t: &Arc<TableHandle>,
        kind: FilterKind,
        fpr: f64,
    ) -> Result<Arc<TableHandle>> {
        let scratch = Arc::new(TableCounters::default());
        let mut keys = Vec::with_capacity(t.record.entries as usize);
        for e in TableIter::new(t.clone(), Bound::Unbounded, Some(scratch)) {
            keys.push(crate::hash::key_hash(&e?.0));
        }
        let filter_no = if kind == FilterKind::None {
            0
        } else {
            let mut w = self.lock_writer();
            w.manifest.next_file += 1;
            w.manifest.next_file - 1
        };
        let bytes = write_filter_file(
            &*self.fs,
            &filter_path(&self.dir, filter_no),
            kind,
            fpr,
            &keys,
        )?;
        let mut record = t.record.clone();
        record.filter_file = if bytes.is_some() { filter_no } else { 0 };
        record.filter_kind = kind;
        record.fpr = fpr;
        let filter = match bytes {
            Some(_) => Some(MappedFilter::open(
                &filter_path(&self.dir, filter_no),
                filter_no,
            )?),
            None => None,
        };
        Ok(Arc::new(TableHandle::new(
            t.table.clone(),
            filter,
            record,
            None,
        )))
    }

    /// Store-wide and per-table counters and sizes.
    pub fn stats(&self) -> Stats {
        let st = self.state.read().unwrap_or_else(|p| p.into_inner());
        let r = &self.retired;
        let mut s = Stats {
            lookups: self.lookups.get(0),
            memtable_entries: st.mem.len() as u64 + st.imm.as_ref().map_or(0, |m| m.len() as u64),
            memtable_bytes: st.mem_bytes as u64,
            filter_negatives: r.negatives.load(Relaxed),
            filter_positives: r.positives.load(Relaxed),
            false_positives: r.false_positives.load(Relaxed),
            unfiltered_reads: r.unfiltered_misses.load(Relaxed),
            data_block_reads: r.block_reads.load(Relaxed),
            bytes_read: r.bytes_read.load(Relaxed),
            tables: Vec::new(),
        };
        for t in st.tables.iter() {
            let c = &t.counters;
            let ts = TableStats {
                number: t.record.number,
                filter_kind: if t.filter.is_some() {
                    t.record.filter_kind
                } else {
                    FilterKind::None
                },
                target_fpr: t.record.fpr,
                keys: t.record.entries,
                tombstones: t.record.tombstones,
                file_bytes: t.record.file_bytes,
                filter_bytes: t.filter.as_ref().map_or(0, |f| f.bytes()),
                theoretical_fpr: t.filter.as_ref().map_or(1.0, |f| f.theoretical_fpr()),
                min_key: t.record.min_key.clone(),
                max_key: t.record.max_key.clone(),
                filter_negatives: c.negatives(),
                filter_positives: c.positives(),
                false_positives: c.false_positives(),
                data_block_reads: c.block_reads(),
                bytes_read: c.bytes_read(),
                filter_problem: t.filter_problem.clone(),
            };
            s.filter_negatives += ts.filter_negatives;
            s.filter_positives += ts.filter_positives;
            s.false_positives += ts.false_positives;
            s.unfiltered_reads += c.unfiltered_misses();
            s.data_block_reads += ts.data_block_reads;
            s.bytes_read += ts.bytes_read;
            s.tables.push(ts);
        }
        s
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if !self.poisoned.load(Relaxed) {
            let _ = self.lock_writer().wal.sync();
        }
    }
}

fn entry_bytes(k: &[u8], v: Option<&[u8]>) -> usize {
    k.len() + v.map_or(0, |v| v.len()) + 48
}

/// True when no key lies between `start` and `end`.
fn range_is_empty(start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
            s >= e
        }
        _ => false,
    }
}

/// The smallest key greater than every key starting with `prefix`, if any (`None`: every
/// key from `prefix` on starts with it, e.g. for an empty or all-`0xff` prefix).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xff {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

/// An iterator over a key range; items are `Result`s so a damaged block is reported.
pub struct Scan {
    merge: MergeIter,
    end: Bound<Vec<u8>>,
    done: bool,
}

impl Iterator for Scan {
    type Item = Result<(Vec<u8>, Vec<u8>)>;
    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            match self.merge.next()? {
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Ok((k, v)) => {
                    let past = match &self.end {
                        Bound::Included(e) => k > *e,
                        Bound::Excluded(e) => k >= *e,
                        Bound::Unbounded => false,
                    };
                    if past {
                        self.done = true;
                        return None;
                    }
                    if let Some(v) = v {
                        return Some(Ok((k, v)));
                    }
                }
            }
        }
        None
    }
}

/// Counters and sizes of the whole store.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// `get` calls.
    pub lookups: u64,
    /// Entries in the memtables.
    pub memtable_entries: u64,
    /// Approximate bytes in the active memtable.
    pub memtable_bytes: u64,
    /// Filter answers "absent" (each one a data-block read avoided).
    pub filter_negatives: u64,
    /// Filter answers "maybe".
    pub filter_positives: u64,
    /// "Maybe" answers for keys the table did not hold.
    pub false_positives: u64,
    /// Reads of tables without a filter that found nothing.
    pub unfiltered_reads: u64,
    /// Data blocks read (lookups and scans).
    pub data_block_reads: u64,
    /// Bytes read from table files.
    pub bytes_read: u64,
    /// Live tables, newest first.
    pub tables: Vec<TableStats>,
}

impl Stats {
    /// Filter probes (negatives + positives).
    pub fn filter_probes(&self) -> u64 {
        self.filter_negatives + self.filter_positives
    }
    /// false positives / (false positives + negatives); `None` before any absent probe.
    pub fn observed_fpr(&self) -> Option<f64> {
        let d = self.false_positives + self.filter_negatives;
        (d > 0).then(|| self.false_positives as f64 / d as f64)
    }
    /// Keys in tables (tombstones included).
    pub fn table_keys(&self) -> u64 {
        self.tables.iter().map(|t| t.keys).sum()
    }
}

/// Counters and sizes of one table.
#[derive(Clone, Debug)]
pub struct TableStats {
    /// Table file number.
    pub number: u64,
    /// Filter kind in use (`none` when absent or damaged).
    pub filter_kind: FilterKind,
    /// Target false-positive rate.
    pub target_fpr: f64,
    /// Entries, tombstones included.
    pub keys: u64,
    /// Tombstones.
    pub tombstones: u64,
    /// Table file size.
    pub file_bytes: u64,
    /// Filter file size.
    pub filter_bytes: u64,
    /// The filter's theoretical false-positive rate.
    pub theoretical_fpr: f64,
    /// Smallest key.
    pub min_key: Vec<u8>,
    /// Largest key.
    pub max_key: Vec<u8>,
    /// Filter "absent" answers.
    pub filter_negatives: u64,
    /// Filter "maybe" answers.
    pub filter_positives: u64,
    /// False positives.
    pub false_positives: u64,
    /// Data blocks read.
    pub data_block_reads: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Why the recorded filter is not in use, if it is not.
    pub filter_problem: Option<String>,
}

impl TableStats {
    /// Filter bits per key.
    pub fn bits_per_key(&self) -> f64 {
        if self.keys == 0 {
            0.0
        } else {
            self.filter_bytes as f64 * 8.0 / self.keys as f64
        }
    }
    /// Observed false-positive rate of this table's filter.
    pub fn observed_fpr(&self) -> Option<f64> {
        let d = self.false_positives + self.filter_negatives;
        (d > 0).then(|| self.false_positives as f64 / d as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `prefix8` is the zero-padded first 8 bytes, big-endian, for every length.
    #[test]
    fn prefix8_is_the_zero_padded_head() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..=12usize {
            for _ in 0..200 {
                let key: Vec<u8> = (0..len)
                    .map(|_| {
                        x = crate::hash::mix64(x);
                        x as u8
                    })
                    .collect();
                let mut padded = [0u8; 8];
                let n = len.min(8);
                padded[..n].copy_from_slice(&key[..n]);
                assert_eq!(prefix8(&key), u64::from_be_bytes(padded), "{key:?}");
            }
        }
    }

    /// The prefix shortcut agrees with byte comparison on keys built to tie: short keys,
    /// zero bytes (which look like padding), shared 8-byte prefixes, the empty key.
    #[test]
    fn range_check_agrees_with_byte_comparison() {
        let alphabet: [&[u8]; 4] = [b"", b"\0", b"a", b"\xff"];
        let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
        let mut x = 0x1234_5678_9abc_def1u64;
        for _ in 0..400 {
            x = crate::hash::mix64(x);
            let mut k = Vec::new();
            // Mostly a common 7- or 8-byte stem, then 0..3 bytes from a small alphabet.
            if !x.is_multiple_of(3) {
                k.extend_from_slice(&b"stemstem"[..7 + (x % 2) as usize]);
            }
            for j in 0..(x >> 8) % 4 {
                k.extend_from_slice(alphabet[((x >> (16 + 2 * j)) % 4) as usize]);
            }
            keys.push(k);
        }
        keys.sort();
        keys.dedup();
        let mut checked = 0;
        for (i, min) in keys.iter().enumerate().step_by(3) {
            for max in &keys[i..] {
                let (lo, hi) = (prefix8(min), prefix8(max));
                for key in &keys {
                    let want = min <= key && key <= max;
                    let got = range_contains(min, max, lo, hi, key, prefix8(key));
                    assert_eq!(got, want, "{min:?} <= {key:?} <= {max:?}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 50_000, "only {checked} checks");
        println!("{checked} range checks agree");
    }
}
