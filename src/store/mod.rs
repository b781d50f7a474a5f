//! The store: a WAL and memtable in front of leveled sorted tables guarded by memory-mapped
//! filters, with a background thread that seals full memtables and one that compacts.
//!
//! ```text
//! put ─► WAL ─► memtable ─(full)─► immutable memtable ─(flush thread)─► L0 table + filter
//!                                                       (compaction thread)─► L1 … L6
//! get ─► memtable ─► immutable ─► L0 newest..oldest ─► one table per level (filter first)
//! ```
//! The jobs are spread over files: `open` here, `write.rs` (write path and backpressure),
//! `read.rs` (lookups, [`Reader`], scans), `worker.rs` (background threads, sealing,
//! compaction, installing a new version), `stats.rs` (counters). See `docs/engine.md`.

mod compact;
mod filters;
mod read;
mod stats;
mod worker;
mod write;

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::compaction::plan::Shape;
use crate::counters::Sharded;
use crate::error::{Error, Result};
use crate::filename::{numbered_files, wal_path, FileName, Numbered};
use crate::filter::alloc::FilterPolicy;
use crate::filter::{check_fpr, FilterKind};
use crate::io::{Fs, RealFs};
use crate::manifest::{Manifest, MAX_LEVELS};
use crate::memtable::Memtable;
use crate::verify::Warning;
use crate::version::{TableHandle, Version};
use crate::wal::{replay_file, WalWriter};

pub use self::filters::Rebalanced;
pub use self::read::{prefix_successor, Reader, Scan};
pub use self::stats::{LevelStats, Stats, TableStats};
pub use crate::filename::MANIFEST_NAME;
pub use crate::lifetime::Lifetime;

/// When WAL appends are fsynced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Every write is fsynced before it returns (the command line's choice).
    EveryWrite,
    /// Writes reach the operating system before they return (they survive a process crash)
    /// and are fsynced at `flush`, `sync` and drop (the library default).
    OnFlush,
    /// Writes collect in a 1 MiB buffer that reaches the operating system when full and at
    /// `flush`, `sync`, a memtable switch and drop: fastest for bulk loads, but a process
    /// crash can lose the unwritten buffer (up to 1 MiB of acknowledged writes). fsynced like
    /// `OnFlush`.
    Buffered,
}

