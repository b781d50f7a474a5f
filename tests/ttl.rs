//! Expiry (time to live) with a clock the tests move: every read path sees an entry expire
//! at once, across flush, compaction and reopen; compaction reclaims expired entries; the
//! compaction filter keeps, removes and changes values; power cuts during TTL'd writes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use filterstore::expiry::{CompactionFilter, Decision, ManualClock};
use filterstore::io::FaultFs;
use filterstore::{Options, Slice, Store, SyncPolicy, WriteBatch, WriteOptions};

/// `multi_get`'s answers as owned bytes.
fn owned(vs: Vec<Option<Slice>>) -> Vec<Option<Vec<u8>>> {
    vs.into_iter().map(|v| v.map(Vec::from)).collect()
}

/// A scan item as owned bytes (the models' type).
fn own(r: filterstore::Result<(Slice, Slice)>) -> (Vec<u8>, Vec<u8>) {
    let (k, v) = r.unwrap();
    (k.to_vec(), v.to_vec())
}

const T0: u64 = 1_700_000_000_000;

fn opts(clock: &ManualClock) -> Options {
    Options::default()
        .clock(Arc::new(clock.clone()))
        .compaction_trigger(None)
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Every read path of `store` agrees with `model`: get, contains (a get), multi_get, scans
/// forward and backward, a prefix scan, a snapshot and a pinned reader taken now, a reader.
fn check_all(store: &Store, model: &Model, keys: &[Vec<u8>], what: &str) {
    for k in keys {
        assert_eq!(
            store.get(k).unwrap().as_deref(),
            model.get(k).map(Vec::as_slice),
            "{what}: get {k:?}"
        );
    }
    let many = owned(store.multi_get(keys).unwrap());
    let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
    assert_eq!(many, want, "{what}: multi_get");
    let fwd: Vec<(Vec<u8>, Vec<u8>)> = store.scan::<&[u8]>(..).map(own).collect();
    let all: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(fwd, all, "{what}: scan");
    let mut back: Vec<(Vec<u8>, Vec<u8>)> = store.scan::<&[u8]>(..).rev().map(own).collect();
    back.reverse();
    assert_eq!(back, all, "{what}: reverse scan");
    let pre: Vec<_> = store.scan_prefix(b"k").map(own).collect();
    let want_pre: Vec<_> = all
        .iter()
        .filter(|(k, _)| k.starts_with(b"k"))
        .cloned()
        .collect();
    assert_eq!(pre, want_pre, "{what}: prefix scan");
    let snap = store.snapshot();
    for k in keys {
        assert_eq!(
            snap.get(k).unwrap().as_deref(),
            model.get(k).map(Vec::as_slice),
            "{what}: snapshot get"
        );
    }
    assert_eq!(
        owned(snap.multi_get(keys).unwrap()),
        want,
        "{what}: snapshot multi_get"
    );
    let sfwd: Vec<_> = snap.scan::<&[u8]>(..).map(own).collect();
    assert_eq!(sfwd, all, "{what}: snapshot scan");
    let pinned = store.pinned_reader().unwrap();
    let reader = store.reader();
    for k in keys {
        assert_eq!(
            pinned.get(k).unwrap().as_deref(),
            model.get(k).map(Vec::as_slice),
            "{what}: pinned"
        );
        assert_eq!(
            reader.get(k).unwrap().as_deref(),
            model.get(k).map(Vec::as_slice),
            "{what}: reader"
        );
    }
    assert_eq!(
        owned(reader.multi_get(keys).unwrap()),
        want,
        "{what}: reader multi_get"
    );
}

/// Writes a few keys with and without a TTL (one overwriting an older value without one),
/// then checks every read path before and after the clock passes each expiry, with the
/// entries in the memtable, in L0, compacted, and after a reopen.
#[test]
fn expiry_is_seen_at_once_by_every_read_path_in_every_place() {
    for stage in ["memtable", "flushed", "compacted", "reopened"] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let mut store = Store::open(dir.path(), opts(&clock)).unwrap();
        store.put("old", "forever").unwrap();
        if stage != "memtable" {
            store.flush().unwrap(); // "old" lies under its TTL'd overwrite
        }
        store
            .put_with_ttl("old", "soon", Duration::from_secs(10))
            .unwrap();
        store
            .put_with_ttl("k1", "v1", Duration::from_secs(10))
            .unwrap();
        store.put("k2", "v2").unwrap();
        let mut b = WriteBatch::new();
        b.put_with_ttl("k3", "v3", Duration::from_secs(20))
            .put("k4", "v4");
        store.write(b).unwrap();
        store
            .put_opt(
                "k5",
                "v5",
                &WriteOptions::default().ttl(Duration::from_secs(30)),
            )
            .unwrap();
        match stage {
            "flushed" => store.flush().unwrap(),
            "compacted" => {
                store.flush().unwrap();
                store.compact().unwrap();
            }
            "reopened" => {
                store.close().unwrap();
                store = Store::open(dir.path(), opts(&clock)).unwrap();
            }
            _ => {}
        }
        let keys: Vec<Vec<u8>> = ["old", "k1", "k2", "k3", "k4", "k5", "zz"]
            .iter()
            .map(|k| k.as_bytes().to_vec())
            .collect();
        let mut model: Model = [("old", "soon"), ("k1", "v1"), ("k2", "v2"), ("k3", "v3")]
            .iter()
            .chain(&[("k4", "v4"), ("k5", "v5")])
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        check_all(&store, &model, &keys, &format!("{stage}, at once"));
        let early = store.snapshot();
        clock.advance(Duration::from_millis(9_999));
        check_all(&store, &model, &keys, &format!("{stage}, 1 ms before"));
        clock.advance(Duration::from_millis(1));
        // An expired overwrite hides the older value: it reads as a delete.
        model.remove(b"old".as_slice());
        model.remove(b"k1".as_slice());
        check_all(&store, &model, &keys, &format!("{stage}, at 10 s"));
        // The snapshot taken before judges at its own time.
        assert_eq!(
            early.get("k1").unwrap(),
            Some(Slice::from(b"v1")),
            "{stage}: snapshot"
        );
        assert_eq!(early.scan::<&[u8]>(..).count(), 6, "{stage}: snapshot scan");
        drop(early);
        clock.advance(Duration::from_secs(10));
        model.remove(b"k3".as_slice());
        check_all(&store, &model, &keys, &format!("{stage}, at 20 s"));
        // Across a flush, a compaction and a reopen after expiry too.
        store.flush().unwrap();
        store.compact().unwrap();
        check_all(
            &store,
            &model,
            &keys,
            &format!("{stage}, compacted at 20 s"),
        );
        store.close().unwrap();
        let store = Store::open(dir.path(), opts(&clock)).unwrap();
        check_all(&store, &model, &keys, &format!("{stage}, reopened at 20 s"));
        clock.advance(Duration::from_secs(10));
        model.remove(b"k5".as_slice());
        check_all(&store, &model, &keys, &format!("{stage}, at 30 s"));
    }
}

