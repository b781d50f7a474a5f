//! Store behaviour checked by counts: reads avoided, reads made, recovery, locking, limits.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::NoSyncFs;
use filterstore::{Error, FilterKind, Options, Store, SyncPolicy};

fn key(i: u64) -> Vec<u8> {
    format!("key{:012}", i * 2).into_bytes() // even numbers present, odd absent
}

/// A step of a 64-bit linear congruential generator; returns its top 31 bits.
fn lcg(x: &mut u64) -> u64 {
    *x = x
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *x >> 33
}

/// Reader threads that look up random acknowledged keys (`key(i)` with value `v{i}` for every
/// `i` below `written`) until `stop`, each through `store.get` or, with `use_reader`, through
/// one long-lived `Store::reader()`; with `scan_every`, every so many lookups also scan a
/// range and count it. `join` returns the number of lookups made.
struct Readers {
    written: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl Readers {
    fn spawn(
        store: &Arc<Store>,
        threads: u64,
        seed: u64,
        use_reader: bool,
        scan_every: Option<u64>,
    ) -> Readers {
        let written = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..threads)
            .map(|r| {
                let (store, written, stop) = (store.clone(), written.clone(), stop.clone());
                std::thread::spawn(move || {
                    let reader = store.reader();
                    let mut checks = 0u64;
                    let mut x = r + seed;
                    while !stop.load(Ordering::Relaxed) {
                        let n = written.load(Ordering::Acquire);
                        if n == 0 {
                            continue;
                        }
                        let i = lcg(&mut x) % n;
                        let got = match use_reader {
                            true => reader.get(key(i)),
                            false => store.get(key(i)),
                        };
                        assert_eq!(
                            got.unwrap().map(Vec::from),
                            Some(format!("v{i}").into_bytes()),
                            "reader {r} missed key {i} of {n}"
                        );
                        if scan_every.is_some_and(|e| checks.is_multiple_of(e)) {
                            let lo = key(i / 2);
                            let hi = key(i);
                            let c = store.scan(lo.as_slice()..hi.as_slice()).count() as u64;
                            assert_eq!(c, i - i / 2, "scan missed keys");
                        }
                        checks += 1;
                    }
                    checks
                })
            })
            .collect();
        Readers {
            written,
            stop,
            threads,
        }
    }

    /// Acknowledges keys `0..n`.
    fn written(&self, n: u64) {
        self.written.store(n, Ordering::Release);
    }

    fn join(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.threads.into_iter().map(|h| h.join().unwrap()).sum()
    }
}

/// Every key `i` of `keys` reads `v{i}`.
fn assert_values(store: &Store, keys: impl Iterator<Item = u64>) {
    for i in keys {
        assert_eq!(
            store.get(key(i)).unwrap().map(Vec::from),
            Some(format!("v{i}").into_bytes())
        );
    }
}

fn opts(kind: FilterKind, fpr: f64) -> Options {
    Options::default()
        .filter(kind)
        .fpr(fpr)
        .compaction_trigger(None)
        .fs(Arc::new(NoSyncFs))
}

/// Ten tables whose key ranges interleave (table t holds keys ≡ t mod 10), so every
/// absent key inside the overall range falls inside every table's range.
fn ten_tables(dir: &std::path::Path, kind: FilterKind, fpr: f64, n: u64) -> Store {
    let store = Store::open(dir, opts(kind, fpr)).unwrap();
    for t in 0..10 {
        for i in (t..n).step_by(10) {
            store.put(key(i), b"value").unwrap();
        }
        store.flush().unwrap();
    }
    assert_eq!(store.stats().tables.len(), 10);
    store
}

#[test]
fn absent_keys_cost_about_eps_reads_per_table() {
    let n = 200_000;
    for (kind, fpr) in [
        (FilterKind::Bloom, 0.01),
        (FilterKind::BlockedBloom, 0.01),
        (FilterKind::Cuckoo, 0.001),
        (FilterKind::BinaryFuse, 0.01),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = ten_tables(dir.path(), kind, fpr, n);
        let before = store.stats();
        let lookups = 50_000u64;
        for i in 0..lookups {
            let k = format!("key{:012}", (i * 7919 % (2 * n - 60) + 20) | 1).into_bytes();
            assert_eq!(store.get(&k).unwrap(), None);
        }
        let s = store.stats();
        // Blocks needed: read from a table file, or found in the block cache.
        let reads = s.data_blocks_used() - before.data_blocks_used();
        let bound = 1.3 * fpr * 10.0 * lookups as f64;
        assert!(
            (reads as f64) <= bound,
            "{kind}: {reads} block reads for {lookups} absent lookups > {bound}"
        );
        assert_eq!(
            s.filter_probes(),
            10 * lookups,
            "{kind}: every table's filter is probed once"
        );
        assert_eq!(
            s.false_positives, reads,
            "{kind}: each read of an absent key is a false positive"
        );
        // Keys outside every table's range are answered by the range check alone.
        for i in 0..1000u64 {
            assert_eq!(store.get(format!("zz{i}").as_bytes()).unwrap(), None);
            assert_eq!(store.get(format!("a{i}").as_bytes()).unwrap(), None);
        }
        let s2 = store.stats();
        assert_eq!(s2.data_blocks_used(), s.data_blocks_used());
        assert_eq!(s2.filter_probes(), s.filter_probes());
    }
}

