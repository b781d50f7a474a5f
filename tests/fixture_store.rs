//! Checked-in store directories must keep decoding to the same contents: if the readers of
//! the WAL, table, filter or manifest layout drift, this test fails. `tests/fixtures/store-v9/`
//! is what the current code writes (a version 3 log: a commit sequence number per record, a
//! keyspace id per op; manifest version 3: the store's filter policy, Monkey's
//! allocation of cuckoo filters, and the last commit sequence number among its tagged
//! properties, and each table's range filter
//! file (`NNNNNN.range`, 16 bits per key) as table property 1; the older table in L1, the
//! newer in L0; table format version 4: a codec byte after every data block, blocks stored
//! as LZ4 blocks of their split form (codec 3) where that saves an eighth, a restart point
//! at every index entry). The older fixtures hold the same store as written before, and must
//! still open: `store-v8/` (a version 2 log, no sequence number in the manifest),
//! `store-v7/` (also LZ4 blocks of the block as it is, codec 1), and, keeping the policy
//! they had (uniform at their recorded kind and rate) and no range filters: `store-v6/`
//! (no table properties), `store-v5/` (manifest version 2),
//! `store-v4/` (also table format 3: no codec bytes, page-aligned blocks), `store-v3/` (also
//! table format 2), `store-v2/` (also manifest version 1, both tables in L0) and `store-v1/`
//! (also table format 1, blocks back to back). `tests/fixtures/table-v4-split.sst` is one
//! table of format 4 holding both raw and LZ4 blocks (codec 3), `table-v4-zstd.sst` the same
//! entries with zstd blocks (codec 2); each decodes to known entries and today's writer
//! reproduces it byte for byte (the zstd one in builds with the `zstd` feature; without it,
//! its zstd blocks are an error naming the file). `table-v4-mixed.sst` holds the same
//! entries in raw and codec-1 LZ4 blocks, `table-v4-zstd-padded.sst` in zstd blocks padded
//! to the page like raw ones, and both must still decode to them. `table-v4-mixed-page-blocks.sst` and
//! `table-v4-zstd-page-blocks.sst` hold the same entries as written when raw blocks were cut
//! at 4 KiB like compressed ones, and must still decode to them.
//!
//! Regenerate the current ones (only after a deliberate format change, with `format.md`
//! updated in the same commit): `FILTERSTORE_WRITE_FIXTURES=1 cargo test --release --test
//! fixture_store`.

use std::path::{Path, PathBuf};

use filterstore::io::RealFs;
use filterstore::manifest::Manifest;
use filterstore::table::{decode_footer, write_table, Table, TableCounters, FOOTER_LEN};
use filterstore::{Compression, FilterKind, FilterPolicy, Options, Store, SyncPolicy};

/// The store fixture `store-v{n}`.
fn fixture_dir(n: u32) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/store-v{n}"))
}

/// The fixture the current code writes.
const CURRENT: u32 = 9;

/// Per fixture: its table format version, the level of its older table, and its manifest
/// version.
fn fixture_facts(n: u32) -> (u32, u32, u32) {
    match n {
        1 => (1, 0, 1),
        2 => (2, 0, 1),
        3 => (2, 1, 2),
        4 => (3, 1, 2),
        5 => (4, 1, 2),
        6..=8 => (4, 1, 3),
        _ => (
            filterstore::table::TABLE_VERSION,
            1,
            filterstore::manifest::MANIFEST_VERSION,
        ),
    }
}

/// The filter policy fixture `n` records: what the current code's writer leaves (Monkey's
/// allocation of cuckoo filters at the memory of 1 % on every table), or for the fixtures
/// written before policies were recorded, uniform at the kind and rate the store was created
/// with.
fn fixture_policy(n: u32) -> FilterPolicy {
    if n >= 6 {
        FilterPolicy::monkey_at(FilterKind::Cuckoo, 0.01)
    } else {
        FilterPolicy::Uniform {
            kind: FilterKind::Bloom,
            fpr: 0.01,
        }
    }
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 7) as usize)).into_bytes()
}

