//! The benchmark's reports: the table on stdout, CSV, JSON, and the SVG figure.

use std::fmt::Write as _;

use super::stats::median;
use super::{BenchReport, Row};
use crate::plot::{kind_color, render, Chart, Series, Style};
use filterstore::filter::{self, FilterKind};

/// The CPU model, core count and the kernel blocked-bloom queries run on, for reports.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{cpu}, {cores} cores, {}", filter::kernel_summary())
}

fn pct(x: f64) -> String {
    format!("{:.3}%", x * 100.0)
}

impl BenchReport {
    /// The filter kinds measured, ranked by the median of their rows'
    /// [`Row::bits_per_halving`] (fewest disk reads per byte of filter first), with that
    /// median.
    pub fn kinds_by_reads_per_byte(&self) -> Vec<(FilterKind, f64)> {
        let mut kinds: Vec<(FilterKind, f64)> = Vec::new();
        for r in &self.rows {
            if kinds.iter().any(|(k, _)| *k == r.kind) {
                continue;
            }
            let mut v: Vec<f64> = self
                .rows
                .iter()
                .filter(|x| x.kind == r.kind)
                .filter_map(Row::bits_per_halving)
                .collect();
            if !v.is_empty() {
                kinds.push((r.kind, median(&mut v)));
            }
        }
        kinds.sort_by(|a, b| a.1.total_cmp(&b.1));
        kinds
    }

