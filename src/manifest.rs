//! The manifest: which tables are live, at which level, their filter files and metadata.
//!
//! ```text
//! | "FSMF" | version u32 | body_len u32 | crc32(body) u32 | body |
//! body (version 3):
//! | next_file | log_number | tables (each ending in its properties) | cursors | properties |
//! property: | tag varint | len varint | payload |   tags increasing, never reused
//! ```
//! Tagged properties let later versions add to the store or to a table without a new
//! version; a tag this code does not know is refused (a newer writer's manifest is not
//! misread). Store tag 1 is the filter policy. Versions 1 and 2 are still read (see
//! `format.md`). Replaced atomically: written to `MANIFEST.tmp`, fsynced, renamed over
//! `MANIFEST`, and the directory fsynced. A file is deleted only after a manifest that no longer names it is
//! durable. The whole table set is rewritten on every change (no log of edits): a record is
//! about 60 bytes plus two keys, so even thousands of tables cost one small sequential write,
//! and there is nothing to replay or compact at open (see `format.md`).

use std::path::Path;

use crate::codec::{check_crc, put_varint, Cursor};
use crate::error::{Error, Result};
use crate::filename::FileName;
use crate::filter::alloc::FilterPolicy;
use crate::filter::FilterKind;
use crate::io::{replace_file, Fs};

mod choice;
mod keyspace;
mod policy;
pub use self::keyspace::Keyspaces;
use self::policy::{decode_policy, encode_policy};
// For the tests and the fuzz targets (`internals`); the store names them in `Keyspaces`.
#[allow(unused_imports)]
pub use self::keyspace::{KeyspaceRecord, MAX_NAME_BYTES};

/// Magic at the start of the manifest.
pub const MANIFEST_MAGIC: [u8; 4] = *b"FSMF";
/// Manifest format version written. Still read: version 2 (no properties; a kind and rate
/// instead of a filter policy) and version 1 (no levels either: its tables are all level 0,
/// newest first).
pub const MANIFEST_VERSION: u32 = 3;
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
    /// The table's range filter (table property 1), if it has one.
    pub range: Option<RangeRecord>,
    /// File number of the table's range tombstones file `NNNNNN.rdel` (table property 2),
    /// if it has range tombstones.
    pub range_tombstones: Option<u64>,
    /// The keyspace the table belongs to (table property 3; 0, the default keyspace, when
    /// absent).
    pub keyspace: u32,
    /// File number of the table's key hashes file `NNNNNN.khash` (table property 4), if it
    /// has one (tables written under the global filter).
    pub key_hashes: Option<u64>,
}

/// A table's range filter file, as the manifest records it (table property 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RangeRecord {
    /// File number of `NNNNNN.range`.
    pub file: u64,
    /// Bits per key it was built for.
    pub bits_per_key: f64,
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
            range: None,
            range_tombstones: None,
            keyspace: 0,
            key_hashes: None,
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
    /// How the store sizes new filters: chosen when it was created, replaced by a refilter
    /// or rebalance (manifest versions 1 and 2 had only a kind and a rate: uniform).
    pub policy: FilterPolicy,
    /// Live tables: level 0 newest first, then each deeper level in key order.
    pub tables: Vec<TableRecord>,
    /// Per level, the largest key of the table the last compaction out of that level took
    /// (where the round-robin choice of the next one resumes); absent levels start at the
    /// beginning.
    pub cursors: Vec<(u32, Vec<u8>)>,
    /// The store's last commit sequence number when this manifest was written (store
    /// property 2; 0, and the property absent, before any write): no batch committed after
    /// it has a smaller one, and reopening never hands out one at or below it.
    pub last_seq: u64,
    /// The keyspaces besides the default one, and the next id (store property 3; absent
    /// in a store that never had one).
    pub keyspaces: Keyspaces,
    /// What the store's last choice of allocation saw and predicted (store property 4),
    /// when it chooses by itself (`filter/choice.rs`); `None`: the policy was given.
    pub choice: Option<crate::filter::choice::AllocationChoice>,
}

