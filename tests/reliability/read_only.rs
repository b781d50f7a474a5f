//! Read-only handles (`Store::open_read_only`, `refresh`): beside a writer in this process
//! and in another one, across flushes and compactions, with files deleted under them, a
//! torn log tail, and nothing written.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use filterstore::{Error, FilterKind, Options, Store, SyncPolicy};

use crate::value_of;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:08}").into_bytes()
}

/// Every file of `dir` with its length and modification time.
fn listing(dir: &Path) -> BTreeMap<String, (u64, std::time::SystemTime)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                (m.len(), m.modified().unwrap()),
            )
        })
        .collect()
}

/// Keys `0..n` read back with their values.
fn check_keys(store: &Store, n: u64, what: &str) {
    for i in 0..n {
        let got = store.get(key(i)).unwrap();
        assert_eq!(
            got.as_deref().map(|v| v.to_vec()),
            Some(value_of(&key(i), 1)),
            "{what}: key {i} of {n}"
        );
    }
}

fn put_range(store: &Store, r: std::ops::Range<u64>) {
    for i in r {
        store.put(key(i), value_of(&key(i), 1)).unwrap();
    }
}

#[test]
fn a_reader_follows_flushes_and_compactions_and_writes_nothing() {
    // Reopens a writer, or forks a child: one at a time (see `SERIAL`).
    let _serial = crate::serial();
    for kind in [FilterKind::BlockedBloom, FilterKind::Global] {
        let tmp = crate::scratch_dir();
        let dir = tmp.path().join("store");
        let opts = Options::default()
            .filter(kind)
            .memtable_bytes(32 << 10)
            .compaction_trigger(None);
        // Nothing written, byte for byte, by an open, a refresh or a drop (of a closed store,
        // so that the writer's background work cannot change the directory meanwhile).
        let w = Store::open(&dir, opts.clone()).unwrap();
        put_range(&w, 0..500);
        w.close().unwrap();
        let before = listing(&dir);
        let r = Store::open_read_only(&dir).unwrap();
        assert!(r.is_read_only());
        check_keys(&r, 500, "closed store");
        r.refresh().unwrap();
        drop(r);
        assert_eq!(listing(&dir), before, "a reader wrote something");
        let w = Store::open(&dir, opts).unwrap();
        let r = Store::open_read_only(&dir).unwrap();
        check_keys(&r, 500, "at open");
        // Writes are refused, with their own error.
        for e in [
            r.put("x", "y").unwrap_err(),
            r.delete("x").unwrap_err(),
            r.flush().unwrap_err(),
            r.compact().unwrap_err(),
            r.checkpoint(tmp.path().join("cp")).unwrap_err(),
        ] {
            assert!(matches!(e, Error::ReadOnly(_)), "{e}");
        }
        // A later write is not seen until a refresh; then it is (from the log).
        put_range(&w, 500..600);
        assert_eq!(r.get(key(550)).unwrap(), None);
        r.refresh().unwrap();
        check_keys(&r, 600, "after refresh (log)");
        // A flush: the logs the reader replayed are gone; the new table holds them.
        w.flush().unwrap();
        put_range(&w, 600..700);
        r.refresh().unwrap();
        check_keys(&r, 700, "after refresh (flush)");
        // A compaction deletes every table the reader has open: it still reads them
        // before its refresh, and the new ones after.
        let ssts = |d: &Path| -> Vec<String> {
            listing(d)
                .into_keys()
                .filter(|n| n.ends_with(".sst"))
                .collect()
        };
        let tables = ssts(&dir);
        w.compact().unwrap();
        w.delete(key(3)).unwrap();
        let now = ssts(&dir);
        assert!(
            tables.iter().any(|t| !now.contains(t)),
            "the compaction deleted none of {tables:?}"
        );
        check_keys(&r, 700, "tables deleted under the reader");
        r.refresh().unwrap();
        assert_ne!(r.stats().tables.len(), 0);
        assert_eq!(
            r.get(key(3)).unwrap(),
            None,
            "a delete after the refresh's start"
        );
        assert_eq!(r.scan::<&[u8]>(..).count(), 699);
        let _ = tables;
        // The reader takes no lock: the writer reopens beside it.
        drop(w);
        let w = Store::open(&dir, Options::default()).unwrap();
        let r = Store::open_read_only(&dir).unwrap();
        check_keys(&r, 3, "second writer");
        drop(w);
    }
}

