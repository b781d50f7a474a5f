//! Scans: a snapshot as of their start, held open across writes, flushes and compactions;
//! checked against a `BTreeMap` model. And what a short scan reads: about one block per
//! source, not the table.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use common::{NoSyncFs, Rng};
use filterstore::{Options, Scan, Store};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Tiny tables; a block cache that is off, full at once (so most blocks a scan reads are
/// read from the files and not cached), or larger than the data.
fn tiny(rng: &mut Rng) -> Options {
    Options::default()
        .block_cache_bytes([0, 8192, 32 << 20][rng.below(3) as usize])
        .memtable_bytes(2048 + rng.below(8192) as usize)
        .compaction_trigger(Some(2 + rng.below(3) as usize))
        .l0_slowdown(8)
        .l0_stop(12)
        .table_bytes(2048 + rng.below(8192))
        .l1_bytes(8192 + rng.below(16384))
        .level_ratio(2 + rng.below(3))
        .mmap_reads(rng.below(2) == 0)
        .fs(Arc::new(NoSyncFs))
}

fn key(rng: &mut Rng, space: u64) -> Vec<u8> {
    format!("k{:05}", rng.below(space)).into_bytes()
}

/// An open scan and what it must still yield: the model's range when it started.
struct Open {
    scan: Scan,
    want: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    /// The writes and the flushes or compactions made before it started.
    writes: u64,
    maintenance: u64,
}

impl Open {
    fn new(
        store: &Store,
        model: &Model,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        c: &Counts,
    ) -> Open {
        let want: Vec<_> = model
            .range((lo.clone(), hi.clone()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Open {
            scan: store.scan::<Vec<u8>>((lo, hi)),
            want: want.into_iter(),
            writes: c.writes,
            maintenance: c.maintenance,
        }
    }

    /// Reads `n` entries (or to the end); false once the scan is done.
    fn read(&mut self, n: usize, what: &str) -> bool {
        for _ in 0..n {
            let got = self
                .scan
                .next()
                .map(|r| r.expect("scan"))
                .map(|(k, v)| (k.to_vec(), v.to_vec()));
            let want = self.want.next();
            assert_eq!(got, want, "{what}");
            if got.is_none() {
                return false;
            }
        }
        true
    }
}

/// What a run did.
#[derive(Default)]
struct Counts {
    writes: u64,
    maintenance: u64,
    scans: u64,
    /// Entries read from a scan after a write, and after a flush or compaction, since the
    /// scan started.
    after_writes: u64,
    after_maintenance: u64,
}

/// Scans opened at random moments and read a few entries at a time, while puts, overwrites,
/// deletes, flushes and compactions go on (in the background too, on tiny tables): each
/// yields exactly the model as it was when the scan started.
fn run(seed: u64, steps: usize, c: &mut Counts) {
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), tiny(&mut rng)).unwrap();
    let mut model = Model::new();
    let mut open: Vec<Open> = Vec::new();
    let space = 100 + rng.below(400);
    for step in 0..steps {
        let what = format!("seed {seed} step {step}");
        match rng.below(100) {
            0..=44 => {
                let k = key(&mut rng, space);
                // Random bytes (stored raw) or a run of one byte (blocks that compress).
                let v = match rng.below(2) {
                    0 => rng.bytes(30),
                    _ => vec![b'a' + rng.below(3) as u8; 1 + rng.below(120) as usize],
                };
                store.put(&k, &v).unwrap();
                model.insert(k, v);
                c.writes += 1;
            }
            45..=59 => {
                let k = key(&mut rng, space);
                store.delete(&k).unwrap();
                model.remove(&k);
                c.writes += 1;
            }
            60..=67 => {
                let a = key(&mut rng, space);
                let lo = match rng.below(3) {
                    0 => Bound::Unbounded,
                    1 => Bound::Included(a),
                    _ => Bound::Excluded(a),
                };
                let hi = match rng.below(3) {
                    0 => Bound::Unbounded,
                    _ => Bound::Excluded(key(&mut rng, space + 10)),
                };
                let empty = matches!((&lo, &hi), (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b)) if a >= b);
                if empty {
                    assert_eq!(store.scan::<Vec<u8>>((lo, hi)).count(), 0, "{what}");
                } else {
                    open.push(Open::new(&store, &model, lo, hi, c));
                    c.scans += 1;
                }
            }
            68..=89 if !open.is_empty() => {
                let i = rng.below(open.len() as u64) as usize;
                let n = 1 + rng.below(20) as usize;
                let o = &mut open[i];
                let (before, wrote, maintained) = (
                    o.want.len(),
                    o.writes < c.writes,
                    o.maintenance < c.maintenance,
                );
                let more = o.read(n, &what);
                let read = (before - o.want.len()) as u64;
                c.after_writes += if wrote { read } else { 0 };
                c.after_maintenance += if maintained { read } else { 0 };
                if !more {
                    open.swap_remove(i);
                }
            }
            90..=93 => {
                store.flush().unwrap();
                c.maintenance += 1;
            }
            94..=95 => {
                store.compact().unwrap();
                c.maintenance += 1;
            }
            96 if !open.is_empty() => {
                open.swap_remove(rng.below(open.len() as u64) as usize);
            }
            _ => {}
        }
    }
    for mut o in open {
        while o.read(50, &format!("seed {seed} at the end")) {}
    }
}

