//! `store bench`: how many data-block reads each filter kind avoids, what it costs in time
//! and bytes, and how the observed false-positive rate compares with theory — on one store
//! whose filters are swapped with `refilter`, so only the filter differs between rows.
//!
//! The jobs are spread over files: the configuration, the figures and the measurement
//! ([`run`]) here, the generated keys and values in `keys.rs`, the empty scans against the
//! range filters in `scans.rs`, the statistics in `stats.rs`, the reports (text, CSV, JSON,
//! SVG) in `report.rs`.

mod keys;
mod report;
mod scans;
mod stats;

pub use self::stats::median;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use self::keys::{make_keys, value_into, FlatKeys};
use self::scans::scan_rows;
use self::stats::diff;
use filterstore::filename::{FileName, Numbered};
use filterstore::filter::FilterKind;
use filterstore::store::{Options, Store, SyncPolicy};
use filterstore::{Error, Result};

pub use self::keys::key16;
pub use self::report::{machine, theory_curve};
pub use self::scans::ScanRow;
pub use self::stats::band;

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Keys loaded (generated 16-byte keys unless `keys_file` is given).
    pub keys: u64,
    /// Tables the keys are sealed into (no compaction).
    pub tables: usize,
    /// Absent-key lookups and present-key lookups per configuration.
    pub lookups: u64,
    /// Lookups of each kind for the `none` baseline, whose reads per lookup are fixed by the
    /// key ranges (every table in range is read), so fewer samples suffice.
    pub baseline_lookups: u64,
    /// Filter kinds to compare (`none` is the baseline and is always measured).
    pub kinds: Vec<FilterKind>,
    /// Target false-positive rates.
    pub fprs: Vec<f64>,
    /// Also measure with table files evicted from the page cache.
    pub cold: bool,
    /// Absent lookups per configuration in the cold phase.
    pub cold_lookups: u64,
    /// Real keys, one per line (every 10th line is held out as an absent key).
    pub keys_file: Option<PathBuf>,
    /// Where to build the store (a temporary directory when `None`).
    pub dir: Option<PathBuf>,
    /// Value size in bytes.
    pub value_len: usize,
    /// Seed of the generated keys.
    pub seed: u64,
    /// Measure the engine figures (load rate, seal 1 vs 2 threads, reopen).
    pub engine: bool,
    /// Open the store with [`Options::mmap_reads`]: data blocks read in place from a map.
    pub mmap_reads: bool,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            keys: 1_000_000,
            tables: 10,
            lookups: 1_000_000,
            baseline_lookups: 100_000,
            kinds: vec![
                FilterKind::Bloom,
                FilterKind::BlockedBloom,
                FilterKind::Cuckoo,
                FilterKind::BinaryFuse,
            ],
            fprs: vec![0.2, 0.05, 0.01, 0.001],
            cold: false,
            cold_lookups: 20_000,
            keys_file: None,
            dir: None,
            value_len: 100,
            seed: 42,
            engine: true,
            mmap_reads: false,
        }
    }
}

/// Cold-cache figures of one configuration.
#[derive(Clone, Debug)]
pub struct ColdFigures {
    /// Absent lookups made.
    pub lookups: u64,
    /// Data-block reads (each one from the device, the files having been evicted).
    pub reads: u64,
    /// Mean ns per absent lookup.
    pub ns_absent: f64,
}

/// One configuration's results.
#[derive(Clone, Debug)]
pub struct Row {
    /// Filter kind.
    pub kind: FilterKind,
    /// Target ε (`None` for `none`).
    pub fpr: Option<f64>,
    /// Absent lookups made, and as many present lookups.
    pub lookups: u64,
    /// Filter bytes over all tables.
    pub filter_bytes: u64,
    /// Filter bits per key.
    pub bits_per_key: f64,
    /// Seconds to build the filters of all tables (refilter, reading keys included).
    pub build_secs: f64,
    /// Filter probes that were absent from the table (negatives + false positives).
    pub absent_probes: u64,
    /// Observed false-positive rate.
    pub observed_fpr: Option<f64>,
    /// Theoretical false-positive rate (mean over tables).
    pub theory_fpr: f64,
    /// Statistical band around theory: (low, high).
    pub band: (f64, f64),
    /// Data-block reads per absent lookup.
    pub reads_per_absent: f64,
    /// Share of the baseline's reads avoided.
    pub avoided: f64,
    /// Mean ns per absent lookup (warm cache).
    pub ns_absent: f64,
    /// Mean ns per present lookup (warm cache).
    pub ns_present: f64,
    /// Data-block reads per present lookup.
    pub reads_per_present: f64,
    /// Cold-cache figures, with `--cold`.
    pub cold: Option<ColdFigures>,
}

