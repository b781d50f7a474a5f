//! The check after a reopen: every acknowledged write there, each write in flight all or
//! nothing, a full scan, and `verify`.

use std::collections::BTreeMap;
use std::path::Path;

use filterstore::{Store, SyncPolicy};

use super::workload::{options, show, Model, Tally};
use crate::cli::{error_chain, CliError};

/// Reopens the store in `dir` and checks every key of `must` (a key of a write in flight,
/// `in_flight`, may instead read that write's value, and each write in flight must be there
/// whole or not at all), a full scan, and `verify`.
pub(super) fn check_reopened(
    dir: &Path,
    must: &Model,
    in_flight: &[Model],
    t: &mut Tally,
) -> Result<(), CliError> {
    if !dir.join(filterstore::store::MANIFEST_NAME).exists() {
        if must.values().any(Option::is_some) {
            t.problem("the MANIFEST is gone after acknowledged writes".to_string());
        }
        return Ok(());
    }
    let s = match Store::open(dir, options(SyncPolicy::EveryWrite)) {
        Ok(s) => s,
        Err(e) => {
            t.problem(format!("reopen failed: {}", error_chain(&e)));
            return Ok(());
        }
    };
    let acked = |k: &[u8]| must.get(k).and_then(Option::as_ref);
    let fine = |k: &[u8], got: Option<&Vec<u8>>| {
        got == acked(k)
            || in_flight
                .iter()
                .any(|w| w.get(k).is_some_and(|alt| got == alt.as_ref()))
    };
    let may = in_flight.iter().flat_map(BTreeMap::keys);
    for k in must.keys().chain(may) {
        let got = s.get(k)?.map(Vec::from);
        if !fine(k, got.as_ref()) {
            t.problem(format!(
                "after reopen, {} reads {} but {} was acknowledged",
                String::from_utf8_lossy(k),
                show(got.as_deref()),
                show(must.get(k).and_then(Option::as_deref))
            ));
        }
        t.checked += 1;
    }
    // A write in flight is all or nothing: of the keys it changes, all read its values or
    // none does.
    for w in in_flight {
        let changes: Vec<_> = w.iter().filter(|(k, v)| v.as_ref() != acked(k)).collect();
        let mut applied = 0;
        for (k, v) in &changes {
            applied += usize::from(s.get(k)?.as_deref() == v.as_deref());
        }
        if applied != 0 && applied != changes.len() {
            t.problem(format!(
                "after reopen, {applied} of the {} changes of a write in flight are there",
                changes.len()
            ));
        }
    }
    for e in s.scan::<&[u8]>(..) {
        let (k, v) = e?;
        let (k, v) = (k.to_vec(), v.to_vec());
        if !fine(&k, Some(&v)) {
            t.problem(format!(
                "after reopen, a scan shows {} = {} (acknowledged: {})",
                String::from_utf8_lossy(&k),
                show(Some(&v)),
                show(must.get(&k).and_then(Option::as_deref))
            ));
        }
    }
    drop(s);
    let r = filterstore::verify::verify_dir(dir)?;
    for p in &r.problems {
        t.problem(format!("verify: {}", error_chain(p)));
    }
    Ok(())
}
