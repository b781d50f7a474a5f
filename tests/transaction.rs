//! Optimistic transactions (docs/engine.md, "Transactions"): the classic anomalies each as
//! its own test, read-your-own-writes both ways, a model of random interleaved
//! transactions against a `BTreeMap`, the bank invariant under threads, and power cuts at
//! every sync point of transactional commits.

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use common::power_cut_options;
use common::Rng;
use filterstore::io::FaultFs;
use filterstore::{Error, Options, Slice, Store};

/// A scan item as owned bytes (the models' type).
fn own(r: filterstore::Result<(Slice, Slice)>) -> (Vec<u8>, Vec<u8>) {
    let (k, v) = r.unwrap();
    (k.to_vec(), v.to_vec())
}

fn open(dir: &Path) -> Store {
    Store::open(dir, Options::default()).unwrap()
}

/// The store's (or a model's) contents.
type Contents = BTreeMap<Vec<u8>, Vec<u8>>;

fn num(v: Option<Slice>) -> i64 {
    v.map_or(0, |v| std::str::from_utf8(&v).unwrap().parse().unwrap())
}

#[test]
fn lost_update_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    store.put("counter", "10").unwrap();
    let mut a = store.transaction();
    let mut b = store.transaction();
    let va = num(a.get("counter").unwrap());
    let vb = num(b.get("counter").unwrap());
    a.put("counter", (va + 1).to_string());
    b.put("counter", (vb + 1).to_string());
    a.commit().unwrap();
    assert!(matches!(b.commit(), Err(Error::Conflict)));
    assert_eq!(num(store.get("counter").unwrap()), 11);

    // The same through `update` from threads: no increment is lost.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let s = store.clone();
            std::thread::spawn(move || {
                for _ in 0..200 {
                    s.update("counter", |old| {
                        let n = old.map_or(0, |v| {
                            std::str::from_utf8(v).unwrap().parse::<i64>().unwrap()
                        });
                        Some((n + 1).to_string().into_bytes())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(num(store.get("counter").unwrap()), 811);
}

#[test]
fn write_skew_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    // Two doctors on call; each may go off call if the other stays on.
    store.put("oncall/alice", "1").unwrap();
    store.put("oncall/bob", "1").unwrap();
    let mut a = store.transaction();
    let mut b = store.transaction();
    for (t, me) in [(&mut a, "oncall/alice"), (&mut b, "oncall/bob")] {
        let on = num(t.get("oncall/alice").unwrap()) + num(t.get("oncall/bob").unwrap());
        assert_eq!(on, 2);
        t.put(me, "0");
    }
    a.commit().unwrap();
    assert!(matches!(b.commit(), Err(Error::Conflict)));
    let on = num(store.get("oncall/alice").unwrap()) + num(store.get("oncall/bob").unwrap());
    assert_eq!(on, 1);
}

#[test]
fn a_phantom_in_a_scanned_range_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    for i in 0..5 {
        store.put(format!("emp/{i}"), "x").unwrap();
    }
    // Forward and reverse scans, an insert and a delete in the range: each a conflict.
    for (rev, insert) in [(false, true), (true, true), (false, false), (true, false)] {
        let mut t = store.transaction();
        let scan = t.scan_prefix("emp/");
        let n = if rev {
            scan.rev().count()
        } else {
            scan.count()
        };
        t.put("emp-count", n.to_string());
        if insert {
            store.put(format!("emp/new{rev}"), "x").unwrap();
        } else {
            store.delete("emp/0").unwrap();
            store.put("emp/0", "x").unwrap();
        }
        assert!(
            matches!(t.commit(), Err(Error::Conflict)),
            "rev {rev} insert {insert}"
        );
    }
    assert_eq!(store.get("emp-count").unwrap(), None);
    // A write outside the range (just past its end, just before its start) is no conflict.
    let mut t = store.transaction();
    let n = t.scan::<&[u8]>(&b"emp/"[..]..&b"emp0"[..]).count();
    store.put("emp0", "x").unwrap();
    store.put("emp.", "x").unwrap();
    t.put("emp-count", n.to_string());
    t.commit().unwrap();
    assert_eq!(num(store.get("emp-count").unwrap()), 7);
}

#[test]
fn own_writes_are_read_in_scans_both_ways() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    for k in ["a", "c", "e", "g"] {
        store.put(k, format!("old-{k}")).unwrap();
    }
    store.flush().unwrap();
    store.put("e", "new-e-committed").unwrap();
    let mut t = store.transaction();
    t.put("b", "tx-b");
    t.delete("c");
    t.put("e", "tx-e");
    t.put("h", "tx-h");
    t.delete("zz");
    let want: Vec<(Vec<u8>, Vec<u8>)> = [
        ("a", "old-a"),
        ("b", "tx-b"),
        ("e", "tx-e"),
        ("g", "old-g"),
        ("h", "tx-h"),
    ]
    .iter()
    .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
    .collect();
    let rev: Vec<_> = t.scan::<&[u8]>(..).rev().map(own).collect();
    let mut back = want.clone();
    back.reverse();
    assert_eq!(rev, back);
    let fwd: Vec<_> = t.scan::<&[u8]>(..).map(own).collect();
    assert_eq!(fwd, want);
    // Both ends of one scan meet without overlap or gap.
    let mut s = t.scan::<&[u8]>(..);
    let mut got = vec![own(s.next().unwrap()), own(s.next_back().unwrap())];
    got.extend(s.by_ref().map(own));
    assert!(s.next_back().is_none());
    got.sort();
    assert_eq!(got, want);
    assert_eq!(t.get("c").unwrap(), None);
    assert_eq!(t.get("e").unwrap(), Some(Slice::from(b"tx-e")));
    assert_eq!(
        t.multi_get(&["a", "b", "c", "x"]).unwrap(),
        vec![
            Some(Slice::from(b"old-a")),
            Some(Slice::from(b"tx-b")),
            None,
            None
        ]
    );
    // Nothing is visible outside it before the commit.
    assert_eq!(store.get("b").unwrap(), None);
    t.commit().unwrap();
    let all: Vec<_> = store.scan::<&[u8]>(..).map(own).collect();
    assert_eq!(all, want);
}

#[test]
fn reads_without_writes_and_rollbacks_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    store.put("k", "1").unwrap();
    let mut r = store.transaction();
    assert_eq!(r.get("k").unwrap(), Some(Slice::from(b"1")));
    store.put("k", "2").unwrap();
    // A read-only transaction commits: it read one consistent snapshot.
    r.commit().unwrap();
    let mut t = store.transaction();
    t.put("k", "3");
    t.rollback();
    let mut t = store.transaction();
    t.put("k", "4");
    drop(t);
    assert_eq!(store.get("k").unwrap(), Some(Slice::from(b"2")));
    // Blind writes (nothing read) never conflict.
    let mut a = store.transaction();
    a.put("k", "5");
    store.put("k", "6").unwrap();
    a.commit().unwrap();
    assert_eq!(store.get("k").unwrap(), Some(Slice::from(b"5")));
}

