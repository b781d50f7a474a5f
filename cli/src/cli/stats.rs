//! `stats`: store-wide and per-table figures, as text or as JSON.

use std::fmt::Write as _;
use std::io::Write;

use clap::Args;
use filterstore::{FilterPolicy, Store};
use serde_json::{json, Value};

use super::{rate, stdout, Access, CliError, Exit, Global, Run};

/// Print store-wide, per-level and per-table figures: the store's filter policy, tables,
/// keys, bytes, filter kind, ε, bits per key, filter bytes, and the lookup counters.
///
/// The filter policy is the one the store records (chosen at creation, replaced by
/// refilter): the filter kind and how its memory is split across levels, monkey (each
/// level's ε proportional to its keys, at a budget in bits per key, shown with the uniform ε
/// of equal memory) or uniform (one ε for every table). --json gives it as default_filter:
/// kind, fpr (the uniform ε of equal memory), allocation and bits_per_key (the budget;
/// null under uniform).
///
/// Per level: keys, filter bytes, bits per key, target ε and theoretical FPR (both weighted
/// by the tables' keys), observed FPR. Store-wide: the expected wasted block reads of an
/// absent lookup, the sum of the theoretical FPRs of the tables it probes (every L0 table,
/// one table per deeper level), beside the observed figure (wasted reads per lookup in this
/// process).
///
/// Data bytes: the tables' data blocks before and after compression (per table and in
/// total). Block cache: its capacity and the bytes it holds now (this process's cache),
/// hits and misses.
///
/// The counters (lookups, filter negatives/positives, false positives, observed FPR,
/// data-block reads from table files, block cache hits and misses, bytes read and written,
/// and the range filters' probes by scans, tables skipped and false positives) are shown
/// twice: over the store's lifetime,
/// summed across every process that used it, and for this process alone. The lifetime
/// totals are saved in the store's COUNTERS file at the end of every flush and when a
/// process closes the store, so a crash loses the counts since the last flush or close.
///
/// --json prints one JSON object. Keys (min_key, max_key) are given twice: as a JSON
/// string when the key is valid UTF-8 (null otherwise) and always as lowercase hex
/// (min_key_hex, max_key_hex). Rates that do not exist yet (observed FPR before any
/// probe) are null.
#[derive(Args, Debug)]
pub struct Stats {
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

impl Run for Stats {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let store = g.open(Access::Read)?;
        let text = if self.json {
            json(&store, g)
        } else {
            text(&store, g)
        };
        let mut out = stdout();
        out.write_all(text.as_bytes())?;
        out.flush()?;
        Ok(Exit::Success)
    }
}

