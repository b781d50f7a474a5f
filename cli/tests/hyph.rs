//! Hyphenator tests: TeX82 rules, known results, and agreement with an independent
//! implementation (the `hyphenation` crate, same hyph-utf8 en-US patterns) with its own
//! exception list cleared, so both give TeX's patterns-only results.

use std::time::Instant;

use filterstore_cli::hyph::{
    parse_exceptions, ExceptionLookup, Hyphenator, MemoryExceptions, NoExceptions, WordList,
    EN_US_KNUTH_EXCEPTIONS, EN_US_TUGBOAT_EXCEPTIONS,
};
use hyphenation::{Hyphenator as _, Language, Load, Standard};

fn hyph() -> Hyphenator {
    Hyphenator::en_us().expect("built-in patterns compile")
}

/// The reference: the `hyphenation` crate's embedded en-US dictionary, exceptions cleared.
fn reference() -> Standard {
    let mut dict = Standard::from_embedded(Language::EnglishUS).expect("embedded en-us");
    dict.exceptions.0.clear();
    assert_eq!(dict.minima, (2, 3));
    dict
}

fn reference_hyphenate(dict: &Standard, word: &str) -> String {
    let breaks = dict.hyphenate(word).breaks;
    let mut out = String::with_capacity(word.len() + breaks.len());
    let mut last = 0;
    for b in breaks {
        out.push_str(&word[last..b]);
        out.push('-');
        last = b;
    }
    out.push_str(&word[last..]);
    out
}

const KNOWN_PATTERNS_ONLY: &[(&str, &str)] = &[
    ("project", "pro-ject"),
    ("table", "table"),
    ("associate", "as-so-ci-ate"),
    ("hyphenation", "hy-phen-ation"),
];

const KNOWN_WITH_EXCEPTIONS: &[(&str, &str)] = &[
    ("project", "project"),
    ("table", "ta-ble"),
    ("associate", "as-so-ciate"),
    ("hyphenation", "hy-phen-a-tion"),
    ("present", "present"),
    // Knuth's list says reci-procity, the TUGboat list (loaded later, so it wins, as in
    // TeX) says rec-i-proc-i-ty; righthyphenmin 3 drops the last hyphen.
    ("reciprocity", "rec-i-proc-ity"),
    ("algebraically", "al-ge-bra-i-cally"),
];

#[test]
fn known_results() {
    let h = hyph();
    let exc = MemoryExceptions::en_us().unwrap();
    for &(w, want) in KNOWN_PATTERNS_ONLY {
        assert_eq!(
            h.hyphenate(w, &NoExceptions).unwrap(),
            want,
            "patterns only: {w}"
        );
    }
    for &(w, want) in KNOWN_WITH_EXCEPTIONS {
        assert_eq!(h.hyphenate(w, &exc).unwrap(), want, "with exceptions: {w}");
    }
}

#[test]
fn case_is_kept_and_matching_ignores_it() {
    let h = hyph();
    let exc = MemoryExceptions::en_us().unwrap();
    assert_eq!(
        h.hyphenate("HYPHENATION", &NoExceptions).unwrap(),
        "HY-PHEN-ATION"
    );
    assert_eq!(h.hyphenate("HyPhEnAtIoN", &exc).unwrap(), "Hy-PhEn-A-tIoN");
    assert_eq!(h.hyphenate("Associate", &exc).unwrap(), "As-so-ciate");
    // An exception entered with capitals matches any case (ushyphex has "Ying-yong").
    assert_eq!(exc.get(b"yingyong"), Some(&b"ying-yong"[..]));
    assert_eq!(h.hyphenate("yingYONG", &exc).unwrap(), "ying-YONG");
}

