//! The writer: runs, single-key operations, batches, and the filter's state.

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use super::slots::Entry;
use super::table::Table;
use super::{
    Contents, GlobalFilter, GlobalStats, MergeKey, RunId, RunOrder, State, LEVELS, MAX_KICKS,
    MAX_LOAD, MAX_RUNS, STASH_MIN, STASH_PER_SLOTS, WALKS,
};
use crate::error::{Error, Result};
use crate::hash::mix64;

/// How many operations of a sorted batch ahead a bucket is prefetched.
const PREFETCH_AHEAD: usize = 16;

/// The writer of a [`GlobalFilter`] (one at a time: it holds the filter's mutex).
#[derive(Debug)]
pub struct Writer<'a> {
    pub(super) f: &'a GlobalFilter,
    pub(super) st: MutexGuard<'a, State>,
}

impl<'a> Writer<'a> {
    fn table(&self) -> &'a Table {
        &self.f.table
    }

    fn rand(&mut self) -> u64 {
        let r = &mut self.st.rng;
        *r ^= *r << 13;
        *r ^= *r >> 7;
        *r ^= *r << 17;
        *r
    }

    // -- runs ----------------------------------------------------------------------------------

    /// Takes a free L0 id for a newly flushed table and makes it the newest run; `None` when
    /// all 26 are in use (the owner may then give two tables one id: a lookup probes both).
    pub fn new_l0_run(&mut self) -> Option<RunId> {
        let used = self.st.runs.l0.iter().fold(0u32, |m, r| m | 1 << r.index());
        let id = (LEVELS as usize..MAX_RUNS)
            .find(|&i| used >> i & 1 == 0 && self.st.counts[i] == 0)
            .map(|i| RunId(i as u8))?;
        self.st.runs.l0.insert(0, id);
        Some(id)
    }

    /// Takes L0 id `run` again for a table that has it (a filter rebuilt for the same
    /// tables keeps their ids): it becomes the newest run; an id already in use is shared.
    pub fn adopt_l0_run(&mut self, run: RunId) -> Result<()> {
        if !run.is_l0() {
            return Err(Error::InvalidArgument(format!(
                "run {} is not an L0 run",
                run.index()
            )));
        }
        if !self.st.runs.l0.contains(&run) {
            self.st.runs.l0.insert(0, run);
        }
        Ok(())
    }

    /// Gives back an L0 id once no entry uses it.
    pub fn drop_l0_run(&mut self, run: RunId) -> Result<()> {
        let at = self
            .st
            .runs
            .l0
            .iter()
            .position(|&r| r == run)
            .ok_or_else(|| {
                Error::InvalidArgument(format!("run {} is not an L0 run in use", run.index()))
            })?;
        let n = self.st.counts[run.index()];
        if n != 0 {
            return Err(Error::InvalidArgument(format!(
                "L0 run {} still has {n} entries",
                run.index()
            )));
        }
        self.st.runs.l0.remove(at);
        Ok(())
    }

    /// Makes `runs` (newest first, as [`Writer::l0_runs`] gives them) the L0 ids in use: a
    /// filter built to replace another takes over the other's ids and their order.
    pub fn set_l0_runs(&mut self, runs: &[RunId]) -> Result<()> {
        if let Some(r) = runs.iter().find(|r| !r.is_l0()) {
            return Err(Error::InvalidArgument(format!(
                "run {} is not an L0 run",
                r.index()
            )));
        }
        self.st.runs.l0 = runs.to_vec();
        Ok(())
    }

    /// The L0 ids in use, newest first.
    pub fn l0_runs(&self) -> &[RunId] {
        &self.st.runs.l0
    }

    /// The probe order of the runs in use.
    pub fn order(&self) -> RunOrder {
        RunOrder::new(&self.st.runs.l0)
    }

    // -- single keys -----------------------------------------------------------------------------

    /// Adds an entry for the key's version in `run`. Never loses it: an entry no bucket pair
    /// has room for goes to the stash. Returns false when it went to the stash.
    pub fn insert(&mut self, hash: u64, run: RunId) -> bool {
        let e = self.table().entry(hash, run);
        self.st.counts[run.index()] += 1;
        if self.place(hash, e) {
            true
        } else {
            self.stash_add(hash, run);
            false
        }
    }

    /// Puts `e` (the entry of `hash`) into one of its buckets, moving others along a cuckoo
    /// path if needed; false when none was found (nothing changed then).
    fn place(&mut self, hash: u64, e: Entry) -> bool {
        let f: &'a GlobalFilter = self.f;
        let t = &f.table;
        let (i1, i2) = t.pair(hash);
        for i in [i1, i2] {
            if let Some(s) = t.slots(i).with(e) {
                t.write(i, t.encode(&s));
                self.st.in_table += 1;
                return true;
            }
        }
        self.st.kicked += 1;
        let mut path = std::mem::take(&mut self.st.path);
        let mut placed = false;
        // Walks alternate between the two buckets, the first chosen at random.
        let first = self.rand() & 1;
        for k in 0..WALKS as u64 {
            let start = if (first + k) & 1 == 0 { i1 } else { i2 };
            if self.walk(e, start, &mut path) {
                // From the far end back: each write adds an entry before the write that
                // removes it from its previous bucket, so a concurrent query always finds it.
                for &(i, raw) in path.iter().rev() {
                    t.write(i, raw);
                }
                self.st.in_table += 1;
                placed = true;
                break;
            }
            self.st.failed_walks += 1;
        }
        self.st.path = path;
        placed
    }

    /// A random cuckoo walk from bucket `start` for entry `e`, visiting each bucket at most
    /// once. True when it found room: `path` then holds the buckets to write and their new
    /// contents, the last one the bucket with room.
    fn walk(&mut self, e: Entry, start: u64, path: &mut Vec<(u64, u64)>) -> bool {
        let f: &'a GlobalFilter = self.f;
        let t = &f.table;
        path.clear();
        // Buckets on the path: a 1,024-bit sketch answers "surely not" at once; a set bit
        // is confirmed on the path itself.
        let mut seen = [0u64; 16];
        let bit = |b: u64| (mix64(b) % 1024) as usize;
        let mark = |seen: &mut [u64; 16], b: u64| seen[bit(b) / 64] |= 1 << (bit(b) % 64);
        mark(&mut seen, start);
        let mut cur = e;
        let mut i = start;
        for _ in 0..MAX_KICKS {
            let s = t.slots(i);
            if !path.is_empty() {
                if let Some(s) = s.with(cur) {
                    path.push((i, t.encode(&s)));
                    return true;
                }
            }
            // A victim whose other bucket is new to the path.
            let n = s.n.max(1);
            let j0 = (self.rand() % n as u64) as usize;
            let mut chosen = None;
            for k in 0..s.n {
                let j = (j0 + k) % s.n;
                let victim = s.e[j];
                let next = t.alt(i, victim.fp);
                let b = bit(next);
                if next == i
                    || (seen[b / 64] >> (b % 64) & 1 == 1
                        && (next == start || path.iter().any(|&(p, _)| p == next)))
                {
                    continue;
                }
                chosen = Some((victim, next, t.encode(&s.replaced(j, cur))));
                break;
            }
            let Some((victim, next, raw)) = chosen else {
                return false;
            };
            path.push((i, raw));
            mark(&mut seen, next);
            cur = victim;
            i = next;
        }
        false
    }

    pub(super) fn stash_add(&mut self, hash: u64, run: RunId) {
        let mut stash = self.f.stash.write().unwrap_or_else(|p| p.into_inner());
        let v = stash.entry(hash).or_default();
        match v.iter_mut().find(|(r, _)| *r == run) {
            Some((_, n)) => *n += 1,
            None => v.push((run, 1)),
        }
        self.f.stash_len.fetch_add(1, Ordering::Release);
    }

    /// Removes one stashed copy of (hash, run); false when there is none.
    fn stash_take(&mut self, hash: u64, run: RunId) -> bool {
        if self.f.stash_len.load(Ordering::Relaxed) == 0 || !self.stashed_has(hash, run) {
            return false;
        }
        let mut stash = self.f.stash.write().unwrap_or_else(|p| p.into_inner());
        let Some(v) = stash.get_mut(&hash) else {
            return false;
        };
        let Some(at) = v.iter().position(|(r, _)| *r == run) else {
            return false;
        };
        v[at].1 -= 1;
        if v[at].1 == 0 {
            v.swap_remove(at);
        }
        if v.is_empty() {
            stash.remove(&hash);
        }
        self.f.stash_len.fetch_sub(1, Ordering::Release);
        true
    }

    /// Removes the entry of the key's version in `run`; false when there is none (the
    /// filter and the tables disagree).
    ///
    /// The stash is searched first: its entries are exact hashes, so one found there is this
    /// key's, while a bucket entry with the same fingerprint may be another key's (which
    /// would then lose it).
    pub fn remove(&mut self, hash: u64, run: RunId) -> bool {
        if self.stash_take(hash, run) {
            self.st.counts[run.index()] -= 1;
            return true;
        }
        self.remove_from_table(hash, run)
    }

    /// Moves the entry of the key's version from run `from` to run `to` (what a compaction
    /// does to a key it carries down); false when there is no entry in `from`.
    pub fn relabel(&mut self, hash: u64, from: RunId, to: RunId) -> bool {
        if from == to {
            return self.contains_entry(hash, from);
        }
        // The stash first, as in `remove`.
        // The new copy first, then the old one out: a query racing the writer finds one.
        if self.stashed_has(hash, from) {
            self.stash_add(hash, to);
            self.stash_take(hash, from);
            self.st.counts[from.index()] -= 1;
            self.st.counts[to.index()] += 1;
            return true;
        }
        let t = self.table();
        let (ef, et) = (t.entry(hash, from), t.entry(hash, to));
        let (i1, i2) = t.pair(hash);
        for i in [i1, i2] {
            let s = t.slots(i);
            if let Some(j) = s.find(ef) {
                t.write(i, t.encode(&s.replaced(j, et)));
                self.st.counts[from.index()] -= 1;
                self.st.counts[to.index()] += 1;
                return true;
            }
        }
        false
    }

    /// Removes an entry of (hash, run) from the table only.
    fn remove_from_table(&mut self, hash: u64, run: RunId) -> bool {
        let t = self.table();
        let e = t.entry(hash, run);
        let (i1, i2) = t.pair(hash);
        for i in [i1, i2] {
            let s = t.slots(i);
            if let Some(j) = s.find(e) {
                t.write(i, t.encode(&s.without(j)));
                self.st.in_table -= 1;
                self.st.counts[run.index()] -= 1;
                return true;
            }
        }
        false
    }

    /// Applies what a merge did to one key (see [`MergeKey`]): one entry of `from` is
    /// relabelled to `to` (none when `to` already held one), the others removed. Returns the
    /// number of entries that were missing.
    pub fn merge(&mut self, m: MergeKey) -> u64 {
        let mut missing = 0;
        let mut rest = m.from;
        if let Some(to) = m.to {
            if rest.contains(to) {
                rest = rest.without(to);
            } else if let Some(first) = rest.iter().next() {
                rest = rest.without(first);
                missing += !self.relabel(m.hash, first, to) as u64;
            } else {
                self.insert(m.hash, to);
            }
        }
        for r in rest.iter() {
            missing += !self.remove(m.hash, r) as u64;
        }
        missing
    }

    /// True when the filter holds an entry for the key's version in `run` (what `verify`
    /// checks for every key of every table).
    pub fn contains_entry(&self, hash: u64, run: RunId) -> bool {
        let t = &self.f.table;
        let e = t.entry(hash, run);
        let (i1, i2) = t.pair(hash);
        if t.slots(i1).find(e).is_some() || t.slots(i2).find(e).is_some() {
            return true;
        }
        if self.f.stash_len.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let stash = self.f.stash.read().unwrap_or_else(|p| p.into_inner());
        stash
            .get(&hash)
            .is_some_and(|v| v.iter().any(|(r, _)| *r == run))
    }

    // -- batches ---------------------------------------------------------------------------------

    /// Inserts the keys of a run (a flushed table). Returns how many went to the stash.
    /// See [`Writer::merge_batch`] for the order buckets are visited in.
    pub fn insert_batch(&mut self, hashes: &mut [u64], run: RunId) -> u64 {
        let mut ops: Vec<(u64, Op)> = hashes.iter().map(|&h| (h, Op::Insert(run))).collect();
        self.apply(&mut ops).stashed
    }

    /// Removes the keys of a run. Returns how many had no entry.
    pub fn remove_batch(&mut self, hashes: &mut [u64], run: RunId) -> u64 {
        let mut ops: Vec<(u64, Op)> = hashes.iter().map(|&h| (h, Op::Remove(run))).collect();
        self.apply(&mut ops).missing
    }

    /// Relabels the keys of a run from `from` to `to` (a trivial move). Returns how many had
    /// no entry in `from`.
    pub fn relabel_batch(&mut self, hashes: &mut [u64], from: RunId, to: RunId) -> u64 {
        if from == to {
            return hashes
                .iter()
                .filter(|&&h| !self.contains_entry(h, from))
                .count() as u64;
        }
        let mut ops: Vec<(u64, Op)> = hashes.iter().map(|&h| (h, Op::Relabel(from, to))).collect();
        self.apply(&mut ops).missing
    }

    /// Applies a compaction's merged keys (see [`MergeKey`]). Returns how many entries were
    /// missing.
    ///
    /// Batches visit the table in address order, in phases: every operation is first tried
    /// in its key's first bucket, in the order of those buckets (a counting sort);
    /// those that bucket could not serve are sorted by their second bucket and tried there;
    /// the few left take the single-key path (both buckets again, cuckoo walks, the stash).
    /// No entry moves between the first two phases, so an entry not found in the first
    /// bucket is in the second, in the stash, or missing.
    pub fn merge_batch(&mut self, keys: &mut [MergeKey]) -> u64 {
        let mut ops = merge_ops(keys, false);
        self.apply(&mut ops).missing
    }

    /// Undoes [`Writer::merge_batch`] on the same keys (a compaction whose result was not
    /// published): the entry relabelled to `to` goes back to the run it came from, and the
    /// removed ones are inserted again. Returns how many entries were missing.
    pub fn unmerge_batch(&mut self, keys: &mut [MergeKey]) -> u64 {
        let mut ops = merge_ops(keys, true);
        self.apply(&mut ops).missing
    }

    /// Applies `ops` in the phases [`Writer::merge_batch`] describes.
    fn apply(&mut self, ops: &mut [(u64, Op)]) -> Outcome {
        let f: &'a GlobalFilter = self.f;
        let t = &f.table;
        let mut out = Outcome::default();
        let ops = by_address(ops, t.buckets, |&(h, _)| (t.i1(h), h));
        let mut second: Vec<(u64, u64, Op)> = Vec::new();
        // Buckets a batch visits are far apart in a large table: each is asked for
        // `PREFETCH_AHEAD` operations before it is read, so the misses overlap.
        for (j, &(h, op)) in ops.iter().enumerate() {
            if let Some(&(ahead, _)) = ops.get(j + PREFETCH_AHEAD) {
                t.prefetch(t.i1(ahead));
            }
            if !self.try_at(t.i1(h), h, op, true) {
                second.push((t.pair(h).1, h, op));
            }
        }
        let second = by_address(&second, t.buckets, |&(i2, h, _)| (i2, h));
        let mut last: Vec<(u64, Op)> = Vec::new();
        for (j, &(i2, h, op)) in second.iter().enumerate() {
            if let Some(&(ahead, _, _)) = second.get(j + PREFETCH_AHEAD) {
                t.prefetch(ahead);
            }
            if !self.try_at(i2, h, op, false) {
                last.push((h, op));
            }
        }
        for (h, op) in last {
            match op {
                Op::Insert(r) => out.stashed += !self.insert(h, r) as u64,
                Op::Remove(r) => out.missing += !self.remove(h, r) as u64,
                Op::Relabel(a, b) => out.missing += !self.relabel(h, a, b) as u64,
            }
        }
        self.settle_stash();
        out
    }

    /// Serves `op` in bucket `i` alone if it can (and, on the first try, from the stash,
    /// which removals and relabels consult first): true when done.
    fn try_at(&mut self, i: u64, h: u64, op: Op, first: bool) -> bool {
        let t = self.table();
        let stash = first && self.f.stash_len.load(Ordering::Relaxed) != 0;
        match op {
            Op::Insert(r) => {
                let Some(s) = t.slots(i).with(t.entry(h, r)) else {
                    return false;
                };
                t.write(i, t.encode(&s));
                self.st.in_table += 1;
                self.st.counts[r.index()] += 1;
                true
            }
            Op::Remove(r) => {
                if stash && self.stash_take(h, r) {
                    self.st.counts[r.index()] -= 1;
                    return true;
                }
                let s = t.slots(i);
                let Some(j) = s.find(t.entry(h, r)) else {
                    return false;
                };
                t.write(i, t.encode(&s.without(j)));
                self.st.in_table -= 1;
                self.st.counts[r.index()] -= 1;
                true
            }
            Op::Relabel(a, b) => {
                if stash && self.stashed_has(h, a) {
                    // The single-key path takes it from the stash.
                    return self.relabel(h, a, b);
                }
                let s = t.slots(i);
                let Some(j) = s.find(t.entry(h, a)) else {
                    return false;
                };
                t.write(i, t.encode(&s.replaced(j, t.entry(h, b))));
                self.st.counts[a.index()] -= 1;
                self.st.counts[b.index()] += 1;
                true
            }
        }
    }

    /// True when the stash holds a copy of (hash, run): a shared lock and a lookup, cheaper
    /// than taking the stash for writing.
    fn stashed_has(&self, hash: u64, run: RunId) -> bool {
        let stash = self.f.stash.read().unwrap_or_else(|p| p.into_inner());
        stash
            .get(&hash)
            .is_some_and(|v| v.iter().any(|(r, _)| *r == run))
    }

    /// Moves stashed entries into the table where room appeared.
    fn settle_stash(&mut self) {
        if self.f.stash_len.load(Ordering::Relaxed) == 0 {
            return;
        }
        for (h, r) in self.stashed() {
            let e = self.table().entry(h, r);
            // Into the table first, then out of the stash.
            if self.place(h, e) {
                self.f.settled.fetch_add(1, Ordering::Release);
                self.stash_take(h, r);
            }
        }
    }

    // -- state -----------------------------------------------------------------------------------

    /// Entries per run id (table and stash).
    pub fn counts(&self) -> [u64; MAX_RUNS] {
        self.st.counts
    }

    /// All entries (table and stash).
    pub fn len(&self) -> u64 {
        self.st.counts.iter().sum()
    }

    /// True when the filter holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries in the table ÷ slots.
    pub fn load(&self) -> f64 {
        self.st.in_table as f64 / self.f.table.slot_count() as f64
    }

    /// True when the table is too full to stay fast: load above [`MAX_LOAD`], or more
    /// stashed entries than one per [`STASH_PER_SLOTS`] slots (at least [`STASH_MIN`]). The
    /// owner then builds a larger filter from its durable sources (the runs' keys) and swaps
    /// it in.
    pub fn needs_rebuild(&self) -> bool {
        let limit = (self.f.table.slot_count() / STASH_PER_SLOTS).max(STASH_MIN);
        self.load() > MAX_LOAD || self.f.stash_len.load(Ordering::Relaxed) as u64 > limit
    }

    /// Sizes and counts.
    pub fn stats(&self) -> GlobalStats {
        GlobalStats {
            layout: self.f.layout.name(),
            buckets: self.f.table.buckets,
            in_table: self.st.in_table,
            stashed: self.f.stash_len.load(Ordering::Relaxed) as u64,
            counts: self.st.counts,
            load: self.load(),
            memory_bytes: self.f.memory_bytes(),
            kicked: self.st.kicked,
            failed_walks: self.st.failed_walks,
        }
    }

    /// Everything the filter holds, for checks and tests.
    pub fn entries(&self) -> Contents {
        let t = &self.f.table;
        let mut out = Vec::with_capacity(self.st.in_table as usize);
        for i in 0..t.buckets {
            for e in t.slots(i).entries() {
                out.push((i, RunId(e.run), e.fp));
            }
        }
        Contents {
            table: out,
            stash: self.stashed(),
        }
    }

    /// The stash as sorted (hash, run) pairs, one per copy.
    pub(super) fn stashed(&self) -> Vec<(u64, RunId)> {
        let stash = self.f.stash.read().unwrap_or_else(|p| p.into_inner());
        let mut st: Vec<(u64, RunId)> = stash
            .iter()
            .flat_map(|(&h, v)| {
                v.iter()
                    .flat_map(move |&(r, n)| std::iter::repeat_n((h, r), n as usize))
            })
            .collect();
        st.sort_unstable();
        st
    }
}

