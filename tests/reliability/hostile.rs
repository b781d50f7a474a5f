//! The fuzzing that CI runs (issue 15, item 5): every decoder (WAL, block, compressed block,
//! zstd frame bound, table, filter, manifest, range filter, global filter, lifetime counters) fed random and mutated bytes for a
//! bounded time, checking no panic, no hang, no allocation larger than the input justifies,
//! and the properties in `fuzz/harness.rs`.
//!
//! Why property tests on stable Rust rather than cargo-fuzz in CI: CI is `.ci/run` on a fresh
//! clone with stable Rust and crates.io only. cargo-fuzz needs `cargo install cargo-fuzz` and a
//! C++ build of libFuzzer (and nightly for its sanitizers), none of which `cargo test
//! --release` has, while a loop in the test binary needs nothing. What it gives up is coverage
//! guidance; what makes up for much of it: the inputs start from valid encodings, and the
//! mutator recomputes CRCs (in two inputs out of three) so they get past the checksums into
//! the parsers behind them, where mutation alone rarely gets. CI time: 10 s per decoder by
//! default, 90 s of CPU, about 45 s of wall time on 2 cores. Both runners
//! call the same functions (`fuzz/harness.rs`) and share the checked-in corpus
//! (`fuzz/corpus/<target>/`), so an input libFuzzer finds is checked in once and then runs in
//! CI for good.
//!
//! Seeds, per decoder: the checked-in corpus (including any input that once failed), the
//! files of a store the current code writes (so a new format version is fuzzed from the
//! commit that introduces it), and the store fixtures of older versions (still read, so still
//! fuzzed). Every seed is decoded as it is, then mutations run: a fixed number first (the same
//! inputs on every machine), then more until the decoder's time budget is spent,
//! `FILTERSTORE_FUZZ_SECS` (default 10 s per decoder; 0 runs only the fixed part). The input
//! stream depends only on `FILTERSTORE_FUZZ_SEED` (default fixed), never on the clock; a
//! failing input is written under the target directory and named in the failure, ready to be
//! checked in under `fuzz/corpus/<target>/`. `FILTERSTORE_FUZZ_SEEDS=write` adds the seeds the
//! current code writes to the corpus (named by CRC; nothing is removed).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use filterstore::filter::global::{GlobalFilter, Layout, RunId};
use filterstore::filter::{self, range, FilterKind};
use filterstore::table::block::BlockBuilder;
use filterstore::table::{decode_footer, FOOTER_LEN, MAX_BLOCK_ENTRIES};
use filterstore::{FilterPolicy, Options, Store, WriteBatch};

use crate::alloc_probe::largest;
use crate::common::{NoSyncFs, Rng};
use crate::fuzz_harness as harness;

/// Allocations a decoder may make for `len` input bytes: linear in the input.
fn budget(len: usize) -> usize {
    160 * len + (64 << 10)
}

/// The same for decoders of compressed blocks (a block, a table): LZ4 may expand its input
/// up to 255 times (`LZ4_MAX_RATIO`), so a valid block of `len` bytes may decode to that.
fn lz4_budget(len: usize) -> usize {
    256 * len + (64 << 10)
}

/// For one compressed block: [`lz4_budget`], or for a zstd block (codec 2) what its frame's
/// headers allow it to decode to (`zstd_frame_bound`), which the decoder checks its claim
/// against before allocating.
fn block_budget(b: &[u8]) -> usize {
    let zstd = match b.split_last() {
        Some((2, payload)) => payload
            .get(4..)
            .and_then(filterstore::table::compress::zstd_frame_bound)
            .unwrap_or(0),
        _ => 0,
    };
    lz4_budget(b.len()).max(zstd.min(filterstore::table::compress::MAX_BLOCK_LEN) + (64 << 10))
}

/// A zstd decoding context is made once per thread, on its first zstd block: made here, so
/// that the fuzzed inputs are charged only for what they allocate themselves.
fn warm_zstd() {
    let mut raw = Vec::new();
    for i in 0..200u32 {
        raw.extend_from_slice(format!("entry {i} of a block, ").as_bytes());
    }
    let t = crate::scratch_dir();
    let p = t.path().join("warm.sst");
    let entries: Vec<(Vec<u8>, Option<Vec<u8>>)> = vec![(b"k".to_vec(), Some(raw))];
    let view: Vec<(&[u8], Option<&[u8]>)> = entries
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_deref()))
        .collect();
    filterstore::table::write_table(
        &NoSyncFs,
        &p,
        view.as_slice(),
        filterstore::Compression::Zstd,
    )
    .unwrap();
    let t = filterstore::table::Table::open(&p, false).unwrap();
    let _ = t.get(b"k", &filterstore::table::TableCounters::default());
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut b = seeds[rng.below(seeds.len() as u64) as usize].clone();
    if rng.below(50) == 0 {
        return rng.bytes(300);
    }
    for _ in 0..1 + rng.below(4) {
        if b.is_empty() {
            b.push(rng.next() as u8);
        }
        let at = rng.below(b.len() as u64) as usize;
        match rng.below(8) {
            0 | 1 => b[at] ^= 1 << rng.below(8),
            2 => b[at] = [0, 0xff, 0x7f, 0x80, 1, rng.next() as u8][rng.below(6) as usize],
            3 => b.truncate(at),
            4 => {
                // Splice: a chunk of another seed (or this one) over or into this one.
                let other = &seeds[rng.below(seeds.len() as u64) as usize];
                let from = rng.below(other.len() as u64 + 1) as usize;
                let n = (rng.below(64) as usize).min(other.len() - from);
                let chunk = other[from..from + n].to_vec();
                if rng.below(2) == 0 {
                    let end = (at + n).min(b.len());
                    b.splice(at..end, chunk);
                } else {
                    b.splice(at..at, chunk);
                }
            }
            5 => {
                let end = (at + 1 + rng.below(16) as usize).min(b.len());
                b.drain(at..end);
            }
            6 => {
                let v: u64 = [0, 1, u32::MAX as u64, u64::MAX, 1 << 31, rng.next() % 5000]
                    [rng.below(6) as usize];
                let w = if rng.below(2) == 0 { 4 } else { 8 };
                for (i, x) in v.to_le_bytes()[..w].iter().enumerate() {
                    if let Some(y) = b.get_mut(at + i) {
                        *y = *x;
                    }
                }
            }
            _ => {
                let n = rng.below(8) as usize;
                for _ in 0..n {
                    let x = rng.next() as u8;
                    b.insert(at, x);
                }
            }
        }
    }
    b
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    if let Some(s) = b.get_mut(at..at + 4) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

