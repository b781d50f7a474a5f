//! What the store counts: lookups and what its filters saved, per table, per level and in
//! total, and the engine's own work (bytes written, stalls, flushes, compactions).

use std::sync::atomic::Ordering::Relaxed;

use super::stats_filters::observed_fpr;
pub use super::stats_filters::TableStats;
use super::Store;
use crate::filter::FilterKind;
pub use crate::global_index::GlobalFilterStats;
use crate::lifetime::Lifetime;
use crate::verify::Warning;
use crate::version::Version;

mod bits;

/// Counters and sizes of the whole store.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
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
    /// Data blocks read from table files by lookups and scans: block cache misses, every
    /// block a lookup or scan needed when the cache is off, and the blocks a scan read ahead
    /// with a miss when it takes them. Blocks found in the cache are
    /// [`block_cache_hits`](Self::block_cache_hits), not reads; compactions' reads are
    /// [`compaction_bytes_read`](Self::compaction_bytes_read).
    pub data_block_reads: u64,
    /// Bytes read from table files by lookups and scans: the blocks counted in
    /// [`data_block_reads`](Self::data_block_reads), with their CRCs (a block a scan read
    /// ahead and never took is in neither).
    pub bytes_read: u64,
    /// Data blocks that lookups and scans found in the block cache (no read from the file).
    /// A lookup or scan needs `data_block_reads + block_cache_hits` blocks.
    pub block_cache_hits: u64,
    /// Data blocks that lookups and scans looked for in the block cache and did not find
    /// (each then read from the file: one of the `data_block_reads`). 0 with the cache off.
    pub block_cache_misses: u64,
    /// Bytes the block cache holds now: its blocks' lengths plus 64 bytes of bookkeeping
    /// each (never more than [`block_cache_capacity`](Self::block_cache_capacity)).
    pub block_cache_bytes: u64,
    /// The block cache's capacity in bytes ([`Options::block_cache_bytes`] rounded down to a
    /// multiple of its shard count; 0 when it is off).
    ///
    /// [`Options::block_cache_bytes`]: crate::Options::block_cache_bytes
    pub block_cache_capacity: u64,
    /// Key and value bytes written by `put`, `delete` and `write`.
    pub user_bytes_written: u64,
    /// Bytes appended to logs.
    pub wal_bytes_written: u64,
    /// Bytes of tables and filters written by flushes.
    pub flush_bytes_written: u64,
    /// Bytes of tables and filters written by compactions.
    pub compaction_bytes_written: u64,
    /// Bytes of tables read by compactions.
    pub compaction_bytes_read: u64,
    /// Memtables sealed into tables.
    pub flushes: u64,
    /// Compactions that merged tables.
    pub compactions: u64,
    /// Compactions that moved a table down a level without rewriting it.
    pub trivial_moves: u64,
    /// Idle L0 drains (see [`Options::idle_drain`](crate::Options::idle_drain)): L0 → L1
    /// compactions run below the trigger because writes paused while lookups probed L0.
    pub idle_drains: u64,
    /// Scan drains (see [`Options::scan_drain`](crate::Options::scan_drain)): L0 → L1
    /// compactions run below the trigger because scans had read enough blocks from L0.
    pub scan_drains: u64,
    /// L0 merges: compactions that merged every L0 table into one L0 table because L0
    /// held half the trigger's tables and little data (docs/engine.md, "L0 merge").
    pub l0_merges: u64,
    /// Time writes spent slowed down because L0 held `l0_slowdown` tables or more.
    pub slowdown_micros: u64,
    /// Time writes spent stopped because L0 held `l0_stop` tables or more.
    pub stop_micros: u64,
    /// Time writes spent waiting for the previous memtable to be sealed.
    pub memtable_wait_micros: u64,
    /// Groups of writes committed to the log: a `put`, `delete` or `write` that arrives while
    /// another writer's log write (and fsync) is in progress waits, and the next leader
    /// commits every waiting writer with one log write and, with
    /// [`SyncPolicy::EveryWrite`](crate::SyncPolicy::EveryWrite), one fsync. A writer that
    /// finds nobody writing is a group of one. This process's, since the store was opened.
    pub commit_groups: u64,
    /// Writes committed in those groups (`commit_writes ÷ commit_groups`: the mean size).
    pub commit_writes: u64,
    /// Range filter probes: tables whose range filter a scan (`scan`, `scan_prefix`) asked
    /// before reading any of their blocks. This process's, since the store was opened (the
    /// store's totals, like the other range counters', are in [`lifetime`](Self::lifetime)).
    pub range_probes: u64,
    /// Probes that answered "no key of this table in the range": tables a scan skipped
    /// without reading a block.
    pub range_skipped: u64,
    /// Probes that answered "maybe" for a table that then held no key in the range (one
    /// block read for nothing); `range_false_positives ÷ (range_false_positives +
    /// range_skipped)` is the observed false-positive rate on empty ranges.
    pub range_false_positives: u64,
    /// Bytes of the live tables' range filter files (mapped, like the point filters).
    pub range_filter_bytes: u64,
    /// Range filter builds and their time (this process's).
    pub range_build: super::RangeBuildStats,
    /// The allocation model's predicted wasted reads for the current levels, Monkey's and
    /// uniform's, beside the observed ones (`None` without per-table filters).
    pub allocation_model: Option<super::AllocationModel>,
    /// Live tables: L0 newest first, then each level in key order.
    pub tables: Vec<TableStats>,
    /// Per level, L0 first; levels without tables are included up to the deepest one that
    /// has some.
    pub levels: Vec<LevelStats>,
    /// The counters since the store was created, this process's included. They are saved
    /// in the store's `COUNTERS` file at the end of every flush and when the store is
    /// closed, so a crash loses the counts since the last flush or close.
    pub lifetime: Lifetime,
    /// Why the saved lifetime counters could not be read (a damaged `COUNTERS` file, in
    /// which case [`lifetime`](Self::lifetime) counts from this open), or why the last
    /// attempt to save them failed. `None` when all is well.
    pub lifetime_problem: Option<String>,
    /// Logs whose torn tail (damage at the end with no valid record after it: the write in
    /// flight at a crash) this open dropped; see [`Store::dropped_at_open`] for the files
    /// and offsets.
    pub torn_tails_dropped: u64,
    /// Bytes of those torn tails.
    pub torn_tail_bytes_dropped: u64,
    /// The store's global key-to-run filter, when lookups go through it
    /// ([`FilterKind::Global`]). Its probes are in the counters above too: an "absent"
    /// answer is one of the `filter_negatives`, each run it named and a lookup read one of
    /// the `filter_positives`, and each of those that did not hold the key one of the
    /// `false_positives`.
    pub global_filter: Option<GlobalFilterStats>,
    /// Open snapshots ([`Store::snapshot`]): how many, the oldest's age, what they keep.
    pub snapshots: super::SnapshotStats,
    /// Expiry and range deletion: entries expired, range tombstones, tables dropped whole.
    pub lifecycle: super::LifecycleStats,
}

