//! The random writes and scan checks the `BTreeMap` model tests share (`store_model.rs`,
//! `global_store.rs`, `snapshot.rs`).

use std::collections::BTreeMap;
use std::ops::Deref;

use filterstore::{Store, WriteBatch};

use super::Rng;

/// What a store should hold.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A key of the form `k00042`, below `space`.
pub fn key(rng: &mut Rng, space: u64) -> Vec<u8> {
    format!("k{:05}", rng.below(space)).into_bytes()
}

/// A put of a random key below `space` (a value of up to 40 random bytes), to both.
pub fn put(store: &Store, model: &mut Model, rng: &mut Rng, space: u64) {
    let (k, v) = (key(rng, space), rng.bytes(40));
    store.put(&k, &v).unwrap();
    model.insert(k, v);
}

/// A delete of a random key below `space`, from both.
pub fn delete(store: &Store, model: &mut Model, rng: &mut Rng, space: u64) {
    let k = key(rng, space);
    store.delete(&k).unwrap();
    model.remove(&k);
}

/// A batch of up to 7 random puts (values of up to 20 bytes) and deletes (one in three),
/// written to the store and applied to the model. Returns whether it held anything (an
/// empty batch commits nothing).
pub fn batch(store: &Store, model: &mut Model, rng: &mut Rng, space: u64) -> bool {
    let mut b = WriteBatch::new();
    for _ in 0..rng.below(8) {
        let k = key(rng, space);
        if rng.below(3) == 0 {
            b.delete(k.clone());
            model.remove(&k);
        } else {
            let v = rng.bytes(20);
            b.put(k.clone(), v.clone());
            model.insert(k, v);
        }
    }
    let held = !b.is_empty();
    store.write(b).unwrap();
    held
}

/// One scan item as owned bytes, whatever byte type the scan yields.
pub fn owned<K: Deref<Target = [u8]>, V: Deref<Target = [u8]>>(
    (k, v): (K, V),
) -> (Vec<u8>, Vec<u8>) {
    (k.to_vec(), v.to_vec())
}

/// Checks a scan made by `make` against `want` (the model's items in order): forward,
/// backward (a `.rev()` of it) and from both ends at once (`next` and `next_back` alternating
/// at random, against the model's own double-ended iterator), meeting without overlap.
pub fn both_ways<I, K, V, E>(
    make: impl Fn() -> I,
    want: &[(Vec<u8>, Vec<u8>)],
    rng: &mut Rng,
    what: &str,
) where
    I: DoubleEndedIterator<Item = Result<(K, V), E>>,
    K: Deref<Target = [u8]>,
    V: Deref<Target = [u8]>,
    E: std::fmt::Debug,
{
    let got: Vec<_> = make()
        .map(|r| r.map(owned))
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(got, want, "{what} forward");
    let got: Vec<_> = make()
        .rev()
        .map(|r| r.map(owned))
        .collect::<Result<_, _>>()
        .unwrap();
    let rev: Vec<_> = want.iter().rev().cloned().collect();
    assert_eq!(got, rev, "{what} reversed");
    let (mut scan, mut model) = (make(), want.iter());
    loop {
        let back = rng.below(2) == 0;
        let (g, w) = if back {
            (scan.next_back(), model.next_back())
        } else {
            (scan.next(), model.next())
        };
        let g = g.transpose().unwrap().map(owned);
        assert_eq!(g.as_ref(), w, "{what} both ends (back: {back})");
        if w.is_none() {
            assert!(
                scan.next().is_none() && scan.next_back().is_none(),
                "{what}"
            );
            break;
        }
    }
}

/// The model's items in a range, in order.
pub fn items<R: std::ops::RangeBounds<Vec<u8>>>(
    model: &Model,
    range: R,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .range(range)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The model's items whose keys start with `p`, in order.
pub fn prefixed(model: &Model, p: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| k.starts_with(p))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// How many files in `dir` have the extension `ext`.
pub fn files_with_extension(dir: &std::path::Path, ext: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == ext)
        })
        .count()
}

/// What `scan` yields, owned.
pub fn contents(scan: filterstore::Scan) -> Model {
    scan.map(Result::unwrap)
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect()
}

/// Every keyspace's contents (the default one as "").
pub fn keyspace_contents(store: &Store) -> BTreeMap<String, Model> {
    let mut m = BTreeMap::new();
    m.insert(String::new(), contents(store.scan::<&[u8]>(..)));
    for name in store.keyspaces() {
        let ks = store.existing_keyspace(&name).unwrap();
        m.insert(name, contents(ks.scan::<&[u8]>(..)));
    }
    m
}