fn write_fixture(dir: &Path) {
    let o = Options::default()
        .filter(FilterKind::Bloom)
        .fpr(0.01)
        .sync(SyncPolicy::EveryWrite)
        .compaction_trigger(None);
    let store = Store::open(dir, o).unwrap();
    for i in 0..300u32 {
        store
            .put(format!("key-{i:04}").as_bytes(), value(i))
            .unwrap();
    }
    store.flush().unwrap();
    // One table, no tombstones: a full compaction moves it to L1 without rewriting it.
    store.compact().unwrap();
    store.refilter(FilterKind::Bloom, 0.01).unwrap();
    for i in (0..300u32).step_by(3) {
        store.delete(format!("key-{i:04}").as_bytes()).unwrap();
    }
    store.flush().unwrap();
    // Every filter rebuilt as cuckoo under Monkey's allocation, which the store records.
    let r = store
        .rebalance(FilterPolicy::monkey_at(FilterKind::Cuckoo, 0.01))
        .unwrap();
    assert_eq!(r.rebuilt.len(), 2);
    for i in 300..310u32 {
        store
            .put(format!("key-{i:04}").as_bytes(), value(i))
            .unwrap();
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
}

#[test]
fn checked_in_store_decodes() {
    if std::env::var_os("FILTERSTORE_WRITE_FIXTURES").is_some() {
        let fixture = || fixture_dir(CURRENT);
        let _ = std::fs::remove_dir_all(fixture());
        let tmp = tempfile::tempdir().unwrap();
        write_fixture(tmp.path());
        std::fs::create_dir_all(fixture()).unwrap();
        for e in std::fs::read_dir(tmp.path()).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().unwrap() != "LOCK" {
                std::fs::copy(&p, fixture().join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    for n in [1, 2, 3, 4, 5, 6, 7, 8, CURRENT] {
        check_fixture(n);
    }
}

fn check_fixture(n: u32) {
    let fixture = || fixture_dir(n);
    let (version, older_level, manifest_version) = fixture_facts(n);
    // The manifest, byte for byte as decoded.
    let bytes = std::fs::read(fixture().join("MANIFEST")).unwrap();
    assert_eq!(bytes[4..8], manifest_version.to_le_bytes(), "fixture {n}");
    let m = Manifest::decode(&bytes).unwrap();
    assert_eq!(m.policy, fixture_policy(n), "fixture {n}");
    // From fixture 9 on, the manifest records the last commit sequence number (400 writes
    // when the last flush wrote it) and the log is version 3 (10 more, numbered 401..=410).
    assert_eq!(m.last_seq, if n >= 9 { 400 } else { 0 }, "fixture {n}");
    let log = std::fs::read_dir(fixture())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "wal"))
        .unwrap();
    let wal = std::fs::read(&log).unwrap();
    assert_eq!(
        wal[4],
        if n >= 9 { 3 } else { 2 },
        "fixture {n}: log version"
    );
    if manifest_version >= 3 {
        assert_eq!(m.encode(), bytes, "fixture {n} re-encodes byte for byte");
    }
    assert_eq!(m.tables.len(), 2);
    let (newer, older) = (&m.tables[0], &m.tables[1]);
    assert_eq!((newer.entries, newer.tombstones), (100, 100));
    assert_eq!((older.entries, older.tombstones), (300, 0));
    assert!(m
        .tables
        .iter()
        .all(|t| t.filter_kind == FilterKind::Cuckoo && t.filter_file != 0));
    assert_eq!(older.min_key, b"key-0000");
    assert_eq!(older.max_key, b"key-0299");
    assert_eq!(newer.max_key, b"key-0297");
    assert_eq!((newer.level, older.level), (0, older_level), "fixture {n}");
    // Range filters: each table's in its own file from fixture 7 on, none before.
    for t in &m.tables {
        match t.range {
            Some(r) => {
                assert!(n >= 7, "fixture {n}");
                assert_eq!(r.bits_per_key, 16.0);
                let b = std::fs::read(fixture().join(format!("{:06}.range", r.file))).unwrap();
                let f = filterstore::filter::range::RangeFilter::decode(&b).unwrap();
                assert_eq!(f.header().keys, t.entries);
                assert_eq!(f.prefix(), b"key-0");
                assert!(f.may_intersect(t.min_key.as_slice()..=t.min_key.as_slice()));
                // Past the largest key, and between two keys of the older table.
                assert!(!f.may_intersect(b"key-0300".as_slice()..b"key-0400".as_slice()));
                assert!(!f.may_intersect(b"key-0001a".as_slice()..b"key-0001z".as_slice()));
            }
            None => assert!(n < 7, "fixture {n}"),
        }
    }

    // The older table decoded directly, block by block, with both ways of reading blocks.
    let older_path = fixture().join(format!("{:06}.sst", older.number));
    let bytes = std::fs::read(&older_path).unwrap();
    let at = bytes.len() - FOOTER_LEN;
    let footer = decode_footer(bytes[at..].try_into().unwrap(), at as u64).unwrap();
    assert_eq!(footer.version, version, "fixture {n}");
    for mmap_reads in [false, true] {
        let t = Table::open(&older_path, mmap_reads).unwrap();
        assert_eq!(t.meta.entries, 300);
        assert_eq!(t.meta.file_bytes, older.file_bytes);
        if (2..4).contains(&version) {
            for i in 0..t.block_count() {
                let (offset, _) = t.block_span(i).unwrap();
                assert_eq!(offset % 4096, 0, "block {i} starts on a page boundary");
            }
        }
        if version >= 4 {
            // "key-NNNN" and "value-N-xxx" compress: every block is stored LZ4-compressed,
            // as it is (codec 1) up to fixture 7, its split form (codec 3) from fixture 8 on.
            let lz4 = if n >= 8 { 3 } else { 1 };
            for i in 0..t.block_count() {
                let (offset, len) = t.block_span(i).unwrap();
                let codec = bytes[(offset + len as u64 - 1) as usize];
                assert_eq!(codec, lz4, "block {i} is LZ4");
            }
            assert!(
                3 * t.meta.stored_data_bytes < 2 * t.meta.data_bytes,
                "{:?}",
                t.meta
            );
        } else {
            assert_eq!(t.meta.stored_data_bytes, t.meta.data_bytes);
        }
        let c = TableCounters::default();
        let all: Vec<_> = (0..t.block_count())
            .flat_map(|i| t.block_entries(i, &c).unwrap())
            .collect();
        assert_eq!(all.len(), 300);
        for (i, (k, v)) in all.iter().enumerate() {
            assert_eq!(k, format!("key-{i:04}").as_bytes());
            assert_eq!(v.as_deref(), Some(value(i as u32).as_slice()));
        }
        assert_eq!(c.block_reads(), t.block_count() as u64);
    }

    // The whole store through the library: tables, filters and the WAL's unflushed writes.
    for mmap_reads in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        copy_dir(&fixture(), tmp.path());
        let opts = Options::default().mmap_reads(mmap_reads);
        let store = Store::open(tmp.path(), opts).unwrap();
        // Version 2 logs are numbered in replay order after the manifest's number (none).
        let seq = if n >= 9 { 410 } else { 10 };
        assert_eq!(store.last_seq(), seq, "fixture {n}");
        for i in 0..310u32 {
            let want = (i >= 300 || i % 3 != 0).then(|| value(i));
            assert_eq!(
                store
                    .get(format!("key-{i:04}").as_bytes())
                    .unwrap()
                    .map(Vec::from),
                want,
                "key {i}"
            );
        }
        assert_eq!(store.scan::<&[u8]>(..).count(), 200 + 10);
        // Backward, the same entries in reverse (every block form of every version).
        let fwd: Vec<_> = store.scan::<&[u8]>(..).map(Result::unwrap).collect();
        let rev: Vec<_> = store.scan::<&[u8]>(..).rev().map(Result::unwrap).collect();
        assert!(fwd.iter().rev().eq(rev.iter()), "fixture {n}: reverse scan");
        let levels: Vec<u32> = store.stats().tables.iter().map(|t| t.level).collect();
        assert_eq!(levels, vec![0, older_level], "fixture {n}");
        // A range between two keys: with range filters, no table is read.
        let before = store.stats();
        assert_eq!(
            store
                .scan(b"key-0001a".as_slice()..b"key-0001z".as_slice())
                .count(),
            0
        );
        let s = store.stats();
        let ranged = s.tables.iter().filter(|t| t.range_filter_bytes > 0).count();
        assert_eq!(ranged, if n >= 7 { 2 } else { 0 }, "fixture {n}");
        assert_eq!(s.range_skipped - before.range_skipped, ranged as u64);
        // The store keeps the policy it had, and so does the manifest its next change
        // writes (as the current version).
        assert_eq!(store.recorded_policy(), fixture_policy(n), "fixture {n}");
        assert_eq!(store.policy(), fixture_policy(n), "fixture {n}");
        store.flush().unwrap();
        drop(store);
        let bytes = std::fs::read(tmp.path().join("MANIFEST")).unwrap();
        let m = Manifest::decode(&bytes).unwrap();
        assert_eq!(
            m.last_seq, seq,
            "fixture {n}: the flush records the sequence"
        );
        assert_eq!(
            bytes[4..8],
            filterstore::manifest::MANIFEST_VERSION.to_le_bytes()
        );
        assert_eq!(m.policy, fixture_policy(n), "fixture {n}");
        let store = Store::open(tmp.path(), Options::default()).unwrap();
        assert_eq!(store.recorded_policy(), fixture_policy(n), "fixture {n}");
        assert_eq!(
            store.last_seq(),
            seq,
            "fixture {n}: no log left, the manifest's"
        );
        store.put(b"after", b"reopen").unwrap();
        assert_eq!(store.last_seq(), seq + 1, "fixture {n}");
    }
    assert!(filterstore::verify::verify_dir(&fixture())
        .unwrap()
        .is_intact());
}

/// The entries of `table-v4-mixed.sst`: 120 keys, values of 200 bytes, compressible (one
/// letter repeated) for keys 0..40 and 80..120, pseudo-random for 40..80, so that some
/// blocks are stored LZ4-compressed and others raw; every seventh key a tombstone.
fn mixed_entries() -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    (0..120u64)
        .map(|i| {
            let key = format!("mixed-{i:03}").into_bytes();
            let value: Vec<u8> = if (40..80).contains(&i) {
                let mut x = i;
                (0..200)
                    .map(|_| {
                        x = filterstore::hash::mix64(x.wrapping_add(0x9e37));
                        x as u8
                    })
                    .collect()
            } else {
                vec![b'a' + (i % 26) as u8; 200]
            };
            (key, (i % 7 != 3).then_some(value))
        })
        .collect()
}

