//! The benchmark's statistics: counter differences, medians, binomial bands.

use filterstore::store::Stats;

pub(super) fn diff(a: &Stats, b: &Stats) -> (u64, u64, u64, u64) {
    (
        b.data_block_reads - a.data_block_reads,
        b.false_positives - a.false_positives,
        b.filter_negatives - a.filter_negatives,
        b.filter_probes() - a.filter_probes(),
    )
}

/// Band of `sigmas` binomial standard deviations plus a 5 % relative model tolerance
/// around `p` for `trials` absent probes.
pub fn band(p: f64, trials: u64, sigmas: f64) -> (f64, f64) {
    if trials == 0 {
        return (0.0, 1.0);
    }
    let sd = (p * (1.0 - p) / trials as f64).sqrt();
    let w = sigmas * sd + 0.05 * p;
    ((p - w).max(0.0), (p + w).min(1.0))
}

/// The median of `xs` (the mean of the middle two for an even count; NaN for none).
pub fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}
