//! Lookups on a store right after a bulk load, while the compactions the load left due run:
//! `lookup_after_load load DIR N` loads N keys (the `store bench engine` key scheme) and
//! closes; `lookup_after_load lookup DIR N LOOKUPS` opens a copy of such a store and times
//! absent and present lookups at once, then again after the compactions settle.

use std::time::Instant;

use filterstore::hash::mix64;
use filterstore::{Options, Store};

const SEED: u64 = 42;

fn key(i: u64, absent: bool) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix64(i ^ SEED).to_be_bytes());
    k[8..].copy_from_slice(&(mix64(i.wrapping_add(SEED)) & !1 | u64::from(absent)).to_be_bytes());
    k
}

fn time(store: &Store, n: u64, count: u64, absent: bool) -> (f64, f64) {
    let keys: Vec<[u8; 16]> = (0..count)
        .map(|j| key(mix64(j ^ 0x5eed) % n, absent))
        .collect();
    let before = store.stats().filter_probes();
    let r = store.reader();
    let t = Instant::now();
    let mut found = 0u64;
    for k in &keys {
        found += u64::from(r.get(k).unwrap().is_some());
    }
    let ns = t.elapsed().as_nanos() as f64 / count as f64;
    assert_eq!(found, if absent { 0 } else { count });
    (
        ns,
        (store.stats().filter_probes() - before) as f64 / count as f64,
    )
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = a[2].parse().unwrap();
    match a[0].as_str() {
        "load" => {
            let store = Store::open(&a[1], Options::default()).unwrap();
            let mut v = [0u8; 100];
            for i in 0..n {
                v[..8].copy_from_slice(&i.to_le_bytes());
                store.put(key(i, false), v).unwrap();
            }
            store.flush().unwrap();
            let s = store.stats();
            println!(
                "loaded; levels {:?}",
                s.levels.iter().map(|l| l.tables).collect::<Vec<_>>()
            );
        }
        _ => {
            let lookups: u64 = a[3].parse().unwrap();
            let store = Store::open(&a[1], Options::default()).unwrap();
            let (an, ap) = time(&store, n, lookups, true);
            let (pn, pp) = time(&store, n, lookups, false);
            println!(
                "at open:  absent {an:.0} ns ({ap:.2} probes), present {pn:.0} ns ({pp:.2} probes)"
            );
            store.wait_for_compaction().unwrap();
            let (an, ap) = time(&store, n, lookups, true);
            let (pn, pp) = time(&store, n, lookups, false);
            println!(
                "settled:  absent {an:.0} ns ({ap:.2} probes), present {pn:.0} ns ({pp:.2} probes)"
            );
        }
    }
}
