//! Background work and the changes it makes to the table set.
//!
//! Two threads per store: the **flush thread** seals the immutable memtable into an L0 table
//! (the table and its filter written in parallel on the rayon pool); the **compaction thread**
//! asks the planner for a task and runs it until none is due. Each result is published by
//! [`Inner::install`]: under the version-set lock, the new table set is written to the
//! manifest (atomically) and then swapped in for readers. A failure poisons the store:
//! writes get [`Error::Poisoned`], reads go on, and the logs that are not yet in tables stay
//! on disk.
//!
//! Lock order: writer → bg → state, and versions → state; the background threads never take
//! the writer lock, so a writer waiting for them (holding it) cannot block them.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Imm, Inner, Store, IDLE_DRAIN_PROBES};
use crate::compaction::plan::{plan, plan_full, plan_l0_drain, tombstone_droppable, Task};
use crate::compaction::run::{merge, Output, Source};
use crate::error::{Error, Result};
use crate::filename::{filter_path, table_path, wal_path};
use crate::filter::alloc::{self, FilterPolicy, SizeModel, MAX_FPR};
use crate::filter::{check_fpr, FilterKind};
use crate::manifest::{Manifest, TableRecord};
use crate::table::{write_filter_file, MappedFilter, SortedEntries, TableCounters, TableCursor};
use crate::version::{Edit, TableHandle, Version};

/// A change to publish (see [`Inner::install`]).
#[derive(Default)]
pub(super) struct Install {
    /// Tables that leave and join.
    pub edit: Edit,
    /// A new log number (logs below it are no longer needed).
    pub log_number: Option<u64>,
    /// A level's new round-robin cursor.
    pub cursor: Option<(usize, Vec<u8>)>,
    /// The immutable memtable (by its sequence number) that is now in a table.
    pub sealed: Option<u64>,
}

/// Nice value background threads run at: above the default 0, so that when the writer,
/// a flush and a compaction all want the CPU, the writer gets it (a preempted writer loses
/// whole scheduler slices, milliseconds of put latency). With idle cores it changes nothing.
const BACKGROUND_NICE: i32 = 5;

/// Lowers the calling thread's CPU priority to [`BACKGROUND_NICE`] (best effort: where the
/// system refuses, the thread runs at normal priority).
fn lower_priority() {
    // On Linux, PRIO_PROCESS with pid 0 applies to the calling thread only.
    let _ = rustix::process::setpriority_process(None, BACKGROUND_NICE);
}

/// The rayon pool compaction and refilter run their parallel parts on: one per process, as
/// many threads as cores, at lowered priority. (Sealing a memtable is not lowered: writers
/// wait for it when the next memtable fills, so it runs at normal priority on the global
/// pool.) `None` if its threads could not be started (the global pool is used).
fn background_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("filterstore-bg-{i}"))
            .start_handler(|_| lower_priority())
            .build()
            .ok()
    })
    .as_ref()
}

/// Runs `f` on the background pool.
pub(super) fn in_background<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match background_pool() {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// Starts the flush thread (normal priority) and the compaction thread (lowered).
pub(super) fn spawn(inner: &Arc<Inner>) -> Result<Vec<std::thread::JoinHandle<()>>> {
    let spawn = |name: &str, f: fn(Arc<Inner>), lower: bool| {
        let i = inner.clone();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                if lower {
                    lower_priority();
                }
                f(i)
            })
            .map_err(Error::from)
    };
    Ok(vec![
        spawn("filterstore-flush", flush_loop, false)?,
        spawn("filterstore-compact", compaction_loop, true)?,
    ])
}

fn flush_loop(inner: Arc<Inner>) {
    loop {
        let imm = {
            let mut bg = inner.lock_bg();
            loop {
                let imm = inner.read_state().imm.clone();
                match imm {
                    Some(imm) if bg.error.is_none() => break imm,
                    _ if inner.shutdown.load(SeqCst) => return,
                    _ => bg = inner.bg_cv.wait(bg).unwrap_or_else(|p| p.into_inner()),
                }
            }
        };
        if let Err(e) = inner.seal(&imm) {
            inner.poison(&e);
        }
    }
}

/// How often the compaction thread looks for an idle L0 drain while L0 holds tables.
const IDLE_POLL: Duration = Duration::from_millis(250);

