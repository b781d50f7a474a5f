//! Background threads, sealing, and installing a new table set.
//!
//! Three threads per store: the **flush thread** seals the immutable memtable into an L0 table
//! (the table and its filter written in parallel on the rayon pool); the **compaction thread**
//! runs the compaction driver (`compact.rs`) until no task is due; the **growth thread**
//! builds a larger global filter when a flush finds the one in use filling (`global.rs`). Each result is published
//! by [`Inner::install`]: under the version-set lock, the new table set is written to the
//! manifest (atomically) and then swapped in for readers. A failure poisons the store:
//! writes get [`Error::Poisoned`], reads go on, and the logs that are not yet in tables stay
//! on disk.
//!
//! Lock order: writer → bg → state, and versions → state; the background threads never take
//! the writer lock, so a writer waiting for them (holding it) cannot block them. The commit
//! queue's lock (`commit.rs`) is a leaf: no other lock is taken while it is held.

use std::collections::HashSet;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Imm, Inner, IDLE_DRAIN_PROBES};
use crate::error::{Error, Result};
use crate::filename::{filter_path, range_path, table_path, wal_path};
use crate::filter::alloc::FilterPolicy;
use crate::filter::FilterKind;
use crate::manifest::{Manifest, RangeRecord, TableRecord};
use crate::table::{write_filter_file, write_range_file, SortedEntries};
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
    /// A filter policy to record for the store (and to use for this handle's new tables).
    pub policy: Option<FilterPolicy>,
    /// A new global filter for lookups to go through (`Some(None)`: none, lookups use the
    /// tables' own filters again).
    pub global: Option<Option<Arc<crate::global_index::GlobalIndex>>>,
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
        spawn("filterstore-grow", growth_loop, true)?,
    ])
}

