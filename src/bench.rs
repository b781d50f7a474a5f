//! `store bench`: how many data-block reads each filter kind avoids, what it costs in time
//! and bytes, and how the observed false-positive rate compares with theory — on one store
//! whose filters are swapped with `refilter`, so only the filter differs between rows.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::filename::{FileName, Numbered};
use crate::filter::{blocked, bloom, cuckoo, fuse, FilterKind};
use crate::plot::{kind_color, render, Chart, Series, Style};
use crate::store::{Options, Stats, Store, SyncPolicy};

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
    /// Total seconds.
    pub total_secs: f64,
}

/// SplitMix64: seeded, reproducible key material.
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Generated key `i` of a seed: 16 bytes from SplitMix64 (also used by the examples, so that
/// their stores hold the same keys as the benchmark's).
pub fn key16(seed: u64, i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&splitmix(seed ^ (2 * i)).to_be_bytes());
    k[8..].copy_from_slice(&splitmix(seed ^ (2 * i + 1)).to_be_bytes());
    k
}

fn gen_key(seed: u64, i: u64) -> Vec<u8> {
    key16(seed, i).to_vec()
}

/// The value of key `i`, written into `out` (one buffer for a whole load, so the timed loop
/// measures puts, not an allocation per value).
fn value_into(i: u64, len: usize, out: &mut Vec<u8>) {
    let tag = i.to_le_bytes();
    out.clear();
    out.extend((0..len).map(|j| tag[j % 8] ^ (j as u8)));
}

/// Keys laid out back to back, so that timing lookups does not also time the harness's own
/// cache misses on one heap allocation per key.
struct FlatKeys {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl FlatKeys {
    fn new(keys: &[Vec<u8>]) -> FlatKeys {
        let mut bytes = Vec::with_capacity(keys.iter().map(Vec::len).sum());
        let mut ends = Vec::with_capacity(keys.len());
        for k in keys {
            bytes.extend_from_slice(k);
            ends.push(bytes.len());
        }
        FlatKeys { bytes, ends }
    }

