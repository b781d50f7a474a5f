//! The hyphenation experiment: for each filter kind and target rate ε, the time to build the
//! exception dictionary (a fresh store: load the exceptions, flush behind the filter), the
//! time to hyphenate a whole word list with it, and the dictionary lookups made and avoided,
//! repeated and summarised as means with 95 % confidence intervals (Student's t, df = runs −
//! 1). Two baselines: the dictionary without a filter (every word reads the disk) and the
//! exceptions held in memory.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::dict::{sources_digest, ExceptionDict, ExceptionSource};
use super::{load_sources, ExceptionLookup, Hyphenator, MemoryExceptions, WordList};
use crate::plot::{kind_color, render, Chart, Series, Style};
use filterstore::{Error, FilterKind, Result, Stats};

/// What to measure.
#[derive(Debug, Clone)]
pub struct ExperimentConfig {
    /// Target false-positive rates.
    pub epsilons: Vec<f64>,
    /// Filter kinds measured at every ε (`none` is a baseline, measured once per run).
    pub kinds: Vec<FilterKind>,
    /// Repetitions (at least 2 for a confidence interval).
    pub runs: usize,
    /// Measure the two baselines (no filter; exceptions in memory).
    pub baselines: bool,
    /// Where the per-run store directories go (a fresh temporary directory when `None`).
    pub scratch: Option<PathBuf>,
}

/// Reads one measured figure of a row (for the plot panels).
type Field = dyn Fn(&Row) -> Summary;

impl Default for ExperimentConfig {
    fn default() -> Self {
        ExperimentConfig {
            epsilons: default_epsilons(),
            kinds: vec![
                FilterKind::Bloom,
                FilterKind::BlockedBloom,
                FilterKind::Cuckoo,
                FilterKind::BinaryFuse,
            ],
            runs: 30,
            baselines: true,
            scratch: None,
        }
    }
}

/// 1 %, 2 %, …, 20 %.
pub fn default_epsilons() -> Vec<f64> {
    (1..=20).map(|i| i as f64 / 100.0).collect()
}

/// What a row measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Variant {
    /// The disk dictionary behind a filter of this kind at this ε.
    Filter(FilterKind, f64),
    /// The disk dictionary without a filter.
    NoFilter,
    /// The exceptions in memory ([`MemoryExceptions`]).
    Memory,
}

impl Variant {
    /// Short name: the kind, `none` or `memory`.
    pub fn name(&self) -> &'static str {
        match self {
            Variant::Filter(k, _) => k.name(),
            Variant::NoFilter => "none",
            Variant::Memory => "memory",
        }
    }
    /// The target ε of a filter row.
    pub fn epsilon(&self) -> Option<f64> {
        match self {
            Variant::Filter(_, e) => Some(*e),
            _ => None,
        }
    }
}

/// One measurement.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Seconds to build the dictionary (store opened, exceptions loaded, flushed) or, in
    /// memory, to index the parsed exceptions.
    pub build_secs: f64,
    /// Seconds to hyphenate the whole list.
    pub hyph_secs: f64,
    /// Exception lookups asked.
    pub lookups: u64,
    /// Words hyphenated from an exception.
    pub exceptions: u64,
    /// Filter answers "absent" (lookups that never touched the data).
    pub filter_negatives: u64,
    /// False positives.
    pub false_positives: u64,
    /// Data blocks the lookups needed: read from the table file or found in the block cache
    /// (each a "maybe" of the filter, or a lookup without one).
    pub block_reads: u64,
    /// Hyphens inserted (equal across variants, a correctness check).
    pub hyphens: u64,
}

impl Sample {
    /// Block reads per lookup of a word that is not an exception.
    pub fn reads_per_non_exception(&self) -> f64 {
        let n = self.lookups.saturating_sub(self.exceptions);
        if n == 0 {
            0.0
        } else {
            self.block_reads.saturating_sub(self.exceptions) as f64 / n as f64
        }
    }
    /// false positives / (false positives + negatives).
    pub fn observed_fpr(&self) -> Option<f64> {
        let d = self.false_positives + self.filter_negatives;
        (d > 0).then(|| self.false_positives as f64 / d as f64)
    }
}

