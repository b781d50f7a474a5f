//! `repair`: salvage a store that refuses to open.

use clap::Args;

use super::{println, require_store, Access, CliError, Exit, Global, Run};

/// Salvage a store that refuses to open: keep every table block, filter and log record that
/// checks out, write a new MANIFEST, and move what cannot be used into DIR/lost/ (nothing is
/// deleted).
///
/// Prints one line per file kept or rebuilt (`kept …`, `rebuilt …`) and per damaged range
/// dropped, with file and offset (`dropped DIR/000004.sst: offset 4096: 4100 bytes: REASON`),
/// then one per file moved into lost/, then a summary. A store that needs no repair (verify
/// finds it intact; torn log tails are dropped by opening) is left byte for byte unchanged.
/// Exit 0 when the store opens afterwards, 3 when nothing could be saved or it still does not
/// open, 2 for other errors (no store, the store is in use, an I/O error). Records after
/// mid-log damage are kept when they check out; what repair can lose is listed in
/// docs/reliability.md.
#[derive(Args, Debug)]
pub struct Repair {}

impl Run for Repair {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let dir = g.dir();
        require_store(&dir)?;
        let report = filterstore::repair(&dir).map_err(|e| {
            CliError::from(e).context(format_args!("cannot repair {}", dir.display()))
        })?;
        if !report.needed {
            println(format_args!(
                "{}: intact, nothing to repair ({} files checked)",
                dir.display(),
                report.verify.files
            ))?;
            return Ok(Exit::Success);
        }
        for k in &report.kept {
            println(k)?;
        }
        for d in &report.dropped {
            println(d)?;
        }
        for (from, to) in &report.moved {
            println(format_args!("moved {} to {}", from.display(), to.display()))?;
        }
        for p in &report.verify.problems {
            eprintln!("store: after repair: {}", super::error_chain(p));
        }
        println(format_args!(
            "repaired {}: {} kept, {} dropped, {} moved to lost/",
            dir.display(),
            report.kept.len(),
            report.dropped.len(),
            report.moved.len()
        ))?;
        if report.saved_nothing() {
            eprintln!("store: nothing could be saved");
            return Ok(Exit::Corrupt);
        }
        // The promise: the store opens now (read-only: nothing is started or written).
        let store = g.open(Access::Read).map_err(|mut e| {
            e.code = Exit::Corrupt;
            e
        })?;
        drop(store);
        Ok(if report.verify.is_intact() {
            Exit::Success
        } else {
            Exit::Corrupt
        })
    }
}
