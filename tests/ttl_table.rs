//! Table format version 5 (values tagged with their expiry): the checked-in fixture
//! `tests/fixtures/table-v5-expiring.sst` decodes to its entries and today's writer
//! reproduces it byte for byte; damaged value tags are errors naming the file and offset.

use std::path::Path;

use filterstore::io::RealFs;
use filterstore::table::{
    decode_footer, write_table, SortedEntries, Table, TableCounters, FOOTER_LEN,
};
use filterstore::Error;

/// The fixture's entries: 60 keys, values of 100 bytes, every fifth a tombstone, every third
/// value expiring at `EPOCH + i` seconds.
const EPOCH: u64 = 1_800_000_000_000;

struct Entries(Vec<(Vec<u8>, Option<Vec<u8>>, u64)>);

fn entries() -> Entries {
    Entries(
        (0..60u64)
            .map(|i| {
                let key = format!("ttl-{i:03}").into_bytes();
                let value = (i % 5 != 4).then(|| vec![b'a' + (i % 26) as u8; 100]);
                let exp = if value.is_some() && i % 3 == 0 {
                    EPOCH + i * 1000
                } else {
                    0
                };
                (key, value, exp)
            })
            .collect(),
    )
}

impl SortedEntries for Entries {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn entry(&self, i: usize) -> (&[u8], Option<&[u8]>) {
        (&self.0[i].0, self.0[i].1.as_deref())
    }
    fn payload_bytes(&self) -> usize {
        self.0
            .iter()
            .map(|(k, v, _)| k.len() + v.as_ref().map_or(0, Vec::len))
            .sum()
    }
    fn expires(&self, i: usize) -> u64 {
        self.0[i].2
    }
    fn tagged(&self) -> bool {
        true
    }
}

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/table-v5-expiring.sst")
}

#[test]
fn checked_in_expiring_table_decodes_and_is_reproduced() {
    let want = entries();
    let tmp = tempfile::tempdir().unwrap();
    let fresh = tmp.path().join("000001.sst");
    write_table(&RealFs, &fresh, &want, filterstore::Compression::None).unwrap();
    if std::env::var_os("FILTERSTORE_WRITE_FIXTURES").is_some() {
        std::fs::copy(&fresh, fixture()).unwrap();
    }
    let bytes = std::fs::read(fixture()).unwrap();
    let at = bytes.len() - FOOTER_LEN;
    let footer = decode_footer(bytes[at..].try_into().unwrap(), at as u64).unwrap();
    assert_eq!(footer.version, 5);
    let expiring: Vec<_> = want.0.iter().filter(|e| e.2 != 0).collect();
    for mmap_reads in [false, true] {
        let t = Table::open(&fixture(), mmap_reads).unwrap();
        let c = TableCounters::default();
        let all: Vec<_> = (0..t.block_count())
            .flat_map(|i| t.block_entries_exp(i, &c).unwrap())
            .map(|((k, v), e)| (k, v, e))
            .collect();
        assert!(all == want.0, "the fixture decodes to other entries");
        for (k, v, _) in &want.0 {
            assert_eq!(
                t.get(k, &c).unwrap(),
                Some(v.as_deref().map(filterstore::Slice::from))
            );
        }
        let m = &t.meta;
        assert_eq!(
            (m.entries, m.tombstones, m.expiring),
            (60, 12, expiring.len() as u64)
        );
        let bytes: u64 = expiring
            .iter()
            .map(|(k, v, _)| (k.len() + v.as_ref().unwrap().len()) as u64)
            .sum();
        assert_eq!(m.expiring_bytes, bytes);
        assert_eq!(
            (m.earliest_expiry, m.latest_expiry),
            (EPOCH, EPOCH + 57_000)
        );
    }
    assert!(
        std::fs::read(&fresh).unwrap() == bytes,
        "today's writer no longer reproduces table-v5-expiring.sst"
    );
}

/// The fixture with the first value's tag (entry 0 of block 0: `0, 7, vtag, "ttl-000"`,
/// then the tag at byte 10) set to `tag`, and `cut` bytes of its expiry claimed away from
/// the value by a shorter `vtag`, the block's CRC made again.
fn damaged(dir: &Path, tag: u8, vtag: Option<u8>) -> std::path::PathBuf {
    let mut b = std::fs::read(fixture()).unwrap();
    let t = Table::open(&fixture(), false).unwrap();
    let (off, len) = t.block_span(0).unwrap();
    let (off, len) = (off as usize, len as usize);
    assert_eq!(&b[off + 3..off + 10], b"ttl-000");
    b[off + 10] = tag;
    if let Some(v) = vtag {
        // A payload of v - 1 bytes: the rest of the old one reads as the next entry, so
        // only the first lookup is sure to reach the tag; enough for the check.
        b[off + 2] = v;
    }
    let crc = crc32fast::hash(&b[off..off + len]);
    b[off + len..off + len + 4].copy_from_slice(&crc.to_le_bytes());
    let path = dir.join(format!("00000{tag}.sst"));
    std::fs::write(&path, b).unwrap();
    path
}

#[test]
fn damaged_value_tags_are_errors_naming_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    for (tag, vtag, what) in [
        (7u8, None, "unknown value tag 7"),
        (1, Some(6), "shorter than its expiry"),
    ] {
        let path = damaged(tmp.path(), tag, vtag);
        let t = Table::open(&path, false).unwrap();
        let c = TableCounters::default();
        for e in [
            t.get(b"ttl-000", &c).unwrap_err(),
            t.block_entries(0, &c).unwrap_err(),
        ] {
            let shown = e.to_string();
            assert!(shown.contains(what), "{shown}");
            match e {
                Error::Corruption { file, offset, .. } => {
                    assert_eq!(file, path);
                    assert_eq!(offset, t.block_span(0).unwrap().0, "the block's offset");
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