/// Live (not tombstone) entries in the store's tables, and their file bytes.
fn table_facts(store: &Store) -> (u64, u64) {
    let s = store.stats();
    let keys = s.tables.iter().map(|t| t.keys).sum();
    let bytes = s.tables.iter().map(|t| t.file_bytes).sum();
    (keys, bytes)
}

/// A bottom table of expired sessions that no write reaches is emptied by a compaction:
/// entries and file bytes, counted.
#[test]
fn compaction_reclaims_expired_entries() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let store = Store::open(dir.path(), opts(&clock)).unwrap();
    for i in 0..5_000u32 {
        let ttl = Duration::from_secs(if i % 5 == 0 { 3600 } else { 60 });
        store
            .put_with_ttl(format!("s{i:06}"), [b'x'; 100], ttl)
            .unwrap();
    }
    store.flush().unwrap();
    store.compact().unwrap();
    let (keys, bytes) = table_facts(&store);
    assert_eq!(keys, 5_000);
    let t = &store.stats().tables;
    assert!(t.iter().all(|t| t.tombstones == 0));
    clock.advance(Duration::from_secs(61));
    // Nothing has been written since: a full compaction alone reclaims them.
    store.compact().unwrap();
    let (keys_after, bytes_after) = table_facts(&store);
    assert_eq!(
        keys_after, 1_000,
        "the expired entries are gone from the bottom level"
    );
    assert!(store.stats().tables.iter().all(|t| t.tombstones == 0));
    assert!(
        bytes_after * 3 < bytes,
        "{bytes_after} bytes left of {bytes}"
    );
    assert_eq!(store.scan::<&[u8]>(..).count(), 1_000);
    clock.advance(Duration::from_secs(3600));
    store.compact().unwrap();
    assert_eq!(table_facts(&store).0, 0);
}

