//! Scans with range filters: the answer never changes (against a `BTreeMap` model, over
//! ranges of every length and keys that share long prefixes), and a table whose range filter
//! says "empty" is skipped without a block read, as the counters show.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use common::NoSyncFs;
use filterstore::{Options, Store};
use proptest::prelude::*;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn small(range_bits: f64) -> Options {
    Options::default()
        .memtable_bytes(1 << 20)
        .compaction_trigger(None)
        .range_filter_bits(range_bits)
        .fs(Arc::new(NoSyncFs))
}

/// Keys drawn from a few shapes: a long shared prefix then a short tail (the filter's
/// window starts after the common prefix), short keys, keys with trailing zero bytes, and
/// keys that are prefixes of others.
fn key() -> impl Strategy<Value = Vec<u8>> {
    let long = (0usize..40, prop::collection::vec(any::<u8>(), 0..4))
        .prop_map(|(n, tail)| [vec![b'p'; n], tail].concat());
    let short = prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', b'b', 255]), 0..4);
    prop_oneof![long, short]
}

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>),
    Delete(Vec<u8>),
    Flush,
    Compact,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => key().prop_map(Op::Put),
        2 => key().prop_map(Op::Delete),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
    ]
}

/// A range of every kind: empty, one key, short, long, open at either end or both.
fn bounds() -> impl Strategy<Value = (Bound<Vec<u8>>, Bound<Vec<u8>>)> {
    let b = prop_oneof![
        1 => Just(Bound::Unbounded),
        3 => key().prop_map(Bound::Included),
        3 => key().prop_map(Bound::Excluded),
    ];
    (b.clone(), b)
}

fn empty_or_inverted(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    use Bound::*;
    match (lo, hi) {
        (Included(a), Included(b)) => a > b,
        (Included(a) | Excluded(a), Excluded(b)) | (Excluded(a), Included(b)) => a >= b,
        _ => false,
    }
}

fn check(store: &Store, model: &Model, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) {
    let want: Vec<(Vec<u8>, Vec<u8>)> = if empty_or_inverted(&lo, &hi) {
        Vec::new()
    } else {
        model
            .range((lo.clone(), hi.clone()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let got: Vec<_> = store
        .scan::<Vec<u8>>((lo.clone(), hi.clone()))
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(got, want, "scan {lo:?}..{hi:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every scan and prefix scan gives the model's answer, with range filters of 4 and 16
    /// bits per key (4: many false positives, which must cost reads, never keys).
    #[test]
    fn scans_agree_with_the_model(
        ops in prop::collection::vec(op(), 1..120),
        ranges in prop::collection::vec(bounds(), 1..40),
        prefixes in prop::collection::vec(key(), 1..10),
        bits in prop::sample::select(vec![4.0, 16.0]),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), small(bits)).unwrap();
        let mut model = Model::new();
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Put(k) => {
                    let v = format!("v{i}").into_bytes();
                    store.put(k, &v).unwrap();
                    model.insert(k.clone(), v);
                }
                Op::Delete(k) => {
                    store.delete(k).unwrap();
                    model.remove(k);
                }
                Op::Flush => store.flush().unwrap(),
                Op::Compact => store.compact().unwrap(),
            }
        }
        store.flush().unwrap();
        for (lo, hi) in ranges {
            check(&store, &model, lo, hi);
        }
        // Single keys, present and absent: [k, k] and [k, k+"\0").
        for k in model.keys().take(20).chain(prefixes.iter()) {
            check(&store, &model, Bound::Included(k.clone()), Bound::Included(k.clone()));
            let next = [k.as_slice(), &[0]].concat();
            check(&store, &model, Bound::Included(k.clone()), Bound::Excluded(next));
        }
        for p in &prefixes {
            let want: Vec<_> = model
                .iter()
                .filter(|(k, _)| k.starts_with(p))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let got: Vec<_> = store.scan_prefix(p).map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec()))).collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(got, want, "prefix {:?}", p);
        }
        let s = store.stats();
        prop_assert!(s.range_skipped + s.range_false_positives <= s.range_probes);
        // Reopened: the range filters come back from the manifest.
        drop(store);
        let store = Store::open(dir.path(), small(0.0)).unwrap();
        let with = store.stats().tables.iter().filter(|t| t.range_filter_bytes > 0).count();
        prop_assert_eq!(with, store.stats().tables.len());
        check(&store, &model, Bound::Unbounded, Bound::Unbounded);
    }
}

