//! Batched point lookups ([`Version::multi_get`]): a [`Batch`] of keys on its way through
//! the table set, each table's filter asked about all its keys at once.

use super::{prefix8, TableHandle, Version};
use crate::error::Result;
use crate::expiry::Now;
use crate::Slice;

impl TableHandle {
    /// [`probe`](Self::probe) for several keys of `batch` (`cands`, indices into it, all in
    /// the table's key range): the filter is asked about every key first, with its cache
    /// misses overlapped ([`MappedFilter::retain_maybe`]), then the table is read for the
    /// keys it may hold. Each key is counted exactly as by `probe`, so a batch leaves the
    /// counters as the same keys' `get`s would. Keys found (tombstones included) are
    /// answered in `batch` and marked done; returns how many.
    fn probe_batch(
        &self,
        cands: &[u32],
        batch: &mut Batch<'_>,
        maybe: &mut Vec<u32>,
        now: &Now,
    ) -> Result<usize> {
        if cands.is_empty() {
            return Ok(0);
        }
        let c = &self.counters;
        let maybe: &[u32] = match &self.filter {
            Some(f) => {
                maybe.clear();
                f.retain_maybe(cands, &batch.hashes, maybe);
                c.add_negatives((cands.len() - maybe.len()) as u64);
                c.add_positives(maybe.len() as u64);
                maybe
            }
            None => cands,
        };
        let mut found = 0;
        for &i in maybe {
            let i = i as usize;
            match self.table.get_at(batch.keys[i], c, now)? {
                Some(v) => {
                    batch.out[i] = v;
                    batch.done[i] = true;
                    found += 1;
                }
                None if self.filter.is_some() => c.add_false_positives(1),
                None => c.add_unfiltered_misses(1),
            }
        }
        Ok(found)
    }
}

/// A batch of point lookups on its way through the sources, newest first: each key hashed
/// once, and the keys no source has answered yet.
pub(crate) struct Batch<'k> {
    keys: Vec<&'k [u8]>,
    hashes: Vec<u64>,
    prefixes: Vec<u64>,
    /// The smallest and largest of `prefixes` (`u64::MAX` and 0 for an empty batch).
    pmin: u64,
    pmax: u64,
    /// Indices of the keys no source answered yet, ascending.
    pending: Vec<u32>,
    /// Answered (a value or a tombstone) by a source already searched.
    done: Vec<bool>,
    out: Vec<Option<Slice>>,
}

impl<'k> Batch<'k> {
    /// A batch of `keys`, each hashed with [`key_hash`](crate::hash::key_hash).
    pub(crate) fn new<K: AsRef<[u8]>>(keys: &'k [K]) -> Batch<'k> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        let n = keys.len();
        let prefixes: Vec<u64> = keys.iter().map(|k| prefix8(k)).collect();
        Batch {
            hashes: keys.iter().map(|k| crate::hash::key_hash(k)).collect(),
            pmin: prefixes.iter().copied().min().unwrap_or(u64::MAX),
            pmax: prefixes.iter().copied().max().unwrap_or(0),
            prefixes,
            keys,
            // A batch of more than 4G keys would not fit in memory with its values anyway.
            pending: (0..n as u32).collect(),
            done: vec![false; n],
            out: vec![None; n],
        }
    }

    /// True when every key has been answered.
    pub(crate) fn is_done(&self) -> bool {
        self.pending.is_empty()
    }

    /// Answers the pending keys that `source` holds (`Some(value)`, or `Some(None)` for a
    /// tombstone), given each key and its hash.
    pub(crate) fn answer_from(
        &mut self,
        mut source: impl FnMut(&[u8], u64) -> Option<Option<Slice>>,
    ) {
        let mut found = 0;
        for &i in &self.pending {
            let i = i as usize;
            if let Some(v) = source(self.keys[i], self.hashes[i]) {
                self.out[i] = v;
                self.done[i] = true;
                found += 1;
            }
        }
        self.retire(found);
    }

