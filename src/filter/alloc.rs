//! Filter memory across levels: what false-positive rate ε each table's filter gets.
//!
//! An absent lookup probes every L0 table and one table per deeper level; each probe costs a
//! wasted data-block read with the probability ε of that table's filter. Filter memory is
//! `Σ nᵢ · bits(εᵢ)` over the runs. Monkey (Dayan, Athanassoulis, Idreos, SIGMOD 2017)
//! minimises the summed ε, the expected wasted reads per absent lookup, for a fixed memory:
//! with `bits(ε) = a · ln(1/ε) + b` (every kind here, see [`SizeModel`]) the Lagrange
//! condition `1 = λ' · nᵢ · a / εᵢ` gives **εᵢ ∝ nᵢ**, clamped at 1 (a run whose ε would reach
//! 1 gets no filter and no memory). This module is pure: sizes in, rates out.
//!
//! ```text
//! runs:  L0 t3 | L0 t2 | L1  | L2   | L3        (keys nᵢ)
//! ε:     c·n₁  | c·n₂  | c·n₃| c·n₄ | min(1, c·n₅)     c chosen so Σ nᵢ·bits(εᵢ) = budget
//! ```

use super::FilterKind;

/// How the filters of new and rebalanced tables are sized.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FilterPolicy {
    /// Every table's filter at the same rate (the store's behaviour before budgets).
    Uniform {
        /// Filter kind.
        kind: FilterKind,
        /// Target false-positive rate of every filter, strictly between 0 and 1.
        fpr: f64,
    },
    /// A memory budget of `bits_per_key` × keys in tables, split across the runs an absent
    /// lookup probes as Monkey prescribes (`filter::alloc::monkey`, see `docs/engine.md`).
    Budget {
        /// Filter kind.
        kind: FilterKind,
        /// Average filter bits per key over all tables (≥ 0).
        bits_per_key: f64,
    },
}

impl FilterPolicy {
    /// The filter kind.
    pub fn kind(&self) -> FilterKind {
        match *self {
            FilterPolicy::Uniform { kind, .. } | FilterPolicy::Budget { kind, .. } => kind,
        }
    }

    /// The uniform policy that spends the same memory as `Budget { kind, bits_per_key }`:
    /// every filter at the rate whose modelled size is `bits_per_key`.
    pub fn uniform_at_bits(kind: FilterKind, bits_per_key: f64) -> FilterPolicy {
        FilterPolicy::Uniform {
            kind,
            fpr: SizeModel::of(kind).fpr_for_bits(bits_per_key).min(MAX_FPR),
        }
    }

    /// Monkey's allocation of the memory that `kind` at `fpr` on every table would take:
    /// `Budget { kind, bits_per_key }` with the bits per key `kind` costs at `fpr` under its
    /// size model (what `store --allocation monkey` gives a new store). Without a filter
    /// there is no memory to split: `FilterKind::None` gives `Uniform`.
    ///
    /// ```
    /// use filterstore::{FilterKind, FilterPolicy};
    /// let p = FilterPolicy::monkey_at(FilterKind::Bloom, (-10.0 * 2f64.ln().powi(2)).exp());
    /// let FilterPolicy::Budget { bits_per_key, .. } = p else { unreachable!() };
    /// assert!((bits_per_key - 10.0).abs() < 1e-9);
    /// ```
    pub fn monkey_at(kind: FilterKind, fpr: f64) -> FilterPolicy {
        if kind == FilterKind::None {
            return FilterPolicy::Uniform { kind, fpr };
        }
        FilterPolicy::Budget {
            kind,
            bits_per_key: SizeModel::of(kind).bits(fpr),
        }
    }

    /// The rate of a uniform policy of the same memory: `fpr` itself for `Uniform`, the rate
    /// whose modelled size is the budget for `Budget` (at most 0.999).
    pub fn fpr(&self) -> f64 {
        match *self {
            FilterPolicy::Uniform { fpr, .. } => fpr,
            FilterPolicy::Budget { kind, bits_per_key } => {
                SizeModel::of(kind).fpr_for_bits(bits_per_key).min(MAX_FPR)
            }
        }
    }

    /// The same allocation for filters of `kind` at the memory of `fpr` on every table:
    /// `Uniform { kind, fpr }`, or [`FilterPolicy::monkey_at`] for a budget.
    pub fn with_filter(&self, kind: FilterKind, fpr: f64) -> FilterPolicy {
        match self {
            FilterPolicy::Uniform { .. } => FilterPolicy::Uniform { kind, fpr },
            FilterPolicy::Budget { .. } => FilterPolicy::monkey_at(kind, fpr),
        }
    }