#[test]
fn held_scans_see_the_store_as_of_their_start() {
    let mut c = Counts::default();
    for seed in 1..=8 {
        run(seed, 3000, &mut c);
    }
    println!(
        "{} scans; {} entries read after writes since the scan started, {} after flushes or \
         compactions",
        c.scans, c.after_writes, c.after_maintenance
    );
    assert!(c.scans > 1000, "{} scans", c.scans);
    assert!(c.after_writes > 10_000 && c.after_maintenance > 2_000);
}

/// A scan that started on the memtable keeps reading it after the memtable was made
/// immutable and sealed into a table, and after that table was compacted away: it sees the
/// memtable's entries as they were, not the writes made since.
#[test]
fn a_scan_outlives_the_switch_and_flush_of_its_memtable() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    for i in 0..1000u32 {
        store.put(format!("k{i:04}").as_bytes(), b"old").unwrap();
    }
    let mut scan = store.scan::<&[u8]>(..);
    let first: Vec<_> = scan
        .by_ref()
        .take(10)
        .map(Result::unwrap)
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    assert_eq!(first[0], (b"k0000".to_vec(), b"old".to_vec()));
    // Overwrites, deletes and new keys after the start; then the memtable is sealed, and
    // the resulting table merged with the next ones.
    for i in 0..1000u32 {
        match i % 3 {
            0 => store.put(format!("k{i:04}").as_bytes(), b"new").unwrap(),
            1 => store.delete(format!("k{i:04}").as_bytes()).unwrap(),
            _ => store.put(format!("k{i:04}x").as_bytes(), b"new").unwrap(),
        }
    }
    store.flush().unwrap();
    store.put(b"k0500", b"newer").unwrap();
    store.flush().unwrap();
    store.compact().unwrap();
    assert_eq!(store.stats().tables.len(), 1);
    let rest: Vec<_> = scan
        .map(Result::unwrap)
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    assert_eq!(rest.len(), 990);
    assert!(rest.iter().all(|(k, v)| k.len() == 5 && v == b"old"));
    // A new scan sees the new state.
    let now: Vec<_> = store
        .scan::<&[u8]>(..)
        .map(Result::unwrap)
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    assert_eq!(now.len(), 334 + 333 + 333);
    assert_eq!(
        store.get(b"k0500").unwrap().map(Vec::from),
        Some(b"newer".to_vec())
    );
}