/// Recomputes the CRCs of every record of a WAL, lengths as they now read (payload CRC, then
/// the header CRC over length and payload CRC).
fn fix_wal(b: &mut [u8]) {
    let mut pos = 8;
    while pos + 12 <= b.len() {
        let len = u32::from_le_bytes(b[pos..pos + 4].try_into().unwrap()) as usize;
        let Some(end) = (pos + 12).checked_add(len).filter(|&e| e <= b.len()) else {
            break;
        };
        let crc = crc32fast::hash(&b[pos + 12..end]);
        put32(b, pos + 4, crc);
        let head = crc32fast::hash(&b[pos..pos + 8]);
        put32(b, pos + 8, head);
        pos = end;
    }
}

fn fix_manifest(b: &mut [u8]) {
    if b.len() >= 16 {
        let n = (b.len() - 16) as u32;
        put32(b, 8, n);
        let crc = crc32fast::hash(&b[16..]);
        put32(b, 12, crc);
    }
}

/// Recomputes the trailing CRC of a `COUNTERS` file (over everything before it).
fn fix_counters(b: &mut [u8]) {
    if let Some(at) = b.len().checked_sub(4) {
        let crc = crc32fast::hash(&b[..at]);
        put32(b, at, crc);
    }
}

fn fix_filter(b: &mut [u8]) {
    if b.len() >= 64 {
        let n = (b.len() - 64) as u64;
        b[48..56].copy_from_slice(&n.to_le_bytes());
        let body = crc32fast::hash(&b[64..]);
        put32(b, 56, body);
        let head = crc32fast::hash(&b[..60]);
        put32(b, 60, head);
    }
}

/// Fixes the footer CRC, then (if the footer now reads) the index and meta CRCs.
fn fix_table(b: &mut [u8]) {
    if b.len() < FOOTER_LEN {
        return;
    }
    let at = b.len() - FOOTER_LEN;
    let crc = crc32fast::hash(&b[at..at + 56]);
    put32(b, at + 56, crc);
    let foot: [u8; FOOTER_LEN] = b[at..].try_into().unwrap();
    if let Ok(f) = decode_footer(&foot, at as u64) {
        for (off, len) in [(f.index_offset, f.index_len), (f.meta_offset, f.meta_len)] {
            let (off, len) = (off as usize, len as usize);
            if let Some(end) = off.checked_add(len).filter(|&e| e + 4 <= at) {
                let crc = crc32fast::hash(&b[off..end]);
                put32(b, end, crc);
            }
        }
    }
}

fn entries(rng: &mut Rng, n: usize) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut keys: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            let mut k = b"prefix/".to_vec();
            k.extend(rng.bytes(10));
            k
        })
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| {
            let v = (rng.below(5) != 0).then(|| rng.bytes(20));
            (k, v)
        })
        .collect()
}

/// `entries` whose values compress: the `i`th value is `len(i)` copies of one letter.
fn compressible_entries(
    seed: u64,
    n: usize,
    len: impl Fn(usize) -> usize,
) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut e = entries(&mut Rng::new(seed), n);
    for (i, (_, v)) in e.iter_mut().enumerate() {
        if let Some(v) = v {
            *v = vec![b'a' + (i % 3) as u8; len(i)];
        }
    }
    e
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The files of every kind that a store of the current code writes: tables of 1, 30, 300 and
/// 60 entries (with bloom, blocked-bloom, cuckoo and binary-fuse filters), the manifest after
/// each flush, and
/// a log of 40 batches, whole, torn by 14 bytes of garbage, with a damaged first record, and
/// cut short, and the store's lifetime counters.
struct Written {
    wal: Vec<Vec<u8>>,
    table: Vec<Vec<u8>>,
    filter: Vec<Vec<u8>>,
    manifest: Vec<Vec<u8>>,
    counters: Vec<Vec<u8>>,
}

fn written() -> Written {
    let dir = crate::scratch_dir();
    let mut rng = Rng::new(5);
    let read = |ext: &str| -> Vec<Vec<u8>> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect();
        files.sort();
        files.iter().map(|p| std::fs::read(p).unwrap()).collect()
    };
    let mut manifest = Vec::new();
    let kinds = [
        FilterKind::Bloom,
        FilterKind::BlockedBloom,
        FilterKind::Cuckoo,
        FilterKind::BinaryFuse,
    ];
    for (kind, n) in kinds.into_iter().zip([1usize, 30, 300, 60]) {
        let s = Store::open(
            dir.path(),
            Options::default().filter(kind).fs(Arc::new(NoSyncFs)),
        )
        .unwrap();
        for (k, v) in entries(&mut rng, n) {
            match v {
                Some(v) => s.put(&k, &v).unwrap(),
                None => s.delete(&k).unwrap(),
            }
        }
        s.flush().unwrap();
        manifest.push(std::fs::read(dir.path().join("MANIFEST")).unwrap());
    }
    manifest.extend(policy_manifests());
    let s = Store::open(dir.path(), Options::default().fs(Arc::new(NoSyncFs))).unwrap();
    for i in 0..40u64 {
        let mut b = WriteBatch::new();
        for j in 0..1 + rng.below(4) {
            let k = rng.bytes(12);
            if (i + j) % 3 == 0 {
                b.delete(k);
            } else {
                b.put(k, rng.bytes(30));
            }
        }
        s.write(b).unwrap();
    }
    drop(s);
    let log = read("wal").into_iter().max_by_key(|b| b.len()).unwrap();
    let mut torn = log.clone();
    torn.extend(
        rng.bytes(14)
            .into_iter()
            .chain(std::iter::repeat(0x5a))
            .take(14),
    );
    let mut damaged = log.clone();
    damaged[8 + 12] ^= 0x10; // the first record's payload: mid-log corruption
    let wal = vec![
        log.clone(),
        torn,
        damaged,
        log[..300.min(log.len())].to_vec(),
        log[..8].to_vec(),
    ];
    Written {
        wal,
        table: read("sst"),
        filter: read("filter"),
        manifest,
        counters: vec![std::fs::read(dir.path().join("COUNTERS")).unwrap()],
    }
}

