//! A store whose lookups go through one global key-to-run filter (`FilterKind::Global`):
//! checked against a `BTreeMap` model while flushes, compactions (L0 → L1, deeper, trivial
//! moves), reopens and refilters interleave; a forced fingerprint collision across runs;
//! switching a store to the global filter and back without rewriting data.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::model::{self, key};
use common::{NoSyncFs, Rng, StableReaders};
use filterstore::{FilterKind, Options, Store};

fn opts(rng: &mut Rng) -> Options {
    let trigger = 2 + rng.below(3) as usize;
    Options::default()
        .filter(FilterKind::Global)
        .memtable_bytes(512 + rng.below(8192) as usize)
        .compaction_trigger(Some(trigger))
        .l0_slowdown(trigger + 1 + rng.below(3) as usize)
        .l0_stop(trigger + 4 + rng.below(3) as usize)
        .slowdown_bytes_per_sec(64 << 20)
        .table_bytes(1024 + rng.below(8192))
        .l1_bytes(4096 + rng.below(16384))
        .level_ratio(2 + rng.below(3))
        .mmap_reads(rng.below(2) == 0)
        .fs(Arc::new(NoSyncFs))
}

/// Every key of the model and some absent ones read back as the model says.
fn check_all(store: &Store, model: &BTreeMap<Vec<u8>, Vec<u8>>, space: u64) {
    for i in 0..space + 50 {
        let k = format!("k{i:05}").into_bytes();
        assert_eq!(
            store.get(&k).unwrap().map(Vec::from),
            model.get(&k).cloned(),
            "key {}",
            String::from_utf8_lossy(&k)
        );
    }
}

#[test]
fn global_store_matches_a_model_through_flushes_compactions_and_reopens() {
    for seed in 1..=6u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = Rng::new(seed);
        let o = opts(&mut rng);
        let mut store = Store::open(dir.path(), o.clone()).unwrap();
        let mut model = BTreeMap::new();
        let space = 400 + rng.below(1200);
        for step in 0..6000u32 {
            match rng.below(100) {
                0..=59 => model::put(&store, &mut model, &mut rng, space),
                60..=74 => model::delete(&store, &mut model, &mut rng, space),
                75..=94 => {
                    let k = key(&mut rng, space + 50);
                    assert_eq!(
                        store.get(&k).unwrap().map(Vec::from),
                        model.get(&k).cloned(),
                        "seed {seed}"
                    );
                }
                95 | 96 => store.flush().unwrap(),
                97 => {
                    store.flush().unwrap();
                    store.compact().unwrap();
                }
                _ => {
                    drop(store);
                    store = Store::open(dir.path(), o.clone()).unwrap();
                }
            }
            if step % 1000 == 999 {
                check_all(&store, &model, space);
            }
        }
        store.flush().unwrap();
        store.wait_for_compaction().unwrap();
        check_all(&store, &model, space);
        let checked = store.check_global_filter().unwrap();
        assert!(checked.is_some_and(|n| n > 0), "seed {seed}: {checked:?}");
        let s = store.stats();
        let g = s.global_filter.clone().expect("a global filter");
        assert!(g.probes > 0 && g.lines_touched <= 2 * g.probes, "{g:?}");
        // The tables with filters of their own (written into the deepest level) are not
        // in the global filter: it holds fewer entries than the tables hold keys.
        let own: u64 = s
            .tables
            .iter()
            .filter(|t| t.filter_bytes > 0)
            .map(|t| t.keys)
            .sum();
        let keys: u64 = s.tables.iter().map(|t| t.keys).sum();
        assert!(own > 0, "seed {seed}: no table with a filter of its own");
        assert!(
            g.entries <= keys - own,
            "seed {seed}: {g:?}, {keys} keys, {own} own"
        );
        assert!(
            s.tables.iter().any(|t| t.level > 0),
            "seed {seed}: nothing compacted"
        );
        // Reopened without naming a filter, the store keeps its recorded policy.
        drop(store);
        let store = Store::open(dir.path(), Options::default().fs(Arc::new(NoSyncFs))).unwrap();
        assert_eq!(store.recorded_policy().kind(), FilterKind::Global);
        assert!(store.stats().global_filter.is_some());
        check_all(&store, &model, space);
    }
}

