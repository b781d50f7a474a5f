//! Live heap against resident memory while loading N keys with background work on:
//! `cargo run --release -p filterstore-tools --bin memory_profile [keys] [range filter bits per key]`. A counting allocator records the
//! peak of live heap bytes; /proc gives the peak resident set. The gap is memory the
//! allocator holds but the store does not use.

use std::sync::atomic::Ordering::Relaxed;

use filterstore::hash::mix64;
use filterstore::{Options, Store};

#[path = "../../../tests/support/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{LIVE, PEAK};

#[global_allocator]
static A: counting_alloc::Counting = counting_alloc::Counting;

fn status(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000_000);
    // Range filter bits per key (0: none), the default unless given.
    let range_filter_bits = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(filterstore::store::DEFAULT_RANGE_BITS);
    let dir = tempfile::tempdir().unwrap();
    let options = Options::default().range_filter_bits(range_filter_bits);
    let store = Store::open(dir.path(), options).unwrap();
    let v = [7u8; 100];
    let mib = |b: usize| b >> 20;
    for i in 0..n {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&mix64(i).to_be_bytes());
        k[8..].copy_from_slice(&mix64(!i).to_be_bytes());
        store.put(k, v).unwrap();
        if i % (n / 10).max(1) == 0 {
            println!(
                "{i:>10} puts: live heap {} MiB (peak {}), RSS {} MiB (heap {} + files {}), levels {:?}",
                mib(LIVE.load(Relaxed)),
                mib(PEAK.load(Relaxed)),
                status("VmRSS:") / 1024,
                status("RssAnon:") / 1024,
                status("RssFile:") / 1024,
                store.stats().levels.iter().map(|l| l.tables).collect::<Vec<_>>()
            );
        }
    }
    store.flush().unwrap();
    println!(
        "end: live heap {} MiB (peak {}), peak RSS {} MiB, now heap {} + files {} MiB",
        mib(LIVE.load(Relaxed)),
        mib(PEAK.load(Relaxed)),
        status("VmHWM:") / 1024,
        status("RssAnon:") / 1024,
        status("RssFile:") / 1024
    );
}