/// A range deletion reaches a reader through each place it lives: the writer's log, the
/// `.rdel` file of the table its flush wrote, and the tables a compaction rewrote.
#[test]
fn a_reader_sees_range_deletions_from_the_log_the_rdel_files_and_compactions() {
    for kind in [FilterKind::BlockedBloom, FilterKind::Global] {
        let tmp = crate::scratch_dir();
        let dir = tmp.path().join("store");
        let opts = Options::default().filter(kind).compaction_trigger(None);
        let w = Store::open(&dir, opts).unwrap();
        put_range(&w, 0..500);
        w.flush().unwrap();
        let r = Store::open_read_only(&dir).unwrap();
        check_keys(&r, 500, "before");
        let gone = |r: &Store, what: &str| {
            for i in 0..500 {
                let want = !(100..200).contains(&i) && i != 450;
                assert_eq!(
                    r.get(key(i)).unwrap().is_some(),
                    want,
                    "{kind:?} {what}: key {i}"
                );
            }
            assert_eq!(r.scan::<&[u8]>(..).count(), 399, "{kind:?} {what}: scan");
            assert_eq!(
                r.scan::<&[u8]>(..).rev().count(),
                399,
                "{kind:?} {what}: reverse scan"
            );
        };
        w.delete_range(key(100), key(200)).unwrap();
        w.delete_prefix(key(450)).unwrap();
        assert!(r.get(key(150)).unwrap().is_some(), "seen before a refresh");
        r.refresh().unwrap();
        gone(&r, "from the log");
        w.flush().unwrap();
        assert!(
            std::fs::read_dir(&dir).unwrap().any(|e| e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".rdel")),
            "the flush wrote no .rdel file"
        );
        r.refresh().unwrap();
        gone(&r, "from the .rdel file");
        w.compact().unwrap();
        r.refresh().unwrap();
        gone(&r, "after the compaction");
        drop(r);
        let r = Store::open_read_only(&dir).unwrap();
        gone(&r, "a new reader");
    }
}

#[test]
fn a_manifest_naming_a_missing_table_is_retried_then_refused() {
    let tmp = crate::scratch_dir();
    let dir = tmp.path().join("store");
    let w = Store::open(&dir, Options::default()).unwrap();
    put_range(&w, 0..100);
    w.flush().unwrap();
    w.close().unwrap();
    let sst = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "sst"))
        .unwrap();
    std::fs::remove_file(&sst).unwrap();
    let e = Store::open_read_only(&dir).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&filterstore::store::READ_ONLY_TRIES.to_string())
            && text.contains("consistent"),
        "{text}"
    );
}

#[test]
fn a_torn_tail_is_left_alone_and_read_once_whole() {
    let tmp = crate::scratch_dir();
    let dir = tmp.path().join("store");
    let w = Store::open(&dir, Options::default().sync(SyncPolicy::EveryWrite)).unwrap();
    put_range(&w, 0..10);
    w.close().unwrap();
    let log = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "wal"))
        .unwrap();
    let whole = std::fs::read(&log).unwrap();
    // The records end at the last non-zero byte (reserved space is zeros).
    let end = whole.iter().rposition(|&b| b != 0).unwrap() + 1;
    std::fs::write(&log, &whole[..end - 3]).unwrap();
    let r = Store::open_read_only(&dir).unwrap();
    check_keys(&r, 9, "torn tail");
    assert_eq!(r.get(key(9)).unwrap(), None, "the torn record");
    assert_eq!(
        std::fs::read(&log).unwrap(),
        &whole[..end - 3],
        "the log was changed"
    );
    r.refresh().unwrap();
    assert_eq!(r.get(key(9)).unwrap(), None);
    // The writer's record completes: the next refresh reads it, from where it stopped.
    std::fs::write(&log, &whole[..end]).unwrap();
    r.refresh().unwrap();
    check_keys(&r, 10, "completed record");
    assert_eq!(r.scan::<&[u8]>(..).count(), 10);
}

