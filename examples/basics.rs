//! The library in one page: open a store with a filter policy, write keys one at a time and
//! in an atomic batch, read them back, scan a prefix, seal the memtable into a table and see
//! what its filter saved.
//!
//! `cargo run --release --example basics [DIR]` (a temporary directory when none is given;
//! run it twice with the same DIR to see the store reopen with its data).

use filterstore::{FilterKind, Options, Store, WriteBatch};

fn main() -> filterstore::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(|| tmp.path().to_path_buf(), std::path::PathBuf::from);
    // A new store records its filter policy; reopening it keeps that policy.
    let store = Store::open(
        &dir,
        Options::default()
            .filter(Some(FilterKind::BlockedBloom))
            .fpr(Some(0.01)),
    )?;
    println!(
        "{} keys were already there",
        store.scan::<&[u8]>(..).count()
    );

    store.put(b"apple", b"red")?;
    let mut batch = WriteBatch::new();
    batch
        .put(b"pear".to_vec(), b"green".to_vec())
        .put(b"plum".to_vec(), b"purple".to_vec())
        .delete(b"apple".to_vec());
    store.write(batch)?; // all of it or none of it, even across a crash

    // Seal the memtable into a table fronted by a blocked-Bloom filter.
    store.flush()?;
    assert_eq!(store.get(b"apple")?, None);
    for item in store.scan_prefix(b"p") {
        let (key, value) = item?;
        println!(
            "{} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
    }

    // Absent keys inside the table's key range ("pear" to "plum"): the filter answers about
    // 99 % of them without reading a block.
    for i in 0..10_000u32 {
        assert_eq!(store.get(format!("pine-{i}").as_bytes())?, None);
    }
    let stats = store.stats();
    println!(
        "{} tables; {} absent lookups answered by the filters, {} false positives",
        stats.tables.len(),
        stats.filter_negatives,
        stats.false_positives
    );
    Ok(())
}
