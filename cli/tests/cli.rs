//! End-to-end tests of the `store` binary: every command and every exit code.
//!
//! Each test runs the built binary (`CARGO_BIN_EXE_store`) in its own temporary directory,
//! with a timeout so that a hang fails the test instead of stalling the suite.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use filterstore::{Options, Store};

const TIMEOUT: Duration = Duration::from_secs(30);

use common::Output as Out;

/// Runs the binary with `args`, `stdin` piped in, `FILTERSTORE_DIR` unset unless `env`
/// sets it, in working directory `cwd`.
fn run_full(args: &[&str], stdin: &[u8], env: Option<&Path>, cwd: Option<&Path>) -> Out {
    common::run_store(args, stdin, env, cwd, TIMEOUT)
}

/// Runs `store --dir DIR ARGS...` with empty stdin.
fn store(dir: &Path, args: &[&str]) -> Out {
    store_in(dir, args, b"")
}

/// Runs `store --dir DIR ARGS...` with `stdin`.
fn store_in(dir: &Path, args: &[&str], stdin: &[u8]) -> Out {
    let d = dir.to_str().unwrap();
    let mut all = vec!["--dir", d];
    all.extend_from_slice(args);
    run_full(&all, stdin, None, None)
}

/// Asserts success and returns stdout as text.
#[track_caller]
fn ok(o: Out) -> String {
    assert_eq!(o.code, 0, "stderr: {}", o.stderr);
    o.text()
}

fn db(t: &tempfile::TempDir) -> PathBuf {
    t.path().join("db")
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    v
}

#[test]
fn put_get_delete_round_trip() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    ok(store(&d, &["put", "greeting", "hello big wide world"]));
    ok(store(&d, &["put", "clé-ключ-🔑", "значение ✓"]));
    ok(store(&d, &["put", "empty", ""]));
    ok(store(&d, &["put", "neg", "-5"]));
    ok(store(&d, &["put", "--", "-dash", "-value"]));
    let get = |k: &str| store(&d, &["get", k]);
    assert_eq!(ok(get("greeting")), "hello big wide world\n");
    assert_eq!(ok(get("clé-ключ-🔑")), "значение ✓\n");
    assert_eq!(ok(get("empty")), "\n");
    assert_eq!(ok(get("neg")), "-5\n");
    assert_eq!(ok(store(&d, &["get", "--", "-dash"])), "-value\n");
    let missing = get("nothing");
    assert_eq!(missing.code, 1);
    assert!(missing.stdout.is_empty());
    // Overwrite, delete, delete again (absent: still 0).
    ok(store(&d, &["put", "greeting", "bye"]));
    assert_eq!(ok(get("greeting")), "bye\n");
    ok(store(&d, &["delete", "greeting"]));
    ok(store(&d, &["delete", "greeting"]));
    ok(store(&d, &["delete", "never-there"]));
    assert_eq!(get("greeting").code, 1);
    // Survives a flush into a table.
    ok(store(&d, &["flush"]));
    assert_eq!(ok(get("clé-ключ-🔑")), "значение ✓\n");
    assert_eq!(get("greeting").code, 1);
}

#[test]
fn one_mib_value_from_stdin_round_trips_byte_for_byte() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    let mut x = 0x1234_5678_9abc_def0u64;
    let value: Vec<u8> = (0..(1 << 20))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    assert!(value.contains(&b'\n') && value.contains(&0) && value.contains(&0xff));
    ok(store_in(&d, &["put", "big"], &value));
    ok(store_in(&d, &["put", "big2", "-"], &value[..1000]));
    ok(store_in(&d, &["put", "nl"], b"line\n"));
    let got = store(&d, &["get", "big"]);
    assert_eq!(got.code, 0);
    assert_eq!(got.stdout.len(), value.len() + 1);
    assert!(got.stdout[..value.len()] == value[..], "value differs");
    assert_eq!(got.stdout.last(), Some(&b'\n'));
    assert_eq!(
        store(&d, &["get", "big2"]).stdout,
        [&value[..1000], b"\n"].concat()
    );
    assert_eq!(store(&d, &["get", "nl"]).stdout, b"line\n\n");
    // Still exact from a table.
    ok(store(&d, &["flush"]));
    assert_eq!(store(&d, &["get", "big"]).stdout[..value.len()], value[..]);
}

#[test]
fn load_100k_lines_then_scan_and_get() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    let file = t.path().join("in.tsv");
    let mut text = String::new();
    for i in 0..100_000 {
        text.push_str(&format!("key{i:06}\tvalue {i}\twith a tab\n"));
    }
    std::fs::write(&file, &text).unwrap();
    let out = ok(store(&d, &["load", file.to_str().unwrap()]));
    assert_eq!(out.trim(), "loaded 100000 lines");
    let scan = store(&d, &["scan"]);
    assert_eq!(scan.code, 0);
    let lines = scan.lines();
    assert_eq!(lines.len(), 100_000);
    assert_eq!(lines[0], "key000000\tvalue 0\twith a tab");
    assert_eq!(lines[99_999], "key099999\tvalue 99999\twith a tab");
    for i in [0, 1, 4242, 99_999] {
        let got = ok(store(&d, &["get", &format!("key{i:06}")]));
        assert_eq!(got, format!("value {i}\twith a tab\n"));
    }
    assert_eq!(store(&d, &["get", "key100000"]).code, 1);
}

#[test]
fn load_from_stdin_with_crlf_and_no_final_newline() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    let input = b"a\t1\r\nb\t\r\nc\tx y\tz\r\n\xff\xfe\tbinary\nd\tlast";
    assert_eq!(ok(store_in(&d, &["load"], input)).trim(), "loaded 5 lines");
    assert_eq!(
        ok(store_in(&d, &["load", "-"], b"e\t5\n")).trim(),
        "loaded 1 lines"
    );
    assert_eq!(ok(store(&d, &["get", "a"])), "1\n");
    assert_eq!(ok(store(&d, &["get", "b"])), "\n");
    assert_eq!(ok(store(&d, &["get", "c"])), "x y\tz\n");
    assert_eq!(ok(store(&d, &["get", "d"])), "last\n");
    assert_eq!(ok(store(&d, &["get", "e"])), "5\n");
    let scan = store(&d, &["scan"]);
    assert!(scan.stdout.ends_with(b"e\t5\n\xff\xfe\tbinary\n"));
    // An empty input loads nothing, successfully.
    assert_eq!(ok(store_in(&d, &["load"], b"")).trim(), "loaded 0 lines");
}