/// Store property tag: the filter policy (`| kind u8 | allocation u8 | value f64 |`).
/// Tags are never reused; a reader refuses one it does not know.
const PROP_FILTER_POLICY: u64 = 1;
/// Store property tag: the last commit sequence number (`| seq u64 |`), written when not 0.
const PROP_LAST_SEQ: u64 = 2;
/// Store property tag: the keyspaces (`manifest/keyspace.rs`), written when there ever
/// was one.
const PROP_KEYSPACES: u64 = 3;
/// Table property tag: the table's keyspace (`| id varint |`, not 0), written when not 0.
const PROP_KEYSPACE: u64 = 3;
/// Table property tag: the table's range tombstones file (`| file varint |`, not 0).
const PROP_RANGE_TOMBSTONES: u64 = 2;
/// Table property tag: the table's key hashes file (`| file varint |`, not 0).
const PROP_KEY_HASHES: u64 = 4;
/// Table property tag: the table's range filter (`| file varint | bits_per_key f64 |`).
const PROP_RANGE_FILTER: u64 = 1;
/// The largest budget a manifest may record, in bits per key (what `store --bits-per-key`
/// accepts).
pub const MAX_BITS_PER_KEY: f64 = 64.0;

/// Appends `| tag varint | len varint | payload |`.
fn put_tagged(out: &mut Vec<u8>, tag: u64, payload: &[u8]) {
    put_varint(out, tag);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// One tagged property read by [`read_tagged`]: its tag, the file offset of the tag, and a
/// cursor over its payload (whose errors name file offsets).
struct Tagged<'a> {
    tag: u64,
    at: u64,
    payload: Cursor<'a>,
}

/// Reads `| count varint | (tag varint | len varint | payload)* |`, the tags strictly
/// increasing (so a tag appears at most once and the encoding is canonical).
fn read_tagged<'a>(c: &mut Cursor<'a>, max: usize, what: &str) -> Result<Vec<Tagged<'a>>> {
    let n = c.len(max, what)?;
    let mut out: Vec<Tagged<'a>> = Vec::new();
    for _ in 0..n {
        let at = c.offset();
        let tag = c.varint("property tag")?;
        if out.last().is_some_and(|p| p.tag >= tag) {
            return Err(Error::corrupt(
                at,
                format!("{what}: tag {tag} out of order (tags increase, each at most once)"),
            ));
        }
        let len = c.len(max, "property length")?;
        let base = c.offset();
        let payload = Cursor::new(c.bytes(len, "property")?, base);
        out.push(Tagged { tag, at, payload });
    }
    Ok(out)
}

/// An error for a tag this version does not know: a newer writer's manifest is refused,
/// not misread.
fn unknown_tag(p: &Tagged, what: &str) -> Error {
    Error::corrupt(
        p.at,
        format!(
            "unknown {what} tag {} (written by a newer version of filterstore?)",
            p.tag
        ),
    )
}

/// A table property that names one of the table's files (`| file varint |`, not 0).
fn file_number(mut c: Cursor, what: &str) -> Result<u64> {
    let at = c.offset();
    let n = c.varint(&format!("{what} file number"))?;
    if n == 0 {
        return Err(Error::corrupt(at, format!("{what} file number 0")));
    }
    if !c.is_empty() {
        return Err(c.err(format!("trailing bytes in the {what} property")));
    }
    Ok(n)
}

fn decode_range(mut c: Cursor) -> Result<RangeRecord> {
    let at = c.offset();
    let file = c.varint("range filter file number")?;
    if file == 0 {
        return Err(Error::corrupt(at, "range filter file number 0"));
    }
    let at = c.offset();
    let bits_per_key = c.f64("range filter bits per key")?;
    if !c.is_empty() {
        return Err(c.err("trailing bytes in the range filter property"));
    }
    use crate::filter::range::{MAX_BITS_PER_KEY as MAX, MIN_BITS_PER_KEY as MIN};
    if !(MIN..=MAX).contains(&bits_per_key) {
        return Err(Error::corrupt(
            at,
            format!("range filter of {bits_per_key} bits per key ({MIN} to {MAX})"),
        ));
    }
    Ok(RangeRecord { file, bits_per_key })
}

/// The last commit sequence number (store property 2): 8 bytes, not 0 (a manifest without
/// a sequence leaves the property out, so each manifest has one encoding).
fn decode_last_seq(mut c: Cursor) -> Result<u64> {
    let at = c.offset();
    let seq = c.u64("last sequence number")?;
    if !c.is_empty() {
        return Err(c.err("trailing bytes in the last sequence number"));
    }
    if seq == 0 {
        return Err(Error::corrupt(
            at,
            "last sequence number 0 (written only when not 0)",
        ));
    }
    Ok(seq)
}

