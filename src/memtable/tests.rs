//! The memtable's tests: against a `BTreeMap` model, with scans open across writes.

use std::ops::Bound;
use std::sync::atomic::Ordering::Relaxed;

use super::arena::CHUNK;
use super::order::RUN_RATIO;
use super::*;
use crate::table::block::Entry;
use proptest::prelude::*;
use std::collections::{BTreeMap, VecDeque};

/// Everything `c` yields from where it stands, filled `batch` entries at a time.
fn drain(c: &mut MemCursor, m: &Memtable, batch: usize) -> Vec<Entry> {
    let (mut out, mut buf) = (Vec::new(), EntryBuf::default());
    loop {
        let more = c.fill(m, &mut buf, batch);
        assert!(buf.len() <= batch.max(1));
        out.extend((0..buf.len()).map(|i| (buf.key(i).to_vec(), buf.value(i).map(<[u8]>::to_vec))));
        if !more {
            return out;
        }
    }
}

/// The entries of a range, through a cursor from its start.
fn range(m: &Memtable, s: Bound<&[u8]>, e: Bound<&[u8]>) -> Vec<Entry> {
    let mut all = drain(&mut m.cursor(s, false), m, 5);
    all.retain(|(k, _)| match e {
        Bound::Included(e) => k.as_slice() <= e,
        Bound::Excluded(e) => k.as_slice() < e,
        Bound::Unbounded => true,
    });
    all
}

fn model_range(
    model: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    s: Bound<&[u8]>,
    e: Bound<&[u8]>,
) -> Vec<Entry> {
    model
        .range::<[u8], _>((s, e))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn matches_a_btreemap() {
    let mut m = Memtable::new();
    let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    let mut x = 1u64;
    for step in 0..20_000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // Short keys sharing prefixes, some longer than 8 bytes, zero bytes included.
        let len = (x >> 60) as usize % 12;
        let key: Vec<u8> = (0..len).map(|j| ((x >> (8 * (j % 7))) as u8) % 4).collect();
        let value = (!x.is_multiple_of(5)).then(|| vec![step as u8; (x >> 20) as usize % 40]);
        m.insert(&key, value.as_deref());
        model.insert(key, value);
        if step % 997 == 0 {
            // Scans interleaved with inserts exercise the runs' sorts and merges.
            let all = range(&m, Bound::Unbounded, Bound::Unbounded);
            assert_eq!(all, model_range(&model, Bound::Unbounded, Bound::Unbounded));
        }
    }
    assert_eq!(m.len(), model.len());
    for (k, v) in &model {
        assert_eq!(m.get(k), Some(v.as_deref()));
    }
    assert_eq!(m.get(b"\x05"), None);
    let probes: [&[u8]; 6] = [
        b"",
        b"\x00",
        b"\x01\x02",
        b"\x02",
        b"\x03\x03\x03\x03\x03\x03\x03\x03\x03",
        b"\x04",
    ];
    for a in probes {
        for b in probes {
            for (s, e) in [
                (Bound::Included(a), Bound::Excluded(b)),
                (Bound::Excluded(a), Bound::Included(b)),
                (Bound::Included(a), Bound::Included(b)),
                (Bound::Unbounded, Bound::Excluded(b)),
                (Bound::Excluded(a), Bound::Unbounded),
            ] {
                if matches!((s, e), (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) if x > y)
                {
                    continue;
                }
                assert_eq!(range(&m, s, e), model_range(&model, s, e), "{s:?} {e:?}");
            }
        }
    }
    let sorted = m.sorted();
    let want: Vec<_> = model
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_deref()))
        .collect();
    assert_eq!(
        (0..sorted.len())
            .map(|i| sorted.entry(i))
            .collect::<Vec<_>>(),
        want
    );
    assert_eq!(m.run_count(), 1, "sealing merges the runs into one");
    let mut hashes = m.hashes();
    hashes.sort_unstable();
    let mut want: Vec<u64> = model.keys().map(|k| key_hash(k)).collect();
    want.sort_unstable();
    assert_eq!(hashes, want);
}

