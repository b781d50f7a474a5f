//! `bench range`: what range filters save scans, and what they cost.

use std::time::Instant;

use clap::Args;
use filterstore::filter::range::grafite_bound;
use filterstore::{Options, Stats, Store};

use super::{println, CliError, Exit, Global, Run};

/// Measure range filters on empty and non-empty scans.
///
/// Builds a store of --count random 16-byte keys (100-byte values) in --tables flushed tables
/// whose key ranges all span the key space (so without a range filter every scan reads a
/// block of every table). Then, for each size in --bits (0 = no range filter; the filters are
/// swapped with `refilter_ranges`, the data never rewritten) and each range length ℓ = 2^0 …
/// 2^10 (key values, the keys read as 128-bit numbers): --scans empty scans [a, a+ℓ) from
/// uniformly random a ("uniform") and from a = a present key + 1 ("clustered", right next
/// to keys), then as many non-empty scans [k, k+ℓ) from present keys k. Reported per row:
/// the range filter's size in bits per key, ns per scan, data blocks per scan (reads and
/// cache hits), the share of the no-filter row's blocks (same ℓ and ranges) that the filter
/// avoided (when --bits holds 0, measured first), the observed false-positive rate per table
/// probed (a table not skipped that held no key in the range) against Grafite's bound
/// ℓ / 2^(bits − 2). Progress to stderr.
#[derive(Args, Debug)]
pub struct BenchRange {
    /// Number of keys
    #[arg(short = 'n', long, default_value_t = 1_000_000)]
    count: u64,
    /// Tables the keys are sealed into
    #[arg(long, default_value_t = 4)]
    tables: u64,
    /// Scans per row
    #[arg(long, default_value_t = 20_000)]
    scans: u64,
    /// Range filter sizes in bits per key, comma-separated (0: none)
    #[arg(long, value_delimiter = ',', default_value = "0,8,12,16,20", value_parser = super::parse_range_bits)]
    bits: Vec<f64>,
    /// Seed of the keys and the scans
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// xorshift64*: the keys and the scans, reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// A 128-bit key with its last bit clear (present keys are even, so k + 1 is absent).
    fn key(&mut self) -> u128 {
        (u128::from(self.next()) << 64 | u128::from(self.next())) & !1
    }
}

/// Counters of one row, as differences of two `stats()`.
struct Row {
    nanos: f64,
    blocks: f64,
    probes: u64,
    empty_said_maybe: u64,
    skipped: u64,
}

fn row(store: &Store, scans: &[(u128, u128)], expect_empty: bool) -> Result<Row, CliError> {
    let before = store.stats();
    let t = Instant::now();
    let mut found = 0u64;
    for &(a, b) in scans {
        let (a, b) = (a.to_be_bytes(), b.to_be_bytes());
        for item in store.scan(a.as_slice()..b.as_slice()) {
            item?;
            found += 1;
        }
    }
    let nanos = t.elapsed().as_nanos() as f64 / scans.len().max(1) as f64;
    if expect_empty && found > 0 {
        return Err(CliError::usage(
            "an empty scan found a key (a generated key collided)",
        ));
    }
    let s: Stats = store.stats();
    let blocks = (s.data_block_reads + s.block_cache_hits)
        - (before.data_block_reads + before.block_cache_hits);
    Ok(Row {
        nanos,
        blocks: blocks as f64 / scans.len().max(1) as f64,
        probes: s.range_probes - before.range_probes,
        empty_said_maybe: s.range_false_positives - before.range_false_positives,
        skipped: s.range_skipped - before.range_skipped,
    })
}