fn compaction_loop(inner: Arc<Inner>) {
    let mut idle = IdleWatch::new();
    let drain_after = inner
        .opts
        .idle_drain
        .filter(|_| inner.opts.compaction_trigger.is_some());
    loop {
        let mut drain = false;
        {
            let mut bg = inner.lock_bg();
            while !bg.compaction_wanted && !inner.shutdown.load(SeqCst) {
                match drain_after {
                    Some(after) if inner.read_state().current.l0_count() > 0 => {
                        let (g, _) = inner
                            .bg_cv
                            .wait_timeout(bg, IDLE_POLL.min(after))
                            .unwrap_or_else(|p| p.into_inner());
                        bg = g;
                        if !bg.compaction_wanted && bg.error.is_none() && idle.due(&inner, after) {
                            drain = true;
                            break;
                        }
                    }
                    _ => bg = inner.bg_cv.wait(bg).unwrap_or_else(|p| p.into_inner()),
                }
            }
            if inner.shutdown.load(SeqCst) {
                return;
            }
            bg.compaction_wanted = false;
        }
        if drain {
            if let Err(e) = inner.drain_l0() {
                inner.poison(&e);
            }
        }
        while !inner.shutdown.load(SeqCst) && !inner.poisoned.load(SeqCst) {
            match inner.compact_once() {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    inner.poison(&e);
                    break;
                }
            }
        }
    }
}

/// Watches for writes pausing while lookups probe L0 (see [`Options::idle_drain`]).
///
/// [`Options::idle_drain`]: super::Options::idle_drain
struct IdleWatch {
    /// The store's count of bytes written when writes were last seen to pause.
    written: u64,
    /// Filter probes (and unfiltered misses) of the L0 tables then.
    l0_probes: u64,
    since: Instant,
}

impl IdleWatch {
    fn new() -> IdleWatch {
        IdleWatch {
            written: u64::MAX,
            l0_probes: 0,
            since: Instant::now(),
        }
    }

    /// Whether no write has arrived for `after` while L0's tables took at least
    /// [`IDLE_DRAIN_PROBES`] probes. Any write, or a change of L0, starts the watch again.
    fn due(&mut self, inner: &Inner, after: Duration) -> bool {
        let written = inner.counters.user_bytes.load(Relaxed);
        let v = inner.current();
        let l0 = v.levels()[0].tables();
        let probes: u64 = l0
            .iter()
            .map(|t| {
                let c = &t.counters;
                c.negatives() + c.positives() + c.unfiltered_misses()
            })
            .sum();
        if l0.is_empty() || written != self.written || probes < self.l0_probes {
            *self = IdleWatch {
                written,
                l0_probes: probes,
                since: Instant::now(),
            };
            return false;
        }
        self.since.elapsed() >= after && probes - self.l0_probes >= IDLE_DRAIN_PROBES
    }
}

impl Inner {
    /// Merges L0 into L1 whatever L0's size (the idle drain); `false` when L0 was empty.
    fn drain_l0(&self) -> Result<bool> {
        let _c = self.lock_compaction();
        let v = self.current();
        let Some(task) = plan_l0_drain(&level_slices(&v), &self.opts.shape()) else {
            return Ok(false);
        };
        in_background(|| self.run_task(&v, task))?;
        self.counters.idle_drains.fetch_add(1, Relaxed);
        Ok(true)
    }
}

impl Store {
    /// Merges every table into one sorted run (dropping overwritten values and
    /// tombstones) through the same streaming merge as background compaction, waiting for a
    /// background compaction in progress first. Readers are never blocked. The memtable is
    /// not flushed (call [`Store::flush`] first for that).
    pub fn compact(&self) -> Result<()> {
        let inner = &self.inner;
        inner.check_writable()?;
        let _c = inner.lock_compaction();
        let v = inner.current();
        let levels = level_slices(&v);
        let Some(task) = plan_full(&levels, &inner.opts.shape()) else {
            return Ok(());
        };
        let r = in_background(|| inner.run_task(&v, task));
        inner.poison_on_err(r)?;
        drop(_c);
        inner.want_compaction();
        Ok(())
    }

