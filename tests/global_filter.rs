//! The global key-to-run filter (`filter::global`): against a model (a multiset of
//! (key, run) versions) through random inserts, removes, relabels and merges on tables small
//! enough to force cuckoo walks and the stash; the probe order; overflow; the measured
//! false-positive rate against theory; queries racing a writer; the checkpoint bytes
//! (round trip, damage, checked-in fixtures).
//!
//! Regenerate the fixtures (only when the format changes on purpose, together with
//! `format.md`) with `FILTERSTORE_WRITE_FIXTURES=1 cargo test --release --test global_filter fixtures`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use filterstore::filter::global::{
    GlobalFilter, Layout, MergeKey, RunId, RunOrder, RunSet, MAX_RUNS,
};
use filterstore::hash::{key_hash, mix64};
use filterstore::Error;
use proptest::prelude::*;

fn level(n: u8) -> RunId {
    RunId::level(n).expect("level")
}

/// The model: how many versions of each (key hash, run) the filter must hold.
type Model = BTreeMap<(u64, RunId), u32>;

fn check(f: &GlobalFilter, model: &Model, what: &str) {
    for (&(h, r), &n) in model {
        if n > 0 {
            assert!(
                f.query(h).contains(r),
                "{what}: false negative for {h:#x} in run {}",
                r.index()
            );
        }
    }
    let w = f.writer();
    let mut counts = [0u64; MAX_RUNS];
    for (&(_, r), &n) in model {
        counts[r.index()] += n as u64;
    }
    assert_eq!(w.counts(), counts, "{what}: counts");
    let c = w.entries();
    assert_eq!(
        (c.table.len() + c.stash.len()) as u64,
        counts.iter().sum::<u64>(),
        "{what}: entries"
    );
    for (h, r) in c.stash {
        assert!(
            model.get(&(h, r)).is_some_and(|&n| n > 0),
            "{what}: stray stash entry"
        );
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u16, u8),
    Remove(u16, u8),
    Relabel(u16, u8, u8),
    Merge(u16, u32, Option<u8>),
    /// `insert_batch` of these keys into one run.
    InsertBatch(Vec<u16>, u8),
    /// `merge_batch` of these (key, input runs, output run) triples.
    MergeBatch(Vec<(u16, u32, Option<u8>)>),
    /// `relabel_batch` of these keys from one run to another.
    RelabelBatch(Vec<u16>, u8, u8),
}

/// Runs: L1..L3 and three L0 ids.
fn run(i: u8) -> RunId {
    match i % 6 {
        0..=2 => level(i % 6 + 1),
        j => RunId::from_index(5 + j as usize).expect("l0 id"),
    }
}

/// Key `k`'s hash: keys come in groups of 4 that share their low 32 bits and their top 16
/// bits (so, in a small table, their fingerprint and both buckets: colliding keys).
fn hash(k: u16) -> u64 {
    let base = mix64(k as u64 / 4);
    let mid = mix64(k as u64) & 0x0000_ffff_0000_0000;
    (base & 0xffff_0000_ffff_ffff) | mid
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (0u16..300, 0u8..6).prop_map(|(k, r)| Op::Insert(k, r)),
        2 => (0u16..300, 0u8..6).prop_map(|(k, r)| Op::Remove(k, r)),
        2 => (0u16..300, 0u8..6, 0u8..6).prop_map(|(k, a, b)| Op::Relabel(k, a, b)),
        1 => (0u16..300, 0u32..64, prop::option::of(0u8..6)).prop_map(|(k, m, t)| Op::Merge(k, m, t)),
        1 => (prop::collection::vec(0u16..300, 0..40), 0u8..6).prop_map(|(k, r)| Op::InsertBatch(k, r)),
        1 => prop::collection::vec((0u16..300, 0u32..64, prop::option::of(0u8..6)), 0..40)
            .prop_map(Op::MergeBatch),
        1 => (prop::collection::vec(0u16..300, 0..40), 0u8..6, 0u8..6)
            .prop_map(|(k, a, b)| Op::RelabelBatch(k, a, b)),
    ];
    prop::collection::vec(op, 1..400)
}