#[test]
fn malformed_load_line_keeps_the_lines_before_it() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    let mut input = String::new();
    for i in 1..=2500 {
        input.push_str(&format!("k{i}\tv{i}\n"));
    }
    input.push_str("this line has no tab\n");
    input.push_str("after\tnot loaded\n");
    let out = store_in(&d, &["load"], input.as_bytes());
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("line 2501"), "{}", out.stderr);
    assert!(out.stderr.contains("2500 lines before"), "{}", out.stderr);
    assert_eq!(ok(store(&d, &["get", "k1"])), "v1\n");
    assert_eq!(ok(store(&d, &["get", "k2500"])), "v2500\n");
    assert_eq!(store(&d, &["get", "after"]).code, 1);
    assert_eq!(store(&d, &["scan"]).lines().len(), 2500);
    // An empty line is malformed too.
    let out = store_in(&d, &["load"], b"x\t1\n\ny\t2\n");
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("line 2"), "{}", out.stderr);
    assert_eq!(ok(store(&d, &["get", "x"])), "1\n");
    assert_eq!(store(&d, &["get", "y"]).code, 1);
    // A missing input file: exit 2, no store created.
    let t2 = tempfile::tempdir().unwrap();
    let out = store(&db(&t2), &["load", "/nonexistent/input.tsv"]);
    assert_eq!(out.code, 2);
    assert!(!db(&t2).exists());
}

#[test]
fn locked_store_fails_at_once() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    ok(store(&d, &["put", "k", "v"]));
    let held = Store::open(&d, Options::default()).unwrap();
    for args in [
        &["get", "k"][..],
        &["put", "k", "w"],
        &["load"],
        &["scan"],
        &["stats"],
        &["compact"],
    ] {
        let start = Instant::now();
        let out = store(&d, args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("locked"), "{args:?}: {}", out.stderr);
        assert!(start.elapsed() < Duration::from_secs(5), "{args:?} waited");
    }
    drop(held);
    assert_eq!(ok(store(&d, &["get", "k"])), "v\n");
}

#[test]
fn reading_commands_refuse_a_missing_store_and_create_nothing() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    for args in [
        &["get", "k"][..],
        &["scan"],
        &["stats"],
        &["stats", "--json"],
        &["verify"],
        &["flush"],
        &["compact"],
        &["refilter", "--filter", "bloom"],
    ] {
        let out = store(&d, args);
        assert_eq!(out.code, 2, "{args:?}");
        assert!(out.stderr.contains("no store"), "{args:?}: {}", out.stderr);
        assert!(!d.exists(), "{args:?} created the directory");
    }
    // An existing but empty directory is no store either, and is left empty.
    let empty = t.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for args in [
        &["get", "k"][..],
        &["scan"],
        &["stats"],
        &["verify"],
        &["flush"],
    ] {
        let out = store(&empty, args);
        assert_eq!(out.code, 2, "{args:?}");
        assert!(out.stderr.contains("no store"), "{args:?}: {}", out.stderr);
    }
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    // A write creates it.
    ok(store(&d, &["delete", "k"]));
    assert!(d.join("MANIFEST").exists());
    // Data files without a MANIFEST are damage, not a missing store.
    std::fs::remove_file(d.join("MANIFEST")).unwrap();
    std::fs::write(d.join("000001.sst"), b"orphan").unwrap();
    for args in [&["get", "k"][..], &["verify"], &["put", "k", "v"]] {
        let out = store(&d, args);
        assert_eq!(out.code, 3, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("MANIFEST"), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn a_file_where_the_directory_should_be() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("file");
    std::fs::write(&f, b"not a store").unwrap();
    for args in [
        &["put", "k", "v"][..],
        &["get", "k"],
        &["verify"],
        &["load"],
    ] {
        let out = store(&f, args);
        assert_eq!(out.code, 2, "{args:?}");
        assert!(out.stderr.contains("not a directory"), "{}", out.stderr);
    }
    assert_eq!(std::fs::read(&f).unwrap(), b"not a store");
}

#[test]
fn bad_filter_and_fpr_are_usage_errors() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    let out = store(&d, &["--filter", "bloomy", "put", "k", "v"]);
    assert_eq!(out.code, 2);
    for k in ["none", "bloom", "blocked-bloom", "cuckoo", "binary-fuse"] {
        assert!(out.stderr.contains(k), "{}", out.stderr);
    }
    for bad in ["0", "1", "-0.5", "1.5", "abc", "nan", "inf", ""] {
        let out = store(&d, &["put", "k", "v", "--fpr", bad]);
        assert_eq!(out.code, 2, "--fpr {bad:?}");
        assert!(out.stderr.contains("--fpr"), "{}", out.stderr);
    }
    assert!(!d.exists(), "a refused command created the store");
}

#[test]
fn dir_from_env_then_default() {
    let t = tempfile::tempdir().unwrap();
    let envdir = t.path().join("from-env");
    assert_eq!(
        run_full(&["put", "k", "env"], b"", Some(&envdir), None).code,
        0
    );
    assert!(envdir.join("MANIFEST").exists());
    // --dir wins over the environment.
    let flagdir = t.path().join("from-flag");
    let f = flagdir.to_str().unwrap();
    assert_eq!(
        run_full(&["put", "k", "flag", "--dir", f], b"", Some(&envdir), None).code,
        0
    );
    let got = run_full(&["get", "k"], b"", Some(&envdir), None);
    assert_eq!(got.text(), "env\n");
    // Neither: ./filterstore-data in the working directory.
    let cwd = t.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    assert_eq!(
        run_full(&["put", "k", "cwd"], b"", None, Some(&cwd)).code,
        0
    );
    assert!(cwd.join("filterstore-data").join("MANIFEST").exists());
    let got = run_full(&["get", "k"], b"", None, Some(&cwd));
    assert_eq!(got.text(), "cwd\n");
}