/// A scan started before a compaction keeps reading the tables it started with after the
/// compaction replaced them; their files stay until the scan is dropped (the deletion rule,
/// `docs/engine.md`, "The table set").
#[test]
fn a_scan_reads_tables_a_compaction_removed() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default().compaction_trigger(None);
    let store = Store::open(dir.path(), opts).unwrap();
    for round in 0..4u32 {
        for i in 0..5000u32 {
            let k = format!("k{:05}", i * 4 + round);
            store.put(k.as_bytes(), [round as u8; 100]).unwrap();
        }
        store.flush().unwrap();
    }
    let tables = |d: &std::path::Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".sst"))
            .collect();
        v.sort();
        v
    };
    let before = tables(dir.path());
    assert_eq!(before.len(), 4);
    let mut scan = store.scan::<&[u8]>(..);
    assert_eq!(scan.next().unwrap().unwrap().0, b"k00000");
    store.compact().unwrap();
    let during = tables(dir.path());
    assert_eq!(store.stats().tables.len(), 1);
    assert_eq!(
        during.len(),
        5,
        "the scan's tables and the compaction's: {during:?}"
    );
    assert!(
        before.iter().all(|t| during.contains(t)),
        "{before:?} {during:?}"
    );
    let rest: Vec<_> = scan
        .by_ref()
        .map(Result::unwrap)
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    assert_eq!(rest.len(), 19_999);
    for (i, (k, v)) in rest.iter().enumerate() {
        let n = i as u32 + 1;
        assert_eq!(k, format!("k{n:05}").as_bytes());
        assert_eq!(v, &[(n % 4) as u8; 100]);
    }
    drop(scan);
    let after = tables(dir.path());
    assert_eq!(after.len(), 1);
    assert!(
        before.iter().all(|t| !after.contains(t)),
        "the old tables' files are gone: {before:?} {after:?}"
    );
}

/// A scan of a few entries from a key reads about one block per source (plus the blocks its
/// entries fill), however large the tables are; a source whose range starts after the
/// scan's last key is never read.
#[test]
fn a_short_scan_reads_a_block_per_source_not_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default().compaction_trigger(None);
    let store = Store::open(dir.path(), opts).unwrap();
    // Four overlapping L0 tables of 25,000 entries (about 900 blocks each).
    for round in 0..4u32 {
        for i in 0..25_000u32 {
            let k = format!("k{:06}", i * 4 + round);
            store.put(k.as_bytes(), [7u8; 100]).unwrap();
        }
        store.flush().unwrap();
    }
    // And a fifth that starts far beyond the scans below.
    for i in 0..1000u32 {
        store.put(format!("z{i:06}").as_bytes(), b"v").unwrap();
    }
    store.flush().unwrap();
    let tables = store.stats().tables;
    assert_eq!(tables.len(), 5);
    // Blocks are cut at 4 KiB of entries before compression (these values compress well).
    let bytes: u64 = tables.iter().map(|t| t.data_bytes).sum();
    assert!(bytes > 2000 * 4096, "{bytes} bytes of data blocks");
    // The blocks a scan needs, read from the file or found in the block cache (a later scan
    // may find a block an earlier one left there).
    let reads = || store.stats().data_blocks_used();
    for (from, limit) in [
        ("k000000", 1),
        ("k050001", 10),
        ("k077777", 100),
        ("k099990", 50),
    ] {
        let before = reads();
        let got: Vec<_> = store
            .scan::<&[u8]>(from.as_bytes()..)
            .take(limit)
            .map(Result::unwrap)
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        let read = reads() - before;
        assert_eq!(got.len(), limit);
        assert_eq!(got[0].0, from.as_bytes());
        // Each of the 4 overlapping tables: the block holding the start, and one more per
        // ~35 entries it contributes (a quarter of `limit`); the `z` table: none.
        let most = 4 * (1 + (limit as u64 / 4).div_ceil(30) + 1);
        assert!(
            read <= most,
            "scan of {limit} from {from}: {read} block reads, at most {most}"
        );
        // The tables whose smallest key lies below the start are read; the others only once
        // the scan reaches their smallest key: a scan of one entry from the very first key
        // reads one table.
        let least = if from == "k000000" { 1 } else { 4 };
        assert!(
            read >= least,
            "scan of {limit} from {from}: {read} block reads"
        );
        if limit == 1 {
            assert_eq!(read, 1);
        }
    }
    // A scan past every `k` key reads the `z` table only.
    let before = reads();
    assert_eq!(store.scan::<&[u8]>(b"y".as_slice()..).take(3).count(), 3);
    assert_eq!(reads() - before, 1);
}