fn apply(f: &GlobalFilter, model: &mut Model, op: &Op) {
    let mut w = f.writer();
    match *op {
        Op::Insert(k, r) => {
            let (h, r) = (hash(k), run(r));
            // A run holds one version of a key.
            if model.get(&(h, r)).copied().unwrap_or(0) == 0 {
                w.insert(h, r);
                *model.entry((h, r)).or_default() += 1;
            }
        }
        Op::Remove(k, r) => {
            let (h, r) = (hash(k), run(r));
            // Only versions that exist are removed (a colliding key's identical entry would
            // answer for a missing one).
            if model.get(&(h, r)).copied().unwrap_or(0) > 0 {
                assert!(w.remove(h, r), "remove of {k} in {}", r.index());
                *model.entry((h, r)).or_default() -= 1;
            }
        }
        Op::Relabel(k, a, b) => {
            let (h, a, b) = (hash(k), run(a), run(b));
            let have_a = model.get(&(h, a)).copied().unwrap_or(0);
            let have_b = model.get(&(h, b)).copied().unwrap_or(0);
            if a != b && have_b == 0 && have_a > 0 {
                assert!(w.relabel(h, a, b));
                *model.entry((h, a)).or_default() -= 1;
                *model.entry((h, b)).or_default() += 1;
            }
        }
        Op::Merge(k, mask, to) => {
            if let Some(m) = merge_key(model, k, mask, to) {
                assert_eq!(w.merge(m), 0);
                merged(model, m);
            }
        }
        Op::InsertBatch(ref keys, r) => {
            let r = run(r);
            let mut hs: Vec<u64> = keys
                .iter()
                .map(|&k| hash(k))
                .filter(|h| model.get(&(*h, r)).copied().unwrap_or(0) == 0)
                .collect();
            hs.sort_unstable();
            hs.dedup();
            for &h in &hs {
                *model.entry((h, r)).or_default() += 1;
            }
            w.insert_batch(&mut hs, r);
        }
        Op::MergeBatch(ref list) => {
            // A compaction names each key once.
            let mut seen = std::collections::BTreeSet::new();
            let mut ms: Vec<MergeKey> = list
                .iter()
                .filter(|(k, _, _)| seen.insert(hash(*k)))
                .filter_map(|&(k, mask, to)| merge_key(model, k, mask, to))
                .collect();
            for &m in &ms {
                merged(model, m);
            }
            assert_eq!(w.merge_batch(&mut ms), 0);
        }
        Op::RelabelBatch(ref keys, a, b) => {
            let (a, b) = (run(a), run(b));
            let mut hs: Vec<u64> = keys
                .iter()
                .map(|&k| hash(k))
                .filter(|h| {
                    model.get(&(*h, a)).copied().unwrap_or(0) > 0
                        && model.get(&(*h, b)).copied().unwrap_or(0) == 0
                })
                .collect();
            hs.sort_unstable();
            hs.dedup();
            if a != b {
                for &h in &hs {
                    *model.entry((h, a)).or_default() -= 1;
                    *model.entry((h, b)).or_default() += 1;
                }
            }
            assert_eq!(w.relabel_batch(&mut hs, a, b), 0);
        }
    }
}

/// What a merge of key `k` does: the runs within `mask` holding a version of it, into `to`
/// (None when there is nothing to do).
fn merge_key(model: &Model, k: u16, mask: u32, to: Option<u8>) -> Option<MergeKey> {
    let h = hash(k);
    let from = (0..6u8)
        .filter(|&i| mask >> i & 1 == 1)
        .map(run)
        .filter(|&r| model.get(&(h, r)).copied().unwrap_or(0) > 0)
        .fold(RunSet::EMPTY, |s, r| s.with(r));
    let to = to.map(run);
    (!from.is_empty() || to.is_some()).then_some(MergeKey { hash: h, from, to })
}

