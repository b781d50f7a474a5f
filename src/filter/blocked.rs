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
    let per_block = |j: f64| (1.0 - q.powf(k as f64 * j)).powi(k as i32);
    if lambda > 1e5 {
        // Far beyond any sane filter (a block holds 512 bits): the Poisson mass sits within
        // 0.4 % of λ, where the rate is 1 to machine precision. Avoids summing ~24·√λ terms
        // (and an O(λ) factorial) for headers that claim absurd n.
        return per_block(lambda);
    }
    let hi = (lambda + 12.0 * lambda.sqrt() + 20.0).ceil() as u64;
    let lo = (lambda - 12.0 * lambda.sqrt()).floor().max(0.0) as u64;
    // Pois(j) and (q^k)^j by recurrence from j = lo: two multiplications per term instead of
    // an exp and a powf (params() evaluates this sum a few hundred times per build).
    let qk = q.powi(k as i32);
    let mut p = (lo as f64 * lambda.ln() - lambda - ln_factorial(lo)).exp();
    let mut qkj = qk.powf(lo as f64);
    let mut sum = 0.0;
    for j in lo..=hi {
        if j > lo {
            p *= lambda / j as f64;
            qkj *= qk;
        }
        sum += p * (1.0 - qkj).powi(k as i32);
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
    // The rate is unimodal in k and the best k only grows as blocks are added, so after the
    // first full scan only a window around the previous best is tried (30 Poisson sums per
    // step made params() dominate the build of small filters).
    let mut ks = 1..=MAX_K;
    loop {
        let best = ks
            .clone()
            .map(|k| (theoretical_fpr(blocks, k, n), k))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((f, k)) = best {
            if f <= AIM * fpr || blocks > 8 * m.div_ceil(BLOCK_BITS) + 8 {
                return (blocks, k);
            }
            ks = k.saturating_sub(2).max(1)..=(k + 3).min(MAX_K);
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

/// The smallest hash h with fastrange(h, blocks) >= b, as u128 (2^64 for b = blocks):
/// ⌈b·2^64 / blocks⌉.
fn first_hash(b: u64, blocks: u64) -> u128 {
    ((b as u128) << 64).div_ceil(blocks as u128)
}

/// Builds a blocked Bloom block over `hashes` on the current rayon pool.
///
/// The block array is split into one contiguous range per thread; each thread scans all
/// hashes and sets bits only for keys whose block lies in its range (no locks, no atomics).
/// The scan compares raw hashes against the range's precomputed hash bounds.
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
        // One contiguous block range per thread. fastrange is monotonic in the hash, so
        // "block in lo..hi" is "hash in first_hash(lo)..=first_hash(hi) - 1": each thread
        // compares raw hashes against two bounds and reduces only its own keys.
        let per = blocks.div_ceil(threads);
        body.par_chunks_mut((per * 64) as usize)
            .enumerate()
            .for_each(|(c, chunk)| {
                let lo = c as u64 * per;
                let hi = lo + (chunk.len() / 64) as u64;
                // lo < blocks and hi <= blocks, so both bounds fit in u64.
                let h_lo = first_hash(lo, blocks) as u64;
                let h_hi = (first_hash(hi, blocks) - 1) as u64;
                let mut put = |h: u64| {
                    let off = ((fastrange(h, blocks) - lo) * 64) as usize;
                    if let Some(block) = chunk.get_mut(off..off + 64) {
                        insert(block, h, k);
                    }
                };
                // Branch-free selection: a key is ours with probability 1/threads, so an `if`
                // mispredicts on about half the keys. Copy every hash into a small buffer and
                // advance the fill only for ours, then insert the buffer's keys.
                let mut buf = [0u64; 1024];
                let mut fill = 0usize;
                for &h in hashes {
                    buf[fill] = h;
                    fill += (h.wrapping_sub(h_lo) <= h_hi - h_lo) as usize;
                    if fill == buf.len() {
                        buf.iter().for_each(|&h| put(h));
                        fill = 0;
                    }
                }
                buf[..fill].iter().for_each(|&h| put(h));
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
    /// The same parameters over another body (one already checked against them).
    #[inline]
    pub(super) fn rebind<'b>(&self, body: &'b [u8]) -> BlockedView<'b> {
        BlockedView { body, ..*self }
    }

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
        // The same bits as `probe_bits`, two per branch: an absent key's first bit is set
        // about half the time, so a branch per bit mispredicts on about every other key;
        // a branch per pair (both set about a quarter of the time) much less often.
        let bit = |g: u64| {
            let p = (g >> 55) as usize;
            (block[(p / 8) & 63] >> (p % 8)) & 1
        };
        let mut g = hash.rotate_left(32) | 1;
        let mut left = self.k;
        while left >= 2 {
            let b1 = bit(g);
            g = g.wrapping_mul(MULT);
            let b2 = bit(g);
            g = g.wrapping_mul(MULT);
            if b1 & b2 == 0 {
                return false;
            }
            left -= 2;
        }
        left == 0 || bit(g) != 0
    }

    /// Reads one byte of the key's block (one cache line; see [`crate::Filter::touch`]).
    #[inline]
    pub fn touch(&self, hash: u64) -> u8 {
        let off = (fastrange(hash, self.blocks) * 64) as usize;
        self.body.get(off).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::mix64;

    /// The hash bounds of a block range agree with fastrange exactly at every boundary.
    #[test]
    fn first_hash_bounds_match_fastrange() {
        for blocks in [1u64, 2, 3, 7, 16, 1000, 195_313, (1 << 40) + 3, u64::MAX] {
            for t in 0..500u64 {
                let b = if t < 3 {
                    t.min(blocks - 1)
                } else {
                    mix64(t) % blocks
                };
                let h = first_hash(b, blocks);
                assert!(h < 1 << 64);
                assert_eq!(fastrange(h as u64, blocks), b, "blocks={blocks} b={b}");
                if b > 0 {
                    assert_eq!(
                        fastrange(h as u64 - 1, blocks),
                        b - 1,
                        "blocks={blocks} b={b}"
                    );
                }
            }
            assert_eq!(first_hash(blocks, blocks), 1 << 64);
        }
    }

    /// The partitioned parallel build writes exactly the bytes of the sequential one.
    #[test]
    fn parallel_build_equals_sequential() {
        let hashes: Vec<u64> = (0..200_000u64).map(mix64).collect();
        let pool = |t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
        };
        for fpr in [0.3, 0.01, 0.0001] {
            let one = pool(1).install(|| build(fpr, &hashes));
            for t in [2, 3, 5] {
                assert_eq!(pool(t).install(|| build(fpr, &hashes)), one, "{t} threads");
            }
        }
    }
}
