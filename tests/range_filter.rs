//! Range filter tests: no false negatives against a `BTreeSet` model (ranges of every length,
//! empty, inverted and unbounded ones, prefixes, keys sharing long prefixes, keys of 0x00 and
//! 0xff bytes, the empty key, empty and single-key sets), measured false-positive rates
//! against the design's bound and Grafite's, exactness on dense keys, checked-in fixtures,
//! and damaged bytes.
//!
//! Regenerate the fixtures (only when the format changes on purpose, together with
//! `format.md`) with
//! `FILTERSTORE_WRITE_FIXTURES=1 cargo test --release --test range_filter fixtures`.

use std::collections::BTreeSet;
use std::ops::Bound::{self, Excluded, Included, Unbounded};

use filterstore::filter::range::{self, grafite_bound, RangeFilter, RangeFilterBuilder};
use filterstore::hash::mix64;
use proptest::prelude::*;

fn build_set(keys: &BTreeSet<Vec<u8>>, bits: f64) -> Vec<u8> {
    range::build(keys.iter(), bits).expect("build")
}

/// Does the model hold a key in (lo, hi)?
fn model_has(keys: &BTreeSet<Vec<u8>>, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    let empty = match (lo, hi) {
        (Included(a) | Excluded(a), Included(b) | Excluded(b)) if a > b => true,
        (Included(a), Excluded(b)) | (Excluded(a), Included(b)) | (Excluded(a), Excluded(b))
            if a == b =>
        {
            true
        }
        _ => false,
    };
    !empty && keys.range::<[u8], _>((lo, hi)).next().is_some()
}

/// A small deterministic generator for the queries of one case.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A query bound near the keys: a key, a key changed at its end (0x00 or 0xff appended, last
/// byte moved by one, cut short), a prefix of a key, random bytes, or the empty string.
fn near(rng: &mut Rng, keys: &[Vec<u8>]) -> Vec<u8> {
    let mut k = if keys.is_empty() || rng.below(8) == 0 {
        (0..rng.below(6)).map(|_| rng.next() as u8).collect()
    } else {
        keys[rng.below(keys.len() as u64) as usize].clone()
    };
    match rng.below(9) {
        0 => k.push(0),
        1 => k.push(0xff),
        2 => {
            if let Some(b) = k.last_mut() {
                *b = b.wrapping_add(1);
            }
        }
        3 => {
            if let Some(b) = k.last_mut() {
                *b = b.wrapping_sub(1);
            }
        }
        4 => k.truncate(rng.below(k.len() as u64 + 1) as usize),
        5 => k.clear(),
        _ => {}
    }
    k
}

fn bound(rng: &mut Rng, k: &[u8]) -> Bound<Vec<u8>> {
    match rng.below(5) {
        0 => Unbounded,
        1 | 2 => Included(k.to_vec()),
        _ => Excluded(k.to_vec()),
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Included(k) => Included(k.as_slice()),
        Excluded(k) => Excluded(k.as_slice()),
        Unbounded => Unbounded,
    }
}

