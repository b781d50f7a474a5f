//! Stores with keyspaces through the lifecycle features: checkpoints (one cut across every
//! keyspace, power cuts at every sync point, cross-keyspace batches whole in checkpoints
//! taken beside writers), read-only handles (each keyspace read, refreshed, writes refused)
//! and repair (each table back in its keyspace).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

use filterstore::io::FaultFs;
use filterstore::{FilterKind, KeyspaceOptions, Options, Store, SyncPolicy, WriteBatch};

use common::model::{contents, keyspace_contents as all, Model as Contents};

/// A scratch directory on a RAM file system when there is one (these tests seal many small
/// memtables: an fsync each).
fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().unwrap()
}

fn open_existing(dir: &Path) -> filterstore::Result<Store> {
    Store::open(dir, Options::default().create_if_missing(false))
}

fn assert_verified(dir: &Path, what: &str) {
    let r = filterstore::verify::verify_dir(dir).unwrap();
    assert!(r.is_intact(), "{what}: verify_dir: {:?}", r.problems);
}

/// One write of the model: keyspace name ("" for the default one), key, value (`None`:
/// deleted).
type ModelOp = (String, Vec<u8>, Option<Vec<u8>>);

/// The model's writes: batch `i` puts `k{i}` into the default keyspace and into `a` and `b`
/// (each with its own value), and deletes `k{i-7}` from `b`.
fn batch(store: &Store, i: u64) -> (WriteBatch, [ModelOp; 4]) {
    let (a, b) = (
        store.existing_keyspace("a").unwrap(),
        store.existing_keyspace("b").unwrap(),
    );
    let k = format!("k{i:06}").into_bytes();
    let gone = format!("k{:06}", i.wrapping_sub(7)).into_bytes();
    let v = |ks: &str| format!("{ks}-{i}-{}", "v".repeat((i % 23) as usize)).into_bytes();
    let mut w = WriteBatch::new();
    w.put(k.clone(), v("d"))
        .put_in(&a, k.clone(), v("a"))
        .put_in(&b, k.clone(), v("b"))
        .delete_in(&b, gone.clone());
    let ops = [
        (String::new(), k.clone(), Some(v("d"))),
        ("a".to_string(), k.clone(), Some(v("a"))),
        ("b".to_string(), k, Some(v("b"))),
        ("b".to_string(), gone, None),
    ];
    (w, ops)
}

fn apply(model: &mut BTreeMap<String, Contents>, ops: &[ModelOp]) {
    for (ks, k, v) in ops {
        let m = model.entry(ks.clone()).or_default();
        match v {
            Some(v) => m.insert(k.clone(), v.clone()),
            None => m.remove(k),
        };
    }
}

/// A store with keyspaces `a` (cuckoo filters, no range filters) and `b` beside the
/// default one, `n` model batches written, the first half flushed.
fn model_store(dir: &Path, opts: Options, n: u64) -> (Store, BTreeMap<String, Contents>) {
    let store = Store::open(dir, opts).unwrap();
    store
        .keyspace_with(
            "a",
            KeyspaceOptions::default()
                .filter(FilterKind::Cuckoo)
                .range_filter_bits(0.0),
        )
        .unwrap();
    store.keyspace("b").unwrap();
    let mut model: BTreeMap<String, Contents> = ["", "a", "b"]
        .iter()
        .map(|k| (k.to_string(), Contents::new()))
        .collect();
    for i in 0..n {
        let (w, ops) = batch(&store, i);
        store.write(w).unwrap();
        apply(&mut model, &ops);
        if i == n / 2 {
            store.flush().unwrap();
        }
    }
    (store, model)
}

#[test]
fn a_checkpoint_holds_every_keyspace_with_its_options() {
    let tmp = scratch_dir();
    let opts = Options::default()
        .memtable_bytes(16 << 10)
        .sync(SyncPolicy::OnFlush);
    let (store, model) = model_store(&tmp.path().join("store"), opts, 2000);
    let dest = tmp.path().join("cp");
    // From a keyspace's handle too: a checkpoint is the store's.
    let a = store.existing_keyspace("a").unwrap();
    let r = a.as_store().checkpoint_with_report(&dest).unwrap();
    assert!(r.linked_files > 0, "{r:?}");
    // The source is unchanged (but for the flush), and writable.
    assert_eq!(all(&store), model);
    store
        .existing_keyspace("b")
        .unwrap()
        .put("after", "x")
        .unwrap();
    drop((a, store));
    assert!(
        !std::fs::read_dir(&dest).unwrap().any(|e| e
            .unwrap()
            .path()
            .extension()
            .is_some_and(|x| x == "wal")),
        "a checkpoint holds no log"
    );
    assert_verified(&dest, "checkpoint");
    let cp = open_existing(&dest).unwrap();
    assert_eq!(cp.keyspaces(), ["a", "b"]);
    assert_eq!(all(&cp), model);
    // The keyspace options came along.
    let a = cp.existing_keyspace("a").unwrap();
    a.put("new", "1").unwrap();
    a.flush().unwrap();
    let st = a.stats();
    assert!(st.tables > 0);
    assert_eq!(a.as_store().filter().0, FilterKind::Cuckoo);
}

