//! `repair` on every kind of damage the corruption test makes: afterwards verify passes,
//! the store opens, every key outside the damaged block or record reads its value, nothing
//! is deleted (what repair does not use is in `lost/`), and an intact store is left byte for
//! byte as it was.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use filterstore::io::{FaultFs, EIO};
use filterstore::repair::{Kept, RepairReport};
use filterstore::table::{decode_footer, FOOTER_LEN};
use filterstore::{repair, FilterKind, Options, Store, WriteBatch};

use crate::common::{NoSyncFs, Rng};
use crate::corruption::{build, copy, files, key, KEYS};
use crate::{scratch_dir, subdir, value_of};

/// Every file directly in `dir` (not `LOCK`), by name.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if p.is_file() && name != "LOCK" {
            m.insert(name, std::fs::read(&p).unwrap());
        }
    }
    m
}

/// Every file of `before` is still in `dir` unchanged or was moved, unchanged, into `lost/`.
fn nothing_deleted(dir: &Path, before: &BTreeMap<String, Vec<u8>>, r: &RepairReport, what: &str) {
    for (name, bytes) in before {
        let p = dir.join(name);
        let now = match r.moved.iter().find(|(from, _)| from == &p) {
            Some((_, to)) => {
                assert!(to.starts_with(dir.join("lost")), "{what}: {}", to.display());
                to.clone()
            }
            None => p,
        };
        let got = std::fs::read(&now).unwrap_or_else(|e| panic!("{what}: {name} gone: {e}"));
        assert!(&got == bytes, "{what}: {name} changed");
    }
}

enum Damage {
    Flip(usize, u8),
    Truncate(usize),
    Remove,
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_str().unwrap().to_string()
}

#[derive(Default, Debug)]
struct Tally {
    cases: u64,
    repaired: u64,
    not_needed: u64,
    tables_rewritten: u64,
    tables_lost: u64,
    filters_rebuilt: u64,
    logs_salvaged: u64,
    keys_checked: u64,
    keys_lost_in_damage: u64,
}

