//! The global filter in named keyspaces (issue 38): a keyspace under the global filter
//! beside a default keyspace with per-table filters, its own checkpoint (`GLOBALFILTER-ID`)
//! written at close and loaded at open, a stale or damaged one rebuilt alone, a dropped
//! keyspace's checkpoint never loaded, and power cuts at every sync point of close and of
//! `drop_keyspace`.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::model::{keyspace_contents as all, Model};
use common::{power_cut_options, Rng};
use filterstore::io::{FaultFs, NoSyncFs};
use filterstore::{FilterKind, Keyspace, KeyspaceOptions, Options, Store, WriteBatch};

type Contents = BTreeMap<String, Model>;

fn global() -> KeyspaceOptions {
    KeyspaceOptions::default().filter(FilterKind::Global)
}

/// Small tables and levels, so that flushes, compactions and trivial moves come often.
fn small(filter: FilterKind) -> Options {
    Options::default()
        .filter(filter)
        .memtable_bytes(8 << 10)
        .compaction_trigger(Some(2))
        .table_bytes(4 << 10)
        .l1_bytes(16 << 10)
        .level_ratio(3)
        .fs(Arc::new(NoSyncFs))
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// `n` keys between the model's (`k00042x`): absent, inside every table's key range, so
/// that only a filter can rule them out. Returns (filter negatives of the keyspace, probes
/// of its global filter, data blocks read) added by the lookups.
fn absent_gets(ks: &Keyspace, n: u64) -> (u64, u64, u64) {
    let before = (ks.stats(), ks.as_store().stats());
    for i in 0..n {
        let mut k = key(i * 7 % 2000);
        k.push(b'x');
        assert_eq!(ks.get(&k).unwrap(), None);
    }
    let after = (ks.stats(), ks.as_store().stats());
    let probes = |s: &filterstore::KeyspaceStats| s.global_filter.as_ref().map_or(0, |g| g.probes);
    (
        after.0.filter_negatives - before.0.filter_negatives,
        probes(&after.0) - probes(&before.0),
        after.1.data_block_reads - before.1.data_block_reads,
    )
}

/// Asserts that keyspace `g` is under its own global filter, that it agrees with its
/// tables, and whether it was loaded from its checkpoint (`loaded`); the default keyspace
/// has per-table filters and no global filter.
fn assert_global(store: &Store, g: &Keyspace, loaded: Option<bool>, at: &str) {
    let gf = g
        .stats()
        .global_filter
        .unwrap_or_else(|| panic!("{at}: no global filter"));
    if let Some(loaded) = loaded {
        assert_eq!(gf.from_checkpoint, loaded, "{at}: {gf:?}");
    }
    assert!(g.check_global_filter().unwrap().is_some(), "{at}");
    assert_eq!(store.check_global_filter().unwrap(), None, "{at}");
    assert!(store.stats().global_filter.is_none(), "{at}");
    assert_eq!(g.recorded_policy().kind(), FilterKind::Global, "{at}");
}

/// A model test: a keyspace under the global filter beside the default keyspace with
/// per-table filters, through random puts, deletes, cross-keyspace batches, flushes,
/// compactions and reopens. After each reopen the keyspace's filter is the one its
/// checkpoint held (loaded, not rebuilt), both keyspaces read as the model, and absent
/// keys are answered by the filter without a data block read.
#[test]
fn a_global_keyspace_beside_a_per_table_default_against_a_model() {
    for seed in 1..=2u64 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut rng = Rng::new(seed);
        let mut model = Contents::new();
        model.insert(String::new(), Model::new());
        model.insert("g".into(), Model::new());
        let mut store = Store::open(dir, small(FilterKind::BlockedBloom)).unwrap();
        let mut g = store.keyspace_with("g", global()).unwrap();
        assert_global(&store, &g, Some(false), "created");
        for round in 0..4 {
            for step in 0..700u64 {
                let name = if rng.below(2) == 0 { "" } else { "g" };
                let h = if name.is_empty() {
                    &store
                } else {
                    g.as_store()
                };
                let k = key(rng.below(2000));
                match rng.below(10) {
                    0 => {
                        h.delete(&k).unwrap();
                        model.get_mut(name).unwrap().remove(&k);
                    }
                    1 => {
                        // One batch across both keyspaces.
                        let v = format!("b{round}-{step}").into_bytes();
                        let mut b = WriteBatch::new();
                        b.put(k.clone(), v.clone()).put_in(&g, k.clone(), v.clone());
                        store.write(b).unwrap();
                        model.get_mut("").unwrap().insert(k.clone(), v.clone());
                        model.get_mut("g").unwrap().insert(k, v);
                    }
                    _ => {
                        let v = format!("{round}-{step}-{}", "v".repeat(20)).into_bytes();
                        h.put(&k, &v).unwrap();
                        model.get_mut(name).unwrap().insert(k, v);
                    }
                }
                if step % 250 == 249 {
                    g.flush().unwrap();
                    store.flush().unwrap();
                }
            }
            if round == 2 {
                g.compact().unwrap();
            }
            store.wait_for_compaction().unwrap();
            assert_eq!(all(&store), model, "seed {seed}, round {round}");
            assert_global(&store, &g, None, "before the reopen");
            let tables = g.stats().tables;
            drop(g);
            store.close().unwrap();
            assert!(dir.join("GLOBALFILTER-1").exists(), "written at close");
            assert!(!dir.join("GLOBALFILTER").exists(), "the default has none");
            store = Store::open(dir, small(FilterKind::BlockedBloom)).unwrap();
            g = store.existing_keyspace("g").unwrap();
            assert!(tables > 0, "seed {seed}, round {round}");
            assert_global(
                &store,
                &g,
                Some(true),
                &format!("seed {seed}, round {round}"),
            );
            assert_eq!(all(&store), model, "seed {seed}, round {round}, reopened");
            let (negatives, probes, reads) = absent_gets(&g, 500);
            assert_eq!(probes, 500, "every absent get asks the global filter");
            assert!(
                negatives >= 490,
                "seed {seed}, round {round}: {negatives} of 500"
            );
            assert!(
                reads <= 10,
                "seed {seed}, round {round}: {reads} block reads"
            );
        }
    }
}

