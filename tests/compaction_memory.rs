//! Compaction memory is bounded: a full compaction of 6× more data takes no more heap.
//!
//! A counting global allocator (this test binary's own) records the peak of live heap bytes
//! while `compact()` merges every table. The streaming merge holds, by design
//! (`compaction/run.rs`): a 64 KiB chunk per input table, two windows of one run per thread
//! (a run ends at 1 MiB of keys and values or 8,192 entries) plus their encoded copies, and
//! the key hashes and the range filter builder's 16 bytes per key of one output table. The test asserts the measured peak stays under that
//! bound at both sizes, that the bound is far below the data merged (so an implementation
//! that collects the entries would fail), and that the larger merge needs no more than the
//! smaller one plus slack.

use std::sync::atomic::Ordering::Relaxed;

use filterstore::{Compression, FilterKind, Options, Store};

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{LIVE, PEAK};

#[global_allocator]
static A: counting_alloc::Counting = counting_alloc::Counting;

const VALUE: usize = 100;
const TABLES: u64 = 8;
const TABLE_BYTES: u64 = 4 << 20;

/// Loads `n` keys in `TABLES` flushed, overlapping L0 tables, then returns the peak heap
/// growth during one full compaction and the bytes merged.
fn compaction_peak(n: u64) -> (usize, u64) {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .filter(FilterKind::BlockedBloom)
        .memtable_bytes(usize::MAX)
        .compaction_trigger(None)
        .table_bytes(TABLE_BYTES)
        // Raw blocks: the peak is compared with the bytes merged, which compression of these
        // repetitive values would shrink thirtyfold (it only shrinks the encoded copies).
        .compression(Compression::None);
    let store = Store::open(dir.path(), opts).unwrap();
    let value = [7u8; VALUE];
    for t in 0..TABLES {
        for i in (t..n).step_by(TABLES as usize) {
            let k = filterstore::hash::mix64(i).to_be_bytes();
            store.put(k, value).unwrap();
        }
        store.flush().unwrap();
    }
    let merged: u64 = store.stats().tables.iter().map(|t| t.file_bytes).sum();
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    store.compact().unwrap();
    let peak = PEAK.load(Relaxed) - base;
    let s = store.stats();
    assert_eq!(s.table_keys(), n, "every key survives the merge");
    assert!(s.tables.len() > 1, "the output rolled into several tables");
    (peak, merged)
}

#[test]
fn compaction_memory_does_not_grow_with_the_data() {
    let threads = rayon::current_num_threads().max(1);
    let run_bytes = 1usize << 20;
    let entry = 8 + VALUE;
    // Per source one chunk; two windows of runs, each with its encoded copy (a little larger
    // than the run, with block trailers and padding); one output table's key hashes (8 bytes
    // per key) and range filter tails (16).
    let bound = TABLES as usize * (64 << 10)
        + 2 * threads * 2 * (run_bytes + run_bytes / 8)
        + (TABLE_BYTES as usize / entry + 1) * (8 + 16)
        + (4 << 20); // filters being built, handles, buffers
    let (small, small_data) = compaction_peak(200_000);
    let (large, large_data) = compaction_peak(1_200_000);
    println!(
        "compaction heap peak: {} KiB merging {} KiB, {} KiB merging {} KiB (bound {} KiB)",
        small >> 10,
        small_data >> 10,
        large >> 10,
        large_data >> 10,
        bound >> 10
    );
    assert!(
        large_data as usize > 2 * bound,
        "the data must dwarf the bound"
    );
    assert!(small <= bound, "{small} > {bound}");
    assert!(large <= bound, "{large} > {bound}");
    assert!(
        large <= small + small / 2 + (4 << 20),
        "6x the data took {large} bytes against {small}"
    );
}
