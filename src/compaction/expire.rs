//! What a compaction does to each entry it writes besides merging: an expired entry becomes
//! a tombstone (which the merge then drops where tombstones may be dropped: at the bottom),
//! and the store's [`CompactionFilter`] keeps, removes or changes every value.

use crate::compaction::plan::{plan_full, Shape, TableInfo, Task};
use crate::expiry::{expired_at, CompactionFilter, Decision};

/// A table's expiry facts (its meta's, format.md "Table", version 5), for planning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Expiring {
    /// Key and value bytes of the entries with an expiry.
    pub bytes: u64,
    /// The earliest and the latest `expires_at` among them (0, 0: none).
    pub earliest: u64,
    pub latest: u64,
}

impl Expiring {
    /// Whether an entry of the table has expired by `now` (surely, not an estimate).
    pub(crate) fn any_expired(&self, now: u64) -> bool {
        expired_at(self.earliest, now)
    }

    /// An estimate of the bytes expired by `now`: the expiring bytes, times the share of the
    /// span from the earliest to the latest expiry that `now` has passed (expiries taken as
    /// spread evenly over it); 0 before the earliest, all of them from the latest on.
    pub(crate) fn expired_bytes(&self, now: u64) -> u64 {
        if !self.any_expired(now) {
            return 0;
        }
        if now >= self.latest {
            return self.bytes;
        }
        let span = (self.latest - self.earliest).max(1) as f64;
        let passed = (now - self.earliest) as f64;
        (self.bytes as f64 * (passed / span)) as u64
    }
}

/// A table is rewritten for its expired entries once about this share of its key and value
/// bytes has expired ([`plan_expired`]).
pub(crate) const EXPIRED_SHARE: f64 = 0.25;

/// A compaction for expired bytes, when no other is due (RocksDB's TTL compactions): the
/// table of a level ≥ 1 with the largest estimated share of expired bytes, once it reaches
/// [`EXPIRED_SHARE`] of its bytes (measured as the table's file bytes), rewritten into its
/// own level: expired entries become tombstones, or go where nothing lies below them. The
/// table written has only entries that had not expired, so its earliest expiry lies after
/// `now`: the same table is not picked again until the clock passes that.
pub(crate) fn plan_expired<T: TableInfo>(levels: &[&[T]], now: u64) -> Option<Task> {
    let mut best: Option<(f64, usize, &T)> = None;
    for (l, level) in levels.iter().enumerate().skip(1) {
        for t in level.iter() {
            let e = t.expiring();
            let share = e.expired_bytes(now) as f64 / t.bytes().max(1) as f64;
            if share >= EXPIRED_SHARE && best.is_none_or(|(b, _, _)| share > b) {
                best = Some((share, l, t));
            }
        }
    }
    let (_, level, t) = best?;
    Some(Task::Merge {
        from: level,
        inputs: vec![t.number()],
        output: level,
        cursor: None,
    })
}

/// A full compaction ([`plan_full`]) that also rewrites tables a move or nothing would have
/// left as they are, when `force` (a compaction filter is set: every value must pass it) or
/// when an entry has expired by `now`: the one sorted run is merged into its own level, and
/// one flushed table into L1.
pub(crate) fn plan_full_at<T: TableInfo>(
    levels: &[&[T]],
    shape: &Shape,
    now: u64,
    force: bool,
) -> Option<Task> {
    let all = || levels.iter().flat_map(|l| l.iter());
    let must = force || all().any(|t| t.expiring().any_expired(now));
    match plan_full(levels, shape) {
        Some(Task::Move { table, .. }) if must => Some(Task::Merge {
            from: 0,
            inputs: vec![table],
            output: 1,
            cursor: None,
        }),
        None if must => {
            let level = (1..levels.len()).find(|&l| !levels[l].is_empty())?;
            Some(Task::Merge {
                from: level,
                inputs: all().map(|t| t.number()).collect(),
                output: level,
                cursor: None,
            })
        }
        t => t,
    }
}

/// The rewrite rules of one compaction.
#[derive(Clone, Copy, Default)]
pub(crate) struct Rewrite<'a> {
    /// The time expiry is judged at (Unix milliseconds; 0: nothing is expired).
    pub now: u64,
    /// The store's compaction filter, if any.
    pub filter: Option<&'a dyn CompactionFilter>,
    /// The level the output is written to (handed to the filter).
    pub level: usize,
    /// The output stores values tagged with their expiries (table version 5): true when an
    /// input table holds an expiring entry.
    pub tagged: bool,
}

/// What becomes of an entry.
pub(crate) enum Out {
    /// Written as it came.
    Same,
    /// Written as a tombstone (or dropped, where the merge drops tombstones).
    Tombstone,
    /// Written with this value (and its expiry).
    Value(Vec<u8>),
}

impl Rewrite<'_> {
    /// Decides about the entry `key` = `value` expiring at `exp`.
    #[inline]
    pub(crate) fn apply(&self, key: &[u8], value: Option<&[u8]>, exp: u64) -> Out {
        let Some(v) = value else {
            return Out::Same;
        };
        if expired_at(exp, self.now) {
            return Out::Tombstone;
        }
        match self.filter.map(|f| f.filter(self.level, key, v)) {
            None | Some(Decision::Keep) => Out::Same,
            Some(Decision::Remove) => Out::Tombstone,
            Some(Decision::Change(nv)) => Out::Value(nv),
        }
    }
}