/// Manifests recording each kind of filter policy, from a store of their own: Monkey's
/// allocation of the memory of the default kind and rate, a uniform one, and a budget too
/// small for every table (one left without a filter), over two L0 tables.
fn policy_manifests() -> Vec<Vec<u8>> {
    let dir = crate::scratch_dir();
    let mut rng = Rng::new(6);
    let opts = Options::default()
        .fs(Arc::new(NoSyncFs))
        .policy(Some(FilterPolicy::monkey_at(
            filterstore::store::DEFAULT_FILTER,
            filterstore::store::DEFAULT_FPR,
        )));
    let s = Store::open(dir.path(), opts).unwrap();
    for n in [200, 20] {
        for (k, v) in entries(&mut rng, n) {
            match v {
                Some(v) => s.put(&k, &v).unwrap(),
                None => s.delete(&k).unwrap(),
            }
        }
        s.flush().unwrap();
    }
    let read = || std::fs::read(dir.path().join("MANIFEST")).unwrap();
    let mut out = vec![read()];
    for p in [
        FilterPolicy::Uniform {
            kind: FilterKind::Cuckoo,
            fpr: 0.02,
        },
        FilterPolicy::Budget {
            kind: FilterKind::BinaryFuse,
            bits_per_key: 0.2,
        },
    ] {
        s.rebalance(p).unwrap();
        out.push(read());
    }
    let t = s.stats().tables;
    assert!(t.iter().any(|t| t.filter_kind == FilterKind::None), "{t:?}");
    out
}

/// Blocks of 1 to 120 entries, each after the probe-length byte the block input starts with.
fn block_seeds() -> Vec<Vec<u8>> {
    let mut rng = Rng::new(77);
    [1, 5, 17, 40, 120]
        .into_iter()
        .map(|n| {
            let mut bb = BlockBuilder::default();
            for (k, v) in &entries(&mut rng, n) {
                bb.add(k, v.as_deref());
            }
            let mut b = vec![9u8];
            b.extend(bb.finish());
            b
        })
        .collect()
}

/// The data blocks (payload and codec byte, without the CRC) of format-4 tables: the
/// checked-in tables with raw and LZ4 blocks, two store fixtures', and tables the
/// current code writes from compressible and incompressible entries.
fn compressed_seeds(tables: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let dir = crate::scratch_dir();
    let mut files = vec![
        manifest_dir().join("tests/fixtures/table-v4-mixed.sst"),
        manifest_dir().join("tests/fixtures/table-v4-zstd.sst"),
        manifest_dir().join("tests/fixtures/table-v4-split.sst"),
    ];
    for store in ["store-v5", "store-v8"] {
        let dir = manifest_dir().join("tests/fixtures").join(store);
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "sst") {
                files.push(p);
            }
        }
    }
    for (i, t) in tables.iter().enumerate() {
        let p = dir.path().join(format!("written-{i}.sst"));
        std::fs::write(&p, t).unwrap();
        files.push(p);
    }
    let compressible = compressible_entries(79, 200, |i| 40 + i % 90);
    let view: Vec<(&[u8], Option<&[u8]>)> = compressible
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_deref()))
        .collect();
    for c in [
        filterstore::Compression::Lz4,
        filterstore::Compression::Zstd,
    ] {
        let p = dir.path().join(format!("compressible-{c}.sst"));
        filterstore::table::write_table(&NoSyncFs, &p, view.as_slice(), c).unwrap();
        files.push(p);
    }
    let mut seeds = Vec::new();
    for p in files {
        let bytes = std::fs::read(&p).unwrap();
        let t = filterstore::table::Table::open(&p, false).unwrap();
        for i in 0..t.block_count() {
            let (off, len) = t.block_span(i).unwrap();
            seeds.push(bytes[off as usize..(off + len as u64) as usize].to_vec());
        }
    }
    seeds
}

/// Filters of every kind from 0, 3 and 40 keys at three rates (their parameter space, which a
/// store's few filters do not cover; for binary-fuse, 8- and 16-bit fingerprints).
fn filter_seeds() -> Vec<Vec<u8>> {
    let mut rng = Rng::new(78);
    let mut seeds = Vec::new();
    for kind in [
        FilterKind::Bloom,
        FilterKind::BlockedBloom,
        FilterKind::Cuckoo,
        FilterKind::BinaryFuse,
    ] {
        for n in [0u64, 3, 40] {
            let hashes: Vec<u64> = (0..n).map(|_| rng.next()).collect();
            // For binary-fuse: 8 and 16-bit fingerprints.
            for fpr in [0.3, 0.01, 0.001] {
                seeds.push(filter::build(kind, fpr, &hashes).unwrap().unwrap());
            }
        }
    }
    seeds
}

