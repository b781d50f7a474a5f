//! Durability per write and the store's handles: synced and unsynced writers mixed under
//! power cuts (`FaultFs` keeps only what an fsync covered), `Store::close` returning the
//! final fsync's error, clones, and readers that outlive the store.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use filterstore::io::{FaultFs, EIO};
use filterstore::{Error, Options, Store, SyncPolicy, WriteBatch, WriteOptions};

use crate::value_of;

/// One acknowledged write: its keys (a batch holds two), whether it asked for an fsync, and
/// when it started and returned on the test's clock.
struct Acked {
    keys: Vec<Vec<u8>>,
    synced: bool,
    start: u64,
    acked: u64,
}

/// What a power cut at clock `cut` left, checked against the acknowledged writes: every
/// synced write acknowledged before the cut is there; a write that is there brings every
/// synced write acknowledged before it started (no hole: unsynced writes are lost only from
/// the tail); a batch is whole or absent; nothing else is there. Returns the writes found.
fn check_image(image: &Path, cut: u64, writes: &[Acked], what: &str) -> usize {
    let store = Store::open(image, Options::default()).unwrap();
    let mut present = BTreeMap::new();
    for item in store.scan::<&[u8]>(..) {
        let (k, v) = item.unwrap();
        let (k, v) = (k.to_vec(), v.to_vec());
        present.insert(k, v);
    }
    let mut known = BTreeSet::new();
    let mut found = 0;
    let mut oldest_present = u64::MAX;
    for w in writes {
        let here: Vec<bool> = w.keys.iter().map(|k| present.contains_key(k)).collect();
        assert!(here.iter().all(|&h| h == here[0]), "{what}: half a batch");
        for k in &w.keys {
            known.insert(k.clone());
            if let Some(v) = present.get(k) {
                assert_eq!(v, &value_of(k, 1), "{what}: wrong value");
            }
        }
        if w.synced && w.acked < cut {
            assert!(
                here[0],
                "{what}: a synced write acknowledged before the cut is lost"
            );
        }
        if here[0] {
            found += 1;
            oldest_present = oldest_present.min(w.start);
        }
    }
    for k in present.keys() {
        assert!(known.contains(k), "{what}: a key nobody wrote");
    }
    // No hole: every synced write acknowledged before a present write started is present.
    for w in writes.iter().filter(|w| w.synced) {
        let later_present = writes
            .iter()
            .any(|p| p.start > w.acked && present.contains_key(&p.keys[0]));
        if later_present {
            assert!(
                present.contains_key(&w.keys[0]),
                "{what}: a hole: a synced write is lost while a later write survived"
            );
        }
    }
    found
}

/// Four writers, one all synced, one never, two mixed (1 in 3, batches among them), on a
/// store with small memtables and tables (log switches, flushes and compactions under the
/// writes); power cuts taken while they write and after `close`.
#[test]
fn mixed_synced_and_unsynced_writers_lose_only_an_unsynced_tail() {
    const THREADS: u64 = 4;
    const PER: u64 = 250;
    let mut cuts_checked = 0;
    for policy in [
        SyncPolicy::OnFlush,
        SyncPolicy::EveryWrite,
        SyncPolicy::Buffered,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let opts = Options::default()
            .sync(policy)
            .memtable_bytes(16 << 10)
            .compaction_trigger(3)
            .table_bytes(8 << 10)
            .l1_bytes(32 << 10)
            .fs(Arc::new(fs.clone()));
        let store = Store::open(dir.path(), opts).unwrap();
        let clock = AtomicU64::new(0);
        let done = AtomicUsize::new(0);
        let writes = Mutex::new(Vec::new());
        let images = tempfile::tempdir().unwrap();
        let mut cuts = Vec::new();
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (store, clock, done, writes) = (store.clone(), &clock, &done, &writes);
                s.spawn(move || {
                    for i in 0..PER {
                        let synced = match t {
                            0 => true,
                            1 => false,
                            _ => i % 3 == 0,
                        };
                        let wo = WriteOptions::default().sync(synced);
                        let key = format!("t{t}w{i:04}").into_bytes();
                        let start = clock.fetch_add(1, SeqCst);
                        let keys = if t >= 2 && i % 4 == 1 {
                            let mut other = key.clone();
                            other.push(b'b');
                            let mut b = WriteBatch::new();
                            b.put(key.clone(), value_of(&key, 1))
                                .put(other.clone(), value_of(&other, 1));
                            store.write_opt(b, &wo).unwrap();
                            vec![key, other]
                        } else {
                            store.put_opt(&key, value_of(&key, 1), &wo).unwrap();
                            vec![key]
                        };
                        let acked = clock.fetch_add(1, SeqCst);
                        let w = Acked {
                            keys,
                            synced,
                            start,
                            acked,
                        };
                        writes.lock().unwrap().push(w);
                        done.fetch_add(1, SeqCst);
                    }
                });
            }
            // Power cuts after about a quarter, half and three quarters of the writes (a
            // count of acknowledged writes, not a time).
            for q in 1..=3u64 {
                let end = Instant::now() + Duration::from_secs(60);
                while (done.load(SeqCst) as u64) < q * THREADS * PER / 4 {
                    assert!(Instant::now() < end, "the writers stalled");
                    std::thread::yield_now();
                }
                let cut = clock.fetch_add(1, SeqCst);
                let img = images.path().join(format!("{q}"));
                std::fs::create_dir(&img).unwrap();
                fs.crash_image(&img, 0).unwrap();
                cuts.push((img, cut));
            }
        });
        store.close().unwrap();
        let after = images.path().join("closed");
        std::fs::create_dir(&after).unwrap();
        fs.crash_image(&after, 0).unwrap();
        let writes = writes.into_inner().unwrap();
        let what = format!("{policy:?} after close");
        let found = check_image(&after, u64::MAX, &writes, &what);
        assert_eq!(found, writes.len(), "{what}: close lost writes");
        for (img, cut) in cuts {
            let found = check_image(&img, cut, &writes, &format!("{policy:?} at {cut}"));
            let synced_before = writes.iter().filter(|w| w.synced && w.acked < cut).count();
            assert!(found >= synced_before);
            cuts_checked += 1;
        }
    }
    println!("mixed durability: {cuts_checked} power cuts checked");
}

