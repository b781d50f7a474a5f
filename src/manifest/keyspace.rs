//! Keyspaces in the manifest (store property 3, table property 3; `format.md`, "Manifest",
//! "Keyspaces").
//!
//! ```text
//! keyspaces: | next_id varint | count varint | keyspace × count |     ids increasing
//! keyspace:  | id varint | name_len varint | name | log_number varint |
//!            | policy (10 bytes, as store tag 1) | compression u8 | range_bits f64 |
//!            | cursor_count varint | cursor × cursor_count |
//!            | property_count varint | property × property_count |
//! property 1: | name (1 to 255 bytes of UTF-8) |      the keyspace's compaction filter
//! ```
//! The default keyspace (id 0) is the store itself: its tables carry no keyspace property,
//! its log number, policy and cursors are the manifest's own. Every id below `next_id`
//! that is neither 0 nor listed was dropped: ids are never reused, and a log record or
//! table naming an id at or above `next_id` (never allocated) is corruption.

use crate::codec::{put_varint, Cursor};
use crate::error::{Error, Result};
use crate::filter::alloc::FilterPolicy;
use crate::table::Compression;

use super::policy::{decode_policy, encode_policy};
use super::{put_tagged, read_tagged, unknown_tag, MAX_LEVELS};

/// The longest keyspace name, in bytes (UTF-8).
pub const MAX_NAME_BYTES: usize = 255;

/// The store's keyspaces besides the default one (store property 3).
#[derive(Clone, Debug, PartialEq)]
pub struct Keyspaces {
    /// The id the next keyspace created gets: every id below it was allocated once.
    pub next_id: u32,
    /// The live keyspaces, by increasing id.
    pub live: Vec<KeyspaceRecord>,
}

impl Default for Keyspaces {
    fn default() -> Keyspaces {
        Keyspaces {
            next_id: 1,
            live: Vec::new(),
        }
    }
}

/// One keyspace other than the default, as the manifest records it.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyspaceRecord {
    /// Its id (1 or more; never reused once dropped).
    pub id: u32,
    /// Its name (1 to 255 bytes of UTF-8, unique in the store).
    pub name: String,
    /// Logs numbered below it hold none of its writes that are not in its tables.
    pub log_number: u64,
    /// How its filters are sized (recorded at creation; a refilter replaces it).
    pub policy: FilterPolicy,
    /// How its tables' data blocks are compressed.
    pub compression: Compression,
    /// Bits per key of its tables' range filters (0: none).
    pub range_bits: f64,
    /// Per level, where its round-robin compaction resumes (as the store's cursors).
    pub cursors: Vec<(u32, Vec<u8>)>,
    /// The name of its compaction filter (keyspace property 1), chosen at creation: the
    /// store opens only with a filter of that name registered
    /// ([`Options::register_compaction_filter`](crate::Options::register_compaction_filter)).
    pub compaction_filter: Option<String>,
}

/// Keyspace property 1: the name of the keyspace's compaction filter.
const PROP_COMPACTION_FILTER: u64 = 1;

impl Keyspaces {
    /// True for the store without keyspaces (the property is then left out).
    pub fn is_empty(&self) -> bool {
        self.next_id == 1 && self.live.is_empty()
    }

