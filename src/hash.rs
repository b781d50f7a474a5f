//! The one hash of a key: xxh3-64 with a fixed seed.
//!
//! A key is hashed once per lookup; the same 64-bit value is handed to the filter of every
//! table. The algorithm and seed are recorded in every filter block, so a filter written with
//! another hash is refused rather than silently answering wrong.

/// Identifier of xxh3-64 in filter headers.
pub const HASH_XXH3_64: u8 = 1;

/// The fixed seed ("filtrsto" in ASCII).
pub const HASH_SEED: u64 = 0x6669_6c74_7273_746f;

/// Hashes key bytes with xxh3-64 and [`HASH_SEED`].
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, HASH_SEED)
}

/// Hashes many keys in parallel (rayon), preserving order.
pub fn hash_keys<K: AsRef<[u8]> + Sync>(keys: &[K]) -> Vec<u64> {
    use rayon::prelude::*;
    keys.par_iter().map(|k| key_hash(k.as_ref())).collect()
}

/// Multiply-high range reduction: maps `x` uniformly onto `0..n` (Lemire's fastrange).
#[inline]
pub fn fastrange(x: u64, n: u64) -> u64 {
    ((x as u128 * n as u128) >> 64) as u64
}

/// A cheap, invertible 64-bit mixer (the murmur3 finaliser), for deriving a second hash.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}