    /// How memory is split: `"uniform"` or `"monkey"` (the names `store --allocation`
    /// takes).
    pub fn allocation(&self) -> &'static str {
        match self {
            FilterPolicy::Uniform { .. } => "uniform",
            FilterPolicy::Budget { .. } => "monkey",
        }
    }
}

/// `uniform, bloom at ε = 0.01` or `monkey, bloom at 10 bits per key (the memory of ε =
/// 0.0082 on every table)` (the budget to three decimals, that rate to three digits).
impl std::fmt::Display for FilterPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            FilterPolicy::Uniform { kind, fpr } => write!(f, "uniform, {kind} at ε = {fpr}"),
            FilterPolicy::Budget { kind, bits_per_key } => write!(
                f,
                "monkey, {kind} at {} bits per key (the memory of ε = {} on every table)",
                (bits_per_key * 1000.0).round() / 1000.0,
                three_digits(self.fpr())
            ),
        }
    }
}

/// `x` (positive) rounded to three significant digits.
fn three_digits(x: f64) -> f64 {
    if !(x > 0.0 && x.is_finite()) {
        return x;
    }
    let scale = 10f64.powi(2 - x.log10().floor() as i32);
    (x * scale).round() / scale
}

/// Largest rate a filter is built for; an allocation at or above it means "no filter".
pub const MAX_FPR: f64 = 0.999;

/// Bits per key of a kind as a function of its rate: `a · ln(1/ε) + b` for ε < 1, and 0 for
/// ε = 1 (no filter).
///
/// - Bloom: `a = 1/ln²2`, `b = 0` (the classic optimum, `−ln ε / ln²2`).
/// - Blocked Bloom: a line fitted to [`super::blocked::params`] over ε = 3·10⁻²..10⁻⁴
///   (within 2.5 % there; the blocking overhead grows as ε shrinks, from 1.04× the classic
///   size at 10⁻² to 1.12× at 10⁻⁴). Its `b` is negative, so below 0.56 the line would
///   promise a filter for no memory: rates above [`SizeModel::max_fpr`] are not used.
/// - Cuckoo: `f / 0.955` bits for `f = log2(8/ε)` fingerprint bits at load 0.955.
/// - Binary fuse: `1.125 · log2(1/ε)` (its array has 1.125 slots per key). The builder only
///   has 8-, 16- and 32-bit fingerprints, so the rates it reaches are steps of this line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SizeModel {
    /// Bits per key per unit of `ln(1/ε)`.
    pub a: f64,
    /// Bits per key at ε → 1 (fingerprint filters' constant).
    pub b: f64,
}

impl SizeModel {
    /// The model of `kind` (`None` has no filter: every rate costs nothing).
    pub fn of(kind: FilterKind) -> SizeModel {
        let ln2 = std::f64::consts::LN_2;
        match kind {
            // No per-table filter: the global filter's memory is the store's, not a table's.
            FilterKind::None | FilterKind::Global => SizeModel { a: 0.0, b: 0.0 },
            FilterKind::Bloom => SizeModel {
                a: 1.0 / (ln2 * ln2),
                b: 0.0,
            },
            FilterKind::BlockedBloom => SizeModel {
                a: BLOCKED_A,
                b: BLOCKED_B,
            },
            FilterKind::Cuckoo => SizeModel {
                a: 1.0 / (ln2 * super::cuckoo::TARGET_LOAD),
                b: 3.0 / super::cuckoo::TARGET_LOAD,
            },
            FilterKind::BinaryFuse => SizeModel {
                a: 1.125 / ln2,
                b: 0.0,
            },
        }
    }

    /// Bits per key at rate `fpr` (0 at ε ≥ 1, never negative).
    pub fn bits(&self, fpr: f64) -> f64 {
        if fpr >= 1.0 {
            0.0
        } else {
            (self.a * (1.0 / fpr.max(f64::MIN_POSITIVE)).ln() + self.b).max(0.0)
        }
    }

    /// The largest rate below 1 the model prices: where the line meets 0 bits, or 1.
    pub fn max_fpr(&self) -> f64 {
        if self.a <= 0.0 {
            1.0
        } else {
            (self.b / self.a).exp().min(1.0)
        }
    }

