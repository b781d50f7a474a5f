//! Compaction planning: a pure function of the table set and the options, no I/O.
//!
//! Policy (leveled, as LevelDB):
//! - **Scores.** L0 scores its table count ÷ the L0 trigger, or, from half the trigger on, its
//!   bytes ÷ the bytes of the L1 tables it overlaps, if higher (a merge that writes at most
//!   two bytes per L0 byte is worth running early); a level n ≥ 1 scores its bytes ÷ its
//!   target, `l1_bytes × ratio^(n−1)`. The last level never scores (it has no level
//!   below). The highest score ≥ 1 is compacted; on a tie the upper level goes first.
//! - **L0 → L1** takes every L0 table and the L1 tables their key range overlaps (taking all
//!   of L0 is what keeps "newest wins" true without sequence numbers; see `version/mod.rs`).
//! - **Ln → Ln+1** takes one Ln table, the first whose smallest key lies past the level's
//!   cursor (the largest key of the table its previous compaction took; round robin, back
//!   to the first table at the end), and the Ln+1 tables it overlaps.
//! - **L0 merge** ([`plan_l0_merge`]): when nothing else is due, L0 holds half the trigger's
//!   tables and they hold at most `l0_merge_bytes` together, they are merged into one L0
//!   table in their place (RocksDB's intra-L0 compaction): every L0 table costs every scan a
//!   block and every absent lookup a probe, and small L0 tables (explicit flushes, a load's
//!   tail) would otherwise wait for the trigger, or for a merge into a much larger L1.
//! - **Idle L0 drain** ([`plan_l0_drain`]): the same L0 → L1 task below the trigger, which
//!   the compaction thread runs when writes have paused while lookups probe L0.
//! - **Trivial move.** One input table and nothing overlapping below: the table changes
//!   level without being rewritten.
//! - **Tombstones** are dropped by the merge only where no level below the output holds a
//!   table whose key range contains the key ([`tombstone_droppable`]).
//!
//! A finished task changes the levels through [`Task::edit`] and [`apply`], pure functions
//! too: the engine installs every new table set with them (`Version::apply`), and the
//! simulation test below drives the planner with the same code.

use crate::manifest::MAX_LEVELS;

/// What the planner needs to know of a table.
pub(crate) trait TableInfo {
    /// File number.
    fn number(&self) -> u64;
    /// File size.
    fn bytes(&self) -> u64;
    /// Tombstones held.
    fn tombstones(&self) -> u64;
    /// Smallest key.
    fn min_key(&self) -> &[u8];
    /// Largest key.
    fn max_key(&self) -> &[u8];
    /// Its entries with an expiry (`compaction/expire.rs`).
    fn expiring(&self) -> crate::expiry::Expiring {
        crate::expiry::Expiring::default()
    }
}

/// The shape of the level tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// L0 tables that trigger an L0 compaction (`None`: no automatic compaction).
    pub l0_trigger: Option<usize>,
    /// Target size of L1 in bytes.
    pub l1_bytes: u64,
    /// Each level's target is this many times the one above.
    pub ratio: u64,
    /// L0 tables holding at most this many bytes together are merged into one L0 table
    /// once L0 holds half the trigger's tables and nothing else is due ([`plan_l0_merge`];
    /// 0: never).
    pub l0_merge_bytes: u64,
}

impl Shape {
    /// Target size of level `n ≥ 1`.
    pub(crate) fn target(&self, n: usize) -> u64 {
        let mut t = self.l1_bytes.max(1);
        for _ in 1..n {
            t = t.saturating_mul(self.ratio.max(2));
        }
        t
    }
}

/// One unit of compaction work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Task {
    /// Move table `table` from level `from` to `from + 1` without rewriting it.
    Move {
        /// The table's number.
        table: u64,
        /// Its level now.
        from: usize,
        /// The cursor to store for `from` afterwards, if it changes.
        cursor: Option<Vec<u8>>,
    },
    /// Merge the tables `inputs` into new tables at level `output`.
    Merge {
        /// Level the inputs are taken from (the output level's upper neighbour; for a full
        /// compaction, the lowest level any input comes from).
        from: usize,
        /// Input table numbers, from any levels.
        inputs: Vec<u64>,
        /// Level of the output tables.
        output: usize,
        /// The cursor to store for `from` afterwards, if it changes.
        cursor: Option<Vec<u8>>,
    },
}

impl Task {
    /// The change that installs this task's result (for [`apply`]): its inputs leave (a
    /// move's table, a merge's inputs from every level) and `outputs` join at its
    /// [`output_level`](Self::output_level). A move's one output is its table at the next
    /// level, unchanged; a merge's are the tables it wrote.
    pub(crate) fn edit<T>(&self, outputs: Vec<T>) -> Edit<T> {
        let remove = match self {
            Task::Move { table, .. } => vec![*table],
            Task::Merge { inputs, .. } => inputs.clone(),
        };
        let level = self.output_level();
        Edit {
            remove,
            add: outputs.into_iter().map(|t| (level, t)).collect(),
            replace: Vec::new(),
        }
    }

    /// The level the task's output goes to.
    pub(crate) fn output_level(&self) -> usize {
        match self {
            Task::Move { from, .. } => from + 1,
            Task::Merge { output, .. } => *output,
        }
    }

