//! `put`, `get`, `delete`: one key at a time, each write fsynced before the command exits.

use std::io::{self, Read, Write};

use clap::Args;
use filterstore::MAX_VALUE_LEN;

use super::{stdout, Access, CliError, Exit, Global, Run};

/// Store VALUE under KEY; exit 0 once the write is durable (fsynced).
///
/// With no VALUE, or VALUE `-`, the value is all of stdin, byte for byte (no newline is
/// stripped). KEY and a VALUE given as an argument are UTF-8 strings. A value that starts
/// with `-` (other than a negative number) goes after `--`: `store put -- KEY -VALUE`.
/// Creates the store when missing.
#[derive(Args, Debug)]
pub struct Put {
    /// The key
    pub key: String,
    /// The value; absent or `-`: read all of stdin
    #[arg(allow_negative_numbers = true)]
    pub value: Option<String>,
    /// Expire the key this many seconds from now (a positive number; fractions allowed):
    /// from then on it reads as absent, and compaction reclaims it
    #[arg(long, value_name = "SECONDS", value_parser = parse_ttl, allow_negative_numbers = true)]
    pub ttl: Option<std::time::Duration>,
}

/// A time to live in seconds: a positive, finite number (else a usage error).
fn parse_ttl(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if secs.is_nan() || secs <= 0.0 || !secs.is_finite() {
        return Err(format!(
            "the time to live must be a positive number of seconds, not {s}"
        ));
    }
    std::time::Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| d.as_millis() > 0)
        .ok_or_else(|| format!("{s} seconds is out of range (at least 0.001)"))
}

impl Run for Put {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        // Open first: a locked or unusable store fails at once, before waiting on stdin.
        let store = g.open(Access::Write)?;
        let value = match self.value.as_deref() {
            None | Some("-") => read_stdin_value()?,
            Some(v) => v.as_bytes().to_vec(),
        };
        match self.ttl {
            Some(ttl) => store.put_with_ttl(self.key.as_bytes(), &value, ttl)?,
            None => store.put(self.key.as_bytes(), &value)?,
        }
        store.sync()?;
        super::settle(&store)?;
        Ok(Exit::Success)
    }
}

/// All of stdin, refusing more than the largest value the store accepts.
fn read_stdin_value() -> Result<Vec<u8>, CliError> {
    let mut buf = Vec::new();
    io::stdin()
        .lock()
        .take(MAX_VALUE_LEN as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| CliError::from(e).context("reading the value from stdin"))?;
    if buf.len() > MAX_VALUE_LEN {
        return Err(CliError::usage(format_args!(
            "the value on stdin exceeds the limit of {MAX_VALUE_LEN} bytes"
        )));
    }
    Ok(buf)
}

/// Print the value of KEY and a newline (raw bytes); exit 1 with no output when absent.
#[derive(Args, Debug)]
pub struct Get {
    /// The key
    pub key: String,
}

impl Run for Get {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let store = g.open(Access::Read)?;
        match store.get(self.key.as_bytes())? {
            Some(v) => {
                let mut out = stdout();
                out.write_all(&v)?;
                out.write_all(b"\n")?;
                out.flush()?;
                Ok(Exit::Success)
            }
            None => Ok(Exit::NotFound),
        }
    }
}

/// Remove KEY (or, with --prefix, every key that starts with P: one range tombstone); exit
/// 0 also when it was absent. Durable (fsynced) on exit.
#[derive(Args, Debug)]
pub struct Delete {
    /// The key
    #[arg(required_unless_present = "prefix", conflicts_with = "prefix")]
    pub key: Option<String>,
    /// Remove every key that starts with P instead (one range tombstone, whatever the
    /// number of keys; an empty P removes every key)
    #[arg(long, value_name = "P")]
    pub prefix: Option<String>,
}

impl Run for Delete {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let store = g.open(Access::Write)?;
        match (&self.key, &self.prefix) {
            (_, Some(p)) => store.delete_prefix(p.as_bytes())?,
            (Some(k), None) => store.delete(k.as_bytes())?,
            (None, None) => unreachable!("clap requires KEY or --prefix"),
        }
        store.sync()?;
        super::settle(&store)?;
        Ok(Exit::Success)
    }
}

/// Remove every key from START up to, not including, END: one log record and one range
/// tombstone, whatever the number of keys (`compact --from START --to END` reclaims their
/// bytes at once). Nothing is removed when START is not below END. Durable (fsynced) on
/// exit.
#[derive(Args, Debug)]
pub struct DeleteRange {
    /// The first key removed
    pub start: String,
    /// The first key past the range (not removed)
    pub end: String,
}

impl Run for DeleteRange {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let store = g.open(Access::Write)?;
        store.delete_range(self.start.as_bytes(), self.end.as_bytes())?;
        store.sync()?;
        super::settle(&store)?;
        Ok(Exit::Success)
    }
}
