//! Range scans: a [`Merge`] of sorted sources, each read only as far as the scan goes.
//!
//! ```text
//! Scan ─► Merge ─┬─ MemSource  the memtable, as of the scan's start: a few entries at a time
//!                │             copied out under the store's lock (briefly), then none held
//!                ├─ MemSource  the immutable memtable (takes no writes: read without a lock)
//!                ├─ TableRun   one per L0 table whose range reaches the start
//!                └─ TableRun   one per deeper level: its tables one after another
//! ```
//! A table source does nothing until the merge needs it: it waits, pending, on its table's
//! smallest key, and reads its first block only when the merge reaches that key. It then
//! takes one block at a time ([`Table::scan_block`]: from the block cache, or read from the
//! file with the next block, which the source keeps for when it goes on) and decodes it in
//! place with a [`BlockCursor`]. A level's source opens only the table that holds the start, and the next
//! one when the merge reaches that one's smallest key. So a scan of `limit` entries from a
//! key reads about one block per source, plus one per block of entries it returns.
//!
//! **Snapshot.** A scan sees the store as of its start. It takes, under the store's state
//! lock: a [`MemCursor`] of the memtable (its key order and write position of that moment;
//! see `memtable/mod.rs`, "Snapshots"), the immutable memtable, and the table set (`Version`).
//! Writes after that are not seen (new keys, overwrites and deletes alike). No store lock is
//! held between calls to `next`: a thread may write while it iterates. When the memtable is
//! made immutable and sealed under a scan, the scan keeps reading it: it holds the memtable
//! (`Arc`) once it was made immutable ([`LiveMemtable::frozen`]). Compactions and flushes
//! under a scan change the live table set, not the scan's: the tables the scan holds stay
//! readable after compaction removes them from the manifest and unlinks their files,
//! because each open [`Table`] keeps its file descriptor (and map), and an unlinked file's
//! bytes stay readable through them until the last holder (here, the scan's `Version`)
//! closes it.

use std::ops::Bound;
use std::sync::Arc;

use crate::counters::Sharded;
use crate::error::Result;
use crate::memtable::{EntryBuf, MemCursor, Memtable};
use crate::merge::{Merge, Source, State};
use crate::table::block::BlockCursor;
use crate::table::{BlockBytes, ReadAhead, Table};
use crate::version::{prefix8, TableHandle, Version};

/// Entries copied from a memtable by a scan's first fill: most scans need few of them.
const FIRST_FILL: usize = 1;
/// The most entries one fill copies (each fill doubles the last, up to this).
const MAX_FILL: usize = 128;

/// A memtable that still takes writes, as a scan reaches it: the store implements this with
/// its state lock, and with the memtable itself once it was made immutable.
pub(crate) trait LiveMemtable: Send + Sync {
    /// The memtable, once it takes no more writes; read without a lock from then on.
    fn frozen(&self) -> Option<Arc<Memtable>>;
    /// Calls `f` with the memtable, under the lock that keeps writes out.
    fn with(&self, f: &mut dyn FnMut(&Memtable));
}

enum MemRef {
    Live(Box<dyn LiveMemtable>),
    Frozen(Arc<Memtable>),
}

/// A memtable's entries from the scan's start, as of the scan's start, copied into a small
/// buffer a few at a time (a fill doubles the last, from [`FIRST_FILL`] to [`MAX_FILL`]).
pub(crate) struct MemSource {
    mem: MemRef,
    cursor: MemCursor,
    buf: EntryBuf,
    /// The current entry of `buf`.
    at: usize,
    /// The cursor has entries after those in `buf`.
    more: bool,
    fill: usize,
}

impl MemSource {
    /// A source over `mem`, which the caller holds under the lock that keeps writes out,
    /// and which `live` reaches later (the first entries are copied now).
    pub(crate) fn live(mem: &Memtable, start: Bound<&[u8]>, live: Box<dyn LiveMemtable>) -> Self {
        let cursor = mem.cursor(start, true);
        Self::first_fill(MemRef::Live(live), cursor, mem)
    }

    /// A source over a memtable that takes no more writes.
    pub(crate) fn frozen(mem: Arc<Memtable>, start: Bound<&[u8]>) -> Self {
        let cursor = mem.cursor(start, false);
        let m = mem.clone();
        Self::first_fill(MemRef::Frozen(mem), cursor, &m)
    }

