//! Export to Apache Parquet: one consistent snapshot of a store, written as files whose `key`
//! column carries a split-block Bloom filter (SBBF) in every row group, the filter that
//! Spark, Trino, Impala, DataFusion and DuckDB apply to `key = …` before reading a group.
//! Built with the `parquet` feature (on by default). `docs/scale-out.md` says how engines
//! query the files.
//!
//! What is written (the low-level writer of the `parquet` crate, no Arrow):
//! - one version per key, deletes applied: the rows are exactly what [`Store::scan`] yields,
//!   in key order, from one scan (a snapshot of the memtables and tables at its start);
//! - two columns, `required binary key` and `required binary value`, PLAIN-encoded (no
//!   dictionary: keys are unique), uncompressed unless [`ParquetOptions::codec`] says so;
//!   min/max statistics for `key` per chunk and per page (the column index), none for
//!   `value`;
//! - row groups cut at the key-range boundaries of the store's tables (each table's first
//!   key, and the key after its last), so that a group's min/max and its filter describe
//!   the same keys as a table does, and at [`ParquetOptions::rows_per_group`] rows or
//!   [`ParquetOptions::group_bytes`] bytes, whichever comes first;
//! - a split-block Bloom filter on `key` in each group, the smallest power of two whose
//!   expected false-positive rate for the group's rows is within its target
//!   ([`sbbf_bytes`]): [`ParquetOptions::fpp`], or by default the smallest target ε of the
//!   tables whose key ranges overlap the group (the store's own ε when none does);
//! - files `part-00000.parquet`, `part-00001.parquet`, … of at most
//!   [`ParquetOptions::rows_per_file`] rows (a group never spans two files).
//!
//! A file, as the `parquet` crate lays it out:
//! ```text
//! | "PAR1"                                                         |
//! | row group 0: key chunk (data pages) | value chunk (data pages) |
//! | row group 0's Bloom filter on key (thrift header | bitset)     | <- after its group
//! | row group 1 … and its Bloom filter                             |
//! | column index and offset index of every chunk                   |
//! | FileMetaData (thrift) | its length (u32 LE) | "PAR1"           |
//! ```
//!
//! The output is a function of the store's contents and table key ranges and of the
//! options: the same store gives byte-identical files (tested). Files are written under
//! temporary names, fsynced, and renamed into place together at the end; a failed export
//! leaves no `*.parquet` file behind.

mod sbbf;
mod writer;

use std::fs;
use std::path::{Path, PathBuf};

use parquet::errors::ParquetError;

use crate::error::{Error, Result};
use crate::filter::check_fpr;
use crate::store::Store;

pub use sbbf::{sbbf_bytes, sbbf_fpr};
use writer::Exporter;

/// Name of the key column.
pub const KEY_COLUMN: &str = "key";
/// Name of the value column.
pub const VALUE_COLUMN: &str = "value";
/// Default rows per row group (DuckDB writes 122,880; Spark's 128 MiB groups hold about a
/// million 116-byte rows): small enough that a Bloom filter skips a useful amount of data,
/// large enough that per-group overhead stays small.
pub const DEFAULT_ROWS_PER_GROUP: usize = 131_072;
/// Default cap on the key and value bytes of one row group (groups are held in memory while
/// they are written).
pub const DEFAULT_GROUP_BYTES: usize = 128 << 20;

/// Compression of the data pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Codec {
    /// None (the default): the store's own tables are not compressed either.
    #[default]
    Uncompressed,
    /// Snappy, which every Parquet reader supports.
    Snappy,
}

/// How [`parquet()`] writes: `ParquetOptions::default()`, then the chainable setters
/// (`.rows_per_group(n).bloom(false)`), one per field.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ParquetOptions {
    /// Rows per row group at most ([`DEFAULT_ROWS_PER_GROUP`]).
    pub rows_per_group: usize,
    /// Key and value bytes per row group at most ([`DEFAULT_GROUP_BYTES`]); a group holds at
    /// least one row.
    pub group_bytes: usize,
    /// Rows per file at most; `None`: one file.
    pub rows_per_file: Option<u64>,
    /// False-positive rate of every group's Bloom filter; `None`: the smallest target ε of
    /// the tables whose key ranges overlap the group, or the store's ε when none does.
    pub fpp: Option<f64>,
    /// Write Bloom filters at all (on by default; off gives the files engines read without
    /// one, for comparisons).
    pub bloom: bool,
    /// Compression of the data pages.
    pub codec: Codec,
}

impl Default for ParquetOptions {
    fn default() -> Self {
        ParquetOptions {
            rows_per_group: DEFAULT_ROWS_PER_GROUP,
            group_bytes: DEFAULT_GROUP_BYTES,
            rows_per_file: None,
            fpp: None,
            bloom: true,
            codec: Codec::Uncompressed,
        }
    }
}

impl ParquetOptions {
    /// Sets [`ParquetOptions::rows_per_group`].
    #[must_use]
    pub fn rows_per_group(mut self, rows: usize) -> Self {
        self.rows_per_group = rows;
        self
    }

