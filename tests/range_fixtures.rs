//! Range deletion: the side file's fixture and hostile bytes, power cuts during range
//! deletes, the blocks a scan over a deleted range reads, and `compact_range` reclaiming the
//! bytes.

mod common;

use std::path::Path;
use std::sync::Arc;

use filterstore::io::FaultFs;
use filterstore::{Options, Store, SyncPolicy};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:07}").into_bytes()
}

/// `tests/fixtures/tombstones-v1.rdel` (made from format.md, "Range tombstones", by
/// `scripts/make-rdel-fixture.py`, not by the writer) decodes to its three tombstones.
#[test]
fn the_tombstones_fixture_decodes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tombstones-v1.rdel");
    let ts = filterstore::tombstone::file::read(&path).unwrap();
    let got: Vec<(Vec<u8>, Vec<u8>)> = ts.into_iter().map(|t| (t.start, t.end)).collect();
    let long = [b"k9".to_vec(), vec![b'x'; 200]].concat();
    assert_eq!(
        got,
        [
            (b"a".to_vec(), b"c".to_vec()),
            (b"b".to_vec(), b"zz".to_vec()),
            (b"k1".to_vec(), long),
        ]
    );
}

/// A store whose range tombstones file is damaged does not open (reading the table
/// without it would bring deleted keys back): every flipped byte is an error naming the
/// file and an offset, never a panic; `verify` reports it too.
#[test]
fn damaged_tombstones_are_an_error_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), Options::default()).unwrap();
        for i in 0..100 {
            s.put(key(i), b"v").unwrap();
        }
        s.flush().unwrap();
        s.delete_range(key(10), key(20)).unwrap();
        s.delete_range(key(50), key(90)).unwrap();
        s.flush().unwrap();
    }
    let rdel: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rdel"))
        .collect();
    assert_eq!(rdel.len(), 1, "{rdel:?}");
    let path = &rdel[0];
    let good = std::fs::read(path).unwrap();
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    for i in 0..good.len() {
        let mut b = good.clone();
        b[i] ^= 0x41;
        std::fs::write(path, &b).unwrap();
        let e = Store::open(dir.path(), Options::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(&name) && e.contains("offset"), "byte {i}: {e}");
        let v = filterstore::verify::verify_dir(dir.path()).unwrap();
        assert!(!v.problems.is_empty(), "byte {i}: verify found nothing");
    }
    std::fs::write(path, &good[..good.len() - 1]).unwrap();
    assert!(Store::open(dir.path(), Options::default()).is_err());
    std::fs::write(path, &good).unwrap();
    let s = Store::open(dir.path(), Options::default()).unwrap();
    assert_eq!(s.get(key(15)).unwrap(), None);
    assert_eq!(s.get(key(20)).unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(s.scan::<&[u8]>(..).count(), 100 - 10 - 40);
}

/// Power cuts at every sync point of durable puts, range deletes (alone and in batches),
/// flushes and compactions: after recovery every acknowledged write is there and a range
/// delete is all or nothing (the one in flight at the cut may be either).
#[test]
fn range_deletes_survive_power_cuts_at_every_sync_point() {
    use std::collections::BTreeMap;
    let tmp = tempfile::tempdir().unwrap();
    let mut cut = 0u64;
    loop {
        let fs = FaultFs::new();
        fs.cut_power_at_sync(cut);
        let live = tmp.path().join(format!("live{cut}"));
        let opts = |fs: &FaultFs| {
            Options::default()
                .sync(SyncPolicy::EveryWrite)
                .memtable_bytes(2048)
                .compaction_trigger(Some(2))
                .fs(Arc::new(fs.clone()))
        };
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut after: Option<BTreeMap<Vec<u8>, Vec<u8>>> = None;
        let store = Store::open(&live, opts(&fs)).ok();
        if let Some(s) = &store {
            for i in 0..90u32 {
                let mut next = model.clone();
                let r = match i % 15 {
                    7 => {
                        let (a, b) = (key(i / 2), key(i / 2 + 12));
                        next.retain(|k, _| *k < a || *k >= b);
                        s.delete_range(&a, &b)
                    }
                    11 => {
                        let mut batch = filterstore::WriteBatch::new();
                        batch
                            .put(key(i), b"b".to_vec())
                            .delete_range(key(0), key(i / 3));
                        next.insert(key(i), b"b".to_vec());
                        next.retain(|k, _| *k >= key(i / 3));
                        s.write(batch)
                    }
                    14 => s.flush(),
                    _ => {
                        next.insert(key(i), vec![i as u8; 60]);
                        s.put(key(i), [i as u8; 60])
                    }
                };
                if r.is_err() {
                    after = Some(next);
                    break;
                }
                model = next;
            }
        }
        let reached = fs.fired().is_some();
        drop(store);
        for applied in [0, usize::MAX] {
            let img = tmp.path().join(format!("image{cut}-{applied}"));
            std::fs::create_dir_all(&img).unwrap();
            fs.crash_image(&img, applied).unwrap();
            let s = Store::open(&img, Options::default()).unwrap();
            let got: BTreeMap<Vec<u8>, Vec<u8>> = s
                .scan::<&[u8]>(..)
                .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
                .collect();
            assert!(
                got == model || after.as_ref() == Some(&got),
                "cut {cut} applied {applied}: {} keys, {} acknowledged",
                got.len(),
                model.len()
            );
        }
        if !reached {
            break;
        }
        cut += 1;
    }
    assert!(cut > 20, "only {cut} sync points");
}

