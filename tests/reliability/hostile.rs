//! Every decoder fed random and mutated bytes: no panic, no hang, no allocation larger than
//! the input justifies. Mutations start from valid encodings, and CRCs are often fixed up
//! after mutating so inputs get past the checksums into the parsers behind them.

use std::path::Path;
use std::sync::Arc;

use filterstore::filter::{self, Filter, FilterKind};
use filterstore::io::RealFs;
use filterstore::manifest::{Manifest, TableRecord};
use filterstore::table::block::{Block, BlockBuilder};
use filterstore::table::{decode_footer, write_table, Table, TableCounters, FOOTER_LEN};
use filterstore::{Options, Store, WriteBatch};

use crate::alloc_probe::largest;
use crate::common::{NoSyncFs, Rng};

/// Allocations a decoder may make for `len` input bytes: linear in the input.
fn budget(len: usize) -> usize {
    160 * len + (64 << 10)
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

/// Recomputes every record CRC of a WAL (lengths as they now read).
fn fix_wal(b: &mut [u8]) {
    let mut pos = 8;
    while pos + 8 <= b.len() {
        let len = u32::from_le_bytes(b[pos..pos + 4].try_into().unwrap()) as usize;
        let Some(end) = (pos + 8).checked_add(len).filter(|&e| e <= b.len()) else {
            break;
        };
        let crc = crc32fast::hash(&b[pos + 8..end]);
        put32(b, pos + 4, crc);
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

struct Stat {
    name: &'static str,
    inputs: u64,
    accepted: u64,
    worst_ratio: f64,
}

fn drive(
    name: &'static str,
    n: u64,
    seed: u64,
    seeds: &[Vec<u8>],
    fix: fn(&mut [u8]),
    mut decode: impl FnMut(&[u8]) -> bool,
) -> Stat {
    let mut rng = Rng::new(seed);
    let mut s = Stat {
        name,
        inputs: 0,
        accepted: 0,
        worst_ratio: 0.0,
    };
    for _ in 0..n {
        let mut b = mutate(&mut rng, seeds);
        if rng.below(3) != 0 {
            fix(&mut b);
        }
        let (ok, big) = largest(|| decode(&b));
        assert!(
            big <= budget(b.len()),
            "{name}: {big}-byte allocation for a {}-byte input {:?}",
            b.len(),
            &b[..b.len().min(64)]
        );
        s.worst_ratio = s.worst_ratio.max(big as f64 / (b.len().max(1)) as f64);
        s.inputs += 1;
        s.accepted += ok as u64;
    }
    s
}

fn wal_seeds() -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(
        dir.path(),
        Options {
            fs: Arc::new(NoSyncFs),
            ..Options::default()
        },
    )
    .unwrap();
    let mut rng = Rng::new(5);
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
    let wal = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .map(|p| std::fs::read(p).unwrap())
        .max_by_key(|b| b.len())
        .unwrap();
    // Short logs reach the end-of-log rules more often.
    vec![
        wal.clone(),
        wal[..300.min(wal.len())].to_vec(),
        wal[..8].to_vec(),
    ]
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

fn table_bytes(path: &Path, e: &[(Vec<u8>, Option<Vec<u8>>)]) -> Vec<u8> {
    let entries: Vec<(&[u8], Option<&[u8]>)> = e
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_deref()))
        .collect();
    write_table(&RealFs, path, entries.as_slice()).unwrap();
    std::fs::read(path).unwrap()
}

#[test]
fn decoders_survive_millions_of_hostile_inputs() {
    let mut rng = Rng::new(77);
    let mut stats = Vec::new();

    // WAL records.
    let seeds = wal_seeds();
    stats.push(drive(
        "wal::replay_bytes",
        600_000,
        1,
        &seeds,
        fix_wal,
        |b| {
            let mut n = 0usize;
            filterstore::wal::replay_bytes(b, |k, v| n += k.len() + v.map_or(0, |v| v.len()))
                .is_ok()
        },
    ));

    // Blocks: construction, full iteration, and lookups of keys they hold and do not.
    let mut seeds = Vec::new();
    let mut probe_keys = Vec::new();
    for n in [1, 5, 17, 40, 120] {
        let e = entries(&mut rng, n);
        let mut bb = BlockBuilder::default();
        for (k, v) in &e {
            bb.add(k, v.as_deref());
        }
        seeds.push(bb.finish());
        probe_keys.extend(e.into_iter().map(|x| x.0).take(5));
    }
    probe_keys.push(b"prefix/".to_vec());
    probe_keys.push(vec![0xff; 3]);
    let mut i = 0usize;
    stats.push(drive(
        "table::block::Block",
        1_500_000,
        2,
        &seeds,
        |_| {},
        |b| {
            let Ok(block) = Block::new(b, 0) else {
                return false;
            };
            let all = block.iter().take(100_000).all(|e| e.is_ok());
            i = i.wrapping_add(1);
            let k = &probe_keys[i % probe_keys.len()];
            let _ = block.get(k);
            all
        },
    ));

    // Filters of every kind.
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
    stats.push(drive(
        "filter::Filter::decode",
        600_000,
        3,
        &seeds,
        fix_filter,
        |b| match Filter::decode(b) {
            Ok(f) => {
                for h in [0u64, 1, u64::MAX, 0x1234_5678_9abc_def0] {
                    f.may_contain(h);
                    f.touch(h);
                }
                let _ = f.theoretical_fpr();
                true
            }
            Err(_) => false,
        },
    ));

    // Manifests.
    let rec = |n: u64, rng: &mut Rng| TableRecord {
        level: (n % 3) as u32,
        number: n,
        filter_file: n + 1,
        filter_kind: FilterKind::ALL[(n % FilterKind::ALL.len() as u64) as usize],
        fpr: 0.01,
        entries: rng.below(1000),
        tombstones: rng.below(10),
        file_bytes: rng.below(1 << 20),
        min_key: rng.bytes(8),
        max_key: rng.bytes(8),
    };
    let seeds: Vec<Vec<u8>> = [0u64, 1, 5]
        .iter()
        .map(|&n| {
            Manifest {
                next_file: 100,
                log_number: 7,
                default_kind: FilterKind::Cuckoo,
                default_fpr: 0.02,
                tables: (0..n).map(|i| rec(i * 3 + 1, &mut rng)).collect(),
                cursors: (0..n).map(|i| (i as u32 + 1, rng.bytes(6))).collect(),
            }
            .encode()
        })
        .collect();
    stats.push(drive(
        "manifest::Manifest::decode",
        600_000,
        4,
        &seeds,
        fix_manifest,
        |b| Manifest::decode(b).is_ok(),
    ));

    // Table files: footer, index and meta at open, then every block and some lookups.
    let dir = crate::scratch_dir();
    let mut seeds = Vec::new();
    let mut probe = Vec::new();
    for n in [1usize, 30, 400] {
        let e = entries(&mut rng, n);
        seeds.push(table_bytes(&dir.path().join(format!("seed{n}.sst")), &e));
        probe.extend(e.into_iter().map(|x| x.0).step_by(37));
    }
    let path = dir.path().join("000001.sst");
    let counters = TableCounters::default();
    stats.push(drive(
        "table::Table::open (file)",
        40_000,
        5,
        &seeds,
        fix_table,
        |b| {
            std::fs::write(&path, b).unwrap();
            // Both ways of reading blocks: positioned reads and in place from a map.
            let mut opened = false;
            for mmap_reads in [false, true] {
                let Ok(t) = Table::open(&path, 1, mmap_reads) else {
                    continue;
                };
                opened = true;
                for i in 0..t.block_count() {
                    let _ = t.block_entries(i, &counters);
                }
                for k in &probe {
                    let _ = t.get(k, &counters);
                }
            }
            opened
        },
    ));

    let total: u64 = stats.iter().map(|s| s.inputs).sum();
    let lines: Vec<String> = stats
        .iter()
        .map(|s| {
            format!(
                "{}: {} inputs ({} accepted, largest allocation {:.1}x the input)",
                s.name, s.inputs, s.accepted, s.worst_ratio
            )
        })
        .collect();
    for s in &stats {
        assert!(
            s.accepted > 0,
            "{}: no mutated input decoded; mutations too shallow",
            s.name
        );
    }
    println!("hostile bytes: {total} inputs; {}", lines.join("; "));
}