/// `stats --json`, parsed.
fn stats_json(d: &Path) -> serde_json::Value {
    let text = ok(store(d, &["stats", "--json"]));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Field `name` of every table in `stats --json` (newest first).
fn table_fields(json: &serde_json::Value, name: &str) -> Vec<serde_json::Value> {
    json["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| t[name].clone())
        .collect()
}

#[test]
fn filter_choice_default_and_refilter() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    // Created with cuckoo at 0.001: the store records it, uniform (every table at 0.001).
    ok(store(
        &d,
        &["--filter", "cuckoo", "--fpr", "0.001", "put", "a", "1"],
    ));
    ok(store(&d, &["flush"]));
    let json = stats_json(&d);
    let close = |v: &serde_json::Value, want: f64| {
        let got = v.as_f64().unwrap_or_else(|| panic!("{v} is no number"));
        assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
    };
    assert_eq!(json["default_filter"]["kind"], "cuckoo");
    assert_eq!(json["default_filter"]["fpr"], 0.001);
    assert_eq!(json["default_filter"]["allocation"], "uniform");
    assert_eq!(
        json["default_filter"]["bits_per_key"],
        serde_json::Value::Null
    );
    assert_eq!(table_fields(&json, "filter_kind"), ["cuckoo"]);
    assert_eq!(table_fields(&json, "target_fpr"), [0.001]);
    // A per-command choice, after the subcommand.
    ok(store(&d, &["put", "b", "2"]));
    ok(store(&d, &["flush", "--filter", "bloom", "--fpr", "0.05"]));
    let json = stats_json(&d);
    assert_eq!(json["table_count"], 2);
    assert_eq!(table_fields(&json, "filter_kind"), ["bloom", "cuckoo"]); // newest first
    assert_eq!(table_fields(&json, "target_fpr"), [0.05, 0.001]);
    // Not recorded: the store's policy is still the one it was created with.
    assert_eq!(json["default_filter"]["kind"], "cuckoo");
    assert_eq!(json["default_filter"]["fpr"], 0.001);
    // refilter needs --filter.
    let out = store(&d, &["refilter"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("--filter"), "{}", out.stderr);
    // refilter, --filter after the command: both tables change, data untouched.
    let ssts = files_with_ext(&d, "sst");
    let sst_bytes: Vec<Vec<u8>> = ssts.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let out = ok(store(
        &d,
        &["refilter", "--filter", "blocked-bloom", "--fpr", "0.02"],
    ));
    assert!(out.contains("refiltered 2 tables"), "{out}");
    let json = stats_json(&d);
    assert_eq!(
        table_fields(&json, "filter_kind"),
        ["blocked-bloom", "blocked-bloom"]
    );
    assert_eq!(table_fields(&json, "target_fpr"), [0.02, 0.02]);
    // The refilter recorded its choice, under the store's allocation.
    assert_eq!(json["default_filter"]["kind"], "blocked-bloom");
    assert_eq!(json["default_filter"]["allocation"], "uniform");
    assert_eq!(json["default_filter"]["fpr"], 0.02);
    assert_eq!(files_with_ext(&d, "sst"), ssts);
    for (p, b) in ssts.iter().zip(&sst_bytes) {
        assert_eq!(&std::fs::read(p).unwrap(), b, "refilter rewrote {p:?}");
    }
    // refilter to none drops the filters; the data is still there.
    ok(store(&d, &["--filter", "none", "refilter"]));
    let json = stats_json(&d);
    assert_eq!(table_fields(&json, "filter_kind"), ["none", "none"]);
    assert_eq!(json["filter_bytes"], 0);
    assert_eq!(json["default_filter"]["kind"], "none");
    assert_eq!(json["default_filter"]["allocation"], "uniform");
    // --allocation monkey at --fpr: Monkey's split of the memory bloom takes at 0.03 on
    // every table (two tables of one key each: 0.03 each), recorded.
    let out = ok(store(
        &d,
        &[
            "refilter",
            "--filter",
            "bloom",
            "--fpr",
            "0.03",
            "--allocation",
            "monkey",
        ],
    ));
    assert!(out.contains("refiltered 2 tables: monkey, bloom"), "{out}");
    let json = stats_json(&d);
    assert_eq!(json["default_filter"]["allocation"], "monkey");
    close(&json["default_filter"]["fpr"], 0.03);
    close(
        &json["default_filter"]["bits_per_key"],
        (1.0f64 / 0.03).ln() / std::f64::consts::LN_2.powi(2),
    );
    for eps in table_fields(&json, "target_fpr") {
        close(&eps, 0.03);
    }
    let text = ok(store(&d, &["stats"]));
    assert!(
        text.contains("filter policy:  monkey, bloom at 7.298 bits per key"),
        "{text}"
    );
    // --allocation uniform at --fpr: every table at that rate, recorded.
    let out = ok(store(
        &d,
        &[
            "refilter",
            "--filter",
            "bloom",
            "--fpr",
            "0.03",
            "--allocation",
            "uniform",
        ],
    ));
    assert!(
        out.contains("refiltered 2 tables: bloom, fpr 0.03"),
        "{out}"
    );
    let json = stats_json(&d);
    assert_eq!(table_fields(&json, "target_fpr"), [0.03, 0.03]);
    assert_eq!(json["default_filter"]["allocation"], "uniform");
    assert_eq!(json["default_filter"]["fpr"], 0.03);
    let text = ok(store(&d, &["stats"]));
    assert!(
        text.contains("filter policy:  uniform, bloom at ε = 0.03"),
        "{text}"
    );
    // A store created with --allocation monkey records it; later commands keep it.
    let t2 = tempfile::tempdir().unwrap();
    let d2 = db(&t2);
    ok(store(&d2, &["--allocation", "monkey", "put", "a", "1"]));
    ok(store(&d2, &["flush"]));
    let json = stats_json(&d2);
    assert_eq!(json["default_filter"]["kind"], "blocked-bloom");
    assert_eq!(json["default_filter"]["allocation"], "monkey");
    close(&json["default_filter"]["fpr"], 0.01);
    assert_eq!(ok(store(&d, &["get", "a"])), "1\n");
}

#[test]
fn stats_text_and_json() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    ok(store_in(&d, &["load"], b"q\"uote\\\t1\nplain\t2\n"));
    ok(store(&d, &["flush"]));
    ok(store(&d, &["put", "z-unflushed", "3"]));
    let text = ok(store(&d, &["stats"]));
    for needle in [
        "tables:         1",
        "blocked-bloom",
        "bits/key",
        "filter bytes",
        "this process:   lookups 0,",
        "memtable:       1 entries",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from\n{text}");
    }
    let json = stats_json(&d);
    assert_eq!(json["table_count"], 1);
    assert_eq!(json["keys"], 2);
    assert_eq!(json["memtable_entries"], 1);
    assert_eq!(json["counters"]["lookups"], 0);
    assert!(json["counters"]["observed_fpr"].is_null());
    assert!(json["tables"][0]["bits_per_key"].as_f64().unwrap() > 0.0);
    assert!(json["filter_bytes"].as_u64().unwrap() > 0);
    assert_eq!(json["levels"][0]["level"], 0);
    assert_eq!(json["levels"][0]["tables"], 1);
    // Keys are given as JSON strings when they are UTF-8, and always in hex.
    assert_eq!(json["tables"][0]["max_key"], "q\"uote\\");
    assert_eq!(json["tables"][0]["max_key_hex"], "7122756f74655c");
    // A binary key: null string, hex kept.
    ok(store_in(&d, &["load"], b"\xff\x00key\tbin\n"));
    ok(store(&d, &["flush"]));
    let json = stats_json(&d);
    assert_eq!(table_fields(&json, "max_key")[0], serde_json::Value::Null);
    assert_eq!(table_fields(&json, "max_key_hex")[0], "ff006b6579");
}

/// `--compression` (before the command) chooses how the tables a command writes store their
/// blocks; `stats` shows the data bytes before and after, per table and in total, and the
/// block cache's counters.
#[test]
fn compression_choice_and_its_stats() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    let input: String = (0..3000)
        .map(|i| format!("key{i:05}\t{}\n", "abc".repeat(20)))
        .collect();
    ok(store_in(
        &d,
        &["--compression", "none", "load"],
        input.as_bytes(),
    ));
    ok(store(&d, &["--compression", "none", "flush"]));
    // A second raw table over the same keys: a compaction has to merge the two.
    ok(store_in(
        &d,
        &["--compression", "none", "load"],
        input.as_bytes(),
    ));
    ok(store(&d, &["--compression", "none", "flush"]));
    let json = stats_json(&d);
    assert_eq!(json["table_count"], 2);
    assert_eq!(json["data_bytes"], json["stored_data_bytes"]);
    let raw = json["data_bytes"].as_u64().unwrap() / 2;
    assert!(raw > 3000 * 60, "{json}");
    // A compaction with lz4 (the default) writes the merged table compressed.
    ok(store(&d, &["compact"]));
    let json = stats_json(&d);
    let stored = json["stored_data_bytes"].as_u64().unwrap();
    // Blocks that compress are cut at 4 KiB, raw ones at 2 KiB (format.md, "Pages"): the
    // same entries in half as many blocks take a few restart arrays less before compression.
    let before = json["data_bytes"].as_u64().unwrap();
    assert!(before < raw && before * 100 > raw * 99, "{before} of {raw}");
    assert!(stored * 4 < raw, "{stored} of {raw}");
    assert_eq!(table_fields(&json, "stored_data_bytes")[0], stored);
    let text = ok(store(&d, &["stats"]));
    assert!(
        text.contains(&format!(
            "data blocks:    {before} bytes before compression, {stored} as stored"
        )),
        "{text}"
    );
    assert!(text.contains("block cache:"), "{text}");
    // Lookups through the cache; this process's and the lifetime counters show them.
    assert_eq!(
        ok(store(&d, &["get", "key00042"])).trim_end(),
        "abc".repeat(20)
    );
    let json = stats_json(&d);
    assert_eq!(json["lifetime"]["block_cache_misses"], 1);
    assert_eq!(json["lifetime"]["data_block_reads"], 1);
    assert_eq!(json["counters"]["block_cache_hits"], 0);
    assert!(json["block_cache"]["capacity_bytes"].as_u64().unwrap() > 0);
    let bad = store(&d, &["--compression", "zip", "flush"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("none, lz4, zstd"), "{}", bad.stderr);
}

/// `--compression zstd` writes zstd blocks (codec 2), which `stats` counts as lz4's are, and
/// which read back; with these values (printable text, each value a run of repeats of a
/// pseudo-random piece) zstd stores fewer bytes than lz4.
#[cfg(feature = "zstd")]
#[test]
fn zstd_compression_and_its_stats() {
    let t = tempfile::tempdir().unwrap();
    let mut stored = Vec::new();
    for codec in ["lz4", "zstd"] {
        let d = db(&t).join(codec);
        let mut x = 1u64;
        let input: String = (0..3000)
            .map(|i| {
                let piece: String = (0..30)
                    .map(|_| {
                        x = filterstore::hash::mix64(x);
                        (b'a' + (x % 26) as u8) as char
                    })
                    .collect();
                format!(
                    "key{i:05}	{}
",
                    piece.repeat(2)
                )
            })
            .collect();
        ok(store_in(
            &d,
            &["--compression", codec, "load"],
            input.as_bytes(),
        ));
        ok(store(&d, &["--compression", codec, "flush"]));
        let json = stats_json(&d);
        let (raw, s) = (
            json["data_bytes"].as_u64().unwrap(),
            json["stored_data_bytes"].as_u64().unwrap(),
        );
        assert!(s < raw * 7 / 8, "{codec}: {s} of {raw}");
        let got = ok(store(&d, &["get", "key01234"]));
        assert_eq!(got.trim_end().len(), 60);
        assert_eq!(
            ok(store(&d, &["verify"]))
                .lines()
                .last()
                .map(|l| l.contains("intact")),
            Some(true)
        );
        stored.push(s);
    }
    assert!(
        stored[1] < stored[0],
        "zstd {} against lz4 {}",
        stored[1],
        stored[0]
    );
}

/// Every `store get` is a process of its own: the lifetime counters add them up, saved when
/// each process closes the store, while the per-process counters start at zero.
#[test]
fn lifetime_counters_add_up_across_processes() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    ok(store_in(&d, &["load"], b"a\t1\nb\t2\nc\t3\n"));
    ok(store(&d, &["flush"]));
    let before = stats_json(&d);
    assert_eq!(before["lifetime"]["lookups"], 0);
    assert_eq!(before["lifetime"]["flushes"], 1);
    assert!(before["lifetime"]["user_bytes_written"].as_u64().unwrap() >= 6);
    ok(store(&d, &["get", "a"]));
    ok(store(&d, &["get", "b"]));
    let _ = store(&d, &["get", "absent"]); // exit 1: not found
    let json = stats_json(&d);
    assert_eq!(json["counters"]["lookups"], 0);
    let l = &json["lifetime"];
    assert_eq!(l["lookups"], 3);
    // Two present keys each pass the filter; the absent one is a negative or a false positive.
    let (neg, pos) = (
        l["filter_negatives"].as_u64().unwrap(),
        l["filter_positives"].as_u64().unwrap(),
    );
    assert_eq!(neg + pos, 3, "{l}");
    assert!(pos >= 2, "{l}");
    assert!(l["data_block_reads"].as_u64().unwrap() >= 2, "{l}");
    assert!(l["problem"].is_null());
    let text = ok(store(&d, &["stats"]));
    assert!(text.contains("lookups 3,"), "{text}");
    // Scans ask the table's range filter: two processes' probes add up too.
    assert_eq!(l["range_probes"], 0);
    ok(store(&d, &["scan", "--from", "a0", "--to", "a1"]));
    ok(store(&d, &["scan", "--prefix", "b"]));
    let l = &stats_json(&d)["lifetime"];
    assert_eq!(l["range_probes"], 2, "{l}");
    let (skipped, fp) = (
        l["range_skipped"].as_u64().unwrap(),
        l["range_false_positives"].as_u64().unwrap(),
    );
    assert!(skipped + fp <= 2, "the prefix scan finds b: {l}");
    let text = ok(store(&d, &["stats"]));
    assert!(text.contains("lifetime: 2 probes by scans"), "{text}");
    // A damaged COUNTERS file is reported, and the count restarts from this open.
    let f = d.join("COUNTERS");
    let mut bytes = std::fs::read(&f).unwrap();
    bytes[20] ^= 0xff;
    std::fs::write(&f, bytes).unwrap();
    let json = stats_json(&d);
    assert!(
        json["lifetime"]["problem"]
            .as_str()
            .unwrap()
            .contains("CRC"),
        "{json}"
    );
    assert_eq!(json["lifetime"]["lookups"], 0);
    // That open rewrote the file at close: the next one reads it again.
    assert!(stats_json(&d)["lifetime"]["problem"].is_null());
}