/// Grows the global filter when a flush asks (`Inner::grow`): a thread of its own, so that
/// neither flushes nor compactions wait for the build.
fn growth_loop(inner: Arc<Inner>) {
    loop {
        let more = {
            let mut bg = inner.lock_bg();
            let more = loop {
                if inner.shutdown.load(SeqCst) {
                    return;
                }
                match bg.grow_wanted.take() {
                    Some(more) if bg.error.is_none() => break more,
                    _ => bg = inner.bg_cv.wait(bg).unwrap_or_else(|p| p.into_inner()),
                }
            };
            bg.growing = true;
            more
        };
        let r = inner.grow(more);
        inner.lock_bg().growing = false;
        inner.bg_cv.notify_all();
        if let Err(e) = r {
            inner.poison(&e);
        }
    }
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
    /// Seals `imm` into an L0 table and publishes it; its log is removed afterwards.
    pub(super) fn seal(&self, imm: &Imm) -> Result<()> {
        self.grow_global(imm.mem.len() as u64)?;
        // Until the table is published: a switch to or from the global filter waits.
        let _g = self.lock_global();
        let global = self.current().global().cloned();
        let table_no = self.alloc_file()?;
        let filter = self.filter_for(&self.current(), &[], 0, imm.mem.len() as u64);
        let filter_no = if filter.0 == FilterKind::None {
            0
        } else {
            self.alloc_file()?
        };
        let bits = self.range_bits();
        let range = (bits > 0.0)
            .then(|| self.alloc_file().map(|n| (n, bits)))
            .transpose()?;
        let sorted = imm.mem.sorted();
        let hashes = imm.mem.hashes();
        let files = (table_no, filter_no, range);
        // The global filter takes the keys while the table is written: its entries may
        // come before the table (a run without a table is not read), never after.
        let (record, run) = rayon::join(
            || self.write_table_files(files, filter, &sorted, imm.mem.keys(), &hashes),
            || global.as_ref().map(|g| self.global_insert(g, &hashes)),
        );
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                if let (Some(g), Some(run)) = (&global, run) {
                    self.global_uninsert(g, run, &hashes);
                }
                let _ = self.fs.remove(&table_path(&self.dir, table_no));
                let _ = self.fs.remove(&filter_path(&self.dir, filter_no));
                if let Some((n, _)) = range {
                    let _ = self.fs.remove(&range_path(&self.dir, n));
                }
                return Err(e);
            }
        };
        drop(sorted);
        let mut add = Vec::new();
        if let Some(r) = record {
            let bytes = r.file_bytes;
            let t = TableHandle::open(
                &self.dir,
                r,
                self.opts.mmap_reads,
                self.block_cache.as_ref(),
            )?;
            if let Some(run) = run {
                t.set_run(run);
            }
            add.push(Arc::new(t));
            let c = &self.counters;
            c.flush_bytes.fetch_add(bytes, Relaxed);
        }
        let log_number = self.lock_versions().log_number.max(imm.log + 1);
        self.install(Install {
            edit: Edit {
                add: add.into_iter().map(|t| (0, t)).collect(),
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

    /// Writes an L0 table, its filter and its range filter (in parallel) from sorted
    /// entries, as file numbers `(table, filter, (range filter, its bits per key))`; `None`
    /// when there are no entries (no file is left behind). The range filter is built from
    /// `keys`, the entries' keys in any order (the memtable gives them in its memory's order).
    fn write_table_files<'k, E: SortedEntries + ?Sized>(
        &self,
        (table_no, filter_no, range): (u64, u64, Option<(u64, f64)>),
        (kind, fpr): (FilterKind, f64),
        entries: &E,
        keys: impl ExactSizeIterator<Item = &'k [u8]> + Send,
        hashes: &[u64],
    ) -> Result<Option<TableRecord>> {
        if entries.is_empty() {
            return Ok(None);
        }
        let tpath = table_path(&self.dir, table_no);
        let fpath = filter_path(&self.dir, filter_no);
        let write_range = |(n, bits): (u64, f64)| -> Result<u64> {
            let block = crate::filter::range::build(keys, bits)?;
            write_range_file(&*self.fs, &range_path(&self.dir, n), &block)
        };
        let (t, (f, r)) = rayon::join(
            || crate::table::write_table(&*self.fs, &tpath, entries, self.opts.compression),
            || {
                rayon::join(
                    || write_filter_file(&*self.fs, &fpath, kind, fpr, hashes),
                    || range.map(write_range).transpose(),
                )
            },
        );
        let (meta, filter_bytes, range_bytes) = (t?, f?, r?);
        self.counters.flush_bytes.fetch_add(
            filter_bytes.unwrap_or(0) + range_bytes.unwrap_or(0),
            Relaxed,
        );
        let mut record = TableRecord::written(
            0,
            table_no,
            meta,
            filter_no,
            kind,
            fpr,
            filter_bytes.is_some(),
        );
        record.range = range.map(|(file, bits_per_key)| RangeRecord { file, bits_per_key });
        Ok(Some(record))
    }

    /// Publishes a change: the manifest naming the new table set is made durable, then the
    /// set is swapped in for readers. Handles that leave give their counters to the store's
    /// totals. A failure here poisons the store (the manifest on disk may be either one).
    pub(super) fn install(&self, change: Install) -> Result<Arc<Version>> {
        let mut vs = self.lock_versions();
        let old = self.current();
        let mut next = old.apply(&change.edit);
        if let Some(g) = change.global {
            next = next.with_global(g);
        }
        let next = Arc::new(next);
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
            policy: change.policy.unwrap_or(vs.recorded),
            tables: next.tables().map(|t| t.record.clone()).collect(),
            cursors: cursors
                .iter()
                .enumerate()
                .filter_map(|(l, c)| c.as_ref().map(|c| (l as u32, c.clone())))
                .collect(),
            last_seq: self.last_seq.load(SeqCst),
        };
        let r = self
            .fs
            .sync_dir(&self.dir)
            .map_err(|e| Error::io(&self.dir, e))
            .and_then(|()| manifest.store(&*self.fs, &self.dir));
        self.poison_on_err(r)?;
        vs.log_number = log_number;
        vs.cursors = cursors;
        if let Some(p) = change.policy {
            vs.recorded = p;
            vs.adopt(p);
        }
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
        if let Some(cache) = &self.block_cache {
            // Tables whose file left the store (a refilter or a move keeps the file, and
            // with it the blocks' keys). A scan still holding one reads its blocks from the
            // file.
            let files: HashSet<u64> = next.tables().map(|t| t.record.number).collect();
            for t in old.tables().filter(|t| !files.contains(&t.record.number)) {
                cache.forget_file(t.record.number, t.table.block_count() as u64);
            }
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
        r.cache_hits.fetch_add(c.cache_hits(), Relaxed);
        r.cache_misses.fetch_add(c.cache_misses(), Relaxed);
    }
}
