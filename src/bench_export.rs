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

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use parquet::bloom_filter::Sbbf;
use parquet::file::properties::ReaderProperties;
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::{ReadOptionsBuilder, SerializedFileReader};

use crate::bench::{key16, machine};
use crate::error::{Error, Result};
use crate::export::{self, ExportSummary, ParquetOptions};
use crate::filter::{check_fpr, FilterKind};
use crate::store::{Options, Store, SyncPolicy};

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
    let opts = Options {
        filter: Some(FilterKind::BlockedBloom),
        fpr: Some(cfg.store_fpr),
        memtable_bytes: usize::MAX,
        compaction_trigger: None,
        sync: SyncPolicy::Buffered,
        ..Options::default()
    };
    let store = Store::open(&store_dir, opts)?;
    let mut v = Vec::with_capacity(100);
    for t in 0..cfg.tables as u64 {
        let mut i = t;
        while i < cfg.keys {
            value(i, &mut v);
            store.put(&key(cfg.seed, i), &v)?;
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
                && store.get(&k)?.is_none()
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
            &ParquetOptions {
                rows_per_group: cfg.rows_per_group,
                ..ParquetOptions::default()
            },
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
                &ParquetOptions {
                    rows_per_group: cfg.rows_per_group,
                    fpp: Some(fpp),
                    ..ParquetOptions::default()
                },
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

/// The row groups of an export with their key ranges and filters, read back.
/// A row group's min key, max key and Bloom filter.
type Group = (Vec<u8>, Vec<u8>, Option<Sbbf>);

fn read_groups(summary: &ExportSummary) -> Result<Vec<Group>> {
    let mut out = Vec::new();
    for f in &summary.files {
        let props = ReaderProperties::builder()
            .set_read_bloom_filter(true)
            .build();
        let file = File::open(&f.path).map_err(|e| Error::io(&f.path, e))?;
        let r = SerializedFileReader::new_with_options(
            file,
            ReadOptionsBuilder::new()
                .with_reader_properties(props)
                .build(),
        )
        .map_err(export::pq_err(&f.path))?;
        for (i, g) in f.groups.iter().enumerate() {
            let rg = r.get_row_group(i).map_err(export::pq_err(&f.path))?;
            out.push((
                g.min_key.clone(),
                g.max_key.clone(),
                rg.get_column_bloom_filter(0).cloned(),
            ));
        }
    }
    Ok(out)
}

fn count_reads(
    summary: &ExportSummary,
    absent: &[[u8; 16]],
    present: &[(u64, [u8; 16])],
) -> Result<FppRow> {
    let groups = read_groups(summary)?;
    let mut row = FppRow {
        files: summary.files.len(),
        groups: groups.len(),
        file_bytes: summary.file_bytes(),
        bloom_bytes: summary.bloom_bytes(),
        model_fpr: summary.groups().filter_map(|g| g.bloom_fpr).sum::<f64>()
            / summary.groups().count().max(1) as f64,
        absent: absent.len() as u64,
        present: present.len() as u64,
        ..FppRow::default()
    };
    fn in_range<'a>(groups: &'a [Group], k: &'a [u8]) -> impl Iterator<Item = &'a Group> + 'a {
        groups
            .iter()
            .filter(move |g| g.0.as_slice() <= k && k <= g.1.as_slice())
    }
    for k in absent {
        for g in in_range(&groups, k) {
            row.absent_in_range += 1;
            row.absent_read += u64::from(g.2.as_ref().is_none_or(|f| f.check(&k[..])));
        }
    }
    for (_, k) in present {
        row.present_found +=
            u64::from(in_range(&groups, k).any(|g| g.2.as_ref().is_none_or(|f| f.check(&k[..]))));
    }
    Ok(row)
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .fold(String::with_capacity(b.len() * 2), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

fn run_engines(
    python: &Path,
    script: &Path,
    dir: &Path,
    root: &Path,
    cfg: &ExportBenchConfig,
    absent: &[[u8; 16]],
    present: &[(u64, [u8; 16])],
) -> Result<EngineCounts> {
    let qfile = root.join("engine-queries.txt");
    let mut text = String::new();
    for (i, k) in absent.iter().take(cfg.engine_queries as usize).enumerate() {
        let modes = if (i as u64) < cfg.engine_off_queries {
            "on,off,duckdb"
        } else {
            "on,duckdb"
        };
        let _ = writeln!(text, "absent {} {modes}", hex(k));
    }
    for (_, k) in present.iter().take(cfg.engine_queries as usize) {
        let _ = writeln!(text, "present {} on,duckdb", hex(k));
    }
    std::fs::write(&qfile, text).map_err(|e| Error::io(&qfile, e))?;
    let start = Instant::now();
    let out = Command::new(python)
        .arg(script)
        .arg(dir)
        .arg(&qfile)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Error::io(python, e))?;
    if !out.status.success() {
        return Err(Error::InvalidArgument(format!(
            "{} {} failed: {}",
            python.display(),
            script.display(),
            out.status
        )));
    }
    let mut c = EngineCounts {
        secs: start.elapsed().as_secs_f64(),
        ..EngineCounts::default()
    };
    let values: std::collections::HashMap<String, String> = present
        .iter()
        .map(|(i, k)| {
            let mut v = Vec::new();
            value(*i, &mut v);
            (hex(k), hex(&v))
        })
        .collect();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if line.starts_with('#') {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (engine, mode, key) = (
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        let fields: std::collections::HashMap<&str, &str> =
            parts.filter_map(|p| p.split_once('=')).collect();
        let num = |f: &str| {
            fields
                .get(f)
                .and_then(|x| x.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let got = fields.get("value").copied().unwrap_or("-");
        match values.get(key) {
            Some(want) => {
                c.present += u64::from(engine == "datafusion");
                let exact = u64::from(got == want);
                if engine == "datafusion" {
                    c.df_exact += exact;
                } else {
                    c.duck_exact += exact;
                }
            }
            None => {
                c.absent_rows += u64::from(got != "-");
                match (engine, mode) {
                    ("datafusion", "on") => {
                        c.absent += 1;
                        c.df_in_range += num("stats_matched");
                        c.df_read += num("bloom_matched");
                    }
                    ("datafusion", _) => {
                        c.off_absent += 1;
                        c.df_off_read += num("bloom_matched");
                    }
                    _ => c.duck_read += num("scanned"),
                }
            }
        }
    }
    Ok(c)
}

impl ExportBenchReport {
    /// The report as text.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let n = self.keys as f64;
        let _ = writeln!(
            s,
            "filterstore bench export — {} keys (16-byte keys, 100-byte values), {} tables, \
             {} rows per row group\nmachine: {}; store built in {:.1} s",
            self.keys, self.tables, self.rows_per_group, self.machine, self.build_secs
        );
        let (e, sc) = (median(&self.export_secs), median(&self.scan_secs));
        let _ = writeln!(
            s,
            "export: median {:.2} s = {:.2} M keys/s over {} rounds ({}); a plain scan of the \
             same store in the same rounds: median {:.2} s = {:.2} M keys/s ({})",
            e,
            n / e / 1e6,
            self.export_secs.len(),
            secs_list(&self.export_secs),
            sc,
            n / sc / 1e6,
            secs_list(&self.scan_secs),
        );
        if !self.load_secs.is_empty() {
            let (l, i) = (median(&self.load_secs), median(&self.import_secs));
            let ratios: Vec<f64> = self
                .load_secs
                .iter()
                .zip(&self.import_secs)
                .map(|(l, i)| l / i)
                .collect();
            let _ = writeln!(
                s,
                "store import --parquet: median {:.2} s = {:.2} M rows/s; store load (same rows \
                 as TSV): median {:.2} s = {:.2} M rows/s; import/load speed {:.2}x \
                 (per round {})",
                i,
                n / i / 1e6,
                l,
                n / l / 1e6,
                l / i,
                ratios
                    .iter()
                    .map(|r| format!("{r:.2}x"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let _ = writeln!(
            s,
            "filterstore itself (blocked-bloom, its ε): {:.4} data-block reads per absent lookup \
             over the same absent keys\n",
            self.store_reads_per_absent
        );
        let _ = writeln!(
            s,
            "{:>6} {:>5} {:>6} {:>10} {:>10} {:>8} {:>9} | {:>22} {:>8} {:>9} | {:>9}",
            "fpp",
            "files",
            "groups",
            "file MB",
            "Bloom KB",
            "bits/key",
            "model",
            "absent: in min/max",
            "read",
            "read/fpp",
            "present"
        );
        for r in &self.rows {
            let read_frac = r.absent_read as f64 / r.absent_in_range.max(1) as f64;
            let _ = writeln!(
                s,
                "{:>6} {:>5} {:>6} {:>10.1} {:>10.1} {:>8.2} {:>8.4}% | {:>22} {:>8} {:>8.2}x | {:>4}/{:<4}",
                r.fpp,
                r.files,
                r.groups,
                r.file_bytes as f64 / 1e6,
                r.bloom_bytes as f64 / 1e3,
                r.bloom_bytes as f64 * 8.0 / n,
                r.model_fpr * 100.0,
                r.absent_in_range,
                r.absent_read,
                read_frac / r.fpp,
                r.present_found,
                r.present
            );
        }
        let _ = writeln!(
            s,
            "(row groups for {} absent keys inside the key range: `in min/max` = read without \
             Bloom filters, `read` = with them, as the parquet crate reads them back; \
             `read/fpp` = read / in min/max / fpp, target ≤ 1.2; `model` = the filters' \
             expected rate, export::sbbf_fpr)",
            self.rows.first().map_or(0, |r| r.absent)
        );
        if self.rows.iter().any(|r| r.engines.is_some()) {
            let _ = writeln!(
                s,
                "\n{:>6} | {:>8} {:>10} {:>8} {:>9} {:>12} | {:>9} {:>9} | {:>11} {:>8} {:>8} | {:>7}",
                "fpp",
                "absent",
                "DF min/max",
                "DF read",
                "read/fpp",
                "DF off read",
                "DuckDB rd",
                "read/fpp",
                "present",
                "DF exact",
                "DD exact",
                "secs"
            );
            for r in &self.rows {
                let Some(c) = &r.engines else { continue };
                let frac = |x: u64| x as f64 / c.df_in_range.max(1) as f64 / r.fpp;
                let _ = writeln!(
                    s,
                    "{:>6} | {:>8} {:>10} {:>8} {:>8.2}x {:>5} of {:<5} | {:>9} {:>8.2}x | {:>11} {:>8} {:>8} | {:>7.0}",
                    r.fpp,
                    c.absent,
                    c.df_in_range,
                    c.df_read,
                    frac(c.df_read),
                    c.df_off_read,
                    c.off_absent,
                    c.duck_read,
                    frac(c.duck_read),
                    c.present,
                    c.df_exact,
                    c.duck_exact,
                    c.secs
                );
                if c.absent_rows > 0 {
                    let _ = writeln!(s, "  !! {} absent queries returned rows", c.absent_rows);
                }
            }
            let _ = writeln!(
                s,
                "(DataFusion: row_groups_pruned_statistics / _bloom_filter from EXPLAIN ANALYZE; \
                 `DF off read`: groups read with bloom_filter_on_read = false, of the absent \
                 queries sent that way; DuckDB: row_groups_scanned from its EXPLAIN ANALYZE \
                 profile)"
            );
        }
        let _ = writeln!(s, "total {:.1} s", self.total_secs);
        s
    }
}

fn secs_list(xs: &[f64]) -> String {
    xs.iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}