/// Mean and 95 % confidence half-width.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Sample mean.
    pub mean: f64,
    /// Half-width of the 95 % confidence interval (t-distribution, df = n − 1); 0 for n < 2.
    pub ci95: f64,
    /// Number of samples.
    pub n: usize,
}

impl Summary {
    /// Summarises `xs`.
    pub fn of(xs: &[f64]) -> Summary {
        let n = xs.len();
        if n == 0 {
            return Summary::default();
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Summary { mean, ci95: 0.0, n };
        }
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
        Summary {
            mean,
            ci95: t95(n - 1) * (var / n as f64).sqrt(),
            n,
        }
    }
}

/// The two-sided 95 % quantile of Student's t with `df` degrees of freedom (t₀.₉₇₅).
pub fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        _ => {
            // Cornish–Fisher expansion around the normal quantile (error < 1e-3 for df > 30).
            let z: f64 = 1.959_963_985;
            let d = df as f64;
            z + (z.powi(3) + z) / (4.0 * d)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * d * d)
        }
    }
}

/// The summary of one variant.
#[derive(Debug, Clone)]
pub struct Row {
    /// What was measured.
    pub variant: Variant,
    /// Build time, milliseconds.
    pub build_ms: Summary,
    /// Hyphenation time of the whole list, milliseconds.
    pub hyph_ms: Summary,
    /// Words per second.
    pub words_per_sec: Summary,
    /// Exception lookups asked per run.
    pub lookups: u64,
    /// Words whose hyphens came from an exception, per run.
    pub exceptions: u64,
    /// Filter negatives (lookups avoided) per run.
    pub avoided: Summary,
    /// False positives per run.
    pub false_positives: Summary,
    /// Data blocks needed (read from the file or found in the block cache) per run.
    pub block_reads: Summary,
    /// Observed false-positive rate.
    pub observed_fpr: Summary,
    /// Block reads per non-exception word.
    pub reads_per_non_exception: Summary,
    /// The raw samples.
    pub samples: Vec<Sample>,
}

impl Row {
    fn new(variant: Variant, samples: Vec<Sample>, words: usize) -> Row {
        let f =
            |g: &dyn Fn(&Sample) -> f64| Summary::of(&samples.iter().map(g).collect::<Vec<_>>());
        let first = samples.first().copied().unwrap_or_default();
        Row {
            variant,
            build_ms: f(&|s| s.build_secs * 1e3),
            hyph_ms: f(&|s| s.hyph_secs * 1e3),
            words_per_sec: f(&|s| words as f64 / s.hyph_secs.max(1e-12)),
            lookups: first.lookups,
            exceptions: first.exceptions,
            avoided: f(&|s| s.filter_negatives as f64),
            false_positives: f(&|s| s.false_positives as f64),
            block_reads: f(&|s| s.block_reads as f64),
            observed_fpr: Summary::of(
                &samples
                    .iter()
                    .filter_map(Sample::observed_fpr)
                    .collect::<Vec<_>>(),
            ),
            reads_per_non_exception: f(&|s| s.reads_per_non_exception()),
            samples,
        }
    }
}

/// The experiment's results.
#[derive(Debug, Clone)]
pub struct ExperimentReport {
    /// Words hyphenated per run.
    pub words: usize,
    /// Distinct exception words.
    pub exception_entries: usize,
    /// Repetitions.
    pub runs: usize,
    /// Rows: baselines first, then each kind by ε.
    pub rows: Vec<Row>,
    /// CPU and core count.
    pub machine: String,
}

fn diff(a: &Stats, b: &Stats) -> (u64, u64, u64) {
    (
        b.filter_negatives.saturating_sub(a.filter_negatives),
        b.false_positives.saturating_sub(a.false_positives),
        // Blocks needed, wherever they came from: the filter's work does not depend on
        // whether the block cache held the block.
        b.data_blocks_used().saturating_sub(a.data_blocks_used()),
    )
}