fn merged(model: &mut Model, m: MergeKey) {
    for r in m.from.iter() {
        *model.entry((m.hash, r)).or_default() -= 1;
    }
    if let Some(t) = m.to {
        *model.entry((m.hash, t)).or_default() += 1;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// No false negatives, exact counts, every stashed entry accounted for, through any
    /// sequence of operations, on tables of 8 to 64 buckets (walks and the stash happen).
    #[test]
    fn never_a_false_negative(ops in ops(), buckets in 8u64..64) {
        let f = GlobalFilter::with_buckets(Layout::Fixed16, buckets).unwrap();
        let mut model = Model::new();
        for (i, op) in ops.iter().enumerate() {
            apply(&f, &mut model, op);
            if i % 16 == 0 {
                check(&f, &model, &format!("op {i} {op:?}"));
            }
        }
        check(&f, &model, "end");
        // Bytes round trip at any point.
        let bytes = f.encode(7);
        let (g, tag) = GlobalFilter::decode(&bytes).unwrap();
        prop_assert_eq!(tag, 7);
        check(&g, &model, "decoded");
        prop_assert_eq!(g.encode(7), bytes);
    }
}

/// Candidates come newest first: L0 newest to oldest, then L1..L6.
#[test]
fn probe_order() {
    let f = GlobalFilter::new(Layout::Fixed16, 1000).unwrap();
    let mut w = f.writer();
    let a = w.new_l0_run().unwrap();
    let b = w.new_l0_run().unwrap();
    let c = w.new_l0_run().unwrap();
    assert_eq!(w.l0_runs(), &[c, b, a]);
    let order = w.order();
    let set = RunSet::EMPTY.with(level(3)).with(a).with(level(1)).with(c);
    let got: Vec<RunId> = set.in_order(&order).collect();
    assert_eq!(got, vec![c, a, level(1), level(3)]);
    // A key in three runs: the query names all three, in probe order.
    let h = key_hash(b"k");
    w.insert(h, level(2));
    w.insert(h, a);
    w.insert(h, c);
    drop(w);
    let got: Vec<RunId> = f.query(h).in_order(&order).collect();
    assert_eq!(got, vec![c, a, level(2)]);
    // An id with entries cannot be given back; an empty one can, and is reused.
    let mut w = f.writer();
    assert!(w.drop_l0_run(a).is_err());
    assert!(w.remove(h, a));
    w.drop_l0_run(a).unwrap();
    assert_eq!(w.l0_runs(), &[c, b]);
    assert_eq!(w.new_l0_run(), Some(a));
    assert_eq!(RunOrder::new(&[a, c, b]).rank(level(1)), 3);
    // 26 L0 ids in all.
    let mut n = 3;
    while w.new_l0_run().is_some() {
        n += 1;
    }
    assert_eq!(n, 26);
}

/// A table filled far past its room never loses an entry: the stash takes what no bucket
/// pair can, `needs_rebuild` says so, and removals let stashed entries back in.
#[test]
fn overflow_goes_to_the_stash() {
    let f = GlobalFilter::with_buckets(Layout::Fixed16, 64).unwrap();
    let keys: Vec<u64> = (0..400u64).map(mix64).collect();
    let mut w = f.writer();
    let mut stashed = 0;
    for (i, &h) in keys.iter().enumerate() {
        stashed += !w.insert(h, run((i % 6) as u8)) as u64;
    }
    assert!(stashed > 100, "{stashed} stashed");
    assert!(w.needs_rebuild());
    drop(w);
    for (i, &h) in keys.iter().enumerate() {
        assert!(f.query(h).contains(run((i % 6) as u8)));
    }
    let mut w = f.writer();
    let mut gone: Vec<u64> = keys[..300]
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 6 == 0)
        .map(|(_, &h)| h)
        .collect();
    assert_eq!(w.remove_batch(&mut gone, run(0)), 0);
    let s = w.stats();
    assert!(s.stashed < stashed, "stash not settled");
    drop(w);
    for (i, &h) in keys.iter().enumerate() {
        if i >= 300 || i % 6 != 0 {
            assert!(f.query(h).contains(run((i % 6) as u8)));
        }
    }
}