impl Stats {
    /// Filter probes (negatives + positives).
    pub fn filter_probes(&self) -> u64 {
        self.filter_negatives + self.filter_positives
    }
    /// Data blocks lookups and scans needed: read from a table file or found in the block
    /// cache (`data_block_reads + block_cache_hits`).
    pub fn data_blocks_used(&self) -> u64 {
        self.data_block_reads + self.block_cache_hits
    }
    /// Bytes of the tables' data blocks before compression.
    pub fn data_bytes(&self) -> u64 {
        self.tables.iter().map(|t| t.data_bytes).sum()
    }
    /// Bytes of the tables' data blocks as stored (after compression).
    pub fn stored_data_bytes(&self) -> u64 {
        self.tables.iter().map(|t| t.stored_data_bytes).sum()
    }
    /// false positives / (false positives + negatives); `None` before any absent probe.
    pub fn observed_fpr(&self) -> Option<f64> {
        observed_fpr(self.false_positives, self.filter_negatives)
    }
    /// Keys in tables (tombstones included).
    pub fn table_keys(&self) -> u64 {
        self.tables.iter().map(|t| t.keys).sum()
    }
    /// Expected wasted data-block reads per absent lookup, the cost Monkey minimises: the
    /// sum, over the tables an absent key probes when it lies inside every table's key range
    /// (each L0 table, one table per deeper level), of their filters' theoretical
    /// false-positive rates (1 for a table without a filter). Within a level, tables count
    /// by their share of its keys. A level whose tables cover only part of the key space is
    /// probed by fewer lookups, so real lookups waste at most this.
    pub fn expected_absent_reads(&self) -> f64 {
        self.levels.iter().map(|l| l.expected_reads).sum()
    }
    /// The same prediction for the lookups this process made: each table's theoretical rate
    /// times the probes it received, per lookup (the tables a lookup reached are counted,
    /// not assumed). Compare with [`observed_absent_reads`](Self::observed_absent_reads)
    /// after lookups of absent keys; `None` before any lookup. Tables count their probes
    /// since they (or their filter) were installed, lookups since the store was opened: the
    /// two agree while no flush, compaction or refilter happened during the lookups.
    pub fn predicted_absent_reads(&self) -> Option<f64> {
        (self.lookups > 0).then(|| {
            self.tables
                .iter()
                .map(|t| {
                    let probes = t.filter_negatives + t.filter_positives;
                    t.theoretical_fpr * probes as f64 + t.unfiltered_reads as f64
                })
                .sum::<f64>()
                / self.lookups as f64
        })
    }
    /// Observed wasted reads per lookup: (false positives + reads of unfiltered tables that
    /// found nothing) ÷ lookups. For lookups of absent keys this is what
    /// [`expected_absent_reads`](Self::expected_absent_reads) predicts; `None` before any.
    pub fn observed_absent_reads(&self) -> Option<f64> {
        (self.lookups > 0)
            .then(|| (self.false_positives + self.unfiltered_reads) as f64 / self.lookups as f64)
    }
    /// Bytes the store wrote (logs, flushes, compactions) per key and value byte written to
    /// it; `None` before any write.
    pub fn write_amplification(&self) -> Option<f64> {
        let written =
            self.wal_bytes_written + self.flush_bytes_written + self.compaction_bytes_written;
        (self.user_bytes_written > 0).then(|| written as f64 / self.user_bytes_written as f64)
    }
    /// Time writes spent held back (slowdown, stop and memtable waits), in microseconds.
    pub fn stall_micros(&self) -> u64 {
        self.slowdown_micros + self.stop_micros + self.memtable_wait_micros
    }
}

