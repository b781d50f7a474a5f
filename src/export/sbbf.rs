//! Sizing split-block Bloom filters: their expected false-positive rate, and the smallest
//! power-of-two size that meets a target.

use parquet::bloom_filter::{BITSET_MAX_LENGTH, BITSET_MIN_LENGTH};

/// Bytes of a split-block Bloom filter for `n` keys at false-positive rate `fpp`: the
/// smallest power of two from 32 bytes to 128 MiB whose expected rate ([`sbbf_fpr`]) is at
/// most `fpp`. Powers of two are what the parquet crate's own writer produces, and what
/// DataFusion, DuckDB and Spark (parquet-mr) were seen to read here; the price is up to
/// twice the bits of an exact-size filter.
///
/// (The parquet crate's own sizing, `-8n / ln(1 - fpp^(1/8))` bits then folded while
/// `fill^8 ≤ fpp`, ignores how unevenly keys fall into blocks: at 131,072 keys it gives
/// the same 256 KiB filter for fpp 1 % and 0.1 %, whose rate, 0.13 %, misses the latter.)
pub fn sbbf_bytes(n: u64, fpp: f64) -> usize {
    let mut bytes = BITSET_MIN_LENGTH;
    while bytes < BITSET_MAX_LENGTH && sbbf_fpr(n, (bytes / 32) as u64) > fpp {
        bytes *= 2;
    }
    bytes
}

/// The expected false-positive rate of a split-block Bloom filter of `blocks` 256-bit
/// blocks holding `n` distinct keys, for a key not among them: a block holds j keys with
/// probability Poisson(j; n / blocks); each key sets one bit, uniform among 32, in each of
/// the block's 8 words; an absent key passes when its 8 bits are all set:
/// `Σ_j P(j) · (1 − (31/32)^j)^8`.
pub fn sbbf_fpr(n: u64, blocks: u64) -> f64 {
    if blocks == 0 {
        return 1.0;
    }
    let lambda = n as f64 / blocks as f64;
    let fill = |j: f64| (1.0 - (31.0f64 / 32.0).powf(j)).powi(8);
    if lambda > 200.0 {
        // e^-λ underflows long before this; the spread of j around λ no longer matters
        // (the rate is above 0.98 here).
        return fill(lambda);
    }
    let last = (lambda + 12.0 * lambda.sqrt() + 40.0).ceil() as u64;
    let mut p = (-lambda).exp(); // P(0), then P(j) by P(j) = P(j-1) · λ / j
    let mut sum = 0.0;
    for j in 0..=last {
        if j > 0 {
            p *= lambda / j as f64;
        }
        sum += p * fill(j as f64);
    }
    sum.min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sbbf_rate_matches_the_model_and_sizes_are_powers_of_two() {
        // Values of the Poisson model computed independently (Python, same formula).
        let n = 131_072;
        assert!((sbbf_fpr(n, 262_144 / 32) - 0.00132).abs() < 0.00001);
        assert!((sbbf_fpr(n, 131_072 / 32) - 0.03321).abs() < 0.00001);
        assert!((sbbf_fpr(n, 65_536 / 32) - 0.32576).abs() < 0.00001);
        // Far too small filters are near 1, not 0 (no underflow).
        assert!(sbbf_fpr(n, 1) > 0.99 && sbbf_fpr(n, 64) > 0.99);
        assert_eq!(sbbf_fpr(0, 8), 0.0);
        assert_eq!(sbbf_bytes(n, 0.05), 131_072);
        assert_eq!(sbbf_bytes(n, 0.01), 262_144);
        assert_eq!(sbbf_bytes(n, 0.001), 524_288);
        assert_eq!(sbbf_bytes(0, 0.01), 32);
        assert_eq!(sbbf_bytes(1 << 40, 1e-9), BITSET_MAX_LENGTH);
        for (n, f) in [(1, 0.5), (1000, 0.01), (50_000, 0.2), (131_072, 1e-4)] {
            let b = sbbf_bytes(n, f);
            assert!(b.is_power_of_two() && sbbf_fpr(n, (b / 32) as u64) <= f);
            assert!(
                b == 32 || sbbf_fpr(n, (b / 64) as u64) > f,
                "not the smallest"
            );
        }
    }
}
