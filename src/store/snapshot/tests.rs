//! Snapshots under the global filter: which way they read, and when they change.

use crate::{FilterKind, Options, Store};

fn put_range(store: &Store, from: u32, to: u32, tag: &str) {
    for i in from..to {
        let v = format!("{tag}{i}");
        store
            .put(format!("key{i:05}").as_bytes(), v.as_bytes())
            .unwrap();
    }
}

/// A snapshot reads through the global filter while flushes only add entries to it, and
/// reads its tables unfiltered once a compaction published after it relabelled them; a
/// snapshot taken after that compaction reads through the filter again.
#[test]
fn a_global_snapshot_reads_unfiltered_only_after_a_relabelling_change() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        filter: Some(FilterKind::Global),
        compaction_trigger: None,
        ..Options::default()
    };
    let store = Store::open(dir.path(), opts).unwrap();
    put_range(&store, 0, 1000, "a");
    store.flush().unwrap();
    let snap = store.snapshot();
    put_range(&store, 500, 1500, "b");
    store.flush().unwrap();
    for i in [0u32, 700, 1200] {
        let want = (i < 1000).then(|| format!("a{i}").into_bytes());
        assert_eq!(snap.get(format!("key{i:05}")).unwrap().map(Vec::from), want);
    }
    assert!(
        !snap.reads_unfiltered(),
        "a flush does not change how it reads"
    );
    store.compact().unwrap();
    for i in [0u32, 700, 1200] {
        let want = (i < 1000).then(|| format!("a{i}").into_bytes());
        assert_eq!(snap.get(format!("key{i:05}")).unwrap().map(Vec::from), want);
    }
    assert!(
        snap.reads_unfiltered(),
        "the compaction relabelled its entries"
    );
    let later = store.snapshot();
    assert_eq!(
        later.get("key00700").unwrap().map(Vec::from),
        Some(b"b700".to_vec())
    );
    assert!(!later.reads_unfiltered());
}

/// While a compaction is under way it has already removed, in place, the global filter's
/// entries of the versions it consumes: a key deleted after a snapshot was taken, whose
/// tombstone and older value a bottom compaction drops together, has no entry left. A
/// snapshot that still sees the value reads its tables unfiltered meanwhile, not through
/// the filter (which would say "absent").
#[test]
fn a_global_snapshot_reads_unfiltered_while_a_compaction_changes_the_filter() {
    use crate::filter::global::{MergeKey, RunSet};
    use crate::global_index::{level_run, Move};
    use crate::hash::key_hash;

    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        filter: Some(FilterKind::Global),
        compaction_trigger: None,
        ..Options::default()
    };
    let store = Store::open(dir.path(), opts).unwrap();
    // A deepest level apart (its table has a filter of its own), so that the values below
    // stay in L0, in the global filter.
    store.put(b"zzz", b"z").unwrap();
    store.flush().unwrap();
    store.compact().unwrap();
    put_range(&store, 0, 100, "a");
    store.flush().unwrap();
    let data_run = store.inner.current().levels()[0].tables()[0].run().unwrap();
    let snap = store.snapshot();
    for i in 0..50u32 {
        store.delete(format!("key{i:05}").as_bytes()).unwrap();
    }
    store.flush().unwrap();
    let v = store.inner.current();
    let g = v.global().unwrap().clone();
    let tomb_run = v.levels()[0].tables()[0].run().unwrap();
    let l1 = level_run(1).unwrap();
    // What a bottom compaction of the tombstones into L1 (the deepest level, whose tables
    // have filters of their own) does before it publishes: the entries of both L0 runs go.
    let mut keys: Vec<MergeKey> = (0..50u32)
        .map(|i| MergeKey {
            hash: key_hash(format!("key{i:05}").as_bytes()),
            from: RunSet::of(tomb_run).with(data_run),
            to: None,
        })
        .collect();
    // Announced as a move into L1 (as if L1 were in the filter): the announcement alone
    // does not name the sources for a lookup whose entries are gone, the snapshot's
    // unfiltered read does.
    g.begin_move(Move {
        sources: RunSet::of(tomb_run).with(data_run),
        output: Some(l1),
    });
    g.filter.writer().merge_batch(&mut keys);
    for i in [0u32, 10, 49, 50, 99] {
        assert_eq!(
            snap.get(format!("key{i:05}")).unwrap().map(Vec::from),
            Some(format!("a{i}").into_bytes()),
            "key {i} during the change"
        );
    }
    assert_eq!(
        snap.multi_get(&["key00007", "key00077"])
            .unwrap()
            .into_iter()
            .map(|v| v.map(Vec::from))
            .collect::<Vec<_>>(),
        [Some(b"a7".to_vec()), Some(b"a77".to_vec())]
    );
    g.filter.writer().unmerge_batch(&mut keys);
    g.end_move();
    assert_eq!(
        snap.get("key00003").unwrap().map(Vec::from),
        Some(b"a3".to_vec())
    );
}
