//! The live table set, by level, and the lookup path through it.
//!
//! ```text
//! L0: | t9 | t8 | t7 |            flushed tables, newest first; their key ranges overlap
//! L1: | a..f | g..m | n..z |      one sorted run: tables in key order, ranges disjoint
//! L2: | a..b | c..e | ... | y..z |  each level about T times the one above
//! ```
//!
//! **Newest wins without sequence numbers.** For any key, every version of it in an L0 table
//! is newer than its versions in older L0 tables and in every level, and its version in Ln
//! is newer than its version in Ln+1. Flushes add at the front of L0. An L0 compaction takes
//! *every* L0 table present when it is planned (the tables flushed meanwhile are newer and
//! stay in front) and merges them with the L1 tables they overlap into L1; an Ln compaction
//! merges one Ln table with the Ln+1 tables it overlaps into Ln+1. Both move data one step
//! down without jumping over a newer version, so a lookup that stops at the first table
//! holding the key (L0 newest to oldest, then one table per level) finds the newest version.
//! Only one compaction runs at a time.

use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use crate::compaction::plan::{apply, TableInfo};
use crate::error::{Error, Result};
use crate::expiry::Now;
use crate::filename::{filter_path, range_path, table_path, tombstones_path};
use crate::filter::global::RunId;
use crate::global_index::{GlobalIndex, NO_RUN};
use crate::manifest::{TableRecord, MAX_LEVELS};
use crate::table::files::TableFiles;
use crate::table::{BlockCache, MappedFilter, MappedRangeFilter, Table, TableCounters};
use crate::tombstone::{Cover, RangeTombstone};
use crate::Slice;

mod batch;
mod global_get;
mod set;
mod tombstones;
pub(crate) use batch::Batch;
pub(crate) use set::{SetState, SharedManifest, VersionEdit, VersionSet};

/// A live table with its current filter and counters.
#[derive(Debug)]
pub(crate) struct TableHandle {
    /// The table file.
    pub table: Arc<Table>,
    /// Its filter, if it has one that opened and checked out.
    pub filter: Option<Arc<MappedFilter>>,
    /// The manifest's record of this table.
    pub record: TableRecord,
    /// Counters since this handle was made.
    pub counters: TableCounters,
    /// Why a recorded filter is not in use (damaged or missing), if so.
    pub filter_problem: Option<String>,
    /// The run id of an L0 table in the store's global filter ([`NO_RUN`] when none).
    run: AtomicU8,
    /// Its range filter, if it has one that opened and checked out.
    pub range: Option<Arc<MappedRangeFilter>>,
    /// Why a recorded range filter is not in use (damaged or missing), if so.
    pub range_problem: Option<String>,
    /// [`prefix8`] of the table's smallest and largest key (its bounds: widened to cover
    /// its range tombstones).
    lo: u64,
    hi: u64,
    /// The table's range tombstones (`NNNNNN.rdel`), sorted by start, if it has any.
    pub tombstones: Option<Arc<[RangeTombstone]>>,
    /// Its bounds when its range tombstones reach past its keys: `(min, max)`.
    wide: Option<Box<(Vec<u8>, Vec<u8>)>>,
    /// The files this handle names (last: dropped after the table and filters close). A
    /// version holds its tables' files through them (see [`VersionSet::log_and_apply`]).
    pub files: TableFiles,
}

pub(crate) use crate::codec::prefix8;

/// `min <= key <= max`, given `lo = prefix8(min)`, `hi = prefix8(max)`, `p = prefix8(key)`.
#[inline]
fn range_contains(min: &[u8], max: &[u8], lo: u64, hi: u64, key: &[u8], p: u64) -> bool {
    if p < lo || p > hi {
        return false;
    }
    if p > lo && p < hi {
        return true;
    }
    key >= min && key <= max
}

/// What probing one table found.
enum Probe {
    /// The table cannot hold the key, or does not.
    Skip,
    /// The table holds the key: its value, or `None` for a tombstone.
    Found(Option<Slice>),
}

