//! The `store` command line: global options, the subcommand list, store opening and the
//! error type that carries an exit code.
//!
//! Adding a subcommand: write a module with a `#[derive(clap::Args)]` struct that implements
//! [`Run`], declare the module below and add one line to the `commands!` list.

mod bench;
mod bench_data;
mod bench_engine;
#[cfg(feature = "parquet")]
mod bench_export;
mod bench_hyph;
mod bench_range;
mod bench_ycsb;
#[cfg(feature = "parquet")]
mod export;
mod hyphenate;
#[cfg(feature = "parquet")]
mod import;
mod keyspace;
mod kv;
mod latency;
mod load;
mod maintain;
mod repair;
mod scan;
mod stats;
mod stress;
mod verify;

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use filterstore::filename::has_data_files;
use filterstore::store::{stored_default_filter, stored_policy, MANIFEST_NAME};
use filterstore::{
    filter::check_fpr, Compression, FilterKind, FilterPolicy, KeyspaceOptions, Options, Store,
    SyncPolicy,
};

const LONG_ABOUT: &str = "\
A persistent key-value store whose sorted tables are fronted by memory-mapped Bloom, \
blocked-Bloom, cuckoo or binary fuse filters, so looking up an absent key usually skips the \
table's data.

The store lives in one directory: --dir DIR, else the environment variable FILTERSTORE_DIR, \
else ./filterstore-data. It is created by the first command that writes (put, delete, load, import); \
every other command refuses a missing store (exit 2) and creates nothing. One process at a \
time may open a store; a second one gets exit 2 at once with a message that says it is \
locked.

