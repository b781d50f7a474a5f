//! `bench engine`: the engine at scale: load rate, put latency, stalls, write and space
//! amplification, memory, the level tree, and lookups against it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use filterstore::{Compression, FilterKind, Options, Stats, Store, SyncPolicy};

mod allocation;
mod global;
mod keyspaces;
mod lookups;
mod own;
mod process;
mod sessions;
mod snapshot;
mod sync_mix;
mod tx;

use self::allocation::allocations;
use self::global::compare_global;
use self::lookups::lookups;
use self::own::{parse_compressibility, parse_sync, parse_workload, EngineWorkload};
use self::process::{dir_bytes, peak_rss_kib, process_cpu_s, status_kib};
use super::bench_data::{fill_value, key};
use super::latency::Histogram;
use super::{Allocation, CliError, Exit, Global, Run};

/// Load N generated keys into a fresh store with background flush and compaction on, then
/// look up absent and present keys in the resulting level tree.
///
/// Keys are 16 bytes, generated from their index (nothing is held in memory, so -n 100000000
/// runs in the same memory as the default), put in random key order with `value-bytes`
/// values. Absent keys differ from present ones in their last bit, so they fall inside every
/// table's key range and only a filter can rule them out.
///
/// Reports: puts/s (including the final flush), put latency p50/p99/p99.9/max, time writes
/// were slowed or stopped, write amplification from the store's own count of bytes written
/// (logs + flushes + compactions ÷ key and value bytes put), space amplification (bytes on
/// disk ÷ key and value bytes live), peak resident memory, tables per level, and for absent
/// and present lookups after a reopen: ns per lookup, filter probes and block reads per
/// lookup.
///
/// With --compression none,lz4,zstd the whole run (load, reopen, lookups) is made once per choice,
/// each into a fresh store, and a last line compares them: disk bytes and present-get time
/// against the first choice. The lookups are then timed as with --settle (no compaction or
/// idle drain under them), so the choices are compared on the same tables. --value-compressibility makes values compressible the way
/// db_bench's compression_ratio does (random printable bytes, repeated).
///
/// With --allocation uniform,monkey the filters of the loaded store are then rebalanced
/// (`refilter`, no data rewritten) to each allocation in turn at equal filter memory (Monkey
/// at --bits-per-key, uniform at the bits per key Monkey's filters actually took), and the
/// wasted block reads per absent lookup are counted by the store (false positives plus reads
/// of unfiltered tables), beside the store's prediction; then the curve of expected wasted
/// reads (summed FPR over the runs an absent lookup probes) against bits per key for both,
/// and the memory Monkey needs to match uniform at --bits-per-key.
///
/// --workload sync-mix measures durability per write instead: --ops puts (default 20,000)
/// from --threads writers into a fresh store, one write in --synced-every synced through its
/// `WriteOptions` (`put_opt`, returning once its log record is fsynced) and the others not,
/// against the same puts with every write synced (`SyncPolicy::EveryWrite`), in alternated
/// --rounds (default 3); it reports each mode's puts/s, their medians and the ratio. Run it
/// with --work-dir on the disk to measure: the default temporary directory may be in memory.
///
/// --workload snapshot measures what a snapshot costs: -n keys loaded, a snapshot taken, -n
/// more puts (half of them overwrites) timed with and without the snapshot held, then a full
/// compaction and --lookups gets of loaded keys through the snapshot and through the store
/// (after one untimed pass of them through both), in interleaved batches, timed apart for keys overwritten since and keys only in tables compacted since; it reports
/// both times, their ratios, the puts/s ratio and what the snapshot pins (tables, bytes,
/// memtables), per round (--rounds, default 2) and as medians. Give --filter global for the
/// global filter.
///
/// --workload sessions measures session churn with a time to live on a moved clock: -n
/// sessions (60 s TTL), then 10 simulated minutes at --ops operations per simulated second
/// (default 50,000; 80 % refreshes, 20 % new sessions); it reports disk bytes against the
/// live sessions' bytes, and gets of live sessions against a store of the same live set
/// without TTLs (--lookups gets, --rounds rounds, default 3).
///
/// --workload tx measures optimistic transactions: -n keys loaded, then --ops operations
/// (default 200,000) from --threads threads, each 2 gets and 2 puts of two uniform keys, as
/// transactions (retried on conflict; conflicts counted) and as plain gets and a batch, in
/// alternated --rounds (default 3): commits/s of each, medians and the ratio.
///
/// --keyspaces K measures keyspaces (issue 38): K keyspaces loaded at once from K threads
/// (thread i puts its N/K share of the -n keys into keyspace ks<i>) against one keyspace
/// loaded with the same keys from K threads, each load in its own child process: puts/s and
/// peak RSS (VmHWM) of each; then absent gets in ks0 against a store holding ks0's keys in
/// one keyspace (and, shown, the one-keyspace store of all N keys), in --rounds alternating
/// rounds (default 5) of --lookups gets, as loaded (compactions settled) and again with each
/// compacted to one run: medians, and the ratios against the targets (puts/s ≥
/// 0.9×, peak RSS ≤ 1.2×, absent get ≤ 1.05×).
#[derive(Args, Debug)]
pub struct BenchEngine {
    /// Keys to load
    #[arg(short = 'n', long = "count", default_value_t = 5_000_000)]
    count: u64,
    /// Bytes per value
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Fraction of each value that repeats what comes before it: 0 (the default) makes
    /// values of random bytes, which do not compress; C > 0 makes each value random printable
    /// bytes for its first (1 − C) of its length, repeated to fill it (db_bench's
    /// --compression_ratio is 1 − C: 0.5 is half-compressible)
    #[arg(long, default_value_t = 0.0, value_parser = parse_compressibility)]
    value_compressibility: f64,
    /// Block compression of the tables: a comma-separated list of none, lz4 and zstd, one
    /// run each
    /// [default: the library's, lz4]
    #[arg(long, value_delimiter = ',', value_parser = super::parse_compression)]
    compression: Vec<Compression>,
    /// Block cache size in MiB, 0 for none [default: the library's, 32]
    #[arg(long, value_name = "MIB")]
    block_cache_mib: Option<usize>,
    /// Absent and present lookups after the load
    #[arg(long, default_value_t = 1_000_000)]
    lookups: u64,
    /// Filter kind of the tables
    #[arg(long, default_value = "blocked-bloom", value_parser = super::parse_filter)]
    filter: FilterKind,
    /// Target false-positive rate
    #[arg(long, default_value_t = 0.01, value_parser = super::parse_fpr)]
    fpr: f64,
    /// When log appends are fsynced: every-write, on-flush or buffered
    #[arg(long, default_value = "on-flush", value_parser = parse_sync)]
    sync: SyncPolicy,
    /// Memtable size in MiB [default: the library's]
    #[arg(long)]
    memtable_mib: Option<usize>,
    /// Target table size in MiB, fractions allowed [default: the library's]
    #[arg(long)]
    table_mib: Option<f64>,
    /// Target L1 size in MiB, fractions allowed [default: the library's]
    #[arg(long)]
    l1_mib: Option<f64>,
    /// Level size ratio T [default: the library's]
    #[arg(long)]
    ratio: Option<u64>,
    /// L0 tables that start a compaction [default: the library's]
    #[arg(long)]
    l0_trigger: Option<usize>,
    /// L0 tables at which writes slow down [default: the library's]
    #[arg(long)]
    l0_slowdown: Option<usize>,
    /// L0 tables at which writes stop [default: the library's]
    #[arg(long)]
    l0_stop: Option<usize>,
    /// Wait for compactions to finish before the lookups, and time the lookups on a quiet
    /// store: reopened without the idle L0 drain, which would otherwise rewrite L0 under the
    /// timed lookups once writes pause (default: look up at once, as the store is when the
    /// load ends, compactions and drains running under the lookups). Several --compression
    /// choices imply it, so that each codec's lookups run against the same table set
    #[arg(long)]
    settle: bool,
    /// Seed of the generated keys
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Compare filter allocations at equal memory after the load: a comma-separated list of
    /// uniform and monkey
    #[arg(long, value_delimiter = ',', value_parser = super::parse_allocation)]
    allocation: Vec<Allocation>,
    /// Filter memory of --allocation's comparison, in bits per key
    #[arg(long, default_value_t = 10.0, value_parser = super::parse_bits)]
    bits_per_key: f64,
    /// After the lookups, swap the tables' filters for one global key-to-run filter (or,
    /// with --filter global, for blocked-bloom filters) with refilter, no data rewritten, and
    /// report both policies side by side: ns, filter probes, cache lines and block reads per
    /// absent and present get, and filter memory
    #[arg(long)]
    compare_global: bool,
    /// Bits per key of --allocation's curve
    #[arg(long, value_delimiter = ',', default_value = "2,4,6,8,10,12,14,16")]
    curve: Vec<f64>,
    /// Directory in which to build the store (must not exist) [default: a temporary
    /// directory, removed afterwards]
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// The global --range-bits (bits per key of the tables' range filters; `None`: the
    /// library's default), copied here when the command runs.
    #[arg(skip)]
    range_bits: Option<f64>,
    /// Instead of the lookups, run YCSB core workloads on the loaded store: a comma-separated
    /// list of ycsb-a (50 % read, 50 % update), ycsb-b (95/5), ycsb-c (read only), ycsb-d (95 %
    /// read latest, 5 % insert), ycsb-e (95 % scan of 1..100 entries, 5 % insert), ycsb-f
    /// (50 % read, 50 % read-modify-write), or ycsb for all six. Keys by YCSB's scrambled
    /// Zipfian; every read and scanned entry checked; reports ops/s and p50/p99/p99.9 per
    /// operation type. Or sync-mix (durability per write), snapshot (its cost): see above
    #[arg(long, value_delimiter = ',', value_name = "WORKLOAD", value_parser = parse_workload, conflicts_with_all = ["allocation", "settle"])]
    workload: Vec<EngineWorkload>,
    /// Operations per workload, split over --threads [default: -n; sync-mix: 20,000; tx:
    /// 200,000]
    #[arg(long, requires = "workload")]
    ops: Option<u64>,
    /// sync-mix: one write in this many is synced
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    synced_every: u32,
    /// sync-mix, snapshot, tx and --keyspaces: rounds, alternating which mode goes first;
    /// medians reported [default: sync-mix 3, snapshot 2, --keyspaces 5]
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1000))]
    rounds: Option<u16>,
    /// Threads sharing the store in each workload
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    threads: u64,
    /// Print the workloads' (or --keyspaces') results as one JSON object
    #[arg(long)]
    json: bool,
    /// Compare K keyspaces loaded at once from K threads with one keyspace (see above)
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(2..=64), conflicts_with_all = ["workload", "allocation", "compare_global"])]
    keyspaces: Option<u64>,
    /// Internal: load one side of --keyspaces (one or many) into --keyspaces-dir
    #[arg(long, hide = true, requires = "keyspaces", value_parser = ["one", "many"])]
    keyspaces_side: Option<String>,
    /// Internal: the store of --keyspaces-side
    #[arg(long, hide = true, requires = "keyspaces_side")]
    keyspaces_dir: Option<PathBuf>,
}

