//! Parquet export and import: round trips, determinism, row-group cuts, the split-block
//! Bloom filters read back and checked against an independent implementation of the
//! Parquet spec, pruning by DataFusion and DuckDB, damaged files. The command line's export
//! and import, and files DuckDB writes, are tested in cli/tests/parquet.rs.
#![cfg(feature = "parquet")]

mod common;
#[path = "support/interop.rs"]
mod interop;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::Rng;
use filterstore::export::{self, ExportSummary, ParquetOptions};
use filterstore::import::{self, ImportOptions};
use filterstore::{FilterKind, Options, Store, MAX_KEY_LEN};
use parquet::bloom_filter::Sbbf;
use parquet::file::properties::ReaderProperties;
use parquet::file::reader::{FileReader, RowGroupReader};
use parquet::file::serialized_reader::{ReadOptionsBuilder, SerializedFileReader};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts() -> Options {
    Options::default()
        .compaction_trigger(None)
        .fs(Arc::new(common::NoSyncFs))
}

fn contents(store: &Store) -> Model {
    store
        .scan::<&[u8]>(..)
        .map(|r| r.unwrap())
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect()
}

fn export(store: &Store, dir: &Path, o: &ParquetOptions) -> ExportSummary {
    export::parquet(store, dir, o, &mut |_| {}).unwrap()
}

