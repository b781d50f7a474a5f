//! Cache-line blocked Bloom filter: every probe of a key falls in one 64-byte block, so a
//! query touches one cache line.
//!
//! Block of hash h: b = fastrange(h, B) (chosen by the high bits). Probes (layout version 2):
//! with x = h mod 2³², probe i sets bit (x · M^i mod 2³²) >> 23 (0..512) of block b, where
//! M = 0x9e3779b9. The k products do not depend on each other, so eight of them are one AVX2
//! multiplication (the `simd` module); a portable version computes the same bits one by one.
//! Version 1 blocks (probes from 64-bit products gᵢ₊₁ = gᵢ · 0x9e3779b97f4a7c15, g₀ =
//! rotl(h, 32) | 1, bit gᵢ >> 55) are still read. Body: B blocks of 64 bytes; bit p of a block
//! is bit (p mod 8) of its byte p/8 (bit p mod 32 of its little-endian 32-bit word p/32).
//!
//! Sizing: blocks hold a Poisson(λ = n/B) number of keys, so the false-positive rate is
//! Σⱼ Pois(j; λ)·(1 − (1 − 1/512)^(k·j))^k ([`theoretical_fpr`]). The builder grows B from the
//! classic Bloom size in 0.5 % steps, trying every k, until that rate is at most 0.98·ε.

use rayon::prelude::*;

use super::blocked_layout::{block_of, POW};
pub use super::blocked_layout::{BLOCK_BITS, MAX_K};
use super::simd::Kernel;
use super::simd::SimdKernel;
use super::{FilterKind, Header, Run, RunBatch, View};
use crate::error::{Error, Result};
use crate::hash::fastrange;

/// The builder aims the theoretical rate at this fraction of ε, so the observed rate meets ε.
const AIM: f64 = 0.98;
/// Version 1's probe multiplier (64-bit golden ratio).
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

/// Sets the version 2 probe bits of `hash` in `block` (64 bytes).
fn insert(block: &mut [u8], hash: u64, k: u32) {
    let x = hash as u32;
    for &m in &POW[..k as usize] {
        let p = x.wrapping_mul(m) >> 23;
        if let Some(b) = block.get_mut((p / 8) as usize) {
            *b |= 1 << (p % 8);
        }
    }
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
        version: 2,
        n,
        target_fpr: fpr,
        p1: blocks,
        p2: k,
        p3: 0,
        body_len: body.len() as u64,
    }
    .encode_block(&body)
}

/// The checked parameters of a blocked Bloom body (queries take the body).
#[derive(Clone, Copy)]
pub struct BlockedView {
    k: u32,
    /// Layout version 1 (64-bit probe sequence, portable code only).
    v1: bool,
    /// The version 2 SIMD kernel this view runs (see `simd::blocked_v2`); `None` for the
    /// portable code.
    simd: Option<SimdKernel>,
    /// What the SIMD kernel reads in place of k; k otherwise.
    pub(super) arg: u32,
    /// The SIMD kernel's batched query (`Filter::retain_maybe_in`); `None` without SIMD.
    pub(super) batch: Option<RunBatch>,
}

impl std::fmt::Debug for BlockedView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockedView")
            .field("k", &self.k)
            .field("version", &if self.v1 { 1 } else { 2 })
            .field("kernel", &self.kernel())
            .finish()
    }
}

impl BlockedView {
    /// The same filter answering with the fastest kernel this CPU has up to `ceiling` (see
    /// [`Kernel`]); version 1 always answers with the portable code.
    pub(super) fn with_kernel(self, ceiling: Option<Kernel>) -> Self {
        let simd = if self.v1 {
            None
        } else {
            super::simd::blocked_v2(self.k, ceiling)
        };
        BlockedView {
            simd,
            arg: simd.map_or(self.k, |s| s.arg),
            batch: simd.map(|s| s.batch),
            ..self
        }
    }

    /// The kernel queries run on.
    pub(super) fn kernel(&self) -> Kernel {
        self.simd.map_or(Kernel::Scalar, |s| s.which)
    }

    pub(super) fn new(h: &Header, body: &[u8]) -> Result<Self> {
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
        let view = BlockedView {
            k: h.p2,
            v1: h.version == 1,
            simd: None,
            arg: h.p2,
            batch: None,
        };
        Ok(view.with_kernel(super::kernel::kernel_setting()))
    }