    /// A source over `mem` (held as in [`live`](Self::live)) as it was when writes had
    /// reached arena position `snap`: a snapshot's (`store/snapshot.rs`).
    pub(crate) fn live_at(
        mem: &Memtable,
        start: Bound<&[u8]>,
        snap: u64,
        live: Box<dyn LiveMemtable>,
    ) -> Self {
        let cursor = mem.cursor_at(start, snap, true);
        Self::first_fill(MemRef::Live(live), cursor, mem)
    }

    /// A source over a memtable that takes no more writes, as it was at position `snap`.
    pub(crate) fn frozen_at(mem: Arc<Memtable>, start: Bound<&[u8]>, snap: u64) -> Self {
        let cursor = mem.cursor_at(start, snap, false);
        let m = mem.clone();
        Self::first_fill(MemRef::Frozen(mem), cursor, &m)
    }

    fn first_fill(mem: MemRef, mut cursor: MemCursor, m: &Memtable) -> Self {
        let mut buf = EntryBuf::default();
        let more = cursor.fill(m, &mut buf, FIRST_FILL);
        MemSource {
            mem,
            cursor,
            buf,
            at: 0,
            more,
            fill: FIRST_FILL,
        }
    }

    fn refill(&mut self) {
        if let MemRef::Live(l) = &self.mem {
            if let Some(m) = l.frozen() {
                self.cursor.release();
                self.mem = MemRef::Frozen(m);
            }
        }
        self.fill = (self.fill * 2).min(MAX_FILL);
        let (cursor, buf, fill) = (&mut self.cursor, &mut self.buf, self.fill);
        self.more = match &self.mem {
            MemRef::Frozen(m) => cursor.fill(m, buf, fill),
            MemRef::Live(l) => {
                let mut more = false;
                l.with(&mut |m| more = cursor.fill(m, buf, fill));
                more
            }
        };
        self.at = 0;
    }
}

impl Source for MemSource {
    fn state(&self) -> State {
        if self.at < self.buf.len() {
            State::Ready
        } else {
            State::Done
        }
    }
    fn key(&self) -> &[u8] {
        if self.at < self.buf.len() {
            self.buf.key(self.at)
        } else {
            &[]
        }
    }
    fn value(&self) -> Option<&[u8]> {
        self.buf.value(self.at)
    }
    fn open(&mut self, _start: Bound<&[u8]>, _end: Bound<&[u8]>) -> Result<()> {
        Ok(()) // never pending: the first entries are copied when the scan starts
    }
    fn advance(&mut self) -> Result<()> {
        self.at += 1;
        if self.at >= self.buf.len() && self.more {
            self.refill();
        }
        Ok(())
    }
}

/// Tables of one level in key order with disjoint ranges (or a single L0 table), read from
/// the scan's start: one table open at a time, one block of it held.
pub(crate) struct TableRun {
    version: Arc<Version>,
    level: usize,
    /// The current table (or, when pending, the next to open), and the end of the run.
    table: usize,
    end: usize,
    /// The current block of the current table.
    block: usize,
    cursor: Option<BlockCursor<BlockBytes>>,
    /// Blocks of table `ahead_table` read with the last block read from a file.
    ahead: ReadAhead,
    ahead_table: usize,
    /// The cursor stands on an entry of `table`.
    ready: bool,
    /// Where range filter probes are counted; `None`: the tables' range filters are not
    /// asked (a scan open at either end, where the key range already says all they could).
    ranges: Option<Arc<RangeCounters>>,
}

/// Counter numbers in [`RangeCounters`].
const PROBES: usize = 0;
const SKIPPED: usize = 1;
const FALSE_POSITIVES: usize = 2;

/// What scans' range filter probes found, over a store handle's life (one set per store,
/// shared by its scans; see `Stats::range_probes`).
#[derive(Debug, Default)]
pub(crate) struct RangeCounters(Sharded<3>);

impl RangeCounters {
    /// Tables whose range filter a scan asked before opening them.
    pub(crate) fn probes(&self) -> u64 {
        self.0.get(PROBES)
    }
    /// Tables a scan skipped because their range filter said the range holds no key of
    /// theirs (no block read).
    pub(crate) fn skipped(&self) -> u64 {
        self.0.get(SKIPPED)
    }
    /// Tables whose range filter said "maybe" and that then held no key in the range.
    pub(crate) fn false_positives(&self) -> u64 {
        self.0.get(FALSE_POSITIVES)
    }
}

