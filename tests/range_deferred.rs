//! Deferred range filters (`Options::deferred_range_filters`): once the tree has a level
//! below L1, new tables are written without a range filter, the compaction thread builds
//! them once writes pause (each published in a manifest swap, so a reopen finds them), empty
//! scans then read no block, and a power cut at any sync point of a deferred build leaves a
//! store that opens with every key and only complete range filters (`verify_dir`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use filterstore::hash::mix64;
use filterstore::io::{FaultFs, NoSyncFs};
use filterstore::{Options, Stats, Store};

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix64(i).to_be_bytes());
    k[8..].copy_from_slice(&(mix64(!i) & !1).to_be_bytes());
    k
}

/// Small tables and levels so that a few thousand keys fill three levels.
fn small(deferred: Option<Duration>) -> Options {
    Options::default()
        .memtable_bytes(16 << 10)
        .table_bytes(8 << 10)
        .l1_bytes(8 << 10)
        .level_ratio(4)
        .idle_drain(None)
        .deferred_range_filters(deferred)
}

fn load(store: &Store, n: u64) {
    load_from(store, 0, n);
}

/// Puts keys `from .. from + n`, then flushes and waits for the compactions.
fn load_from(store: &Store, from: u64, n: u64) {
    for i in from..from + n {
        store.put(key(i), [7u8; 40]).unwrap();
    }
    store.flush().unwrap();
    store.wait_for_compaction().unwrap();
}

/// (level, has a range filter) per table.
fn ranged(s: &Stats) -> Vec<(u32, bool)> {
    s.tables
        .iter()
        .map(|t| (t.level, t.range_filter_bytes > 0))
        .collect()
}

fn deepest(s: &Stats) -> u32 {
    s.tables.iter().map(|t| t.level).max().unwrap_or(0)
}

#[test]
fn intermediate_outputs_wait_for_a_pause_then_get_their_range_filters() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small(Some(Duration::from_secs(3600))).fs(Arc::new(NoSyncFs));
    let store = Store::open(dir.path(), opts).unwrap();
    load(&store, 6000);
    let s = store.stats();
    let d = deepest(&s);
    assert!(d >= 2, "levels {:?}", ranged(&s));
    let lacking: Vec<u32> = ranged(&s)
        .into_iter()
        .filter(|r| !r.1)
        .map(|r| r.0)
        .collect();
    assert!(
        !lacking.is_empty(),
        "no table was deferred: {:?}",
        ranged(&s)
    );
    // Built when written, each seal and each compaction's outputs would count at least
    // flushes + compactions builds; once L2 exists, none is built when written.
    assert!(
        s.range_build.built < s.flushes + s.compactions,
        "{} built, {} seals, {} compactions",
        s.range_build.built,
        s.flushes,
        s.compactions
    );
    let before = s.range_build.built;
    assert_eq!(
        filterstore::verify::verify_dir(dir.path())
            .unwrap()
            .tables_without_range_filter,
        lacking.len() as u64
    );
    assert_eq!(store.build_deferred_range_filters().unwrap(), lacking.len());
    let s = store.stats();
    assert!(ranged(&s).iter().all(|r| r.1), "{:?}", ranged(&s));
    assert_eq!(s.range_build.built, before + lacking.len() as u64);
    drop(store);
    // Recorded: a reopen finds them, and an empty scan reads no block.
    let store = Store::open(dir.path(), small(None)).unwrap();
    assert!(ranged(&store.stats()).iter().all(|r| r.1));
    let reads = store.stats().data_block_reads;
    for i in 0..200u64 {
        let mut lo = key(i);
        lo[15] |= 1; // absent keys, between present ones
        assert_eq!(store.scan(lo.as_slice()..=lo.as_slice()).count(), 0);
    }
    let wasted = store.stats().data_block_reads - reads;
    assert!(wasted <= 2, "{wasted} block reads for 200 empty scans");
}