impl Run for BenchRange {
    fn run(self, _g: &Global) -> Result<Exit, CliError> {
        let tmp = tempfile::tempdir().map_err(filterstore::Error::from)?;
        let opts = Options::default()
            .compaction_trigger(None)
            .memtable_bytes(1 << 30);
        let store = Store::open(tmp.path(), opts)?;
        let mut rng = Rng(self.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let per = self.count.div_ceil(self.tables.max(1));
        let mut keys = Vec::with_capacity(self.count as usize);
        let value = [b'v'; 100];
        eprintln!(
            "bench range: loading {} keys into {} tables",
            self.count, self.tables
        );
        for i in 0..self.count {
            let k = rng.key();
            keys.push(k);
            store.put(k.to_be_bytes(), value)?;
            if (i + 1) % per == 0 {
                store.flush()?;
            }
        }
        store.flush()?;
        let keys_total = store.stats().table_keys().max(1) as f64;
        println(format_args!(
            "{} keys in {} tables; {} scans per row; blocks = data blocks per scan (reads + cache hits)",
            self.count,
            store.stats().tables.len(),
            self.scans
        ))?;
        println(format_args!(
            "\n{:>5} {:>8} {:>9} {:>5} {:>10} {:>8} {:>8} {:>10} {:>10} {:>12} {:>8} {:>8}",
            "bits",
            "bits/key",
            "ranges",
            "ℓ",
            "empty ns",
            "blocks",
            "avoided",
            "obs. FPR",
            "bound",
            "non-empty ns",
            "blocks",
            "avoided"
        ))?;
        // Blocks per scan without a range filter, per (ℓ, ranges), empty and non-empty.
        let mut unfiltered: std::collections::HashMap<(u32, &str), (f64, f64)> =
            std::collections::HashMap::new();
        let mut bits_list = self.bits.clone();
        // The baseline first, so every later row has its "avoided".
        bits_list.sort_by_key(|&b| b != 0.0);
        for &bits in &bits_list {
            store.refilter_ranges(bits)?;
            let real_bits = store.stats().range_filter_bytes as f64 * 8.0 / keys_total;
            for log_len in 0..=10u32 {
                let len = 1u128 << log_len;
                let present: Vec<(u128, u128)> = (0..self.scans)
                    .map(|_| {
                        let k = keys[(rng.next() % keys.len() as u64) as usize];
                        (k, k.saturating_add(len))
                    })
                    .collect();
                for ranges in ["uniform", "clustered"] {
                    let empty: Vec<(u128, u128)> = (0..self.scans)
                        .map(|_| {
                            let a = match ranges {
                                "uniform" => rng.key() | 1,
                                _ => keys[(rng.next() % keys.len() as u64) as usize] + 1,
                            };
                            (a, a.saturating_add(len))
                        })
                        .collect();
                    let e = row(&store, &empty, true)?;
                    let n = row(&store, &present, false)?;
                    let decided = e.empty_said_maybe + e.skipped;
                    let fpr = if bits == 0.0 || decided == 0 {
                        "-".to_string()
                    } else {
                        format!("{:.6}", e.empty_said_maybe as f64 / decided as f64)
                    };
                    let bound = if bits == 0.0 {
                        "-".to_string()
                    } else {
                        format!("{:.6}", grafite_bound(len as u64, real_bits).min(1.0))
                    };
                    let _ = e.probes;
                    if bits == 0.0 {
                        unfiltered.insert((log_len, ranges), (e.blocks, n.blocks));
                    }
                    let avoided = |i: usize, now: f64| match unfiltered.get(&(log_len, ranges)) {
                        Some(&b) if bits != 0.0 => {
                            let base = if i == 0 { b.0 } else { b.1 };
                            if base > 0.0 {
                                format!("{:.1}%", (1.0 - now / base) * 100.0)
                            } else {
                                "-".to_string()
                            }
                        }
                        _ => "-".to_string(),
                    };
                    println(format_args!(
                        "{bits:>5} {real_bits:>8.2} {ranges:>9} {len:>5} {:>10.0} {:>8.3} {:>8} {fpr:>10} {bound:>10} {:>12.0} {:>8.3} {:>8}",
                        e.nanos, e.blocks, avoided(0, e.blocks), n.nanos, n.blocks, avoided(1, n.blocks)
                    ))?;
                }
            }
        }
        Ok(Exit::Success)
    }
}