/// `tests/fixtures/table-v4-split.sst`: the entries of [`mixed_entries`] written with LZ4
/// as today's writer does, its compressible blocks LZ4 blocks of their split form (codec 3).
#[test]
fn checked_in_split_table_decodes_and_is_reproduced() {
    check_codec_fixture("table-v4-split.sst", Compression::Lz4, 3, true);
}

/// `tests/fixtures/table-v4-mixed.sst`: the same entries as written when LZ4 compressed the
/// block as it is (codec 1); still decoded.
#[test]
fn checked_in_mixed_table_decodes() {
    check_codec_fixture("table-v4-mixed.sst", Compression::Lz4, 1, false);
}

/// `tests/fixtures/table-v4-mixed-page-blocks.sst` and `table-v4-zstd-page-blocks.sst`: the
/// same entries, written when every block was cut at a page (4 KiB) before compression,
/// raw ones included; they still decode to them.
#[test]
fn checked_in_tables_with_page_blocks_decode() {
    check_codec_fixture("table-v4-mixed-page-blocks.sst", Compression::Lz4, 1, false);
    #[cfg(feature = "zstd")]
    check_codec_fixture("table-v4-zstd-page-blocks.sst", Compression::Zstd, 2, false);
}

/// `tests/fixtures/table-v4-zstd-padded.sst`: the zstd table as written when compressed
/// blocks were followed by padding to the page like raw ones; still decoded.
#[cfg(feature = "zstd")]
#[test]
fn checked_in_zstd_table_with_padded_blocks_decodes() {
    check_codec_fixture("table-v4-zstd-padded.sst", Compression::Zstd, 2, false);
}

