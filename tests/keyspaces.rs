//! Keyspaces (issue 38): named trees in one store, their isolation, cross-keyspace batches
//! and snapshots, drops, the log bound, crash safety and a model test.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::power_cut_options;
use filterstore::io::FaultFs;
use filterstore::{FilterKind, KeyspaceOptions, Options, Store, WriteBatch};

use common::model::{contents, keyspace_contents as all, Model as Contents};

fn logs_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".wal")
        })
        .count()
}

/// Keyspaces are separate trees: the same key in each holds its own value, scans see their
/// own keys only, and every keyspace comes back after a reopen, from its log and from its
/// tables.
#[test]
fn keyspaces_are_separate_trees_that_survive_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    {
        let store = Store::open(dir, Options::default()).unwrap();
        let a = store.keyspace("a").unwrap();
        let b = store
            .keyspace_with("b", KeyspaceOptions::default().filter(FilterKind::Cuckoo))
            .unwrap();
        store.put("k", "default").unwrap();
        a.put("k", "a").unwrap();
        b.put("k", "b").unwrap();
        a.put("only-a", "1").unwrap();
        assert_eq!(
            store.get("k").unwrap().map(|s| s.to_vec()),
            Some(b"default".to_vec())
        );
        assert_eq!(a.get("k").unwrap().map(|s| s.to_vec()), Some(b"a".to_vec()));
        assert_eq!(b.get("k").unwrap().map(|s| s.to_vec()), Some(b"b".to_vec()));
        assert_eq!(b.get("only-a").unwrap().map(|s| s.to_vec()), None);
        assert_eq!(store.get("only-a").unwrap().map(|s| s.to_vec()), None);
        assert_eq!(contents(a.scan::<&[u8]>(..)).len(), 2);
        assert_eq!(a.scan::<&[u8]>(..).rev().count(), 2);
        assert_eq!(store.keyspaces(), ["a", "b"]);
        // Asked again: the same keyspace, options as recorded.
        let again = store
            .keyspace_with("a", KeyspaceOptions::default().filter(FilterKind::None))
            .unwrap();
        assert_eq!(again.id(), a.id());
        assert_eq!(
            again.get("only-a").unwrap().map(|s| s.to_vec()),
            Some(b"1".to_vec())
        );
        a.flush().unwrap(); // a's writes in a table, b's and the default's in the log
        assert_eq!(a.stats().tables, 1);
        assert_eq!(b.stats().tables, 0);
        store.close().unwrap();
    }
    for round in 0..2 {
        let store = Store::open(dir, Options::default()).unwrap();
        assert_eq!(store.keyspaces(), ["a", "b"], "round {round}");
        let a = store.keyspace("a").unwrap();
        let b = store.keyspace("b").unwrap();
        assert_eq!(
            store.get("k").unwrap().map(|s| s.to_vec()),
            Some(b"default".to_vec())
        );
        assert_eq!(a.get("k").unwrap().map(|s| s.to_vec()), Some(b"a".to_vec()));
        assert_eq!(b.get("k").unwrap().map(|s| s.to_vec()), Some(b"b".to_vec()));
        assert_eq!(
            a.get("only-a").unwrap().map(|s| s.to_vec()),
            Some(b"1".to_vec())
        );
        assert_eq!(b.get("only-a").unwrap().map(|s| s.to_vec()), None);
        let stats = store.keyspace_stats();
        assert_eq!(stats.len(), 3);
        store.flush().unwrap();
        drop((a, b));
        store.close().unwrap();
    }
}