/// Checkpoints taken while threads write batches across the three keyspaces: in each, every
/// batch is whole (its key in all three keyspaces or in none), each thread's batches a
/// prefix of its writes holding at least those acknowledged before the checkpoint began.
#[test]
fn a_cross_keyspace_batch_is_whole_in_checkpoints_taken_beside_writers() {
    let tmp = scratch_dir();
    let dir = tmp.path().join("store");
    // Small memtables under one budget: the trees switch at different moments.
    let opts = Options::default()
        .memtable_bytes(24 << 10)
        .table_bytes(16 << 10)
        .compaction_trigger(Some(2))
        .sync(SyncPolicy::OnFlush);
    let store = Store::open(&dir, opts).unwrap();
    let a = store.keyspace("a").unwrap();
    let b = store.keyspace("b").unwrap();
    let threads = 2u64;
    let key = |t: u64, i: u64| format!("t{t}k{i:07}").into_bytes();
    let (checkpoints, _) = {
        let (s, a, b) = (store.clone(), a.clone(), b.clone());
        common::checkpoints_beside_writers(
            &store,
            tmp.path(),
            threads,
            (400_000, 5, 2000),
            move |t, i| {
                let k = key(t, i);
                let mut w = WriteBatch::new();
                // Values of different sizes: the trees fill at different rates, the
                // default keyspace's first (its seal holds the lock a checkpoint takes
                // first: one sealed after the cut would be in it, torn from the others).
                w.put(k.clone(), vec![b'd'; 90])
                    .put_in(&a, k.clone(), vec![b'a'; 40])
                    .put_in(&b, k, vec![b'b'; 10]);
                s.write(w).unwrap();
            },
        )
    };
    drop((a, b, store));
    for (dest, before) in &checkpoints {
        let what = dest.display().to_string();
        let cp = open_existing(dest).unwrap();
        let got = all(&cp);
        let keys = |ks: &str| got[ks].keys().cloned().collect::<Vec<_>>();
        let d = keys("");
        assert_eq!(d, keys("a"), "{what}: a batch torn between default and a");
        assert_eq!(d, keys("b"), "{what}: a batch torn between default and b");
        let mut found = vec![0u64; threads as usize];
        for k in &d {
            let s = String::from_utf8(k.clone()).unwrap();
            let (t, i) = s[1..].split_once('k').unwrap();
            let (t, i): (usize, u64) = (t.parse().unwrap(), i.parse().unwrap());
            assert_eq!(i, found[t], "{what}: thread {t}'s batches are not a prefix");
            found[t] += 1;
        }
        for (t, &n) in before.iter().enumerate() {
            assert!(found[t] >= n, "{what}: thread {t}: {} of {n}", found[t]);
        }
    }
}

/// The source for the power-cut tests: every write synced, part in tables, part in the log.
fn fault_store(root: &Path) -> (Store, FaultFs, BTreeMap<String, Contents>) {
    let fs = FaultFs::new();
    let opts = Options::default()
        .memtable_bytes(16 << 10)
        .compaction_trigger(None)
        .idle_drain(None)
        .sync(SyncPolicy::EveryWrite)
        .fs(Arc::new(fs.clone()));
    let (store, model) = model_store(&root.join("store"), opts, 300);
    (store, fs, model)
}

/// What a failed checkpoint left in `root`: `cp` does not exist or opens whole; the source
/// opens with every write. Whether `cp` was there.
fn check_after_failure(root: &Path, model: &BTreeMap<String, Contents>, what: &str) -> bool {
    let dest = root.join("cp");
    let whole = dest.exists();
    if whole {
        let cp = open_existing(&dest).unwrap_or_else(|e| panic!("{what}: cp: {e}"));
        assert_eq!(&all(&cp), model, "{what}: cp");
    }
    let store = open_existing(&root.join("store")).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(&all(&store), model, "{what}: source");
    whole
}

#[test]
fn a_power_cut_at_every_sync_point_of_a_checkpoint_with_keyspaces() {
    let (k, images, whole) =
        common::checkpoint_power_cuts(scratch_dir, fault_store, |img, model, what| {
            check_after_failure(img, model, what)
        });
    assert!(images > 0);
    println!("checkpoint power cuts: {k} sync points, {images} images, {whole} whole");
}

