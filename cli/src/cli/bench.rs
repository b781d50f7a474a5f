//! `bench`: which filter should front the tables, and what does it buy? The main job.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use filterstore::FilterKind;
use filterstore_cli::bench::{run, BenchConfig};

use super::bench_engine::BenchEngine;
#[cfg(feature = "parquet")]
use super::bench_export::BenchExport;
use super::bench_hyph::BenchHyphenation;
use super::bench_range::BenchRange;
use super::{CliError, Exit, Global, Run};

/// The filter benchmark's options (see [`Bench`]).
#[derive(Args, Debug)]
pub struct FilterBench {
    /// Number of generated keys
    #[arg(short = 'n', long = "count", default_value_t = 1_000_000)]
    count: u64,
    /// Use real keys from FILE (one per line) instead of generated ones; every 10th distinct
    /// key is held out as an absent key
    #[arg(long = "keys", value_name = "FILE")]
    keys: Option<PathBuf>,
    /// Tables the keys are sealed into
    #[arg(long, default_value_t = 10)]
    tables: usize,
    /// Absent-key lookups and present-key lookups per configuration
    #[arg(long, default_value_t = 1_000_000)]
    lookups: u64,
    /// Lookups for the no-filter baseline (its reads per lookup are fixed by the key ranges)
    #[arg(long, default_value_t = 100_000)]
    baseline_lookups: u64,
    /// Filter kinds to compare, comma-separated (none is always measured as the baseline)
    #[arg(long, value_delimiter = ',', default_value = "bloom,blocked-bloom,cuckoo,binary-fuse", value_parser = super::parse_filter)]
    kinds: Vec<FilterKind>,
    /// Target false-positive rates, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "0.2,0.05,0.01,0.001", value_parser = super::parse_fpr)]
    fprs: Vec<f64>,
    /// Also evict the table files from the page cache (posix_fadvise DONTNEED) before every
    /// 500 lookups, so data-block reads are device reads, and time absent lookups cold
    #[arg(long)]
    cold: bool,
    /// Absent lookups per configuration in the --cold phase
    #[arg(long, default_value_t = 20_000)]
    cold_lookups: u64,
    /// Skip the engine figures (load rate, reopen, seal with 1 and 2 threads)
    #[arg(long)]
    no_engine: bool,
    /// Read data blocks in place from mapped table files instead of with pread (the library's
    /// Options::mmap_reads): faster warm lookups; not with --cold
    #[arg(long, conflicts_with = "cold")]
    mmap_reads: bool,
    /// Seed of the generated keys
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Directory in which to build the benchmark store (must not exist) [default: a temporary
    /// directory]
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Also write the results as CSV
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Also write the results as JSON
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write an SVG figure: FPR vs bits per key with the theoretical curves, and reads
    /// per absent lookup per kind and ε
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

impl Run for FilterBench {
    fn run(self, _g: &Global) -> Result<Exit, CliError> {
        let cfg = BenchConfig {
            keys: self.count,
            tables: self.tables,
            lookups: self.lookups,
            baseline_lookups: self.baseline_lookups,
            kinds: self.kinds,
            fprs: self.fprs,
            cold: self.cold,
            cold_lookups: self.cold_lookups,
            keys_file: self.keys,
            dir: self.work_dir,
            seed: self.seed,
            engine: !self.no_engine,
            mmap_reads: self.mmap_reads,
            ..BenchConfig::default()
        };
        let report = run(&cfg, &mut |line| eprintln!("bench: {line}"))?;
        super::println(report.to_text())?;
        let write = |path: &PathBuf, text: String| {
            std::fs::write(path, text).map_err(|e| {
                CliError::from(filterstore::Error::io(path, e)).context("cannot write output")
            })
        };
        if let Some(p) = &self.csv {
            write(p, report.to_csv())?;
        }
        if let Some(p) = &self.json {
            write(p, report.to_json())?;
        }
        if let Some(p) = &self.plot {
            write(p, report.to_svg())?;
        }
        Ok(Exit::Success)
    }
}

/// Compare filter kinds on one store: data-block reads avoided, time and bytes, and the
/// observed false-positive rate against theory.
///
/// With no arguments: 1,000,000 generated 16-byte keys with 100-byte values sealed into 10
/// tables (no compaction); for `none` and for each of bloom, blocked-bloom, cuckoo and
/// binary-fuse at
/// ε = 20%, 5%, 1%, 0.1%, the filters of the same tables are swapped with `refilter` (data is
/// never rewritten), then 1,000,000 absent-key and 1,000,000 present-key lookups are timed
/// (100,000 each for the no-filter baseline). Absent keys: 90% inside every table's key range,
/// 10% outside all of them. Every observed FPR is checked against its kind's theoretical rate
/// (band: 4 binomial standard deviations + 5% model tolerance) and flagged when outside.
/// Then what the range filters save scans, beside what the point filters save gets: --baseline-lookups
/// empty scans at the same absent keys ([a, a] at each, and [a, a+32) at the 16-byte ones, a
/// read as a number), with no range filter and with 16 bits per key: data-block reads per
/// scan, the share avoided, the observed false-positive rate against Grafite's bound, ns per
/// scan (the `scan_rows` of --json).
/// Also measures the engine: load rate, reopen time, sealing a table with 1 and 2 threads
/// (medians of 3 alternating rounds).
///
/// The store is built in a fresh temporary directory (or --work-dir) and removed afterwards.
/// Progress goes to stderr, the table to stdout.
///
/// `store bench engine` measures the engine at scale instead, `store bench range` the range
/// filters on empty and non-empty scans, `store bench hyphenation` runs the hyphenation
/// experiment, and `store bench export` the Parquet export benchmark (see their --help).
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Bench {
    #[command(subcommand)]
    what: Option<BenchWhat>,
    #[command(flatten)]
    filters: FilterBench,
}

/// Other benchmarks.
#[derive(Subcommand, Debug)]
enum BenchWhat {
    Engine(Box<BenchEngine>),
    Hyphenation(BenchHyphenation),
    Range(BenchRange),
    #[cfg(feature = "parquet")]
    Export(BenchExport),
}

impl Run for Bench {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        match self.what {
            Some(BenchWhat::Engine(e)) => e.run(g),
            Some(BenchWhat::Hyphenation(h)) => h.run(g),
            Some(BenchWhat::Range(r)) => r.run(g),
            #[cfg(feature = "parquet")]
            Some(BenchWhat::Export(e)) => e.run(g),
            None => self.filters.run(g),
        }
    }
}