/// A log a keyspace has flushed is not replayed into it (another keyspace still holding
/// the log): the flushed keyspace opens with an empty memtable and its newest value.
#[test]
fn replay_skips_logs_a_keyspace_has_flushed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    {
        let store = Store::open(dir, Options::default()).unwrap();
        let a = store.keyspace("a").unwrap();
        let b = store.keyspace("b").unwrap();
        b.put("held", "1").unwrap(); // keeps the first log alive
        a.put("k", "old").unwrap();
        a.flush().unwrap();
        a.put("k", "new").unwrap();
        a.flush().unwrap();
        assert!(logs_in(dir) >= 2, "b's write keeps the old log");
        drop((a, b));
        // Dropped without close: no final flush.
        drop(store);
    }
    let store = Store::open(dir, Options::default()).unwrap();
    let a = store.keyspace("a").unwrap();
    assert_eq!(
        a.get("k").unwrap().map(|s| s.to_vec()),
        Some(b"new".to_vec())
    );
    // a's writes are all in its tables: none of the logs b keeps is replayed into it.
    assert_eq!(a.stats().memtable_entries, 0);
    assert_eq!(store.keyspace("b").unwrap().stats().memtable_entries, 1);
    assert_eq!(
        store
            .keyspace("b")
            .unwrap()
            .get("held")
            .unwrap()
            .map(|s| s.to_vec()),
        Some(b"1".to_vec())
    );
}

/// `verify` knows keyspaces: two keyspaces whose sorted runs cover the same keys are not
/// an overlap, and log records of a live keyspace (and of a dropped one) are not damage.
/// Found by `store stress --keyspaces 3 --kill`, whose checks verify the store.
#[test]
fn verify_finds_a_store_with_keyspaces_intact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    {
        let store = Store::open(dir, Options::default()).unwrap();
        let (a, b) = (store.keyspace("a").unwrap(), store.keyspace("b").unwrap());
        for ks in [&a, &b] {
            for i in 0..100 {
                ks.put(format!("k{i:03}"), "v").unwrap();
            }
            ks.flush().unwrap();
            ks.compact().unwrap();
        }
        let c = store.keyspace("c").unwrap();
        c.put("gone", "1").unwrap();
        drop(c);
        store.drop_keyspace("c").unwrap();
        b.put("held", "1").unwrap(); // in the log only
        let levels = |ks: &filterstore::Keyspace| {
            let s = ks.as_store().stats();
            s.levels
                .iter()
                .filter(|l| l.level > 0 && l.tables > 0)
                .count()
        };
        assert!(
            levels(&a) > 0 && levels(&b) > 0,
            "both keyspaces have sorted runs"
        );
        drop((a, b));
        drop(store); // no close: the log holds b's write
    }
    let r = filterstore::verify::verify_dir(dir).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert!(r.wal_records >= 1, "the log was read");
}

/// A batch across keyspaces is one write: a store's snapshot sees all of it or none, in
/// every keyspace, and a keyspace's snapshot view is the same instant.
#[test]
fn a_batch_across_keyspaces_and_a_snapshot_across_them() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path(), Options::default()).unwrap();
    let docs = store.keyspace("docs").unwrap();
    let postings = store.keyspace("postings").unwrap();
    let mut b = WriteBatch::new();
    b.put_in(&docs, "d1", "hello world")
        .put_in(&postings, "hello/d1", "")
        .put_in(&postings, "world/d1", "")
        .put("count", "1");
    store.write(b).unwrap();
    let snap = store.snapshot();
    let mut b = WriteBatch::new();
    b.delete_in(&docs, "d1")
        .delete_range_in(&postings, "hello/", "hello0")
        .put("count", "0");
    store.write(b).unwrap();
    let then = snap.keyspace(&postings).unwrap();
    assert_eq!(contents(then.scan::<&[u8]>(..)).len(), 2);
    assert_eq!(
        snap.keyspace(&docs)
            .unwrap()
            .get("d1")
            .unwrap()
            .map(|s| s.to_vec()),
        Some(b"hello world".to_vec())
    );
    assert_eq!(
        snap.get("count").unwrap().map(|s| s.to_vec()),
        Some(b"1".to_vec())
    );
    assert_eq!(docs.get("d1").unwrap().map(|s| s.to_vec()), None);
    assert_eq!(contents(postings.scan::<&[u8]>(..)).len(), 1);
    // Ops of a batch given no keyspace go to the keyspace that writes it.
    let mut b = WriteBatch::new();
    b.put("d2", "x");
    docs.write(b).unwrap();
    assert_eq!(
        docs.get("d2").unwrap().map(|s| s.to_vec()),
        Some(b"x".to_vec())
    );
    assert_eq!(store.get("d2").unwrap().map(|s| s.to_vec()), None);
    // A keyspace created after the snapshot is not in it.
    let later = store.keyspace("later").unwrap();
    assert!(snap.keyspace(&later).is_err());
}

