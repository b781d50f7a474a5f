//! The on-disk exception dictionary: build once, reuse, apply source changes as a difference,
//! refilter; and its correctness over the whole built-in word list.

use std::collections::BTreeSet;
use std::path::Path;

use filterstore::FilterKind;
use filterstore_cli::hyph::{
    ExceptionDict, ExceptionLookup, ExceptionSource, Hyphenator, MemoryExceptions, WordList,
    DIGEST_KEY,
};

fn table_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect()
}

fn lookup(d: &ExceptionDict, w: &str) -> Option<String> {
    let h = filterstore::hash::key_hash(w.as_bytes());
    d.lookup(w.as_bytes(), h)
        .unwrap()
        .map(|v| String::from_utf8(v).unwrap())
}

#[test]
fn builds_once_reuses_and_applies_differences() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dict");
    let mut sources = ExceptionSource::en_us();
    let h = Hyphenator::en_us().unwrap();

    // First use: everything loaded into one table behind a filter.
    let d = ExceptionDict::open_or_build(&dir, &sources, None, None).unwrap();
    let r = d.report();
    assert!(r.built);
    assert_eq!(r.put, 1766);
    assert_eq!(r.entries, 1766);
    let s = d.stats();
    assert_eq!(s.tables.len(), 1);
    assert_eq!(s.tables[0].keys, 1767); // + the digest key
    assert_eq!(s.tables[0].filter_kind, FilterKind::BlockedBloom);
    assert_eq!(lookup(&d, "table").as_deref(), Some("ta-ble"));
    assert!(d.store().get(DIGEST_KEY).unwrap().is_some());
    assert_eq!(h.hyphenate("Project", &d).unwrap(), "Project");
    assert_eq!(h.hyphenate("pineapple", &d).unwrap(), "pineap-ple");
    drop(d);
    let files = table_files(&dir);

    // Second use: reused as is.
    let d = ExceptionDict::open_or_build(&dir, &sources, None, None).unwrap();
    assert!(d.report().reused(), "{:?}", d.report());
    drop(d);
    assert_eq!(table_files(&dir), files);

    // One exception added: one key put, one new small table, results updated.
    sources.push(ExceptionSource::new("mine", "pine-ap-ple\n"));
    let d = ExceptionDict::open_or_build(&dir, &sources, None, None).unwrap();
    let r = d.report();
    assert!(!r.built);
    assert_eq!((r.put, r.deleted, r.refiltered), (1, 0, false));
    let s = d.stats();
    assert_eq!(s.tables.len(), 2);
    assert_eq!(s.tables[0].keys, 2); // pineapple + the digest
    assert_eq!(s.tables[1].keys, 1767, "the big table is untouched");
    assert!(s
        .tables
        .iter()
        .all(|t| t.filter_kind == FilterKind::BlockedBloom));
    assert_eq!(h.hyphenate("pineapple", &d).unwrap(), "pine-ap-ple");
    assert_eq!(h.hyphenate("table", &d).unwrap(), "ta-ble");
    drop(d);
    let after_add = table_files(&dir);
    assert!(files.is_subset(&after_add));

    // Changing an existing entry: one put.
    sources.pop();
    sources.push(ExceptionSource::new("mine", "pineapple\nta-ble\n"));
    let d = ExceptionDict::open_or_build(&dir, &sources, None, None).unwrap();
    // pineapple changed (now never hyphenated); ta-ble was already there.
    assert_eq!((d.report().put, d.report().deleted), (1, 0));
    assert_eq!(h.hyphenate("pineapple", &d).unwrap(), "pineapple");
    let r = d.report();
    assert_eq!(r.entries, 1767);
    drop(d);
    sources.pop();
    sources.push(ExceptionSource::new("mine", "pine-apple\n"));
    let d = ExceptionDict::open_or_build(&dir, &sources, None, None).unwrap();
    assert_eq!((d.report().put, d.report().deleted), (1, 0));
    assert_eq!(lookup(&d, "pineapple").as_deref(), Some("pine-apple"));
    drop(d);

    // Removed again: one delete; the word is back to its patterns-only form.
    sources.pop();
    let d = ExceptionDict::open_or_build(&dir, &sources, None, None).unwrap();
    let r = d.report();
    assert_eq!((r.put, r.deleted, r.built), (0, 1, false));
    assert_eq!(lookup(&d, "pineapple"), None);
    assert_eq!(h.hyphenate("pineapple", &d).unwrap(), "pineap-ple");
    assert_eq!(lookup(&d, "table").as_deref(), Some("ta-ble"));
    // Removing a built-in word works the same way.
    drop(d);
    let mut fewer = ExceptionSource::en_us();
    fewer[1].text = fewer[1]
        .text
        .replace(" ta-ble ", " ")
        .replace("\nta-ble\n", "\n");
    let d = ExceptionDict::open_or_build(&dir, &fewer, None, None).unwrap();
    // ta-ble is also in Knuth's list, so it stays whatever the TUGboat list says.
    assert_eq!(d.report().put, 0);
    assert_eq!(lookup(&d, "table").as_deref(), Some("ta-ble"));
    drop(d);

    // Another filter: refiltered, no data rewritten (same table files).
    let before = table_files(&dir);
    let d =
        ExceptionDict::open_or_build(&dir, &fewer, Some(FilterKind::Cuckoo), Some(0.05)).unwrap();
    assert!(d.report().refiltered);
    assert_eq!((d.report().put, d.report().deleted), (0, 0));
    let s = d.stats();
    assert!(s
        .tables
        .iter()
        .all(|t| t.filter_kind == FilterKind::Cuckoo && t.target_fpr == 0.05));
    drop(d);
    assert_eq!(table_files(&dir), before);
    let d =
        ExceptionDict::open_or_build(&dir, &fewer, Some(FilterKind::Cuckoo), Some(0.05)).unwrap();
    assert!(d.report().reused());
}