fn hyphenate_all<L: ExceptionLookup + ?Sized>(
    h: &Hyphenator,
    words: &WordList,
    lookup: &L,
    s: &mut Sample,
) -> Result<()> {
    let mut out = String::with_capacity(64);
    let t = Instant::now();
    for w in words.iter() {
        out.clear();
        let o = h.hyphenate_into(w, lookup, &mut out)?;
        s.lookups += o.lookups as u64;
        s.exceptions += o.exception as u64;
        s.hyphens += o.hyphens as u64;
    }
    s.hyph_secs = t.elapsed().as_secs_f64();
    std::hint::black_box(&out);
    Ok(())
}

fn measure_disk(
    h: &Hyphenator,
    words: &WordList,
    wanted: &MemoryExceptions,
    digest: &str,
    dir: &Path,
    kind: FilterKind,
    eps: f64,
) -> Result<Sample> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    let mut s = Sample::default();
    let t = Instant::now();
    let dict = ExceptionDict::open_with(dir, wanted, digest, Some(kind), Some(eps))?;
    s.build_secs = t.elapsed().as_secs_f64();
    let before = dict.stats();
    hyphenate_all(h, words, &dict.reader()?, &mut s)?;
    (s.filter_negatives, s.false_positives, s.block_reads) = diff(&before, &dict.stats());
    drop(dict);
    std::fs::remove_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    Ok(s)
}

/// Runs the experiment over `words` with the exception `sources`, calling `progress` with
/// one line per phase.
pub fn run(
    cfg: &ExperimentConfig,
    words: &WordList,
    sources: &[ExceptionSource],
    progress: &mut dyn FnMut(&str),
) -> Result<ExperimentReport> {
    if cfg.runs == 0 {
        return Err(Error::InvalidArgument("runs must be at least 1".into()));
    }
    for &e in &cfg.epsilons {
        filterstore::filter::check_fpr(e)?;
    }
    let h = Hyphenator::en_us()?;
    let digest = sources_digest(sources);
    let wanted = load_sources(sources)?;
    let tmp;
    let scratch: &Path = match &cfg.scratch {
        Some(p) => {
            std::fs::create_dir_all(p).map_err(|e| Error::io(p, e))?;
            p
        }
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path()
        }
    };
    let kinds: Vec<FilterKind> = cfg
        .kinds
        .iter()
        .copied()
        .filter(|k| *k != FilterKind::None)
        .collect();
    let mut variants = Vec::new();
    if cfg.baselines || cfg.kinds.contains(&FilterKind::None) {
        variants.push(Variant::NoFilter);
    }
    if cfg.baselines {
        variants.push(Variant::Memory);
    }
    for &k in &kinds {
        for &e in &cfg.epsilons {
            variants.push(Variant::Filter(k, e));
        }
    }
    let mut samples: Vec<Vec<Sample>> = vec![Vec::with_capacity(cfg.runs); variants.len()];
    let dir = scratch.join("dict");
    for run in 0..cfg.runs {
        let t = Instant::now();
        for (i, v) in variants.iter().enumerate() {
            let s = match *v {
                Variant::Memory => {
                    let mut s = Sample::default();
                    let t = Instant::now();
                    let m = load_sources(sources)?;
                    s.build_secs = t.elapsed().as_secs_f64();
                    hyphenate_all(&h, words, &m, &mut s)?;
                    s
                }
                Variant::NoFilter => {
                    measure_disk(&h, words, &wanted, &digest, &dir, FilterKind::None, 0.01)?
                }
                Variant::Filter(k, e) => measure_disk(&h, words, &wanted, &digest, &dir, k, e)?,
            };
            if let Some(first) = samples.first().and_then(|v| v.first()) {
                if first.hyphens != s.hyphens || first.exceptions != s.exceptions {
                    return Err(Error::Internal(format!(
                        "{} gave {} hyphens and {} exceptions, {} gave {} and {}",
                        v.name(),
                        s.hyphens,
                        s.exceptions,
                        variants[0].name(),
                        first.hyphens,
                        first.exceptions
                    )));
                }
            }
            if let Some(slot) = samples.get_mut(i) {
                slot.push(s);
            }
            if v.epsilon().is_none() || cfg.epsilons.last() == v.epsilon().as_ref() {
                progress(&format!(
                    "run {}/{}: {} done ({:.1} s into the run)",
                    run + 1,
                    cfg.runs,
                    v.name(),
                    t.elapsed().as_secs_f64()
                ));
            }
        }
    }
    let rows = variants
        .into_iter()
        .zip(samples)
        .map(|(v, s)| Row::new(v, s, words.len()))
        .collect();
    Ok(ExperimentReport {
        words: words.len(),
        exception_entries: wanted.len(),
        runs: cfg.runs,
        rows,
        machine: crate::bench::machine(),
    })
}

