//! A scan's table sources: one L0 table, or a sorted level's tables one after another,
//! read forward or backward, one block at a time, with read-ahead.

use super::*;
use crate::filter::range::BuildClock;

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
    /// Blocks of table `ahead_table` read with the last block read from a file.
    ahead: ReadAhead,
    ahead_table: usize,
    /// The cursor stands on an entry of `table`.
    ready: bool,
    /// Where range filter probes are counted; `None`: the tables' range filters are not
    /// asked (a scan open at either end, where the key range already says all they could).
    ranges: Option<Arc<RangeCounters>>,
    /// The current table stores its values tagged with their expiries (version 5).
    tagged: bool,
    /// The time expiry is judged at (Unix milliseconds; 0: nothing is expired).
    pub(super) now: u64,
    /// Set by a skip past a range tombstone: the next open starts here (backward: ends
    /// here), not at the scan's bound.
    skip_to: Option<Vec<u8>>,
}

/// Counter numbers in [`RangeCounters`].
const PROBES: usize = 0;
const SKIPPED: usize = 1;
const FALSE_POSITIVES: usize = 2;

/// What scans' range filter probes found, over a store handle's life (one set per store,
/// shared by its scans; see `Stats::range_probes`), and what the tree's range filter builds
/// cost (`Stats::range_build`).
#[derive(Debug, Default)]
pub(crate) struct RangeCounters(Sharded<3>, pub(crate) Arc<BuildClock>);

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
    pub(super) fn new(
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
            tagged: false,
            now: 0,
            skip_to: None,
        }
    }

    /// The range tombstones of the run's tables.
    pub(crate) fn tombstones(&self) -> impl Iterator<Item = &crate::tombstone::RangeTombstone> {
        let tables = &self.version.levels()[self.level].tables()[self.first..self.end];
        tables
            .iter()
            .filter_map(|t| t.tombstones.as_deref())
            .flatten()
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
    /// counters), through [`Table::scan_block`] (backward [`Table::scan_block_back`]) and
    /// its read-ahead.
    fn load(&mut self, i: usize) -> Result<()> {
        let t = &self.version.levels()[self.level].tables()[self.table];
        let table: &Table = &t.table;
        if self.ahead_table != self.table {
            self.ahead.clear();
            self.ahead_table = self.table;
        }
        let bytes = if self.rev {
            table.scan_block_back(i, &t.counters, &mut self.ahead)?
        } else {
            table.scan_block(i, &t.counters, &mut self.ahead)?
        };
        if self.level == 0 {
            t.counters.add_scan_l0_blocks(1);
        }
        let base = table.block_span(i).map_or(0, |s| s.0);
        let r = match &mut self.cursor {
            Some(c) => c.reset(bytes, base),
            None => BlockCursor::new(bytes, base).map(|c| self.cursor = Some(c)),
        };
        r.map_err(|e| e.in_file(table.path(), 0))?;
        self.block = i;
        self.tagged = table.tagged();
        Ok(())
    }

    /// From a cursor position that may be past its block: on to the first entry of the next
    /// blocks (backward: the last of the previous ones); past the table's last block, the
    /// next table becomes pending.
    fn settle(&mut self) -> Result<()> {
        loop {
            if let Some(c) = self.cursor.as_ref().filter(|c| c.valid()) {
                if self.tagged {
                    if let Some(v) = c.value() {
                        let at = self
                            .handle()
                            .table
                            .block_span(self.block)
                            .map_or(0, |s| s.0);
                        crate::expiry::split_tagged(v, at)
                            .map_err(|e| e.in_file(self.handle().table.path(), 0))?;
                    }
                }
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
    #[inline]
    fn state(&self) -> State {
        if self.ready {
            State::Ready
        } else if self.in_run() {
            State::Pending
        } else {
            State::Done
        }
    }
    #[inline]
    fn key(&self) -> &[u8] {
        match (self.ready, &self.cursor) {
            (true, Some(c)) => c.key(),
            _ => self.bound(),
        }
    }
    fn value(&self) -> Option<&[u8]> {
        let v = self.cursor.as_ref().and_then(|c| c.value())?;
        if !self.tagged {
            return Some(v);
        }
        // Checked when the cursor stopped on it (`settle`).
        let (v, exp) = crate::expiry::split_checked(v);
        (!crate::expiry::expired_at(exp, self.now)).then_some(v)
    }
    /// A view of the block the cursor holds (a refcount; inline when short), past the
    /// value's expiry tag in a table that has them.
    #[inline]
    fn value_slice(&self) -> Option<Slice> {
        let c = self.cursor.as_ref()?;
        if !self.tagged {
            return c.value_range().map(|r| c.bytes().share(r));
        }
        let v = self.value()?;
        Some(c.bytes().share_part(v, c.bytes()))
    }
    /// Opens the table from the scan's bound, or from where a skip asked
    /// ([`open_filtered`](TableRun::open_filtered)).
    fn open(&mut self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<()> {
        if let Some(k) = self.skip_to.take() {
            // Past a range tombstone (`skip`): from the skip's key, when it is further in.
            return if self.rev {
                let end = if past(&k, end) {
                    end
                } else {
                    Bound::Included(k.as_slice())
                };
                self.open_filtered(start, end)
            } else {
                let start = if before(&k, start) {
                    start
                } else {
                    Bound::Included(k.as_slice())
                };
                self.open_filtered(start, end)
            };
        }
        self.open_filtered(start, end)
    }
    #[inline]
    fn advance(&mut self) -> Result<()> {
        if let Some(c) = &mut self.cursor {
            let r = if self.rev { c.prev() } else { c.advance() };
            if r.is_err() {
                return r.map_err(|e| e.in_file(self.handle().table.path(), 0));
            }
            // The common step: on to the next entry of the block, untagged.
            if c.valid() && !self.tagged {
                self.ready = true;
                return Ok(());
            }
        }
        self.settle()
    }
    /// Pending again, on the table of the run that holds `key` (nothing in between is
    /// read): the merge opens it from its new bound.
    fn seek(&mut self, key: &[u8], rev: bool) -> Result<()> {
        self.seek_table(key, rev);
        Ok(())
    }
    /// As [`seek`](Self::seek), and the next open starts at `key` itself, not at the
    /// scan's bound: the entries before it (backward: after it) are never read.
    fn skip(&mut self, key: &[u8], rev: bool) -> Result<()> {
        if self.state() == State::Done {
            return Ok(());
        }
        let here = self.key();
        if here == key || (here > key) != rev {
            return Ok(()); // already there (or a pending bound past it)
        }
        self.seek_table(key, rev);
        self.skip_to = Some(key.to_vec());
        Ok(())
    }
}

impl TableRun {
    /// Asks the range filter of the table it is about to open, if it has one: a "no"
    /// skips the table (pending on the next one, or done) without reading a block.
    fn open_filtered(&mut self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<()> {
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

    /// [`Source::key`] when not on an entry: the pending table's bound of its keys (its
    /// smallest key; backward its largest), or nothing past the run.
    fn bound(&self) -> &[u8] {
        match self.in_run() {
            true if self.rev => self.handle().max_key(),
            true => self.handle().min_key(),
            false => &[],
        }
    }

    /// Pending again, on the table of the run that holds `key`.
    fn seek_table(&mut self, key: &[u8], rev: bool) {
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
    }
}

/// Whether `key` lies before `start`.
pub(super) fn before(key: &[u8], start: Bound<&[u8]>) -> bool {
    match start {
        Bound::Included(s) => key < s,
        Bound::Excluded(s) => key <= s,
        Bound::Unbounded => false,
    }
}

/// Whether `key` lies past `end`.
pub(super) fn past(key: &[u8], end: Bound<&[u8]>) -> bool {
    match end {
        Bound::Included(e) => key > e,
        Bound::Excluded(e) => key >= e,
        Bound::Unbounded => false,
    }
}
