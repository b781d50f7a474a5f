//! A table's index, kept in memory: the last key of every data block and its handle, with a
//! search structure over the keys' leading bytes.

use std::cmp::Ordering;

use super::block;

/// The index kept in memory: last keys of all blocks in one buffer, each block's handle, and
/// a search structure over their "heads": for block `i`, the 8 bytes of its last key after
/// the prefix `lcp` that all last keys share, as a big-endian `u64` (zero-padded). Heads sit
/// 8 to a 64-byte line (the last line padded with `u64::MAX`), and `top` holds the last head
/// of each line: a lookup binary-searches `top` (small, so it stays cached), then counts in
/// one line. Whole keys are compared only among blocks whose head ties with the key's.
#[derive(Debug, Default)]
pub(crate) struct Index {
    keys: Vec<u8>,
    ends: Vec<usize>,
    pub(crate) handles: Vec<(u64, u32)>,
    lines: Vec<Line>,
    top: Vec<u64>,
    pub(crate) lcp: usize,
}

/// Heads per line of the index's search structure.
const LINE: usize = 8;

/// One cache line of heads.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Line([u64; LINE]);

impl Index {
    pub(crate) fn push(&mut self, last_key: &[u8], offset: u64, len: u32) {
        self.keys.extend_from_slice(last_key);
        self.ends.push(self.keys.len());
        self.handles.push((offset, len));
    }

    /// Builds the search structure once every block is pushed. Keys must be strictly
    /// increasing (checked by `Table::open`), so the prefix shared by the first and last key
    /// is shared by all.
    pub(crate) fn finish(&mut self) {
        // Built by pushes: give back what doubling left unused (an index lives as long as
        // its table, and all of them together are the store's largest lasting allocation).
        self.keys.shrink_to_fit();
        self.ends.shrink_to_fit();
        self.handles.shrink_to_fit();
        let n = self.len();
        self.lcp = match n {
            0 => 0,
            _ => block::lcp_cmp(self.key(0), self.key(n - 1)).0,
        };
        let heads: Vec<u64> = (0..n)
            .map(|i| block::head(self.key(i).get(self.lcp..).unwrap_or_default()))
            .collect();
        self.lines = heads
            .chunks(LINE)
            .map(|c| {
                let mut line = Line([u64::MAX; LINE]);
                line.0[..c.len()].copy_from_slice(c);
                line
            })
            .collect();
        self.top = heads
            .chunks(LINE)
            .filter_map(|c| c.last().copied())
            .collect();
    }

    pub(crate) fn len(&self) -> usize {
        self.handles.len()
    }

    pub(crate) fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.keys[start..self.ends[i]]
    }

    fn head(&self, i: usize) -> u64 {
        self.lines[i / LINE].0[i % LINE]
    }

    /// The first block whose last key is >= `key` (`len()` when there is none).
    pub(crate) fn search(&self, key: &[u8]) -> usize {
        let n = self.len();
        if n == 0 {
            return 0;
        }
        // Every last key starts with `shared`; decide on it first.
        let k = key.len().min(self.lcp);
        if self.lcp > 0 {
            let shared = self.key(0).get(..self.lcp).unwrap_or_default();
            match block::lcp_cmp(&key[..k], shared.get(..k).unwrap_or_default()).1 {
                Ordering::Less => return 0,
                Ordering::Greater => return n,
                // `key` is a proper prefix of every last key, so below all of them.
                Ordering::Equal if k < self.lcp => return 0,
                Ordering::Equal => {}
            }
        }
        let h = block::head(&key[k..]);
        // The first line whose last head is >= h holds the first head >= h; padding
        // (u64::MAX) is never below h.
        let j = self.top.partition_point(|&x| x < h);
        let Some(line) = self.lines.get(j) else {
            return n;
        };
        // The block's handle is one of the line's 8 (128 bytes of handles, on two or three
        // cache lines): start loading the 1st and 5th now, so their misses overlap the line's
        // instead of following it.
        let first = j * LINE;
        let mut acc = 0;
        for h in self.handles[first..].iter().take(LINE).step_by(LINE / 2) {
            acc ^= h.1;
        }
        std::hint::black_box(acc);
        let lo = j * LINE + line.0.iter().filter(|&&x| x < h).count();
        if lo >= n || self.head(lo) != h {
            return lo;
        }
        // Ties on the 8 bytes: compare whole keys within the run of equal heads.
        let hi = first_false(lo, n, |i| self.head(i) == h);
        first_false(lo, hi, |i| self.key(i) < key)
    }
}

/// The first `i` in `lo..hi` for which `pred` is false (`hi` if none), where `pred` is true
/// on a prefix of the range and false after it.
fn first_false(mut lo: usize, mut hi: usize, pred: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}