#[test]
fn compare_and_swap_sets_only_the_expected_value() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    assert_eq!(
        store.compare_and_swap("k", None, Some(b"1")).unwrap(),
        Ok(())
    );
    assert_eq!(
        store.compare_and_swap("k", None, Some(b"2")).unwrap(),
        Err(Some(Slice::from(b"1")))
    );
    assert_eq!(
        store.compare_and_swap("k", Some(b"1"), None).unwrap(),
        Ok(())
    );
    assert_eq!(store.get("k").unwrap(), None);
    // Threads racing to take a lock: exactly one wins each round.
    let wins = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let (s, wins) = (store.clone(), wins.clone());
            std::thread::spawn(move || {
                for round in 0..100 {
                    let me = format!("{i}");
                    if s.compare_and_swap(format!("lock{round}"), None, Some(me.as_bytes()))
                        .unwrap()
                        .is_ok()
                    {
                        wins.fetch_add(1, SeqCst);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(wins.load(SeqCst), 100);
}

#[test]
fn a_transaction_open_past_the_window_is_too_old() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(
        tmp.path(),
        Options::default().transaction_window_bytes(10_000),
    )
    .unwrap();
    let mut old = store.transaction();
    old.get("a").unwrap();
    old.put("b", "1");
    let mut young = None;
    for i in 0..1000 {
        store.put(format!("key{i:04}"), "v").unwrap();
        if i == 990 {
            let mut t = store.transaction();
            t.get("a").unwrap();
            t.put("c", "1");
            young = Some(t);
        }
    }
    assert!(matches!(
        old.commit(),
        Err(Error::TransactionTooOld { limit: 10_000 })
    ));
    young.unwrap().commit().unwrap();
    assert_eq!(store.get("b").unwrap(), None);
    assert_eq!(store.get("c").unwrap(), Some(Slice::from(b"1")));
}

/// One open transaction of the model run: the store's and the model's.
struct Open {
    tx: filterstore::Transaction,
    /// The model as of its snapshot, with its own writes laid over.
    view: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The model's commit count when it began.
    began: usize,
    reads: Vec<Vec<u8>>,
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

#[test]
fn random_interleaved_transactions_match_a_serial_model() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut commits, mut conflicts) = (0, 0);
    for seed in 1..=6u64 {
        let dir = tmp.path().join(format!("s{seed}"));
        let opts = Options::default()
            .memtable_bytes(4 << 10)
            .compaction_trigger(Some(2));
        let store = Store::open(&dir, opts.clone()).unwrap();
        let mut rng = Rng::new(seed);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        // The keys each commit wrote, in commit order.
        let mut history: Vec<Vec<Vec<u8>>> = Vec::new();
        let mut open: Vec<Open> = Vec::new();
        let key = |rng: &mut Rng| format!("k{:02}", rng.below(40)).into_bytes();
        for _ in 0..3000 {
            match rng.below(20) {
                0..=1 if open.len() < 5 => open.push(Open {
                    tx: store.transaction(),
                    view: model.clone(),
                    began: history.len(),
                    reads: Vec::new(),
                    ranges: Vec::new(),
                    writes: BTreeMap::new(),
                }),
                2 => {
                    // A plain write between transactions.
                    let k = key(&mut rng);
                    let v = format!("p{}", rng.below(1000)).into_bytes();
                    store.put(&k, &v).unwrap();
                    model.insert(k.clone(), v);
                    history.push(vec![k]);
                }
                3 if !open.is_empty() => {
                    let o = open.swap_remove(rng.below(open.len() as u64) as usize);
                    let since = &history[o.began..];
                    let conflict = since.iter().flatten().any(|w| {
                        o.reads.contains(w) || o.ranges.iter().any(|(a, b)| a <= w && w < b)
                    });
                    let r = o.tx.commit();
                    if conflict && !o.writes.is_empty() {
                        assert!(matches!(r, Err(Error::Conflict)), "seed {seed}: {r:?}");
                        conflicts += 1;
                    } else {
                        r.unwrap();
                        commits += 1;
                        if !o.writes.is_empty() {
                            for (k, v) in &o.writes {
                                match v {
                                    Some(v) => model.insert(k.clone(), v.clone()),
                                    None => model.remove(k),
                                };
                            }
                            history.push(o.writes.keys().cloned().collect());
                        }
                    }
                }
                4 => {
                    store.flush().unwrap();
                }
                _ if !open.is_empty() => {
                    let i = rng.below(open.len() as u64) as usize;
                    let o = &mut open[i];
                    let k = key(&mut rng);
                    match rng.below(10) {
                        0..=3 => {
                            let got = o.tx.get(&k).unwrap();
                            assert_eq!(
                                got.as_deref(),
                                o.view.get(&k).map(Vec::as_slice),
                                "seed {seed}"
                            );
                            if !o.writes.contains_key(&k) {
                                o.reads.push(k);
                            }
                        }
                        4..=5 => {
                            let k2 = key(&mut rng);
                            let (a, b) = if k <= k2 { (k, k2) } else { (k2, k) };
                            let rev = rng.below(2) == 0;
                            let s = o.tx.scan(a.clone()..b.clone());
                            let mut got: Vec<_> = if rev {
                                s.rev().map(own).collect()
                            } else {
                                s.map(own).collect()
                            };
                            if rev {
                                got.reverse();
                            }
                            let want: Vec<_> = o
                                .view
                                .range(a.clone()..b.clone())
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect();
                            assert_eq!(got, want, "seed {seed}: scan rev {rev}");
                            o.ranges.push((a, b));
                        }
                        6..=8 => {
                            let v = format!("t{}", rng.below(1000)).into_bytes();
                            o.tx.put(&k, &v);
                            o.view.insert(k.clone(), v.clone());
                            o.writes.insert(k, Some(v));
                        }
                        _ => {
                            o.tx.delete(&k);
                            o.view.remove(&k);
                            o.writes.insert(k, None);
                        }
                    }
                }
                _ => {}
            }
        }
        drop(open);
        let all: BTreeMap<_, _> = store.scan::<&[u8]>(..).map(own).collect();
        assert_eq!(all, model, "seed {seed}");
        drop(store);
        let store = Store::open(&dir, opts).unwrap();
        let all: BTreeMap<_, _> = store.scan::<&[u8]>(..).map(own).collect();
        assert_eq!(all, model, "seed {seed} after reopen");
    }
    assert!(
        commits > 200 && conflicts > 50,
        "{commits} commits, {conflicts} conflicts"
    );
    println!("model: {commits} commits, {conflicts} conflicts");
}

const ACCOUNTS: u64 = 1000;
const START: i64 = 100;

fn account(i: u64) -> String {
    format!("acct/{i:04}")
}

/// One transfer between two random accounts as a transaction, retried on conflict.
/// Returns the conflicts met.
fn transfer(store: &Store, rng: &mut Rng) -> filterstore::Result<u64> {
    let from = rng.below(ACCOUNTS);
    let to = (from + 1 + rng.below(ACCOUNTS - 1)) % ACCOUNTS;
    let amount = rng.below(20) as i64;
    let mut conflicts = 0;
    loop {
        let mut t = store.transaction();
        let a = num(t.get(account(from))?);
        let b = num(t.get(account(to))?);
        // Lets other transfers run between the reads and the commit (the race this is
        // about; on two cores the threads would rarely overlap otherwise).
        std::thread::yield_now();
        t.put(account(from), (a - amount).to_string());
        t.put(account(to), (b + amount).to_string());
        match t.commit() {
            Err(Error::Conflict) => conflicts += 1,
            r => return r.map(|()| conflicts),
        }
    }
}

fn total(pairs: impl Iterator<Item = filterstore::Result<(Slice, Slice)>>) -> (i64, u64) {
    let mut n = 0;
    let sum = pairs
        .map(|r| {
            n += 1;
            num(Some(r.unwrap().1))
        })
        .sum();
    (sum, n)
}

#[test]
fn bank_transfers_keep_every_snapshot_balanced() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path(), Options::default().memtable_bytes(64 << 10)).unwrap();
    for i in 0..ACCOUNTS {
        store.put(account(i), START.to_string()).unwrap();
    }
    let want = START * ACCOUNTS as i64;
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (s, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut checks = 0u64;
            while !stop.load(SeqCst) || checks < 20 {
                let snap = s.snapshot();
                assert_eq!(total(snap.scan_prefix("acct/")), (want, ACCOUNTS));
                // A read-only transaction reads one snapshot too, backwards here.
                let mut t = s.transaction();
                assert_eq!(total(t.scan_prefix("acct/").rev()), (want, ACCOUNTS));
                t.commit().unwrap();
                checks += 1;
            }
            checks
        })
    };
    let writers: Vec<_> = (0..8u64)
        .map(|i| {
            let s = store.clone();
            std::thread::spawn(move || {
                let mut rng = Rng::new(i + 1);
                (0..400)
                    .map(|_| transfer(&s, &mut rng).unwrap())
                    .sum::<u64>()
            })
        })
        .collect();
    let conflicts: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    stop.store(true, SeqCst);
    let checks = reader.join().unwrap();
    assert_eq!(total(store.scan_prefix(b"acct/")), (want, ACCOUNTS));
    println!("bank: 3200 transfers, {conflicts} conflicts retried, {checks} snapshots checked");
}