/// `tests/fixtures/table-v4-zstd.sst`: the entries of [`mixed_entries`] written with zstd
/// (codec 2), so that the compressible blocks are stored zstd-compressed and the others raw.
/// With the `zstd` feature it decodes to those entries and today's writer reproduces it byte
/// for byte.
#[cfg(feature = "zstd")]
#[test]
fn checked_in_zstd_table_decodes_and_is_reproduced() {
    check_codec_fixture("table-v4-zstd.sst", Compression::Zstd, 2, true);
}

/// The checked-in table `name`, the entries of [`mixed_entries`] written with
/// `compression`: its blocks are stored raw (codec 0) or with `codec`, it decodes to those
/// entries with pread and with mapped reads, and (with `reproduce`) today's writer
/// reproduces it byte for byte (where blocks are cut, which compress, and the codec's
/// bytes, are pinned too).
fn check_codec_fixture(name: &str, compression: Compression, codec: u8, reproduce: bool) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let want = mixed_entries();
    let view: Vec<(&[u8], Option<&[u8]>)> = want
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_deref()))
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let fresh = tmp.path().join("000001.sst");
    write_table(&RealFs, &fresh, view.as_slice(), compression).unwrap();
    if reproduce && std::env::var_os("FILTERSTORE_WRITE_FIXTURES").is_some() {
        std::fs::copy(&fresh, &path).unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - FOOTER_LEN;
    let footer = decode_footer(bytes[at..].try_into().unwrap(), at as u64).unwrap();
    assert_eq!(footer.version, 4);
    for mmap_reads in [false, true] {
        let t = Table::open(&path, mmap_reads).unwrap();
        let codecs: Vec<u8> = (0..t.block_count())
            .map(|i| {
                let (offset, len) = t.block_span(i).unwrap();
                bytes[(offset + len as u64 - 1) as usize]
            })
            .collect();
        assert!(codecs.contains(&0) && codecs.contains(&codec), "{codecs:?}");
        assert!(codecs.iter().all(|&c| c == 0 || c == codec), "{codecs:?}");
        let c = TableCounters::default();
        let all: Vec<_> = (0..t.block_count())
            .flat_map(|i| t.block_entries(i, &c).unwrap())
            .collect();
        assert!(all == want, "the fixture decodes to other entries");
        for (k, v) in &want {
            assert_eq!(
                t.get(k, &c).unwrap().map(|v| v.map(Vec::from)),
                Some(v.clone())
            );
        }
        assert_eq!((t.meta.entries, t.meta.tombstones), (120, 17));
        assert!(t.meta.stored_data_bytes < t.meta.data_bytes);
    }
    assert!(
        !reproduce || std::fs::read(&fresh).unwrap() == bytes,
        "today's writer no longer reproduces {name}"
    );
}

