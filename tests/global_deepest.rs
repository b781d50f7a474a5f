//! The global filter over the upper runs only: the tables written into the deepest level
//! carry filters of their own and stay out of the global filter, so its size follows the
//! upper runs while the store grows (`docs/global-filter.md`, "The deepest level").
//! Counted, not timed: filter bytes over live keys, data blocks read by absent lookups,
//! entries against the tables without filters of their own, across a new deepest level
//! and a reopen, against a `BTreeMap` model.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::NoSyncFs;
use filterstore::{FilterKind, Options, Store};

fn opts() -> Options {
    Options::default()
        .filter(FilterKind::Global)
        .memtable_bytes(256 << 10)
        .compaction_trigger(Some(4))
        .table_bytes(128 << 10)
        .l1_bytes(128 << 10)
        .level_ratio(10)
        .fs(Arc::new(NoSyncFs))
}

fn key(i: u64) -> Vec<u8> {
    format!(
        "k{:012}",
        i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % 1_000_000_000_000
    )
    .into_bytes()
}

fn absent(i: u64) -> Vec<u8> {
    let mut k = key(i);
    k.push(b'x');
    k
}

/// Deepest level, tables, entries: what the checks below need.
struct Shape {
    deepest: u32,
    keys: u64,
    own_keys: u64,
    entries: u64,
    bits: f64,
}

/// The store's shape, and the invariant the design rests on: the global filter holds one
/// entry per key of each table without a filter of its own, none of the others', and every
/// table of the deepest level that a compaction wrote there has one.
fn shape(store: &Store) -> Shape {
    let s = store.stats();
    let g = s.global_filter.clone().expect("a global filter");
    let deepest = s.tables.iter().map(|t| t.level).max().unwrap_or(0);
    let keys: u64 = s.tables.iter().map(|t| t.keys).sum();
    let own_keys: u64 = s
        .tables
        .iter()
        .filter(|t| t.filter_kind != FilterKind::Global)
        .map(|t| t.keys)
        .sum();
    assert_eq!(g.entries, keys - own_keys, "{g:?}");
    let own_bytes: u64 = s.tables.iter().map(|t| t.filter_bytes).sum();
    println!(
        "global: {} bytes for {} entries (capacity {}); own filters: {own_bytes} bytes for {own_keys} keys",
        g.memory_bytes, g.entries, g.capacity
    );
    assert_eq!(store.check_global_filter().unwrap(), Some(keys));
    Shape {
        deepest,
        keys,
        own_keys,
        entries: g.entries,
        bits: s.filter_bits_per_key(),
    }
}

/// Absent lookups (keys inside the tables' ranges) read no data block but for the filters'
/// false positives; present ones all answer.
fn lookups_read_what_they_should(store: &Store, model: &BTreeMap<Vec<u8>, Vec<u8>>, n: u64) {
    let before = store.stats();
    let tries = 20_000u64;
    for i in 0..tries {
        assert_eq!(store.get(absent(i * 7 % n)).unwrap(), None);
    }
    let s = store.stats();
    let reads = s.data_block_reads - before.data_block_reads;
    // About 1 % per filter asked (the global one and the deepest table's); 5 % fails.
    assert!(
        reads * 20 < tries,
        "{reads} data blocks read by {tries} absent gets"
    );
    for (k, v) in model.iter().step_by(37) {
        assert_eq!(store.get(k).unwrap().as_deref(), Some(v.as_slice()));
    }
}

#[test]
fn the_deepest_level_keeps_filters_of_its_own_and_bits_per_key_stay_low() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts()).unwrap();
    let mut model = BTreeMap::new();
    // About 29 MB of keys and values: L1, L2 and L3 fill (0.125, 1.25, 12.5 MB), then L4
    // appears.
    let n = 250_000u64;
    let mut deepest_seen = Vec::new();
    for i in 0..n {
        let v = i.to_le_bytes().repeat(12);
        store.put(key(i), &v).unwrap();
        model.insert(key(i), v);
        if i % 50_000 == 49_999 {
            store.flush().unwrap();
            store.wait_for_compaction().unwrap();
            let sh = shape(&store);
            deepest_seen.push(sh.deepest);
            println!(
                "{} keys: deepest L{}, {} keys in tables, {} with filters of their own, {} in the global filter, {:.2} bits per key",
                i + 1,
                sh.deepest,
                sh.keys,
                sh.own_keys,
                sh.entries,
                sh.bits
            );
        }
    }
    // The tree grew a new deepest level during the load.
    assert!(
        deepest_seen.first() < deepest_seen.last(),
        "{deepest_seen:?}"
    );
    let sh = shape(&store);
    assert!(sh.deepest >= 2, "L{}", sh.deepest);
    // Most keys are in the deepest level, behind filters of their own.
    assert!(
        sh.own_keys * 10 > sh.keys * 7,
        "{} of {}",
        sh.own_keys,
        sh.keys
    );
    // Under 16.75, the floor of a global filter over every key (16-bit slots at load
    // 0.955), which the filter over every run could never reach; not the 12 aimed for (the
    // blocked-Bloom filters at ε = 1 % take 10.6 bits per key, and the global filter is
    // sized for its peak of upper-run keys: see `docs/global-filter.md`).
    assert!(sh.bits <= 16.0, "{:.2} bits per key", sh.bits);
    lookups_read_what_they_should(&store, &model, n);
    // Overwrites and deletes of a fifth of the keys, then a reopen: the same holds.
    for i in (0..n).step_by(5) {
        if i % 10 == 0 {
            store.delete(key(i)).unwrap();
            model.remove(&key(i));
        } else {
            let v = b"again".to_vec();
            store.put(key(i), &v).unwrap();
            model.insert(key(i), v);
        }
    }
    store.flush().unwrap();
    store.wait_for_compaction().unwrap();
    drop(store);
    let store = Store::open(dir.path(), opts()).unwrap();
    let sh = shape(&store);
    assert!(sh.bits <= 16.0, "{:.2} bits per key after reopen", sh.bits);
    lookups_read_what_they_should(&store, &model, n);
    for i in (0..n).step_by(10) {
        assert_eq!(
            store.get(key(i)).unwrap().map(Vec::from),
            model.get(&key(i)).cloned()
        );
    }
}
