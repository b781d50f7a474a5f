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
    Live(Arc<dyn LiveMemtable>),
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
    pub(crate) fn live(mem: &Memtable, start: Bound<&[u8]>, live: Arc<dyn LiveMemtable>) -> Self {
        let cursor = mem.cursor(start, true);
        Self::first_fill(MemRef::Live(live), cursor, mem)
    }

    /// A source over a memtable that takes no more writes.
    pub(crate) fn frozen(mem: Arc<Memtable>, start: Bound<&[u8]>) -> Self {
        let cursor = mem.cursor(start, false);
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

    /// The same memtable read backward, as of the same moment: holds nothing until
    /// [`start_back`](Self::start_back).
    pub(crate) fn back(&self) -> MemSource {
        let mem = match &self.mem {
            MemRef::Live(l) => MemRef::Live(l.clone()),
            MemRef::Frozen(m) => MemRef::Frozen(m.clone()),
        };
        MemSource {
            mem,
            cursor: self.cursor.back(),
            buf: EntryBuf::default(),
            at: 0,
            more: true,
            fill: FIRST_FILL / 2,
        }
    }

    /// Positions a source made by [`back`](Self::back) on the last entry at or before `end`.
    pub(crate) fn start_back(&mut self, end: Bound<&[u8]>) {
        if let MemRef::Frozen(m) = &self.mem {
            self.cursor.seek_back(m, end);
        } else if let MemRef::Live(l) = &self.mem {
            let cursor = &mut self.cursor;
            l.with(&mut |m| cursor.seek_back(m, end));
        }
        self.refill();
    }

    fn refill(&mut self) {
        if let MemRef::Live(l) = &self.mem {
            if let Some(m) = l.frozen() {
                self.cursor.release();
                self.mem = MemRef::Frozen(m);
            }
        }
        self.fill = (self.fill * 2).clamp(FIRST_FILL, MAX_FILL);
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
/// the scan's start (backward: from its end): one table open at a time, one block of it
/// held.
pub(crate) struct TableRun {
    version: Arc<Version>,
    level: usize,
    /// The current table (or, when pending, the next to open); the run is `first..end`.
    table: usize,
    first: usize,
    end: usize,
    /// Backward: tables from `end - 1` down to `first`, blocks and entries from the last.
    rev: bool,
    /// The current block of the current table.
    block: usize,
    cursor: Option<BlockCursor<BlockBytes>>,
    /// Blocks of table `ahead_table` read with the last block read from a file (forward).
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
    /// Tables `tables` (indices into the version's level `level`), pending on the first
    /// (backward: the last).
    fn new(
        version: Arc<Version>,
        level: usize,
        tables: std::ops::Range<usize>,
        ranges: Option<&Arc<RangeCounters>>,
        rev: bool,
    ) -> TableRun {
        let table = if rev {
            tables.end.wrapping_sub(1)
        } else {
            tables.start
        };
        TableRun {
            ranges: ranges.cloned(),
            version,
            level,
            table,
            first: tables.start,
            end: tables.end,
            rev,
            block: 0,
            cursor: None,
            ahead: ReadAhead::default(),
            ahead_table: table,
            ready: false,
        }
    }

    /// The current table is in the run (`table` steps out of `first..end` at either end).
    #[inline]
    fn in_run(&self) -> bool {
        self.first <= self.table && self.table < self.end
    }

    fn handle(&self) -> &TableHandle {
        &self.version.levels()[self.level].tables()[self.table]
    }

    /// On to the next table of the run (pending on it, or past the run).
    fn next_table(&mut self) {
        self.ready = false;
        self.table = if self.rev {
            self.table.wrapping_sub(1)
        } else {
            self.table + 1
        };
    }

    /// Makes block `i` of the current table the cursor's (counted in the table's
    /// counters): forward through [`Table::scan_block`] and its read-ahead, backward one
    /// block at a time through [`Table::block`].
    fn load(&mut self, i: usize) -> Result<()> {
        let t = &self.version.levels()[self.level].tables()[self.table];
        let table: &Table = &t.table;
        let bytes = if self.rev {
            table.block(i, &t.counters, true)?
        } else {
            if self.ahead_table != self.table {
                self.ahead.clear();
                self.ahead_table = self.table;
            }
            table.scan_block(i, &t.counters, &mut self.ahead)?
        };
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
    /// blocks (backward: the last of the previous ones); past the table's last block, the
    /// next table becomes pending.
    fn settle(&mut self) -> Result<()> {
        loop {
            if self.cursor.as_ref().is_some_and(|c| c.valid()) {
                self.ready = true;
                return Ok(());
            }
            let next = if self.rev {
                self.block.checked_sub(1)
            } else {
                Some(self.block + 1).filter(|&n| n < self.handle().table.block_count())
            };
            let Some(next) = next else {
                self.next_table();
                return Ok(());
            };
            self.load(next)?;
            if let Some(c) = &mut self.cursor {
                let r = if self.rev {
                    c.seek_to_last()
                } else {
                    c.seek_to_first()
                };
                r.map_err(|e| e.in_file(self.handle().table.path(), 0))?;
            }
        }
    }

    /// Opens the current table from `start` (backward: from `end`; see [`Source::open`]).
    fn open_table(&mut self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<()> {
        let table = self.handle().table.clone();
        let n = table.block_count();
        let first = if self.rev {
            match end {
                // The block that holds the last key at or before the end: the one that
                // holds the end or, when it holds only keys after it, the one before.
                Bound::Included(k) | Bound::Excluded(k) => Some(table.block_for(k).unwrap_or(n)),
                Bound::Unbounded => Some(n),
            }
            .map(|b| b.min(n.saturating_sub(1)))
            .filter(|_| n > 0)
        } else {
            match start {
                Bound::Included(k) | Bound::Excluded(k) => table.block_for(k),
                Bound::Unbounded => (n > 0).then_some(0),
            }
        };
        let Some(first) = first else {
            // Every key of this table lies before the start (or it has no block).
            self.next_table();
            return Ok(());
        };
        self.load(first)?;
        if let Some(c) = &mut self.cursor {
            match (self.rev, start, end) {
                (false, Bound::Included(k), _) => c.seek(k, false),
                (false, Bound::Excluded(k), _) => c.seek(k, true),
                (false, Bound::Unbounded, _) => c.seek_to_first(),
                (true, _, Bound::Included(k)) => c.seek_back(k, false),
                (true, _, Bound::Excluded(k)) => c.seek_back(k, true),
                (true, _, Bound::Unbounded) => c.seek_to_last(),
            }
            .map_err(|e| e.in_file(table.path(), 0))?;
        }
        self.settle()
    }
}

impl Source for TableRun {
    fn state(&self) -> State {
        if self.ready {
            State::Ready
        } else if self.in_run() {
            State::Pending
        } else {
            State::Done
        }
    }
    fn key(&self) -> &[u8] {
        match (self.ready, &self.cursor) {
            (true, Some(c)) => c.key(),
            _ if self.in_run() && self.rev => self.handle().max_key(),
            _ if self.in_run() => self.handle().min_key(),
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
            return self.open_table(start, end);
        };
        let Some(f) = &self.handle().range else {
            return self.open_table(start, end);
        };
        c.0.add(PROBES, 1);
        if !f.may_intersect(start, end) {
            c.0.add(SKIPPED, 1);
            self.next_table();
            return Ok(());
        }
        let table = self.table;
        self.open_table(start, end)?;
        let outside = if self.rev {
            before(self.key(), start)
        } else {
            past(self.key(), end)
        };
        let hit = self.ready && self.table == table && !outside;
        if !hit {
            if let Some(c) = &self.ranges {
                c.0.add(FALSE_POSITIVES, 1);
            }
        }
        Ok(())
    }
    fn advance(&mut self) -> Result<()> {
        if let Some(c) = &mut self.cursor {
            let r = if self.rev { c.prev() } else { c.advance() };
            r.map_err(|e| e.in_file(self.handle().table.path(), 0))?;
        }
        self.settle()
    }
    /// Pending again, on the table of the run that holds `key` (nothing in between is
    /// read): the merge opens it from its new bound.
    fn seek(&mut self, key: &[u8], rev: bool) -> Result<()> {
        let level = &self.version.levels()[self.level];
        // An L0 run is one table: it is opened again from the new bound.
        if self.level > 0 {
            self.table = if rev {
                let below = level.tables().get(..=self.table).unwrap_or_default();
                below
                    .partition_point(|t| t.min_key() <= key)
                    .wrapping_sub(1)
            } else {
                level.first_not_below(key, prefix8(key)).max(self.table)
            };
        }
        self.ready = false;
        Ok(())
    }
}

/// Whether `key` lies before `start`.
fn before(key: &[u8], start: Bound<&[u8]>) -> bool {
    match start {
        Bound::Included(s) => key < s,
        Bound::Excluded(s) => key <= s,
        Bound::Unbounded => false,
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
    fn seek(&mut self, key: &[u8], rev: bool) -> Result<()> {
        match self {
            ScanSource::Mem(s) => s.seek(key, rev),
            ScanSource::Tables(s) => s.seek(key, rev),
        }
    }
}

/// Appends to `sources` one per L0 table whose range reaches from `start` to `end` (newest
/// first), then one per non-empty deeper level, from the table that holds `start` (with
/// `rev`, read backward from the table that holds `end`). Their range filter probes are
/// counted in `ranges`. A scan open at either end asks no range filter: of `[a, ∞)` a range
/// filter can only say what the table's largest key already does (and the merge never opens
/// a table whose smallest key lies past the end).
pub(crate) fn table_sources(
    version: &Arc<Version>,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
    ranges: &Arc<RangeCounters>,
    rev: bool,
    sources: &mut Vec<ScanSource>,
) {
    let bounded = !matches!(start, Bound::Unbounded) && !matches!(end, Bound::Unbounded);
    let ranges = bounded.then_some(ranges);
    let after_end = |min: &[u8]| past(min, end);
    for (l, level) in version.levels().iter().enumerate() {
        let tables = level.tables();
        if l == 0 {
            for (i, t) in tables.iter().enumerate() {
                if !before(t.max_key(), start) && !after_end(t.min_key()) {
                    let run = TableRun::new(version.clone(), 0, i..i + 1, ranges, rev);
                    sources.push(ScanSource::Tables(run));
                }
            }
            continue;
        }
        let first = match start {
            Bound::Included(k) | Bound::Excluded(k) => level.first_not_below(k, prefix8(k)),
            Bound::Unbounded => 0,
        };
        // Past the last table whose smallest key is not after the end.
        let last = if matches!(end, Bound::Unbounded) {
            tables.len()
        } else {
            first + tables[first..].partition_point(|t| !after_end(t.min_key()))
        };
        if first < last {
            let run = TableRun::new(version.clone(), l, first..last, ranges, rev);
            sources.push(ScanSource::Tables(run));
        }
    }
}

/// What a scan reads: its memtables and its table set, as of its start. The scan's back end
/// is made from them when it is first used.
pub(crate) struct ScanInput {
    /// The memtables' sources (newest first), positioned at the start.
    pub mems: Vec<MemSource>,
    pub version: Arc<Version>,
    pub ranges: Arc<RangeCounters>,
}

/// The back end of a scan: not made until `next_back` first asks.
enum Back {
    /// Backward memtable sources (unpositioned), and what the table sources come from.
    Plan {
        mems: Vec<MemSource>,
        version: Arc<Version>,
        ranges: Arc<RangeCounters>,
    },
    Open(Merge<ScanSource, true>),
    None,
}

/// An iterator over a key range, in key order (or, from the back, in reverse key order),
/// newest values only, as of its start; items are `Result`s so a damaged block is reported
/// (and ends the scan). Both ends may be used, as with `BTreeMap::range`: they meet without
/// overlap or gap. See [`Store::scan`](crate::Store::scan).
pub struct Scan {
    front: Merge<ScanSource, false>,
    back: Back,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
}

impl Scan {
    /// A scan of `start..end` over `input` (its memtable sources made from `start`).
    pub(crate) fn new(input: ScanInput, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Scan {
        let ScanInput {
            mems,
            version,
            ranges,
        } = input;
        let back_mems = mems.iter().map(MemSource::back).collect();
        let mut sources: Vec<ScanSource> = mems.into_iter().map(ScanSource::Mem).collect();
        let (from, to) = (
            start.as_ref().map(Vec::as_slice),
            end.as_ref().map(Vec::as_slice),
        );
        table_sources(&version, from, to, &ranges, false, &mut sources);
        Scan {
            front: Merge::new(sources, start.clone(), end.clone()),
            back: Back::Plan {
                mems: back_mems,
                version,
                ranges,
            },
            start,
            end,
        }
    }

    /// A scan that yields nothing.
    pub(crate) fn empty() -> Scan {
        Scan {
            front: Merge::new(Vec::new(), Bound::Unbounded, Bound::Unbounded),
            back: Back::None,
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }
    }

    /// The back end, made on first use: from the key the front last passed (or the scan's
    /// start) to the scan's end.
    fn back(&mut self) -> Option<&mut Merge<ScanSource, true>> {
        if let Back::Plan { .. } = self.back {
            let Back::Plan {
                mut mems,
                version,
                ranges,
            } = std::mem::replace(&mut self.back, Back::None)
            else {
                return None;
            };
            let start = match self.front.last() {
                Some(k) => Bound::Excluded(k.to_vec()),
                None => self.start.clone(),
            };
            let (from, to) = (
                start.as_ref().map(Vec::as_slice),
                self.end.as_ref().map(Vec::as_slice),
            );
            for m in &mut mems {
                m.start_back(to);
            }
            let mut sources: Vec<ScanSource> = mems.into_iter().map(ScanSource::Mem).collect();
            table_sources(&version, from, to, &ranges, true, &mut sources);
            self.back = Back::Open(Merge::new(sources, start, self.end.clone()));
        }
        match &mut self.back {
            Back::Open(m) => Some(m),
            _ => None,
        }
    }

    /// Moves the front on to `key`: the next item from the front is the first at or after
    /// it (still within the scan's range, and not one the back end has returned). A key at
    /// or before where the front stands changes nothing.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.front.seek(key)
    }

    /// Moves the back end on to `key`: the next item from the back is the last at or before
    /// it (as [`seek`](Self::seek), backward).
    pub fn seek_back(&mut self, key: &[u8]) -> Result<()> {
        match self.back() {
            Some(b) => b.seek(key),
            None => Ok(()),
        }
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
        let item = self.front.next_item()?;
        if let (Ok((k, _)), Back::Open(b)) = (&item, &mut self.back) {
            // The ends met: the back returned this key or one before it.
            if b.last().is_some_and(|l| k.as_slice() >= l) {
                self.front.finish();
                b.finish();
                return None;
            }
        }
        Some(item)
    }
}

impl DoubleEndedIterator for Scan {
    fn next_back(&mut self) -> Option<Self::Item> {
        let back = self.back()?;
        let item = back.next_item()?;
        if let Ok((k, _)) = &item {
            if self.front.last().is_some_and(|l| k.as_slice() <= l) {
                self.front.finish();
                if let Back::Open(b) = &mut self.back {
                    b.finish();
                }
                return None;
            }
        }
        Some(item)
    }
}
