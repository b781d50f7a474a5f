//! Run ids, sets of them, and the order a lookup probes them in.

use super::{LEVELS, MAX_RUNS};

/// A run's id: levels L1..L6 are ids 0..=5, L0 tables take ids 6..=31.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(pub(super) u8);

impl RunId {
    /// The id of level `n` (1..=6).
    pub fn level(n: u8) -> Option<RunId> {
        (1..=LEVELS).contains(&n).then(|| RunId(n - 1))
    }

    /// The id with index `i` (0..32).
    pub fn from_index(i: usize) -> Option<RunId> {
        (i < MAX_RUNS).then_some(RunId(i as u8))
    }

    /// The id's index, 0..32.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The level this id names (1..=6), or `None` for an L0 table's id.
    pub fn level_of(self) -> Option<u8> {
        (self.0 < LEVELS).then_some(self.0 + 1)
    }

    /// True for an L0 table's id.
    pub fn is_l0(self) -> bool {
        self.0 >= LEVELS
    }
}

/// A set of run ids, one bit each (what a query returns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RunSet(pub u32);

impl RunSet {
    /// No run.
    pub const EMPTY: RunSet = RunSet(0);

    /// The set holding `run` alone.
    pub fn of(run: RunId) -> RunSet {
        RunSet(1 << run.0)
    }

    /// True when no run is in the set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Number of runs in the set.
    pub fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// True when `run` is in the set.
    pub fn contains(self, run: RunId) -> bool {
        self.0 >> run.0 & 1 == 1
    }

    /// The set with `run` added.
    pub fn with(self, run: RunId) -> RunSet {
        RunSet(self.0 | 1 << run.0)
    }

    /// The set without `run`.
    pub fn without(self, run: RunId) -> RunSet {
        RunSet(self.0 & !(1 << run.0))
    }

    /// The runs in ascending id order.
    pub fn iter(self) -> impl Iterator<Item = RunId> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let i = bits.trailing_zeros();
                bits &= bits - 1;
                RunId(i as u8)
            })
        })
    }

    /// The runs in the order a lookup probes them: newest first by `order`; ids `order`
    /// does not rank come last, in id order.
    pub fn in_order(self, order: &RunOrder) -> InOrder<'_> {
        InOrder {
            bits: self.0,
            order,
        }
    }
}

impl std::ops::BitOr for RunSet {
    type Output = RunSet;
    fn bitor(self, o: RunSet) -> RunSet {
        RunSet(self.0 | o.0)
    }
}

/// The probe order of the live runs: L0 newest to oldest, then L1..L6 (see the module
/// documentation). A lookup's owner keeps the one that matches the tables it probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOrder {
    /// Rank of each id, 0 = probed first; [`RunOrder::UNRANKED`] for ids not in use.
    rank: [u8; MAX_RUNS],
}

impl RunOrder {
    /// The rank of an id that is not in use.
    pub const UNRANKED: u8 = u8::MAX;

    /// The order of L0 ids `l0` (newest first) followed by the levels.
    pub fn new(l0: &[RunId]) -> RunOrder {
        let mut rank = [Self::UNRANKED; MAX_RUNS];
        for (r, id) in l0.iter().enumerate() {
            rank[id.index()] = r as u8;
        }
        for n in 0..LEVELS {
            rank[n as usize] = (l0.len() + n as usize) as u8;
        }
        RunOrder { rank }
    }

    /// The rank of `run` (0 = first), or [`RunOrder::UNRANKED`].
    pub fn rank(&self, run: RunId) -> u8 {
        self.rank[run.index()]
    }
}

/// Iterator of [`RunSet::in_order`].
#[derive(Clone, Debug)]
pub struct InOrder<'a> {
    bits: u32,
    order: &'a RunOrder,
}

impl Iterator for InOrder<'_> {
    type Item = RunId;
    #[inline]
    fn next(&mut self) -> Option<RunId> {
        if self.bits == 0 {
            return None;
        }
        // Almost always one run (or two): pick the lowest rank among the few bits left.
        let mut best = self.bits.trailing_zeros();
        if self.bits & (self.bits - 1) != 0 {
            let mut rest = self.bits & (self.bits - 1);
            while rest != 0 {
                let i = rest.trailing_zeros();
                rest &= rest - 1;
                let (a, b) = (self.order.rank[i as usize], self.order.rank[best as usize]);
                if (a, i) < (b, best) {
                    best = i;
                }
            }
        }
        self.bits &= !(1 << best);
        Some(RunId(best as u8))
    }
}

/// The L0 ids in use, newest first (the writer's bookkeeping).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Runs {
    pub(super) l0: Vec<RunId>,
}
