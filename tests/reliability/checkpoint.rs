//! Online checkpoints (`Store::checkpoint`): what a checkpoint taken while writers run holds,
//! restore by opening and by copying back, copies across file systems, the global filter's
//! saved state, a power cut or an I/O error at every step, and SIGKILL of a process that
//! makes checkpoints.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

use filterstore::io::{FaultFs, EIO};
use filterstore::{Error, FilterKind, Options, Store, SyncPolicy};

use crate::common::Rng;
use crate::{assert_verified, value_of};

fn key(t: u64, i: u64) -> Vec<u8> {
    format!("t{t}k{i:07}").into_bytes()
}

fn open_existing(dir: &Path) -> filterstore::Result<Store> {
    Store::open(dir, Options::default().create_if_missing(false))
}

/// Checks a checkpoint of writer threads' keys: each thread's keys present are a prefix of
/// what it wrote (whole writes, in commit order), at least the `acked` ones, with their
/// values. Returns the keys found.
fn check_prefixes(store: &Store, acked: &[u64], what: &str) -> u64 {
    let mut found = vec![0u64; acked.len()];
    for e in store.scan::<&[u8]>(..) {
        let (k, v) = e.unwrap();
        let s = String::from_utf8(k.to_vec()).unwrap();
        let (t, i) = s[1..].split_once('k').unwrap();
        let (t, i): (usize, u64) = (t.parse().unwrap(), i.parse().unwrap());
        assert_eq!(i, found[t], "{what}: thread {t}'s keys are not a prefix");
        assert_eq!(&v[..], &value_of(&k, 1)[..], "{what}: wrong value");
        found[t] += 1;
    }
    for (t, &a) in acked.iter().enumerate() {
        assert!(
            found[t] >= a,
            "{what}: thread {t}: {} keys, {a} acknowledged before the checkpoint",
            found[t]
        );
    }
    found.iter().sum()
}

/// Copies the files of `from` into the new directory `to` (a restore by copying back).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn checkpoints_while_writers_run_hold_every_acknowledged_write() {
    let tmp = crate::scratch_dir();
    let dir = tmp.path().join("store");
    let opts = Options::default()
        .memtable_bytes(64 << 10)
        .table_bytes(32 << 10)
        .compaction_trigger(Some(2));
    let store = Store::open(&dir, opts).unwrap();
    let threads = 2u64;
    let (checkpoints, total) = {
        let s = store.clone();
        crate::common::checkpoints_beside_writers(
            &store,
            tmp.path(),
            threads,
            (200_000, 6, 3000),
            move |t, i| {
                let k = key(t, i);
                s.put(&k, value_of(&k, 1)).unwrap();
            },
        )
    };
    let e = store.checkpoint(&checkpoints[0].0).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    store.close().unwrap();
    for (dest, before) in &checkpoints {
        let what = dest.display().to_string();
        assert!(
            !std::fs::read_dir(dest).unwrap().any(|e| e
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "wal")),
            "{what}: a checkpoint holds no log"
        );
        assert_verified(dest, &what);
        // Restore by copying back: the copy opens as the same store.
        let copy = tmp.path().join(format!(
            "{}-copy",
            dest.file_name().unwrap().to_string_lossy()
        ));
        copy_dir(dest, &copy);
        let opened = open_existing(dest).unwrap();
        let n = check_prefixes(&opened, before, &what);
        drop(opened);
        let restored = open_existing(&copy).unwrap();
        assert_eq!(check_prefixes(&restored, before, "copy"), n);
    }
    // The source lost nothing.
    let store = open_existing(&dir).unwrap();
    assert_eq!(
        check_prefixes(&store, &total, "source"),
        total.iter().sum::<u64>()
    );
}

#[test]
fn a_checkpoint_on_another_file_system_copies_the_tables() {
    let tmp = crate::scratch_dir();
    let fs = FaultFs::new();
    fs.refuse_links(18); // EXDEV
    let opts = Options::default().memtable_bytes(32 << 10);
    let store = Store::open(tmp.path().join("store"), opts.fs(Arc::new(fs))).unwrap();
    for i in 0..2000 {
        let k = key(0, i);
        store.put(&k, value_of(&k, 1)).unwrap();
    }
    let dest = tmp.path().join("cp");
    let r = store.checkpoint_with_report(&dest).unwrap();
    assert_eq!(r.linked_files, 0);
    assert!(r.copied_files > 0 && r.copied_bytes > 0, "{r:?}");
    assert_verified(&dest, "copied checkpoint");
    drop(store);
    // Copies, not links: each file has one name.
    for e in std::fs::read_dir(&dest).unwrap() {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(e.unwrap().metadata().unwrap().nlink(), 1);
    }
    assert_eq!(
        check_prefixes(&open_existing(&dest).unwrap(), &[2000], "copy"),
        2000
    );
}