    /// The payload of store property 3.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        put_varint(&mut b, u64::from(self.next_id));
        put_varint(&mut b, self.live.len() as u64);
        for k in &self.live {
            put_varint(&mut b, u64::from(k.id));
            put_varint(&mut b, k.name.len() as u64);
            b.extend_from_slice(k.name.as_bytes());
            put_varint(&mut b, k.log_number);
            b.extend_from_slice(&encode_policy(&k.policy));
            b.push(compression_tag(k.compression));
            b.extend_from_slice(&k.range_bits.to_le_bytes());
            put_varint(&mut b, k.cursors.len() as u64);
            for (level, key) in &k.cursors {
                put_varint(&mut b, u64::from(*level));
                put_varint(&mut b, key.len() as u64);
                b.extend_from_slice(key);
            }
            match &k.compaction_filter {
                Some(name) => {
                    put_varint(&mut b, 1);
                    put_tagged(&mut b, PROP_COMPACTION_FILTER, name.as_bytes());
                }
                None => put_varint(&mut b, 0),
            }
        }
        b
    }

    /// Decodes and checks the payload of store property 3 (offsets are file offsets).
    pub(super) fn decode(mut c: Cursor) -> Result<Keyspaces> {
        let max = c.remaining();
        let at = c.offset();
        let next_id = c.varint("next keyspace id")?;
        if !(1..=u64::from(u32::MAX)).contains(&next_id) {
            return Err(Error::corrupt(
                at,
                format!("next keyspace id {next_id} (1 to {})", u32::MAX),
            ));
        }
        let next_id = next_id as u32;
        let n = c.len(max, "keyspace count")?;
        let mut live: Vec<KeyspaceRecord> = Vec::new();
        for _ in 0..n {
            let at = c.offset();
            let id = c.varint("keyspace id")?;
            if id == 0 || id >= u64::from(next_id) {
                return Err(Error::corrupt(
                    at,
                    format!("keyspace id {id} (1 to {}, below the next id)", next_id - 1),
                ));
            }
            if live.last().is_some_and(|k| u64::from(k.id) >= id) {
                return Err(Error::corrupt(
                    at,
                    format!("keyspace id {id} out of order (ids increase)"),
                ));
            }
            let at = c.offset();
            let len = c.len(max, "keyspace name length")?;
            if len == 0 || len > MAX_NAME_BYTES {
                return Err(Error::corrupt(
                    at,
                    format!("keyspace name of {len} bytes (1 to {MAX_NAME_BYTES})"),
                ));
            }
            let name_at = c.offset();
            let name = std::str::from_utf8(c.bytes(len, "keyspace name")?)
                .map_err(|_| Error::corrupt(name_at, "keyspace name is not UTF-8"))?
                .to_string();
            if live.iter().any(|k| k.name == name) {
                return Err(Error::corrupt(
                    name_at,
                    format!("keyspace name {name:?} recorded twice"),
                ));
            }
            let log_number = c.varint("keyspace log number")?;
            let policy_at = c.offset();
            let policy = decode_policy(Cursor::new(c.bytes(10, "keyspace policy")?, policy_at))?;
            let at = c.offset();
            let compression = compression_of(c.u8("keyspace compression")?)
                .ok_or_else(|| Error::corrupt(at, "unknown keyspace compression"))?;
            let at = c.offset();
            let range_bits = c.f64("keyspace range filter bits")?;
            if !range_bits_ok(range_bits) {
                return Err(Error::corrupt(
                    at,
                    format!("keyspace range filters of {range_bits} bits per key"),
                ));
            }
            let count = c.len(max, "keyspace cursor count")?;
            let mut cursors = Vec::new();
            for _ in 0..count {
                let at = c.offset();
                let level = c.varint("keyspace cursor level")?;
                if level >= MAX_LEVELS as u64 {
                    return Err(Error::corrupt(at, format!("cursor level {level}")));
                }
                let len = c.len(max, "cursor key length")?;
                cursors.push((level as u32, c.bytes(len, "cursor key")?.to_vec()));
            }
            let mut compaction_filter = None;
            for p in read_tagged(&mut c, max, "keyspace properties")? {
                match p.tag {
                    PROP_COMPACTION_FILTER => compaction_filter = Some(filter_name(p.payload)?),
                    _ => return Err(unknown_tag(&p, "keyspace property")),
                }
            }
            live.push(KeyspaceRecord {
                id: id as u32,
                name,
                log_number,
                policy,
                compression,
                range_bits,
                cursors,
                compaction_filter,
            });
        }
        if !c.is_empty() {
            return Err(c.err("trailing bytes in the keyspaces property"));
        }
        let ks = Keyspaces { next_id, live };
        if ks.is_empty() {
            return Err(Error::corrupt(
                at,
                "keyspaces property of a store without keyspaces (left out)",
            ));
        }
        Ok(ks)
    }
}

