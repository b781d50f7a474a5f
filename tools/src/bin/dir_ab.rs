//! Times present-key `get`s on two existing store directories in one process, alternating
//! rounds between them so that a shared, noisy machine slows both alike; prints the median
//! round of each and their ratio, in wall time and in the thread's CPU time.
//!
//! `cargo run --release --example dir_ab -- DIR_A DIR_B [rounds]`
//!
//! Meant for two stores of the same keys written differently, e.g. by two builds of the
//! engine: the side-by-side harness keeps what it loads with `--dir D` (the store is
//! `D/ours/load`), so `peers --engines ours --n 1000000 --dir D load present` with each build
//! gives two stores to compare (the `present` run lets the idle drain merge L0 first; copy a
//! directory to compare a store with itself). Both are opened as the harness opens them
//! (Bloom filters at 10 bits/key, default block cache and compression) and looked up with
//! `Store::get`, each round 50,000 keys drawn uniformly from `DIR_A`'s keys, the same keys
//! for A and B. Prints each store's block reads and cache hits per `get` and the memory of
//! its indexes.

use std::time::Instant;

use filterstore::hash::mix64;
use filterstore::{FilterKind, Options, Store, SyncPolicy};

fn open(dir: &str) -> filterstore::Result<Store> {
    let fpr = (-10.0f64 * std::f64::consts::LN_2.powi(2)).exp();
    Store::open(
        std::path::Path::new(dir),
        Options {
            filter: Some(FilterKind::Bloom),
            fpr: Some(fpr),
            sync: SyncPolicy::OnFlush,
            compaction_trigger: Some(8),
            create_if_missing: false,
            ..Options::default()
        },
    )
}

fn main() -> filterstore::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: dir_ab DIR_A DIR_B [rounds]");
        std::process::exit(2);
    }
    let stores = [open(&args[0])?, open(&args[1])?];
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(20);
    let keys: Vec<Vec<u8>> = stores[0]
        .scan::<&[u8]>(..)
        .map(|item| item.map(|(k, _)| k))
        .collect::<Result<_, _>>()?;
    if keys.is_empty() {
        eprintln!("{} holds no keys", args[0]);
        std::process::exit(2);
    }
    let before = [stores[0].stats(), stores[1].stats()];
    let cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
    };
    let per_round = 50_000usize;
    let mut x = 99u64;
    let (mut wall, mut thread) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    // Two rounds each to warm the caches, then the timed ones.
    for r in 0..rounds + 2 {
        let picks: Vec<usize> = (0..per_round)
            .map(|_| {
                x = mix64(x.wrapping_add(1));
                (x % keys.len() as u64) as usize
            })
            .collect();
        // Alternate which goes first, so neither always runs on a warmer machine.
        let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for w in order {
            let (t, c) = (Instant::now(), cpu());
            for &i in &picks {
                if stores[w].get(&keys[i])?.is_none() {
                    eprintln!("store {w}: a key of store A is missing");
                    std::process::exit(3);
                }
            }
            if r >= 2 {
                wall[w].push(t.elapsed().as_nanos() as f64 / per_round as f64);
                thread[w].push((cpu() - c) / per_round as f64);
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (w, name) in ["A", "B"].iter().enumerate() {
        let s = stores[w].stats();
        let gets = (s.lookups - before[w].lookups).max(1) as f64;
        println!(
            "{name}: {:.4} block reads and {:.4} cache hits per get, {} bytes of index in memory",
            (s.data_block_reads - before[w].data_block_reads) as f64 / gets,
            (s.block_cache_hits - before[w].block_cache_hits) as f64 / gets,
            s.tables.iter().map(|t| t.index_memory_bytes).sum::<u64>()
        );
    }
    let (wa, wb) = (median(&mut wall[0]), median(&mut wall[1]));
    let (ca, cb) = (median(&mut thread[0]), median(&mut thread[1]));
    println!(
        "median of {rounds} rounds: A {wa:.0} ns, B {wb:.0} ns per present get; B/A {:.3} (CPU time: A {ca:.0} ns, B {cb:.0} ns, B/A {:.3})",
        wb / wa,
        cb / ca
    );
    Ok(())
}