#[test]
fn a_checkpoint_of_a_global_filter_store_carries_the_filter() {
    let tmp = crate::scratch_dir();
    let opts = Options::default()
        .filter(FilterKind::Global)
        .memtable_bytes(32 << 10)
        .compaction_trigger(Some(2));
    let store = Store::open(tmp.path().join("store"), opts).unwrap();
    for i in 0..5000 {
        let k = key(0, i);
        store.put(&k, value_of(&k, 1)).unwrap();
    }
    let dest = tmp.path().join("cp");
    let r = store.checkpoint_with_report(&dest).unwrap();
    assert!(dest.join("GLOBALFILTER").exists());
    assert!(r.written_bytes > 0);
    let cp = open_existing(&dest).unwrap();
    assert_eq!(cp.filter().0, FilterKind::Global);
    assert_eq!(cp.check_global_filter().unwrap(), Some(5000));
    assert_eq!(check_prefixes(&cp, &[5000], "global"), 5000);
    assert_eq!(cp.get(b"absent").unwrap(), None);
}

/// The source's keys, written with every write synced, part in tables and part in the log.
fn fault_store(root: &Path) -> (Store, FaultFs) {
    let fs = FaultFs::new();
    let opts = Options::default()
        .memtable_bytes(16 << 10)
        .compaction_trigger(None)
        .idle_drain(None)
        .sync(SyncPolicy::EveryWrite)
        .fs(Arc::new(fs.clone()));
    let store = Store::open(root.join("store"), opts).unwrap();
    for i in 0..600 {
        let k = key(0, i);
        store.put(&k, value_of(&k, 1)).unwrap();
        if i == 300 {
            store.flush().unwrap();
        }
    }
    (store, fs)
}

/// Checks what a failed checkpoint left in `root`: `cp` does not exist or opens whole; the
/// source opens with every key.
fn check_after_failure(root: &Path, what: &str) -> bool {
    let dest = root.join("cp");
    let whole = dest.exists();
    if whole {
        let cp = open_existing(&dest).unwrap_or_else(|e| panic!("{what}: cp: {e}"));
        assert_eq!(check_prefixes(&cp, &[600], what), 600, "{what}");
    }
    let store = open_existing(&root.join("store")).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(check_prefixes(&store, &[600], what), 600, "{what}: source");
    whole
}

#[test]
fn a_power_cut_at_every_sync_point_of_a_checkpoint_leaves_none_or_a_whole_one() {
    // Reopens in a loop: not while another test forks a child (see `SERIAL`).
    let _serial = crate::serial();
    let (k, images, whole) = crate::common::checkpoint_power_cuts(
        || tempfile::tempdir().unwrap(),
        |root| {
            let (store, fs) = fault_store(root);
            (store, fs, ())
        },
        |img, (), what| check_after_failure(img, what),
    );
    println!("checkpoint power cuts: {k} sync points, {images} images, {whole} whole");
}

#[test]
fn an_io_error_at_every_step_of_a_checkpoint_leaves_none_or_a_whole_one() {
    // Reopens in a loop: not while another test forks a child (see `SERIAL`).
    let _serial = crate::serial();
    for k in 0.. {
        let tmp = tempfile::tempdir().unwrap();
        let (store, fs) = fault_store(tmp.path());
        fs.fail_at(fs.ops() + k, EIO, false);
        let r = store.checkpoint(tmp.path().join("cp"));
        let fired = fs.fired();
        drop(store);
        match r {
            Ok(()) if fired.is_none() => {
                assert!(k > 10, "a checkpoint has more steps than {k}");
                println!("checkpoint I/O errors: {k} steps");
                return;
            }
            Ok(()) => {} // the fault hit a step whose failure is ignored (a removal)
            Err(_) => assert!(
                !tmp.path().join("cp").exists(),
                "step {k} ({fired:?}): a failed checkpoint left its destination"
            ),
        }
        check_after_failure(tmp.path(), &format!("I/O error at step {k} ({fired:?})"));
    }
}

const KILL_DIR: &str = "FILTERSTORE_CKPT_DIR";

/// Child mode: puts keys, printing `@P i` once key i is acknowledged, and now and then a
/// checkpoint, printing `@K? NAME` before and `@K NAME` after. Does nothing as a test.
#[test]
fn child_checkpointer() {
    let Ok(root) = std::env::var(KILL_DIR) else {
        return;
    };
    let root = PathBuf::from(root);
    let opts = Options::default()
        .memtable_bytes(16 << 10)
        .table_bytes(16 << 10)
        .compaction_trigger(Some(2))
        .sync(SyncPolicy::EveryWrite);
    let store = Store::open(root.join("store"), opts).unwrap();
    let mut i = next_key(&root);
    let mut n = 0;
    loop {
        for _ in 0..50 {
            let k = key(0, i);
            store.put(&k, value_of(&k, 1)).unwrap();
            crate::crash::out(&format!("@P {i}"));
            i += 1;
        }
        let name = format!("cp{}-{n}", std::process::id());
        crate::crash::out(&format!("@K? {name}"));
        store.checkpoint(root.join(&name)).unwrap();
        crate::crash::out(&format!("@K {name}"));
        n += 1;
    }
}

