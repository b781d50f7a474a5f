//! A latency histogram for the benchmarks: 8 sub-buckets per power of two of nanoseconds
//! (quantiles within 12.5 %), mergeable across threads.

/// Latencies in nanoseconds.
#[derive(Clone)]
pub(super) struct Histogram {
    counts: Vec<u64>,
    /// The largest latency recorded.
    pub max: u64,
    /// Latencies recorded.
    pub n: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; 64 * 8],
            max: 0,
            n: 0,
        }
    }
}

impl Histogram {
    fn bucket(ns: u64) -> usize {
        if ns < 8 {
            return ns as usize;
        }
        let e = 63 - ns.leading_zeros() as usize;
        let sub = ((ns >> (e - 3)) & 7) as usize;
        e * 8 + sub
    }

    fn lower(b: usize) -> u64 {
        if b < 8 {
            return b as u64;
        }
        let (e, sub) = (b / 8, b % 8);
        (1u64 << e) + ((sub as u64) << (e - 3))
    }

    /// Records one latency.
    pub fn record(&mut self, ns: u64) {
        self.counts[Self::bucket(ns)] += 1;
        self.max = self.max.max(ns);
        self.n += 1;
    }

    /// Adds every latency of `o`.
    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.max = self.max.max(o.max);
        self.n += o.n;
    }

    /// The upper edge of the bucket that holds quantile `q` (at most the largest latency).
    pub fn quantile(&self, q: f64) -> u64 {
        let want = ((self.n as f64) * q).ceil() as u64;
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want.max(1) {
                return Self::lower(b + 1).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::Histogram;

    /// Quantiles land within a bucket (12.5 %) of the exact ones, merged or not.
    #[test]
    fn quantiles_within_a_bucket() {
        let (mut a, mut b) = (Histogram::default(), Histogram::default());
        for ns in 1..=10_000u64 {
            if ns % 2 == 0 {
                a.record(ns)
            } else {
                b.record(ns)
            }
        }
        a.merge(&b);
        assert_eq!((a.n, a.max), (10_000, 10_000));
        for (q, exact) in [(0.5, 5_000.0), (0.99, 9_900.0), (0.999, 9_990.0)] {
            let got = a.quantile(q) as f64;
            assert!(
                got >= exact && got <= exact * 1.125,
                "q{q}: {got} vs {exact}"
            );
        }
    }
}