/// Scans that read blocks the cache does not hold (cache off, or far smaller than the data,
/// so that it is full and admits few), raw and LZ4 blocks alike, interleaved with point
/// lookups that decompress blocks in the same thread, with `pread` and mapped tables: every
/// scan is checked against the model.
#[test]
fn scans_of_blocks_the_cache_does_not_hold() {
    for (cache, mmap_reads) in [(0, false), (16 << 10, false), (16 << 10, true)] {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::default()
            .compaction_trigger(None)
            .block_cache_bytes(cache)
            .mmap_reads(mmap_reads);
        let store = Store::open(dir.path(), opts).unwrap();
        let mut model = Model::new();
        let mut rng = Rng::new(7 + cache as u64);
        // Three overlapping tables; runs of 100 keys alternate between values that compress
        // (whole LZ4 blocks) and random ones (raw blocks), of lengths that vary from block to
        // block, so a reused buffer is longer or shorter than the block it takes next.
        for round in 0..3u64 {
            for i in 0..6000u64 {
                let n = i * 3 + round;
                let k = format!("k{n:06}").into_bytes();
                let len = 1 + (n * 7 % 190) as usize;
                let v = if (n / 100) % 2 == 0 {
                    vec![b'a' + (n % 5) as u8; len]
                } else {
                    (0..len).map(|_| rng.next() as u8).collect()
                };
                store.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            store.flush().unwrap();
        }
        let s = store.stats();
        assert_eq!(s.tables.len(), 3);
        assert!(
            s.tables
                .iter()
                .all(|t| t.stored_data_bytes < t.data_bytes * 9 / 10),
            "some blocks compressed, some not"
        );
        let before = store.stats();
        let mut returned = 0;
        for i in 0..400u64 {
            let from = format!("k{:06}", rng.below(18_100)).into_bytes();
            let limit = 1 + rng.below(300) as usize;
            let got: Vec<_> = store
                .scan::<&[u8]>(from.as_slice()..)
                .take(limit)
                .map(Result::unwrap)
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect();
            let want: Vec<_> = model
                .range(from.clone()..)
                .take(limit)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            assert_eq!(got, want, "cache {cache} mmap {mmap_reads} scan {i}");
            returned += got.len();
            let k = format!("k{:06}", rng.below(18_000)).into_bytes();
            assert_eq!(
                store.get(&k).unwrap().map(Vec::from).as_ref(),
                model.get(&k)
            );
        }
        let after = store.stats();
        let read = after.data_block_reads - before.data_block_reads;
        let hits = after.block_cache_hits - before.block_cache_hits;
        assert!(returned > 20_000, "{returned} entries");
        // Most blocks came from the files: the cache is off or far smaller than the data.
        assert!(read > 4 * hits, "{read} block reads, {hits} cache hits");
    }
}

#[test]
fn scan_is_send() {
    fn send<T: Send>() {}
    send::<Scan>();
}

/// A thread can write while it iterates: the scan holds no lock between items.
#[test]
fn writing_while_iterating_from_the_same_thread() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default().memtable_bytes(64 << 10);
    let store = Store::open(dir.path(), opts).unwrap();
    for i in 0..2000u32 {
        store.put(format!("k{i:05}").as_bytes(), b"1").unwrap();
    }
    let mut seen = 0;
    for item in store.scan::<&[u8]>(..) {
        let (k, v) = item.unwrap();
        let (k, v) = (k.to_vec(), v.to_vec());
        assert_eq!(v, b"1");
        // Overwrite what was read, delete what comes next, add keys in between: memtables
        // fill and switch while the scan goes on.
        store.put(&k, b"2").unwrap();
        let mut next = k.clone();
        next.push(b'~');
        store.put(&next, [3u8; 200]).unwrap();
        seen += 1;
    }
    assert_eq!(seen, 2000);
    assert!(
        store.stats().flushes > 0,
        "the memtable never switched under the scan"
    );
    assert_eq!(store.scan::<&[u8]>(..).count(), 4000);
}

