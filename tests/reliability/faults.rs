//! Power cuts at every sync point and I/O errors at every operation, through `FaultFs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use filterstore::io::{FaultFs, EIO, ENOSPC};
use filterstore::{Error, FilterKind, Options, Store, SyncPolicy, WriteBatch};

use crate::common::Rng;
use crate::{assert_verified, check_store, subdir, value_of};

type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

#[derive(Clone, Debug)]
enum Op {
    Write(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Flush,
    Compact,
    Refilter(FilterKind),
}

fn opts(fs: &FaultFs, kind: FilterKind) -> Options {
    Options::default()
        .filter(kind)
        .memtable_bytes(1200)
        .compaction_trigger(Some(3))
        // Tiny tables and levels: flushes and compactions of every kind (L0 and deeper
        // levels, moves, rolling outputs) run in the background and meet the faults.
        .table_bytes(2048)
        .l1_bytes(4096)
        .level_ratio(2)
        .sync(SyncPolicy::EveryWrite)
        .fs(Arc::new(fs.clone()))
}

/// A deterministic workload: puts, overwrites, deletes, batches, with flushes (explicit and
/// from a small memtable), compactions (explicit and automatic) and refilters.
fn workload(seed: u64, steps: usize) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    let mut version = 0;
    let mut ops = Vec::new();
    for _ in 0..steps {
        let mut one = |k: Vec<u8>, del: bool| {
            version += 1;
            let v = (!del).then(|| value_of(&k, version));
            (k, v)
        };
        let key = |r: &mut Rng| format!("key{:03}", r.below(60)).into_bytes();
        let op = match rng.below(100) {
            0..=64 => Op::Write(vec![one(key(&mut rng), false)]),
            65..=74 => Op::Write(vec![one(key(&mut rng), true)]),
            75..=84 => {
                let n = 2 + rng.below(4);
                let mut b = Vec::new();
                for _ in 0..n {
                    let k = key(&mut rng);
                    let del = rng.below(4) == 0;
                    b.push(one(k, del));
                }
                Op::Write(b)
            }
            85..=90 => Op::Flush,
            91..=95 => Op::Compact,
            // Every per-table kind, and the global filter (one in six).
            _ => Op::Refilter(
                FilterKind::ALL
                    .get(rng.below(FilterKind::ALL.len() as u64 + 1) as usize)
                    .copied()
                    .unwrap_or(FilterKind::Global),
            ),
        };
        ops.push(op);
    }
    ops
}

fn apply(m: &mut Model, op: &Op) {
    if let Op::Write(b) = op {
        for (k, v) in b {
            m.insert(k.clone(), v.clone());
        }
    }
}

fn run_op(store: &Store, op: &Op) -> filterstore::Result<()> {
    match op {
        Op::Write(b) => {
            let mut batch = WriteBatch::new();
            for (k, v) in b {
                match v {
                    Some(v) => batch.put(k.clone(), v.clone()),
                    None => batch.delete(k.clone()),
                };
            }
            store.write(batch)
        }
        Op::Flush => store.flush(),
        Op::Compact => store.compact(),
        Op::Refilter(k) => store.refilter(*k, 0.05),
    }
}

/// Runs `ops` until one fails; returns the acknowledged model and the failed op, if any.
fn run_until_error(dir: &Path, fs: &FaultFs, ops: &[Op]) -> (Model, Option<Op>) {
    let mut m = Model::new();
    let store = match Store::open(dir, opts(fs, FilterKind::BlockedBloom)) {
        Ok(s) => s,
        Err(_) => return (m, None),
    };
    for op in ops {
        match run_op(&store, op) {
            Ok(()) => apply(&mut m, op),
            Err(_) => return (m, Some(op.clone())),
        }
    }
    (m, None)
}

fn in_flight(op: Option<&Op>) -> Model {
    let mut may = Model::new();
    if let Some(op) = op {
        apply(&mut may, op);
    }
    may
}

/// Opens the image, checks it, writes and flushes a little more, reopens and checks again.
fn check_recovery(dir: &Path, must: &Model, may: &Model, what: &str) -> u64 {
    if dir.join("MANIFEST").exists() {
        assert_verified(dir, what);
    } else {
        // Cut while the store was being created: nothing can have been acknowledged.
        assert!(must.is_empty(), "{what}: MANIFEST lost");
    }
    let fs = FaultFs::new();
    // The store's recorded policy: a global filter when the workload last switched to it
    // (built from the tables, or read from its checkpoint when that matches them).
    let store = Store::open(dir, opts(&fs, FilterKind::Cuckoo).filter(None))
        .unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
    let mut checked = check_store(&store, must, may, what);
    // What the recovered store shows is now its truth; new writes must land beside it.
    let mut seen = Model::new();
    for k in must.keys().chain(may.keys()) {
        seen.insert(k.clone(), store.get(k).unwrap().map(Vec::from));
    }
    for i in 0..3u64 {
        let k = format!("after{i}").into_bytes();
        let v = value_of(&k, 1);
        store.put(&k, &v).unwrap();
        seen.insert(k, Some(v));
    }
    store.flush().unwrap();
    store.compact().unwrap();
    drop(store);
    assert_verified(dir, what);
    let store = Store::open(dir, opts(&FaultFs::new(), FilterKind::Bloom)).unwrap();
    checked += check_store(&store, &seen, &Model::new(), what);
    checked
}