/// A dropped keyspace's data and files go; its handles read nothing and refuse writes; a
/// keyspace created under the same name is new and empty, before and after a reopen.
#[test]
fn drop_keyspace_removes_it_and_a_new_one_of_the_name_is_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let files = || std::fs::read_dir(dir).unwrap().count();
    let store = Store::open(dir, Options::default()).unwrap();
    let before = files();
    let a = store.keyspace("a").unwrap();
    for i in 0..100 {
        a.put(format!("k{i}"), "v").unwrap();
    }
    a.flush().unwrap();
    a.put("in-log", "v").unwrap();
    let old_id = a.id();
    assert!(files() > before);
    store.drop_keyspace("a").unwrap();
    assert!(store.keyspaces().is_empty());
    assert_eq!(a.get("k1").unwrap().map(|s| s.to_vec()), None);
    assert!(a.put("k", "v").is_err());
    let mut b = WriteBatch::new();
    b.put_in(&a, "k", "v");
    assert!(store.write(b).is_err());
    assert!(store.drop_keyspace("a").is_err());
    drop(a);
    let a2 = store.keyspace("a").unwrap();
    assert!(a2.id() > old_id);
    assert_eq!(a2.get("k1").unwrap().map(|s| s.to_vec()), None);
    assert_eq!(a2.get("in-log").unwrap().map(|s| s.to_vec()), None);
    a2.put("fresh", "1").unwrap();
    drop(a2);
    store.close().unwrap();
    let store = Store::open(dir, Options::default()).unwrap();
    let a = store.keyspace("a").unwrap();
    assert_eq!(contents(a.scan::<&[u8]>(..)).len(), 1);
    assert_eq!(a.get("in-log").unwrap().map(|s| s.to_vec()), None);
    // The dropped keyspace's tables are gone from the directory.
    let tables = std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            n.to_string_lossy().ends_with(".sst")
        })
        .count();
    assert_eq!(tables, 0);
}

/// 300 small writes into one keyspace while another holds one early write and stays idle
/// leave at most 4 logs: the idle keyspace is flushed once it holds the oldest log.
#[test]
fn an_idle_keyspace_does_not_hold_the_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let store = Store::open(dir, Options::default().memtable_bytes(4 << 10)).unwrap();
    let a = store.keyspace("a").unwrap();
    let b = store.keyspace("b").unwrap();
    b.put("early", "1").unwrap();
    let mut most = 0;
    for i in 0..300 {
        a.put(format!("key{i:04}"), [7u8; 100]).unwrap();
        most = most.max(logs_in(dir));
        if std::env::var("KS_DEBUG").is_ok() {
            let mut names: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".wal"))
                .collect();
            names.sort();
            eprintln!("{i}: {names:?}");
        }
    }
    assert!(most <= 6, "{most} logs at most");
    assert_eq!(
        b.get("early").unwrap().map(|s| s.to_vec()),
        Some(b"1".to_vec())
    );
    drop((a, b));
    // Closing waits for the seals in progress (and the log removals after them).
    store.close().unwrap();
    assert!(logs_in(dir) <= 4, "{} logs", logs_in(dir));
    let store = Store::open(dir, Options::default()).unwrap();
    let a = store.keyspace("a").unwrap();
    assert_eq!(contents(a.scan::<&[u8]>(..)).len(), 300);
    assert_eq!(
        store
            .keyspace("b")
            .unwrap()
            .get("early")
            .unwrap()
            .map(|s| s.to_vec()),
        Some(b"1".to_vec())
    );
}