#[test]
fn repair_salvages_every_key_outside_the_damage() {
    let _serial = crate::serial();
    let tmp = scratch_dir();
    let clean = build(tmp.path());
    let ssts = files(&clean, ".sst");
    assert_eq!(ssts.len(), 4);
    let wal = files(&clean, ".wal").pop().unwrap();
    let wal_bytes = std::fs::read(&wal).unwrap();
    // Record spans of the log (one put each, keys KEYS.. in order).
    let mut spans = Vec::new();
    let mut pos = 8;
    while pos + 12 <= wal_bytes.len() {
        let len = u32::from_le_bytes(wal_bytes[pos..pos + 4].try_into().unwrap()) as usize;
        spans.push((pos, pos + 12 + len));
        pos += 12 + len;
    }
    assert_eq!(spans.len(), 20);
    let index_at = |p: &Path| {
        let b = std::fs::read(p).unwrap();
        let at = b.len() - FOOTER_LEN;
        decode_footer(b[at..].try_into().unwrap(), at as u64)
            .unwrap()
            .index_offset as usize
    };
    let mut rng = Rng::new(15);
    let mut cases: Vec<(String, Damage)> = Vec::new();
    for sst in &ssts {
        let n = std::fs::metadata(sst).unwrap().len() as usize;
        let ix = index_at(sst);
        for _ in 0..5 {
            cases.push((
                name(sst),
                Damage::Flip(rng.below(ix as u64) as usize, 1 << rng.below(8)),
            ));
        }
        for _ in 0..2 {
            let at = ix + rng.below((n - ix) as u64) as usize;
            cases.push((name(sst), Damage::Flip(at, 1 << rng.below(8))));
        }
        cases.push((name(sst), Damage::Truncate(n / 2)));
        cases.push((name(sst), Damage::Remove));
    }
    for f in files(&clean, ".filter") {
        let n = std::fs::metadata(&f).unwrap().len() as usize;
        cases.push((name(&f), Damage::Flip(rng.below(n as u64) as usize, 4)));
        cases.push((name(&f), Damage::Truncate(10)));
        cases.push((name(&f), Damage::Remove));
    }
    let m = std::fs::metadata(clean.join("MANIFEST")).unwrap().len() as usize;
    for at in [0, 7, 20, m - 1] {
        cases.push(("MANIFEST".into(), Damage::Flip(at, 0x10)));
    }
    cases.push(("MANIFEST".into(), Damage::Truncate(m / 2)));
    cases.push(("MANIFEST".into(), Damage::Remove));
    for _ in 0..8 {
        let at = rng.below(wal_bytes.len() as u64) as usize;
        cases.push((name(&wal), Damage::Flip(at, 1 << rng.below(8))));
    }
    cases.push((name(&wal), Damage::Flip(2, 1))); // the file header
    cases.push((name(&wal), Damage::Truncate(wal_bytes.len() / 2)));
    if clean.join("COUNTERS").exists() {
        cases.push(("COUNTERS".into(), Damage::Flip(9, 1)));
    }

    let mut t = Tally::default();
    for (file, damage) in &cases {
        let dir = subdir(tmp.path(), "case");
        copy(&clean, &dir);
        let path = dir.join(file);
        let what = match damage {
            Damage::Flip(at, x) => {
                let mut b = std::fs::read(&path).unwrap();
                b[*at] ^= x;
                std::fs::write(&path, &b).unwrap();
                format!("{file}: byte {at} xor {x:#04x}")
            }
            Damage::Truncate(n) => {
                let mut b = std::fs::read(&path).unwrap();
                b.truncate(*n);
                std::fs::write(&path, &b).unwrap();
                format!("{file}: truncated to {n}")
            }
            Damage::Remove => {
                std::fs::remove_file(&path).unwrap();
                format!("{file}: removed")
            }
        };
        t.cases += 1;
        let before = snapshot(&dir);
        let r = repair(&dir).unwrap_or_else(|e| panic!("{what}: repair: {e}"));
        nothing_deleted(&dir, &before, &r, &what);
        assert!(r.verify.is_intact(), "{what}: {:?}", r.verify.problems);
        if r.needed {
            t.repaired += 1;
            assert!(
                !r.dropped.is_empty(),
                "{what}: repaired but reported nothing dropped"
            );
            assert!(
                r.dropped.iter().any(|d| d.file == path),
                "{what}: the damaged file is not named: {:?}",
                r.dropped
            );
        } else {
            t.not_needed += 1;
            assert_eq!(
                snapshot(&dir),
                before,
                "{what}: changed although not needed"
            );
        }
        let kept_from = r
            .kept
            .iter()
            .any(|k| matches!(k, Kept::Table { from: Some(f), .. } if f == &path));
        let kept_as_is = r
            .kept
            .iter()
            .any(|k| matches!(k, Kept::Table { file: f, from: None, .. } if f == &path));
        t.tables_rewritten += u64::from(kept_from);
        t.filters_rebuilt += r
            .kept
            .iter()
            .filter(|k| matches!(k, Kept::Filter { rebuilt: true, .. }))
            .count() as u64;
        t.logs_salvaged += r
            .kept
            .iter()
            .filter(|k| matches!(k, Kept::Log { from, .. } if !from.is_empty()))
            .count() as u64;
        let table_lost = r.needed && file.ends_with(".sst") && !kept_from && !kept_as_is;
        if table_lost {
            t.tables_lost += 1;
            // Only damage to what locates the blocks (index, meta, footer) loses a table.
            match damage {
                Damage::Flip(at, _) => assert!(
                    *at >= index_at(&clean.join(file)),
                    "{what}: a data-block flip lost the whole table"
                ),
                Damage::Truncate(_) | Damage::Remove => {}
            }
        }
        // May key i be gone? Only when it lay in the damaged block, record or lost table.
        let may_lose = |i: u64| -> bool {
            let k = key(i);
            if i < KEYS {
                let home = name(&ssts[(i % 4) as usize]);
                if &home != file || !r.needed {
                    return false;
                }
                if table_lost {
                    return true;
                }
                r.dropped.iter().any(|d| {
                    d.file == path && d.keys_between.as_ref().is_some_and(|g| g.contains(&k))
                })
            } else {
                if &name(&wal) != file {
                    return false;
                }
                let (lo, hi) = spans[(i - KEYS) as usize];
                match damage {
                    Damage::Flip(at, _) => (lo..hi).contains(at),
                    Damage::Truncate(n) => hi > *n,
                    Damage::Remove => true,
                }
            }
        };
        let store = Store::open(
            &dir,
            Options::default()
                .compaction_trigger(None)
                .fs(Arc::new(NoSyncFs)),
        )
        .unwrap_or_else(|e| panic!("{what}: open after repair: {e}"));
        for i in 0..KEYS + 20 {
            match store
                .get(key(i))
                .unwrap_or_else(|e| panic!("{what}: get {i}: {e}"))
            {
                Some(v) => assert_eq!(v, value_of(&key(i), 1), "{what}: wrong value for {i}"),
                None => {
                    assert!(
                        may_lose(i),
                        "{what}: key {i} lost outside the damage; {:#?}",
                        r.dropped
                    );
                    t.keys_lost_in_damage += 1;
                }
            }
            assert_eq!(
                store
                    .get(format!("key{:06}", i * 2 + 1).into_bytes())
                    .unwrap(),
                None
            );
            t.keys_checked += 1;
        }
        // A second repair has nothing to do.
        drop(store);
        let again = repair(&dir).unwrap();
        assert!(!again.needed, "{what}: second repair: {:?}", again.dropped);
    }
    assert!(t.tables_rewritten > 0 && t.tables_lost > 0 && t.filters_rebuilt > 0);
    assert!(t.logs_salvaged > 0 && t.not_needed > 0);
    println!("repair: {} damaged copies; {t:?}", cases.len());
}