/// The buckets and fingerprint of a key hash in a fixed16 table of `b` buckets
/// (format.md, "Global filter").
fn slot_of(h: u64, b: u64) -> (u64, u64) {
    let i1 = ((h as u128 * b as u128) >> 64) as u64;
    let fp = (((h & 0xffff_ffff) * 2047) >> 32) + 1;
    (i1, fp)
}

#[test]
fn a_fingerprint_collision_across_runs_still_returns_the_newest_version() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options::default()
        .filter(FilterKind::Global)
        .compaction_trigger(None);
    let store = Store::open(dir.path(), o).unwrap();
    let b = store.stats().global_filter.unwrap().buckets;
    // Two keys with the same first bucket and fingerprint: each matches the other's entry.
    let mut seen = std::collections::HashMap::new();
    let (old, new) = (0u64..)
        .find_map(|i| {
            let k = format!("m{i:08}");
            let s = slot_of(filterstore::hash::key_hash(k.as_bytes()), b);
            seen.insert(s, k.clone()).map(|other| (other, k))
        })
        .unwrap();
    // `old` in L1, then `new` in an L0 table whose range covers `old`.
    store.put(old.as_bytes(), b"old-value").unwrap();
    store.flush().unwrap();
    store.compact().unwrap();
    store.put(new.as_bytes(), b"new-value").unwrap();
    store.put(b"a", b"low").unwrap();
    store.put(b"z", b"high").unwrap();
    store.flush().unwrap();
    let before = store.stats();
    assert_eq!(
        store.get(old.as_bytes()).unwrap().map(Vec::from),
        Some(b"old-value".to_vec())
    );
    let after = store.stats();
    // The L0 table was named (a collision), read, and missed; L1 answered.
    assert_eq!(after.false_positives - before.false_positives, 1);
    assert_eq!(after.filter_positives - before.filter_positives, 2);
    // A newer version of `old` in L0 wins over L1's, collision or not.
    store.put(old.as_bytes(), b"newest").unwrap();
    store.flush().unwrap();
    assert_eq!(
        store.get(old.as_bytes()).unwrap().map(Vec::from),
        Some(b"newest".to_vec())
    );
    assert_eq!(
        store.get(new.as_bytes()).unwrap().map(Vec::from),
        Some(b"new-value".to_vec())
    );
    store.delete(old.as_bytes()).unwrap();
    store.flush().unwrap();
    assert_eq!(store.get(old.as_bytes()).unwrap(), None);
    store.compact().unwrap();
    assert_eq!(store.get(old.as_bytes()).unwrap(), None);
    assert_eq!(
        store.get(new.as_bytes()).unwrap().map(Vec::from),
        Some(b"new-value".to_vec())
    );
    assert!(store.check_global_filter().unwrap().is_some());
}

#[test]
fn refilter_switches_to_the_global_filter_and_back_without_rewriting_data() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options::default()
        .filter(FilterKind::Bloom)
        .memtable_bytes(16 << 10)
        .compaction_trigger(Some(3))
        .table_bytes(8 << 10)
        .l1_bytes(32 << 10);
    let store = Store::open(dir.path(), o).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..3000u32 {
        let (k, v) = (format!("k{:05}", (i * 7919) % 2000), format!("v{i}"));
        store.put(k.as_bytes(), v.as_bytes()).unwrap();
        model.insert(k.into_bytes(), v.into_bytes());
    }
    store.flush().unwrap();
    store.wait_for_compaction().unwrap();
    let tables = |s: &Store| -> Vec<u64> { s.stats().tables.iter().map(|t| t.number).collect() };
    let before = tables(&store);
    store.refilter(FilterKind::Global, 0.01).unwrap();
    assert_eq!(tables(&store), before, "the same table files");
    assert_eq!(store.recorded_policy().kind(), FilterKind::Global);
    let s = store.stats();
    assert!(s.global_filter.is_some());
    assert!(s.tables.iter().all(|t| t.filter_bytes == 0));
    assert!(s.tables.iter().all(|t| t.filter_kind == FilterKind::Global));
    check_all(&store, &model, 2000);
    assert!(store.check_global_filter().unwrap().is_some());
    // Writes go on under the global filter, and a reopen keeps it.
    for i in 0..500u32 {
        let k = format!("k{:05}", 2000 + i);
        store.put(k.as_bytes(), b"x").unwrap();
        model.insert(k.into_bytes(), b"x".to_vec());
    }
    store.flush().unwrap();
    drop(store);
    let store = Store::open(dir.path(), Options::default()).unwrap();
    assert!(store.stats().global_filter.is_some());
    check_all(&store, &model, 2500);
    let before = tables(&store);
    store.refilter(FilterKind::Bloom, 0.01).unwrap();
    assert_eq!(tables(&store), before);
    let s = store.stats();
    assert!(s.global_filter.is_none());
    assert!(s.tables.iter().all(|t| t.filter_bytes > 0));
    assert!(s.tables.iter().all(|t| t.filter_kind == FilterKind::Bloom));
    check_all(&store, &model, 2500);
    assert_eq!(store.check_global_filter().unwrap(), None);
}

