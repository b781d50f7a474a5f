//! What the store counts of its filters beyond their probes: the range filters' build time
//! ([`RangeBuildStats`], `Stats::range_build`) and the allocation model's predictions for
//! the current levels beside the observed wasted reads ([`AllocationModel`],
//! `Stats::allocation_model`); and each table's counters ([`TableStats`]).

use crate::filter::alloc::FilterPolicy;
use crate::filter::choice::{self, AllocationChoice};
use crate::filter::FilterKind;

/// Range filter builds, this process's, since the store was opened: at seals, in
/// compactions and by `refilter_ranges` (whose time includes reading the table's keys).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RangeBuildStats {
    /// Range filter blocks built.
    pub built: u64,
    /// CPU time spent building them, in nanoseconds: each piece of a build (keys pushed, a
    /// table read back, a pass of the block's build) timed by the CPU clock of the thread
    /// that ran it. Compare with the process's CPU time, not its wall time.
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

impl TableStats {
    /// Filter bits per key.
    pub fn bits_per_key(&self) -> f64 {
        if self.keys == 0 {
            0.0
        } else {
            self.filter_bytes as f64 * 8.0 / self.keys as f64
        }
    }
    /// Observed false-positive rate of this table's filter (see [`Stats::observed_fpr`](super::Stats::observed_fpr)).
    pub fn observed_fpr(&self) -> Option<f64> {
        observed_fpr(self.false_positives, self.filter_negatives)
    }
}

/// Observed false-positive rate: false positives ÷ (false positives + negatives), every
/// probe for a key the table does not hold; `None` before any.
pub(super) fn observed_fpr(false_positives: u64, negatives: u64) -> Option<f64> {
    let d = false_positives + negatives;
    (d > 0).then(|| false_positives as f64 / d as f64)
}

/// Counters and sizes of one table.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TableStats {
    /// Table file number.
    pub number: u64,
    /// Its level.
    pub level: u32,
    /// Filter kind in use: `global` for every table of a store with the global filter,
    /// `none` when the table's own filter is absent or damaged.
    pub filter_kind: FilterKind,
    /// Target false-positive rate.
    pub target_fpr: f64,
    /// Entries, tombstones included.
    pub keys: u64,
    /// Tombstones.
    pub tombstones: u64,
    /// Table file size.
    pub file_bytes: u64,
    /// Bytes of its data blocks before compression.
    pub data_bytes: u64,
    /// Bytes of its data blocks as stored (equal to `data_bytes` when no block is
    /// compressed).
    pub stored_data_bytes: u64,
    /// Filter file size.
    pub filter_bytes: u64,
    /// Heap memory the table's index takes.
    pub index_memory_bytes: u64,
    /// The filter's theoretical false-positive rate.
    pub theoretical_fpr: f64,
    /// Smallest key.
    pub min_key: Vec<u8>,
    /// Largest key.
    pub max_key: Vec<u8>,
    /// Filter "absent" answers.
    pub filter_negatives: u64,
    /// Filter "maybe" answers.
    pub filter_positives: u64,
    /// False positives.
    pub false_positives: u64,
    /// Reads of this table without a filter that found nothing.
    pub unfiltered_reads: u64,
    /// Data blocks read from its file (see [`Stats::data_block_reads`](super::Stats::data_block_reads)).
    pub data_block_reads: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Data blocks found in the block cache.
    pub block_cache_hits: u64,
    /// Data blocks looked for in the block cache and not found.
    pub block_cache_misses: u64,
    /// Why the recorded filter is not in use, if it is not.
    pub filter_problem: Option<String>,
    /// Range filter file size (0: none).
    pub range_filter_bytes: u64,
    /// Bits per key the range filter was built for (0: none).
    pub range_bits_per_key: f64,
    /// Why the recorded range filter is not in use, if it is not.
    pub range_problem: Option<String>,
}