/// A table's keyspace (table property 3): a varint, not 0 (the default keyspace's tables
/// leave the property out). Returns the id and its file offset.
fn decode_keyspace_id(mut c: Cursor) -> Result<(u32, u64)> {
    let at = c.offset();
    let id = c.varint("keyspace id")?;
    if id == 0 || id > u64::from(u32::MAX) {
        return Err(Error::corrupt(at, format!("table keyspace id {id}")));
    }
    if !c.is_empty() {
        return Err(c.err("trailing bytes in the keyspace property"));
    }
    Ok((id as u32, at))
}

impl Manifest {
    /// Every tree's flushed-log number: the default keyspace's, then each live keyspace's
    /// (a tree needs the logs numbered at or past its own).
    pub(crate) fn log_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        let live = self.keyspaces.live.iter().map(|k| k.log_number);
        std::iter::once(self.log_number).chain(live)
    }

    /// Serialises the manifest (always as the current version).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_varint(&mut b, self.next_file);
        put_varint(&mut b, self.log_number);
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
            put_varint(
                &mut b,
                u64::from(t.range.is_some())
                    + u64::from(t.range_tombstones.is_some())
                    + u64::from(t.keyspace != 0)
                    + u64::from(t.key_hashes.is_some()),
            );
            if let Some(r) = &t.range {
                let mut p = Vec::with_capacity(18);
                put_varint(&mut p, r.file);
                p.extend_from_slice(&r.bits_per_key.to_le_bytes());
                put_tagged(&mut b, PROP_RANGE_FILTER, &p);
            }
            if let Some(n) = t.range_tombstones {
                let mut p = Vec::with_capacity(10);
                put_varint(&mut p, n);
                put_tagged(&mut b, PROP_RANGE_TOMBSTONES, &p);
            }
            if t.keyspace != 0 {
                let mut p = Vec::with_capacity(5);
                put_varint(&mut p, u64::from(t.keyspace));
                put_tagged(&mut b, PROP_KEYSPACE, &p);
            }
            if let Some(n) = t.key_hashes {
                let mut p = Vec::with_capacity(10);
                put_varint(&mut p, n);
                put_tagged(&mut b, PROP_KEY_HASHES, &p);
            }
        }
        put_varint(&mut b, self.cursors.len() as u64);
        for (level, key) in &self.cursors {
            put_varint(&mut b, u64::from(*level));
            put_varint(&mut b, key.len() as u64);
            b.extend_from_slice(key);
        }
        let with_keyspaces = !self.keyspaces.is_empty();
        put_varint(
            &mut b,
            1 + u64::from(self.last_seq != 0)
                + u64::from(with_keyspaces)
                + u64::from(self.choice.is_some()),
        );
        put_tagged(&mut b, PROP_FILTER_POLICY, &encode_policy(&self.policy));
        if self.last_seq != 0 {
            put_tagged(&mut b, PROP_LAST_SEQ, &self.last_seq.to_le_bytes());
        }
        if with_keyspaces {
            put_tagged(&mut b, PROP_KEYSPACES, &self.keyspaces.encode());
        }
        if let Some(c) = &self.choice {
            put_tagged(&mut b, choice::PROP_ALLOCATION_CHOICE, &choice::encode(c));
        }
        let mut out = Vec::with_capacity(16 + b.len());
        out.extend_from_slice(&MANIFEST_MAGIC);
        out.extend_from_slice(&MANIFEST_VERSION.to_le_bytes());
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&b).to_le_bytes());
        out.extend_from_slice(&b);
        out
    }

    /// Decodes and checks a manifest of any version this code reads; error offsets are file
    /// offsets.
    pub fn decode(bytes: &[u8]) -> Result<Manifest> {
        Manifest::decode_checked(bytes, true)
    }

    /// [`decode`](Self::decode) without the CRC check: what `store repair` makes of a
    /// damaged manifest whose bytes still decode (they may be wrong where the damage is).
    pub(crate) fn decode_ignoring_crc(bytes: &[u8]) -> Result<Manifest> {
        Manifest::decode_checked(bytes, false)
    }

    fn decode_checked(bytes: &[u8], crc_checked: bool) -> Result<Manifest> {
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
        if crc_checked {
            check_crc(body, crc, 16, "manifest")?;
        }
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
        // Versions 1 and 2: the kind and rate chosen at creation, every table at that rate.
        let old_policy = if version <= 2 {
            let kind = kind(&mut c)?;
            let at = c.offset();
            let fpr = c.f64("default fpr")?;
            if !(fpr > 0.0 && fpr < 1.0) {
                return Err(Error::corrupt(
                    at,
                    format!("default rate {fpr} not strictly between 0 and 1"),
                ));
            }
            Some(FilterPolicy::Uniform { kind, fpr })
        } else {
            None
        };
        let count = c.len(body.len(), "table count")?;
        let mut tables = Vec::with_capacity(count);
        // Where each table's keyspace id is (checked once the keyspaces are read).
        let mut table_keyspaces = Vec::with_capacity(count);
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
            let mut range = None;
            let mut range_tombstones = None;
            let mut key_hashes = None;
            let mut keyspace = (0, 0);
            if version >= 3 {
                for p in read_tagged(&mut c, body.len(), "table properties")? {
                    match p.tag {
                        PROP_RANGE_FILTER => range = Some(decode_range(p.payload)?),
                        PROP_RANGE_TOMBSTONES => {
                            range_tombstones = Some(file_number(p.payload, "range tombstones")?)
                        }
                        PROP_KEY_HASHES => key_hashes = Some(file_number(p.payload, "key hashes")?),
                        PROP_KEYSPACE => keyspace = decode_keyspace_id(p.payload)?,
                        _ => return Err(unknown_tag(&p, "table property")),
                    }
                }
            }
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
                range,
                range_tombstones,
                keyspace: keyspace.0,
                key_hashes,
            });
            table_keyspaces.push(keyspace.1);
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
        let mut policy = old_policy;
        let mut last_seq = 0;
        let mut keyspaces = Keyspaces::default();
        let mut allocation_choice = None;
        let properties_at = c.offset();
        if version >= 3 {
            for p in read_tagged(&mut c, body.len(), "store properties")? {
                match p.tag {
                    PROP_FILTER_POLICY => policy = Some(decode_policy(p.payload)?),
                    PROP_LAST_SEQ => last_seq = decode_last_seq(p.payload)?,
                    PROP_KEYSPACES => keyspaces = Keyspaces::decode(p.payload)?,
                    choice::PROP_ALLOCATION_CHOICE => {
                        allocation_choice = Some(choice::decode(p.payload)?);
                    }
                    _ => return Err(unknown_tag(&p, "store property")),
                }
            }
        }
        if !c.is_empty() {
            return Err(c.err("trailing bytes in manifest"));
        }
        let policy = policy.ok_or_else(|| {
            Error::corrupt(properties_at, "no filter policy among the store properties")
        })?;
        for (t, at) in tables.iter().zip(table_keyspaces) {
            if t.keyspace != 0 && keyspaces.live.iter().all(|k| k.id != t.keyspace) {
                return Err(Error::corrupt(
                    at,
                    format!(
                        "table {} of keyspace {}, which is not live",
                        t.number, t.keyspace
                    ),
                ));
            }
        }
        Ok(Manifest {
            next_file,
            log_number,
            policy,
            tables,
            cursors,
            last_seq,
            keyspaces,
            choice: allocation_choice,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest framed as `format.md` says: magic, version, body length, body CRC, body.
    fn framed(version: u32, body: &[u8]) -> Vec<u8> {
        let mut out = MANIFEST_MAGIC.to_vec();
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
        out.extend_from_slice(body);
        out
    }

    /// A version-3 body written from `format.md` (not by `Manifest::encode`): one L1 table
    /// with the table properties `extras`, one cursor, then the store properties `props`.
    fn body_v3(extras: &[(u64, &[u8])], props: &[(u64, &[u8])]) -> Vec<u8> {
        let mut b = vec![9, 4]; // next_file, log_number
        b.push(1); // table_count
        b.extend_from_slice(&[1, 5, 6, 3]); // level, number, filter_file, kind cuckoo
        b.extend_from_slice(&0.01f64.to_le_bytes());
        b.extend_from_slice(&[200, 1, 7, 0x90, 0x4e]); // 200 entries, 7 tombstones, 10000 bytes
        b.extend_from_slice(&[1, b'a', 1, b'z']);
        b.push(extras.len() as u8);
        for (tag, bytes) in extras {
            put_tagged(&mut b, *tag, bytes);
        }
        b.extend_from_slice(&[1, 1, 2, b'k', b'm']); // cursor: level 1, "km"
        b.push(props.len() as u8);
        for (tag, bytes) in props {
            put_tagged(&mut b, *tag, bytes);
        }
        b
    }

    fn policy_bytes(kind: u8, allocation: u8, value: f64) -> Vec<u8> {
        let mut b = vec![kind, allocation];
        b.extend_from_slice(&value.to_le_bytes());
        b
    }

    fn monkey10() -> Vec<u8> {
        policy_bytes(1, 1, 10.0)
    }

    fn err_of(bytes: &[u8]) -> String {
        Manifest::decode(bytes).unwrap_err().to_string()
    }

    #[test]
    fn version_3_as_format_md_describes_it() {
        let bytes = framed(3, &body_v3(&[], &[(1, &monkey10())]));
        let m = Manifest::decode(&bytes).unwrap();
        assert_eq!(
            m.policy,
            FilterPolicy::Budget {
                kind: FilterKind::Bloom,
                bits_per_key: 10.0
            }
        );
        assert_eq!((m.next_file, m.log_number), (9, 4));
        let t = &m.tables[0];
        assert_eq!((t.level, t.number, t.filter_file), (1, 5, 6));
        assert_eq!((t.filter_kind, t.fpr), (FilterKind::Cuckoo, 0.01));
        assert_eq!((t.entries, t.tombstones, t.file_bytes), (200, 7, 10_000));
        assert_eq!((&t.min_key[..], &t.max_key[..]), (&b"a"[..], &b"z"[..]));
        assert_eq!(m.cursors, vec![(1, b"km".to_vec())]);
        assert_eq!(m.encode(), bytes, "the encoder writes the same bytes");
        let uniform = framed(3, &body_v3(&[], &[(1, &policy_bytes(2, 0, 0.02))]));
        assert_eq!(
            Manifest::decode(&uniform).unwrap().policy,
            FilterPolicy::Uniform {
                kind: FilterKind::BlockedBloom,
                fpr: 0.02
            }
        );
    }

    #[test]
    fn version_2_is_uniform_at_its_kind_and_rate() {
        let mut b = vec![9, 4, 4]; // next_file, log_number, default kind binary-fuse
        b.extend_from_slice(&0.001f64.to_le_bytes());
        b.push(0); // no tables
        b.push(0); // no cursors
        let m = Manifest::decode(&framed(2, &b)).unwrap();
        assert_eq!(
            m.policy,
            FilterPolicy::Uniform {
                kind: FilterKind::BinaryFuse,
                fpr: 0.001
            }
        );
        // Re-encoded as version 3, with the same policy.
        let again = m.encode();
        assert_eq!(again[4..8], 3u32.to_le_bytes());
        assert_eq!(Manifest::decode(&again).unwrap(), m);
        // A rate that is no rate was never written: refused, at its offset.
        b[3..11].copy_from_slice(&1.5f64.to_le_bytes());
        let e = err_of(&framed(2, &b));
        assert!(e.contains("offset 19") && e.contains("default rate"), "{e}");
    }

    #[test]
    fn unknown_tags_are_refused_where_they_stand() {
        // A store property this version does not know, after the policy: at its offset.
        let body = body_v3(&[], &[(1, &monkey10()), (5, b"xyz")]);
        let at = 16 + body.len() - 5;
        let e = err_of(&framed(3, &body));
        assert!(
            e.contains(&format!("offset {at}")) && e.contains("unknown store property tag 5"),
            "{e}"
        );
        // A table property this version does not know (tag 1 is the range filter, 2 the
        // range tombstones file, 3 the keyspace, 4 the key hashes file).
        let body = body_v3(&[(5, b"\x07")], &[(1, &monkey10())]);
        let e = err_of(&framed(3, &body));
        assert!(
            e.contains("offset 41") && e.contains("unknown table property tag 5"),
            "{e}"
        );
        // Tag 4: the key hashes file, its number not 0, nothing after it.
        let body = body_v3(&[(4, b"\x07")], &[(1, &monkey10())]);
        let m = Manifest::decode(&framed(3, &body)).unwrap();
        assert_eq!(m.tables[0].key_hashes, Some(7));
        assert_eq!(Manifest::decode(&m.encode()).unwrap(), m);
        for bad in [&b"\x00"[..], b"\x07\x00", b"\x80"] {
            let body = body_v3(&[(4, bad)], &[(1, &monkey10())]);
            assert!(Manifest::decode(&framed(3, &body)).is_err(), "{bad:?}");
        }
        // Tag 2: the range tombstones file, its number not 0, nothing after it.
        let body = body_v3(&[(2, b"\x07")], &[(1, &monkey10())]);
        let m = Manifest::decode(&framed(3, &body)).unwrap();
        assert_eq!(m.tables[0].range_tombstones, Some(7));
        assert_eq!(Manifest::decode(&m.encode()).unwrap(), m);
        for bad in [&b"\x00"[..], b"\x07\x00", b"\x80"] {
            let body = body_v3(&[(2, bad)], &[(1, &monkey10())]);
            assert!(Manifest::decode(&framed(3, &body)).is_err(), "{bad:?}");
        }
        // A newer manifest version is refused outright.
        let e = err_of(&framed(4, &body_v3(&[], &[(1, &monkey10())])));
        assert!(e.contains("unsupported manifest version 4"), "{e}");
    }

    /// Store property 2 is the last commit sequence number: 8 bytes, left out when 0 (so an
    /// older manifest re-encodes byte for byte), refused when 0, short or long.
    #[test]
    fn the_last_sequence_number_is_store_property_2() {
        let seq = 0x0102_0304_0506_0708u64.to_le_bytes();
        let bytes = framed(3, &body_v3(&[], &[(1, &monkey10()), (2, &seq)]));
        let m = Manifest::decode(&bytes).unwrap();
        assert_eq!(m.last_seq, 0x0102_0304_0506_0708);
        assert_eq!(m.encode(), bytes, "the encoder writes the same bytes");
        let without = framed(3, &body_v3(&[], &[(1, &monkey10())]));
        let m = Manifest::decode(&without).unwrap();
        assert_eq!(m.last_seq, 0);
        assert_eq!(m.encode(), without);
        for bad in [&[0u8; 8][..], &seq[..7], &[1, 0, 0, 0, 0, 0, 0, 0, 0][..]] {
            let body = body_v3(&[], &[(1, &monkey10()), (2, bad)]);
            let e = err_of(&framed(3, &body));
            assert!(e.contains("last sequence number"), "{bad:?}: {e}");
        }
    }

    fn range_bytes(file: u8, bits: f64) -> Vec<u8> {
        let mut b = vec![file];
        b.extend_from_slice(&bits.to_le_bytes());
        b
    }

    #[test]
    fn the_range_filter_is_table_property_1() {
        let bytes = framed(
            3,
            &body_v3(&[(1, &range_bytes(8, 12.0))], &[(1, &monkey10())]),
        );
        let m = Manifest::decode(&bytes).unwrap();
        let want = RangeRecord {
            file: 8,
            bits_per_key: 12.0,
        };
        assert_eq!(m.tables[0].range, Some(want));
        assert_eq!(m.encode(), bytes, "the encoder writes the same bytes");
        let bad = |payload: &[u8], want: &str| {
            let e = err_of(&framed(3, &body_v3(&[(1, payload)], &[(1, &monkey10())])));
            assert!(e.contains(want), "{payload:?}: {e}");
        };
        bad(&range_bytes(0, 12.0), "file number 0");
        bad(&range_bytes(8, 2.0), "range filter of 2 bits");
        bad(&range_bytes(8, f64::NAN), "range filter of NaN bits");
        bad(&range_bytes(8, 12.0)[..8], "need 8 bytes");
        bad(&[range_bytes(8, 12.0), vec![0]].concat(), "trailing bytes");
    }

    #[test]
    fn properties_are_checked() {
        let bad = |props: &[(u64, &[u8])], want: &str| {
            let e = err_of(&framed(3, &body_v3(&[], props)));
            assert!(e.contains(want), "{props:?}: {e}");
        };
        bad(&[], "no filter policy");
        bad(&[(1, &monkey10()), (1, &monkey10())], "out of order");
        bad(&[(1, &monkey10()[..9])], "need 8 bytes");
        bad(&[(1, &[monkey10(), vec![0]].concat())], "trailing bytes");
        bad(
            &[(1, &policy_bytes(9, 1, 10.0))],
            "unknown filter kind tag 9",
        );
        bad(&[(1, &policy_bytes(1, 2, 10.0))], "unknown allocation 2");
        bad(&[(1, &policy_bytes(1, 0, 0.0))], "uniform rate 0");
        bad(&[(1, &policy_bytes(1, 0, f64::NAN))], "uniform rate NaN");
        bad(&[(1, &policy_bytes(1, 1, -1.0))], "budget of -1");
        bad(&[(1, &policy_bytes(1, 1, 65.0))], "budget of 65");
        bad(&[(1, &policy_bytes(1, 1, f64::INFINITY))], "budget of inf");
        // A property longer than the body.
        let mut body = body_v3(&[], &[]);
        body.pop();
        body.extend_from_slice(&[1, 1, 100]);
        let e = err_of(&framed(3, &body));
        assert!(e.contains("property"), "{e}");
    }
}