Filters: the store records a filter policy in its manifest, chosen by the command that \
creates it: --filter (blocked-bloom by default) and an allocation of filter memory across \
levels, by default uniform: every table at the ε of --fpr (0.01 by default). --allocation \
monkey spends the memory that ε on every table would take as Monkey does instead (each \
level's ε proportional to its keys: the fewest wasted reads per absent lookup when every \
level is probed); --bits-per-key B sets the memory directly, B bits per key in tables. On an \
existing store these options apply to the tables sealed by this command (flush, compact, or \
a memtable that fills up during load), --filter and --fpr under the store's recorded \
allocation; only refilter records a new policy. `store stats` shows the one in force.

--compression none|lz4|zstd, given before the command, chooses how the data blocks of the \
tables this command writes are compressed (lz4 unless told otherwise; zstd stores fewer bytes \
and decodes more slowly, and needs a build with the `zstd` feature, on by default; a block \
that does not shrink by an eighth is stored raw); tables already written keep theirs.

Range filters: each table written gets a range filter of --range-bits B bits per key (16 \
unless told otherwise; 0 for none), which `scan` asks before reading any of the table's \
blocks: a range with no key of the table skips it. `refilter --range-bits B` rebuilds, adds \
or removes them for the tables already written.";

const AFTER_LONG_HELP: &str = "\
Exit codes:
  0  success
  1  key not found (get)
  2  usage error, I/O error, missing or locked store, malformed input (a bad Parquet file
     given to import included), a feature this build lacks, memory the store could not
     allocate
  3  corruption detected (by verify, or by any command that reads damaged bytes); repair
     saved nothing or the store still does not open; stress found a problem";

/// The `store` command line.
#[derive(Parser, Debug)]
#[command(
    name = "store",
    version,
    about = "A key-value store whose tables are fronted by Bloom, blocked-Bloom, cuckoo or binary fuse filters",
    long_about = LONG_ABOUT,
    after_long_help = AFTER_LONG_HELP,
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options accepted before or after any subcommand.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Store options (before or after the command)")]
pub struct Global {
    /// Store directory [default: $FILTERSTORE_DIR, else ./filterstore-data]
    #[arg(long, global = true, value_name = "DIR", env = "FILTERSTORE_DIR")]
    pub dir: Option<PathBuf>,
    /// Filter for tables sealed by this command (recorded by the command that creates the
    /// store): none, bloom, blocked-bloom, cuckoo or binary-fuse; or global (no filter per
    /// table: one key-to-run filter for the whole store, one probe per lookup)
    /// [default: the store's; blocked-bloom for a new store]
    #[arg(long, global = true, value_name = "KIND", value_parser = parse_filter)]
    pub filter: Option<FilterKind>,
    /// Target false-positive rate ε, strictly between 0 and 1: every new filter's under the
    /// uniform allocation; under monkey, the memory level (what ε on every table would
    /// take) [default: the store's; 0.01 for a new store]
    #[arg(long, global = true, value_name = "E", value_parser = parse_fpr, allow_negative_numbers = true)]
    pub fpr: Option<f64>,
    /// Size the filters of tables sealed by this command from a memory budget of B bits per
    /// key in tables (instead of --fpr), split across levels as --allocation says
    #[arg(long, global = true, value_name = "B", value_parser = parse_bits)]
    pub bits_per_key: Option<f64>,
    /// How filter memory is split across levels: uniform (one ε for every table) or monkey
    /// (each level's ε proportional to its keys: the fewest wasted reads per absent lookup
    /// when every level is probed)
    /// [default: the store's; uniform for a new store; monkey with --bits-per-key]
    #[arg(long, global = true, value_name = "HOW", value_parser = parse_allocation)]
    pub allocation: Option<Allocation>,
    /// Block compression of the tables this command writes (flushes, compactions): none,
    /// lz4 or zstd [default: lz4]. Before the command only (`export --compression` is the Parquet
    /// files' codec)
    #[arg(long, value_name = "HOW", value_parser = parse_compression)]
    pub compression: Option<Compression>,
    /// Bits per key of the range filters of the tables this command writes (flushes,
    /// compactions), from 3 to 40, or 0 for none: a scan skips a table whose range filter
    /// rules the range out, without a read. With `refilter`: rebuild, add (or, with 0,
    /// remove) every table's range filter at B [default: 16]
    #[arg(long, global = true, value_name = "B", value_parser = parse_range_bits)]
    pub range_bits: Option<f64>,
    /// Open the store read-only, beside a process that may be writing it (`get`, `scan`,
    /// `stats`, `verify`): no lock is taken and nothing is written; it sees what the
    /// writer's manifest and logs hold now (not writes held in a writer's user-space
    /// buffer). Commands that write fail with exit 2
    #[arg(long, global = true)]
    pub read_only: bool,
    /// The keyspace every data command reads and writes (created by a command that writes,
    /// with the options given; `keyspaces` lists them) [default: the default keyspace]
    #[arg(long, global = true, value_name = "NAME")]
    pub keyspace: Option<String>,
}

/// How a bits-per-key budget is split across levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// Monkey: ε of each run proportional to its keys.
    Monkey,
    /// The same ε for every table.
    Uniform,
}

impl Allocation {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Allocation::Monkey => "monkey",
            Allocation::Uniform => "uniform",
        }
    }

    /// The policy spending `bits_per_key` on filters of `kind` this way.
    pub fn policy(self, kind: FilterKind, bits_per_key: f64) -> FilterPolicy {
        match self {
            Allocation::Monkey => FilterPolicy::Budget { kind, bits_per_key },
            Allocation::Uniform => FilterPolicy::uniform_at_bits(kind, bits_per_key),
        }
    }

    /// The policy spending on filters of `kind` the memory `fpr` on every table takes.
    pub fn policy_at_fpr(self, kind: FilterKind, fpr: f64) -> FilterPolicy {
        match self {
            Allocation::Monkey => FilterPolicy::monkey_at(kind, fpr),
            Allocation::Uniform => FilterPolicy::Uniform { kind, fpr },
        }
    }
}

pub(crate) fn parse_allocation(s: &str) -> Result<Allocation, String> {
    match s {
        "monkey" => Ok(Allocation::Monkey),
        "uniform" => Ok(Allocation::Uniform),
        _ => Err("expected monkey or uniform".into()),
    }
}

pub(crate) fn parse_bits(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(b) if (0.0..=64.0).contains(&b) => Ok(b),
        _ => Err("give a number of bits per key from 0 to 64".into()),
    }
}

