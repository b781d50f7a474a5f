//! `export --parquet DIR`: a snapshot of the store as Parquet files with Bloom filters.

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use filterstore::export::{self, Codec, ParquetOptions, DEFAULT_ROWS_PER_GROUP};
use indicatif::{ProgressBar, ProgressStyle};

use super::{println, Access, CliError, Exit, Global, Run};

/// Export a snapshot of the store (one version per key, deletes applied) to Parquet files
/// that Spark, Trino, Impala, DataFusion and DuckDB read, with a split-block Bloom filter on
/// the key column of every row group.
///
/// Columns: `key` and `value`, both binary. Files: DIR/part-00000.parquet, … in key order.
/// Row groups end at the key-range boundaries of the store's tables and after
/// --rows-per-group rows. Each group's Bloom filter has the false-positive rate --fpp, by
/// default the target ε of the tables whose key ranges overlap the group. DIR is created
/// when missing and must not hold .parquet files yet. The same store always gives the same
/// bytes. A progress bar is drawn on stderr when it is a terminal. See docs/scale-out.md for
/// querying the files from other engines.
#[derive(Args, Debug)]
pub struct Export {
    /// Directory to write the Parquet files into
    #[arg(long, value_name = "DIR", required = true)]
    pub parquet: PathBuf,
    /// False-positive rate of every row group's Bloom filter, strictly between 0 and 1
    /// [default: the store's ε for the group's key range]
    #[arg(long, value_name = "P", value_parser = super::parse_fpr)]
    pub fpp: Option<f64>,
    /// Write no Bloom filters (files for comparisons)
    #[arg(long, conflicts_with = "fpp")]
    pub no_bloom: bool,
    /// Rows per row group at most
    #[arg(long, value_name = "N", default_value_t = DEFAULT_ROWS_PER_GROUP, value_parser = positive)]
    pub rows_per_group: usize,
    /// Rows per file at most [default: one file]
    #[arg(long, value_name = "N", value_parser = positive)]
    pub rows_per_file: Option<usize>,
    /// Compression of the data pages: none or snappy
    #[arg(long, value_name = "CODEC", default_value = "none", value_parser = parse_codec)]
    pub compression: Codec,
}

fn positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("must be a whole number above 0".into()),
    }
}

fn parse_codec(s: &str) -> Result<Codec, String> {
    match s {
        "none" | "uncompressed" => Ok(Codec::Uncompressed),
        "snappy" => Ok(Codec::Snappy),
        _ => Err("valid codecs: none, snappy".into()),
    }
}

impl Run for Export {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let store = g.open(Access::Existing)?;
        let opts = ParquetOptions::default()
            .rows_per_group(self.rows_per_group)
            .rows_per_file(self.rows_per_file.map(|n| n as u64))
            .fpp(self.fpp)
            .bloom(!self.no_bloom)
            .codec(self.compression);
        let stats = store.stats();
        let bar = progress_bar(stats.table_keys() + stats.memtable_entries);
        let start = Instant::now();
        let summary = export::parquet(&store, &self.parquet, &opts, &mut |p| {
            bar.set_position(p.rows)
        })
        .map_err(|e| {
            CliError::from(e).context(format_args!("cannot export to {}", self.parquet.display()))
        });
        bar.finish_and_clear();
        let summary = summary?;
        let secs = start.elapsed().as_secs_f64();
        println(format_args!(
            "exported {} keys to {}: {} files, {} row groups, {} bytes ({} in Bloom filters), {:.2} s",
            summary.rows,
            self.parquet.display(),
            summary.files.len(),
            summary.groups().count(),
            summary.file_bytes(),
            summary.bloom_bytes(),
            secs
        ))?;
        Ok(Exit::Success)
    }
}

/// A bar over the estimated rows (table entries, tombstones and overwritten versions
/// included, so the export usually ends short of it) on a terminal; hidden otherwise.
fn progress_bar(estimate: u64) -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(estimate.max(1)).with_style(
        ProgressStyle::with_template("{bar:40} {human_pos}/~{human_len} keys ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
