//! The range filters' part of `store bench`: empty scans at the absent keys, without range
//! filters and with them, on the same store (the filters swapped, the data never rewritten).

use std::time::Instant;

use super::keys::FlatKeys;
use filterstore::store::Store;
use filterstore::{Error, Result};

/// One row of the range filters' part of the benchmark: empty scans at the absent keys of
/// the lookups, with the tables' range filters at one size (or none), on the same store.
#[derive(Clone, Debug)]
pub struct ScanRow {
    /// Range filter bits per key asked for (0: none, the baseline).
    pub range_bits: f64,
    /// Range filter bits per key as built (file bytes × 8 ÷ keys).
    pub bits_per_key: f64,
    /// Key values each scan spans: 1 scans [a, a] at every absent key; 32 scans [a, a + 32)
    /// (the key read as a 128-bit number) at the 16-byte absent keys only.
    pub len: u64,
    /// Scans made (each found nothing).
    pub scans: u64,
    /// Data-block reads per scan.
    pub reads_per_scan: f64,
    /// Share of the no-filter row's reads (same ℓ) avoided.
    pub avoided: f64,
    /// Tables asked whose filter said "maybe" but held no key ÷ tables asked; `None` without
    /// a range filter.
    pub observed_fpr: Option<f64>,
    /// Grafite's bound ℓ / 2^(bits − 2) at the built bits per key (1 without a filter).
    pub bound: f64,
    /// Mean ns per scan.
    pub ns_per_scan: f64,
}

/// Empty scans at the first `scans` absent keys, with no range filter and then with
/// [`DEFAULT_RANGE_BITS`](filterstore::store::DEFAULT_RANGE_BITS) (the filters swapped with
/// `refilter_ranges`, the data never rewritten): [a, a] at every key, and [a, a + 32) at the
/// 16-byte ones.
pub(super) fn scan_rows(
    store: &Store,
    absent: &FlatKeys,
    scans: u64,
    keys: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<ScanRow>> {
    let m = (scans as usize).min(absent.len());
    let mut rows: Vec<ScanRow> = Vec::new();
    for bits in [0.0, filterstore::store::DEFAULT_RANGE_BITS] {
        progress(&format!(
            "range filters of {bits} bits per key: {m} empty scans per ℓ"
        ));
        store.refilter_ranges(bits)?;
        let bits_per_key = store.stats().range_filter_bytes as f64 * 8.0 / keys.max(1) as f64;
        for len in [1u64, 32] {
            let before = store.stats();
            let mut made = 0u64;
            let mut found = 0usize;
            let start = Instant::now();
            for i in 0..m {
                let k = absent.get(i);
                if len == 1 {
                    found += store.scan(k..=k).count();
                } else if let Ok(a) = <[u8; 16]>::try_from(k) {
                    let a = u128::from_be_bytes(a);
                    let (a, b) = (a.to_be_bytes(), a.saturating_add(len.into()).to_be_bytes());
                    found += store.scan(a.as_slice()..b.as_slice()).count();
                } else {
                    continue;
                }
                made += 1;
            }
            let ns = start.elapsed().as_nanos() as f64 / made.max(1) as f64;
            if found > 0 {
                return Err(Error::Internal(format!(
                    "an empty scan of {len} key values found {found} keys"
                )));
            }
            if made == 0 {
                continue;
            }
            let after = store.stats();
            let reads = (after.data_block_reads - before.data_block_reads) as f64 / made as f64;
            let fps = after.range_false_positives - before.range_false_positives;
            let skipped = after.range_skipped - before.range_skipped;
            let base = rows
                .iter()
                .find(|r| r.range_bits == 0.0 && r.len == len)
                .map(|r| r.reads_per_scan);
            rows.push(ScanRow {
                range_bits: bits,
                bits_per_key,
                len,
                scans: made,
                reads_per_scan: reads,
                avoided: match base {
                    Some(b) if b > 0.0 && bits > 0.0 => 1.0 - reads / b,
                    _ => 0.0,
                },
                observed_fpr: (bits > 0.0 && fps + skipped > 0)
                    .then(|| fps as f64 / (fps + skipped) as f64),
                bound: if bits > 0.0 {
                    filterstore::filter::range::grafite_bound(len, bits_per_key)
                } else {
                    1.0
                },
                ns_per_scan: ns,
            });
        }
    }
    Ok(rows)
}
