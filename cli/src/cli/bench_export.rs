//! `bench export`: the Parquet export's cost and what its Bloom filters buy on engines.

use std::path::PathBuf;

use clap::Args;
use filterstore_cli::bench_export::{run, ExportBenchConfig};

use super::{CliError, Exit, Global, Run};

/// Measure the Parquet export: its throughput, the row groups that point queries read with
/// and without the Bloom filters, and `store import` against `store load`.
///
/// Builds a store of -n generated keys (16 bytes, 100-byte values) in --tables tables at
/// ε = 1 %, then: times the export (--rounds, with a plain scan of the store in the same
/// rounds as the baseline); exports at each --fpps rate and counts, for --queries absent keys
/// inside the key range and as many present keys, the row groups whose min/max admit each
/// key and those whose Bloom filter also says "maybe" (read back with the parquet crate),
/// beside filterstore's own data-block reads per absent lookup; with --engines PYTHON, sends
/// --engine-queries of them to DataFusion (filters on, and --engine-off-queries with
/// bloom_filter_on_read = false) and DuckDB (parquet_bloom_probe, and the query itself)
/// through tests/interop/engines.py; then times `store import --parquet` against
/// `store load` of the same rows as TSV (alternating rounds). Progress on stderr, the
/// report on stdout. Needs a few GB of disk for 10M keys.
#[derive(Args, Debug)]
pub struct BenchExport {
    /// Keys in the store
    #[arg(short = 'n', long = "count", default_value_t = 10_000_000)]
    count: u64,
    /// Tables the keys are sealed into (every one spans the key space)
    #[arg(long, default_value_t = 10)]
    tables: usize,
    /// Bloom filter rates to compare, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "0.05,0.01,0.001", value_parser = super::parse_fpr)]
    fpps: Vec<f64>,
    /// Rows per row group
    #[arg(long, default_value_t = filterstore::export::DEFAULT_ROWS_PER_GROUP)]
    rows_per_group: usize,
    /// Absent and present queries counted per rate
    #[arg(long, default_value_t = 10_000)]
    queries: u64,
    /// Python of the interop environment (.venv-interop/bin/python): also ask DataFusion and
    /// DuckDB
    #[arg(long, value_name = "PYTHON")]
    engines: Option<PathBuf>,
    /// Absent and present queries sent to each engine per rate
    #[arg(long, default_value_t = 10_000)]
    engine_queries: u64,
    /// Of the absent ones, those also sent to DataFusion with Bloom filters off
    #[arg(long, default_value_t = 1_000)]
    engine_off_queries: u64,
    /// Timed export rounds
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Rounds of store load against store import (0: skip)
    #[arg(long, default_value_t = 3)]
    import_rounds: usize,
    /// Directory to build in (must not hold a `store`) [default: a temporary directory]
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
}

impl Run for BenchExport {
    fn run(self, _g: &Global) -> Result<Exit, CliError> {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/engines.py");
        let cfg = ExportBenchConfig {
            keys: self.count,
            tables: self.tables,
            fpps: self.fpps,
            rows_per_group: self.rows_per_group,
            queries: self.queries,
            engine_queries: self.engine_queries,
            engine_off_queries: self.engine_off_queries,
            rounds: self.rounds,
            engines: self.engines,
            engines_script: script,
            store_exe: (self.import_rounds > 0)
                .then(std::env::current_exe)
                .transpose()?,
            import_rounds: self.import_rounds,
            dir: self.work_dir,
            ..ExportBenchConfig::default()
        };
        let report = run(&cfg, &mut |line| eprintln!("bench export: {line}"))?;
        super::println(report.to_text())?;
        Ok(Exit::Success)
    }
}
