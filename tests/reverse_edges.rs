//! Reverse scans at their edges: blocks longer than 4 KiB under tombstones that shadow them
//! from a shallower level, read across the memtable/table boundary; and tables with damaged
//! bytes, where a reverse scan must err or read the right entries, never panic (the same
//! check as the `reverse` fuzz target, `fuzz/reverse.rs`, over a bounded set of damages).

mod common;

#[path = "../fuzz/reverse.rs"]
mod reverse;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use common::{NoSyncFs, Rng};
use filterstore::{Compression, Options, Store};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn k(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

/// A value of 4,500 to 7,000 bytes: an entry longer than 4 KiB, so its block is too.
fn large(i: u32) -> Vec<u8> {
    (0..4500 + (i * 37) % 2500).map(|j| (j ^ i) as u8).collect()
}

/// The model's items in `lo..hi`, backward.
fn want_rev(model: &Model, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .range((lo, hi))
        .rev()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// L1 and deeper: 300 keys with values longer than 4 KiB. L0: tombstones over every third
/// of them and small overwrites of every fifth. The memtable: deletes of a run of them, keys
/// between them, large overwrites, and keys past both ends of the tables' range. Reverse
/// scans (whole, from every region's edge, and from both ends) agree with the model, for
/// every block form, cache setting and `mmap_reads`.
#[test]
fn reverse_over_large_blocks_tombstones_and_the_memtable() {
    let codecs: Vec<Compression> = Compression::ALL
        .into_iter()
        .filter(|c| c.is_available())
        .collect();
    for &compression in &codecs {
        for (cache, mmap_reads) in [(0, false), (1 << 20, true), (64 << 10, false)] {
            let what = format!("{compression} cache {cache} mmap {mmap_reads}");
            let dir = tempfile::tempdir().unwrap();
            let mut o = Options::default();
            o.compression = compression;
            o.block_cache_bytes = cache;
            o.mmap_reads = mmap_reads;
            o.compaction_trigger = None;
            o.table_bytes = 256 << 10;
            o.fs = Arc::new(NoSyncFs);
            let store = Store::open(dir.path(), o).unwrap();
            let mut model = Model::new();
            // Two overlapping L0 tables, merged by the compaction into tables of 256 KiB.
            for half in 0..2 {
                for i in (half..300).step_by(2) {
                    store.put(k(i), large(i)).unwrap();
                    model.insert(k(i), large(i));
                }
                store.flush().unwrap();
            }
            store.compact().unwrap();
            let s = store.stats();
            let levels: Vec<_> = s.tables.iter().map(|t| (t.level, t.keys)).collect();
            assert!(
                s.tables.len() > 1 && s.tables.iter().all(|t| t.level > 0),
                "{what}: {levels:?}"
            );
            // Every entry, hence every data block, is longer than 4 KiB.
            assert!(
                s.tables.iter().all(|t| t.data_bytes > 4096 * t.keys),
                "{what}"
            );
            for i in 0..300 {
                if i % 3 == 0 {
                    store.delete(k(i)).unwrap();
                    model.remove(&k(i));
                } else if i % 5 == 0 {
                    store.put(k(i), b"small").unwrap();
                    model.insert(k(i), b"small".to_vec());
                }
            }
            store.flush().unwrap();
            let s = store.stats();
            assert!(
                s.tables.iter().any(|t| t.level == 0 && t.tombstones > 0),
                "{what}"
            );
            for i in 120..200 {
                store.delete(k(i)).unwrap();
                model.remove(&k(i));
                if i % 11 == 0 {
                    let between = format!("k{i:04}m").into_bytes();
                    store.put(&between, large(i + 1)).unwrap();
                    model.insert(between, large(i + 1));
                }
            }
            for i in [7, 8, 250, 251, 299] {
                store.put(k(i), large(i + 1000)).unwrap();
                model.insert(k(i), large(i + 1000));
            }
            for key in ["a", "j", "k", "k0299z", "l", "z"] {
                store.put(key, key).unwrap();
                model.insert(key.as_bytes().to_vec(), key.as_bytes().to_vec());
            }
            let got: Vec<_> = store
                .scan::<&[u8]>(..)
                .rev()
                .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(
                got == want_rev(&model, Bound::Unbounded, Bound::Unbounded),
                "{what}: the whole store backward"
            );
            // From each edge: the memtable alone, into the tables, through the deleted run.
            let edges = [
                "z", "l", "k0299z", "k0299", "k0250", "k0200", "k0199m", "k0150", "k0120", "k0007",
                "k", "a",
            ];
            for (x, &hi) in edges.iter().enumerate() {
                for &lo in &edges[x..] {
                    for (lo, hi) in [
                        (Bound::Included(lo), Bound::Excluded(hi)),
                        (Bound::Excluded(lo), Bound::Included(hi)),
                    ] {
                        let (lo, hi) = (
                            lo.map(|b| b.as_bytes().to_vec()),
                            hi.map(|b| b.as_bytes().to_vec()),
                        );
                        let want = want_rev(&model, lo.clone(), hi.clone());
                        let got: Vec<_> = store
                            .scan::<Vec<u8>>((lo.clone(), hi.clone()))
                            .rev()
                            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
                            .collect::<Result<_, _>>()
                            .unwrap();
                        assert!(got == want, "{what}: {lo:?}..{hi:?} backward");
                        // Both ends at once, alternating, meeting without overlap.
                        let mut scan = store.scan::<Vec<u8>>((lo.clone(), hi.clone()));
                        let (mut front, mut back) = (Vec::new(), Vec::new());
                        for step in 0.. {
                            let item = if step % 3 == 0 {
                                scan.next()
                            } else {
                                scan.next_back()
                            };
                            let Some(item) = item else { break };
                            let (k, v) = item.unwrap();
                            let e = (k.to_vec(), v.to_vec());
                            if step % 3 == 0 {
                                front.push(e)
                            } else {
                                back.push(e)
                            }
                        }
                        assert!(scan.next().is_none() && scan.next_back().is_none());
                        front.extend(back.into_iter().rev());
                        front.reverse();
                        assert!(front == want, "{what}: {lo:?}..{hi:?} from both ends");
                    }
                }
            }
            assert_eq!(
                store
                    .last_key_value()
                    .unwrap()
                    .map(|(k, v)| (k.to_vec(), v.to_vec())),
                Some((b"z".to_vec(), b"z".to_vec()))
            );
        }
    }
}

/// Damaged table bytes under reverse scans, on every block form and reading setup: one and
/// several flipped bytes at random places, and one byte at evenly spread places of the file
/// (data blocks, index, footer). Each scan errs or reads the model's entries; some damages
/// are caught (so the check is not vacuous) and some leave the store opening.
#[test]
fn reverse_scans_over_damaged_tables_err_or_read_right() {
    let templates: Vec<reverse::Template> = Compression::ALL
        .into_iter()
        .filter(|c| c.is_available())
        .map(reverse::template)
        .collect();
    let scratch = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(36);
    let (mut opened, mut erred, mut runs) = (0, 0, 0);
    let mut run = |data: &[u8]| {
        let o = reverse::reverse_damaged(&templates, data, &scratch.path().join("s"));
        opened += u64::from(o.opened);
        erred += u64::from(o.erred);
        runs += 1;
    };
    // Undamaged: every setup opens and reads without an error.
    for pick in 0..=255u8 {
        if pick % 0x40 < templates.len() as u8 && pick % 0x40 == pick & 0x3f {
            let data = [pick, 10, 140, 0b1011_0010];
            let o = reverse::reverse_damaged(&templates, &data, &scratch.path().join("s"));
            assert!(o.opened && !o.erred, "undamaged template {pick}: {o:?}");
        }
    }
    for i in 0..240u32 {
        let mut data = vec![
            rng.next() as u8,
            rng.next() as u8,
            rng.next() as u8,
            rng.next() as u8,
        ];
        let patches = if i % 2 == 0 { 1 } else { 1 + rng.below(4) };
        for _ in 0..patches {
            let at = rng.next() as u32;
            data.extend_from_slice(&at.to_le_bytes()[..3]);
            data.push(1 << rng.below(8));
        }
        run(&data);
    }
    for at in (0..60_000u32).step_by(1499) {
        let mut data = vec![(at / 1499) as u8, 0, 200, 0b0110_1001];
        data.extend_from_slice(&at.to_le_bytes()[..3]);
        data.push(0x10);
        run(&data);
    }
    println!("{runs} damaged tables: {opened} opened, {erred} with a read that erred");
    assert!(opened > runs / 4, "{opened} of {runs} opened");
    assert!(erred > runs / 4, "{erred} of {runs} erred");
}
