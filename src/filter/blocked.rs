//! Cache-line blocked Bloom filter: every probe of a key falls in one 64-byte block, so a
//! query touches one cache line.
//!
//! Block of hash h: b = fastrange(h, B) (chosen by the high bits). Probes: g₀ = rotl(h, 32) | 1,
//! probe i sets bit gᵢ >> 55 (0..512) of block b; gᵢ₊₁ = gᵢ · 0x9e3779b97f4a7c15 (mod 2⁶⁴).
//! Body: B blocks of 64 bytes; bit p of a block is bit (p mod 8) of its byte p/8.
//!
//! Sizing: blocks hold a Poisson(λ = n/B) number of keys, so the false-positive rate is
//! Σⱼ Pois(j; λ)·(1 − (1 − 1/512)^(k·j))^k ([`theoretical_fpr`]). The builder grows B from the
//! classic Bloom size in 0.5 % steps, trying every k, until that rate is at most 0.98·ε.

use rayon::prelude::*;

use super::{FilterKind, Header};
use crate::error::{Error, Result};
use crate::hash::fastrange;

/// Bits per block.
pub const BLOCK_BITS: u64 = 512;
/// Largest number of probes accepted from disk.
pub const MAX_K: u32 = 30;
/// The builder aims the theoretical rate at this fraction of ε, so the observed rate meets ε.
const AIM: f64 = 0.98;
const MULT: u64 = 0x9e37_79b9_7f4a_7c15;

/// Σⱼ Pois(j; n/B)·(1 − (1 − 1/512)^(k·j))^k: the false-positive rate of `blocks` blocks,
/// `k` probes and `n` keys.
pub fn theoretical_fpr(blocks: u64, k: u32, n: u64) -> f64 {
    if n == 0 || blocks == 0 {
        return 0.0;
    }
    let lambda = n as f64 / blocks as f64;
    // Past 1e5 keys per block every term of the sum is 1.0 in f64; stopping here keeps a
    // header with a huge n (a damaged or hostile file) from costing O(n) time.
    if lambda > 1e5 {
        return 1.0;
    }
    let q = 1.0 - 1.0 / BLOCK_BITS as f64;
    let hi = (lambda + 12.0 * lambda.sqrt() + 20.0).ceil() as u64;
    let lo = (lambda - 12.0 * lambda.sqrt()).floor().max(0.0) as u64;
    let ln_lambda = lambda.ln();
    let mut sum = 0.0;
    let mut ln_fact = ln_factorial(lo);
    for j in lo..=hi {
        if j > lo {
            ln_fact += (j as f64).ln();
        }
        let p = (j as f64 * ln_lambda - lambda - ln_fact).exp();
        sum += p * (1.0 - q.powf(k as f64 * j as f64)).powi(k as i32);
    }
    sum
}

fn ln_factorial(n: u64) -> f64 {
    (1..=n).map(|i| (i as f64).ln()).sum()
}

/// Blocks B and probes k for `n` keys at target `fpr`.
pub fn params(n: u64, fpr: f64) -> (u64, u32) {
    if n == 0 {
        return (1, 1);
    }
    let (m, _) = super::bloom::params(n, fpr);
    let mut blocks = m.div_ceil(BLOCK_BITS).max(1);
    loop {
        let best = (1..=MAX_K)
            .map(|k| (theoretical_fpr(blocks, k, n), k))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((f, k)) = best {
            if f <= AIM * fpr || blocks > 8 * m.div_ceil(BLOCK_BITS) + 8 {
                return (blocks, k);
            }
        }
        blocks += (blocks / 200).max(1);
    }
}

#[inline]
fn probe_bits(hash: u64, k: u32, mut f: impl FnMut(u32) -> bool) -> bool {
    let mut g = hash.rotate_left(32) | 1;
    for _ in 0..k {
        if !f((g >> 55) as u32) {
            return false;
        }
        g = g.wrapping_mul(MULT);
    }
    true
}

fn insert(block: &mut [u8], hash: u64, k: u32) {
    probe_bits(hash, k, |p| {
        if let Some(b) = block.get_mut((p / 8) as usize) {
            *b |= 1 << (p % 8);
        }
        true
    });
}

/// Builds a blocked Bloom block over `hashes` on the current rayon pool.
///
/// The block array is split into one contiguous range per thread; each thread scans all
/// hashes and sets bits only for keys whose block lies in its range (no locks, no atomics).
pub fn build(fpr: f64, hashes: &[u64]) -> Vec<u8> {
    let n = hashes.len() as u64;
    let (blocks, k) = params(n, fpr);
    let mut body = vec![0u8; (blocks * 64) as usize];
    let threads = rayon::current_num_threads() as u64;
    if threads <= 1 || blocks < threads * 16 {
        for &h in hashes {
            let b = fastrange(h, blocks) as usize;
            insert(&mut body[b * 64..b * 64 + 64], h, k);
        }
    } else {
        let per = blocks.div_ceil(threads * 4);
        body.par_chunks_mut((per * 64) as usize)
            .enumerate()
            .for_each(|(c, chunk)| {
                let lo = c as u64 * per;
                let hi = lo + (chunk.len() / 64) as u64;
                for &h in hashes {
                    let b = fastrange(h, blocks);
                    if b >= lo && b < hi {
                        let off = ((b - lo) * 64) as usize;
                        insert(&mut chunk[off..off + 64], h, k);
                    }
                }
            });
    }
    Header {
        kind: FilterKind::BlockedBloom,
        n,
        target_fpr: fpr,
        p1: blocks,
        p2: k,
        p3: 0,
        body_len: body.len() as u64,
    }
    .encode_block(&body)
}

/// Zero-copy reader over a blocked Bloom body.
#[derive(Clone, Copy, Debug)]
pub struct BlockedView<'a> {
    body: &'a [u8],
    blocks: u64,
    k: u32,
}

impl<'a> BlockedView<'a> {
    pub(super) fn new(h: &Header, body: &'a [u8]) -> Result<Self> {
        if h.p1 == 0 {
            return Err(Error::corrupt(32, "blocked bloom filter with zero blocks"));
        }
        if h.p2 == 0 || h.p2 > MAX_K {
            return Err(Error::corrupt(
                40,
                format!("blocked bloom probe count {} outside 1..={MAX_K}", h.p2),
            ));
        }
        if h.p1.checked_mul(64) != Some(body.len() as u64) {
            return Err(Error::corrupt(
                32,
                format!(
                    "{} blocks need {} body bytes, found {}",
                    h.p1,
                    h.p1.saturating_mul(64),
                    body.len()
                ),
            ));
        }
        Ok(BlockedView {
            body,
            blocks: h.p1,
            k: h.p2,
        })
    }

    /// False means certainly absent.
    #[inline]
    pub fn may_contain(&self, hash: u64) -> bool {
        let off = (fastrange(hash, self.blocks) * 64) as usize;
        let Some(block) = self.body.get(off..off + 64) else {
            return true;
        };
        let block: &[u8; 64] = match block.try_into() {
            Ok(b) => b,
            Err(_) => return true,
        };
        probe_bits(hash, self.k, |p| {
            block[(p as usize / 8) & 63] & (1 << (p % 8)) != 0
        })
    }
}
