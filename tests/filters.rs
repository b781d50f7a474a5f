//! Filter block tests: golden hash values, no false negatives, edge sizes, measured
//! false-positive rates against theory, robustness against corrupted bytes, and checked-in
//! fixtures that pin the on-disk format.
//!
//! Run with `cargo test --release`. Regenerate the fixtures (only when the format changes on
//! purpose, together with `format.md`) with
//! `FILTERSTORE_WRITE_FIXTURES=1 cargo test --release --test filters fixtures`.

use filterstore::filter::{self, Filter, FilterKind, Kernel, HEADER_LEN};
use filterstore::hash::{hash_keys, key_hash, mix64};
use proptest::prelude::*;

const KINDS: [FilterKind; 4] = [
    FilterKind::Bloom,
    FilterKind::BlockedBloom,
    FilterKind::Cuckoo,
    FilterKind::BinaryFuse,
];

fn build(kind: FilterKind, fpr: f64, hashes: &[u64]) -> Vec<u8> {
    filter::build(kind, fpr, hashes)
        .expect("build")
        .expect("a block")
}

fn keys(prefix: &str, range: std::ops::Range<u64>) -> Vec<u64> {
    let ks: Vec<String> = range.map(|i| format!("{prefix}-{i}")).collect();
    hash_keys(&ks)
}

// ---------------------------------------------------------------------------------------------
// The hash

/// xxh3-64 with seed 0x6669_6c74_7273_746f. These values are on disk in every filter: if this
/// test fails, every existing filter answers wrong.
#[test]
fn key_hash_golden_values() {
    let golden: [(&[u8], u64); 5] = [
        (b"", GOLDEN[0]),
        (b"a", GOLDEN[1]),
        (b"key-0", GOLDEN[2]),
        (b"hello world", GOLDEN[3]),
        (&[0xffu8; 100], GOLDEN[4]),
    ];
    for (key, want) in golden {
        assert_eq!(key_hash(key), want, "key_hash({key:?})");
    }
    assert_eq!(hash_keys(&[b"key-0".as_slice()]), vec![GOLDEN[2]]);
}

const GOLDEN: [u64; 5] = [
    0x0ae3_595e_9f47_9adb,
    0xead3_f8ec_7421_85f8,
    0x03ba_1f7d_f698_2ca9,
    0x379f_015a_af94_37b0,
    0x3e3f_4f64_7c53_1053,
];

// ---------------------------------------------------------------------------------------------
// No false negatives

fn check_no_false_negatives(kind: FilterKind, fpr: f64, hashes: &[u64]) {
    let block = build(kind, fpr, hashes);
    let f = Filter::decode(&block).expect("decode");
    assert_eq!(f.header().kind, kind);
    assert_eq!(f.block_len(), block.len() as u64);
    for &h in hashes {
        assert!(
            f.may_contain(h),
            "{kind} ε={fpr}: false negative for {h:#x}"
        );
    }
}

