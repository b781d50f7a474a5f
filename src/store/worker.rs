//! Background threads, sealing, and installing a new table set.
//!
//! Three threads per store: the **flush thread** seals the immutable memtable into an L0 table
//! (the table and its filter written in parallel on the rayon pool); the **compaction thread**
//! runs the compaction driver (`compact.rs`) until no task is due; the **growth thread**
//! builds a larger global filter when a flush finds the one in use filling (`global.rs`). Each
//! result is published through the table-set layer ([`Inner::log_and_apply`],
//! `version/set.rs`): the new table set is written to the manifest (atomically) and then
//! swapped in for readers. A failure poisons the store:
//! writes get [`Error::Poisoned`], reads go on, and the logs that are not yet in tables stay
//! on disk.
//!
//! Lock order: writer → bg → state, and versions → state; the background threads never take
//! the writer lock, so a writer waiting for them (holding it) cannot block them. The commit
//! queue's lock (`commit.rs`) is a leaf: no other lock is taken while it is held.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Imm, Inner, IDLE_DRAIN_PROBES};
use crate::error::{Error, Result};
use crate::filter::FilterKind;
use crate::table::files::{TableSpec, TableWriter};
use crate::table::SortedEntries;
use crate::version::{Edit, TableHandle, VersionEdit};

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

/// Grows a tree's global filter when a flush asks (`Inner::grow`; each keyspace under the
/// global filter has its own, one grown at a time): a thread of its own, so that neither
/// flushes nor compactions wait for the build.
fn growth_loop(inner: Arc<Inner>) {
    loop {
        let (slot, more) = {
            let mut bg = inner.lock_bg();
            let wanted = loop {
                if inner.shutdown.load(SeqCst) {
                    return;
                }
                match bg.grow_wanted.pop_first() {
                    Some(wanted) if bg.error.is_none() => break wanted,
                    _ => bg = inner.bg_cv.wait(bg).unwrap_or_else(|p| p.into_inner()),
                }
            };
            bg.growing = Some(wanted.0);
            wanted
        };
        // The tree of `slot` (none once its keyspace was dropped).
        let r = inner.tree_at(slot).map_or(Ok(()), |t| t.grow(more));
        inner.lock_bg().growing = None;
        inner.bg_cv.notify_all();
        if let Err(e) = r {
            inner.poison(&e);
        }
    }
}

fn flush_loop(inner: Arc<Inner>) {
    loop {
        let (slot, imm) = {
            let mut bg = inner.lock_bg();
            loop {
                // The oldest waiting memtable of any tree: seals go in queue order, so
                // `Bg::sealed` counts every memtable up to it.
                let imm = inner
                    .read_state()
                    .trees
                    .iter()
                    .enumerate()
                    .filter_map(|(slot, t)| t.imm.clone().map(|i| (slot, i)))
                    .min_by_key(|(_, i)| i.seq);
                match imm {
                    Some(imm) if bg.error.is_none() && bg.may_seal(imm.1.seq) => break imm,
                    _ if inner.shutdown.load(SeqCst) => return,
                    _ => bg = inner.bg_cv.wait(bg).unwrap_or_else(|p| p.into_inner()),
                }
            }
        };
        let Some(tree) = inner.tree_at(slot) else {
            continue;
        };
        if let Err(e) = tree.seal(&imm) {
            inner.poison(&e);
        }
    }
}

/// Why L0 is drained into L1 below the trigger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Drain {
    /// Writes paused while lookups probed L0 ([`Options::idle_drain`](super::Options::idle_drain)).
    Idle,
    /// Scans read enough blocks from L0 ([`Options::scan_drain`](super::Options::scan_drain)).
    Scans,
}

/// How often the compaction thread looks for an idle L0 drain while L0 holds tables.
const IDLE_POLL: Duration = Duration::from_millis(250);
/// How often an otherwise idle compaction thread asks the planner about expired entries
/// while tables hold expiring ones (a planning pass reads the table set only).
const EXPIRY_POLL: Duration = Duration::from_secs(1);

