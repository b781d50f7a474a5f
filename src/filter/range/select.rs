//! Broadword select: the position of the k-th set bit of a word (the Elias–Fano reader's
//! step inside one word).

/// `SELECT_IN_BYTE[k * 256 + b]`: the position (0..8) of the `k`-th set bit (from 0) of the
/// byte `b` (8 when it has no such bit).
static SELECT_IN_BYTE: [u8; 8 * 256] = {
    let mut t = [8u8; 8 * 256];
    let mut b = 0;
    while b < 256 {
        let (mut k, mut bit) = (0, 0);
        while bit < 8 {
            if b >> bit & 1 == 1 {
                t[k * 256 + b] = bit as u8;
                k += 1;
            }
            bit += 1;
        }
        b += 1;
    }
    t
};

/// Position (0..64) of the `k`-th set bit (from 0) of `w`; `k` < `w.count_ones()`.
/// Broadword (Vigna, "Broadword Implementation of Rank/Select Queries", 2008): the bytes'
/// running counts by one multiplication, the byte holding the bit by one byte-wise compare,
/// the bit by a table.
#[inline]
pub(super) fn select_in_word(w: u64, k: u32) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut c = w - ((w >> 1) & 0x5555_5555_5555_5555);
    c = (c & 0x3333_3333_3333_3333) + ((c >> 2) & 0x3333_3333_3333_3333);
    c = (c + (c >> 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    let running = c.wrapping_mul(ONES); // byte i: set bits in bytes 0..=i
                                        // Bit 7 of byte i is set while the running count of byte i is ≤ k (counts are ≤ 64).
    let below = (((u64::from(k) * ONES) | HIGH) - running) & HIGH;
    // (At most 7: a k past the word's bits, which callers never pass, cannot shift by 64.)
    let byte = u64::from((!below & HIGH).trailing_zeros() / 8).min(7);
    let before = (running << 8) >> (8 * byte) & 0xff; // set bits in the bytes below
    let in_byte = (w >> (8 * byte)) & 0xff;
    let at = (u64::from(k) - before) * 256 + in_byte;
    8 * byte + u64::from(*SELECT_IN_BYTE.get(at as usize).unwrap_or(&0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_in_word_finds_every_bit() {
        for w in [
            1u64,
            0x8000_0000_0000_0000,
            u64::MAX,
            0xf0f0_0000_0000_0f0f,
            0x5555_5555_5555_5555,
        ] {
            let mut seen = 0;
            for k in 0..w.count_ones() {
                let pos = select_in_word(w, k);
                assert_eq!(w >> pos & 1, 1);
                assert_eq!((w & ((1u64 << pos) - 1)).count_ones(), k);
                seen += 1;
            }
            assert_eq!(seen, w.count_ones());
        }
    }
}