/// Two trees under the global filter (the default keyspace and `g`): a stale or damaged
/// checkpoint of one is rebuilt from its tables, and the other's is still loaded.
#[test]
fn a_stale_or_damaged_checkpoint_rebuilds_that_keyspace_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = small(FilterKind::Global);
    let mut model = Contents::new();
    let write = |store: &Store, model: &mut Contents, from: u64, to: u64| {
        let g = store.keyspace_with("g", global()).unwrap();
        for i in from..to {
            let (k, v) = (key(i * 7919 % 3000), format!("v{i}").into_bytes());
            store.put(&k, &v).unwrap();
            g.put(&k, &v).unwrap();
            model
                .entry(String::new())
                .or_default()
                .insert(k.clone(), v.clone());
            model.entry("g".into()).or_default().insert(k, v);
        }
        store.flush().unwrap();
        g.flush().unwrap();
        store.wait_for_compaction().unwrap();
    };
    let store = Store::open(dir, o.clone()).unwrap();
    write(&store, &mut model, 0, 1500);
    store.close().unwrap();
    let (ck, ckg) = (dir.join("GLOBALFILTER"), dir.join("GLOBALFILTER-1"));
    let (old, oldg) = (std::fs::read(&ck).unwrap(), std::fs::read(&ckg).unwrap());
    let store = Store::open(dir, o.clone()).unwrap();
    write(&store, &mut model, 1500, 3000);
    store.close().unwrap();
    let loaded = |store: &Store| {
        let g = store.existing_keyspace("g").unwrap();
        let d = store.stats().global_filter.unwrap().from_checkpoint;
        let gg = g.stats().global_filter.unwrap().from_checkpoint;
        assert!(store.check_global_filter().unwrap().is_some());
        assert!(g.check_global_filter().unwrap().is_some());
        assert_eq!(all(store), model);
        (d, gg)
    };
    // Both current: both loaded.
    let store = Store::open(dir, o.clone()).unwrap();
    assert_eq!(loaded(&store), (true, true));
    store.close().unwrap();
    // The keyspace's stale (written for its tables of before): it alone is rebuilt.
    std::fs::write(&ckg, &oldg).unwrap();
    let store = Store::open(dir, o.clone()).unwrap();
    assert_eq!(loaded(&store), (true, false));
    store.close().unwrap();
    // The default keyspace's damaged (a bit of the table words flipped): it alone.
    let mut bytes = std::fs::read(&ck).unwrap();
    let at = bytes.len() - 9;
    bytes[at] ^= 0x10;
    std::fs::write(&ck, &bytes).unwrap();
    let store = Store::open(dir, o.clone()).unwrap();
    assert_eq!(loaded(&store), (false, true));
    store.close().unwrap();
    // The default keyspace's checkpoint as the keyspace's, and the reverse: each is
    // stale for the other's tables.
    std::fs::write(&ckg, std::fs::read(&ck).unwrap()).unwrap();
    std::fs::write(&ck, &old).unwrap();
    let store = Store::open(dir, o).unwrap();
    assert_eq!(loaded(&store), (false, false));
}

