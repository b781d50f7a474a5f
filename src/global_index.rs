//! The store's global key-to-run filter as the engine keeps it: one
//! [`GlobalFilter`] for every table of a store under [`FilterKind::Global`], with the
//! counters its lookups bump. The tables are the durable truth: the filter is built from
//! their keys when a store opens, kept up to date by flushes (insert), compactions and
//! trivial moves (the new run's entries added before the install, the old runs' removed
//! after it), and grown by building a larger one from the tables' keys again
//! (`store/global.rs` does all of that; `version/` reads through it). See
//! `docs/global-filter.md`.
//!
//! [`FilterKind::Global`]: crate::filter::FilterKind::Global

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use crate::counters::Sharded;
use crate::error::Result;
use crate::filter::global::{GlobalFilter, Layout, RunId, RunSet, DESIGN_LOAD};
use crate::table::{Table, TableCounters, TableCursor};

/// A table's run id when it has none (a table of a store without a global filter, or a
/// level's table, whose id is its level's).
pub(crate) const NO_RUN: u8 = u8::MAX;

/// The smallest filter a store gets, in entries: about 0.5 MB of table.
pub(crate) const MIN_CAPACITY: u64 = 1 << 18;

/// A filter built for a store's tables holds this many times their entries (at open and
/// refilter): room for a compaction's moved keys, whose new entries come before the old ones
/// go, and for some growth.
pub(crate) const HEADROOM: f64 = 1.5;

/// A filter built because the last one was full holds this many times the entries, so a
/// growing store rebuilds it O(log n) times.
pub(crate) const GROWTH: f64 = 2.0;

/// Counter slots (see [`GlobalIndex`]).
const PROBES: usize = 0;
const NEGATIVES: usize = 1;
const POSITIVES: usize = 2;
const FALSE_POSITIVES: usize = 3;
const LINES: usize = 4;

/// A store's global filter and its lookup counters.
#[derive(Debug)]
pub(crate) struct GlobalIndex {
    pub(crate) filter: GlobalFilter,
    /// Entries the filter was sized for ([`GlobalFilter::new`]).
    pub(crate) capacity: u64,
    /// The store's counters (shared by every filter a store handle builds).
    counters: Arc<Sharded<8>>,
    /// A change under way that relabels entries before its tables are published ([`Move`],
    /// encoded; 0: none). See [`GlobalIndex::begin_move`].
    moving: AtomicU64,
}

/// A compaction or trivial move in flight in the filter: entries of `sources` are being
/// relabelled to `output` (or removed) before the table set that matches is published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Move {
    /// The runs whose keys move (the compaction's inputs outside the output level).
    pub sources: RunSet,
    /// The run they move to.
    pub output: RunId,
}

impl Move {
    fn encode(self) -> u64 {
        1 << 40 | (self.output.index() as u64) << 32 | u64::from(self.sources.0)
    }

    fn decode(x: u64) -> Option<Move> {
        if x == 0 {
            return None;
        }
        Some(Move {
            sources: RunSet(x as u32),
            output: RunId::from_index((x >> 32 & 0xff) as usize)?,
        })
    }
}

/// What the global filter's lookups did, summed over its life in this handle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GlobalCounts {
    /// Lookups that asked the filter.
    pub probes: u64,
    /// Lookups the filter answered "absent" (no run named): reads avoided.
    pub negatives: u64,
    /// Runs the filter named that were read.
    pub positives: u64,
    /// Runs named and read that did not hold the key.
    pub false_positives: u64,
    /// Cache lines of the filter's table the probes read.
    pub lines: u64,
}

impl GlobalIndex {
    /// An empty filter for `capacity` entries (at least [`MIN_CAPACITY`]).
    /// Its lookups count in `counters` ([`counts`]).
    pub(crate) fn new(capacity: u64, counters: Arc<Sharded<8>>) -> Result<GlobalIndex> {
        let capacity = capacity.max(MIN_CAPACITY);
        Ok(GlobalIndex {
            filter: GlobalFilter::new(Layout::Fixed16, capacity)?,
            capacity,
            counters,
            moving: AtomicU64::new(0),
        })
    }

    /// A filter read back from its checkpoint, sized for what its buckets hold at the
    /// design load.
    pub(crate) fn from_filter(filter: GlobalFilter, counters: Arc<Sharded<8>>) -> GlobalIndex {
        let capacity = (filter.buckets() as f64 * 4.0 * DESIGN_LOAD) as u64;
        GlobalIndex {
            filter,
            capacity,
            counters,
            moving: AtomicU64::new(0),
        }
    }