/// Without the `zstd` feature the same fixture opens, its raw blocks read, and a lookup in
/// a zstd block is an [`filterstore::Error::Unsupported`] naming the file and the block.
#[cfg(not(feature = "zstd"))]
#[test]
fn a_zstd_table_without_the_feature_is_an_error_naming_the_file() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/table-v4-zstd.sst");
    let t = Table::open(&path, false).unwrap();
    let c = TableCounters::default();
    let (mut raw, mut unsupported) = (0, 0);
    for (k, v) in mixed_entries() {
        match t.get(&k, &c) {
            Ok(got) => {
                assert_eq!(got.map(|g| g.map(Vec::from)), Some(v));
                raw += 1;
            }
            Err(e @ filterstore::Error::Unsupported { .. }) => {
                let shown = e.to_string();
                assert!(shown.contains("table-v4-zstd.sst"), "{shown}");
                assert!(shown.contains("`zstd` feature"), "{shown}");
                unsupported += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(raw > 0 && unsupported > 0, "{raw} {unsupported}");
}

/// `tests/fixtures/wal-v2-reserved.wal` (made from `format.md`, not by the writer): three
/// records, then 4096 zero bytes, space reserved ahead of the records. The zeros are the
/// log's end, not a torn tail; a byte other than zero among them makes them one.
#[test]
fn a_log_ending_in_reserved_zeros_replays_without_a_torn_tail() {
    use filterstore::wal::replay_bytes;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/wal-v2-reserved.wal");
    let bytes = std::fs::read(path).unwrap();
    let mut ops = Vec::new();
    let end = replay_bytes(&bytes, |k, v| ops.push((k, v))).unwrap();
    let op = |k: &str, v: Option<&str>| (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec()));
    let value3 = format!("value-3-{}", "x".repeat(20));
    assert_eq!(
        ops,
        [
            op("key-1", Some("value-1")),
            op("key-2", Some("value-2")),
            op("key-1", None),
            op("key-3", Some(&value3)),
        ]
    );
    assert_eq!((end.records, end.valid_len, end.torn_tail), (3, 120, None));
    assert_eq!(bytes.len(), 120 + 4096);
    let mut torn = bytes.clone();
    torn[120 + 4000] = 1;
    let t = replay_bytes(&torn, |_, _| {}).unwrap().torn_tail.unwrap();
    assert_eq!((t.offset, t.len), (120, 4096));
}

/// `tests/fixtures/wal-v3-ops.wal` (made from `format.md`, "Write-ahead log", by a script,
/// not by the writer): records of sequence numbers 5, 6 (a batch of a put and a delete) and
/// 9, keyspace 0, a value whose length takes a two-byte varint, then 64 reserved zero bytes.
/// It replays to its ops and its last number, and a store whose log it is goes on from 9.
#[test]
fn a_version_3_log_replays_with_its_sequence_numbers() {
    use filterstore::wal::replay_bytes;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/wal-v3-ops.wal");
    let bytes = std::fs::read(&path).unwrap();
    let mut ops = Vec::new();
    let end = replay_bytes(&bytes, |k, v| ops.push((k, v))).unwrap();
    let op = |k: &str, v: Option<&str>| (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec()));
    let value3 = format!("value-3-{}", "x".repeat(200));
    assert_eq!(
        ops,
        [
            op("key-1", Some("value-1")),
            op("key-2", Some("value-2")),
            op("key-1", None),
            op("key-3", Some(&value3)),
        ]
    );
    assert_eq!((end.version, end.last_seq, end.records), (3, Some(9), 3));
    assert_eq!((end.valid_len, end.torn_tail), (329, None));
    // As a store's log: recovered, numbered from there.
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path(), Options::default()).unwrap());
    std::fs::copy(&path, dir.path().join("000099.wal")).unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    assert_eq!(store.last_seq(), 9);
    assert_eq!(store.get(b"key-1").unwrap(), None);
    assert_eq!(
        store.get(b"key-3").unwrap().map(Vec::from),
        Some(value3.into_bytes())
    );
    store.put(b"key-4", b"v").unwrap();
    assert_eq!(store.last_seq(), 10);
}

