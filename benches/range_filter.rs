//! Range filter benchmark: false-positive rates against Grafite's bound, build time against
//! the point filters' build on the same keys, and query time.
//!
//! Keys are 16 random bytes (mix64 of a counter, twice, big-endian: the shape of the peers
//! harness's keys), sorted; a range [a, a + ℓ) reads its ends as 128-bit big-endian numbers.
//!
//! `cargo bench --bench range_filter` prints to stderr, outside criterion:
//! * the false-positive rate of 1,000,000 empty ranges (4,000,000 at 16 and 20 bits per key)
//!   per length ℓ = 2^0 .. 2^10, uniform
//!   (a uniform over the keys' span) and clustered (a = a key + 1 ..= 64), at 10, 12, 16 and
//!   20 bits per key over n = 1,000,000 keys, beside the design's expected rate and Grafite's
//!   bound ℓ / 2^(B − 2) at the block's measured B;
//! * ns per key to build, n = 10k, 100k, 600k and 1M on one thread, of 16-byte random keys and
//!   of keys that share prefixes (`user:NNNNNNNNNN:item:NNNNNN`): the range filter from the
//!   sorted keys, against blocked-bloom at ε = 1 % from the same keys (key hashing included,
//!   as a table's seal does it), built alternately, medians of 15 rounds (7 from 600k) of CPU
//!   time (the process's, every thread) and of wall time; with `RANGE_BENCH_10M` set, also
//!   10M random keys on 1 and 2 threads (3 rounds);
//!
//! and measures with criterion ns per query (n = 1M, 16 bits per key): empty ranges of ℓ = 1
//! and 32, uniform and clustered; ranges that hold keys; prefixes; and a blocked-bloom point
//! query on the same machine for scale. `cargo bench --bench range_filter -- tables` prints
//! only the tables, `-- tables-build` only the build table, `-- query` runs only the query
//! benches.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use filterstore::filter::range::{self, grafite_bound, RangeFilter};
use filterstore::filter::{self, Filter, FilterKind};
use filterstore::hash::{hash_keys, mix64};

type Key = [u8; 16];

/// n sorted, distinct 16-byte keys.
fn keys(n: u64) -> Vec<Key> {
    let mut k: Vec<Key> = (0..n)
        .map(|i| {
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&mix64(i).to_be_bytes());
            key[8..].copy_from_slice(&mix64(i ^ (1 << 40)).to_be_bytes());
            key
        })
        .collect();
    k.sort_unstable();
    k.dedup();
    k
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool")
}

/// `q` empty ranges [a, a + len) as 128-bit numbers: uniform over the keys' span, or a key
/// plus 1 ..= 64 when `clustered`.
fn empty_ranges(
    values: &[u128],
    len: u128,
    clustered: bool,
    q: usize,
    seed: u64,
) -> Vec<(Key, Key)> {
    let (lo, hi) = (values[0], values[values.len() - 1]);
    let mut s = seed;
    let mut next = || {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(s)
    };
    let mut out = Vec::with_capacity(q);
    while out.len() < q {
        let r = (u128::from(next()) << 64) | u128::from(next());
        let a = if clustered {
            values[(r % values.len() as u128) as usize] + 1 + u128::from(next() % 64)
        } else {
            lo + r % (hi - lo)
        };
        let Some(b) = a.checked_add(len) else {
            continue;
        };
        let i = values.partition_point(|&v| v < a);
        if values.get(i).is_some_and(|&v| v < b) {
            continue;
        }
        out.push((a.to_be_bytes(), b.to_be_bytes()));
    }
    out
}

