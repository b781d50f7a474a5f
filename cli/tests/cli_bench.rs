//! `store bench` end to end on tiny inputs: the outputs exist and the counts make sense.

use std::process::Command;

fn store(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_store"))
        .args(args)
        .output()
        .expect("run store")
}

/// Runs `store` and requires exit code `code`.
fn store_exits(code: i32, args: &[&str]) -> std::process::Output {
    let out = store(args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn store_ok(args: &[&str]) -> std::process::Output {
    store_exits(0, args)
}

/// A bench small enough for a test: 20,000 generated keys in 4 tables, no engine figures.
const SMALL_BENCH: [&str; 8] = [
    "bench",
    "-n",
    "20000",
    "--tables",
    "4",
    "--baseline-lookups",
    "1000",
    "--no-engine",
];

fn csv_rows(path: &std::path::Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn bench_on_generated_keys_writes_every_output_and_filters_cut_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, json, svg) = (
        dir.path().join("b.csv"),
        dir.path().join("b.json"),
        dir.path().join("b.svg"),
    );
    let out = store_ok(
        &[
            &SMALL_BENCH[..],
            &[
                "--lookups",
                "5000",
                "--kinds",
                "bloom,cuckoo,binary-fuse",
                "--fprs",
                "0.1,0.01",
                "--csv",
                csv.to_str().unwrap(),
                "--json",
                json.to_str().unwrap(),
                "--plot",
                svg.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("blocked") || stdout.contains("bloom"));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bench: "),
        "progress on stderr"
    );
    let rows = csv_rows(&csv);
    let col = |name: &str| rows[0].iter().position(|c| c == name).unwrap();
    assert_eq!(rows.len(), 1 + 1 + 3 * 2, "header, none, 3 kinds x 2 rates");
    let none = &rows[1];
    assert_eq!(none[col("kind")], "none");
    let baseline: f64 = none[col("reads_per_absent")].parse().unwrap();
    // 10% of absent keys lie outside every range, the rest inside all 4 tables' ranges.
    assert!(
        (baseline - 3.6).abs() < 0.2,
        "baseline reads per absent lookup {baseline}"
    );
    for r in &rows[2..] {
        let eps: f64 = r[col("fpr")].parse().unwrap();
        let reads: f64 = r[col("reads_per_absent")].parse().unwrap();
        assert!(reads < baseline, "{r:?}");
        assert!(
            reads <= 4.0 * eps * 1.5 + 0.01,
            "{} at ε {eps}: {reads} reads per absent lookup",
            r[0]
        );
        assert_eq!(r[col("in_band")], "true", "{r:?}");
    }
    let j = std::fs::read_to_string(&json).unwrap();
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["kind"] == "cuckoo"), "{j}");
    assert!(
        rows.iter().all(|r| r["reads_per_absent"].is_number()),
        "{j}"
    );
    // The range filters' rows: empty scans at the same absent keys, none then 16 bits per
    // key, at ℓ = 1 and 32; the none rows read a block per table in range, as gets do.
    let scans = v["scan_rows"].as_array().unwrap();
    assert_eq!(scans.len(), 4, "{j}");
    let f = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap();
    for (none, with) in [(&scans[0], &scans[2]), (&scans[1], &scans[3])] {
        assert_eq!((f(none, "range_bits"), f(with, "range_bits")), (0.0, 16.0));
        assert_eq!(none["len"], with["len"]);
        assert!(f(none, "reads_per_scan") > 3.0, "{none}");
        assert!(f(with, "reads_per_scan") < 0.05, "{with}");
        assert!(f(with, "avoided") > 0.98, "{with}");
        assert!(f(with, "bits_per_key") > 15.0, "{with}");
        assert!(f(with, "observed_fpr") < 0.01, "{with}");
    }
    assert!(
        (f(&scans[0], "reads_per_scan") - baseline).abs() < 0.2,
        "{j}"
    );
    assert!(stdout.contains("reads/scan"), "{stdout}");
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.contains("polyline") && s.trim_end().ends_with("</svg>"));
}