#[test]
fn compact_prints_counts_before_and_after() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    // Three tables: below half the compaction trigger, so no automatic compaction merges them.
    for i in 0..2 {
        ok(store(&d, &["put", &format!("k{i}"), "v"]));
        ok(store(&d, &["flush"]));
    }
    ok(store(&d, &["delete", "k1"]));
    assert_eq!(ok(store(&d, &["flush"])).trim(), "tables: 3");
    assert_eq!(ok(store(&d, &["compact"])).trim(), "tables: 3 -> 1");
    assert_eq!(ok(store(&d, &["scan"])), "k0\tv\n");
    assert_eq!(ok(store(&d, &["compact"])).trim(), "tables: 1 -> 1");
    assert!(ok(store(&d, &["verify"])).contains("intact"));
}

#[test]
fn scan_prefix_from_to_limit() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    ok(store_in(
        &d,
        &["load"],
        b"a1\t1\na2\t2\na3\t3\nb1\t4\nb2\t5\nc1\t6\ngone\tx\n",
    ));
    ok(store(&d, &["flush"]));
    ok(store(&d, &["delete", "gone"]));
    ok(store(&d, &["put", "a25", "newer"])); // memtable and table merge in order
    let scan = |args: &[&str]| ok(store(&d, &[&["scan"][..], args].concat()));
    assert_eq!(
        scan(&[]),
        "a1\t1\na2\t2\na25\tnewer\na3\t3\nb1\t4\nb2\t5\nc1\t6\n"
    );
    assert_eq!(
        scan(&["--prefix", "a"]),
        "a1\t1\na2\t2\na25\tnewer\na3\t3\n"
    );
    assert_eq!(scan(&["--prefix", "a2"]), "a2\t2\na25\tnewer\n");
    assert_eq!(scan(&["--from", "a3", "--to", "b2"]), "a3\t3\nb1\t4\n");
    assert_eq!(scan(&["--from", "b"]), "b1\t4\nb2\t5\nc1\t6\n");
    assert_eq!(scan(&["--to", "a25"]), "a1\t1\na2\t2\n");
    assert_eq!(scan(&["--limit", "2"]), "a1\t1\na2\t2\n");
    assert_eq!(scan(&["--limit", "0"]), "");
    assert_eq!(
        scan(&["--prefix", "a", "--from", "a25", "--limit", "1"]),
        "a25\tnewer\n"
    );
    assert_eq!(scan(&["--prefix", "b", "--to", "b2"]), "b1\t4\n");
    assert_eq!(scan(&["--from", "c", "--to", "a"]), "");
    assert_eq!(scan(&["--from", "b1", "--to", "b1"]), "");
    assert_eq!(scan(&["--prefix", "zz"]), "");
    // --reverse: the same ranges from their last key down.
    assert_eq!(
        scan(&["--reverse"]),
        "c1\t6\nb2\t5\nb1\t4\na3\t3\na25\tnewer\na2\t2\na1\t1\n"
    );
    assert_eq!(
        scan(&["--reverse", "--prefix", "a", "--limit", "2"]),
        "a3\t3\na25\tnewer\n"
    );
    assert_eq!(
        scan(&["--reverse", "--from", "a3", "--to", "b2"]),
        "b1\t4\na3\t3\n"
    );
    assert_eq!(
        scan(&["--reverse", "--to", "a25", "--limit", "1"]),
        "a2\t2\n"
    );
    assert_eq!(scan(&["--reverse", "--prefix", "zz"]), "");
}

