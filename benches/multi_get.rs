//! Batched lookups: [`Store::multi_get`] and [`Reader::multi_get`] against a loop of `get`
//! over the same keys, in the same run (issue 13, item 4).
//!
//! `taskset -c 1 cargo bench --bench multi_get`
//!
//! The store holds 1,000,000 keys of 16 bytes (16-byte values) in 10 L0 tables, written
//! interleaved (key `i` in table `i mod 10`), so every table's range spans the whole key
//! space and an absent key is asked of all 10 filters — the case batching is for. Each
//! iteration looks up one batch of 1,000 absent keys (64 different batches in turn, so the
//! keys are not the same from one iteration to the next); criterion reports the time per
//! key. Filters at ε = 1 %, blocked-bloom (the default kind) and binary-fuse; data blocks
//! read with `pread`, from the page cache.
//!
//! Before each kind's criterion group, a same-run summary goes to stderr: the median time per
//! key of a `get` loop and of `multi_get` over the same batches, timed alternately batch by
//! batch, and their ratio (`cargo bench --bench multi_get -- summary-only` prints only it,
//! the filter matching no criterion benchmark).
//!
//! The store is built once in a temporary directory (a few seconds per kind).

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use filterstore::hash::mix64;
use filterstore::{FilterKind, Options, Store, SyncPolicy};

const KEYS: u64 = 1_000_000;
const TABLES: u64 = 10;
const BATCH: usize = 1000;
const BATCHES: usize = 64;

/// Key `i`: 16 bytes from two mixes of `seed` and `i` (present keys use seed 0).
fn key(seed: u64, i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix64(seed ^ (2 * i)).to_be_bytes());
    k[8..].copy_from_slice(&mix64(seed ^ (2 * i + 1)).to_be_bytes());
    k
}

fn build(dir: &std::path::Path, kind: FilterKind) -> Store {
    let store = Store::open(
        dir,
        Options::default()
            .filter(kind)
            .fpr(0.01)
            .memtable_bytes(usize::MAX)
            .compaction_trigger(None)
            .sync(SyncPolicy::Buffered),
    )
    .expect("open");
    let value = [7u8; 16];
    for t in 0..TABLES {
        for i in (t..KEYS).step_by(TABLES as usize) {
            store.put(key(0, i), value).expect("put");
        }
        store.flush().expect("flush");
    }
    assert_eq!(store.stats().tables.len(), TABLES as usize);
    store
}

/// Median of `xs`.
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The same-run comparison, outside criterion: `ROUNDS` rounds, each timing one batch by a
/// `get` loop and by `multi_get`, in alternating order (through the store and through a
/// reader), so both see the same machine load; prints the median ns per key of each and
/// their ratio to stderr.
fn summary(kind: FilterKind, store: &Store, batches: &[Vec<[u8; 16]>]) {
    const ROUNDS: usize = 1000;
    let reader = store.reader();
    let time = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        f();
        t.elapsed().as_nanos() as f64 / BATCH as f64
    };
    for via in ["store", "reader"] {
        let (mut looped, mut batched) = (Vec::new(), Vec::new());
        for r in 0..ROUNDS {
            let keys = &batches[r % batches.len()];
            let mut get_loop = || {
                for k in keys {
                    let v = match via {
                        "store" => store.get(k),
                        _ => reader.get(k),
                    };
                    black_box(v.expect("get"));
                }
            };
            let mut multi = || {
                let v = match via {
                    "store" => store.multi_get(keys),
                    _ => reader.multi_get(keys),
                };
                black_box(v.expect("multi_get"));
            };
            if r % 2 == 0 {
                looped.push(time(&mut get_loop));
                batched.push(time(&mut multi));
            } else {
                batched.push(time(&mut multi));
                looped.push(time(&mut get_loop));
            }
        }
        let (l, b) = (median(&mut looped), median(&mut batched));
        eprintln!(
            "summary {kind} via {via}: get loop {l:.1} ns/key, multi_get {b:.1} ns/key, {:.2}x (medians of {ROUNDS} interleaved batches of {BATCH} absent keys)",
            l / b
        );
    }
}

fn multi_get(c: &mut Criterion) {
    for kind in [FilterKind::BlockedBloom, FilterKind::BinaryFuse] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = build(dir.path(), kind);
        let batches: Vec<Vec<[u8; 16]>> = (0..BATCHES)
            .map(|b| {
                (0..BATCH)
                    .map(|i| key(0x5555_5555_0000_0000, (b * BATCH + i) as u64))
                    .collect()
            })
            .collect();
        let reader = store.reader();
        summary(kind, &store, &batches);
        let mut g = c.benchmark_group(format!("multi_get/absent/{kind}"));
        g.throughput(Throughput::Elements(BATCH as u64));
        let mut turn = 0usize;
        let mut next = || {
            turn = (turn + 1) % BATCHES;
            &batches[turn]
        };
        g.bench_function(BenchmarkId::new("store", "get_loop"), |b| {
            b.iter(|| {
                let mut found = 0;
                for k in next() {
                    found += store.get(k).expect("get").is_some() as u32;
                }
                black_box(found)
            })
        });
        g.bench_function(BenchmarkId::new("store", "multi_get"), |b| {
            b.iter(|| black_box(store.multi_get(next()).expect("multi_get")))
        });
        g.bench_function(BenchmarkId::new("reader", "get_loop"), |b| {
            b.iter(|| {
                let mut found = 0;
                for k in next() {
                    found += reader.get(k).expect("get").is_some() as u32;
                }
                black_box(found)
            })
        });
        g.bench_function(BenchmarkId::new("reader", "multi_get"), |b| {
            b.iter(|| black_box(reader.multi_get(next()).expect("multi_get")))
        });
        g.finish();
        let s = store.stats();
        eprintln!(
            "{kind}: {} lookups, {} filter negatives, {} false positives",
            s.lookups, s.filter_negatives, s.false_positives
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = multi_get
}
criterion_main!(benches);