impl TableHandle {
    pub(crate) fn new(
        table: Arc<Table>,
        filter: Option<Arc<MappedFilter>>,
        record: TableRecord,
        filter_problem: Option<String>,
        files: TableFiles,
    ) -> TableHandle {
        let (lo, hi) = (prefix8(&table.meta.min_key), prefix8(&table.meta.max_key));
        TableHandle {
            table,
            filter,
            record,
            counters: TableCounters::default(),
            filter_problem,
            run: AtomicU8::new(NO_RUN),
            range: None,
            range_problem: None,
            lo,
            hi,
            tombstones: None,
            wide: None,
            files,
        }
    }

    /// The table's L0 run id in the global filter, if it has one.
    pub(crate) fn run(&self) -> Option<RunId> {
        RunId::from_index(self.run.load(Ordering::Acquire) as usize)
    }

    /// Whether the table has a filter of its own recorded (it may have failed to open: it is
    /// then read unfiltered). Under the global filter such a table's keys are not in the
    /// global filter: its own filter answers for it (`version/global_get.rs`).
    #[inline]
    pub(crate) fn own_filter(&self) -> bool {
        self.record.filter_file != 0
    }

    /// Gives the table its L0 run id in the global filter (before it is published).
    pub(crate) fn set_run(&self, run: RunId) {
        self.run.store(run.index() as u8, Ordering::Release);
    }

    /// Opens the table and filter files `record` names (held through `files`), the
    /// table's blocks cached in `cache` when given. A filter that fails to open or check is
    /// left out (the table is read without it) and the reason kept in `filter_problem`.
    pub(crate) fn open(
        dir: &Path,
        record: TableRecord,
        files: TableFiles,
        mmap_reads: bool,
        cache: Option<&Arc<BlockCache>>,
    ) -> Result<TableHandle> {
        let path = table_path(dir, record.number);
        let mut table = Table::open(&path, mmap_reads)?;
        // The store sizes filters and buffers by the record's counts: they must be the
        // table's own (every record is made from its table's meta).
        let m = &table.meta;
        if (record.entries, record.tombstones) != (m.entries, m.tombstones) {
            return Err(Error::corrupt(
                0,
                format!(
                    "the manifest records {} entries ({} tombstones) for this table, \
                     its meta {} ({})",
                    record.entries, record.tombstones, m.entries, m.tombstones
                ),
            )
            .in_file(&path, 0));
        }
        if let Some(c) = cache {
            table = table.with_cache(c.clone(), record.number);
        }
        let table = Arc::new(table);
        let (filter, filter_problem) = if record.filter_file == 0 {
            (None, None)
        } else {
            let fpath = filter_path(dir, record.filter_file);
            match MappedFilter::open(&fpath) {
                Ok(f) => (Some(Arc::new(f)), None),
                // A damaged filter must never hide a key: the table is read without it.
                Err(e) => (None, Some(e.to_string())),
            }
        };
        let (range, range_problem) = match record.range {
            None => (None, None),
            Some(r) => match MappedRangeFilter::open(&range_path(dir, r.file)) {
                Ok(f) => (Some(Arc::new(f)), None),
                // As for the point filter: the table is scanned without it.
                Err(e) => (None, Some(e.to_string())),
            },
        };
        let tombstones = match record.range_tombstones {
            None => None,
            // Unlike a filter's, a damaged tombstones file is an error: reading the table
            // without it would bring deleted keys back.
            Some(n) => Some(crate::tombstone::file::read(&tombstones_path(dir, n))?.into()),
        };
        Ok(
            TableHandle::new(table, filter, record, filter_problem, files)
                .with_range(range, range_problem)
                .with_tombstones(tombstones),
        )
    }

    /// The same handle with range filter `range` (`problem`: why a recorded one is not in
    /// use).
    pub(crate) fn with_range(
        mut self,
        range: Option<Arc<MappedRangeFilter>>,
        problem: Option<String>,
    ) -> TableHandle {
        self.range = range;
        self.range_problem = problem;
        self
    }

