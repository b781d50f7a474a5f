//! The reports of a YCSB run: a text table and JSON.

use serde_json::{json, Value};

use super::{Op, Run, Ycsb, OP_NAMES};

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

pub(super) fn text_report(y: &Ycsb<'_>, load_secs: f64, runs: &[Run]) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "filterstore bench engine — YCSB on {} keys (16-byte keys, {}-byte values), {}",
        y.records, y.value_bytes, y.config
    );
    let _ = writeln!(
        o,
        "load:    {:.0} puts/s ({:.2} s, final flush included)",
        y.records as f64 / load_secs,
        load_secs
    );
    for r in runs {
        let ops: u64 = r.t.lat.iter().map(|l| l.n).sum();
        let _ = writeln!(
            o,
            "{}:  {:.0} ops/s ({ops} ops in {:.3} s on {} thread{}; {}); missing {}, wrong {}{}",
            r.workload.name(),
            ops as f64 / r.secs,
            r.secs,
            y.threads,
            if y.threads == 1 { "" } else { "s" },
            r.workload.describe(),
            r.t.missing,
            r.t.wrong,
            scan_avg(r).map_or(String::new(), |a| format!(", {a:.1} entries per scan")),
        );
        for (name, l) in OP_NAMES.iter().zip(&r.t.lat) {
            if l.n > 0 {
                let _ = writeln!(
                    o,
                    "         {name:<6} {:>9}  p50 {:>8.2} µs  p99 {:>8.2} µs  p99.9 {:>9.1} µs",
                    l.n,
                    us(l.quantile(0.5)),
                    us(l.quantile(0.99)),
                    us(l.quantile(0.999))
                );
            }
        }
    }
    o.pop();
    o
}

fn scan_avg(r: &Run) -> Option<f64> {
    let scans = r.t.lat[Op::Scan as usize].n;
    (scans > 0).then(|| r.t.scanned as f64 / scans as f64)
}

pub(super) fn json_report(y: &Ycsb<'_>, load_secs: f64, runs: &[Run]) -> String {
    let workloads: Vec<Value> = runs
        .iter()
        .map(|r| {
            let ops: u64 = r.t.lat.iter().map(|l| l.n).sum();
            let mut by_op = serde_json::Map::new();
            for (name, l) in OP_NAMES.iter().zip(&r.t.lat) {
                if l.n > 0 {
                    by_op.insert(
                        name.to_string(),
                        json!({
                            "count": l.n,
                            "p50_us": us(l.quantile(0.5)),
                            "p99_us": us(l.quantile(0.99)),
                            "p999_us": us(l.quantile(0.999)),
                            "max_us": us(l.max),
                        }),
                    );
                }
            }
            json!({
                "workload": r.workload.name(),
                "mix": r.workload.describe(),
                "ops": ops,
                "threads": y.threads,
                "secs": r.secs,
                "ops_per_s": ops as f64 / r.secs,
                "open_ms": r.open_ms,
                "missing": r.t.missing,
                "wrong": r.t.wrong,
                "scan_entries_avg": scan_avg(r),
                "by_op": by_op,
            })
        })
        .collect();
    let v = json!({
        "records": y.records,
        "key_bytes": 16,
        "value_bytes": y.value_bytes,
        "config": y.config,
        "load": {"secs": load_secs, "puts_per_s": y.records as f64 / load_secs},
        "workloads": workloads,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}