    /// The round-robin cursor this task leaves: (level, key), if it changes one.
    pub(crate) fn cursor(&self) -> Option<(usize, Vec<u8>)> {
        match self {
            Task::Move { from, cursor, .. } | Task::Merge { from, cursor, .. } => {
                cursor.clone().map(|c| (*from, c))
            }
        }
    }
}

/// A change to the levels: tables that leave (by number), tables that join (each with its
/// level), and tables that take the place of the live table with the same number (a new
/// filter for the same data).
#[derive(Clone, Debug)]
pub(crate) struct Edit<T> {
    /// Table numbers that leave.
    pub remove: Vec<u64>,
    /// Tables that join, with their levels.
    pub add: Vec<(usize, T)>,
    /// Tables that replace the live table of the same number, where it is.
    pub replace: Vec<T>,
}

impl<T> Default for Edit<T> {
    fn default() -> Self {
        Edit {
            remove: Vec::new(),
            add: Vec::new(),
            replace: Vec::new(),
        }
    }
}

/// `levels` with `edit` applied: the one place the levels change (a flush, a finished
/// compaction task, a refilter). Removals first, then replacements, then additions, so a
/// trivial move is the table's removal and its addition at the next level. Tables added to
/// L0 go, in the order given, where the first L0 table the edit removes was (an L0 merge's
/// output takes its inputs' place, behind the tables flushed while it ran), or in front of
/// L0 when the edit removes none (a flush: they are the newest); a table added deeper goes
/// into its level in key order. A level past the last is the last.
pub(crate) fn apply<T: TableInfo + Clone>(levels: &[&[T]], edit: &Edit<T>) -> Vec<Vec<T>> {
    // Every L0 table before the first removed one stays: the index is the place in the
    // L0 that is left.
    let l0_at = levels.first().map_or(0, |l0| {
        l0.iter()
            .position(|t| edit.remove.contains(&t.number()))
            .unwrap_or(0)
    });
    let mut out: Vec<Vec<T>> = levels
        .iter()
        .map(|l| {
            l.iter()
                .filter(|t| !edit.remove.contains(&t.number()))
                .map(|t| {
                    edit.replace
                        .iter()
                        .find(|r| r.number() == t.number())
                        .unwrap_or(t)
                        .clone()
                })
                .collect()
        })
        .collect();
    let mut l0_new: Vec<T> = Vec::new();
    for (level, t) in &edit.add {
        match (*level).min(MAX_LEVELS - 1) {
            0 => l0_new.push(t.clone()),
            l => {
                if out.len() <= l {
                    out.resize_with(l + 1, Vec::new);
                }
                out[l].push(t.clone());
            }
        }
    }
    if !l0_new.is_empty() {
        if out.is_empty() {
            out.push(Vec::new());
        }
        let at = l0_at.min(out[0].len());
        out[0].splice(at..at, l0_new);
    }
    for l in out.iter_mut().skip(1) {
        l.sort_by(|a, b| a.min_key().cmp(b.min_key()));
    }
    out
}

/// Whether `[a_min, a_max]` and `[b_min, b_max]` share a key.
fn overlaps(a_min: &[u8], a_max: &[u8], b_min: &[u8], b_max: &[u8]) -> bool {
    a_min <= b_max && b_min <= a_max
}

/// The tables of a sorted level that overlap `[min, max]`.
fn overlapping<'a, T: TableInfo>(level: &'a [T], min: &[u8], max: &[u8]) -> Vec<&'a T> {
    level
        .iter()
        .filter(|t| overlaps(t.min_key(), t.max_key(), min, max))
        .collect()
}

/// The compaction score of each level (`levels[0]` is L0); the last level scores 0.
pub(crate) fn scores<T: TableInfo>(levels: &[&[T]], shape: &Shape) -> Vec<f64> {
    let last = levels.len().min(MAX_LEVELS).saturating_sub(1);
    (0..levels.len())
        .map(|n| {
            if n >= last {
                0.0
            } else if n == 0 {
                shape.l0_trigger.map_or(0.0, |t| {
                    let by_count = levels[0].len() as f64 / t.max(1) as f64;
                    by_count.max(l0_cost_score(levels, t))
                })
            } else {
                let bytes: u64 = levels[n].iter().map(|t| t.bytes()).sum();
                bytes as f64 / shape.target(n) as f64
            }
        })
        .collect()
}

/// L0's bytes ÷ the bytes of the L1 tables their key range overlaps, once L0 holds half
/// the trigger's tables (at least two; else 0): at least 1 when merging L0 into L1 writes at
/// most two bytes per L0 byte. At the trigger, with L1 near its target, such a merge costs
/// more than that; so while L1 is small L0 is merged early, at no more cost per byte, and
/// absent lookups probe fewer L0 tables. Half the trigger bounds the number of L0
/// compactions at twice what the trigger alone would run.
fn l0_cost_score<T: TableInfo>(levels: &[&[T]], trigger: usize) -> f64 {
    let l0 = levels[0];
    if l0.len() < (trigger / 2).max(2) {
        return 0.0;
    }
    let picked: Vec<&T> = l0.iter().collect();
    let Some((_, below)) = max_and_below(levels, 0, &picked) else {
        return 0.0;
    };
    let l0_bytes: u64 = l0.iter().map(|t| t.bytes()).sum();
    let below: u64 = below.iter().map(|t| t.bytes()).sum();
    (l0_bytes as f64 / below.max(1) as f64).min(1e6)
}