/// Options of the power-cut tests: every write synced, small memtables, compactions on,
/// files through `fs`.
/// Transfers through a store that syncs every write, with the power cut at every sync point
/// in turn: after each cut the image reopens balanced, holding every acknowledged transfer
/// and at most the one in flight.
#[test]
fn power_cut_at_every_sync_point_of_transactional_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = power_cut_options;
    const N: u64 = 40;
    const TRANSFERS: usize = 60;
    // The balances after the first batch and after each transfer, and how many of those
    // writes were acknowledged.
    let run = |dir: &Path, fs: &FaultFs| -> (Vec<Contents>, usize) {
        let mut states = Vec::new();
        let Ok(store) = Store::open(dir, opts(fs)) else {
            return (states, 0);
        };
        let mut b = filterstore::WriteBatch::new();
        for i in 0..N {
            b.put(account(i).into_bytes(), START.to_string().into_bytes());
        }
        if store.write(b).is_err() {
            return (states, 0);
        }
        let snap = |s: &Store| s.scan::<&[u8]>(..).map(own).collect();
        states.push(snap(&store));
        let mut rng = Rng::new(7);
        let mut acked = 1;
        for _ in 0..TRANSFERS {
            let from = rng.below(N);
            let to = (from + 1 + rng.below(N - 1)) % N;
            let mut t = store.transaction();
            let (a, b) = match (t.get(account(from)), t.get(account(to))) {
                (Ok(a), Ok(b)) => (num(a), num(b)),
                _ => break,
            };
            t.put(account(from), (a - 3).to_string());
            t.put(account(to), (b + 3).to_string());
            if t.commit().is_err() {
                break;
            }
            acked += 1;
            states.push(snap(&store));
        }
        (states, acked)
    };
    let clean = FaultFs::new();
    let (states, acked) = run(&tmp.path().join("clean"), &clean);
    assert_eq!(acked, TRANSFERS + 1);
    let total_syncs = clean.syncs();
    let mut images = 0;
    for cut in 0..total_syncs + 1 {
        let fs = FaultFs::new();
        fs.cut_power_at_sync(cut);
        let dir = tmp.path().join(format!("live{cut}"));
        let (_, acked) = run(&dir, &fs);
        let img = tmp.path().join(format!("img{cut}"));
        std::fs::create_dir(&img).unwrap();
        fs.crash_image(&img, fs.pending_dir_ops()).unwrap();
        let store = Store::open(&img, Options::default()).unwrap();
        let got: BTreeMap<Vec<u8>, Vec<u8>> = store.scan::<&[u8]>(..).map(own).collect();
        // How many of the writes the image holds: every acknowledged one, and at most the
        // one in flight.
        let held = if got.is_empty() {
            0
        } else {
            let at = states.iter().position(|s| *s == got);
            1 + at.unwrap_or_else(|| panic!("cut {cut}: an image between transfers"))
        };
        assert!(
            held == acked || held == acked + 1,
            "cut {cut}: {acked} writes acknowledged, the image holds {held}"
        );
        images += 1;
    }
    assert!(images as u64 > total_syncs / 2);
    println!(
        "power cuts: {} sync points, {images} images checked",
        total_syncs + 1
    );
}