/// A dropped keyspace's checkpoint goes with it; one left behind (a crash between the
/// manifest step and its removal) or one planted under the next id is removed at open and
/// never loaded into a later keyspace; names that are not a checkpoint's are left alone.
#[test]
fn a_dropped_keyspaces_checkpoint_is_never_loaded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = small(FilterKind::BlockedBloom);
    let store = Store::open(dir, o.clone()).unwrap();
    let g = store.keyspace_with("g", global()).unwrap();
    for i in 0..1500 {
        g.put(key(i), b"old").unwrap();
    }
    drop(g);
    store.close().unwrap();
    let ckpt = std::fs::read(dir.join("GLOBALFILTER-1")).unwrap();
    let store = Store::open(dir, o.clone()).unwrap();
    store.drop_keyspace("g").unwrap();
    assert!(
        !dir.join("GLOBALFILTER-1").exists(),
        "removed with its keyspace"
    );
    store.close().unwrap();
    for name in ["GLOBALFILTER-1", "GLOBALFILTER-2", "GLOBALFILTER-2.tmp"] {
        std::fs::write(dir.join(name), &ckpt).unwrap();
    }
    for name in ["GLOBALFILTER-02", "GLOBALFILTER-x"] {
        std::fs::write(dir.join(name), b"not a store file").unwrap();
    }
    let store = Store::open(dir, o.clone()).unwrap();
    for name in ["GLOBALFILTER-1", "GLOBALFILTER-2", "GLOBALFILTER-2.tmp"] {
        assert!(!dir.join(name).exists(), "{name} removed at open");
    }
    for name in ["GLOBALFILTER-02", "GLOBALFILTER-x"] {
        assert!(
            dir.join(name).exists(),
            "{name}: not the store's, left alone"
        );
    }
    let g = store.keyspace_with("g", global()).unwrap();
    assert_eq!(g.id(), 2);
    assert_eq!(g.get(key(7)).unwrap(), None);
    g.put(key(7), b"new").unwrap();
    g.flush().unwrap();
    drop(g);
    store.close().unwrap();
    // Planted again before this open: the file is its own keyspace's now, written at the
    // close above, so the planted one is stale and not loaded.
    std::fs::write(dir.join("GLOBALFILTER-2"), &ckpt).unwrap();
    let store = Store::open(dir, o).unwrap();
    let g = store.existing_keyspace("g").unwrap();
    let gf = g.stats().global_filter.unwrap();
    assert!(!gf.from_checkpoint, "{gf:?}");
    assert_eq!(g.check_global_filter().unwrap(), Some(1));
    assert_eq!(all(&store)["g"].len(), 1);
    assert_eq!(g.get(key(7)).unwrap().unwrap(), b"new");
}

