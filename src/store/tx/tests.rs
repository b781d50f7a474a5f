use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use crate::{Error, Options, Store};

const WAIT: Duration = Duration::from_secs(20);

fn window_bytes(store: &Store) -> usize {
    store.inner.lock_writer().window.bytes()
}

/// Two transactions that read and write the same key, committed in one group behind a
/// leader: the leader checks the second against the first's writes (made in the same
/// group), so exactly one commits; two that do not overlap both commit in one group.
#[test]
fn conflicts_are_found_within_one_group() {
    for overlap in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Options::default()).unwrap();
        store.put("warm", "0").unwrap();
        let (ka, kb) = if overlap { ("x", "x") } else { ("x", "y") };
        let results = std::thread::scope(|s| {
            // The writer lock held here stands for a group in progress: `a` leads and waits
            // for it; the two transactions queue behind it and join its group.
            let held = store.inner.lock_writer();
            let a = s.spawn(|| store.put("a", "1"));
            let end = Instant::now() + WAIT;
            while !store.inner.commit.leading_now() {
                assert!(Instant::now() < end, "a never led");
                std::thread::sleep(Duration::from_millis(1));
            }
            let txs: Vec<_> = [ka, kb]
                .into_iter()
                .map(|k| {
                    let mut t = store.transaction();
                    t.get(k).unwrap();
                    t.put(k, "tx");
                    s.spawn(move || t.commit())
                })
                .collect();
            while store.inner.commit.queued() < 2 {
                assert!(Instant::now() < end, "the transactions never queued");
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(held);
            a.join().unwrap().unwrap();
            txs.into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        });
        let st = store.stats();
        assert_eq!(st.commit_groups, 2, "one group after the first write");
        let ok = results.iter().filter(|r| r.is_ok()).count();
        let conflicts = results
            .iter()
            .filter(|r| matches!(r, Err(Error::Conflict)))
            .count();
        if overlap {
            assert_eq!((ok, conflicts), (1, 1), "{results:?}");
        } else {
            assert_eq!(ok, 2, "{results:?}");
            assert_eq!(store.get("y").unwrap(), Some(crate::Slice::from(b"tx")));
        }
        assert_eq!(store.get("x").unwrap(), Some(crate::Slice::from(b"tx")));
        assert_eq!(store.last_seq(), 3 + u64::from(!overlap));
    }
}

/// The window holds keys only while a transaction is open, and at most its limit.
#[test]
fn the_window_is_empty_without_open_transactions_and_bounded_with_one() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default().transaction_window_bytes(20_000);
    let store = Store::open(dir.path(), opts).unwrap();
    for i in 0..100u32 {
        store.put(i.to_be_bytes(), "v").unwrap();
    }
    assert_eq!(window_bytes(&store), 0, "no transaction open: nothing kept");
    let t = store.transaction();
    for i in 0..100u32 {
        store.put(i.to_be_bytes(), "v").unwrap();
    }
    assert_eq!(window_bytes(&store), 100 * (4 + 64));
    for i in 0..10_000u32 {
        store.put(i.to_be_bytes(), "v").unwrap();
        assert!(window_bytes(&store) <= 20_000);
    }
    drop(t);
    // The next commit finds no transaction open and empties it.
    store.put("k", "v").unwrap();
    assert_eq!(window_bytes(&store), 0);
    assert_eq!(store.inner.txs.active.load(SeqCst), 0);
}

/// A transaction that began after older ones committed keeps only what it needs: entries
/// at or below the oldest open snapshot go.
#[test]
fn the_window_keeps_only_what_the_oldest_open_transaction_needs() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    let old = store.transaction();
    for i in 0..50u32 {
        store.put(i.to_be_bytes(), "v").unwrap();
    }
    let young = store.transaction();
    store.put("k", "v").unwrap();
    assert_eq!(window_bytes(&store), 50 * (4 + 64) + (1 + 64));
    drop(old);
    store.put("l", "v").unwrap();
    assert_eq!(window_bytes(&store), 2 * (1 + 64));
    drop(young);
}
