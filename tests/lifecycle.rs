//! The data's life, counted: tables wholly under a newer range tombstone leave the table set
//! without being read (`Stats::lifecycle.tables_dropped_whole`, the compactions' bytes read,
//! the files left), under the global filter too (their keys leave it by their key hashes
//! files); expiry's and range deletion's counters (`Stats::lifecycle`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::NoSyncFs;
use filterstore::expiry::ManualClock;
use filterstore::{FilterKind, Options, Store};

fn key(i: u32) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

fn opts(kind: FilterKind) -> Options {
    Options::default()
        .filter(Some(kind))
        .compaction_trigger(None)
        .table_bytes(16 << 10)
        .fs(Arc::new(NoSyncFs))
}

/// 4,000 keys of 100-byte values in one sorted level of about 25 tables.
fn loaded(dir: &std::path::Path, o: Options) -> Store {
    let s = Store::open(dir, o).unwrap();
    // Two overlapping flushed tables, so that `compact` merges (and cuts) them.
    for odd in [0, 1] {
        for i in (odd..4000).step_by(2) {
            s.put(key(i), [i as u8; 100]).unwrap();
        }
        s.flush().unwrap();
    }
    s.compact().unwrap();
    assert!(
        s.stats().tables.len() > 20,
        "{} tables",
        s.stats().tables.len()
    );
    s
}

fn table_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            n.to_string_lossy().ends_with(".sst")
        })
        .count()
}

fn check(s: &Store, gone: std::ops::Range<u32>) {
    for i in (0..4000)
        .step_by(7)
        .chain([gone.start, gone.end - 1, gone.end])
    {
        let want = (!gone.contains(&i)).then(|| vec![i as u8; 100]);
        assert_eq!(s.get(key(i)).unwrap().map(Vec::from), want, "key {i}");
    }
    let n = s.scan::<&[u8]>(..).count();
    assert_eq!(n, 4000 - gone.len());
    let back = s.scan::<&[u8]>(..).rev().count();
    assert_eq!(back, n);
}

/// `compact_range` over a deleted range drops the tables inside it through one edit: it
/// reads (and rewrites) only the tables at the range's edges, and the dropped tables' files
/// are gone.
#[test]
fn compact_range_drops_tables_under_a_newer_tombstone_unread() {
    for kind in [FilterKind::BlockedBloom, FilterKind::Global] {
        drops_unread(kind);
    }
}

fn drops_unread(kind: FilterKind) {
    let dir = tempfile::tempdir().unwrap();
    let s = loaded(dir.path(), opts(kind));
    let gone = 1000..3000;
    let (a, b) = (key(gone.start), key(gone.end));
    let before = s.stats();
    let inside: Vec<_> = before
        .tables
        .iter()
        .filter(|t| t.min_key >= a && t.max_key < b)
        .collect();
    let edges: u64 = before
        .tables
        .iter()
        .filter(|t| t.min_key < b && t.max_key >= a && !(t.min_key >= a && t.max_key < b))
        .map(|t| t.file_bytes)
        .sum();
    assert!(inside.len() > 10, "{} tables inside", inside.len());
    s.delete_range(&a, &b).unwrap();
    assert_eq!(s.stats().lifecycle.range_tombstones_live, 1);
    let files = table_files(dir.path());
    s.compact_range(&a, &b).unwrap();
    let after = s.stats();
    assert_eq!(
        after.lifecycle.tables_dropped_whole,
        inside.len() as u64,
        "every table inside the range is dropped whole"
    );
    // Read: the edge tables and the flushed table holding the tombstone, nothing inside.
    let read = after.compaction_bytes_read - before.compaction_bytes_read;
    let flushed = after.flush_bytes_written - before.flush_bytes_written;
    assert!(
        read <= edges + flushed,
        "compactions read {read} bytes; the edges hold {edges}, the flush wrote {flushed}"
    );
    assert!(table_files(dir.path()) <= files + 2 - inside.len());
    assert_eq!(
        after.lifecycle.range_tombstones_live, 0,
        "gone at the bottom"
    );
    check(&s, gone.clone());
    check_global(&s, kind);
    drop(s);
    let s = Store::open(dir.path(), opts(kind)).unwrap();
    check(&s, gone);
    check_global(&s, kind);
}

