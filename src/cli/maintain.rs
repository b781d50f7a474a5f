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

/// Rebuild the filter of every table as --filter KIND at --fpr E, without rewriting data.
///
/// --filter is required (before or after the command); --fpr defaults to the store's ε.
/// The store's default filter (chosen at creation) is not changed. Prints the number of
/// tables refiltered. Needs an existing store.
#[derive(Args, Debug)]
pub struct Refilter {}

impl Run for Refilter {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let Some(kind) = g.filter else {
            return Err(CliError::usage(
                "refilter needs --filter KIND (none, bloom, blocked-bloom, cuckoo or binary-fuse)",
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