#[test]
fn power_cut_at_every_sync_point_loses_nothing_acknowledged() {
    let _serial = crate::serial();
    let mut ops = workload(7, 260);
    // Cuts land under the global filter too: its flushes, compactions and moves, and the
    // switch itself.
    ops.insert(ops.len() / 3, Op::Refilter(FilterKind::Global));
    let tmp = crate::scratch_dir();
    // A clean run counts the sync points and names what each one syncs.
    let fs = FaultFs::new();
    let (full, failed) = run_until_error(&subdir(tmp.path(), "clean"), &fs, &ops);
    assert!(failed.is_none());
    let log = fs.sync_log();
    let total = log.len() as u64;
    let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
    for p in &log {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let kind = if name.ends_with(".wal") {
            "WAL (append or creation)"
        } else if name.ends_with(".sst") {
            "table"
        } else if name.ends_with(".filter") {
            "filter"
        } else if name.ends_with(".range") {
            "range filter"
        } else if name.starts_with("MANIFEST") {
            "manifest"
        } else {
            "directory"
        };
        *kinds.entry(kind).or_default() += 1;
    }
    let (mut images, mut keys, mut with_pending) = (0u64, 0u64, 0u64);
    // Background flushes and compactions make the number of sync points vary from run to
    // run (how many L0 tables a compaction finds depends on timing), so the cuts go on until
    // a run ends before its cut point, and at least to 90 % of the clean run's count (a
    // run with fewer sync points than its cut is still checked, as a run without a cut).
    let (mut cut, mut fired) = (0u64, 0u64);
    loop {
        let fs = FaultFs::new();
        fs.cut_power_at_sync(cut);
        let live = subdir(tmp.path(), "live");
        let (must, failed) = run_until_error(&live, &fs, &ops);
        let reached = fs.fired().is_some();
        let may = in_flight(failed.as_ref());
        let pending = fs.pending_dir_ops();
        let mut prefixes = vec![0, pending];
        if pending > 1 {
            prefixes.push(pending / 2);
            with_pending += 1;
        }
        prefixes.dedup();
        for applied in prefixes {
            let img = subdir(tmp.path(), "image");
            fs.crash_image(&img, applied).unwrap();
            let what = format!(
                "cut at sync {cut} ({:?}), {applied}/{pending} pending entry ops applied",
                fs.fired()
            );
            keys += check_recovery(&img, &must, &may, &what);
            images += 1;
        }
        if reached {
            fired += 1;
        } else if cut * 10 >= total * 9 {
            break;
        }
        cut += 1;
    }
    assert!(
        fired * 10 >= total * 9,
        "{fired} cuts fired, but a clean run had {total} sync points"
    );
    assert!(full.len() > 20);
    println!(
        "power cuts: {} sync points ({kinds:?}), {images} crash images ({with_pending} cuts \
         with several unsynced entry ops, tried at 0, half and all applied), {keys} key checks",
        total + 1
    );
}