/// How a store is opened.
#[derive(Clone, Debug)]
pub struct Options {
    /// Filter for tables written from now on; `None` uses the store's default (the choice
    /// made when it was created, `blocked-bloom` if none was made).
    pub filter: Option<FilterKind>,
    /// Target false-positive rate for new filters; `None` uses the store's default (1 %).
    pub fpr: Option<f64>,
    /// How new filters are sized; `None` is `FilterPolicy::Uniform` at [`Options::filter`]
    /// and [`Options::fpr`] (each table at the same rate, as before budgets existed). With
    /// `FilterPolicy::Budget`, a new table gets the rate its level should have under
    /// Monkey's allocation of `bits_per_key` × keys in tables (see `docs/engine.md`, "Filter
    /// memory across levels"), and `filter`/`fpr` are not used for new tables. Not stored in
    /// the manifest: give it at every open.
    pub policy: Option<FilterPolicy>,
    /// A memtable becomes immutable (and is sealed into an L0 table in the background) once
    /// it takes this many bytes of memory (keys, values, and its per-entry slot and index).
    /// At most one immutable memtable waits, so memtables take up to about twice this.
    pub memtable_bytes: usize,
    /// When WAL appends are fsynced.
    pub sync: SyncPolicy,
    /// L0 tables that start a compaction of L0 into L1; `None` turns automatic compaction
    /// off (and with it the L0 write slowdown and stop; `compact()` still works).
    pub compaction_trigger: Option<usize>,
    /// With this many L0 tables, writes are slowed down to [`Options::slowdown_bytes_per_sec`]
    /// so that compaction can catch up.
    pub l0_slowdown: usize,
    /// With this many L0 tables, writes wait until a compaction brings L0 below it.
    pub l0_stop: usize,
    /// The rate writes are held to while L0 is at or above its slowdown size.
    pub slowdown_bytes_per_sec: u64,
    /// Compaction starts a new output table once the current one holds this many bytes of
    /// keys and values.
    pub table_bytes: u64,
    /// Target size of L1; level n ≥ 2 targets `l1_bytes × level_ratio^(n−1)`.
    pub l1_bytes: u64,
    /// Each level's target size is this many times the one above it (T).
    pub level_ratio: u64,
    /// Idle L0 drain: once no write has arrived for this long while lookups keep probing L0
    /// tables (at least [`IDLE_DRAIN_PROBES`] filter probes of L0 since writes paused), L0 is
    /// merged into L1 even below [`Options::compaction_trigger`], so that an absent lookup
    /// probes one table per level instead of every L0 table as well. Costs one L0 → L1
    /// compaction per pause in writing; a store that is written and never read, or written
    /// without pauses, never pays it. `None` turns it off (as does `compaction_trigger: None`).
    pub idle_drain: Option<Duration>,
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
            policy: None,
            memtable_bytes: 32 << 20,
            sync: SyncPolicy::OnFlush,
            compaction_trigger: Some(8),
            l0_slowdown: 12,
            l0_stop: 20,
            slowdown_bytes_per_sec: 16 << 20,
            table_bytes: 64 << 20,
            l1_bytes: 256 << 20,
            level_ratio: 10,
            idle_drain: Some(Duration::from_secs(1)),
            create_if_missing: true,
            mmap_reads: false,
            fs: Arc::new(RealFs),
        }
    }
}

impl Options {
    /// The level tree these options describe.
    pub(crate) fn shape(&self) -> Shape {
        Shape {
            l0_trigger: self.compaction_trigger,
            l1_bytes: self.l1_bytes,
            ratio: self.level_ratio,
        }
    }

    fn check(&self) -> Result<()> {
        if let Some(f) = self.fpr {
            check_fpr(f)?;
        }
        if let Some(p) = &self.policy {
            filters::check_policy(p)?;
        }
        let bad = |what: &str| Err(Error::InvalidArgument(what.to_string()));
        if self.compaction_trigger == Some(0) {
            return bad("compaction_trigger must be at least 1");
        }
        if self.l0_stop == 0 || self.l0_slowdown > self.l0_stop {
            return bad("l0_slowdown must not exceed l0_stop, which must be at least 1");
        }
        if self.level_ratio < 2 {
            return bad("level_ratio must be at least 2");
        }
        if self.table_bytes == 0 || self.l1_bytes == 0 || self.slowdown_bytes_per_sec == 0 {
            return bad("table_bytes, l1_bytes and slowdown_bytes_per_sec must be positive");
        }
        Ok(())
    }
}

/// Filter probes of L0 tables since writes paused that, with [`Options::idle_drain`], show
/// that lookups are paying for L0 (about 2,500 absent lookups over 4 L0 tables).
pub const IDLE_DRAIN_PROBES: u64 = 10_000;

/// Default filter of a new store.
pub const DEFAULT_FILTER: FilterKind = FilterKind::BlockedBloom;
/// Default target false-positive rate of a new store.
pub const DEFAULT_FPR: f64 = 0.01;

/// The filter kind the store in `dir` was created with (kept in its manifest, see
/// [`Options::filter`]), read without opening the store: no lock is taken and nothing is
/// written. `Ok(None)` when `dir` holds no manifest.
///
/// ```
/// use filterstore::{store::stored_default_filter, FilterKind, Options, Store};
/// # fn main() -> filterstore::Result<()> {
/// let dir = tempfile::tempdir()?;
/// assert_eq!(stored_default_filter(dir.path())?, None);
/// let opts = Options { filter: Some(FilterKind::Cuckoo), ..Options::default() };
/// drop(Store::open(dir.path(), opts)?);
/// assert_eq!(stored_default_filter(dir.path())?, Some(FilterKind::Cuckoo));
/// # Ok(()) }
/// ```
pub fn stored_default_filter(dir: &Path) -> Result<Option<FilterKind>> {
    Ok(Manifest::load(dir)?.map(|m| m.default_kind))
}

