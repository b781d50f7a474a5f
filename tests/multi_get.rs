//! `Store::multi_get` and `Reader::multi_get` checked against a `BTreeMap` model and against
//! a loop of `get` over the same keys: the same values, and the same counters (lookups,
//! filter answers, false positives, block reads, store-wide and per table).
//!
//! Stores are built in phases, each reopened with a random filter kind (`none` included) so
//! that tables of every kind sit side by side, over tiny tables and levels so that data
//! spreads over L0 and several sorted levels; overwrites and deletes leave newer versions
//! and tombstones above older ones. Batches mix present, deleted, overwritten, never-written
//! and out-of-range keys, with duplicates.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{NoSyncFs, Rng};
use filterstore::{FilterKind, Options, Stats, Store};

/// Options for a settled store: no automatic memtable switch (the memtable keeps what is
/// written until `flush`), compactions only when asked (`wait_for_compaction`), so nothing
/// moves between a `multi_get` and the `get` loop it is compared with.
fn settled_opts(rng: &mut Rng) -> Options {
    Options::default()
        .memtable_bytes(usize::MAX)
        .compaction_trigger(Some(2 + rng.below(3) as usize))
        .l0_slowdown(100)
        .l0_stop(100)
        .table_bytes(512 + rng.below(4096))
        .l1_bytes(2048 + rng.below(4096))
        .level_ratio(2 + rng.below(3))
        .filter(Some(
            FilterKind::ALL[rng.below(FilterKind::ALL.len() as u64) as usize],
        ))
        // High rates, so that false positives (and their block reads) are common.
        .fpr(Some([0.01, 0.1, 0.3][rng.below(3) as usize]))
        .mmap_reads(rng.below(2) == 0)
        // With the block cache off, every block a lookup needs is read from its file; with
        // it on (the default), some are found in the cache.
        .block_cache_bytes([0, 32 << 20][rng.below(2) as usize])
        .fs(Arc::new(NoSyncFs))
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// A batch of `n` keys: written or not, inside the key space or around it, repeats likely.
fn batch(rng: &mut Rng, space: u64, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| match rng.below(10) {
            // Between two keys of the space: never written, inside the tables' ranges.
            0 => format!("k{:05}x", rng.below(space)).into_bytes(),
            // Before and after every key.
            1 => [b"a".as_slice(), b"", b"k", b"z"][rng.below(4) as usize].to_vec(),
            2 => key(space + rng.below(100)),
            // A small range, so keys repeat within a batch.
            3 => key(rng.below(8)),
            _ => key(rng.below(space)),
        })
        .collect()
}

/// The counters a lookup moves, store-wide, then per table (by number).
#[derive(Debug, PartialEq, Eq)]
struct Counts {
    store: [u64; 7],
    /// (table number, level): counters.
    tables: Vec<((u64, u32), [u64; 5])>,
}

/// The counters of `s` that a batch and a loop of the same lookups must move alike: filter
/// answers and the data blocks needed (read from a file or found in the block cache). Where
/// each block came from, and so the bytes read, depends on what the cache held: the loop
/// runs after the batch and finds the blocks the batch left there. With the cache off
/// (`block_cache_capacity == 0`) every block is read, and the bytes read must match too.
fn counts(s: &Stats) -> Counts {
    let exact = s.block_cache_capacity == 0;
    let mut tables: Vec<_> = s
        .tables
        .iter()
        .map(|t| {
            let c = [
                t.filter_negatives,
                t.filter_positives,
                t.false_positives,
                t.data_block_reads + t.block_cache_hits,
                if exact { t.bytes_read } else { 0 },
            ];
            ((t.number, t.level), c)
        })
        .collect();
    tables.sort_unstable();
    Counts {
        store: [
            s.lookups,
            s.filter_negatives,
            s.filter_positives,
            s.false_positives,
            s.unfiltered_reads,
            s.data_blocks_used(),
            if exact { s.bytes_read } else { 0 },
        ],
        tables,
    }
}

/// `after - before`, counter by counter (the table sets must match).
fn delta(before: &Counts, after: &Counts) -> Counts {
    let sub = |a: &[u64], b: &[u64]| -> Vec<u64> { a.iter().zip(b).map(|(x, y)| x - y).collect() };
    assert_eq!(
        before.tables.iter().map(|t| t.0).collect::<Vec<_>>(),
        after.tables.iter().map(|t| t.0).collect::<Vec<_>>(),
        "the table set changed during a comparison"
    );
    Counts {
        store: sub(&after.store, &before.store).try_into().unwrap(),
        tables: before
            .tables
            .iter()
            .zip(&after.tables)
            .map(|(b, a)| (a.0, sub(&a.1, &b.1).try_into().unwrap()))
            .collect(),
    }
}