#[test]
fn a_stale_or_damaged_checkpoint_is_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options::default()
        .filter(FilterKind::Global)
        .memtable_bytes(16 << 10)
        .compaction_trigger(Some(3))
        .table_bytes(8 << 10)
        .l1_bytes(32 << 10);
    let ckpt = dir.path().join("GLOBALFILTER");
    let mut model = BTreeMap::new();
    let mut write = |store: &Store, from: u32, to: u32| {
        for i in from..to {
            let (k, v) = (format!("k{:05}", (i * 7919) % 4000), format!("v{i}"));
            store.put(k.as_bytes(), v.as_bytes()).unwrap();
            model.insert(k.into_bytes(), v.into_bytes());
        }
        store.flush().unwrap();
        store.wait_for_compaction().unwrap();
    };
    let store = Store::open(dir.path(), o.clone()).unwrap();
    write(&store, 0, 2000);
    drop(store);
    let old = std::fs::read(&ckpt).expect("a checkpoint written at close");
    let store = Store::open(dir.path(), o.clone()).unwrap();
    write(&store, 2000, 5000);
    drop(store);
    let model = model;
    // Stale: written for other tables.
    std::fs::write(&ckpt, &old).unwrap();
    let store = Store::open(dir.path(), o.clone()).unwrap();
    check_all(&store, &model, 4000);
    assert!(store.check_global_filter().unwrap().is_some());
    drop(store);
    // Damaged: one bit flipped in the table words.
    let mut bytes = std::fs::read(&ckpt).unwrap();
    let at = bytes.len() - 9;
    bytes[at] ^= 0x10;
    std::fs::write(&ckpt, &bytes).unwrap();
    let store = Store::open(dir.path(), o.clone()).unwrap();
    check_all(&store, &model, 4000);
    assert!(store.check_global_filter().unwrap().is_some());
    drop(store);
    // Current: used as it is (and still agrees with the tables).
    let store = Store::open(dir.path(), o).unwrap();
    check_all(&store, &model, 4000);
    assert!(store.check_global_filter().unwrap().is_some());
}

#[test]
fn the_global_filter_grows_past_its_first_size_without_losing_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options::default()
        .filter(FilterKind::Global)
        .memtable_bytes(4 << 20)
        .compaction_trigger(Some(4))
        .table_bytes(2 << 20)
        .l1_bytes(8 << 20)
        .fs(Arc::new(NoSyncFs));
    let store = Store::open(dir.path(), o).unwrap();
    // A deepest level first (its table has a filter of its own): the keys below go to L0,
    // into the global filter.
    store.put(b"deep", b"x").unwrap();
    store.flush().unwrap();
    store.compact().unwrap();
    let first = store.stats().global_filter.unwrap().capacity;
    let n = first + first / 4;
    let key = |i: u64| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_be_bytes();
    for i in 0..n {
        store.put(key(i), i.to_le_bytes()).unwrap();
    }
    store.flush().unwrap();
    store.wait_for_compaction().unwrap();
    let g = store.stats().global_filter.unwrap();
    assert!(g.capacity > first, "{g:?}");
    assert!(g.entries >= n, "{g:?}");
    for i in (0..n).step_by(97) {
        assert_eq!(
            store.get(key(i)).unwrap().map(Vec::from),
            Some(i.to_le_bytes().to_vec()),
            "key {i}"
        );
    }
    assert_eq!(store.check_global_filter().unwrap(), Some(n + 1));
}

