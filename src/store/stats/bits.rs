//! Filter memory per key across the whole store: the global filter's and every table's
//! filter bytes together, over the keys in tables (`store stats`, "filters").

use super::Stats;

impl Stats {
    /// Every point filter's bytes: the global filter's memory (table, sequence words,
    /// stash) and the tables' own filter blocks (resident or mapped). Range filters are
    /// counted apart ([`Stats::range_filter_bytes`]).
    pub fn point_filter_bytes(&self) -> u64 {
        let tables: u64 = self.tables.iter().map(|t| t.filter_bytes).sum();
        tables + self.global_filter.as_ref().map_or(0, |g| g.memory_bytes)
    }

    /// [`point_filter_bytes`](Self::point_filter_bytes) in bits, over the keys in tables
    /// (one per version, tombstones included: what a filter holds an entry for); 0 for a
    /// store without tables.
    pub fn filter_bits_per_key(&self) -> f64 {
        match self.table_keys() {
            0 => 0.0,
            keys => self.point_filter_bytes() as f64 * 8.0 / keys as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::filter::FilterKind;
    use crate::{Options, Store};

    /// Under either policy the figure is the filters' bytes over the table keys: per-table
    /// filters only, or the global filter's memory (its tables have no filter files).
    #[test]
    fn counts_global_and_per_table_filters() {
        for kind in [FilterKind::BlockedBloom, FilterKind::Global] {
            let dir = tempfile::tempdir().unwrap();
            let o = Options::default().filter(Some(kind));
            let s = Store::open(dir.path(), o).unwrap();
            assert_eq!(s.stats().filter_bits_per_key(), 0.0);
            for i in 0..10_000u32 {
                s.put(i.to_be_bytes(), b"v").unwrap();
            }
            s.flush().unwrap();
            let st = s.stats();
            let tables: u64 = st.tables.iter().map(|t| t.filter_bytes).sum();
            let global = st.global_filter.as_ref().map_or(0, |g| g.memory_bytes);
            assert_eq!(st.point_filter_bytes(), tables + global);
            // Under the global filter the one table is the deepest level's: it has a
            // filter of its own, and the global filter (empty) its smallest table.
            assert!(tables > 0, "{kind:?}");
            assert_eq!(global == 0, kind != FilterKind::Global);
            let want = (tables + global) as f64 * 8.0 / 10_000.0;
            assert!((st.filter_bits_per_key() - want).abs() < 1e-9, "{kind:?}");
        }
    }
}
