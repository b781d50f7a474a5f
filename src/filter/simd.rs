//! SIMD query kernels, chosen at run time.
//!
//! [`avx2`] and [`avx512`] say what the CPU has; a view checks once, when it is made, and
//! keeps a pointer to the kernel it may run: no per-query detection and no dispatch (the
//! pointer goes straight to the kernel; a safe wrapper in between cost a jump, measured as
//! 8 % of an in-cache query). Kernels are `unsafe fn` pointers (`filter::Run`) because
//! calling one on a CPU without its features is undefined; this module hands them out only
//! after the check.
//! Every kernel has a portable twin beside the kind's code that computes the same answer, and
//! the tests compare the two over random hashes on every machine (`Filter::portable`). On
//! other architectures, or x86-64 CPUs without AVX2, the portable code runs.
//!
//! This module is one of the crate's `unsafe` sites (all listed in `lib.rs`; another is the
//! call through the kernel pointer in `Filter::may_contain`): functions compiled for AVX2 or AVX-512, sound to call only after
//! the CPU was checked for them, the unaligned loads of a block, and the prefetch hint of
//! [`prefetch`].
#![allow(unsafe_code)]

use std::fmt;

use super::{Run, RunBatch};

/// A family of query kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Kernel {
    /// Portable code, no SIMD instructions (every filter kind but blocked-bloom version 2
    /// always runs on it).
    Scalar,
    /// AVX2 (x86-64).
    Avx2,
    /// AVX-512F (x86-64).
    Avx512,
}

impl Kernel {
    /// Every kernel, slowest first.
    pub const ALL: [Kernel; 3] = [Kernel::Scalar, Kernel::Avx2, Kernel::Avx512];

