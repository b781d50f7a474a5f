//! The block cache: decoded, checksum-verified (and decompressed) data blocks, shared by all
//! tables of one store, bounded in bytes.
//!
//! A [`quick_cache`] S3-FIFO cache (fjall's choice): sharded, each shard under its own lock,
//! weighted by the bytes a block takes. A block enters a small probation queue and moves to
//! the main queue only when it is asked for again while there (or soon after it left: the
//! cache remembers the keys of recently evicted blocks), so a long scan that reads each block
//! once passes through the probation queue and leaves the blocks that point lookups keep
//! asking for alone.
//!
//! Once the cache is full, a block read from a file is cached only on its second miss within
//! a short window (a doorkeeper, as TinyLFU's: a direct-mapped table of the hashes of
//! recently missed keys, one slot per [`DOORKEEPER_BLOCKS_PER_SLOT`] blocks the cache
//! holds): a block asked for once (most blocks of a scan, most blocks of uniformly random
//! lookups over data much larger than the cache) costs the cache nothing, instead of a copy,
//! an insertion and an eviction, and evicts nothing that was asked for more often. While the
//! cache is filling, every block read is cached.
//!
//! The key is the table's file number and the block's index in it. File numbers are never
//! reused (format.md, "Store directory"), so a block of a table that compaction removed can
//! never be found under a live table's key. The store drops a removed table's blocks when
//! it installs the table set without it ([`BlockCache::forget_file`]).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use quick_cache::sync::Cache;
use quick_cache::{OptionsBuilder, Weighter};

/// Bytes counted for a cached block beyond its own: the cache's entry (key, value handle,
/// queue links) and the block's shared header. The weight of a block is its length plus this.
pub(crate) const ENTRY_OVERHEAD: u64 = 64;

/// A block's place: its table's file number and its index among the table's data blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BlockKey {
    pub file: u64,
    pub block: u64,
}

#[derive(Clone, Copy, Debug)]
struct ByLength;

impl<V: std::ops::Deref<Target = [u8]>> Weighter<BlockKey, V> for ByLength {
    fn weight(&self, _: &BlockKey, b: &V) -> u64 {
        b.len() as u64 + ENTRY_OVERHEAD
    }
}

/// Hashes a [`BlockKey`] (two integers) with two multiply-xorshift rounds instead of SipHash.
#[derive(Clone, Copy, Debug, Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = crate::hash::mix64(self.0 ^ x).wrapping_add(0x9e37_79b9_7f4a_7c15);
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct BuildKeyHasher;

impl BuildHasher for BuildKeyHasher {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher::default()
    }
}

/// Data-block size for the cache's estimate of how many blocks it holds (which sizes its
/// shards, its memory of recently evicted keys and the doorkeeper): a block that compresses,
/// cached decompressed. Blocks stored raw are half that (`table::RAW_BLOCK_SIZE`), so the
/// cache then holds about twice the estimate, and the doorkeeper has one slot per about
/// 2 × [`DOORKEEPER_BLOCKS_PER_SLOT`] of them.
const TYPICAL_BLOCK: u64 = 4096;

/// Blocks the cache holds per doorkeeper slot. The doorkeeper remembers about as many
/// recent misses as it has slots, so a block is admitted (once the cache is full) when it
/// misses twice within roughly that many misses. Measured with `tools/src/bin/lookup_ab.rs cache`
/// (1M keys, 32 MiB, two runs each, the thread's CPU time per present get against the cache
/// off): under uniformly random keys one slot per 2 blocks cost 14 %, per 8 blocks 3–4 %,
/// per 16 blocks 2–3 %, per 32 blocks 1–3 %; under YCSB's Zipfian keys the same sizes kept
/// 73.5, 72.8, 72.3 and 71.6 % of lookups in the cache and took 0.84–0.86, 0.81–0.82, 0.81
/// and 0.80 of the time without it.
const DOORKEEPER_BLOCKS_PER_SLOT: usize = 16;
/// The doorkeeper of a small cache still remembers this many misses.
const MIN_DOORKEEPER_SLOTS: usize = 64;

/// A store's block cache (see the module documentation), of blocks `V` (the tables' shared
/// block bytes; anything cheap to clone that derefs to the block's bytes).
pub(crate) struct BlockCache<V> {
    cache: Cache<BlockKey, V, ByLength, BuildKeyHasher>,
    /// Bytes inserted so far, until they reach the capacity (then `full` is set, and this
    /// is no longer updated). Nothing is ever removed but by eviction, so a cache that was
    /// once filled stays about full.
    inserted: AtomicU64,
    full: AtomicBool,
    /// The doorkeeper: per slot, the hash of the last key that missed there while the cache
    /// was full (0: none).
    seen: Box<[AtomicU64]>,
}

