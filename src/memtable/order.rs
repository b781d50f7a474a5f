//! Key order: the sorted runs of `(prefix, slot)` pairs, built when a scan or the seal asks
//! for them and merged so that their sizes fall geometrically (see the module docs of
//! `memtable`).

use std::cmp::Ordering;
use std::sync::Arc;

use super::sort::{sort_by_prefix, PAR_SORT_MIN};
use super::Memtable;
use crate::codec::prefix8;

/// The newest run is merged into the one before it while that one holds at most this many
/// times as many keys.
pub(crate) const RUN_RATIO: usize = 4;

/// `(prefix, slot number)` pairs sorted by key: the prefix inline decides most comparisons
/// without touching the slots or the arena.
pub(super) type Run = Arc<Vec<(u64, u32)>>;

/// The sorted runs of the first `covered` slots, largest (oldest) first; their keys are
/// disjoint.
#[derive(Debug, Default)]
pub(super) struct Order {
    covered: usize,
    runs: Arc<Vec<Run>>,
}

impl Memtable {
    pub(super) fn cmp_slots(&self, a: &(u64, u32), b: &(u64, u32)) -> Ordering {
        a.0.cmp(&b.0).then_with(|| {
            let (sa, sb) = (&self.slots[a.1 as usize], &self.slots[b.1 as usize]);
            self.key(sa).cmp(self.key(sb))
        })
    }

    /// Merges two runs into one (their keys are distinct, so the order never ties).
    fn merge(&self, a: &[(u64, u32)], b: &[(u64, u32)]) -> Vec<(u64, u32)> {
        let mut m = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if self.cmp_slots(&a[i], &b[j]) == Ordering::Less {
                m.push(a[i]);
                i += 1;
            } else {
                m.push(b[j]);
                j += 1;
            }
        }
        m.extend_from_slice(&a[i..]);
        m.extend_from_slice(&b[j..]);
        m
    }

    /// Sorts the slots added since the order was last extended into a new run, and merges
    /// runs as the module docs say.
    fn extend_order(&self, o: &mut Order) {
        let n = self.slots.len();
        if o.covered == n {
            return;
        }
        let pair = |i: usize| (self.slots[i].prefix, i as u32);
        let fresh: Vec<(u64, u32)> = if n - o.covered >= PAR_SORT_MIN {
            use rayon::prelude::*;
            (o.covered..n).into_par_iter().map(pair).collect()
        } else {
            (o.covered..n).map(pair).collect()
        };
        let fresh = sort_by_prefix(fresh, |a, b| self.cmp_slots(a, b));
        let mut runs: Vec<Run> = o.runs.as_ref().clone();
        runs.push(Arc::new(fresh));
        while let [.., a, b] = runs.as_slice() {
            if a.len() > RUN_RATIO * b.len() {
                break;
            }
            let merged = self.merge(a, b);
            runs.truncate(runs.len() - 2);
            runs.push(Arc::new(merged));
        }
        o.runs = Arc::new(runs);
        o.covered = n;
    }

    fn lock_order(&self) -> std::sync::MutexGuard<'_, Order> {
        self.order.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sorted runs of every key (extended for keys added since the last call).
    pub(super) fn runs(&self) -> Arc<Vec<Run>> {
        let mut o = self.lock_order();
        self.extend_order(&mut o);
        o.runs.clone()
    }

    /// Every key in one sorted run (the runs merged, newest first, and kept merged).
    pub(super) fn merged(&self) -> Run {
        let mut o = self.lock_order();
        self.extend_order(&mut o);
        if o.runs.len() > 1 {
            let mut runs = o.runs.iter().rev();
            let mut acc: Vec<(u64, u32)> = runs.next().map(|r| r.to_vec()).unwrap_or_default();
            for r in runs {
                acc = self.merge(r, &acc);
            }
            o.runs = Arc::new(vec![Arc::new(acc)]);
        }
        o.runs.first().cloned().unwrap_or_default()
    }

    /// Index of the first pair of `run` whose key is >= `bound` (> `bound` with `after`).
    pub(super) fn seek_run(&self, run: &[(u64, u32)], bound: &[u8], after: bool) -> usize {
        let p = prefix8(bound);
        run.partition_point(|&(q, s)| {
            q < p
                || (q == p && {
                    let k = self.key(&self.slots[s as usize]);
                    k < bound || (after && k == bound)
                })
        })
    }

    /// Number of sorted runs (for tests of the merge policy).
    #[cfg(test)]
    pub(super) fn run_count(&self) -> usize {
        self.lock_order().runs.len()
    }
}
