//! A table's index: the last key of every data block and the block's handle, with a search
//! structure over the keys' leading bytes kept in memory.
//!
//! Version 3 tables write their index block with a restart point at every entry, so entry
//! `i` is found through the block's restart array: their keys and handles are read in place
//! from a read-only map of the table file (page cache, not heap), and only the search
//! structure (9 bytes per data block) stays in memory. Older tables' keys and handles are
//! copied into memory.

use std::cmp::Ordering;
use std::sync::Arc;

use memmap2::Mmap;

use super::block;
use crate::codec::{le_u32, le_u64};

/// The index. The search structure is over the blocks' "heads": for block `i`, the 8 bytes
/// of its last key after the prefix `lcp` that all last keys share, as a big-endian `u64`
/// (zero-padded). Heads sit 8 to a 64-byte line (the last line padded with `u64::MAX`), and
/// `top` holds the last head of each line: a lookup binary-searches `top` (small, so it stays
/// cached), then counts in one line. Whole keys are compared only among blocks whose head ties
/// with the key's.
#[derive(Debug, Default)]
pub(crate) struct Index {
    entries: Entries,
    n: usize,
    lines: Vec<Line>,
    top: Vec<u64>,
    pub(crate) lcp: usize,
    /// The `lcp` bytes every last key starts with.
    shared: Vec<u8>,
}

/// Where the index's keys and handles are.
#[derive(Debug)]
enum Entries {
    /// Copied into memory.
    Resident {
        keys: Vec<u8>,
        ends: Vec<usize>,
        handles: Vec<(u64, u32)>,
    },
    /// In a version 3 index block inside `map`: entry `i` starts at
    /// `block + u32 le at (restarts + 4 i)`, with no shared prefix and a 12-byte handle.
    Mapped {
        map: Arc<Mmap>,
        block: usize,
        restarts: usize,
    },
}

impl Default for Entries {
    fn default() -> Self {
        Entries::Resident {
            keys: Vec::new(),
            ends: Vec::new(),
            handles: Vec::new(),
        }
    }
}

/// The key and handle of index entry `at` (a byte offset in `bytes`), written with no shared
/// prefix: `0 | key_len | 13 | key | offset u64 | len u32`. `None` when the bytes do not say
/// that (they were checked at open, so only a file changed behind the store's back does).
#[inline]
pub(crate) fn mapped_entry(bytes: &[u8], at: usize) -> Option<(&[u8], (u64, u32))> {
    let rest = bytes.get(at..)?;
    let (&shared, rest) = rest.split_first()?;
    if shared != 0 {
        return None;
    }
    let (klen, used) = read_varint(rest)?;
    let rest = rest.get(used..)?;
    let (&vtag, rest) = rest.split_first()?;
    if vtag != 13 {
        return None;
    }
    let key = rest.get(..klen)?;
    let h = rest.get(klen..klen + 12)?;
    let (offset, len) = (le_u64(h, 0), le_u32(h, 8));
    Some((key, (offset, len)))
}