    /// Runs compactions in this thread until the planner finds none due (with automatic
    /// compaction off, none ever is): the levels are then in shape. For a bulk load that
    /// wants its store settled before it returns.
    pub fn wait_for_compaction(&self) -> Result<()> {
        let inner = &self.inner;
        loop {
            inner.check_writable()?;
            match inner.compact_once() {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(e) => {
                    inner.poison(&e);
                    return Err(e);
                }
            }
        }
    }

    /// Rebuilds the filter of every table as `kind` at `fpr` without rewriting any data:
    /// new filter files are written, the manifest is swapped atomically, old filters removed.
    ///
    /// ```
    /// use filterstore::{FilterKind, Store};
    /// # let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), Default::default())?;
    /// store.put(b"k", b"v")?;
    /// store.flush()?;
    /// store.refilter(FilterKind::BinaryFuse, 0.001)?;
    /// let t = &store.stats().tables[0];
    /// assert_eq!((t.filter_kind, t.target_fpr), (FilterKind::BinaryFuse, 0.001));
    /// assert_eq!(store.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), filterstore::Error>(())
    /// ```
    pub fn refilter(&self, kind: FilterKind, fpr: f64) -> Result<()> {
        check_fpr(fpr)?;
        let inner = &self.inner;
        inner.check_writable()?;
        let _c = inner.lock_compaction();
        let v = inner.current();
        let jobs = v.tables().map(|t| (t.clone(), kind, fpr)).collect();
        inner.replace_filters(jobs)
    }

    /// Recomputes what every table's filter should be under `policy` for the levels as they
    /// are now, and rebuilds only the filters that changed materially (another kind, or a
    /// size that differs by more than 5 % (`alloc::MATERIAL`) from the one the table's
    /// recorded rate gives), without rewriting any data. A budget's allocation moves as the
    /// levels grow; this is how a store follows it. Table files are never touched.
    pub fn rebalance(&self, policy: FilterPolicy) -> Result<Rebalanced> {
        self.refilter_with(policy, true)
    }

    /// Rebuilds every table's filter to what `policy` gives it for the levels as they are
    /// now, material change or not (to compare allocations exactly; [`Store::rebalance`]
    /// is the economical one). No data is rewritten.
    pub fn refilter_to(&self, policy: FilterPolicy) -> Result<Rebalanced> {
        self.refilter_with(policy, false)
    }

    fn refilter_with(&self, policy: FilterPolicy, only_material: bool) -> Result<Rebalanced> {
        check_policy(&policy)?;
        let inner = &self.inner;
        inner.check_writable()?;
        let _c = inner.lock_compaction();
        let v = inner.current();
        let targets = filter_targets(&v, &policy);
        let mut jobs = Vec::new();
        let mut kept = 0;
        for (t, (kind, fpr)) in v.tables().zip(targets) {
            let r = &t.record;
            let changed = if !only_material || kind != r.filter_kind {
                true
            } else if kind == FilterKind::None {
                false
            } else {
                t.filter.is_none() || alloc::material(SizeModel::of(kind), r.fpr, fpr)
            };
            if changed {
                jobs.push((t.clone(), kind, fpr));
            } else {
                kept += 1;
            }
        }
        let rebuilt = jobs.iter().map(|(t, _, _)| t.record.number).collect();
        if !jobs.is_empty() {
            inner.replace_filters(jobs)?;
        }
        Ok(Rebalanced { rebuilt, kept })
    }
}

/// What [`Store::rebalance`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rebalanced {
    /// Numbers of the tables whose filter was rebuilt.
    pub rebuilt: Vec<u64>,
    /// Tables whose filter was kept.
    pub kept: usize,
}

pub(super) fn check_policy(policy: &FilterPolicy) -> Result<()> {
    match *policy {
        FilterPolicy::Uniform { kind, fpr } if kind != FilterKind::None => check_fpr(fpr),
        FilterPolicy::Budget { bits_per_key, .. }
            if !(bits_per_key.is_finite() && bits_per_key >= 0.0) =>
        {
            Err(Error::InvalidArgument(format!(
                "bits per key {bits_per_key} must be a finite number ≥ 0"
            )))
        }
        _ => Ok(()),
    }
}

