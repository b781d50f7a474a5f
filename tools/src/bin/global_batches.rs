//! What the global filter's batches cost per key at a store's scale, in thread CPU time:
//! filling a filter with N keys of L2 (one batch, as a rebuild does), inserting N/9 keys of
//! an L0 table in 8 batches (as flushes do, each a sparse sweep of the table), relabelling
//! them to L1 in one merge batch (a compaction) and removing them (one batch).
//!
//! ```text
//! taskset -c 1 cargo run --release -p filterstore-tools --bin global_batches -- [N]   (default 14000000)
//! ```
//!
//! The table (sized for 2N entries, about 4 bytes per key) is far larger than the CPU's
//! caches at the default N, as it is in a loaded store.

use filterstore::filter::global::{GlobalFilter, Layout, MergeKey, RunId, RunSet};
use filterstore::hash::mix64;

/// Seconds of CPU this thread has used.
fn cpu() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(14_000_000);
    let m = n / 9;
    let f = GlobalFilter::new(Layout::Fixed16, n * 2).expect("a filter of this size");
    let (l2, l1) = (RunId::level(2).unwrap(), RunId::level(1).unwrap());
    let l0 = f.writer().new_l0_run().unwrap();
    let mut big: Vec<u64> = (0..n).map(mix64).collect();
    let t = cpu();
    f.writer().insert_batch(&mut big, l2);
    let fill = cpu() - t;
    let mut flushed: Vec<u64> = (n..n + m).map(mix64).collect();
    let t = cpu();
    for chunk in flushed.chunks(m as usize / 8 + 1) {
        f.writer().insert_batch(&mut chunk.to_vec(), l0);
    }
    let insert = cpu() - t;
    let mut merged: Vec<MergeKey> = flushed
        .iter()
        .map(|&hash| MergeKey {
            hash,
            from: RunSet::of(l0),
            to: Some(l1),
        })
        .collect();
    let t = cpu();
    let missing = f.writer().merge_batch(&mut merged);
    let relabel = cpu() - t;
    let t = cpu();
    let missing = missing + f.writer().remove_batch(&mut flushed, l1);
    let remove = cpu() - t;
    assert_eq!(missing, 0, "every entry was found");
    let ns = |s: f64, k: u64| s * 1e9 / k as f64;
    println!(
        "N = {n}: fill {:.1} ns/key; {m} keys: insert (8 batches) {:.1}, relabel {:.1}, remove {:.1} ns/key",
        ns(fill, n),
        ns(insert, m),
        ns(relabel, m),
        ns(remove, m)
    );
}
