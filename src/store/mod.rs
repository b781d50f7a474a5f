//! The store: a WAL and memtable in front of leveled sorted tables guarded by memory-mapped
//! filters, with a background thread that seals full memtables and one that compacts.
//!
//! ```text
//! put ─► WAL ─► memtable ─(full)─► immutable memtable ─(flush thread)─► L0 table + filter
//!                                                       (compaction thread)─► L1 … L6
//! get ─► memtable ─► immutable ─► L0 newest..oldest ─► one table per level (filter first)
//! ```
//! One `impl Store` spread over files by job: the shared state here (`Inner`, its locks
//! and counters), `tree.rs` (one tree's memtables, table set and locks),
//! `keyspace.rs` (keyspaces: a sibling `Inner` per tree), `options.rs` ([`Options`] and defaults), `open.rs` (opening and
//! recovery), `write.rs` (write path and backpressure), `commit.rs` (group commit),
//! `read.rs` (lookups, [`Reader`], scans), `worker.rs` (background threads, sealing),
//! `compact.rs` (the compaction driver), `filters.rs` (which filter a table gets; refilter
//! and rebalance), `ranges.rs` (refilter of range filters), `global.rs` and `global_save.rs`
//! (the global filter in the engine; its saved state), `backup.rs` (checkpoints), `stats.rs` (counters). Every change to
//! the table set goes through `version/set.rs` (`Inner::log_and_apply`). See
//! `docs/engine.md`.

mod backup;
mod commit;
mod compact;
mod compact_range;
mod durable;
mod filter_check;
mod filters;
mod global;
mod global_save;
mod keyspace;
mod keyspace_filters;
mod keyspace_span;
mod keyspace_stats;
mod live;
mod open;
mod options;
mod ranges;
mod read;
mod readonly;
mod snapshot;
mod stats;
mod stats_filters;
mod stats_life;
mod tree;
mod tx;
mod worker;
mod write;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;

use crate::counters::Sharded;
use crate::error::{Error, Result};
use crate::filename::wal_path;
use crate::filter::alloc::FilterPolicy;
use crate::filter::FilterKind;
use crate::io::Fs;
use crate::memtable::Memtable;
use crate::table::BlockCache;
use crate::verify::Warning;
use crate::version::{SetState, Version, VersionEdit};
use crate::wal::WalWriter;

pub use self::backup::CheckpointReport;
pub use self::filter_check::FilterCheck;
pub use self::filters::Rebalanced;
pub use self::keyspace::{Keyspace, KeyspaceOptions};
pub use self::keyspace_stats::KeyspaceStats;
pub use self::live::prefix_successor;
pub(crate) use self::open::lock_dir;
pub use self::open::{stored_default_filter, stored_policy};
pub use self::options::{
    default_policy, Options, SyncPolicy, WriteOptions, DEFAULT_FILTER, DEFAULT_FPR,
    DEFAULT_RANGE_BITS, IDLE_DRAIN_PROBES,
};
pub use self::read::{PinnedReader, Reader, Scan};
pub use self::readonly::MAX_TRIES as READ_ONLY_TRIES;
pub use self::snapshot::{Snapshot, SnapshotStats};
pub use self::stats::{GlobalFilterStats, LevelStats, Stats, TableStats};
pub use self::stats_filters::{AllocationModel, RangeBuildStats, RunModel};
pub use self::stats_life::LifecycleStats;
use self::tree::{Tree, TreeState};
pub use self::tx::{Transaction, TransactionScan};
pub use crate::filename::MANIFEST_NAME;
pub use crate::lifetime::Lifetime;

/// A memtable that is full and waits to be sealed, with the log that holds its writes.
pub(crate) struct Imm {
    mem: Arc<Memtable>,
    /// Number of the log that holds exactly this memtable's writes.
    log: u64,
    /// That log, kept open so `sync` can still fsync it until the table is durable.
    wal: Mutex<Option<WalWriter>>,
    /// Order of sealing (see `Bg::sealed`).
    seq: u64,
}

/// What readers and writers share, under `Inner::state`.
pub(crate) struct State {
    /// Each tree's memtables and table set, by slot (`tree.rs`; the default one's is 0).
    trees: Vec<TreeState>,
    /// The commit sequence number of the last write in the memtables (`commit.rs`): a
    /// snapshot taken under this lock sees exactly the writes numbered up to it, in every
    /// tree.
    seq: u64,
}