/// Keys of the runs an absent lookup probes in `v`, without the tables numbered in `gone`:
/// each L0 table (newest first), and each level 1.. as one run (0 when empty).
fn run_keys(v: &Version, gone: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let keys = |ts: &[Arc<TableHandle>]| -> Vec<u64> {
        ts.iter()
            .filter(|t| !gone.contains(&t.record.number))
            .map(|t| t.record.entries)
            .collect()
    };
    let levels = v.levels();
    let l0 = levels.first().map_or_else(Vec::new, |l| keys(l.tables()));
    let deeper = levels
        .iter()
        .skip(1)
        .map(|l| keys(l.tables()).iter().sum())
        .collect();
    (l0, deeper)
}

/// A budget's rate as a filter: none at all when the allocation gives it no memory.
fn as_filter(kind: FilterKind, eps: f64) -> (FilterKind, f64) {
    if kind == FilterKind::None || eps >= MAX_FPR {
        (FilterKind::None, 1.0)
    } else {
        (kind, eps)
    }
}

/// The filter every table of `v` should have under `policy`, in `v.tables()` order.
pub(super) fn filter_targets(v: &Version, policy: &FilterPolicy) -> Vec<(FilterKind, f64)> {
    match *policy {
        FilterPolicy::Uniform { kind, fpr } => v.tables().map(|_| (kind, fpr)).collect(),
        FilterPolicy::Budget { kind, bits_per_key } => {
            let (l0, deeper) = run_keys(v, &[]);
            let n0 = l0.len();
            let runs: Vec<u64> = l0.into_iter().chain(deeper).collect();
            let eps = alloc::monkey(&runs, bits_per_key, SizeModel::of(kind));
            let mut out = Vec::new();
            for (l, level) in v.levels().iter().enumerate() {
                for (i, _) in level.tables().iter().enumerate() {
                    let run = if l == 0 { i } else { n0 + l - 1 };
                    out.push(as_filter(kind, eps.get(run).copied().unwrap_or(1.0)));
                }
            }
            out
        }
    }
}

/// The levels of `v` as slices (what the planner reads).
pub(super) fn level_slices(v: &Version) -> Vec<&[Arc<TableHandle>]> {
    v.levels().iter().map(|l| l.tables()).collect()
}