/// A scan over a deleted range reads a few blocks, not the range's: the older sources skip
/// the range by seeking (counted in `data_block_reads`, no timing).
#[test]
fn a_scan_over_a_deleted_range_reads_few_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), Options::default().block_cache_bytes(0)).unwrap();
    for i in 0..100_000 {
        s.put(key(i), [b'v'; 100]).unwrap();
    }
    s.flush().unwrap();
    s.compact().unwrap();
    let before = s.stats().data_block_reads;
    let all = s.scan(key(10_000)..key(90_000)).count();
    let full = s.stats().data_block_reads - before;
    assert_eq!(all, 80_000);
    s.delete_range(key(10_000), key(90_000)).unwrap();
    let scan = |s: &Store| {
        let before = s.stats().data_block_reads;
        let n = s.scan(key(5_000)..key(95_000)).count();
        let back = s.scan(key(5_000)..key(95_000)).rev().count();
        (n, back, s.stats().data_block_reads - before)
    };
    // The tombstone in the memtable, then flushed into an L0 table over the levels.
    for round in 0..2 {
        let (n, back, reads) = scan(&s);
        assert_eq!((n, back), (10_000, 10_000), "round {round}");
        println!("round {round}: {reads} blocks read (the range alone took {full})");
        // Each way, the blocks of the 10,000 live keys (an eighth of the range's 80,000)
        // and a few per source for the skip; reading the deleted keys too would be about
        // 2 × (full + full / 8).
        assert!(
            reads <= 2 * (full / 8) + 40,
            "round {round}: {reads} blocks (the range alone {full})"
        );
        s.flush().unwrap();
    }
}

fn dir_bytes(dir: &Path, ext: &str) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

/// `compact_range` reclaims the bytes of a deleted range (file sizes), keeps the rest, and
/// leaves no tombstone behind at the bottom.
#[test]
fn compact_range_reclaims_a_deleted_range() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), Options::default().table_bytes(1 << 20)).unwrap();
    for i in 0..100_000 {
        s.put(key(i), [b'v'; 100]).unwrap();
    }
    s.flush().unwrap();
    s.compact().unwrap();
    let full = dir_bytes(dir.path(), "sst");
    s.delete_range(key(0), key(90_000)).unwrap();
    s.compact_range(key(0), key(90_000)).unwrap();
    let after = dir_bytes(dir.path(), "sst");
    println!("table bytes: {full} before, {after} after compact_range");
    assert!(after * 5 < full, "{full} -> {after}");
    assert_eq!(
        dir_bytes(dir.path(), "rdel"),
        0,
        "tombstones left at the bottom"
    );
    assert_eq!(s.scan::<&[u8]>(..).count(), 10_000);
    assert_eq!(
        s.get(key(90_000)).unwrap().as_deref(),
        Some(&[b'v'; 100][..])
    );
    assert_eq!(s.get(key(1)).unwrap(), None);
}

/// A compaction whose output is cut into several tables never cuts inside a range
/// tombstone it keeps (the outputs' bounds, widened to their tombstones, stay disjoint; the
/// compaction refuses overlapping outputs): newer writes under a kept tombstone over older
/// data deeper down, merged into tables of 4 KiB.
#[test]
fn compaction_outputs_do_not_cut_inside_a_kept_range_tombstone() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || {
        Options::default()
            .compaction_trigger(None)
            .table_bytes(4096)
    };
    let s = Store::open(dir.path(), opts()).unwrap();
    for i in 0..4000 {
        s.put(key(i), [b'o'; 60]).unwrap();
    }
    // Down to the bottom level, level by level.
    s.compact_range(key(0), key(9999)).unwrap();
    s.delete_range(key(1000), key(3000)).unwrap();
    for i in 1500..2500 {
        s.put(key(i), [b'n'; 60]).unwrap();
    }
    // L0 -> L1 keeps the tombstone (the bottom level overlaps it) and cuts tables of 4 KiB.
    s.compact_range(key(0), key(9999)).unwrap();
    drop(s);
    let s = Store::open(dir.path(), opts()).unwrap();
    assert_eq!(s.scan::<&[u8]>(..).count(), 4000 - 2000 + 1000);
    assert_eq!(s.get(key(1200)).unwrap(), None);
    assert_eq!(s.get(key(2000)).unwrap().as_deref(), Some(&[b'n'; 60][..]));
    assert_eq!(s.get(key(3000)).unwrap().as_deref(), Some(&[b'o'; 60][..]));
}