/// A read-only handle beside a writer of a store with keyspaces: each keyspace reads as the
/// writer's after every refresh (the writer's batches, flushes of one keyspace or all,
/// compactions, a keyspace created, one dropped and re-created), writes are refused, and a
/// keyspace's handle refreshes the whole store.
#[test]
fn a_read_only_handle_reads_every_keyspace_and_follows_the_writer() {
    let tmp = scratch_dir();
    let dir = tmp.path().join("store");
    let opts = Options::default()
        .memtable_bytes(8 << 10)
        .table_bytes(8 << 10)
        .compaction_trigger(Some(2))
        .sync(SyncPolicy::OnFlush);
    let (writer, mut model) = model_store(&dir, opts, 300);
    assert_eq!(all(&writer), model);
    let reader = Store::open_read_only(&dir).unwrap();
    assert_eq!(reader.keyspaces(), ["a", "b"]);
    assert_eq!(all(&reader), model);
    // Writes refused, through the store and a keyspace; no keyspace created.
    let ra = reader.keyspace("a").unwrap();
    assert!(matches!(
        ra.put("x", "y"),
        Err(filterstore::Error::ReadOnly(_))
    ));
    assert!(matches!(
        reader.keyspace("new"),
        Err(filterstore::Error::ReadOnly(_))
    ));
    let mut batch_in = WriteBatch::new();
    batch_in.put_in(&ra, "x", "y");
    assert!(matches!(
        reader.write(batch_in),
        Err(filterstore::Error::ReadOnly(_))
    ));
    assert!(ra.flush().is_err() && ra.compact().is_err());
    let mut rng = common::Rng::new(38);
    let mut i = 300;
    for round in 0..40 {
        for _ in 0..rng.below(120) {
            let (w, ops) = batch(&writer, i);
            writer.write(w).unwrap();
            apply(&mut model, &ops);
            i += 1;
        }
        match rng.below(6) {
            0 => writer.existing_keyspace("a").unwrap().flush().unwrap(),
            1 => writer.flush().unwrap(),
            2 => writer.existing_keyspace("b").unwrap().compact().unwrap(),
            _ => {}
        }
        if round == 20 {
            let c = writer.keyspace("c").unwrap();
            c.put("c-key", "c-value").unwrap();
            let m = model.entry("c".to_string()).or_default();
            m.insert(b"c-key".to_vec(), b"c-value".to_vec());
        }
        if round == 30 {
            writer.drop_keyspace("b").unwrap();
            writer.keyspace("b").unwrap();
            model.insert("b".to_string(), Contents::new());
        }
        // Every other round through a keyspace's handle.
        if round % 2 == 0 {
            reader.refresh().unwrap();
        } else {
            ra.as_store().refresh().unwrap();
        }
        assert_eq!(all(&writer), model, "round {round}: writer");
        assert_eq!(all(&reader), model, "round {round}: reader");
    }
    assert_eq!(reader.keyspaces(), ["a", "c", "b"]);
    drop(writer);
    reader.refresh().unwrap();
    assert_eq!(all(&reader), model);
}

/// A reader refreshing in a loop beside a writer of batches across three keyspaces: every
/// snapshot of the reader holds each batch in all three keyspaces or in none.
#[test]
fn a_read_only_snapshot_holds_cross_keyspace_batches_whole() {
    let tmp = scratch_dir();
    let dir = tmp.path().join("store");
    // Memtables large enough that the writer's manifest does not change under every read
    // (a read tries 20 times).
    let opts = Options::default()
        .memtable_bytes(256 << 10)
        .compaction_trigger(Some(4))
        .sync(SyncPolicy::OnFlush);
    let store = Store::open(&dir, opts).unwrap();
    let (a, b) = (store.keyspace("a").unwrap(), store.keyspace("b").unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let w = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(SeqCst) && i < 200_000 {
                let k = format!("k{i:07}").into_bytes();
                let mut w = WriteBatch::new();
                w.put(k.clone(), vec![b'd'; 60])
                    .put_in(&a, k.clone(), vec![b'a'; 20])
                    .put_in(&b, k, vec![b'b'; 5]);
                store.write(w).unwrap();
                i += 1;
            }
        })
    };
    let reader = Store::open_read_only(&dir).unwrap();
    let mut seen = 0;
    for n in 0..40 {
        // The writer's progress (its table sets and logs changing) between refreshes.
        while store.last_seq() < 1000 * (n + 1) {
            std::thread::yield_now();
        }
        reader.refresh().unwrap();
        let snap = reader.snapshot();
        let keys = |s: filterstore::Scan| s.map(|e| e.unwrap().0.to_vec()).collect::<Vec<_>>();
        let d = keys(snap.scan::<&[u8]>(..));
        let ra = reader.existing_keyspace("a").unwrap();
        let rb = reader.existing_keyspace("b").unwrap();
        assert_eq!(d, keys(snap.keyspace(&ra).unwrap().scan::<&[u8]>(..)));
        assert_eq!(d, keys(snap.keyspace(&rb).unwrap().scan::<&[u8]>(..)));
        assert!(d.len() >= seen, "a refresh went back");
        seen = d.len();
    }
    stop.store(true, SeqCst);
    w.join().unwrap();
    assert!(seen > 0);
}