/// A store of one table of `n` entries with 100 random bytes as values (raw blocks), and its
/// file's path.
fn one_raw_table(dir: &std::path::Path, n: u64) -> (Model, std::path::PathBuf) {
    let store = Store::open(dir, Options::default()).unwrap();
    let mut model = Model::new();
    let mut rng = Rng::new(99);
    for i in 0..n {
        let k = format!("k{i:06}").into_bytes();
        let v: Vec<u8> = (0..100).map(|_| rng.next() as u8).collect();
        store.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    store.flush().unwrap();
    let t = &store.stats().tables;
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].stored_data_bytes, t[0].data_bytes, "raw blocks");
    (model, dir.join(format!("{:06}.sst", t[0].number)))
}

/// A scan that misses the cache reads the block it needs and the next one in one read, and
/// then goes on into the next block without a cache lookup: a whole scan of a table on a
/// cold cache reads every block once, finds none in the cache, and misses about one block in
/// two. Tables read in place from a map (`mmap_reads`) read no block ahead.
#[test]
fn a_scan_that_misses_reads_the_next_block_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = one_raw_table(dir.path(), 20_000);
    for mmap_reads in [false, true] {
        let opts = Options::default().mmap_reads(mmap_reads);
        // Reopened: the cache starts empty.
        let store = Store::open(dir.path(), opts).unwrap();
        let got: Vec<_> = store
            .scan::<&[u8]>(..)
            .map(Result::unwrap)
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        assert!(got.iter().map(|(k, v)| (k, v)).eq(model.iter()));
        let s = store.stats();
        let (reads, misses) = (s.data_block_reads, s.block_cache_misses);
        assert!(reads > 500, "{reads} blocks");
        assert_eq!(s.block_cache_hits, 0);
        if mmap_reads {
            assert_eq!(misses, reads);
        } else {
            // (Not quite one in two: a block may end too far from the start of the one
            // before it.)
            assert!(20 * misses <= 11 * reads, "{misses} misses, {reads} reads");
        }
    }
}

/// A damaged block that a scan read ahead, with the block before it, is found when the scan
/// reaches it: the entries before it are returned, then an error naming the file and the
/// block's offset.
#[test]
fn a_damaged_block_read_ahead_is_an_error_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (model, path) = one_raw_table(dir.path(), 2_000);
    let (offset, len) = filterstore::table::Table::open(&path, false)
        .unwrap()
        .block_span(1)
        .unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[offset as usize + len as usize / 2] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let mut scan = store.scan::<&[u8]>(..);
    let mut ok = 0;
    let err = loop {
        match scan.next() {
            Some(Ok((k, v))) => {
                assert_eq!(model.get(&*k), Some(&v.to_vec()));
                ok += 1;
            }
            Some(Err(e)) => break e,
            None => panic!("the damaged block was not found"),
        }
    };
    assert!(ok > 5, "{ok} entries before the damaged block");
    assert!(scan.next().is_none(), "an error ends the scan");
    let msg = err.to_string();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(msg.contains(&name), "{msg}");
    assert!(msg.contains(&offset.to_string()), "{msg}");
}

/// Data blocks of the store's live tables.
fn data_blocks(dir: &std::path::Path, store: &Store) -> u64 {
    let tables = store.stats().tables;
    let blocks = tables.iter().map(|t| {
        let path = dir.join(format!("{:06}.sst", t.number));
        let table = filterstore::table::Table::open(&path, false).unwrap();
        table.block_count() as u64
    });
    blocks.sum()
}

