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

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parquet::basic::{Compression, Repetition, Type as PhysicalType};
use parquet::bloom_filter::{Sbbf, BITSET_MAX_LENGTH, BITSET_MIN_LENGTH};
use parquet::column::writer::{get_column_writer, get_typed_column_writer};
use parquet::data_type::{ByteArray, ByteArrayType};
use parquet::errors::ParquetError;
use parquet::file::properties::{
    BloomFilterPosition, EnabledStatistics, WriterProperties, WriterPropertiesPtr,
};
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::types::{ColumnPath, SchemaDescriptor, Type};

use crate::error::{Error, Result};
use crate::filter::{check_fpr, FilterKind};
use crate::io::{Fs, RealFs};
use crate::store::{Stats, Store};

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

/// How [`parquet()`] writes.
#[derive(Clone, Debug)]
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

/// How far an export has come (given to the progress callback after every row group).
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Rows written.
    pub rows: u64,
    /// Key and value bytes written.
    pub bytes: u64,
}

/// What an export wrote.
#[derive(Clone, Debug, Default)]
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
    let plan = Plan::new(&stats, store.filter().1, opts);
    let mut ex = Exporter {
        dir,
        opts,
        plan,
        schema: Arc::new(SchemaDescriptor::new(schema())),
        base_props: base_props(opts.codec),
        part: None,
        written: Vec::new(),
        summary: ExportSummary::default(),
    };
    let result = ex.run(store, progress);
    if result.is_err() {
        ex.discard();
    }
    result.map(|()| ex.summary)
}

/// The two-column schema.
fn schema() -> Arc<Type> {
    let col = |name: &str| {
        Arc::new(
            Type::primitive_type_builder(name, PhysicalType::BYTE_ARRAY)
                .with_repetition(Repetition::REQUIRED)
                .build()
                .expect("a required BYTE_ARRAY column is a valid type"),
        )
    };
    Arc::new(
        Type::group_type_builder("filterstore")
            .with_fields(vec![col(KEY_COLUMN), col(VALUE_COLUMN)])
            .build()
            .expect("a group of two primitive columns is a valid type"),
    )
}

/// File-wide writer properties (every group's key chunk gets its own, with its filter).
fn base_props_builder(codec: Codec) -> parquet::file::properties::WriterPropertiesBuilder {
    let value = ColumnPath::from(VALUE_COLUMN);
    WriterProperties::builder()
        .set_compression(match codec {
            Codec::Uncompressed => Compression::UNCOMPRESSED,
            Codec::Snappy => Compression::SNAPPY,
        })
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_column_statistics_enabled(value, EnabledStatistics::None)
        .set_bloom_filter_position(BloomFilterPosition::AfterRowGroup)
}

fn base_props(codec: Codec) -> WriterPropertiesPtr {
    Arc::new(base_props_builder(codec).build())
}

/// Where row groups end and which false-positive rate each one gets.
struct Plan {
    /// Keys at which a new group starts, sorted: every table's first key and the key right
    /// after its last one.
    cuts: Vec<Vec<u8>>,
    /// Table key ranges with their target ε (tables with a filter only).
    ranges: Vec<(Vec<u8>, Vec<u8>, f64)>,
    /// ε when no table's range overlaps a group (the store's).
    fallback: f64,
    /// A table boundary cuts a group only once it holds this many rows, so that many small
    /// or overlapping tables cannot produce tiny groups.
    min_rows: usize,
}

