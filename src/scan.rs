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
use crate::Slice;

mod ranges;
mod tables;
use crate::tombstone::Cover;
use ranges::{next_visible, scan_cover};

pub(crate) use tables::RangeCounters;
use tables::{before, past, TableRun};

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
    /// The memtable's range tombstones its snapshot sees (they hide the older sources'
    /// entries; its own hidden entries come as tombstones).
    ranges: Arc<[crate::tombstone::RangeTombstone]>,
}

impl MemSource {
    /// A source over `mem`, which the caller holds under the lock that keeps writes out,
    /// and which `live` reaches later (the first entries are copied now).
    pub(crate) fn live(
        mem: &Memtable,
        start: Bound<&[u8]>,
        live: Arc<dyn LiveMemtable>,
        now: u64,
    ) -> Self {
        let cursor = mem.cursor(start, true).at_time(now);
        Self::first_fill(MemRef::Live(live), cursor, mem)
    }

    /// A source over a memtable that takes no more writes.
    pub(crate) fn frozen(mem: Arc<Memtable>, start: Bound<&[u8]>, now: u64) -> Self {
        let cursor = mem.cursor(start, false).at_time(now);
        let m = mem.clone();
        Self::first_fill(MemRef::Frozen(mem), cursor, &m)
    }

    /// A source over `mem` (held as in [`live`](Self::live)) as it was when writes had
    /// reached arena position `snap`: a snapshot's (`store/snapshot.rs`).
    pub(crate) fn live_at(
        mem: &Memtable,
        start: Bound<&[u8]>,
        snap: u64,
        live: Arc<dyn LiveMemtable>,
        now: u64,
    ) -> Self {
        let cursor = mem.cursor_at(start, snap, true).at_time(now);
        Self::first_fill(MemRef::Live(live), cursor, mem)
    }

    /// A source over a memtable that takes no more writes, as it was at position `snap`.
    /// Its [`back`](Self::back) reads as of the same position.
    pub(crate) fn frozen_at(mem: Arc<Memtable>, start: Bound<&[u8]>, snap: u64, now: u64) -> Self {
        let cursor = mem.cursor_at(start, snap, false).at_time(now);
        let m = mem.clone();
        Self::first_fill(MemRef::Frozen(mem), cursor, &m)
    }

    fn first_fill(mem: MemRef, mut cursor: MemCursor, m: &Memtable) -> Self {
        let mut buf = EntryBuf::default();
        let more = cursor.fill(m, &mut buf, FIRST_FILL);
        let ranges = m.ranges_at(cursor.snap()).cloned().collect();
        MemSource {
            mem,
            cursor,
            buf,
            at: 0,
            more,
            fill: FIRST_FILL,
            ranges,
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
            ranges: self.ranges.clone(),
        }
    }

