//! The one k-way merge of sorted sources, newest first, in either direction: scans run it
//! forward and backward (`scan.rs` has their sources), compactions forward over table
//! cursors (`compaction::run`).
//!
//! ```text
//! heap of sources by (current key, source number):   mem "d"  L0#1 "f"  L1 ≥"m" (pending)
//! step:  top "d" → hand it out → advance mem → re-place it; skip "d" in older sources
//! ```
//! Sources sit in a binary heap ordered by their current key (smallest first forward,
//! largest first backward) and, on equal keys, by their number (the newest source has the
//! smallest), so the top is the next key and its newest version. A source may be
//! **pending**: it has read nothing yet and offers only a bound of its keys (forward, a lower
//! bound such as a table's smallest key; backward, an upper bound such as its largest). It is
//! opened when that bound comes to the top, that is, when every entry before it has been
//! handed out; a scan that ends first never reads it. Keys are compared by their first eight
//! bytes as one integer ([`Source::head`], cached per source), and in full only on a tie.
//! Nothing is allocated per entry: [`Merge::next_entry_all`] lends the entry to a closure.
//!
//! **Seek.** [`Merge::seek`] moves the merge on to a key: every source standing before it
//! seeks ([`Source::seek`]: a table source becomes pending again on the table that holds
//! the key, so nothing between is read), and the heap is rebuilt.
//!
//! This module knows nothing of the store: sources implement [`Source`].

use std::cmp::Ordering;
use std::ops::Bound;

use crate::codec::prefix8;
use crate::error::Result;
use crate::Slice;

/// Where a [`Source`] stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// On an entry: [`Source::key`] and [`Source::value`] are its.
    Ready,
    /// Nothing read yet: [`Source::key`] is a bound of every key it will yield (a lower
    /// bound forward, an upper bound backward).
    Pending,
    /// No entries left.
    Done,
}

/// A sorted stream of entries with distinct keys (a value, or `None` for a tombstone), in
/// the direction of the merge it is given to (ascending forward, descending backward).
pub(crate) trait Source {
    /// Where it stands.
    fn state(&self) -> State;
    /// The current key when [`State::Ready`], a bound of the keys to come when
    /// [`State::Pending`].
    fn key(&self) -> &[u8];
    /// [`prefix8`] of [`key`](Self::key) (a source that tracks it may say it cheaper).
    #[inline]
    fn head(&self) -> u64 {
        prefix8(self.key())
    }
    /// The current value (`None`: a tombstone); only when [`State::Ready`].
    fn value(&self) -> Option<&[u8]>;
    /// [`value`](Self::value) as a [`Slice`]: by default a copy (inline when short); a
    /// source that holds its values in shared bytes shares them instead.
    #[inline]
    fn value_slice(&self) -> Option<Slice> {
        self.value().map(Slice::from)
    }
    /// The current value's `expires_at` (Unix milliseconds; 0: never); only when
    /// [`State::Ready`]. Compaction's sources say it; scans judge expiry in their sources.
    #[inline]
    fn expires(&self) -> u64 {
        0
    }
    /// Reads up to its first entry in the range `start..end` (forward: the first at or after
    /// `start`; backward: the last at or before `end`). It may stay pending, with a bound
    /// further on, for instance when it knows it holds nothing in the range.
    fn open(&mut self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<()>;
    /// Moves past the current entry.
    fn advance(&mut self) -> Result<()>;
    /// Moves on to the first entry at or after `key` (backward: at or before), from a ready
    /// state; it may become pending on a bound instead. By default, steps there.
    fn seek(&mut self, key: &[u8], rev: bool) -> Result<()> {
        while self.state() == State::Ready && (self.key() < key) != rev && self.key() != key {
            self.advance()?;
        }
        Ok(())
    }
    /// Moves on past a range its entries are hidden in: to the first entry at or after
    /// `key` (backward: at or before it), from a ready or pending state, reading as little as
    /// it can ([`Merge::skip_older`]). By default, a ready source seeks.
    fn skip(&mut self, key: &[u8], rev: bool) -> Result<()> {
        if self.state() == State::Ready {
            self.seek(key, rev)?;
        }
        Ok(())
    }
}

/// Merges sources given newest first (forward, or backward with `REV`): for equal keys the
/// earliest source wins, and the others' versions are passed over. Hands out the newest
/// version of each key in the range, tombstones included ([`next_entry_all`](Self::next_entry_all)),
/// or values only ([`next_item`](Self::next_item)); an error ends the merge.
pub(crate) struct Merge<S, const REV: bool> {
    sources: Vec<S>,
    /// [`Source::head`] of each source's key (or bound).
    prefix: Vec<u64>,
    /// Source numbers, a heap by `(prefix, key, number)` (keys descending with `REV`).
    heap: Vec<u32>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    /// The key last handed out (reused).
    last: Vec<u8>,
    /// The sources that held it, the one whose version was handed out first.
    held: Vec<u32>,
    /// Something was handed out.
    stepped: bool,
    done: bool,
}

impl<S: Source, const REV: bool> Merge<S, REV> {
    /// Merges `sources` (newest first) over the keys from `start` to `end`. Each source must
    /// hold no key outside the range on its near side once opened, or be pending.
    pub(crate) fn new(sources: Vec<S>, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Self {
        let prefix = sources.iter().map(Source::head).collect();
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
            held: Vec::new(),
            stepped: false,
            done: false,
        };
        m.heapify();
        m
    }