/// The payload of keyspace property 1: a compaction filter's name, 1 to 255 bytes of
/// UTF-8 (the whole payload).
fn filter_name(mut c: Cursor) -> Result<String> {
    let at = c.offset();
    let bytes = c.bytes(c.remaining(), "compaction filter name")?;
    if bytes.is_empty() || bytes.len() > MAX_NAME_BYTES {
        return Err(Error::corrupt(
            at,
            format!(
                "compaction filter name of {} bytes (1 to {MAX_NAME_BYTES})",
                bytes.len()
            ),
        ));
    }
    std::str::from_utf8(bytes)
        .map(str::to_string)
        .map_err(|_| Error::corrupt(at, "compaction filter name is not UTF-8"))
}

/// 0 (no range filters) or a bits-per-key the range filter builder takes.
fn range_bits_ok(bits: f64) -> bool {
    use crate::filter::range::{MAX_BITS_PER_KEY as MAX, MIN_BITS_PER_KEY as MIN};
    bits == 0.0 || (MIN..=MAX).contains(&bits)
}

/// The compression byte of a keyspace record: 0 none, 1 LZ4, 2 zstd.
fn compression_tag(c: Compression) -> u8 {
    match c {
        Compression::None => 0,
        Compression::Lz4 => 1,
        Compression::Zstd => 2,
    }
}

