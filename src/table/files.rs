//! A table's files: the table (`NNNNNN.sst`), its filter (`.filter`), its range filter
//! (`.range`) and, under the global filter, its key hashes (`.khash`), written by one
//! builder and removed in one place.
//!
//! **Writing.** [`TableWriter`] makes the three files of a new table, whether its entries come
//! whole (a sealed memtable: [`TableWriter::write_whole`], table and filters in parallel) or
//! streamed part by part (a compaction's output: [`TableWriter::create`], `add_part`,
//! `finish`). Every file is fsynced before its [`NewTable`] is returned; the directory entries
//! are made durable by the table-set layer before a manifest names them
//! (`version::VersionSet::log_and_apply`). [`new_filter_file`] and [`new_range_file`] write a
//! filter for an existing table (refilter).
//!
//! **Removing.** Each file is held through a [`TableFile`], shared (`Arc`) by every table
//! handle that names the file (and so by every version holding such a handle). Its `Drop`
//! is the only place a table's files are removed while a store is open, and it removes the
//! file only when the file is *obsolete*: written but never published (a failed seal,
//! compaction or refilter), or published and later left out of a durable manifest
//! ([`TableFile::retire`]). So a file goes when the last holder of an obsolete file lets it
//! go, and never while a version (a scan's, a reader's) names it. What a crash leaves behind
//! (an obsolete file not yet dropped, an output never published) no manifest names: the next
//! open removes it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::writer::{write_table, Part, TableBuilder};
use super::{write_filter_file, write_range_file, Compression, SortedEntries};
use crate::error::Result;
use crate::filename::{filter_path, key_hashes_path, range_path, table_path, tombstones_path};
use crate::filter::range::{BuildClock, RangeFilterBuilder};
use crate::filter::FilterKind;
use crate::io::Fs;
use crate::manifest::{RangeRecord, TableRecord};

/// One file of a table while the store may need it (see the module documentation).
#[derive(Debug)]
pub(crate) struct TableFile {
    fs: Arc<dyn Fs>,
    path: PathBuf,
    number: u64,
    /// The file is removed when this is dropped.
    obsolete: AtomicBool,
}

impl TableFile {
    /// File `number` at `path`, about to be written: removed when dropped unless
    /// [`keep`](Self::keep) is called first.
    pub(crate) fn created(fs: &Arc<dyn Fs>, path: PathBuf, number: u64) -> Arc<TableFile> {
        Arc::new(TableFile {
            fs: fs.clone(),
            path,
            number,
            obsolete: AtomicBool::new(true),
        })
    }

    /// File `number` at `path`, which a durable manifest names: kept until
    /// [`retire`](Self::retire).
    pub(crate) fn named(fs: &Arc<dyn Fs>, path: PathBuf, number: u64) -> Arc<TableFile> {
        let f = TableFile::created(fs, path, number);
        f.keep();
        f
    }

    /// The file's number.
    pub(crate) fn number(&self) -> u64 {
        self.number
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file may be named by a manifest from now on: it stays when dropped.
    pub(crate) fn keep(&self) {
        self.obsolete.store(false, Ordering::SeqCst);
    }

    /// A durable manifest no longer names the file: it is removed when its last holder
    /// drops it.
    pub(crate) fn retire(&self) {
        self.obsolete.store(true, Ordering::SeqCst);
    }
}

impl Drop for TableFile {
    fn drop(&mut self) {
        if *self.obsolete.get_mut() {
            // Best effort: a file left behind is an orphan the next open removes.
            let _ = self.fs.remove(&self.path);
        }
    }
}

/// The files of one table, as a table handle holds them.
#[derive(Clone, Debug)]
pub(crate) struct TableFiles {
    pub table: Arc<TableFile>,
    pub filter: Option<Arc<TableFile>>,
    pub range: Option<Arc<TableFile>>,
    /// The range tombstones file (`NNNNNN.rdel`), when the table has range tombstones.
    pub tombstones: Option<Arc<TableFile>>,
    /// The key hashes file (`NNNNNN.khash`), when the table has one (`key_hashes`).
    pub hashes: Option<Arc<TableFile>>,
}

impl TableFiles {
    /// The files `record` names, in `dir` (a table of a durable manifest, at open).
    pub(crate) fn named(fs: &Arc<dyn Fs>, dir: &Path, record: &TableRecord) -> TableFiles {
        TableFiles {
            table: TableFile::named(fs, table_path(dir, record.number), record.number),
            filter: (record.filter_file != 0).then(|| {
                let n = record.filter_file;
                TableFile::named(fs, filter_path(dir, n), n)
            }),
            range: record
                .range
                .map(|r| TableFile::named(fs, range_path(dir, r.file), r.file)),
            tombstones: record
                .range_tombstones
                .map(|n| TableFile::named(fs, tombstones_path(dir, n), n)),
            hashes: record
                .key_hashes
                .map(|n| TableFile::named(fs, key_hashes_path(dir, n), n)),
        }
    }

