//! The patterns' tests: parsing, and the automaton against Liang's definition.

use super::*;

#[test]
fn parses_liang_patterns() {
    let p = Pattern::parse(".ach4").unwrap();
    assert_eq!(p.letters, b".ach");
    assert_eq!(p.scores, vec![0, 0, 0, 0, 4]);
    let p = Pattern::parse("4b1ly.").unwrap();
    assert_eq!(p.letters, b"bly.");
    assert_eq!(p.scores, vec![4, 1, 0, 0, 0]);
    for bad in ["a.b", "a12b", "a-b", ".", "", "é1"] {
        assert!(Pattern::parse(bad).is_err(), "{bad}");
    }
    assert!(Patterns::parse("ab1c\nab2c").is_err());
}

/// Liang's definition, directly: every pattern at every position of ".word.".
fn naive(patterns: &[Pattern], word: &[u8]) -> Vec<u8> {
    let mut text = vec![b'.'];
    text.extend(word.iter().map(|b| b.to_ascii_lowercase()));
    text.push(b'.');
    let mut gaps = vec![0u8; text.len() + 1];
    for p in patterns {
        for start in 0..text.len() {
            if text[start..].starts_with(&p.letters) {
                for (j, &v) in p.scores.iter().enumerate() {
                    gaps[start + j] = gaps[start + j].max(v);
                }
            }
        }
    }
    gaps
}

#[test]
fn automaton_agrees_with_the_definition_including_deep_states() {
    // A deterministic pseudo-random mix of short and long (deep) patterns over "abc".
    let mut x: u64 = 0x1234_5678;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut text = String::new();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..300 {
        let len = 2 + rnd(13) as usize;
        let mut letters = String::new();
        if rnd(4) == 0 {
            letters.push('.');
        }
        while letters.len() < len {
            letters.push((b'a' + rnd(3) as u8) as char);
        }
        if !seen.insert(letters.clone()) {
            continue;
        }
        for (k, c) in letters.chars().enumerate() {
            if k > 0 && rnd(3) == 0 {
                text.push((b'0' + rnd(10) as u8) as char);
            }
            text.push(c);
        }
        text.push('\n');
    }
    let parsed = parse_patterns(&text).unwrap();
    let p = Patterns::compile(&parsed).unwrap();
    assert!(p.max_pattern_len() > ROW_GAPS);
    assert!(!p.deep_ranges.is_empty());
    for _ in 0..2000 {
        let n = 1 + rnd(30) as usize;
        let word: Vec<u8> = (0..n).map(|_| b"abcABC"[rnd(6) as usize]).collect();
        let mut gaps = vec![0u8; GAP_PAD + n + 3];
        assert!(p.score(&word, &mut gaps));
        let want = naive(&parsed, &word);
        assert_eq!(
            &gaps[GAP_PAD..],
            &want[..],
            "{:?}",
            String::from_utf8_lossy(&word)
        );
        assert_eq!(p.breaks(&word), Some(odd_bits(&want)));
    }
}

/// Bit i: the break after i letters (gap i + 1 of the naive scores) is odd.
fn odd_bits(naive_gaps: &[u8]) -> u64 {
    let mut bits = 0;
    for (i, &g) in naive_gaps.iter().skip(1).enumerate().take(64) {
        bits |= ((g & 1) as u64) << i;
    }
    bits
}

#[test]
fn breaks_match_scores_up_to_the_longest_word_and_refuse_far_outputs() {
    let p = Patterns::en_us().unwrap();
    assert!(!p.far_outputs);
    let parsed = parse_patterns(super::super::EN_US_PATTERNS).unwrap();
    let mut x: u64 = 0x9e37_79b9;
    for n in 1..=MASK_WORD + 1 {
        for _ in 0..20 {
            let word: Vec<u8> = (0..n)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    b"etaoinshrdlucmfwypvbgkqjxzETAOIN"[(x >> 59) as usize]
                })
                .collect();
            let want = naive(&parsed, &word);
            let mut gaps = vec![0u8; GAP_PAD + n + 3];
            assert!(p.score(&word, &mut gaps));
            assert_eq!(&gaps[GAP_PAD..], &want[..]);
            if n <= MASK_WORD {
                assert_eq!(p.breaks(&word), Some(odd_bits(&want)), "{n}");
            } else {
                assert_eq!(p.breaks(&word), None);
            }
        }
    }
    // A pattern 17 characters long reaches 16 gaps back: no bit mask.
    let long = Patterns::parse("a1bcdefghijklmnopq 2ab").unwrap();
    assert!(long.far_outputs);
    assert_eq!(long.breaks(b"abcdefghijklmnopq"), None);
    let mut gaps = vec![0u8; GAP_PAD + 17 + 3];
    assert!(long.score(b"abcdefghijklmnopq", &mut gaps));
    assert_eq!(gaps[GAP_PAD + 2], 1);
}

#[test]
fn scores_by_hand() {
    // "hy3ph" and ".hy2" on "hyphen": gap after "hy" gets max(3, 2) = 3.
    let p = Patterns::parse(".hy2 hy3ph he2n % comment\n").unwrap();
    assert_eq!(p.len(), 3);
    let word = b"hyphen";
    let mut gaps = vec![0u8; GAP_PAD + word.len() + 3];
    assert!(p.score(word, &mut gaps));
    let gaps = &gaps[GAP_PAD..];
    assert_eq!(gaps[2 + 1], 3);
    // "he2n": gap after "hyphe" (5 letters).
    assert_eq!(gaps[5 + 1], 2);
    assert_eq!(gaps.iter().filter(|&&v| v > 0).count(), 2);
}
