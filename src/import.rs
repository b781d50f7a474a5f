//! Import from Apache Parquet: load a key column and a value column of Parquet files
//! written by anyone (Spark, DuckDB, pandas, [`crate::export`]) into a store, so that a
//! data lake's extract becomes a filterstore in one command. Built with the `parquet`
//! feature (on by default).
//!
//! Each file's footer is read first: the two columns must exist (by name, `key` and
//! `value` unless told otherwise), hold binary data (`BYTE_ARRAY`, with or without a string
//! annotation, or `FIXED_LEN_BYTE_ARRAY`) and not be repeated. Rows are then read group by
//! group, both columns in step, and written in [`WriteBatch`]es; files are taken in the
//! order given and later rows overwrite earlier rows with the same key, as `store load`
//! does. A null key or value stops the import. Any problem with a file — not Parquet,
//! truncated, a damaged page, a missing or non-binary column — is [`Error::Parquet`]
//! naming the file, not [`Error::Corruption`], which is about the store's own files.
//! Rows written before an error stay written; [`Store::sync`] is left to the caller.
//!
//! Page CRCs are checked when the writer stored them (parquet-mr does by default; the
//! `parquet` crate's writer does not), so a damaged page without one can import wrong
//! bytes, as it would into any engine. A panic of the decoder on damaged bytes is caught
//! and reported as [`Error::Parquet`] (see `contained`).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};

use parquet::basic::{Compression, Type as PhysicalType};
use parquet::column::reader::{get_typed_column_reader, ColumnReaderImpl};
use parquet::data_type::{ByteArrayType, FixedLenByteArrayType};
use parquet::file::reader::{FileReader, RowGroupReader};
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::schema::types::ColumnDescriptor;

use crate::codec::{MAX_KEY_LEN, MAX_VALUE_LEN};
use crate::error::{Error, Result};
use crate::export::{pq_err, KEY_COLUMN, VALUE_COLUMN};
use crate::store::Store;
use crate::wal::WriteBatch;

/// Rows read from each column at a time.
const READ_ROWS: usize = 4096;
/// Key and value bytes per write batch at most (batches of huge values stay small).
const BATCH_BYTES: usize = 16 << 20;

/// How [`parquet()`] reads: `ImportOptions::default()`, then the chainable setters.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ImportOptions {
    /// Name (dotted path for a nested column) of the key column.
    pub key_column: String,
    /// Name of the value column.
    pub value_column: String,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            key_column: KEY_COLUMN.into(),
            value_column: VALUE_COLUMN.into(),
        }
    }
}

impl ImportOptions {
    /// Sets [`ImportOptions::key_column`].
    #[must_use]
    pub fn key_column(mut self, name: impl Into<String>) -> Self {
        self.key_column = name.into();
        self
    }

    /// Sets [`ImportOptions::value_column`].
    #[must_use]
    pub fn value_column(mut self, name: impl Into<String>) -> Self {
        self.value_column = name.into();
        self
    }
}

/// How far an import has come (given to the progress callback after every write batch).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Progress {
    /// Rows written so far.
    pub rows: u64,
    /// Rows in all files (from their footers).
    pub total_rows: u64,
}

/// What an import loaded.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ImportSummary {
    /// Files read.
    pub files: usize,
    /// Rows written (puts; repeated keys count every time).
    pub rows: u64,
    /// Key and value bytes written.
    pub bytes: u64,
}

/// An opened file with its two columns checked.
struct Source {
    path: PathBuf,
    reader: SerializedFileReader<File>,
    key: Column,
    value: Column,
}

#[derive(Clone)]
struct Column {
    index: usize,
    name: String,
    fixed: bool,
    max_def: i16,
}

/// Parquet files opened for import, their footers and columns checked.
pub struct Import {
    sources: Vec<Source>,
}

impl Import {
    /// Opens every file and checks its two columns, before anything is written: a bad file
    /// given late does not leave a partial import of the earlier ones.
    pub fn open(files: &[PathBuf], opts: &ImportOptions) -> Result<Import> {
        let sources = files
            .iter()
            .map(|p| open(p, opts))
            .collect::<Result<Vec<_>>>()?;
        Ok(Import { sources })
    }

