//! Checking a tree's filters against its tables ([`Store::check_filters`], what `store
//! verify --filters` runs): every key of every table must be found by the point filter a
//! lookup asks for it (the global filter under the table's run, or the table's own filter)
//! and by the table's range filter. A filter that lacks a key makes that key read as absent
//! (or a scan skip it): damage no checksum shows when the filter was built wrong.

use std::ops::Bound::Included;
use std::sync::Arc;

use super::Store;
use crate::error::{Error, Result};
use crate::filter::global::RunId;
use crate::global_index::{level_run, GlobalIndex};
use crate::table::files::TableFile;
use crate::table::MappedFilter;
use crate::table::{TableCounters, TableCursor};

/// What [`Store::check_filters`] checked, table by table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FilterCheck {
    /// Tables read.
    pub tables: u64,
    /// Keys read (tombstones included), each asked of its point filter and range filter.
    pub keys: u64,
    /// Tables whose keys were asked of the tree's global filter.
    pub global_tables: u64,
    /// Tables whose keys were asked of a point filter of their own.
    pub own_filter_tables: u64,
    /// Tables whose keys were asked of their range filter.
    pub range_filter_tables: u64,
    /// Tables read without a point filter (none recorded, or one that did not open: their
    /// lookups read them unfiltered, so no key can be lost to a filter).
    pub unfiltered_tables: u64,
}

/// The point filter a lookup asks for a table's keys.
enum Point<'a> {
    /// The tree's global filter, under the table's run id (`None`: an upper table without
    /// one, which no lookup can name).
    Global(&'a GlobalIndex, Option<RunId>),
    /// The table's own filter.
    Own(&'a MappedFilter),
    /// None: the table is read unfiltered.
    None,
}

impl Store {
    /// Checks every table's filters against its keys: each key must be found by its point
    /// filter (the global filter under the table's run id when the tree has one and the
    /// table no filter of its own, else the table's own filter) and by its range filter, if
    /// it has one. Reads every table's data blocks (as a full scan does, not through the
    /// block cache's counters). Holds off compactions while it runs, so that the table set
    /// it reads stays the one the filters describe; flushes go on. An error names the first
    /// table with a key a filter does not find, the level, which filter, and how many keys.
    pub fn check_filters(&self) -> Result<FilterCheck> {
        let _c = self.inner.lock_compaction();
        let v = self.inner.current();
        let global = v.global();
        let mut check = FilterCheck::default();
        for (l, level) in v.levels().iter().enumerate() {
            for t in level.tables() {
                // The point filter a lookup asks for this table's keys.
                let point = match (global, t.own_filter(), &t.filter) {
                    (Some(g), false, _) => {
                        Point::Global(g, if l == 0 { t.run() } else { level_run(l) })
                    }
                    (_, _, Some(f)) => Point::Own(f),
                    _ => Point::None,
                };
                let mut c = TableCursor::new(t.table.clone(), Arc::new(TableCounters::default()))?;
                let (mut keys, mut point_missing, mut range_missing) = (0u64, 0u64, 0u64);
                while c.valid() {
                    let key = c.key();
                    let h = crate::hash::key_hash(key);
                    let found = match &point {
                        Point::Global(g, Some(run)) => g.filter.query(h).contains(*run),
                        // An upper table of a global tree without a run id: lookups cannot
                        // name it, so none of its keys is found.
                        Point::Global(_, None) => false,
                        Point::Own(f) => f.may_contain(h),
                        Point::None => true,
                    };
                    point_missing += u64::from(!found);
                    if let Some(r) = &t.range {
                        range_missing += u64::from(!r.may_intersect(Included(key), Included(key)));
                    }
                    keys += 1;
                    c.advance()?;
                }
                let number = t.record.number;
                // Named by the filter's file when it has one of its own, else the table's.
                let lacks = |what: &str, n: u64, file: Option<&Arc<TableFile>>| {
                    let path = file
                        .map_or_else(|| t.table.path().to_path_buf(), |f| f.path().to_path_buf());
                    Error::corrupt(
                        0,
                        format!(
                            "{what} lacks {n} of the {keys} keys of table {number} (level {l})"
                        ),
                    )
                    .in_file(path, 0)
                };
                if point_missing > 0 {
                    let (what, own) = match point {
                        Point::Global(..) => ("the global filter", None),
                        _ => ("its own filter", t.files.filter.as_ref()),
                    };
                    return Err(lacks(what, point_missing, own));
                }
                if range_missing > 0 {
                    return Err(lacks(
                        "its range filter",
                        range_missing,
                        t.files.range.as_ref(),
                    ));
                }
                check.tables += 1;
                check.keys += keys;
                match point {
                    Point::Global(..) => check.global_tables += 1,
                    Point::Own(_) => check.own_filter_tables += 1,
                    Point::None => check.unfiltered_tables += 1,
                }
                check.range_filter_tables += u64::from(t.range.is_some());
            }
        }
        Ok(check)
    }
}