/// 16-byte random keys (as the side-by-side harness's), in `tables` flushed tables.
fn random_tables(dir: &std::path::Path, bits: f64, tables: usize, per: usize) -> Store {
    let store = Store::open(dir, small(bits)).unwrap();
    let mut x = 0x1234_5678_9abc_def1u64;
    for _ in 0..tables {
        for _ in 0..per {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Even keys are present; odd ones (the last bit flipped) are absent.
            let k = (u128::from(x) << 64 | u128::from(x.rotate_left(29))) & !1;
            store.put(k.to_be_bytes(), b"value").unwrap();
        }
        store.flush().unwrap();
    }
    store
}

/// Empty scans [a, a+1) at absent keys inside every table's range: with range filters the
/// tables are skipped (almost) without a read; without them each costs a block per table.
#[test]
fn empty_scans_skip_tables() {
    let (tables, per, scans) = (4, 20_000, 2_000u64);
    let mut reads = Vec::new();
    for bits in [0.0, 16.0] {
        let dir = tempfile::tempdir().unwrap();
        let store = random_tables(dir.path(), bits, tables, per);
        let before = store.stats();
        let mut x = 0x0fed_cba9_8765_4321u64;
        for _ in 0..scans {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = (u128::from(x) << 64 | u128::from(x.rotate_left(29))) | 1;
            let b = a + 1;
            let n = store
                .scan(a.to_be_bytes().as_slice()..b.to_be_bytes().as_slice())
                .count();
            assert_eq!(n, 0);
        }
        let s = store.stats();
        let used = (s.data_block_reads + s.block_cache_hits)
            - (before.data_block_reads + before.block_cache_hits);
        if bits == 0.0 {
            assert_eq!(s.range_probes, 0);
            assert!(used >= scans * tables as u64 * 9 / 10, "{used} blocks");
        } else {
            // Every table reached was asked; almost all said "empty".
            assert!(s.range_probes >= scans * tables as u64 * 9 / 10, "{s:?}");
            assert_eq!(s.range_false_positives, s.range_probes - s.range_skipped);
            assert_eq!(
                used, s.range_false_positives,
                "a false positive costs one block"
            );
            assert!(s.range_false_positives * 100 < s.range_probes, "{s:?}");
            assert!(s.range_filter_bytes > 0);
        }
        reads.push(used);
    }
    assert!(reads[1] * 50 < reads[0], "{reads:?}");
}

/// A present key's one-key range is never skipped, and a range holding keys of only some
/// tables reads the others only on a false positive.
#[test]
fn present_keys_are_found_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let store = random_tables(dir.path(), 16.0, 3, 5_000);
    let keys: Vec<Vec<u8>> = store
        .scan::<&[u8]>(..)
        .map(|r| r.unwrap().0.to_vec())
        .step_by(97)
        .collect();
    let before = store.stats();
    for k in &keys {
        let got: Vec<_> = store
            .scan(k.as_slice()..=k.as_slice())
            .map(|r| r.unwrap().0.to_vec())
            .collect();
        assert_eq!(got, std::slice::from_ref(k));
    }
    let s = store.stats();
    let probes = s.range_probes - before.range_probes;
    let empty = (s.range_skipped - before.range_skipped)
        + (s.range_false_positives - before.range_false_positives);
    // One table holds each key: it answers "maybe" and yields it; the others are empty.
    assert_eq!(probes - empty, keys.len() as u64);
}