    /// Drops the keys marked done from `pending` (after `found` of them were).
    fn retire(&mut self, found: usize) {
        if found > 0 {
            let done = &self.done;
            self.pending.retain(|&i| !done[i as usize]);
        }
    }

    /// Each key's value: `None` when no source holds it or its newest version is a
    /// tombstone.
    pub(crate) fn into_values(self) -> Vec<Option<Slice>> {
        self.out
    }
}

impl Version {
    /// Looks up every pending key of `batch`, answering each as [`get`](Self::get) would,
    /// with the same counts: table by table, L0 newest to oldest, then level by level, each
    /// table probed ([`TableHandle::probe_batch`]) for the keys still pending that its range
    /// holds, so a key found in a newer table (or hidden there by a tombstone) is never
    /// looked up in an older one.
    pub(crate) fn multi_get(&self, batch: &mut Batch<'_>, now: &Now) -> Result<()> {
        if let Some(g) = &self.global {
            // One probe per key names its runs: nothing to share between keys but the wait
            // for their buckets. Each key's are prefetched `AHEAD` keys before it is asked,
            // so that the cache misses of several keys overlap.
            const AHEAD: usize = 8;
            let pending = &batch.pending;
            for &i in pending.iter().take(AHEAD) {
                g.prefetch(batch.hashes[i as usize]);
            }
            for (n, &i) in pending.iter().enumerate() {
                if let Some(&j) = pending.get(n + AHEAD) {
                    g.prefetch(batch.hashes[j as usize]);
                }
                let i = i as usize;
                batch.out[i] = self.get_global(g, batch.keys[i], batch.hashes[i], now)?;
                batch.done[i] = true;
            }
            batch.pending.clear();
            return Ok(());
        }
        if !self.cover().is_empty() {
            // Range tombstones: each key through `get`, which knows the table that answered
            // (the same answers and counts as a loop of `get`).
            for &i in &batch.pending {
                let i = i as usize;
                batch.out[i] = self.get(batch.keys[i], batch.hashes[i], now)?;
                batch.done[i] = true;
            }
            batch.pending.clear();
            return Ok(());
        }
        let mut cands: Vec<u32> = Vec::with_capacity(batch.pending.len());
        let mut maybe: Vec<u32> = Vec::new();
        for t in &self.levels[0].tables {
            if batch.is_done() {
                return Ok(());
            }
            cands.clear();
            if t.lo < batch.pmin && batch.pmax < t.hi {
                // Every key's prefix lies strictly inside the table's: all in range.
                cands.extend_from_slice(&batch.pending);
            } else {
                cands.extend(batch.pending.iter().copied().filter(|&i| {
                    let i = i as usize;
                    t.in_range(batch.keys[i], batch.prefixes[i])
                }));
            }
            let found = t.probe_batch(&cands, batch, &mut maybe, now)?;
            batch.retire(found);
        }
        // (table, key) pairs of a level, grouped by table.
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for level in self.levels.iter().skip(1) {
            if batch.is_done() {
                return Ok(());
            }
            if level.tables.is_empty() {
                continue;
            }
            pairs.clear();
            for &i in &batch.pending {
                let (key, p) = (batch.keys[i as usize], batch.prefixes[i as usize]);
                let t = level.first_not_below(key, p);
                if level.tables.get(t).is_some_and(|t| t.in_range(key, p)) {
                    pairs.push((t as u32, i));
                }
            }
            pairs.sort_unstable();
            let mut found = 0;
            for run in pairs.chunk_by(|a, b| a.0 == b.0) {
                cands.clear();
                cands.extend(run.iter().map(|&(_, i)| i));
                let t = &level.tables[run[0].0 as usize];
                found += t.probe_batch(&cands, batch, &mut maybe, now)?;
            }
            batch.retire(found);
        }
        Ok(())
    }
}