/// Refilters per keyspace: a keyspace created with per-table filters switches to the
/// global filter and back, and the default keyspace is untouched throughout.
#[test]
fn a_keyspace_switches_to_the_global_filter_and_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = small(FilterKind::BlockedBloom);
    let store = Store::open(dir, o.clone()).unwrap();
    let a = store.keyspace("a").unwrap();
    for i in 0..1000 {
        a.put(key(i), b"a").unwrap();
        store.put(key(i), b"d").unwrap();
    }
    a.flush().unwrap();
    store.flush().unwrap();
    assert!(a.stats().global_filter.is_none());
    a.refilter(FilterKind::Global, 0.01).unwrap();
    assert!(a.stats().global_filter.is_some());
    assert_eq!(a.check_global_filter().unwrap(), Some(1000));
    assert_eq!(store.check_global_filter().unwrap(), None);
    drop(a);
    store.close().unwrap();
    let store = Store::open(dir, o.clone()).unwrap();
    let a = store.existing_keyspace("a").unwrap();
    assert!(a.stats().global_filter.unwrap().from_checkpoint);
    assert_eq!(a.get(key(5)).unwrap().unwrap(), b"a");
    let ck = dir.join(format!("GLOBALFILTER-{}", a.id()));
    assert!(
        ck.exists(),
        "read at open, kept while the keyspace is under the filter"
    );
    a.refilter(FilterKind::Bloom, 0.01).unwrap();
    assert!(a.stats().global_filter.is_none());
    assert_eq!(a.check_global_filter().unwrap(), None);
    assert!(!ck.exists(), "answers for nothing once switched away");
    drop(a);
    store.close().unwrap();
    // One left by a crash between the switch and its removal goes at the next open.
    std::fs::write(&ck, b"left over").unwrap();
    std::fs::write(dir.join("GLOBALFILTER"), b"left over").unwrap();
    let store = Store::open(dir, o).unwrap();
    assert!(!ck.exists() && !dir.join("GLOBALFILTER").exists());
    let a = store.existing_keyspace("a").unwrap();
    assert!(a.stats().global_filter.is_none());
    assert_eq!(a.recorded_policy().kind(), FilterKind::Bloom);
    assert_eq!(store.get(key(5)).unwrap().unwrap(), b"d");
}

/// A closed store with a global keyspace `g` (its checkpoint `GLOBALFILTER-1` written) and
/// the default keyspace (per-table filters), part in tables and part in the logs, made once
/// (through the real file system) and copied for each run of the power-cut tests; with
/// what it holds.
fn template() -> (tempfile::TempDir, Contents) {
    let tmp = tempfile::tempdir().unwrap();
    let o = power_cut_options(&FaultFs::new()).fs(Arc::new(NoSyncFs));
    let store = Store::open(tmp.path(), o).unwrap();
    let g = store.keyspace_with("g", global()).unwrap();
    let mut model = Contents::new();
    for i in 0..40 {
        let (k, v) = (key(i * 37 % 100), format!("v{i}-{}", "x".repeat(30)));
        let mut b = WriteBatch::new();
        b.put(k.clone(), v.clone()).put_in(&g, k.clone(), v.clone());
        store.write(b).unwrap();
        for name in ["", "g"] {
            let m = model.entry(name.to_string()).or_default();
            m.insert(k.clone(), v.clone().into_bytes());
        }
    }
    drop(g);
    store.close().unwrap();
    assert!(tmp.path().join("GLOBALFILTER-1").exists());
    (tmp, model)
}

