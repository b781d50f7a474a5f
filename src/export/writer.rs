//! The writer: row groups cut at table boundaries, each with its Bloom filter on `key`,
//! into part files renamed into place together at the end.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parquet::basic::{Compression, Repetition, Type as PhysicalType};
use parquet::bloom_filter::Sbbf;
use parquet::column::writer::{get_column_writer, get_typed_column_writer};
use parquet::data_type::{ByteArray, ByteArrayType};
use parquet::file::properties::{
    BloomFilterPosition, EnabledStatistics, WriterProperties, WriterPropertiesPtr,
};
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::types::{ColumnPath, SchemaDescriptor, Type};

use super::{part_name, ParquetOptions, Progress, KEY_COLUMN, VALUE_COLUMN};
use super::{pq_err, sbbf_bytes, sbbf_fpr, Codec, ExportSummary, FileSummary, GroupSummary};
use crate::error::{Error, Result};
use crate::filter::FilterKind;
use crate::io::{Fs, RealFs};
use crate::store::{Stats, Store};

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

pub(super) struct Exporter<'a> {
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

impl<'a> Exporter<'a> {
    /// An exporter of a store whose tables `stats` describes (`store_fpr`: the store's ε,
    /// for groups no table overlaps).
    pub(super) fn new(
        dir: &'a Path,
        opts: &'a ParquetOptions,
        stats: &Stats,
        store_fpr: f64,
    ) -> Exporter<'a> {
        Exporter {
            dir,
            opts,
            plan: Plan::new(stats, store_fpr, opts),
            schema: Arc::new(SchemaDescriptor::new(schema())),
            base_props: base_props(opts.codec),
            part: None,
            written: Vec::new(),
            summary: ExportSummary::default(),
        }
    }

    /// The summary of a finished export.
    pub(super) fn into_summary(self) -> ExportSummary {
        self.summary
    }
}

impl Exporter<'_> {
    pub(super) fn run(&mut self, store: &Store, progress: &mut dyn FnMut(Progress)) -> Result<()> {
        let mut group = Group::default();
        let mut next_cut = 0usize;
        for item in store.scan::<&[u8]>(..) {
            let (k, v) = item?;
            // A table boundary between the previous key and this one ends the group.
            let mut crosses = false;
            while next_cut < self.plan.cuts.len() && self.plan.cuts[next_cut].as_slice() <= &*k {
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
    pub(super) fn discard(&mut self) {
        if let Some(p) = self.part.take() {
            drop(p.writer);
            let _ = fs::remove_file(&p.tmp);
        }
        for (tmp, _) in self.written.drain(..) {
            let _ = fs::remove_file(tmp);
        }
    }
}
