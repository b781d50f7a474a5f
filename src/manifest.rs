//! The manifest: which tables are live, at which level, their filter files and metadata.
//!
//! ```text
//! | "FSMF" | version u32 | body_len u32 | crc32(body) u32 | body |
//! ```
//! Replaced atomically: written to `MANIFEST.tmp`, fsynced, renamed over `MANIFEST`, and the
//! directory fsynced. A file is deleted only after a manifest that no longer names it is
//! durable. The whole table set is rewritten on every change (no log of edits): a record is
//! about 60 bytes plus two keys, so even thousands of tables cost one small sequential write,
//! and there is nothing to replay or compact at open (see `format.md`).

use std::path::Path;

use crate::codec::{check_crc, put_varint, Cursor};
use crate::error::{Error, Result};
use crate::filename::FileName;
use crate::filter::FilterKind;
use crate::io::{replace_file, Fs};

/// Magic at the start of the manifest.
pub const MANIFEST_MAGIC: [u8; 4] = *b"FSMF";
/// Manifest format version written (version 1, still read, had no levels: its tables are
/// all level 0, newest first).
pub const MANIFEST_VERSION: u32 = 2;
const MAX_MANIFEST_BODY: usize = 1 << 30;
/// Levels a store can have: L0 and L1..L6 (a manifest naming a deeper level is refused).
/// With T = 10 and a 256 MiB L1 the last level holds 256 TiB.
pub const MAX_LEVELS: usize = 7;

/// One live table as the manifest records it.
#[derive(Clone, Debug, PartialEq)]
pub struct TableRecord {
    /// Level: 0 for flushed tables (overlapping, newest first), 1.. for the sorted runs.
    pub level: u32,
    /// File number of `NNNNNN.sst`.
    pub number: u64,
    /// File number of `NNNNNN.filter`; 0 when the table has no filter.
    pub filter_file: u64,
    /// Filter kind.
    pub filter_kind: FilterKind,
    /// Target false-positive rate of the filter.
    pub fpr: f64,
    /// Entries, tombstones included.
    pub entries: u64,
    /// Tombstones.
    pub tombstones: u64,
    /// Size of the table file.
    pub file_bytes: u64,
    /// Smallest key.
    pub min_key: Vec<u8>,
    /// Largest key.
    pub max_key: Vec<u8>,
}

impl TableRecord {
    /// The record of a table just written as `number` at `level` (its file's `meta`), with
    /// filter file `filter_no` of `kind` at `fpr` when `has_filter` (a filter was written),
    /// else none.
    pub(crate) fn written(
        level: u32,
        number: u64,
        meta: crate::table::TableMeta,
        filter_no: u64,
        kind: FilterKind,
        fpr: f64,
        has_filter: bool,
    ) -> TableRecord {
        TableRecord {
            level,
            number,
            filter_file: if has_filter { filter_no } else { 0 },
            filter_kind: if has_filter { kind } else { FilterKind::None },
            fpr,
            entries: meta.entries,
            tombstones: meta.tombstones,
            file_bytes: meta.file_bytes,
            min_key: meta.min_key,
            max_key: meta.max_key,
        }
    }
}

/// The whole manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    /// Next unused file number.
    pub next_file: u64,
    /// WAL files numbered below this are fully contained in tables.
    pub log_number: u64,
    /// The filter kind chosen when the store was created.
    pub default_kind: FilterKind,
    /// The target false-positive rate chosen when the store was created.
    pub default_fpr: f64,
    /// Live tables: level 0 newest first, then each deeper level in key order.
    pub tables: Vec<TableRecord>,
    /// Per level, the largest key of the table the last compaction out of that level took
    /// (where the round-robin choice of the next one resumes); absent levels start at the
    /// beginning.
    pub cursors: Vec<(u32, Vec<u8>)>,
}

