//! Reverse scans (`Scan` as a `DoubleEndedIterator`), checked against a `BTreeMap` model:
//! from the back, from both ends in turn (they meet without overlap or gap), over the
//! memtables, L0 and the levels, every block form, the block cache off and on, `mmap_reads`
//! off and on; and what a reverse scan reads (it streams) and a forward one does not (its
//! back end is never made).

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use common::{NoSyncFs, Rng};
use filterstore::{Compression, Options, Scan, Store, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// What a scan must still yield, front to back.
type Items = VecDeque<(Vec<u8>, Vec<u8>)>;

fn opts(compression: Compression, cache: usize, mmap_reads: bool) -> Options {
    let mut o = Options::default();
    o.compression = compression;
    o.block_cache_bytes = cache;
    o.mmap_reads = mmap_reads;
    o.memtable_bytes = 16 << 10;
    o.table_bytes = 8 << 10;
    o.l1_bytes = 16 << 10;
    o.level_ratio = 2;
    o.compaction_trigger = Some(3);
    o.fs = Arc::new(NoSyncFs);
    o
}

fn key(rng: &mut Rng) -> Vec<u8> {
    format!("k{:04}", rng.below(700)).into_bytes()
}

fn value(rng: &mut Rng) -> Vec<u8> {
    match rng.below(20) {
        // Longer than a read-ahead: a block longer than 4 KiB, raw or compressed.
        0 => (0..4500 + rng.below(3000))
            .map(|_| rng.next() as u8)
            .collect(),
        1 => vec![b'x'; 4500 + rng.below(3000) as usize],
        2..=9 => rng.bytes(60),
        _ => vec![b'a' + rng.below(3) as u8; 1 + rng.below(80) as usize],
    }
}

fn bound(rng: &mut Rng) -> Bound<Vec<u8>> {
    match rng.below(3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(key(rng)),
        _ => Bound::Excluded(key(rng)),
    }
}

fn empty(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a >= b
        }
        _ => false,
    }
}

/// Reads `scan` to its end, each step from the front or the back as `rng` says (`back`: the
/// chance in 4 of a step from the back; 4: backward only), against the model's range `want`.
fn drain(scan: &mut Scan, mut want: Items, rng: &mut Rng, back: u64, what: &str) {
    loop {
        let from_back = rng.below(4) < back;
        let (got, expect) = if from_back {
            (scan.next_back(), want.pop_back())
        } else {
            (scan.next(), want.pop_front())
        };
        let got = got
            .map(|r| r.unwrap_or_else(|e| panic!("{what}: {e}")))
            .map(|(k, v)| (k.to_vec(), v.to_vec()));
        assert_eq!(got, expect, "{what}: from the back {from_back}");
        if expect.is_none() {
            assert!(
                scan.next().is_none() && scan.next_back().is_none(),
                "{what}: after the end"
            );
            return;
        }
    }
}