/// `tests/fixtures/manifest-v3-keyspaces.bin` (made from `format.md`, "Manifest",
/// "Keyspaces", by `scripts/make-keyspaces-fixture.py`, not by the writer): keyspaces in the
/// manifest (store property 3, table property 3). It decodes to what the script wrote, the
/// encoder reproduces it byte for byte; a read-only open refuses it naming the MANIFEST;
/// a writer opens it (without its tables, whose files the fixture lacks) with both live
/// keyspaces, under their ids, and hands out the next id.
#[test]
fn a_manifest_with_keyspaces_decodes_and_opens() {
    use filterstore::manifest::{KeyspaceRecord, Keyspaces};
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifest-v3-keyspaces.bin");
    let bytes = std::fs::read(&path).unwrap();
    let m = Manifest::decode(&bytes).unwrap();
    assert_eq!((m.next_file, m.log_number, m.last_seq), (12, 5, 42));
    assert_eq!(
        m.tables
            .iter()
            .map(|t| (t.number, t.keyspace))
            .collect::<Vec<_>>(),
        [(8, 0), (10, 3)]
    );
    let expected = Keyspaces {
        next_id: 4,
        live: vec![
            KeyspaceRecord {
                id: 1,
                name: "users".into(),
                log_number: 7,
                policy: FilterPolicy::Uniform {
                    kind: FilterKind::BlockedBloom,
                    fpr: 0.01,
                },
                compression: Compression::Lz4,
                range_bits: 16.0,
                cursors: vec![],
                compaction_filter: None,
            },
            KeyspaceRecord {
                id: 3,
                name: "by-email".into(),
                log_number: 9,
                policy: FilterPolicy::Budget {
                    kind: FilterKind::Bloom,
                    bits_per_key: 10.0,
                },
                compression: Compression::Zstd,
                range_bits: 0.0,
                cursors: vec![(1, b"km".to_vec())],
                compaction_filter: None,
            },
        ],
    };
    assert_eq!(m.keyspaces, expected);
    assert_eq!(m.encode(), bytes, "the encoder writes what format.md says");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&path, dir.path().join("MANIFEST")).unwrap();
    // The fixture's tables have no files: opened without them.
    let mut m = m;
    m.tables.clear();
    std::fs::write(dir.path().join("MANIFEST"), m.encode()).unwrap();
    // A read-only handle serves the keyspaces (and creates none).
    let mut opts = Options::default();
    opts.read_only = true;
    let ro = Store::open(dir.path(), opts).unwrap();
    assert_eq!(ro.keyspaces(), ["users", "by-email"]);
    assert_eq!(ro.existing_keyspace("by-email").unwrap().id(), 3);
    assert!(ro.keyspace("new").is_err());
    drop(ro);
    // So does a writer.
    let store = Store::open(dir.path(), Options::default()).unwrap();
    assert_eq!(store.keyspaces(), ["users", "by-email"]);
    let by_email = store.keyspace("by-email").unwrap();
    assert_eq!(by_email.id(), 3);
    by_email.put("ann@example.com", "u1").unwrap();
    assert_eq!(
        store.keyspace("new").unwrap().id(),
        4,
        "ids 1 to 3 were handed out"
    );
    drop(by_email);
    store.close().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let by_email = store.keyspace("by-email").unwrap();
    assert_eq!(by_email.get("ann@example.com").unwrap().unwrap(), b"u1"[..]);
}

