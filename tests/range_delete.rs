//! Range deletion (`delete_range`, `delete_prefix`, `WriteBatch::delete_range`) checked
//! against a `BTreeMap` model over random operation sequences on tiny tables and levels,
//! under every filter kind (per-table kinds, the global filter, range filters on and off),
//! with flushes, compactions, snapshots (checked later against the model of their moment),
//! reverse scans, `multi_get`, readers, pinned readers and reopens interleaved. A range
//! tombstone that hides a newer write, or misses an older one, shows as a wrong read.
//! (`FS_RANGE_SEEDS=N` runs N seeds instead of the CI slice's.)

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use common::model::{self, key};
use common::{NoSyncFs, Rng};
use filterstore::{FilterKind, Options, Slice, Store, WriteBatch};

/// The model's bytes as the store returns them.
fn sl(v: &[u8]) -> Slice {
    Slice::from(v)
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts(rng: &mut Rng, global: bool) -> Options {
    let trigger = 2 + rng.below(3) as usize;
    let kind = if global {
        FilterKind::Global
    } else {
        FilterKind::ALL[rng.below(4) as usize]
    };
    let mut o = Options::default()
        .memtable_bytes(512 + rng.below(4096) as usize)
        .compaction_trigger(if rng.below(5) == 0 {
            None
        } else {
            Some(trigger)
        })
        .l0_slowdown(trigger + 1 + rng.below(3) as usize)
        .l0_stop(trigger + 4 + rng.below(3) as usize)
        .slowdown_bytes_per_sec(64 << 20)
        .table_bytes(1024 + rng.below(4096))
        .l1_bytes(4096 + rng.below(8192))
        .level_ratio(2 + rng.below(3))
        .filter(Some(kind))
        .mmap_reads(rng.below(2) == 0)
        .fs(Arc::new(NoSyncFs));
    o.range_filter_bits = if rng.below(2) == 0 { 0.0 } else { 12.0 };
    o
}

fn range_del(model: &mut Model, start: &[u8], end: &[u8]) {
    let gone: Vec<Vec<u8>> = model
        .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
        .map(|(k, _)| k.clone())
        .collect();
    for k in gone {
        model.remove(&k);
    }
}

fn check_all(store: &Store, model: &Model, what: &str) {
    let got: Vec<_> = store
        .scan::<&[u8]>(..)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let want: Vec<_> = model.iter().map(|(k, v)| (sl(k), sl(v))).collect();
    assert_eq!(got, want, "{what}: full scan");
}

/// Runs one seed: the range deletes made, and the tables dropped whole under them.
fn run(seed: u64, steps: usize, global: bool) -> (u64, u64) {
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path(), opts(&mut rng, global)).unwrap();
    let mut model = Model::new();
    let space = 50 + rng.below(300);
    let mut snaps: Vec<(filterstore::Snapshot, Model)> = Vec::new();
    let mut ranges = 0;
    let mut dropped = 0;
    for step in 0..steps {
        let at = format!("seed {seed} step {step}");
        match rng.below(100) {
            0..=34 => model::put(&store, &mut model, &mut rng, space),
            35..=39 => model::delete(&store, &mut model, &mut rng, space),
            40..=45 => {
                let a = key(&mut rng, space);
                let b = key(&mut rng, space);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                store.delete_range(&lo, &hi).unwrap();
                range_del(&mut model, &lo, &hi);
                ranges += 1;
            }
            46 => {
                let p = format!("k{:03}", rng.below(space / 100 + 1)).into_bytes();
                store.delete_prefix(&p).unwrap();
                let gone: Vec<_> = model
                    .keys()
                    .filter(|k| k.starts_with(&p))
                    .cloned()
                    .collect();
                for k in gone {
                    model.remove(&k);
                }
                ranges += 1;
            }
            47..=49 => {
                // A batch: puts, deletes and a range delete, applied in order.
                let mut b = WriteBatch::new();
                for _ in 0..1 + rng.below(6) {
                    let k = key(&mut rng, space);
                    match rng.below(4) {
                        0 => {
                            let k2 = key(&mut rng, space);
                            let (lo, hi) = if k <= k2 { (k, k2) } else { (k2, k) };
                            b.delete_range(lo.clone(), hi.clone());
                            range_del(&mut model, &lo, &hi);
                        }
                        1 => {
                            b.delete(k.clone());
                            model.remove(&k);
                        }
                        _ => {
                            let v = rng.bytes(20);
                            b.put(k.clone(), v.clone());
                            model.insert(k, v);
                        }
                    }
                }
                store.write(b).unwrap();
            }
            50..=64 => {
                let k = key(&mut rng, space + 20);
                assert_eq!(
                    store.get(&k).unwrap(),
                    model.get(&k).map(|v| sl(v)),
                    "{at} get {k:?}"
                );
            }
            65..=67 => {
                let keys: Vec<Vec<u8>> = (0..8).map(|_| key(&mut rng, space)).collect();
                let want: Vec<_> = keys.iter().map(|k| model.get(k).map(|v| sl(v))).collect();
                assert_eq!(store.multi_get(&keys).unwrap(), want, "{at} multi_get");
                let r = store.reader();
                assert_eq!(r.multi_get(&keys).unwrap(), want, "{at} reader");
                let p = store.pinned_reader().unwrap();
                for (k, w) in keys.iter().zip(&want) {
                    assert_eq!(&p.get(k).unwrap(), w, "{at} pinned {k:?}");
                }
            }
            68..=72 => {
                let a = key(&mut rng, space);
                let b = key(&mut rng, space);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let want: Vec<_> = model
                    .range(lo.clone()..hi.clone())
                    .map(|(k, v)| (sl(k), sl(v)))
                    .collect();
                let got: Vec<_> = store
                    .scan(lo.clone()..hi.clone())
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                assert_eq!(got, want, "{at} scan {lo:?}..{hi:?}");
                let mut back: Vec<_> = store
                    .scan(lo.clone()..hi.clone())
                    .rev()
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                back.reverse();
                assert_eq!(back, want, "{at} reverse scan {lo:?}..{hi:?}");
                // Seek within the range.
                let mut s = store.scan(lo.clone()..hi.clone());
                let mid = key(&mut rng, space);
                s.seek(&mid).unwrap();
                let got: Vec<_> = s.collect::<Result<Vec<_>, _>>().unwrap();
                let want: Vec<_> = want.into_iter().filter(|(k, _)| k[..] >= mid[..]).collect();
                assert_eq!(got, want, "{at} seek {mid:?}");
            }
            73..=75 => {
                if snaps.len() < 3 {
                    snaps.push((store.snapshot(), model.clone()));
                } else {
                    let (s, m) = snaps.remove(rng.below(3) as usize);
                    let got: Vec<_> = s.scan::<&[u8]>(..).collect::<Result<Vec<_>, _>>().unwrap();
                    let want: Vec<_> = m.iter().map(|(k, v)| (sl(k), sl(v))).collect();
                    assert_eq!(got, want, "{at} snapshot scan");
                    for _ in 0..10 {
                        let k = key(&mut rng, space);
                        assert_eq!(
                            s.get(&k).unwrap(),
                            m.get(&k).map(|v| sl(v)),
                            "{at} snapshot get"
                        );
                    }
                }
            }
            76..=84 => store.flush().unwrap(),
            85..=88 => store.compact().unwrap(),
            89..=91 => {
                let a = key(&mut rng, space);
                let b = key(&mut rng, space);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                store.compact_range(&lo, &hi).unwrap();
            }
            92..=96 => store.wait_for_compaction().unwrap(),
            _ => {
                snaps.clear();
                dropped += store.stats().lifecycle.tables_dropped_whole;
                drop(store);
                store = Store::open(dir.path(), opts(&mut rng, global)).unwrap();
                check_all(&store, &model, &at);
            }
        }
    }
    check_all(&store, &model, "end");
    dropped += store.stats().lifecycle.tables_dropped_whole;
    for (s, m) in &snaps {
        let got: Vec<_> = s.scan::<&[u8]>(..).collect::<Result<Vec<_>, _>>().unwrap();
        let want: Vec<_> = m.iter().map(|(k, v)| (sl(k), sl(v))).collect();
        assert_eq!(got, want, "seed {seed}: snapshot at the end");
    }
    snaps.clear();
    drop(store);
    let store = Store::open(dir.path(), Options::default()).unwrap();
    check_all(&store, &model, "reopened");
    for k in 0..space + 20 {
        let k = format!("k{k:05}").into_bytes();
        assert_eq!(
            store.get(&k).unwrap(),
            model.get(&k).map(|v| sl(v)),
            "seed {seed} final {k:?}"
        );
    }
    let ro = Store::open_read_only(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<_> = ro.scan::<&[u8]>(..).collect::<Result<Vec<_>, _>>().unwrap();
    assert_eq!(got.len(), model.len(), "read-only");
    (ranges, dropped)
}

fn seeds() -> u64 {
    std::env::var("FS_RANGE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6)
}

#[test]
fn range_deletes_match_a_btreemap_per_table_filters() {
    let (mut ranges, mut dropped) = (0, 0);
    for seed in 1..=seeds() {
        let (r, d) = run(seed, 2500, false);
        ranges += r;
        dropped += d;
    }
    assert!(ranges > 100, "only {ranges} range deletes");
    // Tables wholly under newer tombstones left unread, and the reads stayed right.
    assert!(dropped > 5, "only {dropped} tables dropped whole");
}

/// Under the global filter too, covered tables leave whole, their keys leave the filter by
/// their key hashes, and the reads (snapshots' too) stay right.
#[test]
fn range_deletes_match_a_btreemap_global_filter() {
    let mut dropped = 0;
    for seed in 100..100 + seeds().div_ceil(2) {
        dropped += run(seed, 2500, true).1;
    }
    assert!(dropped > 2, "only {dropped} tables dropped whole");
}
