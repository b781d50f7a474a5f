//! What a snapshot costs: lookups through it against plain lookups, and the put rate while
//! one is held (issue 36's targets; docs/engine.md, "Snapshots").
//!
//! ```text
//! taskset -c 1 cargo bench --bench snapshot -- [N] [--filter global] [--rounds R]
//! ```
//! Loads N keys (16-byte keys, 100-byte values, default options), then for each of
//! `--rounds` rounds, alternating, a fresh store with a snapshot taken after the load and one
//! without: N more puts (half of them overwrite loaded keys), timed; a compaction of the
//! store (every table the snapshot reads is replaced); then lookups of keys overwritten
//! since the snapshot and of keys only in compacted tables, through the snapshot and through
//! the store (the same keys, interleaved in batches). Prints per round the put rates, the
//! bytes the snapshot pins, and the get times, and the medians of the ratios.

use std::time::Instant;

use filterstore::hash::mix64;
use filterstore::{FilterKind, Options, Store};

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix64(i).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

fn value(i: u64, gen: u8) -> [u8; 100] {
    let mut v = [gen; 100];
    v[..8].copy_from_slice(&mix64(i ^ 0x5555).to_le_bytes());
    v
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let n: u64 = args
        .iter()
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let global = args
        .windows(2)
        .any(|w| w[0] == "--filter" && w[1] == "global");
    let rounds: usize = args
        .windows(2)
        .find(|w| w[0] == "--rounds")
        .and_then(|w| w[1].parse().ok())
        .unwrap_or(2);
    let opts = || Options {
        filter: global.then_some(FilterKind::Global),
        ..Options::default()
    };
    let (mut put_ratios, mut get_ratios) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut rates = [0.0f64; 2];
        for with in [round % 2 == 0, round % 2 != 0] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path(), opts()).unwrap();
            for i in 0..n {
                store.put(&key(i), &value(i, 1)).unwrap();
            }
            // Taken with the load's last writes still in the memtable: its overwrites link.
            let snap = with.then(|| store.snapshot());
            let t = Instant::now();
            // Half new keys, half overwrites of loaded ones (the even ones).
            for j in 0..n {
                let i = if j % 2 == 0 { j } else { n + j };
                store.put(&key(i), &value(i, 2)).unwrap();
            }
            store.flush().unwrap();
            let rate = n as f64 / t.elapsed().as_secs_f64();
            rates[usize::from(with)] = rate;
            let Some(snap) = snap else { continue };
            store.compact().unwrap();
            let s = store.stats();
            println!(
                "round {round}: with a snapshot {:.0} puts/s; it pins {} tables, {} MB, {} MB of memtables",
                rate,
                s.snapshots.pinned_tables,
                s.snapshots.pinned_table_bytes >> 20,
                s.snapshots.memtable_bytes >> 20,
            );
            // Keys overwritten since (even) and keys only in compacted tables (odd).
            let keys: Vec<[u8; 16]> = (0..200_000u64).map(|j| key(mix64(j) % n)).collect();
            let (mut t_snap, mut t_store) = (0.0, 0.0);
            for (b, chunk) in keys.chunks(10_000).enumerate() {
                let snap_first = b % 2 == 0;
                for pass in 0..2 {
                    let t = Instant::now();
                    let mut found = 0;
                    if (pass == 0) == snap_first {
                        for k in chunk {
                            found += snap.get(k).unwrap().is_some() as usize;
                        }
                        t_snap += t.elapsed().as_secs_f64();
                    } else {
                        for k in chunk {
                            found += store.get(k).unwrap().is_some() as usize;
                        }
                        t_store += t.elapsed().as_secs_f64();
                    }
                    assert_eq!(found, chunk.len());
                }
            }
            let per = |t: f64| t * 1e9 / keys.len() as f64;
            println!(
                "round {round}: get through the snapshot {:.0} ns, through the store {:.0} ns: {:.3}×",
                per(t_snap),
                per(t_store),
                t_snap / t_store
            );
            get_ratios.push(t_snap / t_store);
        }
        println!(
            "round {round}: puts/s with a snapshot held {:.0}, without {:.0}: {:.3}×",
            rates[1],
            rates[0],
            rates[1] / rates[0]
        );
        put_ratios.push(rates[1] / rates[0]);
    }
    println!(
        "n {n}, filter {}: snapshot get ÷ store get, median {:.3}×; puts/s with ÷ without, median {:.3}×",
        if global { "global" } else { "per table" },
        median(&mut get_ratios),
        median(&mut put_ratios)
    );
}