    /// The readable table printed on stdout.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let c = &self.config;
        let _ = writeln!(
            s,
            "filterstore bench — {} keys ({}), {} tables, {} absent + {} present lookups per row ({} for the no-filter baseline)",
            self.keys,
            if c.keys_file.is_some() {
                "from file"
            } else {
                "16-byte keys, 100-byte values"
            },
            c.tables,
            c.lookups,
            c.lookups,
            self.rows.first().map_or(0, |r| r.lookups)
        );
        let _ = writeln!(s, "machine: {}; absent keys: {:.0}% outside every table's range; baseline (no filter) reads per absent lookup: {:.3}; data blocks read {}",
            self.machine, self.outside_share * 100.0, self.baseline_reads_per_absent,
            if c.mmap_reads { "in place from mapped files (--mmap-reads)" } else { "with pread" });
        if let Some(e) = &self.engine {
            let _ = writeln!(s, "engine: load {:.0} puts/s (WAL write per put, no fsync), {:.0} puts/s buffered WAL; reopen {:.1} ms; seal {} keys without fsync (medians of {} alternating rounds): 1 thread {:.3} s, 2 threads {:.3} s ({:.2}x); with fsync ({} tables): {:.3} s",
                e.load_puts_per_sec, e.load_buffered_puts_per_sec, e.reopen_ms, e.seal_keys, e.seal_rounds, e.seal_1t_secs, e.seal_2t_secs, e.seal_speedup, c.tables, e.seal_fsync_secs);
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "{:<14} {:>7} {:>9} {:>9} {:>10} {:>8} {:>9} {:>9} {:>21} {:>9} {:>8} {:>9} {:>10} {:>10}{}",
            "filter",
            "ε",
            "bits/key",
            "b/halving",
            "filter KiB",
            "build s",
            "obs FPR",
            "theory",
            "band (4σ+5%)",
            "reads/abs",
            "avoided",
            "ns/absent",
            "ns/present",
            "reads/pres",
            if c.cold {
                "  cold ns/abs  cold reads  cold speed-up"
            } else {
                ""
            }
        );
        let none_cold = self
            .rows
            .iter()
            .find(|r| r.kind == FilterKind::None)
            .and_then(|r| r.cold.as_ref())
            .map(|c| c.ns_absent);
        for r in &self.rows {
            let (eps, obs, th, bnd) = match r.fpr {
                Some(f) => (
                    pct(f),
                    r.observed_fpr.map_or("-".into(), pct),
                    pct(r.theory_fpr),
                    format!("{}..{}", pct(r.band.0), pct(r.band.1)),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            let flag = if r.in_band() { "" } else { " OUTSIDE BAND" };
            let halving = r
                .bits_per_halving()
                .map_or("-".into(), |b| format!("{b:.2}"));
            let _ = write!(s, "{:<14} {:>7} {:>9.2} {:>9} {:>10.1} {:>8.3} {:>9} {:>9} {:>21} {:>9.4} {:>7.1}% {:>9.0} {:>10.0} {:>10.4}",
                r.kind.name(), eps, r.bits_per_key, halving, r.filter_bytes as f64 / 1024.0, r.build_secs, obs, th, bnd, r.reads_per_absent, r.avoided * 100.0, r.ns_absent, r.ns_present, r.reads_per_present);
            if let Some(cold) = &r.cold {
                let speed = none_cold.map_or(1.0, |n| n / cold.ns_absent);
                let _ = write!(
                    s,
                    "  {:>11.0} {:>11} {:>13.1}x",
                    cold.ns_absent, cold.reads, speed
                );
            }
            let _ = writeln!(s, "{flag}");
        }
        let outside = self.rows.iter().filter(|r| !r.in_band()).count();
        let _ = writeln!(s);
        let ranked = self.kinds_by_reads_per_byte();
        if let Some((best, b)) = ranked.first() {
            let rest: Vec<String> = ranked[1..]
                .iter()
                .map(|(k, b)| format!("{k} {b:.2}"))
                .collect();
            let _ = writeln!(s, "fewest disk reads per byte of filter: {best} ({b:.2} bits/key per halving of absent-key reads, median of its rows; 1.00 is the information-theoretic minimum){}{}",
                if rest.is_empty() { "" } else { "; then " }, rest.join(", "));
        }
        let _ = writeln!(s, "{} of {} filtered rows have an observed FPR inside the band around theory; total {:.1} s",
            self.rows.iter().filter(|r| r.fpr.is_some()).count() - outside, self.rows.iter().filter(|r| r.fpr.is_some()).count(), self.total_secs);
        self.scans_text(&mut s);
        s
    }

    /// The range filters' rows: reads avoided for empty scans, beside the point filters'
    /// reads avoided for absent gets above.
    fn scans_text(&self, s: &mut String) {
        let Some(first) = self.scan_rows.first() else {
            return;
        };
        let _ = writeln!(
            s,
            "\nrange filters, {} empty scans per row at the same absent keys ([a, a] at each; [a, a+32) \
             at the 16-byte ones, a read as a number), on the same tables (range filters swapped with \
             refilter_ranges):",
            first.scans
        );
        let _ = writeln!(
            s,
            "{:<14} {:>9} {:>4} {:>10} {:>8} {:>10} {:>10} {:>9}",
            "range filter", "bits/key", "ℓ", "reads/scan", "avoided", "obs FPR", "bound", "ns/scan"
        );
        for r in &self.scan_rows {
            let (name, avoided, obs, bound) = if r.range_bits > 0.0 {
                (
                    format!("{} bits", r.range_bits),
                    format!("{:.1}%", r.avoided * 100.0),
                    r.observed_fpr.map_or("-".into(), pct),
                    pct(r.bound),
                )
            } else {
                ("none".into(), "-".into(), "-".into(), "-".into())
            };
            let _ = writeln!(
                s,
                "{name:<14} {:>9.2} {:>4} {:>10.4} {avoided:>8} {obs:>10} {bound:>10} {:>9.0}",
                r.bits_per_key, r.len, r.reads_per_scan, r.ns_per_scan
            );
        }
    }

    /// One CSV line per row, with a header.
    pub fn to_csv(&self) -> String {
        let mut s = String::from("kind,fpr,lookups,bits_per_key,bits_per_halving,filter_bytes,build_secs,absent_probes,observed_fpr,theory_fpr,band_low,band_high,in_band,reads_per_absent,avoided,ns_absent,ns_present,reads_per_present,cold_ns_absent,cold_reads\n");
        for r in &self.rows {
            let o = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                r.kind,
                o(r.fpr),
                r.lookups,
                r.bits_per_key,
                o(r.bits_per_halving()),
                r.filter_bytes,
                r.build_secs,
                r.absent_probes,
                o(r.observed_fpr),
                r.theory_fpr,
                r.band.0,
                r.band.1,
                r.in_band(),
                r.reads_per_absent,
                r.avoided,
                r.ns_absent,
                r.ns_present,
                r.reads_per_present,
                o(r.cold.as_ref().map(|c| c.ns_absent)),
                r.cold
                    .as_ref()
                    .map_or(String::new(), |c| c.reads.to_string())
            );
        }
        s
    }