#[test]
fn without_filters_every_table_in_range_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = ten_tables(dir.path(), FilterKind::None, 0.01, 20_000);
    for i in 0..1000u64 {
        assert_eq!(
            store
                .get(format!("key{:012}", 2 * i + 21).as_bytes())
                .unwrap(),
            None
        );
    }
    // Each lookup needs a block of every table: read from the file, or found in the cache.
    let s = store.stats();
    assert_eq!(s.data_blocks_used(), 10 * 1000);
    assert_eq!(s.block_cache_misses, s.data_block_reads);
    assert!(s.block_cache_hits > 0);
}

#[test]
fn present_keys_cost_exactly_one_block_read() {
    let dir = tempfile::tempdir().unwrap();
    drop(ten_tables(
        dir.path(),
        FilterKind::BlockedBloom,
        0.001,
        50_000,
    ));
    let lookups = (0..50_000u64).step_by(37).count() as u64;
    let mut counts = Vec::new();
    // The same lookups with blocks read by pread, then in place from a map: same answers,
    // same counted reads and bytes.
    for mmap_reads in [false, true] {
        let o = opts(FilterKind::BlockedBloom, 0.001).mmap_reads(mmap_reads);
        let store = Store::open(dir.path(), o).unwrap();
        // Every table file is mapped once, read or not: version 3 tables are searched in
        // place through the map; with mmap_reads their data blocks are read from it too.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let dir_name = dir.path().to_str().unwrap();
        let mapped = maps
            .lines()
            .filter(|l| l.contains(dir_name) && l.ends_with(".sst"))
            .count();
        assert_eq!(mapped, 10, "mapped table files");
        for i in (0..50_000u64).step_by(37) {
            assert_eq!(store.get(key(i)).unwrap().as_deref(), Some(&b"value"[..]));
        }
        let s = store.stats();
        // One block of the table that holds the key, plus false positives in newer tables:
        // read from the file, or found in the block cache.
        let reads = s.data_blocks_used();
        assert!(
            reads >= lookups && reads as f64 <= lookups as f64 * (1.0 + 0.001 * 10.0 * 3.0) + 3.0,
            "{reads} reads for {lookups} lookups (mmap_reads {mmap_reads})"
        );
        counts.push((
            s.data_block_reads,
            s.bytes_read,
            s.block_cache_hits,
            s.block_cache_misses,
        ));
    }
    assert_eq!(counts[0], counts[1]);
}

#[test]
fn refilter_swaps_filters_without_touching_data() {
    let dir = tempfile::tempdir().unwrap();
    let store = ten_tables(dir.path(), FilterKind::Bloom, 0.2, 20_000);
    let sst: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    let before: Vec<Vec<u8>> = sst.iter().map(|p| std::fs::read(p).unwrap()).collect();
    for (kind, fpr) in [
        (FilterKind::Cuckoo, 0.001),
        (FilterKind::None, 0.5),
        (FilterKind::BinaryFuse, 0.001),
        (FilterKind::BlockedBloom, 0.01),
    ] {
        store.refilter(kind, fpr).unwrap();
        let s = store.stats();
        assert!(s
            .tables
            .iter()
            .all(|t| t.filter_kind == kind && t.target_fpr == fpr));
        for (p, b) in sst.iter().zip(&before) {
            assert_eq!(
                &std::fs::read(p).unwrap(),
                b,
                "table data rewritten by refilter"
            );
        }
        for i in (0..20_000).step_by(101) {
            assert!(store.get(key(i)).unwrap().is_some());
        }
    }
    drop(store);
    let store = Store::open(dir.path(), Options::default()).unwrap();
    assert!(store
        .stats()
        .tables
        .iter()
        .all(|t| t.filter_kind == FilterKind::BlockedBloom));
    let filters = common::model::files_with_extension(dir.path(), "filter");
    assert_eq!(filters, 10, "old filter files are removed");
}

