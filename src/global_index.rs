//! The store's global key-to-run filter as the engine keeps it: one
//! [`GlobalFilter`] for every table of a store under [`FilterKind::Global`], with the
//! counters its lookups bump. The tables are the durable truth: the filter is built from
//! their keys when a store opens (or read from its checkpoint), kept up to date by flushes
//! (insert), compactions and trivial moves (entries relabelled in place under a [`Move`]
//! announcement), and grown by building a larger one from the tables' keys in the
//! background while its [`Change`] log keeps what happens meanwhile (`store/global.rs`
//! does all of that; `version/` reads through it). See `docs/global-filter.md`.
//!
//! [`FilterKind::Global`]: crate::filter::FilterKind::Global

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};

use crate::counters::Sharded;
use crate::error::{Error, Result};
use crate::filter::global::{GlobalFilter, Layout, MergeKey, RunId, RunSet, Writer, DESIGN_LOAD};
use crate::table::{key_hashes, Table, TableCounters, TableCursor};

/// A table's run id when it has none (a table of a store without a global filter, or a
/// level's table, whose id is its level's).
pub(crate) const NO_RUN: u8 = u8::MAX;

/// The smallest filter a store gets, in entries: about 34 KB of table. It holds only the
/// upper runs' keys (the deepest level's tables have filters of their own), which a small
/// store may not have at all.
pub(crate) const MIN_CAPACITY: u64 = 1 << 14;

/// A filter built for a store's tables holds this many times their entries (at open and
/// refilter): room for a compaction's moved keys, whose new entries come before the old ones
/// go, and for some growth.
pub(crate) const HEADROOM: f64 = 1.5;

/// A filter built because the last one was filling holds this many times the entries it
/// was sized for, so a growing store rebuilds it O(log n) times.
pub(crate) const GROWTH: f64 = 2.0;

/// Share of its capacity past which a filter starts growing: a larger one is built in the
/// background while the store goes on (`store/global.rs`), so that it is usually ready
/// before a flush finds the filter full.
pub(crate) const GROW_AT: f64 = 0.8;

/// Share of its capacity below which a filter is rebuilt smaller (see
/// [`GlobalIndex::wants_shrink`]); its successor is sized [`GROWTH`] times its entries.
pub(crate) const SHRINK_AT: f64 = 0.125;

/// Counter slots (see [`GlobalIndex`]).
const PROBES: usize = 0;
const NEGATIVES: usize = 1;
const POSITIVES: usize = 2;
const FALSE_POSITIVES: usize = 3;
const LINES: usize = 4;
/// Reads of a table's keys from its data blocks by a build or change of the filter (a
/// table without a key hashes file; a build reads one twice: to count, then to insert),
/// and the data blocks they read.
const KEY_TABLES_READ: usize = 5;
const KEY_BLOCKS_READ: usize = 6;
/// Larger (or smaller) filters built in the background and swapped in for the tree's.
const GROWTHS: usize = 7;

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
    /// While a larger filter is built to replace this one: every change made to this one
    /// since the table set it is built from, in order, to replay before the swap
    /// ([`GlobalIndex::record`]).
    log: Mutex<Option<Vec<Change>>>,
    /// Read back from its checkpoint at open, not built from the tables' keys.
    from_checkpoint: bool,
}

/// A change made to a filter while its successor is built (see [`GlobalIndex::record`]).
#[derive(Debug)]
pub(crate) enum Change {
    /// A flushed table's keys inserted under its L0 id ([`Writer::insert_batch`]).
    Insert(Vec<u64>, RunId),
    /// A flushed table's keys taken out again, its table not written
    /// ([`Writer::remove_batch`]).
    Remove(Vec<u64>, RunId),
    /// A compaction's merged keys ([`Writer::merge_batch`]).
    Merge(Vec<MergeKey>),
    /// A failed compaction's merged keys put back ([`Writer::unmerge_batch`]).
    Unmerge(Vec<MergeKey>),
    /// A trivial move's keys relabelled ([`Writer::relabel_batch`]).
    Relabel(Vec<u64>, RunId, RunId),
}