#[test]
fn bad_sources_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = [ExceptionSource::new("bad", "a--b")];
    assert!(ExceptionDict::open_or_build(tmp.path().join("d"), &bad, None, None).is_err());
}

/// The whole built-in word list hyphenated with the disk dictionary (each filter kind at
/// ε = 1 %) and with the in-memory exceptions: identical output for every word, every
/// exception found, and block reads per non-exception word within the filter's budget.
///
/// The bound: each of the N non-exception lookups that reaches the filter is a false
/// positive with probability p ≤ 1.1 ε (the implementation's target tolerance), so the
/// false-positive count F is at most Binomial(N, 1.1 ε); we allow four standard deviations:
/// F / N ≤ 1.1 ε + 4 √(1.1 ε (1 − 1.1 ε) / N). With N ≈ 399,500 (the list's 400,930 lookups
/// minus 1,395 exceptions) and ε = 1 % that slack is about 0.07 %, so the test fails only
/// if the rate really exceeds ≈ 1.17 %.
#[test]
fn disk_dictionary_matches_memory_on_the_whole_list() {
    let h = Hyphenator::en_us().unwrap();
    let mem = MemoryExceptions::en_us().unwrap();
    let words = WordList::builtin().unwrap();
    assert_eq!(words.len(), 466_551);
    let mut expected = Vec::with_capacity(words.len());
    let mut exception_words = 0u64;
    for w in words.iter() {
        let mut s = String::new();
        let o = h.hyphenate_into(w, &mem, &mut s).unwrap();
        exception_words += o.exception as u64;
        expected.push(s);
    }
    let eps = 0.01;
    let tmp = tempfile::tempdir().unwrap();
    for kind in [
        FilterKind::Bloom,
        FilterKind::BlockedBloom,
        FilterKind::Cuckoo,
        FilterKind::BinaryFuse,
        FilterKind::None,
    ] {
        let dir = tmp.path().join(kind.name());
        let d =
            ExceptionDict::open_or_build(&dir, &ExceptionSource::en_us(), Some(kind), Some(eps))
                .unwrap();
        // Zero false negatives: every exception word returns its exception form.
        for (k, v) in mem.sorted_entries() {
            let got = d.lookup(k, filterstore::hash::key_hash(k)).unwrap();
            assert_eq!(
                got.as_deref(),
                Some(v),
                "{kind}: {}",
                String::from_utf8_lossy(k)
            );
        }
        let before = d.stats();
        let (mut lookups, mut hits, mut differences) = (0u64, 0u64, 0u64);
        let mut out = String::new();
        for (w, want) in words.iter().zip(&expected) {
            out.clear();
            let o = h.hyphenate_into(w, &d, &mut out).unwrap();
            lookups += o.lookups as u64;
            hits += o.exception as u64;
            if out != *want {
                differences += 1;
                if differences < 5 {
                    eprintln!("{kind}: {w}: disk {out} vs memory {want}");
                }
            }
        }
        assert_eq!(differences, 0, "{kind}");
        assert_eq!(hits, exception_words, "{kind}");
        let after = d.stats();
        // Blocks needed: read from the file, or found in the block cache.
        let reads = after.data_blocks_used() - before.data_blocks_used();
        let fps = after.false_positives - before.false_positives;
        let negatives = after.filter_negatives - before.filter_negatives;
        let n = (lookups - hits) as f64;
        assert_eq!(after.lookups - before.lookups, lookups);
        // Each exception word needs one block; the rest are false positives (or, without a
        // filter, misses that read a block).
        let non_exception_reads = reads - hits;
        eprintln!(
            "{kind}: {lookups} lookups, {hits} exceptions, {negatives} filter negatives, \
             {fps} false positives, {reads} block reads, {:.5} reads per non-exception word",
            non_exception_reads as f64 / n
        );
        if kind == FilterKind::None {
            assert_eq!(negatives, 0);
            continue;
        }
        assert_eq!(non_exception_reads, fps, "{kind}");
        let p = 1.1 * eps;
        let bound = p + 4.0 * (p * (1.0 - p) / n).sqrt();
        assert!(
            fps as f64 / n <= bound,
            "{kind}: {fps} false positives in {n} non-exception lookups > {bound}"
        );
    }
}