#[test]
fn non_letter_and_odd_words_are_unchanged_and_never_panic() {
    let h = hyph();
    let exc = MemoryExceptions::en_us().unwrap();
    let long_letters = "ab".repeat(5000);
    let long_mixed = format!("{}1", "hyphenation".repeat(100));
    for w in [
        "",
        "a",
        "it's",
        "hyphen-ation",
        "naïve",
        "Ærøskøbing",
        "3-D",
        "hyphenation.",
        " table",
        "table ",
        "\u{0}\u{7f}",
        "日本語のテキスト",
        &long_mixed,
    ] {
        for lookup in [&exc as &dyn ExceptionLookup, &NoExceptions] {
            let mut out = String::from("<");
            let o = h.hyphenate_into(w, lookup, &mut out).unwrap();
            assert_eq!(out, format!("<{w}"));
            assert_eq!((o.lookups, o.hyphens, o.exception), (0, 0, false));
        }
    }
    // Very long letter words are hyphenated (heap path) without trouble.
    let out = h.hyphenate(&long_letters, &exc).unwrap();
    assert_eq!(out.replace('-', ""), long_letters);
    let long_word = "pneumonoultramicroscopicsilicovolcanoconiosis".repeat(5);
    let out = h.hyphenate(&long_word, &NoExceptions).unwrap();
    assert_eq!(out.replace('-', ""), long_word);
    assert!(out.contains('-'));
}

#[test]
fn short_words_ask_no_lookup_and_long_ones_ask_one() {
    let h = hyph();
    let exc = MemoryExceptions::en_us().unwrap();
    let mut out = String::new();
    for (w, lookups) in [("tabl", 0), ("table", 1), ("xyzzyq", 1), ("a", 0)] {
        let o = h.hyphenate_into(w, &exc, &mut out).unwrap();
        assert_eq!(o.lookups, lookups, "{w}");
        let o = h.hyphenate_into(w, &NoExceptions, &mut out).unwrap();
        assert_eq!(o.lookups, 0, "{w}");
    }
}

/// A lookup that records what it was asked.
struct Recording<'a> {
    inner: &'a MemoryExceptions,
    asked: std::cell::RefCell<Vec<(Vec<u8>, u64)>>,
}

impl ExceptionLookup for Recording<'_> {
    fn lookup(&self, lower_word: &[u8], hash: u64) -> filterstore::Result<Option<Vec<u8>>> {
        self.asked.borrow_mut().push((lower_word.to_vec(), hash));
        self.inner.lookup(lower_word, hash)
    }
}

#[test]
fn lookup_gets_the_lower_case_word_and_its_key_hash() {
    let h = hyph();
    let exc = MemoryExceptions::en_us().unwrap();
    let rec = Recording {
        inner: &exc,
        asked: Default::default(),
    };
    assert_eq!(h.hyphenate("PRoject", &rec).unwrap(), "PRoject");
    let asked = rec.asked.borrow();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].0, b"project");
    assert_eq!(asked[0].1, filterstore::hash::key_hash(b"project"));
}

