//! `store bench export`: what the Parquet export costs and what its Bloom filters buy on
//! engines that read them. Built with the `parquet` feature.
//!
//! On one generated store (default 10M 16-byte keys with 100-byte values in 10 tables whose
//! key ranges all span the key space, blocked-bloom filters at ε = 1 %):
//! 1. export throughput (median of rounds, a plain scan of the same store timed in the
//!    same rounds as the baseline);
//! 2. for each fpp: the files, row groups and Bloom filter bytes, and for absent keys
//!    inside a row group's min/max range and for present keys, the row groups a reader
//!    that applies min/max statistics reads without the filters and with them (the filters
//!    read back with the parquet crate), beside filterstore's own data-block reads per
//!    absent lookup on the same keys;
//! 3. with an interop Python (`engines`), the same counts as DataFusion's `EXPLAIN ANALYZE`
//!    and DuckDB's `parquet_bloom_probe` report them, and the values both return;
//! 4. with the `store` binary (`store_exe`), `store import --parquet` against `store load`
//!    of the same rows as TSV, alternating, medians.
//!
//! Generated keys and values avoid the bytes tab, newline and carriage return (every key
//! byte has its top bit set; values are letters) so that the same rows load as TSV.

//!
//! The jobs are spread over files: the configuration, the figures and the measurement
//! ([`run`]) here, the row groups read back and counted in `groups.rs`, the DataFusion and
//! DuckDB runs in `engines.rs`, the text report in `report.rs`.

mod engines;
mod groups;
mod report;

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use self::engines::run_engines;
use self::groups::count_reads;
use crate::bench::{key16, machine};
use filterstore::export::{self, ParquetOptions};
use filterstore::filter::{check_fpr, FilterKind};
use filterstore::store::{Options, Store, SyncPolicy};
use filterstore::{Error, Result};

/// What to measure.
#[derive(Clone, Debug)]
pub struct ExportBenchConfig {
    /// Keys in the store.
    pub keys: u64,
    /// Tables they are sealed into (every table spans the key space).
    pub tables: usize,
    /// The store's ε (blocked-bloom filters).
    pub store_fpr: f64,
    /// Bloom filter rates of the exports compared.
    pub fpps: Vec<f64>,
    /// Rows per row group.
    pub rows_per_group: usize,
    /// Absent and present point queries counted per fpp (Rust reader and filterstore).
    pub queries: u64,
    /// Of those, the queries sent to each engine (absent and present each).
    pub engine_queries: u64,
    /// Of those, the absent ones also sent to DataFusion with Bloom filters off.
    pub engine_off_queries: u64,
    /// Timed export rounds.
    pub rounds: usize,
    /// Python of the interop environment (DataFusion and DuckDB); `None` skips the engines.
    pub engines: Option<PathBuf>,
    /// `tests/interop/engines.py`.
    pub engines_script: PathBuf,
    /// The `store` binary, for `load` against `import`; `None` skips that comparison.
    pub store_exe: Option<PathBuf>,
    /// Rounds of `load` against `import`.
    pub import_rounds: usize,
    /// Where to build everything (a temporary directory when `None`).
    pub dir: Option<PathBuf>,
    /// Seed of the generated keys.
    pub seed: u64,
}

impl Default for ExportBenchConfig {
    fn default() -> Self {
        ExportBenchConfig {
            keys: 10_000_000,
            tables: 10,
            store_fpr: 0.01,
            fpps: vec![0.05, 0.01, 0.001],
            rows_per_group: export::DEFAULT_ROWS_PER_GROUP,
            queries: 10_000,
            engine_queries: 10_000,
            engine_off_queries: 1_000,
            rounds: 3,
            engines: None,
            engines_script: PathBuf::from("tests/interop/engines.py"),
            store_exe: None,
            import_rounds: 3,
            dir: None,
            seed: 42,
        }
    }
}

/// The key of row `i`: 16 bytes, each with its top bit set (no tab or newline).
fn key(seed: u64, i: u64) -> [u8; 16] {
    let mut k = key16(seed, i);
    for b in &mut k {
        *b |= 0x80;
    }
    k
}

fn value(i: u64, out: &mut Vec<u8>) {
    out.clear();
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for _ in 0..100 {
        out.push(b'a' + (x % 26) as u8);
        x = x.rotate_left(5) ^ 0x5bd1_e995;
    }
}

/// One fpp's figures.
#[derive(Clone, Debug, Default)]
pub struct FppRow {
    /// The Bloom filters' target rate.
    pub fpp: f64,
    /// Files, row groups, bytes of the files and of the filters.
    pub files: usize,
    /// Row groups.
    pub groups: usize,
    /// Bytes of all files.
    pub file_bytes: u64,
    /// Bytes of all Bloom filters.
    pub bloom_bytes: u64,
    /// The filters' expected false-positive rate (mean over groups, `export::sbbf_fpr`).
    pub model_fpr: f64,
    /// Absent queries counted; row groups their min/max admit (read without filters);
    /// row groups also passing the filter (read with them).
    pub absent: u64,
    /// Row groups whose min/max admit the absent keys.
    pub absent_in_range: u64,
    /// Of those, the ones whose filter says "maybe".
    pub absent_read: u64,
    /// Present queries counted and how many passed their group's filter.
    pub present: u64,
    /// Present keys that passed their group's filter.
    pub present_found: u64,
    /// What the engines reported, when run.
    pub engines: Option<EngineCounts>,
}

