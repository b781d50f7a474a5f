//! End-to-end tests of `store --keyspace`, `store keyspaces` and `store drop-keyspace`.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{ok, store_dir as store};

/// `store --dir DIR ARGS...` with `stdin`.
fn store_stdin(dir: &Path, args: &[&str], stdin: &[u8]) -> common::Output {
    let d = dir.to_str().unwrap();
    let mut all = vec!["--dir", d];
    all.extend_from_slice(args);
    common::run_store(&all, stdin, None, None, Duration::from_secs(60))
}

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

/// `verify --filters` asks every table's keys of its filters, in every keyspace: a filter
/// file swapped for another table's (checksums intact, so plain `verify` passes) lacks keys,
/// which then read as absent; it is named, exit 3.
#[test]
fn verify_filters_finds_a_filter_that_lacks_keys() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("db");
    for (ks, p) in [(None, "a"), (Some("ks"), "b")] {
        let lines: String = (0..2000).map(|i| format!("{p}{i:05}\tv\n")).collect();
        let mut args = ks.map_or(vec![], |k| vec!["--keyspace", k]);
        args.push("load");
        ok(store_stdin(&d, &args, lines.as_bytes()));
        args.pop();
        args.push("flush");
        ok(store(&d, &args));
    }
    let out = ok(store(&d, &["verify", "--filters"]));
    assert!(
        out.contains("keyspace \"default\": 2000 keys of 1 tables"),
        "{out}"
    );
    assert!(
        out.contains("keyspace \"ks\": 2000 keys of 1 tables"),
        "{out}"
    );
    for ext in ["filter", "range"] {
        let mut files: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == ext))
            .collect();
        files.sort();
        assert_eq!(files.len(), 2, "{files:?}");
        let kept = std::fs::read(&files[0]).unwrap();
        std::fs::copy(&files[1], &files[0]).unwrap();
        assert_eq!(store(&d, &["verify"]).code, 0, "checksums intact");
        let v = store(&d, &["verify", "--filters"]);
        assert_eq!(v.code, 3, "{}", v.stderr);
        let name = files[0].file_name().unwrap().to_str().unwrap();
        assert!(
            v.stderr.contains(name) && v.stderr.contains("lacks"),
            "{}",
            v.stderr
        );
        if ext == "filter" {
            // The damage it finds: a key that is there reads as absent.
            assert_eq!(store(&d, &["get", "a00005"]).code, 1);
        }
        std::fs::write(&files[0], kept).unwrap();
        ok(store(&d, &["verify", "--filters"]));
    }
}
