//! `load`: bulk import of `KEY<TAB>VALUE` lines in batches, fsynced once at the end.

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use filterstore::{Store, WriteBatch, MAX_KEY_LEN, MAX_VALUE_LEN};
use indicatif::{ProgressBar, ProgressStyle};

use super::{println, Access, CliError, Exit, Global, Run};

/// Lines per write batch.
const BATCH_LINES: usize = 1000;
/// Bytes per write batch (so batches of huge values stay small).
const BATCH_BYTES: usize = 16 << 20;

/// Load `KEY<TAB>VALUE` lines from FILE (`-` or none: stdin); print how many were loaded.
///
/// Each line is split at its first tab: the key is what comes before it, the value is the
/// rest of the line (further tabs included). Lines end with `\n`; a `\r` right before it
/// (CRLF files) is dropped, so values cannot end with `\r`. The last line needs no newline.
/// Keys and values are taken as raw bytes. Later lines overwrite earlier ones with the same
/// key.
///
/// A line without a tab (an empty line included), or with a key or value over the size
/// limits, stops the load with exit 2 and a message naming its line number: the lines
/// before it are loaded and durable, nothing after it is. Everything loaded is fsynced
/// before the command exits, and the compactions the load made due are run, so the store is
/// left in shape. A progress bar is drawn on stderr when stderr is a terminal. Creates the
/// store when missing.
#[derive(Args, Debug)]
pub struct Load {
    /// Input file; `-` or absent: stdin
    pub file: Option<PathBuf>,
}

impl Run for Load {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let (mut input, total): (Box<dyn BufRead>, Option<u64>) = match &self.file {
            Some(p) if p.as_os_str() != "-" => {
                let f = File::open(p).map_err(|e| {
                    CliError::from(e).context(format_args!("cannot open {}", p.display()))
                })?;
                let len = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
                (Box::new(BufReader::with_capacity(1 << 20, f)), len)
            }
            _ => (
                Box::new(BufReader::with_capacity(1 << 20, io::stdin())),
                None,
            ),
        };
        let store = g.open(Access::BulkWrite)?;
        let bar = progress_bar(total);
        let mut loader = Loader {
            store: &store,
            batch: WriteBatch::new(),
            batch_bytes: 0,
            pending: 0,
            loaded: 0,
            bar: &bar,
        };
        let stopped = read_lines(&mut input, &mut loader);
        // Whatever happened, the lines accepted so far are written and made durable.
        let finished = loader.write_batch().and_then(|()| Ok(store.sync()?));
        bar.finish_and_clear();
        // The store is left in shape: the compactions the load made due run now.
        let finished = finished.and_then(|()| {
            let bar = progress_bar(None);
            bar.set_message("lines loaded; compacting");
            let r = super::settle(&store);
            bar.finish_and_clear();
            r
        });
        let loaded = loader.loaded;
        match (stopped, finished) {
            (Ok(()), Ok(())) => {}
            (Ok(()), Err(e)) => return Err(e),
            (Err(e), Ok(())) => {
                return Err(CliError {
                    message: format!(
                        "{}; the {loaded} lines before it were loaded (durably), \
                         nothing after it",
                        e.message
                    ),
                    ..e
                })
            }
            (Err(e), Err(f)) => {
                return Err(CliError {
                    message: format!(
                        "{}; then writing the lines before it failed too: {}",
                        e.message, f.message
                    ),
                    code: if f.code == Exit::Corrupt {
                        f.code
                    } else {
                        e.code
                    },
                    quiet: false,
                })
            }
        }
        println(format_args!("loaded {} lines", loader.loaded))?;
        Ok(Exit::Success)
    }
}

fn progress_bar(total: Option<u64>) -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(n) => ProgressBar::new(n).with_style(
            ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {msg} ({bytes_per_sec}, eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {bytes} {msg} ({bytes_per_sec})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    };
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

struct Loader<'a> {
    store: &'a Store,
    batch: WriteBatch,
    batch_bytes: usize,
    pending: u64,
    loaded: u64,
    bar: &'a ProgressBar,
}

impl Loader<'_> {
    fn add(&mut self, key: &[u8], value: &[u8]) -> Result<(), CliError> {
        self.batch.put(key, value);
        self.batch_bytes += key.len() + value.len();
        self.pending += 1;
        if self.batch.len() >= BATCH_LINES || self.batch_bytes >= BATCH_BYTES {
            self.write_batch()?;
        }
        Ok(())
    }

    fn write_batch(&mut self) -> Result<(), CliError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.store.write(std::mem::take(&mut self.batch))?;
        self.batch_bytes = 0;
        self.loaded += self.pending;
        self.pending = 0;
        self.bar.set_message(format!("{} lines", self.loaded));
        Ok(())
    }
}

/// Feeds every line of `input` to `loader`; stops at the first bad line.
fn read_lines(input: &mut dyn BufRead, loader: &mut Loader<'_>) -> Result<(), CliError> {
    // The longest acceptable line: key, tab, value, CR, LF.
    let max_line = (MAX_KEY_LEN + MAX_VALUE_LEN + 3) as u64;
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let n = (&mut *input)
            .take(max_line)
            .read_until(b'\n', &mut line)
            .map_err(|e| CliError::from(e).context("reading the input"))?;
        if n == 0 {
            return Ok(());
        }
        number += 1;
        loader.bar.inc(n as u64);
        let bad = |what: &str| CliError::usage(format_args!("line {number}: {what}"));
        let mut l = line.as_slice();
        match l.strip_suffix(b"\n") {
            Some(rest) => l = rest,
            None if n as u64 == max_line => return Err(bad("line too long")),
            None => {}
        }
        if let Some(rest) = l.strip_suffix(b"\r") {
            l = rest;
        }
        let Some(tab) = l.iter().position(|&b| b == b'\t') else {
            return Err(bad("malformed line: no tab between key and value"));
        };
        let (key, value) = (&l[..tab], &l[tab + 1..]);
        if key.len() > MAX_KEY_LEN {
            return Err(bad(&format!(
                "key of {} bytes exceeds the limit of {MAX_KEY_LEN} bytes",
                key.len()
            )));
        }
        if value.len() > MAX_VALUE_LEN {
            return Err(bad(&format!(
                "value of {} bytes exceeds the limit of {MAX_VALUE_LEN} bytes",
                value.len()
            )));
        }
        loader.add(key, value)?;
    }
}
