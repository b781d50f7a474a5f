//! `verify`: a full checksum pass over the store's files.

use clap::Args;
use filterstore::store::MANIFEST_NAME;
use filterstore::verify::verify_dir;
use filterstore::Error;

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
#[derive(Args, Debug)]
pub struct Verify {}

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
        Ok(code)
    }
}
