//! The lookup through the global filter (`FilterKind::Global`).
//!
//! The global filter holds the keys of the tables without a filter of their own: L0 and
//! the upper levels. The tables written into the deepest level carry a static filter of
//! their own ([`TableHandle::own_filter`]) and are not in the global filter, which so
//! stays small (see `docs/global-filter.md`, "The deepest level"). A lookup asks the
//! global filter once for the runs that may hold the key and, in recency order, reads the
//! runs it named and probes the own filter of every table of an own-filtered level whose
//! range holds the key.

use super::{prefix8, Probe, TableHandle, Version};
use crate::error::Result;
use crate::expiry::Now;
use crate::filter::global::RunSet;
use crate::global_index::{level_run, GlobalIndex};
use crate::Slice;

/// Own-filtered tables [`Version::own_rules_out`] remembers before it counts their
/// negatives (a lookup meeting more takes the long path).
const OWN_AT_ONCE: usize = 16;

impl Version {
    /// Looks `key` up through the global filter: one probe names the runs that may hold
    /// it; they are read newest first (L0 newest to oldest, then L1, L2, …), and the first
    /// that holds the key answers. Every run holding a version of the key is named (no
    /// false negatives), so the newest version wins even when another key's fingerprint
    /// names a newer run too: that run is read, misses, and the lookup goes on. Tables
    /// with a filter of their own are asked through it, in the same order.
    pub(super) fn get_global(
        &self,
        g: &GlobalIndex,
        key: &[u8],
        hash: u64,
        now: &Now,
    ) -> Result<Option<Slice>> {
        self.get_in_runs(g, g.query(hash), key, hash, now)
    }

    /// Whether the tables of this version that have a filter of their own (and whose range
    /// holds `key`) all rule the key of `hash` out; true when there are none. When they
    /// do, their negatives are counted (as [`get_in_runs`](Self::get_in_runs) would);
    /// when one says "maybe", nothing is counted and the caller takes the long path. Reads
    /// no table: a lookup asks it under the store's state lock.
    pub(crate) fn own_rules_out<'a>(&'a self, key: &[u8], hash: u64) -> bool {
        if self.own == 0 {
            return true;
        }
        let p = prefix8(key);
        let mut seen: [Option<&TableHandle>; OWN_AT_ONCE] = [None; OWN_AT_ONCE];
        let mut n = 0;
        // False when `t` may hold the key (or has no filter that opened), or too many.
        let mut note = |t: &'a TableHandle| -> bool {
            let ruled = t.filter.as_ref().is_some_and(|f| !f.may_contain(hash));
            match seen.get_mut(n) {
                Some(slot) if ruled => {
                    *slot = Some(t);
                    n += 1;
                    true
                }
                _ => false,
            }
        };
        let mut own = self.own;
        while own != 0 {
            let l = own.trailing_zeros() as usize;
            own &= own - 1;
            let Some(level) = self.levels.get(l) else {
                continue;
            };
            if l == 0 {
                for t in level.tables.iter().filter(|t| t.own_filter()) {
                    if t.in_range(key, p) && !note(t) {
                        return false;
                    }
                }
            } else if let Some(t) = level.table_for(key, p).filter(|t| t.own_filter()) {
                if !note(t) {
                    return false;
                }
            }
        }
        for t in seen.iter().flatten() {
            t.counters.add_negatives(1);
        }
        true
    }

    /// The second half of [`get_global`](Self::get_global): reads the runs of `set`, the
    /// answer of `g`'s query for the key (`g` is this version's global filter), newest
    /// first, and asks the tables with filters of their own on the way.
    pub(crate) fn get_in_runs(
        &self,
        g: &GlobalIndex,
        set: RunSet,
        key: &[u8],
        hash: u64,
        now: &Now,
    ) -> Result<Option<Slice>> {
        if set.is_empty() && self.own == 0 {
            return Ok(None);
        }
        let p = prefix8(key);
        let read = |t: &TableHandle| -> Result<Option<Option<Slice>>> {
            let got = t.table.get_at(key, &t.counters, now)?;
            g.count_read(got.is_some());
            Ok(got)
        };
        // L0 ids sit above the levels' (6..=31): look at L0 only when one is named, or
        // when L0 holds a table with its own filter.
        if set.0 >> crate::filter::global::LEVELS != 0 || self.own & 1 != 0 {
            for (i, t) in self.levels[0].tables.iter().enumerate() {
                if !t.in_range(key, p) {
                    continue;
                }
                if t.own_filter() {
                    if let Some(v) = self.probe_own(t, 0, i, key, hash, now)? {
                        return Ok(v);
                    }
                } else if t.run().is_some_and(|r| set.contains(r)) {
                    if let Some(v) = read(t)? {
                        return Ok(v.filter(|_| !self.hidden(key, 0, i)));
                    }
                }
            }
        }
        for (l, level) in self.levels.iter().enumerate().skip(1) {
            let named = level_run(l).is_some_and(|r| set.contains(r));
            if !named && self.own & (1 << l) == 0 {
                continue;
            }
            let Some(t) = level.table_for(key, p) else {
                continue;
            };
            if t.own_filter() {
                if let Some(v) = self.probe_own(t, l, 0, key, hash, now)? {
                    return Ok(v);
                }
            } else if named {
                if let Some(v) = read(t)? {
                    return Ok(v.filter(|_| !self.hidden(key, l, 0)));
                }
            }
        }
        Ok(None)
    }

    /// Asks table `t` (on level `level`, index `i` of L0) through its own filter: `Some`
    /// with the answer when it holds a version of `key` (a hidden value answers `None`),
    /// `None` when the filter rules it out or the table does not hold it.
    #[inline]
    fn probe_own(
        &self,
        t: &TableHandle,
        level: usize,
        i: usize,
        key: &[u8],
        hash: u64,
        now: &Now,
    ) -> Result<Option<Option<Slice>>> {
        if t.rules_out(hash) {
            return Ok(None);
        }
        match t.read(key)? {
            Probe::Found(v) if v.is_some() && self.hidden(key, level, i) => Ok(Some(None)),
            Probe::Found(v) => t.table.judge(key, v, now).map(Some),
            _ => Ok(None),
        }
    }
}