    /// The same table and filter at another level (a trivial move), with fresh counters.
    pub(crate) fn at_level(&self, level: u32) -> TableHandle {
        let mut record = self.record.clone();
        record.level = level;
        TableHandle::new(
            self.table.clone(),
            self.filter.clone(),
            record,
            self.filter_problem.clone(),
            self.files.clone(),
        )
        .with_range(self.range.clone(), self.range_problem.clone())
        .with_tombstones(self.tombstones.clone())
    }

    /// The same table, filters and level under L0 run id `run` in a new global filter, with
    /// fresh counters (the handles of the version in use are left alone: lookups may be
    /// using them).
    pub(crate) fn with_run(&self, run: RunId) -> TableHandle {
        let h = self.at_level(self.record.level);
        h.set_run(run);
        h
    }

    /// Whether `key` (with `p = prefix8(key)`) lies inside the table's key range.
    #[inline]
    fn in_range(&self, key: &[u8], p: u64) -> bool {
        range_contains(self.min_key(), self.max_key(), self.lo, self.hi, key, p)
    }

    /// Smallest key (or range tombstone start).
    #[inline]
    pub(crate) fn min_key(&self) -> &[u8] {
        match &self.wide {
            Some(w) => &w.0,
            None => &self.table.meta.min_key,
        }
    }

    /// Largest key (or range tombstone end: the bounds are inclusive, so a table whose
    /// tombstones end at `e` counts as holding `e`, one key more than it covers).
    #[inline]
    pub(crate) fn max_key(&self) -> &[u8] {
        match &self.wide {
            Some(w) => &w.1,
            None => &self.table.meta.max_key,
        }
    }

    /// Looks `key` up in this table alone, as [`Version::get`] does for a version of this
    /// one table: the key range, then the filter, then (on "maybe") the table's block.
    /// Inlined up to the filter's answer, as [`probe`](Self::probe) is meant to be.
    #[inline(always)]
    pub(crate) fn get(&self, key: &[u8], hash: u64, now: &Now) -> Result<Option<Slice>> {
        if !self.in_range(key, prefix8(key)) {
            return Ok(None);
        }
        if self.rules_out(hash) {
            return Ok(None);
        }
        match self.read(key)? {
            Probe::Found(v) => self.table.judge(key, v, now),
            Probe::Skip => Ok(None),
        }
    }

    /// Whether the filter rules the key out (counted): then the table is not read. Kept
    /// apart from [`read`](Self::read) so that most probes pass no `Result<Probe>` (48
    /// bytes with a `Slice`: +1.7 % instructions per absent lookup when it was returned).
    #[inline]
    fn rules_out(&self, hash: u64) -> bool {
        let out = self.filter.as_ref().is_some_and(|f| !f.may_contain(hash));
        if out {
            self.counters.add_negatives(1);
        }
        out
    }

    /// The rest of [`probe`](Self::probe) after a "maybe" (or without a filter): the table
    /// itself. A version 5 table's value is found as stored, tagged with its expiry: the
    /// lookup that stops at it judges it ([`Table::judge`]), once, so that probes pass no
    /// time around (one argument more per probe cost a lookup of an absent key 3 % more
    /// instructions).
    #[inline(never)]
    fn read(&self, key: &[u8]) -> Result<Probe> {
        let c = &self.counters;
        if self.filter.is_some() {
            c.add_positives(1);
        }
        match self.table.get_tagged(key, c)? {
            Some(v) => Ok(Probe::Found(v)),
            None => {
                if self.filter.is_some() {
                    c.add_false_positives(1);
                } else {
                    c.add_unfiltered_misses(1);
                }
                Ok(Probe::Skip)
            }
        }
    }
}

/// The tables of one level and, for levels ≥ 1, the [`prefix8`] of each table's largest key
/// (a level is searched by binary search over them, without touching the tables).
#[derive(Clone, Debug, Default)]
pub(crate) struct Level {
    tables: Vec<Arc<TableHandle>>,
    his: Vec<u64>,
}