/// More busy keyspaces than the log bound allows logs (3): the log bound switches every
/// keyspace holding an old log together, onto one new log, so flushes stay about one per
/// budget's worth of writes. Switched one at a time, each switch started a new log and the
/// logs never dropped below the bound: a flush of a near-empty memtable on every write
/// (`bench engine --keyspaces 4` fell from 200,000 puts/s to a few thousand).
#[test]
fn busy_keyspaces_beyond_the_log_bound_do_not_flush_on_every_write() {
    let tmp = tempfile::tempdir().unwrap();
    let budget = 64 << 10;
    let store = Store::open(tmp.path(), Options::default().memtable_bytes(budget)).unwrap();
    let spaces: Vec<_> = (0..5)
        .map(|i| store.keyspace(&format!("ks{i}")).unwrap())
        .collect();
    for i in 1..=10_000 {
        spaces[i % 5].put(format!("key{i:06}"), [7u8; 100]).unwrap();
        if i % 1000 == 0 {
            // Measured: about 6 flushes per budget's worth of keys and values (each flush
            // about a fifth of the budget, and memtables count more than the bytes put);
            // with the storm, one per put.
            let flushes = store.stats().flushes;
            let budgets = (i * 110 / budget) as u64 + 1;
            assert!(
                flushes <= 10 * budgets,
                "{flushes} flushes after {i} puts ({budgets} budgets' worth)"
            );
        }
    }
    drop(spaces);
    store.close().unwrap();
}

/// One memtable budget across keyspaces: many keyspaces written at once never hold more
/// than about the budget in memtables.
#[test]
fn one_memtable_budget_across_keyspaces() {
    let tmp = tempfile::tempdir().unwrap();
    let budget = 64 << 10;
    let store = Store::open(tmp.path(), Options::default().memtable_bytes(budget)).unwrap();
    let spaces: Vec<_> = (0..8)
        .map(|i| store.keyspace(&format!("ks{i}")).unwrap())
        .collect();
    let mut peak = 0;
    for i in 0..2000 {
        spaces[i % 8].put(format!("k{i:05}"), [1u8; 64]).unwrap();
        let held: u64 = store
            .keyspace_stats()
            .iter()
            .map(|s| s.memtable_bytes)
            .sum();
        peak = peak.max(held);
    }
    // About the budget (a write may cross it before the next one switches).
    assert!(peak <= budget as u64 * 11 / 10, "peak {peak}");
}

/// Cross-keyspace batches, a drop and a re-create, with the power cut at every sync point in
/// turn: every image opens and is one of the states between steps, holding every
/// acknowledged step and at most the one in flight.
#[test]
fn power_cut_at_every_sync_point_of_batches_and_drops() {
    let tmp = tempfile::tempdir().unwrap();
    const STEPS: usize = 24;
    let run = |dir: &Path, fs: &FaultFs| -> (Vec<BTreeMap<String, Contents>>, usize) {
        let mut states = Vec::new();
        let Ok(store) = Store::open(dir, power_cut_options(fs)) else {
            return (states, 0);
        };
        states.push(all(&store));
        let mut acked = 0;
        for step in 0..STEPS {
            let r = match step {
                10 => store.drop_keyspace("a"),
                0 | 11 => store.keyspace("a").map(drop),
                1 => store.keyspace("b").map(drop),
                _ => {
                    let (Ok(a), Ok(b)) = (store.keyspace("a"), store.keyspace("b")) else {
                        break;
                    };
                    let mut batch = WriteBatch::new();
                    for j in 0..8 {
                        let k = format!("k{:02}", (step * 5 + j) % 30);
                        let v = format!("{step}-{j}-{}", "x".repeat(40));
                        batch
                            .put_in(&a, k.clone(), v.clone())
                            .put_in(&b, k.clone(), v.clone());
                        batch.put(k, v);
                    }
                    store.write(batch)
                }
            };
            if r.is_err() {
                break;
            }
            acked += 1;
            states.push(all(&store));
        }
        (states, acked)
    };
    common::at_every_power_cut(tmp.path(), STEPS, run, |_, img| {
        all(&Store::open(img, Options::default()).unwrap())
    });
}