#[test]
fn sealed_tables_count_their_tombstones_and_compaction_drops_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts(FilterKind::Bloom, 0.01)).unwrap();
    for i in 0..100u64 {
        store.put(key(i), b"v").unwrap();
    }
    // Deletes of keys no table holds: the one table written has tombstones of its own.
    for i in 100..130u64 {
        store.delete(key(i)).unwrap();
    }
    store.flush().unwrap();
    let t = &store.stats().tables[0];
    assert_eq!((t.keys, t.tombstones), (130, 30));
    // A single table with tombstones is still worth compacting: they can all go.
    store.compact().unwrap();
    let s = store.stats();
    assert_eq!(s.tables.len(), 1);
    assert_eq!((s.tables[0].keys, s.tables[0].tombstones), (100, 0));
    drop(store);
    let m = filterstore::manifest::Manifest::decode(
        &std::fs::read(dir.path().join("MANIFEST")).unwrap(),
    )
    .unwrap();
    assert_eq!((m.tables[0].entries, m.tables[0].tombstones), (100, 0));
}

#[test]
fn compaction_drops_tombstones_and_old_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts(FilterKind::Cuckoo, 0.01)).unwrap();
    for i in 0..1000u64 {
        store.put(key(i), b"v1").unwrap();
    }
    store.flush().unwrap();
    for i in 0..1000u64 {
        if i % 2 == 0 {
            store.delete(key(i)).unwrap();
        } else {
            store.put(key(i), b"v2").unwrap();
        }
    }
    store.flush().unwrap();
    store.compact().unwrap();
    let s = store.stats();
    assert_eq!(s.tables.len(), 1);
    assert_eq!(s.tables[0].keys, 500);
    assert_eq!(s.tables[0].tombstones, 0);
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    // LOCK, MANIFEST, COUNTERS (saved by the flushes), one WAL, one table, one filter, one
    // range filter.
    assert_eq!(files, 7);
    for i in 0..1000u64 {
        let want = (i % 2 == 1).then(|| b"v2".to_vec());
        assert_eq!(store.get(key(i)).unwrap().map(Vec::from), want);
    }
}

/// The files of each kind (`.sst`, `.filter`, `.range`) in `dir`.
fn table_files(dir: &std::path::Path) -> [usize; 3] {
    let mut n = [0; 3];
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        for (i, ext) in [".sst", ".filter", ".range"].iter().enumerate() {
            n[i] += name.ends_with(ext) as usize;
        }
    }
    n
}

/// The deletion rule (`docs/engine.md`, "The table set"): a table's files stay while a
/// version naming them is alive. A scan opened on three tables reads all of them after a
/// compaction replaced them with one (their files, and the new table's, are all in the
/// directory meanwhile), and the replaced tables' files go when the scan is dropped. So do
/// those of a pinned reader's table set. (When files were unlinked at the publish, the
/// directory held one table's files while the scan was open.)
#[test]
fn a_scan_keeps_the_files_of_tables_a_compaction_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(FilterKind::Bloom, 0.01).compaction_trigger(None);
    let store = Store::open(dir.path(), o).unwrap();
    for round in 0..3u64 {
        for i in 0..2000u64 {
            store
                .put(key(i), format!("v{round}-{i}").as_bytes())
                .unwrap();
        }
        store.flush().unwrap();
    }
    assert_eq!(table_files(dir.path()), [3, 3, 3]);
    let mut scan = store.scan::<&[u8]>(..);
    let first = scan.next().unwrap().unwrap();
    assert_eq!(first.0, key(0));
    let pinned = store.pinned_reader().unwrap();
    store.compact().unwrap();
    assert_eq!(store.stats().tables.len(), 1);
    // The scan's and the pinned reader's three tables, and the compaction's one.
    assert_eq!(table_files(dir.path()), [4, 4, 4]);
    let mut n = 1;
    for (i, item) in scan.by_ref().enumerate() {
        let (k, v) = item.unwrap();
        let (k, v) = (k.to_vec(), v.to_vec());
        let i = i as u64 + 1;
        assert_eq!((k, v), (key(i), format!("v2-{i}").into_bytes()));
        n += 1;
    }
    assert_eq!(n, 2000);
    drop(scan);
    // The pinned reader still holds the old tables, and reads them.
    assert_eq!(table_files(dir.path()), [4, 4, 4]);
    assert_eq!(
        pinned.get(key(7)).unwrap().map(Vec::from),
        Some(b"v2-7".to_vec())
    );
    drop(pinned);
    assert_eq!(table_files(dir.path()), [1, 1, 1]);
    assert_eq!(
        store.get(key(7)).unwrap().map(Vec::from),
        Some(b"v2-7".to_vec())
    );
}

#[test]
fn second_open_is_refused_while_the_first_lives() {
    let dir = tempfile::tempdir().unwrap();
    let a = Store::open(dir.path(), Options::default()).unwrap();
    match Store::open(dir.path(), Options::default()) {
        Err(Error::Locked(_)) => {}
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("second open succeeded"),
    }
    drop(a);
    Store::open(dir.path(), Options::default()).unwrap();
}