impl Plan {
    fn new(stats: &Stats, store_fpr: f64, opts: &ParquetOptions) -> Plan {
        let mut cuts = Vec::new();
        let mut ranges = Vec::new();
        for t in &stats.tables {
            cuts.push(t.min_key.clone());
            let mut after = t.max_key.clone();
            after.push(0);
            cuts.push(after);
            if t.filter_kind != FilterKind::None {
                ranges.push((t.min_key.clone(), t.max_key.clone(), t.target_fpr));
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        Plan {
            cuts,
            ranges,
            fallback: store_fpr,
            min_rows: (opts.rows_per_group / 16).max(1),
        }
    }

    /// The filter rate of a group holding `lo..=hi`.
    fn fpp(&self, lo: &[u8], hi: &[u8]) -> f64 {
        self.ranges
            .iter()
            .filter(|(min, max, _)| min.as_slice() <= hi && max.as_slice() >= lo)
            .map(|r| r.2)
            .fold(None, |m: Option<f64>, f| Some(m.map_or(f, |m| m.min(f))))
            .unwrap_or(self.fallback)
    }
}

/// A row group being collected: keys and values back to back in one buffer.
#[derive(Default)]
struct Group {
    data: Vec<u8>,
    /// Per row: end of the key, end of the value.
    ends: Vec<(usize, usize)>,
}

impl Group {
    fn push(&mut self, k: &[u8], v: &[u8]) {
        self.data.extend_from_slice(k);
        let ke = self.data.len();
        self.data.extend_from_slice(v);
        self.ends.push((ke, self.data.len()));
    }
    fn rows(&self) -> usize {
        self.ends.len()
    }
    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1].1 };
        &self.data[start..self.ends[i].0]
    }
    fn last_key(&self) -> Option<&[u8]> {
        self.rows().checked_sub(1).map(|i| self.key(i))
    }
}

/// The file being written.
struct Part {
    tmp: PathBuf,
    path: PathBuf,
    writer: SerializedFileWriter<File>,
    rows: u64,
    groups: Vec<GroupSummary>,
}

struct Exporter<'a> {
    dir: &'a Path,
    opts: &'a ParquetOptions,
    plan: Plan,
    schema: Arc<SchemaDescriptor>,
    base_props: WriterPropertiesPtr,
    part: Option<Part>,
    /// Finished files under their temporary names: (temporary, final).
    written: Vec<(PathBuf, PathBuf)>,
    summary: ExportSummary,
}