/// A model test: several keyspaces against one `BTreeMap` each, through random puts,
/// deletes, range deletions, cross-keyspace batches, drops and re-creates, flushes,
/// compactions, snapshots and reopens. Bounded (a few seconds).
#[test]
fn keyspaces_against_a_model() {
    for seed in 1..=3u64 {
        model_run(seed);
    }
}

fn model_run(seed: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let opts = || Options::default().memtable_bytes(8 << 10);
    let names = ["a", "b", "c"];
    // "" is the default keyspace; a name absent from the model is not created (or dropped).
    let mut model: BTreeMap<String, Contents> = BTreeMap::new();
    model.insert(String::new(), Contents::new());
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let mut store = Store::open(dir, opts()).unwrap();
    let check = |store: &Store, model: &BTreeMap<String, Contents>, at: &str| {
        assert_eq!(all(store), *model, "seed {seed}, {at}");
    };
    for step in 0..1500 {
        let key = |next: &mut dyn FnMut(u64) -> u64| format!("k{:03}", next(60)).into_bytes();
        match next(100) {
            0..=39 => {
                let name = names[next(3) as usize];
                let ks = store.keyspace(name).unwrap();
                let m = model.entry(name.to_string()).or_default();
                let k = key(&mut next);
                if next(4) == 0 {
                    ks.delete(&k).unwrap();
                    m.remove(&k);
                } else {
                    let v = format!("{step}").into_bytes();
                    ks.put(&k, &v).unwrap();
                    m.insert(k, v);
                }
            }
            40..=64 => {
                // A batch over the default keyspace and the live named ones.
                let live: Vec<String> = model.keys().cloned().collect();
                let mut batch = WriteBatch::new();
                let mut after = model.clone();
                for _ in 0..1 + next(6) {
                    let name = &live[next(live.len() as u64) as usize];
                    let k = key(&mut next);
                    let v = format!("b{step}").into_bytes();
                    let m = after.get_mut(name).unwrap();
                    let del = next(5) == 0;
                    if name.is_empty() {
                        if del {
                            batch.delete(k.clone());
                        } else {
                            batch.put(k.clone(), v.clone());
                        }
                    } else {
                        let ks = store.keyspace(name).unwrap();
                        if del {
                            batch.delete_in(&ks, k.clone());
                        } else {
                            batch.put_in(&ks, k.clone(), v.clone());
                        }
                    }
                    if del {
                        m.remove(&k);
                    } else {
                        m.insert(k, v);
                    }
                }
                store.write(batch).unwrap();
                model = after;
            }
            65..=69 => {
                let name = names[next(3) as usize];
                if model.contains_key(name) {
                    let ks = store.keyspace(name).unwrap();
                    let (s, e) = (key(&mut next), key(&mut next));
                    ks.delete_range(&s, &e).unwrap();
                    model
                        .get_mut(name)
                        .unwrap()
                        .retain(|k, _| !(s <= *k && *k < e));
                }
            }
            70..=73 => {
                let name = names[next(3) as usize];
                if model.remove(name).is_some() {
                    store.drop_keyspace(name).unwrap();
                }
            }
            74..=79 => {
                if next(2) == 0 {
                    store.flush().unwrap();
                } else if let Some(ks) = store.existing_keyspace(names[next(3) as usize]) {
                    ks.flush().unwrap();
                }
            }
            80..=82 => {
                if let Some(ks) = store.existing_keyspace(names[next(3) as usize]) {
                    ks.compact().unwrap();
                } else {
                    store.compact().unwrap();
                }
            }
            83..=86 => {
                // A snapshot sees every keyspace as of its instant, whatever follows.
                let snap = store.snapshot();
                let before = model.clone();
                let ks = store.keyspace("a").unwrap();
                model.entry("a".into()).or_default();
                ks.put("snap", format!("{step}")).unwrap();
                let then = snap.keyspace(&ks).map(|s| contents(s.scan::<&[u8]>(..)));
                match before.get("a") {
                    Some(m) => assert_eq!(then.unwrap(), *m, "seed {seed} step {step}"),
                    None => assert!(then.is_err()),
                }
                model
                    .get_mut("a")
                    .unwrap()
                    .insert(b"snap".to_vec(), format!("{step}").into_bytes());
            }
            87..=90 => {
                drop(store);
                store = Store::open(dir, opts()).unwrap();
                check(&store, &model, &format!("reopen at step {step}"));
            }
            _ => check(&store, &model, &format!("step {step}")),
        }
    }
    check(&store, &model, "end");
    store.close().unwrap();
    let store = Store::open(dir, opts()).unwrap();
    check(&store, &model, "last reopen");
}