fn open_fault(dir: &Path, fs: &FaultFs) -> Store {
    let opts = Options::default()
        .compaction_trigger(None)
        .fs(Arc::new(fs.clone()));
    Store::open(dir, opts).unwrap()
}

/// `close` returns the error of the final fsync, which a drop cannot; the store is closed
/// all the same (the directory opens again).
#[test]
fn close_returns_the_final_fsync_error() {
    let _serial = crate::serial();
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    let store = open_fault(dir.path(), &fs);
    store.put("k", "v").unwrap();
    fs.hold_log_syncs();
    let closing = std::thread::spawn(move || store.close());
    assert_eq!(fs.wait_held_log_syncs(1, Duration::from_secs(20)), 1);
    fs.pass_log_sync(Some(EIO));
    fs.release_log_syncs();
    match closing.join().unwrap() {
        Err(Error::Io { source, .. }) => assert_eq!(source.raw_os_error(), Some(EIO)),
        r => panic!("close returned {r:?}"),
    }
    // Closed: the lock is free.
    drop(open_fault(dir.path(), &fs));
    // The same store closed without a failure: Ok.
    let store = open_fault(dir.path(), &fs);
    store.put("k2", "v").unwrap();
    store.close().unwrap();
}

/// A poisoned store's `close` reports the failure that poisoned it.
#[test]
fn close_of_a_poisoned_store_reports_the_poison() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    let store = open_fault(dir.path(), &fs);
    fs.hold_log_syncs();
    let sync = WriteOptions::default().sync(true);
    let (s2, fs2) = (store.clone(), fs.clone());
    let w = std::thread::spawn(move || s2.put_opt("k", "v", &sync));
    assert_eq!(fs2.wait_held_log_syncs(1, Duration::from_secs(20)), 1);
    fs.pass_log_sync(Some(EIO));
    fs.release_log_syncs();
    assert!(matches!(w.join().unwrap(), Err(Error::Io { .. })));
    assert!(matches!(store.close(), Err(Error::Poisoned { .. })));
}

/// Clones share one store; `close` on a clone while another lives only fsyncs (the store
/// stays open for the other); the last clone closes it. A reader moved into another thread
/// outlives every clone: it reads the store as it was closed and keeps the directory lock
/// until it drops.
#[test]
fn clones_share_one_store_and_readers_outlive_it() {
    let _serial = crate::serial();
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    let store = open_fault(dir.path(), &fs);
    let other = store.clone();
    std::thread::spawn(move || other.put("from", "thread"))
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(
        store.get("from").unwrap().map(Vec::from),
        Some(b"thread".to_vec())
    );
    let synced = fs.syncs();
    let clone = store.clone();
    clone.close().unwrap();
    assert!(fs.syncs() > synced, "close on a clone fsyncs the logs");
    store.put("after", "clone closed").unwrap();
    // A reader kept in a struct and moved to a thread (no borrow of the store).
    struct Service {
        reader: filterstore::Reader,
    }
    let service = Service {
        reader: store.reader(),
    };
    store.close().unwrap();
    assert!(matches!(
        Store::open(dir.path(), Options::default()),
        Err(Error::Locked(_))
    ));
    let service = std::thread::spawn(move || {
        assert_eq!(
            service.reader.get("after").unwrap().map(Vec::from),
            Some(b"clone closed".to_vec())
        );
        service
    })
    .join()
    .unwrap();
    drop(service);
    let store = Store::open(dir.path(), Options::default()).unwrap();
    assert_eq!(
        store.get("from").unwrap().map(Vec::from),
        Some(b"thread".to_vec())
    );
}