fn read_varint(b: &[u8]) -> Option<(usize, usize)> {
    let mut v = 0usize;
    for (i, &x) in b.iter().enumerate().take(3) {
        v |= usize::from(x & 0x7f) << (7 * i);
        if x < 0x80 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Heads per line of the index's search structure.
const LINE: usize = 8;

/// One cache line of heads.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Line([u64; LINE]);

impl Index {
    /// Appends block `offset`+`len` with `last_key` to a resident index being built.
    pub(crate) fn push(&mut self, last_key: &[u8], offset: u64, len: u32) {
        if let Entries::Resident {
            keys,
            ends,
            handles,
        } = &mut self.entries
        {
            keys.extend_from_slice(last_key);
            ends.push(keys.len());
            handles.push((offset, len));
            self.n += 1;
        }
    }

    /// Serves keys and handles from `map` from now on (a version 3 table: the index block's
    /// entries start at `block`, its restart array at `restarts`), dropping the copies. The
    /// caller checked that every entry there decodes to what was pushed.
    pub(crate) fn use_map(&mut self, map: Arc<Mmap>, block: usize, restarts: usize) {
        self.entries = Entries::Mapped {
            map,
            block,
            restarts,
        };
    }

    /// Key and handle of entry `i` of a mapped index.
    #[inline]
    fn mapped(map: &Mmap, block: usize, restarts: usize, i: usize) -> Option<(&[u8], (u64, u32))> {
        let at = restarts.checked_add(4 * i)?;
        let r = le_u32(map.get(at..at + 4)?, 0) as usize;
        mapped_entry(map, block.checked_add(r)?)
    }

    /// Handle (offset, length) of block `i`. A mapped entry that no longer decodes gives
    /// `(0, 0)`, whose read then fails its CRC check.
    #[inline]
    pub(crate) fn handle(&self, i: usize) -> Option<(u64, u32)> {
        if i >= self.n {
            return None;
        }
        match &self.entries {
            Entries::Resident { handles, .. } => handles.get(i).copied(),
            Entries::Mapped {
                map,
                block,
                restarts,
            } => Some(Self::mapped(map, *block, *restarts, i).map_or((0, 0), |e| e.1)),
        }
    }

    /// Bytes of heap this index takes.
    pub(crate) fn heap_bytes(&self) -> usize {
        let search = self.lines.capacity() * std::mem::size_of::<Line>() + self.top.capacity() * 8;
        match &self.entries {
            Entries::Resident {
                keys,
                ends,
                handles,
            } => search + keys.capacity() + ends.capacity() * 8 + handles.capacity() * 16,
            Entries::Mapped { .. } => search,
        }
    }

    /// Builds the search structure once every block is pushed. Keys must be strictly
    /// increasing (checked by `Table::open`), so the prefix shared by the first and last key
    /// is shared by all.
    pub(crate) fn finish(&mut self) {
        // Built by pushes: give back what doubling left unused (an index lives as long as
        // its table, and all of them together are the store's largest lasting allocation).
        if let Entries::Resident {
            keys,
            ends,
            handles,
        } = &mut self.entries
        {
            keys.shrink_to_fit();
            ends.shrink_to_fit();
            handles.shrink_to_fit();
        }
        let n = self.len();
        self.lcp = match n {
            0 => 0,
            _ => block::lcp_cmp(self.key(0), self.key(n - 1)).0,
        };
        self.shared = match n {
            0 => Vec::new(),
            _ => self.key(0)[..self.lcp].to_vec(),
        };
        let heads: Vec<u64> = (0..n)
            .map(|i| crate::codec::prefix8(self.key(i).get(self.lcp..).unwrap_or_default()))
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
        self.n
    }

    /// Last key of block `i` (empty when a mapped entry no longer decodes).
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        match &self.entries {
            Entries::Resident { keys, ends, .. } => {
                let start = if i == 0 { 0 } else { ends[i - 1] };
                &keys[start..ends[i]]
            }
            Entries::Mapped {
                map,
                block,
                restarts,
            } => Self::mapped(map, *block, *restarts, i).map_or(&[], |e| e.0),
        }
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
            let shared = &self.shared;
            match block::lcp_cmp(&key[..k], shared.get(..k).unwrap_or_default()).1 {
                Ordering::Less => return 0,
                Ordering::Greater => return n,
                // `key` is a proper prefix of every last key, so below all of them.
                Ordering::Equal if k < self.lcp => return 0,
                Ordering::Equal => {}
            }
        }
        let h = crate::codec::prefix8(&key[k..]);
        // The first line whose last head is >= h holds the first head >= h; padding
        // (u64::MAX) is never below h.
        let j = self.top.partition_point(|&x| x < h);
        let Some(line) = self.lines.get(j) else {
            return n;
        };
        // The block's handle is one of the line's 8 (128 bytes of resident handles on two or
        // three cache lines; for a mapped index, 32 bytes of restart offsets): start loading
        // them now, so their misses overlap the line's instead of following it.
        let first = j * LINE;
        match &self.entries {
            Entries::Resident { handles, .. } => {
                let mut acc = 0;
                for h in handles[first..].iter().take(LINE).step_by(LINE / 2) {
                    acc ^= h.1;
                }
                std::hint::black_box(acc);
            }
            Entries::Mapped { map, restarts, .. } => {
                std::hint::black_box(map.get(restarts + 4 * first).copied());
            }
        }
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