/// One scenario: a store with flushed tables and a memtable, then `target` hit by a fault at
/// every operation it makes, as ENOSPC that stays and as a one-off EIO.
fn faults_in(target: &str, run: impl Fn(&Store) -> filterstore::Result<()>) -> (u64, u64) {
    let tmp = crate::scratch_dir();
    let ops = workload(11, 120);
    let (mut points, mut keys) = (0u64, 0u64);
    for (errno, sticky) in [(ENOSPC, true), (EIO, false)] {
        for n in 0.. {
            let dir = subdir(tmp.path(), "s");
            let fs = FaultFs::new();
            let mut o = opts(&fs, FilterKind::Bloom);
            o.compaction_trigger = None;
            let store = Store::open(&dir, o).unwrap();
            let mut model = Model::new();
            for op in &ops {
                run_op(&store, op).unwrap();
                apply(&mut model, op);
            }
            store.flush().unwrap();
            store.put(b"extra", b"e").unwrap();
            store.flush().unwrap();
            model.insert(b"extra".to_vec(), Some(b"e".to_vec()));
            store.put(b"unflushed", b"x").unwrap();
            model.insert(b"unflushed".to_vec(), Some(b"x".to_vec()));
            let base = fs.ops();
            fs.fail_at(base + n, errno, sticky);
            let r = run(&store);
            let what = format!("{target}: errno {errno} at op {n}: {:?}", fs.fired());
            let mut may = Model::new();
            if target == "write" {
                let m = if r.is_ok() { &mut model } else { &mut may };
                m.insert(b"new".to_vec(), Some(b"v".to_vec()));
            }
            let Some(fired) = fs.fired() else {
                r.unwrap();
                break;
            };
            points += 1;
            // Only failed removals of obsolete files may go unreported; a failed save of the
            // advisory lifetime counters is reported in the stats, not as a store failure.
            if r.is_ok() {
                assert!(
                    fired.starts_with("remove") || store.stats().lifetime_problem.is_some(),
                    "{what}: error swallowed"
                );
            }
            // Reads still see everything.
            keys += check_store(&store, &model, &may, &what);
            if !sticky {
                fs.heal();
            }
            let k = b"later".to_vec();
            match store.put(&k, b"y") {
                Ok(()) => {
                    model.insert(k, Some(b"y".to_vec()));
                }
                Err(Error::Poisoned { .. }) => {}
                Err(e) if sticky => {
                    may.insert(k, Some(b"y".to_vec()));
                    assert!(matches!(e, Error::Io { .. }), "{what}: {e}");
                }
                Err(e) => panic!("{what}: write after the error: {e}"),
            }
            keys += check_store(&store, &model, &may, &what);
            drop(store);
            // A power cut now keeps everything acknowledged, whatever the entry ops did.
            for applied in [0, fs.pending_dir_ops()] {
                let img = subdir(tmp.path(), "img");
                fs.crash_image(&img, applied).unwrap();
                keys += check_recovery(&img, &model, &may, &format!("{what}, power cut"));
            }
            // And so does reopening the directory as the failure left it.
            keys += check_recovery(&dir, &model, &may, &what);
        }
    }
    (points, keys)
}

#[test]
fn io_errors_at_every_operation_of_flush_compaction_and_refilter() {
    let _serial = crate::serial();
    let mut report = Vec::new();
    for (name, f) in [
        (
            "flush",
            &(|s: &Store| s.flush()) as &dyn Fn(&Store) -> filterstore::Result<()>,
        ),
        ("compaction", &|s: &Store| s.compact()),
        ("refilter", &|s: &Store| {
            s.refilter(FilterKind::Cuckoo, 0.02)
        }),
        ("write", &|s: &Store| s.put(b"new", b"v")),
    ] {
        let (points, keys) = faults_in(name, f);
        assert!(points >= 3, "{name}: only {points} fault points");
        report.push(format!("{name}: {points} fault points, {keys} key checks"));
    }
    println!(
        "I/O errors (ENOSPC sticky + EIO once): {}",
        report.join("; ")
    );
}

/// Issue 15, item 4: the disk fills up while a background flush or compaction writes a
/// table or filter (ENOSPC on every table and filter operation from the N-th on, for each N
/// in a sweep; logs and the manifest still work). The store is poisoned: writes are refused
/// with `Error::Poisoned` whose cause is the ENOSPC on the table or filter file, reads keep
/// answering with every acknowledged write, and once space returns a reopen recovers them
/// all (and takes new writes).
#[test]
fn disk_full_during_background_flush_or_compaction() {
    let _serial = crate::serial();
    let tmp = crate::scratch_dir();
    let (mut flushes, mut compactions, mut keys, mut points) = (0u64, 0u64, 0u64, 0u64);
    let mut refused_by = BTreeMap::new();
    for skip in (0u64..).step_by(3) {
        let dir = subdir(tmp.path(), "bg");
        let fs = FaultFs::new();
        fs.fail_table_files_after(skip, ENOSPC);
        let o = Options::default()
            .memtable_bytes(4 << 10)
            .compaction_trigger(Some(2))
            .table_bytes(4 << 10)
            .l1_bytes(8 << 10)
            .level_ratio(2)
            .sync(SyncPolicy::EveryWrite)
            .fs(Arc::new(fs.clone()));
        let store = Store::open(&dir, o).unwrap();
        let (mut model, mut may) = (Model::new(), Model::new());
        let mut refused = None;
        for i in 0..700u64 {
            let k = format!("key{:03}", i % 160).into_bytes();
            let v = value_of(&k, i);
            match store.put(&k, &v) {
                Ok(()) => {
                    model.insert(k, Some(v));
                }
                Err(e) => {
                    may.insert(k, Some(v));
                    refused = Some(("put", e));
                    break;
                }
            }
        }
        let Some(fired) = fs.fired() else {
            // The sweep went past every table operation of the workload.
            assert!(refused.is_none());
            assert!(points > 10, "only {points} fault points");
            break;
        };
        points += 1;
        let what = format!("skip {skip}: {fired}");
        // A background failure the writes have not met yet shows at the next flush.
        let (by, e) = refused
            .or_else(|| store.flush().err().map(|e| ("flush", e)))
            .unwrap_or_else(|| panic!("{what}: the failure was never reported"));
        *refused_by.entry(by).or_insert(0u64) += 1;
        let Error::Poisoned { cause } = &e else {
            panic!("{what}: {by} refused with {e}, not Error::Poisoned");
        };
        match &**cause {
            Error::Io {
                path: Some(p),
                source,
            } => {
                assert_eq!(source.raw_os_error(), Some(ENOSPC), "{what}: {cause}");
                let name = p.to_string_lossy();
                assert!(
                    name.ends_with(".sst") || name.ends_with(".filter") || name.ends_with(".range"),
                    "{what}: {cause}"
                );
            }
            other => panic!("{what}: cause {other}"),
        }
        assert!(e.to_string().contains("I/O error"), "{what}: {e}");
        // Compaction runs on the background pool; a flush seals on the flush thread and
        // writes its table and filter on the global pool.
        if fired.contains("filterstore-bg") || fired.contains("filterstore-compact") {
            compactions += 1;
        } else {
            flushes += 1;
        }
        // Reads keep working, and see every acknowledged write.
        keys += check_store(&store, &model, &may, &what);
        assert!(
            matches!(store.put(b"later", b"x"), Err(Error::Poisoned { .. })),
            "{what}: a write after the failure"
        );
        assert!(matches!(store.compact(), Err(Error::Poisoned { .. })));
        drop(store);
        // Space returns: a reopen (without faults) recovers everything acknowledged.
        keys += check_recovery(&dir, &model, &may, &what);
    }
    assert!(flushes > 0, "no fault landed in a background flush");
    assert!(
        compactions > 0,
        "no fault landed in a background compaction"
    );
    println!(
        "disk full in background work: {points} fault points ({flushes} in flushes, \
         {compactions} in compactions; first refused by {refused_by:?}), {keys} key checks"
    );
}

