//! The table's row layout (transitions and merged outputs in one cache line) and the
//! matcher's window over the last 16 gaps.

use super::{ROW_GAPS, SYMBOLS, WINDOW};

/// One state's row: 64 bytes, aligned to a cache line, so one step touches one line.
///
/// `cells[0..27]` is the next state for each symbol, `cells[27]` the merged output for the
/// gaps 8 and 9 back and `cells[28..32]` the merged output for the gaps 0..8 back (see
/// [`pack_output`]). Keeping all 32 cells in one array lets a step index it with `byte & 31`
/// (a letter's symbol in either case) without a bounds check.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct Row {
    pub(super) cells: [u16; 32],
}

/// `Row::cells` index of the output for the gaps 8 and 9 back.
const OUT_HI: usize = SYMBOLS;
/// `Row::cells` index of the output for the gaps 0..8 back (four cells).
const OUT_LO: usize = SYMBOLS + 1;

impl Row {
    #[inline(always)]
    pub(super) fn out_hi(&self) -> u16 {
        self.cells[OUT_HI]
    }

    #[inline(always)]
    pub(super) fn out_lo(&self) -> u64 {
        let c = &self.cells;
        c[OUT_LO] as u64
            | (c[OUT_LO + 1] as u64) << 16
            | (c[OUT_LO + 2] as u64) << 32
            | (c[OUT_LO + 3] as u64) << 48
    }

    pub(super) fn set_output(&mut self, lo: u64, hi: u16) {
        self.cells[OUT_HI] = hi;
        for k in 0..4 {
            self.cells[OUT_LO + k] = (lo >> (16 * k)) as u16;
        }
    }
}

pub(super) const EMPTY_ROW: Row = Row { cells: [0; 32] };

/// Packs a merged output (`m[back]` = score `back` gaps before the one after the state's
/// last character) into the window layout (byte `back`): backs 0..8 as a `u64`, backs 8
/// and 9 as a `u16`. Backs from 10 on are left out.
pub(super) fn pack_output(m: &[u8]) -> (u64, u16) {
    let mut w = [0u8; WINDOW];
    for (back, &v) in m.iter().enumerate().take(ROW_GAPS) {
        w[back] = v;
    }
    let w = u128::from_le_bytes(w);
    (w as u64, (w >> 64) as u16)
}

/// The matcher's window over the last 16 gaps: SSE2 on x86_64 (part of its baseline).
///
/// Byte `back` is the score of the gap `back` before the current one; a step shifts the
/// window up by one byte (byte 15 leaves) and takes the byte-wise maximum with the new
/// state's output, which lies in bytes 0..10, so it is loaded with one `movq` and one
/// `pinsrw`.
#[cfg(target_arch = "x86_64")]
mod window {
    use std::arch::x86_64::{
        __m128i, _mm_cvtsi128_si64, _mm_cvtsi64_si128, _mm_extract_epi16, _mm_insert_epi16,
        _mm_max_epu8, _mm_movemask_epi8, _mm_set_epi64x, _mm_setzero_si128, _mm_slli_epi16,
        _mm_slli_si128, _mm_unpackhi_epi64,
    };

    #[derive(Clone, Copy)]
    pub(in super::super) struct Window(__m128i);

    impl Window {
        #[inline]
        #[target_feature(enable = "sse2")]
        pub(in super::super) fn zero() -> Window {
            Window(_mm_setzero_si128())
        }

        /// The byte about to leave (byte 15).
        #[inline]
        #[target_feature(enable = "sse2")]
        pub(in super::super) fn leaving(self) -> u8 {
            (_mm_extract_epi16::<7>(self.0) >> 8) as u8
        }

        /// Shifts up one byte and takes the byte-wise maximum with the output whose bytes
        /// 0..8 are `lo` and bytes 8, 9 are `hi`.
        #[inline]
        #[target_feature(enable = "sse2")]
        pub(in super::super) fn step(self, lo: u64, hi: u16) -> Window {
            let out = _mm_insert_epi16::<4>(_mm_cvtsi64_si128(lo as i64), hi as i32);
            Window(_mm_max_epu8(_mm_slli_si128::<1>(self.0), out))
        }

        /// Byte-wise maximum with a whole `u128`.
        #[inline]
        #[target_feature(enable = "sse2")]
        pub(in super::super) fn max_with(self, v: u128) -> Window {
            let v = _mm_set_epi64x((v >> 64) as i64, v as i64);
            Window(_mm_max_epu8(self.0, v))
        }

        /// Bit j set when byte j is odd.
        #[inline]
        #[target_feature(enable = "sse2")]
        pub(in super::super) fn odd_mask(self) -> u32 {
            // Shifting each 16-bit lane left by 7 moves bit 0 of both its bytes to bit 7.
            _mm_movemask_epi8(_mm_slli_epi16::<7>(self.0)) as u32
        }

        #[inline]
        #[target_feature(enable = "sse2")]
        pub(in super::super) fn bytes(self) -> [u8; 16] {
            let lo = _mm_cvtsi128_si64(self.0) as u64;
            let hi = _mm_cvtsi128_si64(_mm_unpackhi_epi64(self.0, self.0)) as u64;
            ((hi as u128) << 64 | lo as u128).to_le_bytes()
        }
    }
}

/// The matcher's window over the last 16 gaps, portable SWAR version (same layout).
#[cfg(not(target_arch = "x86_64"))]
mod window {
    #[derive(Clone, Copy)]
    pub(in super::super) struct Window(u128);

    /// Byte-wise maximum of two values whose bytes are all below 128 (scores are 0..=9).
    #[inline(always)]
    fn bytewise_max(a: u128, b: u128) -> u128 {
        const HIGH: u128 = u128::from_ne_bytes([0x80; 16]);
        // High bit of each byte: set where a >= b (no borrow crosses bytes: a | HIGH > b).
        let ge = ((a | HIGH) - b) & HIGH;
        let mask = (ge - (ge >> 7)) | ge;
        (a & mask) | (b & !mask)
    }

    impl Window {
        #[inline(always)]
        pub(in super::super) fn zero() -> Window {
            Window(0)
        }
        #[inline(always)]
        pub(in super::super) fn leaving(self) -> u8 {
            (self.0 >> 120) as u8
        }
        #[inline(always)]
        pub(in super::super) fn step(self, lo: u64, hi: u16) -> Window {
            let out = (hi as u128) << 64 | lo as u128;
            Window(bytewise_max(self.0 << 8, out))
        }
        #[inline(always)]
        pub(in super::super) fn max_with(self, v: u128) -> Window {
            Window(bytewise_max(self.0, v))
        }
        /// Bit j set when byte j is odd.
        #[inline(always)]
        pub(in super::super) fn odd_mask(self) -> u32 {
            let mut m = 0;
            for (j, b) in self.0.to_le_bytes().iter().enumerate() {
                m |= ((b & 1) as u32) << j;
            }
            m
        }
        #[inline(always)]
        pub(in super::super) fn bytes(self) -> [u8; 16] {
            self.0.to_le_bytes()
        }
    }
}

pub(super) use window::Window;