    /// The report as JSON (NaN and infinities, which JSON cannot express, as `null`).
    pub fn to_json(&self) -> String {
        use serde_json::{json, Value};
        let num = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
        let opt = |x: Option<f64>| x.map_or(Value::Null, num);
        let engine = self.engine.as_ref().map(|e| {
            json!({
                "load_puts_per_sec": num(e.load_puts_per_sec),
                "load_buffered_puts_per_sec": num(e.load_buffered_puts_per_sec),
                "reopen_ms": num(e.reopen_ms),
                "seal_keys": e.seal_keys,
                "seal_1t_secs": num(e.seal_1t_secs),
                "seal_2t_secs": num(e.seal_2t_secs),
                "seal_speedup": num(e.seal_speedup),
                "seal_rounds": e.seal_rounds,
                "seal_fsync_secs": num(e.seal_fsync_secs),
            })
        });
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                json!({
                    "kind": r.kind.to_string(),
                    "fpr": opt(r.fpr),
                    "lookups": r.lookups,
                    "bits_per_key": num(r.bits_per_key),
                    "bits_per_halving": opt(r.bits_per_halving()),
                    "filter_bytes": r.filter_bytes,
                    "build_secs": num(r.build_secs),
                    "absent_probes": r.absent_probes,
                    "observed_fpr": opt(r.observed_fpr),
                    "theory_fpr": num(r.theory_fpr),
                    "band": [num(r.band.0), num(r.band.1)],
                    "in_band": r.in_band(),
                    "reads_per_absent": num(r.reads_per_absent),
                    "avoided": num(r.avoided),
                    "ns_absent": num(r.ns_absent),
                    "ns_present": num(r.ns_present),
                    "reads_per_present": num(r.reads_per_present),
                    "cold": r.cold.as_ref().map(|c| json!({
                        "lookups": c.lookups,
                        "reads": c.reads,
                        "ns_absent": num(c.ns_absent),
                    })),
                })
            })
            .collect();
        let v = json!({
            "machine": self.machine,
            "keys": self.keys,
            "tables": self.config.tables,
            "lookups": self.config.lookups,
            "mmap_reads": self.config.mmap_reads,
            "baseline_reads_per_absent": num(self.baseline_reads_per_absent),
            "outside_share": num(self.outside_share),
            "total_secs": num(self.total_secs),
            "engine": engine,
            "rows": rows,
            "scan_rows": self.scan_rows.iter().map(|r| json!({
                "range_bits": num(r.range_bits),
                "bits_per_key": num(r.bits_per_key),
                "len": r.len,
                "scans": r.scans,
                "reads_per_scan": num(r.reads_per_scan),
                "avoided": num(r.avoided),
                "observed_fpr": opt(r.observed_fpr),
                "bound": num(r.bound),
                "ns_per_scan": num(r.ns_per_scan),
            })).collect::<Vec<Value>>(),
        });
        let mut out = serde_json::to_string_pretty(&v).unwrap_or_default();
        out.push('\n');
        out
    }

    /// An SVG with two panels: FPR against bits per key (points measured, lines theory) and
    /// data-block reads per absent lookup per configuration.
    pub fn to_svg(&self) -> String {
        bench_svg(self)
    }
}

/// Theoretical (bits per key, FPR) points of `kind` for ε from 0.5 down to 0.0001.
pub fn theory_curve(kind: FilterKind) -> Vec<(f64, f64)> {
    let n = 1_000_000u64;
    (0..=40)
        .map(|i| 0.5 * 10f64.powf(-(i as f64) / 10.0))
        .filter_map(|eps| filter::theory(kind, n, eps))
        .collect()
}

/// The bench figure: FPR vs bits/key (measured points, theory lines) and reads per absent
/// lookup vs ε per kind, with the no-filter baseline.
fn bench_svg(r: &BenchReport) -> String {
    let kinds: Vec<FilterKind> = {
        let mut k: Vec<FilterKind> = r
            .rows
            .iter()
            .map(|r| r.kind)
            .filter(|k| *k != FilterKind::None)
            .collect();
        k.dedup();
        k
    };
    let mut fpr = Chart {
        title: "False-positive rate vs bits per key".into(),
        x_label: "filter bits per key".into(),
        y_label: "false-positive rate".into(),
        log_y: true,
        ..Chart::default()
    };
    let mut reads = Chart {
        title: "Data-block reads per absent lookup".into(),
        x_label: "target ε".into(),
        y_label: "reads per absent lookup".into(),
        log_x: true,
        log_y: true,
        legend_bottom: true,
        ..Chart::default()
    };
    for &k in &kinds {
        let rows: Vec<_> = r.rows.iter().filter(|x| x.kind == k).collect();
        let curve: Vec<(f64, f64)> = theory_curve(k)
            .into_iter()
            .filter(|(b, _)| *b <= 20.0)
            .collect();
        fpr.series.push(Series {
            name: format!("{k} theory"),
            color: kind_color(k),
            points: curve,
            style: Style::Dashed,
        });
        fpr.series.push(Series {
            name: format!("{k} measured"),
            color: kind_color(k),
            points: rows
                .iter()
                .filter_map(|x| x.observed_fpr.map(|o| (x.bits_per_key, o)))
                .collect(),
            style: Style::Points,
        });
        reads.series.push(Series {
            name: k.to_string(),
            color: kind_color(k),
            points: rows
                .iter()
                .filter_map(|x| x.fpr.map(|f| (f, x.reads_per_absent)))
                .collect(),
            style: Style::ErrorBars(vec![0.0; rows.len()]),
        });
    }
    if let Some(none) = r.rows.iter().find(|x| x.kind == FilterKind::None) {
        let fs: Vec<f64> = r.rows.iter().filter_map(|x| x.fpr).collect();
        let (lo, hi) = fs
            .iter()
            .fold((f64::MAX, f64::MIN), |a, &f| (a.0.min(f), a.1.max(f)));
        if lo <= hi {
            reads.series.push(Series {
                name: "none (baseline)".into(),
                color: kind_color(FilterKind::None),
                points: vec![(lo, none.reads_per_absent), (hi, none.reads_per_absent)],
                style: Style::Dashed,
            });
        }
    }
    render(&[fpr, reads], 560.0, 400.0)
}
