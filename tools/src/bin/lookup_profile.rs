//! Builds (once) a store of N generated keys in T tables and times absent and present
//! lookups in a loop, for profiling the read path (`perf record`, callgrind).
//!
//! `cargo run --release -p filterstore-tools --bin lookup_profile -- DIR [keys] [tables] [lookups] [absent|present|both] [pread|mmap] [cache-bytes]`
//!
//! `cache-bytes` sizes the block cache (default: `Options::default()`'s); 0 turns it off, so
//! every present lookup reads and checks its block. `FILTERSTORE_KIND=NAME` picks the filter
//! (any name `store --filter` takes, e.g. `global`; default `blocked-bloom`) when the store is
//! built. `FILTERSTORE_VIA=get|reader|multi|reader-multi` picks the lookup path: `Store::get`
//! (the default), a `Reader`'s `get`, or `multi_get` of the store or of a `Reader` in batches
//! of 64 keys.

use std::time::Instant;

use filterstore::{FilterKind, Options, Store, SyncPolicy};
use filterstore_cli::bench::key16;

fn main() -> filterstore::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = std::path::PathBuf::from(
        args.first()
            .expect("usage: DIR [keys] [tables] [lookups] [mode]"),
    );
    let n: u64 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let tables: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10);
    let lookups: u64 = args
        .get(3)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let mode = args.get(4).cloned().unwrap_or_else(|| "both".into());
    let mmap_reads = args.get(5).is_some_and(|a| a == "mmap");
    let block_cache_bytes = args
        .get(6)
        .and_then(|a| a.parse().ok())
        .unwrap_or(Options::default().block_cache_bytes);
    let fresh = !dir.exists();
    let filter = match std::env::var("FILTERSTORE_KIND") {
        Ok(k) => k.parse::<FilterKind>()?,
        Err(_) => FilterKind::BlockedBloom,
    };
    let store = Store::open(
        &dir,
        Options::default()
            .filter(filter)
            .fpr(0.001)
            .memtable_bytes(usize::MAX)
            .compaction_trigger(None)
            .sync(SyncPolicy::Buffered)
            .mmap_reads(mmap_reads)
            .block_cache_bytes(block_cache_bytes),
    )?;
    if fresh {
        let value = [7u8; 100];
        for t in 0..tables {
            for i in (t..n).step_by(tables as usize) {
                store.put(key16(42, i), value)?;
            }
            store.flush()?;
        }
    }
    let via = std::env::var("FILTERSTORE_VIA").unwrap_or_else(|_| "get".into());
    if mode != "present" {
        let start = Instant::now();
        let found = look(&store, &via, lookups, |i| key16(0x5555_5555_0000_0000, i))?;
        let ns = start.elapsed().as_nanos() as f64 / lookups as f64;
        println!("absent: {ns:.0} ns/lookup ({found} found)");
    }
    if mode != "absent" {
        let start = Instant::now();
        let found = look(&store, &via, lookups, |i| key16(42, (i * 7919) % n))?;
        let ns = start.elapsed().as_nanos() as f64 / lookups as f64;
        println!("present: {ns:.0} ns/lookup ({found} found)");
    }
    let s = store.stats();
    println!(
        "block reads {} filter negatives {}",
        s.data_block_reads, s.filter_negatives
    );
    Ok(())
}

/// Looks up `key(0..lookups)` through the path `via` names; returns how many were found.
fn look(
    store: &Store,
    via: &str,
    lookups: u64,
    key: impl Fn(u64) -> [u8; 16],
) -> filterstore::Result<u64> {
    let reader = store.reader();
    let mut found = 0;
    match via {
        "get" | "reader" => {
            for i in 0..lookups {
                let v = if via == "get" {
                    store.get(key(i))?
                } else {
                    reader.get(key(i))?
                };
                found += v.is_some() as u64;
            }
        }
        "multi" | "reader-multi" => {
            let mut keys = Vec::with_capacity(64);
            for start in (0..lookups).step_by(64) {
                keys.clear();
                keys.extend((start..lookups.min(start + 64)).map(&key));
                let values = if via == "multi" {
                    store.multi_get(&keys)?
                } else {
                    reader.multi_get(&keys)?
                };
                found += values.iter().flatten().count() as u64;
            }
        }
        other => panic!("FILTERSTORE_VIA={other}: get, reader, multi or reader-multi"),
    }
    Ok(found)
}