    /// Rows in all files, from their footers.
    pub fn total_rows(&self) -> u64 {
        self.sources
            .iter()
            .map(|s| u64::try_from(s.reader.metadata().file_metadata().num_rows()).unwrap_or(0))
            .sum()
    }

    /// Writes every row into `store`; `progress` is called after every write batch.
    ///
    /// A second thread reads and decodes the files and builds the write batches while
    /// this one writes them (a channel of 4 batches between them), so decoding overlaps
    /// the store's writes. Every batch read before an error is written before the error
    /// is returned.
    pub fn load(&self, store: &Store, progress: &mut dyn FnMut(Progress)) -> Result<ImportSummary> {
        let total_rows = self.total_rows();
        std::thread::scope(|scope| {
            let (tx, rx) = sync_channel::<Chunk>(4);
            let reader = scope.spawn(move || -> Result<()> {
                let mut loader = Loader {
                    tx,
                    batch: WriteBatch::new(),
                    batch_bytes: 0,
                    pending: 0,
                };
                for s in &self.sources {
                    load(s, &mut loader)?;
                }
                loader.flush()
            });
            let mut summary = ImportSummary::default();
            let mut failed = None;
            while let Ok(chunk) = rx.recv() {
                if let Err(e) = store.write(chunk.batch) {
                    failed = Some(e);
                    break;
                }
                summary.rows += chunk.rows;
                summary.bytes += chunk.bytes;
                progress(Progress {
                    rows: summary.rows,
                    total_rows,
                });
            }
            drop(rx);
            let read = reader
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            if let Some(e) = failed {
                return Err(e);
            }
            read?;
            summary.files = self.sources.len();
            Ok(summary)
        })
    }
}

