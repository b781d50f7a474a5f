//! `verify`: a full checksum pass over the store's files.

use clap::Args;
use filterstore::store::MANIFEST_NAME;
use filterstore::verify::verify_dir;
use filterstore::{Error, Store};
use std::path::Path;

use super::{println, require_store, CliError, Exit, Global, Run};

/// Read every file of the store and check every checksum; exit 3 when anything is corrupt.
///
/// Each problem is printed on stderr, one line each, naming the file and the byte offset:
/// `store: corruption in DIR/000004.sst: offset 123: REASON`. A torn log tail (damage at the
/// end of a log with no valid record after it, dropped when the store opens) is a warning, not
/// a problem: `store: warning: torn tail in DIR/000005.wal: offset 456: 14 bytes dropped
/// (REASON)`. A summary goes to stdout. Exit 0 when intact (warnings or not), 3 when
/// corruption was found, 2 for other errors (for example an unreadable file). The store is not opened (no lock is taken, nothing is written), so
/// verify also works on a store that will not open.
///
/// With --filters, a store whose files are intact is then opened read-only and every table's
/// keys are asked of the filters a lookup or scan would ask (each keyspace's global filter, or
/// the table's own point filter, and its range filter): a filter that lacks a key, which would
/// make the key read as absent, is corruption (exit 3) naming the table. It reads every table
/// again.
#[derive(Args, Debug)]
pub struct Verify {
    /// Also check every table's filters against its keys (opens the store read-only).
    #[arg(long)]
    filters: bool,
}

impl Run for Verify {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let dir = g.dir();
        require_store(&dir)?;
        let manifest = dir.join(MANIFEST_NAME);
        if !manifest.exists() {
            // require_store found data files: the same damage opening the store reports.
            return Err(Error::corrupt(0, "data files present but no MANIFEST")
                .in_file(manifest, 0)
                .into());
        }
        let report = verify_dir(&dir)?;
        let mut code = Exit::Success;
        for p in &report.problems {
            let e = CliError::from_ref(p);
            if e.code == Exit::Corrupt || code == Exit::Success {
                code = e.code;
            }
            eprintln!("store: {}", e.message);
        }
        for w in &report.warnings {
            eprintln!("store: warning: {w}");
        }
        let state = match (code, report.warnings.len()) {
            (Exit::Success, 0) => "intact".to_string(),
            (Exit::Success, 1) => "intact, 1 warning".to_string(),
            (Exit::Success, n) => format!("intact, {n} warnings"),
            _ => format!("{} problems", report.problems.len()),
        };
        println(format_args!(
            "checked {} files, {} blocks, {} entries, {} log records: {state}",
            report.files, report.blocks, report.entries, report.wal_records
        ))?;
        if self.filters {
            if code != Exit::Success {
                eprintln!("store: filters not checked: the files are not intact");
                return Ok(code);
            }
            return check_filters(&dir);
        }
        Ok(code)
    }
}

/// `--filters`: every keyspace's tables against their filters, through a read-only handle.
fn check_filters(dir: &Path) -> Result<Exit, CliError> {
    let store = Store::open_read_only(dir).map_err(|e| {
        CliError::from(e).context(format_args!("cannot open store {}", dir.display()))
    })?;
    let mut spaces = vec![(String::from("default"), store.clone())];
    for name in store.keyspaces() {
        if let Some(ks) = store.existing_keyspace(&name) {
            spaces.push((name, ks.as_store().clone()));
        }
    }
    let mut code = Exit::Success;
    for (name, s) in spaces {
        match s.check_filters() {
            Ok(c) => println(format_args!(
                "filters of keyspace {name:?}: {} keys of {} tables found (global filter: {} tables, own filters: {}, unfiltered: {}; range filters: {})",
                c.keys,
                c.tables,
                c.global_tables,
                c.own_filter_tables,
                c.unfiltered_tables,
                c.range_filter_tables
            ))?,
            Err(e) => {
                let e = CliError::from(e).context(format_args!("keyspace {name:?}"));
                eprintln!("store: {}", e.message);
                code = e.code;
            }
        }
    }
    Ok(code)
}
