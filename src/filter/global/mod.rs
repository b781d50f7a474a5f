//! One filter for the whole tree that maps a key to the runs that may hold it (Chucky,
//! Dayan & Twitto, SIGMOD 2021).
//!
//! A per-table filter answers "is the key in *this* table?", so an absent lookup asks one
//! filter per L0 table and per level. The global filter answers "*which* runs may hold the
//! key?" with one probe: a cuckoo table of 4-slot buckets whose entries are a fingerprint of a
//! key *and* the run that holds that version of the key. A lookup reads the key's two buckets
//! (two cache lines at most, however many runs exist) and gets a [`RunSet`]: every run whose
//! entry matches the key's fingerprint. An absent key usually gets the empty set; a present
//! key gets the runs that hold its versions (plus, rarely, a run whose entry for another key
//! has the same fingerprint in the same buckets).
//!
//! ```text
//! bucket i₁ = fastrange(h, B)          bucket i₂ = (H(tag) − i₁) mod B   (tag: the top bits of the fingerprint)
//! | fp run | fp run | fp run | fp run |   | fp run | fp run | fp run | fp run |
//!          └── every slot whose fingerprint equals the key's names a run ──┘
//! ```
//!
//! # Runs
//! A run is a sorted run of the tree: each L0 table is one run, each level L1..L6 is one run
//! (the table inside a level is found by key range, as for any lookup). Run ids are small
//! ([`RunId`], 32 of them): levels have fixed ids, L0 tables take a free id when they are
//! flushed and give it back when a compaction has moved their keys out. The filter holds one
//! entry per *version* of a key: a key written in three runs has three entries.
//!
//! # Newest version first
//! A lookup probes the runs of the [`RunSet`] newest first ([`RunSet::in_order`] with a
//! [`RunOrder`]: L0 newest to oldest, then L1..L6), and the first run that holds the key
//! answers (with a value or a tombstone). Every version of the key has an entry, so every run
//! holding one is in the set; a run in the set that does not hold the key (a fingerprint
//! collision) costs a read and the lookup goes on. So the newest version wins exactly as
//! with per-table filters, and a collision costs what a false positive costs.
//!
//! # Updates
//! A flush inserts its keys with the new L0 run's id ([`Writer::insert_batch`]). A compaction
//! gives, for every key it merged, the runs that held a version of it and the run that holds
//! the survivor ([`MergeKey`], [`Writer::merge_batch`]): one entry is relabelled, the others
//! removed; nothing is read from disk. Batches are put in the order of their buckets first
//! (a counting sort), so the table is swept in address order, with each bucket prefetched a
//! few operations before it is read.
//!
//! # Overflow
//! An insert that finds both buckets full moves entries along a cuckoo path found first and
//! then written from its far end, so that every entry is in one of its buckets at every
//! instant (lookups run while the writer works). When no path is found in
//! [`WALKS`] × [`MAX_KICKS`] steps the entry goes to the **stash**, an exact hash map that
//! lookups consult only when it is not empty. No entry is ever lost; the stash only grows
//! when the table is too full, and [`Writer::needs_rebuild`] says so, so that the owner can
//! rebuild a larger filter from its durable sources.
//!
//! # Concurrency
//! [`GlobalFilter::query`] takes `&self` and no lock: buckets are atomic words, and each
//! 4 KiB region of the table has a sequence number that the single writer makes odd while it
//! changes a bucket there; a query retries when a region it read changed. Writes go through
//! [`GlobalFilter::writer`], which holds a mutex.
//!
//! # Layout
//! [`Layout::Fixed16`]: 16-bit slots (11-bit fingerprint, 5-bit run id), a bucket is one
//! aligned 64-bit word. 16.75 bits per key at load 0.955, false-positive rate 8·α/2047
//! (0.37 %).

mod file;
mod fixed;
mod runs;
mod slots;
mod table;
mod writer;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

pub use file::{GLOBAL_MAGIC, GLOBAL_VERSION};
pub use runs::{InOrder, RunId, RunOrder, RunSet};
pub use writer::Writer;

use runs::Runs;
use table::Table;

use crate::error::{Error, Result};
use crate::hash::mix64;