/// Loads `files` into `store` (see the [module documentation](self)):
/// [`Import::open`], then [`Import::load`].
pub fn parquet(
    store: &Store,
    files: &[PathBuf],
    opts: &ImportOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<ImportSummary> {
    Import::open(files, opts)?.load(store, progress)
}

/// Runs `f`, a call into the parquet crate's reader, turning a panic of its decoder into
/// [`Error::Parquet`]: its
/// version 60.1 indexes out of bounds on some damaged pages (bit flips found by
/// `tests/parquet.rs`), and a bad input file must be an error, not the end of the process.
/// The reader that panicked is not used again; the store is untouched by it (rows reach the
/// store only in whole write batches).
fn contained<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("no message");
        Err(bad(
            path,
            format!("damaged: the Parquet decoder failed on it ({what})"),
        ))
    })
}

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::Parquet {
        file: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Opens `path` and finds its two columns.
fn open(path: &Path, opts: &ImportOptions) -> Result<Source> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    if file.metadata().map_err(|e| Error::io(path, e))?.is_dir() {
        return Err(bad(path, "is a directory"));
    }
    let reader = contained(path, || {
        SerializedFileReader::new(file).map_err(pq_err(path))
    })
    .map_err(|e| match e {
        Error::Parquet { file, reason } => Error::Parquet {
            file,
            reason: format!("not a readable Parquet file: {reason}"),
        },
        other => other,
    })?;
    let schema = reader.metadata().file_metadata().schema_descr_ptr();
    let find = |name: &str| -> Result<Column> {
        let columns = schema.columns();
        let Some(index) = columns.iter().position(|c| c.path().string() == name) else {
            let names: Vec<String> = columns.iter().map(|c| c.path().string()).collect();
            return Err(bad(
                path,
                format!("no column `{name}` (its columns: {})", names.join(", ")),
            ));
        };
        let c: &ColumnDescriptor = &columns[index];
        let fixed = match c.physical_type() {
            PhysicalType::BYTE_ARRAY => false,
            PhysicalType::FIXED_LEN_BYTE_ARRAY => true,
            other => {
                return Err(bad(
                    path,
                    format!("column `{name}` holds {other}, not binary data (BYTE_ARRAY)"),
                ))
            }
        };
        if c.max_rep_level() > 0 {
            return Err(bad(
                path,
                format!("column `{name}` is repeated (a list), not one value per row"),
            ));
        }
        Ok(Column {
            index,
            name: name.to_string(),
            fixed,
            max_def: c.max_def_level(),
        })
    };
    let key = find(&opts.key_column)?;
    let value = find(&opts.value_column)?;
    // The parquet crate panics on a chunk with a negative offset or size: check every
    // chunk that will be read against the file's length first.
    let file_len = reader.metadata().row_groups().first().map_or(Ok(0), |_| {
        std::fs::metadata(path)
            .map(|m| m.len())
            .map_err(|e| Error::io(path, e))
    })?;
    for (g, rg) in reader.metadata().row_groups().iter().enumerate() {
        for c in [&key, &value] {
            let Some(chunk) = rg.columns().get(c.index) else {
                return Err(bad(
                    path,
                    format!("row group {g} lacks column `{}`", c.name),
                ));
            };
            let codec = chunk.compression();
            if !matches!(
                codec,
                Compression::UNCOMPRESSED
                    | Compression::SNAPPY
                    | Compression::GZIP(_)
                    | Compression::LZ4
                    | Compression::LZ4_RAW
            ) {
                return Err(bad(
                    path,
                    format!(
                        "row group {g}: column `{}` is compressed with {}, which this build \
                         does not read (it reads uncompressed, SNAPPY, GZIP, LZ4 and LZ4_RAW pages)",
                        c.name,
                        // The codec's name without its level: "ZSTD", not "ZSTD(ZstdLevel(1))".
                        codec.to_string().split('(').next().unwrap_or_default()
                    ),
                ));
            }
            let start = chunk
                .dictionary_page_offset()
                .unwrap_or_else(|| chunk.data_page_offset());
            let len = chunk.compressed_size();
            let fits = u64::try_from(start)
                .ok()
                .zip(u64::try_from(len).ok())
                .and_then(|(s, l)| s.checked_add(l))
                .is_some_and(|end| end <= file_len);
            if !fits {
                return Err(bad(
                    path,
                    format!(
                        "row group {g}: column `{}` claims bytes {start}..+{len}, outside the \
                         file's {file_len} bytes",
                        c.name
                    ),
                ));
            }
        }
    }
    if key.index == value.index {
        return Err(Error::InvalidArgument(
            "the key and value columns must differ".into(),
        ));
    }
    Ok(Source {
        path: path.to_path_buf(),
        reader,
        key,
        value,
    })
}

/// One column of one row group, read a batch at a time.
enum ColumnRead {
    Var(
        ColumnReaderImpl<ByteArrayType>,
        Vec<parquet::data_type::ByteArray>,
    ),
    Fixed(
        ColumnReaderImpl<FixedLenByteArrayType>,
        Vec<parquet::data_type::FixedLenByteArray>,
    ),
}

impl ColumnRead {
    fn new(rg: &dyn RowGroupReader, c: &Column, path: &Path) -> Result<ColumnRead> {
        let r = contained(path, || rg.get_column_reader(c.index).map_err(pq_err(path)))?;
        Ok(if c.fixed {
            ColumnRead::Fixed(get_typed_column_reader(r), Vec::new())
        } else {
            ColumnRead::Var(get_typed_column_reader(r), Vec::new())
        })
    }

    /// Reads up to `n` rows; returns (rows, non-null values).
    fn read(&mut self, n: usize, defs: &mut Vec<i16>, path: &Path) -> Result<(usize, usize)> {
        defs.clear();
        let (rows, values, _) = contained(path, || {
            match self {
                ColumnRead::Var(r, buf) => {
                    buf.clear();
                    r.read_records(n, Some(defs), None, buf)
                }
                ColumnRead::Fixed(r, buf) => {
                    buf.clear();
                    r.read_records(n, Some(defs), None, buf)
                }
            }
            .map_err(pq_err(path))
        })?;
        Ok((rows, values))
    }

