//! Which allocation a store's tree shape calls for: the coverage-weighted model of wasted
//! reads per absent lookup, for Monkey's allocation and for uniform filters at the same
//! memory, and the choice between them ([`AllocationChoice`]).
//!
//! An absent lookup reaches run `i` (an L0 table, or one deeper level) with probability
//! `reachᵢ` (a level whose tables cover only part of the key space is reached by fewer
//! lookups; L0 tables and levels the lookup stops before are not reached), and wastes a
//! read there with probability `εᵢ`. The model predicts `Σ reachᵢ · εᵢ`: uniform filters
//! have one `ε` at the memory of the store's policy; Monkey's are `filter::alloc::monkey`'s
//! for the runs' keys at the same memory. Monkey is chosen when it saves at least
//! [`SAVING`] of uniform's wasted reads (three or more deeper levels, or an L0 backlog).

use super::alloc::{self, FilterPolicy, SizeModel, MAX_FPR};
use super::FilterKind;

/// The share of uniform's wasted reads Monkey must save to be chosen (20 %).
pub const SAVING: f64 = 0.2;

/// The model's rates for runs of `keys` keys under `policy`'s memory: (uniform ε, Monkey's
/// ε per run; 1 for a run without a filter). `None` without per-table filters (no kind, or
/// the global filter).
pub fn rates(keys: &[u64], policy: &FilterPolicy) -> Option<(f64, Vec<f64>)> {
    let kind = policy.kind();
    if kind.per_table() == FilterKind::None {
        return None;
    }
    let model = SizeModel::of(kind);
    let (uniform, bits) = match *policy {
        FilterPolicy::Uniform { fpr, .. } => (fpr, model.bits(fpr)),
        FilterPolicy::Budget { bits_per_key, .. } => (policy.fpr(), bits_per_key),
    };
    let monkey = alloc::monkey(keys, bits, model)
        .into_iter()
        .map(|e| if e >= MAX_FPR { 1.0 } else { e })
        .collect();
    Some((uniform, monkey))
}

/// The predicted wasted reads per absent lookup, (uniform, Monkey), for runs of `keys` keys
/// reached by the fractions `reach` of absent lookups (a run of no keys is never a cost).
pub fn predict(keys: &[u64], reach: &[f64], policy: &FilterPolicy) -> Option<(f64, f64)> {
    let (uniform, monkey) = rates(keys, policy)?;
    let mut u = 0.0;
    let mut m = 0.0;
    for ((&n, &r), &e) in keys.iter().zip(reach).zip(&monkey) {
        if n > 0 {
            u += r * uniform;
            m += r * e;
        }
    }
    Some((u, m))
}

/// What a store chose at its last decision and why: the tree's shape and the model's
/// predictions (a manifest records it for a store that chooses by itself; format.md,
/// "Allocation choice").
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct AllocationChoice {
    /// L0 tables then.
    pub l0_tables: u32,
    /// Levels below L0 that held keys then.
    pub deeper_levels: u8,
    /// Whether the runs' reach was measured (lookups had been made) or assumed (every run
    /// reached by every absent lookup, the closed form).
    pub measured: bool,
    /// Predicted wasted reads per absent lookup with uniform filters.
    pub uniform: f64,
    /// Predicted wasted reads per absent lookup under Monkey's allocation.
    pub monkey: f64,
}

impl AllocationChoice {
    /// The choice for runs of `keys` keys (`l0` L0 tables first, then each deeper level),
    /// reached by `reach` (`None`: every run by every absent lookup), under the memory of
    /// `policy`. `None` without per-table filters.
    pub fn decide(
        keys: &[u64],
        l0: usize,
        reach: Option<&[f64]>,
        policy: &FilterPolicy,
    ) -> Option<AllocationChoice> {
        let every = vec![1.0; keys.len()];
        let (uniform, monkey) = predict(keys, reach.unwrap_or(&every), policy)?;
        let deeper = keys.iter().skip(l0).filter(|&&n| n > 0).count();
        Some(AllocationChoice {
            l0_tables: u32::try_from(l0).unwrap_or(u32::MAX),
            deeper_levels: u8::try_from(deeper).unwrap_or(u8::MAX),
            measured: reach.is_some(),
            uniform,
            monkey,
        })
    }

    /// Whether Monkey is chosen: it saves at least `SAVING` (20 %) of uniform's wasted reads.
    pub fn monkey_wins(&self) -> bool {
        self.uniform > 0.0 && self.monkey <= (1.0 - SAVING) * self.uniform
    }

