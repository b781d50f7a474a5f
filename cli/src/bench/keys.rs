//! The benchmark's generated keys and values, and keys laid out for timed loops.

use super::BenchConfig;
use filterstore::{Error, Result};

/// SplitMix64: seeded, reproducible key material.
pub(super) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Generated key `i` of a seed: 16 bytes from SplitMix64 (also used by the examples, so that
/// their stores hold the same keys as the benchmark's).
pub fn key16(seed: u64, i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&splitmix(seed ^ (2 * i)).to_be_bytes());
    k[8..].copy_from_slice(&splitmix(seed ^ (2 * i + 1)).to_be_bytes());
    k
}

pub(super) fn gen_key(seed: u64, i: u64) -> Vec<u8> {
    key16(seed, i).to_vec()
}

/// The value of key `i`, written into `out` (one buffer for a whole load, so the timed loop
/// measures puts, not an allocation per value).
pub(super) fn value_into(i: u64, len: usize, out: &mut Vec<u8>) {
    let tag = i.to_le_bytes();
    out.clear();
    out.extend((0..len).map(|j| tag[j % 8] ^ (j as u8)));
}

/// Keys laid out back to back, so that timing lookups does not also time the harness's own
/// cache misses on one heap allocation per key.
pub(super) struct FlatKeys {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl FlatKeys {
    pub(super) fn new(keys: &[Vec<u8>]) -> FlatKeys {
        let mut bytes = Vec::with_capacity(keys.iter().map(Vec::len).sum());
        let mut ends = Vec::with_capacity(keys.len());
        for k in keys {
            bytes.extend_from_slice(k);
            ends.push(bytes.len());
        }
        FlatKeys { bytes, ends }
    }

    /// `count` keys drawn at random (with repetition) from `self`, laid out in draw order, so
    /// a timed loop reads them sequentially instead of missing cache on every draw.
    pub(super) fn drawn(&self, count: u64, seed: u64) -> FlatKeys {
        let mut out = FlatKeys {
            bytes: Vec::new(),
            ends: Vec::with_capacity(count as usize),
        };
        let mut x = seed;
        for _ in 0..count {
            x = splitmix(x);
            out.bytes
                .extend_from_slice(self.get((x % self.len() as u64) as usize));
            out.ends.push(out.bytes.len());
        }
        out
    }

    pub(super) fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// Present keys, absent keys (inside the key ranges first, outside after).
pub(super) struct Keys {
    pub(super) present: FlatKeys,
    pub(super) absent: FlatKeys,
    pub(super) outside: u64,
}

pub(super) fn make_keys(cfg: &BenchConfig) -> Result<Keys> {
    let lookups = cfg.lookups.max(cfg.cold_lookups);
    let outside = lookups / 10;
    let mut absent: Vec<Vec<u8>>;
    let present: Vec<Vec<u8>>;
    match &cfg.keys_file {
        None => {
            present = (0..cfg.keys).map(|i| gen_key(cfg.seed, i)).collect();
            absent = (0..lookups - outside)
                .map(|i| gen_key(cfg.seed ^ 0x5555_5555, i))
                .collect();
        }
        Some(path) => {
            let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
            let mut lines: Vec<&[u8]> = text
                .split(|&b| b == b'\n')
                .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                .filter(|l| !l.is_empty())
                .collect();
            lines.sort_unstable();
            lines.dedup();
            if lines.len() < 20 {
                return Err(Error::InvalidArgument(format!(
                    "{} has fewer than 20 distinct keys",
                    path.display()
                )));
            }
            // Interleave so that held-out keys lie inside every table's range.
            let mut order: Vec<usize> = (0..lines.len()).collect();
            order.sort_by_key(|&i| splitmix(cfg.seed ^ i as u64));
            let (mut p, mut a) = (Vec::new(), Vec::new());
            for (j, &i) in order.iter().enumerate() {
                if j % 10 == 9 {
                    a.push(lines[i].to_vec());
                } else {
                    p.push(lines[i].to_vec());
                }
            }
            present = p;
            // Cycle the held-out keys up to the number of lookups.
            absent = (0..(lookups - outside) as usize)
                .map(|i| a[i % a.len()].clone())
                .collect();
        }
    }
    // Keys sorting after every loaded key: outside every table's range.
    let top = present.iter().max().cloned().unwrap_or_default();
    for i in 0..outside {
        let mut k = top.clone();
        k.extend_from_slice(&[0xff, 0xff]);
        k.extend_from_slice(&i.to_be_bytes());
        absent.push(k);
    }
    // Shuffle so that inside and outside keys alternate.
    let mut idx: Vec<usize> = (0..absent.len()).collect();
    idx.sort_by_key(|&i| splitmix(cfg.seed ^ 0xabcdef ^ i as u64));
    let absent: Vec<Vec<u8>> = idx
        .into_iter()
        .map(|i| std::mem::take(&mut absent[i]))
        .collect();
    Ok(Keys {
        present: FlatKeys::new(&present),
        absent: FlatKeys::new(&absent),
        outside,
    })
}
