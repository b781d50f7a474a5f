//! `flush`, `compact`, `refilter`: table maintenance. They need an existing store.

use clap::Args;
use filterstore::FilterPolicy;

use super::{println, rate, Access, CliError, Exit, Global, Run};

/// Seal the memtable into a table (fronted by the --filter filter) and make it durable.
///
/// Compactions the new table makes due run before the command exits. Prints the number of
/// tables afterwards. Needs an existing store.
#[derive(Args, Debug)]
pub struct Flush {}

impl Run for Flush {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let store = g.open(Access::Existing)?;
        store.flush()?;
        super::settle(&store)?;
        println(format_args!("tables: {}", store.stats().tables.len()))?;
        Ok(Exit::Success)
    }
}

/// Make a checkpoint of the store in DEST: a store directory holding every write made so
/// far (`Store::checkpoint` makes one while a program's writers run).
///
/// The memtable is flushed, then the table files are hard-linked into DEST (copied when DEST
/// is on another file system) beside a manifest naming exactly them; no log is copied. DEST
/// must not exist; it appears only once complete and durable (a temporary
/// `.NAME.checkpoint-*` directory beside it is used until then). Restore by opening DEST as
/// a store (`--dir DEST`), or by copying it back in place of the lost store. Prints the
/// files linked and copied, and the time the checkpoint took. Needs an existing store.
#[derive(Args, Debug)]
pub struct Checkpoint {
    /// The new directory (must not exist; its parent must)
    pub dest: std::path::PathBuf,
}

impl Run for Checkpoint {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let store = g.open(Access::Existing)?;
        let t = std::time::Instant::now();
        let r = store.checkpoint_with_report(&self.dest)?;
        println(format_args!(
            "checkpoint {}: {} files linked, {} copied ({} bytes), {} bytes written, in {:.1} ms",
            self.dest.display(),
            r.linked_files,
            r.copied_files,
            r.copied_bytes,
            r.written_bytes,
            t.elapsed().as_secs_f64() * 1e3
        ))?;
        Ok(Exit::Success)
    }
}

/// Merge all tables into one sorted run, dropping overwritten values and deletions.
///
/// The run is written as tables of about 64 MiB at one level (the deepest that holds data,
/// or the first whose target size holds it all). Prints the table count before and after,
/// as `tables: BEFORE -> AFTER`. The memtable is not flushed first (use `flush`). The new
/// tables get the --filter filter. Needs an existing store.
///
/// With --from A --to B, only the tables that hold keys from A up to B (not included) are
/// merged down, level by level, after a flush: what reclaims a range removed by
/// `delete-range` or `delete --prefix` at once.
#[derive(Args, Debug)]
pub struct Compact {
    /// Compact only the keys from this one on (with --to)
    #[arg(long, requires = "to", value_name = "A")]
    pub from: Option<String>,
    /// Compact only the keys below this one (with --from)
    #[arg(long, requires = "from", value_name = "B")]
    pub to: Option<String>,
}

impl Run for Compact {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let store = g.open(Access::Existing)?;
        let before = store.stats().tables.len();
        match (&self.from, &self.to) {
            (Some(a), Some(b)) => store.compact_range(a.as_bytes(), b.as_bytes())?,
            _ => store.compact()?,
        }
        let after = store.stats().tables.len();
        println(format_args!("tables: {before} -> {after}"))?;
        Ok(Exit::Success)
    }
}

/// Rebuild the filters of the tables without rewriting data, and record the filter policy
/// they follow as the store's.
///
/// With --filter KIND [--fpr E]: every table's filter is rebuilt as KIND, under the store's
/// allocation (monkey: each level's ε proportional to its keys, at the memory ε = E on every
/// table would take; uniform: every table at E); --fpr defaults to the store's ε.
/// --allocation monkey|uniform changes the allocation (the kind: --filter, else the store's).
/// With --bits-per-key B [--allocation monkey|uniform] the allocation of B bits per key is
/// computed for the levels as they are now and only the filters whose size would change by
/// more than 5 % are rebuilt (the kind: --filter, else the store's). Either way the store
/// records the new policy (the kind, the allocation and its ε or budget): tables sealed
/// later follow it. `store stats` shows it. Prints the number of tables refiltered.
/// With --range-bits B (alone or with the above): every table's range filter is rebuilt at B
/// bits per key, added where a table has none, or with 0 removed; tables whose range filter
/// already has B bits per key are left alone.
/// With --auto: the store chooses the allocation for its levels as they are now (Monkey where
/// the coverage-weighted model predicts it saves at least 20 % of uniform's wasted reads per
/// absent lookup, uniform elsewhere, at the memory of the store's policy), rebuilds the
/// filters that change, and records the choice with what it predicted (`store stats`,
/// "allocation model"). Needs an existing store.
#[derive(Args, Debug)]
pub struct Refilter {
    /// Let the store choose the allocation by its model (Store::rebalance_auto)
    #[arg(long)]
    auto: bool,
}