    /// `"monkey"` or `"uniform"`.
    pub fn allocation(&self) -> &'static str {
        if self.monkey_wins() {
            "monkey"
        } else {
            "uniform"
        }
    }

    /// The policy chosen, at the memory of `policy`.
    pub fn policy(&self, policy: &FilterPolicy) -> FilterPolicy {
        let (kind, fpr) = (policy.kind(), policy.fpr());
        match (self.monkey_wins(), policy) {
            (true, FilterPolicy::Budget { .. }) | (false, FilterPolicy::Uniform { .. }) => *policy,
            (true, FilterPolicy::Uniform { .. }) => FilterPolicy::monkey_at(kind, fpr),
            (false, FilterPolicy::Budget { .. }) => FilterPolicy::Uniform { kind, fpr },
        }
    }
}

/// `monkey: 0.012 predicted wasted reads against uniform's 0.030 (0.40×; 2 L0 tables, 3
/// deeper levels, reach measured)`.
impl std::fmt::Display for AllocationChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {:.6} predicted wasted reads per absent lookup against uniform's {:.6} \
             ({:.3}×; {} L0 tables, {} deeper levels, reach {})",
            self.allocation(),
            self.monkey,
            self.uniform,
            self.monkey / self.uniform.max(f64::MIN_POSITIVE),
            self.l0_tables,
            self.deeper_levels,
            if self.measured { "measured" } else { "assumed" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bloom(fpr: f64) -> FilterPolicy {
        FilterPolicy::Uniform {
            kind: FilterKind::Bloom,
            fpr,
        }
    }

    #[test]
    fn deep_trees_and_l0_backlogs_choose_monkey_shallow_ones_uniform() {
        let p = bloom(0.01);
        // Four levels at T = 10, every one reached: Monkey at about 0.36× (the closed form).
        let deep = [1_000u64, 10_000, 100_000, 1_000_000];
        let c = AllocationChoice::decide(&deep, 0, None, &p).unwrap();
        assert!(c.monkey_wins(), "{c}");
        assert!(c.monkey < 0.45 * c.uniform && c.uniform > 0.039, "{c}");
        assert_eq!(c.deeper_levels, 4);
        assert_eq!(c.policy(&p).allocation(), "monkey");
        // An L0 backlog of eight small tables over one big level.
        let backlog = [100u64, 100, 100, 100, 100, 100, 100, 100, 1_000_000];
        let c = AllocationChoice::decide(&backlog, 8, None, &p).unwrap();
        assert!(c.monkey < 0.3 * c.uniform, "{c}");
        // One level: Monkey is uniform.
        let c = AllocationChoice::decide(&[1_000_000], 0, None, &p).unwrap();
        assert!(!c.monkey_wins(), "{c}");
        assert!((c.monkey - c.uniform).abs() < 1e-9);
        // Two levels, 12 % and 88 %, the smaller reached by a third of the lookups: the
        // saving is under 20 %.
        let two = [120_000u64, 880_000];
        let c = AllocationChoice::decide(&two, 0, Some(&[0.33, 1.0]), &p).unwrap();
        assert!(!c.monkey_wins(), "{c}");
        assert_eq!(c.policy(&p), p);
        // An empty tree costs nothing either way: uniform.
        let c = AllocationChoice::decide(&[], 0, None, &p).unwrap();
        assert!(!c.monkey_wins() && c.uniform == 0.0);
        // No per-table filter: nothing to choose.
        assert!(AllocationChoice::decide(
            &deep,
            0,
            None,
            &bloom(0.01).with_filter(FilterKind::Global, 0.01)
        )
        .is_none());
    }

    #[test]
    fn predictions_weigh_each_run_by_its_reach() {
        let p = bloom(0.02);
        let (u, m) = predict(&[1000, 0, 9000], &[0.5, 1.0, 0.25], &p).unwrap();
        // The empty run costs nothing; uniform is 0.75 runs' worth of ε.
        assert!((u - 0.75 * 0.02).abs() < 1e-12, "{u}");
        let (_, eps) = rates(&[1000, 0, 9000], &p).unwrap();
        assert!((m - (0.5 * eps[0] + 0.25 * eps[2])).abs() < 1e-12);
        // Monkey at the memory of a budget is that budget's split.
        let b = FilterPolicy::monkey_at(FilterKind::Bloom, 0.02);
        assert_eq!(rates(&[1000, 9000], &b), rates(&[1000, 9000], &p));
    }
}