impl Inner {
    /// Seals `imm` into an L0 table and publishes it; its log is removed afterwards.
    pub(super) fn seal(&self, imm: &Imm) -> Result<()> {
        let table_no = self.alloc_file();
        let filter = self.filter_for(&self.current(), &[], 0, imm.mem.len() as u64);
        let filter_no = if filter.0 == FilterKind::None {
            0
        } else {
            self.alloc_file()
        };
        let sorted = imm.mem.sorted();
        let hashes = imm.mem.hashes();
        let record = self.write_table_files(table_no, filter_no, filter, &sorted, &hashes);
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                let _ = self.fs.remove(&table_path(&self.dir, table_no));
                let _ = self.fs.remove(&filter_path(&self.dir, filter_no));
                return Err(e);
            }
        };
        drop(sorted);
        let mut add = Vec::new();
        if let Some(r) = record {
            let bytes = r.file_bytes;
            add.push(Arc::new(TableHandle::open(
                &self.dir,
                r,
                self.opts.mmap_reads,
            )?));
            let c = &self.counters;
            c.flush_bytes.fetch_add(bytes, Relaxed);
        }
        let log_number = self.lock_versions().log_number.max(imm.log + 1);
        self.install(Install {
            edit: Edit {
                add,
                ..Edit::default()
            },
            log_number: Some(log_number),
            sealed: Some(imm.seq),
            ..Install::default()
        })?;
        if imm.log != 0 {
            *imm.wal.lock().unwrap_or_else(|p| p.into_inner()) = None;
            let _ = self.fs.remove(&wal_path(&self.dir, imm.log));
        }
        self.want_compaction();
        Ok(())
    }

    /// Writes an L0 table and its filter (in parallel) from sorted entries; `None` when
    /// there are no entries (no file is left behind).
    fn write_table_files<E: SortedEntries + ?Sized>(
        &self,
        table_no: u64,
        filter_no: u64,
        (kind, fpr): (FilterKind, f64),
        entries: &E,
        hashes: &[u64],
    ) -> Result<Option<TableRecord>> {
        if entries.is_empty() {
            return Ok(None);
        }
        let tpath = table_path(&self.dir, table_no);
        let fpath = filter_path(&self.dir, filter_no);
        let (t, f) = rayon::join(
            || crate::table::write_table(&*self.fs, &tpath, entries),
            || write_filter_file(&*self.fs, &fpath, kind, fpr, hashes),
        );
        let (meta, filter_bytes) = (t?, f?);
        self.counters
            .flush_bytes
            .fetch_add(filter_bytes.unwrap_or(0), Relaxed);
        Ok(Some(TableRecord::written(
            0,
            table_no,
            meta,
            filter_no,
            kind,
            fpr,
            filter_bytes.is_some(),
        )))
    }

    /// Publishes a change: the manifest naming the new table set is made durable, then the
    /// set is swapped in for readers. Handles that leave give their counters to the store's
    /// totals. A failure here poisons the store (the manifest on disk may be either one).
    pub(super) fn install(&self, change: Install) -> Result<Arc<Version>> {
        let mut vs = self.lock_versions();
        let old = self.current();
        let next = Arc::new(old.apply(&change.edit));
        let log_number = change.log_number.unwrap_or(vs.log_number);
        let mut cursors = vs.cursors.clone();
        if let Some((l, c)) = &change.cursor {
            if let Some(slot) = cursors.get_mut(*l) {
                *slot = Some(c.clone());
            }
        }
        let manifest = Manifest {
            next_file: self.next_file.load(SeqCst),
            log_number,
            default_kind: vs.default_kind,
            default_fpr: vs.default_fpr,
            tables: next.tables().map(|t| t.record.clone()).collect(),
            cursors: cursors
                .iter()
                .enumerate()
                .filter_map(|(l, c)| c.as_ref().map(|c| (l as u32, c.clone())))
                .collect(),
        };
        let r = self
            .fs
            .sync_dir(&self.dir)
            .map_err(|e| Error::io(&self.dir, e))
            .and_then(|()| manifest.store(&*self.fs, &self.dir));
        self.poison_on_err(r)?;
        vs.log_number = log_number;
        vs.cursors = cursors;
        {
            let mut st = self.state_mut();
            st.current = next.clone();
            if let Some(seq) = change.sealed {
                if st.imm.as_ref().is_some_and(|i| i.seq == seq) {
                    st.imm = None;
                }
            }
        }
        drop(vs);
        let live: HashSet<*const TableHandle> = next.tables().map(Arc::as_ptr).collect();
        for t in old.tables().filter(|t| !live.contains(&Arc::as_ptr(t))) {
            self.retire(t);
        }
        if change.sealed.is_some() {
            self.counters.flushes.fetch_add(1, Relaxed);
            // Before the flush is announced, so that a caller of `flush()` sees them saved.
            self.save_lifetime();
        }
        let mut bg = self.lock_bg();
        if let Some(seq) = change.sealed {
            bg.sealed = bg.sealed.max(seq);
        }
        self.bg_cv.notify_all();
        Ok(next)
    }

    /// A handle left the live set: its counters go into the store-wide totals.
    fn retire(&self, t: &TableHandle) {
        let (c, r) = (&t.counters, &self.retired);
        r.negatives.fetch_add(c.negatives(), Relaxed);
        r.positives.fetch_add(c.positives(), Relaxed);
        r.false_positives.fetch_add(c.false_positives(), Relaxed);
        r.unfiltered_misses
            .fetch_add(c.unfiltered_misses(), Relaxed);
        r.block_reads.fetch_add(c.block_reads(), Relaxed);
        r.bytes_read.fetch_add(c.bytes_read(), Relaxed);
    }

    /// Plans and runs one compaction if one is due. `Ok(false)`: none is.
    pub(super) fn compact_once(&self) -> Result<bool> {
        let _c = self.lock_compaction();
        let v = self.current();
        let cursors = self.lock_versions().cursors.clone();
        let Some(task) = plan(&level_slices(&v), &cursors, &self.opts.shape()) else {
            return Ok(false);
        };
        in_background(|| self.run_task(&v, task))?;
        Ok(true)
    }

    /// Runs `task`, planned on `v` (which the caller keeps live by holding the compaction
    /// lock: only flushes, which add L0 tables in front, change the set meanwhile).
    fn run_task(&self, v: &Version, task: Task) -> Result<()> {
        match task {
            Task::Move {
                table,
                from,
                cursor,
            } => {
                let Some(t) = v.levels()[from]
                    .tables()
                    .iter()
                    .find(|t| t.record.number == table)
                else {
                    // Not possible under the compaction lock; if it were, replanning is right.
                    return Ok(());
                };
                let moved = Arc::new(t.at_level(from as u32 + 1));
                self.install(Install {
                    edit: Edit {
                        remove: vec![table],
                        add: vec![moved],
                        ..Edit::default()
                    },
                    cursor: cursor.map(|c| (from, c)),
                    ..Install::default()
                })?;
                self.counters.trivial_moves.fetch_add(1, Relaxed);
                Ok(())
            }
            Task::Merge {
                from,
                inputs,
                output,
                cursor,
            } => self.run_merge(v, from, &inputs, output, cursor),
        }
    }

    fn run_merge(
        &self,
        v: &Version,
        from: usize,
        inputs: &[u64],
        output: usize,
        cursor: Option<Vec<u8>>,
    ) -> Result<()> {
        let scratch = Arc::new(TableCounters::default());
        let levels = level_slices(v);
        let mut sources = Vec::new();
        let mut input_bytes = 0;
        let mut doomed: Vec<PathBuf> = Vec::new();
        for (l, level) in levels.iter().enumerate() {
            let picked: Vec<&Arc<TableHandle>> = level
                .iter()
                .filter(|t| inputs.contains(&t.record.number))
                .collect();
            for t in &picked {
                input_bytes += t.record.file_bytes;
                doomed.push(table_path(&self.dir, t.record.number));
                if t.record.filter_file != 0 {
                    doomed.push(filter_path(&self.dir, t.record.filter_file));
                }
            }
            let tables: Vec<_> = picked.iter().map(|t| t.table.clone()).collect();
            if l == 0 {
                // Each L0 table is a source of its own, newest first.
                for t in tables {
                    sources.push(Source::new(vec![t], scratch.clone())?);
                }
            } else if !tables.is_empty() {
                sources.push(Source::new(tables, scratch.clone())?);
            }
        }
        let input_keys = levels
            .iter()
            .flat_map(|l| l.iter())
            .filter(|t| inputs.contains(&t.record.number))
            .map(|t| t.record.entries)
            .sum();
        let filter = self.filter_for(v, inputs, output, input_keys);
        let drop_tombstone = |k: &[u8]| tombstone_droppable(&levels, output, k);
        let alloc = || self.alloc_file();
        let out = Output {
            fs: &*self.fs,
            dir: &self.dir,
            level: output as u32,
            table_bytes: self.opts.table_bytes,
            filter,
            alloc: &alloc,
        };
        let result = merge(sources, &drop_tombstone, &out)?;
        let mut add = Vec::with_capacity(result.records.len());
        let opened: Result<()> = (|| {
            for r in &result.records {
                add.push(Arc::new(TableHandle::open(
                    &self.dir,
                    r.clone(),
                    self.opts.mmap_reads,
                )?));
            }
            Ok(())
        })();
        let installed = opened.and_then(|()| {
            self.install(Install {
                edit: Edit {
                    remove: inputs.to_vec(),
                    add,
                    ..Edit::default()
                },
                cursor: cursor.map(|c| (from, c)),
                ..Install::default()
            })
        });
        if let Err(e) = installed {
            if !self.poisoned.load(SeqCst) {
                for r in &result.records {
                    let _ = self.fs.remove(&table_path(&self.dir, r.number));
                    let _ = self.fs.remove(&filter_path(&self.dir, r.filter_file));
                }
            }
            return Err(e);
        }
        for p in doomed {
            let _ = self.fs.remove(&p);
        }
        let c = &self.counters;
        c.compactions.fetch_add(1, Relaxed);
        c.compaction_bytes.fetch_add(result.bytes_written, Relaxed);
        c.compaction_read_bytes.fetch_add(input_bytes, Relaxed);
        Ok(())
    }

    /// The filter a new table of `keys` keys at `level` gets: under a budget, the rate of its
    /// run in Monkey's allocation for `v` without the tables `gone` (a compaction's inputs),
    /// with the new keys added (a new L0 table is a run of its own; deeper, the keys join
    /// the level's run).
    pub(super) fn filter_for(
        &self,
        v: &Version,
        gone: &[u64],
        level: usize,
        keys: u64,
    ) -> (FilterKind, f64) {
        let FilterPolicy::Budget { kind, bits_per_key } = self.policy else {
            return (self.policy.kind(), self.fpr_of_policy());
        };
        let (mut l0, mut deeper) = run_keys(v, gone);
        let run = if level == 0 {
            l0.insert(0, keys);
            0
        } else {
            if let Some(n) = deeper.get_mut(level - 1) {
                *n += keys;
            }
            l0.len() + level - 1
        };
        let runs: Vec<u64> = l0.into_iter().chain(deeper).collect();
        let eps = alloc::monkey(&runs, bits_per_key, SizeModel::of(kind));
        as_filter(kind, eps.get(run).copied().unwrap_or(1.0))
    }

    fn fpr_of_policy(&self) -> f64 {
        match self.policy {
            FilterPolicy::Uniform { fpr, .. } => fpr,
            FilterPolicy::Budget { .. } => self.fpr,
        }
    }

    /// Gives each table of `jobs` a new filter of its kind at its rate, then publishes them
    /// in one manifest swap and removes the old filter files. The caller holds the
    /// compaction lock.
    fn replace_filters(&self, jobs: Vec<(Arc<TableHandle>, FilterKind, f64)>) -> Result<()> {
        let mut fresh: Vec<Arc<TableHandle>> = Vec::new();
        let cleanup = |fresh: &[Arc<TableHandle>]| {
            for h in fresh {
                if h.record.filter_file != 0 {
                    let _ = self
                        .fs
                        .remove(&filter_path(&self.dir, h.record.filter_file));
                }
            }
        };
        for (t, kind, fpr) in &jobs {
            match in_background(|| self.rebuild_filter(t, *kind, *fpr)) {
                Ok(h) => fresh.push(h),
                Err(e) => {
                    cleanup(&fresh);
                    return Err(e);
                }
            }
        }
        let old: Vec<u64> = jobs.iter().map(|(t, _, _)| t.record.filter_file).collect();
        let r = self.install(Install {
            edit: Edit {
                replace: fresh.clone(),
                ..Edit::default()
            },
            ..Install::default()
        });
        if let Err(e) = r {
            // A failed manifest replacement (the store is poisoned then) may have renamed the
            // new manifest into place: the filter files it names must stay.
            if !self.poisoned.load(SeqCst) {
                cleanup(&fresh);
            }
            return Err(e);
        }
        for n in old.into_iter().filter(|&n| n != 0) {
            let _ = self.fs.remove(&filter_path(&self.dir, n));
        }
        Ok(())
    }

    /// A handle for table `t` with a new filter of `kind` at `fpr` (built from its keys).
    fn rebuild_filter(
        &self,
        t: &Arc<TableHandle>,
        kind: FilterKind,
        fpr: f64,
    ) -> Result<Arc<TableHandle>> {
        let scratch = Arc::new(TableCounters::default());
        let mut hashes = Vec::with_capacity(t.record.entries as usize);
        let mut c = TableCursor::new(t.table.clone(), scratch)?;
        while c.valid() {
            hashes.push(crate::hash::key_hash(c.key()));
            c.advance()?;
        }
        let filter_no = if kind == FilterKind::None {
            0
        } else {
            self.alloc_file()
        };
        let fpath = filter_path(&self.dir, filter_no);
        let bytes = write_filter_file(&*self.fs, &fpath, kind, fpr, &hashes)?;
        let mut record = t.record.clone();
        record.filter_file = if bytes.is_some() { filter_no } else { 0 };
        record.filter_kind = kind;
        record.fpr = fpr;
        let filter = match bytes {
            Some(_) => Some(Arc::new(MappedFilter::open(&fpath)?)),
            None => None,
        };
        Ok(Arc::new(TableHandle::new(
            t.table.clone(),
            filter,
            record,
            None,
        )))
    }
}