impl Run for Refilter {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        if self.auto {
            if g.filter.is_some()
                || g.allocation.is_some()
                || g.bits_per_key.is_some()
                || g.range_bits.is_some()
            {
                return Err(CliError::usage(
                    "refilter --auto chooses the allocation itself, at the memory of the store's policy: \
                     give no --filter, --allocation, --bits-per-key or --range-bits with it",
                ));
            }
            let store = g.open(Access::Existing)?;
            if store.stats().allocation_model.is_none() {
                println(format_args!(
                    "nothing to choose: the store's filters are not per table"
                ))?;
                return Ok(Exit::Success);
            }
            let r = store.rebalance_auto()?;
            let Some(c) = store.allocation_choice() else {
                return Err(CliError::usage("the store recorded no allocation choice"));
            };
            println(format_args!(
                "chose {}: predicted wasted reads per absent lookup {:.6} with Monkey, {:.6} uniform ({:.3}×); refiltered {} of {} tables",
                c.allocation(),
                c.monkey,
                c.uniform,
                c.monkey / c.uniform.max(f64::MIN_POSITIVE),
                r.rebuilt.len(),
                r.rebuilt.len() + r.kept,
            ))?;
            return Ok(Exit::Success);
        }
        if let Some(bits) = g.range_bits {
            let store = g.open(Access::Existing)?;
            let n = store.refilter_ranges(bits)?;
            let what = if bits == 0.0 {
                "removed".to_string()
            } else {
                format!("{bits} bits per key")
            };
            println(format_args!("range filters of {n} tables: {what}"))?;
            if g.filter.is_none() && g.allocation.is_none() && g.bits_per_key.is_none() {
                return Ok(Exit::Success);
            }
        }
        if let (Some(policy), Some(bits)) = (g.policy(), g.bits_per_key) {
            let store = g.open(Access::Existing)?;
            let r = store.rebalance(policy)?;
            let how = g.allocation.unwrap_or(super::Allocation::Monkey).name();
            println(format_args!(
                "refiltered {} of {} tables: {}, {bits} bits per key, {how} allocation",
                r.rebuilt.len(),
                r.rebuilt.len() + r.kept,
                policy.kind(),
            ))?;
            return Ok(Exit::Success);
        }
        if g.filter.is_none() && g.allocation.is_none() {
            return Err(CliError::usage(
                "refilter needs --filter KIND (none, bloom, blocked-bloom, cuckoo, binary-fuse or global), \
                 --allocation monkey|uniform, --bits-per-key B, --range-bits B or --auto",
            ));
        }
        let store = g.open(Access::Existing)?;
        // --allocation, else the store's allocation at --filter/--fpr (the handle's policy;
        // a keyspace's handle follows its recorded policy, so --filter/--fpr apply here).
        let policy = g.policy().unwrap_or_else(|| {
            let p = store.policy();
            match (&g.keyspace, g.filter) {
                (Some(_), Some(kind)) => p.with_filter(kind, g.fpr.unwrap_or(p.fpr())),
                _ => p,
            }
        });
        store.refilter_to(policy)?;
        let tables = store.stats().tables.len();
        match policy {
            FilterPolicy::Uniform { kind, fpr } => println(format_args!(
                "refiltered {tables} tables: {kind}, fpr {}",
                rate(fpr)
            ))?,
            FilterPolicy::Budget { .. } => {
                println(format_args!("refiltered {tables} tables: {policy}"))?
            }
        }
        Ok(Exit::Success)
    }
}