    /// The query kernel for this view (see `Filter::may_contain`): the probe scheme's, and for
    /// version 2 the kernel chosen for k (the portable one compiled for k ≤ 8, or SIMD).
    pub(super) fn run(&self) -> Run {
        if self.v1 {
            return |v, hash, body| match v {
                View::Blocked(b) => block_of(body, hash).is_none_or(|x| query_v1(x, hash, b.k)),
                _ => true,
            };
        }
        self.simd.map_or(portable_kernel(self.k), |s| s.run)
    }

    /// Reads one byte of the key's block (one cache line; see [`crate::Filter::touch`]).
    #[inline]
    pub fn touch(&self, body: &[u8], hash: u64) -> u8 {
        block_of(body, hash).map_or(0, |b| b[0])
    }

    /// Prefetches the key's block (see [`crate::Filter::prefetch_in`]).
    #[inline]
    pub fn prefetch(&self, body: &[u8], hash: u64) {
        let lines = (body.len() / 64) as u64;
        super::simd::prefetch(body, 64 * fastrange(hash, lines) as usize);
    }
}

/// The portable version 2 kernel for any k.
fn run_portable(v: &View, hash: u64, body: &[u8]) -> bool {
    match v {
        View::Blocked(b) => block_of(body, hash).is_none_or(|x| query_v2(x, hash as u32, b.k)),
        _ => true,
    }
}

/// The portable version 2 kernel compiled for k = `K`: reads nothing of the view.
fn run_portable_k<const K: usize>(_: &View, hash: u64, body: &[u8]) -> bool {
    block_of(body, hash).is_none_or(|x| query_v2_k::<K>(x, hash as u32))
}

/// The portable kernel for `k` probes: one compiled for k when k ≤ 8.
fn portable_kernel(k: u32) -> Run {
    match k {
        1 => run_portable_k::<1>,
        2 => run_portable_k::<2>,
        3 => run_portable_k::<3>,
        4 => run_portable_k::<4>,
        5 => run_portable_k::<5>,
        6 => run_portable_k::<6>,
        7 => run_portable_k::<7>,
        8 => run_portable_k::<8>,
        _ => run_portable,
    }
}

/// Probes per branch of the portable queries.
const GROUP: usize = 4;

/// Version 2 probe `m` of `x` in `block`: the probed bit in bit 0 (the rest is garbage). The
/// product's top 4 bits name one of the block's sixteen little-endian u32 words and the next
/// 5 the bit in it; the shift takes its count mod 32 (x86's `shrx` does so itself).
#[inline(always)]
fn probe(block: &[u8; 64], x: u32, m: u32) -> u32 {
    let p = x.wrapping_mul(m);
    let w = (p >> 28) as usize;
    let (words, _) = block.as_chunks::<4>();
    u32::from_le_bytes(words[w]) >> ((p >> 23) & 31)
}

/// Version 2 probes of `x` (the low 32 bits of the hash) in one block, without SIMD: four
/// probes per branch, each group without a branch (its bits ANDed). An absent key is
/// rejected by the first group about 15 times in 16, so the branch is well predicted and
/// the common query is four probes; a branch per probe or per pair mispredicts on a large
/// share of absent keys (each probe's bit is set about half the time). Must answer exactly
/// as the SIMD kernels.
#[inline]
pub(super) fn query_v2(block: &[u8; 64], x: u32, k: u32) -> bool {
    POW[..k as usize]
        .chunks(GROUP)
        .all(|g| g.iter().fold(1, |acc, &m| acc & probe(block, x, m)) & 1 != 0)
}

/// [`query_v2`] for k = `K`, unrolled.
#[inline(always)]
fn query_v2_k<const K: usize>(block: &[u8; 64], x: u32) -> bool {
    let mut i = 0;
    while i < K {
        let end = (i + GROUP).min(K);
        let mut acc = 1;
        for &m in &POW[i..end] {
            acc &= probe(block, x, m);
        }
        if acc & 1 == 0 {
            return false;
        }
        i = end;
    }
    true
}

