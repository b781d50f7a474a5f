//! The block cache through the store: its bound, what it saves, and what it must never do
//! (serve a block of a table that is gone, or lose its hot blocks to a scan or a compaction).
//!
//! Rules the counts follow (`Stats`): a block a lookup or scan needs is either read from its
//! table file (`data_block_reads`, one per cache miss) or found in the cache
//! (`block_cache_hits`); while the cache has room every block read is cached; once it is
//! full, a block is cached on its second miss within the doorkeeper's window.

mod common;

use std::sync::Arc;

use common::NoSyncFs;
use filterstore::{Compression, FilterKind, Options, Stats, Store};

fn key(i: u64) -> Vec<u8> {
    format!("key{:010}", i).into_bytes()
}

/// 100-byte values that do not compress much (so blocks are about 4 KiB).
fn value(i: u64) -> Vec<u8> {
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..100)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn opts(cache: usize) -> Options {
    Options::default()
        .filter(FilterKind::BlockedBloom)
        .fpr(0.01)
        .block_cache_bytes(cache)
        .compaction_trigger(None)
        .fs(Arc::new(NoSyncFs))
}

/// A store of `n` keys in one table (about 120 bytes of block per key).
fn store_of(dir: &std::path::Path, n: u64, cache: usize) -> Store {
    let s = Store::open(dir, opts(cache)).unwrap();
    for i in 0..n {
        s.put(key(i), value(i)).unwrap();
    }
    s.flush().unwrap();
    drop(s);
    Store::open(dir, opts(cache)).unwrap()
}

fn check_bound(s: &Stats, asked: usize, what: &str) {
    assert!(
        s.block_cache_bytes <= s.block_cache_capacity && s.block_cache_capacity <= asked as u64,
        "{what}: {} bytes held, capacity {}, asked {asked}",
        s.block_cache_bytes,
        s.block_cache_capacity
    );
}

#[test]
fn the_cache_never_holds_more_than_its_bytes() {
    for cache in [16 << 10, 100 << 10, 1 << 20] {
        let dir = tempfile::tempdir().unwrap();
        let n = 40_000; // about 4.7 MB of blocks
        let s = store_of(dir.path(), n, cache);
        let mut x = 7u64;
        for round in 0..4 {
            for _ in 0..5_000 {
                x = filterstore::hash::mix64(x);
                let i = if round % 2 == 0 { x % n } else { x % 300 };
                assert_eq!(s.get(key(i)).unwrap().map(Vec::from), Some(value(i)));
            }
            check_bound(&s.stats(), cache, &format!("{cache} bytes, round {round}"));
            assert_eq!(s.scan::<&[u8]>(..).count() as u64, n);
            check_bound(&s.stats(), cache, &format!("{cache} bytes, after a scan"));
        }
        let st = s.stats();
        assert!(
            st.block_cache_bytes > 0,
            "{cache}: the cache holds something"
        );
        assert!(st.block_cache_hits > 0, "{cache}: and it was used");
    }
}

#[test]
fn a_second_get_reads_no_block_and_no_cache_reads_every_time() {
    let dir = tempfile::tempdir().unwrap();
    drop(store_of(dir.path(), 5_000, 0));
    for (cache, second_reads) in [(32 << 20, 0), (0, 1)] {
        let s = Store::open(dir.path(), opts(cache)).unwrap();
        for i in (0..5_000).step_by(97) {
            let before = s.stats();
            assert_eq!(s.get(key(i)).unwrap().map(Vec::from), Some(value(i)));
            let first = s.stats();
            assert_eq!(s.get(key(i)).unwrap().map(Vec::from), Some(value(i)));
            let second = s.stats();
            // Either the key's block is read from its file or it was cached by an earlier
            // key's lookup (keys 97 apart may share a block).
            assert_eq!(first.data_blocks_used() - before.data_blocks_used(), 1);
            assert_eq!(
                second.data_block_reads - first.data_block_reads,
                second_reads,
                "cache {cache}, key {i}"
            );
            assert_eq!(second.data_blocks_used() - first.data_blocks_used(), 1);
            if cache == 0 {
                assert_eq!(second.block_cache_hits + second.block_cache_misses, 0);
                assert_eq!(second.block_cache_capacity, 0);
            } else {
                assert_eq!(second.block_cache_hits - first.block_cache_hits, 1);
            }
        }
    }
}

/// The blocks that point lookups keep asking for stay cached through a scan of a store many
/// times larger than the cache (S3-FIFO's probation queue and the doorkeeper keep the scan's
/// blocks, each read once, from pushing them out).
#[test]
fn a_long_scan_leaves_the_hot_lookup_blocks_cached() {
    let dir = tempfile::tempdir().unwrap();
    let n = 80_000; // about 9.5 MB of blocks, 9 times the cache
    let cache = 1 << 20;
    let s = store_of(dir.path(), n, cache);
    // The cache starts full of a scan's blocks.
    assert_eq!(s.scan::<&[u8]>(..).count() as u64, n);
    let hot: Vec<u64> = (0..6).map(|i| i * 13_331 + 17).collect();
    let round = |s: &Store| -> (u64, u64) {
        let before = s.stats();
        for _ in 0..3 {
            for &i in &hot {
                assert_eq!(s.get(key(i)).unwrap().map(Vec::from), Some(value(i)));
            }
        }
        let after = s.stats();
        (
            after.data_block_reads - before.data_block_reads,
            after.block_cache_hits - before.block_cache_hits,
        )
    };
    // First misses are remembered, second ones admitted: the hot blocks come in.
    let (reads, _) = round(&s);
    assert!(reads <= 2 * hot.len() as u64, "{reads} reads");
    assert_eq!(round(&s), (0, 3 * hot.len() as u64), "hot blocks cached");
    for _ in 0..2 {
        let before = s.stats();
        assert_eq!(s.scan::<&[u8]>(..).count() as u64, n);
        let after = s.stats();
        let blocks: u64 = after.tables.iter().map(|t| t.data_bytes).sum::<u64>() / 4096;
        assert!(
            after.data_block_reads - before.data_block_reads + 300 > blocks,
            "the scan read its blocks from the files: {} of about {blocks}",
            after.data_block_reads - before.data_block_reads
        );
        assert_eq!(
            round(&s),
            (0, 3 * hot.len() as u64),
            "hot blocks still cached after the scan"
        );
    }
    check_bound(&s.stats(), cache, "after the scans");
}