#[test]
fn bench_on_real_keys_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    let words: String = (0..5000).map(|i| format!("word{:05}\n", i * 7)).collect();
    std::fs::write(&keys, words).unwrap();
    let csv = dir.path().join("b.csv");
    let out = store_ok(&[
        "bench",
        "--keys",
        keys.to_str().unwrap(),
        "--tables",
        "3",
        "--lookups",
        "2000",
        "--baseline-lookups",
        "500",
        "--kinds",
        "blocked-bloom",
        "--fprs",
        "0.05",
        "--no-engine",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("from file"));
    assert_eq!(csv_rows(&csv).len(), 3);
    // Keys of 9 bytes: empty scans of one key value only (none, then 16 bits per key).
    let scan_lines: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.contains("reads/scan"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(scan_lines.len(), 2, "{stdout}");
    assert!(scan_lines[0].starts_with("none"), "{stdout}");
}

#[test]
fn bench_refuses_bad_arguments_without_panicking() {
    for args in [
        &["bench", "--fprs", "1.5"][..],
        &["bench", "--kinds", "bogus"],
        &["bench", "--tables", "0", "-n", "10"],
        &["bench", "--keys", "/nonexistent/keys.txt"],
        // A mapped file keeps its pages in the cache, so cold reads cannot be measured.
        &["bench", "--mmap-reads", "--cold"],
    ] {
        store_exits(2, args);
    }
}

#[test]
fn bench_with_mmap_reads_counts_the_same_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut per_mode = Vec::new();
    for mmap in [false, true] {
        let csv = dir.path().join(format!("b{mmap}.csv"));
        let json = dir.path().join(format!("b{mmap}.json"));
        let mut args = SMALL_BENCH.to_vec();
        args.extend([
            "--lookups",
            "4000",
            "--kinds",
            "blocked-bloom",
            "--fprs",
            "0.01",
            "--csv",
            csv.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ]);
        if mmap {
            args.push("--mmap-reads");
        }
        store_ok(&args);
        let j = std::fs::read_to_string(&json).unwrap();
        assert!(j.contains(&format!("\"mmap_reads\": {mmap}")), "{j}");
        let rows = csv_rows(&csv);
        let col = |name: &str| rows[0].iter().position(|c| c == name).unwrap();
        let pick = |r: &Vec<String>| {
            (
                r[col("reads_per_absent")].clone(),
                r[col("reads_per_present")].clone(),
            )
        };
        per_mode.push(rows[1..].iter().map(pick).collect::<Vec<_>>());
    }
    // Same keys, same tables, same filters: the same reads, whichever way blocks are read.
    assert_eq!(per_mode[0], per_mode[1]);
    let present: f64 = per_mode[1][1].1.parse().unwrap();
    assert!(
        (1.0..1.05).contains(&present),
        "{present} reads per present get"
    );
}

