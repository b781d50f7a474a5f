//! A merge's run ids in the global filter (`Inner::global_runs`).

use std::sync::Arc;

use super::l0_id;
use crate::compaction::run::Runs;
use crate::error::{Error, Result};
use crate::filter::global::RunId;
use crate::global_index::level_run;
use crate::store::Inner;
use crate::version::{TableHandle, Version};

impl Inner {
    /// The run ids of a merge's sources (`tables[i]` the tables of source i, from level
    /// `levels[i]`) and of its output level, when `v` has a global filter: `None` for a
    /// source whose tables have filters of their own, and for the output when `own` (its
    /// tables get filters of their own: the deepest level's). A merge within L0 (output
    /// level 0) writes under its oldest input's id: its output takes the inputs' place in
    /// L0, and its keys are relabelled to that id as a merge into a level relabels them to
    /// the level's (a new id when no input has one).
    pub(in crate::store) fn global_runs(
        &self,
        v: &Version,
        sources: &[(usize, &Arc<TableHandle>)],
        output: usize,
        own: bool,
    ) -> Result<Option<Runs>> {
        let Some(g) = v.global() else {
            return Ok(None);
        };
        let run_of = |l: usize, t: &TableHandle| -> Result<Option<RunId>> {
            if t.own_filter() {
                return Ok(None);
            }
            let r = if l == 0 { t.run() } else { level_run(l) };
            r.map(Some).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "table {} of level {l} has no run in the global filter",
                    t.record.number
                ))
            })
        };
        let mut runs = Vec::with_capacity(sources.len());
        for &(l, t) in sources {
            runs.push(run_of(l, t)?);
        }
        let output =
            match output {
                _ if own => None,
                // The sources are in L0's order, newest first.
                0 => Some(match runs.iter().rev().flatten().next() {
                    Some(&r) => r,
                    None => l0_id(&mut g.filter.writer()),
                }),
                l => Some(level_run(l).ok_or_else(|| {
                    Error::InvalidArgument(format!("no run id for level {output}"))
                })?),
            };
        Ok(Some(Runs {
            sources: runs,
            output,
        }))
    }
}