/// The write path's own state, under `Inner::writer` (`Default`: no log open yet).
#[derive(Default)]
struct Writer {
    wal: Option<WalWriter>,
    /// The current log's file number (0 before the first).
    wal_number: u64,
    /// Whether the current log's directory entry is durable.
    wal_dir_synced: bool,
    record: Vec<u8>,
    /// A group's records, one after another (`commit.rs`).
    group: Vec<u8>,
    /// Slowdown owed, in nanoseconds (paid in sleeps of at least a millisecond).
    delay_debt_ns: f64,
    /// Keys written by recent commits, while transactions are open (`tx/window.rs`).
    window: tx::Window,
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
    /// Flushes ask the growth thread for a larger global filter (`global.rs`): by the slot
    /// of their tree, the entries they are about to add.
    grow_wanted: std::collections::BTreeMap<usize, u64>,
    /// The slot of the tree whose filter the growth thread is building.
    growing: Option<usize>,
    /// Checkpoints making their cut (`backup.rs`): no memtable queued after the smallest
    /// of these numbers is sealed until they let go.
    seal_holds: Vec<u64>,
}

impl Bg {
    /// Whether the memtable queued as number `seq` may be sealed now (no checkpoint holds
    /// it back).
    fn may_seal(&self, seq: u64) -> bool {
        self.seal_holds.iter().all(|&h| seq <= h)
    }
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
    scan_drains: AtomicU64,
    l0_merges: AtomicU64,
    /// Tables dropped unread under newer range tombstones; expired entries compactions
    /// dropped or turned into tombstones, and their bytes (`stats_life.rs`).
    tables_dropped_whole: AtomicU64,
    expired_entries: AtomicU64,
    expired_bytes: AtomicU64,
    slowdown_ns: AtomicU64,
    stop_ns: AtomicU64,
    memtable_wait_ns: AtomicU64,
}

pub(crate) struct Inner {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    opts: Options,
    _lock: Option<File>,
    /// Shared with scans, which take it briefly to copy memtable entries (see `scan.rs`).
    state: Arc<RwLock<State>>,
    /// Bumped (with the state write lock held) by every change to `state`; see [`Reader`].
    epoch: Arc<AtomicU64>,
    writer: Arc<Mutex<Writer>>,
    /// Writers waiting for the writer lock, committed in groups (`commit.rs`).
    commit: Arc<commit::CommitQueue>,
    /// The last commit sequence number handed out (by the commit leader, under the writer
    /// lock; raised at open above every one the manifest and the logs hold). Every manifest
    /// records it, so numbers never go backwards, even once every log is removed.
    last_seq: Arc<AtomicU64>,
    /// The open snapshots (`snapshot.rs`).
    snapshots: Arc<snapshot::Registry>,
    /// The open transactions (`tx/window.rs`).
    txs: Arc<tx::Registry>,
    /// This handle's tree (`tree.rs`): its table set, locks and range filters. The store's
    /// `Inner` holds the default keyspace's; each other keyspace has an `Inner` of its own
    /// (`keyspace.rs`) sharing everything else with it.
    tree: Tree,
    /// The other keyspaces' handles, by slot order (in the store's `Inner` only; empty in
    /// theirs).
    spaces: Mutex<Vec<Arc<Inner>>>,
    /// The manifest every tree writes (`version/set.rs`).
    manifest: Arc<crate::version::SharedManifest>,
    /// The numbers of the logs on disk this handle made or replayed and has not removed
    /// (`keyspace.rs`: a log goes once every tree flushed it).
    logs: Arc<Mutex<Vec<u64>>>,
    bg: Arc<Mutex<Bg>>,
    bg_cv: Arc<Condvar>,
    /// The block cache every table of this store reads through (`None`: turned off).
    block_cache: Option<Arc<BlockCache>>,
    poisoned: Arc<AtomicBool>,
    shutdown: Arc<AtomicBool>,
    counters: Arc<EngineCounters>,
    /// The lifetime counters read from `COUNTERS` at open (zero when there was none).
    lifetime_base: Lifetime,
    /// Why `COUNTERS` could not be read at open, or the last failure to save it.
    lifetime_problem: Arc<Mutex<Option<String>>>,
    /// The torn log tails this open dropped (see [`Store::dropped_at_open`]).
    dropped_at_open: Vec<Warning>,
    /// A read-only handle's view of the logs (`readonly.rs`); `None` for a writer.
    read_only: Option<Mutex<readonly::LogView>>,
}