/// Counters and sizes of one level.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct LevelStats {
    /// The level (0 for the flushed tables).
    pub level: u32,
    /// Tables.
    pub tables: u64,
    /// Entries, tombstones included.
    pub keys: u64,
    /// Table file bytes.
    pub file_bytes: u64,
    /// Filter file bytes.
    pub filter_bytes: u64,
    /// Heap memory of the tables' indexes.
    pub index_memory_bytes: u64,
    /// Target size (0 for L0, whose size is a table count).
    pub target_bytes: u64,
    /// Filter "absent" answers.
    pub filter_negatives: u64,
    /// False positives.
    pub false_positives: u64,
    /// Data blocks read from the tables' files (see [`Stats::data_block_reads`]).
    pub data_block_reads: u64,
    /// Data blocks found in the block cache.
    pub block_cache_hits: u64,
    /// The tables' target false-positive rates, weighted by their keys (1 for no filter).
    pub target_fpr: f64,
    /// The filters' theoretical false-positive rates, weighted by the tables' keys.
    pub theoretical_fpr: f64,
    /// Expected wasted reads an absent lookup spends in this level: the sum of the tables'
    /// theoretical rates in L0 (each is probed), [`theoretical_fpr`](Self::theoretical_fpr)
    /// in deeper levels (one table is).
    pub expected_reads: f64,
}