/// Range filters over key sets of the shapes the design treats apart: none, one key, keys with
/// a common prefix (a short window), 16 random bytes (a 16-byte window), keys of mixed lengths
/// (neither `FILL` nor `FIT`), dense integers (an exact filter), at 3, 16 and 40 bits per key.
fn range_seeds() -> Vec<Vec<u8>> {
    let mut rng = Rng::new(79);
    let mut sets: Vec<Vec<Vec<u8>>> = vec![
        Vec::new(),
        vec![b"only".to_vec()],
        (0..30u64)
            .map(|i| format!("user/{i:04}").into_bytes())
            .collect(),
        (0..40)
            .map(|_| rng.next().to_be_bytes().repeat(2))
            .collect(),
        (0..40).map(|_| rng.bytes(24)).collect(),
        (0..60u64)
            .map(|i| (1000 + 2 * i).to_be_bytes().to_vec())
            .collect(),
    ];
    let mut seeds = Vec::new();
    for set in &mut sets {
        set.sort();
        set.dedup();
        for bits in [3.0, 16.0, 40.0] {
            seeds.push(range::build(set.iter(), bits).unwrap());
        }
    }
    seeds
}

/// Global filters, empty, loaded, and overfull (with a stash), with L0 runs in use.
fn global_seeds() -> Vec<Vec<u8>> {
    let mut rng = Rng::new(79);
    let mut seeds = Vec::new();
    for (buckets, keys) in [(1u64, 0u64), (12, 20), (12, 80), (24, 60)] {
        let f = GlobalFilter::with_buckets(Layout::Fixed16, buckets).unwrap();
        {
            let mut w = f.writer();
            let l0 = w.new_l0_run().unwrap();
            for i in 0..keys {
                let run = match i % 4 {
                    0 => l0,
                    1 => RunId::level(1).unwrap(),
                    _ => RunId::level(2).unwrap(),
                };
                w.insert(rng.next(), run);
            }
        }
        seeds.push(f.encode(rng.next() % 1000));
    }
    seeds
}

/// The store fixtures' files that `target` decodes (older versions among them).
fn fixtures(target: &str) -> Vec<Vec<u8>> {
    let root = manifest_dir().join("tests/fixtures");
    let mut files = Vec::new();
    for d in std::fs::read_dir(&root).unwrap() {
        let d = d.unwrap().path();
        let inside: Vec<PathBuf> = if d.is_dir() {
            std::fs::read_dir(&d)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect()
        } else {
            vec![d]
        };
        files.extend(inside);
    }
    files.sort();
    files
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            match target {
                "wal" => name.ends_with(".wal"),
                "table" => name.ends_with(".sst"),
                "filter" => name.ends_with(".filter") || name.starts_with("filter-"),
                "manifest" => name == "MANIFEST",
                "range" => name.starts_with("range-") || name.ends_with(".range"),
                "global" => name.starts_with("global-"),
                "counters" => name.starts_with("counters-") || name == "COUNTERS",
                _ => false,
            }
        })
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

fn corpus_dir(target: &str) -> PathBuf {
    manifest_dir().join("fuzz/corpus").join(target)
}

/// The checked-in corpus of `target`, in name order.
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let Ok(dir) = std::fs::read_dir(corpus_dir(target)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = dir.map(|e| e.unwrap().path()).collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a number")),
        Err(_) => default,
    }
}

/// Writes `input` where a failure report can name it.
fn save_failure(target: &str, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{target}-{:08x}", crc32fast::hash(input)));
    std::fs::write(&p, input).unwrap();
    p
}

/// Fuzzes one decoder: each of `seeds` (the checked-in corpus first), then `floor` mutated
/// inputs, then more until the time budget is spent. Returns a summary line.
fn fuzz(
    target: &'static str,
    written: Vec<Vec<u8>>,
    floor: u64,
    fix: fn(&mut [u8]),
    budget: fn(&[u8]) -> usize,
    mut decode: impl FnMut(&[u8]) -> bool,
) -> String {
    let checked_in = corpus(target);
    if std::env::var("FILTERSTORE_FUZZ_SEEDS").is_ok_and(|v| v == "write") {
        std::fs::create_dir_all(corpus_dir(target)).unwrap();
        for s in written.iter().filter(|s| !checked_in.contains(s)) {
            let name = format!("seed-{:08x}", crc32fast::hash(s));
            std::fs::write(corpus_dir(target).join(name), s).unwrap();
        }
    }
    let mut seeds = checked_in.clone();
    for s in written.into_iter().chain(fixtures(target)) {
        if !seeds.contains(&s) {
            seeds.push(s);
        }
    }
    assert!(!seeds.is_empty(), "{target}: no seeds");
    let secs = env_u64("FILTERSTORE_FUZZ_SECS", 10);
    let seed = env_u64("FILTERSTORE_FUZZ_SEED", 15);
    let mut rng = Rng::new(seed ^ crc32fast::hash(target.as_bytes()) as u64);

    // A watchdog: an input that takes a minute is a hang; it is saved before the abort.
    let current = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (current, done, stop) = (current.clone(), done.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut last, mut since) = (u64::MAX, Instant::now());
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let now = done.load(Ordering::Relaxed);
                if now != last {
                    (last, since) = (now, Instant::now());
                } else if since.elapsed() > Duration::from_secs(60) {
                    let input = current.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    let p = save_failure(target, &input);
                    eprintln!("{target}: input {now} hangs; saved to {}", p.display());
                    std::process::abort();
                }
            }
        })
    };

    let mut run = |what: &str, b: &[u8]| -> (bool, usize) {
        {
            let mut c = current.lock().unwrap_or_else(|p| p.into_inner());
            c.clear();
            c.extend_from_slice(b);
        }
        let r = catch_unwind(AssertUnwindSafe(|| largest(|| decode(b))));
        done.fetch_add(1, Ordering::Relaxed);
        let fail = |why: String| -> ! {
            let p = save_failure(target, b);
            panic!(
                "{target}: {what} failed ({why}); {} bytes saved to {} (FILTERSTORE_FUZZ_SEED={seed}); once fixed, check it in under fuzz/corpus/{target}/",
                b.len(),
                p.display()
            )
        };
        match r {
            Ok((ok, big)) if big <= budget(b) => (ok, big),
            Ok((_, big)) => fail(format!("a {big}-byte allocation")),
            Err(e) => fail(
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a panic".into()),
            ),
        }
    };

    let mut accepted_seeds = 0;
    for (i, s) in seeds.iter().enumerate() {
        accepted_seeds += run(&format!("seed {i}"), s).0 as u64;
    }
    let start = Instant::now();
    let (mut inputs, mut accepted, mut worst) = (0u64, 0u64, 0f64);
    let mut floor_accepted = 0;
    while inputs < floor || start.elapsed() < Duration::from_secs(secs) {
        let mut b = mutate(&mut rng, &seeds);
        if rng.below(3) != 0 {
            fix(&mut b);
        }
        let (ok, big) = run(&format!("input {inputs}"), &b);
        inputs += 1;
        accepted += ok as u64;
        if inputs == floor {
            floor_accepted = accepted;
        }
        worst = worst.max(big as f64 / b.len().max(1) as f64);
    }
    stop.store(true, Ordering::Relaxed);
    watchdog.join().unwrap();
    assert!(
        floor_accepted > 0,
        "{target}: no mutated input decoded; mutations too shallow"
    );
    format!(
        "{target}: {} seeds ({} checked in, {accepted_seeds} accepted), {inputs} mutated inputs in {:.1} s ({accepted} accepted), largest allocation {worst:.1}x the input",
        seeds.len(),
        checked_in.len(),
        start.elapsed().as_secs_f64()
    )
}