/// A filter half empty at close (grown ahead of the flushes) is saved at its size, read back
/// at that size, and grows again when the next flushes need room, losing no key.
#[test]
fn a_half_empty_filter_is_saved_at_its_size_and_grows_again_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let o = || {
        Options::default()
            .filter(FilterKind::Global)
            .memtable_bytes(4 << 20)
            .compaction_trigger(None)
            .fs(Arc::new(NoSyncFs))
    };
    let key = |i: u64| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_be_bytes();
    let store = Store::open(dir.path(), o()).unwrap();
    store.put(b"deep", b"x").unwrap();
    store.flush().unwrap();
    store.compact().unwrap();
    let first = store.stats().global_filter.unwrap().capacity;
    let n = first + first / 4;
    for i in 0..n {
        store.put(key(i), i.to_le_bytes()).unwrap();
    }
    store.flush().unwrap();
    let grown = store.stats().global_filter.unwrap();
    assert!(
        grown.entries < grown.capacity / 2 + grown.capacity / 4,
        "{grown:?}"
    );
    store.close().unwrap();

    let store = Store::open(dir.path(), o()).unwrap();
    let fitted = store.stats().global_filter.unwrap();
    assert!(fitted.from_checkpoint, "{fitted:?}");
    assert_eq!(fitted.entries, n, "{fitted:?}");
    assert!(
        fitted.capacity <= n + n / 10,
        "{fitted:?} (before close: {grown:?})"
    );
    assert!(
        fitted.memory_bytes < grown.memory_bytes,
        "{fitted:?} against {grown:?}"
    );
    let check = |store: &Store, upto: u64| {
        for i in (0..upto).step_by(61) {
            let v = store.get(key(i)).unwrap().map(Vec::from);
            assert_eq!(v, Some(i.to_le_bytes().to_vec()), "key {i}");
        }
    };
    check(&store, n);
    for i in n..2 * n {
        store.put(key(i), i.to_le_bytes()).unwrap();
    }
    store.flush().unwrap();
    let regrown = store.stats().global_filter.unwrap();
    assert!(regrown.capacity >= 2 * n, "{regrown:?}");
    check(&store, 2 * n);
    assert_eq!(store.check_global_filter().unwrap(), Some(2 * n + 1));
}

/// Lookups racing compactions and trivial moves find every key: a compaction relabels its
/// keys' entries to the output level before its tables are published, and lookups through
/// the tables as they were must still reach the sources (the move announcement,
/// `GlobalIndex::begin_move`). Readers check keys written once while a writer's new keys
/// keep L0 → L1 compactions, deeper ones and moves going.
#[test]
fn lookups_racing_compactions_find_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options::default()
        .filter(FilterKind::Global)
        .memtable_bytes(64 << 10)
        .compaction_trigger(Some(2))
        .table_bytes(32 << 10)
        .l1_bytes(128 << 10)
        .level_ratio(3)
        .fs(Arc::new(NoSyncFs));
    let store = Arc::new(Store::open(dir.path(), o).unwrap());
    let stable = |i: u64| format!("s{:08}", i.wrapping_mul(0x9e37_79b9) % 100_000_000).into_bytes();
    const STABLE: u64 = 4000;
    for i in 0..STABLE {
        store.put(stable(i), i.to_le_bytes()).unwrap();
    }
    let readers = StableReaders::spawn(&store, stable, STABLE, 100, 10_000);
    let mut rng = Rng::new(7);
    for i in 0..60_000u64 {
        let k = format!("w{:08}", rng.below(100_000_000)).into_bytes();
        store.put(&k, i.to_le_bytes()).unwrap();
    }
    store.flush().unwrap();
    store.wait_for_compaction().unwrap();
    readers.stop();
    let s = store.stats();
    assert!(s.compactions >= 5, "{} compactions", s.compactions);
    println!(
        "{} compactions, {} trivial moves",
        s.compactions, s.trivial_moves
    );
    assert!(store.check_global_filter().unwrap().is_some());
}