/// A memtable that is full and waits to be sealed, with the log that holds its writes.
pub(crate) struct Imm {
    mem: Memtable,
    /// Number of the log that holds exactly this memtable's writes.
    log: u64,
    /// That log, kept open so `sync` can still fsync it until the table is durable.
    wal: Mutex<Option<WalWriter>>,
    /// Order of sealing (see `Bg::sealed`).
    seq: u64,
}

/// What readers and writers share, under `Inner::state`.
pub(crate) struct State {
    mem: Memtable,
    imm: Option<Arc<Imm>>,
    current: Arc<Version>,
}

/// The write path's own state, under `Inner::writer`.
struct Writer {
    wal: Option<WalWriter>,
    /// The current log's file number (0 before the first).
    wal_number: u64,
    /// Whether the current log's directory entry is durable.
    wal_dir_synced: bool,
    record: Vec<u8>,
    /// Slowdown owed, in nanoseconds (paid in sleeps of at least a millisecond).
    delay_debt_ns: f64,
}

/// What only installs change, under `Inner::versions` (the durable view of the manifest).
struct VersionSet {
    log_number: u64,
    default_kind: FilterKind,
    default_fpr: f64,
    cursors: Vec<Option<Vec<u8>>>,
}

/// Coordination with the background threads, under `Inner::bg` (with `Inner::bg_cv`).
#[derive(Default)]
struct Bg {
    /// A background failure: the store refuses writes from then on.
    error: Option<Arc<Error>>,
    /// The compaction thread should look for work.
    compaction_wanted: bool,
    /// Memtables made immutable so far, and sealed so far (an `Imm` with `seq <= sealed` is
    /// in a table).
    queued: u64,
    sealed: u64,
}

/// Counters of tables that left the live set (their counts stay in the store's totals).
#[derive(Default)]
struct Retired {
    negatives: AtomicU64,
    positives: AtomicU64,
    false_positives: AtomicU64,
    unfiltered_misses: AtomicU64,
    block_reads: AtomicU64,
    bytes_read: AtomicU64,
}

/// The engine's own counters (see [`Stats`]).
#[derive(Default)]
struct EngineCounters {
    lookups: Sharded<1>,
    user_bytes: AtomicU64,
    wal_bytes: AtomicU64,
    flush_bytes: AtomicU64,
    compaction_bytes: AtomicU64,
    compaction_read_bytes: AtomicU64,
    flushes: AtomicU64,
    compactions: AtomicU64,
    trivial_moves: AtomicU64,
    idle_drains: AtomicU64,
    slowdown_ns: AtomicU64,
    stop_ns: AtomicU64,
    memtable_wait_ns: AtomicU64,
}

pub(crate) struct Inner {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    opts: Options,
    kind: FilterKind,
    fpr: f64,
    /// How new filters are sized (`opts.policy`, else uniform at `kind` and `fpr`).
    policy: FilterPolicy,
    _lock: File,
    state: RwLock<State>,
    /// Bumped (with the state write lock held) by every change to `state`; see [`Reader`].
    epoch: AtomicU64,
    writer: Mutex<Writer>,
    versions: Mutex<VersionSet>,
    /// Held by whoever compacts or refilters: one at a time.
    compaction: Mutex<()>,
    bg: Mutex<Bg>,
    bg_cv: Condvar,
    next_file: AtomicU64,
    poisoned: AtomicBool,
    shutdown: AtomicBool,
    counters: EngineCounters,
    retired: Retired,
    /// The lifetime counters read from `COUNTERS` at open (zero when there was none).
    lifetime_base: Lifetime,
    /// Why `COUNTERS` could not be read at open, or the last failure to save it.
    lifetime_problem: Mutex<Option<String>>,
    /// The torn log tails this open dropped (see [`Store::dropped_at_open`]).
    dropped_at_open: Vec<Warning>,
}