fn check_scans(store: &Store, model: &Model, rng: &mut Rng, n: usize, what: &str) {
    for i in 0..n {
        let (lo, hi) = (bound(rng), bound(rng));
        if empty(&lo, &hi) {
            assert!(store.scan::<Vec<u8>>((lo, hi)).next_back().is_none());
            continue;
        }
        let want: VecDeque<_> = model
            .range((lo.clone(), hi.clone()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut scan = store.scan::<Vec<u8>>((lo.clone(), hi.clone()));
        let back = [4, 2, 1, 3][i % 4];
        drain(
            &mut scan,
            want,
            rng,
            back,
            &format!("{what} scan {i} {lo:?}..{hi:?}"),
        );
    }
}

/// Random puts (some of values longer than a block), deletes, batches, flushes, compactions
/// and reopens; scans from the back and from both ends agree with the model, for every
/// block form, the cache off, small and large, and `mmap_reads`; a scan held across a
/// compaction (and the writes before it) reads as of its start.
#[test]
fn reverse_scans_agree_with_the_model() {
    let codecs = Compression::ALL.into_iter().filter(|c| c.is_available());
    for compression in codecs {
        for (cache, mmap_reads) in [(0, false), (0, true), (16 << 10, false), (32 << 20, true)] {
            let what = format!("{compression} cache {cache} mmap {mmap_reads}");
            let dir = tempfile::tempdir().unwrap();
            let o = || opts(compression, cache, mmap_reads);
            let mut store = Store::open(dir.path(), o()).unwrap();
            let mut rng = Rng::new(cache as u64 + mmap_reads as u64);
            let mut model = Model::new();
            let mut held: Option<(Scan, Items)> = None;
            for step in 0..1500 {
                match rng.below(100) {
                    0..=54 => {
                        let (k, v) = (key(&mut rng), value(&mut rng));
                        store.put(&k, &v).unwrap();
                        model.insert(k, v);
                    }
                    55..=74 => {
                        let k = key(&mut rng);
                        store.delete(&k).unwrap();
                        model.remove(&k);
                    }
                    75..=84 => {
                        let mut b = WriteBatch::new();
                        for _ in 0..1 + rng.below(8) {
                            let k = key(&mut rng);
                            if rng.below(3) == 0 {
                                b.delete(k.clone());
                                model.remove(&k);
                            } else {
                                let v = value(&mut rng);
                                b.put(k.clone(), v.clone());
                                model.insert(k, v);
                            }
                        }
                        store.write(b).unwrap();
                    }
                    85..=89 => store.flush().unwrap(),
                    90..=91 => {
                        if held.is_none() {
                            let want = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                            held = Some((store.scan::<&[u8]>(..), want));
                        }
                        store.compact().unwrap();
                    }
                    92 => {
                        drop(held.take());
                        drop(store);
                        store = Store::open(dir.path(), o()).unwrap();
                    }
                    93..=96 => {
                        check_scans(&store, &model, &mut rng, 3, &format!("{what} step {step}"))
                    }
                    _ => {
                        if let Some((mut scan, want)) = held.take() {
                            drain(
                                &mut scan,
                                want,
                                &mut rng,
                                2,
                                &format!("{what} held, step {step}"),
                            );
                        }
                    }
                }
            }
            check_scans(&store, &model, &mut rng, 20, &format!("{what} at the end"));
            store.compact().unwrap();
            check_scans(&store, &model, &mut rng, 20, &format!("{what} compacted"));
        }
    }
}

/// Tombstones in the memtable and in L0 over values in deeper levels, and the memtable's
/// keys between the tables': a reverse scan hides exactly what a forward one hides.
#[test]
fn tombstones_shadow_deeper_levels_backward() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts(Compression::Lz4, 0, false)).unwrap();
    let mut model = Model::new();
    for i in 0..600u32 {
        let k = format!("k{i:04}").into_bytes();
        store.put(&k, &k).unwrap();
        model.insert(k.clone(), k);
    }
    store.flush().unwrap();
    store.compact().unwrap();
    assert!(store.stats().tables.iter().all(|t| t.level > 0));
    // L0: every third key deleted, every fifth rewritten.
    for i in 0..600u32 {
        let k = format!("k{i:04}").into_bytes();
        if i % 3 == 0 {
            store.delete(&k).unwrap();
            model.remove(&k);
        } else if i % 5 == 0 {
            store.put(&k, b"new").unwrap();
            model.insert(k, b"new".to_vec());
        }
    }
    store.flush().unwrap();
    // The memtable: runs of deletes (whole blocks of tombstones) and keys between.
    for i in 100..300u32 {
        let k = format!("k{i:04}").into_bytes();
        store.delete(&k).unwrap();
        model.remove(&k);
        let between = format!("k{i:04}m").into_bytes();
        if i % 7 == 0 {
            store.put(&between, b"mem").unwrap();
            model.insert(between, b"mem".to_vec());
        }
    }
    let want: Vec<_> = model
        .iter()
        .rev()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let got: Vec<_> = store
        .scan::<&[u8]>(..)
        .rev()
        .map(Result::unwrap)
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    assert!(got == want, "reverse scan differs from the model");
    let fwd: Vec<_> = store
        .scan::<&[u8]>(..)
        .map(Result::unwrap)
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    assert!(
        fwd.iter().rev().eq(got.iter()),
        "forward and reverse differ"
    );
    let mut rng = Rng::new(3);
    check_scans(&store, &model, &mut rng, 200, "shadowed");
    assert_eq!(
        store
            .first_key_value()
            .unwrap()
            .map(|(k, v)| (k.to_vec(), v.to_vec())),
        model.first_key_value().map(|(k, v)| (k.clone(), v.clone()))
    );
    assert_eq!(
        store
            .last_key_value()
            .unwrap()
            .map(|(k, v)| (k.to_vec(), v.to_vec())),
        model.last_key_value().map(|(k, v)| (k.clone(), v.clone()))
    );
}

