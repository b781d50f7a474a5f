//! New range filters for the same data: [`Store::refilter_ranges`] builds, rebuilds or
//! removes the range filter of every table from its keys, publishes them in one manifest
//! swap and never touches a table file (as `filters.rs` does for the point filters).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::options::check_range_bits;
use super::worker::in_background;
use super::{Inner, Store};
use crate::error::Result;
use crate::filter::range::RangeFilterBuilder;
use crate::manifest::RangeRecord;
use crate::table::files::{new_range_file, TableFiles};
use crate::table::{MappedRangeFilter, TableCounters, TableCursor};
use crate::version::{TableHandle, Version, VersionEdit};

impl Store {
    /// Gives every table a range filter of `bits_per_key` bits per key (0: removes them)
    /// without rewriting any data: new range filter files are written, the manifest is
    /// swapped atomically, the old files removed. Tables whose range filter already has that
    /// size (and opened) are left alone. This handle's new tables use `bits_per_key` from
    /// now on (as [`Options::range_filter_bits`](crate::Options::range_filter_bits) would).
    /// Returns the number of tables changed.
    ///
    /// ```
    /// use filterstore::Store;
    /// # let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), Default::default())?;
    /// store.put(b"k", b"v")?;
    /// store.flush()?;
    /// assert_eq!(store.refilter_ranges(0.0)?, 1); // removed
    /// assert_eq!(store.stats().range_filter_bytes, 0);
    /// assert_eq!(store.refilter_ranges(12.0)?, 1); // added
    /// assert_eq!(store.stats().tables[0].range_bits_per_key, 12.0);
    /// assert_eq!(store.scan_prefix(b"k").count(), 1);
    /// # Ok::<(), filterstore::Error>(())
    /// ```
    pub fn refilter_ranges(&self, bits_per_key: f64) -> Result<usize> {
        check_range_bits(bits_per_key)?;
        let inner = &self.inner;
        inner.check_writable()?;
        let _c = inner.lock_compaction();
        inner.tree.range_bits.store(bits_per_key.to_bits(), Relaxed);
        let _g = inner.lock_global_if_used(&inner.current());
        let v = inner.current();
        let jobs: Vec<&Arc<TableHandle>> = v
            .tables()
            .filter(|t| match t.record.range {
                None => bits_per_key > 0.0,
                Some(r) => r.bits_per_key != bits_per_key || t.range.is_none(),
            })
            .collect();
        // New files that are not published go when dropped, the old ones once no version
        // holds them (`version/set.rs`).
        let mut fresh: Vec<Arc<TableHandle>> = Vec::new();
        for t in &jobs {
            fresh.push(in_background(|| inner.rebuild_range(t, bits_per_key))?);
        }
        if jobs.is_empty() {
            return Ok(0);
        }
        inner.log_and_apply(VersionEdit::replacing(fresh))?;
        Ok(jobs.len())
    }

    /// Builds now the range filters that tables lack (the deferred ones of
    /// [`Options::deferred_range_filters`](crate::Options::deferred_range_filters), which
    /// the compaction thread builds once writes pause), each published in its own manifest
    /// swap. Returns the number built.
    pub fn build_deferred_range_filters(&self) -> Result<usize> {
        self.inner.check_writable()?;
        let mut n = 0;
        while self.inner.build_deferred_range()? {
            n += 1;
        }
        Ok(n)
    }
}

impl Inner {
    /// Bits per key of the range filter a table written at `level` of `v` (a seal's, or a
    /// compaction output's) gets when written: the store's while the tree has no level
    /// below L1 (a small store, whose tables a scan right after the writes meets), else, with
    /// [`Options::deferred_range_filters`], 0: the table is merged again by the next
    /// compactions under a load, and is given its range filter once writes pause
    /// ([`build_deferred_range`](Self::build_deferred_range)), built once.
    ///
    /// [`Options::deferred_range_filters`]: super::Options::deferred_range_filters
    pub(super) fn range_bits_at(&self, v: &Version, level: usize) -> f64 {
        let deepest = v.levels().iter().rposition(|l| !l.tables().is_empty());
        match self.opts.deferred_range_filters {
            Some(_) if deepest.unwrap_or(0).max(level) > 1 => 0.0,
            _ => self.range_bits(),
        }
    }

    /// Whether a table lacks the range filter this handle's tables get (a deferred one).
    pub(super) fn range_backlog(&self) -> bool {
        self.range_bits() > 0.0 && self.current().tables().any(|t| t.record.range.is_none())
    }

    /// The global filter's lock when `v` reads through the global filter (whose growth
    /// replaces the L0 tables' handles: a range filter's new handle, made from the one
    /// before, must not race it), else none (it would hold up flushes for nothing). Under
    /// the compaction lock, which a switch to or from the global filter holds too.
    fn lock_global_if_used(&self, v: &Version) -> Option<std::sync::MutexGuard<'_, ()>> {
        v.global().is_some().then(|| self.lock_global())
    }

    /// Builds the range filter of one table that lacks it (deepest level first: its data
    /// stays longest) and publishes it in a manifest swap; `false` when none lacks one.
    pub(super) fn build_deferred_range(&self) -> Result<bool> {
        let bits = self.range_bits();
        if bits == 0.0 {
            return Ok(false);
        }
        let _c = self.lock_compaction();
        let _g = self.lock_global_if_used(&self.current());
        let v = self.current();
        let lacking = v
            .levels()
            .iter()
            .rev()
            .find_map(|l| l.tables().iter().find(|t| t.record.range.is_none()));
        let Some(t) = lacking else {
            return Ok(false);
        };
        let h = in_background(|| self.rebuild_range(t, bits))?;
        self.log_and_apply(VersionEdit::replacing(vec![h]))?;
        Ok(true)
    }

    /// A handle for table `t` with a new range filter of `bits` per key built from its keys
    /// (none for 0); its point filter and data stay.
    fn rebuild_range(&self, t: &Arc<TableHandle>, bits: f64) -> Result<Arc<TableHandle>> {
        let mut record = t.record.clone();
        let mut range = None;
        let mut files = TableFiles {
            range: None,
            ..t.files.clone()
        };
        record.range = None;
        if bits > 0.0 {
            let mut b = RangeFilterBuilder::new(bits)?.clocked(Some(&self.tree.range_counters.1));
            b.reserve(t.record.entries as usize);
            // The table's keys read back count as the build's time.
            b.charged(|b| {
                let mut c = TableCursor::new(t.table.clone(), Arc::new(TableCounters::default()))?;
                while c.valid() {
                    b.push(c.key())?;
                    c.advance()?;
                }
                Ok(())
            })?;
            let file = self.alloc_file()?;
            // The file goes if it is not published (`table/files.rs`).
            let written = new_range_file(&self.fs, &self.dir, file, &b.finish()?)?;
            range = Some(Arc::new(MappedRangeFilter::open(written.path())?));
            files.range = Some(written);
            record.range = Some(RangeRecord {
                file,
                bits_per_key: bits,
            });
        }
        let h = TableHandle::new(
            t.table.clone(),
            t.filter.clone(),
            record,
            t.filter_problem.clone(),
            files,
        );
        // An L0 table under the global filter stays under its run: a lookup reads the
        // tables of the runs the filter names, and a handle without its run would be skipped.
        if let Some(run) = t.run() {
            h.set_run(run);
        }
        Ok(Arc::new(
            h.with_range(range, None)
                .with_tombstones(t.tombstones.clone()),
        ))
    }
}
