//! The reverse scan path over a damaged table, shared by the cargo-fuzz target
//! (`fuzz_targets/reverse.rs`) and the bounded in-tree loop (`tests/reverse_damage.rs`), so
//! both make the same calls and check the same property: a reverse scan (whole, bounded, or
//! consumed from both ends) over a table whose bytes were damaged yields exactly the
//! model's entries, from the back, until it ends or errs; it never panics and never yields a
//! wrong entry. Public API only.
//!
//! Input: byte 0 picks the template (block form) and the reading setup (block cache on or off,
//! `mmap_reads`); bytes 1–2 the scan's bounds; byte 3 the pattern of front and back steps;
//! the rest patches, 4 bytes each: a 24-bit offset (little-endian, taken modulo the table
//! file's length) and a byte XORed into the table file there.

use std::ops::Deref;
use std::path::{Path, PathBuf};

use filterstore::{Compression, Options, Store};

/// Entries of a template store, in key order.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A store of one table, written once, that each input copies and damages.
pub struct Template {
    dir: tempfile::TempDir,
    /// The table file's name in `dir`.
    table: String,
    pub entries: Entries,
}

/// Key `i` of a template.
pub fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

/// Writes a template store with blocks of `compression`: 400 keys, every 40th with a value
/// longer than 4 KiB (a block of its own, longer than a read of 4 KiB), some compressible.
pub fn template(compression: Compression) -> Template {
    let dir = tempfile::tempdir().expect("template directory");
    let store = Store::open(dir.path(), options(compression, 0, false)).expect("template store");
    let mut entries = Entries::new();
    for i in 0..400u32 {
        let k = key(i);
        let v: Vec<u8> = match i % 40 {
            0 => (0..4200 + i * 7).map(|j| (j * 31 + i) as u8).collect(),
            1 => vec![b'x'; 5000],
            _ => format!("value {i} ")
                .repeat(1 + (i as usize % 9))
                .into_bytes(),
        };
        store.put(&k, &v).expect("template put");
        entries.push((k, v));
    }
    store.flush().expect("template flush");
    drop(store);
    let tables: Vec<String> = std::fs::read_dir(dir.path())
        .expect("template listing")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".sst"))
        .collect();
    assert_eq!(tables.len(), 1, "a template holds one table: {tables:?}");
    Template {
        dir,
        table: tables[0].clone(),
        entries,
    }
}

fn options(compression: Compression, cache: usize, mmap_reads: bool) -> Options {
    let mut o = Options::default();
    o.compression = compression;
    o.block_cache_bytes = cache;
    o.mmap_reads = mmap_reads;
    o.compaction_trigger = None;
    o
}

/// Copies the template into `scratch` (emptied first) with `patches` applied to its table.
fn damaged_copy(t: &Template, patches: &[u8], scratch: &Path) -> PathBuf {
    let _ = std::fs::remove_dir_all(scratch);
    std::fs::create_dir_all(scratch).expect("scratch directory");
    for e in std::fs::read_dir(t.dir.path()).expect("template listing") {
        let e = e.expect("template entry");
        if e.file_type().is_ok_and(|f| f.is_file()) {
            std::fs::copy(e.path(), scratch.join(e.file_name())).expect("copy the template");
        }
    }
    let path = scratch.join(&t.table);
    let mut bytes = std::fs::read(&path).expect("read the table copy");
    for p in patches.chunks_exact(4) {
        let at = u32::from_le_bytes([p[0], p[1], p[2], 0]) as usize % bytes.len();
        bytes[at] ^= p[3];
    }
    std::fs::write(&path, &bytes).expect("write the damaged table");
    scratch.to_path_buf()
}

/// Checks `got` (one step's result) against `want`; returns false when the scan is done
/// (ended, or erred: then `erred` is set).
fn step<K: Deref<Target = [u8]>, V: Deref<Target = [u8]>, E>(
    got: Option<Result<(K, V), E>>,
    want: Option<&(Vec<u8>, Vec<u8>)>,
    erred: &mut bool,
    what: &str,
) -> bool {
    match got {
        Some(Err(_)) => {
            *erred = true;
            false
        }
        Some(Ok((k, v))) => {
            let w = want.unwrap_or_else(|| panic!("{what}: an entry past the model's end"));
            assert!(
                k[..] == w.0[..] && v[..] == w.1[..],
                "{what}: {:?} where the model has {:?}",
                String::from_utf8_lossy(&k[..]),
                String::from_utf8_lossy(&w.0)
            );
            true
        }
        None => {
            assert!(
                want.is_none(),
                "{what}: ended early, before {:?}",
                want.map(|w| String::from_utf8_lossy(&w.0))
            );
            false
        }
    }
}

/// What one input did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The damaged store opened.
    pub opened: bool,
    /// A read erred.
    pub erred: bool,
}

/// Runs one input against the templates (`templates[data[0] % len]`) in `scratch`.
pub fn reverse_damaged(templates: &[Template], data: &[u8], scratch: &Path) -> Outcome {
    let Some((&[pick, lo, hi, pattern], patches)) = data.split_first_chunk::<4>() else {
        return Outcome::default();
    };
    let t = &templates[pick as usize % templates.len()];
    let compression = [Compression::None, Compression::Lz4, Compression::Zstd]
        .into_iter()
        .filter(|c| c.is_available())
        .nth(pick as usize % templates.len())
        .expect("a template per available block form");
    let dir = damaged_copy(t, patches, scratch);
    let cache = if pick & 0x40 != 0 { 64 << 10 } else { 0 };
    let Ok(store) = Store::open(&dir, options(compression, cache, pick & 0x80 != 0)) else {
        return Outcome::default();
    };
    let mut erred = false;
    // The whole store, backward.
    let mut scan = store.scan::<&[u8]>(..).rev();
    let mut want = t.entries.iter().rev();
    while step(scan.next(), want.next(), &mut erred, "reverse scan") {}
    let _ = scan.next();
    // A bounded range, backward.
    let (a, b) = (key(u32::from(lo) * 2), key(u32::from(hi) * 2));
    let (a, b) = if a <= b { (a, b) } else { (b, a) };
    let range: Vec<_> = t
        .entries
        .iter()
        .filter(|(k, _)| *k >= a && *k < b)
        .collect();
    let mut scan = store.scan(a.clone()..b.clone()).rev();
    let mut want = range.iter().rev().copied();
    while step(scan.next(), want.next(), &mut erred, "bounded reverse scan") {}
    // From both ends, meeting without overlap.
    let mut scan = store.scan(a..b);
    let mut want = range.iter().copied();
    for i in 0.. {
        let back = pattern.rotate_left(i % 8) & 1 == 1;
        let go = if back {
            step(
                scan.next_back(),
                want.next_back(),
                &mut erred,
                "scan from the back",
            )
        } else {
            step(scan.next(), want.next(), &mut erred, "scan from the front")
        };
        if !go {
            break;
        }
    }
    let _ = scan.next_back();
    match store.last_key_value() {
        Ok(Some((k, v))) => {
            let w = t.entries.last().expect("a template holds entries");
            assert!(k[..] == w.0[..] && v[..] == w.1[..], "last_key_value");
        }
        Ok(None) => panic!("last_key_value: none in a store of one table"),
        Err(_) => erred = true,
    }
    Outcome {
        opened: true,
        erred,
    }
}