/// Version 1 probes: bits gᵢ >> 55 with g₀ = rotl(h, 32) | 1, gᵢ₊₁ = gᵢ · [`MULT`], two per
/// branch (an absent key's first bit is set about half the time, so a branch per bit
/// mispredicts on about every other key; a branch per pair much less often).
#[inline]
fn query_v1(block: &[u8; 64], hash: u64, k: u32) -> bool {
    let bit = |g: u64| {
        let p = (g >> 55) as usize;
        (block[(p / 8) & 63] >> (p % 8)) & 1
    };
    let mut g = hash.rotate_left(32) | 1;
    let mut left = k;
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

    /// A version 1 block as the builder wrote it before version 2: kept here so that the
    /// version 1 reader stays tested on random key sets (the fixture pins one file).
    fn build_v1(fpr: f64, hashes: &[u64]) -> Vec<u8> {
        let n = hashes.len() as u64;
        let (blocks, k) = params(n, fpr);
        let mut body = vec![0u8; (blocks * 64) as usize];
        for &h in hashes {
            let b = fastrange(h, blocks) as usize;
            let mut g = h.rotate_left(32) | 1;
            for _ in 0..k {
                let p = (g >> 55) as usize;
                body[b * 64 + p / 8] |= 1 << (p % 8);
                g = g.wrapping_mul(MULT);
            }
        }
        Header {
            kind: FilterKind::BlockedBloom,
            version: 1,
            n,
            target_fpr: fpr,
            p1: blocks,
            p2: k,
            p3: 0,
            body_len: body.len() as u64,
        }
        .encode_block(&body)
    }

    /// Version 1 blocks are still read: no false negatives, and a false-positive rate on its
    /// theory, for every k the builder picks between ε = 30 % and 10⁻⁶.
    #[test]
    fn version_1_blocks_answer_as_before() {
        let hashes: Vec<u64> = (0..20_000u64).map(|i| mix64(i ^ 0xabc)).collect();
        for fpr in [0.3, 0.05, 0.01, 0.001, 1e-6] {
            let block = build_v1(fpr, &hashes);
            let f = crate::filter::Filter::decode(&block).expect("decode v1");
            assert_eq!(f.header().version, 1);
            assert!(!f.uses_simd());
            assert!(hashes.iter().all(|&h| f.may_contain(h)), "ε={fpr}");
            let q = 200_000u64;
            let pos = (0..q)
                .filter(|&i| f.may_contain(mix64(i + (1 << 40))))
                .count();
            let p = f.theoretical_fpr();
            let sd = (p * (1.0 - p) / q as f64).sqrt();
            let got = pos as f64 / q as f64;
            assert!(
                (got - p).abs() <= 5.0 * sd + 0.05 * p,
                "ε={fpr}: {got} vs {p}"
            );
        }
    }

    /// Every k from 1 to 30 (several SIMD rounds, partial last rounds): the portable and the
    /// dispatched (SIMD where the CPU has it) queries agree on every hash, present or not,
    /// on full and sparse blocks; so do the SIMD kernels' batched queries.
    #[test]
    fn portable_and_simd_agree_for_every_k() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for k in 1..=MAX_K {
            for fill in [0usize, 3, 40, 200] {
                let mut block = [0u8; 64];
                let mut keys = Vec::new();
                for _ in 0..fill {
                    x = mix64(x);
                    insert(&mut block, x, k);
                    keys.push(x);
                }
                let kernels: Vec<(&str, SimdKernel)> = [
                    ("avx2", super::super::simd::blocked_v2_avx2(k)),
                    ("avx512", super::super::simd::blocked_v2_avx512(k)),
                ]
                .into_iter()
                .filter_map(|(name, q)| Some((name, q?)))
                .collect();
                let view = |kernel: &SimdKernel| {
                    View::Blocked(BlockedView {
                        k,
                        v1: false,
                        simd: Some(*kernel),
                        arg: kernel.arg,
                        batch: Some(kernel.batch),
                    })
                };
                let check = |h: u64, want: bool| {
                    assert_eq!(query_v2(&block, h as u32, k), want, "k={k} fill={fill}");
                    for (name, kernel) in &kernels {
                        // SAFETY: `simd` returned these kernels, so the CPU has their features.
                        #[allow(unsafe_code)]
                        let got = unsafe { (kernel.run)(&view(kernel), h, &block) };
                        assert_eq!(got, want, "{name} k={k} fill={fill}");
                    }
                };
                let mut hashes = keys.clone();
                for &h in &keys {
                    check(h, true);
                }
                for _ in 0..2000 {
                    x = mix64(x);
                    check(x, query_v2(&block, x as u32, k));
                    hashes.push(x);
                }
                let all: Vec<u32> = (0..hashes.len() as u32).rev().collect();
                let want: Vec<u32> = all
                    .iter()
                    .copied()
                    .filter(|&i| query_v2(&block, hashes[i as usize] as u32, k))
                    .collect();
                for (name, kernel) in &kernels {
                    for ahead in [0, 16, 5000] {
                        let mut got = Vec::new();
                        // SAFETY: as above.
                        #[allow(unsafe_code)]
                        unsafe {
                            (kernel.batch)(&view(kernel), &block, &all, &hashes, ahead, &mut got)
                        };
                        assert_eq!(got, want, "{name} batch k={k} fill={fill} ahead {ahead}");
                    }
                }
            }
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