fn fpr_table() {
    let n = 1_000_000;
    let ks = keys(n);
    let values: Vec<u128> = ks.iter().map(|k| u128::from_be_bytes(*k)).collect();
    eprintln!("\n| bits/key (measured) | queries | ℓ | uniform FPR | clustered FPR | expected | Grafite bound | uniform / bound | clustered / bound |");
    eprintln!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for bits in [10.0, 12.0, 16.0, 20.0] {
        // More queries where the rates are small, so the counts stay in the hundreds.
        let q = if bits >= 16.0 { 4_000_000 } else { 1_000_000 };
        let block = range::build(ks.iter(), bits).expect("build");
        let f = RangeFilter::decode(&block).expect("decode");
        let b = f.bits_per_key();
        for j in 0..=10u32 {
            let len = 1u64 << j;
            let rate = |clustered: bool| {
                let qs = empty_ranges(&values, u128::from(len), clustered, q, u64::from(j) ^ 77);
                let pos = qs
                    .iter()
                    .filter(|(a, z)| f.may_intersect(a.as_slice()..z.as_slice()))
                    .count();
                pos as f64 / q as f64
            };
            let (u, c) = (rate(false), rate(true));
            let bound = grafite_bound(len, b);
            eprintln!(
                "| {bits} ({b:.2}) | {q} | {len} | {:.4}% | {:.4}% | {:.4}% | {:.4}% | {:.3} | {:.3} |",
                u * 100.0,
                c * 100.0,
                f.expected_fpr(len) * 100.0,
                bound * 100.0,
                u / bound,
                c / bound
            );
        }
    }
}

/// CPU seconds of this process (every thread), and wall seconds, spent in `f`. On a shared
/// machine CPU time leaves out the time spent waiting for a core.
fn time_once(f: impl FnOnce()) -> (f64, f64) {
    let cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    };
    let (c, w) = (cpu(), Instant::now());
    f();
    (cpu() - c, w.elapsed().as_secs_f64())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// n sorted, distinct 27-byte keys that share prefixes: `user:` and a 10-digit user number
/// (one of n / 16 users), `:item:` and a 6-digit item number, as keys made of fields are.
fn prefixed_keys(n: u64) -> Vec<[u8; 27]> {
    let users = (n / 16).max(1);
    let mut k: Vec<[u8; 27]> = (0..n)
        .map(|i| {
            let u = mix64(i % users) % 10_000_000_000;
            let s = format!("user:{u:010}:item:{:06}", mix64(i ^ (1 << 40)) % 1_000_000);
            s.as_bytes().try_into().expect("27 bytes")
        })
        .collect();
    k.sort_unstable();
    k.dedup();
    k
}

/// Build time per key of the range filter (16 bits/key) and of blocked-bloom at ε = 1 % (the
/// default point filter, about 10 bits per key) from the same keys (hashing included, as a
/// table's seal does it), built alternately, `rounds` rounds: medians of CPU time and of wall
/// time.
fn build_row<K: AsRef<[u8]> + Sync>(ks: &[K], shape: &str, threads: usize, rounds: usize) {
    let per_key = |s: f64| s * 1e9 / ks.len() as f64;
    let pool = pool(threads);
    let (mut rc, mut rw, mut pc, mut pw) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        let (c, w) = time_once(|| drop(black_box(pool.install(|| range::build(ks, 16.0)))));
        rc.push(per_key(c));
        rw.push(per_key(w));
        let (c, w) = time_once(|| {
            pool.install(|| {
                let h = hash_keys(ks);
                black_box(filter::build(FilterKind::BlockedBloom, 0.01, &h))
            })
            .expect("build");
        });
        pc.push(per_key(c));
        pw.push(per_key(w));
    }
    let (rc, rw, pc, pw) = (
        median(&mut rc),
        median(&mut rw),
        median(&mut pc),
        median(&mut pw),
    );
    eprintln!(
        "| {} | {shape} | {threads} | {rc:.1} | {rw:.1} | {pc:.1} | {pw:.1} | {:.2}× | {:.2}× |",
        ks.len(),
        rc / pc,
        rw / pw
    );
}