/// `ops` in the order of `key(op)` = (bucket, hash), or close to it: the batch's sweep of
/// the table in address order. A batch of fewer than [`EXACT_BELOW`] operations is sorted
/// by the key; a larger one by a counting sort on the bucket's top bits (stable, two linear
/// passes, one bin per about two operations and at most 2¹⁶ bins: within a bin, buckets lie
/// within 1/2¹⁶ of the table, which the prefetch covers). A comparison sort of a
/// compaction's keys took most of the batch's time.
fn by_address<T: Copy>(ops: &[T], buckets: u64, key: impl Fn(&T) -> (u64, u64)) -> Vec<T> {
    let mut out = ops.to_vec();
    if ops.len() < EXACT_BELOW {
        out.sort_unstable_by_key(key);
        return out;
    }
    let bins = (ops.len() / 2).next_power_of_two().min(1 << 16);
    // A bucket number has `width` bits; its top log2(bins) of them are its bin.
    let width = 64 - buckets.saturating_sub(1).leading_zeros();
    let shift = width.saturating_sub(bins.trailing_zeros());
    let bin = |o: &T| ((key(o).0 >> shift) as usize).min(bins - 1);
    let mut start = vec![0usize; bins + 1];
    for o in ops {
        start[bin(o) + 1] += 1;
    }
    for b in 0..bins {
        start[b + 1] += start[b];
    }
    for o in ops {
        let b = bin(o);
        out[start[b]] = *o;
        start[b] += 1;
    }
    out
}

