//! `hyphenate`: one word per line in, its hyphenated form per line out, with the exception
//! dictionary on disk behind a filter.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use filterstore_cli::hyph::{ExceptionDict, ExceptionSource, Hyphenator, Patterns};

use super::{rate, stdout, CliError, Exit, Global, Run};

/// Default directory of the exception dictionary.
pub const DEFAULT_DICT: &str = "./filterstore-hyph-dict";

/// Hyphenate words (one per line) with Knuth–Liang patterns and an on-disk exception
/// dictionary fronted by a filter.
///
/// Reads WORDS (a file; `-` or absent: stdin) and writes each word's hyphenated form (`-`
/// between parts) on its own line, in the same order. Case is kept; a word with anything but
/// ASCII letters is copied unchanged; words shorter than 5 letters are never hyphenated.
///
/// Exceptions live in a filterstore directory (--dict, default ./filterstore-hyph-dict), key
/// = lower-cased word, value = hyphenated form. It is built from the exception lists on
/// first use and reused afterwards; when the lists change only the difference is written;
/// when --filter/--fpr differ from its tables' filter, the filters are rebuilt (no data
/// rewritten). Without --exceptions the built-in US English lists are used (Knuth's 14 from
/// hyphen.tex and the TUGboat list ushyphex.tex, 1,753 entries). The store option --dir is
/// not used: the dictionary has its own directory, --dict.
#[derive(Args, Debug)]
pub struct Hyphenate {
    /// Input file, one word per line; `-` or absent: stdin
    #[arg(value_name = "WORDS")]
    pub words: Option<PathBuf>,
    /// Liang patterns file (hyph-utf8 `.pat.txt` form) [default: built-in en-US patterns]
    #[arg(long, value_name = "F")]
    pub patterns: Option<PathBuf>,
    /// Exception list (TeX `\hyphenation{...}` or plain, one entry per word such as
    /// `as-so-ciate`); repeatable, later files win. Replaces the built-in lists unless
    /// --with-builtin is given
    #[arg(long, value_name = "F")]
    pub exceptions: Vec<PathBuf>,
    /// Use the built-in exception lists first, then the --exceptions files
    #[arg(long)]
    pub with_builtin: bool,
    /// Exception dictionary directory [default: ./filterstore-hyph-dict]
    #[arg(long, value_name = "DIR")]
    pub dict: Option<PathBuf>,
    /// Print figures to stderr: words, words/s, exception lookups asked, lookups skipped by
    /// the filter, false positives, dictionary block reads
    #[arg(long)]
    pub stats: bool,
}

impl Run for Hyphenate {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let hyph = match &self.patterns {
            None => Hyphenator::en_us()?,
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| {
                    CliError::from(filterstore::Error::io(p, e)).context("cannot read patterns")
                })?;
                let pats =
                    Patterns::parse(&text).map_err(|e| CliError::from(e).context(p.display()))?;
                Hyphenator::new(pats)
            }
        };
        let mut sources = Vec::new();
        if self.exceptions.is_empty() || self.with_builtin {
            sources = ExceptionSource::en_us();
        }
        for f in &self.exceptions {
            sources.push(ExceptionSource::from_file(f).map_err(CliError::from)?);
        }
        let dir = self
            .dict
            .clone()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DICT));
        let dict = ExceptionDict::open_or_build(&dir, &sources, g.filter, g.fpr).map_err(|e| {
            CliError::from(e).context(format_args!(
                "cannot open the exception dictionary {}",
                dir.display()
            ))
        })?;

        let mut input: Box<dyn BufRead> = match &self.words {
            Some(p) if p.as_os_str() != "-" => Box::new(BufReader::new(
                File::open(p).map_err(|e| CliError::from(filterstore::Error::io(p, e)))?,
            )),
            _ => Box::new(BufReader::new(io::stdin().lock())),
        };
        let before = dict.stats();
        let reader = dict.reader()?;
        let start = Instant::now();
        let mut out = stdout();
        let (mut words, mut lookups, mut exceptions) = (0u64, 0u64, 0u64);
        let mut line = Vec::new();
        let mut result = String::new();
        loop {
            line.clear();
            if input.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            if line.last() == Some(&b'\n') {
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
            }
            words += 1;
            match std::str::from_utf8(&line) {
                Ok(w) => {
                    result.clear();
                    let o = hyph.hyphenate_into(w, &reader, &mut result)?;
                    lookups += o.lookups as u64;
                    exceptions += o.exception as u64;
                    out.write_all(result.as_bytes())?;
                }
                Err(_) => out.write_all(&line)?,
            }
            out.write_all(b"\n")?;
        }
        out.flush()?;
        let secs = start.elapsed().as_secs_f64();
        if self.stats {
            let after = dict.stats();
            let (kind, fpr) = dict.store().filter();
            let d = |a: u64, b: u64| a.saturating_sub(b);
            let r = dict.report();
            let state = if r.built {
                "built".to_string()
            } else if r.reused() {
                "reused".to_string()
            } else {
                format!(
                    "updated ({} put, {} deleted{})",
                    r.put,
                    r.deleted,
                    if r.refiltered { ", refiltered" } else { "" }
                )
            };
            let mut e = io::stderr().lock();
            writeln!(
                e,
                "dictionary: {} ({state}), {} exceptions, {} tables, filter {kind} at ε {}",
                dir.display(),
                r.entries,
                after.tables.len(),
                rate(fpr)
            )?;
            writeln!(e, "words: {words}")?;
            writeln!(
                e,
                "words/s: {:.0} ({:.3} s)",
                words as f64 / secs.max(1e-9),
                secs
            )?;
            writeln!(e, "exception lookups asked: {lookups}")?;
            writeln!(e, "exceptions found: {exceptions}")?;
            writeln!(
                e,
                "lookups skipped by the filter: {}",
                d(after.filter_negatives, before.filter_negatives)
            )?;
            writeln!(
                e,
                "false positives: {}",
                d(after.false_positives, before.false_positives)
            )?;
            writeln!(
                e,
                "dictionary block reads: {}",
                d(after.data_block_reads, before.data_block_reads)
            )?;
        }
        Ok(Exit::Success)
    }
}