impl Exporter<'_> {
    fn run(&mut self, store: &Store, progress: &mut dyn FnMut(Progress)) -> Result<()> {
        let mut group = Group::default();
        let mut next_cut = 0usize;
        for item in store.scan::<&[u8]>(..) {
            let (k, v) = item?;
            // A table boundary between the previous key and this one ends the group.
            let mut crosses = false;
            while next_cut < self.plan.cuts.len() && self.plan.cuts[next_cut] <= k {
                crosses = true;
                next_cut += 1;
            }
            if crosses && group.rows() >= self.plan.min_rows {
                self.write_group(&mut group, progress)?;
            }
            group.push(&k, &v);
            let file_full = self.opts.rows_per_file.is_some_and(|max| {
                self.part.as_ref().map_or(0, |p| p.rows) + group.rows() as u64 >= max
            });
            if group.rows() >= self.opts.rows_per_group
                || group.data.len() >= self.opts.group_bytes
                || file_full
            {
                self.write_group(&mut group, progress)?;
                if file_full {
                    self.finish_part()?;
                }
            }
        }
        if group.rows() > 0 {
            self.write_group(&mut group, progress)?;
        }
        self.finish_part()?;
        // Every file is complete and durable under its temporary name: now rename them all.
        for (tmp, path) in std::mem::take(&mut self.written) {
            fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        }
        RealFs
            .sync_dir(self.dir)
            .map_err(|e| Error::io(self.dir, e))?;
        Ok(())
    }

    /// Opens the next part file unless one is open.
    fn part(&mut self) -> Result<&mut Part> {
        if self.part.is_none() {
            let name = part_name(self.summary.files.len() + self.written.len());
            let path = self.dir.join(&name);
            let tmp = self.dir.join(format!(".{name}.tmp"));
            let file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
            let writer = SerializedFileWriter::new(file, schema(), self.base_props.clone())
                .map_err(pq_err(&tmp))?;
            self.part = Some(Part {
                tmp,
                path,
                writer,
                rows: 0,
                groups: Vec::new(),
            });
        }
        Ok(self.part.as_mut().expect("opened above"))
    }

    /// Writes `group` as the next row group and empties it.
    fn write_group(&mut self, group: &mut Group, progress: &mut dyn FnMut(Progress)) -> Result<()> {
        let rows = group.rows();
        let (min_key, max_key) = (
            group.key(0).to_vec(),
            group.last_key().unwrap_or(&[]).to_vec(),
        );
        let fpp = self.opts.bloom.then(|| {
            self.opts
                .fpp
                .unwrap_or_else(|| self.plan.fpp(&min_key, &max_key))
        });
        let data_bytes = group.data.len() as u64;
        let ends = std::mem::take(&mut group.ends);
        let arena = Bytes::from(std::mem::take(&mut group.data));
        let mut keys = Vec::with_capacity(rows);
        let mut values = Vec::with_capacity(rows);
        let mut start = 0;
        for &(ke, ve) in &ends {
            keys.push(ByteArray::from(arena.slice(start..ke)));
            values.push(ByteArray::from(arena.slice(ke..ve)));
            start = ve;
        }
        // The key chunk is encoded into memory, given this group's Bloom filter (sized here,
        // see `sbbf_bytes`), then appended to the row group.
        let bloom = fpp.map(|f| {
            let mut sbbf = Sbbf::new_with_num_of_bytes(sbbf_bytes(rows as u64, f));
            for k in &keys {
                sbbf.insert(k);
            }
            sbbf
        });
        let bloom_fpr = bloom
            .as_ref()
            .map(|b| sbbf_fpr(rows as u64, b.num_blocks() as u64));
        let schema = self.schema.clone();
        let base_props = self.base_props.clone();
        let part = self.part()?;
        let tmp = part.tmp.clone();
        let err = pq_err(&tmp);
        let mut buf = TrackedWrite::new(Vec::new());
        let close = {
            let pages = SerializedPageWriter::new(&mut buf);
            let writer = get_column_writer(schema.column(0), base_props, Box::new(pages));
            let mut writer = get_typed_column_writer::<ByteArrayType>(writer);
            writer.write_batch(&keys, None, None).map_err(&err)?;
            let mut close = writer.close().map_err(&err)?;
            close.bloom_filter = bloom;
            close
        };
        let chunk = Bytes::from(buf.into_inner().map_err(&err)?);
        let mut rg = part.writer.next_row_group().map_err(&err)?;
        rg.append_column(&chunk, close).map_err(&err)?;
        let mut col = rg
            .next_column()
            .map_err(&err)?
            .ok_or_else(|| Error::Parquet {
                file: tmp.clone(),
                reason: "the schema has no value column".into(),
            })?;
        col.typed::<ByteArrayType>()
            .write_batch(&values, None, None)
            .map_err(&err)?;
        col.close().map_err(&err)?;
        rg.close().map_err(&err)?;
        part.rows += rows as u64;
        part.groups.push(GroupSummary {
            rows: rows as u64,
            min_key,
            max_key,
            fpp,
            bloom_fpr,
            bloom_bytes: 0, // known once the file's footer is written
        });
        self.summary.rows += rows as u64;
        self.summary.data_bytes += data_bytes;
        progress(Progress {
            rows: self.summary.rows,
            bytes: self.summary.data_bytes,
        });
        Ok(())
    }

    /// Writes the open part's footer and fsyncs it (an empty store still gets one file with
    /// no row group, so that engines see an empty table with the right schema).
    fn finish_part(&mut self) -> Result<()> {
        if self.part.is_none() && !self.summary.files.is_empty() {
            return Ok(());
        }
        let Part {
            tmp,
            path,
            mut writer,
            rows,
            mut groups,
        } = match self.part.take() {
            Some(p) => p,
            None => {
                self.part()?;
                self.part.take().expect("opened above")
            }
        };
        let finished = (|| {
            let meta = writer.finish().map_err(pq_err(&tmp))?;
            writer.inner().sync_all().map_err(|e| Error::io(&tmp, e))?;
            Ok::<_, Error>((meta, writer.bytes_written() as u64))
        })();
        drop(writer);
        let (meta, bytes) = match finished {
            Ok(x) => x,
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        };
        for (g, rg) in groups.iter_mut().zip(meta.row_groups()) {
            g.bloom_bytes = rg
                .column(0)
                .bloom_filter_length()
                .map_or(0, |l| u64::try_from(l).unwrap_or(0));
        }
        self.summary.files.push(FileSummary {
            path: path.clone(),
            rows,
            bytes,
            groups,
        });
        self.written.push((tmp, path));
        Ok(())
    }

    /// Removes what a failed export wrote.
    fn discard(&mut self) {
        if let Some(p) = self.part.take() {
            drop(p.writer);
            let _ = fs::remove_file(&p.tmp);
        }
        for (tmp, _) in self.written.drain(..) {
            let _ = fs::remove_file(tmp);
        }
    }
}