impl TableRun {
    /// Tables `tables` (indices into the version's level `level`), pending on the first.
    fn new(
        version: Arc<Version>,
        level: usize,
        tables: std::ops::Range<usize>,
        ranges: Option<&Arc<RangeCounters>>,
    ) -> TableRun {
        TableRun {
            ranges: ranges.cloned(),
            version,
            level,
            table: tables.start,
            end: tables.end,
            block: 0,
            cursor: None,
            ahead: ReadAhead::default(),
            ahead_table: tables.start,
            ready: false,
        }
    }

    fn handle(&self) -> &TableHandle {
        &self.version.levels()[self.level].tables()[self.table]
    }

    /// Makes block `i` of the current table the cursor's (taken through
    /// [`Table::scan_block`], counted in the table's counters).
    fn load(&mut self, i: usize) -> Result<()> {
        let t = &self.version.levels()[self.level].tables()[self.table];
        let table: &Table = &t.table;
        if self.ahead_table != self.table {
            self.ahead.clear();
            self.ahead_table = self.table;
        }
        let bytes = table.scan_block(i, &t.counters, &mut self.ahead)?;
        let base = table.block_span(i).map_or(0, |s| s.0);
        let r = match &mut self.cursor {
            Some(c) => c.reset(bytes, base),
            None => BlockCursor::new(bytes, base).map(|c| self.cursor = Some(c)),
        };
        r.map_err(|e| e.in_file(table.path(), 0))?;
        self.block = i;
        Ok(())
    }

    /// From a cursor position that may be past its block: on to the first entry of the next
    /// blocks; past the table's last block, the next table becomes pending.
    fn settle(&mut self) -> Result<()> {
        loop {
            if self.cursor.as_ref().is_some_and(|c| c.valid()) {
                self.ready = true;
                return Ok(());
            }
            let next = self.block + 1;
            if next >= self.handle().table.block_count() {
                self.ready = false;
                self.table += 1;
                return Ok(());
            }
            self.load(next)?;
            if let Some(c) = &mut self.cursor {
                let r = c.seek_to_first();
                r.map_err(|e| e.in_file(self.handle().table.path(), 0))?;
            }
        }
    }
}