/// The template's files copied into the new directory `dir`, taken by `fs` as durable, and
/// opened through it (`None` when a power cut stops the open).
fn open_copy(template: &Path, dir: &Path, fs: &FaultFs) -> Option<Store> {
    std::fs::create_dir_all(dir).unwrap();
    for e in std::fs::read_dir(template).unwrap().flatten() {
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
    }
    fs.adopt_dir(dir).unwrap();
    Store::open(dir, power_cut_options(fs)).ok()
}

/// Opens the crash image `img` and checks it holds `model` (when given), that `g` (if
/// live) is under a global filter that agrees with its tables and answers absent keys,
/// and that no checkpoint of a keyspace not live is left. Returns the contents and
/// whether `g`'s filter was loaded from its checkpoint.
fn check_image(img: &Path, model: Option<&Contents>, what: &str) -> (Contents, bool) {
    let store = Store::open(img, Options::default().fs(Arc::new(NoSyncFs)))
        .unwrap_or_else(|e| panic!("{what}: the image does not open: {e}"));
    let got = all(&store);
    if let Some(m) = model {
        assert_eq!(&got, m, "{what}");
    }
    let mut loaded = false;
    let live = store.existing_keyspace("g").map(|g| {
        let gf = g
            .stats()
            .global_filter
            .unwrap_or_else(|| panic!("{what}: no filter"));
        loaded = gf.from_checkpoint;
        assert!(g.check_global_filter().unwrap().is_some(), "{what}");
        let (negatives, probes, _) = absent_gets(&g, 50);
        assert_eq!(probes, 50, "{what}");
        // Absent keys a filter answers: the global filter's (or the deepest level's own).
        assert!(negatives >= 45, "{what}: {negatives} of 50");
        format!("GLOBALFILTER-{}", g.id())
    });
    let stray = std::fs::read_dir(img).unwrap().flatten().any(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        n.starts_with("GLOBALFILTER-") && Some(&n) != live.as_ref()
    });
    assert!(!stray, "{what}: a checkpoint of a keyspace not live");
    (got, loaded)
}

/// A power cut at every sync point of `close` (logs, counters, the keyspace's checkpoint
/// `GLOBALFILTER-1`), with every count of directory entries applied: every image opens
/// with every acknowledged write and a global filter that answers correctly.
#[test]
fn a_power_cut_at_every_sync_point_of_close() {
    let (template, mut model) = template();
    let mut loaded = 0;
    for k in 0.. {
        let tmp = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let store = open_copy(template.path(), tmp.path(), &fs).unwrap();
        let g = store.keyspace("g").unwrap();
        // A write in each keyspace's memtable (and in the log), acknowledged.
        let mut b = WriteBatch::new();
        b.put(key(1000), b"m".to_vec())
            .put_in(&g, key(1000), b"m".to_vec());
        store.write(b).unwrap();
        if k == 0 {
            for name in ["", "g"] {
                model
                    .get_mut(name)
                    .unwrap()
                    .insert(key(1000), b"m".to_vec());
            }
        }
        drop(g);
        fs.cut_power_at_sync(fs.syncs() + k);
        let _ = store.close();
        if fs.fired().is_none() {
            assert!(k >= 2, "close has more sync points than {k}");
            assert!(loaded > 0, "no image held the checkpoint");
            println!("close: {k} sync points");
            return;
        }
        for applied in 0..=fs.pending_dir_ops() {
            let img = tempfile::tempdir().unwrap();
            fs.crash_image(img.path(), applied).unwrap();
            let what = format!("cut at sync {k} of close, {applied} entries applied");
            loaded += u64::from(check_image(img.path(), Some(&model), &what).1);
        }
    }
}