/// A scan after every put: the runs stay few (their sizes fall by at least
/// `RUN_RATIO` from one to the next) and the entries moved by merges stay O(log n) per key.
#[test]
fn runs_stay_few_when_every_put_is_followed_by_a_scan() {
    let mut m = Memtable::new();
    let mut x = 3u64;
    let mut most = 0;
    for n in 1..=20_000usize {
        x = crate::hash::mix64(x);
        m.insert(&x.to_be_bytes(), Some(b"v"));
        let runs = m.runs();
        for w in runs.windows(2) {
            assert!(
                w[0].len() > RUN_RATIO * w[1].len(),
                "{:?}",
                runs.iter().map(|r| r.len()).collect::<Vec<_>>()
            );
        }
        assert_eq!(runs.iter().map(|r| r.len()).sum::<usize>(), n);
        most = most.max(runs.len());
    }
    // log4(20,000) = 7.1
    assert!(most <= 8, "{most} runs");
}

#[test]
fn large_sorts_match_a_btreemap_on_any_pool() {
    // Above PAR_SORT_MIN the bucketed parallel sort runs: keys share a 3-byte prefix
    // (the buckets come from the bits below it), lengths 3..14 so prefixes tie.
    let build = || {
        let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        let mut m = Memtable::new();
        let mut x = 7u64;
        for i in 0..100_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = 3 + (x >> 59) as usize % 12;
            let mut key = b"usr".to_vec();
            key.extend((3..len).map(|j| (x >> (4 * j)) as u8 & 0x3f));
            let value = (i % 7 != 3).then(|| i.to_le_bytes().to_vec());
            m.insert(&key, value.as_deref());
            model.insert(key, value);
        }
        (m, model)
    };
    for threads in [1, 2, 3] {
        let (m, model) = build();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let got: Vec<Entry> = pool.install(|| {
            let s = m.sorted();
            (0..s.len())
                .map(|i| {
                    let (k, v) = s.entry(i);
                    (k.to_vec(), v.map(<[u8]>::to_vec))
                })
                .collect()
        });
        let want: Vec<Entry> = model.into_iter().collect();
        assert_eq!(got, want, "{threads} threads");
    }
}

#[test]
fn large_values_get_their_own_chunk() {
    let mut m = Memtable::new();
    let big = vec![9u8; 3 * CHUNK];
    m.insert(b"a", Some(b"small"));
    m.insert(b"b", Some(&big));
    m.insert(b"a", None);
    assert_eq!(m.get(b"b"), Some(Some(big.as_slice())));
    assert_eq!(m.get(b"a"), Some(None));
    assert!(m.approximate_bytes() >= 3 * CHUNK);
}

/// Overwrites link the replaced version only while a scan is open.
#[test]
fn overwrites_keep_old_versions_only_for_open_scans() {
    let mut m = Memtable::new();
    m.insert(b"k", Some(b"v1"));
    let before = m.approximate_bytes();
    m.insert(b"k", Some(b"v2"));
    assert_eq!(m.approximate_bytes() - before, 2, "no link without a scan");
    let mut c = m.cursor(Bound::Unbounded, true);
    let before = m.approximate_bytes();
    m.insert(b"k", None);
    m.insert(b"k", Some(b"v3"));
    // A tombstone (one pad byte) and a value, each after a link.
    assert_eq!(m.approximate_bytes() - before, 2 * OLDER_LEN + 1 + 2);
    assert_eq!(m.get(b"k"), Some(Some(&b"v3"[..])));
    assert_eq!(
        drain(&mut c, &m, 1),
        [(b"k".to_vec(), Some(b"v2".to_vec()))]
    );
    assert_eq!(
        m.readers.load(Relaxed),
        0,
        "a finished cursor no longer counts"
    );
    drop(c);
    assert_eq!(m.readers.load(Relaxed), 0);
}