/// The first key a new child writes: one past the keys already in the store.
fn next_key(root: &Path) -> u64 {
    std::fs::read_to_string(root.join("next")).map_or(0, |s| s.trim().parse().unwrap())
}

#[test]
fn sigkill_while_making_checkpoints_leaves_whole_ones() {
    let _serial = crate::serial();
    let tmp = crate::scratch_dir();
    let root = tmp.path();
    let mut rng = Rng::new(39);
    let (mut acked_total, mut checked) = (0u64, 0u64);
    for iter in 0..12 {
        let mut child = crate::crash::spawn_child(
            "checkpoint::child_checkpointer",
            &[(KILL_DIR, root.display().to_string())],
        );
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let stop_after = 20 + rng.below(400);
        let mut lines = Vec::new();
        let mut line = String::new();
        while (lines.len() as u64) < stop_after {
            line.clear();
            if stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            if let Some(at) = line.find('@') {
                lines.push(line[at..].trim_end().to_string());
            }
        }
        child.kill().unwrap();
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).unwrap();
        child.wait().unwrap();
        lines.extend(
            rest.lines()
                .filter_map(|l| l.find('@').map(|at| l[at..].to_string())),
        );
        // Acknowledged keys so far (all iterations), and what each completed checkpoint
        // must hold: every key acknowledged before it began.
        let mut started: BTreeMap<String, u64> = BTreeMap::new();
        for l in &lines {
            if let Some(i) = l.strip_prefix("@P ") {
                acked_total = acked_total.max(i.parse::<u64>().unwrap() + 1);
            } else if let Some(name) = l.strip_prefix("@K? ") {
                started.insert(name.to_string(), acked_total);
            } else if let Some(name) = l.strip_prefix("@K ") {
                let dest = root.join(name);
                let what = format!("iteration {iter}, {name}");
                assert_verified(&dest, &what);
                let cp = open_existing(&dest).unwrap_or_else(|e| panic!("{what}: {e}"));
                check_prefixes(&cp, &[started[name]], &what);
                drop(cp);
                std::fs::remove_dir_all(&dest).unwrap();
                checked += 1;
            }
        }
        // Checkpoints begun and not finished: never a directory of their name that opens
        // short; their temporary directories are left aside.
        for name in started.keys() {
            let dest = root.join(name);
            if dest.exists() {
                let cp = open_existing(&dest).unwrap();
                check_prefixes(&cp, &[started[name]], name);
                drop(cp);
                std::fs::remove_dir_all(&dest).unwrap();
            }
        }
        let store = open_existing(&root.join("store")).unwrap();
        let n = check_prefixes(&store, &[acked_total], "source after kill");
        drop(store);
        std::fs::write(root.join("next"), n.to_string()).unwrap();
        acked_total = n;
    }
    println!("checkpoint kills: 12 kills, {checked} completed checkpoints checked");
    assert!(checked > 0);
}

/// Measurement, not a test: `FILTERSTORE_CKPT_MEASURE=DIR cargo test --release --test
/// reliability measure_checkpoint -- --ignored --nocapture` times checkpoints of the store in
/// DIR (made by `store load`) while a writer puts 100-byte values, and a read-only reader's
/// refreshes meanwhile.
#[test]
#[ignore]
fn measure_checkpoint() {
    let Ok(dir) = std::env::var("FILTERSTORE_CKPT_MEASURE") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let store = Store::open(&dir, Options::default()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(SeqCst) {
                let k = format!("zz-measure-{i:012}");
                store.put(&k, [b'w'; 100]).unwrap();
                i += 1;
            }
            i
        })
    };
    let reader = Store::open_read_only(&dir).unwrap();
    let mut refresh = Vec::new();
    for n in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(700));
        for _ in 0..5 {
            let t = std::time::Instant::now();
            reader.refresh().unwrap();
            refresh.push(t.elapsed());
        }
        let dest = dir.with_extension(format!("cp{n}"));
        let _ = std::fs::remove_dir_all(&dest);
        let t = std::time::Instant::now();
        let r = store.checkpoint_with_report(&dest).unwrap();
        println!("checkpoint {n}: {:?}, {r:?}", t.elapsed());
        std::fs::remove_dir_all(&dest).unwrap();
    }
    stop.store(true, SeqCst);
    println!("writer: {} puts", writer.join().unwrap());
    refresh.sort();
    println!(
        "refresh while writing: median {:?}, max {:?} ({} refreshes)",
        refresh[refresh.len() / 2],
        refresh[refresh.len() - 1],
        refresh.len()
    );
}