/// Checks `queries` random ranges and prefixes near `keys` against the model: every range
/// and prefix that holds a key must be answered "maybe"; inverted and empty-by-bounds ranges
/// must be answered "no". Returns (ranges that hold a key, ranges that do not).
fn check_against_model(
    keys: &BTreeSet<Vec<u8>>,
    bits: f64,
    seed: u64,
    queries: usize,
) -> (u64, u64) {
    let block = build_set(keys, bits);
    let f = RangeFilter::decode(&block).expect("a fresh block decodes");
    assert_eq!(f.header().keys, keys.len() as u64);
    let list: Vec<Vec<u8>> = keys.iter().cloned().collect();
    let mut rng = Rng(seed);
    let (mut full, mut empty) = (0, 0);
    for _ in 0..queries {
        let (a, b) = (near(&mut rng, &list), near(&mut rng, &list));
        let (lo, hi) = (bound(&mut rng, &a), bound(&mut rng, &b));
        let (lo, hi) = (as_ref(&lo), as_ref(&hi));
        let want = model_has(keys, lo, hi);
        let got = f.may_intersect_bounds(lo, hi);
        if want {
            full += 1;
            assert!(
                got,
                "false negative for ({lo:?}, {hi:?}) over {} keys, prefix {:?}",
                keys.len(),
                f.prefix()
            );
        } else {
            empty += 1;
        }
        let inverted = match (lo, hi) {
            (Included(x) | Excluded(x), Included(y) | Excluded(y)) => x > y,
            _ => false,
        };
        if inverted {
            assert!(!got, "inverted range ({lo:?}, {hi:?}) answered maybe");
        }
        // The generic entry point answers alike.
        assert_eq!(got, f.may_intersect::<&[u8]>((lo, hi)));
        // Prefix queries.
        let has_prefix = keys.iter().any(|k| k.starts_with(&a));
        if has_prefix {
            assert!(f.may_contain_prefix(&a), "prefix {a:?} has a key");
        }
    }
    // Every key is found, alone and as a prefix.
    for k in keys {
        assert!(
            f.may_intersect(k.as_slice()..=k.as_slice()),
            "key {k:?} lost"
        );
        assert!(f.may_contain_prefix(k));
    }
    assert_eq!(f.may_intersect::<&[u8]>(..), !keys.is_empty());
    (full, empty)
}

/// Bytes biased towards 0x00, 0xff and a few letters, so keys share prefixes and differ in
/// the bytes that are easy to get wrong.
fn byte() -> impl Strategy<Value = u8> {
    prop_oneof![Just(0u8), Just(0xffu8), Just(b'a'), Just(b'b'), any::<u8>()]
}