/// A store with keyspaces, tables at several levels and writes in the log, closed. Its
/// compactions run between flushes, not beside them: with the manifest's order lost, a
/// repair orders tables by number (docs/reliability.md).
fn repair_store(dir: &Path) -> BTreeMap<String, Contents> {
    let opts = Options::default()
        .memtable_bytes(8 << 10)
        .table_bytes(8 << 10)
        .compaction_trigger(None);
    let (store, mut model) = model_store(dir, opts, 1200);
    for ks in [
        store.clone(),
        store.existing_keyspace("a").unwrap().as_store().clone(),
        store.existing_keyspace("b").unwrap().as_store().clone(),
    ] {
        ks.flush().unwrap();
        ks.compact().unwrap();
    }
    for i in 1200..1500 {
        let (w, ops) = batch(&store, i);
        store.write(w).unwrap();
        apply(&mut model, &ops);
    }
    let deep = |s: &Store| s.stats().levels.iter().any(|l| l.level > 0 && l.tables > 0);
    let deep = deep(&store)
        && ["a", "b"]
            .iter()
            .all(|n| deep(store.existing_keyspace(n).unwrap().as_store()));
    assert!(deep, "every keyspace has tables below L0");
    store.close().unwrap();
    model
}

/// A manifest whose CRC fails but whose bytes decode: repair puts each table back in its
/// keyspace (at L0, newest first, as with the manifest lost), rebuilds the filters at the
/// keyspace's kind, replays every log into its keyspace; every keyspace reads as the model.
#[test]
fn repair_puts_each_table_back_in_its_keyspace() {
    let tmp = scratch_dir();
    let dir = tmp.path().join("store");
    let model = repair_store(&dir);
    let manifest = dir.join("MANIFEST");
    let mut bytes = std::fs::read(&manifest).unwrap();
    bytes[12] ^= 0x5a; // the body's CRC
    std::fs::write(&manifest, &bytes).unwrap();
    assert!(
        open_existing(&dir).is_err(),
        "a damaged manifest is refused"
    );
    let r = filterstore::repair(&dir).unwrap();
    assert!(r.needed && r.verify.is_intact(), "{r:?}");
    assert!(
        r.dropped.iter().any(|d| d.reason.contains("decodes")),
        "{:?}",
        r.dropped
    );
    let store = open_existing(&dir).unwrap();
    assert_eq!(store.keyspaces(), ["a", "b"]);
    assert_eq!(all(&store), model);
    // The keyspaces keep their recorded options and take writes.
    let a = store.existing_keyspace("a").unwrap();
    assert_eq!(a.as_store().filter().0, FilterKind::Cuckoo);
    a.put("after", "repair").unwrap();
    drop((a, store));
    let store = open_existing(&dir).unwrap();
    let a = store.existing_keyspace("a").unwrap();
    assert_eq!(a.get("after").unwrap().unwrap(), "repair");
}

/// With the manifest gone, no file says which keyspace a table or a log record belongs to
/// (format.md, "Keyspaces"): repair puts them all in the default keyspace, and the store
/// opens, verifies, and holds no key any keyspace did not.
#[test]
fn repair_without_a_manifest_puts_every_table_in_the_default_keyspace() {
    let tmp = scratch_dir();
    let dir = tmp.path().join("store");
    let model = repair_store(&dir);
    std::fs::remove_file(dir.join("MANIFEST")).unwrap();
    let r = filterstore::repair(&dir).unwrap();
    assert!(r.needed && r.verify.is_intact(), "{r:?}");
    let store = open_existing(&dir).unwrap();
    assert!(store.keyspaces().is_empty());
    let got = contents(store.scan::<&[u8]>(..));
    assert!(!got.is_empty());
    for (k, v) in &got {
        assert!(
            model.values().any(|m| m.get(k) == Some(v)),
            "{k:?} holds a value no keyspace held"
        );
    }
}