impl<V: Clone + std::ops::Deref<Target = [u8]>> std::fmt::Debug for BlockCache<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity())
            .field("used", &self.used_bytes())
            .finish()
    }
}

impl<V: Clone + std::ops::Deref<Target = [u8]>> BlockCache<V> {
    /// A cache of at most `bytes` (weights summed: block lengths plus [`ENTRY_OVERHEAD`]
    /// each); `None` for 0 (no cache).
    pub(crate) fn new(bytes: usize) -> Option<BlockCache<V>> {
        if bytes == 0 {
            return None;
        }
        let bytes = bytes as u64;
        let items = (bytes / TYPICAL_BLOCK).max(1);
        // Shards: 4 per core (quick_cache's default), fewer when the cache is small (each
        // keeps at least 32 blocks), and each shard's capacity is the total divided by the
        // shard count, rounded down so that the shards together never exceed `bytes`.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let mut shards = (cores * 4).next_power_of_two();
        while shards > 1 && items / shards < 32 {
            shards /= 2;
        }
        let opts = OptionsBuilder::new()
            .shards(shards as usize)
            .estimated_items_capacity(items as usize)
            .weight_capacity(bytes / shards * shards)
            .build()
            .ok()?;
        let slots = (items as usize / DOORKEEPER_BLOCKS_PER_SLOT)
            .max(MIN_DOORKEEPER_SLOTS)
            .next_power_of_two();
        Some(BlockCache {
            cache: Cache::with_options(opts, ByLength, BuildKeyHasher, Default::default()),
            inserted: AtomicU64::new(0),
            full: AtomicBool::new(false),
            seen: (0..slots).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    /// Whether a block of `len` bytes at `key`, just read after a miss, should be cached:
    /// always while the cache is filling; once it is full, only when `key` missed before
    /// and the doorkeeper still remembers it (else it remembers it now).
    #[inline]
    pub(crate) fn admit(&self, key: &BlockKey, len: usize) -> bool {
        if !self.full.load(Relaxed) {
            let w = len as u64 + ENTRY_OVERHEAD;
            if self.inserted.fetch_add(w, Relaxed) + w > self.capacity() {
                self.full.store(true, Relaxed);
            }
            return true;
        }
        let h = BuildKeyHasher.hash_one(key);
        let Some(slot) = self.seen.get((h >> 32) as usize & (self.seen.len() - 1)) else {
            return true;
        };
        // Never 0, which marks an empty slot.
        let h = h | 1;
        if slot.load(Relaxed) == h {
            slot.store(0, Relaxed);
            true
        } else {
            slot.store(h, Relaxed);
            false
        }
    }

    /// The block at `key`, if cached (and marks it as asked for again).
    #[inline]
    pub(crate) fn get(&self, key: &BlockKey) -> Option<V> {
        self.cache.get(key)
    }

    /// Caches `block` at `key` (evicting as needed to stay within the capacity). A block
    /// heavier than a shard's main queue is not cached.
    pub(crate) fn insert(&self, key: BlockKey, block: V) {
        self.cache.insert(key, block);
    }

    /// Drops the blocks of file `file` (block indices `0..blocks`), a table that left the
    /// store: nobody asks for them again, and a full cache would otherwise keep them until
    /// evicted, admitting the live tables' blocks only on their second miss meanwhile. The
    /// space freed is filled again as a filling cache is: every block read is admitted
    /// until it is full.
    pub(crate) fn forget_file(&self, file: u64, blocks: u64) {
        let mut freed = false;
        for block in 0..blocks {
            freed |= self.cache.remove(&BlockKey { file, block }).is_some();
        }
        if freed {
            self.inserted.store(self.used_bytes(), Relaxed);
            self.full.store(false, Relaxed);
        }
    }

    /// The capacity in bytes (the sum of the shards' capacities).
    pub(crate) fn capacity(&self) -> u64 {
        self.cache.capacity()
    }

    /// Bytes held now (block lengths plus [`ENTRY_OVERHEAD`] each).
    pub(crate) fn used_bytes(&self) -> u64 {
        self.cache.weight()
    }

    /// Blocks held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cache.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Block = std::sync::Arc<[u8]>;

    fn block(n: usize, fill: u8) -> Block {
        vec![fill; n].into()
    }

    #[test]
    fn zero_bytes_is_no_cache() {
        assert!(BlockCache::<Block>::new(0).is_none());
    }

    /// Whatever is inserted, the weight held never exceeds the capacity, which never
    /// exceeds what was asked for.
    #[test]
    fn never_holds_more_than_its_capacity() {
        for bytes in [1usize, 4000, 64 << 10, 1 << 20, 5 << 20] {
            let c = BlockCache::<Block>::new(bytes).unwrap();
            assert!(c.capacity() <= bytes as u64, "{bytes}");
            let mut x = 1u64;
            for i in 0..5000u64 {
                x = crate::hash::mix64(x);
                let len = [100, 4000, 4096, 9000, 70_000][(x % 5) as usize];
                let key = BlockKey {
                    file: x % 7,
                    block: i % 900,
                };
                c.insert(key, block(len, i as u8));
                if i % 3 == 0 {
                    // Ask for a few keys again, so the main queue fills too.
                    let _ = c.get(&BlockKey {
                        file: (x >> 8) % 7,
                        block: (i / 2) % 900,
                    });
                }
                assert!(
                    c.used_bytes() <= c.capacity(),
                    "{bytes}: {}",
                    c.used_bytes()
                );
            }
        }
    }

    /// While the cache fills every block is admitted; once full, a block only on its second
    /// miss while the doorkeeper remembers the first.
    #[test]
    fn a_full_cache_admits_a_block_on_its_second_miss() {
        let c = BlockCache::<Block>::new(1 << 20).unwrap();
        let key = |i: u64| BlockKey { file: 1, block: i };
        let mut i = 0;
        while !c.full.load(Relaxed) {
            assert!(c.admit(&key(i), 4000), "block {i} while filling");
            i += 1;
        }
        assert!(i >= (1 << 20) / 4100, "full after {i} blocks");
        let k = key(1 << 40);
        assert!(!c.admit(&k, 4000), "first miss");
        assert!(c.admit(&k, 4000), "second miss");
        assert!(!c.admit(&k, 4000), "the doorkeeper forgot it once admitted");
        // It remembers it again now; misses of many other keys push it out.
        for j in 0..100_000 {
            c.admit(&key(j + (1 << 41)), 4000);
        }
        assert!(!c.admit(&k, 4000), "remembered after 100,000 other misses");
    }

    /// A forgotten file's blocks are gone, others stay, and a full cache that lost blocks
    /// admits every block again until it is full once more.
    #[test]
    fn forgetting_a_file_frees_its_blocks_and_reopens_admission() {
        let c = BlockCache::<Block>::new(1 << 20).unwrap();
        let key = |file: u64, i: u64| BlockKey { file, block: i };
        let mut i = 0;
        while !c.full.load(Relaxed) {
            assert!(c.admit(&key(1 + i % 2, i / 2), 4000));
            c.insert(key(1 + i % 2, i / 2), block(4000, 1));
            i += 1;
        }
        assert!(!c.admit(&key(3, 0), 4000), "full: first miss not admitted");
        let before = c.len();
        c.forget_file(1, i);
        assert!(c.len() < before && c.len() > 0, "{} of {before}", c.len());
        assert!(
            (0..i).all(|b| c.get(&key(1, b)).is_none()),
            "file 1 forgotten"
        );
        assert!((0..i).any(|b| c.get(&key(2, b)).is_some()), "file 2 kept");
        assert_eq!(c.inserted.load(Relaxed), c.used_bytes());
        assert!(
            c.admit(&key(3, 1), 4000),
            "room again: admitted on a first miss"
        );
    }

    #[test]
    fn a_block_comes_back_as_inserted() {
        let c = BlockCache::<Block>::new(1 << 20).unwrap();
        let k = BlockKey { file: 3, block: 9 };
        assert!(c.get(&k).is_none());
        c.insert(k, block(100, 7));
        assert_eq!(&*c.get(&k).unwrap(), &[7u8; 100][..]);
        assert!(c.get(&BlockKey { file: 4, block: 9 }).is_none());
        assert!(c.get(&BlockKey { file: 3, block: 8 }).is_none());
        assert_eq!(c.len(), 1);
        assert_eq!(c.used_bytes(), 100 + ENTRY_OVERHEAD);
    }
}