/// The next compaction, if any level scores ≥ 1. `cursors[n]` is level n's round-robin
/// cursor (`None`: start at its first table). Automatic compaction is off when the shape has
/// no L0 trigger.
pub(crate) fn plan<T: TableInfo>(
    levels: &[&[T]],
    cursors: &[Option<Vec<u8>>],
    shape: &Shape,
) -> Option<Task> {
    shape.l0_trigger?;
    let scores = scores(levels, shape);
    let (level, &best) =
        scores
            .iter()
            .enumerate()
            .fold(None, |acc: Option<(usize, &f64)>, (i, s)| match acc {
                Some((_, b)) if *b >= *s => acc,
                _ => Some((i, s)),
            })?;
    if best < 1.0 {
        return plan_l0_merge(levels, shape);
    }
    let picked: Vec<&T> = if level == 0 {
        levels[0].iter().collect()
    } else {
        let cursor = cursors.get(level).cloned().flatten();
        let t = cursor
            .and_then(|c| levels[level].iter().find(|t| t.min_key() > c.as_slice()))
            .or_else(|| levels[level].first())?;
        vec![t]
    };
    task_from(levels, level, &picked)
}

/// The merge of every L0 table into one L0 table, when L0 holds at least half the
/// trigger's tables (at least two) and they hold at most `shape.l0_merge_bytes` together;
/// `plan` asks for it when no level scores 1. The output takes its inputs' place in L0:
/// tables flushed while it runs are newer and stay in front of it, so the newest version
/// still wins (see [`apply`]). Its cost is bounded: each such merge writes at most
/// `l0_merge_bytes`, and only after at least half the trigger's tables less one were
/// flushed since the last (its output is one table); L0 tables larger than that in total
/// wait for the L0 → L1 compaction as before. Merging into L1 instead costs one more
/// rewrite of the L1 bytes L0 overlaps and spares L0's bytes one more write: cheaper only
/// when L1 overlaps at most L0's bytes, where `l0_cost_score` already sends L0 into L1.
pub(crate) fn plan_l0_merge<T: TableInfo>(levels: &[&[T]], shape: &Shape) -> Option<Task> {
    let trigger = shape.l0_trigger?;
    let l0 = *levels.first()?;
    if l0.len() < (trigger / 2).max(2) {
        return None;
    }
    let bytes: u64 = l0.iter().map(|t| t.bytes()).sum();
    if bytes > shape.l0_merge_bytes {
        return None;
    }
    Some(Task::Merge {
        from: 0,
        inputs: l0.iter().map(|t| t.number()).collect(),
        output: 0,
        cursor: None,
    })
}

/// The L0 → L1 compaction whatever L0's size, or `None` when L0 is empty or automatic
/// compaction is off: what the compaction thread runs when writes have paused while lookups
/// keep probing L0 tables (see `docs/engine.md`, "Idle L0 drain"). Each L0 table costs every
/// absent lookup a filter probe; after this an absent lookup probes one table per level.
pub(crate) fn plan_l0_drain<T: TableInfo>(levels: &[&[T]], shape: &Shape) -> Option<Task> {
    shape.l0_trigger?;
    let picked: Vec<&T> = levels.first()?.iter().collect();
    task_from(levels, 0, &picked)
}