/// Removes keys ending in '0', changes those ending in '1', keeps the rest.
#[derive(Debug)]
struct Rules;

impl CompactionFilter for Rules {
    fn name(&self) -> &str {
        "rules"
    }
    fn filter(&self, _level: usize, key: &[u8], value: &[u8]) -> Decision {
        match key.last() {
            Some(b'0') => Decision::Remove,
            Some(b'1') => Decision::Change([value, b"!"].concat()),
            _ => Decision::Keep,
        }
    }
}

fn rule(k: &[u8], v: &[u8]) -> Option<Vec<u8>> {
    match k.last() {
        Some(b'0') => None,
        Some(b'1') => Some([v, b"!"].concat()),
        _ => Some(v.to_vec()),
    }
}

/// The compaction filter against a model: flushes do not call it, a compaction calls it once
/// per value it writes; removals into a level with data under it leave tombstones, at the
/// bottom nothing.
#[test]
fn compaction_filter_keeps_removes_and_changes_against_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let o = opts(&clock).compaction_filter(Some(Arc::new(Rules) as Arc<dyn CompactionFilter>));
    let store = Store::open(dir.path(), o).unwrap();
    let mut model: Model = BTreeMap::new();
    let key = |i: u32| format!("k{i:05}").into_bytes();
    for i in 0..2_000u32 {
        store.put(key(i), format!("a{i}")).unwrap();
        model.insert(key(i), format!("a{i}").into_bytes());
    }
    store.flush().unwrap();
    // Flushed, not compacted: the filter has not run.
    for (k, v) in &model {
        assert_eq!(store.get(k).unwrap().as_deref(), Some(v.as_slice()));
    }
    store.compact().unwrap();
    let apply = |m: &Model| -> Model {
        m.iter()
            .filter_map(|(k, v)| rule(k, v).map(|v| (k.clone(), v)))
            .collect()
    };
    model = apply(&model);
    let got: Model = store.scan::<&[u8]>(..).map(own).collect();
    assert!(
        got == model,
        "after the first compaction: {} entries, {} expected",
        got.len(),
        model.len()
    );
    // At the bottom removals leave nothing behind.
    let s = store.stats();
    assert_eq!(s.tables.iter().map(|t| t.tombstones).sum::<u64>(), 0);
    assert_eq!(
        s.tables.iter().map(|t| t.keys).sum::<u64>(),
        model.len() as u64
    );
    let bottom = s.tables.iter().map(|t| t.level).max().unwrap();
    assert!(bottom >= 1);
    // New values over half the keys; a compaction into L0 (an L0 merge) or a level above
    // the bottom must leave a tombstone where the filter removes a key whose older version
    // lies deeper: here through an L0 merge of two flushed tables.
    for i in (0..2_000u32).step_by(2) {
        store.put(key(i), format!("b{i}")).unwrap();
    }
    store.flush().unwrap();
    for i in (0..2_000u32).step_by(2) {
        model.insert(key(i), format!("b{i}").into_bytes());
    }
    store.compact().unwrap();
    model = apply(&model);
    let got: Model = store.scan::<&[u8]>(..).map(own).collect();
    assert!(
        got == model,
        "after the second compaction: {} entries, {} expected",
        got.len(),
        model.len()
    );
    for (k, v) in &model {
        assert_eq!(store.get(k).unwrap().as_deref(), Some(v.as_slice()));
    }
    for i in (0..2_000u32).filter(|i| i % 10 == 0) {
        assert_eq!(store.get(key(i)).unwrap(), None);
    }
}