fn text(store: &Store, g: &Global) -> String {
    let s = store.stats();
    let policy = store.recorded_policy();
    let mut o = String::new();
    let file_bytes: u64 = s.tables.iter().map(|t| t.file_bytes).sum();
    let filter_bytes: u64 = s.tables.iter().map(|t| t.filter_bytes).sum();
    let tombstones: u64 = s.tables.iter().map(|t| t.tombstones).sum();
    let _ = writeln!(o, "store:          {}", g.dir().display());
    let _ = writeln!(o, "filter policy:  {policy}; recorded in the store");
    if let Some(gf) = &s.global_filter {
        let _ = writeln!(
            o,
            "global filter:  {}, {} bytes in memory ({:.2} bits per key in tables), {} entries \
             of {} it was sized for, {} stashed; {} probes reading {} cache lines this open; {}",
            gf.layout,
            gf.memory_bytes,
            gf.memory_bytes as f64 * 8.0 / s.table_keys().max(1) as f64,
            gf.entries,
            gf.capacity,
            gf.stashed,
            gf.probes,
            gf.lines_touched,
            if gf.from_checkpoint {
                "read from its checkpoint at open"
            } else {
                "built from the tables' keys"
            }
        );
    }
    let _ = writeln!(
        o,
        "filters:        {:.2} bits per key ({} point filter bytes, global and per table, \
         over {} keys in tables)",
        s.filter_bits_per_key(),
        s.point_filter_bytes(),
        s.table_keys()
    );
    let _ = writeln!(
        o,
        "tables:         {} ({} keys incl. {} tombstones, {} table bytes, {} filter bytes)",
        s.tables.len(),
        s.table_keys(),
        tombstones,
        file_bytes,
        filter_bytes
    );
    let _ = writeln!(
        o,
        "data blocks:    {} bytes before compression, {} as stored ({})",
        s.data_bytes(),
        s.stored_data_bytes(),
        ratio(s.stored_data_bytes(), s.data_bytes())
    );
    let _ = writeln!(
        o,
        "memtable:       {} entries (not yet in a table)",
        s.memtable_entries
    );
    let _ = writeln!(
        o,
        "range deletes:  {} range tombstones live",
        s.lifecycle.range_tombstones_live
    );
    let sn = &s.snapshots;
    let _ = writeln!(
        o,
        "snapshots:      {} open{}",
        sn.open,
        match sn.oldest_age {
            Some(age) => format!(
                ", oldest {:.1} s; {} tables ({} bytes) and {} memtable bytes kept only for them",
                age.as_secs_f64(),
                sn.pinned_tables,
                sn.pinned_table_bytes,
                sn.memtable_bytes
            ),
            None => String::new(),
        }
    );
    let _ = writeln!(
        o,
        "block cache:    {} of {} bytes held",
        s.block_cache_bytes, s.block_cache_capacity
    );
    let l = &s.lifetime;
    let _ = writeln!(
        o,
        "lifetime:       since the store was created (saved at every flush and close; \
         a crash loses the counts since the last one):"
    );
    let _ = writeln!(
        o,
        "                lookups {}, filter negatives {}, filter positives {}, \
         false positives {}, observed FPR {}, data-block reads {}, block cache hits {} \
         and misses {}, bytes read {}, bytes written {} (by the user {})",
        l.lookups,
        l.filter_negatives,
        l.filter_positives,
        l.false_positives,
        fpr_of(l.false_positives, l.filter_negatives),
        l.data_block_reads,
        l.block_cache_hits,
        l.block_cache_misses,
        l.bytes_read,
        l.wal_bytes_written + l.flush_bytes_written + l.compaction_bytes_written,
        l.user_bytes_written
    );
    if let Some(p) = &s.lifetime_problem {
        let _ = writeln!(o, "                (counting from this open: {p})");
    }
    let _ = writeln!(
        o,
        "this process:   lookups {}, filter negatives {}, filter positives {}, \
         false positives {}, observed FPR {}, data-block reads {}, block cache hits {} \
         and misses {}",
        s.lookups,
        s.filter_negatives,
        s.filter_positives,
        s.false_positives,
        fpr_of(s.false_positives, s.filter_negatives),
        s.data_block_reads,
        s.block_cache_hits,
        s.block_cache_misses
    );
    let ranged = s.tables.iter().filter(|t| t.range_filter_bytes > 0).count();
    let _ = writeln!(
        o,
        "range filters:  {ranged} of {} tables, {} bytes ({:.2} bits per key); lifetime: \
         {} probes by scans, {} tables skipped, {} false positives (observed FPR {}); \
         this process: {} probes, {} skipped, {} false positives",
        s.tables.len(),
        s.range_filter_bytes,
        s.range_filter_bytes as f64 * 8.0 / s.table_keys().max(1) as f64,
        l.range_probes,
        l.range_skipped,
        l.range_false_positives,
        fpr_of(l.range_false_positives, l.range_skipped),
        s.range_probes,
        s.range_skipped,
        s.range_false_positives,
    );
    let _ = writeln!(
        o,
        "range builds:   {} built, {:.3} s of build CPU time (this process)",
        s.range_build.built,
        s.range_build.nanos as f64 / 1e9
    );
    for t in s.tables.iter().filter(|t| t.range_problem.is_some()) {
        let p = t.range_problem.as_deref().unwrap_or_default();
        let _ = writeln!(
            o,
            "                table {}: range filter not in use: {p}",
            t.number
        );
    }
    let _ = writeln!(
        o,
        "absent lookup:  {:.6} expected wasted block reads (sum of ε over the tables it probes), \
         observed {}",
        s.expected_absent_reads(),
        observed_absent(&s)
    );
    model_lines(&s, &mut o);
    if !s.levels.is_empty() {
        let _ = writeln!(
            o,
            "\n{:>5}  {:>6}  {:>10}  {:>12}  {:>12}  {:>12}  {:>8}  {:>10}  {:>10}  {:>10}",
            "level",
            "tables",
            "keys",
            "file bytes",
            "target bytes",
            "filter bytes",
            "bits/key",
            "target ε",
            "theor. FPR",
            "obs. FPR"
        );
    }
    for l in &s.levels {
        let target = if l.level == 0 {
            "-".to_string()
        } else {
            l.target_bytes.to_string()
        };
        let _ = writeln!(
            o,
            "{:>5}  {:>6}  {:>10}  {:>12}  {:>12}  {:>12}  {:>8.2}  {:>10.3e}  {:>10.3e}  {:>10}",
            format!("L{}", l.level),
            l.tables,
            l.keys,
            l.file_bytes,
            target,
            l.filter_bytes,
            l.bits_per_key(),
            l.target_fpr,
            l.theoretical_fpr,
            l.observed_fpr()
                .map_or("-".to_string(), |f| format!("{f:.3e}"))
        );
    }
    if !s.tables.is_empty() {
        let _ = writeln!(
            o,
            "\n{:>6}  {:>5}  {:<13}  {:>8}  {:>9}  {:>10}  {:>11}  {:>11}  {:>11}  {:>12}  {:>8}  {:>10}  key range",
            "table",
            "level",
            "filter",
            "fpr",
            "keys",
            "tombstones",
            "file bytes",
            "data bytes",
            "stored",
            "filter bytes",
            "bits/key",
            "theor. FPR"
        );
    }
    for t in &s.tables {
        let _ = writeln!(
            o,
            "{:>06}  {:>5}  {:<13}  {:>8}  {:>9}  {:>10}  {:>11}  {:>11}  {:>11}  {:>12}  {:>8.2}  {:>10.3e}  {} .. {}",
            t.number,
            format!("L{}", t.level),
            t.filter_kind.name(),
            rate(t.target_fpr),
            t.keys,
            t.tombstones,
            t.file_bytes,
            t.data_bytes,
            t.stored_data_bytes,
            t.filter_bytes,
            t.bits_per_key(),
            t.theoretical_fpr,
            show_key(&t.min_key),
            show_key(&t.max_key)
        );
        if let Some(p) = &t.filter_problem {
            let _ = writeln!(o, "        filter not in use: {p}");
        }
    }
    o
}