#[test]
fn the_compaction_thread_builds_them_once_writes_pause() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small(Some(Duration::from_millis(50))).fs(Arc::new(NoSyncFs));
    let store = Store::open(dir.path(), opts).unwrap();
    load(&store, 6000);
    let start = Instant::now();
    while ranged(&store.stats()).iter().any(|r| !r.1) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "still lacking: {:?}",
            ranged(&store.stats())
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A store whose data sits in L0 (compactions off) builds them at the seal.
    let dir = tempfile::tempdir().unwrap();
    let opts = small(Some(Duration::from_secs(3600))).compaction_trigger(None);
    let store = Store::open(dir.path(), opts.fs(Arc::new(NoSyncFs))).unwrap();
    load(&store, 3000);
    let s = store.stats();
    assert!(
        s.tables.len() > 3 && ranged(&s).iter().all(|r| r.1),
        "{:?}",
        ranged(&s)
    );
    // Without deferral, every compaction output gets one when written.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small(None).fs(Arc::new(NoSyncFs))).unwrap();
    load(&store, 6000);
    let s = store.stats();
    assert!(deepest(&s) >= 2);
    assert!(ranged(&s).iter().all(|r| r.1), "{:?}", ranged(&s));
    assert!(
        s.range_build.built > s.flushes,
        "compaction outputs got theirs"
    );
}

#[test]
fn a_deferred_build_survives_power_cuts_at_every_sync_point() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cut = 0u64;
    loop {
        let fs = FaultFs::new();
        let live = tmp.path().join(format!("live{cut}"));
        let opts = || small(Some(Duration::from_secs(3600))).fs(Arc::new(fs.clone()));
        let store = Store::open(&live, opts()).unwrap();
        // Until some table waits for its range filter: which ones do depends on when the
        // compactions ran (a busy machine's load can end with every table written before the
        // tree had a level below L1).
        let mut n = 0;
        let lacking = loop {
            load_from(&store, n, 2500);
            n += 2500;
            let lacking = ranged(&store.stats()).iter().filter(|r| !r.1).count();
            if lacking > 0 || n >= 20_000 {
                break lacking;
            }
        };
        assert!(lacking > 0, "every table of {n} keys has its range filter");
        fs.cut_power_at_sync(fs.syncs() + cut);
        let built = store.build_deferred_range_filters();
        let reached = fs.fired().is_some();
        assert_eq!(built.is_err(), reached, "cut {cut}");
        drop(store);
        let img = tmp.path().join(format!("image{cut}"));
        std::fs::create_dir_all(&img).unwrap();
        fs.crash_image(&img, usize::MAX).unwrap();
        let report = filterstore::verify::verify_dir(&img).unwrap();
        assert!(report.is_intact(), "cut {cut}: {:?}", report.problems);
        assert!(report.tables_without_range_filter as usize <= lacking);
        let s = Store::open(&img, small(None)).unwrap();
        assert_eq!(s.scan::<&[u8]>(..).count() as u64, n, "cut {cut}");
        if !reached {
            break;
        }
        cut += 1;
    }
    assert!(cut >= 2, "only {cut} sync points");
}

/// Under the global filter too: tables wait for their range filters, get them once built,
/// and every key is still found (an L0 table rebuilt for its range filter keeps its run in
/// the global filter), before and after a reopen from the filter's checkpoint.
#[test]
fn deferred_range_filters_under_the_global_filter_lose_no_key() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || {
        small(Some(Duration::from_secs(3600)))
            .filter(filterstore::FilterKind::Global)
            .fs(Arc::new(NoSyncFs))
    };
    let store = Store::open(dir.path(), opts()).unwrap();
    let mut n = 0;
    while n < 20_000 {
        load_from(&store, n, 2500);
        n += 2500;
        if ranged(&store.stats()).iter().any(|r| !r.1) {
            break;
        }
    }
    // Then L0 tables, written without one (the tree is deep) and left in L0 (compactions
    // held back): a build must keep each under its run in the global filter.
    drop(store);
    let store = Store::open(dir.path(), opts().compaction_trigger(Some(100))).unwrap();
    load_from(&store, n, 1000);
    n += 1000;
    let l0_lacking = ranged(&store.stats())
        .iter()
        .filter(|r| r.0 == 0 && !r.1)
        .count();
    assert!(l0_lacking > 0, "{:?}", ranged(&store.stats()));
    let lacking = ranged(&store.stats()).iter().filter(|r| !r.1).count();
    assert!(store.build_deferred_range_filters().unwrap() >= lacking);
    assert!(ranged(&store.stats()).iter().all(|r| r.1));
    let found = |s: &Store| (0..n).filter(|&i| s.get(key(i)).unwrap().is_some()).count() as u64;
    assert_eq!(found(&store), n);
    store.check_global_filter().unwrap();
    drop(store);
    let store = Store::open(dir.path(), opts()).unwrap();
    assert!(store.stats().global_filter.is_some());
    assert_eq!(found(&store), n);
    assert!(ranged(&store.stats()).iter().all(|r| r.1));
}