impl Row {
    /// Filter bits per key spent for each halving of the reads of absent keys:
    /// bits/key ÷ log2(1 / observed FPR). Lower means fewer disk reads per byte of filter;
    /// 1.0 is the information-theoretic minimum (a filter of ε needs log2(1/ε) bits per key),
    /// a Bloom filter needs 1.44. `None` without a filter or without a false positive.
    pub fn bits_per_halving(&self) -> Option<f64> {
        let o = self.observed_fpr.filter(|&o| o > 0.0 && o < 1.0)?;
        self.fpr?;
        Some(self.bits_per_key / (1.0 / o).log2())
    }

    /// True when the observed rate lies inside the band (always true without a filter).
    pub fn in_band(&self) -> bool {
        match self.observed_fpr {
            Some(o) if self.fpr.is_some() => o >= self.band.0 && o <= self.band.1,
            _ => true,
        }
    }
}

/// Engine-level figures.
#[derive(Clone, Debug, Default)]
pub struct EngineFigures {
    /// Puts per second while loading with the default `SyncPolicy::OnFlush` (one write(2)
    /// per put, no fsync).
    pub load_puts_per_sec: f64,
    /// Puts per second with `SyncPolicy::Buffered` (1 MiB WAL buffer).
    pub load_buffered_puts_per_sec: f64,
    /// Seconds to seal one table of `seal_keys` entries with a 1-thread pool, fsync skipped
    /// (the CPU work: block encoding, hashing, filter build); median of the rounds.
    pub seal_1t_secs: f64,
    /// The same with a 2-thread pool.
    pub seal_2t_secs: f64,
    /// Median over the rounds of (1-thread time / 2-thread time) of the same round.
    pub seal_speedup: f64,
    /// Alternating 1-thread/2-thread rounds behind the seal figures (medians are reported).
    pub seal_rounds: usize,
    /// Seconds spent sealing the benchmark's tables, fsync included (default thread pool).
    pub seal_fsync_secs: f64,
    /// Milliseconds to reopen the loaded store.
    pub reopen_ms: f64,
    /// Keys in the sealed table.
    pub seal_keys: u64,
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct BenchReport {
    /// The configuration.
    pub config: BenchConfig,
    /// CPU model and core count.
    pub machine: String,
    /// Keys loaded.
    pub keys: u64,
    /// Absent lookups whose key lies inside at least one table's range: baseline reads.
    pub baseline_reads_per_absent: f64,
    /// Share of absent keys outside every table's range.
    pub outside_share: f64,
    /// Engine figures.
    pub engine: Option<EngineFigures>,
    /// One row per configuration, `none` first.
    pub rows: Vec<Row>,
    /// What the range filters save empty scans: no range filter, then
    /// [`DEFAULT_RANGE_BITS`](filterstore::store::DEFAULT_RANGE_BITS), each at ℓ = 1 and 32.
    pub scan_rows: Vec<ScanRow>,
    /// Total seconds.
    pub total_secs: f64,
}

/// Evicts every table file of `dir` from the page cache.
pub fn evict_tables(dir: &Path) -> Result<()> {
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let p = e.map_err(|e| Error::io(dir, e))?.path();
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(FileName::parse);
        if matches!(name, Some(FileName::Numbered(Numbered::Table, _))) {
            let f = std::fs::File::open(&p).map_err(|e| Error::io(&p, e))?;
            rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed)
                .map_err(|e| Error::io(&p, e.into()))?;
        }
    }
    Ok(())
}