/// A range deletion committed after a transaction's snapshot is a write of its range: a
/// key read inside it, or a scanned range overlapping it, is a conflict; a range deleted
/// beside what was read is not.
#[test]
fn a_range_deletion_conflicts_with_what_it_covers() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    for k in ["a", "b", "c", "m", "x"] {
        store.put(k, "1").unwrap();
    }
    // (what the transaction reads, the range deleted after its snapshot, a conflict?)
    let cases: [(&str, (&str, &str), bool); 6] = [
        ("get b", ("b", "c"), true),
        ("get c", ("b", "c"), false),
        ("get q", ("p", "r"), true), // read as absent
        ("scan a..c", ("b", "bb"), true),
        ("scan a..c", ("c", "d"), false),
        ("prefix m", ("l", "mm"), true),
    ];
    for (read, (from, to), conflict) in cases {
        let mut t = store.transaction();
        match read.split_once(' ') {
            Some(("get", k)) => {
                t.get(k).unwrap();
            }
            Some(("scan", r)) => {
                let (a, b) = r.split_once("..").unwrap();
                t.scan(a..b).count();
            }
            Some(("prefix", p)) => {
                t.scan_prefix(p).count();
            }
            _ => unreachable!(),
        }
        t.put("out", read);
        store.delete_range(from, to).unwrap();
        let r = t.commit();
        assert_eq!(
            matches!(r, Err(Error::Conflict)),
            conflict,
            "{read} against delete_range({from}, {to}): {r:?}"
        );
        for k in ["a", "b", "c", "m", "x"] {
            store.put(k, "1").unwrap();
        }
    }
}