    /// The kernel's name, as `FILTERSTORE_KERNEL` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Avx2 => "avx2",
            Kernel::Avx512 => "avx512",
        }
    }

    /// The kernel named `s` (as [`name`](Self::name) spells it, any case, surrounding blanks
    /// ignored).
    pub fn parse(s: &str) -> Option<Kernel> {
        let s = s.trim();
        Kernel::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
    }

    /// True when this CPU can run the kernel.
    pub fn available(self) -> bool {
        match self {
            Kernel::Scalar => true,
            Kernel::Avx2 => avx2(),
            Kernel::Avx512 => avx512(),
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A blocked-bloom version 2 SIMD kernel: the query, the batched query over many keys (the
/// same test, inlined into a loop that prefetches ahead), the value the view keeps for
/// them in place of k (`BlockedView::arg`), and which instruction set they use.
#[derive(Clone, Copy)]
pub(super) struct SimdKernel {
    pub(super) run: Run,
    pub(super) batch: RunBatch,
    pub(super) arg: u32,
    pub(super) which: Kernel,
}

/// True when the CPU running this code has AVX2 (and BMI2, which the AVX2 kernels also use
/// for the block index: every CPU with AVX2 has it).
#[inline]
pub fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("bmi2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// True when the CPU running this code has AVX-512F.
#[inline]
pub fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Asks the CPU to bring the cache line of `body[at]` into cache, without waiting for it
/// (nothing when `at` is past the end). A hint: it never faults and changes no answer, but
/// unlike a load (see [`crate::Filter::touch`]) it does not hold up the instructions after
/// it while the line is on its way, so many misses can be in flight at once.
#[inline(always)]
pub(super) fn prefetch(body: &[u8], at: usize) {
    if let Some(b) = body.get(at) {
        prefetch_ref(b);
    }
}

/// Asks the CPU to bring the cache line of `*r` into cache, without waiting for it (see
/// [`prefetch`]): the global filter's batches issue it for buckets a few operations ahead.
#[inline(always)]
pub(crate) fn prefetch_ref<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE, the only feature `prefetcht0` needs, is part of the x86-64 baseline;
        // the pointer is to a live value (`r`), and a prefetch reads nothing back.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(r).cast()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::hint::black_box(r);
}

/// The fastest blocked-bloom version 2 kernel this CPU has for `k` probes among those up to
/// `ceiling` (`None`: any; see [`super::kernel::kernel_setting`]), with the value the view
/// keeps for it in place of k (`BlockedView::arg`); `None` for the portable code (a ceiling of
/// [`Kernel::Scalar`], or a CPU without AVX2 and AVX-512F). Left to choose, AVX2 for k ≤ 8
/// (one round of eight probes; measured as fast as or faster than AVX-512 on AMD Zen 4,
/// which splits 512-bit operations in two), AVX-512 for k > 8 (one round of sixteen instead
/// of two of eight: present keys at k = 10, 100k keys, 2.45 vs 3.5 ns).
pub(super) fn blocked_v2(k: u32, ceiling: Option<Kernel>) -> Option<SimdKernel> {
    match ceiling {
        Some(Kernel::Scalar) => None,
        Some(Kernel::Avx2) => blocked_v2_avx2(k),
        Some(Kernel::Avx512) => blocked_v2_avx512(k).or(blocked_v2_avx2(k)),
        None => {
            let avx2 = blocked_v2_avx2(k);
            if k <= 8 && avx2.is_some() {
                return avx2;
            }
            blocked_v2_avx512(k).or(avx2)
        }
    }
}

/// The blocked-bloom version 2 kernel for AVX2 and `k` probes, with its argument: the answer
/// of [`super::blocked::query_v2`] on the hash's block. `None` when the
/// CPU lacks AVX2, so a view holds this kernel only on a CPU that has it. For k ≤ 8 the
/// kernel is compiled for that k (its eight multipliers are a constant, and it reads nothing
/// of the view); for k > 8 one kernel loops over rounds of eight.
pub(super) fn blocked_v2_avx2(k: u32) -> Option<SimdKernel> {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        macro_rules! one_round {
            ($($k:literal)*) => {
                match k {
                    $($k => Some(SimdKernel {
                        run: x86::blocked_v2_avx2_k::<$k>,
                        batch: x86::retain_blocked_v2_avx2_k::<$k>,
                        arg: k,
                        which: Kernel::Avx2,
                    }),)*
                    _ => Some(SimdKernel {
                        run: x86::blocked_v2_avx2,
                        batch: x86::retain_blocked_v2_avx2,
                        arg: k,
                        which: Kernel::Avx2,
                    }),
                }
            };
        }
        return one_round!(1 2 3 4 5 6 7 8);
    }
    let _ = k;
    None
}

/// The same with AVX-512F. `None` when the CPU lacks AVX-512F. For k ≤ 16 the kernel's
/// argument is the mask of the k lanes in use, computed here once.
pub(super) fn blocked_v2_avx512(k: u32) -> Option<SimdKernel> {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        return Some(if k <= 16 {
            SimdKernel {
                run: x86::blocked_v2_avx512::<true>,
                batch: x86::retain_blocked_v2_avx512::<true>,
                arg: (1 << k) - 1,
                which: Kernel::Avx512,
            }
        } else {
            SimdKernel {
                run: x86::blocked_v2_avx512::<false>,
                batch: x86::retain_blocked_v2_avx512::<false>,
                arg: k,
                which: Kernel::Avx512,
            }
        });
    }
    let _ = k;
    None
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::super::blocked_layout::{block_of, lane_mults, POW};
    use super::super::View;
    use crate::hash::fastrange;

    /// `retain_maybe_in` for one kernel: the queries of `keys` (indices into `hashes`) in
    /// order, each key's block prefetched `ahead` keys before its query; the kernel is
    /// inlined into the loop (same target features), so a key costs no call.
    macro_rules! retain {
        ($name:ident, $kernel:ident, $feature:literal, <$($g:ident: $t:ty),*>) => {
            #[target_feature(enable = $feature)]
            pub(super) fn $name<$(const $g: $t),*>(
                view: &View,
                body: &[u8],
                keys: &[u32],
                hashes: &[u64],
                ahead: usize,
                maybe: &mut Vec<u32>,
            ) {
                let lines = (body.len() / 64) as u64;
                let prefetch = |h: u64| super::prefetch(body, 64 * fastrange(h, lines) as usize);
                for &i in keys.iter().take(ahead) {
                    prefetch(hashes[i as usize]);
                }
                for (j, &i) in keys.iter().enumerate() {
                    if let Some(&next) = keys.get(j + ahead) {
                        prefetch(hashes[next as usize]);
                    }
                    if $kernel::<$($g),*>(view, hashes[i as usize], body) {
                        maybe.push(i);
                    }
                }
            }
        };
    }
    retain!(retain_blocked_v2_avx2_k, blocked_v2_avx2_k, "avx2,bmi2", <K: u32>);
    retain!(retain_blocked_v2_avx2, blocked_v2_avx2, "avx2,bmi2", <>);
    retain!(retain_blocked_v2_avx512, blocked_v2_avx512, "avx512f", <ONE_ROUND: bool>);

    /// Lane i's multiplier for one round of k ≤ 8 probes, as a constant of the kernel
    /// compiled for k (see [`lane_mults`]).
    struct OneRound<const K: u32>;
    impl<const K: u32> OneRound<K> {
        const MULTS: [u32; 8] = lane_mults(K);
    }

    /// Eight probes, k ≤ 8, compiled for k: lane i computes x·POW[i mod k] (one `vpmulld`
    /// by a constant), so lanes past k repeat a probe already made and nothing is masked;
    /// the word and bit of each lane as in [`blocked_v2_avx2`]. Reads nothing of the view:
    /// the body and k are all it needs.
    #[target_feature(enable = "avx2,bmi2")]
    pub(super) fn blocked_v2_avx2_k<const K: u32>(_: &View, hash: u64, body: &[u8]) -> bool {
        let Some(block) = block_of(body, hash) else {
            return true;
        };
        let ptr = block.as_ptr().cast::<__m256i>();
        // SAFETY: `block` is 64 readable bytes, the two loads read bytes 0..32 and 32..64,
        // `MULTS` is 8 u32s (32 bytes), and `loadu` has no alignment requirement.
        let (lo, hi, mults) = unsafe {
            (
                _mm256_loadu_si256(ptr),
                _mm256_loadu_si256(ptr.add(1)),
                _mm256_loadu_si256(OneRound::<K>::MULTS.as_ptr().cast()),
            )
        };
        let prod = _mm256_mullo_epi32(_mm256_set1_epi32(hash as u32 as i32), mults);
        let word = _mm256_srli_epi32::<28>(prod);
        let from_lo = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(lo, word));
        let from_hi = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(hi, word));
        // `blendv_ps` picks by each 32-bit lane's top bit: the product's, set for words 8..16.
        let words = _mm256_blendv_ps(from_lo, from_hi, _mm256_castsi256_ps(prod));
        let bit = _mm256_srli_epi32::<27>(_mm256_slli_epi32::<4>(prod));
        let mask = _mm256_sllv_epi32(_mm256_set1_epi32(1), bit);
        _mm256_testc_si256(_mm256_castps_si256(words), mask) != 0
    }

    /// Eight probes per round, any k (the kernel for k > 8): lane i computes x·POW[8r + i]
    /// (one `vpmulld`), whose top 4 bits pick one of the block's sixteen 32-bit words and
    /// next 5 bits the bit in it (the version 2 bit p = product >> 23 is bit p mod 32 of word
    /// p / 32). The words are fetched from the two 256-bit halves with `vpermd` and blended
    /// by the top bit; one `vptest` answers the round (the scheme of RocksDB's
    /// FastLocalBloom). Lanes at or past k are masked out, and a key rejected by a round is
    /// not probed further.
    #[target_feature(enable = "avx2,bmi2")]
    pub(super) fn blocked_v2_avx2(view: &View, hash: u64, body: &[u8]) -> bool {
        let View::Blocked(v) = view else {
            return true;
        };
        let Some(block) = block_of(body, hash) else {
            return true;
        };
        let k = v.arg;
        let ptr = block.as_ptr().cast::<__m256i>();
        // SAFETY: `block` is 64 readable bytes, the two loads read bytes 0..32 and 32..64,
        // and `loadu` has no alignment requirement.
        let (lo, hi) = unsafe { (_mm256_loadu_si256(ptr), _mm256_loadu_si256(ptr.add(1))) };
        let mults = _mm256_setr_epi32(
            POW[0] as i32,
            POW[1] as i32,
            POW[2] as i32,
            POW[3] as i32,
            POW[4] as i32,
            POW[5] as i32,
            POW[6] as i32,
            POW[7] as i32,
        );
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let mut h = hash as u32;
        let mut left = k as i32;
        loop {
            let prod = _mm256_mullo_epi32(_mm256_set1_epi32(h as i32), mults);
            let word = _mm256_srli_epi32::<28>(prod);
            let from_lo = _mm256_permutevar8x32_epi32(lo, word);
            let from_hi = _mm256_permutevar8x32_epi32(hi, word);
            // All ones where the word index is 8..16 (the product's top bit).
            let upper = _mm256_srai_epi32::<31>(prod);
            let words = _mm256_blendv_epi8(from_lo, from_hi, upper);
            // 1 in lanes i < left, 0 elsewhere: (i - left) is negative exactly there.
            let wanted = _mm256_srli_epi32::<31>(_mm256_sub_epi32(lanes, _mm256_set1_epi32(left)));
            let bit = _mm256_srli_epi32::<27>(_mm256_slli_epi32::<4>(prod));
            let mask = _mm256_sllv_epi32(wanted, bit);
            // testc: (!words & mask) == 0, i.e. every wanted bit is set.
            let all = _mm256_testc_si256(words, mask) != 0;
            if left <= 8 || !all {
                return all;
            }
            h = h.wrapping_mul(POW[8]);
            left -= 8;
        }
    }

    /// Sixteen probes per round: the block is one 512-bit register of sixteen 32-bit words,
    /// so lane i's word is one `vpermd` away (no halves to blend), its bit is a variable
    /// rotate of 1 (the rotate takes the count mod 32), lanes at or past k are left out by a
    /// mask register, and one `vptestnmd` finds any unset bit. `ONE_ROUND` (k ≤ 16) drops
    /// the loop and takes the lane mask (2^k − 1) as `arg`; otherwise `arg` is k.
    #[target_feature(enable = "avx512f")]
    pub(super) fn blocked_v2_avx512<const ONE_ROUND: bool>(
        view: &View,
        hash: u64,
        body: &[u8],
    ) -> bool {
        let View::Blocked(v) = view else {
            return true;
        };
        let Some(block) = block_of(body, hash) else {
            return true;
        };
        let arg = v.arg;
        // SAFETY: `block` is 64 readable bytes, `POW` at least 16 u32s, and `loadu` has no
        // alignment requirement.
        let (words, mults) = unsafe {
            (
                _mm512_loadu_si512(block.as_ptr().cast()),
                _mm512_loadu_epi32(POW.as_ptr().cast()),
            )
        };
        let one = _mm512_set1_epi32(1);
        let mut h = hash as u32;
        let mut left = arg;
        loop {
            let prod = _mm512_mullo_epi32(_mm512_set1_epi32(h as i32), mults);
            let word = _mm512_permutexvar_epi32(_mm512_srli_epi32::<28>(prod), words);
            let mask = _mm512_rolv_epi32(one, _mm512_srli_epi32::<23>(prod));
            let wanted: __mmask16 = if ONE_ROUND {
                arg as __mmask16
            } else if left >= 16 {
                0xffff
            } else {
                (1 << left) - 1
            };
            let all = _mm512_mask_testn_epi32_mask(wanted, word, mask) == 0;
            if ONE_ROUND || left <= 16 || !all {
                return all;
            }
            h = h.wrapping_mul(POW[16]);
            left -= 16;
        }
    }
}