/// The build table: tables of the sizes the engine makes (10k, 100k, 600k keys) and 1M, of
/// 16-byte random keys and of keys that share prefixes, on one thread, medians of 15 rounds
/// (7 at 600k and more); then 10M random keys on 1 and 2 threads, 3 rounds.
fn build_table() {
    eprintln!("\n| n | keys | threads | range filter: CPU ns/key | wall | blocked-bloom from keys: CPU ns/key | wall | range / blocked-bloom (CPU) | (wall) |");
    eprintln!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for n in [10_000u64, 100_000, 600_000, 1_000_000] {
        let rounds = if n >= 600_000 { 7 } else { 15 };
        build_row(&keys(n), "random 16 B", 1, rounds);
        build_row(&prefixed_keys(n), "shared prefixes", 1, rounds);
    }
    if std::env::var_os("RANGE_BENCH_10M").is_some() {
        let ks = keys(10_000_000);
        for threads in [1, 2] {
            build_row(&ks, "random 16 B", threads, 3);
        }
    }
}

const QUERIES: usize = 1 << 16;

/// ns per query: one query per criterion iteration, cycling through 65,536 prepared ranges.
fn queries(c: &mut Criterion) {
    let ks = keys(1_000_000);
    let values: Vec<u128> = ks.iter().map(|k| u128::from_be_bytes(*k)).collect();
    let block = range::build(ks.iter(), 16.0).expect("build");
    let f = RangeFilter::decode(&block).expect("decode");
    let point = filter::build(FilterKind::BlockedBloom, 0.01, &hash_keys(&ks))
        .expect("build")
        .expect("a block");
    let pf = Filter::decode(&point).expect("decode");
    let mut g = c.benchmark_group("query/n=1000000/16 bits");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    let mut run = |name: &str, qs: &[(Key, Key)]| {
        g.bench_function(BenchmarkId::new("range", name), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & (QUERIES - 1);
                let (a, z) = &qs[i];
                f.may_intersect(black_box(a.as_slice())..black_box(z.as_slice()))
            })
        });
    };
    for (len, clustered) in [(1, false), (32, false), (1, true), (32, true)] {
        let qs = empty_ranges(&values, len, clustered, QUERIES, len as u64);
        let what = if clustered { "clustered" } else { "uniform" };
        run(&format!("empty ℓ={len} {what}"), &qs);
    }
    // Ranges that hold a key: [k − 16, k + 16).
    let full: Vec<(Key, Key)> = (0..QUERIES)
        .map(|i| {
            let v = values[(mix64(i as u64) % values.len() as u64) as usize];
            ((v - 16).to_be_bytes(), (v + 16).to_be_bytes())
        })
        .collect();
    run("holds a key ℓ=32", &full);
    let prefixes: Vec<Key> = (0..QUERIES)
        .map(|i| ks[(mix64(i as u64) % ks.len() as u64) as usize])
        .collect();
    g.bench_function(BenchmarkId::new("range", "prefix of 14 bytes"), |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (QUERIES - 1);
            let mut p = prefixes[i];
            p[13] ^= 0x55; // mostly absent
            f.may_contain_prefix(black_box(&p[..14]))
        })
    });
    let hs = hash_keys(
        &empty_ranges(&values, 1, false, QUERIES, 9)
            .iter()
            .map(|q| q.0)
            .collect::<Vec<_>>(),
    );
    g.bench_function(BenchmarkId::new("blocked-bloom 1 %", "absent point"), |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & (QUERIES - 1);
            pf.may_contain(black_box(hs[i]))
        })
    });
    g.finish();
}

/// Tables that are not criterion timings; only under `cargo bench`, and not when a filter
/// that does not mention "tables" is given.
fn tables(_: &mut Criterion) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !args.iter().any(|a| a == "--bench")
        || (!filters.is_empty() && !filters.iter().any(|f| f.contains("tables")))
    {
        return;
    }
    if filters.iter().any(|f| f.contains("build")) {
        build_table();
        return;
    }
    fpr_table();
    build_table();
}

criterion_group!(benches, tables, queries);
criterion_main!(benches);
