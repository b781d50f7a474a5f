//! What both the store's scans and its snapshots read through: the live memtable as a scan
//! reaches it, and the bounds of a range.

use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, OnceLock, RwLock};

use super::State;
use crate::memtable::Memtable;
use crate::scan::LiveMemtable;

/// The memtable a scan started on, while it may still take writes: read under the store's
/// state lock, or, once it was made immutable, from the slot the switch filled.
pub(super) struct LiveMem {
    pub(super) state: Arc<RwLock<State>>,
    /// Its tree's slot in the state.
    pub(super) slot: usize,
    pub(super) frozen: Arc<OnceLock<Arc<Memtable>>>,
}

impl LiveMemtable for LiveMem {
    fn frozen(&self) -> Option<Arc<Memtable>> {
        self.frozen.get().cloned()
    }

    fn with(&self, f: &mut dyn FnMut(&Memtable)) {
        let st = self.state.read().unwrap_or_else(|p| p.into_inner());
        // Under the lock: either the memtable is still the tree's `mem`, or the switch that
        // made it immutable filled the slot before letting the lock go.
        match self.frozen.get() {
            Some(m) => f(m),
            None => f(&st.tree(self.slot).mem),
        }
    }
}

/// True when no key lies between `start` and `end`.
pub(super) fn range_is_empty(start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
            s >= e
        }
        _ => false,
    }
}

/// A key range as owned bounds (what every scan takes).
pub(super) fn owned_range<K: AsRef<[u8]>>(
    range: impl RangeBounds<K>,
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let own = |b: Bound<&K>| b.map(|k| k.as_ref().to_vec());
    (own(range.start_bound()), own(range.end_bound()))
}

/// The range of the keys that start with `prefix`.
pub(super) fn prefix_range(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let end = prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded);
    (Bound::Included(prefix.to_vec()), end)
}

/// The smallest key greater than every key starting with `prefix`, if any (`None`: every
/// key from `prefix` on starts with it, e.g. for an empty or all-`0xff` prefix).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xff {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}