/// The range counters are lifetime counters: read back at open and added to across
/// handles; a crash keeps the counts saved by the last flush and loses only the scans made
/// after it.
#[test]
fn range_counters_survive_reopen_and_a_crash_keeps_the_last_saved() {
    use filterstore::io::FaultFs;
    let t = tempfile::tempdir().unwrap();
    let live = t.path().join("live");
    let fs = FaultFs::new();
    let o = || small(16.0).fs(Arc::new(fs.clone()));
    // Keys 0, 2, …, 398 as 4-byte big-endian; a scan of [2i + 1, 2i + 2) is empty.
    let empty_scans = |s: &Store, from: u32, n: u32| {
        for i in from..from + n {
            let (a, b) = ((2 * i + 1).to_be_bytes(), (2 * i + 2).to_be_bytes());
            assert_eq!(s.scan(a.as_slice()..b.as_slice()).count(), 0);
        }
    };
    let first = {
        let s = Store::open(&live, o()).unwrap();
        for i in 0..200u32 {
            s.put((2 * i).to_be_bytes(), b"v").unwrap();
        }
        s.flush().unwrap();
        empty_scans(&s, 0, 150);
        let st = s.stats();
        assert_eq!(st.range_probes, 150, "one table, asked by every scan");
        assert!(st.range_skipped > 140, "{st:?}");
        assert_eq!(st.range_skipped + st.range_false_positives, 150);
        assert_eq!(
            (
                st.lifetime.range_probes,
                st.lifetime.range_skipped,
                st.lifetime.range_false_positives
            ),
            (st.range_probes, st.range_skipped, st.range_false_positives)
        );
        st.lifetime
    };
    let s = Store::open(&live, o()).unwrap();
    let st = s.stats();
    assert_eq!(st.range_probes, 0, "this process's counters start at zero");
    assert_eq!(st.lifetime.range_probes, 150);
    assert_eq!(st.lifetime.range_skipped, first.range_skipped);
    assert_eq!(
        st.lifetime.range_false_positives,
        first.range_false_positives
    );
    empty_scans(&s, 0, 40);
    s.put(1000u32.to_be_bytes(), b"w").unwrap();
    s.flush().unwrap(); // saves 190 probes (the new table is past every scanned range)
    let saved = s.stats().lifetime;
    assert_eq!(saved.range_probes, 190);
    empty_scans(&s, 50, 30); // saved only at close
    let img = t.path().join("crash");
    std::fs::create_dir(&img).unwrap();
    fs.crash_image(&img, 0).unwrap();
    drop(s); // a clean close of the live store saves 220
    let crashed = Store::open(&img, small(16.0)).unwrap().stats().lifetime;
    assert_eq!(
        (
            crashed.range_probes,
            crashed.range_skipped,
            crashed.range_false_positives
        ),
        (
            saved.range_probes,
            saved.range_skipped,
            saved.range_false_positives
        )
    );
    let l = Store::open(&live, o()).unwrap().stats().lifetime;
    assert_eq!(l.range_probes, 220);
    assert_eq!(l.range_skipped + l.range_false_positives, 220);
    assert!(l.range_skipped > saved.range_skipped);
}

/// A seal reads the memtable's keys in the order they were inserted (its memory's order), not
/// in key order: the table's range filter must still be the one of its keys, tombstones'
/// included, byte for byte.
#[test]
fn a_sealed_tables_range_filter_is_the_one_of_its_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small(16.0)).unwrap();
    let mut keys = std::collections::BTreeSet::new();
    for i in 0..3000u64 {
        // Inserted out of key order: a multiplicative permutation of 0..3000.
        let j = i * 1237 % 3000;
        let k = format!("user:{:05}:{}", j * 7, j % 13).into_bytes();
        store.put(&k, b"v").unwrap();
        if j % 5 == 0 {
            store.delete(&k).unwrap();
        }
        if j % 7 == 0 {
            store.put(&k, b"again").unwrap();
        }
        keys.insert(k);
    }
    store.flush().unwrap();
    let ranges: Vec<std::path::PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "range"))
        .collect();
    assert_eq!(ranges.len(), 1, "one sealed table, one range filter");
    let want = filterstore::filter::range::build(keys.iter(), 16.0).unwrap();
    assert_eq!(std::fs::read(&ranges[0]).unwrap(), want);
}