/// A compaction reads its inputs without the cache: it neither looks blocks up nor inserts
/// them, so the hot blocks of a table it does not touch stay cached; the blocks of the
/// tables it removes leave the cache, and could never be read for the tables it writes,
/// whose file numbers are new.
#[test]
fn compaction_leaves_the_cache_alone_and_new_tables_never_see_old_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let o = || {
        opts(32 << 20)
            .compaction_trigger(Some(2))
            .l1_bytes(64 << 20)
    };
    let s = Store::open(dir.path(), o()).unwrap();
    // The hot table: keys 0..5000 (prefix "key"), compacted into one table below L0.
    for i in 0..5_000 {
        s.put(key(i), value(i)).unwrap();
    }
    s.flush().unwrap();
    s.compact().unwrap();
    let hot_table = s.stats().tables[0].number;
    let hot: Vec<u64> = (0..5_000).step_by(250).collect();
    for _ in 0..2 {
        for &i in &hot {
            assert_eq!(s.get(key(i)).unwrap().map(Vec::from), Some(value(i)));
        }
    }
    // Other keys ("zz" prefix: a disjoint range), two flushes: an L0 compaction that does
    // not overlap the hot table.
    let before = s.stats();
    for t in 0..2u64 {
        for i in 0..3_000u64 {
            let k = format!("zz{t}{i:06}").into_bytes();
            s.put(&k, value(i)).unwrap();
        }
        s.flush().unwrap();
    }
    s.wait_for_compaction().unwrap();
    let after = s.stats();
    assert!(after.compactions > before.compactions, "a compaction ran");
    assert!(
        after.tables.iter().any(|t| t.number == hot_table),
        "untouched"
    );
    assert_eq!(
        (after.block_cache_hits, after.block_cache_misses),
        (before.block_cache_hits, before.block_cache_misses),
        "the compaction did not use the cache"
    );
    assert_eq!(after.block_cache_bytes, before.block_cache_bytes);
    for &i in &hot {
        assert_eq!(s.get(key(i)).unwrap().map(Vec::from), Some(value(i)));
    }
    let again = s.stats();
    assert_eq!(again.data_block_reads, after.data_block_reads, "all hits");

    // Overwrite the hot keys and compact everything: the hot table is removed while its
    // blocks are cached; the new tables' numbers were never used, so no lookup can find
    // the old blocks under them, and every value read is the new one.
    let old: Vec<u64> = again.tables.iter().map(|t| t.number).collect();
    for &i in &hot {
        s.put(key(i), b"new").unwrap();
    }
    s.flush().unwrap();
    s.compact().unwrap();
    let st = s.stats();
    assert!(st
        .tables
        .iter()
        .all(|t| t.number > *old.iter().max().unwrap()));
    assert!(again.block_cache_bytes > 0);
    assert_eq!(
        st.block_cache_bytes, 0,
        "the removed tables' blocks left the cache"
    );
    for i in 0..5_000 {
        let want = if hot.contains(&i) {
            b"new".to_vec()
        } else {
            value(i)
        };
        assert_eq!(s.get(key(i)).unwrap().map(Vec::from), Some(want), "key {i}");
    }
}

/// Compressed tables are cached decompressed: a hit costs no decompression, and the counts
/// follow the same rules.
#[test]
fn compressed_blocks_are_cached_decompressed() {
    let dir = tempfile::tempdir().unwrap();
    let o = |cache| opts(cache).compression(Compression::Lz4);
    let s = Store::open(dir.path(), o(1 << 20)).unwrap();
    for i in 0..20_000u64 {
        s.put(key(i), [b'a' + (i % 26) as u8; 100]).unwrap();
    }
    s.flush().unwrap();
    let st = s.stats();
    assert!(st.stored_data_bytes() * 4 < st.data_bytes(), "{st:?}");
    for round in 0..2 {
        for i in (0..20_000u64).step_by(101) {
            assert_eq!(
                s.get(key(i)).unwrap().map(Vec::from),
                Some(vec![b'a' + (i % 26) as u8; 100]),
                "round {round}"
            );
        }
    }
    let st = s.stats();
    // Keys 101 apart lie in different blocks: each read once, then found in the cache.
    assert_eq!(st.block_cache_hits, st.data_block_reads, "{st:?}");
    // The cache holds the blocks as they are used: their length before compression.
    assert!(st.block_cache_bytes > st.data_block_reads * 3000, "{st:?}");
}
