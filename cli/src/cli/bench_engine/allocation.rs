//! `bench engine --allocation`: filter allocations compared at equal memory on the loaded
//! store (filters rebuilt with `refilter_to`, no data rewritten), and the curve of expected
//! wasted reads against bits per key.

use filterstore::{FilterKind, FilterPolicy, Stats, Store};

use super::lookups::lookups;
use super::{levels_line, BenchEngine};
use crate::cli::{Allocation, CliError};

/// One allocation measured on the loaded store.
struct Measured {
    filter_bytes: u64,
    bits_per_key: f64,
    expected: f64,
    wasted: f64,
    predicted: f64,
    /// The coverage-weighted model's prediction for these lookups (`filter/choice.rs`).
    model: f64,
    ns: f64,
}

/// The allocation model for the lookups between `before` and `after` under `policy`: each
/// table's counters less those it had before.
fn model_between(before: &Stats, after: &Stats, policy: &FilterPolicy, count: u64) -> f64 {
    let tables: Vec<_> = after
        .tables
        .iter()
        .map(|t| {
            let mut d = t.clone();
            if let Some(t0) = before.tables.iter().find(|t0| t0.number == t.number) {
                d.filter_negatives -= t0.filter_negatives.min(d.filter_negatives);
                d.filter_positives -= t0.filter_positives.min(d.filter_positives);
                d.false_positives -= t0.false_positives.min(d.false_positives);
                d.unfiltered_reads -= t0.unfiltered_reads.min(d.unfiltered_reads);
            }
            d
        })
        .collect();
    filterstore::AllocationModel::of(&tables, count, policy).map_or(f64::NAN, |m| m.predicted())
}

/// Filter bytes without the 64-byte headers (one per table whatever the allocation), per key.
fn body_bits_per_key(s: &Stats) -> f64 {
    let filters = s.tables.iter().filter(|t| t.filter_bytes > 0).count() as u64;
    let bytes: u64 = s.tables.iter().map(|t| t.filter_bytes).sum();
    bytes.saturating_sub(64 * filters) as f64 * 8.0 / s.table_keys().max(1) as f64
}

/// Rebalances to `policy`, then looks up `count` absent keys and counts what they wasted.
fn measure(
    store: &Store,
    policy: FilterPolicy,
    seed: u64,
    n: u64,
    count: u64,
) -> Result<Measured, CliError> {
    store.refilter_to(policy)?;
    let before = store.stats();
    let l = lookups(store, seed ^ 0xa110c, n, count, true)?;
    let after = store.stats();
    let wasted = (after.false_positives + after.unfiltered_reads)
        - (before.false_positives + before.unfiltered_reads);
    // The store's prediction for these lookups: each table's rate times its probes.
    let predicted: f64 = after
        .tables
        .iter()
        .zip(&before.tables)
        .map(|(t, t0)| {
            let probes = (t.filter_negatives + t.filter_positives)
                .saturating_sub(t0.filter_negatives + t0.filter_positives);
            t.theoretical_fpr * probes as f64
                + t.unfiltered_reads.saturating_sub(t0.unfiltered_reads) as f64
        })
        .sum();
    Ok(Measured {
        filter_bytes: after.tables.iter().map(|t| t.filter_bytes).sum(),
        bits_per_key: body_bits_per_key(&after),
        expected: after.expected_absent_reads(),
        wasted: wasted as f64 / count as f64,
        predicted: predicted / count as f64,
        model: model_between(&before, &after, &policy, count),
        ns: l.ns,
    })
}

/// The policy of `a` for the comparison: Monkey at `bits`, uniform at the memory Monkey's
/// filters took (`monkey_bits`, when measured).
fn policy_of(a: Allocation, kind: FilterKind, bits: f64, monkey_bits: Option<f64>) -> FilterPolicy {
    match a {
        Allocation::Monkey => a.policy(kind, bits),
        Allocation::Uniform => a.policy(kind, monkey_bits.unwrap_or(bits)),
    }
}

