//! End-to-end tests of `store checkpoint` and `store --read-only`.

mod common;

use filterstore::{Options, Store};

use common::{ok, store_dir as store};

#[test]
fn checkpoint_then_restore_by_opening_it() {
    let t = tempfile::tempdir().unwrap();
    let (d, cp) = (t.path().join("db"), t.path().join("cp"));
    ok(store(&d, &["put", "k", "v"]));
    let out = ok(store(&d, &["checkpoint", cp.to_str().unwrap()]));
    assert!(
        out.starts_with(&format!("checkpoint {}: ", cp.display())),
        "{out}"
    );
    assert_eq!(ok(store(&cp, &["get", "k"])), "v\n");
    assert!(ok(store(&cp, &["verify"])).contains("intact"));
    // An existing destination is a usage error; nothing of it is changed.
    let again = store(&d, &["checkpoint", cp.to_str().unwrap()]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(again.stderr.contains("exists"), "{}", again.stderr);
}

#[test]
fn read_only_commands_beside_a_writer() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("db");
    ok(store(&d, &["put", "k", "v"]));
    let writer = Store::open(&d, Options::default()).unwrap();
    writer.put("w", "x").unwrap();
    // The writer holds the lock: a plain get is refused, a read-only one is not.
    assert_eq!(store(&d, &["get", "w"]).code, 2);
    assert_eq!(ok(store(&d, &["--read-only", "get", "w"])), "x\n");
    assert_eq!(ok(store(&d, &["--read-only", "scan"])).lines().count(), 2);
    assert!(ok(store(&d, &["--read-only", "stats"])).contains("tables"));
    let put = store(&d, &["--read-only", "put", "a", "b"]);
    assert_eq!(put.code, 2);
    assert!(put.stderr.contains("read-only"), "{}", put.stderr);
    drop(writer);
    assert_eq!(store(&d, &["get", "a"]).code, 1);
}

#[test]
fn keyspaces_read_only_beside_a_writer_and_in_a_checkpoint() {
    let t = tempfile::tempdir().unwrap();
    let (d, cp) = (t.path().join("db"), t.path().join("cp"));
    ok(store(&d, &["--keyspace", "a", "put", "k", "in-a"]));
    ok(store(&d, &["put", "k", "in-default"]));
    let writer = Store::open(&d, Options::default()).unwrap();
    writer.keyspace("a").unwrap().put("w", "x").unwrap();
    let ro = |args: &[&str]| store(&d, &[&["--read-only"], args].concat());
    assert_eq!(ok(ro(&["--keyspace", "a", "get", "w"])), "x\n");
    assert_eq!(ok(ro(&["--keyspace", "a", "get", "k"])), "in-a\n");
    assert_eq!(ok(ro(&["get", "k"])), "in-default\n");
    assert_eq!(ok(ro(&["--keyspace", "a", "scan"])).lines().count(), 2);
    assert!(ok(ro(&["keyspaces"])).contains('a'));
    // No keyspace of that name: a usage error; writes refused, none created.
    assert_eq!(ro(&["--keyspace", "b", "get", "k"]).code, 2);
    let put = ro(&["--keyspace", "a", "put", "y", "z"]);
    assert_eq!(put.code, 2);
    assert!(put.stderr.contains("read-only"), "{}", put.stderr);
    assert_eq!(ro(&["--keyspace", "b", "put", "y", "z"]).code, 2);
    drop(writer);
    ok(store(&d, &["checkpoint", cp.to_str().unwrap()]));
    assert_eq!(ok(store(&cp, &["--keyspace", "a", "get", "w"])), "x\n");
    assert_eq!(ok(store(&cp, &["get", "k"])), "in-default\n");
    assert!(ok(store(&cp, &["verify"])).contains("intact"));
}

#[test]
fn stats_json_counts_range_tombstones_and_tables_dropped() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("db");
    ok(store(&d, &["put", "a", "1"]));
    ok(store(&d, &["put", "b", "2"]));
    ok(store(&d, &["delete-range", "b", "c"]));
    let v: serde_json::Value = serde_json::from_str(&ok(store(&d, &["stats", "--json"]))).unwrap();
    let l = &v["lifecycle"];
    assert_eq!(l["range_tombstones_live"], 1, "{v}");
    for f in [
        "entries_expired",
        "bytes_reclaimed_by_expiry",
        "tables_dropped_whole",
    ] {
        assert_eq!(l[f], 0, "{f}: {v}");
    }
    assert!(ok(store(&d, &["stats"])).contains("1 range tombstones live"));
}

/// `store stress --checkpoints --kill`: a child that puts, deletes ranges and makes
/// checkpoints is killed at random; every checkpoint checked opens, verifies and holds what
/// was acknowledged before it began, and the store every acknowledged write.
#[test]
fn stress_kills_a_writer_making_checkpoints_and_checks_them() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("soak");
    let args = ["stress", "--checkpoints", "--kill", "--duration", "3"];
    let out = ok(store(&d, &args));
    for want in ["problems 0", "checkpoints checked "] {
        assert!(out.contains(want), "no `{want}` in {out}");
    }
    assert!(!out.contains("kills 0,"), "{out}");
    assert!(!out.contains("checkpoints checked 0"), "{out}");
    // --checkpoints needs --kill.
    assert_eq!(store(&t.path().join("x"), &args[..2]).code, 2);
}
