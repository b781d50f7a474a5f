//! New range filters for the same data: [`Store::refilter_ranges`] builds, rebuilds or
//! removes the range filter of every table from its keys, publishes them in one manifest
//! swap and never touches a table file (as `filters.rs` does for the point filters).

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;

use super::options::check_range_bits;
use super::worker::{in_background, Install};
use super::{Inner, Store};
use crate::error::Result;
use crate::filename::range_path;
use crate::filter::range::RangeFilterBuilder;
use crate::manifest::RangeRecord;
use crate::table::{write_range_file, MappedRangeFilter, TableCounters, TableCursor};
use crate::version::{Edit, TableHandle};

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
        inner.range_bits.store(bits_per_key.to_bits(), Relaxed);
        let v = inner.current();
        let jobs: Vec<&Arc<TableHandle>> = v
            .tables()
            .filter(|t| match t.record.range {
                None => bits_per_key > 0.0,
                Some(r) => r.bits_per_key != bits_per_key || t.range.is_none(),
            })
            .collect();
        let mut fresh: Vec<Arc<TableHandle>> = Vec::new();
        let cleanup = |fresh: &[Arc<TableHandle>]| {
            for r in fresh.iter().filter_map(|h| h.record.range) {
                let _ = inner.fs.remove(&range_path(&inner.dir, r.file));
            }
        };
        for t in &jobs {
            match in_background(|| inner.rebuild_range(t, bits_per_key)) {
                Ok(h) => fresh.push(h),
                Err(e) => {
                    cleanup(&fresh);
                    return Err(e);
                }
            }
        }
        if jobs.is_empty() {
            return Ok(0);
        }
        let old: Vec<u64> = jobs
            .iter()
            .filter_map(|t| t.record.range.map(|r| r.file))
            .collect();
        let r = inner.install(Install {
            edit: Edit {
                replace: fresh.clone(),
                ..Edit::default()
            },
            ..Install::default()
        });
        if let Err(e) = r {
            // As for point filters: a poisoned store's manifest may name the new files.
            if !inner.poisoned.load(SeqCst) {
                cleanup(&fresh);
            }
            return Err(e);
        }
        for n in old {
            let _ = inner.fs.remove(&range_path(&inner.dir, n));
        }
        Ok(jobs.len())
    }
}

impl Inner {
    /// A handle for table `t` with a new range filter of `bits` per key built from its keys
    /// (none for 0); its point filter and data stay.
    fn rebuild_range(&self, t: &Arc<TableHandle>, bits: f64) -> Result<Arc<TableHandle>> {
        let mut record = t.record.clone();
        let mut range = None;
        record.range = None;
        if bits > 0.0 {
            let mut b = RangeFilterBuilder::new(bits)?;
            b.reserve(t.record.entries as usize);
            let mut c = TableCursor::new(t.table.clone(), Arc::new(TableCounters::default()))?;
            while c.valid() {
                b.push(c.key())?;
                c.advance()?;
            }
            let file = self.alloc_file()?;
            let path = range_path(&self.dir, file);
            let opened = b
                .finish()
                .and_then(|block| write_range_file(&*self.fs, &path, &block))
                .and_then(|_| MappedRangeFilter::open(&path));
            match opened {
                Ok(f) => range = Some(Arc::new(f)),
                Err(e) => {
                    let _ = self.fs.remove(&path);
                    return Err(e);
                }
            }
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
        );
        Ok(Arc::new(h.with_range(range, None)))
    }
}
