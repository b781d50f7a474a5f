//! `flush`, `compact`, `refilter`: table maintenance. They need an existing store.

use clap::Args;

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

/// Merge all tables into one sorted run, dropping overwritten values and deletions.
///
/// The run is written as tables of about 64 MiB at one level (the deepest that holds data,
/// or the first whose target size holds it all). Prints the table count before and after,
/// as `tables: BEFORE -> AFTER`. The memtable is not flushed first (use `flush`). The new
/// tables get the --filter filter. Needs an existing store.
#[derive(Args, Debug)]
pub struct Compact {}

impl Run for Compact {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let store = g.open(Access::Existing)?;
        let before = store.stats().tables.len();
        store.compact()?;
        let after = store.stats().tables.len();
        println(format_args!("tables: {before} -> {after}"))?;
        Ok(Exit::Success)
    }
}

/// Rebuild the filter of every table as --filter KIND at --fpr E, without rewriting data;
/// or, with --bits-per-key B, rebalance the filters to a memory budget.
///
/// --filter is required unless --bits-per-key is given; --fpr defaults to the store's ε.
/// With --bits-per-key B [--allocation monkey|uniform], the allocation of B bits per key is
/// computed for the levels as they are now (monkey: each level's ε proportional to its
/// keys; uniform: one ε for all) and only the filters whose size would change by more than
/// 5 % are rebuilt (the kind: --filter, else the store's default). The store's default
/// filter (chosen at creation) is not changed. Prints the number of tables refiltered.
/// Needs an existing store.
#[derive(Args, Debug)]
pub struct Refilter {}

impl Run for Refilter {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        if let Some(policy) = g.policy() {
            let store = g.open(Access::Existing)?;
            let r = store.rebalance(policy)?;
            let how = g.allocation.unwrap_or(super::Allocation::Monkey).name();
            println(format_args!(
                "refiltered {} of {} tables: {}, {} bits per key, {how} allocation",
                r.rebuilt.len(),
                r.rebuilt.len() + r.kept,
                policy.kind(),
                g.bits_per_key.unwrap_or(0.0)
            ))?;
            return Ok(Exit::Success);
        }
        let Some(kind) = g.filter else {
            return Err(CliError::usage(
                "refilter needs --filter KIND (none, bloom, blocked-bloom, cuckoo or binary-fuse) \
                 or --bits-per-key B",
            ));
        };
        let store = g.open(Access::Existing)?;
        let (_, fpr) = store.filter(); // --fpr, else the store's default
        store.refilter(kind, fpr)?;
        println(format_args!(
            "refiltered {} tables: {kind}, fpr {}",
            store.stats().tables.len(),
            rate(fpr)
        ))?;
        Ok(Exit::Success)
    }
}
