//! Checked-in store directories must keep decoding to the same contents: if the readers of
//! the WAL, table, filter or manifest layout drift, this test fails. `tests/fixtures/store-v4/`
//! is what the current code writes (manifest version 2: the older table in L1, the newer in
//! L0; table format version 3: page-aligned data blocks, a restart point at every index
//! entry). The older fixtures hold the same store as written before, and must still open:
//! `store-v3/` (table format 2), `store-v2/` (also manifest version 1, both tables in L0) and
//! `store-v1/` (also table format 1, blocks back to back).
//!
//! Regenerate the current one (only after a deliberate format change, with `format.md`
//! updated in the same commit): `FILTERSTORE_WRITE_FIXTURES=1 cargo test --release --test
//! fixture_store`.

use std::path::{Path, PathBuf};

use filterstore::manifest::Manifest;
use filterstore::table::{decode_footer, Table, TableCounters, FOOTER_LEN};
use filterstore::{FilterKind, Options, Store, SyncPolicy};

/// The store fixture `store-v{n}`.
fn fixture_dir(n: u32) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/store-v{n}"))
}

/// The fixture the current code writes.
const CURRENT: u32 = 4;

/// Per fixture: its table format version and the level of its older table.
fn fixture_facts(n: u32) -> (u32, u32) {
    match n {
        1 => (1, 0),
        2 => (2, 0),
        3 => (2, 1),
        _ => (filterstore::table::TABLE_VERSION, 1),
    }
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 7) as usize)).into_bytes()
}

fn write_fixture(dir: &Path) {
    let o = Options {
        filter: Some(FilterKind::Bloom),
        fpr: Some(0.01),
        sync: SyncPolicy::EveryWrite,
        compaction_trigger: None,
        ..Options::default()
    };
    let store = Store::open(dir, o).unwrap();
    for i in 0..300u32 {
        store
            .put(format!("key-{i:04}").as_bytes(), &value(i))
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
    store.refilter(FilterKind::Cuckoo, 0.01).unwrap();
    for i in 300..310u32 {
        store
            .put(format!("key-{i:04}").as_bytes(), &value(i))
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
    for n in [1, 2, 3, CURRENT] {
        check_fixture(n);
    }
}

fn check_fixture(n: u32) {
    let fixture = || fixture_dir(n);
    let (version, older_level) = fixture_facts(n);
    // The manifest, byte for byte as decoded.
    let m = Manifest::decode(&std::fs::read(fixture().join("MANIFEST")).unwrap()).unwrap();
    assert_eq!(m.default_kind, FilterKind::Bloom);
    assert_eq!(m.default_fpr, 0.01);
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
        if version >= 2 {
            for i in 0..t.block_count() {
                let (offset, _) = t.block_span(i).unwrap();
                assert_eq!(offset % 4096, 0, "block {i} starts on a page boundary");
            }
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
        let opts = Options {
            mmap_reads,
            ..Options::default()
        };
        let store = Store::open(tmp.path(), opts).unwrap();
        for i in 0..310u32 {
            let want = (i >= 300 || i % 3 != 0).then(|| value(i));
            assert_eq!(
                store.get(format!("key-{i:04}").as_bytes()).unwrap(),
                want,
                "key {i}"
            );
        }
        assert_eq!(store.scan::<&[u8]>(..).count(), 200 + 10);
        let levels: Vec<u32> = store.stats().tables.iter().map(|t| t.level).collect();
        assert_eq!(levels, vec![0, older_level], "fixture {n}");
    }
    assert!(filterstore::verify::verify_dir(&fixture())
        .unwrap()
        .is_intact());
}
