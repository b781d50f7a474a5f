//! Transactions across keyspaces: `Transaction::get_in`, `put_in`, `scan_in` and the rest
//! read every keyspace at the transaction's one instant, see its own writes, and commit
//! all keyspaces' writes in one log record or none of them.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::power_cut_options;
use filterstore::io::FaultFs;
use filterstore::{Error, Keyspace, Options, Slice, Store};

type Contents = BTreeMap<Vec<u8>, Vec<u8>>;

fn contents(ks: &Keyspace) -> Contents {
    ks.scan::<&[u8]>(..)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect()
}

fn s(v: &str) -> Option<Slice> {
    Some(Slice::from(v))
}

#[test]
fn a_transaction_reads_and_writes_several_keyspaces_at_one_instant() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path(), Options::default()).unwrap();
    let acct = store.keyspace("accounts").unwrap();
    let hist = store.keyspace("history").unwrap();
    acct.put("alice", "100").unwrap();
    acct.put("bob", "0").unwrap();
    store.put("alice", "in the default keyspace").unwrap();
    let mut t = store.transaction();
    // Written after it began, in a keyspace it has not read yet: not seen.
    hist.put("0", "before").unwrap();
    assert_eq!(t.get_in(&acct, "alice").unwrap(), s("100"));
    assert_eq!(t.get_in(&hist, "0").unwrap(), None);
    // It read "0" absent, and a commit wrote it since: it would not be serializable.
    t.put_in(&acct, "alice", "0");
    assert!(matches!(t.commit(), Err(Error::Conflict)));
    assert_eq!(acct.get("alice").unwrap(), s("100"));
    let mut t = store.transaction();
    assert_eq!(t.get_in(&hist, "0").unwrap(), s("before"));
    assert_eq!(t.get("alice").unwrap(), s("in the default keyspace"));
    t.put_in(&acct, "alice", "70");
    t.put_in(&acct, "bob", "30");
    t.put_in(&hist, "1", "alice->bob 30");
    t.delete_in(&hist, "0");
    // Its own writes, per keyspace, in gets and scans both ways.
    assert_eq!(t.get_in(&acct, "alice").unwrap(), s("70"));
    assert_eq!(t.get("alice").unwrap(), s("in the default keyspace"));
    assert!(t.contains_key_in(&hist, "1").unwrap());
    let fwd: Vec<_> = t
        .scan_in::<&[u8]>(&acct, ..)
        .unwrap()
        .map(|r| r.unwrap().1.to_vec())
        .collect();
    assert_eq!(fwd, [b"70".to_vec(), b"30".to_vec()]);
    let back: Vec<_> = t
        .scan_prefix_in(&hist, "")
        .unwrap()
        .rev()
        .map(|r| r.unwrap().0.to_vec())
        .collect();
    assert_eq!(back, [b"1".to_vec()]);
    // Nothing is visible outside it before the commit.
    assert_eq!(acct.get("alice").unwrap(), s("100"));
    t.commit().unwrap();
    assert_eq!(acct.get("alice").unwrap(), s("70"));
    assert_eq!(acct.get("bob").unwrap(), s("30"));
    assert_eq!(hist.get("1").unwrap(), s("alice->bob 30"));
    assert_eq!(hist.get("0").unwrap(), None);
    assert_eq!(store.get("alice").unwrap(), s("in the default keyspace"));
    // A keyspace's transaction: its plain writes go to that keyspace, `*_in` to others.
    let mut t = acct.transaction();
    t.put("carol", "5"); // its own keyspace: accounts
    t.put_in(&hist, "2", "carol opened");
    t.commit().unwrap();
    assert_eq!(acct.get("carol").unwrap(), s("5"));
    assert_eq!(hist.get("2").unwrap(), s("carol opened"));
    assert_eq!(store.get("carol").unwrap(), None);
}

#[test]
fn a_conflict_in_one_keyspace_fails_the_writes_in_every_keyspace() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path(), Options::default()).unwrap();
    let acct = store.keyspace("accounts").unwrap();
    let hist = store.keyspace("history").unwrap();
    acct.put("alice", "100").unwrap();
    let mut t1 = store.transaction();
    let mut t2 = store.transaction();
    for t in [&mut t1, &mut t2] {
        t.get_in(&acct, "alice").unwrap();
    }
    t1.put_in(&acct, "alice", "90");
    t1.put_in(&hist, "t1", "-10");
    t2.put_in(&acct, "alice", "80");
    t2.put_in(&hist, "t2", "-20");
    t2.put("default", "t2");
    t1.commit().unwrap();
    assert!(matches!(t2.commit(), Err(Error::Conflict)));
    assert_eq!(acct.get("alice").unwrap(), s("90"));
    assert_eq!(hist.get("t1").unwrap(), s("-10"));
    assert_eq!(
        hist.get("t2").unwrap(),
        None,
        "nothing of the failed commit"
    );
    assert_eq!(
        store.get("default").unwrap(),
        None,
        "nothing of the failed commit"
    );
    // A scanned range conflicts too (a phantom in another keyspace than the writes).
    let mut t3 = store.transaction();
    let seen = t3.scan_prefix_in(&hist, "t").unwrap().count();
    assert_eq!(seen, 1);
    t3.put_in(&acct, "summary", seen.to_string());
    hist.put("t9", "inserted").unwrap();
    assert!(matches!(t3.commit(), Err(Error::Conflict)));
    assert_eq!(acct.get("summary").unwrap(), None);
}