    /// Positions a source made by [`back`](Self::back) on the last entry at or before `end`.
    pub(crate) fn start_back(&mut self, end: Bound<&[u8]>) {
        if let MemRef::Live(l) = &self.mem {
            // Positioned and first filled under one hold of the lock.
            self.fill = (self.fill * 2).clamp(FIRST_FILL, MAX_FILL);
            let (cursor, buf, fill) = (&mut self.cursor, &mut self.buf, self.fill);
            let mut more = false;
            l.with(&mut |m| {
                cursor.seek_back(m, end);
                more = cursor.fill(m, buf, fill);
            });
            self.more = more;
            self.at = 0;
            return;
        }
        if let MemRef::Frozen(m) = &self.mem {
            self.cursor.seek_back(m, end);
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
    #[inline]
    fn value_slice(&self) -> Option<Slice> {
        match self {
            ScanSource::Mem(s) => s.value_slice(),
            ScanSource::Tables(s) => s.value_slice(),
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
    fn skip(&mut self, key: &[u8], rev: bool) -> Result<()> {
        match self {
            ScanSource::Mem(s) => s.skip(key, rev),
            ScanSource::Tables(s) => s.skip(key, rev),
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
    now: u64,
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
                    let mut run = TableRun::new(version.clone(), 0, i..i + 1, ranges, rev);
                    run.now = now;
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
            let mut run = TableRun::new(version.clone(), l, first..last, ranges, rev);
            run.now = now;
            sources.push(ScanSource::Tables(run));
        }
    }
}

/// What a scan reads: its memtables and its table set, as of its start. Each end of the
/// scan is made from them when it is first used.
pub(crate) struct ScanInput {
    /// The memtables' sources (newest first, at most two: the live one and the immutable
    /// one), positioned at the start.
    pub mems: Vec<MemSource>,
    pub version: Arc<Version>,
    pub ranges: Arc<RangeCounters>,
    /// The time expiry is judged at (Unix milliseconds), the scan's start; the memtable
    /// sources were made with it too.
    pub now: u64,
}

/// A scan's range: its start and end.
type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// What a scan's ends are made from, until both are: each end is made when first used, so
/// a forward scan makes no back end and a reverse one no front.
struct Plan {
    /// The memtables' forward sources (newest first), positioned at the start: the front's
    /// when it is made (then empty).
    mems: Vec<MemSource>,
    /// How many memtable sources there are (each gives a backward source over the same
    /// snapshot when the back end is made).
    mem_count: usize,
    version: Arc<Version>,
    ranges: Arc<RangeCounters>,
    now: u64,
    /// The range, taken by the first end made (the second takes it from the first).
    bounds: Option<Range>,
}

impl Plan {
    /// The most sources an end has: the memtables, the L0 tables and one per level.
    fn sources(&self) -> usize {
        self.mem_count + self.version.levels().len() + self.version.l0_count()
    }

    /// Appends the table sources of an end over `from..to` ([`table_sources`]).
    fn tables(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, rev: bool, out: &mut Vec<ScanSource>) {
        table_sources(&self.version, from, to, &self.ranges, rev, self.now, out);
    }

    /// The range of the end made now: the scan's, for the first end made; for the second,
    /// what the `other` end has not passed.
    fn range_beside<const R: bool>(
        &mut self,
        other: Option<&Merge<ScanSource, R>>,
    ) -> Option<Range> {
        match (self.bounds.take(), other) {
            (Some(range), _) => Some(range),
            (None, Some(other)) => Some(other.rest()),
            (None, None) => None,
        }
    }
}

/// `range` as borrowed bounds.
fn as_refs(range: &Range) -> (Bound<&[u8]>, Bound<&[u8]>) {
    (
        range.0.as_ref().map(Vec::as_slice),
        range.1.as_ref().map(Vec::as_slice),
    )
}

/// An iterator over a key range, in key order (or, from the back, in reverse key order),
/// newest values only, as of its start; items are `Result`s so a damaged block is reported
/// (and ends the scan). Both ends may be used, as with `BTreeMap::range`: they meet without
/// overlap or gap. See [`Store::scan`](crate::Store::scan).
pub struct Scan {
    /// The front end (`None` until first used).
    front: Option<Merge<ScanSource, false>>,
    /// The back end (`None` until first used).
    back: Option<Merge<ScanSource, true>>,
    /// What the ends not yet made come from (`None` once both are, or for an empty scan).
    plan: Option<Plan>,
    /// The range tombstones of the front's sources, ranked by source number, and of the
    /// back's (whose sources may differ): `None` when there are none.
    cover: Option<Box<Cover>>,
    back_cover: Option<Box<Cover>>,
}

impl Scan {
    /// A scan of `start..end` over `input` (its memtable sources made from `start`).
    pub(crate) fn new(input: ScanInput, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Scan {
        let ScanInput {
            mems,
            version,
            ranges,
            now,
        } = input;
        Scan {
            front: None,
            back: None,
            plan: Some(Plan {
                mem_count: mems.len(),
                mems,
                version,
                ranges,
                now,
                bounds: Some((start, end)),
            }),
            cover: None,
            back_cover: None,
        }
    }

    /// A scan that yields nothing.
    pub(crate) fn empty() -> Scan {
        Scan {
            front: None,
            back: None,
            plan: None,
            cover: None,
            back_cover: None,
        }
    }

    /// The front end, made on first use: from the scan's start to the key the back end last
    /// passed (or the scan's end).
    #[cold]
    fn make_front(&mut self) -> Option<()> {
        let plan = self.plan.as_mut()?;
        let range = plan.range_beside(self.back.as_ref())?;
        let (from, to) = as_refs(&range);
        let mut sources = Vec::with_capacity(plan.sources());
        sources.extend(plan.mems.drain(..).map(ScanSource::Mem));
        plan.tables(from, to, false, &mut sources);
        self.cover = scan_cover(&sources);
        if self.back.is_some() {
            self.plan = None;
        }
        self.front = Some(Merge::new(sources, range.0, range.1));
        Some(())
    }

    /// The back end, made on first use: from the key the front last passed (or the scan's
    /// start) to the scan's end.
    #[cold]
    fn make_back(&mut self) -> Option<()> {
        let plan = self.plan.as_mut()?;
        let range = plan.range_beside(self.front.as_ref())?;
        let (from, to) = as_refs(&range);
        let mut sources = Vec::with_capacity(plan.sources());
        // The memtables' forward sources: still in the plan, or the front's first ones.
        let mems = match &self.front {
            Some(f) => &f.sources()[..plan.mem_count],
            None => &[],
        };
        let fwd = plan.mems.iter().chain(mems.iter().filter_map(|s| match s {
            ScanSource::Mem(m) => Some(m),
            ScanSource::Tables(_) => None,
        }));
        for m in fwd {
            let mut m = m.back();
            m.start_back(to);
            sources.push(ScanSource::Mem(m));
        }
        plan.tables(from, to, true, &mut sources);
        self.back_cover = scan_cover(&sources);
        if self.front.is_some() {
            self.plan = None;
        }
        self.back = Some(Merge::new(sources, range.0, range.1));
        Some(())
    }

    /// Moves the front on to `key`: the next item from the front is the first at or after
    /// it (still within the scan's range, and not one the back end has returned). A key at
    /// or before where the front stands changes nothing.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        if self.front.is_none() {
            self.make_front();
        }
        match &mut self.front {
            Some(f) => f.seek(key),
            None => Ok(()),
        }
    }

    /// Moves the back end on to `key`: the next item from the back is the last at or before
    /// it (as [`seek`](Self::seek), backward).
    pub fn seek_back(&mut self, key: &[u8]) -> Result<()> {
        if self.back.is_none() {
            self.make_back();
        }
        match &mut self.back {
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
    type Item = Result<(Slice, Slice)>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.front.is_none() {
            self.make_front()?;
        }
        let front = self.front.as_mut()?;
        let item = next_visible(front, self.cover.as_deref())?;
        if let (Ok((k, _)), Some(b)) = (&item, &mut self.back) {
            // The ends met: the back returned this key or one before it.
            if b.last().is_some_and(|l| **k >= *l) {
                b.finish();
                if let Some(f) = &mut self.front {
                    f.finish();
                }
                return None;
            }
        }
        Some(item)
    }
}

impl DoubleEndedIterator for Scan {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.back.is_none() {
            self.make_back()?;
        }
        let back = self.back.as_mut()?;
        let item = next_visible(back, self.back_cover.as_deref())?;
        if let (Ok((k, _)), Some(f)) = (&item, &mut self.front) {
            // The ends met: the front returned this key or one after it.
            if f.last().is_some_and(|l| **k <= *l) {
                f.finish();
                if let Some(b) = &mut self.back {
                    b.finish();
                }
                return None;
            }
        }
        Some(item)
    }
}
