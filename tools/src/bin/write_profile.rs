//! Times the write path on generated data like `store bench` (16-byte keys, 100-byte values):
//! N puts under one sync policy into a fresh store, then one seal of the memtable on a rayon
//! pool of T threads with fsync skipped (`NoSyncFs`), for profiling (`perf record`,
//! callgrind with `--toggle-collect`).
//!
//! `cargo run --release -p filterstore-tools --bin write_profile -- [keys] [threads] [buffered|onflush|every] [writers] [range bits]`
//!
//! With `writers` > 1 the puts are spread over that many threads (group commit). `range
//! bits` is `Options::range_filter_bits` (the default, 16, when absent; 0 seals the table
//! without a range filter).

use std::sync::Arc;
use std::time::Instant;

use filterstore::{FilterKind, Options, Store, SyncPolicy};
use filterstore_cli::bench::key16;

fn main() -> filterstore::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let threads: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    let sync = match args.get(2).map(String::as_str) {
        None | Some("buffered") => SyncPolicy::Buffered,
        Some("onflush") => SyncPolicy::OnFlush,
        Some("every") => SyncPolicy::EveryWrite,
        Some(p) => panic!("unknown policy {p}"),
    };
    let writers: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1);
    let range_bits: f64 = args
        .get(4)
        .and_then(|a| a.parse().ok())
        .unwrap_or(Options::default().range_filter_bits);
    let tmp = tempfile::tempdir()?;
    let store = Arc::new(Store::open(
        tmp.path(),
        Options::default()
            .filter(FilterKind::BlockedBloom)
            .fpr(0.01)
            .memtable_bytes(usize::MAX)
            .compaction_trigger(None)
            .sync(sync)
            .fs(Arc::new(filterstore::io::NoSyncFs))
            .range_filter_bits(range_bits),
    )?);
    // Process CPU seconds (user + system, all threads) from /proc/self/stat, in clock ticks
    // of 10 ms (not the vDSO clock, which valgrind cannot run).
    let cpu = || {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let after = stat.rsplit(')').next().unwrap_or("");
        let f: Vec<f64> = after
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0.0))
            .collect();
        (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
    };
    let (start, cpu0) = (Instant::now(), cpu());
    std::thread::scope(|s| {
        for w in 0..writers {
            let store = store.clone();
            s.spawn(move || {
                let mut value = [0u8; 100];
                for i in (w..n).step_by(writers as usize) {
                    value[..8].copy_from_slice(&i.to_le_bytes());
                    store.put(key16(7, i), value).expect("put");
                }
            });
        }
    });
    let load = start.elapsed().as_secs_f64();
    let load_cpu = cpu() - cpu0;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    // The seal's CPU time from the process clock (nanoseconds; /proc's ticks are 10 ms).
    let clock = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    };
    let (start, cpu0) = (Instant::now(), clock());
    pool.install(|| store.flush())?;
    let seal = start.elapsed().as_secs_f64();
    let seal_cpu = clock() - cpu0;
    // CPU seconds of each live thread (the pool's workers did the seal): how evenly the
    // seal's work was split, whatever else the machine was running.
    let mut per_thread = Vec::new();
    for t in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        let f: Vec<f64> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0.0))
            .collect();
        let secs = (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0;
        if secs > 0.0 {
            per_thread.push(format!("{secs:.2}"));
        }
    }
    println!(
        "{n} puts ({sync:?}, {writers} writer(s)): {:.0} puts/s ({:.0} ns CPU/put); seal with {threads} thread(s), range filter {range_bits} bits/key: {seal:.4} s ({seal_cpu:.4} s CPU; CPU s of live threads: {})",
        n as f64 / load,
        load_cpu / n as f64 * 1e9,
        per_thread.join(" ")
    );
    Ok(())
}