    /// The rate `bits` per key buy; 1 (no filter) for no bits, or for fewer than a
    /// fingerprint filter's constant `b`.
    pub fn fpr_for_bits(&self, bits: f64) -> f64 {
        if self.a <= 0.0 || bits.is_nan() || bits <= self.b.max(0.0) {
            return 1.0;
        }
        (-(bits - self.b) / self.a).exp().min(1.0)
    }
}

/// Blocked Bloom's slope and intercept (see [`SizeModel`]); `size_model_fits_the_builders`
/// checks them against the builder.
const BLOCKED_A: f64 = 2.5;
const BLOCKED_B: f64 = -1.45;

/// Monkey's allocation: for runs of `keys[i]` keys (each probed once by an absent lookup),
/// the rates that minimise `Σ εᵢ` subject to `Σ keys[i] · model.bits(εᵢ) ≤ bits_per_key ·
/// Σ keys[i]`. Returned in the order given; each in (0, 1], 1 meaning "no filter". A run of
/// no keys gets 1 (it costs nothing either way).
///
/// The closed form `εᵢ = min(1, c · nᵢ)`: the largest runs are the ones clamped, so for each
/// count `j` of largest runs left without a filter the rest share the budget with
/// `ln c = −(M − b·N' + a·Σ nᵢ ln nᵢ) / (a·N')` over the remaining keys `N'`; the cheapest
/// feasible `j` wins (with `b = 0` that is the first `j` whose rates stay below 1; a
/// fingerprint filter's constant can make dropping one more run cheaper).
pub fn monkey(keys: &[u64], bits_per_key: f64, model: SizeModel) -> Vec<f64> {
    let mut eps = vec![1.0; keys.len()];
    let total: f64 = keys.iter().map(|&n| n as f64).sum();
    if total == 0.0 || bits_per_key.is_nan() || bits_per_key <= 0.0 || model.a <= 0.0 {
        return eps;
    }
    let budget = bits_per_key * total;
    let max_ln = model.max_fpr().ln();
    // Runs with keys, largest first.
    let mut order: Vec<usize> = (0..keys.len()).filter(|&i| keys[i] > 0).collect();
    order.sort_by(|&x, &y| keys[y].cmp(&keys[x]).then(x.cmp(&y)));
    let mut best: Option<(f64, usize, f64)> = None; // (cost, j, ln c)
    for j in 0..=order.len() {
        let rest = &order[j..];
        if rest.is_empty() {
            let cost = j as f64;
            if best.is_none_or(|(c, _, _)| cost < c) {
                best = Some((cost, j, f64::NEG_INFINITY));
            }
            break;
        }
        let n: f64 = rest.iter().map(|&i| keys[i] as f64).sum();
        let sum_nln: f64 = rest
            .iter()
            .map(|&i| keys[i] as f64 * (keys[i] as f64).ln())
            .sum();
        let ln_c = -(budget - model.b * n + model.a * sum_nln) / (model.a * n);
        // Feasible when every remaining rate is one the model prices (the largest
        // remaining is rest[0]).
        let largest = (keys[rest[0]] as f64).ln() + ln_c;
        if largest >= max_ln {
            continue;
        }
        let cost = j as f64
            + rest
                .iter()
                .map(|&i| (ln_c + (keys[i] as f64).ln()).exp())
                .sum::<f64>();
        if best.is_none_or(|(c, _, _)| cost < c) {
            best = Some((cost, j, ln_c));
        }
        if model.b == 0.0 {
            // Without a fixed cost the first feasible j is optimal.
            break;
        }
    }
    if let Some((_, j, ln_c)) = best {
        for &i in &order[j..] {
            eps[i] = (ln_c + (keys[i] as f64).ln()).exp().min(model.max_fpr());
        }
    }
    eps
}

/// `Σ keys[i] · model.bits(eps[i])`: the memory an allocation spends, in bits.
#[cfg(test)]
pub fn memory_bits(keys: &[u64], eps: &[f64], model: SizeModel) -> f64 {
    keys.iter()
        .zip(eps)
        .map(|(&n, &e)| n as f64 * model.bits(e))
        .sum()
}

/// The expected wasted reads per absent lookup of an allocation: `Σ εᵢ` over runs with keys.
#[cfg(test)]
pub fn summed_fpr(keys: &[u64], eps: &[f64]) -> f64 {
    keys.iter()
        .zip(eps)
        .filter(|(&n, _)| n > 0)
        .map(|(_, &e)| e)
        .sum()
}