impl LevelStats {
    /// Filter bits per key.
    pub fn bits_per_key(&self) -> f64 {
        let keys = self.keys.max(1) as f64;
        self.filter_bytes as f64 * 8.0 / keys
    }
    /// Observed false-positive rate of the level's filters (see [`Stats::observed_fpr`]).
    pub fn observed_fpr(&self) -> Option<f64> {
        observed_fpr(self.false_positives, self.filter_negatives)
    }
}

impl Store {
    /// Store-wide, per-level and per-table counters and sizes.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = filterstore::Store::open(dir.path(), Default::default())?;
    /// for i in 0..1000u32 {
    ///     store.put(&(2 * i).to_be_bytes(), b"v")?; // even keys
    /// }
    /// store.flush()?;
    /// for i in 0..999u32 {
    ///     store.get(&(2 * i + 1).to_be_bytes())?; // odd keys: absent, inside the table's range
    /// }
    /// let s = store.stats();
    /// assert_eq!(s.lookups, 999);
    /// assert_eq!(s.filter_negatives + s.false_positives, 999);
    /// // A block is needed only on a "maybe": read from the file, or found in the block cache.
    /// assert_eq!(s.data_blocks_used(), s.false_positives);
    /// assert_eq!(s.data_block_reads, s.block_cache_misses); // each miss is one read
    /// assert!(s.filter_negatives > 950); // a 1 % filter: about 10 false positives
    /// assert_eq!(s.tables[0].keys, 1000);
    /// # Ok::<(), filterstore::Error>(())
    /// ```
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }
}

impl super::Inner {
    /// The store's lifetime counters as of now: those read at open plus this process's.
    pub(super) fn lifetime_now(&self) -> Lifetime {
        let st = self.read_state();
        let version = &st.tree(self.tree.slot).current;
        // Read with the version, under the lock a change publishes under (see
        // `log_and_apply`): the counters of a table leaving the set are counted once.
        let totals = self.process_totals(version);
        drop(st);
        self.lifetime_base.plus(&totals)
    }

    /// This process's counters: the engine's, those of tables that left the live set, and
    /// those of `version`'s tables.
    fn process_totals(&self, version: &Version) -> Lifetime {
        let (r, c) = (&self.tree.versions.retired, &self.counters);
        let mut t = Lifetime {
            lookups: c.lookups.get(0),
            filter_negatives: r.negatives.load(Relaxed),
            filter_positives: r.positives.load(Relaxed),
            false_positives: r.false_positives.load(Relaxed),
            unfiltered_reads: r.unfiltered_misses.load(Relaxed),
            data_block_reads: r.block_reads.load(Relaxed),
            bytes_read: r.bytes_read.load(Relaxed),
            user_bytes_written: c.user_bytes.load(Relaxed),
            wal_bytes_written: c.wal_bytes.load(Relaxed),
            flush_bytes_written: c.flush_bytes.load(Relaxed),
            compaction_bytes_written: c.compaction_bytes.load(Relaxed),
            compaction_bytes_read: c.compaction_read_bytes.load(Relaxed),
            flushes: c.flushes.load(Relaxed),
            compactions: c.compactions.load(Relaxed),
            block_cache_hits: r.cache_hits.load(Relaxed),
            block_cache_misses: r.cache_misses.load(Relaxed),
            range_probes: self.tree.range_counters.probes(),
            range_skipped: self.tree.range_counters.skipped(),
            range_false_positives: self.tree.range_counters.false_positives(),
        };
        let g = crate::global_index::counts(&self.tree.global_counters);
        t.filter_negatives += g.negatives;
        t.filter_positives += g.positives;
        t.false_positives += g.false_positives;
        for table in version.tables() {
            let c = &table.counters;
            t.filter_negatives += c.negatives();
            t.filter_positives += c.positives();
            t.false_positives += c.false_positives();
            t.unfiltered_reads += c.unfiltered_misses();
            t.data_block_reads += c.block_reads();
            t.bytes_read += c.bytes_read();
            t.block_cache_hits += c.cache_hits();
            t.block_cache_misses += c.cache_misses();
        }
        t
    }