/// Power cuts at every sync point while TTL'd puts are written (EveryWrite): every
/// acknowledged put is recovered with its expiry (still there before it, gone after).
#[test]
fn power_cuts_during_ttl_puts_keep_acknowledged_expiring_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cut = 0u64;
    loop {
        let fs = FaultFs::new();
        fs.cut_power_at_sync(cut);
        let live = tmp.path().join(format!("live{cut}"));
        let clock = ManualClock::new(T0);
        let o = |fs: &FaultFs| {
            opts(&clock)
                .sync(SyncPolicy::EveryWrite)
                .memtable_bytes(2048)
                .compaction_trigger(Some(2))
                .fs(Arc::new(fs.clone()))
        };
        let mut acked: Vec<(Vec<u8>, u64)> = Vec::new();
        if let Ok(s) = Store::open(&live, o(&fs)) {
            for i in 0..80u64 {
                let k = format!("key{i:04}").into_bytes();
                let ttl = 1_000 * (1 + i % 7);
                let r = if i % 20 == 19 {
                    s.flush()
                } else {
                    s.put_with_ttl(&k, [7; 100], Duration::from_millis(ttl))
                        .map(|()| acked.push((k, ttl)))
                };
                if r.is_err() {
                    break;
                }
            }
        }
        let reached = fs.fired().is_some();
        for applied in [0, usize::MAX] {
            let img = tmp.path().join(format!("image{cut}-{applied}"));
            std::fs::create_dir_all(&img).unwrap();
            fs.crash_image(&img, applied).unwrap();
            let c = ManualClock::new(T0);
            let s = Store::open(&img, opts(&c)).unwrap();
            for (k, ttl) in &acked {
                assert!(s.get(k).unwrap().is_some(), "cut {cut}: {k:?} lost");
                c.set(T0 + ttl);
                assert!(
                    s.get(k).unwrap().is_none(),
                    "cut {cut}: {k:?} lost its expiry"
                );
                c.set(T0);
            }
        }
        if !reached {
            break;
        }
        cut += 1;
    }
    assert!(cut > 10, "only {cut} sync points");
}

/// With automatic compaction on, a table of expired sessions at the bottom that no write
/// reaches is rewritten by the compaction thread on its own once the clock passes enough of
/// its expiries (`plan_expired`, polled every second while tables hold expiring entries).
#[test]
fn the_compaction_thread_reclaims_expired_bottom_tables_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let o = opts(&clock).compaction_trigger(Some(4));
    let store = Store::open(dir.path(), o).unwrap();
    for i in 0..4_000u32 {
        store
            .put_with_ttl(format!("s{i:06}"), [b'x'; 100], Duration::from_secs(60))
            .unwrap();
    }
    store.flush().unwrap();
    store.compact().unwrap();
    let (keys, _) = table_facts(&store);
    assert_eq!(keys, 4_000);
    // Nothing is due: the clock has not reached an expiry.
    store.wait_for_compaction().unwrap();
    assert_eq!(table_facts(&store).0, 4_000);
    clock.advance(Duration::from_secs(61));
    // The thread polls; wait for it (bounded), counting what is left, not timing it.
    let mut left = u64::MAX;
    for _ in 0..200 {
        left = table_facts(&store).0;
        if left == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(left, 0, "expired entries still in tables");
    assert_eq!(store.stats().tables.len(), 0);
}

