//! `keyspaces` and `drop-keyspace`: the store's named keyspaces (the global `--keyspace`
//! option picks one for every data command).

use clap::Args;

use super::{println, Access, CliError, Exit, Global, Run};

/// List the store's keyspaces, one a line: name, tables, table file bytes, filter bytes,
/// entries in tables and in the memtable. The default keyspace is listed first, as
/// `(default)`. Needs an existing store.
#[derive(Args, Debug)]
pub struct Keyspaces {}

impl Run for Keyspaces {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let mut g = g.clone();
        g.keyspace = None;
        let store = g.open(Access::Existing)?;
        for s in store.keyspace_stats() {
            let name = if s.id == 0 { "(default)" } else { &s.name };
            println(format_args!(
                "{name}\ttables {}\tfile_bytes {}\tfilter_bytes {}\ttable_keys {}\tmemtable_entries {}",
                s.tables, s.file_bytes, s.filter_bytes, s.table_keys, s.memtable_entries
            ))?;
        }
        Ok(Exit::Success)
    }
}

/// Remove keyspace NAME and its files (crash-safe: after a crash it is either whole or
/// gone). A keyspace created later under the same name starts empty. Exit 2 when the store
/// has no keyspace of that name.
#[derive(Args, Debug)]
pub struct DropKeyspace {
    /// The keyspace
    pub name: String,
}

impl Run for DropKeyspace {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let mut g = g.clone();
        g.keyspace = None;
        let store = g.open(Access::Existing)?;
        store.drop_keyspace(&self.name)?;
        Ok(Exit::Success)
    }
}
