//! Readers and scanners racing one writer, flushes, compactions and refilters, checked
//! against versions: a reader never sees a version older than one acknowledged before its
//! read began, never a version not yet written, and never misses a key.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use filterstore::{FilterKind, Options, Store};

use crate::common::{NoSyncFs, Rng};

const KEYS: usize = 400;

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: usize, version: u64) -> Vec<u8> {
    let mut v = format!("{version:010}:").into_bytes();
    v.extend(key(i));
    v
}

fn version_of(i: usize, v: &[u8]) -> u64 {
    let s = std::str::from_utf8(v).expect("value is not ours");
    let (ver, k) = s.split_once(':').expect("value is not ours");
    assert_eq!(k.as_bytes(), key(i), "value of another key");
    ver.parse().expect("value is not ours")
}

#[test]
fn readers_and_scanners_see_monotonic_versions_under_writes_and_maintenance() {
    let dir = crate::scratch_dir();
    let o = Options::default()
        .memtable_bytes(8 << 10)
        .compaction_trigger(Some(4))
        .table_bytes(16 << 10)
        .l1_bytes(64 << 10)
        .level_ratio(3)
        .fs(Arc::new(NoSyncFs));
    let store = Arc::new(Store::open(dir.path(), o).unwrap());
    // acked[i]: newest version of key i acknowledged; started[i]: newest version begun.
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let started: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    for i in 0..KEYS {
        store.put(key(i), value(i, 1)).unwrap();
        acked[i].store(1, Ordering::Release);
        started[i].store(1, Ordering::Release);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for r in 0..4u64 {
        let (store, acked, started, stop) =
            (store.clone(), acked.clone(), started.clone(), stop.clone());
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng::new(100 + r);
            let (mut gets, mut scanned) = (0u64, 0u64);
            while !stop.load(Ordering::Acquire) {
                if rng.below(50) == 0 {
                    // Scan: floor versions taken before it starts, ceilings after it ends.
                    let floor: Vec<u64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
                    let got: Vec<_> = store.scan::<&[u8]>(..).collect::<Result<_, _>>().unwrap();
                    let ceil: Vec<u64> =
                        started.iter().map(|a| a.load(Ordering::Acquire)).collect();
                    assert_eq!(got.len(), KEYS, "scan missed keys");
                    for (i, (k, v)) in got.iter().enumerate() {
                        assert_eq!(k, &key(i));
                        let ver = version_of(i, v);
                        assert!(
                            ver >= floor[i] && ver <= ceil[i],
                            "scan: key {i} v{ver} outside [{}, {}]",
                            floor[i],
                            ceil[i]
                        );
                    }
                    scanned += got.len() as u64;
                } else {
                    let i = rng.below(KEYS as u64) as usize;
                    let floor = acked[i].load(Ordering::Acquire);
                    let v = store
                        .get(key(i))
                        .unwrap()
                        .unwrap_or_else(|| panic!("key {i} missing"));
                    let ceil = started[i].load(Ordering::Acquire);
                    let ver = version_of(i, &v);
                    assert!(
                        ver >= floor && ver <= ceil,
                        "get: key {i} v{ver} outside [{floor}, {ceil}]"
                    );
                    gets += 1;
                }
            }
            (gets, scanned)
        }));
    }
    let maint = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            let kinds = [
                FilterKind::Cuckoo,
                FilterKind::Bloom,
                FilterKind::BlockedBloom,
                FilterKind::BinaryFuse,
                FilterKind::None,
            ];
            while !stop.load(Ordering::Acquire) {
                store.compact().unwrap();
                store
                    .refilter(kinds[n as usize % kinds.len()], 0.02)
                    .unwrap();
                n += 1;
            }
            n
        })
    };
    let mut rng = Rng::new(1);
    let mut version = 1u64;
    let writes = 30_000u64;
    for _ in 0..writes {
        version += 1;
        let i = rng.below(KEYS as u64) as usize;
        started[i].store(version, Ordering::Release);
        store.put(key(i), value(i, version)).unwrap();
        acked[i].store(version, Ordering::Release);
    }
    stop.store(true, Ordering::Release);
    let mut gets = 0;
    let mut scanned = 0;
    for h in handles {
        let (g, s) = h.join().unwrap();
        gets += g;
        scanned += s;
    }
    let maintenance = maint.join().unwrap();
    assert!(gets > 1000 && maintenance > 0);
    for i in 0..KEYS {
        let v = store.get(key(i)).unwrap().unwrap();
        assert_eq!(version_of(i, &v), acked[i].load(Ordering::Acquire));
    }
    println!(
        "concurrency: 1 writer ({writes} versioned puts), 4 readers ({gets} checked gets, \
         {scanned} checked scan entries), {maintenance} compaction+refilter rounds"
    );
}

/// Several writer threads with fsync per write (puts, deletes and batches, each thread its
/// own keys), so that writers meet in the commit queue: every write is there afterwards, and
/// after a reopen, with its last value; the store counts each write once in its groups.
#[test]
fn concurrent_durable_writers_lose_nothing() {
    let dir = crate::scratch_dir();
    let o = || {
        Options::default()
            .sync(filterstore::SyncPolicy::EveryWrite)
            .memtable_bytes(64 << 10)
            .compaction_trigger(Some(4))
            .table_bytes(32 << 10)
            .l1_bytes(128 << 10)
            .level_ratio(4)
    };
    let store = Store::open(dir.path(), o()).unwrap();
    const THREADS: u64 = 4;
    const WRITES: u64 = 400;
    // Each thread's model of its keys, and its write calls.
    type Model = std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>>;
    let models: Vec<(Model, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let store = &store;
                s.spawn(move || {
                    let mut rng = Rng::new(40 + t);
                    let mut model = std::collections::BTreeMap::new();
                    let k = |i: u64| format!("t{t}-key{i:04}").into_bytes();
                    for version in 0..WRITES {
                        match rng.below(10) {
                            0 => {
                                let i = rng.below(50);
                                store.delete(k(i)).unwrap();
                                model.insert(k(i), None);
                            }
                            1 => {
                                let mut b = filterstore::WriteBatch::new();
                                for _ in 0..3 {
                                    let i = rng.below(50);
                                    let v = value(i as usize, version);
                                    b.put(k(i), v.clone());
                                    model.insert(k(i), Some(v));
                                }
                                store.write(b).unwrap();
                            }
                            _ => {
                                let i = rng.below(50);
                                let v = value(i as usize, version);
                                store.put(k(i), &v).unwrap();
                                model.insert(k(i), Some(v));
                            }
                        }
                    }
                    (model, WRITES)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let st = store.stats();
    let writes: u64 = models.iter().map(|m| m.1).sum();
    assert_eq!(st.commit_writes, writes, "every write committed once");
    assert!(st.commit_groups >= 1 && st.commit_groups <= st.commit_writes);
    let check = |store: &Store| {
        for (model, _) in &models {
            for (k, v) in model {
                assert_eq!(
                    &store.get(k).unwrap().map(Vec::from),
                    v,
                    "{}",
                    String::from_utf8_lossy(k)
                );
            }
        }
    };
    check(&store);
    drop(store);
    let store = Store::open(dir.path(), o()).unwrap();
    check(&store);
    println!(
        "concurrency: {THREADS} durable writers, {writes} writes in {} commit groups",
        st.commit_groups
    );
}