const WRITER_DIR: &str = "FILTERSTORE_RO_DIR";

/// Child mode: writes keys in order, batches of 1 to 3, printing `@A n` once keys `0..n` are
/// acknowledged. Does nothing as a test.
#[test]
fn child_loader() {
    let Ok(dir) = std::env::var(WRITER_DIR) else {
        return;
    };
    let opts = Options::default()
        .memtable_bytes(256 << 10)
        .table_bytes(128 << 10)
        .compaction_trigger(Some(2))
        .sync(SyncPolicy::OnFlush);
    let store = Store::open(&dir, opts).unwrap();
    let mut i = 0u64;
    loop {
        let n = 1 + i % 3;
        let mut b = filterstore::WriteBatch::new();
        for j in i..i + n {
            b.put(key(j), value_of(&key(j), 1));
        }
        store.write(b).unwrap();
        i += n;
        crate::crash::out(&format!("@A {i}"));
    }
}

#[test]
fn a_reader_in_another_process_sees_every_acknowledged_write() {
    let _serial = crate::serial();
    let tmp = crate::scratch_dir();
    let dir = tmp.path().join("store");
    let mut child = crate::crash::spawn_child(
        "read_only::child_loader",
        &[(WRITER_DIR, dir.display().to_string())],
    );
    let acked = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let stdout = child.stdout.take().unwrap();
    let reader = {
        let (acked, done) = (acked.clone(), done.clone());
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                let Ok(l) = l else { break };
                if let Some(n) = l.find("@A ").map(|at| &l[at + 3..]) {
                    acked.store(n.trim().parse().unwrap(), SeqCst);
                }
            }
            done.store(true, SeqCst);
        })
    };
    while acked.load(SeqCst) == 0 {
        assert!(!done.load(SeqCst), "the writer ended");
        std::thread::sleep(Duration::from_millis(5));
    }
    let r = Store::open_read_only(&dir).unwrap();
    let (mut refreshes, mut times, mut checked) = (0u64, Vec::new(), 0u64);
    let end = Instant::now() + Duration::from_secs(4);
    while Instant::now() < end && acked.load(SeqCst) < 600_000 {
        let before = acked.load(SeqCst);
        let t = Instant::now();
        r.refresh().unwrap();
        times.push(t.elapsed());
        refreshes += 1;
        // The keys seen are a prefix (no torn batch, nothing out of order) of at least the
        // acknowledged ones.
        let mut n = 0u64;
        for e in r.scan::<&[u8]>(..) {
            let (k, v) = e.unwrap();
            assert_eq!(&k[..], &key(n)[..], "refresh {refreshes}: a gap");
            assert_eq!(&v[..], &value_of(&k, 1)[..]);
            n += 1;
        }
        assert!(
            n >= before,
            "refresh {refreshes}: {n} keys, {before} acknowledged"
        );
        // Batches of 1, 2, 1, 2, ... keys end at counts that are not 2 mod 3: a count of
        // 2 mod 3 is half a batch.
        assert!(n % 3 != 2, "refresh {refreshes}: a torn batch ({n} keys)");
        // And by point lookups, the newest and a spread of older ones.
        for i in (0..before)
            .rev()
            .step_by(((before / 200) as usize).max(1))
            .take(300)
        {
            assert!(
                r.get(key(i)).unwrap().is_some(),
                "refresh {refreshes}: key {i}"
            );
            checked += 1;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    times.sort();
    println!(
        "read-only reader: {refreshes} refreshes while the writer loaded {} keys, {checked} gets; \
         refresh median {:?}, max {:?}",
        acked.load(SeqCst),
        times[times.len() / 2],
        times[times.len() - 1]
    );
    assert!(refreshes > 3);
}
