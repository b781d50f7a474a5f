//! `bench engine --compare-global`: the loaded store's lookups through its tables' own
//! filters and through one global key-to-run filter, side by side (the filters swapped with
//! `refilter`, no data rewritten): filter probes, cache lines and block reads per get, and
//! filter memory.

use std::fmt::Write as _;

use filterstore::{FilterKind, Stats, Store};

use super::lookups::{lookups, Lookups};
use super::BenchEngine;
use crate::cli::CliError;

/// What one policy measured.
struct Measured {
    name: String,
    memory: u64,
    absent: Lookups,
    present: Lookups,
    /// Filter probes and cache lines per lookup (absent, present).
    probes: [f64; 2],
    lines: [f64; 2],
}

/// Filter bytes in memory: the global filter's, or the tables' filters'.
fn filter_memory(s: &Stats) -> u64 {
    match &s.global_filter {
        Some(g) => g.memory_bytes,
        None => s.tables.iter().map(|t| t.filter_bytes).sum(),
    }
}

/// Probes and lines of the global filter so far (0 without one).
fn global_counts(s: &Stats) -> (u64, u64) {
    s.global_filter
        .as_ref()
        .map_or((0, 0), |g| (g.probes, g.lines_touched))
}

fn measure(store: &Store, b: &BenchEngine, n: u64, count: u64) -> Result<Measured, CliError> {
    let s = store.stats();
    let name = match &s.global_filter {
        Some(g) => format!("global ({})", g.layout),
        None => format!("per-table {} at ε {}", store.filter().0, store.filter().1),
    };
    let mut probes = [0.0; 2];
    let mut lines = [0.0; 2];
    let mut got = Vec::new();
    for (i, absent) in [true, false].into_iter().enumerate() {
        let before = store.stats();
        let l = lookups(store, b.seed, n, count, absent)?;
        let after = store.stats();
        let (p0, l0) = global_counts(&before);
        let (p1, l1) = global_counts(&after);
        if after.global_filter.is_some() {
            probes[i] = (p1 - p0) as f64 / count as f64;
            lines[i] = (l1 - l0) as f64 / count as f64;
        } else {
            // A blocked or fuse probe reads one line, a Bloom probe up to k: counted as 1.
            probes[i] = l.probes;
            lines[i] = l.probes;
        }
        got.push(l);
    }
    let present = got.pop().expect("two runs");
    let absent = got.pop().expect("two runs");
    Ok(Measured {
        name,
        memory: filter_memory(&s),
        absent,
        present,
        probes,
        lines,
    })
}

/// Measures the store as it is, then with the other policy (global ↔ `b.filter`), and
/// writes both to `o`.
pub(super) fn compare_global(
    store: &Store,
    b: &BenchEngine,
    n: u64,
    count: u64,
    o: &mut String,
) -> Result<(), CliError> {
    let first = measure(store, b, n, count)?;
    let other = if store.stats().global_filter.is_some() {
        match b.filter {
            FilterKind::Global => FilterKind::BlockedBloom,
            k => k,
        }
    } else {
        FilterKind::Global
    };
    store.refilter(other, b.fpr)?;
    let second = measure(store, b, n, count)?;
    let keys = store.stats().table_keys().max(1) as f64;
    let _ = writeln!(
        o,
        "policies:   the same tables, filters swapped by refilter ({} keys in tables)",
        keys as u64
    );
    for m in [&first, &second] {
        let _ = writeln!(
            o,
            "  {:<34} absent {:>5.0} ns, {:.3} probes, {:.3} lines, {:.4} block reads | present {:>5.0} ns, {:.3} probes, {:.3} lines, {:.4} block reads | filter memory {} bytes ({:.2} bits/key)",
            m.name,
            m.absent.ns,
            m.probes[0],
            m.lines[0],
            m.absent.reads + m.absent.hits,
            m.present.ns,
            m.probes[1],
            m.lines[1],
            m.present.reads + m.present.hits,
            m.memory,
            m.memory as f64 * 8.0 / keys
        );
    }
    let _ = writeln!(
        o,
        "  second ÷ first: absent get {:.3}×, present get {:.3}×, memory {:.3}×",
        second.absent.ns / first.absent.ns,
        second.present.ns / first.present.ns,
        second.memory as f64 / first.memory.max(1) as f64
    );
    Ok(())
}