impl Change {
    /// Applies the change to another filter's writer.
    pub(crate) fn replay(mut self, w: &mut Writer<'_>) {
        match &mut self {
            Change::Insert(h, run) => {
                w.insert_batch(h, *run);
            }
            Change::Remove(h, run) => {
                w.remove_batch(h, *run);
            }
            Change::Merge(k) => {
                w.merge_batch(k);
            }
            Change::Unmerge(k) => {
                w.unmerge_batch(k);
            }
            Change::Relabel(h, from, to) => {
                w.relabel_batch(h, *from, *to);
            }
        }
    }

    /// Keys it touches.
    pub(crate) fn len(&self) -> usize {
        match self {
            Change::Insert(h, _) | Change::Remove(h, _) | Change::Relabel(h, _, _) => h.len(),
            Change::Merge(k) | Change::Unmerge(k) => k.len(),
        }
    }
}

/// A compaction or trivial move in flight in the filter: entries of `sources` are being
/// relabelled to `output` (or removed) before the table set that matches is published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Move {
    /// The runs whose keys move (the compaction's inputs outside the output level).
    pub sources: RunSet,
    /// The run they move to; `None` when the output's tables have filters of their own (the
    /// deepest level's), so the moved keys' entries are removed: every lookup meanwhile
    /// reads the sources.
    pub output: Option<RunId>,
}

/// [`Move::output`]'s encoding for `None`.
const NO_OUTPUT: u64 = 0xff;

impl Move {
    fn encode(self) -> u64 {
        let output = self.output.map_or(NO_OUTPUT, |o| o.index() as u64);
        1 << 40 | output << 32 | u64::from(self.sources.0)
    }