/// `tests/fixtures/wal-v3-expiring.wal` (made from format.md, "Write-ahead log", by a
/// script, not by the writer): record 12 holds a put of `session-a` expiring at
/// 1,800,000,000,000 ms (op code 4) and a plain put, record 13 a put of `session-b` expiring
/// a minute later. A store whose log it is replays both expiries.
#[test]
fn a_checked_in_log_of_expiring_puts_replays_with_its_expiries() {
    const E: u64 = 1_800_000_000_000;
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/wal-v3-expiring.wal");
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path(), Options::default()).unwrap());
    std::fs::copy(&path, dir.path().join("000099.wal")).unwrap();
    let clock = ManualClock::new(E - 1);
    let store = Store::open(dir.path(), opts(&clock)).unwrap();
    assert_eq!(store.last_seq(), 13);
    let get = |k: &str| {
        store
            .get(k)
            .unwrap()
            .map(|v| String::from_utf8(v.to_vec()).unwrap())
    };
    assert_eq!(get("session-a").as_deref(), Some("alice"));
    assert_eq!(get("session-b").as_deref(), Some("bob"));
    clock.set(E);
    assert_eq!(get("session-a"), None);
    assert_eq!(get("session-b").as_deref(), Some("bob"));
    clock.set(E + 60_000);
    assert_eq!(get("session-b"), None);
    assert_eq!(get("plain").as_deref(), Some("stays"));
}

/// Expiry beside range deletion and transactions: a range tombstone hides older entries
/// whether they expire or not (in the memtable, in a table, after compaction), a later
/// expiring put inside a deleted range is seen until it expires, and a transaction's puts
/// expire by its write options' time to live (fails if a range tombstone skipped expiring
/// entries, or a transaction dropped the TTL).
#[test]
fn expiry_with_range_deletion_and_transactions() {
    for flush in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let store = Store::open(dir.path(), opts(&clock)).unwrap();
        store
            .put_with_ttl("b1", "x", Duration::from_secs(100))
            .unwrap();
        store.put("b2", "y").unwrap();
        store
            .put_with_ttl("c1", "z", Duration::from_secs(100))
            .unwrap();
        if flush {
            store.flush().unwrap();
        }
        store.delete_range("b", "c").unwrap();
        store
            .put_with_ttl("b3", "w", Duration::from_secs(10))
            .unwrap();
        let mut tx = store.transaction_opt(&WriteOptions::default().ttl(Duration::from_secs(10)));
        tx.put("t1", "v");
        tx.commit().unwrap();
        if flush {
            store.flush().unwrap();
        }
        let keys = |s: &Store| -> Vec<Vec<u8>> {
            s.scan::<&[u8]>(..).map(|r| r.unwrap().0.to_vec()).collect()
        };
        assert_eq!(store.get("b1").unwrap(), None);
        assert_eq!(store.get("b2").unwrap(), None);
        assert_eq!(store.get("b3").unwrap(), Some(Slice::from(b"w")));
        assert_eq!(store.get("t1").unwrap(), Some(Slice::from(b"v")));
        assert_eq!(
            keys(&store),
            [b"b3".to_vec(), b"c1".to_vec(), b"t1".to_vec()]
        );
        clock.advance(Duration::from_secs(10));
        assert_eq!(store.get("b3").unwrap(), None);
        assert_eq!(store.get("t1").unwrap(), None);
        assert_eq!(keys(&store), [b"c1".to_vec()]);
        store.compact().unwrap();
        assert_eq!(keys(&store), [b"c1".to_vec()]);
        assert_eq!(store.get("b1").unwrap(), None);
        drop(store);
        let store = Store::open(dir.path(), opts(&clock)).unwrap();
        assert_eq!(keys(&store), [b"c1".to_vec()]);
        clock.advance(Duration::from_secs(90));
        assert_eq!(keys(&store), Vec::<Vec<u8>>::new());
    }
}