/// A log whose appends are fsynced reserves its space ahead of its records. A power cut then
/// leaves zeros after its last record, which reopening reads as the log's end: no torn tail,
/// every acknowledged write there. A reservation that fails (a full disk) only stops the
/// reserving: the writes go on, as durable as before.
#[test]
fn reserved_log_space_is_the_logs_end_after_a_power_cut() {
    let tmp = crate::scratch_dir();
    let mut failed_reservations = 0;
    // Fault at each of the first operations of the writes: some of them are reservations.
    for fault in [None].into_iter().chain((0..12).map(Some)) {
        let dir = subdir(tmp.path(), "s");
        let fs = FaultFs::new();
        let mut o = opts(&fs, FilterKind::Bloom);
        o.memtable_bytes = 4 << 20;
        o.compaction_trigger = None;
        let store = Store::open(&dir, o).unwrap();
        if let Some(n) = fault {
            fs.fail_at(fs.ops() + n, ENOSPC, false);
        }
        let mut model = Model::new();
        let mut may = Model::new();
        // About 250 KB of records: past the first reservations.
        for i in 0..2000u32 {
            let k = format!("key{i:05}").into_bytes();
            let v = value_of(&k, 1);
            match store.put(&k, &v) {
                Ok(()) => model.insert(k, Some(v)),
                Err(_) => may.insert(k, Some(v)),
            };
        }
        let fired = fs.fired();
        let reservation_failed = fired.as_deref().is_some_and(|f| f.starts_with("allocate"));
        if reservation_failed {
            failed_reservations += 1;
            assert_eq!(model.len(), 2000, "a failed reservation failed a write");
        }
        let what = format!("fault {fault:?}: {fired:?}");
        let img = subdir(tmp.path(), "img");
        fs.crash_image(&img, 0).unwrap();
        drop(store);
        let wal: Vec<_> = std::fs::read_dir(&img)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "wal"))
            .collect();
        match &wal[..] {
            // The fault failed the log's creation (or first write): nothing acknowledged.
            [] => assert!(model.is_empty(), "{what}: no log"),
            [wal] => {
                let bytes = std::fs::read(wal).unwrap();
                let end = filterstore::wal::replay_bytes(&bytes, |_, _| {}).unwrap();
                assert_eq!(end.torn_tail, None, "{what}");
                let zeros = bytes.len() as u64 - end.valid_len;
                if fault.is_none() {
                    assert!(zeros > 0, "{what}: no space reserved");
                }
                if reservation_failed {
                    assert_eq!(zeros, 0, "{what}: reserved after the failure");
                }
            }
            _ => panic!("{what}: logs {wal:?}"),
        }
        check_recovery(&img, &model, &may, &what);
        let store = Store::open(&img, Options::default()).unwrap();
        assert_eq!(store.stats().torn_tails_dropped, 0, "{what}");
    }
    assert!(failed_reservations >= 1, "no fault hit a reservation");
}