/// Data blocks read from files or found in the cache.
fn blocks(store: &Store) -> u64 {
    let s = store.stats();
    s.data_block_reads + s.block_cache_hits
}

/// A reverse scan streams: its first item reads about one block per table source, not the
/// store; a forward scan never makes its back end (its whole pass reads each block once,
/// its first item one block per source); `last_key_value` reads one block per source.
#[test]
fn a_reverse_scan_streams_and_a_forward_one_pays_nothing_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(Compression::None, 0, false);
    o.compaction_trigger = None;
    o.memtable_bytes = 64 << 10;
    o.table_bytes = 1 << 20;
    let store = Store::open(dir.path(), o).unwrap();
    let mut total = 0;
    for t in 0..3u32 {
        for i in 0..2000u32 {
            let k = format!("k{:05}", i * 3 + t).into_bytes();
            store.put(&k, [b'v'; 40]).unwrap();
        }
        store.flush().unwrap();
        total += 2000;
    }
    // All in L0 (no compaction): one source per table.
    let tables = store.stats().tables.len() as u64;
    assert!(tables >= 3);
    let before = blocks(&store);
    let mut rev = store.scan::<&[u8]>(..).rev();
    assert_eq!(
        rev.next().unwrap().unwrap().0,
        format!("k{:05}", 5999).into_bytes()
    );
    let first = blocks(&store) - before;
    assert!(
        first <= tables,
        "first item from the back read {first} blocks"
    );
    assert_eq!(rev.count() + 1, total);
    let whole = blocks(&store) - before;
    let before = blocks(&store);
    assert_eq!(store.scan::<&[u8]>(..).count(), total);
    assert_eq!(
        blocks(&store) - before,
        whole,
        "a forward pass reads each block once"
    );
    let before = blocks(&store);
    let mut fwd = store.scan::<&[u8]>(..);
    fwd.next().unwrap().unwrap();
    assert!(blocks(&store) - before <= tables);
    let before = blocks(&store);
    store.last_key_value().unwrap().unwrap();
    assert!(blocks(&store) - before <= tables);
    // Both ends of one scan meet: each block is read at most twice (once per end).
    let before = blocks(&store);
    let mut both = store.scan::<&[u8]>(..);
    let mut n = 0;
    loop {
        let a = both.next();
        let b = both.next_back();
        n += a.is_some() as usize + b.is_some() as usize;
        if a.is_none() && b.is_none() {
            break;
        }
    }
    assert_eq!(n, total);
    assert!(blocks(&store) - before <= whole + 2 * tables);
}

/// A seek moves an open scan's front on (nothing before the key), or its back end back.
#[test]
fn seek_moves_either_end() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts(Compression::Lz4, 0, false)).unwrap();
    let mut model = Model::new();
    let mut rng = Rng::new(9);
    for step in 0..3000 {
        let (k, v) = (key(&mut rng), value(&mut rng));
        store.put(&k, &v).unwrap();
        model.insert(k, v);
        if step % 700 == 0 {
            store.flush().unwrap();
        }
    }
    for _ in 0..200 {
        let (a, b) = (key(&mut rng), key(&mut rng));
        let mut scan = store.scan::<&[u8]>(..);
        let first = scan.next().unwrap().unwrap().0.to_vec();
        scan.seek(&a).unwrap();
        let want = model
            .range((Bound::Excluded(first.clone()), Bound::Unbounded))
            .find(|(k, _)| **k >= a)
            .map(|(k, v)| (k.clone(), v.clone()));
        let got = scan
            .next()
            .map(Result::unwrap)
            .map(|(k, v)| (k.to_vec(), v.to_vec()));
        assert_eq!(got, want, "seek {a:?}");
        let Some((front, _)) = got else { continue };
        scan.seek_back(&b).unwrap();
        let want = model
            .range(..=b.clone())
            .next_back()
            .filter(|(k, _)| **k > front)
            .map(|(k, v)| (k.clone(), v.clone()));
        assert_eq!(
            scan.next_back()
                .map(Result::unwrap)
                .map(|(k, v)| (k.to_vec(), v.to_vec())),
            want,
            "seek_back {b:?} after {a:?}"
        );
    }
}