impl Source for TableRun {
    fn state(&self) -> State {
        if self.ready {
            State::Ready
        } else if self.table < self.end {
            State::Pending
        } else {
            State::Done
        }
    }
    fn key(&self) -> &[u8] {
        match (self.ready, &self.cursor) {
            (true, Some(c)) => c.key(),
            _ if self.table < self.end => self.handle().min_key(),
            _ => &[],
        }
    }
    fn value(&self) -> Option<&[u8]> {
        self.cursor.as_ref().and_then(|c| c.value())
    }
    /// Asks the range filter of the table it is about to open, if it has one: a "no"
    /// skips the table (pending on the next one, or done) without reading a block.
    fn open(&mut self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<()> {
        let Some(c) = &self.ranges else {
            return self.open_table(start);
        };
        let Some(f) = &self.handle().range else {
            return self.open_table(start);
        };
        c.0.add(PROBES, 1);
        if !f.may_intersect(start, end) {
            c.0.add(SKIPPED, 1);
            self.table += 1;
            return Ok(());
        }
        let table = self.table;
        self.open_table(start)?;
        let hit = self.ready && self.table == table && !past(self.key(), end);
        if !hit {
            if let Some(c) = &self.ranges {
                c.0.add(FALSE_POSITIVES, 1);
            }
        }
        Ok(())
    }
    fn advance(&mut self) -> Result<()> {
        if let Some(c) = &mut self.cursor {
            let r = c.advance();
            r.map_err(|e| e.in_file(self.handle().table.path(), 0))?;
        }
        self.settle()
    }
}

impl TableRun {
    /// Opens the current table from `start` (see [`Source::open`]).
    fn open_table(&mut self, start: Bound<&[u8]>) -> Result<()> {
        let table = self.handle().table.clone();
        let first = match start {
            Bound::Included(k) | Bound::Excluded(k) => table.block_for(k),
            Bound::Unbounded => (table.block_count() > 0).then_some(0),
        };
        let Some(first) = first else {
            // Every key of this table lies before the start.
            self.table += 1;
            return Ok(());
        };
        self.load(first)?;
        if let Some(c) = &mut self.cursor {
            match start {
                Bound::Included(k) => c.seek(k, false),
                Bound::Excluded(k) => c.seek(k, true),
                Bound::Unbounded => c.seek_to_first(),
            }
            .map_err(|e| e.in_file(table.path(), 0))?;
        }
        self.settle()
    }
}

/// Whether `key` lies past `end`.
fn past(key: &[u8], end: Bound<&[u8]>) -> bool {
    match end {
        Bound::Included(e) => key > e,
        Bound::Excluded(e) => key >= e,
        Bound::Unbounded => false,
    }
}

/// One source of a scan.
pub(crate) enum ScanSource {
    Mem(MemSource),
    Tables(TableRun),
}

impl Source for ScanSource {
    #[inline]
    fn state(&self) -> State {
        match self {
            ScanSource::Mem(s) => s.state(),
            ScanSource::Tables(s) => s.state(),
        }
    }
    #[inline]
    fn key(&self) -> &[u8] {
        match self {
            ScanSource::Mem(s) => s.key(),
            ScanSource::Tables(s) => s.key(),
        }
    }
    #[inline]
    fn value(&self) -> Option<&[u8]> {
        match self {
            ScanSource::Mem(s) => s.value(),
            ScanSource::Tables(s) => s.value(),
        }
    }
    fn open(&mut self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<()> {
        match self {
            ScanSource::Mem(s) => s.open(start, end),
            ScanSource::Tables(s) => s.open(start, end),
        }
    }
    fn advance(&mut self) -> Result<()> {
        match self {
            ScanSource::Mem(s) => s.advance(),
            ScanSource::Tables(s) => s.advance(),
        }
    }
}

/// Appends to `sources` one per L0 table whose range reaches from `start` to `end` (newest
/// first), then one per non-empty deeper level, from the table that holds `start`. Their
/// range filter probes are counted in `ranges`. A scan open at either end asks no range
/// filter: of `[a, ∞)` a range filter can only say what the table's largest key already
/// does (and the merge never opens a table whose smallest key lies past the end).
pub(crate) fn table_sources(
    version: &Arc<Version>,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
    ranges: &Arc<RangeCounters>,
    sources: &mut Vec<ScanSource>,
) {
    let before_start = |max: &[u8]| match start {
        Bound::Included(s) => max < s,
        Bound::Excluded(s) => max <= s,
        Bound::Unbounded => false,
    };
    let bounded = !matches!(start, Bound::Unbounded) && !matches!(end, Bound::Unbounded);
    let ranges = bounded.then_some(ranges);
    let after_end = |min: &[u8]| match end {
        Bound::Included(e) => min > e,
        Bound::Excluded(e) => min >= e,
        Bound::Unbounded => false,
    };
    for (l, level) in version.levels().iter().enumerate() {
        let tables = level.tables();
        if l == 0 {
            for (i, t) in tables.iter().enumerate() {
                if !before_start(t.max_key()) && !after_end(t.min_key()) {
                    sources.push(ScanSource::Tables(TableRun::new(
                        version.clone(),
                        0,
                        i..i + 1,
                        ranges,
                    )));
                }
            }
            continue;
        }
        let first = match start {
            Bound::Included(k) | Bound::Excluded(k) => level.first_not_below(k, prefix8(k)),
            Bound::Unbounded => 0,
        };
        if first < tables.len() && !after_end(tables[first].min_key()) {
            sources.push(ScanSource::Tables(TableRun::new(
                version.clone(),
                l,
                first..tables.len(),
                ranges,
            )));
        }
    }
}

/// An iterator over a key range, in key order, newest values only, as of its start; items
/// are `Result`s so a damaged block is reported (and ends the scan). See
/// [`Store::scan`](crate::Store::scan).
pub struct Scan {
    merge: Merge<ScanSource>,
}

impl Scan {
    /// A scan merging `sources` (newest first) over `start..end`.
    pub(crate) fn new(
        sources: Vec<ScanSource>,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
    ) -> Scan {
        Scan {
            merge: Merge::new(sources, start, end),
        }
    }

    /// A scan that yields nothing.
    pub(crate) fn empty() -> Scan {
        Scan::new(Vec::new(), Bound::Unbounded, Bound::Unbounded)
    }
}

impl std::fmt::Debug for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan").finish_non_exhaustive()
    }
}

impl Iterator for Scan {
    type Item = Result<(Vec<u8>, Vec<u8>)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.merge.next_item()
    }
}
