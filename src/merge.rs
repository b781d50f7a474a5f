//! A merge of sorted sources, newest first, that yields its first entry without reading the
//! rest: the heart of a scan (`scan.rs` has the sources). Compaction has its own merge over
//! table cursors, in `compaction::run`.
//!
//! ```text
//! heap of sources by (current key, source number):   mem "d"  L0#1 "f"  L1 ≥"m" (pending)
//! next():  top "d" → copy it out → advance mem → re-place it; skip "d" in older sources
//! ```
//! Sources sit in a binary heap ordered by their current key and, on equal keys, by their
//! number (the newest source has the smallest), so the top is the next key and its newest
//! version. A source may be **pending**: it has read nothing yet and offers only a lower bound
//! of its keys (a table's smallest key). It is opened when that bound comes to the top, that
//! is, when every entry before it has been returned; a scan that ends first never reads it.
//! Keys are compared by their first eight bytes as one integer, cached per source, and in
//! full only on a tie. Nothing is allocated per entry except the `(key, value)` returned.
//!
//! This module knows nothing of the store: sources implement [`Source`].

use std::cmp::Ordering;
use std::ops::Bound;

use crate::codec::prefix8;
use crate::error::Result;

/// Where a [`Source`] stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// On an entry: [`Source::key`] and [`Source::value`] are its.
    Ready,
    /// Nothing read yet: [`Source::key`] is a lower bound of every key it will yield.
    Pending,
    /// No entries left.
    Done,
}

/// A sorted stream of entries with distinct keys (a value, or `None` for a tombstone).
pub(crate) trait Source {
    /// Where it stands.
    fn state(&self) -> State;
    /// The current key when [`State::Ready`], a lower bound of the keys to come when
    /// [`State::Pending`].
    fn key(&self) -> &[u8];
    /// The current value (`None`: a tombstone); only when [`State::Ready`].
    fn value(&self) -> Option<&[u8]>;
    /// Reads up to the first entry after `start` (it may stay pending, with a higher bound,
    /// for instance when it knows it holds nothing before `end`).
    fn open(&mut self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<()>;
    /// Moves past the current entry.
    fn advance(&mut self) -> Result<()>;
}

/// Merges sources given newest first: for equal keys the earliest source wins, and the
/// others' versions are passed over. Yields values only (tombstones hide older versions and
/// are not returned), from `start` to `end`; an error ends the merge.
pub(crate) struct Merge<S> {
    sources: Vec<S>,
    /// `prefix8` of each source's key (or bound).
    prefix: Vec<u64>,
    /// Source numbers, a min-heap by `(prefix, key, number)`.
    heap: Vec<u32>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    /// The key of the tombstone being passed over (reused).
    last: Vec<u8>,
    done: bool,
}

impl<S: Source> Merge<S> {
    /// Merges `sources` (newest first) over the keys from `start` to `end`. Each source must
    /// hold no key before `start` once opened, or be pending.
    pub(crate) fn new(sources: Vec<S>, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Self {
        let prefix = sources.iter().map(|s| prefix8(s.key())).collect();
        let heap = (0..sources.len() as u32)
            .filter(|&i| sources[i as usize].state() != State::Done)
            .collect();
        let mut m = Merge {
            sources,
            prefix,
            heap,
            start,
            end,
            last: Vec::new(),
            done: false,
        };
        for i in (0..m.heap.len() / 2).rev() {
            m.sift_down(i);
        }
        m
    }

    /// The sources (for tests and counters).
    #[cfg(test)]
    pub(crate) fn sources(&self) -> &[S] {
        &self.sources
    }

    #[inline]
    fn less(&self, a: u32, b: u32) -> bool {
        let (pa, pb) = (self.prefix[a as usize], self.prefix[b as usize]);
        if pa != pb {
            return pa < pb;
        }
        match self.sources[a as usize]
            .key()
            .cmp(self.sources[b as usize].key())
        {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => a < b,
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && self.less(self.heap[l], self.heap[m]) {
                m = l;
            }
            if r < n && self.less(self.heap[r], self.heap[m]) {
                m = r;
            }
            if m == i {
                return;
            }
            self.heap.swap(i, m);
            i = m;
        }
    }

    /// The top source moved (opened or advanced): puts it back in its place, or out of the
    /// heap once it is done.
    fn settle_top(&mut self) {
        let Some(&top) = self.heap.first() else {
            return;
        };
        let s = &self.sources[top as usize];
        if s.state() == State::Done {
            let last = self.heap.pop().unwrap_or(top);
            if self.heap.is_empty() {
                return;
            }
            self.heap[0] = last;
        } else {
            self.prefix[top as usize] = prefix8(s.key());
        }
        self.sift_down(0);
    }

    fn past_end(&self, key: &[u8]) -> bool {
        match &self.end {
            Bound::Included(e) => key > e.as_slice(),
            Bound::Excluded(e) => key >= e.as_slice(),
            Bound::Unbounded => false,
        }
    }

    /// The source holding the next key, opened; `None` when no key is left before `end`.
    fn ready_top(&mut self) -> Result<Option<usize>> {
        loop {
            let Some(&t) = self.heap.first() else {
                return Ok(None);
            };
            let t = t as usize;
            // A pending source's bound past the end: every key left is past it too.
            if self.past_end(self.sources[t].key()) {
                return Ok(None);
            }
            if self.sources[t].state() == State::Ready {
                return Ok(Some(t));
            }
            let start = self.start.as_ref().map(Vec::as_slice);
            self.sources[t].open(start, self.end.as_ref().map(Vec::as_slice))?;
            self.settle_top();
        }
    }

    /// The next value and its key, or `None` at the end.
    fn step(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            let Some(top) = self.ready_top()? else {
                return Ok(None);
            };
            let s = &self.sources[top];
            let item = s.value().map(|v| (s.key().to_vec(), v.to_vec()));
            let mut last = std::mem::take(&mut self.last);
            if item.is_none() {
                last.clear();
                last.extend_from_slice(s.key());
            }
            let key: &[u8] = item.as_ref().map_or(&last, |(k, _)| k);
            let p = self.prefix[top];
            self.sources[top].advance()?;
            self.settle_top();
            // Older versions of the same key, in older sources: now at the top.
            while let Some(&t) = self.heap.first() {
                let t = t as usize;
                if self.prefix[t] != p || self.sources[t].key() != key {
                    break;
                }
                if self.sources[t].state() == State::Pending {
                    let start = self.start.as_ref().map(Vec::as_slice);
                    self.sources[t].open(start, self.end.as_ref().map(Vec::as_slice))?;
                } else {
                    self.sources[t].advance()?;
                }
                self.settle_top();
            }
            self.last = last;
            if item.is_some() {
                return Ok(item);
            }
        }
    }