fn levels_line(s: &Stats) -> String {
    s.levels
        .iter()
        .map(|l| format!("L{}:{}", l.level, l.tables))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What one run (one compression choice) measured, for the comparison line.
struct RunFigures {
    compression: Compression,
    disk: u64,
    data_bytes: u64,
    stored_data_bytes: u64,
    present_ns: f64,
    present_cpu_ns: f64,
    absent_ns: f64,
    puts_per_sec: f64,
}

impl Run for BenchEngine {
    fn run(mut self, g: &Global) -> Result<Exit, CliError> {
        self.range_bits = g.range_bits;
        if let Some(k) = self.keyspaces {
            return self.keyspaces_mode(k);
        }
        if self.json && self.workload.is_empty() {
            return Err(CliError::usage("--json needs --workload or --keyspaces"));
        }
        let tmp;
        let root = match &self.work_dir {
            Some(d) => {
                if d.exists() {
                    return Err(CliError::usage(format!(
                        "{} exists; give a directory that does not",
                        d.display()
                    )));
                }
                d.clone()
            }
            None => {
                tmp = tempfile::tempdir().map_err(filterstore::Error::from)?;
                tmp.path().join("store")
            }
        };
        let choices = if self.compression.is_empty() {
            vec![Compression::default()]
        } else {
            self.compression.clone()
        };
        // One store per choice: DIR itself for one, DIR/<choice> for several.
        let dir_of = |c: Compression| {
            if choices.len() == 1 {
                root.clone()
            } else {
                root.join(c.name())
            }
        };
        if !self.workload.is_empty() {
            self.own_workloads(&root, &choices)?;
            let ycsb: Vec<_> = self
                .workload
                .iter()
                .filter_map(|w| match w {
                    EngineWorkload::Ycsb(w) => Some(w.0.clone()),
                    _ => None,
                })
                .flatten()
                .collect();
            for &c in choices.iter().filter(|_| !ycsb.is_empty()) {
                let dir = dir_of(c);
                super::bench_ycsb::run(super::bench_ycsb::Ycsb {
                    dir: &dir,
                    opts: self.options(c),
                    records: self.count.max(1),
                    value_bytes: self.value_bytes,
                    seed: self.seed,
                    workloads: ycsb.clone(),
                    ops: self.ops.unwrap_or(self.count).max(1),
                    threads: self.threads,
                    json: self.json,
                    config: format!(
                        "{} at ε {}, sync {:?}, compression {}",
                        self.filter,
                        self.fpr,
                        self.sync,
                        c.name()
                    ),
                })?;
            }
            return Ok(Exit::Success);
        }
        let mut figures = Vec::new();
        for (i, &c) in choices.iter().enumerate() {
            figures.push(self.run_one(&dir_of(c), c, i == 0)?);
        }
        if let Some((base, rest)) = figures.split_first().filter(|(_, r)| !r.is_empty()) {
            let mut o = String::new();
            use std::fmt::Write as _;
            for f in rest {
                let _ = writeln!(
                    o,
                    "{} ÷ {}: disk bytes {:.3}× ({} vs {}), data blocks as stored {:.3}×, present get {:.3}× (CPU time {:.3}×), absent get {:.3}×, puts/s {:.3}×",
                    f.compression,
                    base.compression,
                    f.disk as f64 / base.disk.max(1) as f64,
                    f.disk,
                    base.disk,
                    f.stored_data_bytes as f64 / base.stored_data_bytes.max(1) as f64,
                    f.present_ns / base.present_ns,
                    f.present_cpu_ns / base.present_cpu_ns,
                    f.absent_ns / base.absent_ns,
                    f.puts_per_sec / base.puts_per_sec
                );
            }
            for f in &figures {
                let _ = writeln!(
                    o,
                    "{}: data blocks {} bytes before compression, {} as stored ({:.3}×)",
                    f.compression,
                    f.data_bytes,
                    f.stored_data_bytes,
                    f.stored_data_bytes as f64 / f.data_bytes.max(1) as f64
                );
            }
            super::println(o)?;
        }
        Ok(Exit::Success)
    }
}

impl BenchEngine {
    /// The store's options for a run with `compression`.
    fn options(&self, compression: Compression) -> Options {
        let defaults = Options::default();
        Options::default()
            .filter(self.filter)
            .fpr(self.fpr)
            .sync(self.sync)
            .memtable_bytes(
                self.memtable_mib
                    .map_or(defaults.memtable_bytes, |m| m << 20),
            )
            .table_bytes(
                self.table_mib
                    .map_or(defaults.table_bytes, |m| (m * 1048576.0).max(4096.0) as u64),
            )
            .l1_bytes(
                self.l1_mib
                    .map_or(defaults.l1_bytes, |m| (m * 1048576.0).max(4096.0) as u64),
            )
            .level_ratio(self.ratio.unwrap_or(defaults.level_ratio))
            .compaction_trigger(Some(
                self.l0_trigger
                    .unwrap_or(defaults.compaction_trigger.unwrap_or(8)),
            ))
            .l0_slowdown(self.l0_slowdown.unwrap_or(defaults.l0_slowdown))
            .l0_stop(self.l0_stop.unwrap_or(defaults.l0_stop))
            .compression(compression)
            .range_filter_bits(self.range_bits.unwrap_or(defaults.range_filter_bits))
            .block_cache_bytes(
                self.block_cache_mib
                    .map_or(defaults.block_cache_bytes, |m| m << 20),
            )
    }

    /// Loads a fresh store in `dir` with `compression`, reopens it and times lookups; prints
    /// the report (with the allocation comparison when asked and `first`).
    fn run_one(
        &self,
        dir: &Path,
        compression: Compression,
        first: bool,
    ) -> Result<RunFigures, CliError> {
        let n = self.count.max(1);
        let opts = self.options(compression);
        if first {
            eprintln!("bench engine: {}", filterstore::filter::kernel_summary());
        }
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let store = Store::open(dir, opts.clone())?;
        let cpu0 = process_cpu_s();
        let mut value = vec![0u8; self.value_bytes];
        let mut hist = Histogram::default();
        let t = Instant::now();
        let mut last = Instant::now();
        for i in 0..n {
            fill_value(i, self.value_compressibility, &mut value);
            let k = key(self.seed, i, false);
            let t0 = Instant::now();
            store.put(k, &value)?;
            hist.record(t0.elapsed().as_nanos() as u64);
            if last.elapsed() > Duration::from_secs(5) {
                last = Instant::now();
                eprintln!(
                    "bench engine: {i} of {n} puts, {:.0} puts/s, levels {}",
                    i as f64 / t.elapsed().as_secs_f64(),
                    levels_line(&store.stats())
                );
            }
        }
        let puts = t.elapsed();
        let tf = Instant::now();
        store.flush()?;
        let flush = tf.elapsed();
        let total = t.elapsed();
        let load_cpu = process_cpu_s() - cpu0;
        let loaded = store.stats();
        let load_rss = peak_rss_kib();
        // The range filters the load deferred (docs/engine.md, "Deferred"), built now so that
        // every range filter of the store is counted, not only those built during the load.
        let td = Instant::now();
        let deferred = store.build_deferred_range_filters()?;
        let deferred_wall = td.elapsed();
        let range_all = store.stats().range_build;
        let (anon, file) = (status_kib("RssAnon:"), status_kib("RssFile:"));
        let mut settle = Duration::ZERO;
        let quiet = self.settle || self.compression.len() > 1;
        if quiet {
            eprintln!("bench engine: waiting for compactions");
            let ts = Instant::now();
            store.wait_for_compaction()?;
            settle = ts.elapsed();
        }
        let tc = Instant::now();
        store.close()?;
        let close = tc.elapsed();
        let disk = dir_bytes(dir);
        let live = n * (16 + self.value_bytes as u64);
        let tr = Instant::now();
        let opts_for_lookups = opts.clone();
        let store = Store::open(dir, keyspaces::quiet_opts(quiet, opts))?;
        let reopen = tr.elapsed();
        if quiet {
            // Nothing runs under the timed lookups: what is due at reopen runs now.
            store.wait_for_compaction()?;
        }
        let after_open = store.stats();
        let lookups_n = self.lookups.max(1);
        eprintln!("bench engine: {lookups_n} absent and {lookups_n} present lookups");
        let absent = lookups(&store, self.seed, n, lookups_n, true)?;
        let present = lookups(&store, self.seed, n, lookups_n, false)?;
        let after_lookups = store.stats();
        let s = &loaded;
        let mut o = String::new();
        use std::fmt::Write as _;
        let values = if self.value_compressibility > 0.0 {
            format!(
                "{}-byte values ({:.0} % repeated)",
                self.value_bytes,
                self.value_compressibility * 100.0
            )
        } else {
            format!("{}-byte random values", self.value_bytes)
        };
        let _ = writeln!(
            o,
            "filterstore bench engine — {n} puts of 16-byte keys and {values}, {} at ε {}, sync {:?}, compression {compression}, block cache {} MiB",
            self.filter,
            self.fpr,
            self.sync,
            opts_for_lookups.block_cache_bytes >> 20
        );
        let _ = writeln!(
            o,
            "load:       {:.0} puts/s ({:.1} s of puts + {:.2} s final flush)",
            n as f64 / total.as_secs_f64(),
            puts.as_secs_f64(),
            flush.as_secs_f64()
        );
        let _ = writeln!(
            o,
            "put:        p50 {:.2} µs, p99 {:.2} µs, p99.9 {:.1} µs, max {:.1} ms",
            hist.quantile(0.5) as f64 / 1e3,
            hist.quantile(0.99) as f64 / 1e3,
            hist.quantile(0.999) as f64 / 1e3,
            hist.max as f64 / 1e6
        );
        let _ = writeln!(
            o,
            "stalls:     {:.2} s slowed (L0 ≥ slowdown), {:.2} s stopped (L0 ≥ stop), {:.2} s waiting for a memtable seal",
            s.slowdown_micros as f64 / 1e6,
            s.stop_micros as f64 / 1e6,
            s.memtable_wait_micros as f64 / 1e6
        );
        let w = |b: u64| b as f64 / s.user_bytes_written.max(1) as f64;
        let _ = writeln!(
            o,
            "write amp:  {:.2} (logs {:.2} + flushes {:.2} + compactions {:.2}); {} flushes, {} compactions, {} trivial moves, {} idle L0 drains, {} scan L0 drains, {} L0 merges",
            s.write_amplification().unwrap_or(0.0),
            w(s.wal_bytes_written),
            w(s.flush_bytes_written),
            w(s.compaction_bytes_written),
            s.flushes,
            s.compactions,
            s.trivial_moves,
            s.idle_drains,
            s.scan_drains,
            s.l0_merges
        );
        let _ = writeln!(
            o,
            "space amp:  {:.2} ({disk} bytes on disk for {live} bytes of keys and values; data blocks {} bytes before compression, {} as stored)",
            disk as f64 / live as f64,
            after_open.data_bytes(),
            after_open.stored_data_bytes()
        );
        let _ = writeln!(
            o,
            "memory:     peak RSS {} MiB (during the load: {} MiB; when it ended: {} MiB heap and {} MiB mapped files)",
            peak_rss_kib() / 1024,
            load_rss / 1024,
            anon / 1024,
            file / 1024
        );
        let _ = writeln!(
            o,
            "levels:     at the end of the load {}; at reopen {}; after the lookups {}{}",
            levels_line(&loaded),
            levels_line(&after_open),
            levels_line(&after_lookups),
            if quiet {
                format!(" (compactions settled in {:.1} s)", settle.as_secs_f64())
            } else {
                String::new()
            }
        );
        let range_s = s.range_build.nanos as f64 / 1e9;
        let all_s = range_all.nanos as f64 / 1e9;
        let _ = writeln!(
            o,
            "range:      {} range filters built during the load in {range_s:.2} s of CPU time, {:.1} % of the load's {load_cpu:.1} s of process CPU time; {deferred} deferred ones built after it in {:.2} s of CPU time ({:.2} s wall); all {} in {all_s:.2} s: {:.1} % of the load's CPU time and theirs",
            s.range_build.built,
            range_s / load_cpu.max(1e-9) * 100.0,
            all_s - range_s,
            deferred_wall.as_secs_f64(),
            range_all.built,
            all_s / (load_cpu + all_s - range_s).max(1e-9) * 100.0
        );
        let (close_ms, reopen_ms) = (close.as_secs_f64() * 1e3, reopen.as_secs_f64() * 1e3);
        let _ = writeln!(o, "close:      {close_ms:.1} ms, reopen: {reopen_ms:.1} ms");
        for (what, l) in [("absent", &absent), ("present", &present)] {
            let _ = writeln!(
                o,
                "{what:<8}    {:.0} ns/get ({:.0} ns of CPU time), {:.3} filter probes, {:.4} block reads and {:.4} block cache hits per get, {} found",
                l.ns, l.cpu_ns, l.probes, l.reads, l.hits, l.found
            );
        }
        if self.compare_global {
            eprintln!("bench engine: comparing the per-table and the global filter");
            compare_global(&store, self, n, lookups_n, &mut o)?;
        }
        if first && !self.allocation.is_empty() {
            eprintln!("bench engine: comparing allocations");
            // A still table set: reopened without background compaction.
            drop(store);
            let still = Store::open(dir, opts_for_lookups.compaction_trigger(None))?;
            allocations(&still, self, lookups_n, &mut o)?;
        }
        super::println(o)?;
        if present.found != lookups_n || absent.found != 0 {
            // A store that loses or invents keys fails its integrity promise: exit 3.
            return Err(CliError {
                code: Exit::Corrupt,
                message: format!(
                    "lookups disagree with the load: {} of {lookups_n} present keys found, {} absent keys found",
                    present.found, absent.found
                ),
                quiet: false,
            });
        }
        Ok(RunFigures {
            compression,
            disk,
            data_bytes: after_open.data_bytes(),
            stored_data_bytes: after_open.stored_data_bytes(),
            present_ns: present.ns,
            present_cpu_ns: present.cpu_ns,
            absent_ns: absent.ns,
            puts_per_sec: n as f64 / total.as_secs_f64(),
        })
    }
}