/// A compaction that fails at any of its I/O operations (EIO, once) leaves the global filter
/// agreeing with the tables: the entries it relabelled before a failed publish are put back
/// (`unmerge_batch`), so every key still reads as the model says through the tables as they
/// are, and `check_global_filter` finds every key under its run.
#[test]
fn a_compaction_that_fails_to_publish_puts_the_filter_back() {
    use filterstore::io::{FaultFs, EIO};
    let mut points = 0;
    for n in 0.. {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let o = Options::default()
            .filter(FilterKind::Global)
            .compaction_trigger(None)
            .fs(Arc::new(fs.clone()));
        let store = Store::open(dir.path(), o).unwrap();
        let mut model = BTreeMap::new();
        let mut rng = Rng::new(5);
        for round in 0..4u64 {
            for i in 0..300u64 {
                let k = format!("k{:05}", rng.below(600)).into_bytes();
                if i % 11 == 0 {
                    store.delete(&k).unwrap();
                    model.remove(&k);
                } else {
                    let v = (round * 1000 + i).to_le_bytes().to_vec();
                    store.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
            }
            store.flush().unwrap();
        }
        fs.fail_at(fs.ops() + n, EIO, false);
        let r = store.compact();
        if fs.fired().is_none() {
            r.unwrap();
            break;
        }
        points += 1;
        check_all(&store, &model, 600);
        assert!(
            store.check_global_filter().unwrap().is_some(),
            "fault at op {n}: {:?}",
            fs.fired()
        );
    }
    assert!(points > 3, "{points} fault points");
}

/// L0 tables keep their range filters when the global filter gives them run ids: at the
/// switch to it (a build from the tables) and at a reopen from its checkpoint.
#[test]
fn l0_tables_keep_their_range_filters_under_the_global_filter() {
    let dir = tempfile::tempdir().unwrap();
    let o = |filter| {
        Options::default()
            .filter(filter)
            .memtable_bytes(16 << 10)
            .compaction_trigger(Some(100))
            .l0_slowdown(200)
            .l0_stop(300)
            .fs(Arc::new(NoSyncFs))
    };
    let store = Store::open(dir.path(), o(Some(FilterKind::Bloom))).unwrap();
    for i in 0..3000u32 {
        let k = format!("k{:05}", (i * 7919) % 3000);
        store.put(k.as_bytes(), b"v").unwrap();
    }
    store.flush().unwrap();
    let ranged = |s: &Store| -> Vec<(u32, bool)> {
        let st = s.stats();
        st.tables
            .iter()
            .map(|t| (t.level, t.range_filter_bytes > 0))
            .collect()
    };
    let before = ranged(&store);
    assert!(
        before.len() > 2 && before.iter().all(|&(l, r)| l == 0 && r),
        "{before:?}"
    );
    store.refilter(FilterKind::Global, 0.01).unwrap();
    assert_eq!(ranged(&store), before, "after the switch");
    drop(store);
    // The store's recorded policy (global) is kept when none is asked for.
    let store = Store::open(dir.path(), o(None)).unwrap();
    assert!(store.stats().global_filter.is_some());
    assert_eq!(ranged(&store), before, "after a reopen from the checkpoint");
    // An empty scan between two keys is answered without a table read.
    let skipped = store.stats().range_skipped;
    assert_eq!(store.scan(&b"k00001a"[..]..&b"k00001b"[..]).count(), 0);
    assert!(store.stats().range_skipped > skipped);
    // New range filters for the L0 tables keep them under their runs: every key is found.
    assert_eq!(store.refilter_ranges(12.0).unwrap(), before.len());
    let missing = (0..3000u32)
        .filter(|i| store.get(format!("k{i:05}")).unwrap().is_none())
        .count();
    assert_eq!(missing, 0, "keys lost after refilter_ranges");
    store.check_global_filter().unwrap();
}

/// The global filter grows several times in the background (a larger one built from the
/// tables off the locks, the changes made meanwhile replayed, then swapped in) while a
/// writer's puts and deletes keep flushes, compactions and moves going and readers look up
/// keys written before: every key reads as a `BTreeMap` model says, the readers never miss
/// one, and the filter agrees with the tables at the end.
#[test]
fn the_filter_grows_in_the_background_while_writes_flushes_and_compactions_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options::default()
        .filter(FilterKind::Global)
        .memtable_bytes(1 << 20)
        .compaction_trigger(Some(4))
        .table_bytes(1 << 20)
        .l1_bytes(4 << 20)
        .level_ratio(4)
        .fs(Arc::new(NoSyncFs));
    let store = Arc::new(Store::open(dir.path(), o).unwrap());
    // A deepest level first (its table has a filter of its own): the writes below go to
    // L0, into the global filter, until compactions carry them down.
    store.put(b"deep", b"x").unwrap();
    store.flush().unwrap();
    store.compact().unwrap();
    let first = store.stats().global_filter.unwrap().capacity;
    let stable =
        |i: u64| format!("s{:09}", i.wrapping_mul(0x9e37_79b9) % 1_000_000_000).into_bytes();
    const STABLE: u64 = 50_000;
    for i in 0..STABLE {
        store.put(stable(i), i.to_le_bytes()).unwrap();
    }
    let readers = StableReaders::spawn(&store, stable, STABLE, 200, 0);
    let mut model = BTreeMap::new();
    let mut rng = Rng::new(11);
    let w = |i: u64| format!("w{i:09}").into_bytes();
    // 12 times the first capacity in writes, several L0 tables' worth: the filter grows at
    // least twice.
    let n = first * 12;
    // The largest capacity seen while writing: once compactions move the keys into the two
    // deepest levels (filters of their own), the global filter shrinks again, so its
    // capacity at the end depends on how far they got.
    let mut peak = first;
    for i in 0..n {
        let k = w(rng.below(n * 2));
        if i % 7 == 0 {
            store.delete(&k).unwrap();
            model.remove(&k);
        } else {
            store.put(&k, i.to_le_bytes()).unwrap();
            model.insert(k, i.to_le_bytes().to_vec());
        }
        if i % 1000 == 0 {
            peak = peak.max(store.stats().global_filter.unwrap().capacity);
        }
    }
    store.flush().unwrap();
    store.wait_for_compaction().unwrap();
    readers.stop();
    let g = store.stats().global_filter.unwrap();
    let peak = peak.max(g.capacity);
    println!(
        "{} growths, capacity {} -> {} at most, {} at the end",
        g.growths, first, peak, g.capacity
    );
    assert!(g.growths >= 2, "{g:?}");
    assert!(peak >= first * 4, "peak {peak}: {g:?}");
    assert!(g.entries <= g.capacity, "{g:?}");
    assert!(store.check_global_filter().unwrap().is_some());
    let mut rng = Rng::new(11);
    for _ in 0..n {
        let k = w(rng.below(n * 2));
        assert_eq!(
            store.get(&k).unwrap().map(Vec::from),
            model.get(&k).cloned(),
            "{k:?}"
        );
    }
    drop(store);
}