/// Batches smaller than this are sorted exactly (see [`by_address`]).
const EXACT_BELOW: usize = 4096;

/// One operation of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Insert(RunId),
    Remove(RunId),
    Relabel(RunId, RunId),
}

/// What a batch did not do as asked.
#[derive(Clone, Copy, Debug, Default)]
struct Outcome {
    /// Removals and relabels that found no entry.
    missing: u64,
    /// Inserts that went to the stash.
    stashed: u64,
}

/// The operations of [`Writer::merge_batch`] for `keys` (`undo`: those of
/// [`Writer::unmerge_batch`]): each key keeps one entry, relabelled from the first of its
/// `from` runs to `to` (or inserted when it had none), and loses the others.
fn merge_ops(keys: &[MergeKey], undo: bool) -> Vec<(u64, Op)> {
    let mut ops: Vec<(u64, Op)> = Vec::with_capacity(keys.len());
    for m in keys {
        let mut rest = m.from;
        match m.to {
            Some(to) if rest.contains(to) => rest = rest.without(to),
            Some(to) => match rest.iter().next() {
                Some(first) => {
                    rest = rest.without(first);
                    let (a, b) = if undo { (to, first) } else { (first, to) };
                    ops.push((m.hash, Op::Relabel(a, b)));
                }
                None => ops.push((m.hash, if undo { Op::Remove(to) } else { Op::Insert(to) })),
            },
            None => {}
        }
        ops.extend(
            rest.iter()
                .map(|r| (m.hash, if undo { Op::Insert(r) } else { Op::Remove(r) })),
        );
    }
    ops
}
