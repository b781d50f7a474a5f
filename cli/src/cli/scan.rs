//! `scan`: keys in order, optionally limited to a prefix and a range.

use std::io::Write;
use std::ops::Bound;

use clap::Args;

use super::{stdout, Access, CliError, Exit, Global, Run};

/// Print `KEY<TAB>VALUE` lines in key order (raw bytes, one line per key).
///
/// --prefix, --from and --to combine (the intersection): --from is inclusive, --to
/// exclusive. --reverse prints the same range from its last key down, so `--reverse --limit
/// N` gives the N largest keys of the range. Keys and values are written as stored: a tab or
/// newline inside one is not escaped.
#[derive(Args, Debug)]
pub struct Scan {
    /// Only keys that start with P
    #[arg(long, value_name = "P")]
    pub prefix: Option<String>,
    /// Only keys >= K
    #[arg(long, value_name = "K")]
    pub from: Option<String>,
    /// Only keys < K
    #[arg(long, value_name = "K")]
    pub to: Option<String>,
    /// At most N lines
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Descending key order: from the range's last key down (streamed, as forward)
    #[arg(long)]
    pub reverse: bool,
}

impl Run for Scan {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        let store = g.open(Access::Read)?;
        // Start: the larger of prefix and --from (both inclusive).
        let start: Option<Vec<u8>> = [self.prefix.as_deref(), self.from.as_deref()]
            .into_iter()
            .flatten()
            .map(|s| s.as_bytes().to_vec())
            .max();
        // End: the smaller of the prefix's end and --to (both exclusive).
        let end: Option<Vec<u8>> = [
            self.prefix
                .as_deref()
                .and_then(|p| filterstore::store::prefix_successor(p.as_bytes())),
            self.to.as_deref().map(|s| s.as_bytes().to_vec()),
        ]
        .into_iter()
        .flatten()
        .min();
        if let (Some(s), Some(e)) = (&start, &end) {
            if s >= e {
                return Ok(Exit::Success); // an empty range
            }
        }
        let start = start.map_or(Bound::Unbounded, Bound::Included);
        let end = end.map_or(Bound::Unbounded, Bound::Excluded);
        let mut out = stdout();
        let limit = usize::try_from(self.limit.unwrap_or(u64::MAX)).unwrap_or(usize::MAX);
        let scan = store.scan::<Vec<u8>>((start, end));
        let items: Box<dyn Iterator<Item = _>> = if self.reverse {
            Box::new(scan.rev())
        } else {
            Box::new(scan)
        };
        for item in items.take(limit) {
            let (k, v) = item?;
            out.write_all(&k)?;
            out.write_all(b"\t")?;
            out.write_all(&v)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        Ok(Exit::Success)
    }
}