/// Each `get`, `Reader::get` and `multi_get` key that reaches the tables asks the global
/// filter once and is counted once: an absent key the filter rules out as a negative (no
/// table read), a present key as a run read, and every probe reads one or two lines of the
/// filter (two, but for the rare pair in one line).
#[test]
fn every_lookup_probes_the_global_filter_once_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options::default()
        .filter(FilterKind::Global)
        .fs(Arc::new(NoSyncFs));
    let store = Store::open(dir.path(), o).unwrap();
    let n = 2_000u64;
    // A deepest level first, whose table has a filter of its own and a key range apart
    // (no lookup below asks it): the L0 table flushed after it is in the global filter.
    for i in 0..n {
        store.put(format!("a{i:05}").as_bytes(), b"x").unwrap();
    }
    store.flush().unwrap();
    store.compact().unwrap();
    for i in 0..n {
        store
            .put(format!("k{i:05}").as_bytes(), i.to_le_bytes())
            .unwrap();
    }
    store.flush().unwrap();
    let v = store.stats();
    assert!(
        v.tables.iter().any(|t| t.level == 0 && t.filter_bytes == 0),
        "{:?}",
        v.tables
    );
    let before = store.stats();
    let reader = store.reader();
    let mut negatives = 0;
    for i in 0..n {
        // An absent key inside the table's key range: only the filter rules it out.
        let (present, absent) = (format!("k{i:05}"), format!("k{i:05}x"));
        let want = Some(i.to_le_bytes().to_vec());
        let got = match i % 4 {
            0 => [store.get(present.as_bytes()), store.get(absent.as_bytes())],
            1 => [
                reader.get(present.as_bytes()),
                reader.get(absent.as_bytes()),
            ],
            2 => {
                let v = store.multi_get(&[present, absent]).unwrap();
                [Ok(v[0].clone()), Ok(v[1].clone())]
            }
            _ => {
                let v = reader.multi_get(&[present, absent]).unwrap();
                [Ok(v[0].clone()), Ok(v[1].clone())]
            }
        };
        let [p, a] = got.map(Result::unwrap);
        assert_eq!(p.map(Vec::from), want, "key {i}");
        assert_eq!(a, None, "absent key {i}");
    }
    let s = store.stats();
    let (g0, g) = (
        before.global_filter.clone().unwrap(),
        s.global_filter.clone().unwrap(),
    );
    let probes = g.probes - g0.probes;
    assert_eq!(s.lookups - before.lookups, 2 * n);
    assert_eq!(probes, 2 * n, "{g:?}");
    negatives += s.filter_negatives - before.filter_negatives;
    // Absent keys are ruled out but for the filter's false positives (0.4 % per probe).
    assert!(negatives > n * 95 / 100 && negatives <= n, "{negatives}");
    let lines = g.lines_touched - g0.lines_touched;
    assert!(
        lines > probes * 3 / 2 && lines <= 2 * probes,
        "{lines} {probes}"
    );
    // Present keys read their one table; absent ones only on a false positive.
    let fp = s.false_positives - before.false_positives;
    assert_eq!(fp, n - negatives);
    assert_eq!(s.filter_positives - before.filter_positives, n + fp);

    // Whole batches (their keys' buckets are prefetched ahead of their probes), through
    // the store and a reader: the same answers and one probe per key.
    let keys: Vec<String> = (0..n)
        .map(|i| format!("k{:05}{}", i, if i % 2 == 0 { "" } else { "x" }))
        .collect();
    let want: Vec<Option<Vec<u8>>> = (0..n)
        .map(|i| (i % 2 == 0).then(|| i.to_le_bytes().to_vec()))
        .collect();
    for batch in [1, 7, 8, 9, 100, n as usize] {
        for via_reader in [false, true] {
            let p0 = store.stats().global_filter.unwrap().probes;
            for (ks, ws) in keys.chunks(batch).zip(want.chunks(batch)) {
                let got = if via_reader {
                    reader.multi_get(ks)
                } else {
                    store.multi_get(ks)
                };
                assert_eq!(
                    got.unwrap()
                        .into_iter()
                        .map(|v| v.map(Vec::from))
                        .collect::<Vec<_>>(),
                    ws,
                    "batch {batch}, reader {via_reader}"
                );
            }
            let p = store.stats().global_filter.unwrap().probes - p0;
            assert_eq!(p, n, "batch {batch}, reader {via_reader}");
        }
    }
}