/// A key-value store in one directory: a cheap handle, `Clone + Send + Sync`, that can be
/// kept in a struct, moved into threads or shared as it is (no `Arc` needed).
///
/// Every clone refers to the same open store (an `Arc` inside). The store closes when the
/// last clone goes, by [`Store::close`] (which returns the final fsync's error) or by drop
/// (which cannot): the background threads stop once their work in progress is done (a
/// memtable waiting to be sealed is sealed and a compaction under way is finished, as
/// LevelDB does), no new compaction starts but a due L0 merge (at most two memtables'
/// bytes; the others still due run after the next open), and the logs are fsynced.
///
/// What outlives the last clone: a [`Scan`] goes on over the memtables and tables of its
/// start; a [`Reader`] or [`PinnedReader`] goes on reading the store as it was closed (no
/// writes can reach it any more) and, until it drops, keeps the store's directory lock:
/// the directory cannot be opened again, by this process or another, while such a reader
/// lives (docs/engine.md, "Handles").
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// let store = filterstore::Store::open(dir.path(), Default::default())?;
/// let writer = store.clone();
/// std::thread::spawn(move || writer.put("k", "v")).join().unwrap()?;
/// assert_eq!(store.get("k")?.unwrap(), b"v");
/// store.close()?; // the last clone: the store is closed and its logs fsynced
/// # Ok::<(), filterstore::Error>(())
/// ```
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
    /// Shared by every clone: the last one to go closes the store.
    handle: Arc<Handle>,
}

/// The open store's background threads; dropping it closes the store.
struct Handle {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// `close` did the work; `drop` has none left.
    closed: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The filter kind of the tables this handle writes, and the rate its policy is at: every
    /// new table's under a uniform policy, the uniform rate of equal memory under a budget
    /// (see [`Options::fpr`]).
    pub fn filter(&self) -> (FilterKind, f64) {
        let v = self.inner.lock_versions();
        (v.kind, v.fpr)
    }

    /// How this handle sizes new filters: the store's recorded policy unless [`Options`]
    /// chose otherwise at open, and the one a refilter or rebalance recorded since.
    pub fn policy(&self) -> FilterPolicy {
        self.inner.lock_versions().policy
    }

    /// The store's filter policy as its manifest records it: chosen when the store was
    /// created, replaced by [`Store::refilter`], [`Store::refilter_to`] and
    /// [`Store::rebalance`]; every open without [`Options::filter`], [`Options::fpr`] or
    /// [`Options::policy`] uses it. A store whose manifest predates policies (version 2)
    /// records `Uniform` at the kind and rate it was created with.
    pub fn recorded_policy(&self) -> FilterPolicy {
        self.inner.lock_versions().recorded
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

    /// The kind and rate of the store's recorded policy ([`Store::recorded_policy`]): what
    /// [`Options::filter`] and [`Options::fpr`] default to. Under a budget the rate is the
    /// uniform rate of equal memory ([`FilterPolicy::fpr`]).
    pub fn default_filter(&self) -> (FilterKind, f64) {
        let p = self.inner.lock_versions().recorded;
        (p.kind(), p.fpr())
    }
}

impl Store {
    pub(super) fn from_parts(inner: Arc<Inner>, threads: Vec<JoinHandle<()>>) -> Store {
        let handle = Arc::new(Handle {
            inner: inner.clone(),
            threads: Mutex::new(threads),
            closed: false,
        });
        Store { inner, handle }
    }

    /// Closes the store and returns what closing met: waits for the background work in
    /// progress (as a drop does, see [`Store`]) and fsyncs the logs; `Err` when that fsync
    /// failed, or when the store was poisoned before (a background failure, a failed write):
    /// then some acknowledged writes that were not yet durable may be lost (with
    /// [`SyncPolicy::EveryWrite`] and synced writes, none that was acknowledged).
    ///
    /// On a clone while other clones live, the store stays open for them: `close` only
    /// fsyncs the logs (with the same errors) and lets this handle go; the last clone to go
    /// closes the store (by its `close`, or by drop). Whichever of several concurrent
    /// `close` calls is the last one closes. Scans and readers do not count as clones (see
    /// [`Store`] for what they keep).
    pub fn close(self) -> Result<()> {
        let Store { inner, handle } = self;
        match Arc::into_inner(handle) {
            Some(mut h) => {
                h.closed = true;
                h.shut_down()
            }
            None if inner.read_only.is_some() => Ok(()),
            None => {
                inner.check_writable()?;
                let r = inner.sync_all();
                inner.poison_on_err(r)
            }
        }
    }
}

impl Handle {
    /// Stops the background threads, then merges a due L0, fsyncs the logs and saves the
    /// counters and the global filter (the fsync's error is returned).
    fn shut_down(&self) -> Result<()> {
        let inner = &self.inner;
        if inner.read_only.is_some() {
            return Ok(()); // no threads, nothing to save
        }
        {
            let _bg = inner.lock_bg();
            inner.shutdown.store(true, SeqCst);
            inner.bg_cv.notify_all();
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            let _ = t.join();
        }
        inner.check_writable()?;
        // A failed merge leaves the tables as they were (its outputs removed).
        let _ = inner.merge_l0_at_close();
        let synced = inner.sync_all();
        inner.save_lifetime();
        // Advisory: a tree whose checkpoint is missing or stale builds its filter.
        for tree in inner.all_trees() {
            let _ = tree.save_global();
        }
        synced
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.shut_down();
        }
    }
}

