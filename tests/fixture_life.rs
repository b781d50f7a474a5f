//! `tests/fixtures/store-life-v1/`: a checked-in store directory that holds the data-life
//! parts of the format together (format.md, "Range tombstones" and "Table"): a range
//! tombstone side file (`NNNNNN.rdel`, beside the version-4 table its flush wrote) over
//! version-5 tables whose values carry expiry times, one of them written after the range
//! deletion over its keys, and a log (version 3)
//! holding a range deletion (op code 3) and expiring puts (op code 4) not yet in a table.
//! Opened with a clock at three times, every key must read as the model of the writes says
//! (through gets, scans both ways and a read-only handle), and `verify` must be clean. If a
//! reader of any of those layouts drifts, this fails.
//!
//! Regenerate (only after a deliberate format change, with `format.md` updated in the same
//! commit): `FILTERSTORE_WRITE_FIXTURES=1 cargo test --release --test fixture_life`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use filterstore::expiry::ManualClock;
use filterstore::table::{decode_footer, FOOTER_LEN};
use filterstore::{FilterKind, Options, Store, SyncPolicy};

/// The clock when the fixture was written (Unix milliseconds).
const T0: u64 = 1_700_000_000_000;
const HOUR: u64 = 3_600_000;
/// A time to live no test run will reach: about 100 years.
const LONG: u64 = 100 * 365 * 24 * HOUR;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-life-v1")
}

fn key(i: u32) -> String {
    format!("key-{i:04}")
}