pub(crate) fn parse_range_bits(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(b) if b == 0.0 || (3.0..=40.0).contains(&b) => Ok(b),
        _ => Err("give 0 (no range filter) or a number of bits per key from 3 to 40".into()),
    }
}

pub(crate) fn parse_filter(s: &str) -> Result<FilterKind, String> {
    s.parse::<FilterKind>().map_err(|_| {
        let valid: Vec<&str> = FilterKind::ALL.iter().map(|k| k.name()).collect();
        format!(
            "unknown filter kind; valid kinds: {}, global (one key-to-run filter for the whole store)",
            valid.join(", ")
        )
    })
}

pub(crate) fn parse_compression(s: &str) -> Result<Compression, String> {
    let c = s.parse::<Compression>().map_err(|_| {
        let valid: Vec<&str> = Compression::ALL.iter().map(|c| c.name()).collect();
        format!("unknown compression; valid choices: {}", valid.join(", "))
    })?;
    c.check_available().map_err(|e| match e {
        filterstore::Error::InvalidArgument(why) => why,
        other => other.to_string(),
    })?;
    Ok(c)
}

pub(crate) fn parse_fpr(s: &str) -> Result<f64, String> {
    let f: f64 = s
        .trim()
        .parse()
        .map_err(|_| "not a number; give a rate strictly between 0 and 1".to_string())?;
    check_fpr(f).map_err(|_| "must be strictly between 0 and 1 (exclusive)".to_string())?;
    Ok(f)
}

/// Runs one subcommand.
pub trait Run {
    /// Does the work; the returned [`Exit`] becomes the process's exit code.
    fn run(self, global: &Global) -> Result<Exit, CliError>;
}

impl<T: Run> Run for Box<T> {
    fn run(self, global: &Global) -> Result<Exit, CliError> {
        (*self).run(global)
    }
}