fn kv(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
    pairs
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// `Transaction::delete_range` and `delete_prefix` are buffered and read by the transaction
/// at once (gets, `multi_get`, scans both ways and from both ends): the snapshot's keys in
/// the range are gone, its own writes before the deletion are gone, those after it stay.
/// The commit is one write (one log record), and the store then reads as the transaction
/// did, reopened too.
#[test]
fn a_transactions_own_range_deletion_is_read_at_once_and_committed_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    for k in ["a", "b", "c", "d", "e", "f", "p1", "p2", "q"] {
        store.put(k, format!("old-{k}")).unwrap();
    }
    store.flush().unwrap();
    store.put("e", "new-e").unwrap();
    let mut t = store.transaction();
    t.put("bb", "tx-bb"); // inside the range, before it: deleted with it
    t.delete_range("b", "f");
    t.put("d", "tx-d"); // after it: stays
    t.delete_prefix("p");
    t.put("p3", "tx-p3");
    let want = kv(&[
        ("a", "old-a"),
        ("d", "tx-d"),
        ("f", "old-f"),
        ("p3", "tx-p3"),
        ("q", "old-q"),
    ]);
    for k in ["b", "bb", "c", "e", "p1", "p2"] {
        assert_eq!(t.get(k).unwrap(), None, "{k}");
    }
    assert_eq!(t.get("d").unwrap(), Some(Slice::from(b"tx-d")));
    assert_eq!(t.get("f").unwrap(), Some(Slice::from(b"old-f")));
    assert_eq!(
        t.multi_get(&["a", "c", "d", "e", "p2", "p3"]).unwrap(),
        vec![
            Some(Slice::from(b"old-a")),
            None,
            Some(Slice::from(b"tx-d")),
            None,
            None,
            Some(Slice::from(b"tx-p3"))
        ]
    );
    let fwd: Vec<_> = t.scan::<&[u8]>(..).map(own).collect();
    assert_eq!(fwd, want);
    let mut rev: Vec<_> = t.scan::<&[u8]>(..).rev().map(own).collect();
    rev.reverse();
    assert_eq!(rev, want);
    let mut s = t.scan("c".."q");
    let mut got = vec![own(s.next_back().unwrap()), own(s.next().unwrap())];
    got.extend(s.by_ref().map(own));
    assert!(s.next_back().is_none() && s.next().is_none());
    got.sort();
    assert_eq!(got, want[1..4]);
    assert_eq!(t.scan_prefix("p").map(own).collect::<Vec<_>>(), want[3..4]);
    // Nothing is visible outside it before the commit.
    assert_eq!(store.get("c").unwrap(), Some(Slice::from(b"old-c")));
    let writes = store.stats().commit_writes;
    t.commit().unwrap();
    assert_eq!(store.stats().commit_writes, writes + 1, "one write");
    let all: Vec<_> = store.scan::<&[u8]>(..).map(own).collect();
    assert_eq!(all, want);
    drop(store);
    let store = open(tmp.path());
    let all: Vec<_> = store.scan::<&[u8]>(..).map(own).collect();
    assert_eq!(all, want, "reopened");
}