    /// Each file.
    pub(crate) fn each(&self) -> impl Iterator<Item = &Arc<TableFile>> {
        std::iter::once(&self.table)
            .chain(&self.filter)
            .chain(&self.range)
            .chain(&self.tombstones)
            .chain(&self.hashes)
    }
}

/// Where and how new tables are written.
pub(crate) struct TableSpec<'a> {
    /// The file system writes go through.
    pub fs: &'a Arc<dyn Fs>,
    /// The store's directory.
    pub dir: &'a Path,
    /// Level of the new tables.
    pub level: u32,
    /// Filter kind and target rate of the new tables.
    pub filter: (FilterKind, f64),
    /// How the tables' data blocks are compressed.
    pub compression: Compression,
    /// Bits per key of the tables' range filters (0: none).
    pub range_bits: f64,
    /// Where the range filters' build time is counted (`None`: not counted).
    pub range_clock: Option<&'a Arc<BuildClock>>,
    /// Hands out unused file numbers.
    pub alloc: &'a (dyn Fn() -> Result<u64> + Sync),
    /// Whether each new table gets a key hashes file (a store under the global filter).
    pub key_hashes: bool,
}

impl TableSpec<'_> {
    /// A file number for the filter (0: the kind has no file).
    fn filter_number(&self) -> Result<u64> {
        if self.filter.0 == FilterKind::None {
            Ok(0)
        } else {
            (self.alloc)()
        }
    }

    /// A range filter builder (`None`: no range filter).
    fn range_builder(&self) -> Result<Option<RangeFilterBuilder>> {
        (self.range_bits > 0.0)
            .then(|| RangeFilterBuilder::new(self.range_bits))
            .transpose()
            .map(|b| b.map(|b| b.clocked(self.range_clock)))
    }
}

/// A table just written (fsynced), not yet published.
#[derive(Debug)]
pub(crate) struct NewTable {
    /// Its record for the manifest.
    pub record: TableRecord,
    /// Its files (removed if it is dropped before it is published).
    pub files: TableFiles,
    /// Bytes written to its filter and range filter files.
    pub filter_bytes: u64,
}

/// A table being written (see the module documentation).
pub(crate) struct TableWriter {
    number: u64,
    builder: TableBuilder,
    /// The key hashes of the entries so far (for the filter).
    hashes: Vec<u64>,
    range: Option<RangeFilterBuilder>,
    /// Last: dropped (removing an unfinished file) after the builder closes it.
    file: Arc<TableFile>,
}