/// One write: a put (with its time to live in ms, 0: none), a range deletion, or a flush.
enum W {
    Put(u32, &'static str, u64),
    Range(String, String),
    Flush,
}

/// The writes that make the fixture, in order.
fn writes() -> Vec<W> {
    let mut w = Vec::new();
    for i in 0..300 {
        let ttl = match i % 4 {
            0 => HOUR,
            1 => LONG,
            _ => 0,
        };
        w.push(W::Put(i, "first", ttl));
    }
    w.push(W::Flush);
    w.push(W::Range(key(50), key(100)));
    w.push(W::Range("key-02".into(), "key-03".into())); // delete_prefix("key-02")
    w.push(W::Flush);
    for i in 60..66 {
        w.push(W::Put(i, "after", if i % 2 == 0 { HOUR } else { 0 }));
    }
    w.push(W::Flush);
    // Left in the log.
    w.push(W::Range(key(280), key(295)));
    w.push(W::Put(290, "in-log", LONG));
    w.push(W::Put(10, "in-log", HOUR));
    w
}

fn value(i: u32, tag: &str) -> Vec<u8> {
    format!("{tag}-{i}-{}", "x".repeat((i % 5) as usize)).into_bytes()
}

/// What the store holds at `now`: key → value, the expired left out.
fn model(now: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m: BTreeMap<Vec<u8>, (Vec<u8>, u64)> = BTreeMap::new();
    for w in writes() {
        match w {
            W::Put(i, tag, ttl) => {
                let at = if ttl == 0 { 0 } else { T0 + ttl };
                m.insert(key(i).into_bytes(), (value(i, tag), at));
            }
            W::Range(a, b) => m.retain(|k, _| !(a.as_bytes() <= &k[..] && &k[..] < b.as_bytes())),
            W::Flush => {}
        }
    }
    m.into_iter()
        .filter(|(_, (_, at))| *at == 0 || *at > now)
        .map(|(k, (v, _))| (k, v))
        .collect()
}

fn opts(clock: &ManualClock) -> Options {
    Options::default()
        .filter(FilterKind::BlockedBloom)
        .sync(SyncPolicy::EveryWrite)
        .compaction_trigger(None)
        .clock(Arc::new(clock.clone()))
}

fn write_fixture(dir: &Path) {
    let clock = ManualClock::new(T0);
    let s = Store::open(dir, opts(&clock)).unwrap();
    for w in writes() {
        match w {
            W::Put(i, tag, 0) => s.put(key(i), value(i, tag)).unwrap(),
            W::Put(i, tag, ttl) => s
                .put_with_ttl(key(i), value(i, tag), Duration::from_millis(ttl))
                .unwrap(),
            W::Range(a, b) => s.delete_range(a, b).unwrap(),
            W::Flush => s.flush().unwrap(),
        }
    }
}

fn check_at(now: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    std::fs::create_dir(&dir).unwrap();
    for e in std::fs::read_dir(fixture()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    let want = model(now);
    let clock = ManualClock::new(now);
    let ro = Store::open_read_only(&dir).unwrap();
    let s = Store::open(&dir, opts(&clock)).unwrap();
    for i in 0..320 {
        let k = key(i).into_bytes();
        assert_eq!(
            s.get(&k).unwrap().map(Vec::from),
            want.get(&k).cloned(),
            "at {now}: {}",
            key(i)
        );
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = want.into_iter().collect();
    let got: Vec<_> = s.scan::<&[u8]>(..).map(owned).collect();
    assert!(got == all, "at {now}: the scan differs");
    let mut back: Vec<_> = s.scan::<&[u8]>(..).rev().map(owned).collect();
    back.reverse();
    assert!(back == all, "at {now}: the reverse scan differs");
    if now == T0 {
        // A read-only handle judges expiry by the system clock: the long ones live.
        let ro_all: BTreeMap<_, _> = ro.scan::<&[u8]>(..).map(owned).collect();
        assert!(ro_all == model(T0 + 2 * HOUR), "read-only handle");
    }
    drop(s);
    let r = filterstore::verify::verify_dir(&dir).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}

#[test]
fn checked_in_store_with_range_tombstones_and_expiring_tables_decodes() {
    if std::env::var_os("FILTERSTORE_WRITE_FIXTURES").is_some() {
        let _ = std::fs::remove_dir_all(fixture());
        let tmp = tempfile::tempdir().unwrap();
        write_fixture(tmp.path());
        std::fs::create_dir_all(fixture()).unwrap();
        for e in std::fs::read_dir(tmp.path()).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().unwrap() != "LOCK" {
                std::fs::copy(&p, fixture().join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    // What the directory holds: three tables of version 5, at least one with expiring
    // values; one range tombstone file (the flush of the two deletions); one log.
    let files: Vec<PathBuf> = std::fs::read_dir(fixture())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let ext = |e: &str| {
        files
            .iter()
            .filter(|p| p.extension().is_some_and(|x| x == e))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(ext("rdel").len(), 1, "{files:?}");
    assert_eq!(ext("wal").len(), 1, "{files:?}");
    assert_eq!(std::fs::read(&ext("wal")[0]).unwrap()[4], 3, "log version");
    let tables = ext("sst");
    assert_eq!(tables.len(), 3, "{files:?}");
    let mut expiring = Vec::new();
    for p in &tables {
        let bytes = std::fs::read(p).unwrap();
        let at = bytes.len() - FOOTER_LEN;
        let footer = decode_footer(bytes[at..].try_into().unwrap(), at as u64).unwrap();
        let t = filterstore::table::Table::open(p, false).unwrap();
        expiring.push((footer.version, t.meta.expiring));
    }
    expiring.sort();
    // A table is written as version 5 only when it holds expiring values: the flush of the
    // range deletions is version 4 (its `.rdel` beside it).
    assert_eq!(
        expiring,
        [(4, 0), (5, 3), (5, 150)],
        "table versions, expiring values"
    );
    // Before anything expired, between the two times to live, and past the short ones
    // written in the log too.
    for now in [T0, T0 + 2 * HOUR, T0 + 3 * HOUR] {
        check_at(now);
    }
}

/// A scan item as owned bytes (the model's type).
fn owned(r: filterstore::Result<(filterstore::Slice, filterstore::Slice)>) -> (Vec<u8>, Vec<u8>) {
    let (k, v) = r.unwrap();
    (k.to_vec(), v.to_vec())
}