/// A key-value store in one directory. `Send + Sync`: share it with `Arc` across threads.
///
/// Dropping it stops the background threads once their work in progress is done: a memtable
/// waiting to be sealed is sealed and a compaction under way is finished (as LevelDB does),
/// no new compaction starts (those still due run after the next open), and the logs are
/// fsynced.
pub struct Store {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

pub(crate) fn lock_dir(dir: &Path) -> Result<File> {
    let path = FileName::Lock.path(dir);
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
    /// Opens (or creates) the store in `dir`, replaying its logs, and starts its background
    /// threads.
    ///
    /// Recovered writes do not stay in the old logs: they are written into one new log (or,
    /// when they fill half a memtable, sealed into an L0 table) and the old logs are removed,
    /// so however often a store is opened it keeps at most two logs.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Store> {
        opts.check()?;
        let dir = dir.as_ref().to_path_buf();
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
            Err(e) => return Err(Error::io(&dir, e)),
        }
        let lock = lock_dir(&dir)?;
        let fs = opts.fs.clone();
        let files = numbered_files(&dir)?;
        let manifest = match Manifest::load(&dir)? {
            Some(m) => m,
            None => {
                if files
                    .iter()
                    .any(|(_, k)| matches!(k, Some(Numbered::Table | Numbered::Wal)))
                {
                    return Err(Error::corrupt(0, "data files present but no MANIFEST")
                        .in_file(FileName::Manifest.path(&dir), 0));
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
                    cursors: Vec::new(),
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
        let next_file = manifest.next_file.max(max_seen + 1);

        let mut handles = Vec::with_capacity(manifest.tables.len());
        for r in &manifest.tables {
            handles.push(Arc::new(TableHandle::open(
                &dir,
                r.clone(),
                opts.mmap_reads,
            )?));
        }
        let version = Version::new(handles);
        if let Some((level, a, b)) = version.check_sorted() {
            return Err(
                Error::corrupt(0, format!("tables {a} and {b} of level {level} overlap"))
                    .in_file(FileName::Manifest.path(&dir), 0),
            );
        }
        let mut mem = Memtable::new();
        let mut replayed = Vec::new();
        let mut dropped_at_open = Vec::new();
        for (n, kind) in &files {
            if *kind == Some(Numbered::Wal) && *n >= manifest.log_number {
                let path = wal_path(&dir, *n);
                let end = replay_file(&path, |k, v| {
                    mem.insert(&k, v.as_deref());
                })?;
                if let Some(tail) = end.torn_tail {
                    dropped_at_open.push(Warning::torn_tail(path, tail));
                }
                replayed.push(*n);
            }
        }
        // Remove what no manifest names: unfinished outputs and obsolete logs.
        let live: HashSet<u64> = manifest
            .tables
            .iter()
            .flat_map(|t| [t.number, t.filter_file])
            .collect();
        for &(n, kind) in &files {
            let Some(kind) = kind else { continue };
            let dead = match kind {
                Numbered::Wal => n < manifest.log_number,
                k => k.per_table() && !live.contains(&n),
            };
            if dead {
                let _ = fs.remove(&kind.path(&dir, n));
            }
        }
        let _ = fs.remove(&FileName::ManifestTmp.path(&dir));
        let _ = fs.remove(&FileName::CountersTmp.path(&dir));
        let (lifetime_base, lifetime_problem) = match crate::lifetime::load(&dir) {
            Ok(l) => (l.unwrap_or_default(), None),
            Err(e) => (Lifetime::default(), Some(e.to_string())),
        };

        let mut cursors = vec![None; MAX_LEVELS];
        for (l, k) in &manifest.cursors {
            if let Some(c) = cursors.get_mut(*l as usize) {
                *c = Some(k.clone());
            }
        }
        let policy = opts.policy.unwrap_or(FilterPolicy::Uniform { kind, fpr });
        let inner = Arc::new(Inner {
            dir,
            fs,
            kind,
            fpr,
            policy,
            _lock: lock,
            state: RwLock::new(State {
                mem: Memtable::new(),
                imm: None,
                current: Arc::new(version),
            }),
            epoch: AtomicU64::new(0),
            writer: Mutex::new(Writer {
                wal: None,
                wal_number: 0,
                wal_dir_synced: false,
                record: Vec::new(),
                delay_debt_ns: 0.0,
            }),
            versions: Mutex::new(VersionSet {
                log_number: manifest.log_number,
                default_kind: manifest.default_kind,
                default_fpr: manifest.default_fpr,
                cursors,
            }),
            compaction: Mutex::new(()),
            bg: Mutex::new(Bg::default()),
            bg_cv: Condvar::new(),
            next_file: AtomicU64::new(next_file),
            poisoned: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            counters: EngineCounters::default(),
            retired: Retired::default(),
            lifetime_base,
            lifetime_problem: Mutex::new(lifetime_problem),
            dropped_at_open,
            opts,
        });
        inner.recover(mem, &replayed)?;
        let threads = worker::spawn(&inner)?;
        inner.want_compaction();
        Ok(Store { inner, threads })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The filter kind and target rate used for tables written by this handle.
    pub fn filter(&self) -> (FilterKind, f64) {
        (self.inner.kind, self.inner.fpr)
    }

    /// How this handle sizes new filters.
    pub fn policy(&self) -> FilterPolicy {
        self.inner.policy
    }

    /// The torn log tails this open dropped, one [`Warning::TornTail`] per log, naming the
    /// file, the offset and the bytes dropped (empty after a clean shutdown). A torn tail is
    /// the write in flight at a crash, never acknowledged as durable; opening drops it and
    /// keeps every record before it. The logs are rewritten at open, so the next open finds
    /// nothing to drop. [`Stats::torn_tails_dropped`] and [`Stats::torn_tail_bytes_dropped`]
    /// count the same.
    pub fn dropped_at_open(&self) -> &[Warning] {
        &self.inner.dropped_at_open
    }

    /// The filter kind and rate recorded when the store was created.
    pub fn default_filter(&self) -> (FilterKind, f64) {
        let v = self.inner.lock_versions();
        (v.default_kind, v.default_fpr)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let inner = &self.inner;
        {
            let _bg = inner.lock_bg();
            inner.shutdown.store(true, SeqCst);
            inner.bg_cv.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if !inner.poisoned.load(SeqCst) {
            let _ = inner.sync_all();
            inner.save_lifetime();
        }
    }
}

impl Inner {
    fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_versions(&self) -> MutexGuard<'_, VersionSet> {
        self.versions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_bg(&self) -> MutexGuard<'_, Bg> {
        self.bg.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_compaction(&self) -> MutexGuard<'_, ()> {
        self.compaction.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn read_state(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Write access to the state; the epoch is bumped when the guard is dropped.
    fn state_mut(&self) -> StateMut<'_> {
        StateMut {
            guard: self.state.write().unwrap_or_else(|p| p.into_inner()),
            epoch: &self.epoch,
        }
    }

    /// The live table set.
    fn current(&self) -> Arc<Version> {
        self.read_state().current.clone()
    }

    /// An unused file number.
    fn alloc_file(&self) -> u64 {
        self.next_file.fetch_add(1, SeqCst)
    }

    fn check_writable(&self) -> Result<()> {
        if !self.poisoned.load(Relaxed) {
            return Ok(());
        }
        // `poison` records the cause before it raises the flag.
        match self.lock_bg().error.clone() {
            Some(cause) => Err(Error::Poisoned { cause }),
            None => Ok(()),
        }
    }

    /// Records a failure: the store refuses writes from now on (reads go on).
    fn poison(&self, e: &Error) {
        let mut bg = self.lock_bg();
        if bg.error.is_none() {
            bg.error = Some(Arc::new(e.duplicate()));
        }
        self.poisoned.store(true, SeqCst);
        self.bg_cv.notify_all();
    }

    /// Passes `r` through, poisoning the store when it is an error.
    fn poison_on_err<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.poison(e);
        }
        r
    }

    /// Wakes the compaction thread to look for work.
    fn want_compaction(&self) {
        let mut bg = self.lock_bg();
        bg.compaction_wanted = true;
        self.bg_cv.notify_all();
    }

    /// Puts what the logs held back into the store (see [`Store::open`]).
    fn recover(&self, mem: Memtable, replayed: &[u64]) -> Result<()> {
        if mem.is_empty() {
            // The logs held no record: nothing to keep.
            for &n in replayed {
                let _ = self.fs.remove(&wal_path(&self.dir, n));
            }
            return Ok(());
        }
        if mem.approximate_bytes() >= self.opts.memtable_bytes / 2 {
            // Enough for a table of its own: seal it now, behind every replayed log.
            let log = replayed.last().copied().unwrap_or(0);
            let imm = Imm {
                mem,
                log,
                wal: Mutex::new(None),
                seq: 0,
            };
            self.seal(&imm)?;
            for &n in replayed {
                let _ = self.fs.remove(&wal_path(&self.dir, n));
            }
            return Ok(());
        }
        // Few writes: copy them into one new log, make it durable, then drop the old ones.
        let n = self.alloc_file();
        let mut wal = WalWriter::create(&*self.fs, &wal_path(&self.dir, n))?;
        wal.set_buffered(self.opts.sync == SyncPolicy::Buffered);
        let mut record = Vec::new();
        let sorted = mem.sorted();
        let mut at = 0;
        use crate::table::SortedEntries;
        while at < sorted.len() {
            // Records of about 1 MiB.
            let mut end = at;
            let mut bytes = 0;
            while end < sorted.len() && (end == at || bytes < 1 << 20) {
                let (k, v) = sorted.entry(end);
                bytes += k.len() + v.map_or(0, <[u8]>::len);
                end += 1;
            }
            crate::wal::encode_record(&mut record, end - at, (at..end).map(|i| sorted.entry(i)))?;
            wal.append(&record, false)?;
            at = end;
        }
        drop(sorted);
        wal.sync()?;
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| Error::io(&self.dir, e))?;
        self.install(worker::Install {
            log_number: Some(n),
            ..Default::default()
        })?;
        for &old in replayed {
            let _ = self.fs.remove(&wal_path(&self.dir, old));
        }
        let mut w = self.lock_writer();
        w.wal = Some(wal);
        w.wal_number = n;
        w.wal_dir_synced = true;
        drop(w);
        let mut st = self.state_mut();
        st.mem = mem;
        Ok(())
    }

    /// Fsyncs the logs of the memtable and of the immutable memtable waiting to be sealed.
    fn sync_all(&self) -> Result<()> {
        let mut w = self.lock_writer();
        self.sync_locked(&mut w)
    }

    fn sync_locked(&self, w: &mut Writer) -> Result<()> {
        let imm = self.read_state().imm.clone();
        if let Some(imm) = imm {
            if let Some(wal) = imm.wal.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                wal.sync()?;
            }
        }
        if let Some(wal) = &mut w.wal {
            wal.sync()?;
            if !w.wal_dir_synced {
                self.fs
                    .sync_dir(&self.dir)
                    .map_err(|e| Error::io(&self.dir, e))?;
                w.wal_dir_synced = true;
            }
        }
        Ok(())
    }
}

/// See [`Inner::state_mut`].
struct StateMut<'a> {
    guard: RwLockWriteGuard<'a, State>,
    epoch: &'a AtomicU64,
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
        // state and its epoch together.
        self.epoch.fetch_add(1, SeqCst);
    }
}