impl Inner {
    fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_versions(&self) -> MutexGuard<'_, SetState> {
        self.tree.versions.lock()
    }

    fn lock_bg(&self) -> MutexGuard<'_, Bg> {
        self.bg.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_compaction(&self) -> MutexGuard<'_, ()> {
        self.tree
            .compaction
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn lock_global(&self) -> MutexGuard<'_, ()> {
        self.tree
            .global_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn lock_global_change(&self) -> MutexGuard<'_, ()> {
        self.tree
            .global_change
            .lock()
            .unwrap_or_else(|p| p.into_inner())
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

    /// The live table set of this handle.s tree.
    fn current(&self) -> Arc<Version> {
        self.read_state().tree(self.tree.slot).current.clone()
    }

    /// An unused file number (see [`VersionSet::alloc_file`]).
    fn alloc_file(&self) -> Result<u64> {
        self.tree.versions.alloc_file()
    }

    /// Applies `edit` to the table set ([`VersionSet::log_and_apply`]: the manifest, then
    /// readers get the new version), and wakes whoever waits for a change. A failure poisons
    /// the store (the manifest on disk may be either one).
    fn log_and_apply(&self, edit: VersionEdit) -> Result<Arc<Version>> {
        self.log_and_apply_with(edit, |_| {})
    }

    /// [`log_and_apply`](Self::log_and_apply), with `also` done to the tree's state in the
    /// step that gives readers the new version.
    fn log_and_apply_with(
        &self,
        edit: VersionEdit,
        also: impl FnOnce(&mut TreeState),
    ) -> Result<Arc<Version>> {
        // The manifest records the commit sequence reached so far: every record of a log it
        // lets go of was numbered before this load.
        let last_seq = self.last_seq.load(std::sync::atomic::Ordering::SeqCst);
        let (slot, versions) = (self.tree.slot, &self.tree.versions);
        let r = versions.log_and_apply(edit, last_seq, |next, count_left| {
            let mut st = self.state_mut();
            let t = st.tree_mut(slot);
            t.current = next.clone();
            count_left(); // under the lock `stats` reads the version and counters with
            also(t);
        });
        // A dropped keyspace's change fails without harm to the store (its record is gone).
        let next = if self.tree.dropped.load(SeqCst) {
            r?
        } else {
            self.poison_on_err(r)?
        };
        let _bg = self.lock_bg();
        self.bg_cv.notify_all();
        Ok(next)
    }

    /// Bits per key of the range filters of new tables (0: none).
    fn range_bits(&self) -> f64 {
        f64::from_bits(self.tree.range_bits.load(Relaxed))
    }

    fn check_writable(&self) -> Result<()> {
        if self.read_only.is_some() {
            return Err(Error::ReadOnly(self.dir.clone()));
        }
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
    /// Fsyncs the logs of the memtable and of the immutable memtable waiting to be sealed.
    fn sync_all(&self) -> Result<()> {
        let mut w = self.lock_writer();
        self.sync_locked(&mut w)
    }

    fn sync_locked(&self, w: &mut Writer) -> Result<()> {
        self.sync_logs(w)?;
        // Under the writer lock: every record counted as written is in these logs.
        self.commit.durable.all_synced();
        Ok(())
    }

    fn sync_logs(&self, w: &mut Writer) -> Result<()> {
        let imms: Vec<Arc<Imm>> = self
            .read_state()
            .trees
            .iter()
            .filter_map(|t| t.imm.clone())
            .collect();
        for imm in imms {
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
