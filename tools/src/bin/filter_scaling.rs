//! Filter build time with 1 and 2 threads and absent-query time, 10M pre-hashed keys.
//!
//! `cargo run --release -p filterstore-tools --bin filter_scaling` (pin with `taskset -c 1` for the query
//! figures; the build figures need both cores). Medians of 5 builds, best of 5 query passes.

use filterstore::filter::{self, Filter, FilterKind};
use filterstore::hash::mix64;
use std::time::Instant;
fn main() {
    let n = 10_000_000u64;
    let keys: Vec<u64> = (0..n).map(mix64).collect();
    for kind in [
        FilterKind::Bloom,
        FilterKind::BlockedBloom,
        FilterKind::BinaryFuse,
    ] {
        for eps in [0.01, 0.001] {
            let mut t = [0f64; 2];
            for (i, threads) in [1usize, 2].iter().enumerate() {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(*threads)
                    .build()
                    .unwrap();
                let mut v: Vec<f64> = (0..5)
                    .map(|_| {
                        let s = Instant::now();
                        let b = pool.install(|| filter::build(kind, eps, &keys)).unwrap();
                        std::hint::black_box(b);
                        s.elapsed().as_secs_f64()
                    })
                    .collect();
                v.sort_by(f64::total_cmp);
                t[i] = v[2];
            }
            println!(
                "{kind} eps {eps}: build 1t {:.1} ns/key, 2t {:.1} ns/key, speed-up {:.2}x",
                t[0] * 1e9 / n as f64,
                t[1] * 1e9 / n as f64,
                t[0] / t[1]
            );
        }
    }
    for kind in [
        FilterKind::Bloom,
        FilterKind::BlockedBloom,
        FilterKind::Cuckoo,
        FilterKind::BinaryFuse,
    ] {
        let b = filter::build(kind, 0.01, &keys).unwrap().unwrap();
        let f = Filter::decode(&b).unwrap();
        let q: Vec<u64> = (0..4_000_000u64).map(|i| mix64(i + (1 << 40))).collect();
        let mut best = f64::MAX;
        for _ in 0..5 {
            let s = Instant::now();
            let c = q.iter().filter(|&&h| f.may_contain(h)).count();
            std::hint::black_box(c);
            best = best.min(s.elapsed().as_secs_f64() * 1e9 / q.len() as f64);
        }
        println!(
            "{kind} 10M eps 1%: absent query {best:.1} ns (best of 5, 4M queries, throughput)"
        );
    }
}