#[test]
fn repair_of_an_intact_store_changes_no_byte() {
    let _serial = crate::serial();
    let tmp = scratch_dir();
    let clean = build(tmp.path());
    for torn in [false, true] {
        let dir = subdir(tmp.path(), "intact");
        copy(&clean, &dir);
        if torn {
            // A torn tail is no damage: opening drops it.
            let wal = files(&dir, ".wal").pop().unwrap();
            let mut b = std::fs::read(&wal).unwrap();
            b.extend_from_slice(b"\x07garbage in preallocated space");
            std::fs::write(&wal, &b).unwrap();
        }
        let before = snapshot(&dir);
        let r = repair(&dir).unwrap();
        assert!(
            !r.needed && r.kept.is_empty() && r.moved.is_empty(),
            "{r:?}"
        );
        assert_eq!(snapshot(&dir), before, "torn {torn}");
        assert!(!dir.join("lost").exists());
    }
}

/// Overwrites, deletes and batches over several flushes and compactions (tables at several
/// levels), then the manifest is lost: repair rebuilds it from the tables (all at L0, newest
/// first) and every key reads exactly what the model says.
#[test]
fn repair_after_a_lost_manifest_matches_the_model() {
    let _serial = crate::serial();
    let tmp = scratch_dir();
    let mut rng = Rng::new(1515);
    let mut checked = 0;
    for round in 0..4 {
        let dir = subdir(tmp.path(), &format!("m{round}"));
        let o = || {
            Options::default()
                .memtable_bytes(4 << 10)
                .compaction_trigger(None)
                .table_bytes(8 << 10)
                .l1_bytes(16 << 10)
                .level_ratio(2)
                .filter(Some(FilterKind::ALL[round % FilterKind::ALL.len()]))
                .fs(Arc::new(NoSyncFs))
        };
        let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        let s = Store::open(&dir, o()).unwrap();
        for step in 0..1500u64 {
            let k = format!("k{:04}", rng.below(400)).into_bytes();
            match rng.below(20) {
                0..=12 => {
                    let v = value_of(&k, step);
                    s.put(&k, &v).unwrap();
                    model.insert(k, Some(v));
                }
                13..=15 => {
                    s.delete(&k).unwrap();
                    model.insert(k, None);
                }
                16 => {
                    let mut b = WriteBatch::new();
                    let k2 = format!("k{:04}", rng.below(400)).into_bytes();
                    let v = value_of(&k, step);
                    b.put(k.clone(), v.clone()).delete(k2.clone());
                    s.write(b).unwrap();
                    model.insert(k, Some(v));
                    model.insert(k2, None);
                }
                17 => s.flush().unwrap(),
                18 if step % 5 == 0 => s.compact().unwrap(),
                _ => {}
            }
        }
        drop(s);
        let mut mb = std::fs::read(dir.join("MANIFEST")).unwrap();
        let at = 16 + rng.below((mb.len() - 16) as u64) as usize;
        mb[at] ^= 0x20;
        std::fs::write(dir.join("MANIFEST"), &mb).unwrap();
        assert!(Store::open(&dir, o()).is_err());
        let r = repair(&dir).unwrap();
        assert!(r.needed && r.verify.is_intact(), "{:?}", r.verify.problems);
        assert!(dir.join("lost/MANIFEST").exists());
        let s = Store::open(&dir, o()).unwrap();
        checked += crate::check_store(&s, &model, &BTreeMap::new(), &format!("round {round}"));
        // And it goes on working: a compaction merges the L0 tables repair made.
        s.compact().unwrap();
        checked += crate::check_store(
            &s,
            &model,
            &BTreeMap::new(),
            &format!("round {round}, compacted"),
        );
    }
    println!("repair after a lost manifest: 4 stores, {checked} key checks against the model");
}