#[test]
fn wal_replay() {
    let w = written();
    println!(
        "{}",
        fuzz(
            "wal",
            w.wal,
            300_000,
            fix_wal,
            |b| budget(b.len()),
            harness::wal
        )
    );
}

#[test]
fn block() {
    println!(
        "{}",
        fuzz(
            "block",
            block_seeds(),
            500_000,
            |_| {},
            |b| budget(b.len()),
            harness::block
        )
    );
}

/// The zstd frames of the blocks in `compressed_seeds` (their payloads after the length).
fn zstd_seeds(blocks: &[Vec<u8>]) -> Vec<Vec<u8>> {
    blocks
        .iter()
        .filter_map(|b| match b.split_last() {
            Some((2, payload)) => payload.get(4..).map(<[u8]>::to_vec),
            _ => None,
        })
        .collect()
}

#[test]
fn zstd_frame() {
    let w = written();
    let seeds = zstd_seeds(&compressed_seeds(&w.table));
    assert!(seeds.len() >= 3, "{} zstd frames", seeds.len());
    warm_zstd();
    println!(
        "{}",
        fuzz(
            "zstd",
            seeds,
            100_000,
            |_| {},
            |b| {
                filterstore::table::compress::zstd_frame_bound(b)
                    .unwrap_or(0)
                    .min(filterstore::table::compress::MAX_BLOCK_LEN)
                    + lz4_budget(b.len())
            },
            harness::zstd
        )
    );
}

#[test]
fn compressed_block() {
    warm_zstd();
    let w = written();
    println!(
        "{}",
        fuzz(
            "compressed",
            compressed_seeds(&w.table),
            300_000,
            |_| {},
            block_budget,
            harness::compressed
        )
    );
}

/// The split forms of the codec-3 blocks among `compressed_seeds` (their LZ4 layer
/// decoded).
fn split_seeds(blocks: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut buf = Vec::new();
    blocks
        .iter()
        .filter_map(|b| {
            let (&3, payload) = b.split_last()? else {
                return None;
            };
            let n = filterstore::table::compress::lz4_into(payload, 0, &mut buf).ok()?;
            Some(buf[..n].to_vec())
        })
        .collect()
}

#[test]
fn split_block() {
    let w = written();
    let seeds = split_seeds(&compressed_seeds(&w.table));
    assert!(seeds.len() >= 8, "{} split forms", seeds.len());
    println!(
        "{}",
        fuzz(
            "split",
            seeds,
            300_000,
            |_| {},
            |b| budget(b.len()),
            harness::split
        )
    );
}

#[test]
fn table_open() {
    let w = written();
    let dir = crate::scratch_dir();
    let path = dir.path().join("000001.sst");
    warm_zstd();
    // Tables with LZ4 blocks too (the store's are random, stored raw): a lookup in them
    // decodes a prefix of the block (`block::get_decoding`).
    let mut seeds = w.table;
    seeds.push(std::fs::read(manifest_dir().join("tests/fixtures/table-v4-mixed.sst")).unwrap());
    // Lengths of one and two varint bytes.
    let compressible = compressible_entries(83, 60, |i| 40 + i * 7 % 150);
    let view: Vec<(&[u8], Option<&[u8]>)> = compressible
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_deref()))
        .collect();
    let lz4 = dir.path().join("compressible.sst");
    let c = filterstore::Compression::Lz4;
    filterstore::table::write_table(&NoSyncFs, &lz4, view.as_slice(), c).unwrap();
    seeds.push(std::fs::read(&lz4).unwrap());
    println!(
        "{}",
        fuzz(
            "table",
            seeds,
            20_000,
            fix_table,
            |b| lz4_budget(b.len()),
            |b| { harness::table(b, &path) }
        )
    );
}

#[test]
fn filter_decode() {
    let mut seeds = written().filter;
    seeds.extend(filter_seeds());
    println!(
        "{}",
        fuzz(
            "filter",
            seeds,
            300_000,
            fix_filter,
            |b| budget(b.len()),
            harness::filter
        )
    );
}

/// The range filter's header puts body_len, the body CRC and the header CRC where the point
/// filters' does, so `fix_filter` reseals it too.
#[test]
fn range_decode() {
    println!(
        "{}",
        fuzz(
            "range",
            range_seeds(),
            300_000,
            fix_filter,
            |b| budget(b.len()),
            harness::range
        )
    );
}