#[test]
fn open_refuses_a_file_and_a_missing_dir_without_create() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(
        Store::open(&file, Options::default()),
        Err(Error::InvalidArgument(_))
    ));
    let o = Options::default().create_if_missing(false);
    assert!(Store::open(dir.path().join("missing"), o).is_err());
}

#[test]
fn sizes_past_the_limits_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let big_key = vec![b'k'; filterstore::MAX_KEY_LEN + 1];
    assert!(matches!(
        store.put(&big_key, b"v"),
        Err(Error::TooLarge { what: "key", .. })
    ));
    let big_value = vec![0u8; filterstore::MAX_VALUE_LEN + 1];
    assert!(matches!(
        store.put(b"k", &big_value),
        Err(Error::TooLarge { what: "value", .. })
    ));
    store.put(b"", b"").unwrap();
    assert_eq!(store.get(b"").unwrap().map(Vec::from), Some(Vec::new()));
}

#[test]
fn unflushed_writes_survive_reopen_and_torn_wal_tail_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    {
        let o = Options::default().sync(SyncPolicy::EveryWrite);
        let store = Store::open(dir.path(), o).unwrap();
        for i in 0..100u64 {
            store.put(key(i), format!("v{i}").as_bytes()).unwrap();
        }
    }
    // Tear the last record of the newest WAL in half.
    let mut wals: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "wal") && std::fs::metadata(p).unwrap().len() > 8
        })
        .collect();
    wals.sort();
    let wal = wals.last().unwrap();
    // The records' end: the log may hold reserved space (zeros) after them.
    let bytes = std::fs::read(wal).unwrap();
    let len = filterstore::wal::replay_bytes(&bytes, |_, _| {})
        .unwrap()
        .valid_len;
    let f = std::fs::OpenOptions::new().write(true).open(wal).unwrap();
    f.set_len(len - 5).unwrap();
    drop(f);
    let store = Store::open(dir.path(), Options::default()).unwrap();
    for i in 0..99u64 {
        assert_eq!(
            store.get(key(i)).unwrap().map(Vec::from),
            Some(format!("v{i}").into_bytes())
        );
    }
    assert_eq!(
        store.get(key(99)).unwrap(),
        None,
        "the torn record is dropped"
    );
}

#[test]
fn wal_damage_before_the_tail_is_an_error_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), Options::default()).unwrap();
        for i in 0..10u64 {
            store.put(key(i), b"value").unwrap();
        }
    }
    let wal = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "wal") && std::fs::metadata(p).unwrap().len() > 8
        })
        .unwrap();
    let mut b = std::fs::read(&wal).unwrap();
    b[8 + 10] ^= 0x40; // inside the first record's payload
    std::fs::write(&wal, &b).unwrap();
    match Store::open(dir.path(), Options::default()) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, wal);
            assert_eq!(offset, 8);
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("corrupt WAL accepted"),
    }
}

#[test]
fn readers_never_miss_keys_during_writes_flushes_and_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options::default()
        .memtable_bytes(16 << 10)
        .compaction_trigger(Some(4))
        .fs(Arc::new(NoSyncFs));
    let store = Arc::new(Store::open(dir.path(), o).unwrap());
    let readers = Readers::spawn(&store, 3, 1, false, Some(500));
    for i in 0..20_000u64 {
        store.put(key(i), format!("v{i}").as_bytes()).unwrap();
        readers.written(i + 1);
        if i % 5000 == 4999 {
            store.compact().unwrap();
        }
    }
    let checks = readers.join();
    assert!(checks > 1000, "readers ran {checks} checks");
    // Once the due compactions have run, L0 is below its trigger.
    store.wait_for_compaction().unwrap();
    let s = store.stats();
    assert!(
        s.levels[0].tables < 4,
        "L0 holds {} tables",
        s.levels[0].tables
    );
    assert_values(&store, (0..20_000u64).step_by(97));
}

