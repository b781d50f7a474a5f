//! What a compaction does to each entry it writes besides merging: an expired entry becomes
//! a tombstone (which the merge then drops where tombstones may be dropped: at the bottom),
//! and the tree's [`CompactionFilter`] (its keyspace's) keeps, removes or changes every
//! value.

use crate::compaction::plan::{plan_full, Shape, TableInfo, Task};
use crate::expiry::{expired_at, CompactionFilter, Decision};

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
    /// The compaction filter of the tree compacted (its keyspace's), if any.
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::compaction::run::{merge, Output, Source};
    use crate::io::RealFs;
    use crate::table::files::TableSpec;
    use crate::table::{Compression, OwnedRun, Table, TableCounters, TableCursor};

    /// Removes keys ending in 0 or 5, appends "!" to those ending in 1, keeps the rest.
    #[derive(Debug)]
    struct Rules;

    impl CompactionFilter for Rules {
        fn name(&self) -> &str {
            "rules"
        }
        fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> Decision {
            assert_eq!(level, 3, "the filter is told the output level");
            match key.last() {
                Some(b'0' | b'5') => Decision::Remove,
                Some(b'1') => Decision::Change([value, b"!"].concat()),
                _ => Decision::Keep,
            }
        }
    }

    /// Key, value (or tombstone), expiry.
    type Ent = (Vec<u8>, Option<Vec<u8>>, u64);

    /// Writes a version 5 table of `entries` (key, value or tombstone, expiry).
    fn table(dir: &std::path::Path, n: u64, entries: &[Ent]) -> Arc<Table> {
        let mut run = OwnedRun::default();
        run.tagged = true;
        for (k, v, e) in entries {
            run.push(k, v.as_deref(), *e);
        }
        let path = crate::filename::table_path(dir, n);
        crate::table::write_table(&RealFs, &path, &run, Compression::Lz4).unwrap();
        Arc::new(Table::open(&path, false).unwrap())
    }

    /// A merge of a newer and an older table with expiring entries and the filter, into a
    /// level with data under it (tombstones kept) and into the bottom (dropped), against a
    /// model: expired values and removed ones become tombstones or vanish, changed ones
    /// change, kept ones keep their expiry.
    #[test]
    fn expiry_and_the_filter_over_levels_against_a_model() {
        let dir = tempfile::tempdir().unwrap();
        let now = 1_000;
        let key = |i: u32| format!("k{i:04}").into_bytes();
        // Older: every key, half expiring (some already expired); newer: every third key,
        // some deleted.
        let older: Vec<_> = (0..600u32)
            .map(|i| {
                (
                    key(i),
                    Some(format!("old{i}").into_bytes()),
                    [0, 500, 2_000][i as usize % 3],
                )
            })
            .collect();
        let newer: Vec<_> = (0..600u32)
            .step_by(3)
            .map(|i| {
                let v = (i % 4 != 0).then(|| format!("new{i}").into_bytes());
                (
                    key(i),
                    v,
                    if i % 2 == 0 {
                        0
                    } else {
                        900 + u64::from(i % 7) * 50
                    },
                )
            })
            .collect();
        let tables = [table(dir.path(), 1, &newer), table(dir.path(), 2, &older)];
        // The model: newest version, then expiry (tombstone), then the filter.
        let mut newest: BTreeMap<Vec<u8>, (Option<Vec<u8>>, u64)> = BTreeMap::new();
        for (k, v, e) in older.iter().chain(&newer) {
            newest.insert(k.clone(), (v.clone(), *e));
        }
        for bottom in [false, true] {
            let out_dir = dir.path().join(format!("out{bottom}"));
            std::fs::create_dir(&out_dir).unwrap();
            let next = std::sync::atomic::AtomicU64::new(10);
            let alloc = || Ok(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
            let fs: Arc<dyn crate::io::Fs> = Arc::new(RealFs);
            let out = Output {
                spec: TableSpec {
                    fs: &fs,
                    dir: &out_dir,
                    level: 3,
                    filter: (crate::filter::FilterKind::None, 0.01),
                    compression: Compression::None,
                    range_bits: 0.0,
                    range_clock: None,
                    alloc: &alloc,
                    key_hashes: false,
                },
                table_bytes: u64::MAX,
                ranges: Default::default(),
                expiry: Rewrite {
                    now,
                    filter: Some(&Rules),
                    level: 3,
                    tagged: true,
                },
            };
            let counters = Arc::new(TableCounters::default());
            let sources: Vec<Source> = tables
                .iter()
                .map(|t| Source::new(vec![t.clone()], counters.clone()).unwrap())
                .collect();
            let result = merge(sources, &|_: &[u8]| bottom, &out, None).unwrap();
            let path = crate::filename::table_path(&out_dir, result.tables[0].record.number);
            let t = Arc::new(Table::open(&path, false).unwrap());
            let mut got = BTreeMap::new();
            let mut c = TableCursor::new(t.clone(), counters.clone()).unwrap();
            while c.valid() {
                got.insert(
                    c.key().to_vec(),
                    (c.value().map(<[u8]>::to_vec), c.expires()),
                );
                c.advance().unwrap();
            }
            let want: BTreeMap<_, _> = newest
                .iter()
                .filter_map(|(k, (v, e))| {
                    let v = v.as_ref().filter(|_| !expired_at(*e, now));
                    let v = v.and_then(|v| match Rules.filter(3, k, v) {
                        Decision::Keep => Some(v.clone()),
                        Decision::Change(n) => Some(n),
                        _ => None,
                    });
                    match v {
                        Some(v) => Some((k.clone(), (Some(v), *e))),
                        None if bottom => None,
                        None => Some((k.clone(), (None, 0))),
                    }
                })
                .collect();
            assert_eq!(got.len(), want.len(), "bottom {bottom}");
            assert!(
                got == want,
                "bottom {bottom}: the output differs from the model"
            );
            assert_eq!(
                t.meta.expiring,
                want.values().filter(|(_, e)| *e != 0).count() as u64
            );
            assert!(
                t.meta.earliest_expiry > now,
                "only entries that had not expired are left"
            );
        }
    }
}