fn compaction_loop(inner: Arc<Inner>) {
    let mut idle = IdleWatch::new();
    let drain_after = inner
        .opts
        .idle_drain
        .filter(|_| inner.opts.compaction_trigger.is_some());
    let ranges_after = inner.opts.deferred_range_filters;
    let scan_drain = inner.opts.scan_drain && inner.opts.compaction_trigger.is_some();
    // The drains due at a poll: the idle drain (the default tree's), else the scan drains of
    // the trees whose scans paid for one (`Inner::scan_drain_due`).
    let drains_due = |idle: &mut IdleWatch| -> (bool, Vec<Arc<Inner>>) {
        if drain_after.is_some_and(|d| inner.current().l0_count() > 0 && idle.due(&inner, d)) {
            return (true, Vec::new());
        }
        let trees = if scan_drain {
            inner.all_trees()
        } else {
            Vec::new()
        };
        (
            false,
            trees.into_iter().filter(|t| t.scan_drain_due()).collect(),
        )
    };
    let mut quiet = Quiet::new(&inner);
    loop {
        let mut drain = false;
        let mut paid = Vec::new();
        let mut ranges = false;
        {
            let mut bg = inner.lock_bg();
            while !bg.compaction_wanted && !inner.shutdown.load(SeqCst) {
                // Deferred range filters: built once writes pause (`ranges.rs`). The drains
                // are looked for at the same polls.
                let backlog = || inner.all_trees().iter().any(|t| t.range_backlog());
                let l0 = || inner.all_trees().iter().any(|t| t.current().l0_count() > 0);
                let ranges_after = ranges_after.filter(|_| backlog());
                if ranges_after.is_some() || ((drain_after.is_some() || scan_drain) && l0()) {
                    let poll = [ranges_after, drain_after, Some(IDLE_POLL)];
                    let poll = poll.into_iter().flatten().min().unwrap_or(IDLE_POLL);
                    let (g, _) = inner
                        .bg_cv
                        .wait_timeout(bg, poll)
                        .unwrap_or_else(|p| p.into_inner());
                    bg = g;
                    if bg.compaction_wanted || bg.error.is_some() {
                        continue;
                    }
                    (drain, paid) = drains_due(&mut idle);
                    if drain || !paid.is_empty() {
                        break;
                    }
                    if ranges_after.is_some_and(|after| quiet.for_at_least(&inner, after)) {
                        ranges = true;
                        break;
                    }
                } else if inner.opts.compaction_trigger.is_some()
                    && inner.current().holds_expiring()
                {
                    // Tables holding entries that expire: look again now and then, so that a
                    // store no write reaches still reclaims them (`plan_expired`).
                    let (g, timeout) = inner
                        .bg_cv
                        .wait_timeout(bg, EXPIRY_POLL)
                        .unwrap_or_else(|p| p.into_inner());
                    bg = g;
                    if timeout.timed_out() && bg.error.is_none() {
                        break;
                    }
                } else {
                    bg = inner.bg_cv.wait(bg).unwrap_or_else(|p| p.into_inner());
                }
            }
            if inner.shutdown.load(SeqCst) {
                return;
            }
            bg.compaction_wanted = false;
        }
        if drain {
            if let Err(e) = inner.drain_l0(Drain::Idle) {
                inner.poison(&e);
            }
        }
        for t in paid {
            match t.drain_l0(Drain::Scans) {
                Err(_) if t.tree.dropped.load(SeqCst) => {}
                Err(e) => inner.poison(&e),
                Ok(_) => {}
            }
        }
        // Deferred range filters, tree after tree: one table at a time, while writes stay
        // paused and no compaction is wanted.
        'ranges: for t in inner.all_trees().iter().filter(|_| ranges) {
            while !inner.shutdown.load(SeqCst) && !inner.poisoned.load(SeqCst) {
                if inner.lock_bg().compaction_wanted || !quiet.for_at_least(&inner, Duration::ZERO)
                {
                    break 'ranges;
                }
                match t.build_deferred_range() {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(_) if t.tree.dropped.load(SeqCst) => break,
                    Err(e) => {
                        inner.poison(&e);
                        break 'ranges;
                    }
                }
            }
        }
        // Every tree in turn, one compaction each, until none is due in any (a dropped
        // keyspace's tree is left alone: its changes fail once its record is gone).
        let mut trees = inner.all_trees();
        while !trees.is_empty() && !inner.shutdown.load(SeqCst) && !inner.poisoned.load(SeqCst) {
            trees.retain(|t| match t.compact_once() {
                Ok(more) => more && !t.tree.dropped.load(SeqCst),
                Err(_) if t.tree.dropped.load(SeqCst) => false,
                Err(e) => {
                    inner.poison(&e);
                    false
                }
            });
        }
    }
}

/// Watches for writes pausing (deferred range filters are built then).
struct Quiet {
    /// The store's count of bytes written when writes were last seen.
    written: u64,
    since: Instant,
}

impl Quiet {
    fn new(inner: &Inner) -> Quiet {
        Quiet {
            written: inner.counters.user_bytes.load(Relaxed),
            since: Instant::now(),
        }
    }