/// A manifest that decodes but whose levels overlap (the store refuses to open): repair puts
/// every table in L0, in the manifest's order, and loses nothing.
#[test]
fn repair_of_a_manifest_whose_levels_overlap() {
    let _serial = crate::serial();
    let tmp = scratch_dir();
    let clean = build(tmp.path());
    let dir = subdir(tmp.path(), "overlap");
    copy(&clean, &dir);
    let mut m = filterstore::manifest::Manifest::load(&dir)
        .unwrap()
        .unwrap();
    for t in &mut m.tables {
        t.level = 1; // four tables of interleaved keys: they all overlap
    }
    m.store(&filterstore::io::RealFs, &dir).unwrap();
    assert!(Store::open(&dir, Options::default()).is_err());
    let r = repair(&dir).unwrap();
    assert!(r.needed && r.verify.is_intact(), "{:?}", r.verify.problems);
    assert!(
        r.dropped.iter().any(|d| d.reason.contains("overlap")),
        "{:?}",
        r.dropped
    );
    let s = Store::open(&dir, Options::default()).unwrap();
    assert!(s.stats().tables.iter().all(|t| t.level == 0));
    for i in 0..KEYS + 20 {
        assert_eq!(
            s.get(key(i)).unwrap().map(Vec::from),
            Some(value_of(&key(i), 1)),
            "key {i}"
        );
    }
}

/// A repair that fails at any one of its operations (an I/O error from there on, through
/// `FaultFs`), then a second repair: the store ends with exactly the keys an uninterrupted
/// repair keeps, and no file's bytes are gone (each is in place or in `lost/`).
#[test]
fn repair_interrupted_at_every_operation_then_rerun() {
    let _serial = crate::serial();
    let tmp = scratch_dir();
    let clean = build(tmp.path());
    let damaged = subdir(tmp.path(), "damaged");
    copy(&clean, &damaged);
    // A flipped byte in the first table's first block and one inside a mid-log record.
    let sst = files(&damaged, ".sst").remove(0);
    let mut b = std::fs::read(&sst).unwrap();
    b[40] ^= 0x08;
    std::fs::write(&sst, &b).unwrap();
    let wal = files(&damaged, ".wal").pop().unwrap();
    let mut b = std::fs::read(&wal).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0x01;
    std::fs::write(&wal, &b).unwrap();
    let originals = snapshot(&damaged);
    let readable = |dir: &Path| -> Vec<u64> {
        let s = Store::open(dir, Options::default()).unwrap();
        (0..KEYS + 20)
            .filter(|&i| match s.get(key(i)).unwrap() {
                Some(v) => {
                    assert_eq!(v, value_of(&key(i), 1));
                    true
                }
                None => false,
            })
            .collect()
    };
    let reference = {
        let dir = subdir(tmp.path(), "reference");
        copy(&damaged, &dir);
        assert!(repair(&dir).unwrap().needed);
        readable(&dir)
    };
    assert!(reference.len() as u64 > KEYS - 300 && (reference.len() as u64) < KEYS + 20);
    let mut points = 0;
    for n in 0.. {
        let dir = subdir(tmp.path(), "case");
        copy(&damaged, &dir);
        let fs = FaultFs::new();
        fs.fail_at(n, EIO, true);
        let first = filterstore::repair::repair_with(&dir, &fs);
        let Some(fired) = fs.fired() else {
            assert!(first.is_ok());
            break;
        };
        assert!(
            first.is_err(),
            "op {n} ({fired}): the failure was swallowed"
        );
        points += 1;
        let r = repair(&dir).unwrap_or_else(|e| panic!("op {n} ({fired}): rerun: {e}"));
        assert!(
            r.verify.is_intact(),
            "op {n} ({fired}): {:?}",
            r.verify.problems
        );
        // Every original file is somewhere, byte for byte.
        let mut all: Vec<Vec<u8>> = snapshot(&dir).into_values().collect();
        if dir.join("lost").exists() {
            all.extend(snapshot(&dir.join("lost")).into_values());
        }
        for (name, o) in &originals {
            assert!(all.contains(o), "op {n} ({fired}): {name}'s bytes are gone");
        }
        // (Opening rewrites the counters, so it comes after that check.)
        assert_eq!(readable(&dir), reference, "op {n} ({fired})");
    }
    assert!(points > 10, "only {points} operations");
    println!(
        "repair interrupted at each of {points} operations, then rerun: the same {} keys each time",
        reference.len()
    );
}