    fn get(&self, i: usize) -> &[u8] {
        match self {
            ColumnRead::Var(_, buf) => buf[i].data(),
            ColumnRead::Fixed(_, buf) => buf[i].data(),
        }
    }
}

/// Rows on their way from the reader thread to the store.
struct Chunk {
    batch: WriteBatch,
    rows: u64,
    bytes: u64,
}

/// The reader thread's side: collects rows into write batches and hands them over.
struct Loader {
    tx: SyncSender<Chunk>,
    batch: WriteBatch,
    batch_bytes: usize,
    pending: u64,
}

impl Loader {
    fn put(&mut self, k: &[u8], v: &[u8]) -> Result<()> {
        self.batch.put(k, v);
        self.batch_bytes += k.len() + v.len();
        self.pending += 1;
        if self.batch.len() >= READ_ROWS || self.batch_bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let chunk = Chunk {
            batch: std::mem::take(&mut self.batch),
            rows: self.pending,
            bytes: self.batch_bytes as u64,
        };
        self.pending = 0;
        self.batch_bytes = 0;
        // The writer stops receiving only after a failed write, which it reports.
        self.tx
            .send(chunk)
            .map_err(|_| Error::Internal("the store's writer thread stopped taking rows".into()))
    }
}

/// Loads every row of `s`.
fn load(s: &Source, loader: &mut Loader) -> Result<()> {
    let path = s.path.as_path();
    let mut row = 0u64; // rows of this file before the current batch
    let (mut kdefs, mut vdefs) = (Vec::new(), Vec::new());
    for g in 0..s.reader.num_row_groups() {
        let rg = contained(path, || s.reader.get_row_group(g).map_err(pq_err(path)))?;
        let expected = u64::try_from(rg.metadata().num_rows()).unwrap_or(0);
        let mut keys = ColumnRead::new(rg.as_ref(), &s.key, path)?;
        let mut values = ColumnRead::new(rg.as_ref(), &s.value, path)?;
        let mut done = 0u64;
        loop {
            let (kn, kv) = keys.read(READ_ROWS, &mut kdefs, path)?;
            let (vn, vv) = values.read(READ_ROWS, &mut vdefs, path)?;
            if kn != vn {
                return Err(bad(
                    path,
                    format!(
                        "row group {g}: columns `{}` and `{}` end at different rows \
                         ({} and {})",
                        s.key.name,
                        s.value.name,
                        done + kn as u64,
                        done + vn as u64
                    ),
                ));
            }
            if kn == 0 {
                break;
            }
            // The first null of either column ends the import after the rows before it
            // (values come back without their nulls, so only those rows line up).
            let mut null: Option<(usize, &str)> = None;
            for (c, nv, defs) in [(&s.key, kv, &kdefs), (&s.value, vv, &vdefs)] {
                if nv < kn {
                    let at = defs.iter().position(|&d| d < c.max_def).unwrap_or(0);
                    if null.is_none_or(|(n, _)| at < n) {
                        null = Some((at, &c.name));
                    }
                }
            }
            for i in 0..null.map_or(kn, |(at, _)| at) {
                let (k, v) = (keys.get(i), values.get(i));
                for (what, len, max) in [
                    ("key", k.len(), MAX_KEY_LEN),
                    ("value", v.len(), MAX_VALUE_LEN),
                ] {
                    if len > max {
                        return Err(bad(
                            path,
                            format!(
                                "row {}: {what} of {len} bytes exceeds the store's limit of \
                                 {max} bytes",
                                row + done + i as u64
                            ),
                        ));
                    }
                }
                loader.put(k, v)?;
            }
            if let Some((at, name)) = null {
                loader.flush()?;
                return Err(bad(
                    path,
                    format!("row {}: `{name}` is null", row + done + at as u64),
                ));
            }
            done += kn as u64;
        }
        if done != expected {
            return Err(bad(
                path,
                format!("row group {g}: {done} rows read, its metadata says {expected}"),
            ));
        }
        row += done;
    }
    Ok(())
}