    /// Sets [`ParquetOptions::group_bytes`].
    #[must_use]
    pub fn group_bytes(mut self, bytes: usize) -> Self {
        self.group_bytes = bytes;
        self
    }

    /// Sets [`ParquetOptions::rows_per_file`] (a count, `Some(count)` or `None`).
    #[must_use]
    pub fn rows_per_file(mut self, rows: impl Into<Option<u64>>) -> Self {
        self.rows_per_file = rows.into();
        self
    }

    /// Sets [`ParquetOptions::fpp`] (a rate, `Some(rate)` or `None`).
    #[must_use]
    pub fn fpp(mut self, fpp: impl Into<Option<f64>>) -> Self {
        self.fpp = fpp.into();
        self
    }

    /// Sets [`ParquetOptions::bloom`].
    #[must_use]
    pub fn bloom(mut self, bloom: bool) -> Self {
        self.bloom = bloom;
        self
    }

    /// Sets [`ParquetOptions::codec`].
    #[must_use]
    pub fn codec(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self
    }
}

/// How far an export has come (given to the progress callback after every row group).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Progress {
    /// Rows written.
    pub rows: u64,
    /// Key and value bytes written.
    pub bytes: u64,
}

/// What an export wrote.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ExportSummary {
    /// The files, in key order.
    pub files: Vec<FileSummary>,
    /// Rows (keys) written.
    pub rows: u64,
    /// Key and value bytes written.
    pub data_bytes: u64,
}

impl ExportSummary {
    /// Bytes of all files.
    pub fn file_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }
    /// Bytes of all Bloom filters (headers included).
    pub fn bloom_bytes(&self) -> u64 {
        self.groups().map(|g| g.bloom_bytes).sum()
    }
    /// Every row group of every file, in key order.
    pub fn groups(&self) -> impl Iterator<Item = &GroupSummary> {
        self.files.iter().flat_map(|f| f.groups.iter())
    }
}

/// One written file.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FileSummary {
    /// Where it is.
    pub path: PathBuf,
    /// Rows in it.
    pub rows: u64,
    /// Its size.
    pub bytes: u64,
    /// Its row groups, in order.
    pub groups: Vec<GroupSummary>,
}

/// One written row group.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct GroupSummary {
    /// Rows in it.
    pub rows: u64,
    /// Its first key.
    pub min_key: Vec<u8>,
    /// Its last key.
    pub max_key: Vec<u8>,
    /// The target false-positive rate of its Bloom filter (`None`: no filter).
    pub fpp: Option<f64>,
    /// The expected false-positive rate of its Bloom filter as written ([`sbbf_fpr`]).
    pub bloom_fpr: Option<f64>,
    /// Bytes of its Bloom filter, header included (0: none).
    pub bloom_bytes: u64,
}

/// The file name of part `i`.
pub fn part_name(i: usize) -> String {
    format!("part-{i:05}.parquet")
}

/// Writes a snapshot of `store` into `dir` (created when missing; it must hold no `.parquet`
/// file yet) as described in the [module documentation](self). `progress` is called after
/// every row group.
///
/// Errors: [`Error::InvalidArgument`] for bad options or a directory that already holds
/// Parquet files, [`Error::Io`] when `dir` cannot be created or written, the store's own
/// errors while scanning (a damaged table is [`Error::Corruption`]).
pub fn parquet(
    store: &Store,
    dir: &Path,
    opts: &ParquetOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<ExportSummary> {
    if opts.rows_per_group == 0 || opts.group_bytes == 0 || opts.rows_per_file == Some(0) {
        return Err(Error::InvalidArgument(
            "rows per group, bytes per group and rows per file must be positive".into(),
        ));
    }
    if let Some(f) = opts.fpp {
        check_fpr(f)?;
    }
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let existing = fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok())
        .any(|e| e.path().extension().is_some_and(|x| x == "parquet"));
    if existing {
        return Err(Error::InvalidArgument(format!(
            "{} already holds .parquet files; export into a new or empty directory",
            dir.display()
        )));
    }
    // Stats first, then the scan: the ranges only place the cuts, so a write in between
    // changes where a group ends, never what is exported.
    let stats = store.stats();
    let mut ex = Exporter::new(dir, opts, &stats, store.filter().1);
    let result = ex.run(store, progress);
    if result.is_err() {
        ex.discard();
    }
    result.map(|()| ex.into_summary())
}

/// Maps the parquet crate's errors: I/O stays I/O (with the file), the rest names the file.
pub(crate) fn pq_err(file: &Path) -> impl Fn(ParquetError) -> Error + '_ {
    move |e| match e {
        ParquetError::External(inner) => match inner.downcast::<std::io::Error>() {
            Ok(io) => Error::io(file, *io),
            Err(other) => Error::Parquet {
                file: file.to_path_buf(),
                reason: other.to_string(),
            },
        },
        ParquetError::EOF(reason) => Error::Parquet {
            file: file.to_path_buf(),
            reason: format!("unexpected end of file: {reason}"),
        },
        other => Error::Parquet {
            file: file.to_path_buf(),
            reason: other.to_string(),
        },
    }
}