/// Random key sets with heavy duplication: a few distinct keys, some of them repeated
/// hundreds of times, shuffled together.
fn key_sets() -> impl Strategy<Value = Vec<u64>> {
    (
        prop::collection::vec(any::<u64>(), 0..400),
        prop::collection::vec((any::<u64>(), 1usize..600), 0..4),
        any::<u64>(),
    )
        .prop_map(|(mut distinct, repeated, seed)| {
            for (k, times) in repeated {
                distinct.extend(std::iter::repeat_n(k, times));
            }
            // deterministic shuffle
            let mut s = seed | 1;
            for i in (1..distinct.len()).rev() {
                s = mix64(s);
                distinct.swap(i, (s % (i as u64 + 1)) as usize);
            }
            distinct
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn no_false_negatives(hashes in key_sets(), fpr in 0.0005f64..0.5) {
        for kind in KINDS {
            check_no_false_negatives(kind, fpr, &hashes);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// SIMD and portable code answer alike

fn check_portable_agrees(kind: FilterKind, fpr: f64, keys: &[u64], probes: &[u64]) {
    let block = build(kind, fpr, keys);
    let f = Filter::decode(&block).expect("decode");
    let p = f.portable();
    assert!(!p.uses_simd());
    assert_eq!(p.kernel(), Kernel::Scalar);
    let all: Vec<u64> = keys.iter().chain(probes).copied().collect();
    let idx: Vec<u32> = (0..all.len() as u32).collect();
    let mut want = Vec::new();
    p.retain_maybe_in(&block, &idx, &all, 16, &mut want);
    // Every kernel this CPU has, forced: the same answer on every hash, one by one and in
    // batches.
    for ceiling in Kernel::ALL {
        let g = f.with_kernel(ceiling);
        let ran = g.kernel();
        assert!(ran <= ceiling && ran.available(), "{ceiling} ran as {ran}");
        if kind == FilterKind::BlockedBloom && ceiling.available() {
            assert_eq!(ran, ceiling, "a kernel the CPU has is the one forced");
        }
        for &h in &all {
            assert_eq!(
                g.may_contain(h),
                p.may_contain(h),
                "{kind} ε={fpr} k={} kernel {ran}: differs from the portable code on {h:#x}",
                f.header().p2
            );
        }
        let mut got = Vec::new();
        g.retain_maybe_in(&block, &idx, &all, 16, &mut got);
        assert_eq!(got, want, "{kind} ε={fpr} kernel {ran}: batch differs");
    }
    for &h in &all {
        assert_eq!(
            f.may_contain(h),
            p.may_contain(h),
            "{kind}: as decoded vs portable"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Over random keys (so random sizes), random probe hashes and every ε from 40 % down to
    /// 10⁻⁹ (k from 1 to 30: one, two and several SIMD rounds), the filter as decoded (SIMD
    /// where the CPU has it), its portable twin and every kernel the CPU has, forced with
    /// `with_kernel`, give the same answer, one by one and batched. On a CPU without SIMD
    /// all are the portable code, which the other tests check against the keys.
    #[test]
    fn simd_and_portable_agree(keys in prop::collection::vec(any::<u64>(), 1..3000),
                               probes in prop::collection::vec(any::<u64>(), 0..3000),
                               log_fpr in -9.0f64..-0.4) {
        for kind in KINDS {
            check_portable_agrees(kind, 10f64.powf(log_fpr), &keys, &probes);
        }
    }
}

#[test]
fn edge_sizes() {
    for kind in KINDS {
        for fpr in [0.0005, 0.01, 0.3] {
            // n = 0: an empty filter answers "absent" to everything.
            let block = build(kind, fpr, &[]);
            let f = Filter::decode(&block).expect("decode empty");
            assert_eq!(f.header().n, 0);
            assert_eq!(f.theoretical_fpr(), 0.0);
            let pos = (0..10_000u64).filter(|&i| f.may_contain(mix64(i))).count();
            assert_eq!(pos, 0, "{kind}: empty filter reported a key");

            // n = 1
            let h = key_hash(b"only");
            check_no_false_negatives(kind, fpr, &[h]);
            let block = build(kind, fpr, &[h]);
            assert_eq!(Filter::decode(&block).unwrap().header().n, 1);

            // one key repeated 1000 times
            let same = vec![key_hash(b"again"); 1000];
            check_no_false_negatives(kind, fpr, &same);
            let block = build(kind, fpr, &same);
            let f = Filter::decode(&block).unwrap();
            // bloom kinds count the hashes given; cuckoo and binary-fuse count what they
            // store (distinct fingerprints, distinct hashes).
            let want_n = match kind {
                FilterKind::Cuckoo | FilterKind::BinaryFuse => 1,
                _ => 1000,
            };
            assert_eq!(f.header().n, want_n, "{kind}");
        }
    }
    assert!(filter::build(FilterKind::None, 0.01, &[1, 2, 3])
        .unwrap()
        .is_none());
    for bad in [0.0, 1.0, -0.1, f64::NAN, f64::INFINITY] {
        for kind in KINDS {
            assert!(
                filter::build(kind, bad, &[1]).is_err(),
                "fpr {bad} accepted"
            );
        }
    }
}

/// 20 million hashes (mix64 of a counter) per kind; checks every 20th key. 23 s alone in
/// release mode on the shared 2-core machine under load ~6 (most of it the sequential cuckoo
/// insert); the whole file takes 20–28 s there.
#[test]
fn twenty_million_keys() {
    let n = 20_000_000u64;
    let hashes: Vec<u64> = (0..n).map(|i| mix64(i ^ 0x5eed)).collect();
    for (kind, fpr) in [
        (FilterKind::Bloom, 0.01),
        (FilterKind::BlockedBloom, 0.01),
        (FilterKind::Cuckoo, 0.001),
        (FilterKind::BinaryFuse, 0.01),
    ] {
        let block = build(kind, fpr, &hashes);
        let f = Filter::decode(&block).expect("decode");
        if kind == FilterKind::Cuckoo {
            // Keys colliding on fingerprint and bucket pair are stored once: about
            // n²·2/(B·(2^13 − 1))/2 ≈ 9.4k of them here.
            assert!(f.header().n <= n && f.header().n >= n - n / 1000);
        } else {
            assert_eq!(f.header().n, n);
        }
        for &h in hashes.iter().step_by(20) {
            assert!(f.may_contain(h), "{kind}: false negative at 20M keys");
        }
        if kind == FilterKind::Cuckoo {
            // keys per slot: what bits per key depend on
            let load = n as f64 / (f.header().p1 * 4) as f64;
            assert!(load >= 0.95, "cuckoo load {load} at 20M keys");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Measured false-positive rates

struct Measured {
    bits_per_key: f64,
    fpr: f64,
    theory: f64,
    p1: u64,
}

fn measure(kind: FilterKind, fpr: f64, present: &[u64], absent: &[u64]) -> Measured {
    let block = build(kind, fpr, present);
    let f = Filter::decode(&block).expect("decode");
    let pos = absent.iter().filter(|&&h| f.may_contain(h)).count();
    Measured {
        bits_per_key: f.block_len() as f64 * 8.0 / present.len() as f64,
        fpr: pos as f64 / absent.len() as f64,
        theory: f.theoretical_fpr(),
        p1: f.header().p1,
    }
}

/// Relative model tolerance per kind, on top of sampling noise.
///
/// * bloom 6 %: `theoretical_fpr` is (1 − e^(−kn/m))^k, which assumes k independent probes.
///   Enhanced double hashing derives all k probes from two values, which correlates them and
///   measures about 2–3 % above the formula (1.027 % vs 1.004 % at ε = 1 %, 1M keys); 6 % is
///   twice that.
/// * blocked-bloom 3 %: the Poisson sum models block occupancy exactly; what is left is the
///   per-filter spread of occupancy and of the multiplicative probe sequence.
/// * cuckoo 3 %: the formula is the exact expected number of matching slots for this filter's
///   n and B; fingerprints are uniform over 1..2^f only up to a 2^-32 rounding.
/// * binary-fuse 3 %: an absent key matches when the XOR of three slots equals its f-bit
///   fingerprint; with pseudo-random slot contents that is exactly 2^-f.
fn model_tolerance(kind: FilterKind) -> f64 {
    match kind {
        FilterKind::Bloom => 0.06,
        _ => 0.03,
    }
}

/// For q = 1,000,000 absent keys (disjoint from the n = 1,000,000 inserted keys), each query is
/// a Bernoulli trial with success p = `theoretical_fpr()`, so the observed rate has standard
/// deviation sd = sqrt(p(1 − p)/q). The test asserts
///
///     |observed − p| ≤ 5·sd + tol·p
///
/// with `tol` from [`model_tolerance`]. 5·sd makes a spurious failure a < 1e-6 event; the
/// keys are fixed, so the test is deterministic anyway.
///
/// It also asserts the issues' hard targets (bits per key counts the whole block, header
/// included): bloom ε = 1 %: ≤ 9.6 bits/key, FPR ≤ 1.05 %; blocked-bloom ε = 1 %: ≤ 10.5
/// bits/key, FPR ≤ 1.0 %; cuckoo ε = 0.1 %: ≤ 14 bits/key, FPR ≤ 0.1 %, load ≥ 0.95;
/// binary-fuse with 8-bit fingerprints (ε = 1 %): ≤ 9.1 bits/key, FPR ≤ 0.4 %; with 16-bit
/// (ε = 0.1 %): ≤ 18.2 bits/key, FPR ≤ 0.002 % (15 expected positives in the million, so
/// that bound is 1.2 σ above theory; the keys are fixed, so the outcome is too).
#[test]
fn measured_fpr_matches_theory() {
    let n = 1_000_000u64;
    let q = 1_000_000u64;
    let present = keys("present", 0..n);
    let absent = keys("absent", 0..q);
    let mut report = String::new();
    for kind in KINDS {
        for eps in [0.001, 0.01, 0.05, 0.2] {
            let m = measure(kind, eps, &present, &absent);
            let p = m.theory;
            let sd = (p * (1.0 - p) / q as f64).sqrt();
            let band = 5.0 * sd + model_tolerance(kind) * p;
            report += &format!(
                "{kind:>13} ε={eps:<5} bits/key={:6.2} fpr={:.4}% theory={:.4}% band=±{:.4}%\n",
                m.bits_per_key,
                m.fpr * 100.0,
                p * 100.0,
                band * 100.0
            );
            assert!(
                (m.fpr - p).abs() <= band,
                "{kind} ε={eps}: observed {} outside {p} ± {band}\n{report}",
                m.fpr
            );
            match (kind, eps) {
                (FilterKind::Bloom, 0.01) => {
                    assert!(m.bits_per_key <= 9.6, "{report}");
                    assert!(m.fpr <= 0.0105, "{report}");
                }
                (FilterKind::BlockedBloom, 0.01) => {
                    assert!(m.bits_per_key <= 10.5, "{report}");
                    assert!(m.fpr <= 0.010, "{report}");
                }
                (FilterKind::Cuckoo, 0.001) => {
                    assert!(m.bits_per_key <= 14.0, "{report}");
                    assert!(m.fpr <= 0.001, "{report}");
                    let load = n as f64 / (4 * m.p1) as f64;
                    assert!(load >= 0.95, "cuckoo load {load}\n{report}");
                }
                // 8-bit fingerprints.
                (FilterKind::BinaryFuse, 0.01) => {
                    assert!(m.bits_per_key <= 9.1, "{report}");
                    assert!(m.fpr <= 0.004, "{report}");
                }
                // 16-bit fingerprints.
                (FilterKind::BinaryFuse, 0.001) => {
                    assert!(m.bits_per_key <= 18.2, "{report}");
                    assert!(m.fpr <= 0.00002, "{report}");
                }
                _ => {}
            }
        }
    }
    eprintln!("{report}");
}

/// Cuckoo load at ε = 0.1 % for several n ≥ 100k (the builder must not fall back to a table
/// grown so far that the load drops under 0.95).
#[test]
fn cuckoo_load_at_least_095() {
    for n in [100_000u64, 250_000, 1_000_000, 3_000_000] {
        let hashes: Vec<u64> = (0..n).map(|i| mix64(i.wrapping_mul(7) ^ n)).collect();
        let block = build(FilterKind::Cuckoo, 0.001, &hashes);
        let f = Filter::decode(&block).unwrap();
        let load = n as f64 / (4 * f.header().p1) as f64;
        assert!(load >= 0.95, "n={n}: load {load}");
    }
}

// ---------------------------------------------------------------------------------------------
// Robustness: bytes from disk never panic

/// Recomputes both CRCs so a mutation reaches the parameter checks behind them.
fn reseal(b: &mut [u8]) {
    if b.len() < HEADER_LEN {
        return;
    }
    let body = crc32fast::hash(&b[HEADER_LEN..]);
    b[56..60].copy_from_slice(&body.to_le_bytes());
    let head = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&head.to_le_bytes());
}

/// Decoding must return `Err` or a filter whose every method works.
fn poke(bytes: &[u8]) -> bool {
    match Filter::decode(bytes) {
        Err(e) => {
            assert!(e.is_corruption(), "non-corruption error {e}");
            false
        }
        Ok(f) => {
            for i in 0..64u64 {
                f.may_contain(mix64(i));
            }
            f.may_contain(0);
            f.touch(0);
            f.may_contain(u64::MAX);
            let _ = f.theoretical_fpr();
            let _ = f.block_len();
            let _ = f.header();
            true
        }
    }
}

/// One small block of each kind, and of binary-fuse with 16 and 32-bit fingerprints.
fn small_blocks() -> Vec<(FilterKind, Vec<u8>)> {
    let hashes = keys("small", 0..20);
    let mut blocks: Vec<_> = KINDS
        .iter()
        .map(|&k| (k, build(k, 0.05, &hashes)))
        .collect();
    for (fpr, n) in [(1e-3, 10), (1e-6, 4)] {
        let fuse = FilterKind::BinaryFuse;
        blocks.push((fuse, build(fuse, fpr, &keys("small", 0..n))));
    }
    blocks
}

#[test]
fn every_byte_change_is_caught_or_harmless() {
    for (kind, block) in small_blocks() {
        assert!(block.len() < 200, "{kind}: {} bytes", block.len());
        let mut accepted_resealed = 0;
        for pos in 0..block.len() {
            for x in 1..=255u8 {
                let mut b = block.clone();
                b[pos] ^= x;
                // Without fixing the CRCs every change must be refused.
                assert!(
                    !poke(&b),
                    "{kind}: change at {pos} (xor {x:#x}) not detected"
                );
                // With the CRCs fixed, the parameter checks must refuse it or cope with it.
                reseal(&mut b);
                if poke(&b) {
                    accepted_resealed += 1;
                }
            }
        }
        // Resealed body changes are valid filters (a flipped bit is just another filter).
        assert!(accepted_resealed > 0);
    }
}

#[test]
fn every_truncation_and_extension_is_refused() {
    for (kind, block) in small_blocks() {
        for len in 0..block.len() {
            assert!(!poke(&block[..len]), "{kind}: truncation to {len} accepted");
            let mut b = block[..len].to_vec();
            reseal(&mut b);
            assert!(!poke(&b), "{kind}: resealed truncation to {len} accepted");
        }
        for extra in [1usize, 7, 8, 64] {
            let mut b = block.clone();
            b.extend(std::iter::repeat_n(0, extra));
            assert!(!poke(&b), "{kind}: extension by {extra} accepted");
        }
        assert!(poke(&block));
    }
}

/// Every header field set to extreme values with valid CRCs: refused or harmless.
#[test]
fn extreme_header_fields() {
    let fields: [(usize, usize); 7] =
        [(16, 8), (24, 8), (32, 8), (40, 4), (44, 4), (48, 8), (4, 4)];
    for (_, block) in small_blocks() {
        for (at, len) in fields {
            let vals: [u64; 8] = [0, 1, 2, 63, 64, u32::MAX as u64, u64::MAX, 1 << 62];
            for v in vals {
                let mut b = block.clone();
                b[at..at + len].copy_from_slice(&v.to_le_bytes()[..len]);
                reseal(&mut b);
                poke(&b);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn random_garbage_never_panics(mut bytes in prop::collection::vec(any::<u8>(), 0..400),
                                   magic in any::<bool>()) {
        if magic && bytes.len() >= 16 {
            bytes[..4].copy_from_slice(b"FSFL");
            bytes[4] = 1 + bytes[4] % 2;
            bytes[5] %= 5;
            bytes[6] = 1;
            bytes[8..16].copy_from_slice(&0x6669_6c74_7273_746fu64.to_le_bytes());
            reseal(&mut bytes);
        }
        poke(&bytes);
    }
}

// ---------------------------------------------------------------------------------------------
// Checked-in fixtures: the format, pinned

const FIXTURE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// One checked-in filter block, built from the hashes of `key-0 .. key-999` at ε.
struct Fixture {
    file: &'static str,
    kind: FilterKind,
    version: u8,
    fpr: f64,
    n: u64,
    p1: u64,
    p2: u32,
    p3: u32,
    body_len: u64,
    /// Positives among `absent-0 .. absent-9999`.
    positives: usize,
    /// Written by today's builder (which must reproduce it byte for byte); old layouts are
    /// only read.
    current: bool,
}

const FIXTURES: &[Fixture] = &[
    Fixture {
        file: "filter-bloom.bin",
        kind: FilterKind::Bloom,
        version: 1,
        fpr: 0.01,
        n: 1000,
        p1: 9586,
        p2: 7,
        p3: 0,
        body_len: 1200,
        positives: 105,
        current: true,
    },
    // Version 1 of blocked-bloom (64-bit probe sequence), written before version 2: it must
    // keep answering exactly as it did.
    Fixture {
        file: "filter-blocked-bloom-v1.bin",
        kind: FilterKind::BlockedBloom,
        version: 1,
        fpr: 0.01,
        n: 1000,
        p1: 20,
        p2: 7,
        p3: 0,
        body_len: 1280,
        positives: 80,
        current: false,
    },
    Fixture {
        file: "filter-blocked-bloom-v2.bin",
        kind: FilterKind::BlockedBloom,
        version: 2,
        fpr: 0.01,
        n: 1000,
        p1: 20,
        p2: 7,
        p3: 0,
        body_len: 1280,
        positives: 90,
        current: true,
    },
    Fixture {
        file: "filter-binary-fuse-8.bin",
        kind: FilterKind::BinaryFuse,
        version: 1,
        fpr: 0.01,
        n: 1000,
        // Seed 0 (the key hashes as they are): the first attempt succeeded.
        p1: 0,
        // 8-bit fingerprints, arity 3, segments of 2^7 slots.
        p2: u32::from_le_bytes([8, 3, 7, 0]),
        p3: 9,
        body_len: 1408,
        positives: 35,
        current: true,
    },
    Fixture {
        file: "filter-binary-fuse-16.bin",
        kind: FilterKind::BinaryFuse,
        version: 1,
        fpr: 0.001,
        n: 1000,
        p1: 0,
        // 16-bit fingerprints: 2^-16 is the first width below ε = 0.1 %.
        p2: u32::from_le_bytes([16, 3, 7, 0]),
        p3: 9,
        body_len: 2816,
        positives: 0,
        current: true,
    },
    // 996, not 1000: four keys share fingerprint and bucket pair with another key and are
    // stored once (the builder uses set semantics). Written by the builder before version 2.
    Fixture {
        file: "filter-cuckoo-v1.bin",
        kind: FilterKind::Cuckoo,
        version: 1,
        fpr: 0.01,
        n: 996,
        p1: 262,
        p2: 10,
        p3: 4,
        body_len: 1328,
        positives: 69,
        current: false,
    },
    Fixture {
        file: "filter-cuckoo-v2.bin",
        kind: FilterKind::Cuckoo,
        version: 2,
        fpr: 0.01,
        // Six keys share fingerprint and bucket pair with another key.
        n: 994,
        p1: 262,
        p2: 10,
        p3: 4,
        body_len: 1328,
        positives: 76,
        current: true,
    },
];

#[test]
fn fixtures() {
    let present = keys("key", 0..1000);
    let absent = keys("absent", 0..10_000);
    let path = |x: &Fixture| format!("{FIXTURE_DIR}/{}", x.file);
    if std::env::var_os("FILTERSTORE_WRITE_FIXTURES").is_some() {
        std::fs::create_dir_all(FIXTURE_DIR).unwrap();
        for x in FIXTURES.iter().filter(|x| x.current) {
            let block = build(x.kind, x.fpr, &present);
            std::fs::write(path(x), &block).unwrap();
            let f = Filter::decode(&block).unwrap();
            let h = f.header();
            let pos = absent.iter().filter(|&&a| f.may_contain(a)).count();
            eprintln!(
                "{}: version {}, n {}, p1 {}, p2 {}, p3 {}, body_len {}, positives {pos}",
                x.file, h.version, h.n, h.p1, h.p2, h.p3, h.body_len
            );
        }
    }
    for x in FIXTURES {
        let bytes = std::fs::read(path(x)).expect("fixture file");
        let f = Filter::decode(&bytes).expect("fixture decodes");
        let h = f.header();
        assert_eq!((h.kind, h.version), (x.kind, x.version), "{}", x.file);
        assert_eq!(h.target_fpr, x.fpr);
        assert_eq!(
            (h.n, h.p1, h.p2, h.p3, h.body_len),
            (x.n, x.p1, x.p2, x.p3, x.body_len),
            "{}",
            x.file
        );
        assert_eq!(bytes.len() as u64, 64 + x.body_len);
        for view in [f, f.portable()] {
            for &k in &present {
                assert!(view.may_contain(k), "{}: fixture lost a key", x.file);
            }
            let pos = absent.iter().filter(|&&a| view.may_contain(a)).count();
            assert_eq!(
                pos, x.positives,
                "{}: false positives on the fixed absent list",
                x.file
            );
        }
        if x.current {
            // Today's builder must still produce exactly these bytes.
            assert_eq!(
                build(x.kind, x.fpr, &present),
                bytes,
                "{}: builder output changed",
                x.file
            );
        }
    }
    // Every current layout has a fixture.
    for kind in KINDS {
        assert!(
            FIXTURES
                .iter()
                .any(|x| x.current && x.kind == kind && x.version == kind.version()),
            "{kind} version {} has no fixture",
            kind.version()
        );
    }
}

/// The batched query keeps exactly the keys `may_contain_in` accepts, in order, for every
/// kind, prefetch distance and subset of keys; over another filter's bytes (a block of the
/// wrong size or kind) it answers like `may_contain_in` does and never panics.
#[test]
fn retain_maybe_in_equals_a_loop_of_may_contain_in() {
    let present = keys("key", 0..3000);
    let mut hashes = present.clone();
    hashes.extend(keys("absent", 0..30_000));
    let odd: Vec<u32> = (0..hashes.len() as u32).filter(|i| i % 3 != 1).collect();
    let blocks: Vec<Vec<u8>> = KINDS
        .iter()
        .flat_map(|&k| [build(k, 0.01, &present), build(k, 0.001, &present)])
        .collect();
    for block in &blocks {
        let f = Filter::decode(block).expect("decode");
        for other in blocks.iter().chain([&Vec::new(), &block[..100].to_vec()]) {
            for ahead in [0, 1, 16, 100_000] {
                let mut got = Vec::new();
                f.retain_maybe_in(other, &odd, &hashes, ahead, &mut got);
                let want: Vec<u32> = odd
                    .iter()
                    .copied()
                    .filter(|&i| f.may_contain_in(other, hashes[i as usize]))
                    .collect();
                assert_eq!(got, want, "{} ahead {ahead}", f.header().kind);
            }
        }
    }
}

/// `FILTERSTORE_KERNEL` caps the kernel a decoded filter runs on, for every k: the test runs
/// itself again in a child process per setting (the variable is read once per process) and
/// the child checks what `Filter::kernel` reports against what the CPU has.
#[test]
fn kernel_env_caps_the_kernel() {
    const CHILD: &str = "FILTERSTORE_TEST_KERNEL_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let setting = std::env::var(filter::KERNEL_ENV).unwrap_or_default();
        let cap = Kernel::parse(&setting);
        assert_eq!(filter::kernel_setting(), cap);
        let best = |ceiling: Kernel| {
            Kernel::ALL
                .into_iter()
                .filter(|k| *k <= ceiling && k.available())
                .max()
                .expect("scalar is always available")
        };
        let present = keys("key", 0..2000);
        for fpr in [0.3, 0.01, 1e-4, 1e-9] {
            let block = build(FilterKind::BlockedBloom, fpr, &present);
            let f = Filter::decode(&block).expect("decode");
            let k = f.header().p2;
            let ran = f.kernel();
            match cap {
                Some(c) => assert_eq!(ran, best(c), "{setting} k={k}"),
                None => assert_eq!(ran, filter::blocked_kernel(k), "{setting:?} k={k}"),
            }
            assert_eq!(filter::blocked_kernel(k), ran);
            assert!(present.iter().all(|&h| f.may_contain(h)));
        }
        let summary = filter::kernel_summary();
        assert!(
            summary.to_lowercase().contains(&setting.to_lowercase()),
            "{summary}"
        );
        println!("kernel-check-ok {summary}");
        return;
    }
    let exe = std::env::current_exe().expect("test binary");
    for setting in ["scalar", "avx2", "AVX512", "bogus"] {
        let out = std::process::Command::new(&exe)
            .args(["--exact", "kernel_env_caps_the_kernel", "--nocapture"])
            .env(filter::KERNEL_ENV, setting)
            .env(CHILD, "1")
            .output()
            .expect("run the child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("kernel-check-ok"),
            "{setting}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