    /// `count` keys drawn at random (with repetition) from `self`, laid out in draw order, so
    /// a timed loop reads them sequentially instead of missing cache on every draw.
    fn drawn(&self, count: u64, seed: u64) -> FlatKeys {
        let mut out = FlatKeys {
            bytes: Vec::new(),
            ends: Vec::with_capacity(count as usize),
        };
        let mut x = seed;
        for _ in 0..count {
            x = splitmix(x);
            out.bytes
                .extend_from_slice(self.get((x % self.len() as u64) as usize));
            out.ends.push(out.bytes.len());
        }
        out
    }

    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn iter(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// Present keys, absent keys (inside the key ranges first, outside after).
struct Keys {
    present: FlatKeys,
    absent: FlatKeys,
    outside: u64,
}

fn make_keys(cfg: &BenchConfig) -> Result<Keys> {
    let lookups = cfg.lookups.max(cfg.cold_lookups);
    let outside = lookups / 10;
    let mut absent: Vec<Vec<u8>>;
    let present: Vec<Vec<u8>>;
    match &cfg.keys_file {
        None => {
            present = (0..cfg.keys).map(|i| gen_key(cfg.seed, i)).collect();
            absent = (0..lookups - outside)
                .map(|i| gen_key(cfg.seed ^ 0x5555_5555, i))
                .collect();
        }
        Some(path) => {
            let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
            let mut lines: Vec<&[u8]> = text
                .split(|&b| b == b'\n')
                .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                .filter(|l| !l.is_empty())
                .collect();
            lines.sort_unstable();
            lines.dedup();
            if lines.len() < 20 {
                return Err(Error::InvalidArgument(format!(
                    "{} has fewer than 20 distinct keys",
                    path.display()
                )));
            }
            // Interleave so that held-out keys lie inside every table's range.
            let mut order: Vec<usize> = (0..lines.len()).collect();
            order.sort_by_key(|&i| splitmix(cfg.seed ^ i as u64));
            let (mut p, mut a) = (Vec::new(), Vec::new());
            for (j, &i) in order.iter().enumerate() {
                if j % 10 == 9 {
                    a.push(lines[i].to_vec());
                } else {
                    p.push(lines[i].to_vec());
                }
            }
            present = p;
            // Cycle the held-out keys up to the number of lookups.
            absent = (0..(lookups - outside) as usize)
                .map(|i| a[i % a.len()].clone())
                .collect();
        }
    }
    // Keys sorting after every loaded key: outside every table's range.
    let top = present.iter().max().cloned().unwrap_or_default();
    for i in 0..outside {
        let mut k = top.clone();
        k.extend_from_slice(&[0xff, 0xff]);
        k.extend_from_slice(&i.to_be_bytes());
        absent.push(k);
    }
    // Shuffle so that inside and outside keys alternate.
    let mut idx: Vec<usize> = (0..absent.len()).collect();
    idx.sort_by_key(|&i| splitmix(cfg.seed ^ 0xabcdef ^ i as u64));
    let absent: Vec<Vec<u8>> = idx
        .into_iter()
        .map(|i| std::mem::take(&mut absent[i]))
        .collect();
    Ok(Keys {
        present: FlatKeys::new(&present),
        absent: FlatKeys::new(&absent),
        outside,
    })
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

/// The CPU model and core count, for reports.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{cpu}, {cores} cores")
}

fn diff(a: &Stats, b: &Stats) -> (u64, u64, u64, u64) {
    (
        b.data_block_reads - a.data_block_reads,
        b.false_positives - a.false_positives,
        b.filter_negatives - a.filter_negatives,
        b.filter_probes() - a.filter_probes(),
    )
}

/// Band of `sigmas` binomial standard deviations plus a 5 % relative model tolerance
/// around `p` for `trials` absent probes.
pub fn band(p: f64, trials: u64, sigmas: f64) -> (f64, f64) {
    if trials == 0 {
        return (0.0, 1.0);
    }
    let sd = (p * (1.0 - p) / trials as f64).sqrt();
    let w = sigmas * sd + 0.05 * p;
    ((p - w).max(0.0), (p + w).min(1.0))
}

/// Runs the benchmark; `progress` receives one line per phase.
pub fn run(cfg: &BenchConfig, progress: &mut dyn FnMut(&str)) -> Result<BenchReport> {
    if cfg.tables == 0 || cfg.keys < cfg.tables as u64 || cfg.lookups == 0 {
        return Err(Error::InvalidArgument(
            "need at least one table, one key per table and one lookup".into(),
        ));
    }
    for &f in &cfg.fprs {
        crate::filter::check_fpr(f)?;
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
    let opts = || Options {
        filter: Some(first_kind),
        fpr: Some(0.01),
        memtable_bytes: usize::MAX,
        compaction_trigger: None,
        sync: SyncPolicy::OnFlush,
        mmap_reads: cfg.mmap_reads,
        ..Options::default()
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

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// Seconds to seal `keys` into one table on a rayon pool of `threads` threads, and the
/// puts per second of loading them with `SyncPolicy::Buffered`.
fn seal_time(keys: &FlatKeys, cfg: &BenchConfig, threads: usize) -> Result<(f64, f64)> {
    let tmp = tempfile::Builder::new()
        .prefix("filterstore-seal")
        .tempdir()?;
    let store = Store::open(
        tmp.path(),
        Options {
            filter: Some(
                cfg.kinds
                    .first()
                    .copied()
                    .unwrap_or(FilterKind::BlockedBloom),
            ),
            fpr: Some(0.01),
            memtable_bytes: usize::MAX,
            compaction_trigger: None,
            sync: SyncPolicy::Buffered,
            fs: Arc::new(crate::io::NoSyncFs),
            ..Options::default()
        },
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

fn pct(x: f64) -> String {
    format!("{:.3}%", x * 100.0)
}

impl BenchReport {
    /// The filter kinds measured, ranked by the median of their rows'
    /// [`Row::bits_per_halving`] (fewest disk reads per byte of filter first), with that
    /// median.
    pub fn kinds_by_reads_per_byte(&self) -> Vec<(FilterKind, f64)> {
        let mut kinds: Vec<(FilterKind, f64)> = Vec::new();
        for r in &self.rows {
            if kinds.iter().any(|(k, _)| *k == r.kind) {
                continue;
            }
            let mut v: Vec<f64> = self
                .rows
                .iter()
                .filter(|x| x.kind == r.kind)
                .filter_map(Row::bits_per_halving)
                .collect();
            if !v.is_empty() {
                kinds.push((r.kind, median(&mut v)));
            }
        }
        kinds.sort_by(|a, b| a.1.total_cmp(&b.1));
        kinds
    }

    /// The readable table printed on stdout.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let c = &self.config;
        let _ = writeln!(
            s,
            "filterstore bench — {} keys ({}), {} tables, {} absent + {} present lookups per row ({} for the no-filter baseline)",
            self.keys,
            if c.keys_file.is_some() {
                "from file"
            } else {
                "16-byte keys, 100-byte values"
            },
            c.tables,
            c.lookups,
            c.lookups,
            self.rows.first().map_or(0, |r| r.lookups)
        );
        let _ = writeln!(s, "machine: {}; absent keys: {:.0}% outside every table's range; baseline (no filter) reads per absent lookup: {:.3}; data blocks read {}",
            self.machine, self.outside_share * 100.0, self.baseline_reads_per_absent,
            if c.mmap_reads { "in place from mapped files (--mmap-reads)" } else { "with pread" });
        if let Some(e) = &self.engine {
            let _ = writeln!(s, "engine: load {:.0} puts/s (WAL write per put, no fsync), {:.0} puts/s buffered WAL; reopen {:.1} ms; seal {} keys without fsync (medians of {} alternating rounds): 1 thread {:.3} s, 2 threads {:.3} s ({:.2}x); with fsync ({} tables): {:.3} s",
                e.load_puts_per_sec, e.load_buffered_puts_per_sec, e.reopen_ms, e.seal_keys, e.seal_rounds, e.seal_1t_secs, e.seal_2t_secs, e.seal_speedup, c.tables, e.seal_fsync_secs);
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "{:<14} {:>7} {:>9} {:>9} {:>10} {:>8} {:>9} {:>9} {:>21} {:>9} {:>8} {:>9} {:>10} {:>10}{}",
            "filter",
            "ε",
            "bits/key",
            "b/halving",
            "filter KiB",
            "build s",
            "obs FPR",
            "theory",
            "band (4σ+5%)",
            "reads/abs",
            "avoided",
            "ns/absent",
            "ns/present",
            "reads/pres",
            if c.cold {
                "  cold ns/abs  cold reads  cold speed-up"
            } else {
                ""
            }
        );
        let none_cold = self
            .rows
            .iter()
            .find(|r| r.kind == FilterKind::None)
            .and_then(|r| r.cold.as_ref())
            .map(|c| c.ns_absent);
        for r in &self.rows {
            let (eps, obs, th, bnd) = match r.fpr {
                Some(f) => (
                    pct(f),
                    r.observed_fpr.map_or("-".into(), pct),
                    pct(r.theory_fpr),
                    format!("{}..{}", pct(r.band.0), pct(r.band.1)),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            let flag = if r.in_band() { "" } else { " OUTSIDE BAND" };
            let halving = r
                .bits_per_halving()
                .map_or("-".into(), |b| format!("{b:.2}"));
            let _ = write!(s, "{:<14} {:>7} {:>9.2} {:>9} {:>10.1} {:>8.3} {:>9} {:>9} {:>21} {:>9.4} {:>7.1}% {:>9.0} {:>10.0} {:>10.4}",
                r.kind.name(), eps, r.bits_per_key, halving, r.filter_bytes as f64 / 1024.0, r.build_secs, obs, th, bnd, r.reads_per_absent, r.avoided * 100.0, r.ns_absent, r.ns_present, r.reads_per_present);
            if let Some(cold) = &r.cold {
                let speed = none_cold.map_or(1.0, |n| n / cold.ns_absent);
                let _ = write!(
                    s,
                    "  {:>11.0} {:>11} {:>13.1}x",
                    cold.ns_absent, cold.reads, speed
                );
            }
            let _ = writeln!(s, "{flag}");
        }
        let outside = self.rows.iter().filter(|r| !r.in_band()).count();
        let _ = writeln!(s);
        let ranked = self.kinds_by_reads_per_byte();
        if let Some((best, b)) = ranked.first() {
            let rest: Vec<String> = ranked[1..]
                .iter()
                .map(|(k, b)| format!("{k} {b:.2}"))
                .collect();
            let _ = writeln!(s, "fewest disk reads per byte of filter: {best} ({b:.2} bits/key per halving of absent-key reads, median of its rows; 1.00 is the information-theoretic minimum){}{}",
                if rest.is_empty() { "" } else { "; then " }, rest.join(", "));
        }
        let _ = writeln!(s, "{} of {} filtered rows have an observed FPR inside the band around theory; total {:.1} s",
            self.rows.iter().filter(|r| r.fpr.is_some()).count() - outside, self.rows.iter().filter(|r| r.fpr.is_some()).count(), self.total_secs);
        s
    }

    /// One CSV line per row, with a header.
    pub fn to_csv(&self) -> String {
        let mut s = String::from("kind,fpr,lookups,bits_per_key,bits_per_halving,filter_bytes,build_secs,absent_probes,observed_fpr,theory_fpr,band_low,band_high,in_band,reads_per_absent,avoided,ns_absent,ns_present,reads_per_present,cold_ns_absent,cold_reads\n");
        for r in &self.rows {
            let o = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                r.kind,
                o(r.fpr),
                r.lookups,
                r.bits_per_key,
                o(r.bits_per_halving()),
                r.filter_bytes,
                r.build_secs,
                r.absent_probes,
                o(r.observed_fpr),
                r.theory_fpr,
                r.band.0,
                r.band.1,
                r.in_band(),
                r.reads_per_absent,
                r.avoided,
                r.ns_absent,
                r.ns_present,
                r.reads_per_present,
                o(r.cold.as_ref().map(|c| c.ns_absent)),
                r.cold
                    .as_ref()
                    .map_or(String::new(), |c| c.reads.to_string())
            );
        }
        s
    }

    /// The report as JSON (NaN and infinities, which JSON cannot express, as `null`).
    pub fn to_json(&self) -> String {
        use serde_json::{json, Value};
        let num = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
        let opt = |x: Option<f64>| x.map_or(Value::Null, num);
        let engine = self.engine.as_ref().map(|e| {
            json!({
                "load_puts_per_sec": num(e.load_puts_per_sec),
                "load_buffered_puts_per_sec": num(e.load_buffered_puts_per_sec),
                "reopen_ms": num(e.reopen_ms),
                "seal_keys": e.seal_keys,
                "seal_1t_secs": num(e.seal_1t_secs),
                "seal_2t_secs": num(e.seal_2t_secs),
                "seal_speedup": num(e.seal_speedup),
                "seal_rounds": e.seal_rounds,
                "seal_fsync_secs": num(e.seal_fsync_secs),
            })
        });
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                json!({
                    "kind": r.kind.to_string(),
                    "fpr": opt(r.fpr),
                    "lookups": r.lookups,
                    "bits_per_key": num(r.bits_per_key),
                    "bits_per_halving": opt(r.bits_per_halving()),
                    "filter_bytes": r.filter_bytes,
                    "build_secs": num(r.build_secs),
                    "absent_probes": r.absent_probes,
                    "observed_fpr": opt(r.observed_fpr),
                    "theory_fpr": num(r.theory_fpr),
                    "band": [num(r.band.0), num(r.band.1)],
                    "in_band": r.in_band(),
                    "reads_per_absent": num(r.reads_per_absent),
                    "avoided": num(r.avoided),
                    "ns_absent": num(r.ns_absent),
                    "ns_present": num(r.ns_present),
                    "reads_per_present": num(r.reads_per_present),
                    "cold": r.cold.as_ref().map(|c| json!({
                        "lookups": c.lookups,
                        "reads": c.reads,
                        "ns_absent": num(c.ns_absent),
                    })),
                })
            })
            .collect();
        let v = json!({
            "machine": self.machine,
            "keys": self.keys,
            "tables": self.config.tables,
            "lookups": self.config.lookups,
            "mmap_reads": self.config.mmap_reads,
            "baseline_reads_per_absent": num(self.baseline_reads_per_absent),
            "outside_share": num(self.outside_share),
            "total_secs": num(self.total_secs),
            "engine": engine,
            "rows": rows,
        });
        let mut out = serde_json::to_string_pretty(&v).unwrap_or_default();
        out.push('\n');
        out
    }

    /// An SVG with two panels: FPR against bits per key (points measured, lines theory) and
    /// data-block reads per absent lookup per configuration.
    pub fn to_svg(&self) -> String {
        bench_svg(self)
    }
}

/// Theoretical (bits per key, FPR) points of `kind` for ε from 0.5 down to 0.0001.
pub fn theory_curve(kind: FilterKind) -> Vec<(f64, f64)> {
    let n = 1_000_000u64;
    (0..=40)
        .map(|i| 0.5 * 10f64.powf(-(i as f64) / 10.0))
        .filter_map(|eps| match kind {
            FilterKind::Bloom => {
                let (m, k) = bloom::params(n, eps);
                Some((m as f64 / n as f64, bloom::theoretical_fpr(m, k, n)))
            }
            FilterKind::BlockedBloom => {
                let (b, k) = blocked::params(n, eps);
                Some((
                    b as f64 * 512.0 / n as f64,
                    blocked::theoretical_fpr(b, k, n),
                ))
            }
            FilterKind::Cuckoo => {
                let f = cuckoo::fingerprint_bits(eps);
                let buckets = (n as f64 / (4.0 * cuckoo::TARGET_LOAD)).ceil() as u64;
                Some((
                    buckets as f64 * 4.0 * f as f64 / n as f64,
                    cuckoo::theoretical_fpr(buckets, f, n),
                ))
            }
            FilterKind::BinaryFuse => {
                let f = fuse::fingerprint_bits(eps);
                let slots = fuse::Layout::for_keys(n).array_len();
                Some((
                    (slots * f as u64) as f64 / n as f64,
                    fuse::theoretical_fpr(f, n),
                ))
            }
            FilterKind::None => None,
        })
        .collect()
}

/// The bench figure: FPR vs bits/key (measured points, theory lines) and reads per absent
/// lookup vs ε per kind, with the no-filter baseline.
fn bench_svg(r: &BenchReport) -> String {
    let kinds: Vec<FilterKind> = {
        let mut k: Vec<FilterKind> = r
            .rows
            .iter()
            .map(|r| r.kind)
            .filter(|k| *k != FilterKind::None)
            .collect();
        k.dedup();
        k
    };
    let mut fpr = Chart {
        title: "False-positive rate vs bits per key".into(),
        x_label: "filter bits per key".into(),
        y_label: "false-positive rate".into(),
        log_y: true,
        ..Chart::default()
    };
    let mut reads = Chart {
        title: "Data-block reads per absent lookup".into(),
        x_label: "target ε".into(),
        y_label: "reads per absent lookup".into(),
        log_x: true,
        log_y: true,
        legend_bottom: true,
        ..Chart::default()
    };
    for &k in &kinds {
        let rows: Vec<_> = r.rows.iter().filter(|x| x.kind == k).collect();
        let curve: Vec<(f64, f64)> = theory_curve(k)
            .into_iter()
            .filter(|(b, _)| *b <= 20.0)
            .collect();
        fpr.series.push(Series {
            name: format!("{k} theory"),
            color: kind_color(k),
            points: curve,
            style: Style::Dashed,
        });
        fpr.series.push(Series {
            name: format!("{k} measured"),
            color: kind_color(k),
            points: rows
                .iter()
                .filter_map(|x| x.observed_fpr.map(|o| (x.bits_per_key, o)))
                .collect(),
            style: Style::Points,
        });
        reads.series.push(Series {
            name: k.to_string(),
            color: kind_color(k),
            points: rows
                .iter()
                .filter_map(|x| x.fpr.map(|f| (f, x.reads_per_absent)))
                .collect(),
            style: Style::ErrorBars(vec![0.0; rows.len()]),
        });
    }
    if let Some(none) = r.rows.iter().find(|x| x.kind == FilterKind::None) {
        let fs: Vec<f64> = r.rows.iter().filter_map(|x| x.fpr).collect();
        let (lo, hi) = fs
            .iter()
            .fold((f64::MAX, f64::MIN), |a, &f| (a.0.min(f), a.1.max(f)));
        if lo <= hi {
            reads.series.push(Series {
                name: "none (baseline)".into(),
                color: kind_color(FilterKind::None),
                points: vec![(lo, none.reads_per_absent), (hi, none.reads_per_absent)],
                style: Style::Dashed,
            });
        }
    }
    render(&[fpr, reads], 560.0, 400.0)
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
}