/// `check_filters` finds every key of every table through the filter a lookup asks, under
/// every filter kind: the global filter for the upper tables (L0 under their run ids, the
/// middle levels under theirs), own filters for the deepest levels, range filters for all.
#[test]
fn check_filters_finds_every_key_under_every_filter_kind() {
    for kind in FilterKind::ALL.into_iter().chain([FilterKind::Global]) {
        let dir = tempfile::tempdir().unwrap();
        let o = Options::default()
            .filter(kind)
            .memtable_bytes(4096)
            .compaction_trigger(Some(4))
            .table_bytes(4096)
            .l1_bytes(8192)
            .level_ratio(2)
            .fs(Arc::new(NoSyncFs));
        let store = Store::open(dir.path(), o).unwrap();
        for i in 0..6000u64 {
            let k = format!("k{:05}", (i * 7919) % 5000);
            if i % 11 == 0 {
                store.delete(&k).unwrap();
            } else {
                store.put(&k, i.to_le_bytes()).unwrap();
            }
        }
        store.flush().unwrap();
        store.wait_for_compaction().unwrap();
        store.build_deferred_range_filters().unwrap();
        let st = store.stats();
        let entries: u64 = st.tables.iter().map(|t| t.keys).sum();
        let c = store.check_filters().unwrap();
        assert_eq!(c.tables, st.tables.len() as u64, "{kind:?}: {c:?}");
        assert_eq!(c.keys, entries, "{kind:?}: {c:?}");
        let ranged = st
            .tables
            .iter()
            .filter(|t| t.range_filter_bytes > 0)
            .count() as u64;
        assert_eq!(c.range_filter_tables, ranged, "{kind:?}: {c:?}");
        assert!(kind == FilterKind::None || ranged > 0, "{kind:?}: {c:?}");
        match kind {
            FilterKind::Global => {
                assert!(c.global_tables > 0 && c.own_filter_tables > 0, "{c:?}")
            }
            FilterKind::None => assert_eq!(c.unfiltered_tables, c.tables, "{c:?}"),
            _ => assert_eq!(c.own_filter_tables, c.tables, "{kind:?}: {c:?}"),
        }
    }
}