#[test]
fn manifest_decode() {
    let w = written();
    println!(
        "{}",
        fuzz(
            "manifest",
            w.manifest,
            300_000,
            fix_manifest,
            |b| budget(b.len()),
            harness::manifest
        )
    );
}

#[test]
fn counters_decode() {
    let w = written();
    println!(
        "{}",
        fuzz(
            "counters",
            w.counters,
            100_000,
            fix_counters,
            |b| budget(b.len()),
            harness::counters
        )
    );
}

#[test]
fn global_decode() {
    println!(
        "{}",
        fuzz(
            "global",
            global_seeds(),
            100_000,
            fix_filter,
            |b| budget(b.len()),
            harness::global
        )
    );
}

#[test]
fn every_fuzz_target_has_a_checked_in_corpus() {
    for t in harness::TARGETS {
        assert!(
            !corpus(t).is_empty(),
            "fuzz/corpus/{t}/ is empty: FILTERSTORE_FUZZ_SEEDS=write cargo test --release --test reliability hostile"
        );
    }
}

/// A store holding one table of 100 keys (no range filter), and its options.
fn one_table_store() -> (tempfile::TempDir, Options) {
    let dir = crate::scratch_dir();
    let opts = Options::default().range_filter_bits(0.0);
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    for i in 0..100u32 {
        store.put(i.to_be_bytes(), b"value").unwrap();
    }
    store.flush().unwrap();
    drop(store);
    (dir, opts)
}

/// Opening the store in `dir` and rebuilding its range filters fails with an error naming
/// `needle`, without a panic (`what` names the case in a failure).
fn open_and_refilter_refuses(dir: &std::path::Path, opts: &Options, what: &str, needle: &str) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        Store::open(dir, opts.clone()).and_then(|s| s.refilter_ranges(12.0))
    }));
    match outcome {
        Err(_) => panic!("{what}: panicked"),
        Ok(Ok(_)) => panic!("{what}: accepted"),
        Ok(Err(e)) => assert!(e.to_string().contains(needle), "{what}: {e}"),
    }
}

/// A manifest (CRC intact) whose table record claims far more entries than the table holds:
/// the store never sizes anything by the claim. `refilter_ranges` reserved room for that many
/// keys and panicked ("capacity overflow"); now the store refuses the record at open, naming
/// the disagreement with the table's own meta.
#[test]
fn manifest_claiming_more_entries_than_its_table_is_an_error() {
    let (dir, opts) = one_table_store();
    for (entries, tombstones) in [(u64::MAX, 0), (1 << 40, 0), (100, 101), (99, 0)] {
        let mut m = filterstore::manifest::Manifest::load(dir.path())
            .unwrap()
            .unwrap();
        let saved = m.clone();
        m.tables[0].entries = entries;
        m.tables[0].tombstones = tombstones;
        m.store(&NoSyncFs, dir.path()).unwrap();
        let what = format!("a record claiming {entries} entries");
        open_and_refilter_refuses(dir.path(), &opts, &what, "entries");
        saved.store(&NoSyncFs, dir.path()).unwrap();
    }
    let store = Store::open(dir.path(), opts).unwrap();
    assert_eq!(store.refilter_ranges(12.0).unwrap(), 1);
    println!("manifest entry counts that disagree with the table: refused at open");
}

/// A file named with the largest file number (`u64::MAX`, any extension) leaves a store no
/// number for its next file, as numbers are never reused: opening and repairing the store
/// refuse it, naming the file, and leave it where it is (the open added 1 to it, wrapping
/// in a release build, and then deleted it as an orphan table; a debug build panicked).
#[test]
fn a_file_numbered_u64_max_is_an_error_naming_it() {
    for name in ["18446744073709551615.sst", "018446744073709551615.foo"] {
        let (dir, opts) = one_table_store();
        let path = dir.path().join(name);
        std::fs::write(&path, b"not a table").unwrap();
        let outcome = catch_unwind(AssertUnwindSafe(|| Store::open(dir.path(), opts.clone())));
        match outcome {
            Err(_) => panic!("{name}: open panicked"),
            Ok(Ok(_)) => panic!("{name}: opened"),
            Ok(Err(e)) => assert!(
                e.is_corruption() && e.to_string().contains(name),
                "{name}: {e}"
            ),
        }
        assert!(path.exists(), "{name}: removed");
        std::fs::remove_file(dir.path().join("MANIFEST")).unwrap();
        match catch_unwind(|| filterstore::repair::repair(dir.path())) {
            Err(_) => panic!("{name}: repair panicked"),
            Ok(Ok(r)) => panic!("{name}: repaired: {r:?}"),
            Ok(Err(e)) => assert!(e.to_string().contains(name), "{name}: repair: {e}"),
        }
        assert!(path.exists(), "{name}: removed by repair");
    }
    println!("a file numbered u64::MAX: refused by open and repair, naming it");
}

