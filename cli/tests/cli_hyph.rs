//! End-to-end tests of `store hyphenate` and `store bench hyphenation`.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);

use common::Output as Out;

/// Runs the binary in `cwd` with `args` and `stdin`, killing it after [`TIMEOUT`].
fn run(cwd: &Path, args: &[&str], stdin: &[u8]) -> Out {
    common::run_store(args, stdin, None, Some(cwd), TIMEOUT)
}

fn table_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst") || n.ends_with(".filter"))
        .collect()
}

const KNOWN: &[(&str, &str)] = &[
    ("project", "project"),
    ("table", "ta-ble"),
    ("associate", "as-so-ciate"),
    ("hyphenation", "hy-phen-a-tion"),
    ("present", "present"),
    ("reciprocity", "rec-i-proc-ity"),
    ("algebraically", "al-ge-bra-i-cally"),
    ("Hyphenation", "Hy-phen-a-tion"),
    ("TABLE", "TA-BLE"),
    ("x1-y2z", "x1-y2z"),
    ("", ""),
    ("cat", "cat"),
];

fn input() -> String {
    KNOWN.iter().map(|(w, _)| format!("{w}\n")).collect()
}

fn expected() -> String {
    KNOWN.iter().map(|(_, h)| format!("{h}\n")).collect()
}

#[test]
fn hyphenates_stdin_and_files_and_reuses_the_dictionary() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    // stdin, default dictionary directory, --stats
    let o = run(cwd, &["hyphenate", "--stats"], input().as_bytes());
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.text(), expected());
    for label in [
        "words: 12",
        "words/s:",
        "exception lookups asked: 9",
        "lookups skipped by the filter:",
        "false positives:",
        "dictionary block reads:",
        "(built)",
    ] {
        assert!(o.stderr.contains(label), "{label} missing in {}", o.stderr);
    }
    let dict = cwd.join("filterstore-hyph-dict");
    let files = table_files(&dict);
    assert_eq!(files.len(), 2, "{files:?}");

    // A file, `-` for stdin, CRLF lines; the dictionary is reused (same files).
    std::fs::write(cwd.join("words.txt"), input().replace('\n', "\r\n")).unwrap();
    let o = run(cwd, &["hyphenate", "words.txt", "--stats"], b"");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.text(), expected());
    assert!(o.stderr.contains("(reused)"), "{}", o.stderr);
    assert_eq!(table_files(&dict), files);
    let o = run(cwd, &["hyphenate", "-"], b"associate");
    assert_eq!(o.text(), "as-so-ciate\n");
    assert_eq!(table_files(&dict), files);

    // Another filter: refiltered, data untouched, same results.
    let o = run(
        cwd,
        &[
            "--filter",
            "cuckoo",
            "--fpr",
            "0.05",
            "hyphenate",
            "--stats",
        ],
        input().as_bytes(),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.text(), expected());
    assert!(o.stderr.contains("refiltered"), "{}", o.stderr);
    assert!(o.stderr.contains("filter cuckoo"), "{}", o.stderr);
    let now = table_files(&dict);
    assert_eq!(
        now.iter()
            .filter(|n| n.ends_with(".sst"))
            .collect::<Vec<_>>(),
        files
            .iter()
            .filter(|n| n.ends_with(".sst"))
            .collect::<Vec<_>>()
    );

    // Missing input file: exit 2.
    let o = run(cwd, &["hyphenate", "nope.txt"], b"");
    assert_eq!(o.code, 2);
}

#[test]
fn custom_exceptions_file() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    std::fs::write(
        cwd.join("mine.tex"),
        "\\hyphenation{pine-ap-ple pro-ject}\n",
    )
    .unwrap();
    let args = ["hyphenate", "--dict", "d", "--exceptions", "mine.tex"];
    let o = run(cwd, &args, b"Pineapple\nproject\ntable\n");
    assert_eq!(o.code, 0, "{}", o.stderr);
    // Only mine.tex: table falls back to the patterns.
    assert_eq!(o.text(), "Pine-ap-ple\npro-ject\ntable\n");
    let mut with = args.to_vec();
    with.push("--with-builtin");
    let o = run(cwd, &with, b"Pineapple\nproject\ntable\n");
    assert_eq!(o.text(), "Pine-ap-ple\npro-ject\nta-ble\n");
    // A bad entry: exit 2 with the file named.
    std::fs::write(cwd.join("bad.txt"), "a--b\n").unwrap();
    let o = run(cwd, &["hyphenate", "--exceptions", "bad.txt"], b"x\n");
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("bad.txt"), "{}", o.stderr);
}

#[test]
fn reduced_experiment_runs_and_writes_csv_and_svg() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let o = run(
        cwd,
        &[
            "bench",
            "hyphenation",
            "--runs",
            "2",
            "--epsilons",
            "0.01,0.1",
            "--csv",
            "h.csv",
            "--plot",
            "h.svg",
            "--scratch",
            "scratch",
        ],
        b"",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains("run 2/2: binary-fuse done"),
        "{}",
        o.stderr
    );
    for k in [
        "none",
        "memory",
        "bloom",
        "blocked-bloom",
        "cuckoo",
        "binary-fuse",
    ] {
        assert!(
            o.text().lines().any(|l| l.starts_with(&format!("{k} "))),
            "{k} row missing:\n{}",
            o.text()
        );
    }
    let csv = std::fs::read_to_string(cwd.join("h.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 2 + 4 * 2);
    // Every row asked the same number of lookups; without a filter nothing was avoided.
    let col = |name: &str| lines[0].split(',').position(|c| c == name).unwrap();
    let (lk, av) = (col("lookups"), col("avoided"));
    let first: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(first[0], "none");
    assert_eq!(first[av], "0");
    for l in &lines[1..] {
        assert_eq!(l.split(',').nth(lk), Some(first[lk]), "{l}");
    }
    let svg = std::fs::read_to_string(cwd.join("h.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("y = ε"));
    // Bad arguments: exit 2.
    let o = run(cwd, &["bench", "hyphenation", "--runs", "1"], b"");
    assert_eq!(o.code, 2);
    let o = run(cwd, &["bench", "hyphenation", "--epsilons", "0,0.5"], b"");
    assert_eq!(o.code, 2);
}