impl Level {
    fn new(tables: Vec<Arc<TableHandle>>) -> Level {
        let his = tables.iter().map(|t| t.hi).collect();
        Level { tables, his }
    }

    /// The tables, L0 newest first, deeper levels in key order.
    pub(crate) fn tables(&self) -> &[Arc<TableHandle>] {
        &self.tables
    }

    /// Index of the first table whose largest key is >= `key` (`len` when there is none).
    #[inline]
    pub(crate) fn first_not_below(&self, key: &[u8], p: u64) -> usize {
        // Prefixes order the tables except within a run of equal prefixes.
        let mut i = self.his.partition_point(|&h| h < p);
        while i < self.tables.len() && self.his[i] == p && self.tables[i].max_key() < key {
            i += 1;
        }
        i
    }

    /// The one table of a sorted level whose range can hold `key`.
    #[inline]
    fn table_for(&self, key: &[u8], p: u64) -> Option<&Arc<TableHandle>> {
        let i = self.first_not_below(key, p);
        self.tables.get(i).filter(|t| t.in_range(key, p))
    }
}

/// An immutable table set: `levels[0]` is L0.
#[derive(Clone, Debug, Default)]
pub(crate) struct Version {
    levels: Vec<Level>,
    /// Bit l set: level l ≥ 1 holds a table (a lookup visits only those levels).
    deep: u32,
    /// Bit l set: level l (0 included) holds a table with a filter of its own
    /// ([`TableHandle::own_filter`]; under the global filter, the tables written into the
    /// deepest level, whose keys the global filter does not hold).
    own: u32,
    /// The store's global filter, when lookups go through it instead of the tables' own
    /// filters (carried from version to version by [`Version::apply`]).
    global: Option<Arc<GlobalIndex>>,
    /// The tables' range tombstones, each ranked by its table's place in the lookup order
    /// ([`Version::rank`]); empty when no table has any.
    cover: Arc<Cover>,
}

/// A change to a [`Version`]: tables leave, tables join, tables get a new filter (see
/// [`compaction::plan::apply`](crate::compaction::plan::apply)).
pub(crate) type Edit = crate::compaction::plan::Edit<Arc<TableHandle>>;

impl TableInfo for Arc<TableHandle> {
    fn number(&self) -> u64 {
        self.record.number
    }
    fn bytes(&self) -> u64 {
        self.record.file_bytes
    }
    fn tombstones(&self) -> u64 {
        self.record.tombstones + self.tombstones.as_ref().map_or(0, |t| t.len() as u64)
    }
    fn min_key(&self) -> &[u8] {
        TableHandle::min_key(self)
    }
    fn max_key(&self) -> &[u8] {
        TableHandle::max_key(self)
    }
    fn expiring(&self) -> crate::expiry::Expiring {
        let m = &self.table.meta;
        crate::expiry::Expiring {
            bytes: m.expiring_bytes,
            earliest: m.earliest_expiry,
            latest: m.latest_expiry,
        }
    }
}

impl Version {
    /// Whether a table holds an entry with an expiry.
    pub(crate) fn holds_expiring(&self) -> bool {
        self.levels
            .iter()
            .any(|l| l.tables.iter().any(|t| t.table.meta.expiring > 0))
    }

    fn of_levels(levels: Vec<Vec<Arc<TableHandle>>>) -> Version {
        let deep = (1..levels.len().min(32))
            .filter(|&l| !levels[l].is_empty())
            .fold(0, |d, l| d | 1 << l);
        let own = (0..levels.len().min(32))
            .filter(|&l| levels[l].iter().any(|t| t.own_filter()))
            .fold(0, |d, l| d | 1 << l);
        let cover = Version::cover_of(&levels);
        Version {
            levels: levels.into_iter().map(Level::new).collect(),
            deep,
            own,
            global: None,
            cover,
        }
    }