impl TableWriter {
    /// Writes a table of `entries` (sorted, distinct, at least one) and its filters in
    /// parallel, as file numbers `(table, filter, range filter)` (filter 0: none; a range
    /// filter number when `spec` asks for one), the filter from `hashes` (the entries' key
    /// hashes) and the range filter from `keys` (the entries' keys in any order).
    pub(crate) fn write_whole<'k, E: SortedEntries + ?Sized>(
        spec: &TableSpec<'_>,
        (number, filter_no, range_no): (u64, u64, Option<u64>),
        entries: &E,
        keys: impl ExactSizeIterator<Item = &'k [u8]> + Send,
        hashes: &[u64],
    ) -> Result<NewTable> {
        let tpath = table_path(spec.dir, number);
        let table = TableFile::created(spec.fs, tpath.clone(), number);
        let range = range_no.map(|n| {
            let block = move || -> Result<Vec<u8>> {
                let mut b = RangeFilterBuilder::new(spec.range_bits)?.clocked(spec.range_clock);
                b.reserve(keys.len());
                b.push_all(keys)?;
                b.finish()
            };
            (n, block)
        });
        let (meta, filters) = rayon::join(
            || write_table(&**spec.fs, &tpath, entries, spec.compression),
            || write_filters(spec, filter_no, hashes, range),
        );
        let (filter, range, filter_bytes) = filters?;
        let files = TableFiles {
            table,
            filter,
            range,
            tombstones: None,
            hashes: write_hashes(spec, hashes)?,
        };
        let meta = meta?;
        let record = record(spec, number, meta, filter_no, &files);
        Ok(NewTable {
            record,
            files,
            filter_bytes,
        })
    }

    /// Starts a table written part by part (a compaction's output), under a new number.
    pub(crate) fn create(spec: &TableSpec<'_>) -> Result<TableWriter> {
        let number = (spec.alloc)()?;
        let path = table_path(spec.dir, number);
        let file = TableFile::created(spec.fs, path.clone(), number);
        let builder = TableBuilder::create(&**spec.fs, &path)?;
        Ok(TableWriter {
            number,
            file,
            builder,
            hashes: Vec::new(),
            range: spec.range_builder()?,
        })
    }

    /// Appends `part` (encoded from entries with the keys `keys`, which follow every key
    /// added so far). Returns the part's buffer for reuse.
    pub(crate) fn add_part<'k>(
        &mut self,
        mut part: Part,
        keys: impl Iterator<Item = &'k [u8]>,
    ) -> Result<Vec<u8>> {
        if let Some(r) = &mut self.range {
            r.push_all(keys)?;
        }
        self.hashes.append(&mut part.hashes);
        self.builder.add_part(part)
    }

    /// Finishes the table, then writes its filter and range filter (in parallel).
    pub(crate) fn finish(self, spec: &TableSpec<'_>) -> Result<NewTable> {
        let meta = self.builder.finish()?;
        let filter_no = spec.filter_number()?;
        let range = self
            .range
            .map(|b| (spec.alloc)().map(|n| (n, move || b.finish())))
            .transpose()?;
        let (filter, range, filter_bytes) = write_filters(spec, filter_no, &self.hashes, range)?;
        let files = TableFiles {
            table: self.file,
            filter,
            range,
            tombstones: None,
            hashes: write_hashes(spec, &self.hashes)?,
        };
        let record = record(spec, self.number, meta, filter_no, &files);
        Ok(NewTable {
            record,
            files,
            filter_bytes,
        })
    }
}

/// A filter file and a range filter file, when wanted.
type Filters = (Option<Arc<TableFile>>, Option<Arc<TableFile>>, u64);

/// Writes the filter of `hashes` as file `filter_no` (0: none) and, as the file numbered in
/// `range`, the range filter block its function builds, in parallel; their files and the
/// bytes written.
fn write_filters(
    spec: &TableSpec<'_>,
    filter_no: u64,
    hashes: &[u64],
    range: Option<(u64, impl FnOnce() -> Result<Vec<u8>> + Send)>,
) -> Result<Filters> {
    let (kind, fpr) = spec.filter;
    let (f, r) = rayon::join(
        || -> Result<(Option<Arc<TableFile>>, u64)> {
            if filter_no == 0 {
                return Ok((None, 0));
            }
            let path = filter_path(spec.dir, filter_no);
            let file = TableFile::created(spec.fs, path.clone(), filter_no);
            Ok(
                match write_filter_file(&**spec.fs, &path, kind, fpr, hashes)? {
                    Some(bytes) => (Some(file), bytes),
                    None => (None, 0),
                },
            )
        },
        || -> Result<(Option<Arc<TableFile>>, u64)> {
            let Some((n, block)) = range else {
                return Ok((None, 0));
            };
            let path = range_path(spec.dir, n);
            let file = TableFile::created(spec.fs, path.clone(), n);
            let bytes = write_range_file(&**spec.fs, &path, &block()?)?;
            Ok((Some(file), bytes))
        },
    );
    let ((filter, fb), (range, rb)) = (f?, r?);
    Ok((filter, range, fb + rb))
}

