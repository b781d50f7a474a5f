//! `import --parquet FILE...`: load key and value columns of Parquet files.

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use filterstore::import::{Import as Files, ImportOptions};
use indicatif::{ProgressBar, ProgressStyle};

use super::{println, Access, CliError, Exit, Global, Run};

/// Load the key and value columns of Parquet files written by anyone (Spark, DuckDB,
/// pandas, `store export`) into the store, which is created when missing.
///
/// Both columns must hold binary data (BYTE_ARRAY, strings included, or
/// FIXED_LEN_BYTE_ARRAY), one value per row, no nulls. A directory stands for the .parquet
/// files in it, in name order. Every file's footer and columns are checked before anything
/// is written; a file that is not Parquet, is truncated or damaged, or lacks either column
/// exits 2. Files are loaded in the order given; a later row overwrites an earlier one with
/// the same key. Everything loaded is fsynced before exit 0. A progress bar is drawn on
/// stderr when it is a terminal.
#[derive(Args, Debug)]
pub struct Import {
    /// Parquet files (or directories of them) to load
    #[arg(long = "parquet", value_name = "FILE", required = true, num_args = 1..)]
    pub parquet: Vec<PathBuf>,
    /// Name of the key column
    #[arg(long, value_name = "NAME", default_value = "key")]
    pub key_column: String,
    /// Name of the value column
    #[arg(long, value_name = "NAME", default_value = "value")]
    pub value_column: String,
}

impl Run for Import {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let mut files = Vec::new();
        for p in &self.parquet {
            if p.is_dir() {
                let mut inside: Vec<PathBuf> = std::fs::read_dir(p)
                    .map_err(|e| CliError::from(filterstore::Error::io(p, e)))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|f| f.extension().is_some_and(|x| x == "parquet"))
                    .collect();
                if inside.is_empty() {
                    return Err(CliError::usage(format_args!(
                        "{} holds no .parquet file",
                        p.display()
                    )));
                }
                inside.sort();
                files.extend(inside);
            } else {
                files.push(p.clone());
            }
        }
        let opts = ImportOptions::default()
            .key_column(self.key_column)
            .value_column(self.value_column);
        // Check every file before the store is opened (and perhaps created).
        let input =
            Files::open(&files, &opts).map_err(|e| CliError::from(e).context("cannot import"))?;
        let store = g.open(Access::BulkWrite)?;
        let bar = progress_bar(input.total_rows());
        let loaded = input.load(&store, &mut |p| bar.set_position(p.rows));
        // Whatever happened, the rows written so far are made durable.
        let synced = store.sync();
        bar.finish_and_clear();
        let summary = loaded.map_err(|e| {
            CliError::from(e).context("import stopped (the rows before the error were loaded)")
        })?;
        synced?;
        println(format_args!(
            "imported {} rows from {} files",
            summary.rows, summary.files
        ))?;
        Ok(Exit::Success)
    }
}

fn progress_bar(total: u64) -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total.max(1)).with_style(
        ProgressStyle::with_template("{bar:40} {human_pos}/{human_len} rows (eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
