//! Times a full compaction of 10 overlapping tables of 1M keys in total (the peers' W5
//! workload), for profiling: `cargo run --release -p filterstore-tools --bin compact_profile [keys] [rounds]`.
//! With `FILTERSTORE_NOSYNC=1` fsyncs are skipped, to separate CPU from the device.

use std::sync::Arc;
use std::time::Instant;

use filterstore::hash::mix64;
use filterstore::{FilterKind, Options, Store};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let nosync = std::env::var_os("FILTERSTORE_NOSYNC").is_some();
    let mut times = Vec::new();
    for _ in 0..rounds {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = Options::default()
            .filter(FilterKind::Bloom)
            .fpr(0.0082)
            .memtable_bytes(usize::MAX)
            .compaction_trigger(None);
        if nosync {
            opts.fs = Arc::new(filterstore::io::NoSyncFs);
        }
        let store = Store::open(dir.path(), opts).unwrap();
        let value = [7u8; 100];
        for t in 0..10 {
            for i in (t..n).step_by(10) {
                let mut k = [0u8; 16];
                k[..8].copy_from_slice(&mix64(i).to_be_bytes());
                k[8..].copy_from_slice(&mix64(!i).to_be_bytes());
                store.put(k, value).unwrap();
            }
            store.flush().unwrap();
        }
        // Under `perf record --control fifo:PATH -D -1`, sample the compaction alone.
        let ctl = std::env::var("PERF_CTL_FIFO").ok();
        let perf = |cmd: &str| {
            if let Some(p) = &ctl {
                std::fs::write(p, format!("{cmd}\n")).unwrap();
            }
        };
        perf("enable");
        let t = Instant::now();
        store.compact().unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e3);
        perf("disable");
    }
    times.sort_by(f64::total_cmp);
    println!(
        "compact of {n} keys in 10 tables: median {:.0} ms of {:?}",
        times[times.len() / 2],
        times
    );
}