#[test]
fn verify_passes_on_a_clean_store_and_names_a_flipped_byte() {
    let dir = tempfile::tempdir().unwrap();
    let store = ten_tables(dir.path(), FilterKind::BlockedBloom, 0.01, 20_000);
    store.put(b"unflushed", b"x").unwrap();
    drop(store);
    let r = filterstore::verify::verify_dir(dir.path()).unwrap();
    assert!(r.is_intact(), "{:?}", r.problems);
    assert_eq!(r.entries, 20_000);
    assert_eq!(r.wal_records, 1);
    let sst = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    let mut b = std::fs::read(&sst).unwrap();
    b[100] ^= 1;
    std::fs::write(&sst, &b).unwrap();
    let r = filterstore::verify::verify_dir(dir.path()).unwrap();
    assert_eq!(r.problems.len(), 1);
    match &r.problems[0] {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(file, &sst);
            assert_eq!(*offset, 0, "the first data block starts at 0");
        }
        e => panic!("wrong problem {e}"),
    }
    // A lookup of a key in the damaged block is an error, never a wrong answer, whether
    // blocks are read with pread or in place from a map.
    let mut errors = [0; 2];
    for (mode, mmap_reads) in [false, true].into_iter().enumerate() {
        let opts = Options::default().mmap_reads(mmap_reads);
        let store = Store::open(dir.path(), opts).unwrap();
        for i in 0..20_000u64 {
            match store.get(key(i)) {
                Ok(Some(v)) => assert_eq!(v, b"value"),
                Ok(None) => panic!("key {i} reported absent (mmap_reads {mmap_reads})"),
                Err(e) => {
                    assert!(e.is_corruption());
                    errors[mode] += 1;
                }
            }
        }
    }
    assert!(errors[0] > 0);
    assert_eq!(errors[0], errors[1], "both read paths see the same damage");
}

#[test]
fn store_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Store>();
}

/// A long-lived `Reader` sees every completed put, delete, flush, compaction and refilter
/// (its cached table list is refreshed when the store changes), and its lookups are counted.
#[test]
fn a_long_lived_reader_sees_every_completed_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts(FilterKind::BlockedBloom, 0.01)).unwrap();
    let reader = store.reader();
    let mut model = std::collections::BTreeMap::new();
    let mut x = 7u64;
    let mut next = || lcg(&mut x);
    let (mut checked, mut fast) = (0u64, 0u64);
    for step in 0..3000u64 {
        let i = next() % 300;
        match next() % 20 {
            0..=7 => {
                let v = format!("v{step}").into_bytes();
                store.put(key(i), &v).unwrap();
                model.insert(i, v);
            }
            8..=9 => {
                store.delete(key(i)).unwrap();
                model.remove(&i);
            }
            10..=12 => store.flush().unwrap(),
            13 => store.compact().unwrap(),
            14 => {
                let kind = FilterKind::ALL[(next() % FilterKind::ALL.len() as u64) as usize];
                store.refilter(kind, 0.05).unwrap();
            }
            _ => {}
        }
        let memtable_empty = store.stats().memtable_entries == 0;
        for _ in 0..5 {
            let j = next() % 320;
            let before = store.stats().lookups;
            assert_eq!(
                reader.get(key(j)).unwrap().map(Vec::from),
                model.get(&j).cloned(),
                "step {step}: key {j}"
            );
            assert_eq!(
                store.stats().lookups,
                before + 1,
                "a reader lookup is counted"
            );
            checked += 1;
            fast += memtable_empty as u64;
        }
    }
    assert!(
        fast > 1000,
        "only {fast} of {checked} lookups had an empty memtable"
    );
    println!("reader: {checked} lookups checked, {fast} with an empty memtable");
}

/// Readers on other threads never miss an acknowledged key while the writer flushes,
/// compacts and refilters (the memtable is empty during the maintenance, so the readers'
/// lock-free path runs against changing table lists).
#[test]
fn readers_never_miss_keys_while_tables_change() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(FilterKind::Cuckoo, 0.01).compaction_trigger(Some(3));
    let store = Arc::new(Store::open(dir.path(), o).unwrap());
    let readers = Readers::spawn(&store, 2, 11, true, None);
    let kinds = [
        FilterKind::Bloom,
        FilterKind::None,
        FilterKind::BlockedBloom,
        FilterKind::BinaryFuse,
    ];
    for round in 0..30u64 {
        for i in round * 200..(round + 1) * 200 {
            store.put(key(i), format!("v{i}").as_bytes()).unwrap();
        }
        // Acknowledged only once flushed: then every round's keys sit in tables.
        store.flush().unwrap();
        readers.written((round + 1) * 200);
        store
            .refilter(kinds[round as usize % kinds.len()], 0.02)
            .unwrap();
        store.compact().unwrap();
    }
    let checks = readers.join();
    assert!(checks > 1000, "readers ran {checks} checks");
    println!("readers: {checks} checked lookups across 30 flush/refilter/compact rounds");
}

/// Opening a store again and again keeps at most two logs, and a store that is only read
/// writes no log at all.
#[test]
fn reopening_keeps_the_number_of_logs_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let logs = || common::model::files_with_extension(dir.path(), "wal");
    for i in 0..200u32 {
        let store = Store::open(dir.path(), Options::default()).unwrap();
        store.put(i.to_be_bytes(), b"v").unwrap();
        drop(store);
        assert!(logs() <= 2, "{} logs after open {i}", logs());
    }
    let store = Store::open(dir.path(), Options::default()).unwrap();
    for i in 0..200u32 {
        assert_eq!(
            store.get(i.to_be_bytes()).unwrap().as_deref(),
            Some(&b"v"[..])
        );
    }
    drop(store);
    let before = logs();
    for _ in 0..5 {
        let store = Store::open(dir.path(), Options::default()).unwrap();
        assert!(store.get(b"x").unwrap().is_none());
    }
    assert!(logs() <= before, "reads created logs");
}