    /// Whether no write arrived for `after`; a write starts the watch again.
    fn for_at_least(&mut self, inner: &Inner, after: Duration) -> bool {
        let written = inner.counters.user_bytes.load(Relaxed);
        if written != self.written {
            *self = Quiet {
                written,
                since: Instant::now(),
            };
            return false;
        }
        self.since.elapsed() >= after
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
    /// Seals `imm` into an L0 table (its three files written in parallel by
    /// [`TableWriter::write_whole`]) and publishes it; its log is removed afterwards.
    pub(super) fn seal(&self, imm: &Imm) -> Result<()> {
        // Room in the global filter, unless the table gets a filter of its own (checked
        // again below: should the tree change meanwhile, the filter grows at its next
        // flush).
        let own = self.current().global().is_some()
            && self.filter_for(&self.current(), &[], 0, 0).0 != FilterKind::None;
        if !own {
            self.grow_global(imm.mem.len() as u64)?;
        }
        // Until the table is published: a switch to or from the global filter waits.
        let _g = self.lock_global();
        let global = self.current().global().cloned();
        let table_no = self.alloc_file()?;
        let filter = self.filter_for(&self.current(), &[], 0, imm.mem.len() as u64);
        // Under the global filter, an L0 table with a filter of its own (no level below
        // holds tables yet: `filter_for`) keeps its keys out of the global filter.
        let insert_into = global.as_ref().filter(|_| filter.0 == FilterKind::None);
        let filter_no = if filter.0 == FilterKind::None {
            0
        } else {
            self.alloc_file()?
        };
        let range_bits = self.range_bits_at(&self.current(), 0);
        let range_no = (range_bits > 0.0).then(|| self.alloc_file()).transpose()?;
        let sorted = imm.mem.sorted();
        // In key order under the global filter: they go to the table's key hashes file.
        let hashes = if global.is_some() {
            sorted.hashes()
        } else {
            imm.mem.hashes()
        };
        let alloc = || self.alloc_file();
        let spec = TableSpec {
            fs: &self.fs,
            dir: &self.dir,
            level: 0,
            filter,
            compression: self.opts.compression,
            range_bits,
            range_clock: Some(&self.tree.range_counters.1),
            alloc: &alloc,
            key_hashes: global.is_some(),
        };
        let files = (table_no, filter_no, range_no);
        // The global filter takes the keys while the table is written: its entries may
        // come before the table (a run without a table is not read), never after.
        let (written, run) = rayon::join(
            || {
                (!sorted.is_empty())
                    .then(|| {
                        let t = TableWriter::write_whole(
                            &spec,
                            files,
                            &sorted,
                            imm.mem.keys(),
                            &hashes,
                        )?;
                        t.with_tombstones(
                            &spec,
                            &crate::tombstone::sorted(imm.mem.ranges_at(u64::MAX)),
                        )
                    })
                    .transpose()
            },
            // No table (a memtable of range tombstones only, or none): no L0 id either, or
            // the filter would keep one that no table gives back.
            || {
                let g = insert_into.filter(|_| !sorted.is_empty());
                g.map(|g| self.global_insert(g, &hashes))
            },
        );
        drop(sorted);
        let written = match written {
            Ok(w) => w,
            Err(e) => {
                // The files written so far go with the error (`table/files.rs`).
                if let (Some(g), Some(run)) = (insert_into, run) {
                    self.global_uninsert(g, run, &hashes);
                }
                return Err(e);
            }
        };
        let mut add = Vec::new();
        if let Some(w) = written {
            let c = &self.counters;
            c.flush_bytes.fetch_add(w.filter_bytes, Relaxed);
            let bytes = w.record.file_bytes;
            let t = TableHandle::open(
                &self.dir,
                w.record,
                w.files,
                self.opts.mmap_reads,
                self.block_cache.as_ref(),
            )?;
            if let Some(run) = run {
                t.set_run(run);
            }
            add.push((0, Arc::new(t)));
            c.flush_bytes.fetch_add(bytes, Relaxed);
        }
        let log_number = self.lock_versions().log_number.max(imm.log + 1);
        let edit = VersionEdit {
            tables: Edit {
                add,
                ..Edit::default()
            },
            log_number: Some(log_number),
            ..VersionEdit::default()
        };
        self.log_and_apply_with(edit, |st| {
            if st.imm.as_ref().is_some_and(|i| i.seq == imm.seq) {
                st.imm = None;
            }
            st.log_number = log_number;
        })?;
        self.counters.flushes.fetch_add(1, Relaxed);
        // Before the flush is announced, so that a caller of `flush()` sees them saved (by
        // the default keyspace's handle, whose table counters they hold; see `stats.rs`).
        if self.tree.id == 0 {
            self.save_lifetime();
        }
        {
            let mut bg = self.lock_bg();
            bg.sealed = bg.sealed.max(imm.seq);
            self.bg_cv.notify_all();
        }
        let wal = imm.wal.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut wal) = wal {
            // Another keyspace still needs the log: its writes there stay durable by `sync`.
            if imm.log >= self.manifest.min_log_number() {
                let r = wal.sync();
                self.poison_on_err(r)?;
            }
        }
        self.remove_obsolete_logs();
        self.want_compaction();
        Ok(())
    }
}
