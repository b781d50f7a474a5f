//! End-to-end tests of `store --keyspace`, `store keyspaces` and `store drop-keyspace`.

mod common;

use std::path::Path;

use common::{ok, store_dir as store};

fn logs(dir: &Path) -> usize {
    common::model::files_with_extension(dir, "wal")
}

#[test]
fn keyspaces_from_the_command_line() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("db");
    ok(store(&d, &["put", "k", "default"]));
    ok(store(&d, &["--keyspace", "a", "put", "k", "in-a"]));
    ok(store(&d, &["put", "k", "in-b", "--keyspace", "b"]));
    assert_eq!(ok(store(&d, &["get", "k"])), "default\n");
    assert_eq!(ok(store(&d, &["--keyspace", "a", "get", "k"])), "in-a\n");
    assert_eq!(ok(store(&d, &["--keyspace", "b", "get", "k"])), "in-b\n");
    // Reading a keyspace that does not exist creates nothing: exit 2.
    let none = store(&d, &["--keyspace", "c", "get", "k"]);
    assert_eq!(none.code, 2, "{}", none.stderr);
    ok(store(&d, &["--keyspace", "a", "flush"]));
    let scan = ok(store(&d, &["--keyspace", "a", "scan"]));
    assert!(scan.contains("in-a") && !scan.contains("default"), "{scan}");
    let list = ok(store(&d, &["keyspaces"]));
    let names: Vec<&str> = list
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(names, ["(default)", "a", "b"], "{list}");
    assert!(list.lines().nth(1).unwrap().contains("tables 1"), "{list}");
    // 300 writes into a, one process each, while b holds one early write: few logs.
    for i in 0..300 {
        ok(store(
            &d,
            &["--keyspace", "a", "put", &format!("key{i}"), "v"],
        ));
    }
    assert!(logs(&d) <= 4, "{} logs", logs(&d));
    assert_eq!(ok(store(&d, &["--keyspace", "b", "get", "k"])), "in-b\n");
    ok(store(&d, &["drop-keyspace", "a"]));
    let list = ok(store(&d, &["keyspaces"]));
    assert_eq!(list.lines().count(), 2, "{list}");
    let gone = store(&d, &["--keyspace", "a", "get", "k"]);
    assert_eq!(gone.code, 2, "{}", gone.stderr);
    let again = store(&d, &["drop-keyspace", "a"]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    // Re-created under the same name: empty.
    ok(store(&d, &["--keyspace", "a", "put", "new", "1"]));
    assert_eq!(store(&d, &["--keyspace", "a", "get", "k"]).code, 1);
    assert_eq!(ok(store(&d, &["get", "k"])), "default\n");
}

/// A keyspace under the global filter from the command line: created with `--filter
/// global`, its checkpoint `GLOBALFILTER-1` written, `stats` showing its global filter,
/// `refilter --filter KIND` switching it off and back (the default keyspace untouched), and
/// `drop-keyspace` removing its checkpoint.
#[test]
fn a_global_keyspace_from_the_command_line() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("db");
    ok(store(&d, &["put", "k", "default"]));
    ok(store(
        &d,
        &["--keyspace", "g", "--filter", "global", "put", "k", "in-g"],
    ));
    ok(store(&d, &["--keyspace", "g", "flush"]));
    assert!(d.join("GLOBALFILTER-1").exists());
    let stats = ok(store(&d, &["--keyspace", "g", "stats"]));
    assert!(stats.contains("global filter:"), "{stats}");
    assert!(stats.contains("uniform, global at"), "{stats}");
    let stats = ok(store(&d, &["stats"]));
    assert!(!stats.contains("uniform, global at"), "{stats}");
    ok(store(
        &d,
        &["--keyspace", "g", "refilter", "--filter", "bloom"],
    ));
    let stats = ok(store(&d, &["--keyspace", "g", "stats"]));
    assert!(!stats.contains("global filter:"), "{stats}");
    assert!(stats.contains("uniform, bloom at"), "{stats}");
    ok(store(
        &d,
        &["--keyspace", "g", "refilter", "--filter", "global"],
    ));
    let stats = ok(store(&d, &["--keyspace", "g", "stats"]));
    assert!(stats.contains("global filter:"), "{stats}");
    // Written when the refilter's process closed the store, read back by this one.
    assert!(
        stats.contains("read from its checkpoint at open"),
        "{stats}"
    );
    assert_eq!(ok(store(&d, &["--keyspace", "g", "get", "k"])), "in-g\n");
    assert_eq!(ok(store(&d, &["get", "k"])), "default\n");
    ok(store(&d, &["drop-keyspace", "g"]));
    assert!(!d.join("GLOBALFILTER-1").exists());
}