#[test]
fn keyspaces_the_snapshot_lacks_or_of_another_store_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path().join("one"), Options::default()).unwrap();
    let other = Store::open(tmp.path().join("two"), Options::default()).unwrap();
    let mut t = store.transaction();
    let late = store.keyspace("late").unwrap();
    // Created after the transaction began: it cannot be read at its instant...
    assert!(matches!(
        t.get_in(&late, "k"),
        Err(Error::InvalidArgument(_))
    ));
    // ...but it can be written.
    t.put_in(&late, "k", "v");
    t.commit().unwrap();
    assert_eq!(late.get("k").unwrap(), s("v"));
    let foreign = other.keyspace("x").unwrap();
    let mut t = store.transaction();
    assert!(t.get_in(&foreign, "k").is_err());
    t.put("mine", "1");
    t.put_in(&foreign, "k", "v");
    assert!(matches!(t.commit(), Err(Error::InvalidArgument(_))));
    assert_eq!(store.get("mine").unwrap(), None, "nothing written");
    assert_eq!(foreign.get("k").unwrap(), None);
    // Dropped before the commit.
    let gone = store.keyspace("gone").unwrap();
    let mut t = store.transaction();
    t.put("mine", "2");
    t.put_in(&gone, "k", "v");
    store.drop_keyspace("gone").unwrap();
    assert!(t.commit().is_err());
    assert_eq!(store.get("mine").unwrap(), None, "nothing written");
}

/// Both keyspaces' contents.
fn both(acct: &Keyspace, hist: &Keyspace) -> (Contents, Contents) {
    (contents(acct), contents(hist))
}

/// Transfers as transactions across two keyspaces, with the power cut at every sync point in
/// turn: every image opens holding the states after some number of whole transfers, every
/// acknowledged one and at most the one in flight.
#[test]
fn power_cut_at_every_sync_point_of_cross_keyspace_commits() {
    let tmp = tempfile::tempdir().unwrap();
    const STEPS: usize = 12;
    let run = |dir: &Path, fs: &FaultFs| -> (Vec<(Contents, Contents)>, usize) {
        let mut states = Vec::new();
        let Ok(store) = Store::open(dir, power_cut_options(fs)) else {
            return (states, 0);
        };
        let (Ok(acct), Ok(hist)) = (store.keyspace("accounts"), store.keyspace("history")) else {
            return (states, 0);
        };
        states.push(both(&acct, &hist));
        let mut acked = 0;
        for step in 0..STEPS {
            let mut t = store.transaction();
            let (from, to) = (format!("a{}", step % 3), format!("a{}", (step + 1) % 3));
            let bal = |t: &mut filterstore::Transaction, k: &str| -> i64 {
                t.get_in(&acct, k)
                    .ok()
                    .flatten()
                    .map_or(0, |v| std::str::from_utf8(&v).unwrap().parse().unwrap())
            };
            let (f, g) = (bal(&mut t, &from), bal(&mut t, &to));
            t.put_in(&acct, &from, (f - 7).to_string());
            t.put_in(&acct, &to, (g + 7).to_string());
            t.put_in(
                &hist,
                format!("{step:03}"),
                format!("{from}->{to} {}", "x".repeat(60)),
            );
            if t.commit().is_err() {
                break;
            }
            acked += 1;
            states.push(both(&acct, &hist));
        }
        (states, acked)
    };
    common::at_every_power_cut(tmp.path(), STEPS, run, |cut, img| {
        let store = Store::open(img, Options::default()).unwrap();
        let got = match (
            store.existing_keyspace("accounts"),
            store.existing_keyspace("history"),
        ) {
            (Some(a), Some(h)) => both(&a, &h),
            _ => (Contents::new(), Contents::new()),
        };
        let sum: i64 = got
            .0
            .values()
            .map(|v| std::str::from_utf8(v).unwrap().parse::<i64>().unwrap())
            .sum();
        assert_eq!(sum, 0, "cut {cut}: a torn transfer");
        got
    });
}