/// Whether a filter sized for `old` should be rebuilt for `new`: their modelled sizes differ
/// by more than [`MATERIAL`] of the larger (so a change from or to "no filter" always is).
pub fn material(model: SizeModel, old: f64, new: f64) -> bool {
    let (a, b) = (model.bits(old), model.bits(new));
    let big = a.max(b);
    big > 0.0 && (a - b).abs() > MATERIAL * big
}

/// A rebalance rebuilds a filter only when its size would change by more than this fraction
/// (5 %: about 0.5 bits per key at 10 bits per key, a change in ε of about 1.25×).
pub const MATERIAL: f64 = 0.05;

#[cfg(test)]
mod tests {
    use super::*;

    fn bloom() -> SizeModel {
        SizeModel::of(FilterKind::Bloom)
    }

    /// Brute force: the best of a fine grid over how the budget is split (two or three runs),
    /// every run's rate the one its share buys.
    fn brute(keys: &[u64], bpk: f64, m: SizeModel) -> f64 {
        let total: f64 = keys.iter().map(|&n| n as f64).sum();
        let budget = bpk * total;
        let cost = |shares: &[f64]| -> f64 {
            keys.iter()
                .zip(shares)
                .map(|(&n, &s)| m.fpr_for_bits(s * budget / n as f64))
                .sum()
        };
        let steps = if keys.len() == 2 { 200_000 } else { 1500 };
        let mut best = f64::INFINITY;
        for i in 0..=steps {
            let s0 = i as f64 / steps as f64;
            if keys.len() == 2 {
                best = best.min(cost(&[s0, 1.0 - s0]));
            } else {
                for k in 0..=(steps - i) {
                    let s1 = k as f64 / steps as f64;
                    best = best.min(cost(&[s0, s1, (1.0 - s0 - s1).max(0.0)]));
                }
            }
        }
        best
    }

    #[test]
    fn closed_form_matches_brute_force() {
        let cases: &[(&[u64], f64)] = &[
            (&[1000, 10_000], 10.0),
            (&[100, 10_000], 3.0),
            (&[5000, 5000], 8.0),
            (&[10, 100, 1000], 10.0),
            (&[1000, 1000, 100_000], 2.0),
            (&[300, 2000, 9000], 0.5),
        ];
        for kind in [
            FilterKind::Bloom,
            FilterKind::Cuckoo,
            FilterKind::BlockedBloom,
        ] {
            let m = SizeModel::of(kind);
            for &(keys, bpk) in cases {
                if kind == FilterKind::BlockedBloom && bpk < 2.0 {
                    // Blocked Bloom's line is fitted for ε ≤ 0.03; below 0.56 it would buy a
                    // filter for no memory, which a grid search happily exploits.
                    continue;
                }
                let eps = monkey(keys, bpk, m);
                let got = summed_fpr(keys, &eps);
                let want = brute(keys, bpk, m);
                assert!(
                    memory_bits(keys, &eps, m) <= bpk * keys.iter().sum::<u64>() as f64 * 1.000_001,
                    "{kind} {keys:?}: over budget"
                );
                // The grid is coarse for three runs; the closed form must never be worse
                // than it by more than the grid's resolution, and never better than the true
                // optimum (which the grid approaches from above).
                assert!(
                    got <= want * 1.002 + 1e-12,
                    "{kind} {keys:?} at {bpk}: closed form {got}, brute force {want}"
                );
                assert!(got >= want * 0.99 - 1e-9, "{kind} {keys:?}: {got} < {want}");
            }
        }
    }

    #[test]
    fn rate_grows_with_the_run() {
        let keys = [4_000u64, 4_000, 100_000, 1_000_000, 10_000_000, 50_000_000];
        for kind in [
            FilterKind::Bloom,
            FilterKind::Cuckoo,
            FilterKind::BinaryFuse,
        ] {
            for bpk in [0.5, 2.0, 5.0, 10.0, 16.0] {
                let eps = monkey(&keys, bpk, SizeModel::of(kind));
                for w in eps.windows(2) {
                    assert!(w[0] <= w[1], "{kind} {bpk}: {eps:?}");
                }
            }
        }
        // A level that grows under a fixed memory never gets a smaller rate (the others may:
        // as it nears ε = 1 it gives memory back). At a fixed budget *per key* the growing
        // level brings memory of its own, and a dominant level's rate drifts back down
        // towards the uniform one (from 10⁵ to 10⁶ keys beside a run of 10⁴, its ln ε falls
        // by 0.16), so that is not a property.
        let memory = 10.0 * 110_000.0;
        let mut prev = 0.0;
        for n in [1_000u64, 10_000, 100_000, 1_000_000, 10_000_000] {
            let eps = monkey(&[10_000, n], memory / (10_000 + n) as f64, bloom());
            assert!(eps[1] >= prev, "{n}: {eps:?} after {prev}");
            prev = eps[1];
            if eps[1] < 1.0 {
                assert!((eps[1] / eps[0] - n as f64 / 10_000.0).abs() < 1e-9 * n as f64);
            }
        }
    }