/// Under the global filter: it holds exactly the live tables' entries (the dropped tables'
/// left with them), every one under its run, and no table's keys were read from its data
/// blocks (they all have key hashes files).
fn check_global(s: &Store, kind: FilterKind) {
    let st = s.stats();
    let Some(g) = st.global_filter.as_ref() else {
        assert_ne!(kind, FilterKind::Global);
        return;
    };
    let live: u64 = st.tables.iter().map(|t| t.keys).sum();
    // Tables with filters of their own (the deepest level's) are not in it.
    let covered: u64 = st
        .tables
        .iter()
        .filter(|t| t.filter_kind == FilterKind::Global)
        .map(|t| t.keys)
        .sum();
    assert_eq!(
        g.entries, covered,
        "the filter's entries are the live tables'"
    );
    assert_eq!(s.check_global_filter().unwrap(), Some(live));
    assert_eq!(g.key_blocks_read, 0, "{g:?}");
}

/// The compaction thread drops them too, after the flush that brings the tombstone into a
/// table; a table newer than the tombstone is never dropped.
#[test]
fn background_compaction_drops_covered_tables_and_keeps_newer_ones() {
    for kind in [FilterKind::BlockedBloom, FilterKind::Global] {
        background_drops(kind);
    }
}

fn background_drops(kind: FilterKind) {
    let dir = tempfile::tempdir().unwrap();
    let s = loaded(dir.path(), opts(kind));
    drop(s);
    let s = Store::open(dir.path(), opts(kind).compaction_trigger(Some(8))).unwrap();
    s.delete_range(key(500), key(3500)).unwrap();
    s.flush().unwrap();
    s.wait_for_compaction().unwrap();
    let dropped = s.stats().lifecycle.tables_dropped_whole;
    assert!(dropped > 15, "{dropped} dropped");
    // Keys written after the tombstone, in a table of their own, stay.
    for i in 1000..1010 {
        s.put(key(i), [i as u8; 100]).unwrap();
    }
    s.flush().unwrap();
    s.wait_for_compaction().unwrap();
    assert_eq!(s.stats().lifecycle.tables_dropped_whole, dropped);
    for i in [499, 500, 999, 1000, 1009, 1010, 3499, 3500] {
        let want = (i < 500 || (1000..1010).contains(&i) || i >= 3500).then(|| vec![i as u8; 100]);
        assert_eq!(s.get(key(i)).unwrap().map(Vec::from), want, "key {i}");
    }
    assert_eq!(s.scan::<&[u8]>(..).count(), 1000 + 10);
    check_global(&s, kind);
}

/// Expired entries a compaction removes are counted with their bytes: at the bottom, key and
/// value.
#[test]
fn expiry_counters_count_what_compaction_removed() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000_000);
    let o = opts(FilterKind::BlockedBloom).clock(Arc::new(clock.clone()));
    let s = Store::open(dir.path(), o).unwrap();
    for i in 0..300 {
        let ttl = Duration::from_secs(if i % 3 == 0 { 10 } else { 1000 });
        s.put_with_ttl(key(i), [1u8; 50], ttl).unwrap();
    }
    s.flush().unwrap();
    s.compact().unwrap();
    assert_eq!(s.stats().lifecycle.entries_expired, 0);
    clock.advance(Duration::from_secs(11));
    s.compact().unwrap();
    let l = s.stats().lifecycle;
    assert_eq!(l.entries_expired, 100);
    assert_eq!(l.bytes_reclaimed_by_expiry, 100 * (7 + 50));
    assert_eq!(s.scan::<&[u8]>(..).count(), 200);
    assert_eq!(l.tables_dropped_whole, 0);
    s.delete_prefix(b"k0001").unwrap();
    s.delete_range(key(250), key(260)).unwrap();
    assert_eq!(s.stats().lifecycle.range_tombstones_live, 2);
    s.flush().unwrap();
    assert_eq!(s.stats().lifecycle.range_tombstones_live, 2);
}