/// A power cut at every sync point of a run that reopens a store whose global keyspace
/// `g` has its checkpoint (written at a clean close before the faults begin), drops the
/// keyspace, re-creates it (a new id) and writes on: every image opens in one of the
/// states between steps, the filter answering, and no checkpoint of the dropped keyspace
/// left or loaded.
#[test]
fn a_power_cut_at_every_sync_point_of_drop_keyspace() {
    let (template, model) = template();
    let tmp = tempfile::tempdir().unwrap();
    const STEPS: usize = 3;
    let run = |dir: &Path, fs: &FaultFs| -> (Vec<Contents>, usize) {
        let mut states = vec![model.clone()];
        let Some(store) = open_copy(template.path(), dir, fs) else {
            return (states, 0);
        };
        let mut acked = 0;
        for step in 0..STEPS {
            let r = match step {
                0 => store.drop_keyspace("g"),
                1 => store.keyspace_with("g", global()).map(drop),
                _ => {
                    let Ok(g) = store.keyspace("g") else { break };
                    let mut b = WriteBatch::new();
                    for j in 0..4u64 {
                        b.put(key(j), b"n".to_vec())
                            .put_in(&g, key(j), b"n".to_vec());
                    }
                    store.write(b).and_then(|()| g.flush())
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
    common::at_every_power_cut(tmp.path(), STEPS, run, |cut, img| {
        check_image(img, None, &format!("cut {cut}")).0
    });
}

/// A seal that writes no table (its memtable held no entry) takes no L0 id in the global
/// filter: an id kept with no table would make the checkpoint written at close disagree
/// with the tables, and the next open rebuild the filter instead of loading it.
#[test]
fn a_seal_without_a_table_takes_no_l0_id() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = small(FilterKind::BlockedBloom);
    let store = Store::open(dir, o.clone()).unwrap();
    let g = store.keyspace_with("g", global()).unwrap();
    // A deeper level first, so that L0 tables go into the global filter.
    for i in 0..100 {
        g.put(key(i), b"v").unwrap();
    }
    g.flush().unwrap();
    g.compact().unwrap();
    g.put(key(500), b"v").unwrap();
    g.flush().unwrap();
    // The default keyspace's writes roll the logs on: `g`, idle with an empty memtable,
    // holds the oldest log number and is switched to let it go (an empty seal).
    for round in 0..12 {
        for i in 0..50 {
            store.put(key(i), format!("{round}")).unwrap();
        }
        store.flush().unwrap();
    }
    drop(g);
    store.close().unwrap();
    let store = Store::open(dir, o).unwrap();
    let g = store.existing_keyspace("g").unwrap();
    let gf = g.stats().global_filter.unwrap();
    assert!(gf.from_checkpoint, "{gf:?}");
    assert_eq!(g.check_global_filter().unwrap(), Some(101));
}

/// A checkpoint (`Store::checkpoint`) holds the keyspace's filter as `GLOBALFILTER-1`, and
/// the copy opens with it loaded; a read-only handle loads it too, and counts its probes in
/// the keyspace's stats.
#[test]
fn checkpoints_and_read_only_handles_carry_the_keyspaces_filter() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = small(FilterKind::BlockedBloom);
    let store = Store::open(&dir, o.clone()).unwrap();
    let g = store.keyspace_with("g", global()).unwrap();
    for i in 0..1500 {
        g.put(key(i), b"v").unwrap();
        store.put(key(i), b"d").unwrap();
    }
    g.flush().unwrap();
    let cp = tmp.path().join("cp");
    store.checkpoint(&cp).unwrap();
    assert!(cp.join("GLOBALFILTER-1").exists());
    assert!(!cp.join("GLOBALFILTER").exists());
    drop(g);
    store.close().unwrap();
    for (d, what) in [(&cp, "checkpoint"), (&dir, "store")] {
        let copy = Store::open_read_only(d).unwrap();
        let g = copy.existing_keyspace("g").unwrap();
        let gf = g
            .stats()
            .global_filter
            .unwrap_or_else(|| panic!("{what}: none"));
        assert!(gf.from_checkpoint, "{what}: {gf:?}");
        let (_, probes, _) = absent_gets(&g, 100);
        assert_eq!(probes, 100, "{what}");
        assert_eq!(g.get(key(5)).unwrap().unwrap(), b"v");
        drop((g, copy));
        let copy = Store::open(d, o.clone()).unwrap();
        let g = copy.existing_keyspace("g").unwrap();
        assert!(g.stats().global_filter.unwrap().from_checkpoint, "{what}");
        assert_eq!(g.check_global_filter().unwrap(), Some(1500), "{what}");
        assert_eq!(copy.get(key(5)).unwrap().unwrap(), b"d");
    }
}

/// Measures an absent `get` in a named keyspace under the global filter against the
/// default keyspace under it, the same keys and table shapes in one store (a deepest level
/// on its own filters, then L0 tables in the global filter): alternated rounds, medians.
/// `cargo test --release --test keyspace_global measure -- --ignored --nocapture`
/// (`KSG_KEYS`, `KSG_LOOKUPS`, `KSG_ROUNDS` override the sizes).
#[test]
#[ignore = "a measurement, not a check"]
fn measure_absent_get_against_the_default_keyspace() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (n, lookups, rounds) = (
        env("KSG_KEYS", 400_000),
        env("KSG_LOOKUPS", 200_000),
        env("KSG_ROUNDS", 9),
    );
    let tmp = tempfile::tempdir().unwrap();
    let o = Options::default()
        .filter(FilterKind::Global)
        .compaction_trigger(None)
        .fs(Arc::new(NoSyncFs));
    let store = Store::open(tmp.path(), o).unwrap();
    let g = store.keyspace_with("g", global()).unwrap();
    let k = |i: u64| format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).into_bytes();
    // Each table's keys in one batch: no switch for the log bound comes in between.
    let batch = |h: &Store, keys: std::ops::Range<u64>| {
        let mut b = WriteBatch::new();
        for i in keys {
            b.put(k(i), b"value-of-some-bytes".to_vec());
        }
        h.write(b).unwrap();
        h.flush().unwrap();
    };
    // `KSG_NAMED_FIRST=1`: the named keyspace's tables and filter made first.
    let mut order = [&store, g.as_store()];
    if env("KSG_NAMED_FIRST", 0) == 1 {
        order.reverse();
    }
    for h in order {
        // Three quarters in the deepest level, a quarter in four L0 tables.
        batch(h, 0..n * 3 / 4);
        h.compact().unwrap();
        for t in 0..4 {
            batch(h, n * 3 / 4 + t * n / 16..n * 3 / 4 + (t + 1) * n / 16);
        }
    }
    let shape = |h: &Store| {
        let s = h.stats();
        let g = s.global_filter.unwrap();
        (
            s.tables.iter().map(|t| t.level).collect::<Vec<_>>(),
            g.entries,
        )
    };
    assert_eq!(shape(&store), shape(g.as_store()), "the same shape");
    let time = |h: &Store, round: u64| {
        let t = std::time::Instant::now();
        for i in 0..lookups {
            let key = k(n + round * lookups + i);
            assert!(h.get(&key).unwrap().is_none());
        }
        t.elapsed().as_nanos() as f64 / lookups as f64
    };
    let (mut d, mut named) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        if r % 2 == 0 {
            d.push(time(&store, r));
            named.push(time(g.as_store(), r));
        } else {
            named.push(time(g.as_store(), r));
            d.push(time(&store, r));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (md, mn) = (median(&mut d), median(&mut named));
    let gs = g.stats().global_filter.unwrap();
    println!(
        "absent get, {n} keys ({} in the global filter), {lookups} lookups x {rounds} rounds: \
         default keyspace {md:.1} ns, named keyspace {mn:.1} ns, ratio {:.3}; rounds {d:.1?} / {named:.1?}",
        gs.entries,
        mn / md
    );
}