/// The allocation model's lines: predictions for Monkey and uniform beside the observed
/// figure, the choice they give, and each run's reach.
fn model_lines(s: &filterstore::Stats, o: &mut String) {
    let Some(m) = &s.allocation_model else {
        return;
    };
    let c = &m.choice;
    let observed = m
        .observed
        .map_or("- (no lookups in this process)".to_string(), |x| {
            format!(
                "{x:.6} ({} predicted {:.6}, {})",
                m.policy.allocation(),
                m.predicted(),
                ratio_of(m.observed_ratio())
            )
        });
    let _ = writeln!(
        o,
        "allocation model: predicted wasted reads per absent lookup at the memory of ε = {:.3e} \
         on every table: monkey {:.6}, uniform {:.6} (reach {}); observed {observed}; \
         the model chooses {}",
        m.uniform_fpr,
        c.monkey,
        c.uniform,
        if c.measured { "measured" } else { "assumed 1" },
        c
    );
    for (i, r) in m.runs.iter().enumerate() {
        let _ = writeln!(
            o,
            "                run {i} (L{}): {} keys, reach {:.4}, monkey ε {:.3e}, uniform ε {:.3e}, \
             observed wasted {:.6}",
            r.level, r.keys, r.reach, r.monkey_fpr, m.uniform_fpr, r.observed
        );
    }
}

/// `0.973×`, or "-".
fn ratio_of(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |x| format!("{x:.3}× the prediction"))
}

/// Observed wasted reads per lookup beside the store's prediction for those lookups, or a
/// note that this process made none.
fn observed_absent(s: &filterstore::Stats) -> String {
    match (s.observed_absent_reads(), s.predicted_absent_reads()) {
        (Some(o), Some(p)) => format!("{o:.6} per lookup (predicted for those lookups {p:.6})"),
        _ => "- (no lookups in this process)".to_string(),
    }
}

/// `part ÷ whole` as "0.613×", or "-" when `whole` is 0.
fn ratio(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_string()
    } else {
        format!("{:.3}×", part as f64 / whole as f64)
    }
}

/// The observed false-positive rate, or "-" before any probe of a key the table lacked.
fn fpr_of(false_positives: u64, negatives: u64) -> String {
    let d = false_positives + negatives;
    if d == 0 {
        "-".to_string()
    } else {
        format!("{:.6}", false_positives as f64 / d as f64)
    }
}