/// A store whose keyspaces were all dropped (next id 3, none live) opens, takes writes,
/// and keeps its next id through the manifests it writes: ids are never handed out again.
#[test]
fn dropped_keyspace_ids_survive_manifest_rewrites() {
    use filterstore::manifest::Keyspaces;
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path(), Options::default()).unwrap());
    let mpath = dir.path().join("MANIFEST");
    let mut m = Manifest::decode(&std::fs::read(&mpath).unwrap()).unwrap();
    assert_eq!(m.keyspaces, Keyspaces::default());
    m.keyspaces.next_id = 3;
    std::fs::write(&mpath, m.encode()).unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    store.put(b"k", b"v").unwrap();
    store.flush().unwrap();
    store.close().unwrap();
    let m = Manifest::decode(&std::fs::read(&mpath).unwrap()).unwrap();
    assert_eq!((m.keyspaces.next_id, m.keyspaces.live.len()), (3, 0));
    assert_eq!(m.tables.len(), 1);
    let store = Store::open(dir.path(), Options::default()).unwrap();
    assert_eq!(
        store.get(b"k").unwrap(),
        Some(filterstore::Slice::from(b"v"))
    );
}

/// One op of [`log_v3`]: keyspace id, key, value (`None`: a delete).
type LogOp<'a> = (u8, &'a str, Option<&'a str>);