/// The largest key of `picked` (tables of `level`), and the tables of `level + 1` their key
/// range overlaps; `None` when `picked` is empty.
fn max_and_below<'a, T: TableInfo>(
    levels: &[&'a [T]],
    level: usize,
    picked: &[&'a T],
) -> Option<(&'a [u8], Vec<&'a T>)> {
    let next = levels.get(level + 1).copied().unwrap_or(&[]);
    let min = picked.iter().map(|t| t.min_key()).min()?;
    let max = picked.iter().map(|t| t.max_key()).max()?;
    Some((max, overlapping(next, min, max)))
}

/// The task that compacts `picked` (tables of `level`) into `level + 1`: a trivial move for
/// one table that overlaps nothing below, else a merge with the overlapped tables below.
fn task_from<T: TableInfo>(levels: &[&[T]], level: usize, picked: &[&T]) -> Option<Task> {
    let (max, below) = max_and_below(levels, level, picked)?;
    let cursor = (level > 0).then(|| max.to_vec());
    if picked.len() == 1 && below.is_empty() {
        return Some(Task::Move {
            table: picked[0].number(),
            from: level,
            cursor,
        });
    }
    Some(Task::Merge {
        from: level,
        inputs: picked
            .iter()
            .chain(below.iter())
            .map(|t| t.number())
            .collect(),
        output: level + 1,
        cursor,
    })
}

/// A full compaction: every table merged into one sorted run, or `None` when the tables
/// already are one sorted run without tombstones. The run goes to the deepest level that
/// holds tables, or deeper, to the first level whose target holds all the data, so that it
/// need not be pushed further down at once.
pub(crate) fn plan_full<T: TableInfo>(levels: &[&[T]], shape: &Shape) -> Option<Task> {
    let nonempty: Vec<usize> = (0..levels.len())
        .filter(|&l| !levels[l].is_empty())
        .collect();
    let (&first, &deepest) = (nonempty.first()?, nonempty.last()?);
    let tombstones: u64 = levels
        .iter()
        .flat_map(|l| l.iter())
        .map(|t| t.tombstones())
        .sum();
    if nonempty.len() == 1 && first >= 1 && tombstones == 0 {
        return None;
    }
    if nonempty == [0] && levels[0].len() == 1 && tombstones == 0 && levels.len() > 1 {
        // One flushed table: move it down, nothing to merge.
        return Some(Task::Move {
            table: levels[0][0].number(),
            from: 0,
            cursor: None,
        });
    }
    let total: u64 = levels
        .iter()
        .flat_map(|l| l.iter())
        .map(|t| t.bytes())
        .sum();
    let last = levels.len().min(MAX_LEVELS) - 1;
    let fits = (1..=last)
        .find(|&n| shape.target(n) >= total)
        .unwrap_or(last);
    Some(Task::Merge {
        from: first,
        inputs: levels
            .iter()
            .flat_map(|l| l.iter())
            .map(|t| t.number())
            .collect(),
        output: deepest.max(fits).clamp(1, last),
        cursor: None,
    })
}

/// Whether a merge writing level `output` may drop a tombstone for `key`: no table below
/// `output` can hold an older version of it.
pub(crate) fn tombstone_droppable<T: TableInfo>(
    levels: &[&[T]],
    output: usize,
    key: &[u8],
) -> bool {
    levels
        .iter()
        .skip(output + 1)
        .all(|l| !l.iter().any(|t| t.min_key() <= key && key <= t.max_key()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug)]
    struct T {
        n: u64,
        bytes: u64,
        tomb: u64,
        min: Vec<u8>,
        max: Vec<u8>,
        /// The simulation's sampled keys (empty elsewhere).
        keys: Vec<u64>,
        /// The simulation's first and last flush whose samples it holds.
        flushes: (u64, u64),
    }

    impl TableInfo for T {
        fn number(&self) -> u64 {
            self.n
        }
        fn bytes(&self) -> u64 {
            self.bytes
        }
        fn tombstones(&self) -> u64 {
            self.tomb
        }
        fn min_key(&self) -> &[u8] {
            &self.min
        }
        fn max_key(&self) -> &[u8] {
            &self.max
        }
    }

    fn t(n: u64, bytes: u64, min: &str, max: &str) -> T {
        T {
            n,
            bytes,
            tomb: 0,
            min: min.as_bytes().to_vec(),
            max: max.as_bytes().to_vec(),
            keys: Vec::new(),
            flushes: (0, 0),
        }
    }

    const SHAPE: Shape = Shape {
        l0_trigger: Some(4),
        l1_bytes: 1000,
        ratio: 10,
        l0_merge_bytes: 0,
    };

    fn levels(v: &[Vec<T>]) -> Vec<&[T]> {
        let mut out: Vec<&[T]> = v.iter().map(Vec::as_slice).collect();
        out.resize(MAX_LEVELS, &[]);
        out
    }

    #[test]
    fn targets_grow_by_the_ratio() {
        assert_eq!(SHAPE.target(1), 1000);
        assert_eq!(SHAPE.target(2), 10_000);
        assert_eq!(SHAPE.target(4), 1_000_000);
        let huge = Shape {
            l1_bytes: u64::MAX / 2,
            ..SHAPE
        };
        assert_eq!(huge.target(6), u64::MAX, "saturates instead of overflowing");
    }

    #[test]
    fn small_l0_tables_merge_into_one_l0_table_when_nothing_else_is_due() {
        let shape = Shape {
            l0_trigger: Some(8),
            l0_merge_bytes: 400,
            ..SHAPE
        };
        let l1 = vec![t(10, 900, "a", "z")];
        let l0 = |n: u64, bytes: u64| (0..n).map(|i| t(i + 1, bytes, "b", "y")).collect();
        let merge = |n| Task::Merge {
            from: 0,
            inputs: (1..=n).collect(),
            output: 0,
            cursor: None,
        };
        // Half the trigger's tables, 400 bytes together: merged within L0.
        assert_eq!(
            plan(&levels(&[l0(4, 100), l1.clone()]), &[], &shape),
            Some(merge(4))
        );
        assert_eq!(
            plan(&levels(&[l0(5, 80), l1.clone()]), &[], &shape),
            Some(merge(5))
        );
        // Fewer tables, or more bytes: nothing.
        assert_eq!(plan(&levels(&[l0(3, 100), l1.clone()]), &[], &shape), None);
        assert_eq!(plan(&levels(&[l0(4, 101), l1.clone()]), &[], &shape), None);
        // L0 → L1 due (by its bytes against L1's, or at the trigger) goes first.
        let small_l1 = vec![t(10, 300, "a", "z")];
        assert!(matches!(
            plan(&levels(&[l0(4, 100), small_l1]), &[], &shape),
            Some(Task::Merge { output: 1, .. })
        ));
        let at_trigger = Shape {
            l0_merge_bytes: u64::MAX,
            ..shape
        };
        assert!(matches!(
            plan(&levels(&[l0(8, 10), l1.clone()]), &[], &at_trigger),
            Some(Task::Merge { output: 1, .. })
        ));
        // Off with 0 bytes, and with automatic compaction off.
        let zero = Shape {
            l0_merge_bytes: 0,
            ..shape
        };
        assert_eq!(plan(&levels(&[l0(4, 100), l1.clone()]), &[], &zero), None);
        let off = Shape {
            l0_trigger: None,
            ..shape
        };
        assert_eq!(plan_l0_merge(&levels(&[l0(4, 100), l1]), &off), None);
    }

    #[test]
    fn an_l0_merge_output_takes_its_inputs_place_behind_newer_flushes() {
        // Planned on L0 = [3, 2, 1]; tables 5 and 4 were flushed while it ran.
        let lv = [
            vec![
                t(5, 10, "a", "z"),
                t(4, 10, "a", "z"),
                t(3, 10, "a", "z"),
                t(2, 10, "a", "z"),
                t(1, 10, "a", "z"),
            ],
            vec![t(10, 900, "a", "z")],
        ];
        let task = Task::Merge {
            from: 0,
            inputs: vec![3, 2, 1],
            output: 0,
            cursor: None,
        };
        assert_eq!(task.output_level(), 0);
        let out = apply(&levels(&lv), &task.edit(vec![t(6, 30, "a", "z")]));
        assert_eq!(numbers(&out)[..2], [vec![5, 4, 6], vec![10]]);
    }

    #[test]
    fn l0_compacts_at_its_trigger_with_the_l1_tables_it_overlaps() {
        let l1 = vec![
            t(10, 100, "a", "c"),
            t(11, 100, "d", "f"),
            t(12, 100, "x", "z"),
        ];
        let mut l0 = vec![t(3, 50, "b", "e"), t(2, 50, "c", "d"), t(1, 50, "d", "e")];
        assert_eq!(
            plan(&levels(&[l0.clone(), l1.clone()]), &[], &SHAPE),
            None,
            "3 < 4"
        );
        l0.insert(0, t(4, 50, "e", "e"));
        let task = plan(&levels(&[l0, l1]), &[], &SHAPE).unwrap();
        assert_eq!(
            task,
            Task::Merge {
                from: 0,
                inputs: vec![4, 3, 2, 1, 10, 11],
                output: 1,
                cursor: None,
            },
            "every L0 table, newest first, then the overlapped L1 tables (not x..z)"
        );
    }

    #[test]
    fn l0_compacts_below_its_trigger_when_l1_is_no_bigger() {
        let l1 = vec![
            t(10, 60, "a", "c"),
            t(11, 40, "d", "f"),
            t(12, 500, "x", "z"),
        ];
        let l0 = vec![t(3, 50, "b", "e"), t(2, 40, "c", "d")];
        assert_eq!(
            plan(&levels(&[l0.clone(), l1.clone()]), &[], &SHAPE),
            None,
            "90 bytes of L0 over 100 overlapped in L1"
        );
        let mut bigger = l0.clone();
        bigger[0].bytes = 60;
        assert_eq!(
            plan(&levels(&[bigger, l1.clone()]), &[], &SHAPE),
            Some(Task::Merge {
                from: 0,
                inputs: vec![3, 2, 10, 11],
                output: 1,
                cursor: None,
            }),
            "100 bytes of L0 over 100: two bytes written per L0 byte"
        );
        let one = vec![t(3, 500, "b", "e")];
        assert_eq!(
            plan(&levels(&[one, vec![]]), &[], &SHAPE),
            None,
            "one table waits"
        );
        let eight = Shape {
            l0_trigger: Some(8),
            ..SHAPE
        };
        let three: Vec<T> = (0..3).map(|i| t(i, 500, "b", "e")).collect();
        assert_eq!(
            plan(&levels(&[three.clone(), vec![]]), &[], &eight),
            None,
            "fewer than half the trigger's tables wait"
        );
        let four = [three, vec![t(3, 500, "b", "e")]].concat();
        assert!(plan(&levels(&[four, vec![]]), &[], &eight).is_some());
        assert!(
            scores(&levels(&[l0, vec![]]), &SHAPE)[0] >= 1.0,
            "an empty L1 costs nothing to merge into"
        );
    }

    #[test]
    fn an_l0_drain_takes_every_l0_table_below_the_trigger() {
        let l1 = vec![t(10, 200, "a", "c"), t(12, 100, "x", "z")];
        let l0 = vec![t(3, 50, "b", "e"), t(2, 50, "c", "d")];
        assert_eq!(plan(&levels(&[l0.clone(), l1.clone()]), &[], &SHAPE), None);
        assert_eq!(
            plan_l0_drain(&levels(&[l0, l1.clone()]), &SHAPE),
            Some(Task::Merge {
                from: 0,
                inputs: vec![3, 2, 10],
                output: 1,
                cursor: None,
            })
        );
        let alone = vec![t(4, 50, "m", "n")];
        assert_eq!(
            plan_l0_drain(&levels(&[alone, l1.clone()]), &SHAPE),
            Some(Task::Move {
                table: 4,
                from: 0,
                cursor: None,
            }),
            "one L0 table that overlaps nothing in L1 moves without a rewrite"
        );
        assert_eq!(plan_l0_drain(&levels(&[vec![], l1.clone()]), &SHAPE), None);
        let off = Shape {
            l0_trigger: None,
            ..SHAPE
        };
        let l0 = vec![t(3, 50, "b", "e")];
        assert_eq!(plan_l0_drain(&levels(&[l0, l1]), &off), None);
    }

    #[test]
    fn no_trigger_means_no_automatic_compaction() {
        let l0: Vec<T> = (0..50).map(|i| t(i, 10, "a", "z")).collect();
        let shape = Shape {
            l0_trigger: None,
            ..SHAPE
        };
        assert_eq!(plan(&levels(&[l0]), &[], &shape), None);
    }

    #[test]
    fn the_level_with_the_highest_score_goes_first() {
        // L1 at 1.5x its target, L2 at 2x, L0 below its trigger.
        let l0 = vec![t(1, 10, "a", "b")];
        let l1 = vec![t(10, 800, "a", "m"), t(11, 700, "n", "z")];
        let l2 = vec![t(20, 20_000, "a", "z")];
        let lv = [l0, l1, l2, vec![t(30, 1, "a", "a")]];
        let s = scores(&levels(&lv), &SHAPE);
        assert!(
            (s[1] - 1.5).abs() < 1e-9 && (s[2] - 2.0).abs() < 1e-9,
            "{s:?}"
        );
        match plan(&levels(&lv), &[], &SHAPE).unwrap() {
            Task::Merge { from, output, .. } => assert_eq!((from, output), (2, 3)),
            other => panic!("{other:?}"),
        }
        // With L2 under its target, L1 goes.
        let lv = [
            vec![],
            lv[1].clone(),
            vec![t(20, 5_000, "a", "z")],
            vec![t(30, 1, "a", "a")],
        ];
        match plan(&levels(&lv), &[], &SHAPE).unwrap() {
            Task::Merge { from, inputs, .. } => {
                assert_eq!(from, 1);
                assert_eq!(inputs, vec![10, 20]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_last_level_never_scores() {
        let mut lv: Vec<Vec<T>> = vec![Vec::new(); MAX_LEVELS];
        lv[MAX_LEVELS - 1] = vec![t(1, u64::MAX / 4, "a", "z")];
        assert_eq!(plan(&levels(&lv), &[], &SHAPE), None);
    }

    #[test]
    fn the_cursor_picks_tables_round_robin() {
        // L1 over target; three tables, none overlapping anything in L2 but the middle one.
        let l1 = vec![
            t(10, 600, "a", "c"),
            t(11, 600, "d", "f"),
            t(12, 600, "g", "i"),
        ];
        let l2 = vec![t(20, 100, "e", "e")];
        let lv = [vec![], l1, l2];
        let lv = levels(&lv);
        let mut cursors: Vec<Option<Vec<u8>>> = vec![None; MAX_LEVELS];
        let mut picked = Vec::new();
        for _ in 0..4 {
            let task = plan(&lv, &cursors, &SHAPE).unwrap();
            let (first, cursor) = match task {
                Task::Move { table, cursor, .. } => (table, cursor),
                Task::Merge { inputs, cursor, .. } => (inputs[0], cursor),
            };
            picked.push(first);
            cursors[1] = cursor;
        }
        assert_eq!(
            picked,
            vec![10, 11, 12, 10],
            "round robin, wrapping at the end"
        );
    }

    #[test]
    fn a_table_with_nothing_below_moves() {
        let l1 = vec![t(10, 1500, "a", "c")];
        let l2 = vec![t(20, 100, "d", "z")];
        assert_eq!(
            plan(&levels(&[vec![], l1, l2]), &[], &SHAPE),
            Some(Task::Move {
                table: 10,
                from: 1,
                cursor: Some(b"c".to_vec()),
            })
        );
        // A single L0 table (trigger 1) with an empty L1 moves too; two do not.
        let shape = Shape {
            l0_trigger: Some(1),
            ..SHAPE
        };
        let one = [vec![t(1, 10, "a", "b")]];
        assert!(matches!(
            plan(&levels(&one), &[], &shape),
            Some(Task::Move {
                table: 1,
                from: 0,
                ..
            })
        ));
        let two = [vec![t(2, 10, "x", "y"), t(1, 10, "a", "b")]];
        assert!(matches!(
            plan(&levels(&two), &[], &shape),
            Some(Task::Merge { .. })
        ));
    }

    #[test]
    fn tombstones_drop_only_where_nothing_below_can_hold_the_key() {
        let lv = [
            vec![t(1, 10, "a", "z")],
            vec![t(10, 10, "a", "m")],
            vec![t(20, 10, "c", "d"), t(21, 10, "p", "q")],
            vec![t(30, 10, "x", "x")],
        ];
        let lv = levels(&lv);
        // Output L1: L2 and L3 below.
        assert!(!tombstone_droppable(&lv, 1, b"c"), "L2 holds c..d");
        assert!(!tombstone_droppable(&lv, 1, b"x"), "L3 holds x");
        assert!(tombstone_droppable(&lv, 1, b"e"), "nothing below holds e");
        assert!(tombstone_droppable(&lv, 1, b"r"), "between L2's tables");
        // Output L2: only L3 below.
        assert!(tombstone_droppable(&lv, 2, b"c"));
        assert!(!tombstone_droppable(&lv, 2, b"x"));
        // The bottom level drops every tombstone.
        assert!(tombstone_droppable(&lv, 3, b"x"));
    }

    #[test]
    fn a_full_compaction_merges_everything_into_one_level() {
        let lv = [
            vec![t(1, 10, "a", "z"), t(2, 10, "b", "c")],
            vec![t(10, 10, "a", "m")],
            vec![],
            vec![t(30, 10, "x", "x")],
        ];
        assert_eq!(
            plan_full(&levels(&lv), &SHAPE),
            Some(Task::Merge {
                from: 0,
                inputs: vec![1, 2, 10, 30],
                output: 3,
                cursor: None,
            }),
            "the deepest level with data"
        );
        // 50,000 bytes fit first in L3 (target 100,000).
        let big = [vec![t(1, 25_000, "a", "z"), t(2, 25_000, "a", "z")]];
        assert!(matches!(
            plan_full(&levels(&big), &SHAPE),
            Some(Task::Merge { output: 3, .. })
        ));
        // One sorted run without tombstones: nothing to do; with tombstones: rewrite it.
        let mut run = [
            vec![],
            vec![],
            vec![t(20, 10, "a", "b"), t(21, 10, "c", "d")],
        ];
        assert_eq!(plan_full(&levels(&run), &SHAPE), None);
        run[2][1].tomb = 1;
        assert!(matches!(
            plan_full(&levels(&run), &SHAPE),
            Some(Task::Merge { output: 2, .. })
        ));
        assert_eq!(plan_full(&levels(&[Vec::<T>::new()]), &SHAPE), None);
    }

    fn numbers(lv: &[Vec<T>]) -> Vec<Vec<u64>> {
        lv.iter().map(|l| l.iter().map(|t| t.n).collect()).collect()
    }

    #[test]
    fn an_edit_adds_l0_in_place_deeper_in_key_order_and_replaces_in_place() {
        let lv = [
            vec![t(3, 10, "a", "z"), t(2, 10, "b", "c")],
            vec![t(10, 10, "a", "c"), t(12, 10, "m", "p")],
        ];
        let mut fresh = t(12, 99, "m", "p");
        fresh.tomb = 7;
        let edit = Edit {
            remove: vec![2],
            add: vec![
                (0, t(5, 10, "c", "d")),
                (0, t(4, 10, "e", "f")),
                (1, t(11, 10, "d", "k")),
                (MAX_LEVELS + 3, t(60, 10, "a", "b")),
            ],
            replace: vec![fresh],
        };
        let out = apply(&levels(&lv), &edit);
        let mut want = vec![vec![3, 5, 4], vec![10, 11, 12]];
        want.resize(MAX_LEVELS, Vec::new());
        want[MAX_LEVELS - 1] = vec![60];
        assert_eq!(
            numbers(&out),
            want,
            "new L0 tables where the removed one was (behind the newer 3), in the order given"
        );
        let flushed = Edit {
            add: vec![(0, t(6, 10, "a", "b"))],
            ..Edit::default()
        };
        assert_eq!(
            numbers(&apply(&levels(&out), &flushed))[0],
            [6, 3, 5, 4],
            "removing none, in front"
        );
        assert_eq!(
            (out[1][2].bytes, out[1][2].tomb),
            (99, 7),
            "replaced where it was"
        );
    }

    #[test]
    fn a_task_edit_moves_or_replaces_its_inputs() {
        let lv = [
            vec![t(3, 10, "a", "c")],
            vec![t(10, 10, "a", "b"), t(11, 10, "x", "z")],
            vec![],
        ];
        let shape = Shape {
            l0_trigger: Some(1),
            ..SHAPE
        };
        let merge = plan(&levels(&lv), &[], &shape).unwrap();
        assert_eq!(merge.output_level(), 1);
        let out = apply(&levels(&lv), &merge.edit(vec![t(20, 20, "a", "c")]));
        assert_eq!(numbers(&out)[..3], [vec![], vec![20, 11], vec![]]);
        let mv = Task::Move {
            table: 11,
            from: 1,
            cursor: Some(b"z".to_vec()),
        };
        assert_eq!(mv.cursor(), Some((1, b"z".to_vec())));
        let out = apply(&levels(&out), &mv.edit(vec![out[1][1].clone()]));
        assert_eq!(numbers(&out)[..3], [vec![], vec![20], vec![11]]);
    }

    /// Drives the planner through a simulated load of uniformly random keys (no I/O): each
    /// table is a sorted list of samples standing for equal numbers of bytes, a merge merges
    /// them and cuts the output at the table size, and every task's result is installed by
    /// [`Task::edit`] and [`apply`], as the engine installs it. Flush `i` holds
    /// `flush_of(i)` samples. Checks the invariants every version must keep (sorted levels
    /// disjoint; L0 newest first, each table's flushes all newer than the next one's; L0
    /// bounded when compaction keeps up; every level near its target at the end). Returns
    /// the samples written to tables and ingested, the L0 merges run, and the levels.
    fn simulate(shape: &Shape, flush_of: &dyn Fn(u64) -> u64) -> (u64, u64, u64, Vec<Vec<T>>) {
        let table = 64u64; // samples per table
        let trigger = shape.l0_trigger.unwrap();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut lv: Vec<Vec<T>> = vec![Vec::new(); MAX_LEVELS];
        let mut cursors: Vec<Option<Vec<u8>>> = vec![None; MAX_LEVELS];
        let (mut next_no, mut written, mut ingested, mut l0_merges) = (1u64, 0u64, 0u64, 0u64);
        let sim = |n: u64, keys: Vec<u64>, flushes: (u64, u64)| T {
            n,
            bytes: keys.len() as u64,
            tomb: 0,
            min: keys[0].to_be_bytes().to_vec(),
            max: keys[keys.len() - 1].to_be_bytes().to_vec(),
            keys,
            flushes,
        };
        for i in 0..2000 {
            let flush = flush_of(i);
            let mut keys: Vec<u64> = (0..flush)
                .map(|_| {
                    x = crate::hash::mix64(x);
                    x
                })
                .collect();
            keys.sort_unstable();
            let flushed = Edit {
                add: vec![(0, sim(next_no, keys, (i, i)))],
                ..Edit::default()
            };
            lv = apply(&levels(&lv), &flushed);
            next_no += 1;
            ingested += flush;
            written += flush;
            // Compaction keeps up: run tasks until none is due.
            while let Some(task) = plan(&levels(&lv), &cursors, shape) {
                let outputs = match &task {
                    Task::Move { table, from, .. } => {
                        vec![lv[*from].iter().find(|t| t.n == *table).unwrap().clone()]
                    }
                    Task::Merge { inputs, output, .. } => {
                        let ins = lv.iter().flatten().filter(|t| inputs.contains(&t.n));
                        let flushes = ins.clone().fold((u64::MAX, 0), |(lo, hi), t| {
                            (lo.min(t.flushes.0), hi.max(t.flushes.1))
                        });
                        let mut merged: Vec<u64> =
                            ins.flat_map(|t| t.keys.iter().copied()).collect();
                        merged.sort_unstable();
                        written += merged.len() as u64;
                        l0_merges += u64::from(*output == 0);
                        merged
                            .chunks(table as usize)
                            .map(|c| {
                                next_no += 1;
                                sim(next_no - 1, c.to_vec(), flushes)
                            })
                            .collect()
                    }
                };
                lv = apply(&levels(&lv), &task.edit(outputs));
                if let Some((l, c)) = task.cursor() {
                    cursors[l] = Some(c);
                }
                for (l, level) in lv.iter().enumerate().skip(1) {
                    for w in level.windows(2) {
                        assert!(w[0].keys.last() < w[1].keys.first(), "L{l} overlaps");
                    }
                }
                for w in lv[0].windows(2) {
                    // Tables of one merge (disjoint ranges) share their flushes.
                    let (newer, older) = (w[0].flushes, w[1].flushes);
                    assert!(
                        newer == older || newer.0 > older.1,
                        "L0 out of order: {newer:?} before {older:?}"
                    );
                }
            }
            assert!(lv[0].len() < trigger, "L0 left at its trigger");
        }
        for (n, level) in lv.iter().enumerate().take(MAX_LEVELS - 1).skip(1) {
            let bytes: u64 = level.iter().map(|t| t.keys.len() as u64).sum();
            assert!(
                bytes <= shape.target(n),
                "L{n}: {bytes} > {}",
                shape.target(n)
            );
        }
        let total: usize = lv.iter().flatten().map(|t| t.keys.len()).sum();
        assert_eq!(total as u64, ingested, "no sample lost or duplicated");
        (written, ingested, l0_merges, lv)
    }

    #[test]
    fn a_simulated_load_keeps_the_levels_in_shape() {
        let shape = Shape {
            l0_trigger: Some(4),
            l1_bytes: 256,
            ratio: 10,
            l0_merge_bytes: 0,
        };
        let (written, ingested, l0_merges, lv) = simulate(&shape, &|_| 32);
        assert_eq!(l0_merges, 0);
        println!(
            "simulated write amplification (tables only): {:.2}; levels: {:?}",
            written as f64 / ingested as f64,
            lv.iter().map(|l| l.len()).collect::<Vec<_>>()
        );
    }

    /// Flushes of 1 to 40 samples with L0 merges of up to 64: they run, keep L0 in order
    /// and cost a bounded share of the writes.
    #[test]
    fn a_simulated_load_with_small_flushes_merges_l0_in_order() {
        let shape = Shape {
            l0_trigger: Some(8),
            l1_bytes: 256,
            ratio: 10,
            l0_merge_bytes: 64,
        };
        let flush_of = |i: u64| 1 + crate::hash::mix64(i) % 40;
        let (written, ingested, l0_merges, lv) = simulate(&shape, &flush_of);
        let without = simulate(
            &Shape {
                l0_merge_bytes: 0,
                ..shape
            },
            &flush_of,
        );
        assert!(l0_merges > 20, "{l0_merges} L0 merges");
        assert!(
            written as f64 / ingested as f64 <= 1.1 * without.0 as f64 / without.1 as f64,
            "L0 merges cost more than a tenth more writes"
        );
        println!(
            "simulated write amplification with L0 merges: {:.2} ({l0_merges} of them), \
             without: {:.2}; levels: {:?}",
            written as f64 / ingested as f64,
            without.0 as f64 / without.1 as f64,
            lv.iter().map(|l| l.len()).collect::<Vec<_>>()
        );
    }
}
