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
        assert_eq!(snap.get(format!("key{i:05}")).unwrap(), want);
    }
    assert!(
        !snap.reads_unfiltered(),
        "a flush does not change how it reads"
    );
    store.compact().unwrap();
    for i in [0u32, 700, 1200] {
        let want = (i < 1000).then(|| format!("a{i}").into_bytes());
        assert_eq!(snap.get(format!("key{i:05}")).unwrap(), want);
    }
    assert!(
        snap.reads_unfiltered(),
        "the compaction relabelled its entries"
    );
    let later = store.snapshot();
    assert_eq!(later.get("key00700").unwrap(), Some(b"b700".to_vec()));
    assert!(!later.reads_unfiltered());
}
