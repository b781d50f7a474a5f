//! Timed lookups against the loaded store: present or absent keys through a `Reader`, with
//! the filter probes, block reads and cache hits they cost.

use std::time::Instant;

use filterstore::hash::mix64;
use filterstore::Store;

use crate::cli::bench_data::key;
use crate::cli::CliError;

/// What a batch of lookups cost, per lookup.
pub(super) struct Lookups {
    pub(super) ns: f64,
    /// The looking-up thread's CPU time per get (time preempted by other processes not
    /// included: on a shared machine the steadier figure).
    pub(super) cpu_ns: f64,
    pub(super) probes: f64,
    pub(super) reads: f64,
    pub(super) hits: f64,
    pub(super) found: u64,
}

pub(super) fn lookups(
    store: &Store,
    seed: u64,
    n: u64,
    count: u64,
    absent: bool,
) -> Result<Lookups, CliError> {
    // Keys drawn before the clock starts, laid out in draw order.
    let keys: Vec<[u8; 16]> = (0..count)
        .map(|j| key(seed, mix64(j ^ 0x5eed) % n, absent))
        .collect();
    let before = store.stats();
    let reader = store.reader();
    let c = thread_cpu_ns();
    let t = Instant::now();
    let mut found = 0;
    for k in &keys {
        found += u64::from(reader.get(k)?.is_some());
    }
    let ns = t.elapsed().as_nanos() as f64 / count as f64;
    let cpu_ns = (thread_cpu_ns() - c) / count as f64;
    let after = store.stats();
    let per = |a: u64, b: u64| (a - b) as f64 / count as f64;
    Ok(Lookups {
        ns,
        cpu_ns,
        probes: per(after.filter_probes(), before.filter_probes()),
        reads: per(after.data_block_reads, before.data_block_reads),
        hits: per(after.block_cache_hits, before.block_cache_hits),
        found,
    })
}

/// This thread's CPU time so far, in ns.
fn thread_cpu_ns() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
}