fn compression_of(tag: u8) -> Option<Compression> {
    match tag {
        0 => Some(Compression::None),
        1 => Some(Compression::Lz4),
        2 => Some(Compression::Zstd),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{put_tagged, Manifest, MANIFEST_MAGIC};
    use super::*;

    /// A version-3 manifest written from `format.md`: one L0 table whose table properties
    /// are `table_props`, no cursors, the filter policy and then store property 3 holding
    /// `keyspaces` (when given). Returns the bytes and the file offset of the property's
    /// payload.
    fn manifest(table_props: &[(u64, &[u8])], keyspaces: Option<&[u8]>) -> (Vec<u8>, u64) {
        let mut b = vec![9, 4, 1]; // next_file, log_number, table_count
        b.extend_from_slice(&[0, 5, 0, 0]); // level 0, number 5, no filter, kind none
        b.extend_from_slice(&0.01f64.to_le_bytes());
        b.extend_from_slice(&[3, 0, 100, 1, b'a', 1, b'z']); // entries, tombstones, bytes, keys
        b.push(table_props.len() as u8);
        for (tag, p) in table_props {
            put_tagged(&mut b, *tag, p);
        }
        b.push(0); // cursors
        b.push(1 + u8::from(keyspaces.is_some()));
        put_tagged(
            &mut b,
            1,
            &[2, 0, 0x7b, 0x14, 0xae, 0x47, 0xe1, 0x7a, 0x84, 0x3f],
        );
        let mut at = 0;
        if let Some(k) = keyspaces {
            b.push(3);
            put_varint(&mut b, k.len() as u64);
            at = 16 + b.len() as u64;
            b.extend_from_slice(k);
        }
        let mut out = MANIFEST_MAGIC.to_vec();
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&b).to_le_bytes());
        out.extend_from_slice(&b);
        (out, at)
    }

    /// One keyspace record as `format.md` writes it (no cursors, no properties).
    fn record(id: u8, name: &[u8], compression: u8, range_bits: f64) -> Vec<u8> {
        let mut b = vec![id, name.len() as u8];
        b.extend_from_slice(name);
        b.push(7); // log number
        b.extend_from_slice(&[2, 0]);
        b.extend_from_slice(&0.01f64.to_le_bytes());
        b.push(compression);
        b.extend_from_slice(&range_bits.to_le_bytes());
        b.extend_from_slice(&[0, 0]); // cursors, properties
        b
    }

    fn keyspaces(next_id: u8, records: &[Vec<u8>]) -> Vec<u8> {
        let mut b = vec![next_id, records.len() as u8];
        for r in records {
            b.extend_from_slice(r);
        }
        b
    }

    /// The error of decoding, and its offset.
    fn refused(bytes: &[u8]) -> (String, u64) {
        match Manifest::decode(bytes).unwrap_err() {
            e @ Error::Corruption { offset, .. } => (e.to_string(), offset),
            e => panic!("not corruption: {e}"),
        }
    }

    #[test]
    fn keyspaces_round_trip_and_an_empty_list_is_left_out() {
        let good = keyspaces(4, &[record(1, b"a", 1, 16.0), record(3, b"b", 0, 0.0)]);
        let (bytes, _) = manifest(&[(3, &[3])], Some(&good));
        let m = Manifest::decode(&bytes).unwrap();
        assert_eq!(m.keyspaces.next_id, 4);
        assert_eq!(
            m.keyspaces
                .live
                .iter()
                .map(|k| (k.id, k.name.as_str()))
                .collect::<Vec<_>>(),
            [(1, "a"), (3, "b")]
        );
        assert_eq!(m.tables[0].keyspace, 3);
        assert_eq!(m.encode(), bytes);
        // Without keyspaces the property is absent, so the manifest is as before.
        let mut plain = m.clone();
        plain.keyspaces = Keyspaces::default();
        plain.tables[0].keyspace = 0;
        assert_eq!(plain.encode(), manifest(&[], None).0);
        // Only dropped ids left: the property stays, for the next id.
        plain.keyspaces.next_id = 4;
        let back = Manifest::decode(&plain.encode()).unwrap();
        assert_eq!(back.keyspaces, plain.keyspaces);
    }

    #[test]
    fn hostile_keyspaces_are_refused_at_their_offset() {
        let r = |id, name: &[u8]| record(id, name, 1, 16.0);
        // (payload, offset within it of the refused field, what the error says)
        let cases: Vec<(Vec<u8>, u64, &str)> = vec![
            (keyspaces(0, &[]), 0, "next keyspace id 0"),
            (keyspaces(1, &[]), 0, "without keyspaces"),
            (keyspaces(3, &[r(0, b"a")]), 2, "keyspace id 0"),
            (keyspaces(3, &[r(3, b"a")]), 2, "keyspace id 3"),
            (
                keyspaces(4, &[r(2, b"a"), r(1, b"b")]),
                2 + 25,
                "out of order",
            ),
            (
                keyspaces(4, &[r(1, b"a"), r(2, b"a")]),
                2 + 25 + 2,
                "recorded twice",
            ),
            (keyspaces(3, &[r(1, b"")]), 3, "name of 0 bytes"),
            (keyspaces(3, &[r(1, &[0xff])]), 4, "not UTF-8"),
            (keyspaces(3, &[record(1, b"a", 9, 16.0)]), 16, "compression"),
            (keyspaces(3, &[record(1, b"a", 1, 1.0)]), 17, "bits per key"),
            (
                keyspaces(3, &[record(1, b"a", 1, f64::NAN)]),
                17,
                "bits per key",
            ),
        ];
        for (payload, off, what) in cases {
            let (bytes, at) = manifest(&[], Some(&payload));
            let (e, offset) = refused(&bytes);
            assert!(e.contains(what), "{what}: {e}");
            assert_eq!(offset, at + off, "{what}: {e}");
        }
        // A keyspace property this version does not know (1 is the compaction filter), a
        // trailing byte, a cut-short record.
        let mut p = keyspaces(3, &[r(1, b"a")]);
        let n = p.len();
        p[n - 1] = 1;
        p.extend_from_slice(&[2, 0]);
        let (bytes, at) = manifest(&[], Some(&p));
        assert_eq!(refused(&bytes).1, at + n as u64, "{}", refused(&bytes).0);
        let mut p = keyspaces(3, &[r(1, b"a")]);
        p.push(0);
        assert!(refused(&manifest(&[], Some(&p)).0).0.contains("trailing"));
        let p = keyspaces(3, &[r(1, b"a")]);
        for cut in 1..p.len() {
            let _ = refused(&manifest(&[], Some(&p[..cut])).0);
        }
        // Table property 3: not 0, and only a live keyspace's.
        let live = keyspaces(4, &[r(1, b"a")]);
        let (bytes, _) = manifest(&[(3, &[0])], Some(&live));
        assert!(refused(&bytes).0.contains("keyspace id 0"));
        for dead in [2u8, 3, 4] {
            let (bytes, _) = manifest(&[(3, &[dead])], Some(&live));
            let (e, offset) = refused(&bytes);
            assert!(e.contains("not live"), "{e}");
            assert_eq!(offset, 16 + 25, "the table's property payload: {e}");
        }
        let (bytes, _) = manifest(&[(3, &[1])], None);
        assert!(refused(&bytes).0.contains("not live"));
    }

    /// One keyspace record with the properties `props` (tag, payload).
    fn record_with(props: &[(u64, &[u8])]) -> Vec<u8> {
        let mut b = record(1, b"a", 1, 16.0);
        b.pop();
        put_varint(&mut b, props.len() as u64);
        for (tag, p) in props {
            put_tagged(&mut b, *tag, p);
        }
        b
    }

    #[test]
    fn a_compaction_filter_name_round_trips_and_hostile_ones_are_refused() {
        let payload = keyspaces(2, &[record_with(&[(1, b"expire-sessions")])]);
        let (bytes, _) = manifest(&[], Some(&payload));
        let m = Manifest::decode(&bytes).unwrap();
        let name = m.keyspaces.live[0].compaction_filter.as_deref();
        assert_eq!(name, Some("expire-sessions"));
        assert_eq!(m.encode(), bytes, "one encoding");
        let mut none = m.clone();
        none.keyspaces.live[0].compaction_filter = None;
        let plain = manifest(&[], Some(&keyspaces(2, &[record(1, b"a", 1, 16.0)]))).0;
        assert_eq!(
            none.encode(),
            plain,
            "no filter: no property, the bytes of before"
        );
        let long = vec![b'f'; MAX_NAME_BYTES + 1];
        let max = vec![b'f'; MAX_NAME_BYTES];
        let (bytes, _) = manifest(&[], Some(&keyspaces(2, &[record_with(&[(1, &max)])])));
        assert!(Manifest::decode(&bytes).is_ok(), "{MAX_NAME_BYTES} bytes");
        // The record's property count is 26 bytes into the payload (next_id, count, then
        // 24 bytes of the record); the first tag follows it, its length, its payload.
        let props = 2 + 24;
        type Props<'a> = Vec<(u64, &'a [u8])>;
        let cases: Vec<(Props, u64, &str)> = vec![
            (vec![(1, b"")], props + 3, "name of 0 bytes"),
            (vec![(1, &long)], props + 4, "name of 256 bytes"),
            (vec![(1, b"\xff")], props + 3, "not UTF-8"),
            (vec![(1, b"f"), (1, b"g")], props + 4, "out of order"),
            (
                vec![(1, b"f"), (7, b"g")],
                props + 4,
                "unknown keyspace property tag 7",
            ),
        ];
        for (p, off, what) in cases {
            let (bytes, at) = manifest(&[], Some(&keyspaces(2, &[record_with(&p)])));
            let (e, offset) = refused(&bytes);
            assert!(e.contains(what), "{what}: {e}");
            assert_eq!(offset, at + off, "{what}: {e}");
        }
        // Cut anywhere inside the property: refused, never a shorter name.
        let p = keyspaces(2, &[record_with(&[(1, b"expire-sessions")])]);
        for cut in props as usize..p.len() {
            let _ = refused(&manifest(&[], Some(&p[..cut])).0);
        }
    }
}