/// Run ids there are: 6 levels and 26 L0 tables.
pub const MAX_RUNS: usize = 32;
/// Levels below L0 (L1..L6), one run each.
pub const LEVELS: u8 = 6;
/// Steps one cuckoo walk may take before it gives up.
pub const MAX_KICKS: usize = 500;
/// Walks an insert tries (each from a fresh random choice) before it stashes the entry.
pub const WALKS: usize = 4;
/// Stashed entries per slot above which [`Writer::needs_rebuild`] says the table is too full
/// (one per 1,024 slots, and at least [`STASH_MIN`]).
pub const STASH_PER_SLOTS: u64 = 1024;
/// The smallest stash [`Writer::needs_rebuild`] tolerates.
pub const STASH_MIN: u64 = 16;
/// Load (entries in the table ÷ slots) above which [`Writer::needs_rebuild`] says so.
pub const MAX_LOAD: f64 = 0.96;
/// Load a filter is sized for by [`GlobalFilter::new`].
pub const DESIGN_LOAD: f64 = 0.955;
/// Bytes per seqlock region.
const REGION_BYTES: usize = 4096;
/// The multiplier of the alternate bucket's hash (as the cuckoo filter's layout 2).
const ALT_MULT: u64 = 0x9e37_79b9_7f4a_7c15;

/// The layout of a global filter (one today; more may come, so matches need a wildcard).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Layout {
    /// Four 16-bit slots per 64-bit bucket: 11-bit fingerprint, 5-bit run id.
    Fixed16,
}

