//! Classic Bloom filter (thesis ch. 3): one array of m bits, k probes per key by enhanced
//! double hashing over the whole array.
//!
//! m = ⌈−n·ln ε / (ln 2)²⌉ (at least 64), k = round((m/n)·ln 2) clamped to 1..=30.
//! Probe i of hash h: x₀ = h, y₀ = mix64(h); position = fastrange(xᵢ, m);
//! xᵢ₊₁ = xᵢ + yᵢ, yᵢ₊₁ = yᵢ + i (wrapping 64-bit). Positions are 64-bit, so m may exceed 2³².
//! Body: ⌈m/64⌉ little-endian u64 words; bit p is bit (p mod 64) of word p/64.

use rayon::prelude::*;

use super::{FilterKind, Header, View};
use crate::error::{Error, Result};
use crate::hash::{fastrange, mix64};

/// Largest number of probes accepted from disk.
pub const MAX_K: u32 = 30;

/// Smallest filter (in bits; 8 MiB) built with more than one thread. Below it the array
/// sits in the caches and the build is bound by computing probes, which every thread of the
/// partitioned build repeats for every key, so a second thread cannot help.
pub const PAR_MIN_BITS: u64 = 1 << 26;

/// Bits m and probes k for `n` keys at target `fpr`.
pub fn params(n: u64, fpr: f64) -> (u64, u32) {
    let ln2 = std::f64::consts::LN_2;
    let m = ((-(n as f64) * fpr.ln()) / (ln2 * ln2)).ceil().max(64.0) as u64;
    let k = if n == 0 {
        1
    } else {
        ((m as f64 / n as f64) * ln2)
            .round()
            .clamp(1.0, MAX_K as f64) as u32
    };
    (m, k)
}

/// (1 − e^(−kn/m))^k, the thesis's false-positive rate.
pub fn theoretical_fpr(m: u64, k: u32, n: u64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    (1.0 - (-(k as f64) * n as f64 / m as f64).exp()).powi(k as i32)
}

#[inline]
fn for_each_probe(hash: u64, m: u64, k: u32, mut f: impl FnMut(u64) -> bool) -> bool {
    let mut x = hash;
    let mut y = mix64(hash);
    for i in 0..k {
        if !f(fastrange(x, m)) {
            return false;
        }
        x = x.wrapping_add(y);
        y = y.wrapping_add(i as u64);
    }
    true
}

/// Builds a Bloom filter block over `hashes` on the current rayon pool.
///
/// With more than one thread and at least [`PAR_MIN_BITS`] bits, the bit array is split into
/// one contiguous range per thread; each thread computes every key's probes and sets only
/// those in its range, branch-free (no locks, no atomics). A key's probes span the whole
/// array, so keys cannot be partitioned; the probe arithmetic is repeated per thread and the
/// random writes are divided. Measured on 10M keys (`tools/src/bin/filter_scaling.rs`, quiet
/// machine): 1.3–1.85× at ε = 1 %, about 1.0× at ε = 0.1 % (k = 10 probes per key per thread).
pub fn build(fpr: f64, hashes: &[u64]) -> Vec<u8> {
    let n = hashes.len() as u64;
    let (m, k) = params(n, fpr);
    let words = m.div_ceil(64) as usize;
    let bits: Vec<u64> = if rayon::current_num_threads() <= 1 || m < PAR_MIN_BITS {
        let mut bits = vec![0u64; words];
        for &h in hashes {
            for_each_probe(h, m, k, |p| {
                bits[(p / 64) as usize] |= 1 << (p % 64);
                true
            });
        }
        bits
    } else {
        // One contiguous range of words per thread: every thread computes every key's probes
        // but sets only the bits in its own range (no locks, no atomics, half the memory
        // touched per thread with two threads).
        let mut bits = vec![0u64; words];
        let per = words.div_ceil(rayon::current_num_threads());
        bits.par_chunks_mut(per).enumerate().for_each(|(c, chunk)| {
            let lo = (c * per) as u64 * 64;
            let hi = lo + chunk.len() as u64 * 64;
            for &h in hashes {
                for_each_probe(h, m, k, |p| {
                    // Branch-free: a probe outside the range ORs a zero mask into word 0.
                    let inside = p.wrapping_sub(lo) < hi - lo;
                    let idx = if inside { ((p - lo) / 64) as usize } else { 0 };
                    chunk[idx] |= (inside as u64) << (p % 64);
                    true
                });
            }
        });
        bits
    };
    let mut body = Vec::with_capacity(words * 8);
    for w in bits {
        body.extend_from_slice(&w.to_le_bytes());
    }
    Header {
        kind: FilterKind::Bloom,
        version: FilterKind::Bloom.version(),
        n,
        target_fpr: fpr,
        p1: m,
        p2: k,
        p3: 0,
        body_len: body.len() as u64,
    }
    .encode_block(&body)
}