/// Runs the benchmark; `progress` receives one line per phase.
pub fn run(cfg: &BenchConfig, progress: &mut dyn FnMut(&str)) -> Result<BenchReport> {
    if cfg.tables == 0 || cfg.keys < cfg.tables as u64 || cfg.lookups == 0 {
        return Err(Error::InvalidArgument(
            "need at least one table, one key per table and one lookup".into(),
        ));
    }
    for &f in &cfg.fprs {
        filterstore::filter::check_fpr(f)?;
    }
    if cfg.kinds.contains(&FilterKind::Global) {
        // This bench refilters one store's tables kind by kind; the global filter is not a
        // per-table kind.
        return Err(Error::InvalidArgument(
            "global is one filter for the whole store, not a per-table kind: compare it with \
             `store bench engine --compare-global`"
                .into(),
        ));
    }
    if cfg.cold && cfg.mmap_reads {
        // posix_fadvise cannot evict pages a process has mapped, so the "cold" reads would
        // be served from memory.
        return Err(Error::InvalidArgument(
            "the cold phase evicts table files from the page cache, which mapped files defeat: \
             measure cold reads without mmap reads"
                .into(),
        ));
    }
    let t0 = Instant::now();
    let tmp;
    let dir = match &cfg.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new()
                .prefix("filterstore-bench")
                .tempdir()?;
            tmp.path().join("store")
        }
    };
    if dir.exists() {
        return Err(Error::InvalidArgument(format!(
            "{} already exists; the bench builds a fresh store",
            dir.display()
        )));
    }
    progress("generating keys");
    let keys = make_keys(cfg)?;
    let n = keys.present.len() as u64;
    let first_kind = cfg
        .kinds
        .first()
        .copied()
        .unwrap_or(FilterKind::BlockedBloom);
    // The benchmark measures filters: every "maybe" reads its block from the table file
    // (no block cache, which would answer repeated false positives from memory and defeat
    // the cold phase's eviction) and blocks are stored raw, as the figures always were.
    let opts = || {
        Options::default()
            .filter(Some(first_kind))
            .fpr(Some(0.01))
            .memtable_bytes(usize::MAX)
            .compaction_trigger(None)
            .sync(SyncPolicy::OnFlush)
            .mmap_reads(cfg.mmap_reads)
            .block_cache_bytes(0)
            .compression(filterstore::Compression::None)
    };
    progress(&format!("loading {n} keys into {} tables", cfg.tables));
    let mut store = Store::open(&dir, opts())?;
    let mut put_time = Duration::ZERO;
    let mut flush_time = Duration::ZERO;
    for t in 0..cfg.tables {
        let start = Instant::now();
        let mut value = Vec::with_capacity(cfg.value_len);
        for (i, k) in keys.present.iter().enumerate().skip(t).step_by(cfg.tables) {
            value_into(i as u64, cfg.value_len, &mut value);
            store.put(k, &value)?;
        }
        put_time += start.elapsed();
        let start = Instant::now();
        store.flush()?;
        flush_time += start.elapsed();
    }
    let mut engine = None;
    if cfg.engine {
        progress("engine: reopen, seal with 1 and 2 threads");
        drop(store);
        let start = Instant::now();
        store = Store::open(&dir, opts())?;
        let reopen_ms = start.elapsed().as_secs_f64() * 1e3;
        // Alternating rounds, medians: one pair alone swung from 1.0x to 1.75x on the shared
        // 2-core machine.
        let (mut s1s, mut s2s, mut ratios, mut rates) = (vec![], vec![], vec![], vec![]);
        for round in 0..SEAL_ROUNDS {
            progress(&format!("engine: seal round {}/{SEAL_ROUNDS}", round + 1));
            let (s1, r1) = seal_time(&keys.present, cfg, 1)?;
            let (s2, r2) = seal_time(&keys.present, cfg, 2)?;
            s1s.push(s1);
            s2s.push(s2);
            ratios.push(s1 / s2);
            rates.extend([r1, r2]);
        }
        let (s1, s2, rate) = (median(&mut s1s), median(&mut s2s), median(&mut rates));
        engine = Some(EngineFigures {
            load_puts_per_sec: n as f64 / put_time.as_secs_f64(),
            load_buffered_puts_per_sec: rate,
            seal_fsync_secs: flush_time.as_secs_f64(),
            seal_1t_secs: s1,
            seal_2t_secs: s2,
            seal_speedup: median(&mut ratios),
            seal_rounds: SEAL_ROUNDS,
            reopen_ms,
            seal_keys: n,
        });
    }
    let absent = &keys.absent;
    // Present keys in a random order, drawn before the clock starts.
    let present = keys.present.drawn(cfg.lookups, cfg.seed);
    // Which absent keys fall inside at least one table's range (the baseline's reads).
    let st = store.stats();
    let in_ranges: u64 = keys
        .absent
        .iter()
        .take(cfg.lookups as usize)
        .map(|k| {
            st.tables
                .iter()
                .filter(|t| t.min_key.as_slice() <= k && k <= t.max_key.as_slice())
                .count() as u64
        })
        .sum();
    let baseline = in_ranges as f64 / cfg.lookups as f64;

    let mut configs = vec![(FilterKind::None, None)];
    for &k in cfg.kinds.iter().filter(|k| **k != FilterKind::None) {
        for &f in &cfg.fprs {
            configs.push((k, Some(f)));
        }
    }
    let mut rows: Vec<Row> = Vec::new();
    for (ci, &(kind, fpr)) in configs.iter().enumerate() {
        let m = if kind == FilterKind::None {
            cfg.lookups.min(cfg.baseline_lookups.max(1))
        } else {
            cfg.lookups
        };
        let label = match fpr {
            Some(f) => format!("{kind} ε={}%", f * 100.0),
            None => kind.to_string(),
        };
        progress(&format!(
            "[{}/{}] {label}: building filters",
            ci + 1,
            configs.len()
        ));
        let start = Instant::now();
        store.refilter(kind, fpr.unwrap_or(0.5))?;
        let build_secs = start.elapsed().as_secs_f64();
        let st = store.stats();
        let filter_bytes: u64 = st.tables.iter().map(|t| t.filter_bytes).sum();
        let theory = if kind == FilterKind::None {
            1.0
        } else {
            st.tables.iter().map(|t| t.theoretical_fpr).sum::<f64>() / st.tables.len() as f64
        };
        progress(&format!(
            "[{}/{}] {label}: {} absent and {} present lookups",
            ci + 1,
            configs.len(),
            m,
            m
        ));
        let before = store.stats();
        let start = Instant::now();
        for i in 0..m as usize {
            if store.get(absent.get(i))?.is_some() {
                return Err(Error::Internal(
                    "an absent key was found: key sets overlap".into(),
                ));
            }
        }
        let ns_absent = start.elapsed().as_nanos() as f64 / m as f64;
        let mid = store.stats();
        let (reads, fps, negs, _) = diff(&before, &mid);
        let start = Instant::now();
        for i in 0..m as usize {
            if store.get(present.get(i))?.is_none() {
                return Err(Error::Internal("a present key was not found".into()));
            }
        }
        let ns_present = start.elapsed().as_nanos() as f64 / m as f64;
        let after = store.stats();
        let (preads, ..) = diff(&mid, &after);
        let absent_probes = fps + negs;
        let observed = (absent_probes > 0).then(|| fps as f64 / absent_probes as f64);
        let reads_per_absent = reads as f64 / m as f64;
        let cold = if cfg.cold {
            progress(&format!(
                "[{}/{}] {label}: {} cold absent lookups",
                ci + 1,
                configs.len(),
                cfg.cold_lookups
            ));
            Some(cold_run(&store, &dir, &keys.absent, cfg.cold_lookups)?)
        } else {
            None
        };
        rows.push(Row {
            kind,
            fpr,
            lookups: m,
            filter_bytes,
            bits_per_key: filter_bytes as f64 * 8.0 / n as f64,
            build_secs,
            absent_probes,
            observed_fpr: observed,
            theory_fpr: theory,
            band: band(theory, absent_probes, 4.0),
            reads_per_absent,
            avoided: if baseline > 0.0 {
                1.0 - reads_per_absent / baseline
            } else {
                0.0
            },
            ns_absent,
            ns_present,
            reads_per_present: preads as f64 / m as f64,
            cold,
        });
    }
    let scan_rows = scan_rows(&store, absent, cfg.baseline_lookups.max(1), n, progress)?;
    drop(store);
    if cfg.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(BenchReport {
        config: cfg.clone(),
        machine: machine(),
        keys: n,
        baseline_reads_per_absent: baseline,
        outside_share: keys.outside as f64 / keys.absent.len().max(1) as f64,
        engine,
        rows,
        scan_rows,
        total_secs: t0.elapsed().as_secs_f64(),
    })
}