    #[test]
    fn budget_holds_within_one_percent() {
        let keys = [2_000u64, 2_000, 100_000, 1_000_000, 10_000_000, 31_000_000];
        for kind in [
            FilterKind::Bloom,
            FilterKind::BlockedBloom,
            FilterKind::Cuckoo,
        ] {
            let m = SizeModel::of(kind);
            for bpk in [1.0, 4.0, 10.0, 20.0] {
                let eps = monkey(&keys, bpk, m);
                let want = bpk * keys.iter().sum::<u64>() as f64;
                let got = memory_bits(&keys, &eps, m);
                assert!(
                    (got - want).abs() <= 0.01 * want,
                    "{kind} at {bpk}: {got} bits for a budget of {want}"
                );
            }
        }
    }

    #[test]
    fn monkey_beats_uniform_as_the_paper_says() {
        // T = 10, four levels, 10 bits per key: the paper reports 0.033 vs 0.0117.
        let keys = [1_000_000u64, 10_000_000, 100_000_000, 1_000_000_000];
        let m = bloom();
        let uniform = 4.0 * m.fpr_for_bits(10.0);
        let eps = monkey(&keys, 10.0, m);
        let got = summed_fpr(&keys, &eps);
        assert!((uniform - 0.0328).abs() < 0.001, "{uniform}");
        assert!(got < 0.4 * uniform, "{got} vs {uniform}");
    }

    #[test]
    fn empty_and_single_runs() {
        let m = bloom();
        assert!(monkey(&[], 10.0, m).is_empty());
        assert_eq!(monkey(&[0, 0], 10.0, m), vec![1.0, 1.0]);
        // One run gets the whole budget: the uniform rate.
        let one = monkey(&[12_345], 10.0, m);
        assert!((one[0] - m.fpr_for_bits(10.0)).abs() < 1e-12);
        // An empty level beside others changes nothing for them.
        let a = monkey(&[1000, 10_000], 8.0, m);
        let b = monkey(&[1000, 0, 10_000], 8.0, m);
        assert_eq!(b[1], 1.0);
        assert!((a[0] - b[0]).abs() < 1e-15 && (a[1] - b[2]).abs() < 1e-15);
        // No budget, or no filter kind: no filters.
        assert_eq!(monkey(&[10, 20], 0.0, m), vec![1.0, 1.0]);
        assert_eq!(
            monkey(&[10, 20], 10.0, SizeModel::of(FilterKind::None)),
            vec![1.0, 1.0]
        );
        // A tiny budget leaves the largest run without a filter first.
        let eps = monkey(&[100, 100_000], 0.01, m);
        assert!(eps[1] == 1.0 && eps[0] < 1.0, "{eps:?}");
    }

    #[test]
    fn material_means_five_percent_of_size() {
        let m = bloom();
        assert!(!material(m, 0.01, 0.01));
        assert!(!material(m, 0.01, 0.0105));
        assert!(material(m, 0.01, 0.005));
        assert!(material(m, 0.01, 1.0));
        assert!(!material(m, 1.0, 1.0));
    }

    #[test]
    fn size_model_fits_the_builders() {
        let n = 1u64 << 20;
        for eps in [0.03, 0.01, 0.003, 0.001, 0.0003, 0.0001] {
            let (blocks, _) = super::super::blocked::params(n, eps);
            let real = (blocks * 512) as f64 / n as f64;
            let model = SizeModel::of(FilterKind::BlockedBloom).bits(eps);
            assert!(
                (real - model).abs() <= 0.025 * real,
                "blocked-bloom at {eps}: builder {real:.3}, model {model:.3}"
            );
            let (m, _) = super::super::bloom::params(n, eps);
            let real = m as f64 / n as f64;
            assert!((real - bloom().bits(eps)).abs() < 0.01 * real);
        }
    }
}