/// A lookup that answers with a fixed value, for the exception rules.
struct Fixed(&'static str);

impl ExceptionLookup for Fixed {
    fn lookup(&self, _lower_word: &[u8], _hash: u64) -> filterstore::Result<Option<Vec<u8>>> {
        Ok(Some(self.0.as_bytes().to_vec()))
    }
}

#[test]
fn exception_hyphens_obey_the_minimums() {
    let h = hyph();
    assert_eq!(
        h.hyphenate("abcdefg", &Fixed("a-b-c-d-e-f-g")).unwrap(),
        "ab-c-d-efg"
    );
    assert_eq!(
        h.hyphenate("ABCDEFG", &Fixed("a-b-c-d-e-f-g")).unwrap(),
        "AB-C-D-EFG"
    );
    assert_eq!(h.hyphenate("abcde", &Fixed("a-b-c-d-e")).unwrap(), "ab-cde");
    // Never-hyphenate entry.
    assert_eq!(
        h.hyphenate("hyphenation", &Fixed("hyphenation")).unwrap(),
        "hyphenation"
    );
    // Other minimums.
    let h1 = hyph().with_minimums(1, 1).unwrap();
    assert_eq!(
        h1.hyphenate("abcde", &Fixed("a-b-c-d-e")).unwrap(),
        "a-b-c-d-e"
    );
    assert!(hyph().with_minimums(0, 3).is_err());
}

#[test]
fn a_value_that_does_not_spell_the_word_is_an_error() {
    let h = hyph();
    for bad in [
        "ab-cdf", "abcdef", "-abcde", "abcde-", "ab--cde", "", "abc-d",
    ] {
        let mut out = String::new();
        let err = h
            .hyphenate_into("abcde", &Fixed(bad), &mut out)
            .unwrap_err();
        assert!(err.is_corruption(), "{bad}: {err}");
        assert!(out.is_empty());
    }
}

#[test]
fn every_listed_exception_gives_its_form_within_the_minimums() {
    let h = hyph();
    let exc = MemoryExceptions::en_us().unwrap();
    let mut entries = parse_exceptions(EN_US_KNUTH_EXCEPTIONS).unwrap();
    entries.extend(parse_exceptions(EN_US_TUGBOAT_EXCEPTIONS).unwrap());
    // A later entry for the same word replaces an earlier one.
    let mut last = std::collections::HashMap::new();
    for e in &entries {
        last.insert(e.word.clone(), e.hyphenated.clone());
    }
    assert_eq!(last.len(), exc.len());
    let mut checked = 0;
    for (word, form) in &last {
        let word = std::str::from_utf8(word).unwrap();
        let form = std::str::from_utf8(form).unwrap();
        let n = word.len();
        // Expected: the form's hyphens with at least 2 letters before and 3 after.
        let mut want = String::new();
        let mut letters = 0;
        for c in form.chars() {
            if c == '-' {
                if letters >= 2 && n >= 5 && letters <= n - 3 {
                    want.push('-');
                }
            } else {
                want.push(c);
                letters += 1;
            }
        }
        assert_eq!(h.hyphenate(word, &exc).unwrap(), want, "{word} ({form})");
        let upper = word.to_ascii_uppercase();
        assert_eq!(
            h.hyphenate(&upper, &exc).unwrap(),
            want.to_ascii_uppercase(),
            "{upper}"
        );
        checked += 1;
    }
    assert_eq!(checked, 1766);
    // 47 in the TUGboat list plus Knuth's present(s), project(s).
    let never = last.values().filter(|f| !f.contains(&b'-')).count();
    assert_eq!(never, 51);
}

#[test]
fn builtin_word_list_loads() {
    let words = WordList::builtin().unwrap();
    assert_eq!(words.len(), 466_551);
    assert_eq!(words.get(0), Some("2"));
    assert_eq!(words.get(466_550), Some("ZZZ"));
    let letters = words
        .iter()
        .filter(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphabetic()))
        .count();
    // The study's 466,550-line version lacks "acceleratorh", hence 416,296 there.
    assert_eq!(letters, 416_297);
}