/// A loaded table's rate of false positives on absent keys is what the entries predict:
/// within 5 binomial standard deviations of 1 − e^−E, E = Σ (2/B)/2047.
#[test]
fn false_positive_rate_matches_theory() {
    let n = 400_000u64;
    // Room for 5 % more: a filter in use keeps some headroom.
    let f = GlobalFilter::new(Layout::Fixed16, n * 105 / 100).unwrap();
    let mut w = f.writer();
    // A two-level tree with a few L0 tables: 88 % L2, 10 % L1, 2 % L0.
    let l0 = [w.new_l0_run().unwrap(), w.new_l0_run().unwrap()];
    for i in 0..n {
        let r = match i % 100 {
            0..=87 => level(2),
            88..=97 => level(1),
            x => l0[x as usize % 2],
        };
        w.insert(mix64(i), r);
    }
    let load = w.load();
    let st = w.stats();
    assert!(st.stashed < n / 1000 && load > 0.85, "load {load}, {st:?}");
    drop(w);
    let p = f.theoretical_fpr();
    let probes = 1_000_000u64;
    let hits = (0..probes)
        .filter(|&i| f.may_contain(mix64(i + (1 << 40))))
        .count() as f64;
    let mean = p * probes as f64;
    let sd = (probes as f64 * p * (1.0 - p)).sqrt();
    println!(
        "load {load:.3}, measured FPR {:.4} %, theory {:.4} %",
        hits / probes as f64 * 100.0,
        p * 100.0
    );
    assert!(
        (hits - mean).abs() <= 5.0 * sd,
        "{hits} false positives, theory {mean:.0} ± {sd:.0}"
    );
}

