//! The L0 merge (`compaction::plan::plan_l0_merge`, docs/engine.md "L0 merge"): small L0
//! tables merged into one L0 table in their place. Checked against a `BTreeMap` model with
//! overwrites and deletes of keys whose older versions lie in L1 and in older L0 tables,
//! flushes racing the background merges, a scan opened before a merge and read after it,
//! and the same under the global filter with lookups racing the merges.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use common::{NoSyncFs, Rng, StableReaders};
use filterstore::{FilterKind, Options, Store};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// 64 KiB memtables, the default trigger (8: L0 merges from 4 tables of at most 128 KiB
/// together), an L1 far larger than L0 so that L0 → L1 is not due.
fn opts(filter: FilterKind) -> Options {
    Options::default()
        .filter(filter)
        .memtable_bytes(64 << 10)
        .table_bytes(256 << 10)
        .l1_bytes(64 << 20)
        .idle_drain(None)
        .fs(Arc::new(NoSyncFs))
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

/// 20,000 keys, compacted into L1: the old versions every later write overwrites or deletes.
fn base(store: &Store, model: &mut Model, rng: &mut Rng) {
    for i in 0..20_000 {
        let v = rng.bytes(30);
        store.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    store.flush().unwrap();
    store.compact().unwrap();
    assert_eq!(l0(store), 0);
}

fn l0(store: &Store) -> usize {
    store.stats().tables.iter().filter(|t| t.level == 0).count()
}

fn l0_bytes(store: &Store) -> u64 {
    let s = store.stats();
    s.tables
        .iter()
        .filter(|t| t.level == 0)
        .map(|t| t.file_bytes)
        .sum()
}

/// A small flush: overwrites and deletes of random keys (of 20,500: some new).
fn small_flush(store: &Store, model: &mut Model, rng: &mut Rng) {
    for _ in 0..50 + rng.below(400) {
        let k = key(rng.below(20_500));
        if rng.below(4) == 0 {
            store.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v = rng.bytes(30);
            store.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
    store.flush().unwrap();
}

fn check_scan(store: &Store, model: &Model, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) {
    let got: Vec<_> = store
        .scan::<Vec<u8>>((lo.clone(), hi.clone()))
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap();
    let want: Vec<_> = model
        .range((lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "scan differs from the model");
}

fn check(store: &Store, model: &Model, rng: &mut Rng) {
    for _ in 0..200 {
        let k = key(rng.below(20_500));
        assert_eq!(
            store.get(&k).unwrap().map(Vec::from).as_ref(),
            model.get(&k),
            "{k:?}"
        );
    }
    for _ in 0..20 {
        let (a, n) = (rng.below(20_500), rng.below(300));
        check_scan(
            store,
            model,
            Bound::Included(key(a)),
            Bound::Excluded(key(a + n)),
        );
    }
}

/// Small flushes with the background thread merging L0 as they come (flushes racing the
/// merges, whose outputs must stay behind them), and now and then all compactions run to the
/// end: every get and scan as the model says, L0 merged into few tables, nothing in L1
/// rewritten.
fn small_flushes_against_the_model(filter: FilterKind) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(11);
    let store = Store::open(dir.path(), opts(filter)).unwrap();
    let mut model = Model::new();
    base(&store, &mut model, &mut rng);
    let before = store.stats();
    for round in 0..60 {
        small_flush(&store, &mut model, &mut rng);
        check(&store, &model, &mut rng);
        if round % 7 == 6 {
            store.wait_for_compaction().unwrap();
            // Four tables of at most two memtables together are merged; more wait for the
            // trigger (8) and L0 → L1.
            let (n, bytes) = (l0(&store), l0_bytes(&store));
            assert!(
                n < 4 || bytes > 128 << 10,
                "L0 left at {n} tables of {bytes} bytes"
            );
            check(&store, &model, &mut rng);
        }
    }
    store.wait_for_compaction().unwrap();
    check_scan(&store, &model, Bound::Unbounded, Bound::Unbounded);
    let s = store.stats();
    assert!(
        s.l0_merges - before.l0_merges >= 10,
        "{} L0 merges",
        s.l0_merges - before.l0_merges
    );
    drop(store);
    let store = Store::open(dir.path(), opts(filter)).unwrap();
    check_scan(&store, &model, Bound::Unbounded, Bound::Unbounded);
    for k in (0..20_500).map(key) {
        assert_eq!(
            store.get(&k).unwrap().map(Vec::from).as_ref(),
            model.get(&k)
        );
    }
}

#[test]
fn l0_merges_keep_the_newest_version_and_hide_deleted_keys() {
    small_flushes_against_the_model(FilterKind::Bloom);
}

#[test]
fn l0_merges_under_the_global_filter_keep_every_key_under_its_run() {
    small_flushes_against_the_model(FilterKind::Global);
}

/// A scan opened before small flushes and the L0 merge of their tables, read after the
/// merge, sees the store as it was when it started: not the overwrites and deletes made
/// since, and no key twice.
#[test]
fn a_scan_open_across_an_l0_merge_sees_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(5);
    let store = Store::open(dir.path(), opts(FilterKind::BlockedBloom)).unwrap();
    let mut model = Model::new();
    base(&store, &mut model, &mut rng);
    small_flush(&store, &mut model, &mut rng);
    small_flush(&store, &mut model, &mut rng);
    let snapshot = model.clone();
    let mut scan = store.scan::<Vec<u8>>(..);
    let first = scan.next().unwrap().unwrap();
    let first = (first.0.to_vec(), first.1.to_vec());
    let merges = store.stats().l0_merges;
    for _ in 0..4 {
        small_flush(&store, &mut model, &mut rng);
    }
    store.wait_for_compaction().unwrap();
    assert!(store.stats().l0_merges > merges, "no L0 merge ran");
    assert!(l0(&store) < 4);
    assert_ne!(model, snapshot, "the flushes changed nothing");
    let mut got = vec![first];
    got.extend(
        scan.map(Result::unwrap)
            .map(|(k, v)| (k.to_vec(), v.to_vec())),
    );
    let want: Vec<_> = snapshot.into_iter().collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the scan left its snapshot");
    check_scan(&store, &model, Bound::Unbounded, Bound::Unbounded);
}

/// Under the global filter, lookups on other threads racing L0 merges (whose keys are
/// relabelled to the oldest input's run before the output is published) find every key,
/// and afterwards every key is under its table's run.
#[test]
fn lookups_racing_l0_merges_under_the_global_filter_find_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), opts(FilterKind::Global)).unwrap());
    let stable = |i: u64| format!("s{:08}", i.wrapping_mul(0x9e37_79b9) % 100_000_000).into_bytes();
    const STABLE: u64 = 3000;
    // Half the stable keys in L1, half in small L0 tables.
    for i in 0..STABLE / 2 {
        store.put(stable(i), i.to_le_bytes()).unwrap();
    }
    store.flush().unwrap();
    store.compact().unwrap();
    for i in STABLE / 2..STABLE {
        store.put(stable(i), i.to_le_bytes()).unwrap();
        if i % 300 == 0 {
            store.flush().unwrap();
        }
    }
    store.flush().unwrap();
    let readers = StableReaders::spawn(&store, stable, STABLE, 100, 10_000);
    let mut rng = Rng::new(7);
    let merges = store.stats().l0_merges;
    for round in 0..40u64 {
        for i in 0..200 {
            let k = format!("w{:08}", rng.below(100_000_000)).into_bytes();
            store.put(&k, (round * 1000 + i).to_le_bytes()).unwrap();
        }
        store.flush().unwrap();
    }
    store.wait_for_compaction().unwrap();
    readers.stop();
    let s = store.stats();
    assert!(
        s.l0_merges >= merges + 5,
        "{} L0 merges",
        s.l0_merges - merges
    );
    assert!(store.check_global_filter().unwrap().is_some());
}

/// A store closed right after the flush that made an L0 merge due runs it before it closes
/// (its background threads start no new compaction once closing): the next open finds one
/// L0 table, with every key as the model says.
#[test]
fn closing_runs_a_due_l0_merge() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(3);
    let mut model = Model::new();
    {
        let store = Store::open(dir.path(), opts(FilterKind::Bloom)).unwrap();
        base(&store, &mut model, &mut rng);
    }
    let no_compaction = opts(FilterKind::Bloom).compaction_trigger(None);
    for round in 0..5 {
        {
            let store = Store::open(dir.path(), opts(FilterKind::Bloom)).unwrap();
            // Up to 4 tables (the merged one of the last round and 3 new): due.
            for _ in 0..if round == 0 { 4 } else { 3 } {
                for _ in 0..80 {
                    let (k, v) = (key(rng.below(20_500)), rng.bytes(30));
                    store.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                store.flush().unwrap();
            }
        }
        let store = Store::open(dir.path(), no_compaction.clone()).unwrap();
        assert_eq!(l0(&store), 1, "round {round}");
        check(&store, &model, &mut rng);
    }
}