/// Declares the subcommand enum and its dispatch from one list (an attribute such as `cfg`
/// applies to both).
macro_rules! commands {
    ($($(#[$meta:meta])* $variant:ident($ty:ty),)*) => {
        /// The subcommands.
        #[derive(Subcommand, Debug)]
        pub enum Command {
            $($(#[$meta])* $variant($ty),)*
        }

        impl Command {
            /// Runs the chosen subcommand.
            pub fn run(self, global: &Global) -> Result<Exit, CliError> {
                match self {
                    $($(#[$meta])* Command::$variant(c) => Run::run(c, global),)*
                }
            }
        }
    };
}

commands! {
    Put(kv::Put),
    Get(kv::Get),
    Delete(kv::Delete),
    DeleteRange(kv::DeleteRange),
    Scan(scan::Scan),
    Load(load::Load),
    Flush(maintain::Flush),
    Compact(maintain::Compact),
    Refilter(maintain::Refilter),
    Checkpoint(maintain::Checkpoint),
    Keyspaces(keyspace::Keyspaces),
    DropKeyspace(keyspace::DropKeyspace),
    Stats(stats::Stats),
    Verify(verify::Verify),
    Repair(repair::Repair),
    Stress(stress::Stress),
    #[cfg(feature = "parquet")]
    Export(export::Export),
    #[cfg(feature = "parquet")]
    Import(import::Import),
    Bench(Box<bench::Bench>),
    Hyphenate(hyphenate::Hyphenate),
}

/// The process's exit codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: success.
    Success = 0,
    /// 1: `get` found no such key.
    NotFound = 1,
    /// 2: usage or I/O error (including a missing or locked store, malformed input), an
    /// unsupported feature, an allocation that failed: every library error but corruption.
    Usage = 2,
    /// 3: corruption detected.
    Corrupt = 3,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

/// An error that ends the command, with the exit code it maps to.
#[derive(Debug)]
pub struct CliError {
    /// The exit code.
    pub code: Exit,
    /// One line for stderr.
    pub message: String,
    /// True when nothing should be printed (stdout closed under us).
    pub quiet: bool,
}

impl CliError {
    /// A usage-class error (exit 2) with `message`.
    pub fn usage(message: impl fmt::Display) -> Self {
        CliError {
            code: Exit::Usage,
            message: message.to_string(),
            quiet: false,
        }
    }

    /// Prefixes the message with what was being done.
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

/// The error's message followed by its sources, `: `-separated.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        let m = x.to_string();
        if !s.ends_with(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        src = x.source();
    }
    s
}

impl CliError {
    /// The exit code and message of a library error: corruption is 3, the rest 2.
    pub fn from_ref(e: &filterstore::Error) -> Self {
        CliError {
            code: if e.is_corruption() {
                Exit::Corrupt
            } else {
                Exit::Usage
            },
            message: error_chain(e),
            quiet: false,
        }
    }
}

impl From<filterstore::Error> for CliError {
    fn from(e: filterstore::Error) -> Self {
        CliError::from_ref(&e)
    }
}

impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        CliError {
            code: Exit::Usage,
            quiet: e.kind() == io::ErrorKind::BrokenPipe,
            message: format!("I/O error: {}", error_chain(&e)),
        }
    }
}

/// How a command opens the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The store must exist; it is only read: no compaction starts in the background (a
    /// command that reads one key would otherwise begin a merge and abandon it at exit).
    Read,
    /// The store must exist; nothing is created when it does not.
    Existing,
    /// The store (and its directory) is created when missing; every write is fsynced.
    Write,
    /// Like `Write`, but writes are fsynced only by an explicit `sync`/`flush` (bulk loads).
    BulkWrite,
}

impl Global {
    /// The store directory: --dir, else $FILTERSTORE_DIR (both via clap), else the default.
    pub fn dir(&self) -> PathBuf {
        self.dir
            .clone()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("./filterstore-data"))
    }

    /// The filter kind of this command: --filter, else the store's default (chosen at
    /// creation), else the default of a new store.
    pub fn kind(&self) -> FilterKind {
        self.filter.unwrap_or_else(|| {
            stored_default_filter(&self.dir())
                .ok()
                .flatten()
                .unwrap_or(filterstore::store::DEFAULT_FILTER)
        })
    }

    /// The policy --bits-per-key and --allocation give, if either was given: B bits per key
    /// (monkey unless told otherwise), or the allocation at the memory of --fpr (else the
    /// store's ε, else a new store's).
    pub fn policy(&self) -> Option<FilterPolicy> {
        if let Some(b) = self.bits_per_key {
            let how = self.allocation.unwrap_or(Allocation::Monkey);
            return Some(how.policy(self.kind(), b));
        }
        let how = self.allocation?;
        let fpr = self.fpr.unwrap_or_else(|| {
            stored_policy(&self.dir())
                .ok()
                .flatten()
                .map_or(filterstore::store::DEFAULT_FPR, |p| p.fpr())
        });
        Some(how.policy_at_fpr(self.kind(), fpr))
    }

    /// Opens the store as `access` says, with this command's filter choice.
    pub fn open(&self, access: Access) -> Result<Store, CliError> {
        let dir = self.dir();
        if matches!(access, Access::Existing | Access::Read) || self.read_only {
            require_store(&dir)?;
        }
        let store = if self.read_only {
            Store::open_read_only(&dir).map_err(|e| {
                CliError::from(e).context(format_args!("cannot open store {}", dir.display()))
            })?
        } else {
            self.open_writer(&dir, access)?
        };
        let Some(name) = &self.keyspace else {
            return Ok(store);
        };
        let ks = match access {
            // On a read-only store: the keyspace if it exists, else a refused write.
            Access::Write | Access::BulkWrite => {
                let o = KeyspaceOptions::default();
                let o = match self.filter {
                    Some(k) => o.filter(k),
                    None => o,
                };
                let o = match self.fpr {
                    Some(f) => o.fpr(f),
                    None => o,
                };
                store.keyspace_with(name, o)?
            }
            _ => store.existing_keyspace(name).ok_or_else(|| {
                CliError::usage(format_args!(
                    "no keyspace named {name:?} in {}",
                    dir.display()
                ))
            })?,
        };
        Ok(ks.as_store().clone())
    }

    /// Opens the store in `dir` for writing as `access` says (read-only handles aside).
    fn open_writer(&self, dir: &Path, access: Access) -> Result<Store, CliError> {
        let defaults = Options::default();
        let opts = Options::default()
            .filter(self.filter)
            .fpr(self.fpr)
            .policy(self.policy())
            .sync(if access == Access::BulkWrite {
                SyncPolicy::OnFlush
            } else {
                SyncPolicy::EveryWrite
            })
            .create_if_missing(matches!(access, Access::Write | Access::BulkWrite))
            .compaction_trigger(if access == Access::Read {
                None
            } else {
                defaults.compaction_trigger
            })
            .compression(self.compression.unwrap_or(defaults.compression))
            .range_filter_bits(self.range_bits.unwrap_or(defaults.range_filter_bits));
        let store = Store::open(dir, opts).map_err(|e| {
            CliError::from(e).context(format_args!("cannot open store {}", dir.display()))
        })?;
        // A torn tail is the write in flight at a crash, never acknowledged: dropping it is
        // no error, but the user hears of it (once: opening rewrote the logs).
        for w in store.dropped_at_open() {
            eprintln!("store: warning: {w} at open");
        }
        Ok(store)
    }
}

/// Runs the compactions a write command left due, so that the store it leaves behind is in
/// shape (at most `compaction_trigger` L0 tables): a command-line process ends before
/// background work would finish. Quiet, and a no-op when nothing is due.
pub fn settle(store: &Store) -> Result<(), CliError> {
    store.wait_for_compaction()?;
    Ok(())
}

/// Fails (exit 2) unless `dir` is an existing directory holding a store (a MANIFEST, or
/// data files, which opening then reports as damaged); creates nothing.
pub fn require_store(dir: &Path) -> Result<(), CliError> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {
            if dir.join(MANIFEST_NAME).exists() || has_data_files(dir) {
                Ok(())
            } else {
                Err(CliError::usage(format_args!(
                    "no store at {} (the directory holds no MANIFEST)",
                    dir.display()
                )))
            }
        }
        Ok(_) => Err(CliError::usage(format_args!(
            "{} exists and is not a directory",
            dir.display()
        ))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(CliError::usage(format_args!(
            "no store at {} (the directory does not exist; `store put`, `delete` or `load` \
             create one; see --dir and FILTERSTORE_DIR)",
            dir.display()
        ))),
        Err(e) => Err(CliError::from(filterstore::Error::io(dir, e))),
    }
}

/// A rate for people and JSON alike: plain decimals down to 1e-4, exponent form below
/// (`0.01`, `1e-9`), so tiny rates do not print hundreds of zeros; four significant digits.
pub fn rate(x: f64) -> String {
    // Four significant digits: an ε computed by an allocation (0.009999999999999943) reads
    // as the 0.01 it stands for.
    let x: f64 = format!("{x:.3e}").parse().unwrap_or(x);
    if x == 0.0 || x.abs() >= 1e-4 {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// Buffered, locked stdout; remember to `flush` it (errors become exit 2).
pub fn stdout() -> io::BufWriter<io::StdoutLock<'static>> {
    io::BufWriter::with_capacity(64 << 10, io::stdout().lock())
}

/// Writes `s` and a newline to stdout.
pub fn println(s: impl fmt::Display) -> Result<(), CliError> {
    let mut out = io::stdout().lock();
    writeln!(out, "{s}")?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::rate;

    #[test]
    fn rates_print_four_significant_digits() {
        assert_eq!(rate(0.009999999999999943), "0.01");
        assert_eq!(rate(0.005103812158229222), "0.005104");
        assert_eq!(rate(0.01), "0.01");
        assert_eq!(rate(0.0), "0");
        assert_eq!(rate(1e-9), "1e-9");
        assert_eq!(rate(1.2345678e-7), "1.235e-7");
    }
}