/// A manifest that puts two overlapping tables in one sorted level is refused at open, and
/// `verify` reports it, both naming the manifest.
#[test]
fn overlapping_tables_in_a_level_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = || Options::default().compaction_trigger(None);
    let store = Store::open(dir.path(), o()).unwrap();
    for round in 0..2u32 {
        for i in 0..100u32 {
            store
                .put(format!("k{i:03}").as_bytes(), round.to_be_bytes())
                .unwrap();
        }
        store.flush().unwrap();
    }
    drop(store);
    let path = dir.path().join("MANIFEST");
    let mut m = filterstore::manifest::Manifest::decode(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(m.tables.len(), 2);
    for t in &mut m.tables {
        t.level = 1;
    }
    std::fs::write(&path, m.encode()).unwrap();
    let err = Store::open(dir.path(), o()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(
        err.to_string().contains("MANIFEST") && err.to_string().contains("overlap"),
        "{err}"
    );
    let report = filterstore::verify::verify_dir(dir.path()).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.to_string().contains("overlap")),
        "{:?}",
        report.problems
    );
}

/// Dropping a store while it flushes and compacts in the background waits for that work:
/// afterwards every table and filter file is one the manifest names (nothing half-written
/// is left behind), and every write is there after reopening.
#[test]
fn drop_waits_for_background_work() {
    let dir = tempfile::tempdir().unwrap();
    let o = || {
        Options::default()
            .memtable_bytes(32 << 10)
            .compaction_trigger(Some(2))
            .table_bytes(16 << 10)
            .l1_bytes(64 << 10)
            .level_ratio(2)
            .fs(Arc::new(NoSyncFs))
    };
    let mut written = 0u64;
    for round in 0..20u64 {
        let store = Store::open(dir.path(), o()).unwrap();
        // Enough to seal several memtables and leave compactions running at the drop.
        for _ in 0..(2000 + round * 150) {
            store
                .put(key(written), format!("v{written}").as_bytes())
                .unwrap();
            written += 1;
        }
        drop(store);
        let m = filterstore::manifest::Manifest::load(dir.path())
            .unwrap()
            .unwrap();
        let named: std::collections::HashSet<u64> = m
            .tables
            .iter()
            .flat_map(|t| [t.number, t.filter_file])
            .collect();
        for e in std::fs::read_dir(dir.path()).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if let Some((n, "sst" | "filter")) = name.split_once('.') {
                let n: u64 = n.parse().unwrap();
                assert!(named.contains(&n), "round {round}: {name} left behind");
            }
        }
    }
    let store = Store::open(dir.path(), o()).unwrap();
    assert_values(&store, (0..written).step_by(7));
}

/// The lifetime counters are read back at open and added to, across handles; a crash keeps
/// the counts saved by the last flush and loses only the lookups made after it.
#[test]
fn lifetime_counters_survive_reopen_and_a_crash_loses_only_what_followed_the_last_flush() {
    use filterstore::io::FaultFs;
    let t = tempfile::tempdir().unwrap();
    let live = t.path().join("live");
    let fs = FaultFs::new();
    let o = || opts(FilterKind::BlockedBloom, 0.01).fs(Arc::new(fs.clone()));
    {
        let s = Store::open(&live, o()).unwrap();
        for i in 0..100 {
            s.put(key(2 * i), b"v").unwrap();
        }
        s.flush().unwrap();
        for i in 0..200 {
            s.get(key(i)).unwrap(); // 100 present; 99 absent in the table's range, 1 past it
        }
        assert_eq!(s.stats().lifetime.lookups, 200);
    }
    let s = Store::open(&live, o()).unwrap();
    let st = s.stats();
    assert_eq!(st.lookups, 0, "this process's counters start at zero");
    let l = st.lifetime;
    assert_eq!(l.lookups, 200);
    assert_eq!(l.flushes, 1);
    assert_eq!(l.filter_negatives + l.filter_positives, 199);
    assert!(
        l.filter_positives >= 100 && l.filter_negatives >= 80,
        "{l:?}"
    );
    // Every block needed (100 present keys and the false positives) was read once or found
    // in the block cache; the lifetime counters keep both, and each read was a cache miss.
    assert_eq!(
        l.data_block_reads + l.block_cache_hits,
        100 + l.false_positives
    );
    assert_eq!(l.block_cache_misses, l.data_block_reads);
    assert!(l.block_cache_hits > 0, "{l:?}");
    assert!(st.lifetime_problem.is_none());
    for i in 0..50 {
        s.get(key(i)).unwrap();
    }
    s.put(b"x", b"y").unwrap();
    s.flush().unwrap(); // saves 250 lookups
    for i in 0..30 {
        s.get(key(i)).unwrap(); // saved only at close
    }
    let img = t.path().join("crash");
    std::fs::create_dir(&img).unwrap();
    fs.crash_image(&img, 0).unwrap();
    drop(s); // a clean close of the live store saves 280
    let crashed = Store::open(&img, opts(FilterKind::BlockedBloom, 0.01)).unwrap();
    assert_eq!(crashed.stats().lifetime.lookups, 250);
    assert_eq!(crashed.stats().lifetime.flushes, 2);
    let s = Store::open(&live, o()).unwrap();
    assert_eq!(s.stats().lifetime.lookups, 280);
}

