//! The store checked against a `BTreeMap` model over long random operation sequences, with
//! the background flush and compaction threads running on tiny tables and levels, so that
//! every compaction path (L0 → L1, Ln → Ln+1 by score and cursor, trivial moves, tombstones
//! kept above older data and dropped at the bottom, output tables rolling) runs many times
//! while reads, scans, reopens and manual compactions interleave. A key whose older version
//! outlived a newer one ("newest wins" broken) shows up as a wrong `get` or scan.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use std::sync::Arc;

use common::model::{self, key};
use common::{NoSyncFs, Rng};
use filterstore::{FilterKind, FilterPolicy, Options, Store};

fn opts(rng: &mut Rng) -> Options {
    let trigger = 2 + rng.below(3) as usize;
    let mut o = Options::default()
        .memtable_bytes(512 + rng.below(8192) as usize)
        .compaction_trigger(if rng.below(5) == 0 {
            None
        } else {
            Some(trigger)
        })
        .l0_slowdown(trigger + 1 + rng.below(3) as usize)
        .l0_stop(trigger + 4 + rng.below(3) as usize)
        .slowdown_bytes_per_sec(64 << 20)
        .table_bytes(1024 + rng.below(8192))
        .l1_bytes(4096 + rng.below(16384))
        .level_ratio(2 + rng.below(3))
        .filter(Some(FilterKind::ALL[rng.below(4) as usize]))
        .fpr(Some([0.01, 0.1, 0.3][rng.below(3) as usize]))
        .mmap_reads(rng.below(2) == 0)
        .fs(Arc::new(NoSyncFs));
    // Half the runs size filters from a budget split across levels (Monkey); at 0.3 bits
    // per key the largest runs get no filter at all.
    if rng.below(2) == 0 {
        o.policy = Some(FilterPolicy::Budget {
            kind: FilterKind::ALL[1 + rng.below(4) as usize],
            bits_per_key: [0.3, 4.0, 10.0][rng.below(3) as usize],
        });
    }
    o
}

fn check_scan(
    store: &Store,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
) {
    let got: Vec<_> = store
        .scan::<Vec<u8>>((lo.clone(), hi.clone()))
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .expect("scan");
    let want: Vec<_> = model
        .range((lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(got, want);
}

/// What a run reached, to show the test covered the leveled paths.
#[derive(Default)]
struct Reached {
    deepest_level: u32,
    compactions: u64,
    trivial_moves: u64,
}

fn note(r: &mut Reached, store: &Store) {
    let s = store.stats();
    r.deepest_level = r
        .deepest_level
        .max(s.tables.iter().map(|t| t.level).max().unwrap_or(0));
    r.compactions += s.compactions;
    r.trivial_moves += s.trivial_moves;
}

fn run(seed: u64, steps: usize, reached: &mut Reached) {
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path(), opts(&mut rng)).unwrap();
    let mut model = BTreeMap::new();
    let space = 50 + rng.below(400);
    for step in 0..steps {
        match rng.below(100) {
            0..=39 => model::put(&store, &mut model, &mut rng, space),
            40..=49 => model::delete(&store, &mut model, &mut rng, space),
            50..=54 => {
                model::batch(&store, &mut model, &mut rng, space);
            }
            55..=79 => {
                let k = key(&mut rng, space + 20);
                assert_eq!(
                    store.get(&k).unwrap().map(Vec::from),
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
                let got: Vec<_> = store
                    .scan_prefix(&p)
                    .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
                    .collect::<Result<_, _>>()
                    .unwrap();
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
                note(reached, &store);
                drop(store);
                store = Store::open(dir.path(), opts(&mut rng)).unwrap();
            }
        }
    }
    check_scan(&store, &model, Bound::Unbounded, Bound::Unbounded);
    note(reached, &store);
    drop(store);
    let store = Store::open(dir.path(), Options::default()).unwrap();
    check_scan(&store, &model, Bound::Unbounded, Bound::Unbounded);
    for k in model.keys() {
        assert_eq!(store.get(k).unwrap().map(Vec::from).as_ref(), model.get(k));
    }
}

#[test]
fn random_operations_match_a_btreemap() {
    let mut reached = Reached::default();
    for seed in 1..=16 {
        run(seed, 4000, &mut reached);
    }
    println!(
        "deepest level {}, {} compactions, {} trivial moves",
        reached.deepest_level, reached.compactions, reached.trivial_moves
    );
    assert!(reached.deepest_level >= 3, "the runs never reached L3");
    assert!(reached.compactions >= 100, "too few compactions ran");
    assert!(reached.trivial_moves > 0, "no trivial move ran");
}