/// Lookups through the dictionary's pinned reader are all counted, however long they run:
/// the dictionary's one table is never merged away under them (no idle L0 drain, which
/// would otherwise start after a second of lookups without writes).
#[test]
fn a_long_run_of_pinned_lookups_is_counted_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let d = ExceptionDict::open_or_build(
        tmp.path().join("dict"),
        &ExceptionSource::en_us(),
        Some(FilterKind::BlockedBloom),
        Some(0.01),
    )
    .unwrap();
    let before = d.stats();
    let reader = d.reader().unwrap();
    let words: Vec<(Vec<u8>, u64)> = (0..5000u64)
        .map(|i| {
            // Letters after "m": inside the dictionary's key range, almost all absent.
            let x = filterstore::hash::mix64(i);
            let w: Vec<u8> = std::iter::once(b'm')
                .chain((0..8).map(|j| b'a' + (x >> (5 * j) & 15) as u8))
                .collect();
            let h = filterstore::hash::key_hash(&w);
            (w, h)
        })
        .collect();
    let start = std::time::Instant::now();
    let mut asked = 0u64;
    // 1.6 s of lookups with no write: long enough for an idle drain to start and finish.
    while start.elapsed() < std::time::Duration::from_millis(1600) {
        for (w, h) in &words {
            reader.lookup(w, *h).unwrap();
        }
        asked += words.len() as u64;
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let after = d.stats();
    assert_eq!(after.idle_drains, 0);
    assert_eq!(after.lookups - before.lookups, asked);
    let answered = (after.filter_negatives - before.filter_negatives)
        + (after.data_blocks_used() - before.data_blocks_used());
    assert_eq!(
        answered, asked,
        "every lookup in the table's range: a filter answer"
    );
}