pub(super) fn allocations(
    store: &Store,
    b: &BenchEngine,
    count: u64,
    o: &mut String,
) -> Result<(), CliError> {
    use std::fmt::Write as _;
    let kind = b.filter;
    let n = b.count.max(1);
    // Monkey first, so that uniform can be given exactly the memory Monkey took.
    let mut order = b.allocation.clone();
    order.sort_by_key(|a| *a != Allocation::Monkey);
    order.dedup();
    let mut monkey_bits = None;
    let mut rows = Vec::new();
    for &a in &order {
        let m = measure(
            store,
            policy_of(a, kind, b.bits_per_key, monkey_bits),
            b.seed,
            n,
            count,
        )?;
        if a == Allocation::Monkey {
            monkey_bits = Some(m.bits_per_key);
        }
        rows.push((a, m));
    }
    let s = store.stats();
    let _ = writeln!(
        o,
        "\nallocations at equal filter memory ({kind}, {} bits per key; {count} absent lookups each; levels {}):",
        b.bits_per_key,
        levels_line(&s)
    );
    let _ = writeln!(
        o,
        "  {:<8}  {:>12}  {:>8}  {:>14}  {:>14}  {:>14}  {:>8}",
        "", "filter bytes", "bits/key", "expected reads", "wasted reads", "predicted", "ns/get"
    );
    for (a, m) in &rows {
        let _ = writeln!(
            o,
            "  {:<8}  {:>12}  {:>8.3}  {:>14.6}  {:>14.6}  {:>14.6}  {:>8.0}",
            a.name(),
            m.filter_bytes,
            m.bits_per_key,
            m.expected,
            m.wasted,
            m.predicted,
            m.ns
        );
    }
    let get = |want: Allocation| rows.iter().find(|(a, _)| *a == want).map(|(_, m)| m);
    if let (Some(u), Some(k)) = (get(Allocation::Uniform), get(Allocation::Monkey)) {
        let _ = writeln!(
            o,
            "  monkey ÷ uniform: wasted reads {:.3}× (expected {:.3}×), filter bytes {:.3}×, absent get time {:.3}×",
            k.wasted / u.wasted.max(f64::MIN_POSITIVE),
            k.expected / u.expected.max(f64::MIN_POSITIVE),
            k.filter_bytes as f64 / u.filter_bytes.max(1) as f64,
            k.ns / u.ns.max(f64::MIN_POSITIVE)
        );
        for (a, m) in [("uniform", u), ("monkey", k)] {
            let sigma = (m.wasted * count as f64).sqrt() / count as f64;
            let _ = writeln!(
                o,
                "  {a}: observed {:.6} vs predicted {:.6} ({:+.1} %, binomial σ {:.1} %); the coverage-weighted model {:.6} ({:+.1} %)",
                m.wasted,
                m.predicted,
                (m.wasted / m.predicted.max(f64::MIN_POSITIVE) - 1.0) * 100.0,
                sigma / m.predicted.max(f64::MIN_POSITIVE) * 100.0,
                m.model,
                (m.wasted / m.model.max(f64::MIN_POSITIVE) - 1.0) * 100.0
            );
        }
    }
    // The curve: expected wasted reads (summed FPR) against bits per key.
    // Per budget, per allocation: (filter bytes, body bits per key, summed FPR).
    type Row = Vec<(u64, f64, f64)>;
    let mut curve: Vec<(f64, Row)> = Vec::new();
    for &bits in &b.curve {
        let mut row = Vec::new();
        for &a in &order {
            store.refilter_to(a.policy(kind, bits))?;
            let s = store.stats();
            let bytes: u64 = s.tables.iter().map(|t| t.filter_bytes).sum();
            row.push((bytes, body_bits_per_key(&s), s.expected_absent_reads()));
        }
        curve.push((bits, row));
    }
    let _ = writeln!(
        o,
        "\nsummed FPR (expected wasted reads per absent lookup) against bits per key:"
    );
    let head: Vec<String> = order.iter().map(|a| format!("{:>22}", a.name())).collect();
    let _ = writeln!(o, "  {:>8}  {}", "budget", head.join("  "));
    for (bits, row) in &curve {
        let cells: Vec<String> = row
            .iter()
            .map(|(_, bpk, e)| format!("{e:>12.6} @ {bpk:>6.2}b"))
            .collect();
        let _ = writeln!(o, "  {bits:>8}  {}", cells.join("  "));
    }
    // Memory Monkey needs to waste what uniform wastes at --bits-per-key: interpolate
    // Monkey's curve in ln(summed FPR) against measured bits per key.
    let col = |want: Allocation| order.iter().position(|&a| a == want);
    if let (Some(ui), Some(mi), Some(u)) = (
        col(Allocation::Uniform),
        col(Allocation::Monkey),
        curve
            .iter()
            .find(|(bits, _)| (*bits - b.bits_per_key).abs() < 1e-9)
            .map(|(_, r)| r),
    ) {
        let (_, u_bits, u_e) = u[ui];
        let pts: Vec<(f64, f64)> = curve.iter().map(|(_, r)| (r[mi].1, r[mi].2.ln())).collect();
        let target = u_e.ln();
        let found = pts.windows(2).find_map(|w| {
            let ((b0, e0), (b1, e1)) = (w[0], w[1]);
            ((e0 - target) * (e1 - target) <= 0.0 && e0 != e1)
                .then(|| b0 + (b1 - b0) * (target - e0) / (e1 - e0))
        });
        match found {
            Some(m_bits) => {
                let _ = writeln!(
                    o,
                    "  monkey matches uniform's {u_e:.6} at {m_bits:.2} bits per key: {:.3}× the filter memory ({:.2} bits per key)",
                    m_bits / u_bits,
                    u_bits
                );
            }
            None => {
                let _ = writeln!(o, "  (the curve does not bracket uniform's {u_e:.6})");
            }
        }
    }
    Ok(())
}