    /// The next entry: `None` at the end; an error ends the merge.
    pub(crate) fn next_item(&mut self) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::block::Entry;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// A source over sorted entries; pending at `bound` (at most its first key) until opened,
    /// when it seeks past `start`. Counts its opens.
    struct VecSource {
        entries: Vec<Entry>,
        at: usize,
        bound: Option<Vec<u8>>,
        opens: usize,
    }

    impl Source for VecSource {
        fn state(&self) -> State {
            if self.bound.is_some() {
                State::Pending
            } else if self.at < self.entries.len() {
                State::Ready
            } else {
                State::Done
            }
        }
        fn key(&self) -> &[u8] {
            match &self.bound {
                Some(b) => b,
                None => self.entries.get(self.at).map_or(&[], |e| &e.0),
            }
        }
        fn value(&self) -> Option<&[u8]> {
            self.entries[self.at].1.as_deref()
        }
        fn open(&mut self, start: Bound<&[u8]>, _end: Bound<&[u8]>) -> Result<()> {
            self.opens += 1;
            self.bound = None;
            self.at = self.entries.partition_point(|(k, _)| match start {
                Bound::Included(s) => k.as_slice() < s,
                Bound::Excluded(s) => k.as_slice() <= s,
                Bound::Unbounded => false,
            });
            Ok(())
        }
        fn advance(&mut self) -> Result<()> {
            self.at += 1;
            Ok(())
        }
    }

    fn bound(b: Option<(u8, bool)>) -> Bound<Vec<u8>> {
        match b {
            None => Bound::Unbounded,
            Some((k, false)) => Bound::Included(vec![k]),
            Some((k, true)) => Bound::Excluded(vec![k]),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// The merge of sources (newest first) is the model built by applying them oldest
        /// first, cut to the range; a source is opened only once the merge reaches its bound.
        #[test]
        fn merge_is_newest_wins_and_lazy(
            sources in prop::collection::vec(
                (prop::collection::btree_map(0u8..40, prop::option::weighted(0.7, 0u8..5), 0..30), 0u8..3),
                0..7,
            ),
            start in prop::option::of((0u8..42, any::<bool>())),
            end in prop::option::of((0u8..42, any::<bool>())),
            take in 0usize..50,
        ) {
            let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            for (entries, _) in sources.iter().rev() {
                for (k, v) in entries {
                    model.insert(vec![*k], v.map(|x| vec![x; x as usize]));
                }
            }
            let (start, end) = (bound(start), bound(end));
            let want: Vec<(Vec<u8>, Vec<u8>)> = if matches!((&start, &end), (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) if s > e || (s == e && !matches!((&start, &end), (Bound::Included(_), Bound::Included(_)))))
            {
                Vec::new()
            } else {
                model
                    .range((start.clone(), end.clone()))
                    .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
                    .collect()
            };
            let vs: Vec<VecSource> = sources
                .iter()
                .map(|(entries, lazy)| {
                    let entries: Vec<Entry> = entries
                        .iter()
                        .map(|(k, v)| (vec![*k], v.map(|x| vec![x; x as usize])))
                        .collect();
                    // A bound at or below the first key (or none: opened at once).
                    let first = entries.first().map_or(0, |e| e.0[0]);
                    let bound = (*lazy > 0).then(|| vec![first.saturating_sub(*lazy - 1)]);
                    let mut s = VecSource { entries, at: 0, bound: None, opens: 0 };
                    match bound {
                        // Ready from the start on, as the merge requires of sources not pending.
                        None => s.open(start.as_ref().map(Vec::as_slice), Bound::Unbounded).unwrap(),
                        Some(b) => s.bound = Some(b),
                    }
                    s
                })
                .collect();
            let mut m = Merge::new(vs, start, end);
            let mut got = Vec::new();
            while got.len() < take {
                match m.next_item() {
                    Some(item) => got.push(item.unwrap()),
                    None => break,
                }
            }
            prop_assert_eq!(&got[..], &want[..got.len()]);
            if got.len() < take {
                prop_assert_eq!(got.len(), want.len());
            }
            // A source still pending was never needed: its bound lies past what was returned.
            for s in m.sources() {
                prop_assert!(s.opens <= 1);
                if let (Some(b), Some((k, _))) = (&s.bound, got.last()) {
                    prop_assert!(b >= k);
                }
            }
        }
    }
}