    fn decode(x: u64) -> Option<Move> {
        if x == 0 {
            return None;
        }
        let output = x >> 32 & 0xff;
        Some(Move {
            sources: RunSet(x as u32),
            output: match output {
                NO_OUTPUT => None,
                o => Some(RunId::from_index(o as usize)?),
            },
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
    /// Tables whose keys were read from their data blocks (no key hashes file).
    pub key_tables_read: u64,
    /// Data blocks read for them.
    pub key_blocks_read: u64,
    /// Filters grown (or shrunk) in the background and swapped in.
    pub growths: u64,
}

/// Counts a filter grown in the background and swapped in, in its tree's `counters`.
pub(crate) fn count_growth(counters: &Sharded<8>) {
    counters.add_all([(GROWTHS, 1)]);
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
            log: Mutex::new(None),
            from_checkpoint: false,
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
            log: Mutex::new(None),
            from_checkpoint: true,
        }
    }

    /// The counters its lookups count in (its tree's: every filter built for the tree
    /// shares them).
    pub(crate) fn counters(&self) -> &Arc<Sharded<8>> {
        &self.counters
    }

    /// The runs that may hold the key of `hash`, counted as one probe. While a move is under
    /// way ([`begin_move`](Self::begin_move)), a set that names its output names its sources
    /// too: the key's entry may have been relabelled before its new tables are published.
    #[inline]
    pub(crate) fn query(&self, hash: u64) -> RunSet {
        let (mut set, lines) = self.filter.query_lines(hash);
        // After the filter's words (see `begin_move`).
        if let Some(m) = Move::decode(self.moving.load(SeqCst)) {
            if m.output.is_none_or(|o| set.contains(o)) {
                set = set | m.sources;
            }
        }
        self.counters.add_all([
            (PROBES, 1),
            (LINES, u64::from(lines)),
            (NEGATIVES, u64::from(set.is_empty())),
        ]);
        set
    }

    /// Brings the key's buckets toward the cache ([`GlobalFilter::prefetch`]).
    #[inline]
    pub(crate) fn prefetch(&self, hash: u64) {
        self.filter.prefetch(hash);
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

    /// Whether a [`Move`] is announced: a compaction or trivial move is changing entries in
    /// place (a snapshot, which may need the versions it consumes, reads unfiltered
    /// meanwhile).
    pub(crate) fn is_moving(&self) -> bool {
        self.moving.load(SeqCst) != 0
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

    fn lock_log(&self) -> std::sync::MutexGuard<'_, Option<Vec<Change>>> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts keeping the changes made to this filter ([`record`](Self::record)): call it
    /// when the filter holds exactly the entries of the table set a successor is built from.
    pub(crate) fn start_log(&self) {
        *self.lock_log() = Some(Vec::new());
    }

    /// Whether changes are being kept: a growth is under way.
    pub(crate) fn logging(&self) -> bool {
        self.lock_log().is_some()
    }

    /// Notes a change just made to this filter, if changes are being kept (`change` is only
    /// called then). Call it while holding the filter's writer, so that changes are kept in
    /// the order they were made.
    pub(crate) fn record(&self, change: impl FnOnce() -> Change) {
        if let Some(log) = self.lock_log().as_mut() {
            log.push(change());
        }
    }

    /// The changes kept since the last call (or since [`start_log`](Self::start_log)); the
    /// log goes on.
    pub(crate) fn take_log(&self) -> Vec<Change> {
        self.lock_log()
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Keys of the changes kept so far.
    #[cfg(test)]
    pub(crate) fn logged(&self) -> usize {
        self.lock_log().iter().flatten().map(Change::len).sum()
    }

    /// Stops keeping changes and drops those kept.
    pub(crate) fn stop_log(&self) {
        *self.lock_log() = None;
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
        key_tables_read: c.get(KEY_TABLES_READ),
        key_blocks_read: c.get(KEY_BLOCKS_READ),
        growths: c.get(GROWTHS),
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

    /// True when the filter holds less than [`SHRINK_AT`] of its capacity and is more than
    /// 4 × [`MIN_CAPACITY`]: it was grown for a peak of the upper runs (an L0 backlog) that
    /// compactions have since carried into the deepest levels, whose tables have filters of
    /// their own. Its successor is built smaller (`store/global.rs`, `grown_capacity`).
    pub(crate) fn wants_shrink(&self) -> bool {
        let w = self.filter.writer();
        self.capacity > 4 * MIN_CAPACITY && (w.len() as f64) < self.capacity as f64 * SHRINK_AT
    }

    /// True when `more` entries would take the filter past [`GROW_AT`] of its capacity (or
    /// it must be rebuilt): time to build its successor.
    pub(crate) fn wants_growth(&self, more: u64) -> bool {
        let w = self.filter.writer();
        (w.len() + more) as f64 > self.capacity as f64 * GROW_AT || w.needs_rebuild()
    }
}

/// The run id of level `level` (1..=6).
pub(crate) fn level_run(level: usize) -> Option<RunId> {
    u8::try_from(level).ok().and_then(RunId::level)
}

/// The key hashes of `table`, in key order: its key hashes file `file`, when it has one (a
/// table written under the global filter), else read from its data blocks
/// ([`table_hashes`], counted in `counters`). Either way their number is the table's
/// entries (else an error naming the file).
pub(crate) fn handle_hashes(
    table: &Arc<Table>,
    file: Option<&std::path::Path>,
    counters: &Sharded<8>,
) -> Result<Vec<u64>> {
    let Some(f) = file else {
        let scratch = Arc::new(TableCounters::default());
        let h = read_table_hashes(table, &scratch)?;
        counters.add_all([
            (KEY_TABLES_READ, 1),
            (KEY_BLOCKS_READ, scratch.block_reads()),
        ]);
        return Ok(h);
    };
    let h = key_hashes::read(f)?;
    check_count(f, h.len() as u64, table.meta.entries)?;
    Ok(h)
}

/// The number of key hashes of `table`, counted (what a filter over it is sized by, never
/// the entry count its meta claims): from its key hashes file's length, else by reading its
/// keys (counted in `counters`). An error names the file when the count is not the table's
/// entries.
pub(crate) fn handle_count(
    table: &Arc<Table>,
    file: Option<&std::path::Path>,
    counters: &Sharded<8>,
) -> Result<u64> {
    match file {
        Some(f) => {
            let n = key_hashes::count(f)?;
            check_count(f, n, table.meta.entries)?;
            Ok(n)
        }
        None => Ok(handle_hashes(table, None, counters)?.len() as u64),
    }
}

/// A key hashes file of `n` hashes for a table whose meta claims `entries`: corrupt unless
/// equal.
fn check_count(path: &std::path::Path, n: u64, entries: u64) -> Result<()> {
    if n == entries {
        return Ok(());
    }
    Err(Error::corrupt(
        key_hashes::HEADER_LEN as u64,
        format!("the key hashes file holds {n} hashes, the table meta claims {entries}"),
    )
    .in_file(path, 0))
}

/// The key hashes of `table`, in key order (read from its data blocks). A table whose blocks hold another number of
/// keys than its meta claims is corrupt (the global filter is sized by those claims): an
/// error naming the table.
pub(crate) fn table_hashes(table: &Arc<Table>) -> Result<Vec<u64>> {
    read_table_hashes(table, &Arc::new(TableCounters::default()))
}

/// [`table_hashes`], its reads counted in `scratch`.
fn read_table_hashes(table: &Arc<Table>, scratch: &Arc<TableCounters>) -> Result<Vec<u64>> {
    let scratch = scratch.clone();
    // Grown as keys are read: the claim sizes nothing.
    let mut hashes = Vec::with_capacity(table.meta.entries.min(1 << 12) as usize);
    let mut c = TableCursor::new(table.clone(), scratch)?;
    while c.valid() {
        hashes.push(crate::hash::key_hash(c.key()));
        c.advance()?;
    }
    if hashes.len() as u64 != table.meta.entries {
        return Err(Error::corrupt(
            table.index_offset,
            format!(
                "the data blocks hold {} keys, the table meta claims {}",
                hashes.len(),
                table.meta.entries
            ),
        )
        .in_file(table.path(), 0));
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
    /// Larger filters built in the background and swapped in for a full one (this
    /// handle's, for this keyspace's tree).
    pub growths: u64,
    /// Lookups that probed it (this process's).
    pub probes: u64,
    /// Cache lines of its table those probes read.
    pub lines_touched: u64,
    /// The false-positive rate its fingerprints give per probe, in theory.
    pub theoretical_fpr: f64,
    /// Reads of a table's keys from its data blocks by its builds and changes, for tables
    /// without a key hashes file (written before them, or under another filter; a build
    /// reads such a table twice: to count its keys, then to insert them).
    pub key_tables_read: u64,
    /// Data blocks read for them (0 while every table has a key hashes file).
    pub key_blocks_read: u64,
    /// Whether this filter was read back from its checkpoint when the store opened
    /// (`GLOBALFILTER`, or a named keyspace's `GLOBALFILTER-ID`), not built from the tables'
    /// keys; false too once a growth or a refilter replaced it.
    pub from_checkpoint: bool,
}

impl GlobalIndex {
    /// Its size and what its lookups did.
    pub(crate) fn stats(&self) -> GlobalFilterStats {
        let st = self.filter.writer().stats();
        let counts = self.counts();
        GlobalFilterStats {
            layout: st.layout,
            memory_bytes: st.memory_bytes,
            entries: st.in_table + st.stashed,
            capacity: self.capacity,
            buckets: st.buckets,
            stashed: st.stashed,
            growths: counts.growths,
            probes: counts.probes,
            lines_touched: counts.lines,
            theoretical_fpr: self.filter.theoretical_fpr(),
            key_tables_read: counts.key_tables_read,
            key_blocks_read: counts.key_blocks_read,
            from_checkpoint: self.from_checkpoint,
        }
    }
}
