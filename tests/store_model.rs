//! The store checked against a `BTreeMap` model over long random operation sequences.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use std::sync::Arc;

use common::{NoSyncFs, Rng};
use filterstore::{FilterKind, Options, Store, WriteBatch};

fn opts(rng: &mut Rng) -> Options {
    Options {
        memtable_bytes: 512 + rng.below(8192) as usize,
        compaction_trigger: if rng.below(2) == 0 { None } else { Some(3) },
        filter: Some(FilterKind::ALL[rng.below(4) as usize]),
        fpr: Some([0.01, 0.1, 0.3][rng.below(3) as usize]),
        mmap_reads: rng.below(2) == 0,
        fs: Arc::new(NoSyncFs),
        ..Options::default()
    }
}

fn key(rng: &mut Rng, space: u64) -> Vec<u8> {
    format!("k{:05}", rng.below(space)).into_bytes()
}

fn check_scan(
    store: &Store,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
) {
    let got: Vec<_> = store
        .scan::<Vec<u8>>((lo.clone(), hi.clone()))
        .collect::<Result<_, _>>()
        .expect("scan");
    let want: Vec<_> = model
        .range((lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(got, want);
}

fn run(seed: u64, steps: usize) {
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path(), opts(&mut rng)).unwrap();
    let mut model = BTreeMap::new();
    let space = 50 + rng.below(400);
    for step in 0..steps {
        match rng.below(100) {
            0..=39 => {
                let (k, v) = (key(&mut rng, space), rng.bytes(40));
                store.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            40..=49 => {
                let k = key(&mut rng, space);
                store.delete(&k).unwrap();
                model.remove(&k);
            }
            50..=54 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.below(8) {
                    let k = key(&mut rng, space);
                    if rng.below(3) == 0 {
                        b.delete(k.clone());
                        model.remove(&k);
                    } else {
                        let v = rng.bytes(20);
                        b.put(k.clone(), v.clone());
                        model.insert(k, v);
                    }
                }
                store.write(b).unwrap();
            }
            55..=79 => {
                let k = key(&mut rng, space + 20);
                assert_eq!(
                    store.get(&k).unwrap(),
                    model.get(&k).cloned(),
                    "seed {seed} step {step} key {k:?}"
                );
            }
            80..=84 => {
                let a = key(&mut rng, space);
                let b = key(&mut rng, space);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                check_scan(&store, &model, Bound::Included(lo), Bound::Excluded(hi));
            }
            85 => {
                let p = format!("k{:03}", rng.below(space / 100 + 1)).into_bytes();
                let got: Vec<_> = store.scan_prefix(&p).collect::<Result<_, _>>().unwrap();
                let want: Vec<_> = model
                    .iter()
                    .filter(|(k, _)| k.starts_with(&p))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want);
            }
            86..=89 => store.flush().unwrap(),
            90..=92 => store.compact().unwrap(),
            93..=94 => {
                let kind = FilterKind::ALL[rng.below(4) as usize];
                store
                    .refilter(kind, [0.02, 0.2][rng.below(2) as usize])
                    .unwrap();
            }
            _ => {
                drop(store);
                store = Store::open(dir.path(), opts(&mut rng)).unwrap();
            }
        }
    }
    check_scan(&store, &model, Bound::Unbounded, Bound::Unbounded);
    drop(store);
    let store = Store::open(dir.path(), Options::default()).unwrap();
    check_scan(&store, &model, Bound::Unbounded, Bound::Unbounded);
    for k in model.keys() {
        assert_eq!(store.get(k).unwrap().as_ref(), model.get(k));
    }
}

#[test]
fn random_operations_match_a_btreemap() {
    for seed in 1..=12 {
        run(seed, 3000);
    }
}