/// A store with several tables and a memtable: random binary keys and values, empty values,
/// keys of exactly 64 KiB, overwrites across tables and deletes (in tables and in the
/// memtable). Returns the store and what a scan must yield.
fn awkward_store(dir: &Path, seed: u64) -> (Store, Model) {
    let store = Store::open(dir, opts()).unwrap();
    let mut rng = Rng::new(seed);
    let mut model = Model::new();
    let mut all_keys: Vec<Vec<u8>> = Vec::new();
    for round in 0..4 {
        for i in 0..600 {
            let mut k = rng.bytes(40);
            if i % 97 == 0 {
                k = vec![(rng.next() as u8) | 1; MAX_KEY_LEN];
                k[MAX_KEY_LEN - 1] = i as u8;
            }
            let v = if i % 7 == 0 {
                Vec::new()
            } else {
                rng.bytes(300)
            };
            store.put(&k, &v).unwrap();
            model.insert(k.clone(), v);
            all_keys.push(k);
        }
        // Overwrite and delete keys of earlier rounds.
        for _ in 0..60 {
            let k = all_keys[rng.below(all_keys.len() as u64) as usize].clone();
            if rng.below(2) == 0 {
                store.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = rng.bytes(20);
                store.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        if round < 3 {
            store.flush().unwrap();
        }
    }
    (store, model)
}

#[test]
fn export_then_import_round_trips_byte_for_byte() {
    let t = tempfile::tempdir().unwrap();
    let (store, model) = awkward_store(&t.path().join("a"), 1);
    assert_eq!(contents(&store), model);
    assert!(store.stats().tables.len() >= 3 && store.stats().memtable_entries > 0);
    let o = ParquetOptions::default()
        .rows_per_group(150)
        .rows_per_file(Some(700));
    let out = t.path().join("out");
    let summary = export(&store, &out, &o);
    assert_eq!(summary.rows, model.len() as u64);
    assert!(summary.files.len() >= 3, "{} files", summary.files.len());
    assert!(summary.files.iter().all(|f| f.rows <= 700));
    assert!(summary.groups().all(|g| g.rows <= 150 && g.bloom_bytes > 0));
    assert_eq!(interop::parquet_files(&out).len(), summary.files.len());
    // Only the part files are left: no temporary file.
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        summary.files.len()
    );

    let copy = Store::open(t.path().join("b"), opts()).unwrap();
    let got = import::parquet(
        &copy,
        &interop::parquet_files(&out),
        &ImportOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(got.rows, model.len() as u64);
    assert_eq!(got.files, summary.files.len());
    assert_eq!(contents(&copy), model);
    // The 64 KiB keys and the empty values made it.
    assert!(model.keys().any(|k| k.len() == MAX_KEY_LEN));
    assert!(model.values().any(Vec::is_empty));

    // Snappy pages round-trip too.
    let out2 = t.path().join("snappy");
    let snappy = o.clone().codec(export::Codec::Snappy);
    export(&store, &out2, &snappy);
    let copy2 = Store::open(t.path().join("c"), opts()).unwrap();
    import::parquet(
        &copy2,
        &interop::parquet_files(&out2),
        &ImportOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(contents(&copy2), model);
}

#[test]
fn the_same_store_exports_the_same_bytes() {
    let t = tempfile::tempdir().unwrap();
    let (store, _) = awkward_store(&t.path().join("a"), 2);
    let o = ParquetOptions::default()
        .rows_per_group(200)
        .rows_per_file(Some(900));
    let read_all = |dir: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        interop::parquet_files(dir)
            .into_iter()
            .map(|p| (p.file_name().unwrap().into(), std::fs::read(&p).unwrap()))
            .collect()
    };
    export(&store, &t.path().join("x1"), &o);
    export(&store, &t.path().join("x2"), &o);
    // And after reopening the store (the memtable comes back from the log).
    drop(store);
    let store = Store::open(t.path().join("a"), opts()).unwrap();
    export(&store, &t.path().join("x3"), &o);
    let first = read_all(&t.path().join("x1"));
    assert!(first.len() >= 2);
    assert_eq!(first, read_all(&t.path().join("x2")));
    assert_eq!(first, read_all(&t.path().join("x3")));
    // A different option gives different bytes (the comparison can fail).
    export(&store, &t.path().join("x4"), &o.clone().fpp(Some(0.2)));
    assert_ne!(first, read_all(&t.path().join("x4")));
}

#[test]
fn row_groups_follow_table_key_ranges_and_their_epsilon() {
    let t = tempfile::tempdir().unwrap();
    // Three tables with disjoint key ranges and different ε, one range left to the memtable.
    let ranges: [(&str, Option<f64>); 4] = [
        ("a", Some(0.01)),
        ("b", Some(0.001)),
        ("c", Some(0.2)),
        ("d", None),
    ];
    // Each table sealed by a handle opened with its ε (as `store flush --fpr E` does).
    let dir = t.path().join("b");
    for (prefix, fpr) in &ranges {
        let s = Store::open(&dir, opts().filter(FilterKind::BlockedBloom).fpr(*fpr)).unwrap();
        for i in 0..1000u32 {
            s.put(format!("{prefix}{i:05}").as_bytes(), i.to_le_bytes())
                .unwrap();
        }
        if fpr.is_some() {
            s.flush().unwrap();
        } else {
            // Keys only in the log and memtable: their groups take the store's ε.
            s.sync().unwrap();
        }
    }
    let store = Store::open(&dir, opts().fpr(0.05)).unwrap();
    assert_eq!(store.stats().tables.len(), 3);
    let o = ParquetOptions::default().rows_per_group(300);
    let s = export(&store, &t.path().join("out"), &o);
    let groups: Vec<_> = s.groups().collect();
    // 1000 rows per range, at most 300 per group: 4 groups per range, none across ranges.
    assert_eq!(groups.len(), 16, "{groups:?}");
    for g in &groups {
        assert_eq!(
            g.min_key[0], g.max_key[0],
            "a group spans two tables: {g:?}"
        );
        let want = match g.min_key[0] {
            b'a' => 0.01,
            b'b' => 0.001,
            b'c' => 0.2,
            _ => 0.05, // the store's ε as this handle has it
        };
        assert_eq!(g.fpp, Some(want), "{g:?}");
    }
    // --fpp overrides; no Bloom filter at all when asked.
    let s = export(&store, &t.path().join("out2"), &o.clone().fpp(Some(0.3)));
    assert!(s.groups().all(|g| g.fpp == Some(0.3)));
    let s = export(&store, &t.path().join("out3"), &o.bloom(false));
    assert!(s.groups().all(|g| g.fpp.is_none() && g.bloom_bytes == 0));
    let r = reader(&interop::parquet_files(&t.path().join("out3"))[0]);
    assert!(r
        .get_row_group(0)
        .unwrap()
        .get_column_bloom_filter(0)
        .is_none());
}

#[test]
fn export_refuses_a_directory_with_parquet_files_and_an_empty_store_gives_an_empty_file() {
    let t = tempfile::tempdir().unwrap();
    let store = Store::open(t.path().join("a"), opts()).unwrap();
    let out = t.path().join("out");
    let s = export(&store, &out, &ParquetOptions::default());
    assert_eq!((s.rows, s.files.len()), (0, 1));
    let r = reader(&interop::parquet_files(&out)[0]);
    assert_eq!(r.metadata().file_metadata().num_rows(), 0);
    assert_eq!(r.metadata().file_metadata().schema_descr().num_columns(), 2);
    let e = export::parquet(&store, &out, &ParquetOptions::default(), &mut |_| {}).unwrap_err();
    assert!(matches!(e, filterstore::Error::InvalidArgument(_)), "{e}");
}

// ---------------------------------------------------------------------------------------
// The Bloom filters, read back.

fn reader(path: &Path) -> SerializedFileReader<File> {
    let props = ReaderProperties::builder()
        .set_read_bloom_filter(true)
        .build();
    let o = ReadOptionsBuilder::new()
        .with_reader_properties(props)
        .build();
    SerializedFileReader::new_with_options(File::open(path).unwrap(), o).unwrap()
}

/// XXH64 with seed 0, written from the xxHash specification (not the parquet crate's
/// `twox-hash`), so that a drift in either hash is caught.
fn xxh64(data: &[u8]) -> u64 {
    const P1: u64 = 0x9E37_79B1_85EB_CA87;
    const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
    const P3: u64 = 0x1656_67B1_9E37_79F9;
    const P4: u64 = 0x85EB_CA77_C2B2_AE63;
    const P5: u64 = 0x27D4_EB2F_1656_67C5;
    let u64_at = |i: usize| u64::from_le_bytes(data[i..i + 8].try_into().unwrap());
    let u32_at = |i: usize| u64::from(u32::from_le_bytes(data[i..i + 4].try_into().unwrap()));
    let round = |acc: u64, lane: u64| {
        acc.wrapping_add(lane.wrapping_mul(P2))
            .rotate_left(31)
            .wrapping_mul(P1)
    };
    let merge = |acc: u64, v: u64| (acc ^ round(0, v)).wrapping_mul(P1).wrapping_add(P4);
    let n = data.len();
    let mut i = 0;
    let mut h = if n >= 32 {
        let mut v = [P1.wrapping_add(P2), P2, 0, 0u64.wrapping_sub(P1)];
        while i + 32 <= n {
            for (j, lane) in v.iter_mut().enumerate() {
                *lane = round(*lane, u64_at(i + 8 * j));
            }
            i += 32;
        }
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for lane in v {
            h = merge(h, lane);
        }
        h
    } else {
        P5
    };
    h = h.wrapping_add(n as u64);
    while i + 8 <= n {
        h = (h ^ round(0, u64_at(i)))
            .rotate_left(27)
            .wrapping_mul(P1)
            .wrapping_add(P4);
        i += 8;
    }
    if i + 4 <= n {
        h = (h ^ u32_at(i).wrapping_mul(P1))
            .rotate_left(23)
            .wrapping_mul(P2)
            .wrapping_add(P3);
        i += 4;
    }
    while i < n {
        h = (h ^ u64::from(data[i]).wrapping_mul(P5))
            .rotate_left(11)
            .wrapping_mul(P1);
        i += 1;
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

/// The spec's split-block filter: 256-bit blocks of eight 32-bit little-endian words.
struct SpecFilter {
    words: Vec<u32>,
}

const SALT: [u32; 8] = [
    0x47b6_137b,
    0x4497_4d91,
    0x8824_ad5b,
    0xa2b7_289d,
    0x7054_95c7,
    0x2df1_424b,
    0x9efc_4947,
    0x5c6b_fb31,
];

impl SpecFilter {
    /// Decodes the filter of `rg`'s column 0 from the raw file bytes: a thrift-compact
    /// `BloomFilterHeader` that must say BLOCK / XXHASH / UNCOMPRESSED, then the bitset.
    fn read(file: &[u8], rg: &dyn RowGroupReader) -> SpecFilter {
        let meta = rg.metadata().column(0);
        let off = meta.bloom_filter_offset().expect("a Bloom filter offset") as usize;
        let len = meta.bloom_filter_length().expect("a Bloom filter length") as usize;
        let bytes = &file[off..off + len];
        // Field 1 (i32 numBytes): type 5, delta 1, zigzag varint.
        assert_eq!(bytes[0], 0x15, "header starts with numBytes");
        let (mut v, mut shift, mut i) = (0u64, 0, 1);
        loop {
            let b = bytes[i];
            v |= u64::from(b & 0x7f) << shift;
            shift += 7;
            i += 1;
            if b & 0x80 == 0 {
                break;
            }
        }
        let num_bytes = ((v >> 1) as i64 ^ -((v & 1) as i64)) as usize;
        // Fields 2, 3, 4: unions whose field 1 is an empty struct (BLOCK, XXHASH,
        // UNCOMPRESSED), then the header's stop byte.
        let rest: [u8; 13] = [
            0x1c, 0x1c, 0x00, 0x00, 0x1c, 0x1c, 0x00, 0x00, 0x1c, 0x1c, 0x00, 0x00, 0x00,
        ];
        assert_eq!(&bytes[i..i + 13], &rest, "BLOCK / XXHASH / UNCOMPRESSED");
        let bitset = &bytes[i + 13..];
        assert_eq!(bitset.len(), num_bytes, "the bitset fills the rest");
        assert!(num_bytes.is_multiple_of(32) && num_bytes >= 32);
        let words = bitset
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
            .collect();
        SpecFilter { words }
    }

    fn blocks(&self) -> usize {
        self.words.len() / 8
    }

    fn check(&self, key: &[u8]) -> bool {
        let h = xxh64(key);
        let block = (((h >> 32) * self.blocks() as u64) >> 32) as usize;
        let x = h as u32;
        (0..8).all(|i| {
            let bit = x.wrapping_mul(SALT[i]) >> 27;
            self.words[block * 8 + i] & (1 << bit) != 0
        })
    }

    /// The exact probability that a uniformly random hash passes: the mean over blocks of
    /// the product over the 8 words of (bits set / 32).
    fn fpr(&self) -> f64 {
        let sum: f64 = self
            .words
            .chunks_exact(8)
            .map(|b| {
                b.iter()
                    .map(|w| f64::from(w.count_ones()) / 32.0)
                    .product::<f64>()
            })
            .sum();
        sum / self.blocks() as f64
    }
}

#[test]
fn xxh64_matches_the_reference_vectors() {
    // From the xxHash repository's sanity checks (seed 0).
    assert_eq!(xxh64(b""), 0xEF46_DB37_51D8_E999);
    assert_eq!(xxh64(b"a"), 0xD24E_C4F1_A98C_6E5B);
    assert_eq!(xxh64(b"abc"), 0x44BC_2CF5_AD77_0999);
    let long: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    // A length past the 32-byte stripes, checked against the parquet crate's filter below.
    let mut f = Sbbf::new_with_num_of_bytes(1024);
    f.insert(&long[..]);
    let spec_bits = {
        let mut v = Vec::new();
        f.write_bitset(&mut v).unwrap();
        v
    };
    let s = SpecFilter {
        words: spec_bits
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
            .collect(),
    };
    assert!(s.check(&long));
}

/// Present keys (16 random bytes) and absent keys drawn from the same distribution, kept
/// only when they lie inside some row group's [min, max], so that only a filter can skip
/// that group.
struct Workload {
    present: Vec<Vec<u8>>,
    absent: Vec<Vec<u8>>,
}

fn workload(n: usize, absent: usize, seed: u64) -> Workload {
    let mut rng = Rng::new(seed);
    let key = |rng: &mut Rng| -> Vec<u8> {
        let mut k = rng.next().to_be_bytes().to_vec();
        k.extend_from_slice(&rng.next().to_be_bytes());
        k
    };
    let mut present: Vec<Vec<u8>> = (0..n).map(|_| key(&mut rng)).collect();
    present.sort();
    present.dedup();
    let (lo, hi) = (present[0].clone(), present[present.len() - 1].clone());
    let mut out = Vec::new();
    while out.len() < absent {
        let k = key(&mut rng);
        if k > lo && k < hi && present.binary_search(&k).is_err() {
            out.push(k);
        }
    }
    Workload {
        present,
        absent: out,
    }
}

fn store_with(dir: &Path, keys: &[Vec<u8>], fpr: f64) -> Store {
    let store = Store::open(dir, opts().fpr(fpr)).unwrap();
    for (i, k) in keys.iter().enumerate() {
        store.put(k, format!("value-{i}").as_bytes()).unwrap();
    }
    store.flush().unwrap();
    store
}

/// The row groups of the files in `dir`: (min key, max key, filter as the parquet crate
/// reads it, filter as the spec decodes it), in key order.
fn groups_of(dir: &Path) -> Vec<(Vec<u8>, Vec<u8>, Sbbf, SpecFilter)> {
    let mut out = Vec::new();
    for path in interop::parquet_files(dir) {
        let bytes = std::fs::read(&path).unwrap();
        let r = reader(&path);
        for i in 0..r.num_row_groups() {
            let rg = r.get_row_group(i).unwrap();
            let stats = rg.metadata().column(0).statistics().unwrap();
            let (min, max) = (
                stats.min_bytes_opt().unwrap().to_vec(),
                stats.max_bytes_opt().unwrap().to_vec(),
            );
            let sbbf = rg
                .get_column_bloom_filter(0)
                .expect("a Bloom filter")
                .clone();
            out.push((min, max, sbbf, SpecFilter::read(&bytes, rg.as_ref())));
        }
    }
    out
}

/// Every present key passes its group's filter, the parquet crate's and the spec's
/// answers agree on every key, and the absent keys' false-positive rate is where the
/// filter's bits say it must be.
///
/// The band: given the filter, a random absent key passes with probability p, the mean over
/// blocks of the product of the eight words' fill (exact for a uniform hash). The count of
/// passes among N independent absent keys is Binomial(N, p), so the observed rate lies
/// within p ± 4·sqrt(p(1−p)/N) but for a chance of about 6e-5 per check. p itself must be
/// at most 1.2 × the target fpp (the tolerance; the writer sizes each filter so
/// that its expected rate, `export::sbbf_fpr`, is at most fpp, and rounding to a power of
/// two only lowers it).
#[test]
fn bloom_filters_read_back_and_match_the_spec() {
    let t = tempfile::tempdir().unwrap();
    let w = workload(60_000, 100_000, 7);
    for (i, fpp) in [0.01, 0.1].into_iter().enumerate() {
        let store = store_with(&t.path().join(format!("s{i}")), &w.present, fpp);
        let out = t.path().join(format!("out{i}"));
        let s = export(
            &store,
            &out,
            &ParquetOptions::default().rows_per_group(20_000),
        );
        assert!(
            s.groups().all(|g| g.fpp == Some(fpp)),
            "the store's ε by default"
        );
        // The two rates give different filters (20,000 keys: 32 KiB at 1 %, 16 KiB at 10 %).
        let bits_per_key = s.bloom_bytes() as f64 * 8.0 / s.rows as f64;
        let want = if i == 0 { 13.1 } else { 6.6 };
        assert!(
            (bits_per_key - want).abs() < 0.1,
            "{bits_per_key} bits per key"
        );
        let groups = groups_of(&out);
        assert_eq!(groups.len(), 3);
        let find = |k: &[u8]| {
            groups
                .iter()
                .position(|g| g.0.as_slice() <= k && k <= g.1.as_slice())
        };
        for k in &w.present {
            let g = &groups[find(k).expect("a group holds each present key")];
            assert!(g.2.check(&k[..]), "parquet crate: false negative");
            assert!(g.3.check(k), "spec: false negative");
        }
        // Each filter's rate as its bits say is near the model the writer sized it by.
        for (g, written) in groups.iter().zip(s.groups()) {
            let model = written.bloom_fpr.unwrap();
            assert!(model <= fpp);
            assert!(
                (g.3.fpr() - model).abs() <= 0.1 * model,
                "bits say {}, model {model}",
                g.3.fpr()
            );
        }
        let (mut passes, mut trials) = (0u64, 0u64);
        let mut p_sum = 0.0;
        for k in &w.absent {
            let Some(gi) = find(k) else { continue };
            let g = &groups[gi];
            let ours = g.3.check(k);
            assert_eq!(ours, g.2.check(&k[..]), "spec and parquet crate disagree");
            passes += u64::from(ours);
            trials += 1;
            p_sum += g.3.fpr();
        }
        let p = p_sum / trials as f64;
        let observed = passes as f64 / trials as f64;
        let sd = (p * (1.0 - p) / trials as f64).sqrt();
        println!(
            "fpp {fpp}: {trials} absent keys inside a group's range, {passes} passed \
             (observed {observed:.5}, filter bits say {p:.5} ± {:.5}); filter bytes {}",
            4.0 * sd,
            s.bloom_bytes()
        );
        assert!(trials > 90_000);
        assert!(
            (observed - p).abs() <= 4.0 * sd,
            "observed {observed} outside {p} ± {}",
            4.0 * sd
        );
        assert!(p <= 1.2 * fpp, "the filters' rate {p} exceeds 1.2 × {fpp}");
        // The row groups a reader applying min/max and then the filter would read:
        // ≤ 1.2 × fpp of those min/max alone would read (one per absent key here).
        assert!(passes as f64 <= 1.2 * fpp * trials as f64);
    }
}

// ---------------------------------------------------------------------------------------
// DataFusion and DuckDB, through their Python wheels in .venv-interop.

/// One line of `engines.py` output: mode, key, and its `name=value` fields.
struct EngineLine {
    engine: String,
    mode: String,
    key: Vec<u8>,
    fields: BTreeMap<String, String>,
}

fn run_engines(python: &Path, dir: &Path, queries: &[(bool, &[u8], &str)]) -> Vec<EngineLine> {
    let qfile = dir.with_extension("queries");
    let text: String = queries
        .iter()
        .map(|(present, k, modes)| {
            format!(
                "{} {} {modes}\n",
                if *present { "present" } else { "absent" },
                hex(k)
            )
        })
        .collect();
    std::fs::write(&qfile, text).unwrap();
    let script = interop::root().join("tests/interop/engines.py");
    let mut cmd = Command::new(python);
    cmd.arg(script).arg(dir).arg(&qfile);
    let (ok, stdout, stderr) = interop::run_with_timeout(cmd, Duration::from_secs(900));
    assert!(ok, "engines.py failed: {stderr}");
    let mut lines = Vec::new();
    for l in stdout.lines() {
        if l.starts_with('#') {
            println!("{l}");
            continue;
        }
        let mut parts = l.split_whitespace();
        let engine = parts.next().unwrap().to_string();
        let mode = parts.next().unwrap().to_string();
        let key = unhex(parts.next().unwrap());
        let fields = parts
            .map(|p| {
                let (a, b) = p.split_once('=').unwrap();
                (a.to_string(), b.to_string())
            })
            .collect();
        lines.push(EngineLine {
            engine,
            mode,
            key,
            fields,
        });
    }
    lines
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// For absent keys inside a row group's min/max range, at two fpp values, over 4 row
/// groups: DataFusion reads exactly the groups whose filter (as read back above) says
/// "maybe", and with `bloom_filter_on_read = false` every group whose range holds the key;
/// DuckDB's `parquet_bloom_probe` excludes exactly the groups whose filter says "no"; no
/// absent key returns a row; every present key asked returns its exact value from both.
#[test]
fn datafusion_and_duckdb_prune_row_groups_with_the_bloom_filters() {
    let Some(python) = interop::python() else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let w = workload(20_000, 400, 11);
    for (i, fpp) in [0.01, 0.1].into_iter().enumerate() {
        let store = store_with(&t.path().join(format!("s{i}")), &w.present, fpp);
        let out = t.path().join(format!("out{i}"));
        export(
            &store,
            &out,
            &ParquetOptions::default().rows_per_group(5_000),
        );
        let groups = groups_of(&out);
        assert_eq!(groups.len(), 4);
        let in_range = |k: &[u8]| -> Vec<usize> {
            (0..groups.len())
                .filter(|&g| groups[g].0.as_slice() <= k && k <= groups[g].1.as_slice())
                .collect()
        };
        let mut queries: Vec<(bool, &[u8], &str)> = Vec::new();
        for (j, k) in w.absent.iter().enumerate() {
            // The control (no filter) on a quarter of them: it reads whole groups.
            queries.push((
                false,
                k,
                if j % 4 == 0 {
                    "on,off,duckdb"
                } else {
                    "on,duckdb"
                },
            ));
        }
        for k in w.present.iter().step_by(400) {
            queries.push((true, k, "on,off,duckdb"));
        }
        let lines = run_engines(&python, &out, &queries);
        assert_eq!(
            lines.len(),
            queries
                .iter()
                .map(|q| q.2.split(',').count())
                .sum::<usize>()
        );
        let value_of = |k: &[u8]| -> String {
            let i = w.present.binary_search(&k.to_vec()).unwrap();
            hex(format!("value-{i}").as_bytes())
        };
        let (mut read_on, mut read_off, mut asked_on, mut asked_off) = (0, 0, 0, 0);
        let mut duck_read = 0;
        for l in &lines {
            let present = w.present.binary_search(&l.key).is_ok();
            let want_value = if present {
                value_of(&l.key)
            } else {
                "-".to_string()
            };
            assert_eq!(
                l.fields["value"], want_value,
                "{} {}: wrong value",
                l.engine, l.mode
            );
            let range = in_range(&l.key);
            let maybe: Vec<usize> = range
                .iter()
                .copied()
                .filter(|&g| groups[g].3.check(&l.key))
                .collect();
            match (l.engine.as_str(), l.mode.as_str()) {
                ("datafusion", mode) => {
                    let n = |f: &str| l.fields[f].parse::<i64>().unwrap();
                    assert_eq!(n("stats_total"), 4);
                    assert_eq!(n("stats_matched"), range.len() as i64, "min/max pruning");
                    let read = n("bloom_matched");
                    if mode == "on" {
                        assert_eq!(read, maybe.len() as i64, "groups read with the filter");
                        assert_eq!(n("bloom_total"), range.len() as i64);
                        if !present {
                            read_on += read;
                            asked_on += range.len() as i64;
                        }
                    } else {
                        assert_eq!(read, range.len() as i64, "without the filter: all");
                        assert!(n("rows_scanned") >= 5_000, "a whole group is scanned");
                        if !present {
                            read_off += read;
                            asked_off += range.len() as i64;
                        }
                    }
                }
                ("duckdb", _) => {
                    let excluded: Vec<usize> = match l.fields["excluded"].as_str() {
                        "-" => Vec::new(),
                        s => s.split(',').map(|g| g.parse().unwrap()).collect(),
                    };
                    let want: Vec<usize> = (0..groups.len())
                        .filter(|&g| !groups[g].3.check(&l.key))
                        .collect();
                    assert_eq!(excluded, want, "DuckDB's bloom_filter_excludes");
                    let n = |f: &str| l.fields[f].parse::<usize>().unwrap();
                    assert_eq!(n("total"), groups.len());
                    assert_eq!(n("scanned"), maybe.len(), "row groups DuckDB scanned");
                    if !present {
                        duck_read += maybe.len();
                    }
                }
                other => panic!("unexpected line {other:?}"),
            }
        }
        println!(
            "fpp {fpp}: DataFusion read {read_on} of {asked_on} row groups whose min/max held an \
             absent key with Bloom filters on, {read_off} of {asked_off} with them off; DuckDB \
             read {duck_read}"
        );
        assert_eq!(read_off, asked_off);
        // Each filter's expected rate is at most fpp, so the groups read are at most a
        // Binomial(asked, fpp) count: within 4 standard deviations of fpp × asked.
        let (asked, read) = (asked_on as f64, read_on as f64);
        assert!(asked_on >= 400);
        assert!(read <= fpp * asked + 4.0 * (fpp * (1.0 - fpp) * asked).sqrt());

        // DuckDB has no switch for its Bloom filter use: the control is the same rows
        // exported without filters, where it scans every group whose min/max holds the key.
        let plain = t.path().join(format!("plain{i}"));
        export(
            &store,
            &plain,
            &ParquetOptions::default().rows_per_group(5_000).bloom(false),
        );
        let control: Vec<(bool, &[u8], &str)> = w
            .absent
            .iter()
            .take(50)
            .map(|k| (false, k.as_slice(), "duckdb"))
            .collect();
        for l in run_engines(&python, &plain, &control) {
            let scanned: usize = l.fields["scanned"].parse().unwrap();
            assert_eq!(scanned, in_range(&l.key).len(), "DuckDB without filters");
            assert_eq!(l.fields["excluded"], "-");
            assert_eq!(l.fields["value"], "-");
        }
    }
}

/// Every truncation and every single-byte change of an exported file is refused with a
/// Parquet error or imports rows (a flipped value byte cannot be told from data: Parquet
/// pages written without a CRC); none panics or reports store corruption.
#[test]
fn damaged_files_never_panic() {
    let t = tempfile::tempdir().unwrap();
    let store = store_with(
        &t.path().join("s"),
        &(0..300u32)
            .map(|i| i.to_be_bytes().to_vec())
            .collect::<Vec<_>>(),
        0.01,
    );
    let out = t.path().join("out");
    export(&store, &out, &ParquetOptions::default().rows_per_group(100));
    let bytes = std::fs::read(&interop::parquet_files(&out)[0]).unwrap();
    let damaged = t.path().join("d.parquet");
    let mut refused = 0;
    let mut rng = Rng::new(5);
    let mut cases: Vec<Vec<u8>> = (0..bytes.len())
        .step_by(7)
        .map(|n| bytes[..n].to_vec())
        .collect();
    for _ in 0..400 {
        let mut b = bytes.clone();
        let at = rng.below(b.len() as u64) as usize;
        b[at] ^= 1 << rng.below(8);
        cases.push(b);
    }
    // One target store for all cases (reopening stores while other tests spawn processes
    // can meet the lock a child briefly inherits).
    let target = Store::open(t.path().join("target"), opts()).unwrap();
    for (i, case) in cases.iter().enumerate() {
        std::fs::write(&damaged, case).unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            import::parquet(
                &target,
                std::slice::from_ref(&damaged),
                &ImportOptions::default(),
                &mut |_| {},
            )
        }));
        match r {
            Ok(Ok(_)) => {}
            Ok(Err(filterstore::Error::Parquet { .. })) => refused += 1,
            Ok(Err(e)) => panic!("case {i}: unexpected error kind: {e}"),
            Err(_) => panic!("case {i}: the parquet reader panicked"),
        }
    }
    println!("{} damaged files, {refused} refused", cases.len());
    assert!(refused > cases.len() / 2);
}