    /// Saves [`lifetime_now`](Self::lifetime_now) in the `COUNTERS` file. The counters are
    /// advisory, so a failure to save them does not poison the store: it is reported in
    /// [`Stats::lifetime_problem`] until a later flush or close saves them.
    pub(super) fn save_lifetime(&self) {
        let r = crate::lifetime::store(&*self.fs, &self.dir, &self.lifetime_now());
        let mut p = self
            .lifetime_problem
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match r {
            Ok(()) => *p = None,
            Err(e) => *p = Some(format!("the lifetime counters could not be saved: {e}")),
        }
    }

    pub(super) fn stats(&self) -> Stats {
        let inner = self;
        let (version, mem_entries, mem_bytes, p) = {
            let st = inner.read_state();
            let st = st.tree(inner.tree.slot);
            let imm = st.imm.as_ref().map_or(0, |m| m.mem.len() as u64);
            (
                st.current.clone(),
                st.mem.len() as u64 + imm,
                st.mem.approximate_bytes() as u64,
                // Under the lock a change publishes under (see `log_and_apply`): the
                // counters of a table leaving the set are counted once, never twice or not.
                inner.process_totals(&st.current),
            )
        };
        let c = &inner.counters;
        let micros = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed) / 1000;
        let (groups, writes) = inner.commit.counts();
        let mut s = Stats {
            lookups: p.lookups,
            memtable_entries: mem_entries,
            memtable_bytes: mem_bytes,
            filter_negatives: p.filter_negatives,
            filter_positives: p.filter_positives,
            false_positives: p.false_positives,
            unfiltered_reads: p.unfiltered_reads,
            data_block_reads: p.data_block_reads,
            bytes_read: p.bytes_read,
            block_cache_hits: p.block_cache_hits,
            block_cache_misses: p.block_cache_misses,
            block_cache_bytes: inner.block_cache.as_ref().map_or(0, |c| c.used_bytes()),
            block_cache_capacity: inner.block_cache.as_ref().map_or(0, |c| c.capacity()),
            user_bytes_written: p.user_bytes_written,
            wal_bytes_written: p.wal_bytes_written,
            flush_bytes_written: p.flush_bytes_written,
            compaction_bytes_written: p.compaction_bytes_written,
            compaction_bytes_read: p.compaction_bytes_read,
            flushes: p.flushes,
            compactions: p.compactions,
            trivial_moves: c.trivial_moves.load(Relaxed),
            idle_drains: c.idle_drains.load(Relaxed),
            scan_drains: c.scan_drains.load(Relaxed),
            l0_merges: c.l0_merges.load(Relaxed),
            slowdown_micros: micros(&c.slowdown_ns),
            stop_micros: micros(&c.stop_ns),
            memtable_wait_micros: micros(&c.memtable_wait_ns),
            commit_groups: groups,
            commit_writes: writes,
            range_probes: p.range_probes,
            range_skipped: p.range_skipped,
            range_false_positives: p.range_false_positives,
            range_filter_bytes: 0,
            range_build: super::RangeBuildStats {
                built: inner.tree.range_counters.1.built(),
                nanos: inner.tree.range_counters.1.nanos(),
            },
            allocation_model: None,
            tables: Vec::new(),
            levels: Vec::new(),
            lifetime: inner.lifetime_base.plus(&p),
            lifetime_problem: inner
                .lifetime_problem
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            torn_tails_dropped: inner.dropped_at_open.len() as u64,
            torn_tail_bytes_dropped: inner
                .dropped_at_open
                .iter()
                .map(|w| match w {
                    Warning::TornTail { tail, .. } => tail.len,
                })
                .sum(),
            global_filter: version.global().map(|g| g.stats()),
            snapshots: inner.snapshot_stats(&version),
            lifecycle: inner.lifecycle_stats(&version),
        };
        let shape = inner.opts.shape();
        // A global store's tables are fronted by the one global filter, not their own.
        let global = version.global().is_some();
        let deepest = version
            .levels()
            .iter()
            .rposition(|l| !l.tables().is_empty())
            .unwrap_or(0);
        for (l, level) in version.levels().iter().enumerate().take(deepest + 1) {
            let mut ls = LevelStats {
                level: l as u32,
                target_bytes: if l == 0 { 0 } else { shape.target(l) },
                ..LevelStats::default()
            };
            for t in level.tables() {
                let c = &t.counters;
                let ts = TableStats {
                    number: t.record.number,
                    level: l as u32,
                    filter_kind: if t.filter.is_some() {
                        t.record.filter_kind
                    } else if global {
                        FilterKind::Global
                    } else {
                        FilterKind::None
                    },
                    target_fpr: t.record.fpr,
                    keys: t.record.entries,
                    tombstones: t.record.tombstones,
                    file_bytes: t.record.file_bytes,
                    data_bytes: t.table.meta.data_bytes,
                    stored_data_bytes: t.table.meta.stored_data_bytes,
                    filter_bytes: t.filter.as_ref().map_or(0, |f| f.bytes()),
                    index_memory_bytes: t.table.index_memory_bytes(),
                    theoretical_fpr: t.filter.as_ref().map_or(1.0, |f| f.theoretical_fpr()),
                    min_key: t.record.min_key.clone(),
                    max_key: t.record.max_key.clone(),
                    filter_negatives: c.negatives(),
                    filter_positives: c.positives(),
                    false_positives: c.false_positives(),
                    unfiltered_reads: c.unfiltered_misses(),
                    data_block_reads: c.block_reads(),
                    bytes_read: c.bytes_read(),
                    block_cache_hits: c.cache_hits(),
                    block_cache_misses: c.cache_misses(),
                    filter_problem: t.filter_problem.clone(),
                    range_filter_bytes: t.range.as_ref().map_or(0, |f| f.bytes()),
                    range_bits_per_key: t
                        .range
                        .as_ref()
                        .map_or(0.0, |_| t.record.range.map_or(0.0, |r| r.bits_per_key)),
                    range_problem: t.range_problem.clone(),
                };
                ls.tables += 1;
                ls.keys += ts.keys;
                ls.file_bytes += ts.file_bytes;
                ls.filter_bytes += ts.filter_bytes;
                ls.index_memory_bytes += ts.index_memory_bytes;
                ls.filter_negatives += ts.filter_negatives;
                ls.false_positives += ts.false_positives;
                ls.data_block_reads += ts.data_block_reads;
                ls.block_cache_hits += ts.block_cache_hits;
                let n = ts.keys as f64;
                ls.target_fpr += n * if ts.filter_kind == FilterKind::None {
                    1.0
                } else {
                    ts.target_fpr
                };
                ls.theoretical_fpr += n * ts.theoretical_fpr;
                if l == 0 {
                    ls.expected_reads += ts.theoretical_fpr;
                }
                s.range_filter_bytes += ts.range_filter_bytes;
                s.tables.push(ts);
            }
            if ls.keys > 0 {
                ls.target_fpr /= ls.keys as f64;
                ls.theoretical_fpr /= ls.keys as f64;
            }
            if l > 0 && ls.tables > 0 {
                ls.expected_reads = ls.theoretical_fpr;
            }
            s.levels.push(ls);
        }
        let policy = inner.lock_versions().recorded;
        s.allocation_model = super::AllocationModel::of(&s.tables, s.lookups, &policy);
        s
    }
}