#[derive(Clone, Debug)]
enum Op {
    /// Key number, and a value length (`None`: a delete).
    Put(u8, Option<u8>),
    /// A cursor from a key number (`None`: unbounded), after it when `true`.
    Open(Option<u8>, bool),
    /// Fill (cursor number modulo the open ones, batch size).
    Fill(usize, usize),
    /// Drop a cursor before it is done.
    Close(usize),
}

/// Short keys over a tiny alphabet: shared prefixes, zero bytes, the empty key, keys of
/// 8+ bytes with equal prefixes.
fn key_of(k: u8) -> Vec<u8> {
    let len = (k % 11) as usize;
    (0..len).map(|j| (k >> (j % 3)) & 3).collect()
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u8>(), prop::option::weighted(0.8, 0u8..20)).prop_map(|(k, v)| Op::Put(k, v)),
        1 => (prop::option::of(any::<u8>()), any::<bool>()).prop_map(|(k, x)| Op::Open(k, x)),
        3 => (any::<usize>(), 1usize..6).prop_map(|(c, n)| Op::Fill(c, n)),
        1 => any::<usize>().prop_map(Op::Close),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Cursors opened between writes yield exactly the model as it was when they opened,
    /// however the writes after that (new keys, overwrites, deletes) interleave with
    /// their fills; the runs stay sorted and few; the seal order is the model's.
    #[test]
    fn cursors_see_their_snapshot(ops in prop::collection::vec(op(), 1..300)) {
        let mut m = Memtable::new();
        let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        let mut open: Vec<(MemCursor, VecDeque<Entry>, EntryBuf)> = Vec::new();
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    let key = key_of(k);
                    let value = v.map(|n| vec![k ^ n; n as usize]);
                    m.insert(&key, value.as_deref());
                    model.insert(key, value);
                }
                Op::Open(k, after) => {
                    let key = k.map(key_of);
                    let start = match (&key, after) {
                        (None, _) => Bound::Unbounded,
                        (Some(k), false) => Bound::Included(k.as_slice()),
                        (Some(k), true) => Bound::Excluded(k.as_slice()),
                    };
                    let want = model_range(&model, start, Bound::Unbounded).into();
                    open.push((m.cursor(start, true), want, EntryBuf::default()));
                }
                Op::Fill(i, n) if !open.is_empty() => {
                    let i = i % open.len();
                    let (c, want, buf) = &mut open[i];
                    let more = c.fill(&m, buf, n);
                    prop_assert!(buf.len() <= n);
                    for j in 0..buf.len() {
                        let got = (buf.key(j).to_vec(), buf.value(j).map(<[u8]>::to_vec));
                        prop_assert_eq!(Some(got), want.pop_front());
                    }
                    prop_assert_eq!(more, !want.is_empty());
                    if !more {
                        open.remove(i);
                    }
                }
                Op::Close(i) if !open.is_empty() => {
                    open.remove(i % open.len());
                }
                _ => {}
            }
            prop_assert_eq!(m.readers.load(Relaxed), open.len());
        }
        for (mut c, want, _) in open.drain(..) {
            prop_assert_eq!(drain(&mut c, &m, 3), Vec::from(want));
        }
        prop_assert_eq!(m.readers.load(Relaxed), 0);
        let n = m.len().max(1) as f64;
        prop_assert!(m.run_count() as f64 <= n.log(RUN_RATIO as f64).floor() + 1.0);
        let s = m.sorted();
        let sealed: Vec<Entry> = (0..s.len())
            .map(|i| { let (k, v) = s.entry(i); (k.to_vec(), v.map(<[u8]>::to_vec)) })
            .collect();
        prop_assert_eq!(sealed, model_range(&model, Bound::Unbounded, Bound::Unbounded));
    }
}