/// Issue 15's scenario: 50 `store put` commands, then 14 bytes of arbitrary data appended to
/// the log files. Every command used to exit 3; now the torn tails are dropped, every put is
/// readable, and `verify` warns (exit 0) naming each log and the offset of its tail, while a
/// damaged record with a valid one after it is still exit 3.
#[test]
fn garbage_appended_to_the_logs_is_a_torn_tail_not_a_dead_store() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    for i in 0..50 {
        ok(store(&d, &["put", &format!("k{i}"), &format!("v{i}")]));
    }
    let logs = files_with_ext(&d, "wal");
    let mut tails = Vec::new();
    for (n, p) in logs.iter().enumerate() {
        let mut b = std::fs::read(p).unwrap();
        // Without the space the log reserved after its records (zeros, the log's end).
        let end = filterstore::wal::replay_bytes(&b, |_, _| {}).unwrap();
        assert_eq!(end.torn_tail, None);
        b.truncate(end.valid_len as usize);
        tails.push((
            p.file_name().unwrap().to_str().unwrap().to_string(),
            b.len(),
        ));
        b.extend((0..14u8).map(|i| i.wrapping_mul(37) ^ (n as u8) ^ 0x5a));
        std::fs::write(p, &b).unwrap();
    }
    let out = ok(store(&d, &["verify"]));
    assert!(out.contains("intact"), "{out}");
    let v = store(&d, &["verify"]);
    for (name, offset) in &tails {
        let line = format!("{name}: offset {offset}: 14 bytes dropped");
        assert!(v.stderr.contains(&line), "no `{line}` in: {}", v.stderr);
    }
    // The first command to open the store drops the tails and says so, one line per log;
    // it rewrote the logs, so the next one has nothing to say.
    let first = store(&d, &["get", "k0"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let notes: Vec<&str> = first.stderr.lines().collect();
    assert_eq!(notes.len(), tails.len(), "{}", first.stderr);
    for (name, offset) in &tails {
        let line = format!("{name}: offset {offset}: 14 bytes dropped");
        assert!(
            notes
                .iter()
                .any(|l| l.starts_with("store: warning: torn tail in ")
                    && l.contains(&line)
                    && l.ends_with(" at open")),
            "no `{line}` in: {}",
            first.stderr
        );
    }
    for i in 0..50 {
        let out = store(&d, &["get", &format!("k{i}")]);
        assert_eq!((out.code, out.text()), (0, format!("v{i}\n")));
        assert_eq!(out.stderr, "", "k{i}");
    }
    assert_eq!(store(&d, &["scan"]).lines().len(), 50);
    // Damage followed by a valid record is refused, as before: a log whose first record is
    // damaged, followed by a valid copy of it (on whichever log holds records now: opening
    // may have rewritten them).
    let p = files_with_ext(&d, "wal")
        .into_iter()
        .find(|p| std::fs::metadata(p).unwrap().len() > 8)
        .expect("a log with a record");
    let name = p.file_name().unwrap().to_str().unwrap().to_string();
    let b = std::fs::read(&p).unwrap();
    let len = u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize;
    let record = b[8..8 + 12 + len].to_vec();
    let mut damaged = b[..8].to_vec();
    damaged.extend_from_slice(&record);
    damaged[8 + 12] ^= 1;
    damaged.extend_from_slice(&record);
    std::fs::write(&p, &damaged).unwrap();
    let out = store(&d, &["get", "k0"]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.contains(name.as_str()) && out.stderr.contains("offset 8:"),
        "{}",
        out.stderr
    );
}

/// Loads `key00000 .. key{n-1}` with values `"{value} {i}"` and seals them into one table.
fn load_and_flush(d: &Path, n: usize, value: &str) {
    let input: String = (0..n)
        .map(|i| format!("key{i:05}\t{value} {i}\n"))
        .collect();
    ok(store_in(d, &["load"], input.as_bytes()));
    ok(store(d, &["flush"]));
}

#[test]
fn verify_finds_a_flipped_byte() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    load_and_flush(&d, 2000, "some value number");
    let out = ok(store(&d, &["verify"]));
    assert!(out.contains("intact"), "{out}");
    let ssts = files_with_ext(&d, "sst");
    assert_eq!(ssts.len(), 1);
    let mut bytes = std::fs::read(&ssts[0]).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&ssts[0], &bytes).unwrap();
    let out = store(&d, &["verify"]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    let name = ssts[0].file_name().unwrap().to_str().unwrap();
    assert!(out.stderr.contains(name), "{}", out.stderr);
    assert!(out.stderr.contains("offset"), "{}", out.stderr);
    // Reading the damaged block from any command is corruption too.
    assert_eq!(store(&d, &["scan"]).code, 3);
    assert_eq!(store(&d, &["get", "key00000"]).code, 3);
    // A damaged MANIFEST: verify and opening both say 3.
    std::fs::write(&ssts[0], {
        bytes[100] ^= 0x40;
        &bytes
    })
    .unwrap();
    ok(store(&d, &["verify"]));
    let m = d.join("MANIFEST");
    let mut mb = std::fs::read(&m).unwrap();
    let last = mb.len() - 1;
    mb[last] ^= 1;
    std::fs::write(&m, &mb).unwrap();
    assert_eq!(store(&d, &["verify"]).code, 3);
    let out = store(&d, &["get", "key00000"]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(out.stderr.contains("MANIFEST"), "{}", out.stderr);
}

#[test]
fn help_and_usage_errors() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    let help = run_full(&["--help"], b"", None, None);
    assert_eq!(help.code, 0);
    let text = help.text();
    for needle in ["Exit codes", "FILTERSTORE_DIR", "locked", "corruption"] {
        assert!(text.contains(needle), "{needle:?} missing from --help");
    }
    for cmd in [
        "put", "get", "delete", "scan", "load", "flush", "compact", "refilter", "stats", "verify",
    ] {
        let out = run_full(&[cmd, "--help"], b"", None, None);
        assert_eq!(out.code, 0, "{cmd} --help");
        assert!(out.text().len() > 100, "{cmd} --help is too short");
    }
    for args in [
        &[][..],
        &["bogus"],
        &["put"],
        &["get"],
        &["get", "a", "b"],
        &["scan", "--limit", "x"],
        &["scan", "--limit", "-1"],
        &["stats", "extra"],
        &["--dir"],
    ] {
        let out = run_full(args, b"", None, Some(t.path()));
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
    }
    assert!(!d.exists());
}