/// `store bench engine --keyspaces 3` on a tiny load: both sides report puts/s and a peak
/// RSS from their own child process, the absent gets found nothing in either phase, and
/// the ratios are there; --json without --workload or --keyspaces is refused.
#[test]
fn bench_engine_compares_keyspaces_with_one() {
    let out = store_ok(&[
        "bench",
        "engine",
        "-n",
        "3000",
        "--keyspaces",
        "3",
        "--lookups",
        "500",
        "--rounds",
        "1",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["keyspaces"], 3);
    for side in ["one", "many"] {
        assert!(v["load"][side]["puts_per_s"].as_f64().unwrap() > 0.0, "{v}");
        assert!(v["load"][side]["peak_rss_kib"].as_u64().unwrap() > 0, "{v}");
    }
    for phase in ["as_loaded", "compacted"] {
        for store in ["ks0", "same_keys", "all_keys"] {
            assert!(
                v["absent_get"][phase][store]["ns"].as_f64().unwrap() > 0.0,
                "{v}"
            );
        }
    }
    assert!(v["ratios"]["absent_get"].as_f64().unwrap() > 0.0, "{v}");
    store_exits(2, &["bench", "engine", "-n", "10", "--json"]);
}

/// `store bench engine --workload`: every YCSB mix runs on a tiny store over two threads;
/// the JSON has each workload's ops/s and per-operation latencies, the operations of each type
/// add up to --ops in the mix's shares, and no read or scan missed its key or read a wrong
/// value. The text report names each workload.
#[test]
fn bench_engine_runs_the_ycsb_mixes() {
    let out = store_ok(&[
        "bench",
        "engine",
        "-n",
        "3000",
        "--workload",
        "ycsb",
        "--ops",
        "1000",
        "--threads",
        "2",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["records"], 3000);
    assert!(v["load"]["puts_per_s"].as_f64().unwrap() > 0.0);
    let runs = v["workloads"].as_array().unwrap();
    let names: Vec<&str> = runs
        .iter()
        .map(|r| r["workload"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["ycsb-a", "ycsb-b", "ycsb-c", "ycsb-d", "ycsb-e", "ycsb-f"]
    );
    for r in runs {
        let name = r["workload"].as_str().unwrap();
        assert_eq!(r["missing"], 0, "{name}");
        assert_eq!(r["wrong"], 0, "{name}");
        assert_eq!(r["ops"], 1000, "{name}");
        assert_eq!(r["threads"], 2, "{name}");
        assert!(r["ops_per_s"].as_f64().unwrap() > 0.0, "{name}");
        let by_op = r["by_op"].as_object().unwrap();
        let count = |op: &str| by_op.get(op).map_or(0, |o| o["count"].as_u64().unwrap());
        assert_eq!(
            by_op
                .values()
                .map(|o| o["count"].as_u64().unwrap())
                .sum::<u64>(),
            1000
        );
        for o in by_op.values() {
            let (p50, p99, p999) = (
                o["p50_us"].as_f64().unwrap(),
                o["p99_us"].as_f64().unwrap(),
                o["p999_us"].as_f64().unwrap(),
            );
            assert!(p50 > 0.0 && p50 <= p99 && p99 <= p999, "{name}: {o}");
        }
        let ops: &[&str] = match name {
            "ycsb-a" => &["read", "update"],
            "ycsb-b" => &["read", "update"],
            "ycsb-c" => &["read"],
            "ycsb-d" => &["read", "insert"],
            "ycsb-e" => &["scan", "insert"],
            _ => &["read", "rmw"],
        };
        let mut keys: Vec<&str> = by_op.keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut want = ops.to_vec();
        want.sort_unstable();
        assert_eq!(keys, want, "{name}");
        // The mixes' shares, within 5 binomial sigmas over 1000 operations.
        let (first, share) = match name {
            "ycsb-a" | "ycsb-f" => (ops[0], 0.5),
            "ycsb-c" => ("read", 1.0),
            _ => (ops[0], 0.95),
        };
        let got = count(first) as f64 / 1000.0;
        assert!(
            (got - share).abs() <= 5.0 * (share * (1.0 - share) / 1000.0).sqrt() + 1e-9,
            "{name}: {first} {got}"
        );
        if name == "ycsb-e" {
            let avg = r["scan_entries_avg"].as_f64().unwrap();
            assert!(avg > 1.0 && avg <= 100.0, "{avg}");
        }
    }
    let out = store_ok(&[
        "bench",
        "engine",
        "-n",
        "500",
        "--workload",
        "ycsb-c",
        "--ops",
        "200",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("ycsb-c:") && text.contains("missing 0, wrong 0"),
        "{text}"
    );
    assert!(text.contains("read") && text.contains("p99.9"), "{text}");
}

/// `store bench engine` writes its tables with the global --range-bits: no range filter files
/// with 0, one per table by default.
#[test]
fn bench_engine_obeys_range_bits() {
    let dir = tempfile::tempdir().unwrap();
    let files = |d: &std::path::Path, ext: &str| {
        std::fs::read_dir(d)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension() == Some(ext.as_ref()))
            .count()
    };
    for (bits, name) in [(None, "default"), (Some("0"), "none")] {
        let work = dir.path().join(name);
        let mut args = vec![];
        if let Some(b) = bits {
            args.extend(["--range-bits", b]);
        }
        let w = work.to_str().unwrap();
        args.extend([
            "bench",
            "engine",
            "-n",
            "3000",
            "--lookups",
            "10",
            "--work-dir",
            w,
        ]);
        store_ok(&args);
        let tables = files(&work, "sst");
        assert!(tables > 0, "{name}: no table");
        let want = if bits.is_some() { 0 } else { tables };
        assert_eq!(files(&work, "range"), want, "{name}");
    }
}

/// `store bench range` on a tiny store: the no-filter rows come first (whatever the order of
/// --bits) and the range filter's rows say what share of their blocks it avoided.
#[test]
fn bench_range_reports_blocks_avoided_against_no_filter() {
    let out = store_ok(&[
        "bench", "range", "-n", "8000", "--tables", "4", "--scans", "300", "--bits", "16,0",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() == 12 && w[0].parse::<f64>().is_ok())
        .collect();
    assert_eq!(rows.len(), 2 * 11 * 2, "{stdout}");
    assert!(
        rows[..22].iter().all(|w| w[0] == "0" && w[6] == "-"),
        "{stdout}"
    );
    let pct = |s: &str| s.trim_end_matches('%').parse::<f64>().unwrap();
    for w in &rows[22..] {
        assert_eq!(w[0], "16");
        let len: u32 = w[3].parse().unwrap();
        // Short empty ranges: almost every block avoided; a scan from a present key still
        // reads the table holding it, so about 3 of 4 blocks are avoided.
        if len <= 32 {
            assert!(pct(w[6]) > 95.0, "{w:?}");
            assert!((60.0..80.0).contains(&pct(w[11])), "{w:?}");
        }
    }
}

/// `store bench engine --workload sync-mix`: both modes run in one invocation, each round's
/// puts/s and the medians' ratio are printed, and the ratio is the mix's median over the
/// all-synced one.
#[test]
fn bench_engine_runs_the_sync_mix() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    let out = store_ok(&[
        "bench",
        "engine",
        "--workload",
        "sync-mix",
        "--ops",
        "300",
        "--threads",
        "3",
        "--synced-every",
        "5",
        "--rounds",
        "1",
        "--work-dir",
        work.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let rate = |prefix: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in {text}"));
        line.split_whitespace()
            .rev()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap()
    };
    let (all, mix) = (
        rate("round 0: all synced (EveryWrite):"),
        rate("round 0: 1 in 5 synced (put_opt):"),
    );
    assert!(all > 0.0 && mix > 0.0, "{text}");
    assert!(
        text.contains("300 puts") && text.contains("from 3 threads"),
        "{text}"
    );
    let last = text.lines().find(|l| l.starts_with("sync-mix:")).unwrap();
    let ratio: f64 = last
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_end_matches('×')
        .parse()
        .unwrap();
    assert!((ratio - mix / all).abs() <= 0.01 * ratio + 0.01, "{last}");
    // The rounds' stores are removed; the help explains the workload.
    assert_eq!(std::fs::read_dir(work.join("lz4")).unwrap().count(), 0);
    let help = store_ok(&["bench", "engine", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--synced-every") && help.contains("sync-mix"),
        "{help}"
    );
}

/// `store bench engine --workload snapshot`, with per-table filters and with the global one:
/// the snapshot pins the compacted tables and its memtables, both get classes are timed
/// through the snapshot and the store (every sampled value checked, or the run fails), and
/// the summary gives the ratios.
#[test]
fn bench_engine_runs_the_snapshot_workload() {
    for filter in ["blocked-bloom", "global"] {
        let out = store_ok(&[
            "bench",
            "engine",
            "--workload",
            "snapshot",
            "-n",
            "20000",
            "--lookups",
            "3000",
            "--memtable-mib",
            "1",
            "--rounds",
            "1",
            "--filter",
            filter,
        ]);
        let text = String::from_utf8_lossy(&out.stdout);
        let pins = text
            .lines()
            .find(|l| l.contains("pins"))
            .unwrap_or_else(|| panic!("{text}"));
        let words: Vec<&str> = pins.split_whitespace().collect();
        let after = |w: &str| -> u64 {
            let at = words.iter().position(|x| *x == w).unwrap();
            words[at + 1].parse().unwrap()
        };
        assert!(after("pins") > 0, "{filter}: {pins}");
        assert!(pins.contains("open snapshots 1"), "{pins}");
        for class in ["overwritten since", "only in tables compacted since"] {
            let line = text
                .lines()
                .find(|l| l.contains(class))
                .unwrap_or_else(|| panic!("{class}: {text}"));
            assert!(
                line.contains("through the snapshot") && line.contains("gets each"),
                "{line}"
            );
        }
        let last = text.lines().find(|l| l.starts_with("snapshot:")).unwrap();
        assert!(
            last.contains(filter) && last.contains("puts/s with"),
            "{last}"
        );
    }
}