/// A transaction's range deletion is a write of its range for other transactions: one that
/// read a key in it (present or absent) or scanned over it since its snapshot conflicts;
/// one that read beside it does not. And its own reads inside its deletion note nothing.
#[test]
fn a_transactions_range_deletion_conflicts_with_readers_of_its_range() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    for k in ["a", "c", "e", "x"] {
        store.put(k, "1").unwrap();
    }
    let cases: [(&str, bool); 5] = [
        ("get c", true),
        ("get d", true), // absent
        ("get x", false),
        ("scan a..b", false),
        ("scan d..z", true),
    ];
    for (read, conflict) in cases {
        let mut reader = store.transaction();
        match read.split_once(' ') {
            Some(("get", k)) => {
                reader.get(k).unwrap();
            }
            Some(("scan", r)) => {
                let (a, b) = r.split_once("..").unwrap();
                reader.scan(a..b).count();
            }
            _ => unreachable!(),
        }
        reader.put("out", read);
        let mut deleter = store.transaction();
        deleter.delete_range("b", "f");
        // Its own read inside the range is answered by itself, noted as nothing.
        assert_eq!(deleter.get("c").unwrap(), None);
        deleter.commit().unwrap();
        let r = reader.commit();
        assert_eq!(matches!(r, Err(Error::Conflict)), conflict, "{read}: {r:?}");
        for k in ["a", "c", "e"] {
            store.put(k, "1").unwrap();
        }
    }
    // A transaction that deleted a range conflicts itself when what it read changed.
    let mut t = store.transaction();
    t.get("a").unwrap();
    t.delete_range("b", "f");
    store.put("a", "2").unwrap();
    assert!(matches!(t.commit(), Err(Error::Conflict)));
    assert_eq!(
        store.get("c").unwrap(),
        Some(Slice::from(b"1")),
        "nothing written"
    );
}