    fn heapify(&mut self) {
        for i in (0..self.heap.len() / 2).rev() {
            self.sift_down(i);
        }
    }

    /// The sources, in the order given (done ones included).
    pub(crate) fn sources(&self) -> &[S] {
        &self.sources
    }

    /// The key last handed out (`None` before the first).
    pub(crate) fn last(&self) -> Option<&[u8]> {
        self.stepped.then_some(self.last.as_slice())
    }

    /// The part of the range this merge has not passed: forward, after the key last handed
    /// out (or from the start); backward, before it (or up to the end).
    pub(crate) fn rest(&self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        let last = self.last().map(|k| Bound::Excluded(k.to_vec()));
        match REV {
            false => (last.unwrap_or_else(|| self.start.clone()), self.end.clone()),
            true => (self.start.clone(), last.unwrap_or_else(|| self.end.clone())),
        }
    }

    /// The sources that held the key last handed out (numbers in the order given), the one
    /// whose version was handed out first.
    pub(crate) fn held(&self) -> &[u32] {
        &self.held
    }

    /// Ends the merge: nothing more is handed out.
    pub(crate) fn finish(&mut self) {
        self.done = true;
    }

    #[inline(always)]
    fn less(&self, a: u32, b: u32) -> bool {
        let (pa, pb) = (self.prefix[a as usize], self.prefix[b as usize]);
        if pa != pb {
            return (pa < pb) != REV;
        }
        match self.sources[a as usize]
            .key()
            .cmp(self.sources[b as usize].key())
        {
            Ordering::Less => !REV,
            Ordering::Greater => REV,
            Ordering::Equal => a < b,
        }
    }