    /// The runs that may hold the key of `hash`, counted as one probe. While a move is under
    /// way ([`begin_move`](Self::begin_move)), a set that names its output names its sources
    /// too: the key's entry may have been relabelled before its new tables are published.
    #[inline]
    pub(crate) fn query(&self, hash: u64) -> RunSet {
        let mut set = self.filter.query(hash);
        // After the filter's words (see `begin_move`).
        if let Some(m) = Move::decode(self.moving.load(SeqCst)) {
            if set.contains(m.output) {
                set = set | m.sources;
            }
        }
        let c = &self.counters;
        c.add(PROBES, 1);
        c.add(LINES, u64::from(self.filter.lines_touched(hash)));
        if set.is_empty() {
            c.add(NEGATIVES, 1);
        }
        set
    }

    /// Announces a compaction or trivial move that is about to relabel entries of
    /// `m.sources` to `m.output` (and remove others) before the tables that match are
    /// published, so that meanwhile a lookup through the tables as they were still finds
    /// every key: a set naming the output names the sources too ([`query`](Self::query)).
    ///
    /// Why that suffices: a key the change touches keeps an entry in its sources or in the
    /// output at every instant (a relabel rewrites one entry in place), except one that is
    /// dropped, whose newest version is a tombstone with nothing below (absent either way).
    /// The announcement is stored before the first bucket changes, and a lookup reads it
    /// after its buckets: one that saw a changed bucket sees the announcement (the bucket
    /// writes are released after it, the query's reads acquired before), or, if it was
    /// already withdrawn, the owner's bump of the removal count that comes before
    /// [`end_move`](Self::end_move), and looks again with the new tables.
    pub(crate) fn begin_move(&self, m: Move) {
        self.moving.store(m.encode(), SeqCst);
    }

    /// Withdraws [`begin_move`](Self::begin_move)'s announcement: call it after the
    /// change's tables are published (or its entries put back) and the removal count
    /// bumped.
    pub(crate) fn end_move(&self) {
        self.moving.store(0, SeqCst);
    }

    /// A run the filter named was read: `found` whether it held the key.
    #[inline]
    pub(crate) fn count_read(&self, found: bool) {
        self.counters.add(POSITIVES, 1);
        if !found {
            self.counters.add(FALSE_POSITIVES, 1);
        }
    }

    /// The counts so far.
    pub(crate) fn counts(&self) -> GlobalCounts {
        counts(&self.counters)
    }
}

/// The counts in `c` (the counters of [`GlobalIndex::new`]).
pub(crate) fn counts(c: &Sharded<8>) -> GlobalCounts {
    GlobalCounts {
        probes: c.get(PROBES),
        negatives: c.get(NEGATIVES),
        positives: c.get(POSITIVES),
        false_positives: c.get(FALSE_POSITIVES),
        lines: c.get(LINES),
    }
}

impl GlobalIndex {
    /// True when more entries than the filter was sized for would be added by `more`, or
    /// the filter says it must be rebuilt ([`Writer::needs_rebuild`]).
    ///
    /// [`Writer::needs_rebuild`]: crate::filter::global::Writer::needs_rebuild
    pub(crate) fn full_after(&self, more: u64) -> bool {
        let w = self.filter.writer();
        w.len() + more > self.capacity || w.needs_rebuild()
    }
}

/// The run id of level `level` (1..=6).
pub(crate) fn level_run(level: usize) -> Option<RunId> {
    u8::try_from(level).ok().and_then(RunId::level)
}

/// The key hashes of `table`, in key order.
pub(crate) fn table_hashes(table: &Arc<Table>) -> Result<Vec<u64>> {
    let scratch = Arc::new(TableCounters::default());
    let mut hashes = Vec::with_capacity(table.meta.entries.min(1 << 24) as usize);
    let mut c = TableCursor::new(table.clone(), scratch)?;
    while c.valid() {
        hashes.push(crate::hash::key_hash(c.key()));
        c.advance()?;
    }
    Ok(hashes)
}

/// The global filter's size and what its lookups did (see [`Stats::global_filter`](crate::Stats::global_filter)).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct GlobalFilterStats {
    /// Its layout (`fixed16`).
    pub layout: &'static str,
    /// Bytes it takes in memory: table, sequence words, stash.
    pub memory_bytes: u64,
    /// Entries it holds: one per version of a key in a table.
    pub entries: u64,
    /// Entries it was sized for; a larger one is built from the tables' keys past that.
    pub capacity: u64,
    /// Buckets of its table (four entries each; format.md, "Global filter").
    pub buckets: u64,
    /// Entries in its stash (no bucket pair had room).
    pub stashed: u64,
    /// Lookups that probed it (this process's).
    pub probes: u64,
    /// Cache lines of its table those probes read.
    pub lines_touched: u64,
    /// The false-positive rate its fingerprints give per probe, in theory.
    pub theoretical_fpr: f64,
}