/// Scans through every path a block takes answer as the model: the cache off, small and
/// larger than the data; `pread` and `mmap_reads`; raw, LZ4 and zstd blocks; values longer
/// than a read-ahead (blocks longer than 4 KiB, stored raw or compressed below it);
/// tombstones over several tables and levels. Whole, from random starts with a limit, by
/// prefix, and held across a compaction; a whole scan needs every block of every table
/// once (`data_block_reads + block_cache_hits`), cold and warm.
#[test]
fn scans_agree_with_the_model_on_every_block_path() {
    let codecs = filterstore::Compression::ALL
        .into_iter()
        .filter(|c| c.is_available());
    for compression in codecs {
        for (cache, mmap_reads) in [
            (0, false),
            (0, true),
            (16 << 10, false),
            (16 << 10, true),
            (32 << 20, false),
        ] {
            let what = format!("{compression} cache {cache} mmap {mmap_reads}");
            let dir = tempfile::tempdir().unwrap();
            let opts = Options::default()
                .compression(compression)
                .block_cache_bytes(cache)
                .mmap_reads(mmap_reads)
                .memtable_bytes(96 << 10)
                .table_bytes(64 << 10)
                .compaction_trigger(None)
                .fs(Arc::new(NoSyncFs));
            let store = Store::open(dir.path(), opts).unwrap();
            let mut rng = Rng::new(7);
            let mut model = Model::new();
            for _ in 0..3 {
                for _ in 0..500 {
                    let p = ["a", "b", "c"][rng.below(3) as usize];
                    let k = format!("{p}{:04}", rng.below(1500)).into_bytes();
                    let v = match rng.below(12) {
                        0 | 1 => {
                            store.delete(&k).unwrap();
                            model.remove(&k);
                            continue;
                        }
                        // Incompressible: a raw block longer than 4 KiB.
                        2 => (0..4500 + rng.below(9000))
                            .map(|_| rng.next() as u8)
                            .collect(),
                        // Compressible: longer than 4 KiB decoded, stored shorter.
                        3 => vec![b'x'; 4500 + rng.below(9000) as usize],
                        4..=7 => rng.bytes(100),
                        _ => vec![b'a' + rng.below(3) as u8; 1 + rng.below(120) as usize],
                    };
                    store.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                store.flush().unwrap();
            }
            let whole = |store: &Store, what: &str| {
                let before = store.stats();
                let got: Vec<_> = store
                    .scan::<&[u8]>(..)
                    .map(Result::unwrap)
                    .map(|(k, v)| (k.to_vec(), v.to_vec()))
                    .collect();
                assert!(got.iter().map(|(k, v)| (k, v)).eq(model.iter()), "{what}");
                let s = store.stats();
                let used = s.data_block_reads + s.block_cache_hits
                    - before.data_block_reads
                    - before.block_cache_hits;
                assert_eq!(used, data_blocks(dir.path(), store), "{what}: blocks used");
            };
            assert!(store.stats().tables.len() >= 3, "{what}");
            // Held across a compaction that removes every table it reads.
            let mut held = store.scan::<&[u8]>(..);
            let head: Vec<_> = held
                .by_ref()
                .take(10)
                .map(Result::unwrap)
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect();
            whole(&store, &format!("{what}, cold"));
            whole(&store, &format!("{what}, warm"));
            store.compact().unwrap();
            let rest = held
                .map(Result::unwrap)
                .map(|(k, v)| (k.to_vec(), v.to_vec()));
            let all: Vec<_> = head.into_iter().chain(rest).collect();
            assert!(
                all.iter().map(|(k, v)| (k, v)).eq(model.iter()),
                "{what}: held"
            );
            whole(&store, &format!("{what}, compacted"));
            for _ in 0..40 {
                let start = format!(
                    "{}{:04}",
                    ["a", "b", "c"][rng.below(3) as usize],
                    rng.below(1500)
                );
                let limit = 1 + rng.below(60) as usize;
                let got: Vec<_> = store
                    .scan::<&[u8]>((Bound::Included(start.as_bytes()), Bound::Unbounded))
                    .take(limit)
                    .map(Result::unwrap)
                    .map(|(k, v)| (k.to_vec(), v.to_vec()))
                    .collect();
                let want: Vec<_> = model
                    .range(start.clone().into_bytes()..)
                    .take(limit)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert!(got == want, "{what}: from {start} limit {limit}");
            }
            for p in ["a", "b", "c", "b01", "d"] {
                let got: Vec<_> = store
                    .scan_prefix(p.as_bytes())
                    .map(Result::unwrap)
                    .map(|(k, v)| (k.to_vec(), v.to_vec()))
                    .collect();
                let want: Vec<_> = model
                    .range(p.as_bytes().to_vec()..)
                    .take_while(|(k, _)| k.starts_with(p.as_bytes()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert!(got == want, "{what}: prefix {p}");
            }
        }
    }
}