#[test]
fn malformed_inputs_never_panic() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    ok(store(&d, &["put", "k", "v"]));
    let dir_as_file = t.path().to_str().unwrap();
    let cases: &[(&[&str], &[u8])] = &[
        (&["load"], b"\xff\xfe\x00\t\x00\r\r\n\t\n"),
        (&["load"], b"\t\n\t\t\t\n"),
        (&["load"], b"\r\n"),
        (&["load", dir_as_file], b""),
        (&["put", ""], b""),
        (&["get", ""], b""),
        (&["delete", ""], b""),
        (&["scan", "--prefix", ""], b""),
        (&["scan", "--prefix", "\u{10ffff}"], b""),
        (&["scan", "--limit", "18446744073709551615"], b""),
        (&["scan", "--limit", "18446744073709551616"], b""),
        (&["--fpr", "1e-300", "put", "tiny", "x"], b""),
        (&["--fpr", "1e999", "put", "k", "x"], b""),
        (&["--fpr", "0.999999", "flush"], b""),
        (&["--filter", "", "get", "k"], b""),
    ];
    for (args, input) in cases {
        let out = store_in(&d, args, input);
        assert!(
            [0, 1, 2, 3].contains(&out.code),
            "{args:?} exited {}: {}",
            out.code,
            out.stderr
        );
    }
    // The store is still sound after all that.
    assert_eq!(ok(store(&d, &["get", "k"])), "v\n");
    ok(store(&d, &["verify"]));
    // A key over the size limit is refused with exit 2.
    let long = "k".repeat(70_000);
    assert_eq!(store(&d, &["put", &long, "v"]).code, 2);
    let line = format!("{long}\tv\n");
    let out = store_in(&d, &["load"], line.as_bytes());
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("line 1"), "{}", out.stderr);
}

