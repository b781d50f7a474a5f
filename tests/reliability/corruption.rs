//! Damage to every kind of file: `verify_dir` names the file and an offset inside it, lookups
//! return an error or the right answer (never a wrong value or a false "absent"), no panic.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use filterstore::table::{decode_footer, FOOTER_LEN};
use filterstore::{Error, FilterKind, Options, Store};

use crate::common::{NoSyncFs, Rng};
use crate::{scratch_dir, subdir, value_of};

pub const KEYS: u64 = 3000;

pub fn key(i: u64) -> Vec<u8> {
    format!("key{:06}", i * 2).into_bytes()
}

/// A store with four tables (interleaved key ranges, filters of all kinds) and a WAL of
/// several records; returns its directory.
pub fn build(parent: &Path) -> PathBuf {
    let dir = subdir(parent, "clean");
    let o = Options::default()
        .compaction_trigger(None)
        .fs(Arc::new(NoSyncFs));
    let kinds = [
        FilterKind::Bloom,
        FilterKind::BlockedBloom,
        FilterKind::Cuckoo,
        FilterKind::BinaryFuse,
    ];
    for (t, kind) in kinds.into_iter().enumerate() {
        let s = Store::open(&dir, o.clone().filter(kind)).unwrap();
        for i in (t as u64..KEYS).step_by(kinds.len()) {
            s.put(key(i), value_of(&key(i), 1)).unwrap();
        }
        s.flush().unwrap();
    }
    let s = Store::open(&dir, o).unwrap();
    for i in KEYS..KEYS + 20 {
        s.put(key(i), value_of(&key(i), 1)).unwrap();
    }
    dir
}

pub fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().unwrap().ends_with(ext))
        .collect();
    v.sort();
    v
}

pub fn copy(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
}

#[derive(Default, Debug)]
struct Tally {
    cases: u64,
    open_refused: u64,
    get_errors: u64,
    filter_fallbacks: u64,
    torn_tails: u64,
    padding_found: u64,
}

enum Damage {
    Flip(usize, u8),
    Truncate(usize),
}

/// Applies `damage` to `file` in a copy of `clean` and checks verify, open and lookups.
/// `detectable`: damage that the format must notice (everything but a WAL losing its tail).
fn case(clean: &Path, tmp: &Path, file: &str, damage: Damage, detectable: bool, t: &mut Tally) {
    let dir = subdir(tmp, "case");
    copy(clean, &dir);
    let path = dir.join(file);
    let mut b = std::fs::read(&path).unwrap();
    let len = b.len();
    let what = match damage {
        Damage::Flip(at, x) => {
            b[at] ^= x;
            format!("{file}: byte {at} of {len} xor {x:#04x}")
        }
        Damage::Truncate(n) => {
            b.truncate(n);
            format!("{file}: truncated from {len} to {n}")
        }
    };
    std::fs::write(&path, &b).unwrap();
    t.cases += 1;
    let r = filterstore::verify::verify_dir(&dir);
    let problems = match &r {
        Ok(r) => r.problems.iter().collect::<Vec<_>>(),
        Err(e) => vec![e],
    };
    if detectable {
        assert!(!problems.is_empty(), "{what}: verify_dir found nothing");
        let named = problems.iter().any(|e| match e {
            Error::Corruption { file, offset, .. } => file == &path && *offset < len as u64,
            Error::Io { path: Some(p), .. } => p == &path,
            _ => false,
        });
        assert!(
            named,
            "{what}: verify_dir did not name the file and an offset: {problems:?}"
        );
    } else {
        assert!(problems.is_empty(), "{what}: {problems:?}");
        t.torn_tails += 1;
    }
    // Automatic compaction off: it could rewrite the damaged table (four L0 tables are due
    // for a merge into the empty L1) before the damage is looked for.
    let store = match Store::open(
        &dir,
        Options::default()
            .fs(Arc::new(NoSyncFs))
            .compaction_trigger(None),
    ) {
        Ok(s) => s,
        Err(e) => {
            assert!(
                detectable,
                "{what}: open failed on undetectable damage: {e}"
            );
            assert!(
                matches!(&e, Error::Corruption { file, .. } if file == &path),
                "{what}: open failed without naming the file: {e}"
            );
            t.open_refused += 1;
            return;
        }
    };
    let mut errors = 0;
    for i in 0..KEYS + 20 {
        match store.get(key(i)) {
            Ok(Some(v)) => assert_eq!(v, value_of(&key(i), 1), "{what}: wrong value"),
            Ok(None) => assert!(!detectable && i >= KEYS, "{what}: key {i} reported absent"),
            Err(e) => {
                assert!(e.is_corruption(), "{what}: {e}");
                errors += 1;
            }
        }
        let absent = format!("key{:06}", i * 2 + 1).into_bytes();
        if let Ok(Some(_)) = store.get(&absent) {
            panic!("{what}: an absent key has a value");
        }
    }
    let scan_ok = store.scan::<&[u8]>(..).all(|e| e.is_ok());
    if file.ends_with(".range") {
        // A damaged range filter is left out at open: scans read the table without it.
        let stats = store.stats();
        assert!(
            stats.tables.iter().any(|t| t.range_problem.is_some()),
            "{what}: range filter damage not reported in TableStats::range_problem"
        );
        assert!(errors == 0 && scan_ok, "{what}");
        t.filter_fallbacks += 1;
    }
    if file.ends_with(".filter") {
        let stats = store.stats();
        assert!(
            stats.tables.iter().any(|t| t.filter_problem.is_some()),
            "{what}: filter damage not reported in TableStats::filter_problem"
        );
        t.filter_fallbacks += 1;
        assert_eq!(errors, 0, "{what}");
    }
    let in_padding = problems
        .iter()
        .any(|e| matches!(e, Error::Corruption { reason, .. } if reason.contains("padding")));
    if in_padding {
        // Zero padding between page-aligned blocks: no read looks at it, so answers are
        // unchanged; `verify` is what finds it.
        assert!(
            errors == 0 && scan_ok,
            "{what}: padding damage changed answers"
        );
        t.padding_found += 1;
    } else if file.ends_with(".sst") {
        // Open succeeded, so the damage is in a data block: some key must hit it.
        assert!(
            errors > 0 && !scan_ok,
            "{what}: damaged data block went unnoticed"
        );
        t.get_errors += errors;
    }
}

