//! The export benchmark's report.

use std::fmt::Write as _;

use super::{median, ExportBenchReport};

impl ExportBenchReport {
    /// The report as text.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let n = self.keys as f64;
        let _ = writeln!(
            s,
            "filterstore bench export — {} keys (16-byte keys, 100-byte values), {} tables, \
             {} rows per row group\nmachine: {}; store built in {:.1} s",
            self.keys, self.tables, self.rows_per_group, self.machine, self.build_secs
        );
        let (e, sc) = (median(&self.export_secs), median(&self.scan_secs));
        let _ = writeln!(
            s,
            "export: median {:.2} s = {:.2} M keys/s over {} rounds ({}); a plain scan of the \
             same store in the same rounds: median {:.2} s = {:.2} M keys/s ({})",
            e,
            n / e / 1e6,
            self.export_secs.len(),
            secs_list(&self.export_secs),
            sc,
            n / sc / 1e6,
            secs_list(&self.scan_secs),
        );
        if !self.load_secs.is_empty() {
            let (l, i) = (median(&self.load_secs), median(&self.import_secs));
            let ratios: Vec<f64> = self
                .load_secs
                .iter()
                .zip(&self.import_secs)
                .map(|(l, i)| l / i)
                .collect();
            let _ = writeln!(
                s,
                "store import --parquet: median {:.2} s = {:.2} M rows/s; store load (same rows \
                 as TSV): median {:.2} s = {:.2} M rows/s; import/load speed {:.2}x \
                 (per round {})",
                i,
                n / i / 1e6,
                l,
                n / l / 1e6,
                l / i,
                ratios
                    .iter()
                    .map(|r| format!("{r:.2}x"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let _ = writeln!(
            s,
            "filterstore itself (blocked-bloom, its ε): {:.4} data-block reads per absent lookup \
             over the same absent keys\n",
            self.store_reads_per_absent
        );
        let _ = writeln!(
            s,
            "{:>6} {:>5} {:>6} {:>10} {:>10} {:>8} {:>9} | {:>22} {:>8} {:>9} | {:>9}",
            "fpp",
            "files",
            "groups",
            "file MB",
            "Bloom KB",
            "bits/key",
            "model",
            "absent: in min/max",
            "read",
            "read/fpp",
            "present"
        );
        for r in &self.rows {
            let read_frac = r.absent_read as f64 / r.absent_in_range.max(1) as f64;
            let _ = writeln!(
                s,
                "{:>6} {:>5} {:>6} {:>10.1} {:>10.1} {:>8.2} {:>8.4}% | {:>22} {:>8} {:>8.2}x | {:>4}/{:<4}",
                r.fpp,
                r.files,
                r.groups,
                r.file_bytes as f64 / 1e6,
                r.bloom_bytes as f64 / 1e3,
                r.bloom_bytes as f64 * 8.0 / n,
                r.model_fpr * 100.0,
                r.absent_in_range,
                r.absent_read,
                read_frac / r.fpp,
                r.present_found,
                r.present
            );
        }
        let _ = writeln!(
            s,
            "(row groups for {} absent keys inside the key range: `in min/max` = read without \
             Bloom filters, `read` = with them, as the parquet crate reads them back; \
             `read/fpp` = read / in min/max / fpp, target ≤ 1.2; `model` = the filters' \
             expected rate, export::sbbf_fpr)",
            self.rows.first().map_or(0, |r| r.absent)
        );
        if self.rows.iter().any(|r| r.engines.is_some()) {
            let _ = writeln!(
                s,
                "\n{:>6} | {:>8} {:>10} {:>8} {:>9} {:>12} | {:>9} {:>9} | {:>11} {:>8} {:>8} | {:>7}",
                "fpp",
                "absent",
                "DF min/max",
                "DF read",
                "read/fpp",
                "DF off read",
                "DuckDB rd",
                "read/fpp",
                "present",
                "DF exact",
                "DD exact",
                "secs"
            );
            for r in &self.rows {
                let Some(c) = &r.engines else { continue };
                let frac = |x: u64| x as f64 / c.df_in_range.max(1) as f64 / r.fpp;
                let _ = writeln!(
                    s,
                    "{:>6} | {:>8} {:>10} {:>8} {:>8.2}x {:>5} of {:<5} | {:>9} {:>8.2}x | {:>11} {:>8} {:>8} | {:>7.0}",
                    r.fpp,
                    c.absent,
                    c.df_in_range,
                    c.df_read,
                    frac(c.df_read),
                    c.df_off_read,
                    c.off_absent,
                    c.duck_read,
                    frac(c.duck_read),
                    c.present,
                    c.df_exact,
                    c.duck_exact,
                    c.secs
                );
                if c.absent_rows > 0 {
                    let _ = writeln!(s, "  !! {} absent queries returned rows", c.absent_rows);
                }
            }
            let _ = writeln!(
                s,
                "(DataFusion: row_groups_pruned_statistics / _bloom_filter from EXPLAIN ANALYZE; \
                 `DF off read`: groups read with bloom_filter_on_read = false, of the absent \
                 queries sent that way; DuckDB: row_groups_scanned from its EXPLAIN ANALYZE \
                 profile)"
            );
        }
        let _ = writeln!(s, "total {:.1} s", self.total_secs);
        s
    }
}

fn secs_list(xs: &[f64]) -> String {
    xs.iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}