/// Looks `keys` up with `multi_get` and with a loop of `get` (both through the store, or
/// both through one reader): asserts equal values, equal to the model, and equal counters.
/// Returns the counters' movement (to check that the comparisons compared something).
fn compare(
    store: &Store,
    via_reader: bool,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    keys: &[Vec<u8>],
    what: &str,
) -> Counts {
    let reader = store.reader();
    let c0 = counts(&store.stats());
    let batched = if via_reader {
        reader.multi_get(keys)
    } else {
        store.multi_get(keys)
    }
    .expect("multi_get")
    .into_iter()
    .map(|v| v.map(Vec::from))
    .collect::<Vec<_>>();
    let c1 = counts(&store.stats());
    let looped: Vec<Option<Vec<u8>>> = keys
        .iter()
        .map(|k| {
            if via_reader {
                reader.get(k)
            } else {
                store.get(k)
            }
            .expect("get")
            .map(Vec::from)
        })
        .collect();
    let c2 = counts(&store.stats());
    let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
    assert_eq!(batched.len(), keys.len(), "{what}");
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(
            batched[i],
            want[i],
            "{what}: multi_get of {:?} (position {i}) differs from the model",
            String::from_utf8_lossy(k)
        );
    }
    assert_eq!(
        batched, looped,
        "{what}: multi_get differs from the get loop"
    );
    let (d_batch, d_loop) = (delta(&c0, &c1), delta(&c1, &c2));
    assert_eq!(
        d_batch, d_loop,
        "{what}: multi_get's counters differ from the get loop's"
    );
    d_batch
}

/// Writes `writes` random puts and deletes into `store` and the model.
fn write(
    store: &Store,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut Rng,
    space: u64,
    writes: usize,
) {
    for _ in 0..writes {
        let k = key(rng.below(space));
        if rng.below(4) == 0 {
            store.delete(&k).expect("delete");
            model.remove(&k);
        } else {
            let v = rng.bytes(40);
            store.put(&k, &v).expect("put");
            model.insert(k, v);
        }
    }
}

/// Random settled stores (memtable, L0 and several levels, tombstones, mixed filter kinds),
/// each looked up by many batches through the store and through a reader.
#[test]
fn multi_get_equals_the_model_and_a_get_loop_with_the_same_counters() {
    // Sums over every seed, to check that the stores exercised what they are meant to.
    let mut total = [0u64; 7];
    let mut deepest = 0;
    let mut unfiltered_tables = 0;
    let mut l0_and_levels = 0;
    for seed in 0..24u64 {
        let mut rng = Rng::new(seed);
        let dir = tempfile::tempdir().unwrap();
        let space = 200 + rng.below(2000);
        let mut model = BTreeMap::new();
        let phases = 2 + rng.below(4);
        let mut store = Store::open(dir.path(), settled_opts(&mut rng)).unwrap();
        for phase in 0..phases {
            if phase > 0 {
                // A new filter kind (and table sizes) for the tables written from now on.
                drop(store);
                store = Store::open(dir.path(), settled_opts(&mut rng)).unwrap();
            }
            let flushes = 1 + rng.below(4);
            for _ in 0..flushes {
                let n = 50 + rng.below(400) as usize;
                write(&store, &mut model, &mut rng, space, n);
                store.flush().unwrap();
            }
            store.wait_for_compaction().unwrap();
        }
        // Some flushed tables that wait in L0 (automatic compaction off, so they stay
        // there), then writes left in the memtable.
        drop(store);
        let mut opts = settled_opts(&mut rng);
        opts.compaction_trigger = None;
        let store = Store::open(dir.path(), opts).unwrap();
        for _ in 0..rng.below(3) {
            let n = 50 + rng.below(200) as usize;
            write(&store, &mut model, &mut rng, space, n);
            store.flush().unwrap();
        }
        let n = rng.below(100) as usize;
        write(&store, &mut model, &mut rng, space, n);

        let s = store.stats();
        if s.tables.iter().any(|t| t.level == 0) && s.tables.iter().any(|t| t.level > 0) {
            l0_and_levels += 1;
        }
        deepest = deepest.max(s.tables.iter().map(|t| t.level).max().unwrap_or(0));
        unfiltered_tables += s
            .tables
            .iter()
            .filter(|t| t.filter_kind == FilterKind::None)
            .count();
        for round in 0..8 {
            let n = [1, 2, 17, 100, 1000][rng.below(5) as usize];
            let keys = batch(&mut rng, space, n);
            let what = format!("seed {seed}, round {round}");
            let d = compare(&store, round % 2 == 1, &model, &keys, &what);
            for (t, x) in total.iter_mut().zip(d.store) {
                *t += x;
            }
        }
        // The whole key space at once, in order and reversed.
        let mut all: Vec<Vec<u8>> = (0..space).map(key).collect();
        compare(&store, false, &model, &all, &format!("seed {seed}, all"));
        all.reverse();
        compare(
            &store,
            true,
            &model,
            &all,
            &format!("seed {seed}, all reversed"),
        );
    }
    let [lookups, negatives, positives, false_positives, unfiltered, block_reads, _] = total;
    assert!(lookups > 10_000, "{total:?}");
    assert!(
        negatives > 0 && positives > 0 && false_positives > 0,
        "{total:?}"
    );
    assert!(unfiltered > 0 && block_reads > 0, "{total:?}");
    assert!(deepest >= 2, "no store reached L2");
    assert!(unfiltered_tables > 0, "no table without a filter");
    assert!(
        l0_and_levels > 5,
        "too few stores with both L0 and deeper tables"
    );
}