    /// A version from handles whose records carry their level (a manifest's tables, at
    /// open): the empty version with every handle added ([`apply`]), so L0 keeps the order
    /// given (newest first) and deeper levels are sorted by key.
    pub(crate) fn new(handles: Vec<Arc<TableHandle>>) -> Version {
        let add = handles
            .into_iter()
            .map(|h| (h.record.level as usize, h))
            .collect();
        Version::default().apply(&Edit {
            add,
            ..Edit::default()
        })
    }

    /// The levels, L0 first (always [`MAX_LEVELS`] of them, some empty).
    pub(crate) fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// Every table, L0 newest first, then level by level in key order.
    pub(crate) fn tables(&self) -> impl Iterator<Item = &Arc<TableHandle>> {
        self.levels.iter().flat_map(|l| l.tables.iter())
    }

    /// Tables in L0.
    pub(crate) fn l0_count(&self) -> usize {
        self.levels.first().map_or(0, |l| l.tables.len())
    }

    /// The first sorted level (≥ 1) at which two tables overlap or are out of order, if any.
    pub(crate) fn check_sorted(&self) -> Option<(usize, u64, u64)> {
        for (l, level) in self.levels.iter().enumerate().skip(1) {
            for w in level.tables.windows(2) {
                if w[0].max_key() >= w[1].min_key() {
                    return Some((l, w[0].record.number, w[1].record.number));
                }
            }
        }
        None
    }

    /// The levels as slices of tables, L0 first (what the planner reads).
    pub(crate) fn level_slices(&self) -> Vec<&[Arc<TableHandle>]> {
        self.levels.iter().map(|l| l.tables()).collect()
    }

    /// This version with `edit` applied ([`apply`]), with the same global filter.
    pub(crate) fn apply(&self, edit: &Edit) -> Version {
        let mut levels = apply(&self.level_slices(), edit);
        levels.resize_with(MAX_LEVELS, Vec::new);
        let mut v = Version::of_levels(levels);
        v.global = self.global.clone();
        v
    }

    /// This version with lookups through `global` (or through the tables' own filters).
    pub(crate) fn with_global(mut self, global: Option<Arc<GlobalIndex>>) -> Version {
        self.global = global;
        self
    }

    /// The global filter lookups go through, if any.
    pub(crate) fn global(&self) -> Option<&Arc<GlobalIndex>> {
        self.global.as_ref()
    }

    /// The one table of a version that holds exactly one.
    pub(crate) fn single_table(&self) -> Option<&Arc<TableHandle>> {
        let mut tables = self.tables();
        match (tables.next(), tables.next()) {
            (Some(t), None) => Some(t),
            _ => None,
        }
    }