#[test]
fn short_lived_handles_do_not_pile_up_logs() {
    // Library fix found while building the CLI: every open starts a new WAL; empty ones
    // used to stay forever, so each `store get` left a file behind.
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    ok(store(&d, &["put", "k", "v"]));
    for _ in 0..10 {
        ok(store(&d, &["get", "k"]));
    }
    assert!(
        files_with_ext(&d, "wal").len() <= 2,
        "{:?}",
        files_with_ext(&d, "wal")
    );
    assert_eq!(ok(store(&d, &["get", "k"])), "v\n");
}

#[test]
fn library_scan_of_an_inverted_range_is_empty() {
    // Library fix found while building the CLI: this used to panic inside BTreeMap::range.
    let t = tempfile::tempdir().unwrap();
    let s = Store::open(t.path(), Options::default()).unwrap();
    s.put(b"a", b"1").unwrap();
    s.put(b"m", b"2").unwrap();
    assert_eq!(s.scan(b"z".to_vec()..b"b".to_vec()).count(), 0);
    assert_eq!(s.scan(b"m".to_vec()..b"m".to_vec()).count(), 0);
    assert_eq!(s.scan(b"m".to_vec()..=b"m".to_vec()).count(), 1);
}

/// However often a store is opened, its logs do not pile up: 300 `store put` commands (each
/// opens the store, replays what the previous ones left in the log, writes one key and
/// exits) leave at most two logs, and every key is there.
#[test]
fn three_hundred_puts_leave_at_most_two_logs() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    let mut most = 0;
    for i in 0..300 {
        ok(store(&d, &["put", &format!("k{i:03}"), &format!("v{i}")]));
        most = most.max(files_with_ext(&d, "wal").len());
    }
    assert!(most <= 2, "{most} logs after a put");
    let listed = ok(store(&d, &["scan"]));
    assert_eq!(listed.lines().count(), 300, "{listed}");
    assert_eq!(ok(store(&d, &["get", "k123"])).trim(), "v123");
    assert!(files_with_ext(&d, "wal").len() <= 2);
}

#[test]
fn refilter_to_a_bits_per_key_budget() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    // Two L0 tables of different sizes: Monkey gives the smaller one the smaller ε. The
    // store is created uniform (every table at 1 %), so that a budget changes both.
    let big: String = (0..3000).map(|i| format!("big{i}\tv\n")).collect();
    store_in(
        &d,
        &["--allocation", "uniform", "load", "-"],
        big.as_bytes(),
    );
    assert_eq!(
        stats_json(&d)["default_filter"]["allocation"],
        "uniform",
        "the store records the allocation it was created with"
    );
    ok(store(&d, &["flush"]));
    let small: String = (0..300).map(|i| format!("small{i}\tv\n")).collect();
    store_in(&d, &["load", "-"], small.as_bytes());
    ok(store(&d, &["flush"]));
    let ssts = files_with_ext(&d, "sst");
    let sst_bytes: Vec<Vec<u8>> = ssts.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let out = ok(store(&d, &["refilter", "--bits-per-key", "10"]));
    assert!(out.contains("refiltered 2 of 2 tables"), "{out}");
    assert!(out.contains("monkey"), "{out}");
    let json = stats_json(&d);
    let eps = table_fields(&json, "target_fpr");
    let (small_eps, big_eps) = (eps[0].as_f64().unwrap(), eps[1].as_f64().unwrap());
    assert!(small_eps < big_eps, "{eps:?}");
    assert_eq!(table_fields(&json, "level"), [0, 0]);
    let expected = json["absent_lookup"]["expected_reads"].as_f64().unwrap();
    assert!(
        (expected - (small_eps + big_eps)).abs() < 0.3 * expected,
        "{json}"
    );
    assert!(json["levels"][0]["target_fpr"].as_f64().is_some());
    for (p, b) in ssts.iter().zip(&sst_bytes) {
        assert_eq!(&std::fs::read(p).unwrap(), b, "refilter rewrote {p:?}");
    }
    // Uniform at the same budget; then again: nothing changes materially.
    let uniform = [
        "refilter",
        "--bits-per-key",
        "10",
        "--allocation",
        "uniform",
    ];
    let out = ok(store(&d, &uniform));
    assert!(out.contains("refiltered 2 of 2"), "{out}");
    let out = ok(store(&d, &uniform));
    assert!(out.contains("refiltered 0 of 2"), "{out}");
    let text = ok(store(&d, &["stats"]));
    assert!(text.contains("expected wasted block reads"), "{text}");
    assert!(text.contains("target ε"), "{text}");
    assert!(
        text.contains("filter policy:  uniform, blocked-bloom at ε = "),
        "{text}"
    );
    // --allocation without --bits-per-key: Monkey at the memory of the store's ε (the
    // uniform ε of 10 bits per key), recorded.
    let out = ok(store(&d, &["refilter", "--allocation", "monkey"]));
    assert!(out.contains("refiltered 2 tables: monkey"), "{out}");
    let json = stats_json(&d);
    assert_eq!(json["default_filter"]["allocation"], "monkey");
    let bits = json["default_filter"]["bits_per_key"].as_f64().unwrap();
    assert!((bits - 10.0).abs() < 1e-9, "{bits}");
    let text = ok(store(&d, &["stats"]));
    assert!(
        text.contains("filter policy:  monkey, blocked-bloom at 10 bits per key"),
        "{text}"
    );
    assert_eq!(ok(store(&d, &["get", "small7"])), "v\n");
}