/// A version-3 log written from `format.md` ("Write-ahead log"): its header, then one
/// record per batch of `(seq, ops)`, each op `(keyspace, key, value)` a put (or a delete
/// without a value).
fn log_v3(batches: &[(u64, &[LogOp])]) -> Vec<u8> {
    let mut out = b"FSWL\x03\0\0\0".to_vec();
    for (seq, ops) in batches {
        let mut p = seq.to_le_bytes().to_vec();
        p.push(ops.len() as u8);
        for (ks, k, v) in *ops {
            p.extend_from_slice(&[if v.is_some() { 1 } else { 2 }, *ks, k.len() as u8]);
            p.extend_from_slice(k.as_bytes());
            if let Some(v) = v {
                p.push(v.len() as u8);
                p.extend_from_slice(v.as_bytes());
            }
        }
        let mut head = (p.len() as u32).to_le_bytes().to_vec();
        head.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
        let crc = crc32fast::hash(&head);
        out.extend_from_slice(&head);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&p);
    }
    out
}

/// Log records naming keyspaces (format.md, "Keyspaces"): at replay the ops of a dropped
/// keyspace are skipped (the rest of their batch is applied, and their batches keep their
/// commit sequence numbers), and an id never allocated is corruption naming the log and the
/// id's offset, never a panic and never applied to the default keyspace.
#[test]
fn replay_skips_dropped_keyspaces_and_refuses_ids_never_allocated() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    store.put(b"a", b"1").unwrap();
    store.flush().unwrap();
    store.close().unwrap();
    let mpath = dir.path().join("MANIFEST");
    let mut m = Manifest::decode(&std::fs::read(&mpath).unwrap()).unwrap();
    m.keyspaces.next_id = 3; // ids 1 and 2 were dropped
    std::fs::write(&mpath, m.encode()).unwrap();
    let log = log_v3(&[
        (
            7,
            &[(0, "k0", Some("v0")), (2, "k2", Some("v2")), (1, "a", None)],
        ),
        (8, &[(2, "only", Some("x"))]),
    ]);
    std::fs::write(dir.path().join("000099.wal"), &log).unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    assert_eq!(
        store.get(b"k0").unwrap(),
        Some(filterstore::Slice::from(b"v0"))
    );
    assert_eq!(store.get(b"k2").unwrap(), None);
    assert_eq!(store.get(b"only").unwrap(), None);
    assert_eq!(
        store.get(b"a").unwrap(),
        Some(filterstore::Slice::from(b"1"))
    );
    assert_eq!(store.last_seq(), 8);
    store.close().unwrap();
    // Ids 3 and 200 were never allocated: refused at the id (the first op's keyspace id is
    // at 8 + 12 + 8 + 1 + 1 = 30), by a writer and by a read-only handle.
    for id in [3u8, 100] {
        let log = log_v3(&[(9, &[(id, "k", Some("v"))])]);
        let path = dir.path().join("000199.wal");
        std::fs::write(&path, &log).unwrap();
        for read_only in [false, true] {
            let mut opts = Options::default();
            opts.read_only = read_only;
            match Store::open(dir.path(), opts).unwrap_err() {
                filterstore::Error::Corruption {
                    file,
                    offset,
                    reason,
                    ..
                } => {
                    assert_eq!((file, offset), (path.clone(), 30), "{reason}");
                    assert!(reason.contains("never allocated"), "{reason}");
                }
                e => panic!("{e}"),
            }
        }
        std::fs::remove_file(&path).unwrap();
    }
    let store = Store::open(dir.path(), Options::default()).unwrap();
    assert_eq!(store.get(b"k").unwrap(), None);
    assert_eq!(
        store.get(b"k0").unwrap(),
        Some(filterstore::Slice::from(b"v0"))
    );
}
