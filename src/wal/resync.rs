//! Finding the next valid record after damage, in time linear in the bytes scanned.

use crate::codec::le_u32;

use super::record::{header, plausible_len};
use super::RECORD_HEADER_LEN;

/// The first offset at or after `from` where a valid record starts
/// ([`record_at`](super::record_at)), if any.
///
/// Linear in the bytes scanned, whatever they hold. Each offset costs a length test (one
/// 4-byte read; an offset of random bytes passes it with probability (bytes left) / 2^32,
/// 1 in 4,096 with a MiB left, and zeros never do), then for the survivors an 8-byte header
/// CRC. Payload CRCs are needed only at offsets whose header CRC holds (by chance, 1 in
/// 2^32): they are computed directly, in offset order, while their total stays within
/// `direct_budget` bytes; the candidates from there on (only crafted input has them) are
/// settled together from one pass of running CRCs over the file, each payload's CRC derived
/// from the running CRCs at its two ends in O(log len) (CRC-32 is linear:
/// `crc(a ‖ b) = crc(a)·x^(8|b|) ⊕ crc(b)` modulo its polynomial). Without that, a file of
/// back-to-back valid headers each claiming a long payload would cost quadratic time.
pub(super) fn next_record(bytes: &[u8], from: usize, direct_budget: usize) -> Option<usize> {
    let n = bytes.len();
    let mut spent = 0usize;
    let mut deferred: Vec<(usize, u32, u32)> = Vec::new();
    for (i, w) in bytes.get(from..)?.windows(RECORD_HEADER_LEN).enumerate() {
        let at = from + i;
        let Some(h) = w.first_chunk::<RECORD_HEADER_LEN>() else {
            continue;
        };
        let len = le_u32(h, 0) as usize;
        if !plausible_len(len) || len > n - at - RECORD_HEADER_LEN {
            continue;
        }
        let Some((_, crc)) = header(h) else {
            continue;
        };
        let start = at + RECORD_HEADER_LEN;
        if deferred.is_empty() && spent + len <= direct_budget {
            spent += len;
            if bytes
                .get(start..start + len)
                .is_some_and(|p| crc32fast::hash(p) == crc)
            {
                return Some(at);
            }
        } else {
            deferred.push((at, len as u32, crc));
        }
    }
    settle(bytes, &deferred)
}

/// The first of `candidates` (record offset, payload length, payload CRC; in offset order)
/// whose payload CRC holds, computed from one pass of running CRCs.
fn settle(bytes: &[u8], candidates: &[(usize, u32, u32)]) -> Option<usize> {
    // Running CRC (from the first payload start) at every payload start and end.
    let mut points: Vec<usize> = candidates
        .iter()
        .flat_map(|&(at, len, _)| {
            let start = at + RECORD_HEADER_LEN;
            [start, start + len as usize]
        })
        .collect();
    points.sort_unstable();
    points.dedup();
    let &base = points.first()?;
    let mut running = Vec::with_capacity(points.len());
    let mut h = crc32fast::Hasher::new();
    let mut done = base;
    for &p in &points {
        h.update(bytes.get(done..p)?);
        running.push(h.clone().finalize());
        done = p;
    }
    let crc_at = |p: usize| points.binary_search(&p).ok().and_then(|i| running.get(i));
    candidates.iter().find_map(|&(at, len, crc)| {
        let start = at + RECORD_HEADER_LEN;
        let (&a, &b) = (crc_at(start)?, crc_at(start + len as usize)?);
        // crc(base..end) = crc(base..start)·x^(8·len) ⊕ crc(start..end)
        let mut shifted = crc32fast::Hasher::new_with_initial(a);
        shifted.combine(&crc32fast::Hasher::new_with_initial_len(0, len as u64));
        (b ^ shifted.finalize() == crc).then_some(at)
    })
}