/// Queries race a writer that relabels, removes and reinserts, and churns other keys through
/// cuckoo walks at full load: a key that is always in the filter (in one run or another) is
/// found by every query.
#[test]
fn queries_race_the_writer() {
    let f = Arc::new(GlobalFilter::with_buckets(Layout::Fixed16, 2048).unwrap());
    let stable: Vec<u64> = (0..3000u64).map(|i| mix64(i ^ 0xabc)).collect();
    let churn: Vec<u64> = (0..4000u64).map(|i| mix64(i ^ 0xdef0_0000)).collect();
    {
        let mut w = f.writer();
        for &h in &stable {
            w.insert(h, level(1));
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (f, stable, stop) = (f.clone(), stable.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for &h in stable.iter().skip(t).step_by(2) {
                        let s = f.query(h);
                        assert!(
                            s.contains(level(1)) || s.contains(level(2)),
                            "a stable key vanished"
                        );
                        n += 1;
                    }
                }
                n
            })
        })
        .collect();
    for round in 0..20 {
        let mut w = f.writer();
        for &h in &churn {
            w.insert(h, level(3));
        }
        let (from, to) = if round % 2 == 0 {
            (level(1), level(2))
        } else {
            (level(2), level(1))
        };
        for &h in &stable {
            assert!(w.relabel(h, from, to));
        }
        for &h in &churn {
            assert!(w.remove(h, level(3)));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let queries: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(queries > 0);
    println!("{queries} racing queries");
}

/// Damaged bytes are refused (never a panic), naming an offset inside the input.
#[test]
fn damaged_bytes_are_refused() {
    let f = GlobalFilter::with_buckets(Layout::Fixed16, 24).unwrap();
    {
        let mut w = f.writer();
        let r = w.new_l0_run().unwrap();
        for i in 0..120u64 {
            w.insert(mix64(i), if i % 3 == 0 { r } else { level(2) });
        }
    }
    let good = f.encode(1);
    GlobalFilter::decode(&good).unwrap();
    let mut x = 9u64;
    for _ in 0..3000 {
        x = mix64(x);
        let mut b = good.clone();
        let at = (x % b.len() as u64) as usize;
        b[at] ^= 1 << ((x >> 32) % 8);
        if x.is_multiple_of(3) {
            b.truncate(at);
        }
        match GlobalFilter::decode(&b) {
            Err(e) => assert!(e.is_corruption(), "{e}"),
            Ok(_) => panic!("a flipped bit at {at} was accepted"),
        }
    }
    assert!(GlobalFilter::decode(&[]).is_err());
}

/// The checked-in fixture decodes, holds every key it was built from, gives the recorded
/// number of positives on absent keys, and today's builder reproduces it byte for byte.
#[test]
fn fixtures() {
    let name = "global-fixed16-v1.bin";
    let (f, placed) = fixture_filter(Layout::Fixed16);
    let bytes = f.encode(42);
    let path = fixture(name);
    if std::env::var("FILTERSTORE_WRITE_FIXTURES").is_ok() {
        std::fs::write(&path, &bytes).unwrap();
    }
    let on_disk = std::fs::read(&path).unwrap();
    let (g, tag) = GlobalFilter::decode(&on_disk).unwrap();
    assert_eq!(tag, 42);
    for (k, r) in &placed {
        assert!(g.query(*k).contains(*r), "{name}: lost a key");
    }
    let positives = (0..10_000)
        .filter(|i| g.may_contain(key_hash(format!("absent-{i}").as_bytes())))
        .count();
    println!("{name}: {positives} positives");
    assert_eq!(
        positives, FIXED16_POSITIVES,
        "{name}: positives among absent-0..9999"
    );
    assert_eq!(on_disk, bytes, "{name}: today's builder writes other bytes");
}

const FIXED16_POSITIVES: usize = 50;

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Layout 2 (the coded layout, removed) is refused as unsupported at the layout byte,
/// never decoded nor a panic: the fixture the coded layout wrote (the same keys as
/// `global-fixed16-v1.bin`), and the fixed16 fixture with its layout byte set to 2 (header
/// CRC fixed up), so the refusal does not depend on what follows the header.
#[test]
fn the_removed_coded_layout_is_refused() {
    let coded = std::fs::read(fixture("global-coded-v1.bin")).unwrap();
    let mut relabelled = std::fs::read(fixture("global-fixed16-v1.bin")).unwrap();
    relabelled[5] = 2;
    let crc = crc32fast::hash(&relabelled[..60]);
    relabelled[60..64].copy_from_slice(&crc.to_le_bytes());
    for (what, bytes) in [
        ("coded fixture", &coded),
        ("relabelled fixed16", &relabelled),
    ] {
        assert_eq!(bytes[5], 2, "{what}: layout byte");
        match GlobalFilter::decode(bytes) {
            Err(e @ Error::Unsupported { offset: 5, .. }) => {
                assert!(e.to_string().contains("layout 2 (coded)"), "{what}: {e}")
            }
            Err(e) => panic!("{what}: {e}"),
            Ok(_) => panic!("{what}: a coded filter was accepted"),
        }
    }
}

/// key-0..key-999: key i in L2 (i % 10 < 7), L1 (7, 8) or the one L0 table (9).
fn fixture_filter(layout: Layout) -> (GlobalFilter, Vec<(u64, RunId)>) {
    let f = GlobalFilter::new(layout, 1000).unwrap();
    let mut placed = Vec::new();
    {
        let mut w = f.writer();
        let l0 = w.new_l0_run().unwrap();
        let mut by_run: BTreeMap<RunId, Vec<u64>> = BTreeMap::new();
        for i in 0..1000 {
            let r = match i % 10 {
                0..=6 => level(2),
                7 | 8 => level(1),
                _ => l0,
            };
            let h = key_hash(format!("key-{i}").as_bytes());
            by_run.entry(r).or_default().push(h);
            placed.push((h, r));
        }
        for (r, mut hs) in by_run {
            w.insert_batch(&mut hs, r);
        }
    }
    (f, placed)
}