/// Bytes of a split-block Bloom filter for `n` keys at false-positive rate `fpp`: the
/// smallest power of two from 32 bytes to 128 MiB whose expected rate ([`sbbf_fpr`]) is at
/// most `fpp`. Powers of two are what the parquet crate's own writer produces, and what
/// DataFusion, DuckDB and Spark (parquet-mr) were seen to read here; the price is up to
/// twice the bits of an exact-size filter.
///
/// (The parquet crate's own sizing, `-8n / ln(1 - fpp^(1/8))` bits then folded while
/// `fill^8 ≤ fpp`, ignores how unevenly keys fall into blocks: at 131,072 keys it gives
/// the same 256 KiB filter for fpp 1 % and 0.1 %, whose rate, 0.13 %, misses the latter.)
pub fn sbbf_bytes(n: u64, fpp: f64) -> usize {
    let mut bytes = BITSET_MIN_LENGTH;
    while bytes < BITSET_MAX_LENGTH && sbbf_fpr(n, (bytes / 32) as u64) > fpp {
        bytes *= 2;
    }
    bytes
}

/// The expected false-positive rate of a split-block Bloom filter of `blocks` 256-bit
/// blocks holding `n` distinct keys, for a key not among them: a block holds j keys with
/// probability Poisson(j; n / blocks); each key sets one bit, uniform among 32, in each of
/// the block's 8 words; an absent key passes when its 8 bits are all set:
/// `Σ_j P(j) · (1 − (31/32)^j)^8`.
pub fn sbbf_fpr(n: u64, blocks: u64) -> f64 {
    if blocks == 0 {
        return 1.0;
    }
    let lambda = n as f64 / blocks as f64;
    let fill = |j: f64| (1.0 - (31.0f64 / 32.0).powf(j)).powi(8);
    if lambda > 200.0 {
        // e^-λ underflows long before this; the spread of j around λ no longer matters
        // (the rate is above 0.98 here).
        return fill(lambda);
    }
    let last = (lambda + 12.0 * lambda.sqrt() + 40.0).ceil() as u64;
    let mut p = (-lambda).exp(); // P(0), then P(j) by P(j) = P(j-1) · λ / j
    let mut sum = 0.0;
    for j in 0..=last {
        if j > 0 {
            p *= lambda / j as f64;
        }
        sum += p * fill(j as f64);
    }
    sum.min(1.0)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sbbf_rate_matches_the_model_and_sizes_are_powers_of_two() {
        // Values of the Poisson model computed independently (Python, same formula).
        let n = 131_072;
        assert!((sbbf_fpr(n, 262_144 / 32) - 0.00132).abs() < 0.00001);
        assert!((sbbf_fpr(n, 131_072 / 32) - 0.03321).abs() < 0.00001);
        assert!((sbbf_fpr(n, 65_536 / 32) - 0.32576).abs() < 0.00001);
        // Far too small filters are near 1, not 0 (no underflow).
        assert!(sbbf_fpr(n, 1) > 0.99 && sbbf_fpr(n, 64) > 0.99);
        assert_eq!(sbbf_fpr(0, 8), 0.0);
        assert_eq!(sbbf_bytes(n, 0.05), 131_072);
        assert_eq!(sbbf_bytes(n, 0.01), 262_144);
        assert_eq!(sbbf_bytes(n, 0.001), 524_288);
        assert_eq!(sbbf_bytes(0, 0.01), 32);
        assert_eq!(sbbf_bytes(1 << 40, 1e-9), BITSET_MAX_LENGTH);
        for (n, f) in [(1, 0.5), (1000, 0.01), (50_000, 0.2), (131_072, 1e-4)] {
            let b = sbbf_bytes(n, f);
            assert!(b.is_power_of_two() && sbbf_fpr(n, (b / 32) as u64) <= f);
            assert!(
                b == 32 || sbbf_fpr(n, (b / 64) as u64) > f,
                "not the smallest"
            );
        }
    }
}