/// A store of three L0 tables (1,000 keys each, interleaved), below its trigger of 8.
fn three_l0_tables(dir: &std::path::Path, idle_drain: Option<std::time::Duration>) -> Store {
    three_l0_tables_with(dir, |o| o.idle_drain(idle_drain))
}

/// [`three_l0_tables`] with options of the caller's.
fn three_l0_tables_with(dir: &std::path::Path, o: impl FnOnce(Options) -> Options) -> Store {
    let store = Store::open(
        dir,
        o(opts(FilterKind::BlockedBloom, 0.01).compaction_trigger(Some(8))),
    )
    .unwrap();
    for t in 0..3 {
        for i in (t..3_000).step_by(3) {
            store.put(key(i), format!("v{i}").as_bytes()).unwrap();
        }
        store.flush().unwrap();
    }
    assert_eq!(store.stats().levels[0].tables, 3);
    store
}

/// The store's stats once `done` holds of them (a drain's counters are bumped by the
/// compaction thread just after it installs its table set), or after 10 s.
fn stats_once(store: &Store, done: impl Fn(&filterstore::Stats) -> bool) -> filterstore::Stats {
    let t = std::time::Instant::now();
    let mut s = store.stats();
    while !done(&s) && t.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(5));
        s = store.stats();
    }
    s
}