#[test]
fn damage_to_every_kind_of_file_is_reported_never_answered_wrongly() {
    let _serial = crate::serial();
    let tmp = scratch_dir();
    let clean = build(tmp.path());
    let mut rng = Rng::new(99);
    let mut t = Tally::default();
    let name = |p: &PathBuf| p.file_name().unwrap().to_str().unwrap().to_string();
    let mut regions: Vec<(String, &str, usize, usize)> = Vec::new();
    for sst in files(&clean, ".sst") {
        let b = std::fs::read(&sst).unwrap();
        let at = b.len() - FOOTER_LEN;
        let f = decode_footer(b[at..].try_into().unwrap(), at as u64).unwrap();
        let (index_off, meta_off) = (f.index_offset, f.meta_offset);
        regions.push((name(&sst), "data blocks", 0, index_off as usize));
        regions.push((name(&sst), "index", index_off as usize, meta_off as usize));
        regions.push((name(&sst), "meta", meta_off as usize, at));
        regions.push((name(&sst), "footer", at, b.len()));
    }
    for f in files(&clean, ".filter") {
        let n = std::fs::metadata(&f).unwrap().len() as usize;
        regions.push((name(&f), "filter header", 0, 64));
        regions.push((name(&f), "filter body", 64, n));
    }
    for f in files(&clean, ".range") {
        let n = std::fs::metadata(&f).unwrap().len() as usize;
        regions.push((name(&f), "range filter header", 0, 64));
        regions.push((name(&f), "range filter body", 64, n));
    }
    let m = std::fs::metadata(clean.join("MANIFEST")).unwrap().len() as usize;
    regions.push(("MANIFEST".into(), "manifest", 0, m));
    let wal = files(&clean, ".wal").pop().unwrap();
    let wlen = std::fs::metadata(&wal).unwrap().len() as usize;
    // The last record can be a torn write; damage before it must be reported.
    let last_record = wlen - (12 + 1 + 1 + 10 + 1 + value_of(&key(KEYS + 19), 1).len() + 1);
    regions.push((name(&wal), "WAL", 0, last_record));
    let mut per_region = Vec::new();
    for (file, region, lo, hi) in &regions {
        let before = t.cases;
        for _ in 0..12 {
            let at = lo + rng.below((hi - lo) as u64) as usize;
            let x = 1u8 << rng.below(8);
            case(&clean, tmp.path(), file, Damage::Flip(at, x), true, &mut t);
        }
        per_region.push(format!("{file} {region}: {}", t.cases - before));
    }
    // Truncations: anything shorter is damage, except a WAL, which just loses its tail.
    let mut truncations = 0;
    for (file, ..) in regions
        .iter()
        .filter(|r| r.1 == "footer" || r.1 == "filter header" || r.1 == "manifest" || r.1 == "WAL")
    {
        let len = std::fs::metadata(clean.join(file)).unwrap().len() as usize;
        for n in [0, 1, len / 3, len / 2, len - 1] {
            case(
                &clean,
                tmp.path(),
                file,
                Damage::Truncate(n),
                !file.ends_with(".wal"),
                &mut t,
            );
            truncations += 1;
        }
    }
    assert!(t.open_refused > 0 && t.get_errors > 0 && t.filter_fallbacks > 0);
    assert!(
        t.padding_found > 0,
        "no flip landed in padding between data blocks"
    );
    println!(
        "corruption: {} damaged copies ({truncations} truncations; flips per region: {}); {t:?}",
        t.cases,
        per_region.join(", ")
    );
}