/// The same comparison while the background threads flush and compact: the memtable
/// switches every few hundred bytes, so lookups meet an immutable memtable waiting to be
/// sealed, and the table set changes under them. Values only (counters depend on which
/// tables a lookup met).
#[test]
fn multi_get_equals_the_model_while_flushes_and_compactions_run() {
    for seed in 0..6u64 {
        let mut rng = Rng::new(100 + seed);
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::default()
            .memtable_bytes(512 + rng.below(4096) as usize)
            .compaction_trigger(Some(2))
            .table_bytes(1024 + rng.below(4096))
            .l1_bytes(4096)
            .level_ratio(2)
            .fs(Arc::new(NoSyncFs))
            .filter(Some(
                FilterKind::ALL[rng.below(FilterKind::ALL.len() as u64) as usize],
            ))
            .fpr(0.1);
        let store = Store::open(dir.path(), opts).unwrap();
        let reader = store.reader();
        let mut model = BTreeMap::new();
        let space = 500;
        for round in 0..300 {
            let n = 1 + rng.below(40) as usize;
            write(&store, &mut model, &mut rng, space, n);
            let n = 1 + rng.below(200) as usize;
            let keys = batch(&mut rng, space, n);
            let got = if round % 2 == 0 {
                store.multi_get(&keys)
            } else {
                reader.multi_get(&keys)
            }
            .unwrap()
            .into_iter()
            .map(|v| v.map(Vec::from))
            .collect::<Vec<_>>();
            for (k, v) in keys.iter().zip(&got) {
                assert_eq!(
                    v.as_ref(),
                    model.get(k),
                    "seed {seed}, round {round}, key {k:?}"
                );
            }
        }
        assert!(store.stats().flushes > 0);
    }
}

/// An empty batch returns nothing and counts nothing, through the store and a reader.
#[test]
fn an_empty_batch_returns_nothing_and_counts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    store.put(b"a", b"1").unwrap();
    store.flush().unwrap();
    let none: [&[u8]; 0] = [];
    let before = counts(&store.stats());
    assert!(store.multi_get(&none).unwrap().is_empty());
    assert!(store.reader().multi_get(&none).unwrap().is_empty());
    assert!(store.multi_get(&Vec::<Vec<u8>>::new()).unwrap().is_empty());
    assert_eq!(counts(&store.stats()), before);
}

/// A reader's `multi_get` sees every write that completed before it, whether it answers
/// from its table snapshot (memtables empty) or through the store (memtables not empty).
#[test]
fn a_readers_multi_get_sees_writes_made_after_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let reader = store.reader();
    let keys = [b"a".as_slice(), b"b", b"c", b"a"];
    assert_eq!(reader.multi_get(&keys).unwrap(), [None, None, None, None]);
    store.put(b"a", b"1").unwrap();
    store.put(b"b", b"2").unwrap();
    let v = |s: &str| Some(s.as_bytes().to_vec());
    // In the memtable.
    assert_eq!(
        reader
            .multi_get(&keys)
            .unwrap()
            .into_iter()
            .map(|v| v.map(Vec::from))
            .collect::<Vec<_>>(),
        [v("1"), v("2"), None, v("1")]
    );
    store.flush().unwrap();
    // In a table, memtables empty: the reader's own snapshot.
    assert_eq!(
        reader
            .multi_get(&keys)
            .unwrap()
            .into_iter()
            .map(|v| v.map(Vec::from))
            .collect::<Vec<_>>(),
        [v("1"), v("2"), None, v("1")]
    );
    store.delete(b"a").unwrap();
    store.put(b"c", b"3").unwrap();
    assert_eq!(
        reader
            .multi_get(&keys)
            .unwrap()
            .into_iter()
            .map(|v| v.map(Vec::from))
            .collect::<Vec<_>>(),
        [None, v("2"), v("3"), None]
    );
    store.flush().unwrap();
    assert_eq!(
        reader
            .multi_get(&keys)
            .unwrap()
            .into_iter()
            .map(|v| v.map(Vec::from))
            .collect::<Vec<_>>(),
        [None, v("2"), v("3"), None]
    );
    store.compact().unwrap();
    assert_eq!(
        reader
            .multi_get(&keys)
            .unwrap()
            .into_iter()
            .map(|v| v.map(Vec::from))
            .collect::<Vec<_>>(),
        [None, v("2"), v("3"), None]
    );
    assert_eq!(store.stats().lookups, 4 * 6);
}