/// A keyspace's transaction reads and writes that keyspace only, and conflicts as the
/// store's do.
#[test]
fn a_keyspace_transaction_stays_in_its_keyspace() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path(), Options::default()).unwrap();
    let a = store.keyspace("a").unwrap();
    a.put("x", "1").unwrap();
    store.put("x", "default").unwrap();
    let mut t = a.transaction();
    assert_eq!(t.get("x").unwrap().map(|s| s.to_vec()), Some(b"1".to_vec()));
    t.put("x", "2");
    t.commit().unwrap();
    assert_eq!(a.get("x").unwrap().map(|s| s.to_vec()), Some(b"2".to_vec()));
    assert_eq!(
        store.get("x").unwrap().map(|s| s.to_vec()),
        Some(b"default".to_vec())
    );
    // Lost update: two transactions read x, both write it; the second commit fails.
    let mut t1 = a.transaction();
    let mut t2 = a.transaction();
    t1.get("x").unwrap().map(|s| s.to_vec());
    t2.get("x").unwrap().map(|s| s.to_vec());
    t1.put("x", "3");
    t2.put("x", "4");
    t1.commit().unwrap();
    assert!(matches!(t2.commit(), Err(filterstore::Error::Conflict)));
    assert_eq!(a.get("x").unwrap().map(|s| s.to_vec()), Some(b"3".to_vec()));
}

/// The scan drain works tree by tree: scans of a keyspace over its L0 tables pay for merging
/// that keyspace's L0 into its L1, and the default keyspace's L0 stays as it was.
#[test]
fn scans_of_a_keyspace_drain_its_l0() {
    use std::time::{Duration, Instant};
    let tmp = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .idle_drain(None)
        .compaction_trigger(Some(8));
    let store = Store::open(tmp.path(), opts).unwrap();
    let a = store.keyspace("a").unwrap();
    for t in 0..3u32 {
        for i in (t..3_000).step_by(3) {
            a.put(format!("k{i:05}"), format!("v{i}")).unwrap();
            store.put(format!("k{i:05}"), "d").unwrap();
        }
        store.flush().unwrap();
    }
    let tables = |ks: &filterstore::Keyspace| ks.stats().tables;
    assert_eq!(tables(&a), 3);
    let l0 = store.stats().levels[0].tables;
    for _ in 0..2 {
        assert_eq!(a.scan::<&[u8]>(..).count(), 3_000);
    }
    let t = Instant::now();
    while store.stats().scan_drains == 0 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let t = Instant::now();
    while tables(&a) == 3 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(store.stats().scan_drains, 1);
    assert!(tables(&a) < 3, "{} tables", tables(&a));
    assert_eq!(
        store.stats().levels[0].tables,
        l0,
        "the default keyspace's L0"
    );
    let got = contents(a.scan::<&[u8]>(..));
    assert_eq!(got.len(), 3_000);
    assert_eq!(got[&b"k00007".to_vec()], b"v7".to_vec());
}