/// `store repair`: exit 0 and no change on an intact store; a damaged MANIFEST and a damaged
/// table block are salvaged (exit 0, each dropped range named with file and offset, the
/// damaged files in lost/); exit 3 when nothing can be saved.
#[test]
fn repair_salvages_a_store_that_will_not_open() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    load_and_flush(&d, 3000, "value");
    for i in 0..5 {
        ok(store(&d, &["put", &format!("late{i}"), "v"]));
    }
    let snapshot = |d: &Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
            .collect();
        v.sort();
        v
    };
    let before = snapshot(&d);
    let out = ok(store(&d, &["repair"]));
    assert!(out.contains("intact, nothing to repair"), "{out}");
    assert_eq!(snapshot(&d), before);

    // A flipped byte in the manifest and one in the first data block.
    let m = d.join("MANIFEST");
    let mut mb = std::fs::read(&m).unwrap();
    mb[20] ^= 1;
    std::fs::write(&m, &mb).unwrap();
    let sst = files_with_ext(&d, "sst").pop().unwrap();
    let mut sb = std::fs::read(&sst).unwrap();
    sb[100] ^= 0x40;
    std::fs::write(&sst, &sb).unwrap();
    assert_eq!(store(&d, &["get", "key00001"]).code, 3);
    let out = store(&d, &["repair"]);
    assert_eq!(out.code, 0, "{}\n{}", out.text(), out.stderr);
    let text = out.text();
    let sst_name = sst.file_name().unwrap().to_str().unwrap();
    for want in [
        "dropped ".to_string(),
        format!("{sst_name}: offset 0:"),
        "MANIFEST: offset 16:".to_string(),
        "lost/MANIFEST".to_string(),
        format!("lost/{sst_name}"),
    ] {
        assert!(text.contains(&want), "no `{want}` in:\n{text}");
    }
    assert!(d.join("lost").join(sst_name).exists());
    ok(store(&d, &["verify"]));
    // Keys outside the first block and the late puts are all there; the first block's are not.
    assert_eq!(ok(store(&d, &["get", "key02999"])), "value 2999\n");
    assert_eq!(ok(store(&d, &["get", "late4"])), "v\n");
    assert_eq!(store(&d, &["get", "key00000"]).code, 1);
    let n = store(&d, &["scan"]).lines().len();
    // One 4 KiB block of about 300 entries is gone.
    assert!((2600..3005).contains(&n), "{n}");
    let out = ok(store(&d, &["repair"]));
    assert!(out.contains("intact"), "{out}");

    // One table whose footer is gone and no log records: nothing to save.
    let t2 = tempfile::tempdir().unwrap();
    let d2 = db(&t2);
    ok(store(&d2, &["put", "a", "1"]));
    ok(store(&d2, &["flush"]));
    let sst = files_with_ext(&d2, "sst").pop().unwrap();
    let len = std::fs::metadata(&sst).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&sst)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let out = store(&d2, &["repair"]);
    assert_eq!(out.code, 3, "{}\n{}", out.text(), out.stderr);
    assert!(
        out.stderr.contains("nothing could be saved"),
        "{}",
        out.stderr
    );
    assert!(d2.join("lost").join(sst.file_name().unwrap()).exists());
}

/// `store stress`: a short run with and without --kill, with one thread and several, of
/// batches across keyspaces (--keyspaces 3 --kill: no torn batch, no lost write), and of
/// the bank transfers (--bank) with and without --kill, prints
/// its figures and exits 0; a --dir that holds anything is refused (stress must never write
/// over a real store).
#[test]
fn stress_runs_and_reports_its_figures() {
    let t = tempfile::tempdir().unwrap();
    for args in [
        &["stress", "--duration", "2", "--seed", "7"][..],
        &["stress", "--duration", "2", "--seed", "7", "--threads", "3"],
        &["stress", "--duration", "3", "--kill"],
        &["stress", "--duration", "3", "--kill", "--threads", "4"],
        &[
            "stress",
            "--duration",
            "3",
            "--keyspaces",
            "3",
            "--kill",
            "--threads",
            "4",
        ],
        &["stress", "--duration", "2", "--bank", "--threads", "3"],
        &[
            "stress",
            "--duration",
            "3",
            "--bank",
            "--kill",
            "--threads",
            "4",
        ],
    ] {
        let out = run_full(args, b"", None, None);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        let line = out.text();
        for want in [
            "stress: seed ",
            "ops ",
            "kills ",
            "keys checked ",
            "problems 0",
        ] {
            assert!(line.contains(want), "{args:?}: no `{want}` in {line}");
        }
        if args.contains(&"--kill") {
            assert!(!line.contains("kills 0,"), "{line}");
        }
        let plain = !args.contains(&"--bank") && !args.contains(&"--keyspaces");
        if args.contains(&"--kill") && args.contains(&"--threads") && plain {
            assert!(line.contains("commit groups "), "{line}");
        }
        if args.contains(&"--keyspaces") {
            for want in ["torn batches 0", "lost acknowledged writes 0"] {
                assert!(line.contains(want), "{args:?}: no `{want}` in {line}");
            }
            assert!(!line.contains("batches acknowledged 0 "), "{line}");
        }
    }
    let d = db(&t);
    ok(store(&d, &["put", "a", "1"]));
    let out = store(&d, &["stress", "--duration", "1"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(ok(store(&d, &["get", "a"])), "1\n");
}

/// `store put --ttl SECONDS`: the key reads until it expires, then is absent (exit 1); a
/// TTL that is not a positive number is a usage error (exit 2) and writes nothing.
#[test]
fn put_with_a_ttl() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    ok(store(&d, &["put", "--ttl", "3600", "long", "lived"]));
    assert_eq!(ok(store(&d, &["get", "long"])), "lived\n");
    ok(store(&d, &["put", "--ttl", "0.001", "brief", "gone"]));
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(store(&d, &["get", "brief"]).code, 1);
    for bad in ["0", "-5", "abc", "inf", "NaN", "", "0.0000001"] {
        let out = store(&d, &["put", "--ttl", bad, "bad", "v"]);
        assert_eq!(out.code, 2, "--ttl {bad:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("ttl") || out.stderr.contains("seconds"),
            "{}",
            out.stderr
        );
    }
    assert_eq!(store(&d, &["get", "bad"]).code, 1);
}

/// `refilter --auto`: the store chooses the allocation by its model and records it; the
/// choice printed is the one `stats --json` shows, and other filter flags are refused.
#[test]
fn refilter_auto_chooses_the_allocation_and_records_it() {
    let t = tempfile::tempdir().unwrap();
    let d = db(&t);
    for i in 0..4 {
        ok(store(&d, &["put", &format!("k{i}"), "v"]));
        ok(store(&d, &["flush"]));
    }
    let out = store(&d, &["refilter", "--auto", "--filter", "bloom"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--auto"), "{}", out.stderr);
    let out = ok(store(&d, &["refilter", "--auto"]));
    let json = stats_json(&d);
    let chooses = json["allocation_model"]["chooses"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", json["allocation_model"]))
        .to_string();
    assert!(out.starts_with(&format!("chose {chooses}:")), "{out}");
    let tables = json["table_count"].as_u64().unwrap();
    assert!(out.contains(&format!("of {tables} tables")), "{out}");
    assert_eq!(json["default_filter"]["allocation"], chooses.as_str());
    // Every key still reads.
    for i in 0..4 {
        assert_eq!(ok(store(&d, &["get", &format!("k{i}")])).trim(), "v");
    }
}