impl Manifest {
    /// Serialises the manifest.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_varint(&mut b, self.next_file);
        put_varint(&mut b, self.log_number);
        b.push(self.default_kind.tag());
        b.extend_from_slice(&self.default_fpr.to_le_bytes());
        put_varint(&mut b, self.tables.len() as u64);
        for t in &self.tables {
            put_varint(&mut b, u64::from(t.level));
            put_varint(&mut b, t.number);
            put_varint(&mut b, t.filter_file);
            b.push(t.filter_kind.tag());
            b.extend_from_slice(&t.fpr.to_le_bytes());
            put_varint(&mut b, t.entries);
            put_varint(&mut b, t.tombstones);
            put_varint(&mut b, t.file_bytes);
            for k in [&t.min_key, &t.max_key] {
                put_varint(&mut b, k.len() as u64);
                b.extend_from_slice(k);
            }
        }
        put_varint(&mut b, self.cursors.len() as u64);
        for (level, key) in &self.cursors {
            put_varint(&mut b, u64::from(*level));
            put_varint(&mut b, key.len() as u64);
            b.extend_from_slice(key);
        }
        let mut out = Vec::with_capacity(16 + b.len());
        out.extend_from_slice(&MANIFEST_MAGIC);
        out.extend_from_slice(&MANIFEST_VERSION.to_le_bytes());
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&b).to_le_bytes());
        out.extend_from_slice(&b);
        out
    }

    /// Decodes and checks a manifest; error offsets are file offsets.
    pub fn decode(bytes: &[u8]) -> Result<Manifest> {
        let mut c = Cursor::new(bytes, 0);
        if c.bytes(4, "manifest magic")? != MANIFEST_MAGIC {
            return Err(Error::corrupt(0, "bad manifest magic"));
        }
        let version = c.u32("manifest version")?;
        if !(1..=MANIFEST_VERSION).contains(&version) {
            return Err(Error::corrupt(
                4,
                format!("unsupported manifest version {version}"),
            ));
        }
        let len = c.u32("manifest length")? as usize;
        let crc = c.u32("manifest CRC")?;
        if len > MAX_MANIFEST_BODY || len != c.remaining() {
            return Err(Error::corrupt(
                8,
                format!(
                    "manifest body length {len} but {} bytes follow",
                    c.remaining()
                ),
            ));
        }
        let body = c.bytes(len, "manifest body")?;
        check_crc(body, crc, 16, "manifest")?;
        let mut c = Cursor::new(body, 16);
        let level = |c: &mut Cursor| -> Result<u32> {
            let at = c.offset();
            let l = c.varint("level")?;
            if l >= MAX_LEVELS as u64 {
                return Err(Error::corrupt(
                    at,
                    format!("level {l} (at most {} levels)", MAX_LEVELS),
                ));
            }
            Ok(l as u32)
        };
        let kind = |c: &mut Cursor| -> Result<FilterKind> {
            let at = c.offset();
            let t = c.u8("filter kind")?;
            FilterKind::from_tag(t)
                .ok_or_else(|| Error::corrupt(at, format!("unknown filter kind tag {t}")))
        };
        let next_file = c.varint("next file number")?;
        let log_number = c.varint("log number")?;
        let default_kind = kind(&mut c)?;
        let default_fpr = c.f64("default fpr")?;
        let count = c.len(body.len(), "table count")?;
        let mut tables = Vec::with_capacity(count);
        for _ in 0..count {
            let level = if version >= 2 { level(&mut c)? } else { 0 };
            let number = c.varint("table number")?;
            let filter_file = c.varint("filter file number")?;
            let filter_kind = kind(&mut c)?;
            let fpr = c.f64("table fpr")?;
            let entries = c.varint("entries")?;
            let tombstones = c.varint("tombstones")?;
            let file_bytes = c.varint("file bytes")?;
            let mut key = || -> Result<Vec<u8>> {
                let n = c.len(body.len(), "key length")?;
                Ok(c.bytes(n, "key")?.to_vec())
            };
            let min_key = key()?;
            let max_key = key()?;
            tables.push(TableRecord {
                level,
                number,
                filter_file,
                filter_kind,
                fpr,
                entries,
                tombstones,
                file_bytes,
                min_key,
                max_key,
            });
        }
        let mut cursors = Vec::new();
        if version >= 2 {
            let n = c.len(body.len(), "cursor count")?;
            for _ in 0..n {
                let l = level(&mut c)?;
                let len = c.len(body.len(), "cursor key length")?;
                cursors.push((l, c.bytes(len, "cursor key")?.to_vec()));
            }
        }
        if !c.is_empty() {
            return Err(c.err("trailing bytes in manifest"));
        }
        Ok(Manifest {
            next_file,
            log_number,
            default_kind,
            default_fpr,
            tables,
            cursors,
        })
    }

    /// Reads `dir/MANIFEST`; `Ok(None)` when there is none.
    pub fn load(dir: &Path) -> Result<Option<Manifest>> {
        let path = FileName::Manifest.path(dir);
        match std::fs::read(&path) {
            Ok(b) => Manifest::decode(&b)
                .map(Some)
                .map_err(|e| e.in_file(&path, 0)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(path, e)),
        }
    }

    /// Atomically replaces `dir/MANIFEST` with this manifest (through `MANIFEST.tmp`, see
    /// [`replace_file`]).
    pub fn store(&self, fs: &dyn Fs, dir: &Path) -> Result<()> {
        replace_file(
            fs,
            dir,
            FileName::ManifestTmp,
            FileName::Manifest,
            &self.encode(),
        )
    }
}
