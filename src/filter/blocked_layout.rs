//! The blocked-Bloom layout that the portable code (`blocked.rs`) and the SIMD kernels
//! (`simd.rs`) both read: which block a hash falls in, and the multipliers of the version 2
//! probes. `format.md` ("Blocked-bloom body") describes the same bytes.
//!
//! ```text
//! body: | block 0 (64 bytes) | block 1 | … | block B−1 |     block of h = fastrange(h, B)
//! block: bit p (0..512) is bit p mod 8 of byte p / 8
//! version 2 probe i of h, x = h mod 2³²: bit (x · POW[i] mod 2³²) >> 23
//! ```

use crate::hash::fastrange;

/// Bits per block.
pub const BLOCK_BITS: u64 = 512;
/// Largest number of probes accepted from disk.
pub const MAX_K: u32 = 30;
/// Version 2's probe multiplier (32-bit golden ratio).
const MULT32: u32 = 0x9e37_79b9;

/// `POW[i]` = 0x9e3779b9^i mod 2³²: probe i of version 2 is `(x · POW[i]) >> 23`.
pub(super) const POW: [u32; MAX_K as usize + 2] = {
    let mut t = [1u32; MAX_K as usize + 2];
    let mut i = 1;
    while i < t.len() {
        t[i] = t[i - 1].wrapping_mul(MULT32);
        i += 1;
    }
    t
};

/// The 64-byte block of `hash` in `body` (`None` only for a body shorter than a block, which
/// a checked view never has). The body's length gives the block count, so nothing but the
/// body is needed.
#[inline(always)]
pub(super) fn block_of(body: &[u8], hash: u64) -> Option<&[u8; 64]> {
    let lines = body.as_chunks::<64>().0;
    lines.get(fastrange(hash, lines.len() as u64) as usize)
}

/// Lane i's multiplier for one round of eight probes: `POW[i mod k]` for k ≤ 8, so lanes past
/// k repeat a probe already made (testing a bit twice changes no answer) and no lane needs
/// masking; `POW[i]` for k > 8 (the first round of several).
pub(super) const fn lane_mults(k: u32) -> [u32; 8] {
    let k = if k < 1 {
        1
    } else if k > MAX_K {
        MAX_K as usize
    } else {
        k as usize
    };
    let mut m = [0u32; 8];
    let mut i = 0;
    while i < 8 {
        m[i] = POW[if k <= 8 { i % k } else { i }];
        i += 1;
    }
    m
}