    #[inline]
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
    #[inline]
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
            self.prefix[top as usize] = s.head();
        }
        self.sift_down(0);
    }

    /// Whether `key` lies beyond the range in the merge's direction.
    #[inline]
    fn beyond(&self, key: &[u8]) -> bool {
        if REV {
            match &self.start {
                Bound::Included(s) => key < s.as_slice(),
                Bound::Excluded(s) => key <= s.as_slice(),
                Bound::Unbounded => false,
            }
        } else {
            match &self.end {
                Bound::Included(e) => key > e.as_slice(),
                Bound::Excluded(e) => key >= e.as_slice(),
                Bound::Unbounded => false,
            }
        }
    }

    fn open(&mut self, t: usize) -> Result<()> {
        let start = self.start.as_ref().map(Vec::as_slice);
        self.sources[t].open(start, self.end.as_ref().map(Vec::as_slice))
    }

    /// The source holding the next key, opened; `None` when no key is left in the range.
    #[inline]
    fn ready_top(&mut self) -> Result<Option<usize>> {
        loop {
            let Some(&t) = self.heap.first() else {
                return Ok(None);
            };
            let t = t as usize;
            // A pending source's bound beyond the range: every key left is beyond it too.
            if self.beyond(self.sources[t].key()) {
                return Ok(None);
            }
            if self.sources[t].state() == State::Ready {
                return Ok(Some(t));
            }
            self.open(t)?;
            self.settle_top();
        }
    }

    /// Calls `f` with the next key and its newest version (`None`: a tombstone), then moves
    /// every source past that key ([`last`](Self::last) and [`held`](Self::held) then say
    /// which). `false` (and `f` not called) at the end of the range.
    #[inline]
    fn step(&mut self, f: &mut impl FnMut(u32, &S)) -> Result<bool> {
        let Some(top) = self.ready_top()? else {
            return Ok(false);
        };
        let s = &self.sources[top];
        f(top as u32, s);
        self.last.clear();
        self.last.extend_from_slice(s.key());
        self.stepped = true;
        self.held.clear();
        self.held.push(top as u32);
        let p = self.prefix[top];
        self.sources[top].advance()?;
        self.settle_top();
        // Older versions of the same key, in older sources: now at the top.
        while let Some(&t) = self.heap.first() {
            let t = t as usize;
            if self.prefix[t] != p || self.sources[t].key() != self.last.as_slice() {
                break;
            }
            if self.sources[t].state() == State::Pending {
                self.open(t)?;
            } else {
                self.held.push(t as u32);
                self.sources[t].advance()?;
            }
            self.settle_top();
        }
        Ok(true)
    }

    /// Hands the next key's newest entry (tombstones included) to `f`, with the number of
    /// the source whose version it is (range tombstones hide entries by source:
    /// `tombstone`) and the entry's `expires_at`; `false` at the end. An error ends the merge.
    #[inline]
    pub(crate) fn next_entry_all(
        &mut self,
        mut f: impl FnMut(u32, &[u8], Option<&[u8]>, u64),
    ) -> Result<bool> {
        self.next_source_entry(|i, s| f(i, s.key(), s.value(), s.expires()))
    }

    /// [`next_entry_all`](Self::next_entry_all), handing `f` the number of the source that
    /// holds the entry and the source itself (to share its value: [`Source::value_slice`]).
    #[inline]
    pub(crate) fn next_source_entry(&mut self, mut f: impl FnMut(u32, &S)) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        let r = self.step(&mut f);
        if !matches!(r, Ok(true)) {
            self.done = true;
        }
        r
    }

    /// The next value and its key (tombstones hide older versions and are not returned):
    /// `None` at the end; an error ends the merge.
    /// The key is a copy (inline in the [`Slice`] when short), the value shared where its
    /// source holds it in shared bytes ([`Source::value_slice`]).
    pub(crate) fn next_item(&mut self) -> Option<Result<(Slice, Slice)>> {
        let mut item = None;
        loop {
            let r = self.next_source_entry(|_, s| {
                item = s.value_slice().map(|v| (Slice::from(s.key()), v));
            });
            match r {
                Ok(true) if item.is_some() => return item.map(Ok),
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Moves the merge on to `key` (forward: nothing before it is handed out; backward:
    /// nothing after it); a key the merge already passed changes nothing.
    pub(crate) fn seek(&mut self, key: &[u8]) -> Result<()> {
        let passed = self.last().is_some_and(|l| key == l || (key < l) != REV);
        let bound = if REV { &mut self.end } else { &mut self.start };
        // Strictly inside: a seek to the bound itself would widen an excluded bound.
        let further = match &*bound {
            Bound::Included(b) | Bound::Excluded(b) => {
                key != b.as_slice() && (key > b.as_slice()) != REV
            }
            Bound::Unbounded => true,
        };
        if !further || passed {
            return Ok(());
        }
        *bound = Bound::Included(key.to_vec());
        let r = self.seek_sources(key);
        if r.is_err() {
            self.done = true;
        }
        r
    }

    /// Moves every source numbered above `rank` on to `key` (forward: its first entry at or
    /// after it; backward: at or before it) with [`Source::skip`], leaving the newer ones
    /// where they stand: what a scan does past a range tombstone of source `rank`, whose
    /// range ends at `key` (backward: starts after it), so that the older sources' entries
    /// under it are not read.
    pub(crate) fn skip_older(&mut self, rank: u32, key: &[u8]) -> Result<()> {
        for &i in &self.heap {
            if i > rank {
                let s = &mut self.sources[i as usize];
                if s.state() != State::Done {
                    s.skip(key, REV)?;
                }
            }
        }
        self.rebuild_heap();
        Ok(())
    }

    /// After sources moved: their heads again, the finished ones out, the heap rebuilt.
    fn rebuild_heap(&mut self) {
        let (sources, prefix) = (&self.sources, &mut self.prefix);
        self.heap.retain(|&i| {
            let s = &sources[i as usize];
            prefix[i as usize] = s.head();
            s.state() != State::Done
        });
        self.heapify();
    }

    fn seek_sources(&mut self, key: &[u8]) -> Result<()> {
        for &i in &self.heap {
            let s = &mut self.sources[i as usize];
            if s.state() == State::Ready {
                s.seek(key, REV)?;
            }
        }
        self.rebuild_heap();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::block::Entry;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// A source over sorted entries (descending with `rev`); pending at `bound` (a bound of
    /// its first key) until opened, when it seeks to the range. Counts its opens.
    struct VecSource {
        rev: bool,
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
        fn open(&mut self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<()> {
            self.opens += 1;
            self.bound = None;
            self.at = if self.rev {
                self.entries.partition_point(|(k, _)| match end {
                    Bound::Included(e) => k.as_slice() > e,
                    Bound::Excluded(e) => k.as_slice() >= e,
                    Bound::Unbounded => false,
                })
            } else {
                self.entries.partition_point(|(k, _)| match start {
                    Bound::Included(s) => k.as_slice() < s,
                    Bound::Excluded(s) => k.as_slice() <= s,
                    Bound::Unbounded => false,
                })
            };
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

    fn take_items<const REV: bool>(
        m: &mut Merge<VecSource, REV>,
        take: usize,
        seek: Option<(usize, u8)>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut got = Vec::new();
        while got.len() < take {
            if let Some((n, key)) = seek {
                if got.len() == n {
                    m.seek(&[key]).unwrap();
                }
            }
            match m.next_item() {
                Some(item) => {
                    let (k, v) = item.unwrap();
                    got.push((k.into(), v.into()));
                }
                None => break,
            }
        }
        got
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
            rev in any::<bool>(),
            seek in prop::option::of((0usize..10, 0u8..42)),
        ) {
            let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            for (entries, _) in sources.iter().rev() {
                for (k, v) in entries {
                    model.insert(vec![*k], v.map(|x| vec![x; x as usize]));
                }
            }
            let (start, end) = (bound(start), bound(end));
            let mut want: Vec<(Vec<u8>, Vec<u8>)> = if matches!((&start, &end), (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) if s > e || (s == e && !matches!((&start, &end), (Bound::Included(_), Bound::Included(_)))))
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
                    let mut entries = entries;
                    if rev {
                        entries.reverse();
                    }
                    // A bound at or before the first key (or none: opened at once).
                    let first = entries.first().map_or(0, |e| e.0[0]);
                    let bound = (*lazy > 0).then(|| match rev {
                        false => vec![first.saturating_sub(*lazy - 1)],
                        true => vec![first.saturating_add(*lazy - 1)],
                    });
                    let mut s = VecSource { rev, entries, at: 0, bound: None, opens: 0 };
                    let (from, to) = (start.as_ref().map(Vec::as_slice), end.as_ref().map(Vec::as_slice));
                    match bound {
                        // Ready from the start on, as the merge requires of sources not pending.
                        None => s.open(from, to).unwrap(),
                        Some(b) => s.bound = Some(b),
                    }
                    s
                })
                .collect();
            if rev {
                want.reverse();
            }
            // A seek after `n` items: what is left starts at the key (or where the merge was).
            if let Some((n, key)) = seek {
                let n = n.min(want.len());
                let key = vec![key];
                let (head, tail) = want.split_at(n);
                let tail: Vec<_> = tail.iter().filter(|(k, _)| (*k >= key) != rev || *k == key).cloned().collect();
                want = head.iter().cloned().chain(tail).collect();
            }
            let (got, all) = if rev {
                let mut m = Merge::<_, true>::new(vs, start, end);
                let got = take_items(&mut m, take, seek);
                let all = m.sources().iter().all(|s| s.opens <= 1 && s.bound.as_ref().is_none_or(|b| got.last().is_none_or(|(k, _)| b <= k)));
                (got, all)
            } else {
                let mut m = Merge::<_, false>::new(vs, start, end);
                let got = take_items(&mut m, take, seek);
                // A source still pending was never needed: its bound lies past what was returned.
                let all = m.sources().iter().all(|s| s.opens <= 1 && s.bound.as_ref().is_none_or(|b| got.last().is_none_or(|(k, _)| b >= k)));
                (got, all)
            };
            prop_assert_eq!(&got[..], &want[..got.len()]);
            if got.len() < take {
                prop_assert_eq!(got.len(), want.len());
            }
            prop_assert!(all, "a source was opened before the merge reached its bound");
        }
    }
}