fn cold_run(store: &Store, dir: &Path, absent: &FlatKeys, lookups: u64) -> Result<ColdFigures> {
    let before = store.stats();
    let mut elapsed = Duration::ZERO;
    for chunk in absent
        .iter()
        .take(lookups as usize)
        .collect::<Vec<_>>()
        .chunks(500)
    {
        evict_tables(dir)?;
        let start = Instant::now();
        for k in chunk {
            store.get(k)?;
        }
        elapsed += start.elapsed();
    }
    let reads = store.stats().data_block_reads - before.data_block_reads;
    Ok(ColdFigures {
        lookups,
        reads,
        ns_absent: elapsed.as_nanos() as f64 / lookups as f64,
    })
}

/// Rounds of the 1- and 2-thread seal measurement.
const SEAL_ROUNDS: usize = 3;

/// Seconds to seal `keys` into one table on a rayon pool of `threads` threads, and the
/// puts per second of loading them with `SyncPolicy::Buffered`.
fn seal_time(keys: &FlatKeys, cfg: &BenchConfig, threads: usize) -> Result<(f64, f64)> {
    let tmp = tempfile::Builder::new()
        .prefix("filterstore-seal")
        .tempdir()?;
    let store = Store::open(
        tmp.path(),
        Options::default()
            .filter(Some(
                cfg.kinds
                    .first()
                    .copied()
                    .unwrap_or(FilterKind::BlockedBloom),
            ))
            .fpr(Some(0.01))
            .memtable_bytes(usize::MAX)
            .compaction_trigger(None)
            .sync(SyncPolicy::Buffered)
            .fs(Arc::new(filterstore::io::NoSyncFs))
            // Raw blocks, as the rest of the benchmark (compression: `bench engine`).
            .compression(filterstore::Compression::None),
    )?;
    let start = Instant::now();
    let mut value = Vec::with_capacity(cfg.value_len);
    for (i, k) in keys.iter().enumerate() {
        value_into(i as u64, cfg.value_len, &mut value);
        store.put(k, &value)?;
    }
    let rate = keys.len() as f64 / start.elapsed().as_secs_f64();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Internal(format!("thread pool: {e}")))?;
    let start = Instant::now();
    pool.install(|| store.flush())?;
    Ok((start.elapsed().as_secs_f64(), rate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cold_reads_are_refused_with_mapped_tables() {
        let cfg = BenchConfig {
            cold: true,
            mmap_reads: true,
            ..BenchConfig::default()
        };
        let mut lines = 0;
        let err = run(&cfg, &mut |_| lines += 1).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert_eq!(lines, 0, "refused before any work");
    }

    #[test]
    fn the_global_filter_is_refused_as_a_per_table_kind() {
        let cfg = BenchConfig {
            kinds: vec![FilterKind::Bloom, FilterKind::Global],
            ..BenchConfig::default()
        };
        let mut lines = 0;
        let err = run(&cfg, &mut |_| lines += 1).unwrap_err();
        assert!(err.to_string().contains("--compare-global"), "{err}");
        assert_eq!(lines, 0, "refused before any work");
    }
}
