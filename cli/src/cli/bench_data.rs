//! The keys and values the engine benchmarks write (`bench engine` and its YCSB workloads):
//! both generate the same store from a seed.

use filterstore::hash::mix64;

/// Key `i`: 16 bytes, present keys with the last bit clear, absent ones with it set.
pub(crate) fn key(seed: u64, i: u64, absent: bool) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix64(i ^ seed).to_be_bytes());
    k[8..].copy_from_slice(&(mix64(i.wrapping_add(seed)) & !1 | u64::from(absent)).to_be_bytes());
    k
}

/// Value `i`: random bytes, or with `compressibility` C > 0, random printable bytes for the
/// first ⌈(1 − C) · len⌉ bytes, repeated to fill the value (db_bench's `CompressibleString`).
pub(crate) fn fill_value(i: u64, compressibility: f64, v: &mut [u8]) {
    let mut x = i;
    if compressibility == 0.0 {
        for chunk in v.chunks_mut(8) {
            x = mix64(x);
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
        return;
    }
    let random =
        ((v.len() as f64 * (1.0 - compressibility)).ceil() as usize).clamp(1, v.len().max(1));
    for b in v.iter_mut().take(random) {
        x = mix64(x.wrapping_add(0x9e37_79b9_7f4a_7c15));
        *b = b' ' + (x % 95) as u8;
    }
    for j in random..v.len() {
        v[j] = v[j - random];
    }
}
