//! `bench hyphenation`: the hyphenation experiment.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use filterstore::filter::check_fpr;
use filterstore::FilterKind;
use filterstore_cli::hyph::experiment::{self, ExperimentConfig};
use filterstore_cli::hyph::{ExceptionSource, WordList};

use super::{CliError, Exit, Global, Run};

/// Measure the exception dictionary behind each filter kind while hyphenating a word list.
///
/// For every filter kind (--kinds) and target rate ε (--epsilons, default 1 % to 20 % in
/// steps of 1 %): the time to build the dictionary in a fresh store (load the exceptions,
/// flush behind the filter), the time to hyphenate the whole list (default: the built-in
/// 466,551 words, one thread), the dictionary lookups made (data-block reads) and avoided
/// (filter negatives), and the observed false-positive rate. Baselines: the dictionary
/// without a filter, and the exceptions held in memory. Every measurement is repeated
/// --runs times; the table shows means with 95 % confidence intervals (Student's t,
/// df = runs − 1). Progress goes to stderr, the table to stdout.
#[derive(Args, Debug)]
pub struct BenchHyphenation {
    /// Repetitions of every measurement (at least 2)
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub runs: usize,
    /// Comma-separated target rates [default: 0.01,0.02,...,0.20]
    #[arg(long, value_name = "E,..", value_delimiter = ',', value_parser = parse_eps)]
    pub epsilons: Vec<f64>,
    /// Comma-separated filter kinds: bloom, blocked-bloom, cuckoo, binary-fuse (none = the
    /// no-filter baseline only) [default: bloom,blocked-bloom,cuckoo,binary-fuse]
    #[arg(long, value_name = "KIND,..", value_delimiter = ',', value_parser = parse_kind)]
    pub kinds: Vec<FilterKind>,
    /// Skip the two baselines (no filter; exceptions in memory)
    #[arg(long)]
    pub no_baselines: bool,
    /// Word list, one per line (`.gz` decompressed) [default: the built-in 466,551 words]
    #[arg(long, value_name = "FILE")]
    pub words: Option<PathBuf>,
    /// Directory for the per-run dictionaries [default: a temporary directory]
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// Write the summary as CSV
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write the figure (build time, hyphenation time, observed FPR vs ε) as SVG
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

fn parse_eps(s: &str) -> Result<f64, String> {
    let f: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    check_fpr(f).map_err(|_| "ε must be strictly between 0 and 1".to_string())?;
    Ok(f)
}

fn parse_kind(s: &str) -> Result<FilterKind, String> {
    s.trim().parse::<FilterKind>().map_err(|_| {
        let valid: Vec<&str> = FilterKind::ALL.iter().map(|k| k.name()).collect();
        format!("unknown filter kind {s:?}; valid: {}", valid.join(", "))
    })
}

impl Run for BenchHyphenation {
    fn run(self, _g: &Global) -> Result<Exit, CliError> {
        if self.runs < 2 {
            return Err(CliError::usage(
                "--runs must be at least 2 (a confidence interval needs two samples)",
            ));
        }
        let words = match &self.words {
            None => WordList::builtin()?,
            Some(p) => WordList::from_path(p)?,
        };
        let mut cfg = ExperimentConfig {
            runs: self.runs,
            baselines: !self.no_baselines,
            scratch: self.scratch.clone(),
            ..ExperimentConfig::default()
        };
        if !self.epsilons.is_empty() {
            cfg.epsilons = self.epsilons.clone();
        }
        if !self.kinds.is_empty() {
            cfg.kinds = self.kinds.clone();
        }
        let mut progress = |s: &str| {
            let _ = writeln!(std::io::stderr().lock(), "{s}");
        };
        progress(&format!(
            "hyphenation experiment: {} words, kinds {:?}, {} ε values, {} runs",
            words.len(),
            cfg.kinds.iter().map(|k| k.name()).collect::<Vec<_>>(),
            cfg.epsilons.len(),
            cfg.runs
        ));
        let report = experiment::run(&cfg, &words, &ExceptionSource::en_us(), &mut progress)?;
        let write = |p: &PathBuf, text: String| {
            std::fs::write(p, text)
                .map_err(|e| CliError::from(filterstore::Error::io(p, e)).context("cannot write"))
        };
        if let Some(p) = &self.csv {
            write(p, report.to_csv())?;
        }
        if let Some(p) = &self.plot {
            write(p, report.to_svg())?;
        }
        let mut out = super::stdout();
        out.write_all(report.to_text().as_bytes())?;
        out.flush()?;
        Ok(Exit::Success)
    }
}