    /// Looks `key` up: L0 newest to oldest, then one table per level. `None`: no table
    /// holds it, or its newest version is a tombstone.
    #[inline]
    pub(crate) fn get(&self, key: &[u8], hash: u64, now: &Now) -> Result<Option<Slice>> {
        if let Some(g) = &self.global {
            return self.get_global(g, key, hash, now);
        }
        let p = prefix8(key);
        let l0 = &self.levels[0].tables;
        // Which L0 tables' ranges hold the key, checked once: bit i for table i (tables past
        // the 64th are checked again where they are used).
        let mut in_range = 0u64;
        let mut candidates = 0usize;
        for (i, t) in l0.iter().enumerate() {
            if t.in_range(key, p) {
                candidates += 1;
                in_range |= u64::from(i < 64) << (i % 64);
            }
        }
        let beyond = l0.get(64..).unwrap_or(&[]);
        let mut found: [Option<&Arc<TableHandle>>; MAX_LEVELS] = [None; MAX_LEVELS];
        let mut deep = self.deep;
        while deep != 0 {
            let l = deep.trailing_zeros() as usize;
            deep &= deep - 1;
            if let (Some(level), Some(slot)) = (self.levels.get(l), found.get_mut(l)) {
                if let Some(t) = level.table_for(key, p) {
                    candidates += 1;
                    *slot = Some(t);
                }
            }
        }
        // With several tables to ask, touch their filter lines first: these loads do not
        // depend on each other, so their cache misses overlap, and the probes below find
        // their lines in cache instead of taking one miss after another. With one table
        // there is nothing to overlap, and the lookup goes straight to its probe.
        if candidates > 1 {
            let mut acc = 0u8;
            let touch = |t: &TableHandle| t.filter.as_ref().map_or(0, |f| f.touch(hash));
            let mut bits = in_range;
            while bits != 0 {
                acc ^= touch(&l0[bits.trailing_zeros() as usize]);
                bits &= bits - 1;
            }
            for t in beyond.iter().filter(|t| t.in_range(key, p)) {
                acc ^= touch(t);
            }
            for t in found.iter().flatten() {
                acc ^= touch(t);
            }
            std::hint::black_box(acc);
        }
        // A value found is hidden when a newer table's range tombstone covers it: asked only
        // then (an absent key costs nothing more, a version without tombstones one test).
        let mut bits = in_range;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            let t = &l0[i];
            bits &= bits - 1;
            if t.rules_out(hash) {
                continue;
            }
            if let Probe::Found(v) = t.read(key)? {
                if v.is_some() && self.hidden(key, 0, i) {
                    return Ok(None);
                }
                return t.table.judge(key, v, now);
            }
        }
        for (j, t) in beyond.iter().enumerate() {
            if !t.in_range(key, p) || t.rules_out(hash) {
                continue;
            }
            if let Probe::Found(v) = t.read(key)? {
                if v.is_some() && self.hidden(key, 0, 64 + j) {
                    return Ok(None);
                }
                return t.table.judge(key, v, now);
            }
        }
        for (l, t) in found.iter().enumerate() {
            let Some(t) = t.filter(|t| !t.rules_out(hash)) else {
                continue;
            };
            if let Probe::Found(v) = t.read(key)? {
                if v.is_some() && self.hidden(key, l, 0) {
                    return Ok(None);
                }
                return t.table.judge(key, v, now);
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `prefix8` is the zero-padded first 8 bytes, big-endian, for every length.
    #[test]
    fn prefix8_is_the_zero_padded_head() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..=12usize {
            for _ in 0..200 {
                let key: Vec<u8> = (0..len)
                    .map(|_| {
                        x = crate::hash::mix64(x);
                        x as u8
                    })
                    .collect();
                let mut padded = [0u8; 8];
                let n = len.min(8);
                padded[..n].copy_from_slice(&key[..n]);
                assert_eq!(prefix8(&key), u64::from_be_bytes(padded), "{key:?}");
            }
        }
    }

    /// The prefix shortcut agrees with byte comparison on keys built to tie: short keys,
    /// zero bytes (which look like padding), shared 8-byte prefixes, the empty key.
    #[test]
    fn range_check_agrees_with_byte_comparison() {
        let alphabet: [&[u8]; 4] = [b"", b"\0", b"a", b"\xff"];
        let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
        let mut x = 0x1234_5678_9abc_def1u64;
        for _ in 0..400 {
            x = crate::hash::mix64(x);
            let mut k = Vec::new();
            // Mostly a common 7- or 8-byte stem, then 0..3 bytes from a small alphabet.
            if !x.is_multiple_of(3) {
                k.extend_from_slice(&b"stemstem"[..7 + (x % 2) as usize]);
            }
            for j in 0..(x >> 8) % 4 {
                k.extend_from_slice(alphabet[((x >> (16 + 2 * j)) % 4) as usize]);
            }
            keys.push(k);
        }
        keys.sort();
        keys.dedup();
        let mut checked = 0;
        for (i, min) in keys.iter().enumerate().step_by(3) {
            for max in &keys[i..] {
                let (lo, hi) = (prefix8(min), prefix8(max));
                for key in &keys {
                    let want = min <= key && key <= max;
                    let got = range_contains(min, max, lo, hi, key, prefix8(key));
                    assert_eq!(got, want, "{min:?} <= {key:?} <= {max:?}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 50_000, "only {checked} checks");
        println!("{checked} range checks agree");
    }
}
