//! `Store::pinned_reader`: a reader fixed to the tables of the moment it was made. Checked
//! against a `BTreeMap` model taken at the same moment, across later writes, flushes and
//! compactions, and its lookups counted as `get`'s are.

use std::collections::BTreeMap;

use filterstore::{FilterKind, Options, Store};

fn key(i: u64) -> Vec<u8> {
    format!("key{:06}", filterstore::hash::mix64(i) % 5000).into_bytes()
}

fn opts(filter: FilterKind) -> Options {
    Options::default()
        .filter(filter)
        .fpr(0.01)
        .compaction_trigger(None)
}

/// Random puts and deletes over several flushes (so several tables, some keys in more than
/// one) and a memtable still holding writes: the pinned reader answers as the model did
/// when it was made, whatever is written, flushed or compacted afterwards.
#[test]
fn a_pinned_reader_sees_the_store_as_it_was_made() {
    for filter in [FilterKind::BlockedBloom, FilterKind::None] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), opts(filter)).unwrap();
        let mut model = BTreeMap::new();
        let mut x = 7u64;
        let mut step = |store: &Store, model: &mut BTreeMap<Vec<u8>, Vec<u8>>| {
            x = filterstore::hash::mix64(x);
            let k = key(x);
            if x.is_multiple_of(5) {
                store.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = x.to_le_bytes().to_vec();
                store.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        };
        for round in 0..4 {
            for _ in 0..1500 {
                step(&store, &mut model);
            }
            if round < 3 {
                store.flush().unwrap();
            }
        }
        let pinned = store.pinned_reader().unwrap();
        let snapshot = model.clone();
        for _ in 0..3000 {
            step(&store, &mut model);
        }
        store.flush().unwrap();
        store.compact().unwrap();
        for i in 0..6000 {
            let k = format!("key{i:06}").into_bytes();
            assert_eq!(
                pinned.get(&k).unwrap().map(Vec::from),
                snapshot.get(&k).cloned(),
                "{filter}"
            );
            assert_eq!(
                store.get(&k).unwrap().map(Vec::from),
                model.get(&k).cloned(),
                "{filter}"
            );
        }
        assert_ne!(snapshot, model, "the later writes changed something");
    }
}

/// A store of one table (a dictionary after its flush): the reader asks that table
/// directly, and counts what `get` counts: one lookup each, a filter answer per lookup in
/// the table's range, a block for every "maybe", a false positive for every "maybe" that
/// misses.
#[test]
fn one_table_lookups_are_counted_as_gets() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts(FilterKind::BlockedBloom)).unwrap();
    for i in 0..2000u64 {
        store.put(format!("m{i:05}").as_bytes(), b"value").unwrap();
    }
    store.flush().unwrap(); // one table
    let pinned = store.pinned_reader().unwrap();
    assert_eq!(store.stats().tables.len(), 1);
    let count = |store: &Store, get: &dyn Fn(&[u8]) -> Option<Vec<u8>>| {
        let before = store.stats();
        let mut found = 0u64;
        for i in 0..4000u64 {
            // Present keys, absent keys inside the range, and keys outside it.
            let k = match i % 4 {
                0 => format!("m{:05}", i / 2),
                1 => format!("m{:05}x", i / 2),
                2 => format!("a{i}"),
                _ => format!("z{i}"),
            };
            found += get(k.as_bytes()).is_some() as u64;
        }
        let after = store.stats();
        (
            found,
            after.lookups - before.lookups,
            after.filter_negatives - before.filter_negatives,
            after.false_positives - before.false_positives,
            after.data_blocks_used() - before.data_blocks_used(),
        )
    };
    let by_pin = count(&store, &|k| pinned.get(k).unwrap().map(Vec::from));
    let by_get = count(&store, &|k| store.get(k).unwrap().map(Vec::from));
    assert_eq!(by_pin, by_get);
    let (found, lookups, negatives, false_positives, blocks) = by_pin;
    assert_eq!(found, 1000);
    assert_eq!(lookups, 4000);
    // 2000 lookups in the table's range: each a filter answer, each "maybe" a block.
    assert_eq!(negatives + blocks, 2000);
    assert_eq!(blocks, found + false_positives);
    assert!(negatives > 900, "{negatives}");
}

/// With the global filter the reader is a snapshot too: nothing is flushed, and later
/// writes, flushes and compactions are not seen.
#[test]
fn with_the_global_filter_the_reader_reads_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts(FilterKind::Global)).unwrap();
    store.put(b"a", b"1").unwrap();
    let pinned = store.pinned_reader().unwrap();
    assert!(store.stats().tables.is_empty(), "nothing was flushed");
    store.put(b"a", b"2").unwrap();
    store.put(b"b", b"2").unwrap();
    store.flush().unwrap();
    store.compact().unwrap();
    assert_eq!(
        pinned.get(b"a").unwrap().map(Vec::from),
        Some(b"1".to_vec())
    );
    assert_eq!(pinned.get(b"b").unwrap(), None);
    assert_eq!(store.get(b"a").unwrap().map(Vec::from), Some(b"2".to_vec()));
}