#[test]
fn sample_matches_the_reference_patterns_only() {
    let h = hyph();
    let dict = reference();
    let sample = include_str!("data/hyph-sample.txt");
    let mut words: Vec<&str> = sample.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(words.len(), 2000);
    words.extend(KNOWN_PATTERNS_ONLY.iter().map(|&(w, _)| w));
    words.extend(KNOWN_WITH_EXCEPTIONS.iter().map(|&(w, _)| w));
    let mut diffs = Vec::new();
    let mut hyphens = 0;
    for w in &words {
        let ours = h.hyphenate(w, &NoExceptions).unwrap();
        let theirs = reference_hyphenate(&dict, w);
        hyphens += ours.matches('-').count();
        if ours != theirs {
            diffs.push(format!("{w}: ours {ours}, reference {theirs}"));
        }
    }
    println!(
        "sample: {} words compared, {} differences, {hyphens} hyphens",
        words.len(),
        diffs.len()
    );
    assert!(hyphens > 2500, "suspiciously few hyphens: {hyphens}");
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// All letters-only words of the built-in list against the reference (a few seconds in
/// `cargo test --release`).
#[test]
fn whole_word_list_matches_the_reference_patterns_only() {
    let h = hyph();
    let dict = reference();
    let words = WordList::builtin().unwrap();
    let t = Instant::now();
    let mut compared = 0;
    let mut diffs = Vec::new();
    let mut ours = String::new();
    for w in words.iter() {
        if w.is_empty() || !w.bytes().all(|b| b.is_ascii_alphabetic()) {
            continue;
        }
        ours.clear();
        h.hyphenate_into(w, &NoExceptions, &mut ours).unwrap();
        let theirs = reference_hyphenate(&dict, w);
        compared += 1;
        if ours != theirs {
            diffs.push(format!("{w}: ours {ours}, reference {theirs}"));
        }
    }
    println!(
        "whole list: {compared} letters-only words compared, {} differences ({:.2?})",
        diffs.len(),
        t.elapsed()
    );
    assert_eq!(compared, 416_297);
    assert!(
        diffs.is_empty(),
        "{}",
        diffs
            .iter()
            .take(50)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// CPU time of the calling thread, in seconds (not inflated by other processes on a busy
/// machine, unlike wall time).
fn thread_cpu_seconds() -> f64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Throughput over the whole built-in list (466,551 words, non-letter words included), one
/// thread. Run with `cargo test --release --test hyph -- --ignored --nocapture throughput`.
/// Prints the best of 15 runs, by wall time and by thread CPU time.
#[test]
#[ignore]
fn throughput() {
    let h = hyph();
    let exc = MemoryExceptions::en_us().unwrap();
    let words = WordList::builtin().unwrap();
    println!("{:?}", h.patterns());
    let mut out = String::new();
    for (name, lookup) in [
        ("patterns only", &NoExceptions as &dyn ExceptionLookup),
        ("in-memory exceptions", &exc),
    ] {
        let (mut wall, mut cpu) = (f64::MAX, f64::MAX);
        let mut hyphens = 0u64;
        let mut lookups = 0u64;
        for _ in 0..15 {
            let t = Instant::now();
            let c = thread_cpu_seconds();
            hyphens = 0;
            lookups = 0;
            for w in words.iter() {
                out.clear();
                let o = h.hyphenate_into(w, lookup, &mut out).unwrap();
                hyphens += o.hyphens as u64;
                lookups += o.lookups as u64;
            }
            std::hint::black_box(&out);
            cpu = cpu.min(thread_cpu_seconds() - c);
            wall = wall.min(t.elapsed().as_secs_f64());
        }
        let n = words.len() as f64;
        println!(
            "{name}: {} words, {hyphens} hyphens, {lookups} lookups; best of 15: wall {:.1} ms = {:.1} ns/word = {:.2} M words/s; thread CPU {:.1} ms = {:.1} ns/word = {:.2} M words/s",
            words.len(),
            wall * 1e3,
            wall * 1e9 / n,
            n / wall / 1e6,
            cpu * 1e3,
            cpu * 1e9 / n,
            n / cpu / 1e6,
        );
    }
}

/// Shared instances for the property tests (built once, not per case).
fn shared() -> &'static (Hyphenator, Standard, MemoryExceptions) {
    static SHARED: std::sync::OnceLock<(Hyphenator, Standard, MemoryExceptions)> =
        std::sync::OnceLock::new();
    SHARED.get_or_init(|| (hyph(), reference(), MemoryExceptions::en_us().unwrap()))
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// Random letter strings (any case, up to 120 letters, so the heap path too) agree with
    /// the reference, patterns only.
    #[test]
    fn random_letter_words_match_the_reference(w in "[a-zA-Z]{0,120}") {
        let (h, dict, _) = shared();
        proptest::prop_assert_eq!(h.hyphenate(&w, &NoExceptions).unwrap(), reference_hyphenate(dict, &w));
    }

    /// Any string: no panic, and a word that is not all ASCII letters comes back unchanged.
    #[test]
    fn any_string_never_panics(w in "\\PC{0,40}") {
        let (h, _, exc) = shared();
        let out = h.hyphenate(&w, exc).unwrap();
        if !w.bytes().all(|b| b.is_ascii_alphabetic()) {
            proptest::prop_assert_eq!(out, w);
        } else {
            proptest::prop_assert_eq!(out.replace('-', ""), w);
        }
    }
}