/// Counts from DataFusion and DuckDB for one export.
#[derive(Clone, Debug, Default)]
pub struct EngineCounts {
    /// Absent queries sent with filters on.
    pub absent: u64,
    /// Row groups DataFusion's statistics admitted for them.
    pub df_in_range: u64,
    /// Row groups DataFusion read for them with filters on.
    pub df_read: u64,
    /// Absent queries sent with `bloom_filter_on_read = false`.
    pub off_absent: u64,
    /// Row groups DataFusion read for them.
    pub df_off_read: u64,
    /// Row groups DuckDB scanned for the absent keys (`row_groups_scanned` of its profile).
    pub duck_read: u64,
    /// Absent queries that returned a row (must be 0), DataFusion and DuckDB.
    pub absent_rows: u64,
    /// Present queries sent.
    pub present: u64,
    /// Present queries that returned exactly the stored value, DataFusion and DuckDB.
    pub df_exact: u64,
    /// DuckDB's.
    pub duck_exact: u64,
    /// Seconds the engines took for this export.
    pub secs: f64,
}

/// Everything measured.
#[derive(Clone, Debug, Default)]
pub struct ExportBenchReport {
    /// CPU and cores.
    pub machine: String,
    /// Keys and tables.
    pub keys: u64,
    /// Tables.
    pub tables: usize,
    /// Rows per group.
    pub rows_per_group: usize,
    /// Seconds to load and seal the store.
    pub build_secs: f64,
    /// Export seconds per round, and a full scan's seconds in the same rounds.
    pub export_secs: Vec<f64>,
    /// Scan seconds per round.
    pub scan_secs: Vec<f64>,
    /// filterstore's data-block reads per absent lookup on the absent keys (store ε).
    pub store_reads_per_absent: f64,
    /// One row per fpp.
    pub rows: Vec<FppRow>,
    /// `store load` and `store import` seconds per round, when measured.
    pub load_secs: Vec<f64>,
    /// Import seconds per round.
    pub import_secs: Vec<f64>,
    /// Total seconds.
    pub total_secs: f64,
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Runs the benchmark; `progress` receives one line per phase.
pub fn run(cfg: &ExportBenchConfig, progress: &mut dyn FnMut(&str)) -> Result<ExportBenchReport> {
    if cfg.keys < 2 || cfg.tables == 0 || cfg.queries == 0 || cfg.rounds == 0 {
        return Err(Error::InvalidArgument(
            "need two keys, a table, a query and a round".into(),
        ));
    }
    check_fpr(cfg.store_fpr)?;
    for &f in &cfg.fpps {
        check_fpr(f)?;
    }
    let t0 = Instant::now();
    let tmp;
    let root = match &cfg.dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
            d.clone()
        }
        None => {
            tmp = tempfile::Builder::new()
                .prefix("filterstore-bench-export")
                .tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let store_dir = root.join("store");
    if store_dir.exists() {
        return Err(Error::InvalidArgument(format!(
            "{} already exists; the bench builds a fresh store",
            store_dir.display()
        )));
    }
    let mut report = ExportBenchReport {
        machine: machine(),
        keys: cfg.keys,
        tables: cfg.tables,
        rows_per_group: cfg.rows_per_group,
        ..ExportBenchReport::default()
    };

    progress(&format!(
        "loading {} keys into {} tables",
        cfg.keys, cfg.tables
    ));
    let start = Instant::now();
    let opts = Options::default()
        .filter(Some(FilterKind::BlockedBloom))
        .fpr(Some(cfg.store_fpr))
        .memtable_bytes(usize::MAX)
        .compaction_trigger(None)
        .sync(SyncPolicy::Buffered);
    let store = Store::open(&store_dir, opts)?;
    let mut v = Vec::with_capacity(100);
    for t in 0..cfg.tables as u64 {
        let mut i = t;
        while i < cfg.keys {
            value(i, &mut v);
            store.put(key(cfg.seed, i), &v)?;
            i += cfg.tables as u64;
        }
        store.flush()?;
    }
    report.build_secs = start.elapsed().as_secs_f64();

    // Query keys: present keys drawn from the store; absent keys from the same generator
    // (another seed), kept only inside the store's key range (so inside some group's
    // min/max: groups tile the sorted keys).
    let mut present = Vec::with_capacity(cfg.queries as usize);
    let mut absent = Vec::with_capacity(cfg.queries as usize);
    {
        let stats = store.stats();
        let lo = stats
            .tables
            .iter()
            .map(|t| t.min_key.clone())
            .min()
            .unwrap_or_default();
        let hi = stats
            .tables
            .iter()
            .map(|t| t.max_key.clone())
            .max()
            .unwrap_or_default();
        let step = (cfg.keys / cfg.queries).max(1);
        for q in 0..cfg.queries {
            present.push(((q * step) % cfg.keys, key(cfg.seed, (q * step) % cfg.keys)));
        }
        let mut i = 0u64;
        while (absent.len() as u64) < cfg.queries {
            let k = key(cfg.seed ^ 0xabad_1dea, i);
            i += 1;
            if k.as_slice() > lo.as_slice()
                && k.as_slice() < hi.as_slice()
                && store.get(k)?.is_none()
            {
                absent.push(k);
            }
        }
    }
    let before = store.stats();
    for k in &absent {
        store.get(k)?;
    }
    let after = store.stats();
    report.store_reads_per_absent =
        (after.data_block_reads - before.data_block_reads) as f64 / absent.len() as f64;

    // 1. Export throughput, a scan of the same store in the same rounds.
    let mut default_export = None;
    for round in 0..cfg.rounds {
        progress(&format!(
            "round {}/{}: scan, then export",
            round + 1,
            cfg.rounds
        ));
        let start = Instant::now();
        let mut n = 0u64;
        for item in store.scan::<&[u8]>(..) {
            let (k, v) = item?;
            n += (k.len() + v.len()) as u64;
        }
        std::hint::black_box(n);
        report.scan_secs.push(start.elapsed().as_secs_f64());
        let out = root.join(format!("export-round{round}"));
        let start = Instant::now();
        let s = export::parquet(
            &store,
            &out,
            &ParquetOptions::default().rows_per_group(cfg.rows_per_group),
            &mut |_| {},
        )?;
        report.export_secs.push(start.elapsed().as_secs_f64());
        if round == 0 {
            default_export = Some((out, s));
        } else {
            std::fs::remove_dir_all(&out).map_err(|e| Error::io(&out, e))?;
        }
    }
    let (default_dir, default_summary) = default_export.expect("at least one round");

    // 2 and 3. Per fpp.
    for &fpp in &cfg.fpps {
        let (dir, summary) = if fpp == cfg.store_fpr {
            (default_dir.clone(), default_summary.clone())
        } else {
            progress(&format!("export at fpp {fpp}"));
            let out = root.join(format!("export-fpp-{fpp}"));
            let s = export::parquet(
                &store,
                &out,
                &ParquetOptions::default()
                    .rows_per_group(cfg.rows_per_group)
                    .fpp(Some(fpp)),
                &mut |_| {},
            )?;
            (out, s)
        };
        progress(&format!("fpp {fpp}: reading the filters back"));
        let mut row = count_reads(&summary, &absent, &present)?;
        row.fpp = fpp;
        if let Some(python) = &cfg.engines {
            progress(&format!("fpp {fpp}: DataFusion and DuckDB"));
            row.engines = Some(run_engines(
                python,
                &cfg.engines_script,
                &dir,
                &root,
                cfg,
                &absent,
                &present,
            )?);
        }
        report.rows.push(row);
    }

    // 4. load against import.
    if let Some(exe) = &cfg.store_exe {
        progress("writing the rows as TSV for store load");
        let tsv = root.join("rows.tsv");
        {
            let f = File::create(&tsv).map_err(|e| Error::io(&tsv, e))?;
            let mut w = BufWriter::with_capacity(1 << 20, f);
            for item in store.scan::<&[u8]>(..) {
                let (k, v) = item?;
                w.write_all(&k)
                    .and_then(|()| w.write_all(b"\t"))
                    .and_then(|()| w.write_all(&v))
                    .and_then(|()| w.write_all(b"\n"))
                    .map_err(|e| Error::io(&tsv, e))?;
            }
            w.flush().map_err(|e| Error::io(&tsv, e))?;
        }
        for round in 0..cfg.import_rounds {
            for (what, secs) in [
                ("load", &mut report.load_secs),
                ("import", &mut report.import_secs),
            ] {
                progress(&format!(
                    "round {}/{}: store {what}",
                    round + 1,
                    cfg.import_rounds
                ));
                let target = root.join(format!("{what}-{round}"));
                let mut cmd = Command::new(exe);
                cmd.arg("--dir").arg(&target);
                if what == "load" {
                    cmd.arg("load").arg(&tsv);
                } else {
                    cmd.args(["import", "--parquet"]).arg(&default_dir);
                }
                let start = Instant::now();
                let status = cmd
                    .stdout(Stdio::null())
                    .status()
                    .map_err(|e| Error::io(exe, e))?;
                secs.push(start.elapsed().as_secs_f64());
                if !status.success() {
                    return Err(Error::InvalidArgument(format!(
                        "store {what} failed: {status}"
                    )));
                }
                std::fs::remove_dir_all(&target).map_err(|e| Error::io(&target, e))?;
            }
        }
    }
    report.total_secs = t0.elapsed().as_secs_f64();
    Ok(report)
}
