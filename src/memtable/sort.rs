//! The parallel sort of a memtable's new keys.

use std::cmp::Ordering;

/// Sorts of at least this many slots run on the rayon pool.
pub(super) const PAR_SORT_MIN: usize = 1 << 15;

/// Sorts `(prefix, slot)` pairs into key order on the rayon pool. A large input is
/// distributed into 2,048 buckets by the 11 prefix bits below the leading bits all prefixes
/// share (so bucket order is key order): the buckets are split into one group of about
/// equal size per thread, and each thread scatters the pairs of its group into its own part
/// of the output and sorts its buckets (a few hundred pairs each, in cache).
pub(super) fn sort_by_prefix(
    mut v: Vec<(u64, u32)>,
    cmp: impl Fn(&(u64, u32), &(u64, u32)) -> Ordering + Sync,
) -> Vec<(u64, u32)> {
    use rayon::prelude::*;
    const BITS: u32 = 11;
    const BUCKETS: usize = 1 << BITS;
    if v.len() < PAR_SORT_MIN {
        v.sort_unstable_by(cmp);
        return v;
    }
    let first = v[0].0;
    let differ = v.par_iter().map(|p| p.0 ^ first).reduce(|| 0, |a, b| a | b);
    if differ == 0 {
        v.par_sort_unstable_by(cmp);
        return v;
    }
    let shift = (64 - differ.leading_zeros()).saturating_sub(BITS);
    let bucket = |p: u64| ((p >> shift) as usize) & (BUCKETS - 1);
    let counts = v
        .par_chunks(PAR_SORT_MIN)
        .map(|c| {
            let mut h = vec![0usize; BUCKETS];
            for p in c {
                h[bucket(p.0)] += 1;
            }
            h
        })
        .reduce(
            || vec![0usize; BUCKETS],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        );
    // Groups of whole buckets: bucket `bounds[g]..bounds[g + 1]` belong to group g.
    let groups = rayon::current_num_threads().max(1);
    let target = v.len().div_ceil(groups);
    let mut bounds = vec![0usize];
    let mut acc = 0;
    for (b, c) in counts.iter().enumerate() {
        acc += c;
        if bounds.len() < groups && acc >= target * bounds.len() {
            bounds.push(b + 1);
        }
    }
    bounds.push(BUCKETS);
    let mut out = vec![(0u64, 0u32); v.len()];
    let mut regions = Vec::with_capacity(groups);
    let mut rest = out.as_mut_slice();
    for w in bounds.windows(2) {
        let len: usize = counts[w[0]..w[1]].iter().sum();
        let (head, tail) = rest.split_at_mut(len);
        regions.push((w[0]..w[1], head));
        rest = tail;
    }
    regions.into_par_iter().for_each(|(group, region)| {
        let mut next = Vec::with_capacity(group.len());
        let mut at = 0;
        for b in group.clone() {
            next.push(at);
            at += counts[b];
        }
        let starts = next.clone();
        for p in &v {
            let b = bucket(p.0);
            if group.contains(&b) {
                region[next[b - group.start]] = *p;
                next[b - group.start] += 1;
            }
        }
        for (s, e) in starts.iter().zip(&next) {
            region[*s..*e].sort_unstable_by(&cmp);
        }
    });
    out
}