/// A MANIFEST (CRC intact) whose next file number is next to `u64::MAX`: the store hands out
/// the numbers left and then refuses to write a file, naming the MANIFEST, instead of
/// wrapping to 0 and on to the numbers of the files it has (a release build did; a debug
/// build panicked). What was acknowledged stays readable, and after a reopen too.
#[test]
fn a_manifest_whose_file_numbers_run_out_is_an_error() {
    let (dir, opts) = one_table_store();
    let mut m = filterstore::manifest::Manifest::load(dir.path())
        .unwrap()
        .unwrap();
    m.next_file = u64::MAX - 2;
    m.store(&NoSyncFs, dir.path()).unwrap();
    let before: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    let mut refused = None;
    for i in 0..10u32 {
        let step = catch_unwind(AssertUnwindSafe(|| {
            store.put((1000 + i).to_be_bytes(), b"more")?;
            store.flush()
        }));
        match step {
            Err(_) => panic!("flush {i}: panicked"),
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("numbers past u64::MAX handed out");
    assert!(e.to_string().contains("MANIFEST"), "{e}");
    for i in 0..100u32 {
        assert_eq!(
            store.get(i.to_be_bytes()).unwrap().as_deref(),
            Some(&b"value"[..])
        );
    }
    drop(store);
    // No number wrapped: every file is one the store had, or numbered from the MANIFEST's.
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if let Some(Ok(n)) = name.split_once('.').map(|(n, _)| n.parse::<u64>()) {
            assert!(before.contains(&name) || n >= u64::MAX - 2, "{name}");
        }
    }
    // A reopen needs a number for its log: refused the same way, without a panic.
    match catch_unwind(AssertUnwindSafe(|| Store::open(dir.path(), opts))) {
        Err(_) => panic!("reopen panicked"),
        Ok(Ok(_)) => {}
        Ok(Err(e)) => assert!(e.to_string().contains("MANIFEST"), "reopen: {e}"),
    }
    println!("a MANIFEST whose file numbers run out: writes refused, naming it");
}

/// Writes `clean` (the one table of the store in `dir`, at `path`) with its meta's counts
/// changed by `change` (see [`with_table_counts`]), and a copy of the manifest `m` whose
/// record of the table agrees with the new counts.
fn write_crafted_counts(
    dir: &std::path::Path,
    path: &std::path::Path,
    clean: &[u8],
    m: &filterstore::manifest::Manifest,
    change: &dyn Fn(&mut [u64]),
) {
    let crafted = with_table_counts(clean, change);
    let mut counts = vec![];
    with_table_counts(&crafted, |c| counts = c.to_vec());
    std::fs::write(path, &crafted).unwrap();
    let mut m2 = m.clone();
    (m2.tables[0].entries, m2.tables[0].tombstones) = (counts[0], counts[1]);
    m2.store(&NoSyncFs, dir).unwrap();
}

/// `table` (a table file) with the counts of its meta (entries, tombstones, data blocks and,
/// version 4, data bytes) changed by `change`, and the meta's CRC, the footer's lengths and
/// its CRC made to match.
fn with_table_counts(table: &[u8], change: impl FnOnce(&mut [u64])) -> Vec<u8> {
    fn varint(b: &[u8], at: &mut usize) -> u64 {
        let mut v = 0u64;
        for i in 0.. {
            let x = b[*at];
            *at += 1;
            v |= u64::from(x & 0x7f) << (7 * i);
            if x < 0x80 {
                break;
            }
        }
        v
    }
    fn put(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let foot_at = table.len() - FOOTER_LEN;
    let f = decode_footer(table[foot_at..].try_into().unwrap(), foot_at as u64).unwrap();
    let meta = &table[f.meta_offset as usize..][..f.meta_len as usize];
    let mut at = 0;
    for _ in 0..2 {
        let n = varint(meta, &mut at) as usize;
        at += n;
    }
    let keys_end = at;
    let mut counts = Vec::new();
    while at < meta.len() {
        counts.push(varint(meta, &mut at));
    }
    change(&mut counts);
    let mut new_meta = meta[..keys_end].to_vec();
    for c in counts {
        put(&mut new_meta, c);
    }
    let mut out = table[..f.meta_offset as usize].to_vec();
    out.extend_from_slice(&new_meta);
    out.extend_from_slice(&crc32fast::hash(&new_meta).to_le_bytes());
    let mut footer = table[foot_at..].to_vec();
    footer[32..40].copy_from_slice(&(new_meta.len() as u64).to_le_bytes());
    let crc = crc32fast::hash(&footer[..56]);
    footer[56..60].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&footer);
    out
}

/// A table (CRCs intact) whose meta claims more entries than its data blocks can hold, in a
/// manifest that agrees: the store sized a buffer by the claim and aborted
/// (`refilter_ranges`: "memory allocation of … bytes failed"). Now `Table::open` bounds the
/// counts by the bytes that hold them (an entry takes at least 3 bytes; a tombstone is an
/// entry; a block decodes to at most `MAX_BLOCK_LEN` bytes and its codec's densest ratio
/// times its stored bytes).
#[test]
fn table_meta_claiming_more_entries_than_its_blocks_hold_is_an_error() {
    let (dir, opts) = one_table_store();
    let m = filterstore::manifest::Manifest::load(dir.path())
        .unwrap()
        .unwrap();
    let path = dir.path().join(format!("{:06}.sst", m.tables[0].number));
    let clean = std::fs::read(&path).unwrap();
    let table = filterstore::table::Table::open(&path, false).unwrap();
    let data_bytes = table.meta.data_bytes;
    drop(table);
    type Change = Box<dyn Fn(&mut [u64])>;
    let cases: Vec<(&str, Change)> = vec![
        ("u64::MAX entries", Box::new(|c| c[0] = u64::MAX)),
        ("2^40 entries", Box::new(|c| c[0] = 1 << 40)),
        (
            "more entries than bytes / 3",
            Box::new(move |c| c[0] = data_bytes / 3 + 1),
        ),
        (
            "more tombstones than entries",
            Box::new(|c| c[1] = c[0] + 1),
        ),
        (
            "data bytes past the blocks' bound",
            Box::new(|c| c[3] = u64::MAX),
        ),
        (
            "one entry more than its blocks hold (MAX_BLOCK_ENTRIES each)",
            Box::new(|c| {
                c[0] = c[2] * MAX_BLOCK_ENTRIES + 1;
                c[3] = c[3].max(3 * c[0]);
            }),
        ),
    ];
    for (what, change) in cases {
        write_crafted_counts(dir.path(), &path, &clean, &m, &*change);
        open_and_refilter_refuses(dir.path(), &opts, what, "meta");
    }
    // The file as written, and a rewrite of the same counts, still open.
    std::fs::write(&path, with_table_counts(&clean, |_| {})).unwrap();
    m.store(&NoSyncFs, dir.path()).unwrap();
    let store = Store::open(dir.path(), opts).unwrap();
    assert_eq!(store.refilter_ranges(12.0).unwrap(), 1);
    println!("table meta counts past what its blocks hold: refused at open");
}

/// A table (CRCs intact, manifest agreeing) whose meta claims more entries than its blocks
/// hold, within what a reader allows (up to `MAX_BLOCK_ENTRIES` per block): the global
/// filter is sized by the claim before any key is read, so a claim a reader cannot bound
/// closely enough must not pass unnoticed. Opening the store with the global filter, and
/// switching a per-table store to it, count the keys they read against the claim and
/// refuse the table, naming it, before inserting its keys (both were accepted before).
#[test]
fn global_filter_refuses_a_table_whose_keys_disagree_with_its_meta() {
    let (dir, opts) = one_table_store();
    let m = filterstore::manifest::Manifest::load(dir.path())
        .unwrap()
        .unwrap();
    let name = format!("{:06}.sst", m.tables[0].number);
    let path = dir.path().join(&name);
    let clean = std::fs::read(&path).unwrap();
    let global = opts.clone().filter(FilterKind::Global);
    type Change = Box<dyn Fn(&mut [u64])>;
    let cases: Vec<(&str, Change)> = vec![
        (
            "one entry more than the blocks hold",
            Box::new(|c| c[0] += 1),
        ),
        ("one entry fewer", Box::new(|c| c[0] -= 1)),
        (
            "the most entries a reader allows",
            Box::new(|c| {
                c[0] = c[2] * MAX_BLOCK_ENTRIES;
                c[3] = c[3].max(3 * c[0]);
            }),
        ),
    ];
    for (what, change) in cases {
        write_crafted_counts(dir.path(), &path, &clean, &m, &*change);
        let refused =
            |outcome: std::thread::Result<filterstore::Result<Store>>, how: &str| match outcome {
                Err(_) => panic!("{what}, {how}: panicked"),
                Ok(Ok(_)) => panic!("{what}, {how}: accepted"),
                Ok(Err(e)) => {
                    let msg = e.to_string();
                    assert!(e.is_corruption(), "{what}, {how}: {msg}");
                    assert!(
                        msg.contains(&name) && msg.contains("claims"),
                        "{what}, {how}: {msg}"
                    );
                }
            };
        // The one table is the deepest level's: under the global filter it keeps a filter
        // of its own and nothing is sized by its claim. Recorded without a filter (as a
        // table of a store written under the global filter before its deepest levels had
        // filters of their own), its keys go into the global filter: counted, refused.
        let mut old = filterstore::manifest::Manifest::load(dir.path())
            .unwrap()
            .unwrap();
        let with_filter = old.clone();
        old.tables[0].filter_file = 0;
        old.tables[0].filter_kind = FilterKind::None;
        old.store(&NoSyncFs, dir.path()).unwrap();
        refused(
            catch_unwind(AssertUnwindSafe(|| Store::open(dir.path(), global.clone()))),
            "opened with the global filter",
        );
        with_filter.store(&NoSyncFs, dir.path()).unwrap();
        // A per-table store opens (nothing it sizes comes from the claim).
        let store = Store::open(dir.path(), opts.clone()).unwrap();
        assert_eq!(
            store.get(7u32.to_be_bytes()).unwrap().as_deref(),
            Some(&b"value"[..])
        );
        assert!(store.stats().global_filter.is_none(), "{what}");
        drop(store);
    }
    std::fs::write(&path, &clean).unwrap();
    m.store(&NoSyncFs, dir.path()).unwrap();
    let store = Store::open(dir.path(), global).unwrap();
    assert_eq!(store.check_global_filter().unwrap(), Some(100));
    println!(
        "table metas whose entry counts disagree with their keys: the global filter refuses them"
    );
}

/// An index whose block handle overlaps the block before, goes backwards, points past the
/// data or claims a length or offset that overflows is refused when the table opens, with
/// an error naming the file and the index's offset: a scan's read-ahead
/// (`Table::scan_block`) relies on every block lying inside the data, in order.
#[test]
fn index_handles_out_of_order_or_past_the_data_are_refused_at_open() {
    let dir = crate::scratch_dir();
    let path = dir.path().join("000001.sst");
    let e = entries(&mut Rng::new(5), 2000);
    let view: Vec<(&[u8], Option<&[u8]>)> = e
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_deref()))
        .collect();
    let raw = filterstore::Compression::None;
    filterstore::table::write_table(&NoSyncFs, &path, view.as_slice(), raw).unwrap();
    let good = std::fs::read(&path).unwrap();
    let t = filterstore::table::Table::open(&path, false).unwrap();
    assert!(t.block_count() >= 4, "{} blocks", t.block_count());
    let (o1, _) = t.block_span(1).unwrap();
    let (o2, l2) = t.block_span(2).unwrap();
    drop(t);
    let at = good.len() - FOOTER_LEN;
    let f = decode_footer(&good[at..].try_into().unwrap(), at as u64).unwrap();
    let handle = |o: u64, l: u32| [&o.to_le_bytes()[..], &l.to_le_bytes()].concat();
    let index = f.index_offset as usize..(f.index_offset + f.index_len) as usize;
    let found = good[index.clone()]
        .windows(12)
        .position(|w| w == handle(o2, l2));
    let h = index.start + found.expect("block 2's handle in the index");
    for (o, l, what) in [
        (o2 - 1, l2, "overlaps block 1"),
        (o1, l2, "goes back to block 1"),
        (o2, u32::MAX, "ends past the data"),
        (f.index_offset, l2, "starts at the index"),
        (u64::MAX - 2, l2, "offset overflows"),
    ] {
        let mut b = good.clone();
        b[h..h + 12].copy_from_slice(&handle(o, l));
        fix_table(&mut b);
        std::fs::write(&path, &b).unwrap();
        let err = filterstore::table::Table::open(&path, false).expect_err(what);
        let msg = err.to_string();
        assert!(msg.contains("000001.sst"), "{what}: {msg}");
        assert!(msg.contains(&f.index_offset.to_string()), "{what}: {msg}");
    }
}