/// Key sets of three shapes: short random keys (the empty key among them); keys behind one
/// long shared prefix with short tails; keys sharing long prefixes in groups (each group's
/// prefix differs early, so the table's common prefix is short and the groups' long).
fn key_sets() -> impl Strategy<Value = BTreeSet<Vec<u8>>> {
    prop_oneof![
        prop::collection::btree_set(prop::collection::vec(byte(), 0..12), 0..300),
        (
            prop::collection::vec(byte(), 0..40),
            prop::collection::btree_set(prop::collection::vec(byte(), 0..5), 0..200)
        )
            .prop_map(|(p, tails)| tails
                .into_iter()
                .map(|t| [p.as_slice(), &t].concat())
                .collect()),
        (
            prop::collection::vec(prop::collection::vec(byte(), 20..40), 1..5),
            prop::collection::btree_set((0usize..5, prop::collection::vec(byte(), 0..4)), 0..200)
        )
            .prop_map(|(groups, tails)| tails
                .into_iter()
                .map(|(g, t)| [groups[g % groups.len()].as_slice(), &t].concat())
                .collect()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn no_false_negatives(keys in key_sets(), bits in 3.0f64..40.0, seed in any::<u64>()) {
        check_against_model(&keys, bits, seed, 400);
    }
}

/// Integer keys (8-byte big-endian) and ranges [a, a + ℓ) for ℓ = 2^0 .. 2^40 at random
/// places and next to keys, against the model.
fn check_integer_ranges(values: &BTreeSet<u64>, bits: f64, seed: u64) {
    let keys: BTreeSet<Vec<u8>> = values.iter().map(|v| v.to_be_bytes().to_vec()).collect();
    let block = build_set(&keys, bits);
    let f = RangeFilter::decode(&block).unwrap();
    let list: Vec<u64> = values.iter().copied().collect();
    let mut rng = Rng(seed);
    for j in 0..=40u32 {
        let len = 1u64 << j;
        for _ in 0..20 {
            let a = match rng.below(3) {
                0 => rng.next(),
                _ if list.is_empty() => rng.next(),
                _ => list[rng.below(list.len() as u64) as usize]
                    .wrapping_add(rng.below(2 * len + 2))
                    .wrapping_sub(len),
            };
            let lo = a.to_be_bytes();
            let want = values.range(a..).next().is_some_and(|&k| k - a < len);
            let got = match a.checked_add(len) {
                Some(b) => f.may_intersect(lo.as_slice()..b.to_be_bytes().as_slice()),
                None => f.may_intersect(lo.as_slice()..),
            };
            if want {
                assert!(got, "false negative for [{a}, {a} + {len})");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn integer_ranges_of_every_length(
        values in prop_oneof![
            prop::collection::btree_set(any::<u64>(), 0..500),
            // Dense clusters: consecutive values from a few random starts.
            (prop::collection::vec(any::<u64>(), 1..4), 1u64..300).prop_map(|(starts, n)| {
                starts.iter().flat_map(|&s| (0..n).map(move |i| s.saturating_add(i * 3))).collect()
            }),
        ],
        bits in 4.0f64..24.0,
        seed in any::<u64>(),
    ) {
        check_integer_ranges(&values, bits, seed);
    }
}

#[test]
fn edge_sets() {
    let sets: Vec<Vec<&[u8]>> = vec![
        vec![],
        vec![b""],
        vec![b"", b"\0", b"\0\0", b"\x01"],
        vec![b"only"],
        vec![b"\xff\xff\xff"],
        vec![b"\0", b"\xff"],
        vec![b"a", b"a\0", b"a\0\0", b"a\0\x01", b"a\xff"],
        vec![
            b"same-prefix-000000000000000000000000000001",
            b"same-prefix-000000000000000000000000000002",
        ],
        vec![
            b"x",
            b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        ],
    ];
    for set in sets {
        let keys: BTreeSet<Vec<u8>> = set.iter().map(|k| k.to_vec()).collect();
        for bits in [3.0, 10.0, 16.0, 40.0] {
            check_against_model(&keys, bits, 7, 3000);
        }
    }
    // The empty set answers "no" to everything.
    let block = range::build(std::iter::empty::<&[u8]>(), 16.0).unwrap();
    let f = RangeFilter::decode(&block).unwrap();
    assert!(!f.may_intersect::<&[u8]>(..));
    assert!(!f.may_contain_prefix(b""));
    assert_eq!(f.header().stored, 0);
    // A single key: its own ranges only (nothing else is near it in the window).
    let block = range::build([b"key".as_slice()], 16.0).unwrap();
    let f = RangeFilter::decode(&block).unwrap();
    assert_eq!(f.prefix(), b"key");
    assert!(f.may_intersect(b"key".as_slice()..=b"key".as_slice()));
    assert!(f.may_intersect(b"k".as_slice()..b"kez".as_slice()));
    assert!(!f.may_intersect(b"kez".as_slice()..));
    assert!(!f.may_intersect(..b"key".as_slice()));
    assert!(!f.may_intersect(b"a".as_slice()..b"b".as_slice()));
    assert!(!f.may_contain_prefix(b"kex"));
    assert!(f.may_contain_prefix(b"ke"));
}

/// A long prefix that every key shares costs nothing: it is the common prefix, and the window
/// starts after it. Keys that agree on more than the window after the common prefix are one
/// value to the filter: ranges between them answer "maybe" (the cost `format.md` states),
/// never "no" for a range that holds one.
#[test]
fn keys_longer_than_the_window() {
    let shared: BTreeSet<Vec<u8>> = (0..2000u64)
        .map(|i| format!("tenant-0042/user/{}/{:06}", "x".repeat(30), i * 7).into_bytes())
        .collect();
    let block = build_set(&shared, 16.0);
    let f = RangeFilter::decode(&block).unwrap();
    // The keys agree on 48 bytes and then differ in their six digits (up to 013993: the
    // first of them is always 0).
    assert_eq!(f.prefix().len(), 48 + 1);
    assert_eq!(f.header().window, 5);
    assert_eq!(f.header().stored, 2000);
    check_against_model(&shared, 16.0, 3, 20_000);

    // 50 groups whose keys differ only after 16 bytes: the common prefix is empty (the
    // groups differ in their first byte), and each group is one window.
    let groups: BTreeSet<Vec<u8>> = (0..2000u64)
        .map(|i| format!("{:02}/{}/{:06}", i % 50, "-".repeat(20), i).into_bytes())
        .collect();
    let block = build_set(&groups, 16.0);
    let f = RangeFilter::decode(&block).unwrap();
    assert_eq!(f.prefix().len(), 0);
    assert_eq!(f.header().window, 16);
    assert_eq!(f.header().stored, 50, "each group is one window");
    check_against_model(&groups, 16.0, 4, 20_000);
}

#[test]
fn builder_refuses_bad_input() {
    assert!(RangeFilterBuilder::new(2.0).is_err());
    assert!(RangeFilterBuilder::new(41.0).is_err());
    assert!(RangeFilterBuilder::new(f64::NAN).is_err());
    let mut b = RangeFilterBuilder::new(16.0).unwrap();
    b.push(b"b").unwrap();
    assert!(b.push(&vec![0u8; filterstore::MAX_KEY_LEN + 1]).is_err());
    assert_eq!(b.len(), 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]
    /// The filter describes the set: the keys in any order give the same bytes as sorted;
    /// repeated keys (which the builder sizes for, as it sizes for every key it is given)
    /// are all found.
    #[test]
    fn order_does_not_matter(keys in key_sets(), seed in any::<u64>(), bits in 3.0f64..40.0) {
        let sorted: Vec<&Vec<u8>> = keys.iter().collect();
        let mut mixed = sorted.clone();
        let mut rng = Rng(seed);
        for i in (1..mixed.len()).rev() {
            mixed.swap(i, rng.below(i as u64 + 1) as usize);
        }
        prop_assert_eq!(range::build(&mixed, bits).unwrap(), range::build(&sorted, bits).unwrap());
        mixed.extend(sorted.iter().step_by(3));
        let block = range::build(&mixed, bits).unwrap();
        let f = RangeFilter::decode(&block).unwrap();
        for k in &keys {
            prop_assert!(f.may_intersect(k.as_slice()..=k.as_slice()));
        }
    }
}

/// Dense keys fit the hash's single block: the filter is exact, no false positive at all.
#[test]
fn dense_keys_are_exact() {
    // Even numbers: every odd number is an empty range [o, o + 1).
    let values: BTreeSet<u64> = (0..50_000u64).map(|i| (7 << 40) + 2 * i).collect();
    let keys: BTreeSet<Vec<u8>> = values.iter().map(|v| v.to_be_bytes().to_vec()).collect();
    let block = build_set(&keys, 16.0);
    let f = RangeFilter::decode(&block).unwrap();
    assert!(f.is_exact());
    assert_eq!(f.expected_fpr(1), 0.0);
    for &v in &values {
        let o = v + 1;
        assert!(!f.may_intersect(o.to_be_bytes().as_slice()..(o + 1).to_be_bytes().as_slice()));
        assert!(f.may_intersect(v.to_be_bytes().as_slice()..o.to_be_bytes().as_slice()));
    }
}

// ---------------------------------------------------------------------------------------------
// False-positive rate against the bound

struct Measured {
    bits_per_key: f64,
    /// (ℓ, queries, positives, the design's expected rate) per range length.
    rows: Vec<(u64, u64, u64, f64)>,
}

/// False positives among `queries` empty ranges [a, a + ℓ) per ℓ, with `a` uniform over the
/// keys' span (`clustered` false) or a random 1..=64 after a random key (`clustered` true).
/// Keys are an 8-byte big-endian number, after `tenant-41/` or `tenant-42/` (by the number's
/// top bit) when `tenants` is set: two groups whose common prefix is 8 bytes, 2 bytes shorter
/// than each group's.
fn measure_fpr(
    values: &[u64],
    tenants: bool,
    bits: f64,
    clustered: bool,
    queries: u64,
) -> Measured {
    let key = |v: u64| {
        let t: &[u8] = match (tenants, v >> 63) {
            (false, _) => b"",
            (true, 0) => b"tenant-41/",
            (true, _) => b"tenant-42/",
        };
        [t, &v.to_be_bytes()].concat()
    };
    let block = range::build(values.iter().map(|&v| key(v)), bits).unwrap();
    let f = RangeFilter::decode(&block).unwrap();
    let (lo, hi) = (values[0], values[values.len() - 1]);
    let mut rng = Rng(0x5eed ^ clustered as u64 ^ (tenants as u64) << 1);
    let mut rows = Vec::new();
    for j in 0..=10 {
        let len = 1u64 << j;
        let mut positives = 0;
        let mut asked = 0;
        while asked < queries {
            let a = if clustered {
                values[rng.below(values.len() as u64) as usize].wrapping_add(1 + rng.below(64))
            } else {
                lo + rng.below(hi - lo)
            };
            let Some(b) = a.checked_add(len).filter(|b| b >> 63 == a >> 63) else {
                continue;
            };
            // Only empty ranges count (the keys are sparse: almost every range is).
            let i = values.partition_point(|&v| v < a);
            if values.get(i).is_some_and(|&v| v < b) {
                continue;
            }
            asked += 1;
            positives += f.may_intersect(key(a).as_slice()..key(b).as_slice()) as u64;
        }
        rows.push((len, queries, positives, f.expected_fpr(len)));
    }
    Measured {
        bits_per_key: f.bits_per_key(),
        rows,
    }
}

/// For n = 200,000 random keys at 12 and 16 bits per key, 200,000 empty ranges per length
/// ℓ = 2^0 .. 2^10, uniform and clustered next to keys. Each query is a Bernoulli trial with
/// the design's expected rate p (`expected_fpr`: 1 − (1 − ℓ/r)^n), so the count of positives
/// has standard deviation σ = √(q·p(1 − p)); the test asserts
///
///     |positives − q·p| ≤ 5σ + 0.05·q·p + 3
///
/// (5σ: a spurious failure is a < 10⁻⁶ event; 5 % for the fastrange rounding of q and the
/// few ranges that straddle two blocks; 3 for the smallest counts; the inputs are fixed, so
/// the outcome is too), and the target: for ℓ ≤ 32 at 16 bits per key, positives ≤
/// 1.2 × Grafite's bound ℓ / 2^(B − 2) at the block's measured B, less 5σ of sampling.
#[test]
fn measured_fpr_within_the_bound() {
    let n = 200_000u64;
    let q = 200_000u64;
    let mut values: Vec<u64> = (0..n).map(|i| mix64(i ^ 0xabcd)).collect();
    values.sort_unstable();
    values.dedup();
    let mut report = String::new();
    for (tenants, bits) in [(false, 16.0), (true, 16.0), (false, 12.0)] {
        for clustered in [false, true] {
            let m = measure_fpr(&values, tenants, bits, clustered, q);
            for &(len, asked, pos, p) in &m.rows {
                let mean = asked as f64 * p;
                let sd = (asked as f64 * p * (1.0 - p)).sqrt();
                let band = 5.0 * sd + 0.05 * mean + 3.0;
                let grafite = grafite_bound(len, m.bits_per_key);
                report += &format!(
                    "{} B {:5.2} {} ℓ={len:>4}: {pos:>5} of {asked} = {:.5}%  expected {:.5}%  Grafite bound {:.5}%\n",
                    if tenants { "tenants" } else { "plain  " },
                    m.bits_per_key,
                    if clustered { "clustered" } else { "uniform  " },
                    pos as f64 / asked as f64 * 100.0,
                    p * 100.0,
                    grafite * 100.0
                );
                assert!(
                    (pos as f64 - mean).abs() <= band,
                    "{pos} positives, expected {mean:.1} ± {band:.1}\n{report}"
                );
                if bits == 16.0 && len <= 32 {
                    let target = 1.2 * grafite * asked as f64;
                    assert!(
                        pos as f64 <= target + 5.0 * (target * (1.0 - grafite)).sqrt(),
                        "ℓ={len}: {pos} positives above 1.2 × Grafite's bound ({target:.1})\n{report}"
                    );
                }
            }
        }
    }
    eprintln!("{report}");
}

// ---------------------------------------------------------------------------------------------
// Fixtures: the format, pinned

const FIXTURE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// One checked-in block: its keys, the header fields it must decode to, and its answers on a
/// fixed list of ranges.
struct Fixture {
    file: &'static str,
    keys: fn() -> Vec<Vec<u8>>,
    bits: f64,
    window: u8,
    flags: u8,
    low_bits: u8,
    prefix_len: u32,
    stored: u64,
    universe: u64,
    body_len: u64,
    /// "Maybe" answers among the 10,000 ranges of `fixture_queries`.
    positives: usize,
}

/// `key-0 .. key-999` in byte order.
fn decimal_keys() -> Vec<Vec<u8>> {
    let mut k: Vec<Vec<u8>> = (0..1000).map(|i| format!("key-{i}").into_bytes()).collect();
    k.sort();
    k
}

/// 1000 16-byte keys: mix64(i) and mix64(i + 2^32), big-endian, sorted (the peers harness's
/// key shape: 16 random bytes).
fn binary_keys() -> Vec<Vec<u8>> {
    let mut k: Vec<Vec<u8>> = (0..1000u64)
        .map(|i| [mix64(i).to_be_bytes(), mix64(i + (1 << 32)).to_be_bytes()].concat())
        .collect();
    k.sort();
    k
}

/// `key` read as a big-endian number, plus `d` (`None` when it overflows its length).
fn add_be(key: &[u8], d: u64) -> Option<Vec<u8>> {
    let mut k = key.to_vec();
    let mut carry = u128::from(d);
    for b in k.iter_mut().rev() {
        let t = u128::from(*b) + (carry & 0xff);
        *b = t as u8;
        carry = (carry >> 8) + (t >> 8);
    }
    (carry == 0).then_some(k)
}

/// The fixed ranges the fixtures are asked: [k + δ, k + δ + ℓ) for 10,000 random keys k, δ
/// in 1..=3 and ℓ in 1..=4096 (keys read as big-endian numbers of their own length).
fn fixture_queries(keys: &[Vec<u8>]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rng = Rng(2024);
    let mut out = Vec::new();
    while out.len() < 10_000 {
        let k = &keys[rng.below(keys.len() as u64) as usize];
        let a = add_be(k, 1 + rng.below(3));
        let b = a.as_ref().and_then(|a| add_be(a, 1 + rng.below(4096)));
        if let (Some(a), Some(b)) = (a, b) {
            out.push((a, b));
        }
    }
    out
}

const FIXTURES: &[Fixture] = &[
    // Keys of 5 to 7 bytes after the common prefix "key-": a 3-byte window that every key
    // fits (FIT) but not every key fills.
    Fixture {
        file: "range-grafite-v1-decimal.bin",
        keys: decimal_keys,
        bits: 16.0,
        window: 3,
        flags: 2,
        low_bits: 13,
        prefix_len: 4,
        stored: 1000,
        universe: 15_420_235,
        body_len: 2060,
        positives: 9695,
    },
    // 16 random bytes: no common prefix, a 16-byte window every key fills and fits.
    Fixture {
        file: "range-grafite-v1-binary.bin",
        keys: binary_keys,
        bits: 16.0,
        window: 16,
        flags: 3,
        low_bits: 13,
        prefix_len: 0,
        stored: 1000,
        universe: 15_420_235,
        body_len: 2056,
        positives: 1139,
    },
];

#[test]
fn fixtures() {
    let path = |x: &Fixture| format!("{FIXTURE_DIR}/{}", x.file);
    if std::env::var_os("FILTERSTORE_WRITE_FIXTURES").is_some() {
        for x in FIXTURES {
            let keys = (x.keys)();
            let block = range::build(&keys, x.bits).unwrap();
            std::fs::write(path(x), &block).unwrap();
            let f = RangeFilter::decode(&block).unwrap();
            let h = f.header();
            let pos = fixture_queries(&keys)
                .iter()
                .filter(|(a, b)| f.may_intersect(a.as_slice()..b.as_slice()))
                .count();
            eprintln!("{}: {h:?}, positives {pos}", x.file);
        }
    }
    for x in FIXTURES {
        let keys = (x.keys)();
        let bytes = std::fs::read(path(x)).expect("fixture file");
        let f = RangeFilter::decode(&bytes).expect("fixture decodes");
        let h = f.header();
        assert_eq!((h.version, h.kind, h.sample_log2), (1, 1, 9), "{}", x.file);
        assert_eq!(
            (
                h.window,
                h.flags,
                h.low_bits,
                h.prefix_len,
                h.keys,
                h.stored
            ),
            (x.window, x.flags, x.low_bits, x.prefix_len, 1000, x.stored),
            "{}",
            x.file
        );
        assert_eq!(
            (h.universe, h.seed, h.body_len),
            (x.universe, range::DEFAULT_SEED, x.body_len),
            "{}",
            x.file
        );
        assert_eq!(bytes.len() as u64, 64 + x.body_len);
        for k in &keys {
            assert!(
                f.may_intersect(k.as_slice()..=k.as_slice()),
                "{}: lost a key",
                x.file
            );
        }
        let pos = fixture_queries(&keys)
            .iter()
            .filter(|(a, b)| f.may_intersect(a.as_slice()..b.as_slice()))
            .count();
        assert_eq!(pos, x.positives, "{}: answers on the fixed ranges", x.file);
        assert_eq!(
            range::build(&keys, x.bits).unwrap(),
            bytes,
            "{}: builder output changed",
            x.file
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Damaged bytes never panic

/// Recomputes both CRCs so a change reaches the checks behind them.
fn reseal(b: &mut [u8]) {
    if b.len() < 64 {
        return;
    }
    let body = crc32fast::hash(&b[64..]);
    b[56..60].copy_from_slice(&body.to_le_bytes());
    let head = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&head.to_le_bytes());
}

/// Decodes and, when accepted, queries: never a panic.
fn poke(bytes: &[u8]) -> bool {
    match RangeFilter::decode(bytes) {
        Err(e) => {
            assert!(e.is_corruption(), "non-corruption error {e}");
            false
        }
        Ok(f) => {
            for i in 0..32u64 {
                let a = mix64(i).to_be_bytes();
                let b = mix64(i + 100).to_be_bytes();
                f.may_intersect(a.as_slice()..b.as_slice());
                f.may_intersect(a.as_slice()..);
                f.may_contain_prefix(&a[..(i % 9) as usize]);
            }
            f.may_intersect::<&[u8]>(..);
            let _ = (
                f.expected_fpr(1),
                f.bits_per_key(),
                f.is_exact(),
                f.prefix(),
            );
            true
        }
    }
}

fn small_blocks() -> Vec<Vec<u8>> {
    let sets: [Vec<Vec<u8>>; 4] = [
        vec![],
        vec![b"one".to_vec()],
        (0..12u64)
            .map(|i| format!("k{i:02}").into_bytes())
            .collect(),
        (0..9u64)
            .map(|i| mix64(i).to_be_bytes().to_vec())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
    ];
    sets.iter()
        .flat_map(|s| {
            [
                range::build(s, 4.0).unwrap(),
                range::build(s, 16.0).unwrap(),
            ]
        })
        .collect()
}

#[test]
fn every_byte_change_is_caught_or_harmless() {
    let mut accepted_resealed = 0;
    for block in small_blocks() {
        assert!(block.len() < 400, "{} bytes", block.len());
        for pos in 0..block.len() {
            for x in [1u8, 2, 4, 8, 16, 32, 64, 128, 0xff, 0x5a] {
                let mut b = block.clone();
                b[pos] ^= x;
                assert!(!poke(&b), "change at {pos} (xor {x:#x}) not detected");
                reseal(&mut b);
                accepted_resealed += poke(&b) as u64;
            }
        }
        for len in 0..block.len() {
            assert!(!poke(&block[..len]), "truncation to {len} accepted");
            let mut b = block[..len].to_vec();
            reseal(&mut b);
            assert!(!poke(&b), "resealed truncation to {len} accepted");
        }
        let mut b = block.clone();
        b.push(0);
        assert!(!poke(&b));
        assert!(poke(&block));
    }
    // Resealed changes to the low bits or the prefix are just another filter.
    assert!(accepted_resealed > 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn random_garbage_never_panics(mut bytes in prop::collection::vec(any::<u8>(), 0..400),
                                   magic in any::<bool>()) {
        if magic && bytes.len() >= 64 {
            bytes[..4].copy_from_slice(b"FSRF");
            bytes[4] = 1;
            bytes[5] = 1;
            bytes[6] %= 17;
            bytes[7] %= 57;
            bytes[8] = 1 + bytes[8] % 12;
            bytes[9..12].fill(0);
            let n = (bytes.len() - 64) as u64;
            bytes[48..56].copy_from_slice(&n.to_le_bytes());
            reseal(&mut bytes);
        }
        poke(&bytes);
    }
}