impl Layout {
    /// The layout's name in reports: `fixed16`.
    pub fn name(&self) -> &'static str {
        match self {
            Layout::Fixed16 => "fixed16",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The stash

/// Keys are already hashes: the stash map's hasher only mixes them.
#[derive(Default)]
struct HashHasher(u64);

impl Hasher for HashHasher {
    fn finish(&self) -> u64 {
        mix64(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

/// Entries no bucket pair had room for: key hash → (run, copies).
type StashMap = HashMap<u64, Vec<(RunId, u32)>, BuildHasherDefault<HashHasher>>;

// ---------------------------------------------------------------------------------------------
// The filter

/// The writer's state (behind the filter's mutex).
#[derive(Debug)]
struct State {
    runs: Runs,
    /// Entries per run id, table and stash together.
    counts: [u64; MAX_RUNS],
    /// Entries in the table (not the stash).
    in_table: u64,
    rng: u64,
    /// Inserts that needed a cuckoo walk, and walks that failed.
    kicked: u64,
    failed_walks: u64,
    /// A cuckoo walk's buckets and their new contents (kept to reuse its allocation).
    path: Vec<(u64, u64)>,
}

/// A key-to-run filter for a whole tree (see the module documentation).
#[derive(Debug)]
pub struct GlobalFilter {
    table: Table,
    layout: Layout,
    stash: RwLock<StashMap>,
    stash_len: AtomicUsize,
    /// Entries moved from the stash into the table so far. The writer bumps it after an
    /// entry is in the table and before it leaves the stash, so a query that read the table
    /// before the move and the stash after it sees the count change and asks again.
    settled: AtomicU64,
    state: Mutex<State>,
}

/// What a merged key did, for [`Writer::merge_batch`]: the runs that held a version of it
/// (the compaction's inputs) and the run that holds the survivor, `None` when the key was
/// dropped (a tombstone at the bottom).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeKey {
    /// The key's hash.
    pub hash: u64,
    /// The runs that held a version of the key before the merge.
    pub from: RunSet,
    /// The run that holds the key after it, if any.
    pub to: Option<RunId>,
}

/// Everything a filter holds (for checks and tests): each bucket entry as (bucket, run,
/// stored fingerprint), and each stashed copy as (key hash, run), sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contents {
    /// Entries in the buckets.
    pub table: Vec<(u64, RunId, u32)>,
    /// Entries in the stash.
    pub stash: Vec<(u64, RunId)>,
}

/// Sizes and counts of a global filter.
#[derive(Clone, Debug, PartialEq)]
pub struct GlobalStats {
    /// The layout's name.
    pub layout: &'static str,
    /// Buckets of 4 slots.
    pub buckets: u64,
    /// Entries in the table.
    pub in_table: u64,
    /// Entries in the stash.
    pub stashed: u64,
    /// Entries per run id (table and stash).
    pub counts: [u64; MAX_RUNS],
    /// Entries in the table ÷ slots.
    pub load: f64,
    /// Bytes the filter holds: table, seqlock words, stash and code tables.
    pub memory_bytes: u64,
    /// Inserts that needed a cuckoo walk.
    pub kicked: u64,
    /// Walks that found no free slot.
    pub failed_walks: u64,
}

impl GlobalFilter {
    /// An empty filter with room for about `capacity` entries at [`DESIGN_LOAD`].
    pub fn new(layout: Layout, capacity: u64) -> Result<GlobalFilter> {
        let buckets = ((capacity as f64 / (4.0 * DESIGN_LOAD)).ceil() as u64).max(1);
        Self::with_buckets(layout, buckets)
    }

    /// An empty filter of `buckets` buckets.
    pub fn with_buckets(layout: Layout, buckets: u64) -> Result<GlobalFilter> {
        if buckets == 0 {
            return Err(Error::InvalidArgument(
                "a global filter of 0 buckets".to_string(),
            ));
        }
        if buckets > 1 << 40 {
            return Err(Error::OutOfMemory {
                what: format!("a global filter of {buckets} buckets (at most 2^40)"),
                bytes: buckets.saturating_mul(8),
            });
        }
        let table = match layout {
            Layout::Fixed16 => Table::new(buckets)?,
        };
        Ok(GlobalFilter {
            table,
            layout,
            stash: RwLock::new(StashMap::default()),
            stash_len: AtomicUsize::new(0),
            settled: AtomicU64::new(0),
            state: Mutex::new(State {
                runs: Runs::default(),
                counts: [0; MAX_RUNS],
                in_table: 0,
                rng: 0x2545_f491_4f6c_dd1d ^ buckets,
                kicked: 0,
                failed_walks: 0,
                path: Vec::new(),
            }),
        })
    }

    /// The runs that may hold the key with hash `hash`: every run holding a version of it,
    /// and the few whose entries for other keys match its fingerprint. Never blocks; safe
    /// to call while a [`Writer`] works.
    #[inline]
    pub fn query(&self, hash: u64) -> RunSet {
        self.query_lines(hash).0
    }

    /// [`query`](Self::query), and the distinct 64-byte lines of the table it read (1 or 2,
    /// as [`lines_touched`](Self::lines_touched) counts them).
    #[inline]
    pub fn query_lines(&self, hash: u64) -> (RunSet, u32) {
        loop {
            // An entry the writer moves from the stash into the table is in one of the two
            // at every instant, but a query reads the table first and the stash second: the
            // count of moves tells it when one happened in between (see `settled`).
            let moved = self.settled.load(Ordering::Acquire);
            let (mut set, lines) = self.table.query(hash);
            if self.stash_len.load(Ordering::Acquire) != 0 {
                set = self.query_stash(hash, set);
            }
            if self.settled.load(Ordering::Acquire) == moved {
                return (set, lines);
            }
        }
    }

    /// Asks the CPU to bring the lines of the key's two buckets into cache, without waiting
    /// for them: a lookup issues it before other work (the memtables' search) so that the
    /// misses of its [`query`](Self::query) overlap that work.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        let (i1, i2) = self.table.pair(hash);
        self.table.prefetch(i1);
        self.table.prefetch(i2);
    }

    #[cold]
    fn query_stash(&self, hash: u64, mut set: RunSet) -> RunSet {
        let stash = self.stash.read().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = stash.get(&hash) {
            for &(run, _) in v {
                set = set.with(run);
            }
        }
        set
    }

    /// False when no run holds the key (the filter's "absent").
    pub fn may_contain(&self, hash: u64) -> bool {
        !self.query(hash).is_empty()
    }

    /// The distinct 64-byte lines of the table a query for `hash` reads (1 or 2; the
    /// seqlock words are not counted).
    pub fn lines_touched(&self, hash: u64) -> u32 {
        self.table.lines(hash)
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Buckets of 4 slots.
    pub fn buckets(&self) -> u64 {
        self.table.buckets
    }

    /// The writer: holds the filter's mutex until dropped. Queries go on meanwhile.
    pub fn writer(&self) -> Writer<'_> {
        Writer {
            f: self,
            st: self.state.lock().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// Bytes held: table, seqlock words, stash.
    pub fn memory_bytes(&self) -> u64 {
        let stash = self.stash_len.load(Ordering::Relaxed) as u64 * 48;
        self.table.bytes() + self.table.seqs.len() as u64 * 4 + stash
    }

    /// The false-positive rate theory predicts for an absent key, from the entries held:
    /// each entry lies in the queried pair with probability 2/B and its fingerprint matches
    /// with probability 1/2047, so the expected matches are E = n·(2/B)/2047 for n entries
    /// and the rate is 1 − e^−E.
    pub fn theoretical_fpr(&self) -> f64 {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let n: u64 = st.counts.iter().sum();
        let e = n as f64 * 2.0 / self.table.buckets as f64 / fixed::FP_VALUES as f64;
        1.0 - (-e).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(i: usize) -> RunId {
        match i % 6 {
            j @ 0..=2 => RunId::level(j as u8 + 1).unwrap(),
            j => RunId::from_index(5 + j).unwrap(),
        }
    }

    /// A filter larger than the allocator can give is an error, not an abort: past 2^40
    /// buckets it is refused before any allocation, and below that the table's words are
    /// reserved fallibly (a count past what an allocation can hold fails there, on any
    /// machine, without trying).
    #[test]
    fn a_filter_too_large_to_allocate_is_an_error() {
        let layout = Layout::Fixed16;
        let e = GlobalFilter::with_buckets(layout.clone(), (1 << 40) + 1).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
        let e = Table::new(1 << 62).unwrap_err();
        match e {
            Error::OutOfMemory { bytes, .. } => assert!(bytes >= 1 << 62, "{bytes}"),
            e => panic!("{e}"),
        }
        assert!(GlobalFilter::with_buckets(layout, 1).is_ok());
    }

    /// Every entry stays findable by an exact search through walks, the stash, and
    /// removals; a stashed key whose fingerprint matches another key's bucket entry takes
    /// its own stash entry when removed, not the other key's.
    #[test]
    fn every_entry_survives_walks_stash_and_removals() {
        let f = GlobalFilter::with_buckets(Layout::Fixed16, 64).unwrap();
        let mut w = f.writer();
        let keys: Vec<u64> = (0..400u64).map(mix64).collect();
        for (i, &h) in keys.iter().enumerate() {
            w.insert(h, run(i));
        }
        assert!(w.stats().stashed > 0);
        let live = |w: &Writer<'_>, gone: &dyn Fn(usize) -> bool| {
            for (j, &g) in keys.iter().enumerate() {
                if !gone(j) {
                    assert!(w.contains_entry(g, run(j)), "lost key {j}");
                }
            }
        };
        live(&w, &|_| false);
        for (i, &h) in keys.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
            assert!(w.remove(h, run(i)), "remove {i}");
            if i % 20 == 0 {
                live(&w, &|j| j % 2 == 0 && j <= i);
            }
        }
        live(&w, &|j| j % 2 == 0);
        assert_eq!(w.len(), 200);
    }

    /// A query's count of lines is the number of distinct 64-byte lines its two buckets'
    /// bits lie in (counted from each bucket's first and last bit), and its runs are
    /// `query`'s.
    #[test]
    fn query_lines_counts_the_distinct_lines_of_the_bucket_pair() {
        let f = GlobalFilter::with_buckets(Layout::Fixed16, 1 << 12).unwrap();
        let mut w = f.writer();
        for i in 0..8_000u64 {
            w.insert(mix64(i), run(i as usize));
        }
        drop(w);
        let (mut ones, mut twos) = (0, 0);
        for i in 0..200_000u64 {
            let h = mix64(i ^ 0x5555);
            let (i1, i2) = f.table.pair(h);
            let mut lines: Vec<usize> = [i1, i2]
                .iter()
                .flat_map(|&b| {
                    // Bucket b is word b: bits 64b .. 64b + 64 of the table.
                    let first = b as usize * 64;
                    [first / 512, (first + 63) / 512]
                })
                .collect();
            lines.sort_unstable();
            lines.dedup();
            let (set, n) = f.query_lines(h);
            assert_eq!(n as usize, lines.len(), "hash {h:#x}");
            assert_eq!(f.lines_touched(h), n);
            assert_eq!(set, f.query(h));
            if n == 1 {
                ones += 1
            } else {
                twos += 1
            }
        }
        // Both cases occur in a table of 4,096 buckets.
        assert!(ones > 0 && twos > 0, "{ones} {twos}");
    }
}