/// The checked parameters of a Bloom body (queries take the body).
#[derive(Clone, Copy, Debug)]
pub struct BloomView {
    m: u64,
    k: u32,
}

impl BloomView {
    pub(super) fn new(h: &Header, body: &[u8]) -> Result<Self> {
        if h.p1 == 0 {
            return Err(Error::corrupt(32, "bloom filter with zero bits"));
        }
        if h.p2 == 0 || h.p2 > MAX_K {
            return Err(Error::corrupt(
                40,
                format!("bloom probe count {} outside 1..={MAX_K}", h.p2),
            ));
        }
        if h.p1.div_ceil(64).checked_mul(8) != Some(body.len() as u64) {
            return Err(Error::corrupt(
                32,
                format!(
                    "bloom of {} bits needs {} body bytes, found {}",
                    h.p1,
                    h.p1.div_ceil(64) * 8,
                    body.len()
                ),
            ));
        }
        Ok(BloomView { m: h.p1, k: h.p2 })
    }

    /// False means certainly absent.
    #[inline]
    pub fn may_contain(&self, body: &[u8], hash: u64) -> bool {
        for_each_probe(hash, self.m, self.k, |p| {
            let byte = body.get((p / 8) as usize).copied().unwrap_or(0);
            byte & (1 << (p % 8)) != 0
        })
    }

    /// Reads the bytes of the first two probes (where most absent keys are decided) and
    /// returns them folded, so that a caller can bring them into cache ahead of
    /// [`may_contain`](Self::may_contain) with a plain load (see [`crate::Filter::touch`]).
    #[inline]
    pub fn touch(&self, body: &[u8], hash: u64) -> u8 {
        let (mut acc, mut left) = (0u8, 2);
        for_each_probe(hash, self.m, self.k, |p| {
            acc ^= body.get((p / 8) as usize).copied().unwrap_or(0);
            left -= 1;
            left > 0
        });
        acc
    }

    /// Prefetches the lines of the first two probes (see [`crate::Filter::prefetch_in`]).
    #[inline]
    pub fn prefetch(&self, body: &[u8], hash: u64) {
        let mut left = 2;
        for_each_probe(hash, self.m, self.k, |p| {
            super::simd::prefetch(body, (p / 8) as usize);
            left -= 1;
            left > 0
        });
    }
}

/// The query kernel of bloom views (see `Filter::may_contain`).
pub(super) fn run(v: &View, hash: u64, body: &[u8]) -> bool {
    match v {
        View::Bloom(b) => b.may_contain(body, hash),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Positions are computed in 64 bits: with m = 2^34 bits (a 2 GiB filter, never
    /// allocated here) the probe sequence must reach above 2^32 and stay below m. A 32-bit
    /// truncation anywhere in the probe arithmetic would keep every position under 2^32.
    #[test]
    fn probes_cover_more_than_2_pow_32_bits() {
        let m = 1u64 << 34;
        let (mut above, mut total) = (0u64, 0u64);
        for i in 0..10_000u64 {
            let h = mix64(i ^ 0x1234_5678);
            for_each_probe(h, m, 7, |p| {
                assert!(p < m, "probe {p} outside 0..{m}");
                total += 1;
                if p >= 1 << 32 {
                    above += 1;
                }
                true
            });
        }
        assert_eq!(total, 70_000);
        // Uniform positions: 3/4 of them lie above 2^32; demand at least 70 %.
        assert!(above * 100 >= total * 70, "{above} of {total} above 2^32");
    }

    #[test]
    fn probe_count_and_range_for_odd_m() {
        for m in [64u64, 65, 1000, 12_345_677] {
            let mut seen = 0;
            for_each_probe(0xdead_beef_u64.wrapping_mul(m), m, 13, |p| {
                assert!(p < m);
                seen += 1;
                true
            });
            assert_eq!(seen, 13);
        }
    }

    /// The partitioned parallel build (forced here on a filter above PAR_MIN_BITS) sets
    /// exactly the bits of the sequential one.
    #[test]
    fn parallel_build_equals_sequential() {
        let hashes: Vec<u64> = (0..50_000u64).map(mix64).collect();
        // ε tiny enough that m ≥ PAR_MIN_BITS with only 50,000 keys.
        let fpr = 1e-300;
        assert!(params(50_000, fpr).0 >= PAR_MIN_BITS);
        let pool = |t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
        };
        let one = pool(1).install(|| build(fpr, &hashes));
        assert_eq!(pool(2).install(|| build(fpr, &hashes)), one);
    }

    #[test]
    fn params_match_formula() {
        let (m, k) = params(1_000_000, 0.01);
        assert_eq!(m, 9_585_059);
        assert_eq!(k, 7);
        assert_eq!(params(0, 0.01), (64, 1));
    }
}
