//! Key hashes files (`NNNNNN.khash`, format.md "Key hashes"): the fixture that pins the
//! layout, and the global filter sized by hashes counted, never by a count a table claims.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use filterstore::hash::key_hash;
use filterstore::manifest::Manifest;
use filterstore::table::key_hashes;
use filterstore::table::{decode_footer, FOOTER_LEN, MAX_BLOCK_ENTRIES};
use filterstore::{FilterKind, Options, Store};

/// Forwards to the system allocator and keeps the largest single allocation.
struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
}

#[global_allocator]
static A: Largest = Largest;

const FIXTURE: &str = "tests/fixtures/key-hashes-v1.khash";

/// The hashes of `key-0` .. `key-4`.
fn fixture_hashes() -> Vec<u64> {
    (0..5)
        .map(|i| key_hash(format!("key-{i}").as_bytes()))
        .collect()
}

/// The checked-in file decodes to the hashes of `key-0` .. `key-4` (the first pinned in
/// format.md), and today's writer reproduces it byte for byte.
#[test]
fn the_fixture_decodes_and_is_reproduced() {
    let hashes = fixture_hashes();
    let bytes = std::fs::read(FIXTURE).unwrap();
    assert_eq!(hashes[0], 0x03ba_1f7d_f698_2ca9);
    assert_eq!(key_hashes::decode(&bytes).unwrap(), hashes);
    assert_eq!(key_hashes::encode(&hashes), bytes);
    assert_eq!(&bytes[..4], b"FSKH");
    assert_eq!(bytes.len(), 24 + 8 * 5);
}

/// `table` with its meta's counts changed by `change` (entries, tombstones, data blocks,
/// data bytes), the meta's CRC, the footer's lengths and its CRC made to match.
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

fn global() -> Options {
    Options::default()
        .filter(Some(FilterKind::Global))
        .range_filter_bits(0.0)
        .compression(filterstore::Compression::None)
        .compaction_trigger(None)
        .memtable_bytes(1 << 20)
}

/// A store of one table of 20,000 keys (about 1,100 data blocks) under the global filter.
fn one_big_table(dir: &Path) {
    let s = Store::open(dir, global().memtable_bytes(8 << 20)).unwrap();
    for i in 0..20_000u32 {
        s.put(format!("k{i:08}"), [i as u8; 100]).unwrap();
    }
    s.flush().unwrap();
}

/// A table (CRCs intact, manifest agreeing) whose meta claims the most entries a reader
/// allows (`MAX_BLOCK_ENTRIES` per data block: about 1.5 million here, against 20,000 held).
/// Opening the store under the global filter is an error naming the file whose count
/// disagrees, and nothing is sized by the claim: the largest allocation stays far below the
/// filter the claim would size (1.5 × the claim in 16-bit slots, 4.6 MB). Before key
/// hashes files the store sized the filter by the claim first (with a claim of the most a
/// crafted table of small blocks allows, gigabytes), and only then found the table's keys
/// fewer. Both with the table's key hashes file and without one (a table written before
/// them: its keys are counted by reading them).
#[test]
fn a_claimed_entry_count_sizes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    one_big_table(dir.path());
    let m = Manifest::load(dir.path()).unwrap().unwrap();
    assert_eq!(m.tables.len(), 1);
    let t = &m.tables[0];
    let hashes = t.key_hashes.expect("a key hashes file");
    let path = dir.path().join(format!("{:06}.sst", t.number));
    let clean = std::fs::read(&path).unwrap();
    let crafted = with_table_counts(&clean, |c| {
        c[0] = c[2] * MAX_BLOCK_ENTRIES;
        c[3] = c[3].max(3 * c[0]);
    });
    let mut claimed = 0;
    with_table_counts(&crafted, |c| claimed = c[0]);
    assert!(claimed > 1_000_000, "{claimed}");
    std::fs::write(&path, &crafted).unwrap();
    let mut m2 = m.clone();
    m2.tables[0].entries = claimed;
    // The one table is the deepest level's, and so has a filter of its own and no entries
    // in the global filter; recorded without one (as an earlier version wrote it), its keys
    // are in the global filter and counted before it is made.
    m2.tables[0].filter_file = 0;
    m2.tables[0].filter_kind = filterstore::filter::FilterKind::None;
    m2.store(&filterstore::io::NoSyncFs, dir.path()).unwrap();
    let by_claim = (claimed as f64 * 1.5 / 4.0 / 0.955) as usize * 8;
    for (with_file, needle) in [
        (true, format!("{hashes:06}.khash")),
        (false, format!("{:06}.sst", t.number)),
    ] {
        if !with_file {
            m2.tables[0].key_hashes = None;
            m2.store(&filterstore::io::NoSyncFs, dir.path()).unwrap();
        }
        // Built from the tables, not read back from its checkpoint.
        let _ = std::fs::remove_file(dir.path().join("GLOBALFILTER"));
        LARGEST.store(0, Relaxed);
        let e = Store::open(dir.path(), global()).map(drop).unwrap_err();
        let largest = LARGEST.load(Relaxed);
        let msg = e.to_string();
        assert!(e.is_corruption(), "{msg}");
        assert!(msg.contains(&needle) && msg.contains("claims"), "{msg}");
        assert!(
            largest < by_claim / 2,
            "with file {with_file}: an allocation of {largest} bytes (the claim sizes {by_claim})"
        );
    }
    // The file as written opens, and its filter holds the 20,000 keys.
    std::fs::write(&path, &clean).unwrap();
    let mut m3 = m.clone();
    m3.tables[0].filter_file = 0;
    m3.tables[0].filter_kind = filterstore::filter::FilterKind::None;
    m3.store(&filterstore::io::NoSyncFs, dir.path()).unwrap();
    let _ = std::fs::remove_file(dir.path().join("GLOBALFILTER"));
    let s = Store::open(dir.path(), global()).unwrap();
    assert_eq!(s.check_global_filter().unwrap(), Some(20_000));
    let g = s.stats().global_filter.unwrap();
    assert_eq!((g.entries, g.key_blocks_read), (20_000, 0), "{g:?}");
}
