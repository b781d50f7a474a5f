//! What the store counts of its filters beyond their probes: the range filters' build time
//! ([`RangeBuildStats`], `Stats::range_build`) and the allocation model's predictions for
//! the current levels beside the observed wasted reads ([`AllocationModel`],
//! `Stats::allocation_model`); and the per-level and per-table rates' helpers.

use super::stats::{observed_fpr, LevelStats, Stats, TableStats};
use crate::filter::alloc::FilterPolicy;
use crate::filter::choice::{self, AllocationChoice};

/// Range filter builds, this process's, since the store was opened: at seals, in
/// compactions and by `refilter_ranges` (whose time includes reading the table's keys).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RangeBuildStats {
    /// Range filter blocks built.
    pub built: u64,
    /// Time spent building them, in nanoseconds of one thread (builds run in parallel
    /// with table writes: compare with the process's CPU time, not its wall time).
    pub nanos: u64,
}

/// One run of [`AllocationModel`]: an L0 table, or a deeper level.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RunModel {
    /// Its level.
    pub level: u32,
    /// Keys in the run.
    pub keys: u64,
    /// The fraction of lookups that reached it (probes ÷ lookups; 1 before any lookup).
    pub reach: f64,
    /// Monkey's rate for it at the policy's memory (uniform's is the model's `uniform_fpr`).
    pub monkey_fpr: f64,
    /// Wasted reads it cost per lookup (false positives and unfiltered reads that found
    /// nothing ÷ lookups; 0 before any lookup).
    pub observed: f64,
}

/// The coverage-weighted model of wasted reads per absent lookup for the store's current
/// levels (`filter/choice.rs`): Monkey's allocation and uniform filters, at the memory of
/// the store's filter policy, each run weighted by the fraction of lookups that reached it,
/// beside what the lookups observed. After lookups of absent keys the observed figure is
/// what the prediction of the allocation in use should match.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct AllocationModel {
    /// The policy whose memory the model spends (the store's).
    pub policy: FilterPolicy,
    /// Uniform filters' rate at that memory.
    pub uniform_fpr: f64,
    /// Each L0 table, then each deeper level.
    pub runs: Vec<RunModel>,
    /// The predictions and the choice they give (Monkey when it saves at least 20 %).
    pub choice: AllocationChoice,
    /// Observed wasted reads per lookup (`None` before any lookup).
    pub observed: Option<f64>,
}

impl AllocationModel {
    /// The model for `tables` (each with its level and counters) after `lookups` lookups,
    /// under `policy`'s memory; `None` without per-table filters.
    pub fn of(tables: &[TableStats], lookups: u64, policy: &FilterPolicy) -> Option<Self> {
        let mut runs: Vec<RunModel> = Vec::new();
        let mut l0 = 0;
        for t in tables {
            let probes = t.filter_negatives + t.filter_positives + t.unfiltered_reads;
            let wasted = t.false_positives + t.unfiltered_reads;
            let same_level = runs.last().filter(|r| t.level > 0 && r.level == t.level);
            if same_level.is_none() {
                l0 += usize::from(t.level == 0);
                runs.push(RunModel {
                    level: t.level,
                    keys: 0,
                    reach: 0.0,
                    monkey_fpr: 1.0,
                    observed: 0.0,
                });
            }
            let r = runs.last_mut().expect("a run was pushed");
            r.keys += t.keys;
            r.reach += probes as f64;
            r.observed += wasted as f64;
        }
        for r in &mut runs {
            (r.reach, r.observed) = match lookups {
                0 => (1.0, 0.0),
                n => (r.reach / n as f64, r.observed / n as f64),
            };
        }
        let keys: Vec<u64> = runs.iter().map(|r| r.keys).collect();
        let reach: Vec<f64> = runs.iter().map(|r| r.reach).collect();
        let measured = (lookups > 0).then_some(&reach[..]);
        let choice = AllocationChoice::decide(&keys, l0, measured, policy)?;
        let (uniform_fpr, monkey) = choice::rates(&keys, policy)?;
        for (r, e) in runs.iter_mut().zip(monkey) {
            r.monkey_fpr = e;
        }
        let observed = (lookups > 0).then(|| runs.iter().map(|r| r.observed).sum());
        Some(AllocationModel {
            policy: *policy,
            uniform_fpr,
            runs,
            choice,
            observed,
        })
    }

    /// The model's prediction for the allocation of the policy in use.
    pub fn predicted(&self) -> f64 {
        match self.policy {
            FilterPolicy::Uniform { .. } => self.choice.uniform,
            FilterPolicy::Budget { .. } => self.choice.monkey,
        }
    }

    /// Observed ÷ predicted for the allocation in use (`None` before any lookup or with a
    /// prediction of 0).
    pub fn observed_ratio(&self) -> Option<f64> {
        let p = self.predicted();
        self.observed.filter(|_| p > 0.0).map(|o| o / p)
    }
}

impl LevelStats {
    /// Filter bits per key.
    pub fn bits_per_key(&self) -> f64 {
        let keys = self.keys.max(1) as f64;
        self.filter_bytes as f64 * 8.0 / keys
    }
    /// Observed false-positive rate of the level's filters (see [`Stats::observed_fpr`]).
    pub fn observed_fpr(&self) -> Option<f64> {
        observed_fpr(self.false_positives, self.filter_negatives)
    }
}

impl TableStats {
    /// Filter bits per key.
    pub fn bits_per_key(&self) -> f64 {
        if self.keys == 0 {
            0.0
        } else {
            self.filter_bytes as f64 * 8.0 / self.keys as f64
        }
    }
    /// Observed false-positive rate of this table's filter (see [`Stats::observed_fpr`]).
    pub fn observed_fpr(&self) -> Option<f64> {
        observed_fpr(self.false_positives, self.filter_negatives)
    }
}

impl Stats {
    /// The allocation model for these counters' lookups (see [`AllocationModel`]).
    pub(super) fn model(&self, policy: &FilterPolicy) -> Option<AllocationModel> {
        AllocationModel::of(&self.tables, self.lookups, policy)
    }
}