/// A key for a terminal: printable UTF-8 as is, the rest escaped (`\t`, `\u{1b}`, `\xff`).
fn show_key(k: &[u8]) -> String {
    let mut s = String::new();
    for chunk in k.utf8_chunks() {
        s.extend(chunk.valid().escape_debug());
        for b in chunk.invalid() {
            let _ = write!(s, "\\x{b:02x}");
        }
    }
    s
}

fn json(store: &Store, g: &Global) -> String {
    let s = store.stats();
    let policy = store.recorded_policy();
    let bits = match policy {
        FilterPolicy::Budget { bits_per_key, .. } => num(bits_per_key),
        FilterPolicy::Uniform { .. } => None,
    };
    let sum = |f: fn(&filterstore::TableStats) -> u64| s.tables.iter().map(f).sum::<u64>();
    let levels: Vec<Value> = s
        .levels
        .iter()
        .map(|l| {
            json!({
                "level": l.level,
                "tables": l.tables,
                "keys": l.keys,
                "file_bytes": l.file_bytes,
                "target_bytes": (l.level > 0).then_some(l.target_bytes),
                "filter_bytes": l.filter_bytes,
                "bits_per_key": num(l.bits_per_key()),
                "target_fpr": num(l.target_fpr),
                "theoretical_fpr": num(l.theoretical_fpr),
                "observed_fpr": l.observed_fpr().and_then(num),
                "expected_absent_reads": num(l.expected_reads),
            })
        })
        .collect();
    let tables: Vec<Value> = s
        .tables
        .iter()
        .map(|t| {
            json!({
                "number": t.number,
                "level": t.level,
                "filter_kind": t.filter_kind.name(),
                "target_fpr": num(t.target_fpr),
                "keys": t.keys,
                "tombstones": t.tombstones,
                "file_bytes": t.file_bytes,
                "data_bytes": t.data_bytes,
                "stored_data_bytes": t.stored_data_bytes,
                "filter_bytes": t.filter_bytes,
                "bits_per_key": num(t.bits_per_key()),
                "theoretical_fpr": num(t.theoretical_fpr),
                "observed_fpr": t.observed_fpr().and_then(num),
                "filter_negatives": t.filter_negatives,
                "false_positives": t.false_positives,
                "data_block_reads": t.data_block_reads,
                "block_cache_hits": t.block_cache_hits,
                "block_cache_misses": t.block_cache_misses,
                "min_key": std::str::from_utf8(&t.min_key).ok(),
                "min_key_hex": hex(&t.min_key),
                "max_key": std::str::from_utf8(&t.max_key).ok(),
                "max_key_hex": hex(&t.max_key),
                "filter_problem": t.filter_problem,
                "range_filter_bytes": t.range_filter_bytes,
                "range_bits_per_key": num(t.range_bits_per_key),
                "range_problem": t.range_problem,
            })
        })
        .collect();
    let mut v = json!({
        "dir": g.dir().to_string_lossy(),
        "default_filter": {
            "kind": policy.kind().name(),
            "fpr": num(policy.fpr()),
            "allocation": policy.allocation(),
            "bits_per_key": bits,
        },
        "global_filter": s.global_filter.as_ref().map(|gf| json!({
            "layout": gf.layout,
            "memory_bytes": gf.memory_bytes,
            "entries": gf.entries,
            "capacity": gf.capacity,
            "stashed": gf.stashed,
            "probes": gf.probes,
            "lines_touched": gf.lines_touched,
            "from_checkpoint": gf.from_checkpoint,
        })),
        "table_count": s.tables.len(),
        "keys": s.table_keys(),
        "tombstones": sum(|t| t.tombstones),
        "file_bytes": sum(|t| t.file_bytes),
        "data_bytes": s.data_bytes(),
        "stored_data_bytes": s.stored_data_bytes(),
        "filter_bytes": sum(|t| t.filter_bytes),
        "range_filter_bytes": s.range_filter_bytes,
        "block_cache": {
            "capacity_bytes": s.block_cache_capacity,
            "held_bytes": s.block_cache_bytes,
        },
        "memtable_entries": s.memtable_entries,
        "memtable_bytes": s.memtable_bytes,
        "snapshots": {
            "open": s.snapshots.open,
            "oldest_age_ms": s.snapshots.oldest_age.map(|a| a.as_millis() as u64),
            "pinned_tables": s.snapshots.pinned_tables,
            "pinned_table_bytes": s.snapshots.pinned_table_bytes,
            "memtable_bytes": s.snapshots.memtable_bytes,
        },
        "lifecycle": {
            "range_tombstones_live": s.lifecycle.range_tombstones_live,
            "scope_of_the_others": "this process",
            "entries_expired": s.lifecycle.entries_expired,
            "bytes_reclaimed_by_expiry": s.lifecycle.bytes_reclaimed_by_expiry,
            "tables_dropped_whole": s.lifecycle.tables_dropped_whole,
        },
        "counters": {
            "scope": "this process",
            "lookups": s.lookups,
            "filter_negatives": s.filter_negatives,
            "filter_positives": s.filter_positives,
            "false_positives": s.false_positives,
            "observed_fpr": s.observed_fpr().and_then(num),
            "unfiltered_reads": s.unfiltered_reads,
            "data_block_reads": s.data_block_reads,
            "block_cache_hits": s.block_cache_hits,
            "block_cache_misses": s.block_cache_misses,
            "bytes_read": s.bytes_read,
            "commit_groups": s.commit_groups,
            "commit_writes": s.commit_writes,
            "range_probes": s.range_probes,
            "range_skipped": s.range_skipped,
            "range_false_positives": s.range_false_positives,
        },
        "absent_lookup": {
            "expected_reads": num(s.expected_absent_reads()),
            "observed_reads": s.observed_absent_reads().and_then(num),
            "predicted_reads": s.predicted_absent_reads().and_then(num),
        },
        "lifetime": {
            "scope": "since the store was created; saved at every flush and close",
            "lookups": s.lifetime.lookups,
            "filter_negatives": s.lifetime.filter_negatives,
            "filter_positives": s.lifetime.filter_positives,
            "false_positives": s.lifetime.false_positives,
            "unfiltered_reads": s.lifetime.unfiltered_reads,
            "data_block_reads": s.lifetime.data_block_reads,
            "block_cache_hits": s.lifetime.block_cache_hits,
            "block_cache_misses": s.lifetime.block_cache_misses,
            "bytes_read": s.lifetime.bytes_read,
            "user_bytes_written": s.lifetime.user_bytes_written,
            "wal_bytes_written": s.lifetime.wal_bytes_written,
            "flush_bytes_written": s.lifetime.flush_bytes_written,
            "compaction_bytes_written": s.lifetime.compaction_bytes_written,
            "compaction_bytes_read": s.lifetime.compaction_bytes_read,
            "flushes": s.lifetime.flushes,
            "compactions": s.lifetime.compactions,
            "range_probes": s.lifetime.range_probes,
            "range_skipped": s.lifetime.range_skipped,
            "range_false_positives": s.lifetime.range_false_positives,
            "problem": s.lifetime_problem,
        },
        "levels": levels,
        "tables": tables,
    });
    // Beside the macro's object (its recursion limit is reached above).
    v["point_filter_bytes"] = json!(s.point_filter_bytes());
    v["filter_bits_per_key"] = json!(num(s.filter_bits_per_key()));
    v["range_build"] = json!({
        "scope": "this process",
        "built": s.range_build.built,
        "nanos": s.range_build.nanos,
    });
    v["allocation_model"] = json!(model_json(&s));
    let mut out = serde_json::to_string_pretty(&v).unwrap_or_default();
    out.push('\n');
    out
}

/// The allocation model as JSON (`null` without per-table filters).
fn model_json(s: &filterstore::Stats) -> Option<serde_json::Value> {
    s.allocation_model.as_ref().map(|m| {
        serde_json::json!({
                "policy": m.policy.allocation(),
                "uniform_fpr": num(m.uniform_fpr),
                "reach_measured": m.choice.measured,
                "predicted_uniform": num(m.choice.uniform),
                "predicted_monkey": num(m.choice.monkey),
                "predicted": num(m.predicted()),
                "observed": m.observed.and_then(num),
                "chooses": m.choice.allocation(),
                "runs": m.runs.iter().map(|r| serde_json::json!({
                    "level": r.level,
                    "keys": r.keys,
                    "reach": num(r.reach),
                    "monkey_fpr": num(r.monkey_fpr),
                    "observed": num(r.observed),
                })).collect::<Vec<_>>(),
        })
    })
}

/// A JSON number, or `None` (null) for NaN and infinities, which JSON cannot express.
fn num(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}