fn pm(s: &Summary, digits: usize) -> String {
    format!("{:.*} ± {:.*}", digits, s.mean, digits, s.ci95)
}

impl ExperimentReport {
    /// A readable table.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Hyphenation experiment: {} words, {} exceptions, {} runs (mean ± 95 % CI, t with df = {}), one thread; {}",
            self.words,
            self.exception_entries,
            self.runs,
            self.runs.saturating_sub(1),
            self.machine
        );
        let _ = writeln!(
            s,
            "{:<14} {:>5} {:>16} {:>16} {:>11} {:>8} {:>10} {:>9} {:>9} {:>8} {:>10}",
            "dictionary",
            "ε",
            "build ms",
            "hyphenate ms",
            "words/s",
            "lookups",
            "avoided",
            "reads",
            "false+",
            "obs FPR",
            "reads/nonx"
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{:<14} {:>5} {:>16} {:>16} {:>11.0} {:>8} {:>10.0} {:>9.0} {:>9.0} {:>8} {:>10.5}",
                r.variant.name(),
                r.variant
                    .epsilon()
                    .map_or("-".to_string(), |e| format!("{:.2}", e)),
                pm(&r.build_ms, 3),
                pm(&r.hyph_ms, 1),
                r.words_per_sec.mean,
                r.lookups,
                r.avoided.mean,
                r.block_reads.mean,
                r.false_positives.mean,
                if r.observed_fpr.n > 0 {
                    format!("{:.4}", r.observed_fpr.mean)
                } else {
                    "-".into()
                },
                r.reads_per_non_exception.mean,
            );
        }
        s
    }

    /// One CSV line per row (means and 95 % half-widths), with a header.
    pub fn to_csv(&self) -> String {
        let mut s = String::from(
            "dictionary,epsilon,runs,words,lookups,exceptions,build_ms,build_ms_ci95,hyphenate_ms,hyphenate_ms_ci95,words_per_sec,words_per_sec_ci95,avoided,false_positives,block_reads,observed_fpr,observed_fpr_ci95,reads_per_non_exception,reads_per_non_exception_ci95\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                r.variant.name(),
                r.variant.epsilon().map_or(String::new(), |e| e.to_string()),
                self.runs,
                self.words,
                r.lookups,
                r.exceptions,
                r.build_ms.mean,
                r.build_ms.ci95,
                r.hyph_ms.mean,
                r.hyph_ms.ci95,
                r.words_per_sec.mean,
                r.words_per_sec.ci95,
                r.avoided.mean,
                r.false_positives.mean,
                r.block_reads.mean,
                if r.observed_fpr.n > 0 {
                    r.observed_fpr.mean.to_string()
                } else {
                    String::new()
                },
                r.observed_fpr.ci95,
                r.reads_per_non_exception.mean,
                r.reads_per_non_exception.ci95,
            );
        }
        s
    }

    /// Three panels: build time vs ε, hyphenation time vs ε (per kind, 95 % CI error bars,
    /// baselines dashed), observed false-positive rate vs ε with the line y = ε.
    pub fn to_svg(&self) -> String {
        let mut build = Chart {
            title: "Dictionary build time (fresh store)".into(),
            x_label: "target ε".into(),
            y_label: "build time, ms".into(),
            ..Chart::default()
        };
        let mut hyph = Chart {
            title: format!("Hyphenating {} words", self.words),
            x_label: "target ε".into(),
            y_label: "time, ms".into(),
            ..Chart::default()
        };
        let mut fpr = Chart {
            title: "Observed false-positive rate".into(),
            x_label: "target ε".into(),
            y_label: "false positives / absent probes".into(),
            ..Chart::default()
        };
        let eps: Vec<f64> = self
            .rows
            .iter()
            .filter_map(|r| r.variant.epsilon())
            .collect();
        let (lo, hi) = eps
            .iter()
            .fold((f64::MAX, f64::MIN), |a, &e| (a.0.min(e), a.1.max(e)));
        let mut kinds: Vec<FilterKind> = Vec::new();
        for r in &self.rows {
            if let Variant::Filter(k, _) = r.variant {
                if !kinds.contains(&k) {
                    kinds.push(k);
                }
            }
        }
        for k in kinds {
            let rows: Vec<&Row> = self
                .rows
                .iter()
                .filter(|r| matches!(r.variant, Variant::Filter(x, _) if x == k))
                .collect();
            let pts = |g: &dyn Fn(&Row) -> Summary| {
                let p: Vec<(f64, f64)> = rows
                    .iter()
                    .map(|r| (r.variant.epsilon().unwrap_or(0.0), g(r).mean))
                    .collect();
                let e: Vec<f64> = rows.iter().map(|r| g(r).ci95).collect();
                (p, e)
            };
            let panels: [(&mut Chart, &Field); 3] = [
                (&mut build, &|r| r.build_ms),
                (&mut hyph, &|r| r.hyph_ms),
                (&mut fpr, &|r| r.observed_fpr),
            ];
            for (chart, field) in panels {
                let (points, err) = pts(field);
                chart.series.push(Series {
                    name: k.to_string(),
                    color: kind_color(k),
                    points,
                    style: Style::ErrorBars(err),
                });
            }
        }
        if lo <= hi {
            for r in &self.rows {
                let (name, color) = match r.variant {
                    Variant::NoFilter => ("no filter (baseline)", kind_color(FilterKind::None)),
                    Variant::Memory => ("in memory (baseline)", "#9467bd"),
                    Variant::Filter(..) => continue,
                };
                for (chart, v) in [(&mut build, r.build_ms.mean), (&mut hyph, r.hyph_ms.mean)] {
                    chart.series.push(Series {
                        name: name.into(),
                        color,
                        points: vec![(lo, v), (hi, v)],
                        style: Style::Dashed,
                    });
                }
            }
            fpr.series.push(Series {
                name: "y = ε".into(),
                color: "#000000",
                points: vec![(lo, lo), (hi, hi)],
                style: Style::Dashed,
            });
        }
        render(&[build, hyph, fpr], 480.0, 380.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_and_summaries() {
        assert_eq!(t95(1), 12.706);
        assert_eq!(t95(29), 2.045);
        assert!((t95(60) - 2.000).abs() < 2e-3);
        assert!((t95(1000) - 1.962).abs() < 1e-3);
        let s = Summary::of(&[1.0, 2.0, 3.0]);
        assert_eq!(s.mean, 2.0);
        assert!((s.ci95 - 4.303 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(Summary::of(&[5.0]).ci95, 0.0);
    }

    #[test]
    fn a_small_run_counts_lookups() {
        let words = WordList::from_text("table\nproject\npineapple\nassociate\nzzzzzz\ncat\n");
        let cfg = ExperimentConfig {
            epsilons: vec![0.05],
            kinds: vec![FilterKind::Bloom],
            runs: 2,
            ..ExperimentConfig::default()
        };
        let r = run(&cfg, &words, &ExceptionSource::en_us(), &mut |_| {}).unwrap();
        assert_eq!(r.rows.len(), 3);
        assert_eq!(r.rows[0].variant, Variant::NoFilter);
        assert_eq!(r.rows[1].variant, Variant::Memory);
        for row in &r.rows {
            assert_eq!(row.lookups, 5, "{:?}", row.variant);
            assert_eq!(row.exceptions, 3, "{:?}", row.variant);
            assert_eq!(row.samples.len(), 2);
        }
        assert!(r.to_csv().lines().count() == 4);
        assert!(r.to_svg().starts_with("<svg"));
        assert!(r.to_text().contains("bloom"));
    }
}