/// Power cuts at every sync point of transactions that delete ranges and put keys: every
/// crash image holds the state after some whole transaction, at least every acknowledged
/// one (never a range deletion without the puts of its transaction, or the reverse).
#[test]
fn power_cut_at_every_sync_point_of_transactional_range_deletions() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = power_cut_options;
    const STEPS: u64 = 30;
    let run = |dir: &Path, fs: &FaultFs| -> (Vec<Contents>, usize) {
        let mut states = Vec::new();
        let Ok(store) = Store::open(dir, opts(fs)) else {
            return (states, 0);
        };
        let snap = |s: &Store| s.scan::<&[u8]>(..).map(own).collect();
        let mut rng = Rng::new(11);
        let mut acked = 0;
        for step in 0..STEPS {
            let mut t = store.transaction();
            let a = rng.below(40);
            let b = a + 1 + rng.below(8);
            if t.get(account(a)).is_err() {
                break;
            }
            t.delete_range(account(a), account(b));
            for _ in 0..4 {
                t.put(account(rng.below(40)), step.to_string());
            }
            if t.commit().is_err() {
                break;
            }
            acked += 1;
            states.push(snap(&store));
        }
        (states, acked)
    };
    let clean = FaultFs::new();
    let (states, acked) = run(&tmp.path().join("clean"), &clean);
    assert_eq!(acked, STEPS as usize);
    let total_syncs = clean.syncs();
    for cut in 0..total_syncs + 1 {
        let fs = FaultFs::new();
        fs.cut_power_at_sync(cut);
        let (_, acked) = run(&tmp.path().join(format!("live{cut}")), &fs);
        let img = tmp.path().join(format!("img{cut}"));
        std::fs::create_dir(&img).unwrap();
        fs.crash_image(&img, fs.pending_dir_ops()).unwrap();
        let store = Store::open(&img, Options::default()).unwrap();
        let got: Contents = store.scan::<&[u8]>(..).map(own).collect();
        let held = if got.is_empty() {
            0
        } else {
            let at = states.iter().position(|s| *s == got);
            1 + at.unwrap_or_else(|| panic!("cut {cut}: an image between transactions"))
        };
        assert!(
            held == acked || held == acked + 1,
            "cut {cut}: {acked} transactions acknowledged, the image holds {held}"
        );
    }
}