/// Absent lookups (odd numbers, inside every table's key range) in rounds of 1,000, until L0
/// is empty or `rounds` have run; the rounds that ran.
fn look_up_absent_keys(store: &Store, rounds: u64) -> u64 {
    for r in 0..rounds {
        if store.stats().levels[0].tables == 0 {
            return r;
        }
        for i in 0..1_000 {
            let mut k = key((r * 1_000 + i) % 2_999);
            k.push(b'x'); // between two present keys
            assert_eq!(store.get(&k).unwrap(), None);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    rounds
}

/// Writes pause while lookups keep probing L0: the idle drain merges L0 into L1 below the
/// trigger, once, and every key keeps its value. With no lookups, or with the drain off, L0
/// stays as it is.
#[test]
fn lookups_after_writes_pause_drain_l0_into_l1() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let store = three_l0_tables(dir.path(), Some(Duration::from_millis(50)));
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(store.stats().levels[0].tables, 3, "no lookups: no drain");
    let rounds = look_up_absent_keys(&store, 2_000);
    assert_eq!(
        store.stats().levels[0].tables,
        0,
        "not drained after {rounds} rounds of lookups"
    );
    // The drain's counters are bumped just after its new table set is installed, so a
    // reader can see L0 empty a moment before it sees them.
    let s = stats_once(&store, |s| s.idle_drains > 0);
    assert_eq!((s.idle_drains, s.compactions), (1, 1));
    assert!(s.levels[1].tables >= 1);
    assert_values(&store, 0..3_000);
    drop(store);

    let dir = tempfile::tempdir().unwrap();
    let store = three_l0_tables(dir.path(), None);
    look_up_absent_keys(&store, 40);
    std::thread::sleep(Duration::from_millis(600));
    let s = store.stats();
    assert_eq!((s.levels[0].tables, s.idle_drains), (3, 0), "drain off");
    assert_values(&store, 0..3_000);
}

/// Scans pay for merging the L0 tables they read: once they have taken twice as many
/// blocks from L0 as the merge would read (here L0 itself: the level below is empty), L0 goes
/// into L1 below the trigger, while writes go on (the scan drain), and every key keeps its
/// value. One full scan (half the price) does not; lookups do not count; with the drain off,
/// L0 stays.
#[test]
fn scans_over_l0_drain_it_into_l1_once_they_paid_for_it() {
    use std::time::Duration;
    let full_scan = |store: &Store| {
        let n = store.scan::<&[u8]>(..).map(Result::unwrap).count();
        assert_eq!(n, 3_000);
    };
    let dir = tempfile::tempdir().unwrap();
    let store = three_l0_tables_with(dir.path(), |o| o.idle_drain(None));
    for i in 0..3_000 {
        assert!(store.get(key(i)).unwrap().is_some());
    }
    full_scan(&store);
    store.put(key(0), b"v0").unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let s = store.stats();
    assert_eq!((s.levels[0].tables, s.scan_drains), (3, 0), "half paid");
    full_scan(&store);
    let s = stats_once(&store, |s| s.scan_drains > 0);
    assert_eq!((s.scan_drains, s.compactions), (1, 1));
    assert_eq!(s.levels[0].tables, 0);
    assert!(s.levels[1].tables >= 1);
    assert_values(&store, 0..3_000);
    drop(store);

    let dir = tempfile::tempdir().unwrap();
    let store = three_l0_tables_with(dir.path(), |o| o.idle_drain(None).scan_drain(false));
    for _ in 0..4 {
        full_scan(&store);
    }
    std::thread::sleep(Duration::from_millis(600));
    let s = store.stats();
    assert_eq!((s.levels[0].tables, s.scan_drains), (3, 0), "drain off");
}

/// The store's read counters never go back while compactions replace the tables that
/// counted them: a table's counts move to the retired total in the same step that takes it
/// out of the version `stats` reads (under the same lock), so no `stats` call sees them in
/// neither (a drop) or in both.
#[test]
fn read_counters_never_go_back_while_compactions_run() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    let dir = tempfile::tempdir().unwrap();
    let o = Options::default()
        .memtable_bytes(8 << 10)
        .compaction_trigger(Some(2))
        .table_bytes(4 << 10)
        .l1_bytes(16 << 10)
        .block_cache_bytes(0)
        .fs(Arc::new(common::NoSyncFs));
    let store = Store::open(dir.path(), o).unwrap();
    for i in 0..2000u32 {
        store.put(format!("k{i:05}"), [7u8; 40]).unwrap();
    }
    store.flush().unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for round in 0..40u32 {
                for i in 0..500u32 {
                    let k = format!("k{:05}", (i * 7 + round) % 2000);
                    store.put(k, [round as u8; 40]).unwrap();
                }
                store.flush().unwrap();
            }
            stop.store(true, Relaxed);
        });
        s.spawn(|| {
            let mut i = 0u32;
            while !stop.load(Relaxed) {
                let _ = store.get(format!("k{:05}", i % 2000)).unwrap();
                i = i.wrapping_add(13);
            }
        });
        let (mut last, mut checks) = (store.stats(), 0u64);
        while !stop.load(Relaxed) {
            let now = store.stats();
            assert!(
                now.data_block_reads >= last.data_block_reads
                    && now.filter_negatives >= last.filter_negatives
                    && now.filter_positives >= last.filter_positives,
                "after {checks} checks: reads {} then {}, negatives {} then {}",
                last.data_block_reads,
                now.data_block_reads,
                last.filter_negatives,
                now.filter_negatives
            );
            last = now;
            checks += 1;
        }
        assert!(store.stats().compactions > 0);
    });
}

/// The same for a read-only handle across refreshes: the tables a refresh replaces (the
/// writer compacted them) hand their counts to its retired total.
#[test]
fn a_read_only_handles_counters_never_go_back_across_refreshes() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options::default()
        .memtable_bytes(8 << 10)
        .compaction_trigger(Some(2))
        .block_cache_bytes(0)
        .fs(Arc::new(common::NoSyncFs));
    let store = Store::open(dir.path(), o).unwrap();
    for i in 0..3000u32 {
        store.put(format!("k{i:05}"), [1u8; 40]).unwrap();
    }
    store.flush().unwrap();
    store.wait_for_compaction().unwrap();
    let reader = Store::open_read_only(dir.path()).unwrap();
    let mut last = reader.stats();
    for round in 0..5u32 {
        for i in (0..3000u32).step_by(7) {
            assert!(reader.get(format!("k{i:05}")).unwrap().is_some());
            assert!(reader.get(format!("k{i:05}x")).unwrap().is_none());
        }
        for i in 0..3000u32 {
            store.put(format!("k{i:05}"), [round as u8; 40]).unwrap();
        }
        store.flush().unwrap();
        store.compact().unwrap();
        let before = reader.stats();
        assert!(before.data_block_reads > last.data_block_reads);
        reader.refresh().unwrap();
        let after = reader.stats();
        assert!(
            after.data_block_reads >= before.data_block_reads
                && after.filter_negatives >= before.filter_negatives,
            "round {round}: reads {} then {}, negatives {} then {}",
            before.data_block_reads,
            after.data_block_reads,
            before.filter_negatives,
            after.filter_negatives
        );
        last = after;
    }
}