/// The key hashes file of a new table whose entries' key hashes are `hashes` (in key
/// order), when `spec` asks for one: written and fsynced under a new number.
fn write_hashes(spec: &TableSpec<'_>, hashes: &[u64]) -> Result<Option<Arc<TableFile>>> {
    if !spec.key_hashes {
        return Ok(None);
    }
    let n = (spec.alloc)()?;
    let path = key_hashes_path(spec.dir, n);
    let file = TableFile::created(spec.fs, path.clone(), n);
    super::key_hashes::write(&**spec.fs, &path, hashes)?;
    Ok(Some(file))
}

/// The manifest record of table `number` with `meta`, written as `spec` says with the
/// filter files `files`.
fn record(
    spec: &TableSpec<'_>,
    number: u64,
    meta: super::TableMeta,
    filter_no: u64,
    files: &TableFiles,
) -> TableRecord {
    let (kind, fpr) = spec.filter;
    let mut record = TableRecord::written(
        spec.level,
        number,
        meta,
        filter_no,
        kind,
        fpr,
        files.filter.is_some(),
    );
    record.range = files.range.as_ref().map(|f| RangeRecord {
        file: f.number(),
        bits_per_key: spec.range_bits,
    });
    record.key_hashes = files.hashes.as_ref().map(|f| f.number());
    record
}

/// Writes a new filter of `kind` at `fpr` over `hashes` (an existing table's keys) under a
/// new number: the number (0 for [`FilterKind::None`], which has no file) and the file.
pub(crate) fn new_filter_file(
    fs: &Arc<dyn Fs>,
    dir: &Path,
    alloc: &dyn Fn() -> Result<u64>,
    (kind, fpr): (FilterKind, f64),
    hashes: &[u64],
) -> Result<(u64, Option<Arc<TableFile>>)> {
    if kind == FilterKind::None {
        return Ok((0, None));
    }
    let n = alloc()?;
    let path = filter_path(dir, n);
    let file = TableFile::created(fs, path.clone(), n);
    Ok(match write_filter_file(&**fs, &path, kind, fpr, hashes)? {
        Some(_) => (n, Some(file)),
        None => (0, None),
    })
}

impl NewTable {
    /// Gives the table `tombstones` (sorted by start; none: nothing changes): writes them,
    /// fsynced, as a new `NNNNNN.rdel` (removed if the table is dropped unpublished) and
    /// names it in the record (table property 2).
    pub(crate) fn with_tombstones(
        mut self,
        spec: &TableSpec<'_>,
        tombstones: &[crate::tombstone::RangeTombstone],
    ) -> Result<NewTable> {
        if tombstones.is_empty() {
            return Ok(self);
        }
        let n = (spec.alloc)()?;
        let path = tombstones_path(spec.dir, n);
        let file = TableFile::created(spec.fs, path.clone(), n);
        self.filter_bytes += crate::tombstone::file::write(&**spec.fs, &path, tombstones)?;
        self.record.range_tombstones = Some(n);
        self.files.tombstones = Some(file);
        Ok(self)
    }
}

/// Writes range filter block `block` as file number `n`.
pub(crate) fn new_range_file(
    fs: &Arc<dyn Fs>,
    dir: &Path,
    n: u64,
    block: &[u8],
) -> Result<Arc<TableFile>> {
    let path = range_path(dir, n);
    let file = TableFile::created(fs, path.clone(), n);
    write_range_file(&**fs, &path, block)?;
    Ok(file)
}
